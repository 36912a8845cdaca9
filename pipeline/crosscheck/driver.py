"""The crosscheck driver: for each target, toolchain → configure → build → checks → native tests.

Each target's row is one :class:`_Row`, created once with every check "not run" and filled in as the
steps go; a step that fails ends the target with the remaining checks saying why they did not run.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import toolchains
from ..build import CellFailure
from ..errors import choices_hint
from ..layout import Layout
from ..matrix import Matrix, Target
from ..toolchains import Installer, ensure_toolchain, system_installer
from . import cmake
from .checks import check_arm_kernels, check_machine, check_native_tests, parse_ctest, undefined_arm_refs
from .model import CAUSES, CHECKS, Check, CrosscheckReport, Stage, TargetResult
from .report import write_report


@dataclass(frozen=True, kw_only=True)
class CrosscheckOptions:
    jobs: int = field(default_factory=toolchains.default_jobs)
    stage: Stage = "test"
    build_tests: bool = True  #: also build the native test programs (off: only the library)
    cmake_args: tuple[str, ...] = ()  #: extra CMake arguments (the regression tests inject through these)
    test_timeout_s: int = 1200
    quiet: bool = False
    #: runs the target's wheel suite (its core wheel under emulation) after the native tests; None: not asked
    wheel_suite: Callable[[Target], Check] | None = None


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
            unknown.append(f"unknown target '{name}'{choices_hint(name, eligible_names)} (not in matrix/targets.toml)")
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
    on_target: Callable[[TargetResult], None] | None = None,
) -> CrosscheckReport:
    """Check every target (each gets its row, whatever happens to the others); writes the JSON report."""
    start = time.monotonic()
    installer = installer or system_installer()
    results = []
    for target in targets:
        result = _check_target(matrix, target, layout, host=host, opts=opts, installer=installer)
        results.append(result)
        if on_target is not None:
            on_target(result)
    report = CrosscheckReport(
        host=host.name if host else None,
        stage=opts.stage,
        duration_s=time.monotonic() - start,
        results=tuple(results),
        unknown=tuple(unknown),
    )
    write_report(report, layout)
    return report


def probe_emulator(target: Target, env: dict[str, str]) -> str | None:
    """None when the emulator answers ``--version`` (or none is needed) and is ready for tests run side by side;
    else one line saying what is wrong. Wine makes its prefix on first use, and two programs started at once on
    a new prefix race for it (one dies: "chdir to .../server-...: No such file"), so it is made here first."""
    if not target.emulator:
        return None
    exe = target.emulator[0]
    steps = [[exe, "--version"]]
    if target.os_spec.cross_emulator == "wine":
        steps.append([*target.emulator, "wineboot", "--init"])
    for cmd in steps:
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"emulator {exe} does not start: {exc}"
        if proc.returncode != 0:
            last = (proc.stderr or proc.stdout).strip().splitlines()
            return f"emulator {exe} is broken: `{shlex.join(cmd)}` exited {proc.returncode}" + (
                f" ({last[-1]})" if last else ""
            )
    return None


class _Row:
    """One target's result, made once and filled in check by check."""

    def __init__(self, target: Target) -> None:
        self.target = target.name
        self.started = time.monotonic()
        self.checks: dict[str, Check] = {}
        self.build_dir: str | None = None
        self.log: str | None = None
        self.kernels: tuple[str, ...] = ()

    def set(self, check: Check) -> None:
        self.checks[check.name] = check

    def done(self, why_not_run: str = "") -> TargetResult:
        """The result; checks not set by now did not run, for ``why_not_run``."""
        checks = tuple(self.checks.get(n) or Check(name=n, outcome="not run", detail=why_not_run) for n in CHECKS)
        return TargetResult(
            target=self.target,
            checks=checks,
            build_dir=self.build_dir,
            log=self.log,
            kernels_run=self.kernels,
            duration_s=time.monotonic() - self.started,
        )


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

    row = _Row(target)
    status = ensure_toolchain(target, installer, say)
    row.set(Check(name="toolchain", outcome="pass" if status.ok else "fail", detail=status.detail))
    if not status.ok:
        return row.done("no toolchain")

    # Same depth below the repository as the wheel build's cell folders (build/pipeline/cells/<slug>/cmake):
    # ccache's base_dir makes paths relative to the build folder, so equal depth means shared cache hits.
    build_dir = layout.work / "cells" / target.name / "cmake"
    log = layout.work / "logs" / f"{target.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"# crosscheck log for {target.name}\n", encoding="utf-8")
    row.build_dir, row.log = _rel(build_dir, layout.root), _rel(log, layout.root)
    env = cmake.environment(target, layout, opts.jobs)
    host_arch = host.arch if host else None

    say(f"[{target.name}] configuring in {row.build_dir} (log: {row.log})")
    try:
        cmake.configure(
            matrix, target, layout, build_dir=build_dir, env=env, log=log,
            build_tests=opts.build_tests, cmake_args=opts.cmake_args,
        )  # fmt: skip
    except CellFailure as exc:
        row.set(Check(name="build", outcome="fail", detail=f"{exc}; {cmake.first_error(log)} (log {row.log})"))
        manifest = cmake.read_manifest(build_dir)
        if manifest:  # a configure that decided the ISA and failed later still shows that decision
            commands = cmake.read_compile_commands(build_dir)
            arm = check_arm_kernels(target, host_arch=host_arch, manifest=manifest, compile_commands=commands,
                                    binaries=None)  # fmt: skip
            row.set(arm)
        return row.done("not built")
    manifest, commands = cmake.read_manifest(build_dir), cmake.read_compile_commands(build_dir)
    if opts.stage == "configure":
        row.set(Check(name="build", outcome="pass", detail="configured only"))
        row.set(check_arm_kernels(target, host_arch=host_arch, manifest=manifest, compile_commands=commands,
                                  binaries=None))  # fmt: skip
        return row.done("--stage configure")

    say(f"[{target.name}] building with {opts.jobs} job(s)")
    mark = log.stat().st_size
    build_failure: str | None = None
    try:
        cmd: list[str | Path] = [cmake.tool("cmake"), "--build", build_dir, "--parallel", str(opts.jobs)]
        if not opts.build_tests:
            cmd += ["--target", "mosaicrt"]
        cmake.stream(cmd, log=log, env=env, step="build", say=say if not opts.quiet else None, prefix=target.name)
    except CellFailure as exc:
        build_failure = str(exc)
    build_log = cmake.read_from(log, mark)
    binaries, unreadable = cmake.collect_binaries(build_dir)
    if build_failure:
        refs = undefined_arm_refs(build_log)
        why = f"{build_failure}; {cmake.first_error(log, mark)}"
        if refs:
            why = f"link failed: {CAUSES['arm-symbol-ref']}: undefined {', '.join(refs[:3])}"
        row.set(Check(name="build", outcome="fail", detail=f"{why} (log {row.log})"))
    else:
        ninja = sum(1 for line in build_log.splitlines() if re.match(r"^\[\d+/\d+\]", line))
        row.set(Check(name="build", outcome="pass", detail=f"{ninja} steps"))
    if unreadable:
        row.set(Check(name="machine type", outcome="fail", detail="; ".join(unreadable)))
    else:
        row.set(check_machine(target, binaries))
    row.set(check_arm_kernels(target, host_arch=host_arch, manifest=manifest, compile_commands=commands,
                              binaries=binaries, link_log=build_log))  # fmt: skip
    if build_failure:
        return row.done("build failed")
    if opts.stage == "build" or not opts.build_tests:
        return row.done("--stage build" if opts.stage == "build" else "tests not built")

    broken = probe_emulator(target, env)
    if broken:
        row.set(Check(name="native tests", outcome="fail", detail=broken))
        return row.done()
    runner = " ".join(target.emulator) or "natively"
    say(f"[{target.name}] running the native tests {'under ' + runner if target.emulator else runner}")
    mark = log.stat().st_size
    rc = cmake.stream(
        # the tests run side by side (--parallel): under an emulator each is one slow process, and ctest -V
        # numbers every output line, so each test's lines are still told apart
        [cmake.ctest(), "--test-dir", build_dir, "-V", "--parallel", str(opts.jobs),
         "--timeout", str(opts.test_timeout_s)],
        log=log, env=env, step="ctest", say=None, prefix=target.name, check=False,
    )  # fmt: skip
    run = parse_ctest(cmake.read_from(log, mark))
    row.set(check_native_tests(target, run, returncode=rc, emulator=target.emulator[0] if target.emulator else "host"))
    row.kernels = run.kernels
    if opts.wheel_suite is None:
        return row.done("--wheel-suite not given")
    say(f"[{target.name}] the core wheel's suite under emulation")
    row.set(opts.wheel_suite(target))
    return row.done()


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
