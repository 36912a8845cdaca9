"""``python -m pipeline <step>``: the command line the nox sessions call.

Each step loads the matrix once, runs, prints a table, writes its JSON report, and returns
an exit code from :class:`pipeline.errors.ExitCode`. Errors are one line on stderr.

(A little over ~400 lines: every step's arguments and the wiring from one step's result to the
next — build → test → emulated tests → release — are kept in one place so the flows can be read
against ``python -m pipeline -h``.)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import report
from .errors import ExitCode, PipelineError, TestFailure, UsageError
from .layout import Layout
from .matrix import Matrix, Target, load_matrix
from .plan import PlannedCell, Selection, host_target, plan

if TYPE_CHECKING:
    from .build import BuildReport
    from .crosscheck import Check
    from .wheeltest import TestReport

REPO_ROOT = Path(__file__).resolve().parent.parent


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def _parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("--root", type=Path, default=REPO_ROOT, help="repository root (default: this checkout)")
    common.add_argument("--matrix-dir", type=Path, help="matrix folder (default: <root>/matrix)")
    common.add_argument("--dist-dir", type=Path, help="wheel output folder (default: <root>/dist)")
    common.add_argument("--work-dir", type=Path, help="state/logs/reports folder (default: <root>/build/pipeline)")
    p = _Parser(prog="python -m pipeline", description=__doc__)
    sub = p.add_subparsers(dest="step", required=True, parser_class=_Parser)

    def selection(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--target", action="append", default=[], help="target name (repeatable; default: host)")
        sp.add_argument("--component", action="append", default=[], help="component name (repeatable)")
        sp.add_argument("--variant", action="append", default=[], help="variant name (repeatable)")

    m = sub.add_parser("matrix", parents=[common], help="print the expanded matrix and this host's view of it")
    selection(m)
    m.add_argument("--json", action="store_true", help="print JSON for CI instead of the table")

    b = sub.add_parser(
        "build", parents=[common], help="build the selected cells (default: every cell of the host target)"
    )
    selection(b)
    b.add_argument("--force", action="store_true", help="rebuild even when the inputs are unchanged")
    b.add_argument("--jobs", type=int, help="parallel compile jobs (default: $MOSAICRT_BUILD_JOBS or CPU count)")

    t = sub.add_parser(
        "test", parents=[common], help="install each wheel by file into a fresh venv per Python and test it"
    )
    selection(t)
    t.add_argument("--wheel", action="append", type=Path, default=[], help="test this wheel file (repeatable)")
    t.add_argument("--python", action="append", default=[], help="CPython version to test (default: matrix)")
    t.add_argument("--force", action="store_true", help="retest even when a passing record exists")
    x = sub.add_parser(
        "crosscheck",
        parents=[common],
        help="build the core + native tests for each cross target, check binaries and Arm kernels, run under emulation",
    )
    x.add_argument(
        "--target", action="append", default=[], help="crosscheck target (repeatable; default: every crosscheck target)"
    )
    x.add_argument("--jobs", type=int, help="parallel compile jobs (default: $MOSAICRT_BUILD_JOBS or CPU count)")
    x.add_argument(
        "--stage",
        choices=("configure", "build", "test"),
        default="test",
        help="stop after this step (configure: manifest + compile commands only; default: test)",
    )
    x.add_argument("--library-only", action="store_true", help="build only the library, not the native test programs")
    x.add_argument(
        "--wheel-suite",
        action="store_true",
        help="also build each target's core wheel and run the wheel suite under emulation (nox -s test -- --target T)",
    )
    x.add_argument(
        "--cmake-arg",
        action="append",
        default=[],
        help="extra CMake argument, e.g. -DCMAKE_PROJECT_INCLUDE=x.cmake (repeatable; the regression tests use it)",
    )
    w = sub.add_parser(
        "workflows",
        parents=[common],
        help="generate .github/workflows/ from matrix/ (--check: compare; --rehearse JOB: run a job's steps here)",
    )
    w.add_argument("--check", action="store_true", help="fail if the committed files differ from the generated ones")
    w.add_argument(
        "--rehearse",
        action="append",
        default=[],
        metavar="JOB",
        help="run this linux-x86_64 job's steps in a fresh clone of HEAD (repeatable, in order; e.g. plan)",
    )
    w.add_argument("--python", help="with --rehearse: the CPython of a job's python matrix (default: one found here)")
    w.add_argument("--rehearsal-dir", type=Path, help="with --rehearse: work folder (default: build/rehearsal)")
    whl = sub.add_parser(
        "wheels", parents=[common], help="build + test the selected cells with cibuildwheel (what CI build jobs run)"
    )
    selection(whl)
    whl.add_argument(
        "--print-build-identifiers", action="store_true", help="only print what cibuildwheel would build per cell"
    )
    r = sub.add_parser("records", parents=[common], help="show each wheel's test status from its sha256 records")
    selection(r)
    r.add_argument("--wheel", action="append", type=Path, default=[], help="show this wheel file (repeatable)")
    _release_parsers(sub, common, selection)
    fz = sub.add_parser(
        "fuzz", parents=[common], help="build the libFuzzer targets (clang + ASan + UBSan), fuzz each, report"
    )
    fz.add_argument("--target", action="append", default=[], help="fuzz target (repeatable; default: all)")
    budget = fz.add_mutually_exclusive_group()
    budget.add_argument("--seconds", type=int, help="fuzz each target this long (default: 60)")
    budget.add_argument("--runs", type=int, help="fuzz each target for this many executions")
    fz.add_argument("--jobs", type=int, default=2, help="parallel compile jobs (default: 2)")
    fz.add_argument("--seed-limit", type=int, help="use only the first N onnx node cases as seeds")
    fz.add_argument("--install-clang", action="store_true", help="apt-get install clang when it is missing (root)")
    return p


def _release_parsers(
    sub: Any,
    common: argparse.ArgumentParser,
    selection: Callable[[argparse.ArgumentParser], None],
) -> None:
    rel = sub.add_parser(
        "release",
        parents=[common],
        help="build and test what is missing, then gate, attest, sign, verify and publish to an index, and tag",
    )
    selection(rel)
    rel.add_argument("--no-build", action="store_true", help="release what is already built and tested")
    rel.add_argument("--jobs", type=int, help="parallel compile jobs for the build step")
    rel.add_argument("--repository", help="publish to this index from ~/.pypirc (twine --repository)")
    rel.add_argument("--repository-url", help="publish to this upload URL (twine --repository-url)")
    rel.add_argument("--index-url", help="simple index URL of --repository/--repository-url, to read what it holds")
    rel.add_argument("--no-tag", action="store_true", help="do not create the <component>-v<version> git tags")
    rel.add_argument("--allow-dirty", action="store_true", help="release uncommitted sources to a shared index")
    rel.add_argument("--allow-perf-regression", action="store_true",
                     help="release although the benchmark record is slower than the last release's on this machine"
                          " (recorded in the provenance)")  # fmt: skip
    rel.add_argument("--trust-root", action="append", type=Path, default=[], help="trust file (default: repo + local)")
    rel.add_argument("--stop-index", action="store_true", help="stop the local index and exit")
    v = sub.add_parser("verify", parents=[common], help="check wheels (files, URLs or an index) against the trust root")
    v.add_argument("what", nargs="+", help="a wheel file, a wheel URL, or a simple index URL")
    v.add_argument("--project", action="append", default=[], help="with an index URL: only this project")
    v.add_argument("--trust-root", action="append", type=Path, default=[], help="trust file (default: repo + local)")
    v.add_argument("--no-local-trust", action="store_true", help="ignore this machine's trusted-keys.json")
    c = sub.add_parser("catalog", parents=[common], help="the winml EP catalog: status, root signing, serving")
    c.add_argument("action", choices=("status", "sign-root", "serve", "stop"),
                   help="status: versions and targets; sign-root: the explicit (offline) root-signing step;"
                        " serve / stop: the local server")
    c.add_argument("--root-key", action="append", type=Path, default=[],
                   help="sign-root: an ed25519 PEM root key (default: this machine's development root key)")
    k = sub.add_parser("keys", parents=[common], help="show the signing key and trust roots; make a CI or dev key")
    k.add_argument("--generate-ci", action="store_true", help="print a new CI key and its trust-root entry")
    k.add_argument("--create-dev", action="store_true", help="create this machine's development signing key")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        return _dispatch(args)
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception:  # a bug in the pipeline itself: show everything
        traceback.print_exc()
        print("error: internal error in the pipeline (traceback above)", file=sys.stderr)
        return int(ExitCode.INTERNAL)


def _dispatch(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    if args.step == "fuzz":
        from .fuzz import run_fuzz

        work = (args.work_dir or root / "build" / "fuzz").resolve()
        with _exclusive(work):
            run_fuzz(root, work, names=args.target, runs=args.runs, seconds=args.seconds, jobs=args.jobs,
                     node_case_limit=args.seed_limit, install=args.install_clang,
                     report=root / "build" / "pipeline" / "reports" / "fuzz.json")
        return 0
    if args.step in ("verify", "keys"):
        from .release_cli import keys, verify

        return verify(args, root) if args.step == "verify" else keys(args, root)
    matrix = load_matrix(root, args.matrix_dir)
    base = Layout.default(root)
    layout = Layout(root=root, dist=(args.dist_dir or base.dist).resolve(), work=(args.work_dir or base.work).resolve())
    host = host_target(matrix)
    sel = Selection(
        targets=tuple(getattr(args, "target", ())),
        components=tuple(getattr(args, "component", ())),
        variants=tuple(getattr(args, "variant", ())),
    )
    try:
        return _run_step(args, matrix, sel, host=host, layout=layout, root=root)
    finally:
        _refresh_page(matrix, layout, host, say=not getattr(args, "json", False))


def _refresh_page(matrix: Matrix, layout: Layout, host: Target | None, *, say: bool) -> None:
    """Every step leaves build/pipeline/reports/index.html current (one row per cell, all stages)."""
    from .report_page import write_page

    try:
        path = write_page(matrix, layout, host=host.name if host else None)
    except OSError as exc:  # the page is a view: never let it turn a step's result into a failure
        print(f"note: the report page was not written ({exc})", file=sys.stderr)
        return
    if say:
        print(f"report page: {path}")


def _run_step(
    args: argparse.Namespace, matrix: Matrix, sel: Selection, *, host: Target | None, layout: Layout, root: Path
) -> int:
    if args.step == "matrix":
        return _matrix(matrix, sel, host, as_json=args.json)
    if args.step == "records":
        return _records(matrix, sel, host, layout, wheels=args.wheel)
    if args.step == "workflows":
        return _workflows(matrix, args, root)
    if args.step == "wheels":
        return _wheels(matrix, sel, layout, identifiers_only=args.print_build_identifiers)
    if args.step == "crosscheck":
        work = (args.work_dir or root / "build" / "crosscheck").resolve()
        xlayout = Layout(root=root, dist=layout.dist, work=work)
        with _exclusive(work):
            return _crosscheck(matrix, host, xlayout, args, wheels=layout)
    with _exclusive(layout.work):
        if args.step == "release":
            from .release_cli import release

            return release(matrix, sel, host, layout, args)
        if args.step == "catalog":
            from .release_cli import catalog

            return catalog(args, layout)
        if args.step == "build":
            return _build(matrix, sel, host, layout, force=args.force, jobs=args.jobs)
        return _test(matrix, sel, host, layout, wheels=args.wheel, pythons=args.python, force=args.force)




@contextlib.contextmanager
def _exclusive(work: Path) -> Iterator[None]:
    """One build/test run at a time per work folder (they share CMake build dirs, venvs and state)."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks; runs are not expected to overlap there
        yield
        return
    work.mkdir(parents=True, exist_ok=True)
    with (work / ".lock").open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another pipeline run using {work} to finish ...", flush=True)
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _workflows(matrix: Matrix, args: argparse.Namespace, root: Path) -> int:
    from .workflow import drift, generate, write

    generated = generate(matrix, args.matrix_dir)
    if args.rehearse:
        from .rehearse import rehearse

        work = (args.rehearsal_dir or root / "build" / "rehearsal").resolve()
        for job in args.rehearse:
            rehearse(root, matrix, generated, job, work=work, python=args.python)
        return 0
    if args.check:
        stale = drift(root, generated)
        if stale:
            raise UsageError(
                f"{', '.join(stale)} differ from what matrix/ generates: run `nox -s workflows` and commit the result"
            )
        print(f"up to date: {', '.join(generated.files)}")
        return 0
    changed = write(root, generated)
    print(f"wrote {', '.join(changed)}" if changed else f"up to date: {', '.join(generated.files)}")
    return 0


