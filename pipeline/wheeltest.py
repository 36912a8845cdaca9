"""The test step: each wheel, by its exact file, in a fresh venv per tested CPython.

For every (wheel, Python) pair: create a fresh venv, ``pip install <wheel file>`` with the
machine's pip configuration switched off (``PIP_CONFIG_FILE=/dev/null``: no local mirrors or
find-links can substitute another build; dependencies such as numpy come from the index),
run the wheel's test suite with the venv's interpreter from outside the source tree, and write
a test record bound to the wheel's sha256.

A wheel's suite is its component's ``tests`` folder (``tests/wheel`` by default). A component
with ``test_with`` (a plugin EP needs a core) gets those components' wheels installed by file
next to it; their sha256s are part of the suite hash, so a new core wheel retests the EP.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib.util
import os
import queue
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from .errors import EnvironmentProblem, UsageError
from .hashing import combine, sha256_file, tree_hash
from .layout import Layout
from .matrix import Matrix
from .progress import Progress
from .records import Counts, Outcome, TestRecord, records_for_sha, write_record
from .wheelcheck import normalize

SUITE = Path("tests") / "wheel"
_PROBE = "import sys, platform; print('%d.%d' % sys.version_info[:2], platform.python_version())"


@dataclass(frozen=True, kw_only=True)
class WheelSuite:
    """What a wheel is tested with: its suite folder and the wheels installed next to it."""

    path: Path = SUITE  #: repo-relative folder with pytest.ini and requirements.txt
    companions: tuple[Path, ...] = ()  #: wheel files installed by file together with the tested wheel


@dataclass(frozen=True, kw_only=True)
class Interpreter:
    version: str  #: "3.12"
    full: str  #: "3.12.1"
    executable: str


#: passed / failed / error: tested now; up-to-date: a passing record for these bytes and this suite exists;
#: untested: --check-only found no such record
RowStatus = Literal["passed", "failed", "error", "up-to-date", "untested"]


@dataclass(frozen=True, kw_only=True)
class TestRow:
    __test__ = False

    wheel: str
    sha256: str
    python: str
    status: RowStatus
    suite_hash: str
    counts: Counts | None = None
    record: str | None = None  #: path of the test record
    test_record: TestRecord | None = None
    log: str | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.status in ("passed", "up-to-date")


@dataclass(frozen=True, kw_only=True)
class TestReport:
    """What the test step did: the CPythons it found (and missed) and one row per (wheel, Python)."""

    __test__ = False

    pythons: tuple[Interpreter, ...]
    missing_pythons: tuple[str, ...]
    rows: tuple[TestRow, ...]

    def rows_for(self, sha256: str) -> list[TestRow]:
        return [r for r in self.rows if r.sha256 == sha256]

    def to_json(self) -> str:
        import json

        rows = []
        for r in self.rows:
            row = asdict(r)
            row.pop("test_record", None)
            rows.append(row)
        data = {
            "schema": 2,
            "pythons": [p.version for p in self.pythons],
            "missing_pythons": list(self.missing_pythons),
            "rows": rows,
        }
        return json.dumps(data, indent=2) + "\n"


def find_pythons(wanted: Sequence[str]) -> tuple[list[Interpreter], list[str]]:
    """Working ``pythonX.Y`` interpreters for the wanted versions: PATH first, then pyenv's folder.

    Returns (found, missing). Each candidate is started once to prove it works (pyenv shims of
    versions that are not active fail) and really is the version its name says.
    """
    found: list[Interpreter] = []
    missing: list[str] = []
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    for version in wanted:
        candidates = [shutil.which(f"python{version}")]
        candidates += [str(p) for p in sorted(pyenv_root.glob(f"versions/{version}.*/bin/python{version}"))]
        for exe in filter(None, candidates):
            probe = _probe(exe)
            if probe is not None and probe[0] == version:
                found.append(Interpreter(version=version, full=probe[1], executable=exe))
                break
        else:
            missing.append(version)
    return found, missing


def _probe(exe: str) -> tuple[str, str] | None:
    try:
        out = subprocess.run([exe, "-c", _PROBE], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = out.stdout.split()
    return (parts[0], parts[1]) if out.returncode == 0 and len(parts) == 2 else None


def suites_for(matrix: Matrix, wheels: Sequence[Path]) -> dict[str, WheelSuite]:
    """Each wheel's suite from its component (:meth:`Matrix.cell_for_wheel`); companions from the wheel's folder."""
    out: dict[str, WheelSuite] = {}
    for wheel in wheels:
        cell = matrix.cell_for_wheel(wheel.name)
        if cell is None:
            continue  # not a matrix wheel: the default suite
        comp = cell.component
        companions = []
        for name in comp.test_with:
            other = matrix.component(name)
            found = sorted(wheel.parent.glob(f"{normalize(other.variants[0].dist)}-*.whl"))
            if not found:
                raise EnvironmentProblem(
                    f"{wheel.name} is tested together with the {name} wheel, and {wheel.parent} has none"
                    f" (build it: nox -s build -- --component {name})"
                )
            companions.append(found[-1])
        out[wheel.name] = WheelSuite(path=Path(cell.tests), companions=tuple(companions))
    return out


def suite_hash(root: Path, suite: WheelSuite | None = None) -> str:
    suite = suite or WheelSuite()
    h = tree_hash(root / suite.path)
    if not suite.companions:
        return h
    return combine({"suite": h, **{f"with:{w.name}": sha256_file(w) for w in suite.companions}})


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for installs and tests: no source-tree paths, no machine pip config."""
    drop = ("PYTHONPATH", "PYTHONHOME", "MOSAICRT_LIBRARY", "VIRTUAL_ENV", "_PYTHON_HOST_PLATFORM")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.update(extra or {})
    return env


