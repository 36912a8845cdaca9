"""The crosscheck step: build the core and its native tests for each cross target and prove them right.

Per target (``crosscheck = true`` in ``matrix/targets.toml``)::

    toolchain     compilers + emulator on PATH; installed from Debian packages when root
    build         conan host profile → conan_toolchain.cmake → CMake (Ninja, ccache, tests ON,
                  compile_commands.json) → build of the library and the native test programs
    machine type  every produced ELF/PE binary is for the target (e_machine / PE Machine; ELF class;
                  ARM EABI5 hard-float for armv7), read from the bytes by pipeline.binaries
    arm kernels   the Arm64 micro-kernels are compiled in iff the target is arm64: the build manifest
                  (written by core/cmake/target_features.cmake), the compile commands (no Arm-only
                  flags, definitions or sources elsewhere) and the symbol tables (Arm kernel symbols
                  defined only on arm64, never referenced elsewhere — an undefined reference is the
                  armv7 link failure of onnxruntime #26458)
    native tests  ctest under the target's emulator (qemu-aarch64 -cpu max, qemu-arm, wine); the
                  kernel-check lines ("igemm kernel i8mm: 120 cases OK") say which kernels ran

A failing check names its cause; known regression shapes have fixed cause names (:data:`CAUSES`).
Checks after a failed step are reported as not run, and every target gets its row.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from . import platforms
from .binaries import BinaryFormatError, BinaryInfo, Symbol, read_binary
from .build import CellFailure, conan_toolchain
from .errors import CrosscheckFailure, UsageError, choices_hint
from .layout import Layout
from .matrix import Cell, Matrix, Target

Outcome = Literal["pass", "fail", "not run"]
Stage = Literal["configure", "build", "test"]
STAGES: tuple[Stage, ...] = ("configure", "build", "test")
CHECKS = ("toolchain", "build", "machine type", "arm kernels", "native tests")

#: Sources that only the Arm64 backend compiles (the same rule as core/CMakeLists.txt's ISA filter).
ARM_SOURCE = re.compile(r"_(neon|dotprod|i8mm|sme)[a-z0-9_]*\.cc$")
#: Compile-command fragments that only an arm64 build may carry.
ARM_FLAGS = re.compile(r"MOSAICRT_ARM64_KERNELS|\+dotprod|\+i8mm|\+sme|-march=armv8|-march=armv9")
#: Symbols of the Arm64 backend: mosaicrt-namespaced (C++ ``mrt::`` or C ``mrt_``) names that
#: carry an Arm ISA word. Generic code must reach the backend only through names without one.
ARM_SYMBOL = re.compile(r"(?i)(neon|dotprod|i8mm|sme2?(?![a-z]))")
_MRT_NAME = re.compile(r"(3mrt|^_?mrt_|^_?Mrt)")

#: Fixed cause names, so a failure says which known regression shape it is.
CAUSES = {
    "host-decision": "the ISA decision followed the build host, not the target (onnxruntime #26175 shape)",
    "flag-leak": "Arm-only compile flags/definitions leak into a non-arm64 target (onnxruntime #26458 shape)",
    "arm-symbol-ref": (
        "generic code references an Arm-only symbol while the Arm backend is off (onnxruntime #26458 link failure)"
    ),
    "arm-missing": "the Arm64 micro-kernels are not compiled into an arm64 build",
}

_KERNEL_LINE = re.compile(r"^(?P<family>\w+) kernel (?P<kernel>[\w.+-]+): (?:(?P<cases>\d+) cases )?OK\s*$")
_CTEST_RESULT = re.compile(
    r"^\s*\d+/\d+ Test\s+#\d+: (?P<name>\S+) \.*\s*(?P<stars>\*{3})?(?P<status>Passed|Failed|Not Run|Timeout|"
    r"Exception: [\w ]+?|Subprocess aborted|Child aborted)\s+[\d.]+ sec"
)
_UNDEFINED_REF = re.compile(r"undefined reference to [`'‘](?P<sym>[^'’`]+)['’]")


# ------------------------------------------------------------------------------------ results


@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    outcome: Outcome
    detail: str = ""  #: what was seen (pass) or why it failed / was not run
    cause: str | None = None  #: key of CAUSES when a known regression shape was recognised


@dataclass(frozen=True, kw_only=True)
class TargetResult:
    target: str
    checks: tuple[Check, ...]
    build_dir: str | None = None
    log: str | None = None
    kernels_run: tuple[str, ...] = ()
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return all(c.outcome != "fail" for c in self.checks)

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)


@dataclass(frozen=True, kw_only=True)
class CrosscheckReport:
    host: str | None
    stage: Stage
    duration_s: float
    results: tuple[TargetResult, ...] = field(default_factory=tuple)
    unknown: tuple[str, ...] = ()  #: one line per requested name that is not a crosscheck target

    @property
    def ok(self) -> bool:
        return not self.unknown and all(r.ok for r in self.results)

    def to_json(self) -> str:
        data = {
            "schema": 1,
            "host": self.host,
            "stage": self.stage,
            "duration_s": round(self.duration_s, 3),
            "unknown": list(self.unknown),
            "targets": [asdict(r) for r in self.results],
        }
        return json.dumps(data, indent=2) + "\n"


def format_table(report: CrosscheckReport) -> str:
    """The target-by-check table, then one line per failed check (its reason) and per unknown target."""
    from .report import table

    rows = []
    for r in report.results:
        cells = [_cell(r.check(name)) for name in CHECKS]
        rows.append((r.target, *cells, f"{r.duration_s:.0f}s"))
    lines = [table(("target", *CHECKS, "time"), rows)]
    for r in report.results:
        for c in r.checks:
            if c.outcome == "fail":
                lines.append(f"FAIL {r.target} {c.name}: {c.detail}")
        if r.kernels_run:
            lines.append(f"{r.target}: kernels run under emulation: {', '.join(r.kernels_run)}")
    lines += [f"FAIL {u}" for u in report.unknown]
    passed = sum(r.ok for r in report.results)
    lines.append(f"{passed}/{len(report.results) + len(report.unknown)} targets passed in {report.duration_s:.0f}s")
    return "\n".join(lines)


def _cell(c: Check) -> str:
    if c.outcome == "pass":
        return f"pass ({c.detail})" if c.detail and len(c.detail) <= 28 else "pass"
    return "FAIL" if c.outcome == "fail" else "-"


def raise_for_report(report: CrosscheckReport) -> None:
    if report.unknown:
        raise UsageError("; ".join(report.unknown))
    bad = [f"{r.target} {c.name}" for r in report.results for c in r.checks if c.outcome == "fail"]
    if bad:
        raise CrosscheckFailure(f"crosscheck failed: {', '.join(bad)} (reasons above)")


# ------------------------------------------------------------------------------ pure checks


def check_machine(target: Target, binaries: dict[str, BinaryInfo]) -> Check:
    """Every binary is for the target arch; armv7 ones are 32-bit EABI5 hard-float."""
    if not binaries:
        return Check(name="machine type", outcome="fail", detail="no ELF/PE binary was produced")
    want_format = target.os_spec.binary_format
    arch = target.arch_spec
    bad = []
    for name, info in sorted(binaries.items()):
        if info.arch != target.arch or info.format != want_format:
            bad.append(f"{name} is {info.describe()}, target {target.name} is {want_format} {target.arch}")
        elif info.bits != arch.bits:
            bad.append(f"{name} is {info.describe()}, {target.arch} needs a {arch.bits}-bit image")
        elif arch.arm_eabi5_hard_float and (info.arm_eabi != 5 or info.arm_float_abi != "hard"):
            bad.append(f"{name} is {info.describe()}, {target.name} needs ELF32 EABI5 hard-float")
    if bad:
        return Check(name="machine type", outcome="fail", detail="; ".join(bad[:3]) + (" …" if len(bad) > 3 else ""))
    return Check(name="machine type", outcome="pass", detail=f"{len(binaries)} × {target.arch}")


def arm_symbols(symbols: Iterable[Symbol]) -> tuple[list[str], list[str]]:
    """(defined, undefined) names of Arm64-backend symbols among ``symbols``."""
    defined: list[str] = []
    undefined: list[str] = []
    for s in symbols:
        if _MRT_NAME.search(s.name) and ARM_SYMBOL.search(s.name):
            (defined if s.defined else undefined).append(s.name)
    return sorted(set(defined)), sorted(set(undefined))


def undefined_arm_refs(log_text: str) -> list[str]:
    """Arm-backend symbols named in the linker's "undefined reference to" lines."""
    refs = {m["sym"] for m in _UNDEFINED_REF.finditer(log_text)}
    return sorted(r for r in refs if ARM_SYMBOL.search(r) and ("mrt" in r or "Mrt" in r))


