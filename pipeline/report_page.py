"""The matrix report page: ``build/pipeline/reports/index.html``, one table row per matrix cell.

Two halves, each testable alone:

- :func:`collect` reads what the stages left on disk (build report, test records, crosscheck
  report, release report) and turns it into frozen :class:`PageRow` values, one per
  ``matrix.cells()`` entry, skipped and planned cells included.
- :func:`render` is pure: rows and a :class:`PageHeader` in, one self-contained HTML document out
  (inline CSS, no script, no network; every value escaped; links relative to the page).

(Over ~400 lines: the page's CSS and markup are inline so the file is self-contained; the readers,
the row model and the renderer are each small.)

A stage file that does not exist means "not run yet"; one that cannot be parsed is shown as
"unreadable" in the cells it would fill, never an exception. Each file is read by one small
``read_*`` function that relies only on these keys, so a change of record format touches one place:

- build report: ``cells[]`` with ``cell``, ``status``, ``reason``, ``wheel``, ``sha256``, ``log``
- test records: :func:`pipeline.records.records_for_sha` (per-Python :class:`~pipeline.records.TestRecord`)
- crosscheck report: ``targets[]`` with ``target`` and ``checks[]`` of ``name``, ``outcome``, ``detail``
- release report: ``rows[]`` with ``wheel``, ``sha256``, ``status``

Every status cell carries ``data-status`` (one of :data:`StatusKind`) and each row ``data-cell``,
so tests and scripts read the page without parsing its text.
"""

from __future__ import annotations

import html
import json
import os
import platform
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Generic, Literal, TypeVar
from urllib.parse import quote

from .layout import Layout
from .matrix import Cell, Matrix
from .records import TestRecord, records_for_sha

#: The value of every status cell's ``data-status`` attribute (and its CSS class).
StatusKind = Literal[
    # build
    "built",
    "up-to-date",
    "skipped",
    "planned",
    "failed",
    # tests and crosscheck
    "passed",
    "untested",
    "incomplete",
    "not-applicable",
    # release
    "uploaded",
    "already-published",
    "not-released",
    "differs",
    # any column
    "not-run",
    "unreadable",
]

_GOOD: frozenset[str] = frozenset({"built", "up-to-date", "passed", "uploaded", "already-published"})
_BAD: frozenset[str] = frozenset({"failed", "unreadable", "differs"})
_WARN: frozenset[str] = frozenset({"incomplete"})

_SHA256 = re.compile(r"[0-9a-f]{64}")
_NOTE_MAX = 90  #: longer notes are cut on the page (the whole text stays in the title attribute)


# ------------------------------------------------------------------------------------- page model


@dataclass(frozen=True, kw_only=True)
class Status:
    """What one status cell shows."""

    kind: StatusKind
    text: str  #: the visible words, e.g. "passed 41/41"
    note: str = ""  #: a second, smaller visible line: a skip reason, the failed checks
    detail: str = ""  #: shown on hover (title attribute): a reason, the failed checks' messages
    link: str | None = None  #: href relative to the page, e.g. of a log
    link_text: str = "log"


@dataclass(frozen=True, kw_only=True)
class PageRow:
    """One matrix cell (component, variant, target) and what each stage says about it."""

    cell: str  #: the cell id, ``component/variant/target``
    component: str
    variant: str
    target: str
    dist: str
    version: str
    build: Status
    wheel: str | None = None  #: file name of the cell's wheel
    wheel_link: str | None = None  #: href of the wheel relative to the page (absent when the file is gone)
    size: int | None = None  #: bytes of the wheel file on disk
    sha256: str | None = None
    tests: tuple[tuple[str, Status], ...] = ()  #: (CPython version, status), in the matrix's order
    crosscheck: Status
    release: Status

    def test(self, python: str) -> Status:
        for py, status in self.tests:
            if py == python:
                return status
        return Status(kind="untested", text="untested", detail=f"no test result for CPython {python}")


