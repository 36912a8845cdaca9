"""Wheel tests of cross wheels under qemu-user (pipeline.emulated).

The fast tests check how the sysroot spec, the emulated venv, its launcher, the suite command and
its environment are formed, the stamp cache, and the plugin that skips modules needing an absent
oracle — without Debian packages or qemu. The slow tests build the linux-aarch64 / linux-armv7 core
wheels (ccache, cells under build/emulated-test), prepare their Debian sysroots (cached under
build/emulated-sysroots: a rerun does no network) and run the wheel suite under qemu-user.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from pipeline import emulated
from pipeline.emulated import Sysroot, SysrootSpec
from pipeline.errors import EnvironmentProblem
from pipeline.hashing import sha256_file
from pipeline.layout import Layout
from pipeline.matrix import load_matrix
from pipeline.records import Counts, TestRecord, records_for_sha, write_record
from pipeline.wheeltest import WheelSuite, suite_hash

from .conftest import REPO

MATRIX = load_matrix(REPO)
SUITE = REPO / "tests" / "wheel"
AARCH64_QEMU = ["qemu-aarch64", "-cpu", "max", "-L", "/usr/aarch64-linux-gnu"]


def _fake_wheel(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("mosaicrt/__init__.py", "__version__ = '0.1.0'\n")
        zf.writestr("mosaicrt/libmosaicrt.so", b"\x7fELF fake")
        zf.writestr("mosaicrt-0.1.0.data/purelib/mosaicrt_extra.py", "X = 1\n")
        zf.writestr("mosaicrt-0.1.0.data/scripts/tool", "#!/bin/sh\n")
        zf.writestr(
            "mosaicrt-0.1.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: mosaicrt\nVersion: 0.1.0\nRequires-Dist: numpy>=1.24\n"
            "Requires-Dist: rich; extra == 'cli'\n",
        )
        zf.writestr("mosaicrt-0.1.0.dist-info/RECORD", "")
    return path


def _fake_sysroot(tmp_path: Path, *, absent: dict[str, str] | None = None) -> Sysroot:
    base = tmp_path / "sysroots" / "arm64"
    (base / "root" / "usr" / "bin").mkdir(parents=True)
    (base / "root" / "usr" / "bin" / "python3.11").write_bytes(b"\x7fELF")
    (base / "site").mkdir()
    return Sysroot(
        arch="aarch64",
        base=base,
        root=base / "root",
        site=base / "site",
        python_full="3.11.2",
        multiarch="aarch64-linux-gnu",
        debs={"python3.11": "3.11.2-6+deb12u9"},
        wheels={"pytest": "9.2.0", "numpy": "2.4.6"},
        sources={"pytest": "pypi", "numpy": "pypi"},
        absent=absent or {},
    )


# ------------------------------------------------------------------------------ command forming


def test_emulator_command_points_L_at_the_sysroot() -> None:
    root = Path("/cache/arm64/root")
    assert emulated.emulator_command(AARCH64_QEMU, root) == ["qemu-aarch64", "-cpu", "max", "-L", str(root)]
    assert emulated.emulator_command(["qemu-arm"], root) == ["qemu-arm", "-L", str(root)]
    assert emulated.emulator_command(["qemu-arm", "-L/usr/arm-linux-gnueabihf"], root) == ["qemu-arm", f"-L{root}"]
    with pytest.raises(EnvironmentProblem, match="qemu-user"):
        emulated.emulator_command(["wine"], root)


def test_spec_from_the_matrix_targets() -> None:
    reqs = emulated.read_requirements(SUITE / "requirements.txt")
    spec = emulated.sysroot_spec(MATRIX.target("linux-aarch64"), requires=("numpy>=1.24",), suite_requirements=reqs)
    assert (spec.debian_arch, spec.multiarch) == ("arm64", "aarch64-linux-gnu")
    assert spec.pip_platforms[0] == "manylinux_2_36_aarch64"
    assert {"manylinux_2_17_aarch64", "manylinux2014_aarch64", "linux_aarch64"} <= set(spec.pip_platforms)
    assert [emulated.requirement_name(r) for r in spec.requires] == ["pytest", "numpy"]
    # everything else the suite lists is an oracle or a helper of one: installed where a wheel exists
    assert {emulated.requirement_name(r) for r in spec.oracles} == {
        emulated.requirement_name(line) for line in reqs
    } - {"pytest"}
    armv7 = emulated.sysroot_spec(MATRIX.target("linux-armv7"), requires=("numpy>=1.24",), suite_requirements=reqs)
    assert (armv7.debian_arch, armv7.multiarch, armv7.pip_platforms[-1]) == ("armhf", "arm-linux-gnueabihf",
                                                                             "linux_armv7l")
    assert armv7.key != spec.key
    with pytest.raises(EnvironmentProblem, match="no emulated CPython"):
        emulated.sysroot_spec(MATRIX.target("windows-x86_64"), requires=(), suite_requirements=reqs)


def test_wheel_requires_reads_unconditional_requirements(tmp_path: Path) -> None:
    assert emulated.wheel_requires(_fake_wheel(tmp_path / "w.whl")) == ("numpy>=1.24",)


def test_venv_launcher_and_wheel_unpacking(tmp_path: Path) -> None:
    sysroot = _fake_sysroot(tmp_path)
    wheel = _fake_wheel(tmp_path / "mosaicrt-0.1.0-py3-none-manylinux_2_28_aarch64.whl")
    venv = emulated.make_venv(tmp_path / "venv", sysroot, AARCH64_QEMU, [wheel])
    script = venv.python.read_text()
    assert script.startswith("#!/bin/sh\n") and os.access(venv.python, os.X_OK)
    assert (
        f"exec qemu-aarch64 -cpu max -L {sysroot.root} -0 {venv.python} {sysroot.python} \"$@\"" in script
    ), script
    assert "/usr/aarch64-linux-gnu" not in script
    cfg = (venv.path / "pyvenv.cfg").read_text()
    assert f"home = {sysroot.root}/usr/bin\n" in cfg and "include-system-site-packages = false" in cfg
    assert venv.site_packages == venv.path / "lib" / "python3.11" / "site-packages"
    assert (venv.site_packages / "_mosaicrt_test_deps.pth").read_text() == f"{sysroot.site}\n"
    assert (venv.site_packages / "mosaicrt" / "libmosaicrt.so").read_bytes() == b"\x7fELF fake"
    assert (venv.site_packages / "mosaicrt_extra.py").is_file()  # .data/purelib lands in site-packages
    assert not (venv.site_packages / "tool").exists()
    assert (venv.site_packages / "mosaicrt-0.1.0.dist-info" / "INSTALLER").is_file()
    # a second venv at the same place starts empty
    again = emulated.make_venv(tmp_path / "venv", sysroot, AARCH64_QEMU, [])
    assert not (again.site_packages / "mosaicrt").exists()


def test_compilers_on_the_venv_path_are_the_targets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests that build a library with `cc`/`c++` from PATH get the emulated arch's cross compiler."""
    sysroot = _fake_sysroot(tmp_path)
    tools = emulated.target_tools(MATRIX.target("linux-aarch64"))
    assert tools == {"cc": "aarch64-linux-gnu-gcc", "gcc": "aarch64-linux-gnu-gcc",
                     "c++": "aarch64-linux-gnu-g++", "g++": "aarch64-linux-gnu-g++"}
    host_bin = tmp_path / "host-bin"
    host_bin.mkdir()
    for program in set(tools.values()):
        (host_bin / program).write_text("#!/bin/sh\n")
        (host_bin / program).chmod(0o755)
    monkeypatch.setenv("PATH", f"{host_bin}{os.pathsep}{os.environ['PATH']}")
    venv = emulated.make_venv(tmp_path / "venv", sysroot, AARCH64_QEMU, [], tools=tools)
    bin_dir = venv.python.parent
    assert (bin_dir / "c++").resolve() == host_bin / "aarch64-linux-gnu-g++"
    assert (bin_dir / "cc").resolve() == host_bin / "aarch64-linux-gnu-gcc"
    env = emulated.suite_env(_fake_wheel(tmp_path / "w.whl"), sysroot, bin_dir=bin_dir)
    assert env["PATH"].split(os.pathsep)[:2] == [str(bin_dir), str(host_bin)]
    with pytest.raises(EnvironmentProblem, match="no-such-cross-gcc is not on PATH"):
        emulated.make_venv(tmp_path / "venv2", sysroot, AARCH64_QEMU, [], tools={"cc": "no-such-cross-gcc"})