def compile_command_leaks(entries: Sequence[dict[str, object]]) -> list[str]:
    """Arm-only sources, flags or definitions in a compile_commands.json (for a non-arm64 target)."""
    leaks = []
    for e in entries:
        src = str(e.get("file", ""))
        cmd = e.get("command")
        text = cmd if isinstance(cmd, str) else " ".join(map(str, e.get("arguments", []) or []))  # type: ignore[call-overload]
        if ARM_SOURCE.search(src):
            leaks.append(f"compiles Arm-only source {Path(src).name}")
        for m in sorted(set(ARM_FLAGS.findall(text))):
            leaks.append(f"{Path(src).name} gets {m}")
    return leaks


def check_arm_kernels(
    target: Target,
    *,
    host_arch: str | None,
    manifest: dict[str, object] | None,
    compile_commands: Sequence[dict[str, object]] | None,
    binaries: dict[str, BinaryInfo] | None,
    link_log: str = "",
) -> Check:
    """The Arm64 micro-kernels are compiled in iff the target is arm64 (manifest, flags, symbols)."""
    family = target.arch_spec.isa_family
    want_arm = target.arch_spec.arm64_kernels
    isa_of = platforms.isa_family_names()
    problems: list[str] = []
    causes: list[str] = []
    seen: list[str] = []
    if manifest is None:
        problems.append("no build manifest (mosaicrt_build_manifest.json) was written by the configure step")
    else:
        got_arch = str(manifest.get("target_arch"))
        got_arm = str(manifest.get("arm64_kernels")).upper() in ("ON", "TRUE", "1")
        if got_arch != family:
            host = isa_of.get(host_arch or "", host_arch or "?")
            if got_arch == host:
                causes.append("host-decision")
                problems.append(
                    f"the build manifest says target_arch={got_arch}, which is the build host's, for target"
                    f" {target.name} ({family}): {CAUSES['host-decision']}"
                )
            else:
                problems.append(f"the build manifest says target_arch={got_arch}, target {target.name} is {family}")
        if got_arm != want_arm:
            if not causes and got_arch == isa_of.get(host_arch or "", ""):
                causes.append("host-decision")
            problems.append(
                f"the build manifest says arm64_kernels={manifest.get('arm64_kernels')} for"
                f" {'an' if want_arm else 'a non-'}arm64 target"
            )
        seen.append(f"manifest arm64_kernels={'ON' if got_arm else 'OFF'}")
    if compile_commands is not None:
        arm_sources = [e for e in compile_commands if ARM_SOURCE.search(str(e.get("file", "")))]
        if want_arm:
            if not arm_sources:
                causes.append("arm-missing")
                problems.append(f"no Arm kernel source (*_neon*.cc, …) is compiled: {CAUSES['arm-missing']}")
            seen.append(f"{len(arm_sources)} Arm sources")
        else:
            leaks = compile_command_leaks(compile_commands)
            if leaks:
                causes.append("flag-leak")
                more = f" (+{len(leaks) - 3} more)" if len(leaks) > 3 else ""
                problems.append(f"{CAUSES['flag-leak']}: {'; '.join(leaks[:3])}{more}")
            seen.append(f"no Arm flag in {len(compile_commands)} compile commands")
    refs = undefined_arm_refs(link_log)
    if binaries is not None or refs:
        defined: set[str] = set()
        undefined: set[str] = set(refs)
        for info in (binaries or {}).values():
            d, u = arm_symbols(info.symbols)
            defined.update(d)
            undefined.update(u)
        undefined -= defined
        if want_arm:
            if binaries is not None and not defined:
                if "arm-missing" not in causes:
                    causes.append("arm-missing")
                problems.append("no Arm kernel symbol (…neon/dotprod/i8mm/sme…) is defined in the built binaries")
            seen.append(f"{len(defined)} Arm symbols")
        else:
            if undefined:
                causes.append("arm-symbol-ref")
                problems.append(f"{CAUSES['arm-symbol-ref']}: undefined {', '.join(sorted(undefined)[:3])}")
            if defined:
                problems.append(f"Arm kernel symbols defined in a {family} build: {', '.join(sorted(defined)[:3])}")
            if binaries is not None:
                seen.append(f"no Arm symbol in {len(binaries)} binaries")
    if problems:
        cause = causes[0] if causes else None
        return Check(name="arm kernels", outcome="fail", detail="; ".join(problems), cause=cause)
    return Check(name="arm kernels", outcome="pass", detail=("on" if want_arm else "off") + f": {', '.join(seen)}")


