"""pipeline.crosscheck: the pure checks on fixture data (fast), then real cross builds with injected
regressions (slow: they compile, on the cheapest target that shows each shape).

The injected regressions never edit tracked sources: they pass CMake files through
CMAKE_PROJECT_INCLUDE (read after ``project()``, before core/cmake/target_features.cmake), which
either redefine the override hook ``mosaicrt_isa_decision`` or add definitions/sources.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import pytest

from pipeline.binaries import BinaryInfo, Symbol
from pipeline.cli import main
from pipeline.crosscheck import (
    CAUSES,
    Check,
    CrosscheckReport,
    TargetResult,
    check_arm_kernels,
    check_machine,
    check_native_tests,
    compile_command_leaks,
    format_table,
    parse_ctest,
    probe_emulator,
    select_targets,
    undefined_arm_refs,
)
from pipeline.errors import ExitCode
from pipeline.matrix import load_matrix
from pipeline.toolchains import Installer

from .conftest import REPO, edit

MATRIX = load_matrix(REPO)
AARCH64 = MATRIX.target("linux-aarch64")
ARMV7 = MATRIX.target("linux-armv7")
WIN = MATRIX.target("windows-x86_64")


def elf(arch: str, bits: int = 64, *, syms: tuple[Symbol, ...] = (), abi: str | None = None) -> BinaryInfo:
    eabi = 5 if arch == "armv7" else None
    return BinaryInfo(
        format="ELF", arch=arch, bits=bits, kind="shared library", arm_eabi=eabi, arm_float_abi=abi, symbols=syms
    )  # type: ignore[arg-type]


def manifest(arch: str, arm: str) -> dict[str, object]:
    return {"target_arch": arch, "system_processor": "x", "arm64_kernels": arm, "x86_simd": "OFF"}


GENERIC_CMD = {"file": "/r/core/src/graph.cc", "command": "g++ -DMOSAICRT_BUILDING -O3 -c graph.cc"}
NEON_CMD = {"file": "/r/core/src/gemm/sgemm_kernel_neon.cc", "command": "g++ -DMOSAICRT_ARM64_KERNELS=1 -c x.cc"}
NEON_SYM = Symbol(name="_ZN3mrt17sgemm_neon_kernelEv", defined=True, kind="func")

# ------------------------------------------------------------------------- machine type


def test_machine_type_passes_and_names_a_wrong_binary() -> None:
    assert check_machine(AARCH64, {"libmosaicrt.so": elf("aarch64")}).outcome == "pass"
    bad = check_machine(AARCH64, {"libmosaicrt.so": elf("aarch64"), "tests/native/mrt_capi_smoke": elf("x86_64")})
    assert bad.outcome == "fail"
    want = "tests/native/mrt_capi_smoke is ELF64 x86_64 shared library, target linux-aarch64 is ELF aarch64"
    assert want in bad.detail
    assert check_machine(AARCH64, {}).detail == "no ELF/PE binary was produced"


def test_machine_type_armv7_needs_hard_float_eabi5() -> None:
    assert check_machine(ARMV7, {"lib.so": elf("armv7", 32, abi="hard")}).outcome == "pass"
    soft = check_machine(ARMV7, {"lib.so": elf("armv7", 32, abi="soft")})
    assert soft.outcome == "fail" and "EABI5 soft-float, linux-armv7 needs ELF32 EABI5 hard-float" in soft.detail


def test_machine_type_windows_wants_pe() -> None:
    pe = BinaryInfo(format="PE", arch="x86_64", bits=64, kind="dll")
    assert check_machine(WIN, {"libmosaicrt.dll": pe}).outcome == "pass"
    assert "target windows-x86_64 is PE x86_64" in check_machine(WIN, {"libmosaicrt.so": elf("x86_64")}).detail


# -------------------------------------------------------------------------- arm kernels


def test_arm_kernels_on_for_arm64_with_sources_and_symbols() -> None:
    c = check_arm_kernels(
        AARCH64,
        host_arch="x86_64",
        manifest=manifest("arm64", "ON"),
        compile_commands=[GENERIC_CMD, NEON_CMD],
        binaries={"libmosaicrt.so": elf("aarch64", syms=(NEON_SYM,))},
    )
    assert c.outcome == "pass", c.detail
    assert c.detail == "on: manifest arm64_kernels=ON, 1 Arm sources, 1 Arm symbols"


def test_arm_kernels_off_for_armv7() -> None:
    c = check_arm_kernels(
        ARMV7,
        host_arch="x86_64",
        manifest=manifest("armv7", "OFF"),
        compile_commands=[GENERIC_CMD],
        binaries={"lib.so": elf("armv7", 32, syms=(Symbol(name="MrtRun", defined=True),))},
    )
    assert c.outcome == "pass", c.detail


def test_host_decision_is_named() -> None:
    """(a) the decision followed the build host: an arm64 target decided as x86_64, kernels off."""
    c = check_arm_kernels(
        AARCH64, host_arch="x86_64", manifest=manifest("x86_64", "OFF"), compile_commands=[GENERIC_CMD], binaries=None
    )
    assert c.outcome == "fail" and c.cause == "host-decision"
    assert "target_arch=x86_64, which is the build host's" in c.detail
    assert CAUSES["host-decision"] in c.detail


def test_flag_leak_is_named() -> None:
    """(b) Arm-only definitions or flags reaching an armv7 compile."""
    leaking = {"file": "/r/core/src/graph.cc", "command": "g++ -DMOSAICRT_ARM64_KERNELS=1 -march=armv8.2-a+dotprod -c"}
    c = check_arm_kernels(
        ARMV7, host_arch="x86_64", manifest=manifest("armv7", "OFF"), compile_commands=[leaking], binaries=None
    )
    assert c.outcome == "fail" and c.cause == "flag-leak"
    assert "graph.cc gets MOSAICRT_ARM64_KERNELS" in c.detail and "graph.cc gets +dotprod" in c.detail
    assert compile_command_leaks([NEON_CMD])[0] == "compiles Arm-only source sgemm_kernel_neon.cc"
    args_form = {"file": "/r/a.cc", "arguments": ["g++", "-march=armv8.6-a+i8mm", "-c", "a.cc"]}
    assert compile_command_leaks([args_form]) == ["a.cc gets +i8mm", "a.cc gets -march=armv8"]


LINK_LOG = """\
FAILED: tests/native/mrt_sgemm_check
/usr/lib/gcc-cross/arm-linux-gnueabihf/12/../../../../arm-linux-gnueabihf/bin/ld: sgemm.cc.o: \
in function `mrt::sgemm_active_kernel()':
sgemm.cc:(.text+0x1c): undefined reference to `mrt::sgemm_neon_kernel()'
sgemm.cc:(.text+0x2c): undefined reference to `memcpy_missing'
collect2: error: ld returned 1 exit status
"""


def test_arm_symbol_reference_is_named_from_the_link_log_and_the_symbol_table() -> None:
    """(c) generic code calling an Arm-only symbol with the backend off: armv7 link failure."""
    assert undefined_arm_refs(LINK_LOG) == ["mrt::sgemm_neon_kernel()"]
    c = check_arm_kernels(
        ARMV7,
        host_arch="x86_64",
        manifest=manifest("armv7", "OFF"),
        compile_commands=[GENERIC_CMD],
        binaries={},
        link_log=LINK_LOG,
    )
    assert c.outcome == "fail" and c.cause == "arm-symbol-ref"
    assert "undefined mrt::sgemm_neon_kernel()" in c.detail
    undefined = Symbol(name="_ZN3mrt17sgemm_neon_kernelEv", defined=False, kind="func")
    c2 = check_arm_kernels(
        ARMV7,
        host_arch="x86_64",
        manifest=manifest("armv7", "OFF"),
        compile_commands=[GENERIC_CMD],
        binaries={"libmosaicrt.so": elf("armv7", 32, syms=(undefined,), abi="hard")},
    )
    assert c2.cause == "arm-symbol-ref" and "_ZN3mrt17sgemm_neon_kernelEv" in c2.detail


def test_arm64_build_without_arm_kernels_fails() -> None:
    c = check_arm_kernels(
        AARCH64,
        host_arch="x86_64",
        manifest=manifest("arm64", "ON"),
        compile_commands=[GENERIC_CMD],
        binaries={"libmosaicrt.so": elf("aarch64")},
    )
    assert c.outcome == "fail" and c.cause == "arm-missing"
    assert "no Arm kernel source" in c.detail and "no Arm kernel symbol" in c.detail


def test_symbols_outside_the_runtime_do_not_count() -> None:
    libc = Symbol(name="__memcpy_neon", defined=True, kind="func")  # a libc ifunc, not ours
    c = check_arm_kernels(
        ARMV7,
        host_arch="x86_64",
        manifest=manifest("armv7", "OFF"),
        compile_commands=[GENERIC_CMD],
        binaries={"x": elf("armv7", 32, syms=(libc,), abi="hard")},
    )
    assert c.outcome == "pass", c.detail


# ------------------------------------------------------------------------- native tests

CTEST_OUTPUT = """\
test 1
    Start 1: capi_smoke
1: mosaicrt 0.1.0 (version=0.1.0,arch=arm64)
1: 1 passed, 0 failed
1/4 Test #1: capi_smoke .......................   Passed    0.31 sec
test 2
    Start 2: sgemm_check
2: active kernel: neon
2: portable   mr=4 nr=8: 312 cases, 0 failures
2: sgemm kernel portable: OK
2: sgemm kernel neon: OK
2: sgemm kernel avx2: compiled in, not supported by this CPU (skipped)
2/4 Test #2: sgemm_check ......................   Passed   12.05 sec
test 3
3: igemm kernel dotprod: 120 cases OK
3: igemm kernel i8mm: 120 cases OK
3/4 Test #3: igemm_check ......................   Passed    4.50 sec
4/4 Test #4: model_qmatmul ....................***Exception: SegFault  0.20 sec
"""


def test_parse_ctest_statuses_and_kernels() -> None:
    run = parse_ctest(CTEST_OUTPUT)
    assert run.statuses == {
        "capi_smoke": "Passed",
        "sgemm_check": "Passed",
        "igemm_check": "Passed",
        "model_qmatmul": "Exception: SegFault",
    }
    assert run.kernels == ("sgemm:portable", "sgemm:neon", "igemm:dotprod", "igemm:i8mm")


# what `ctest -V --parallel 2` prints: test 2 starts before test 1 ends, their lines interleave, results come in
# the order the tests end
CTEST_PARALLEL_OUTPUT = """\
test 1
      Start  1: capi_smoke
test 2
      Start  2: sgemm_check
2: active kernel: neon
1: mosaicrt 0.1.0 (version=0.1.0,arch=arm64)
2: FAIL neon mode=1: C[0,3]=2 ref=1
1: 1 passed, 0 failed
 1/3 Test  #1: capi_smoke .......................   Passed    0.31 sec
test 3
      Start  3: igemm_check
3: igemm kernel dotprod: 120 cases OK
2: sgemm kernel portable: OK
 2/3 Test  #3: igemm_check ......................   Passed    4.50 sec
 3/3 Test  #2: sgemm_check ......................***Failed   12.05 sec
"""


def test_parse_ctest_keeps_interleaved_tests_apart() -> None:
    run = parse_ctest(CTEST_PARALLEL_OUTPUT)
    assert run.statuses == {"capi_smoke": "Passed", "igemm_check": "Passed", "sgemm_check": "Failed"}
    assert run.outputs["capi_smoke"] == ("mosaicrt 0.1.0 (version=0.1.0,arch=arm64)", "1 passed, 0 failed")
    assert run.outputs["sgemm_check"] == ("active kernel: neon", "FAIL neon mode=1: C[0,3]=2 ref=1",
                                          "sgemm kernel portable: OK")  # fmt: skip
    assert run.kernels == ("igemm:dotprod", "sgemm:portable")
    c = check_native_tests(AARCH64, run, returncode=8, emulator="qemu-aarch64")
    assert "sgemm_check failed under qemu-aarch64 [it said: FAIL neon mode=1: C[0,3]=2 ref=1]" in c.detail, c.detail


def test_native_tests_name_a_crash_under_emulation() -> None:
    c = check_native_tests(AARCH64, parse_ctest(CTEST_OUTPUT), returncode=8, emulator="qemu-aarch64")
    assert c.outcome == "fail"
    assert c.detail == "3/4 passed; model_qmatmul crashed under qemu-aarch64 (Exception: SegFault)"


def test_a_failed_native_test_is_named_with_what_it_said() -> None:
    """The report carries the failing test's own FAIL lines (or its last lines, for a crash), so a failure on a
    machine whose build folder is gone can still be read from the crosscheck's output."""
    failed = CTEST_OUTPUT.replace("#2: sgemm_check ......................   Passed",
                                  "#2: sgemm_check ......................***Failed")  # fmt: skip
    text = failed.replace(
        "2: sgemm kernel neon: OK\n",
        "2: Test command: /usr/bin/qemu-aarch64 mrt_sgemm_check\n2: FAIL neon mode=1: C[0,3]=2 ref=1\n",
    )
    run = parse_ctest(text)
    assert "FAIL neon mode=1: C[0,3]=2 ref=1" in run.outputs["sgemm_check"]
    assert run.outputs["capi_smoke"] == ("mosaicrt 0.1.0 (version=0.1.0,arch=arm64)", "1 passed, 0 failed")
    c = check_native_tests(ARMV7, run, returncode=8, emulator="qemu-arm")
    assert "sgemm_check failed under qemu-arm [it said: FAIL neon mode=1: C[0,3]=2 ref=1];" in c.detail, c.detail
    # a crash: the emulator's Unhandled line, ctest's own lines left out
    crashed = failed.replace("2: sgemm kernel avx2: compiled in, not supported by this CPU (skipped)\n",
                             "2: Test command: wine mrt_sgemm_check.exe\n2: wine: Unhandled page fault at 0x0\n")
    c = check_native_tests(ARMV7, parse_ctest(crashed), returncode=8, emulator="qemu-arm")
    assert "sgemm_check failed under qemu-arm [it said: wine: Unhandled page fault at 0x0];" in c.detail, c.detail
    # wine's crash dump ends in module and thread lists: its Unhandled line is what the failure names
    dumped = crashed.replace("2: wine: Unhandled page fault at 0x0\n", "2: wine: Unhandled page fault at 0x0\n"
                             "2: Modules:\n2: PE 0000000140000000 mrt_sgemm_check\n2: Version: Windows 7\n")
    c = check_native_tests(ARMV7, parse_ctest(dumped), returncode=8, emulator="qemu-arm")
    assert "[it said: wine: Unhandled page fault at 0x0];" in c.detail, c.detail
    quiet = failed.replace("2: sgemm kernel avx2: compiled in, not supported by this CPU (skipped)\n", "")
    c = check_native_tests(ARMV7, parse_ctest(quiet), returncode=8, emulator="qemu-arm")
    last_three = "portable   mr=4 nr=8: 312 cases, 0 failures | sgemm kernel portable: OK | sgemm kernel neon: OK"
    assert f"[it said: {last_three}]" in c.detail, c.detail  # no FAIL or crash line: the last three lines


def test_native_tests_require_the_dotprod_and_i8mm_kernels_on_aarch64() -> None:
    text = CTEST_OUTPUT.replace("3: igemm kernel i8mm: 120 cases OK\n", "").replace(
        "***Exception: SegFault", "   Passed"
    )
    c = check_native_tests(AARCH64, parse_ctest(text), returncode=0, emulator="qemu-aarch64")
    assert c.outcome == "fail"
    assert "did not report the i8mm kernel(s) as run" in c.detail
    ok = check_native_tests(ARMV7, parse_ctest(text), returncode=0, emulator="qemu-arm")
    assert ok.outcome == "pass" and ok.detail == "4/4"
    none = check_native_tests(ARMV7, parse_ctest("No tests were found!!!\n"), returncode=8, emulator="qemu-arm")
    assert none.outcome == "fail" and "ctest ran no test" in none.detail


# ------------------------------------------------------------------ toolchain, selection


def test_broken_emulator_is_one_line(tmp_path: Path) -> None:
    fake = tmp_path / "qemu-arm"
    fake.write_text("#!/bin/sh\necho 'qemu-arm: unable to reserve guest address space' >&2\nexit 1\n")
    fake.chmod(0o755)
    broken = probe_emulator(dataclasses.replace(ARMV7, emulator=(str(fake), "-L", "/x")), {"PATH": "/usr/bin:/bin"})
    assert broken == (
        f"emulator {fake} is broken: `{fake} --version` exited 1 (qemu-arm: unable to reserve guest address space)"
    )
    gone = probe_emulator(dataclasses.replace(ARMV7, emulator=(str(tmp_path / "nope"),)), {})
    assert gone is not None and gone.startswith(f"emulator {tmp_path / 'nope'} does not start")
    assert probe_emulator(dataclasses.replace(ARMV7, emulator=("true",)), {"PATH": "/usr/bin:/bin"}) is None


def test_wine_prefix_is_made_before_the_tests_run_side_by_side(tmp_path: Path) -> None:
    """Two programs started at once on a new wine prefix race for it, so the probe makes the prefix first (the
    native tests then run in parallel) and says so when wine cannot."""
    calls = tmp_path / "calls"
    wine = tmp_path / "wine"
    wine.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n[ "$1" != wineboot ] || exit "${{WINEBOOT_RC:-0}}"\n')
    wine.chmod(0o755)
    target = dataclasses.replace(WIN, emulator=(str(wine),))
    assert probe_emulator(target, {"PATH": "/usr/bin:/bin"}) is None
    assert calls.read_text().splitlines() == ["--version", "wineboot --init"]
    broken = probe_emulator(target, {"PATH": "/usr/bin:/bin", "WINEBOOT_RC": "3"})
    assert broken == f"emulator {wine} is broken: `{wine} wineboot --init` exited 3"
    # qemu has no prefix: only the version probe
    calls.unlink()
    qemu = tmp_path / "qemu-arm"
    qemu.write_text(wine.read_text())
    qemu.chmod(0o755)
    assert probe_emulator(dataclasses.replace(ARMV7, emulator=(str(qemu),)), {"PATH": "/usr/bin:/bin"}) is None
    assert calls.read_text().splitlines() == ["--version"]


def test_select_targets_defaults_and_unknown_names() -> None:
    targets, unknown = select_targets(MATRIX, [])
    assert [t.name for t in targets] == [t.name for t in MATRIX.targets if t.crosscheck]
    assert {"linux-aarch64", "linux-armv7", "linux-riscv64", "linux-x86_64-musl", "windows-x86_64"} <= {
        t.name for t in targets
    }
    targets, unknown = select_targets(MATRIX, ["linux-armv7", "linux-armv8", "macos-arm64"])
    assert [t.name for t in targets] == ["linux-armv7"]
    assert unknown[0].startswith("unknown target 'linux-armv8' (did you mean 'linux-armv7'?)")
    assert unknown[1].startswith("target 'macos-arm64' is not a crosscheck target")


def test_table_has_a_row_per_target_and_a_line_per_failure() -> None:
    good = TargetResult(
        target="linux-aarch64",
        checks=tuple(Check(name=n, outcome="pass", detail="ok") for n in ("toolchain", "build", "machine type",
                                                                          "arm kernels", "native tests")),
        kernels_run=("igemm:dotprod", "igemm:i8mm"),
    )
    bad = TargetResult(
        target="linux-armv7",
        checks=(
            Check(name="toolchain", outcome="pass"),
            Check(name="build", outcome="fail", detail="link failed: undefined mrt::sgemm_neon_kernel()"),
            Check(name="machine type", outcome="pass"),
            Check(name="arm kernels", outcome="fail", detail="generic code references ..."),
            Check(name="native tests", outcome="not run", detail="build failed"),
        ),
    )
    report = CrosscheckReport(host="linux-x86_64", stage="test", duration_s=3, results=(good, bad), unknown=("x",))
    text = format_table(report)
    lines = text.splitlines()
    assert lines[0].split() == ["target", "toolchain", "build", "machine", "type", "arm", "kernels", "native",
                                "tests", "wheel", "suite", "time"]
    assert lines[2].startswith("linux-aarch64") and lines[2].count("pass (ok)") == 5
    assert lines[3].split()[:6] == ["linux-armv7", "pass", "FAIL", "pass", "FAIL", "-"]
    assert "FAIL linux-armv7 build: link failed: undefined mrt::sgemm_neon_kernel()" in lines
    assert "linux-aarch64: kernels run under emulation: igemm:dotprod, igemm:i8mm" in lines
    assert "FAIL x" in lines and lines[-1] == "1/3 targets passed in 3s"
    assert not report.ok and json.loads(report.to_json())["targets"][1]["target"] == "linux-armv7"


# ----------------------------------------------------------------------------- CLI paths


def test_cli_unknown_target_still_reports_the_others(
    capsys: pytest.CaptureFixture[str], real_matrix_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad name and a missing compiler without root: one line each, the table, a non-zero exit."""
    edit(real_matrix_repo / "matrix" / "targets.toml", 'cxx_compiler = "arm-linux-gnueabihf-g++"',
         'cxx_compiler = "fixture-missing-arm-g++"')
    monkeypatch.setattr("pipeline.crosscheck.driver.system_installer", lambda: Installer(root=False, run=lambda c: 1))
    rc = main(["crosscheck", "--root", str(real_matrix_repo), "--target", "linux-armv7", "--target", "linux-armv8"])
    out, err = capsys.readouterr()
    assert rc == ExitCode.USAGE
    assert "FAIL linux-armv7 toolchain: fixture-missing-arm-g++ not on PATH; not root" in out
    assert "FAIL unknown target 'linux-armv8' (did you mean 'linux-armv7'?)" in out
    assert err.count("\n") == 1 and "linux-armv8" in err
    rc = main(["crosscheck", "--root", str(real_matrix_repo), "--target", "linux-armv7"])
    assert rc == ExitCode.CROSSCHECK
    assert "crosscheck failed: linux-armv7 toolchain" in capsys.readouterr().err


# ------------------------------------------------------------------ slow: real cross builds

# As root (CI, a fresh machine) the crosscheck installs missing toolchains itself; elsewhere the
# real-build tests need them installed already.
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
HAVE_ARM = ROOT or all(shutil.which(x) for x in ("arm-linux-gnueabihf-g++", "qemu-arm"))
HAVE_AARCH64 = ROOT or all(shutil.which(x) for x in ("aarch64-linux-gnu-g++", "qemu-aarch64"))
HAVE_ALL = ROOT or (HAVE_ARM and HAVE_AARCH64 and all(shutil.which(x) for x in ("x86_64-w64-mingw32-g++-posix",
                                                                                 "wine")))
needs_conan = pytest.mark.skipif(
    shutil.which("conan") is None and not (Path(__import__("sys").executable).parent / "conan").exists(),
    reason="conan is installed by `nox -s ci`",
)


def crosscheck_run(name: str, *args: str) -> tuple[int, dict[str, object]]:
    """Run the crosscheck into build/crosscheck-<name>/ (same depth as build/crosscheck/: ccache hits)."""
    work = REPO / "build" / f"crosscheck-{name}"
    rc = main(["crosscheck", "--work-dir", str(work), *args])
    data = json.loads((work / "reports" / "crosscheck-report.json").read_text())
    return rc, data


def arm_check(data: dict[str, object]) -> dict[str, str]:
    targets = data["targets"]
    assert isinstance(targets, list)
    return next(c for c in targets[0]["checks"] if c["name"] == "arm kernels")


def inject(tmp_path: Path, text: str) -> str:
    path = tmp_path / "inject.cmake"
    path.write_text(text, encoding="utf-8")
    return f"-DCMAKE_PROJECT_INCLUDE={path}"


@pytest.mark.slow
@needs_conan
@pytest.mark.skipif(not HAVE_ALL, reason="not root: needs the cross compilers, qemu-user, mingw-w64 and wine installed")
def test_crosscheck_passes_on_every_cross_target(capsys: pytest.CaptureFixture[str]) -> None:
    """What `nox -s crosscheck` does on a fresh machine: every cross target builds, has the right
    machine type and Arm kernels, and passes its native tests under qemu/wine; on aarch64 the
    dotprod and i8mm kernels really ran."""
    rc, data = crosscheck_run("all")
    out = capsys.readouterr().out
    assert rc == 0, out[-4000:]
    targets = data["targets"]
    assert isinstance(targets, list)
    assert {t["target"] for t in targets} >= {
        "linux-aarch64", "linux-armv7", "linux-riscv64", "linux-x86_64-musl", "windows-x86_64"
    }  # fmt: skip
    for t in targets:
        assert all(c["outcome"] == "pass" for c in t["checks"] if c["name"] != "wheel suite"), t
        suite = next(c for c in t["checks"] if c["name"] == "wheel suite")
        assert (suite["outcome"], suite["detail"]) == ("not run", "--wheel-suite not given"), t
    assert "target" in out and "native tests" in out  # the table
    kernels = next(line for line in out.splitlines() if line.startswith("linux-aarch64: kernels run"))
    assert "igemm:dotprod" in kernels and "igemm:i8mm" in kernels and "sgemm:neon" in kernels


@pytest.mark.slow
@needs_conan
@pytest.mark.skipif(not HAVE_AARCH64, reason="needs g++-aarch64-linux-gnu and qemu-user")
def test_injected_host_decision_fails_naming_the_cause(tmp_path: Path) -> None:
    """(a) The ISA decision overridden to read the build host (CMAKE_HOST_SYSTEM_PROCESSOR)."""
    hook = inject(
        tmp_path,
        "function(mosaicrt_isa_decision out)\n"
        '  string(TOLOWER "${CMAKE_HOST_SYSTEM_PROCESSOR}" _p)\n'
        '  if(_p MATCHES "^(x86_64|amd64)$")\n    set(_p x86_64)\n  endif()\n'
        '  set(${out} "${_p}" PARENT_SCOPE)\nendfunction()\n',
    )
    rc, data = crosscheck_run("inject-a", "--target", "linux-aarch64", "--stage", "configure", f"--cmake-arg={hook}")
    assert rc == ExitCode.CROSSCHECK
    check = arm_check(data)
    assert check["outcome"] == "fail" and check["cause"] == "host-decision", check
    assert "the ISA decision followed the build host" in check["detail"]


@pytest.mark.slow
@needs_conan
@pytest.mark.skipif(not HAVE_ARM, reason="needs g++-arm-linux-gnueabihf and qemu-user")
def test_injected_flag_leak_fails_naming_the_cause(tmp_path: Path) -> None:
    """(b) The Arm definition applied to every target of the project, as in onnxruntime #26458."""
    hook = inject(tmp_path, "add_compile_definitions(MOSAICRT_ARM64_KERNELS=1)\n")
    rc, data = crosscheck_run("inject-b", "--target", "linux-armv7", "--stage", "configure", f"--cmake-arg={hook}")
    assert rc == ExitCode.CROSSCHECK
    check = arm_check(data)
    assert check["outcome"] == "fail" and check["cause"] == "flag-leak", check
    assert "gets MOSAICRT_ARM64_KERNELS" in check["detail"]


@pytest.mark.slow
@needs_conan
@pytest.mark.skipif(not HAVE_ARM, reason="needs g++-arm-linux-gnueabihf and qemu-user")
def test_injected_arm_symbol_reference_fails_the_armv7_link(tmp_path: Path) -> None:
    """(c) Generic code calls an Arm-only kernel symbol while the Arm backend is off."""
    generic = tmp_path / "generic_dispatch.cc"
    generic.write_text(
        "namespace mrt { void sgemm_neon_dotprod_kernel(); }\n"
        "namespace mrt { void generic_dispatch() { sgemm_neon_dotprod_kernel(); } }\n",
        encoding="utf-8",
    )
    hook = inject(
        tmp_path,
        f'cmake_language(DEFER DIRECTORY "${{CMAKE_SOURCE_DIR}}" CALL target_sources mosaicrt_objects PRIVATE'
        f' "{generic}")\n',
    )
    rc, data = crosscheck_run("inject-c", "--target", "linux-armv7", "--stage", "build", f"--cmake-arg={hook}")
    assert rc == ExitCode.CROSSCHECK
    check = arm_check(data)
    assert check["outcome"] == "fail" and check["cause"] == "arm-symbol-ref", check
    assert "mrt::sgemm_neon_dotprod_kernel()" in check["detail"] or "sgemm_neon_dotprod_kernel" in check["detail"]


def test_wheel_suite_column_says_why_a_target_has_no_emulated_suite(tmp_path: Path) -> None:
    """`--wheel-suite` runs the core wheel's suite under emulation where a Debian CPython for the arch exists;
    elsewhere the column says why not (it never pretends to pass)."""
    from pipeline.cli import _wheel_suite_check
    from pipeline.layout import Layout

    layout = Layout(root=REPO, dist=tmp_path / "dist", work=tmp_path / "work")
    for name, why in (("windows-x86_64", "only glibc Linux wheels"), ("linux-x86_64-musl", "only glibc Linux wheels"),
                      ("linux-riscv64", "no Debian architecture")):  # fmt: skip
        check = _wheel_suite_check(MATRIX, MATRIX.target("linux-x86_64"), layout, MATRIX.target(name), 1)
        assert (check.name, check.outcome) == ("wheel suite", "not run") and why in check.detail, check
    assert not (tmp_path / "dist").exists()  # nothing was built for them