def test_cpu_options() -> None:
    assert emulated.with_cpu_options(AARCH64_QEMU, "sme=off")[:3] == ["qemu-aarch64", "-cpu", "max,sme=off"]
    assert emulated.with_cpu_options(["qemu-aarch64", "-L", "/x"], "sve=off") == [
        "qemu-aarch64", "-cpu", "max,sve=off", "-L", "/x"]


def test_debian_numpy_adds_dist_packages(tmp_path: Path) -> None:
    sysroot = _fake_sysroot(tmp_path)
    debian = Sysroot(**{**sysroot.__dict__, "sources": {"pytest": "pypi", "numpy": "debian"}})
    assert debian.paths == (sysroot.site, sysroot.root / "usr" / "lib" / "python3" / "dist-packages")


def test_suite_command_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/work/main")
    monkeypatch.setenv("QEMU_LD_PREFIX", "/usr/aarch64-linux-gnu")
    monkeypatch.setenv("PIP_INDEX_URL", "file:///somewhere")
    sysroot = _fake_sysroot(tmp_path, absent={"onnx": "no wheel"})
    wheel = _fake_wheel(tmp_path / "mosaicrt-0.1.0-py3-none-manylinux_2_28_aarch64.whl")
    venv = emulated.make_venv(tmp_path / "venv", sysroot, AARCH64_QEMU, [wheel])
    junit = tmp_path / "j.xml"
    cmd = emulated.suite_command(venv, SUITE, junit)
    assert cmd[:4] == [str(venv.python), "-m", "pytest", str(SUITE)]
    for flag, value in (("-c", str(SUITE / "pytest.ini")), ("--rootdir", str(SUITE)), ("-p", "no:cacheprovider")):
        assert cmd[cmd.index(flag) + 1] == value
    assert cmd[cmd.index("no:cacheprovider") + 2] == emulated.ABSENT_PLUGIN
    assert f"--junitxml={junit}" in cmd and "-m" not in cmd[4:]
    assert emulated.suite_command(venv, SUITE, junit, markers="not slow")[-2:] == ["-m", "not slow"]
    env = emulated.suite_env(wheel, sysroot, {"CXX": "aarch64-linux-gnu-g++"})
    assert "PYTHONPATH" not in env and "QEMU_LD_PREFIX" not in env and "PIP_INDEX_URL" not in env
    assert env["MOSAICRT_TEST_WHEEL"] == str(wheel.resolve())
    assert env["MOSAICRT_TEST_WHEEL_SHA256"] == sha256_file(wheel)
    assert env["CXX"] == "aarch64-linux-gnu-g++"
    assert json.loads(env["MOSAICRT_ABSENT_ORACLES"]) == {"onnx": "no wheel"}
    assert env["MOSAICRT_SHUTDOWN_PROCESSES"] == str(emulated.EMULATED_SHUTDOWN_PROCESSES)  # bounded under qemu
    monkeypatch.setenv("MOSAICRT_SHUTDOWN_PROCESSES", "500")
    assert emulated.suite_env(wheel, sysroot)["MOSAICRT_SHUTDOWN_PROCESSES"] == "500"