@dataclass(frozen=True, kw_only=True)
class TestRun:
    """What one ctest run shows: per-test status and the kernels the checks report as run."""

    __test__ = False

    statuses: dict[str, str]
    kernels: tuple[str, ...]


def parse_ctest(output: str) -> TestRun:
    statuses: dict[str, str] = {}
    kernels: list[str] = []
    for raw in output.splitlines():
        m = _CTEST_RESULT.match(raw)
        if m:
            statuses[m["name"]] = m["status"].strip()
            continue
        line = re.sub(r"^\d+: ", "", raw)  # ctest -V prefixes test output with the test number
        k = _KERNEL_LINE.match(line)  # "<family> kernel <registry name>: [N cases] OK"
        if k:
            kernels.append(f"{k['family']}:{k['kernel']}")
    return TestRun(statuses=statuses, kernels=tuple(dict.fromkeys(kernels)))


def check_native_tests(target: Target, run: TestRun, *, returncode: int, emulator: str) -> Check:
    if not run.statuses:
        return Check(
            name="native tests", outcome="fail", detail=f"ctest ran no test (exit {returncode}; see the log)"
        )
    bad = {n: s for n, s in run.statuses.items() if s != "Passed"}
    problems = []
    for name, status in bad.items():
        if status.startswith(("Exception", "Child aborted", "Subprocess aborted")):
            problems.append(f"{name} crashed under {emulator} ({status})")
        elif status == "Timeout":
            problems.append(f"{name} timed out under {emulator}")
        else:
            problems.append(f"{name} {status.lower()} under {emulator}")
    missing = [k for k in target.crosscheck_kernels if not any(k in ran for ran in run.kernels)]
    if missing:
        problems.append(
            f"kernel checks did not report the {', '.join(missing)} kernel(s) as run"
            f" (ran: {', '.join(run.kernels) or 'none'})"
        )
    passed = len(run.statuses) - len(bad)
    if problems:
        return Check(
            name="native tests", outcome="fail", detail=f"{passed}/{len(run.statuses)} passed; " + "; ".join(problems)
        )
    return Check(name="native tests", outcome="pass", detail=f"{passed}/{len(run.statuses)}")