SourceState = Literal["read", "absent", "unreadable"]


@dataclass(frozen=True, kw_only=True)
class SourceNote:
    """One input file of the page and whether it could be read."""

    name: str  #: "build report"
    state: SourceState
    detail: str = ""  #: why it is unreadable
    link: str | None = None  #: href relative to the page


@dataclass(frozen=True, kw_only=True)
class PageHeader:
    title: str = "mosaicrt matrix report"
    host: str  #: the machine the page was made on, e.g. "linux-x86_64 (builder-3)"
    generated: datetime
    pythons: tuple[str, ...]  #: one test column per tested CPython
    sources: tuple[SourceNote, ...] = ()


# ------------------------------------------------------------------------------------- rendering

_CSS = """
:root { color-scheme: light; }
body { font: 12px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 16px 20px; color: #1f2328;
       background: #ffffff; }
h1 { font-size: 20px; margin: 0 0 6px; }
.meta { margin: 0 0 10px; color: #59636e; }
.meta b { color: #1f2328; }
table { border-collapse: collapse; }
.summary { margin: 0 0 10px; }
.summary th { text-align: left; padding: 2px 10px 2px 0; font-weight: 600; }
.summary td { padding: 2px 6px 2px 0; }
.sources { margin: 0 0 14px; padding: 0; list-style: none; color: #59636e; }
.sources li { display: inline-block; margin-right: 18px; }
.sources li[data-state="unreadable"] { color: #b42318; font-weight: 600; }
#matrix th, #matrix td { border: 1px solid #d1d9e0; padding: 4px 7px; text-align: left; vertical-align: top; }
#matrix thead th { background: #f0f3f6; position: sticky; top: 0; }
#matrix td.cellid { font-weight: 600; white-space: nowrap; }
#matrix td.num { text-align: right; white-space: nowrap; }
#matrix td.wheel { min-width: 13em; max-width: 18em; overflow-wrap: anywhere; }
#matrix td.dist { white-space: nowrap; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.why { display: block; font-size: 11px; color: #59636e; min-width: 10em; max-width: 17em; overflow-wrap: anywhere; }
.status { white-space: nowrap; }
.status .why { white-space: normal; }
.good { background: #dafbe1; }
.bad { background: #ffebe9; }
.bad .why { color: #82071e; }
.warn { background: #fff8c5; }
.quiet { background: #f6f8fa; color: #59636e; }
.pill { display: inline-block; min-width: 1.6em; padding: 0 6px; border-radius: 9px; text-align: center; }
a { color: #0969da; }
"""