def test_failed_tests_from_junit(tmp_path: Path) -> None:
    junit = tmp_path / "j.xml"
    junit.write_text(
        '<testsuites><testsuite tests="3" failures="1" errors="1" skipped="0">'
        '<testcase classname="test_a" name="test_ok"/>'
        '<testcase classname="test_a" name="test_bad[1]"><failure message="x"/></testcase>'
        '<testcase classname="test_b" name="test_err"><error message="y"/></testcase>'
        "</testsuite></testsuites>"
    )
    assert emulated.failed_tests(junit) == ["test_a::test_bad[1]", "test_b::test_err"]


def test_outcome_like_host_records() -> None:
    assert emulated.outcome_of(0, Counts(tests=5, skipped=1)) == ("passed", None)
    assert emulated.outcome_of(1, Counts(tests=5, failures=1)) == ("failed", "pytest exit 1")
    assert emulated.outcome_of(0, Counts(tests=5, errors=1))[0] == "failed"
    assert emulated.outcome_of(5, Counts()) == ("error", "no tests ran (pytest exit 5)")


# ---------------------------------------------------------------------------------- the sysroot


def _spec() -> SysrootSpec:
    return SysrootSpec(
        arch="aarch64",
        debian_arch="arm64",
        multiarch="aarch64-linux-gnu",
        pip_platforms=emulated.pip_platforms("aarch64"),
        requires=("pytest>=8", "numpy>=1.24"),
        oracles=("onnx>=1.16",),
    )