# ------------------------------------------------------------------------------- toolchain


@dataclass(frozen=True, kw_only=True)
class Installer:
    """Installs Debian packages; ``root`` decides whether it may (else it prints the command)."""

    root: bool
    run: Callable[[Sequence[str]], int]
    updated: list[bool] = field(default_factory=list)

    @staticmethod
    def command(packages: Sequence[str]) -> str:
        return f"apt-get update && apt-get install -y --no-install-recommends {' '.join(packages)}"

    #: apt waits for a lock held by another package operation instead of failing at once
    LOCK_WAIT = ("-o", "DPkg::Lock::Timeout=600")


def system_installer() -> Installer:
    def run(cmd: Sequence[str]) -> int:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        return subprocess.run(list(cmd), env=env, check=False).returncode

    return Installer(root=hasattr(os, "geteuid") and os.geteuid() == 0, run=run)


def missing_tools(target: Target) -> list[str]:
    tools = [target.c_compiler, target.cxx_compiler, *target.emulator[:1]]
    return [t for t in dict.fromkeys(tools) if shutil.which(t) is None]


def ensure_toolchain(target: Target, installer: Installer, say: Callable[[str], None]) -> Check:
    missing = missing_tools(target)
    if not missing:
        return Check(name="toolchain", outcome="pass", detail="present")
    if not target.debian_packages:
        return Check(
            name="toolchain",
            outcome="fail",
            detail=f"{', '.join(missing)} not on PATH and the matrix names no Debian package"
            f" (fix: {target.toolchain_hint})",
        )
    command = Installer.command(target.debian_packages)
    if not installer.root:
        return Check(
            name="toolchain",
            outcome="fail",
            detail=f"{', '.join(missing)} not on PATH; not root, so nothing was installed: run `sudo {command}`",
        )
    say(f"[{target.name}] {', '.join(missing)} missing: installing Debian packages: {command}")
    t0 = time.monotonic()
    if not installer.updated:
        if installer.run(["apt-get", *Installer.LOCK_WAIT, "update"]) != 0:
            return Check(name="toolchain", outcome="fail", detail=f"`apt-get update` failed (run `{command}` by hand)")
        installer.updated.append(True)
    apt = ["apt-get", *Installer.LOCK_WAIT, "install", "-y", "--no-install-recommends", *target.debian_packages]
    if installer.run(apt) != 0:
        return Check(name="toolchain", outcome="fail", detail=f"`{' '.join(apt)}` failed")
    still = missing_tools(target)
    if still:
        return Check(
            name="toolchain",
            outcome="fail",
            detail=f"{', '.join(still)} still not on PATH after installing {' '.join(target.debian_packages)}",
        )
    say(f"[{target.name}] installed {' '.join(target.debian_packages)} in {time.monotonic() - t0:.0f}s")
    return Check(name="toolchain", outcome="pass", detail="installed")