def render(rows: Sequence[PageRow], *, header: PageHeader) -> str:
    """The whole page as one HTML document (pure: no I/O)."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>{_e(header.title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        "<header>",
        f"<h1>{_e(header.title)}</h1>",
        _meta(rows, header),
        _summary(rows, header),
        _sources(header.sources),
        "</header>",
        '<table id="matrix">',
        _thead(header.pythons),
        "<tbody>",
        *(_row(r, header.pythons) for r in rows),
        "</tbody>",
        "</table>",
        "</body>",
        "</html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _tone(kind: str) -> str:
    if kind in _GOOD:
        return "good"
    if kind in _BAD:
        return "bad"
    if kind in _WARN:
        return "warn"
    return "quiet"


def _meta(rows: Sequence[PageRow], header: PageHeader) -> str:
    when = header.generated.astimezone(UTC)
    return (
        f'<p class="meta">host <b>{_e(header.host)}</b> · generated '
        f'<time datetime="{_e(when.isoformat(timespec="seconds"))}">'
        f"{_e(when.strftime('%Y-%m-%d %H:%M:%S UTC'))}</time>"
        f' · <b data-count="cells">{len(rows)}</b> cells · tested CPython {_e(", ".join(header.pythons))}</p>'
    )


def _summary(rows: Sequence[PageRow], header: PageHeader) -> str:
    columns: list[tuple[str, list[Status]]] = [
        ("build", [r.build for r in rows]),
        ("tests", [r.test(py) for r in rows for py in header.pythons]),
        ("crosscheck", [r.crosscheck for r in rows if r.crosscheck.kind != "not-applicable"]),
        ("release", [r.release for r in rows]),
    ]
    lines = ['<table class="summary">']
    for name, statuses in columns:
        counts = Counter(s.kind for s in statuses)
        pills = " ".join(
            f'<span class="pill {_tone(kind)}" data-summary="{_e(name)}" data-status="{_e(kind)}">'
            f"{n} {_e(kind.replace('-', ' '))}</span>"
            for kind, n in counts.items()
        )
        lines.append(f"<tr><th>{_e(name)}</th><td>{pills or '—'}</td></tr>")
    lines.append("</table>")
    return "\n".join(lines)


def _sources(notes: Sequence[SourceNote]) -> str:
    if not notes:
        return ""
    items = []
    for n in notes:
        said = {"read": "read", "absent": "not run yet", "unreadable": "unreadable"}[n.state]
        name = f'<a href="{_e(n.link)}">{_e(n.name)}</a>' if n.link and n.state != "absent" else _e(n.name)
        why = f": {_e(n.detail)}" if n.detail else ""
        items.append(f'<li data-source="{_e(n.name)}" data-state="{n.state}">{name}: {said}{why}</li>')
    return '<ul class="sources">' + "".join(items) + "</ul>"


def _thead(pythons: Sequence[str]) -> str:
    heads = ["cell", "dist", "build", "wheel", "size", "sha256"]
    heads += [f"py{py}" for py in pythons]
    heads += ["crosscheck", "release"]
    return "<thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in heads) + "</tr></thead>"


def _status_td(status: Status, column: str, extra: str = "") -> str:
    hover = status.detail or status.note
    title = f' title="{_e(hover)}"' if hover else ""
    link = f' <a href="{_e(status.link)}">{_e(status.link_text)}</a>' if status.link else ""
    note = status.note if len(status.note) <= _NOTE_MAX else status.note[: _NOTE_MAX - 1] + "…"
    why_html = f'<span class="why">{_e(note)}</span>' if note else ""
    return (
        f'<td class="status {_tone(status.kind)} {status.kind}" data-status="{status.kind}"'
        f' data-column="{_e(column)}"{extra}{title}>{_e(status.text)}{link}{why_html}</td>'
    )


def _row(r: PageRow, pythons: Sequence[str]) -> str:
    if r.wheel is None:
        wheel = "<td>—</td>"
    elif r.wheel_link is not None:
        wheel = f'<td class="wheel"><a href="{_e(r.wheel_link)}">{_e(r.wheel)}</a></td>'
    else:
        wheel = f'<td class="wheel" title="the file is no longer on disk">{_e(r.wheel)} (gone)</td>'
    size = f'<td class="num" title="{r.size} bytes">{_e(_size(r.size))}</td>' if r.size is not None else "<td>—</td>"
    sha = (
        f'<td><code title="{_e(r.sha256)}" data-sha256="{_e(r.sha256)}">{_e(r.sha256[:12])}</code></td>'
        if r.sha256
        else "<td>—</td>"
    )
    tests = "".join(_status_td(r.test(py), "test", f' data-python="{_e(py)}"') for py in pythons)
    return (
        f'<tr data-cell="{_e(r.cell)}" data-target="{_e(r.target)}" data-component="{_e(r.component)}"'
        f' data-variant="{_e(r.variant)}">'
        f'<td class="cellid">{_e(r.cell)}</td>'
        f'<td class="dist">{_e(r.dist)}<br>{_e(r.version)}</td>'
        f"{_status_td(r.build, 'build')}{wheel}{size}{sha}{tests}"
        f"{_status_td(r.crosscheck, 'crosscheck')}{_status_td(r.release, 'release')}"
        "</tr>"
    )


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            break
    return f"{value:.1f} {unit}"


# ------------------------------------------------------------------------------------- reading the stages

T = TypeVar("T")


class Malformed(ValueError):
    """A stage file parsed as JSON but does not have the shape the page relies on."""


@dataclass(frozen=True, kw_only=True)
class Source(Generic[T]):
    """One stage file: not there yet, unreadable (and why), or its entries."""

    name: str
    path: Path
    state: SourceState
    detail: str = ""
    entries: T | None = None


@dataclass(frozen=True, kw_only=True)
class BuildEntry:
    cell: str
    status: str
    reason: str | None = None
    wheel: str | None = None
    sha256: str | None = None
    log: str | None = None
    problem: str | None = None  #: set when this entry is malformed (the other fields are then unreliable)


@dataclass(frozen=True, kw_only=True)
class CrosscheckEntry:
    name: str
    outcome: str  #: "pass", "fail" or "not run"
    detail: str = ""


@dataclass(frozen=True, kw_only=True)
class ReleaseEntry:
    wheel: str
    sha256: str
    status: str  #: "uploaded" or "already published"


def _load_json(name: str, path: Path, parse: Callable[[object], T]) -> Source[T]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Source(name=name, path=path, state="absent")
    except (OSError, UnicodeDecodeError) as exc:
        return Source(name=name, path=path, state="unreadable", detail=f"cannot read it: {exc}")
    try:
        return Source(name=name, path=path, state="read", entries=parse(json.loads(text)))
    except ValueError as exc:  # json.JSONDecodeError and Malformed
        return Source(name=name, path=path, state="unreadable", detail=str(exc))


def _list_of(data: object, key: str) -> list[object]:
    if not isinstance(data, dict):
        raise Malformed(f"expected a JSON object with '{key}', got {type(data).__name__}")
    value = data.get(key)
    if not isinstance(value, list):
        raise Malformed(f"'{key}' is missing or not a list")
    return value


def _opt_str(entry: dict[str, object], key: str) -> str | None:
    value = entry.get(key)
    if value is not None and not isinstance(value, str):
        raise Malformed(f"'{key}' is not a string")
    return value


def _req_str(entry: dict[str, object], key: str) -> str:
    value = _opt_str(entry, key)
    if value is None:
        raise Malformed(f"'{key}' is missing")
    return value


def parse_build_report(data: object) -> dict[str, BuildEntry]:
    """``cells[]`` of build-report.json by cell id; a malformed entry keeps its id and says what is wrong."""
    out: dict[str, BuildEntry] = {}
    for i, raw in enumerate(_list_of(data, "cells")):
        if not isinstance(raw, dict) or not isinstance(raw.get("cell"), str):
            continue  # no cell id: nothing to attach it to
        cell = raw["cell"]
        try:
            entry = BuildEntry(
                cell=cell,
                status=_req_str(raw, "status"),
                reason=_opt_str(raw, "reason"),
                wheel=_opt_str(raw, "wheel"),
                sha256=_opt_str(raw, "sha256"),
                log=_opt_str(raw, "log"),
            )
        except Malformed as exc:
            entry = BuildEntry(cell=cell, status="", problem=f"cells[{i}]: {exc}")
        out[cell] = entry
    return out


def parse_crosscheck_report(data: object) -> dict[str, tuple[CrosscheckEntry, ...]]:
    """``targets[]`` of crosscheck-report.json: target name → its checks."""
    out: dict[str, tuple[CrosscheckEntry, ...]] = {}
    for i, raw in enumerate(_list_of(data, "targets")):
        if not isinstance(raw, dict):
            raise Malformed(f"targets[{i}] is not an object")
        target = _req_str(raw, "target")
        checks = []
        for j, c in enumerate(_list_of(raw, "checks")):
            if not isinstance(c, dict):
                raise Malformed(f"targets[{i}].checks[{j}] is not an object")
            checks.append(
                CrosscheckEntry(
                    name=_req_str(c, "name"), outcome=_req_str(c, "outcome"), detail=_opt_str(c, "detail") or ""
                )
            )
        out[target] = tuple(checks)
    return out


def parse_release_report(data: object) -> tuple[ReleaseEntry, ...]:
    """``rows[]`` of release-report.json."""
    out = []
    for i, raw in enumerate(_list_of(data, "rows")):
        if not isinstance(raw, dict):
            raise Malformed(f"rows[{i}] is not an object")
        out.append(
            ReleaseEntry(wheel=_req_str(raw, "wheel"), sha256=_req_str(raw, "sha256"), status=_req_str(raw, "status"))
        )
    return tuple(out)


def read_build_report(path: Path) -> Source[dict[str, BuildEntry]]:
    return _load_json("build report", path, parse_build_report)


def read_crosscheck_report(path: Path) -> Source[dict[str, tuple[CrosscheckEntry, ...]]]:
    return _load_json("crosscheck report", path, parse_crosscheck_report)


def read_release_report(path: Path) -> Source[tuple[ReleaseEntry, ...]]:
    return _load_json("release report", path, parse_release_report)


def read_test_records(records_dir: Path, sha256: str) -> dict[str, TestRecord]:
    """The wheel's test records by CPython version ({} for anything that is not a sha256 hex digest)."""
    if not _SHA256.fullmatch(sha256):
        return {}
    try:
        return records_for_sha(records_dir, sha256)
    except OSError:
        return {}


