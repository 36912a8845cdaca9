"""End to end release on the real components: build → test → release to the local index → install → verify.

Slow (compiles the host target's wheels, tests them on every tested CPython present, creates venvs) but run
by `nox -s ci`. It works in its own dist/work folders and signing config, never creates git tags (--no-tag)
and stops the index it started. Every wheel the host target builds is released; each published wheel is then
installed from the index into a fresh venv (dependencies such as numpy come from PyPI), a model is run, and
the installed files are checked to be exactly the verified published bytes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.index import running_index, stop_local_index
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


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    folder = REPO / "build" / "e2e-release"  # same depth as build/pipeline: ccache hits are shared
    shutil.rmtree(folder, ignore_errors=True)
    monkeypatch.setenv("CCACHE_DIR", str(REPO / "build" / "pipeline" / "ccache"))
    monkeypatch.setenv("MOSAICRT_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("MOSAICRT_SIGNING_KEY", raising=False)
    yield folder
    stop_local_index(folder / "index")


def test_release_install_and_verify(tmp_path: Path, work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dist = tmp_path / "dist"
    common = ["--dist-dir", str(dist), "--work-dir", str(work)]
    rc = main(["release", *common, "--no-tag"])
    out, err = capsys.readouterr()
    assert rc == 0, out[-3000:] + err
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