def probe_emulator(target: Target, env: dict[str, str]) -> str | None:
    """None when the emulator answers ``--version``; else one line saying what is wrong."""
    exe = target.emulator[0]
    try:
        proc = subprocess.run(
            [exe, "--version"], env=env, capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"emulator {exe} does not start: {exc}"
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()
        return f"emulator {exe} is broken: `{exe} --version` exited {proc.returncode}" + (
            f" ({last[-1]})" if last else ""
        )
    return None


# ----------------------------------------------------------------------------------- running


@dataclass(frozen=True, kw_only=True)
class CrosscheckOptions:
    jobs: int = max(1, int(os.environ.get("MOSAICRT_BUILD_JOBS", "0")) or (os.cpu_count() or 1))
    stage: Stage = "test"
    build_tests: bool = True  #: also build the native test programs (off: only the library)
    cmake_args: tuple[str, ...] = ()  #: extra CMake arguments (the regression tests inject through these)
    test_timeout_s: int = 1200
    quiet: bool = False


def select_targets(matrix: Matrix, names: Sequence[str]) -> tuple[list[Target], list[str]]:
    """(targets to check, one line per unknown name). Default: every ``crosscheck = true`` target."""
    eligible = [t for t in matrix.targets if t.crosscheck]
    if not names:
        return eligible, []
    chosen, unknown = [], []
    eligible_names = [t.name for t in eligible]
    for name in dict.fromkeys(names):
        t = next((x for x in matrix.targets if x.name == name), None)
        if t is None:
            unknown.append(
                f"unknown target '{name}'{choices_hint(name, eligible_names)} (not in matrix/targets.toml)"
            )
        elif not t.crosscheck:
            unknown.append(
                f"target '{name}' is not a crosscheck target (set crosscheck = true in matrix/targets.toml;"
                f" crosscheck targets: {', '.join(eligible_names)})"
            )
        else:
            chosen.append(t)
    return chosen, unknown


def crosscheck(
    matrix: Matrix,
    targets: Sequence[Target],
    layout: Layout,
    *,
    host: Target | None,
    opts: CrosscheckOptions,
    installer: Installer | None = None,
    unknown: Sequence[str] = (),
) -> CrosscheckReport:
    start = time.monotonic()
    installer = installer or system_installer()
    results = []
    for target in targets:
        t0 = time.monotonic()
        result = _check_target(matrix, target, layout, host=host, opts=opts, installer=installer)
        results.append(
            TargetResult(
                target=result.target,
                checks=result.checks,
                build_dir=result.build_dir,
                log=result.log,
                kernels_run=result.kernels_run,
                duration_s=time.monotonic() - t0,
            )
        )
    report = CrosscheckReport(
        host=host.name if host else None,
        stage=opts.stage,
        duration_s=time.monotonic() - start,
        results=tuple(results),
        unknown=tuple(unknown),
    )
    path = crosscheck_report_path(layout)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report.to_json(), encoding="utf-8")
    return report