#: how much of a failed test's message a record's reason keeps
_MESSAGE_CHARS = 160


def parse_junit(path: Path) -> Counts:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for s in suites:
        for key in total:
            total[key] += int(s.get(key, "0"))
    return Counts(**total)


def failed_tests(path: Path, *, limit: int = 3) -> list[str]:
    """The first ``limit`` failed or erroring tests of a JUnit report, each with the first line of its message."""
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is None:
            continue
        message = (problem.get("message") or "").strip().splitlines()
        first = message[0][:_MESSAGE_CHARS] if message else problem.tag
        out.append(f"{case.get('classname', '')}::{case.get('name', '?')} ({first})")
        if len(out) == limit:
            break
    return out


def run_wheel_tests(
    wheels: Sequence[Path],
    pythons: Sequence[Interpreter],
    layout: Layout,
    *,
    platform_name: str,
    force: bool = False,
    quiet: bool = False,
    suites: Mapping[str, WheelSuite] | None = None,
    check_only: bool = False,
    jobs: int | None = None,
) -> list[TestRow]:
    """Test each wheel; ``suites`` maps a wheel's file name to its suite (default: tests/wheel alone).

    ``check_only``: run nothing, report each (wheel, Python) as up-to-date or untested from the records.
    ``jobs``: (wheel, Python) pairs tested at once, each in its own venv (default: :func:`wheel_test_jobs`).
    """
    if not pythons:
        raise EnvironmentProblem("no tested CPython found on this machine (need python3.11 … python3.14 on PATH)")
    items = [f"{w.name} py{py.version}" for w in wheels for py in pythons]
    with contextlib.ExitStack() as stack:
        stream = stack.enter_context(Path(os.devnull).open("w", encoding="utf-8")) if quiet or check_only else None
        progress = stack.enter_context(Progress.open("test", items, stream=stream))
        return _test_all(wheels, pythons, layout, platform_name=platform_name, force=force, suites=suites,
                         check_only=check_only, progress=progress, jobs=jobs or wheel_test_jobs())  # fmt: skip


