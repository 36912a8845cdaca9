"""The crosscheck's pure checks: each takes what a build left behind and returns a :class:`Check`.

No I/O here: the driver reads the build folder and hands these functions parsed data, so every
known regression shape can be tested by feeding them the data that shape produces.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import platforms
from ..binaries import BinaryInfo, Symbol
from ..matrix import Target
from .model import CAUSES, Check

#: Sources that only the Arm64 backend compiles (the same rule as core/CMakeLists.txt's ISA filter).
ARM_SOURCE = re.compile(r"_(neon|dotprod|i8mm|sme)[a-z0-9_]*\.cc$")
#: Compile-command fragments that only an arm64 build may carry.
ARM_FLAGS = re.compile(r"MOSAICRT_ARM64_KERNELS|\+dotprod|\+i8mm|\+sme|-march=armv8|-march=armv9")
#: Symbols of the Arm64 backend: mosaicrt-namespaced (C++ ``mrt::`` or C ``mrt_``) names that
#: carry an Arm ISA word. Generic code must reach the backend only through names without one.
ARM_SYMBOL = re.compile(r"(?i)(neon|dotprod|i8mm|sme2?(?![a-z]))")
_MRT_NAME = re.compile(r"(3mrt|^_?mrt_|^_?Mrt)")
_KERNEL_LINE = re.compile(r"^(?P<family>\w+) kernel (?P<kernel>[\w.+-]+): (?:(?P<cases>\d+) cases )?OK\s*$")
_CTEST_RESULT = re.compile(
    r"^\s*\d+/\d+ Test\s+#\d+: (?P<name>\S+) \.*\s*(?P<stars>\*{3})?(?P<status>Passed|Failed|Not Run|Timeout|"
    r"Exception: [\w ]+?|Subprocess aborted|Child aborted)\s+[\d.]+ sec"
)
_CTEST_START = re.compile(r"^\s*Start\s+(?P<number>\d+): (?P<name>\S+)\s*$")
_CTEST_LINE = re.compile(r"^(?P<number>\d+): (?P<text>.*)$")
#: how many lines of a failed test's output its failure names
_WHY_LINES = 3
#: what ctest -V itself prints among a test's numbered lines
_CTEST_OWN_LINES = ("Test command:", "Working Directory:", "Test timeout", "Environment variables:")
_UNDEFINED_REF = re.compile(r"undefined reference to [`'‘](?P<sym>[^'’`]+)['’]")


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
    #: each test's own output lines (ctest -V), by name
    outputs: dict[str, tuple[str, ...]] = field(default_factory=dict)


def parse_ctest(output: str) -> TestRun:
    statuses: dict[str, str] = {}
    kernels: list[str] = []
    names: dict[str, str] = {}  # test number -> name
    lines: dict[str, list[str]] = {}  # test number -> its output
    for raw in output.splitlines():
        m = _CTEST_RESULT.match(raw)
        if m:
            statuses[m["name"]] = m["status"].strip()
            continue
        start = _CTEST_START.match(raw)
        if start:
            names[start["number"]] = start["name"]
            continue
        numbered = _CTEST_LINE.match(raw)  # ctest -V prefixes test output with the test number
        line = numbered["text"] if numbered else raw
        if numbered:
            lines.setdefault(numbered["number"], []).append(line)
        k = _KERNEL_LINE.match(line)  # "<family> kernel <registry name>: [N cases] OK"
        if k:
            kernels.append(f"{k['family']}:{k['kernel']}")
    outputs = {names.get(n, f"test {n}"): tuple(v) for n, v in lines.items()}
    return TestRun(statuses=statuses, kernels=tuple(dict.fromkeys(kernels)), outputs=outputs)


def _why(output: Sequence[str]) -> str:
    """What a failed test said: its FAIL lines and an emulator's crash line (wine's dump ends in module lists), else
    its last lines."""
    said = [line.strip() for line in output if line.strip() and not line.startswith(_CTEST_OWN_LINES)]
    fails = [line for line in said if line.startswith(("FAIL", "error", "Error")) or "Unhandled" in line]
    shown = fails[:_WHY_LINES] if fails else said[-_WHY_LINES:]
    return " | ".join(shown) if shown else "no output"


def check_native_tests(target: Target, run: TestRun, *, returncode: int, emulator: str) -> Check:
    if not run.statuses:
        return Check(
            name="native tests", outcome="fail", detail=f"ctest ran no test (exit {returncode}; see the log)"
        )
    bad = {n: s for n, s in run.statuses.items() if s != "Passed"}
    problems = []
    for name, status in bad.items():
        if status.startswith(("Exception", "Child aborted", "Subprocess aborted")):
            problem = f"{name} crashed under {emulator} ({status})"
        elif status == "Timeout":
            problem = f"{name} timed out under {emulator}"
        else:
            problem = f"{name} {status.lower()} under {emulator}"
        if name in run.outputs:
            problem += f" [it said: {_why(run.outputs[name])}]"
        problems.append(problem)
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