def crosscheck_report_path(layout: Layout) -> Path:
    return layout.work / "reports" / "crosscheck-report.json"


def _not_run(names: Iterable[str], why: str) -> list[Check]:
    return [Check(name=n, outcome="not run", detail=why) for n in names]


def _check_target(
    matrix: Matrix,
    target: Target,
    layout: Layout,
    *,
    host: Target | None,
    opts: CrosscheckOptions,
    installer: Installer,
) -> TargetResult:
    def say(line: str) -> None:
        if not opts.quiet:
            print(line, flush=True)

    checks: list[Check] = []
    tool = ensure_toolchain(target, installer, say)
    checks.append(tool)
    if tool.outcome == "fail":
        return TargetResult(target=target.name, checks=(tool, *_not_run(CHECKS[1:], "no toolchain")))

    # Same depth below the repository as the wheel build's cell folders (build/pipeline/cells/<slug>/cmake):
    # ccache's base_dir makes paths relative to the build folder, so equal depth means shared cache hits.
    build_dir = layout.work / "cells" / target.name / "cmake"
    log = layout.work / "logs" / f"{target.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"# crosscheck log for {target.name}\n", encoding="utf-8")

    def rel(path: Path) -> str:
        return _rel(path, layout.root)

    base = dict(target=target.name, build_dir=rel(build_dir), log=rel(log))
    env = _environment(target, layout, opts)

    # configure
    say(f"[{target.name}] configuring in {rel(build_dir)} (log: {rel(log)})")
    try:
        _configure(matrix, target, layout, build_dir=build_dir, env=env, log=log, opts=opts)
    except CellFailure as exc:
        manifest, commands = _read_manifest(build_dir), _read_compile_commands(build_dir)
        arm = (
            check_arm_kernels(
                target, host_arch=_host_arch(host), manifest=manifest, compile_commands=commands, binaries=None
            )
            if manifest
            else Check(name="arm kernels", outcome="not run", detail="not configured")
        )
        checks += [
            Check(name="build", outcome="fail", detail=f"{exc}; {_first_error(log)} (log {rel(log)})"),
            Check(name="machine type", outcome="not run", detail="not built"),
            arm,
            Check(name="native tests", outcome="not run", detail="not built"),
        ]
        return TargetResult(**base, checks=tuple(checks))  # type: ignore[arg-type]
    manifest, commands = _read_manifest(build_dir), _read_compile_commands(build_dir)
    if opts.stage == "configure":
        checks += [
            Check(name="build", outcome="pass", detail="configured only"),
            Check(name="machine type", outcome="not run", detail="--stage configure"),
            check_arm_kernels(
                target, host_arch=_host_arch(host), manifest=manifest, compile_commands=commands, binaries=None
            ),
            Check(name="native tests", outcome="not run", detail="--stage configure"),
        ]
        return TargetResult(**base, checks=tuple(checks))  # type: ignore[arg-type]

    # build
    say(f"[{target.name}] building with {opts.jobs} job(s)")
    mark = log.stat().st_size
    build_failure: str | None = None
    try:
        cmd: list[str | Path] = [_tool("cmake"), "--build", build_dir, "--parallel", str(opts.jobs)]
        if not opts.build_tests:
            cmd += ["--target", "mosaicrt"]
        _stream(cmd, log=log, env=env, step="build", say=say if not opts.quiet else None, prefix=target.name)
    except CellFailure as exc:
        build_failure = str(exc)
    build_log = _read_from(log, mark)
    binaries, unreadable = _collect_binaries(build_dir)
    refs = undefined_arm_refs(build_log)
    if build_failure:
        why = f"{build_failure}; {_first_error(log, mark)}"
        if refs:
            why = f"link failed: {CAUSES['arm-symbol-ref']}: undefined {', '.join(refs[:3])}"
        checks.append(Check(name="build", outcome="fail", detail=f"{why} (log {rel(log)})"))
    else:
        ninja = sum(1 for line in build_log.splitlines() if re.match(r"^\[\d+/\d+\]", line))
        checks.append(Check(name="build", outcome="pass", detail=f"{ninja} steps"))
    machine = check_machine(target, binaries)
    if unreadable:
        machine = Check(name="machine type", outcome="fail", detail="; ".join(unreadable))
    checks.append(machine)
    checks.append(
        check_arm_kernels(
            target,
            host_arch=_host_arch(host),
            manifest=manifest,
            compile_commands=commands,
            binaries=binaries,
            link_log=build_log,
        )
    )
    if build_failure or opts.stage == "build" or not opts.build_tests:
        why = "build failed" if build_failure else "--stage build" if opts.stage == "build" else "tests not built"
        checks.append(Check(name="native tests", outcome="not run", detail=why))
        return TargetResult(**base, checks=tuple(checks))  # type: ignore[arg-type]

    # native tests under the emulator
    emulator = " ".join(target.emulator)
    broken = probe_emulator(target, env)
    if broken:
        checks.append(Check(name="native tests", outcome="fail", detail=broken))
        return TargetResult(**base, checks=tuple(checks))  # type: ignore[arg-type]
    say(f"[{target.name}] running the native tests under {emulator}")
    mark = log.stat().st_size
    rc = _stream(
        [_ctest(), "--test-dir", build_dir, "-V", "--timeout", str(opts.test_timeout_s)],
        log=log,
        env=env,
        step="ctest",
        say=None,
        prefix=target.name,
        check=False,
    )
    run = parse_ctest(_read_from(log, mark))
    checks.append(check_native_tests(target, run, returncode=rc, emulator=target.emulator[0]))
    return TargetResult(**base, checks=tuple(checks), kernels_run=run.kernels)  # type: ignore[arg-type]