def crosscheck_report_path(layout: Layout) -> Path:
    """Where ``python -m pipeline crosscheck`` leaves its report: its own work folder, ``build/crosscheck``."""
    return layout.root / "build" / "crosscheck" / "reports" / "crosscheck-report.json"


def page_path(layout: Layout) -> Path:
    return layout.work / "reports" / "index.html"


@dataclass(frozen=True, kw_only=True)
class Sources:
    """Everything :func:`collect` reads, read once."""

    build: Source[dict[str, BuildEntry]]
    crosscheck: Source[dict[str, tuple[CrosscheckEntry, ...]]]
    release: Source[tuple[ReleaseEntry, ...]]
    records: Path

    def notes(self, page_dir: Path) -> tuple[SourceNote, ...]:
        return tuple(
            SourceNote(name=s.name, state=s.state, detail=s.detail, link=_href(s.path, page_dir))
            for s in (self.build, self.crosscheck, self.release)
        )


def read_sources(layout: Layout, *, crosscheck_report: Path | None = None) -> Sources:
    return Sources(
        build=read_build_report(layout.build_report),
        crosscheck=read_crosscheck_report(crosscheck_report or crosscheck_report_path(layout)),
        release=read_release_report(layout.release_report),
        records=layout.records,
    )


# ------------------------------------------------------------------------------------- collecting rows