def wheel_test_jobs() -> int:
    """How many (wheel, Python) pairs are tested at once: ``$MOSAICRT_TEST_JOBS``, else 2 where there are
    two cores or more. Installing into a fresh venv is mostly waiting on one core (unpacking, byte-compiling),
    so two pairs at a time keep both cores busy; more would only contend with the suites' own threads."""
    return positive_int_env("MOSAICRT_TEST_JOBS", 2 if (os.cpu_count() or 1) >= 2 else 1)


def positive_int_env(name: str, default: int) -> int:
    """The environment's positive integer ``name``, else ``default``; anything else is a usage error."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise UsageError(f"{name} must be a positive integer, got {raw!r}")
    return int(raw)


def _test_all(
    wheels: Sequence[Path],
    pythons: Sequence[Interpreter],
    layout: Layout,
    *,
    platform_name: str,
    force: bool,
    suites: Mapping[str, WheelSuite] | None,
    check_only: bool,
    progress: Progress,
    jobs: int = 1,
) -> list[TestRow]:
    rows: list[TestRow | None] = []
    pending: list[tuple[int, Path, str, Interpreter, str, WheelSuite]] = []  # (row index, wheel, sha, py, ...)
    for wheel in wheels:
        wsuite = (suites or {}).get(wheel.name, WheelSuite())
        if not (layout.root / wsuite.path / "requirements.txt").is_file():
            raise EnvironmentProblem(f"{wsuite.path}/requirements.txt is missing (the wheel suite's test dependencies)")
        shash = suite_hash(layout.root, wsuite)
        sha = sha256_file(wheel)
        existing = records_for_sha(layout.records, sha)
        for py in pythons:
            rec = existing.get(py.version)
            if rec is not None and rec.outcome == "passed" and rec.suite_hash == shash and not force:
                rows.append(
                    TestRow(
                        wheel=wheel.name,
                        sha256=sha,
                        python=py.version,
                        status="up-to-date",
                        suite_hash=shash,
                        counts=rec.counts,
                        record=str(_rec_path(layout, sha, py)),
                        test_record=rec,
                    )
                )
                progress.done(f"{wheel.name} py{py.version}", "up-to-date", "passed before with these bytes and suite")
                continue
            if check_only:
                why = "never tested" if rec is None else rec.reason or f"its record says {rec.outcome}"
                if rec is not None and rec.outcome == "passed":
                    why = "tested with an older wheel suite"
                rows.append(
                    TestRow(
                        wheel=wheel.name,
                        sha256=sha,
                        python=py.version,
                        status="untested" if rec is None or rec.outcome == "passed" else rec.outcome,
                        suite_hash=shash,
                        test_record=rec,
                        reason=f"{why} (run `nox -s test -- --python {py.version}`)",
                    )
                )
                continue
            pending.append((len(rows), wheel, sha, py, shash, wsuite))
            rows.append(None)

    # Each pair runs in a venv of its own slot (venvs/py<version>-<slot>), so pairs tested at once never share one.
    slots: queue.SimpleQueue[int] = queue.SimpleQueue()
    for slot in range(max(1, jobs)):
        slots.put(slot)

    def test_one(job: tuple[int, Path, str, Interpreter, str, WheelSuite]) -> None:
        index, wheel, sha, py, shash, wsuite = job
        item = f"{wheel.name} py{py.version}"
        progress.start(item, "testing in a fresh venv")
        slot = slots.get()
        try:
            rec = _run_one(wheel, sha, py, layout, shash=shash, platform_name=platform_name, suite=wsuite, slot=slot)
        finally:
            slots.put(slot)
        path = write_record(layout.records, rec)
        rows[index] = TestRow(
            wheel=wheel.name,
            sha256=sha,
            python=py.version,
            status=rec.outcome,
            suite_hash=shash,
            counts=rec.counts,
            record=str(path),
            test_record=rec,
            log=rec.log,
            reason=rec.reason,
        )
        c = rec.counts
        progress.done(
            item,
            rec.outcome,
            f"{c.passed} passed, {c.failures} failed, {c.errors} errors, {c.skipped} skipped"
            + (f" ({rec.reason})" if rec.reason else ""),
        )

    if jobs <= 1 or len(pending) <= 1:
        for job in pending:
            test_one(job)
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="wheel-test") as pool:
            for future in [pool.submit(test_one, job) for job in pending]:
                future.result()
    return [row for row in rows if row is not None]


def _rec_path(layout: Layout, sha: str, py: Interpreter) -> Path:
    return layout.records / sha / f"{py.version}.json"


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _run_one(
    wheel: Path,
    sha: str,
    py: Interpreter,
    layout: Layout,
    *,
    shash: str,
    platform_name: str,
    suite: WheelSuite | None = None,
    slot: int = 0,
) -> TestRecord:
    start = time.monotonic()
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", wheel.stem)
    log = layout.work / "logs" / f"test-{stem}-py{py.version}.log"
    junit = layout.work / "junit" / f"{stem}-py{py.version}.xml"
    venv = layout.venvs / f"py{py.version}-{slot}"
    basetemp = layout.work / "test-tmp" / venv.name  # pytest empties it (and makes only its last component)
    for p in (log.parent, junit.parent, layout.venvs, basetemp.parent):
        p.mkdir(parents=True, exist_ok=True)
    junit.unlink(missing_ok=True)
    shutil.rmtree(venv, ignore_errors=True)
    wsuite = suite or WheelSuite()
    suite_dir = layout.root / wsuite.path
    env = clean_env({"MOSAICRT_TEST_WHEEL": str(wheel.resolve()), "MOSAICRT_TEST_WHEEL_SHA256": sha})
    outcome: Outcome = "error"
    reason: str | None = None
    counts = Counts()
    with log.open("w", encoding="utf-8") as fh:

        def run(cmd: list[str], cwd: Path | None = None) -> int:
            fh.write(f"\n$ {' '.join(cmd)}\n")
            fh.flush()
            return subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=cwd, check=False).returncode

        if importlib.util.find_spec("virtualenv") is not None:
            make = [sys.executable, "-m", "virtualenv", "-q", "-p", py.executable, str(venv)]
        else:
            make = [py.executable, "-m", "venv", str(venv)]
        vpy = str(_venv_python(venv))
        if run(make) != 0:
            reason = "could not create the venv"
        elif run(
            [vpy, "-m", "pip", "install", "-q", str(wheel.resolve())]
            + [str(w.resolve()) for w in wsuite.companions]
            + ["-r", str(suite_dir / "requirements.txt")]
        ):
            reason = "pip install of the wheel failed"
        else:
            rc = run(
                [
                    vpy,
                    "-m",
                    "pytest",
                    str(suite_dir),
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    f"--junitxml={junit}",
                    f"--basetemp={basetemp}",
                    "-c",
                    str(suite_dir / "pytest.ini"),
                    "--rootdir",
                    str(suite_dir),
                ],
                cwd=venv,
            )
            if junit.is_file():
                counts = parse_junit(junit)
            if rc == 0 and counts.tests > 0 and counts.failures == counts.errors == 0:
                outcome = "passed"
            elif counts.tests == 0:
                reason = f"no tests ran (pytest exit {rc})"
            else:
                outcome = "failed"
                reason = f"pytest exit {rc}"
                if junit.is_file():
                    reason += "".join(f"; {t}" for t in failed_tests(junit))
    return TestRecord(
        wheel=wheel.name,
        sha256=sha,
        outcome=outcome,
        python=py.version,
        python_full=py.full,
        platform=platform_name,
        counts=counts,
        suite_hash=shash,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        duration_s=round(time.monotonic() - start, 2),
        log=str(log),
        reason=reason,
    )