def _environment(target: Target, layout: Layout, opts: CrosscheckOptions) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("_PYTHON_HOST_PLATFORM", "MOSAICRT_LIBRARY")}
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(opts.jobs)
    if shutil.which("ccache"):
        env.setdefault("CCACHE_DIR", str(Layout.default(layout.root).ccache_dir))
        env.setdefault("CCACHE_BASEDIR", str(layout.root))
    if target.os == "windows":
        # wine keeps its Windows installation (~700 MB, created on first use) in the prefix.
        env.setdefault("WINEPREFIX", str(layout.work / "wine-prefix"))
        env.setdefault("WINEDEBUG", "-all")
        env.setdefault("WINEDLLOVERRIDES", "mscoree=;mshtml=")  # no Mono/Gecko install prompts
    return env


def _configure(
    matrix: Matrix,
    target: Target,
    layout: Layout,
    *,
    build_dir: Path,
    env: dict[str, str],
    log: Path,
    opts: CrosscheckOptions,
) -> None:
    core = matrix.component("core")
    cell = Cell(component=core, variant=core.variants[0], target=target)
    toolchain = conan_toolchain(cell, layout, env, log, out=layout.work / "conan" / target.name)
    args: list[str] = [
        "-G",
        "Ninja",
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DMOSAICRT_BUILD_TESTS={'ON' if opts.build_tests else 'OFF'}",
        "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
        f"-DCMAKE_CROSSCOMPILING_EMULATOR={';'.join(target.emulator)}",
    ]
    if toolchain is not None:
        args.append(f"--toolchain={toolchain}")
    if shutil.which("ccache"):
        args += ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
    args += opts.cmake_args
    # A cache configured with other arguments (an injected regression, another toolchain) is dropped:
    # CMake would otherwise keep stale -D values such as CMAKE_PROJECT_INCLUDE.
    stamp = build_dir / "crosscheck-args.json"
    if stamp.is_file() and stamp.read_text(encoding="utf-8") != json.dumps(args):
        (build_dir / "CMakeCache.txt").unlink(missing_ok=True)
        (build_dir / "mosaicrt_build_manifest.json").unlink(missing_ok=True)
    build_dir.mkdir(parents=True, exist_ok=True)
    (build_dir / "mosaicrt_build_manifest.json").unlink(missing_ok=True)
    _stream(
        [_tool("cmake"), "-S", layout.root / core.path, "-B", build_dir, *args],
        log=log,
        env=env,
        step="configure",
        say=None,
        prefix=target.name,
    )
    stamp.write_text(json.dumps(args), encoding="utf-8")