def collect(matrix: Matrix, layout: Layout, *, sources: Sources | None = None) -> list[PageRow]:
    """One row per matrix cell, ordered by target, then component and variant (declaration order of each)."""
    src = sources or read_sources(layout)
    page_dir = page_path(layout).parent
    target_order = {t.name: i for i, t in enumerate(matrix.targets)}
    cells = sorted(enumerate(matrix.cells()), key=lambda ic: (target_order[ic[1].target.name], ic[0]))
    return [_collect_row(cell, layout, src, page_dir, matrix.pythons) for _, cell in cells]


@dataclass(frozen=True, kw_only=True)
class _Wheel:
    name: str | None = None
    link: str | None = None
    size: int | None = None
    sha256: str | None = None


def _collect_row(cell: Cell, layout: Layout, src: Sources, page_dir: Path, pythons: Sequence[str]) -> PageRow:
    entry = src.build.entries.get(cell.id) if src.build.entries is not None else None
    usable = entry if entry is not None and entry.problem is None else None
    wheel = _wheel(usable, layout.root, page_dir)
    return PageRow(
        cell=cell.id,
        component=cell.component.name,
        variant=cell.variant.name,
        target=cell.target.name,
        dist=cell.dist,
        version=cell.component.version,
        build=_build_status(cell, src.build, entry, layout.root, page_dir),
        wheel=wheel.name,
        wheel_link=wheel.link,
        size=wheel.size,
        sha256=wheel.sha256,
        tests=_test_statuses(wheel.sha256, src.records, pythons, layout.root, page_dir),
        crosscheck=_crosscheck_status(cell, src.crosscheck),
        release=_release_status(wheel, src.release),
    )