def _write_stamp(cache: Path, spec: SysrootSpec) -> None:
    base = cache / spec.debian_arch
    (base / "root" / "usr" / "bin").mkdir(parents=True)
    (base / "root" / "usr" / "bin" / "python3.11").write_bytes(b"\x7fELF")
    (base / "site").mkdir()
    _write_stamp_file(cache, spec)


def _write_stamp_file(cache: Path, spec: SysrootSpec) -> None:
    base = cache / spec.debian_arch
    stamp = {"key": spec.key, "python_full": "3.11.2", "debs": {"libc6": "2.36-9"}, "wheels": {"pytest": "9.2.0"},
             "sources": {"pytest": "pypi", "numpy": "debian"}, "absent": {"onnx": "no wheel"}}
    (base / "stamp.json").write_text(json.dumps(stamp))


def test_cached_sysroot_is_reused_without_running_anything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _spec()
    _write_stamp(tmp_path, spec)

    def no_subprocess(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"ran {args}")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    lines: list[str] = []
    sysroot = emulated.prepare_sysroot(spec, tmp_path, lines.append)
    assert sysroot.python_full == "3.11.2" and sysroot.absent == {"onnx": "no wheel"}
    assert sysroot.sources["numpy"] == "debian"
    assert lines and lines[0].startswith("[sysroot arm64] cached")


def test_a_changed_spec_invalidates_the_stamp(tmp_path: Path) -> None:
    spec = _spec()
    _write_stamp(tmp_path, spec)
    assert emulated.load_sysroot(spec, tmp_path) is not None
    changed = SysrootSpec(**{**spec.__dict__, "oracles": ("onnx>=1.17",)})
    assert emulated.load_sysroot(changed, tmp_path) is None
    stamp = tmp_path / "arm64" / "stamp.json"
    stamp.write_text(json.dumps({"key": spec.key, "debs": []}))
    assert emulated.load_sysroot(spec, tmp_path) is None  # an incomplete stamp is not trusted
    _write_stamp_file(tmp_path, spec)
    (tmp_path / "arm64" / "root" / "usr" / "bin" / "python3.11").unlink()
    assert emulated.load_sysroot(spec, tmp_path) is None  # a damaged sysroot is made again


def test_not_root_says_the_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_run(cmd: list[str], **kwargs: object) -> tuple[int, str]:
        assert cmd == ["dpkg", "--print-foreign-architectures"], cmd
        return 0, "i386\n"

    monkeypatch.setattr(emulated.sysroot, "run_command", fake_run)
    monkeypatch.setattr(emulated.sysroot, "is_root", lambda: False)
    with pytest.raises(EnvironmentProblem) as info:
        emulated.prepare_sysroot(_spec(), tmp_path, lambda line: None)
    assert "sudo dpkg --add-architecture arm64 && sudo apt-get -o DPkg::Lock::Timeout=600 update" in str(info.value)


def test_a_passing_record_of_the_same_bytes_and_suite_is_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_subprocess(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"ran {args}")

    layout = Layout(root=REPO, dist=tmp_path / "dist", work=tmp_path / "work")
    wheel = _fake_wheel(tmp_path / "mosaicrt-0.1.0-py3-none-manylinux_2_28_aarch64.whl")
    target = MATRIX.target("linux-aarch64")
    record = TestRecord(wheel=wheel.name, sha256=sha256_file(wheel), outcome="passed", python="3.11",
                        python_full="3.11.2", platform="linux-aarch64", counts=Counts(tests=3),
                        suite_hash=suite_hash(REPO, WheelSuite()), created="2026-01-01T00:00:00+00:00", duration_s=1.0)
    write_record(layout.records, record)
    monkeypatch.setattr(subprocess, "run", no_subprocess)
    lines: list[str] = []
    assert emulated.run_emulated(wheel, target, layout, say=lines.append) == (record, False)
    assert "up to date" in lines[0]
    # another suite hash (or force) means the wheel is tested again: here that reaches the toolchain step
    write_record(layout.records, TestRecord(**{**record.__dict__, "suite_hash": "old"}))
    monkeypatch.setattr(emulated.suite, "ensure_toolchains",
                        lambda targets, say: (_ for _ in ()).throw(RuntimeError("ran")))  # fmt: skip
    with pytest.raises(RuntimeError, match="ran"):
        emulated.run_emulated(wheel, target, layout, say=lines.append)