def _stream(
    cmd: Sequence[str | Path],
    *,
    log: Path,
    env: dict[str, str],
    step: str,
    say: Callable[[str], None] | None,
    prefix: str,
    check: bool = True,
) -> int:
    """Run ``cmd``, appending its output to ``log``; echo Ninja's progress lines through ``say``."""
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"\n$ {' '.join(map(str, cmd))}\n")
        fh.flush()
        try:
            proc = subprocess.Popen(
                list(map(str, cmd)),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                text=True,
                errors="replace",
            )
        except OSError as exc:
            raise CellFailure(step, f"cannot run {cmd[0]}: {exc.strerror}") from None
        with proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                fh.write(line)
                if say is not None and re.match(r"^\[\d+/\d+\] ", line):
                    say(f"  [{prefix}] {line.rstrip()[:150]}")
            rc = proc.wait()
    if check and rc != 0:
        raise CellFailure(step, f"{Path(str(cmd[0])).name} exited with {rc}")
    return rc


def _tool(name: str) -> str:
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else (shutil.which(name) or name)


def _ctest() -> str:
    cmake = Path(_tool("cmake"))
    sibling = cmake.parent / "ctest"
    return str(sibling) if sibling.exists() else _tool("ctest")


def _host_arch(host: Target | None) -> str | None:
    return host.arch if host else None


def _read_manifest(build_dir: Path) -> dict[str, object] | None:
    try:
        data = json.loads((build_dir / "mosaicrt_build_manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _read_compile_commands(build_dir: Path) -> list[dict[str, object]] | None:
    try:
        data = json.loads((build_dir / "compile_commands.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else None


def _collect_binaries(build_dir: Path) -> tuple[dict[str, BinaryInfo], list[str]]:
    """Linked outputs (executables, shared libraries, DLLs) outside CMake's own scratch folders."""
    found: dict[str, BinaryInfo] = {}
    unreadable: list[str] = []
    for dirpath, dirnames, filenames in os.walk(build_dir):
        dirnames[:] = [d for d in dirnames if d != "CMakeFiles" and not d.startswith(".")]
        for name in filenames:
            path = Path(dirpath) / name
            if path.suffix in (".o", ".obj", ".a") or path.is_symlink():
                continue
            try:
                info = read_binary(path)
            except (OSError, BinaryFormatError) as exc:
                unreadable.append(f"{path.name}: {exc}")
                continue
            if info is not None and info.kind != "relocatable":
                found[path.relative_to(build_dir).as_posix()] = info
    return found, unreadable


def _read_from(log: Path, offset: int) -> str:
    with log.open("rb") as fh:
        fh.seek(offset)
        return fh.read().decode("utf-8", errors="replace")


def _first_error(log: Path, offset: int = 0) -> str:
    """The first compiler/linker/CMake error line after ``offset`` (for the one-line reason)."""
    lines = [line for line in _read_from(log, offset).splitlines() if not line.startswith("$ ")]
    for pattern in (r"error:|undefined reference|CMake Error|Error:", r"FAILED:"):
        for line in lines:
            if re.search(pattern, line):
                return line.strip()[:200]
    return "see the log"


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