def _wheel(entry: BuildEntry | None, root: Path, page_dir: Path) -> _Wheel:
    if entry is None or entry.status not in ("built", "up-to-date") or not entry.wheel:
        return _Wheel()
    path = _resolve(entry.wheel, root)
    try:
        size: int | None = path.stat().st_size
    except OSError:
        size = None
    return _Wheel(
        name=path.name,
        link=_href(path, page_dir) if size is not None else None,
        size=size,
        sha256=entry.sha256,
    )


def _build_status(
    cell: Cell, src: Source[dict[str, BuildEntry]], entry: BuildEntry | None, root: Path, page_dir: Path
) -> Status:
    if src.state == "unreadable":
        return Status(kind="unreadable", text="unreadable", detail=f"{src.path}: {src.detail}")
    if entry is None:
        if cell.variant.planned:
            return Status(kind="planned", text="planned", note=cell.variant.planned)
        why = "no build report yet" if src.state == "absent" else "not in the last build report"
        return Status(kind="not-run", text="not built", detail=why)
    if entry.problem is not None:
        return Status(kind="unreadable", text="unreadable", detail=entry.problem)
    log = _href(_resolve(entry.log, root), page_dir) if entry.log else None
    reason = entry.reason or ""
    match entry.status:
        case "built":
            return Status(kind="built", text="built", link=log)
        case "up-to-date":
            return Status(kind="up-to-date", text="up to date", link=log)
        case "skipped":
            return Status(kind="skipped", text="skipped", note=reason)
        case "failed":
            return Status(kind="failed", text="failed", note=reason, link=log)
    return Status(kind="unreadable", text="unreadable", detail=f"unknown build status '{entry.status}'")


def _test_statuses(
    sha256: str | None, records_dir: Path, pythons: Sequence[str], root: Path, page_dir: Path
) -> tuple[tuple[str, Status], ...]:
    if not sha256:
        return tuple((py, Status(kind="untested", text="untested", detail="no wheel to test")) for py in pythons)
    records = read_test_records(records_dir, sha256)
    return tuple((py, _test_status(records.get(py), py, root, page_dir)) for py in pythons)


def _test_status(rec: TestRecord | None, python: str, root: Path, page_dir: Path) -> Status:
    if rec is None:
        return Status(kind="untested", text="untested", detail=f"no test record for CPython {python}")
    c = rec.counts
    log = _href(_resolve(rec.log, root), page_dir) if rec.log else None
    detail = (
        f"CPython {rec.python_full} on {rec.platform}, {rec.created}, {rec.duration_s:.1f}s: "
        f"{c.passed} passed, {c.failures} failed, {c.errors} errors, {c.skipped} skipped of {c.tests}"
    )
    if rec.outcome == "passed":
        return Status(kind="passed", text=f"passed {c.passed}/{c.tests}", detail=detail, link=log)
    why = f"; {rec.reason}" if rec.reason else ""
    note = f"{c.failures} failed, {c.errors} errors of {c.tests}{why}"
    return Status(kind="failed", text=rec.outcome, note=note, detail=detail, link=log)


def crosscheck_applies(cell: Cell) -> bool:
    """The crosscheck builds the core itself (its default configuration) for each crosscheck target."""
    return cell.target.crosscheck and cell.component.kind == "core" and cell.variant.name == "default"


