"""End to end on the real components: build → no-op rebuild → test → release to the local index → install → verify.

Slow (compiles the host target's wheels cold, tests them on every tested CPython present, creates venvs) but
run by `nox -s ci`. One flow, so each wheel is compiled and tested once: the release reuses the cells the first
build made and the core's test record, which is itself what is checked of the release's reuse. It works in its
own dist/work folders and signing config, never creates git tags (--no-tag) and stops the index it started.
Every wheel the host target builds is released; each published wheel is then installed from the index into a
fresh venv (dependencies such as numpy come from PyPI), a model is run, and the installed files are checked to
be exactly the verified published bytes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.catalog.server import stop_catalog_server
from pipeline.cli import main
from pipeline.hashing import sha256_file
from pipeline.index import running_index, stop_local_index
from pipeline.records import records_for_wheel
from pipeline.toolchains import zig_cache_environment
from pipeline.wheeltest import clean_env

from .conftest import REPO

pytestmark = pytest.mark.slow

# cryptography first: conan installs an import hook without find_spec, and a later first import of
# cryptography (probing for the optional bcrypt) would turn that into an ImportWarning (= error here).
pytest.importorskip("cryptography.hazmat.primitives.serialization")
for _module in ("build", "scikit_build_core", "auditwheel", "conans", "virtualenv", "pypiserver", "twine"):
    pytest.importorskip(_module, reason="build and release tools are installed by `nox -s ci`")

MODEL_RUN = """
import sys, numpy as np, onnx, mosaicrt
from onnx import TensorProto, helper
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
providers = [p for p in mosaicrt.get_available_providers() if p == sys.argv[1]] or None
sess = mosaicrt.InferenceSession(model.SerializeToString(), providers=providers)
(out,) = sess.run(None, {"x": np.array([[-1, 2, -3], [4, -5, 6]], np.float32)})
assert out.tolist() == [[0, 2, 0], [4, 0, 6]], out
print("model ok on", [a.provider for a in sess.get_node_assignments()], mosaicrt.__file__)
"""


# Runs in a venv holding only mosaicrt-winml (and numpy, its dependency): the oneDNN EP arrives from the catalog.
WINML_RUN = """
import sys, numpy as np, mosaicrt
model, expect_download = sys.argv[1], sys.argv[2] == "download"
x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
assert "DnnlExecutionProvider" not in mosaicrt.get_available_providers()
sess = mosaicrt.InferenceSession(model, providers=["DnnlExecutionProvider", "CPUExecutionProvider"])
used = sorted({a.provider for a in sess.get_node_assignments()})
assert "DnnlExecutionProvider" in used, used
got = sess.run(None, {"input": x})[0]
want = mosaicrt.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
lib = mosaicrt.get_registered_execution_provider_libraries()["dnnl"]
print("winml ok", used, lib)
"""


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    folder = REPO / "build" / "e2e-release"  # same depth as build/pipeline: ccache hits are shared
    shutil.rmtree(folder, ignore_errors=True)
    monkeypatch.setenv("CCACHE_DIR", str(REPO / "build" / "pipeline" / "ccache"))
    monkeypatch.setenv("MOSAICRT_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("MOSAICRT_SIGNING_KEY", raising=False)
    yield folder
    stop_local_index(folder / "index")
    stop_catalog_server(folder / "catalog")


def test_build_test_release_install_and_verify(tmp_path: Path, work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dist = tmp_path / "dist"
    common = ["--dist-dir", str(dist), "--work-dir", str(work)]
    core_wheel = _build_noop_and_test_the_core(dist, work, capsys)
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    core_record = records_for_wheel(work / "records" / "tests", core_wheel)[python]
    (work / "reports" / "build-report.json").unlink()  # the release's build step writes its own

    rc = main(["release", *common, "--no-tag"])
    out, err = capsys.readouterr()
    assert rc == 0, out[-3000:] + err
    # the release reused the first build's cells and the core's test record: nothing was compiled or run again
    cells = json.loads((work / "reports" / "build-report.json").read_text())["cells"]
    assert "built" not in {c["status"] for c in cells}, cells
    assert sha256_file(core_wheel) == next(c["sha256"] for c in cells if c["cell"] == "core/default/linux-x86_64")
    assert records_for_wheel(work / "records" / "tests", core_wheel)[python] == core_record
    assert "pip install --index-url http://127.0.0.1:" in out
    report = json.loads((work / "reports" / "release-report.json").read_text())
    released = {row["wheel"]: row for row in report["rows"]}
    assert any(name.startswith("mosaicrt-") for name in released)
    assert {row["status"] for row in released.values()} == {"uploaded"}
    idx = running_index(work / "index")
    assert idx is not None

    # a second run is a no-op
    assert main(["release", *common, "--no-tag"]) == 0
    assert "already published" in capsys.readouterr().out

    # a consumer: fresh venv, install by name from the index, run a model
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "virtualenv", "-q", str(venv)], check=True, env=clean_env())
    py = str(venv / "bin" / "python")
    # what a CPU user installs: the core and the oneDNN EP where this target has it (the CUDA EP's
    # NVIDIA runtime wheels are large and it needs a GPU; it is verified from the index below)
    pins = sorted({f"{name.split('-')[0].replace('_', '-')}=={name.split('-')[1]}" for name in released
                   if name.startswith(("mosaicrt-", "mosaicrt_ep_dnnl-"))})
    with_dnnl = any(p.startswith("mosaicrt-ep-dnnl==") for p in pins)
    pip_report = tmp_path / "pip-report.json"
    subprocess.run(
        [py, "-m", "pip", "install", "-q", "--index-url", idx.simple_url, "--extra-index-url",
         "https://pypi.org/simple/", "--report", str(pip_report), *pins, "onnx"],
        check=True, env=clean_env(),
    )  # fmt: skip
    run = subprocess.run([py, "-c", MODEL_RUN, "DnnlExecutionProvider"], capture_output=True, text=True,
                         env=clean_env(), cwd=tmp_path, check=False)  # fmt: skip
    assert run.returncode == 0 and "model ok" in run.stdout, run.stdout + run.stderr
    if with_dnnl:  # found through its entry point, no registration call, and it ran the node
        assert "['DnnlExecutionProvider']" in run.stdout, run.stdout

    # what pip installed is exactly what was released and verified
    installed = {
        item["download_info"]["url"].rsplit("/", 1)[-1].split("#")[0]: item["download_info"]["archive_info"]["hashes"]
        for item in json.loads(pip_report.read_text())["install"]
    }
    for name, row in released.items():
        if name in installed:
            assert installed[name]["sha256"] == row["sha256"]
    assert any(name.startswith("mosaicrt-") for name in installed)

    if with_dnnl:
        _500_processes_exit_mid_run(py, tmp_path)
        _winml_downloads_dnnl_from_the_catalog(tmp_path, report, idx.simple_url, work)

    assert main(["verify", idx.simple_url]) == 0
    out = capsys.readouterr().out
    assert out.count("OK ") == len(released), out
    wheel = next(p for p in (dist).rglob("mosaicrt-*.whl"))
    modified = tmp_path / "modified" / wheel.name
    modified.parent.mkdir()
    data = bytearray(wheel.read_bytes())
    data[len(data) // 3] ^= 0x01
    modified.write_bytes(bytes(data))
    shutil.copy(work / "release" / "staging" / (wheel.name + ".asc"), modified.parent)
    assert main(["verify", str(modified)]) != 0
    assert "REJECTED" in capsys.readouterr().out


def _build_noop_and_test_the_core(dist: Path, work: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """Every host cell built cold, each with its own VERSION; a second build is a no-op; the core wheel's test
    record is bound to its sha256 (and a tampered copy has none)."""
    common = ["--dist-dir", str(dist), "--work-dir", str(work)]
    zig_cache = Path(zig_cache_environment(REPO, dict(os.environ))["ZIG_GLOBAL_CACHE_DIR"])
    started = time.time()
    t0 = time.monotonic()
    assert main(["build", *common]) == 0, capsys.readouterr().out[-3000:]
    cold = time.monotonic() - t0
    # the host cells share one zig target: zig built its libc++ for it at most once (none when cached), which
    # it does not when some links strip and others do not (pipeline/toolchains.py: cmake_defines)
    libcxx = [p for p in zig_cache.glob("o/*/libc++.a") if p.stat().st_mtime >= started]
    assert len(libcxx) <= 1, f"zig built libc++ {len(libcxx)} times in one build: {libcxx}"
    wheels = sorted((dist / "linux-x86_64").glob("*.whl"))
    cells = json.loads((work / "reports" / "build-report.json").read_text())["cells"]
    built = [c for c in cells if c["status"] == "built"]
    assert sorted(Path(c["wheel"]).name for c in built) == [w.name for w in wheels]
    for c in built:
        path = REPO / ("core" if c["component"] == "core" else f"eps/{c['component']}") / "VERSION"
        assert c["version"] == path.read_text().strip() and f"-{c['version']}-" in Path(c["wheel"]).name
    wheel = next(w for w in wheels if w.name.startswith("mosaicrt-"))
    version = (REPO / "core" / "VERSION").read_text().strip()
    assert re.fullmatch(rf"mosaicrt-{re.escape(version)}-py3-none-manylinux_\d+_\d+_x86_64\.whl", wheel.name)
    assert wheel.stat().st_size < 3_500_000

    t0 = time.monotonic()
    assert main(["build", *common]) == 0
    noop = time.monotonic() - t0
    report = json.loads((work / "reports" / "build-report.json").read_text())
    assert {c["status"] for c in report["cells"] if c["status"] != "skipped"} == {"up-to-date"}, report["cells"]
    core = next(c for c in report["cells"] if c["cell"] == "core/default/linux-x86_64")
    assert core["sha256"] == sha256_file(wheel)
    assert noop < 5.0, f"no-op build took {noop:.1f}s (cold {cold:.1f}s)"
    capsys.readouterr()

    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    rc = main(["test", *common, "--python", python, "--wheel", str(wheel)])
    out = capsys.readouterr().out
    records = records_for_wheel(work / "records" / "tests", wheel)
    assert python in records, out
    rec = records[python]
    assert rec.sha256 == sha256_file(wheel)
    assert rec.counts.tests > 0
    assert rec.outcome == "passed" and rc == 0, f"wheel suite failed: {rec.counts} (log {rec.log})"
    tampered = work / "tampered" / wheel.name
    tampered.parent.mkdir(parents=True, exist_ok=True)
    data = bytearray(wheel.read_bytes())
    data[len(data) // 2] ^= 0xFF
    tampered.write_bytes(bytes(data))
    assert records_for_wheel(work / "records" / "tests", tampered) == {}
    return wheel


def _winml_downloads_dnnl_from_the_catalog(tmp_path: Path, report: dict[str, object], index: str, work: Path) -> None:
    """A fresh venv with only mosaicrt-winml: the session asks for the oneDNN EP, which is downloaded from the
    release's catalog, verified, registered and run (matching the CPU EP); a second process with the catalog
    server stopped uses the cache."""
    url = report["catalog_url"]
    assert isinstance(url, str) and url.startswith("http://127.0.0.1:")
    targets = report["catalog_targets"]
    assert isinstance(targets, list)
    dnnl = [t for t in targets if t["ep_name"] == "DnnlExecutionProvider"]
    assert dnnl and dnnl[0]["path"].startswith("certified/DnnlExecutionProvider/")
    winml = [row for row in report["rows"] if row["wheel"].startswith("mosaicrt_winml-")]  # type: ignore[attr-defined]
    assert winml, report["rows"]
    model = tmp_path / "resnet.onnx"  # made in a child: pypiserver's import hook is in this process now
    make = (f"import sys; sys.path.insert(0, {str(REPO / 'tests' / 'eps' / 'dnnl')!r}); from resnet_model import"
            f" resnet_small; open({str(model)!r}, 'wb').write(resnet_small().SerializeToString())")
    subprocess.run([sys.executable, "-c", make], check=True)
    venv = tmp_path / "winml-venv"
    subprocess.run([sys.executable, "-m", "virtualenv", "-q", str(venv)], check=True, env=clean_env())
    py = str(venv / "bin" / "python")
    version = winml[0]["wheel"].split("-")[1]
    subprocess.run([py, "-m", "pip", "install", "-q", "--index-url", index, "--extra-index-url",
                    "https://pypi.org/simple/", f"mosaicrt-winml=={version}"], check=True, env=clean_env())  # fmt: skip
    listed = subprocess.run([py, "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True,
                            env=clean_env(), check=True).stdout  # fmt: skip
    assert "mosaicrt-ep-dnnl" not in listed and "onednn" not in listed, listed
    env = clean_env({"MOSAICRT_DYNAMIC_EP_DOWNLOAD": "1", "MOSAICRT_EP_CATALOG_URL": url,
                     "MOSAICRT_EP_CATALOG_CACHE": str(tmp_path / "ep-cache")})  # fmt: skip
    first = subprocess.run([py, "-c", WINML_RUN, str(model), "download"], capture_output=True, text=True, env=env,
                           cwd=tmp_path, check=False)  # fmt: skip
    assert first.returncode == 0 and "winml ok" in first.stdout, first.stdout + first.stderr
    assert str(tmp_path / "ep-cache") in first.stdout  # the EP library was loaded from the verified cache
    assert stop_catalog_server(work / "catalog")
    second = subprocess.run([py, "-W", "ignore::RuntimeWarning", "-c", WINML_RUN, str(model), "cache"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, check=False)  # fmt: skip
    assert second.returncode == 0 and "winml ok" in second.stdout, second.stdout + second.stderr


def _500_processes_exit_mid_run(py: str, tmp_path: Path) -> None:
    """The shutdown stress at full size, once per CI run: 500 processes that load the core and every installed
    EP (here the oneDNN EP, from the index) exit mid-run — status, no hang, nothing on stderr — and the exit
    gate's test (a test EP's kernel in flight at exit) against the released core."""
    subprocess.run([py, "-m", "pip", "install", "-q", "pytest>=8"], check=True, env=clean_env())
    suite = REPO / "tests" / "wheel"
    run = subprocess.run(
        [py, "-m", "pytest", "-c", str(suite / "pytest.ini"), "--rootdir", str(suite), "-q", "-p", "no:cacheprovider",
         str(suite / "test_shutdown.py")],
        capture_output=True, text=True, env=clean_env({"MOSAICRT_SHUTDOWN_PROCESSES": "500"}), cwd=tmp_path,
        check=False,
    )  # fmt: skip
    # every test of the file ran (the stress and the exit gate with a test EP) and none was skipped
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    assert run.returncode == 0 and " passed" in summary and "skipped" not in summary, (
        run.stdout[-3000:] + run.stderr[-2000:])