def _wheels(matrix: Matrix, sel: Selection, layout: Layout, *, identifiers_only: bool) -> int:
    from .cibw import check_config, print_identifiers, run_wheels
    from .plan import validate_selection
    from .workflow import cibuildwheel_cells

    validate_selection(matrix, sel)
    cells = [
        c
        for c in cibuildwheel_cells(matrix)
        if (not sel.targets or c.target.name in sel.targets)
        and (not sel.components or c.component.name in sel.components)
        and (not sel.variants or c.variant.name in sel.variants)
    ]
    if not cells:
        raise UsageError(
            "no cibuildwheel cell matches the selection (see `nox -s matrix`; a variant is built by `nox -s build`)"
        )
    if identifiers_only:
        for cell in cells:
            check_config(matrix, cell)
            print(f"{cell.id}: {' '.join(print_identifiers(matrix, cell))}")
        return 0
    return run_wheels(matrix, cells, layout.dist)


def _matrix(matrix: Matrix, sel: Selection, host: Target | None, *, as_json: bool) -> int:
    planned = plan(matrix, sel, host)
    name = host.name if host else None
    print(report.matrix_json(matrix, planned, name) if as_json else report.matrix_table(matrix, planned, name))
    return 0


def run_build(
    matrix: Matrix,
    sel: Selection,
    host: Target | None,
    layout: Layout,
    *,
    force: bool = False,
    jobs: int | None = None,
    check_only: bool = False,
) -> tuple[BuildReport, list[PlannedCell]]:
    """The build step; its report (each cell's wheel and build record) is what later steps work on."""
    from .build import BuildOptions, build

    planned = plan(matrix, sel, host)
    opts = BuildOptions(force=force, jobs=jobs, check_only=check_only, policy=matrix.policy)
    result = build(planned, layout, host=host, opts=opts)
    print(report.build_table(result))
    print(f"build report: {layout.build_report}")
    return result, planned