# --------------------------------------------------------------------------- absent-oracle plugin


def test_plugin_skips_only_modules_that_need_an_absent_oracle(tmp_path: Path) -> None:
    """A real pytest run on this host: one module imports an absent oracle (skipped, with the
    recorded reason), one imports some other missing module (still a collection error), one passes."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n")
    (suite / "test_oracle.py").write_text("import absent_oracle.sub\n\ndef test_a():\n    pass\n")
    (suite / "test_broken.py").write_text("import not_an_oracle_xyz\n\ndef test_b():\n    pass\n")
    (suite / "test_fine.py").write_text("def test_c():\n    pass\n")
    # a module that skips itself (pytest.importorskip at import) is pytest's own business, never an error
    (suite / "test_selfskip.py").write_text(
        "import pytest\n\npytest.importorskip('absent_oracle', reason='skips itself')\n\ndef test_d():\n    pass\n"
    )
    plugin_dir = tmp_path / "plugin"
    plugin_dir.mkdir()
    (plugin_dir / f"{emulated.ABSENT_PLUGIN}.py").write_text(emulated._ABSENT_PLUGIN_SOURCE)
    junit = tmp_path / "j.xml"
    env = {**os.environ, "PYTHONPATH": str(plugin_dir),
           "MOSAICRT_ABSENT_ORACLES": json.dumps({"absent_oracle": "no wheel for armv7l"})}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(suite), "-c", str(suite / "pytest.ini"), "--rootdir", str(suite), "-rs",
         "-p", "no:cacheprovider", "-p", emulated.ABSENT_PLUGIN, f"--junitxml={junit}",
         "--continue-on-collection-errors"],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out  # the unrelated import error still fails the run
    assert "needs absent_oracle, absent under emulation: no wheel for armv7l" in out
    assert "not_an_oracle_xyz" in out
    from pipeline.wheeltest import parse_junit

    counts = parse_junit(junit)
    assert "skips itself" in out and "INTERNALERROR" not in out
    assert (counts.passed, counts.skipped, counts.errors) == (1, 2, 1), out


def test_shards_split_the_collected_tests_and_their_junit_files_merge(tmp_path: Path) -> None:
    """Real pytest runs on this host: the shards of a suite run disjoint tests that together are all of
    them, and the merged junit counts every shard's results."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n")
    (suite / "test_many.py").write_text(
        "import pytest\n\n@pytest.mark.parametrize('i', range(7))\ndef test_n(i):\n    print('RAN', i)\n"
        "    assert i != 5\n"
    )
    plugin_dir = tmp_path / "plugin"
    plugin_dir.mkdir()
    (plugin_dir / f"{emulated.ABSENT_PLUGIN}.py").write_text(emulated._ABSENT_PLUGIN_SOURCE)
    ran: list[set[str]] = []
    parts = []
    for k in range(3):
        junit = tmp_path / f"j.shard{k}.xml"
        env = {**os.environ, "PYTHONPATH": str(plugin_dir), "MOSAICRT_TEST_SHARD": f"{k}/3"}
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", str(suite), "-c", str(suite / "pytest.ini"), "--rootdir", str(suite),
             "-p", "no:cacheprovider", "-p", emulated.ABSENT_PLUGIN, f"--junitxml={junit}", "-v"],
            capture_output=True, text=True, env=env, cwd=tmp_path, check=False,
        )
        ran.append({line.split("::")[1].split()[0] for line in proc.stdout.splitlines() if "::test_n[" in line})
        parts.append(junit)
    assert all(ran) and sum(len(r) for r in ran) == 7 and set().union(*ran) == {f"test_n[{i}]" for i in range(7)}
    merged = tmp_path / "merged.xml"
    emulated.suite._merge_junit(parts, merged)
    from pipeline.wheeltest import parse_junit

    counts = parse_junit(merged)
    assert (counts.tests, counts.failures, counts.passed) == (7, 1, 6)
    assert emulated.failed_tests(merged) == ["test_many::test_n[5]"]


