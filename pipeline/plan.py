"""Which cells this machine builds, and why the others are skipped.

The *host* target (the machine running the pipeline) only decides what can be built here
and what is built by default; what gets compiled into a binary is decided from the cell's
target by its toolchain, never from the host.
"""

from __future__ import annotations

import importlib.metadata
import platform
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from . import platforms
from .errors import UsageError, choices_hint
from .matrix import Cell, Matrix, Sdk, Target

Availability = Literal["buildable", "skipped"]
#: Why a cell is skipped. ``planned`` and ``not-selected`` are choices; the others are this machine's limits
#: (a cell the user asked for that is skipped for one of those is an error).
SkipKind = Literal["planned", "not-selected", "other-build-host", "toolchain", "sdk"]
MACHINE_LIMITS: tuple[SkipKind, ...] = ("other-build-host", "toolchain", "sdk")


@dataclass(frozen=True, kw_only=True)
class PlannedCell:
    cell: Cell
    availability: Availability
    skip: SkipKind | None = None  #: why skipped (None when buildable)
    reason: str | None = None  #: the same for people: what is missing and how to get it
    #: CMake defines the cell's SDKs resolved on this machine (e.g. CMAKE_CUDA_COMPILER=<nvcc>)
    sdk_defines: tuple[tuple[str, str], ...] = ()

    @property
    def blocked_by_machine(self) -> bool:
        return self.skip in MACHINE_LIMITS


@dataclass(frozen=True, kw_only=True)
class Selection:
    """What the user asked for (empty = the default: every cell of the host target)."""

    targets: tuple[str, ...] = ()
    components: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()


def host_target(matrix: Matrix, *, system: str | None = None, machine: str | None = None) -> Target | None:
    """The matrix target describing this machine, or None if it is not a declared target.

    Several targets may share an os/arch (glibc and musl Linux): the host is the first one declared
    whose C library is this interpreter's.
    """
    os_found = platforms.os_of_system(system or platform.system())
    arch_found = platforms.arch_of_machine(machine or platform.machine())
    if os_found is None or arch_found is None:
        return None
    libc = "glibc" if os_found.name != "linux" or platform.libc_ver()[0] == "glibc" else "musl"
    for t in matrix.targets:
        if (t.os, t.arch) == (os_found.name, arch_found.name) and (t.os != "linux" or t.libc == libc):
            return t
    return None


def find_executable(exe: str, dists: Sequence[str]) -> str | None:
    """``exe`` on PATH, else ``bin/<exe>`` among the files of an installed distribution of ``dists``."""
    found = shutil.which(exe)
    if found is not None:
        return found
    names = {exe, f"{exe}.exe"}
    for dist_name in dists:
        try:
            dist = importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for f in dist.files or ():
            if f.name in names and f.parent.name == "bin":
                path = Path(str(dist.locate_file(f)))
                if path.is_file():
                    return str(path.resolve())
    return None


def sdk_cmake_defines(sdk: Sdk) -> list[tuple[str, str]]:
    """(CMake variable, resolved executable path) pairs an SDK hands to the build."""
    out = []
    for exe, var in sdk.cmake_executables:
        path = find_executable(exe, sdk.executable_dists)
        if path is not None:
            out.append((var, path))
    return out


def sdk_missing(matrix: Matrix, names: Sequence[str]) -> str | None:
    """A skip reason naming the first undetected SDK and how to get it, or None."""
    for name in names:
        sdk = matrix.sdk(name)
        for exe in sdk.executables:
            if find_executable(exe, sdk.executable_dists) is None:
                where = f" or in {', '.join(sdk.executable_dists)}" if sdk.executable_dists else ""
                return f"SDK missing: {name} ({exe} not on PATH{where}; fix: {sdk.hint})"
        for dist in sdk.python_dists:
            try:
                importlib.metadata.distribution(dist)
            except importlib.metadata.PackageNotFoundError:
                return f"SDK missing: {name} (Python package {dist} not installed; fix: {sdk.hint})"
    return None


def toolchain_missing(
    target: Target, host: Target | None, *, component_toolchain: str = "target"
) -> tuple[SkipKind, str] | None:
    host_name = host.name if host else "this machine"
    if host is None or host.name not in target.build_hosts:
        return "other-build-host", (
            f"{target.name} wheels are built on {' or '.join(target.build_hosts)}"
            f" (CI runner {target.ci_runner}), not on {host_name}"
        )
    from .toolchains import toolchain_problem

    problem = toolchain_problem(target, component_toolchain=component_toolchain)
    return ("toolchain", problem) if problem else None


def validate_selection(matrix: Matrix, sel: Selection) -> None:
    """Unknown names are usage errors with a suggestion (retired EPs get their migration hint)."""
    for t in sel.targets:
        matrix.target(t)
    for c in sel.components:
        matrix.component(c)
    known_variants = {v.name for c in matrix.components for v in c.variants}
    for v in sel.variants:
        if v not in known_variants:
            raise UsageError(f"unknown variant '{v}'{choices_hint(v, known_variants)}")


def plan(matrix: Matrix, sel: Selection, host: Target | None) -> list[PlannedCell]:
    """Every declared cell with its availability on this machine under the selection."""
    validate_selection(matrix, sel)
    wanted_targets = set(sel.targets) or ({host.name} if host else set())
    out: list[PlannedCell] = []
    for cell in matrix.cells():
        skip = _skip_reason(matrix, cell, host)
        if skip is None and not _selected(cell, sel, wanted_targets):
            if cell.target.name not in wanted_targets:
                skip = "not-selected", f"not selected (buildable here: nox -s build -- --target {cell.target.name})"
            else:
                skip = "not-selected", "not selected (--component/--variant)"
        sdks = () if skip else cell.component.sdks
        defines = tuple(d for n in sdks for d in sdk_cmake_defines(matrix.sdk(n)))
        out.append(
            PlannedCell(
                cell=cell,
                availability="skipped" if skip else "buildable",
                skip=skip[0] if skip else None,
                reason=skip[1] if skip else None,
                sdk_defines=defines,
            )
        )
    return out


def _selected(cell: Cell, sel: Selection, wanted_targets: set[str]) -> bool:
    return (
        cell.target.name in wanted_targets
        and (not sel.components or cell.component.name in sel.components)
        and (not sel.variants or cell.variant.name in sel.variants)
    )


def _skip_reason(matrix: Matrix, cell: Cell, host: Target | None) -> tuple[SkipKind, str] | None:
    if cell.variant.planned:
        return "planned", f"planned: {cell.variant.planned}"
    missing_sdk = sdk_missing(matrix, cell.component.sdks)
    toolchain = toolchain_missing(cell.target, host, component_toolchain=cell.component.toolchain)
    return toolchain or (("sdk", missing_sdk) if missing_sdk else None)


def is_requested(pc: PlannedCell, sel: Selection, host: Target | None) -> bool:
    """True when the user explicitly named this cell (by target, component or variant)."""
    c = pc.cell
    wanted_targets = set(sel.targets) or ({host.name} if host else set())
    return bool(sel.targets or sel.components or sel.variants) and (
        c.target.name in wanted_targets
        and (not sel.components or c.component.name in sel.components)
        and (not sel.variants or c.variant.name in sel.variants)
    )