def _build(
    matrix: Matrix, sel: Selection, host: Target | None, layout: Layout, *, force: bool, jobs: int | None
) -> int:
    from .build import raise_for_report

    result, planned = run_build(matrix, sel, host, layout, force=force, jobs=jobs)
    raise_for_report(result, planned, sel, layout, host)
    return 0


def _wheel_suite_check(matrix: Matrix, host: Target | None, layout: Layout, target: Target, jobs: int | None) -> Check:
    """The crosscheck's last column: the target's core wheel (built as `nox -s build` builds it, into
    ``layout``) and its wheel suite under emulation, recorded like `nox -s test -- --target T` records it."""
    from .crosscheck import Check
    from .emulated import run_emulated
    from .wheeltest import suites_for

    problem = _emulation_problem(target)
    if problem:
        return Check(name="wheel suite", outcome="not run", detail=problem)
    try:
        built, _ = run_build(matrix, Selection(targets=(target.name,), components=("core",)), host, layout, jobs=jobs)
        cell = next((c for c in built.wheels() if c.cell.target.name == target.name and c.wheel), None)
        if cell is None or cell.wheel is None:
            return Check(name="wheel suite", outcome="fail", detail=f"no core wheel was built ({layout.build_report})")
        suite = suites_for(matrix, [cell.wheel]).get(cell.wheel.name)
        record, _ = run_emulated(cell.wheel, target, layout, suite=suite, emulator=target.suite_emulator or None)
    except PipelineError as exc:
        return Check(name="wheel suite", outcome="fail", detail=str(exc))
    c = record.counts
    detail = f"{c.passed}/{c.tests} passed, {c.skipped} skipped"
    if record.outcome != "passed":
        return Check(name="wheel suite", outcome="fail", detail=f"{detail}; {record.reason} (log {record.log})")
    return Check(name="wheel suite", outcome="pass", detail=detail)