def _node_cases_suite(tmp_path: Path, body: str) -> tuple[Path, Path]:
    """A suite folder whose node_cases.py runs ``body`` (argv[2] is the file to write); and its call log."""
    suite = tmp_path / "suite"
    suite.mkdir(exist_ok=True)
    calls = tmp_path / "calls.txt"
    (suite / emulated.NODE_CASES_SCRIPT).write_text(
        f"import sys\nopen({str(calls)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n{body}\n"
    )
    return suite, calls


def test_node_cases_are_generated_on_the_host_once_per_generator_and_named_to_the_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    monkeypatch.setattr(emulated.suite, "_host_python_with", lambda *args: sys.executable)
    sysroot = dataclasses.replace(_fake_sysroot(tmp_path), wheels={"onnx": "1.23.2", "numpy": "2.4.6"})
    suite, calls = _node_cases_suite(tmp_path, "open(sys.argv[2], 'wb').write(b'cases')")
    said: list[str] = []
    env = emulated.host_node_cases(suite, sysroot, tmp_path / "work", said.append)
    path = Path(env[emulated.NODE_CASES_ENV])
    assert path.read_bytes() == b"cases" and "onnx-1.23.2-numpy-2.4.6" in path.name
    assert calls.read_text().splitlines() == [f"--write {path}"] and "generating them on the host" in said[0]
    # the same generator and versions: the file is reused; another generator writes its own file
    assert emulated.host_node_cases(suite, sysroot, tmp_path / "work", said.append) == env
    assert len(calls.read_text().splitlines()) == 1
    _node_cases_suite(tmp_path, "open(sys.argv[2], 'wb').write(b'other')")
    other = Path(emulated.host_node_cases(suite, sysroot, tmp_path / "work", said.append)[emulated.NODE_CASES_ENV])
    assert other != path and other.read_bytes() == b"other"


def test_node_cases_the_host_cannot_generate_are_left_to_the_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    monkeypatch.setattr(emulated.suite, "_host_python_with", lambda *args: sys.executable)
    without_onnx = _fake_sysroot(tmp_path)
    with_onnx = dataclasses.replace(without_onnx, wheels={"onnx": "1.23.2", "numpy": "2.4.6"})
    suite, calls = _node_cases_suite(tmp_path, "print('no reference here', file=sys.stderr); sys.exit(3)")
    said: list[str] = []
    assert emulated.host_node_cases(suite, with_onnx, tmp_path / "work", said.append) == {}
    assert "failed (no reference here)" in said[-1] and calls.read_text()
    # no onnx in the sysroot (armv7), or a suite without the generator: nothing is run
    calls.unlink()
    assert emulated.host_node_cases(suite, without_onnx, tmp_path / "work", said.append) == {}
    assert emulated.host_node_cases(tmp_path, with_onnx, tmp_path / "work", said.append) == {}
    assert not calls.exists()
    monkeypatch.setattr(emulated.suite, "_host_python_with", lambda *args: None)  # no host venv could be made
    assert emulated.host_node_cases(suite, with_onnx, tmp_path / "work", said.append) == {}


# ------------------------------------------------------------------------------ real, under qemu

ARCH_TARGETS = ("linux-aarch64", "linux-armv7")


def _build_tools_present() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("build", "scikit_build_core", "auditwheel", "conans"))