def _crosscheck_status(cell: Cell, src: Source[dict[str, tuple[CrosscheckEntry, ...]]]) -> Status:
    if not crosscheck_applies(cell):
        why = (
            f"{cell.target.name} is not a crosscheck target"
            if not cell.target.crosscheck
            else "the crosscheck covers the core's default cell of each crosscheck target"
        )
        return Status(kind="not-applicable", text="—", detail=why)
    if src.state == "unreadable":
        return Status(kind="unreadable", text="unreadable", detail=f"{src.path}: {src.detail}")
    checks = src.entries.get(cell.target.name) if src.entries is not None else None
    if checks is None:
        why = "no crosscheck report yet" if src.state == "absent" else "not in the last crosscheck run"
        return Status(kind="not-run", text="not run", detail=why)
    failed = [c for c in checks if c.outcome == "fail"]
    not_run = [c for c in checks if c.outcome not in ("pass", "fail")]
    lines = "\n".join(f"{c.name}: {c.outcome}{' — ' + c.detail if c.detail else ''}" for c in checks)
    if failed:
        return Status(kind="failed", text="failed", note=", ".join(c.name for c in failed), detail=lines)
    if not_run or not checks:
        names = ", ".join(c.name for c in not_run) or "no checks"
        return Status(kind="incomplete", text="incomplete", note=f"not run: {names}", detail=lines)
    return Status(kind="passed", text=f"passed {len(checks)}/{len(checks)}", detail=lines)


def _release_status(wheel: _Wheel, src: Source[tuple[ReleaseEntry, ...]]) -> Status:
    if src.state == "unreadable":
        return Status(kind="unreadable", text="unreadable", detail=f"{src.path}: {src.detail}")
    if wheel.sha256 is None or wheel.name is None:
        return Status(kind="not-released", text="not released", detail="no wheel")
    entries = src.entries or ()
    same = next((e for e in entries if e.sha256 == wheel.sha256), None)
    if same is not None:
        match same.status:
            case "uploaded":
                return Status(kind="uploaded", text="uploaded", detail=same.wheel)
            case "already published":
                return Status(kind="already-published", text="already published", detail=same.wheel)
        return Status(kind="unreadable", text="unreadable", detail=f"unknown release status '{same.status}'")
    other = next((e for e in entries if e.wheel == wheel.name), None)
    if other is not None:
        return Status(
            kind="differs",
            text="released bytes differ",
            detail=f"{other.wheel} was released with sha256 {other.sha256}, this wheel is {wheel.sha256}",
        )
    why = "no release report yet" if src.state == "absent" else "not in the last release"
    return Status(kind="not-released", text="not released", detail=why)


def _resolve(path: str, root: Path) -> Path:
    p = Path(path)
    return p if p.is_absolute() else root / p


def _href(target: Path, page_dir: Path) -> str:
    """A URL relative to the page (POSIX separators, percent-encoded)."""
    rel = os.path.relpath(target, page_dir)
    return quote(Path(rel).as_posix())


# ------------------------------------------------------------------------------------- writing


def default_host(matrix: Matrix) -> str:
    from .plan import host_target

    target = host_target(matrix)
    name = target.name if target is not None else "not a matrix target"
    node = platform.node()
    return f"{name} ({node})" if node else name


def write_page(
    matrix: Matrix,
    layout: Layout,
    *,
    host: str | None = None,
    now: datetime | None = None,
    crosscheck_report: Path | None = None,
) -> Path:
    """Read the stage files, render the page, write it atomically; returns its path."""
    path = page_path(layout)
    sources = read_sources(layout, crosscheck_report=crosscheck_report)
    rows = collect(matrix, layout, sources=sources)
    header = PageHeader(
        host=host if host is not None else default_host(matrix),
        generated=now or datetime.now(UTC),
        pythons=matrix.pythons,
        sources=sources.notes(path.parent),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(render(rows, header=header), encoding="utf-8")
    tmp.replace(path)
    return path