def _crosscheck(
    matrix: Matrix, host: Target | None, layout: Layout, args: argparse.Namespace, *, wheels: Layout
) -> int:
    from .crosscheck import (
        CrosscheckOptions,
        crosscheck,
        crosscheck_report_path,
        format_table,
        raise_for_report,
        select_targets,
    )

    targets, unknown = select_targets(matrix, args.target)
    opts = CrosscheckOptions(stage=args.stage, build_tests=not args.library_only, cmake_args=tuple(args.cmake_arg))
    if args.jobs is not None:
        opts = dataclasses.replace(opts, jobs=max(1, args.jobs))
    if args.wheel_suite:
        opts = dataclasses.replace(opts, wheel_suite=lambda t: _wheel_suite_check(matrix, host, wheels, t, args.jobs))
    result = crosscheck(matrix, targets, layout, host=host, opts=opts, unknown=unknown)
    print(format_table(result))
    print(f"crosscheck report: {crosscheck_report_path(layout)}")
    raise_for_report(result)
    return 0


def run_tests(
    matrix: Matrix,
    host: Target | None,
    layout: Layout,
    files: Sequence[Path],
    *,
    pythons: Sequence[str] = (),
    force: bool = False,
    check_only: bool = False,
) -> TestReport:
    """The test step over exactly ``files``; its report carries each (wheel, Python) result and record."""
    from .wheeltest import TestReport, find_pythons, run_wheel_tests, suites_for

    wanted = _check_pythons(matrix, pythons)
    found, missing = find_pythons(wanted)
    for v in missing:
        print(f"note: CPython {v} not found on this machine (python{v}): not tested here")
    rows = run_wheel_tests(
        files,
        found,
        layout,
        platform_name=host.name if host else "unknown",
        force=force,
        suites=suites_for(matrix, files),
        check_only=check_only,
    )
    result = TestReport(pythons=tuple(found), missing_pythons=tuple(missing), rows=tuple(rows))
    print(report.test_table(rows))
    layout.test_report.parent.mkdir(parents=True, exist_ok=True)
    layout.test_report.write_text(result.to_json(), encoding="utf-8")
    print(f"test report: {layout.test_report}; records: {layout.records}")
    return result