@pytest.mark.slow
@pytest.mark.parametrize("target_name", ARCH_TARGETS)
def test_cross_wheel_suite_under_qemu(
    target_name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`nox -s build -- --target T` then `nox -s test -- --target T`: the cross wheel's own suite runs under
    qemu-user with Debian's CPython for the arch, and its record is stored like a host record.

    linux-aarch64 runs the suite with the matrix's ``suite_emulator`` (SME off: the onnxruntime oracle's own SME
    int8 path is wrong under qemu 7.2; mosaicrt's SME kernels run in the crosscheck's native tests). On
    linux-armv7 PyPI has no onnx/onnxruntime/ml_dtypes wheels: the modules that need them skip with that reason.
    """
    if not _build_tools_present():
        pytest.skip("build tools are installed by `nox -s ci`")
    from pipeline.cli import main

    target = MATRIX.target(target_name)
    t0 = time.monotonic()
    emulated.ensure_toolchains([MATRIX.target(name) for name in ARCH_TARGETS], print)
    # the cross wheel tests' folder: the wheel they built and checked is up to date here (no second build)
    work = REPO / "build" / "xwheel-test"
    monkeypatch.setenv("CCACHE_DIR", str(REPO / "build" / "pipeline" / "ccache"))
    where = ["--dist-dir", str(work / "dist"), "--work-dir", str(work)]
    rc = main(["build", "--target", target_name, "--component", "core", "--jobs", "2", *where])
    out = capsys.readouterr().out
    assert rc == 0, out
    (wheel,) = sorted((work / "dist" / target_name).glob("mosaicrt-*.whl"))
    t_build = time.monotonic() - t0

    rc = main(["test", "--target", target_name, "--component", "core", "--force", *where])
    out = capsys.readouterr().out
    record = records_for_sha(work / "records" / "tests", sha256_file(wheel)).get("3.11")
    assert record is not None, out
    c = record.counts
    summary = (
        f"{target_name}: {record.outcome}: {c.passed} passed, {c.failures} failed, {c.errors} errors,"
        f" {c.skipped} skipped; build {t_build:.0f}s, sysroot + suite {time.monotonic() - t0 - t_build:.0f}s;"
        f" log {record.log}"
    )
    with capsys.disabled():
        print("\n" + summary)
    assert (record.python, record.platform) == ("3.11", target.name)
    assert record.python_full.startswith("3.11.")
    assert record.suite_hash == suite_hash(REPO, WheelSuite())
    log = Path(record.log or "").read_text(encoding="utf-8")
    assert rc == 0 and record.outcome == "passed", summary + "\n" + out[-3000:] + log[-6000:]
    assert c.passed > 0 and c.failures == 0 and c.errors == 0, summary
    assert f"3.11 ({target.name})" in out  # the test table's row
    # where the sysroot has onnx (not armv7's), the suite read the node cases the host generated: the file is
    # named on the suite's command line in the log
    assert (f"{emulated.NODE_CASES_ENV}=" in log) == (target_name == "linux-aarch64"), log[:3000]


def _fake_apt(monkeypatch: pytest.MonkeyPatch, update_rc: int, lists_after_update: bool) -> list[list[str]]:
    """sysroot's dpkg/apt calls answered here: the architecture enabled, no lists for it until `apt-get update`,
    which exits update_rc and brings the lists or not."""
    from pipeline.emulated import sysroot

    calls: list[list[str]] = []
    state = {"updated": False}

    def fake_run(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> tuple[int, str]:
        calls.append(list(cmd))
        if cmd[:2] == ["dpkg", "--print-foreign-architectures"]:
            return 0, "armhf"
        if cmd[0] == "apt-cache":
            return (0, "Package: python3.11-minimal") if state["updated"] and lists_after_update else (100, "E: none")
        if "update" in cmd:
            state["updated"] = True
            return update_rc, "E: Failed to fetch .../binary-armhf/Packages.xz  File has unexpected size"
        raise AssertionError(cmd)

    monkeypatch.setattr(sysroot, "run_command", fake_run)
    monkeypatch.setattr(sysroot, "is_root", lambda: True)
    return calls


def test_a_partly_failed_apt_update_that_brought_the_lists_goes_on_with_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Debian mirror mid-sync fails one index (here the security archive's armhf list, seen on this CI machine)
    while the main archive's lists arrive: the CPython packages are there, so the sysroot goes on, saying so."""
    from pipeline.emulated import sysroot

    calls = _fake_apt(monkeypatch, update_rc=100, lists_after_update=True)
    said: list[str] = []
    sysroot._ensure_debian_arch("armhf", said.append)
    assert any("update" in c for c in calls)
    assert any("warning: apt-get update exited 100" in s and "unexpected size" in s for s in said), said


def test_an_apt_update_that_did_not_bring_the_lists_is_an_environment_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.emulated import sysroot

    for rc in (0, 100):
        _fake_apt(monkeypatch, update_rc=rc, lists_after_update=False)
        with pytest.raises(EnvironmentProblem, match="did not bring armhf package lists"):
            sysroot._ensure_debian_arch("armhf", lambda _: None)


def test_shards_default_to_two_on_two_cores_and_the_environment_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MOSAICRT_EMULATED_SHARDS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert emulated.suite.emulated_shards() == 1
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert emulated.suite.emulated_shards() == 2
    monkeypatch.setenv("MOSAICRT_EMULATED_SHARDS", "3")
    assert emulated.suite.emulated_shards() == 3