def _check_pythons(matrix: Matrix, pythons: Sequence[str]) -> list[str]:
    wanted = list(pythons) or list(matrix.pythons)
    for v in wanted:
        if v not in matrix.pythons:
            raise UsageError(f"CPython {v} is not in matrix/python.toml (tested: {', '.join(matrix.pythons)})")
    return wanted


def raise_for_tests(result: TestReport) -> None:
    bad = [r for r in result.rows if not r.ok]
    if bad:
        raise TestFailure("; ".join(f"{r.wheel} on py{r.python}: {r.status} ({r.reason}; log {r.log})" for r in bad))


def _test(
    matrix: Matrix,
    sel: Selection,
    host: Target | None,
    layout: Layout,
    *,
    wheels: list[Path],
    pythons: list[str],
    force: bool,
) -> int:
    from .plan import validate_selection

    validate_selection(matrix, sel)
    _check_pythons(matrix, pythons)
    host_name = host.name if host else "unknown"
    emulated = [matrix.target(t) for t in sel.targets if t != host_name] if not wheels else []
    if emulated:
        raise_for_tests(run_emulated_tests(matrix, layout, emulated, sel, force=force))
    if wheels or not sel.targets or host_name in sel.targets:
        files = _select_wheels(matrix, sel, host_name, layout, wheels)
        raise_for_tests(run_tests(matrix, host, layout, files, pythons=pythons, force=force))
    return 0


def run_emulated_tests(
    matrix: Matrix, layout: Layout, targets: Sequence[Target], sel: Selection, *, force: bool
) -> TestReport:
    """The wheel suite of each target's wheels under its emulator, with that arch's CPython (pipeline.emulated)."""
    from .emulated import run_emulated
    from .wheeltest import Interpreter, TestReport, TestRow, suite_hash, suites_for

    rows = []
    for target in targets:
        problem = _emulation_problem(target)
        if problem:
            raise UsageError(f"{target.name} wheels cannot be tested here: {problem}")
        files = [
            f for f in sorted(layout.dist_for(target.name).glob("*.whl"))
            if (cell := matrix.cell_for_wheel(f.name)) is not None and cell.target.name == target.name
            and (not sel.components or cell.component.name in sel.components)
        ]  # fmt: skip
        if not files:
            folder = layout.dist_for(target.name)
            raise UsageError(f"no wheels in {folder} (run `nox -s build -- --target {target.name}`)")
        suites = suites_for(matrix, files)
        for wheel in files:
            suite = suites.get(wheel.name)
            record, fresh = run_emulated(
                wheel, target, layout, suite=suite, force=force, emulator=target.suite_emulator or None
            )
            rows.append(
                TestRow(
                    wheel=wheel.name, sha256=record.sha256, python=f"{record.python} ({target.name})",
                    status=record.outcome if fresh else "up-to-date", suite_hash=suite_hash(layout.root, suite),
                    counts=record.counts, test_record=record, log=record.log, reason=record.reason,
                )
            )  # fmt: skip
    print(report.test_table(rows))
    interp = Interpreter(version="3.11", full="3.11", executable="emulated")
    return TestReport(pythons=(interp,), missing_pythons=(), rows=tuple(rows))


def _emulation_problem(target: Target) -> str | None:
    arch = target.arch_spec
    if target.os != "linux" or target.libc != "glibc":
        return "only glibc Linux wheels are tested under qemu-user with a Debian CPython (musl and Windows wheels: CI)"
    if not target.emulator or arch.debian_arch is None:
        return "the target has no emulator and no Debian architecture to take a CPython from"
    return None


def _select_wheels(matrix: Matrix, sel: Selection, host_name: str, layout: Layout, wheels: list[Path]) -> list[Path]:
    """Explicit --wheel files, else the wheels in dist/<target>/ for the selected targets runnable here."""
    if wheels:
        files = [w.resolve() for w in wheels]
        for w in files:
            if not w.is_file():
                raise UsageError(f"--wheel {w}: no such file")
        return files
    files = []
    for t in sel.targets or (host_name,):
        if t != host_name:
            print(
                f"note: {t} wheels are not run on {host_name}; they are tested under emulation "
                f"(nox -s crosscheck) or on their CI runner"
            )
            continue
        files += sorted(layout.dist_for(t).glob("*.whl"))
    if sel.components or sel.variants:
        picked = []
        for f in files:
            cell = matrix.cell_for_wheel(f.name)
            if cell is None:
                continue
            if sel.components and cell.component.name not in sel.components:
                continue
            if sel.variants and cell.variant.name not in sel.variants:
                continue
            picked.append(f)
        files = picked
    if not files:
        raise UsageError(f"no wheels to test in {layout.dist_for(host_name)} (run `nox -s build` first)")
    return files


def _records(matrix: Matrix, sel: Selection, host: Target | None, layout: Layout, *, wheels: list[Path]) -> int:
    from .hashing import sha256_file
    from .plan import validate_selection
    from .records import records_for_sha

    validate_selection(matrix, sel)
    files = _select_wheels(matrix, sel, host.name if host else "unknown", layout, wheels)
    rows = []
    for wheel in files:
        sha = sha256_file(wheel)
        recs = records_for_sha(layout.records, sha)
        for py in matrix.pythons:
            rec = recs.get(py)
            status = "untested" if rec is None else rec.outcome
            counts = f"{rec.counts.passed}/{rec.counts.tests} passed" if rec else ""
            rows.append((wheel.name, sha[:12], py, status, counts, rec.created if rec else ""))
    print(report.table(("wheel", "sha256", "python", "status", "counts", "tested at"), rows))
    return 0
