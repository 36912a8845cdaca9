"""The matrix report page: collected from stage files, rendered, and loaded in headless Chromium."""

from __future__ import annotations

import hashlib
import html
import json
import os
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from pipeline.layout import Layout
from pipeline.matrix import Matrix, load_matrix
from pipeline.records import Counts, TestRecord, write_record
from pipeline.report_page import (
    PageHeader,
    PageRow,
    Status,
    collect,
    crosscheck_report_path,
    default_host,
    page_path,
    read_sources,
    render,
    write_page,
)

REPO = Path(__file__).resolve().parents[2]

BUILT = "core/default/linux-x86_64"
UP_TO_DATE = "core/default/linux-aarch64"
FAILED = "dnnl/default/linux-x86_64"
SKIPPED_XCHECK_FAILS = "core/default/linux-armv7"
NOT_IN_REPORT = "core/default/windows-x86_64"
FAILED_REASON = "wheel build: cmake exited with 1 <oops & co>"


# ------------------------------------------------------------------------------------ reading the page


@dataclass
class Td:
    column: str
    status: str
    python: str | None
    title: str
    text: str = ""
    links: list[str] = field(default_factory=list)


@dataclass
class Tr:
    cell: str
    tds: list[Td] = field(default_factory=list)
    sha256: str | None = None
    wheel_link: str | None = None

    def status(self, column: str, python: str | None = None) -> Td:
        found = [t for t in self.tds if t.column == column and t.python == python]
        assert len(found) == 1, (self.cell, column, python, found)
        return found[0]


class PageReader(HTMLParser):
    """The matrix rows of a page (ours, or Chromium's dump of the rendered DOM)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[Tr] = []
        self.td: Td | None = None
        self.in_row_td = False
        self.cells_count: str | None = None
        self._counting = False
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.tags.append(tag)
        if tag == "tr" and "data-cell" in a:
            self.rows.append(Tr(cell=a["data-cell"]))
        elif tag == "td" and self.rows and "data-column" in a:
            self.td = Td(
                column=a["data-column"], status=a["data-status"], python=a.get("data-python"), title=a.get("title", "")
            )
        elif tag == "td" and self.rows:
            self.in_row_td = True
        elif tag == "a" and self.td is not None:
            self.td.links.append(a["href"])
        elif tag == "a" and self.in_row_td and a["href"].endswith(".whl"):
            self.rows[-1].wheel_link = a["href"]
        elif tag == "code" and self.rows and "data-sha256" in a:
            assert a["title"] == a["data-sha256"]
            self.rows[-1].sha256 = a["data-sha256"]
        elif tag == "b" and a.get("data-count") == "cells":
            self._counting = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self.td is not None:
            self.rows[-1].tds.append(self.td)
            self.td = None
        elif tag == "td":
            self.in_row_td = False
        self._counting = False

    def handle_data(self, data: str) -> None:
        if self.td is not None:
            self.td.text += data
        if self._counting:
            self.cells_count = data


def read_page(text: str) -> PageReader:
    reader = PageReader()
    reader.feed(text)
    reader.close()
    return reader


# ------------------------------------------------------------------------------------ fixture stage files


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    m = load_matrix(REPO)
    ids = {c.id for c in m.cells()}
    for cell in (BUILT, UP_TO_DATE, FAILED, SKIPPED_XCHECK_FAILS, NOT_IN_REPORT):
        assert cell in ids, f"the fixture expects the matrix to declare {cell}"
    return m


def _layout(root: Path) -> Layout:
    return Layout(root=root, dist=root / "dist", work=root / "build" / "pipeline")


def _write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _record(wheel: Path, python: str, outcome: str, counts: Counts, reason: str | None = None) -> TestRecord:
    return TestRecord(
        wheel=wheel.name,
        sha256=hashlib.sha256(wheel.read_bytes()).hexdigest(),
        outcome=outcome,  # type: ignore[arg-type]
        python=python,
        python_full=f"{python}.1",
        platform="linux-x86_64",
        counts=counts,
        suite_hash="suite",
        created="2026-12-01T10:00:00+00:00",
        duration_s=3.5,
        log=str(wheel.parent.parent.parent / "build" / "pipeline" / "logs" / f"test-{python}.log"),
        reason=reason,
    )


@dataclass(frozen=True)
class Staged:
    layout: Layout
    built_wheel: Path
    aarch64_wheel: Path
    failed_log: Path


def stage_files(root: Path, matrix: Matrix) -> Staged:
    """Build, test, crosscheck and release files as the stages leave them, for a handful of cells."""
    layout = _layout(root)
    built = _write(
        layout.dist_for("linux-x86_64") / "mosaicrt-0.1.0-py3-none-manylinux_2_28_x86_64.whl", bytes(range(256)) * 12
    )
    aarch64 = _write(layout.dist_for("linux-aarch64") / "mosaicrt-0.1.0-py3-none-linux_aarch64.whl", b"arm" * 700)
    built_log = _write(layout.log_file("core-default-linux-x86_64"), "build log\n")
    failed_log = _write(layout.log_file("dnnl-default-linux-x86_64"), "cmake error\n")
    sha = {w: hashlib.sha256(w.read_bytes()).hexdigest() for w in (built, aarch64)}

    cells: list[dict[str, object]] = []
    for cell in matrix.cells():
        entry: dict[str, object] = {
            "cell": cell.id,
            "status": "skipped",
            "reason": "not selected",
            "wheel": None,
            "sha256": None,
            "log": None,
            "duration_s": 0.0,
        }
        if cell.variant.planned:
            entry["reason"] = f"planned: {cell.variant.planned}"
        if cell.id == BUILT:
            entry.update(
                status="built",
                reason=None,
                wheel=str(built.relative_to(root)),
                sha256=sha[built],
                log=str(built_log.relative_to(root)),
            )
        elif cell.id == UP_TO_DATE:  # an absolute wheel path is allowed too
            entry.update(status="up-to-date", reason=None, wheel=str(aarch64), sha256=sha[aarch64])
        elif cell.id == FAILED:
            entry.update(status="failed", reason=FAILED_REASON, log=str(failed_log.relative_to(root)))
        elif cell.id == SKIPPED_XCHECK_FAILS:
            entry.update(reason="no cross compiler arm-linux-gnueabihf-gcc")
        elif cell.id == NOT_IN_REPORT:
            continue
        cells.append(entry)
    _write(layout.build_report, json.dumps({"schema": 1, "host": "linux-x86_64", "cells": cells}))

    write_record(layout.records, _record(built, "3.11", "passed", Counts(tests=42, skipped=2)))
    write_record(layout.records, _record(built, "3.12", "failed", Counts(tests=42, failures=3), "pytest exit 1"))

    checks = ("toolchain", "build", "machine type", "arm kernels", "native tests")
    targets = [
        {"target": "linux-aarch64", "checks": [{"name": n, "outcome": "pass", "detail": "ok"} for n in checks]},
        {
            "target": "linux-armv7",
            "checks": [
                {
                    "name": n,
                    "outcome": "fail" if n in ("arm kernels", "native tests") else "pass",
                    "detail": f"{n} seen",
                }
                for n in checks
            ],
        },
        {
            "target": "windows-x86_64",
            "checks": [{"name": n, "outcome": "pass" if n == "toolchain" else "not run", "detail": ""} for n in checks],
        },
    ]
    _write(crosscheck_report_path(layout), json.dumps({"schema": 1, "targets": targets}))

    rows = [
        {
            "wheel": built.name,
            "sha256": sha[built],
            "status": "uploaded",
            "tag": "core-v0.1.0",
            "tag_status": "created",
        },
        {
            "wheel": aarch64.name,
            "sha256": sha[aarch64],
            "status": "already published",
            "tag": "core-v0.1.0",
            "tag_status": "exists",
        },
    ]
    _write(layout.release_report, json.dumps({"schema": 1, "index": "http://127.0.0.1/simple/", "rows": rows}))
    return Staged(layout=layout, built_wheel=built, aarch64_wheel=aarch64, failed_log=failed_log)


def check_staged_page(page: Path, text: str, matrix: Matrix, staged: Staged) -> None:
    """What the page must show for :func:`stage_files` (used on our HTML and on Chromium's DOM)."""
    reader = read_page(text)
    all_cells = [c.id for c in matrix.cells()]
    assert len(reader.rows) == len(all_cells)
    assert sorted(r.cell for r in reader.rows) == sorted(all_cells)
    assert reader.cells_count == str(len(all_cells))
    assert "script" not in reader.tags
    rows = {r.cell: r for r in reader.rows}
    pythons = matrix.pythons

    def resolve(href: str) -> Path:
        return (page.parent / unquote(href)).resolve()

    built = rows[BUILT]
    assert built.status("build").status == "built"
    assert [resolve(h) for h in built.status("build").links] == [staged.layout.log_file("core-default-linux-x86_64")]
    assert built.sha256 == hashlib.sha256(staged.built_wheel.read_bytes()).hexdigest()
    assert built.wheel_link is not None and resolve(built.wheel_link) == staged.built_wheel
    assert built.status("test", "3.11").status == "passed"
    assert "40/42" in built.status("test", "3.11").text
    assert built.status("test", "3.12").status == "failed"
    assert "pytest exit 1" in built.status("test", "3.12").text
    for py in pythons[2:]:
        assert built.status("test", py).status == "untested"
    assert built.status("crosscheck").status == "not-applicable"
    assert built.status("release").status == "uploaded"

    aarch64 = rows[UP_TO_DATE]
    assert aarch64.status("build").status == "up-to-date"
    assert aarch64.wheel_link is not None and resolve(aarch64.wheel_link) == staged.aarch64_wheel
    assert [aarch64.status("test", py).status for py in pythons] == ["untested"] * len(pythons)
    assert aarch64.status("crosscheck").status == "passed"
    assert aarch64.status("release").status == "already-published"

    failed = rows[FAILED]
    assert failed.status("build").status == "failed"
    assert FAILED_REASON in failed.status("build").text  # escaped in the source, plain text in the DOM
    assert [resolve(h) for h in failed.status("build").links] == [staged.failed_log]
    assert failed.sha256 is None and failed.wheel_link is None
    assert failed.status("release").status == "not-released"

    armv7 = rows[SKIPPED_XCHECK_FAILS]
    assert armv7.status("build").status == "skipped"
    assert "no cross compiler" in armv7.status("build").text
    assert armv7.status("crosscheck").status == "failed"
    assert "arm kernels, native tests" in armv7.status("crosscheck").text
    assert "toolchain" not in armv7.status("crosscheck").text.split("failed", 1)[1]

    windows = rows[NOT_IN_REPORT]
    assert windows.status("build").status == "not-run"
    assert windows.status("crosscheck").status == "incomplete"

    for cell in matrix.cells():
        row = rows[cell.id]
        if cell.variant.planned:
            assert row.status("build").status == "skipped"
            assert "planned" in row.status("build").text
        if not cell.target.crosscheck:
            assert row.status("crosscheck").status == "not-applicable"
        if cell.id not in (BUILT, UP_TO_DATE):
            assert row.status("release").status == "not-released"
            assert {row.status("test", py).status for py in pythons} == {"untested"}


# ------------------------------------------------------------------------------------ fast tests


def test_page_from_stage_files(tmp_path: Path, matrix: Matrix) -> None:
    staged = stage_files(tmp_path, matrix)
    page = write_page(matrix, staged.layout, host="linux-x86_64 (test)", now=datetime(2026, 12, 1, 11, 0, tzinfo=UTC))
    assert page == page_path(staged.layout) == tmp_path / "build" / "pipeline" / "reports" / "index.html"
    text = page.read_text(encoding="utf-8")
    check_staged_page(page, text, matrix, staged)
    assert "&lt;oops &amp; co&gt;" in text
    assert "2026-12-01 11:00:00 UTC" in text and "linux-x86_64 (test)" in text
    assert 'data-source="build report" data-state="read"' in text


def test_rows_follow_target_order(tmp_path: Path, matrix: Matrix) -> None:
    rows = collect(matrix, _layout(tmp_path))
    order = [t.name for t in matrix.targets]
    assert [order.index(r.target) for r in rows] == sorted(order.index(r.target) for r in rows)
    assert sorted(r.cell for r in rows) == sorted(c.id for c in matrix.cells())


def test_nothing_run_yet(tmp_path: Path, matrix: Matrix) -> None:
    layout = _layout(tmp_path)
    rows = {r.cell: r for r in collect(matrix, layout)}
    assert len(rows) == len(matrix.cells())
    for cell in matrix.cells():
        r = rows[cell.id]
        assert r.build.kind == ("planned" if cell.variant.planned else "not-run")
        assert {r.test(py).kind for py in matrix.pythons} == {"untested"}
        assert r.release.kind == "not-released"
        assert r.crosscheck.kind in ("not-run", "not-applicable")
        assert (r.crosscheck.kind == "not-run") == (cell.target.crosscheck and cell.id.startswith("core/default/"))
    notes = read_sources(layout).notes(page_path(layout).parent)
    assert [n.state for n in notes] == ["absent", "absent", "absent"]
    text = write_page(matrix, layout).read_text(encoding="utf-8")  # default host: this machine's target
    assert text.count('data-state="absent"') == 3
    assert f"host <b>{html.escape(default_host(matrix))}</b>" in text


@pytest.mark.parametrize(
    "content",
    ["{not json", "[1, 2]", '{"cells": {"a": 1}}', b"\xff\xfe\x00bad utf-8", '{"cells": [{"cell": 7}]}'],
)
def test_unreadable_files_never_crash(tmp_path: Path, matrix: Matrix, content: str | bytes) -> None:
    layout = _layout(tmp_path)
    _write(layout.build_report, content)
    _write(crosscheck_report_path(layout), content)
    _write(layout.release_report, content)
    page = write_page(matrix, layout, host="h")
    reader = read_page(page.read_text(encoding="utf-8"))
    assert len(reader.rows) == len(matrix.cells())
    sources = read_sources(layout)
    if content == '{"cells": [{"cell": 7}]}':  # valid build report shape, entry without a usable cell id
        assert sources.build.state == "read"
        assert {r.status("build").status for r in reader.rows} <= {"not-run", "planned"}
    else:
        assert sources.build.state == "unreadable" and sources.build.detail
        assert {r.status("build").status for r in reader.rows} == {"unreadable"}
    assert sources.crosscheck.state == sources.release.state == "unreadable"
    assert {r.status("release").status for r in reader.rows} == {"unreadable"}
    xcheck = {r.status("crosscheck").status for r in reader.rows}
    assert xcheck == {"unreadable", "not-applicable"}


def test_one_malformed_build_entry(tmp_path: Path, matrix: Matrix) -> None:
    layout = _layout(tmp_path)
    cells = [
        {"cell": BUILT, "status": 3},
        {"cell": FAILED, "status": "exploded"},
        {"cell": UP_TO_DATE, "status": "skipped", "reason": "not selected"},
    ]
    _write(layout.build_report, json.dumps({"cells": cells}))
    rows = {r.cell: r for r in collect(matrix, layout)}
    assert rows[BUILT].build.kind == "unreadable" and "'status' is not a string" in rows[BUILT].build.detail
    assert rows[FAILED].build.kind == "unreadable" and "exploded" in rows[FAILED].build.detail
    assert rows[UP_TO_DATE].build.kind == "skipped"


def test_released_with_other_bytes(tmp_path: Path, matrix: Matrix) -> None:
    staged = stage_files(tmp_path, matrix)
    data = json.loads(staged.layout.release_report.read_text(encoding="utf-8"))
    data["rows"][0]["sha256"] = "0" * 64
    staged.layout.release_report.write_text(json.dumps(data), encoding="utf-8")
    rows = {r.cell: r for r in collect(matrix, staged.layout)}
    assert rows[BUILT].release.kind == "differs"
    assert "0" * 64 in rows[BUILT].release.detail


def test_test_records_follow_the_bytes(tmp_path: Path, matrix: Matrix) -> None:
    """A build report whose sha256 is not the tested bytes' shows the wheel untested; a non-hex one is ignored."""
    staged = stage_files(tmp_path, matrix)
    data = json.loads(staged.layout.build_report.read_text(encoding="utf-8"))
    entry = next(c for c in data["cells"] if c["cell"] == BUILT)
    for fake in ("f" * 64, "../../records"):
        entry["sha256"] = fake
        staged.layout.build_report.write_text(json.dumps(data), encoding="utf-8")
        row = next(r for r in collect(matrix, staged.layout) if r.cell == BUILT)
        assert {row.test(py).kind for py in matrix.pythons} == {"untested"}
        assert row.release.kind == "differs"  # the release report lists this file name with other bytes


def test_render_escapes_everything() -> None:
    evil = '"><script>alert(1)</script>'
    row = PageRow(
        cell=f"c/{evil}/t",
        component="c",
        variant=evil,
        target="t",
        dist=f"d{evil}",
        version="1.0",
        build=Status(kind="failed", text="failed", note=evil, detail=evil, link=f"../logs/{evil}.log"),
        wheel=f"{evil}.whl",
        wheel_link=f"../../{evil}.whl",
        size=2_500_000,
        sha256="a" * 64,
        tests=(("3.12", Status(kind="passed", text="passed 1/1")),),
        crosscheck=Status(kind="not-applicable", text="—"),
        release=Status(kind="not-released", text="not released"),
    )
    header = PageHeader(host=evil, generated=datetime(2026, 1, 2, tzinfo=UTC), pythons=("3.12", "3.13"))
    text = render([row], header=header)
    assert "<script>" not in text
    reader = read_page(text)
    assert "script" not in reader.tags
    (tr,) = reader.rows
    assert tr.cell == f"c/{evil}/t"
    assert tr.status("build").title == evil
    assert evil in tr.status("build").text
    assert tr.status("build").links == [f"../logs/{evil}.log"]
    assert tr.status("test", "3.12").status == "passed"
    assert tr.status("test", "3.13").status == "untested"  # a Python the row has no entry for
    assert "2.4 MiB" in text


def test_readers_accept_what_the_stages_write(tmp_path: Path, matrix: Matrix) -> None:
    """The page's readers against the stages' own writers (fails when a record format drifts)."""
    from pipeline.build import BuildReport, CellResult
    from pipeline.crosscheck import Check, CrosscheckReport, TargetResult
    from pipeline.crosscheck import crosscheck_report_path as written_at
    from pipeline.records import BuildRecord
    from pipeline.release import ReleaseResult, ReleaseRow

    layout = _layout(tmp_path)
    wheel = _write(layout.dist_for("linux-x86_64") / "mosaicrt-0.1.0-py3-none-any.whl", b"wheel")
    sha = hashlib.sha256(b"wheel").hexdigest()
    cell = matrix.cells()[0]
    record = BuildRecord(
        cell=cell.id, wheel=wheel.name, sha256=sha, input_hash="1" * 64, inputs={}, files={}, commands=(),
        started="2026-01-01T00:00:00+00:00", finished="2026-01-01T00:00:01+00:00", toolchain={},
    )  # fmt: skip
    result = CellResult(
        cell=cell, status="built", wheel=wheel, record=record, log=tmp_path / "build" / "pipeline" / "logs" / "x.log"
    )
    _write(layout.build_report, BuildReport(host=None, duration_s=1.0, cells=(result,)).to_json(tmp_path))
    xlayout = Layout(root=tmp_path, dist=layout.dist, work=tmp_path / "build" / "crosscheck")
    xtarget = next(t for t in matrix.targets if t.crosscheck)
    xreport = CrosscheckReport(
        host=None,
        stage="test",
        duration_s=1.0,
        results=(TargetResult(target=xtarget.name, checks=(Check(name="build", outcome="fail", detail="boom"),)),),
    )
    _write(written_at(xlayout), xreport.to_json())
    assert written_at(xlayout) == crosscheck_report_path(layout)
    release = ReleaseResult(
        index="x", rows=(ReleaseRow(wheel=wheel.name, sha256=sha, status="uploaded", tag="t", tag_status="created"),)
    )
    _write(layout.release_report, release.to_json())

    rows = {r.cell: r for r in collect(matrix, layout)}
    assert rows[cell.id].build.kind == "built"
    assert rows[cell.id].release.kind == "uploaded"
    assert rows[f"core/default/{xtarget.name}"].crosscheck.kind == "failed"


# ------------------------------------------------------------------------------------ headless Chromium

INSTALL = ["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "--no-install-recommends", "chromium"]


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium")
    if found:
        return found
    if os.geteuid() != 0:
        pytest.skip(f"chromium is not installed; as root: {' '.join(INSTALL)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if subprocess.run(INSTALL, env=env, capture_output=True, check=False).returncode != 0:
        update = ["apt-get", "-o", "DPkg::Lock::Timeout=600", "update"]
        subprocess.run(update, env=env, capture_output=True, check=True)
        proc = subprocess.run(INSTALL, env=env, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, f"{' '.join(INSTALL)} failed:\n{proc.stdout}\n{proc.stderr}"
    found = shutil.which("chromium")
    assert found, "chromium was installed but is not on PATH"
    return found


def _headless(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"{cmd} exited with {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture
def rendered(tmp_path: Path, matrix: Matrix) -> Iterator[tuple[Path, Staged]]:
    staged = stage_files(tmp_path / "repo", matrix)
    yield write_page(matrix, staged.layout, host="linux-x86_64 (chromium test)"), staged


@pytest.mark.slow
def test_chromium_renders_one_row_per_cell(
    chromium: str, rendered: tuple[Path, Staged], matrix: Matrix, tmp_path: Path
) -> None:
    page, staged = rendered
    proc = _headless(chromium, tmp_path / "profile", "--dump-dom", page.as_uri())
    check_staged_page(page, proc.stdout, matrix, staged)


@pytest.mark.slow
def test_chromium_screenshot_shows_the_table(chromium: str, rendered: tuple[Path, Staged], tmp_path: Path) -> None:
    page, _ = rendered
    shot = tmp_path / "page.png"
    _headless(chromium, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1400,2000", page.as_uri())
    assert shot.is_file() and shot.stat().st_size > 0
    width, height, pixels = decode_png(shot.read_bytes())
    assert (width, height) == (1400, 2000)
    colours = Counter(pixels)
    assert len(colours) > 50, f"only {len(colours)} colours: a blank page?"
    n_background = colours.most_common(1)[0][1]
    assert width * height - n_background > width * height // 100, "almost everything is the background colour"
    # the status backgrounds of the CSS are on screen: passed/built (green) and failed (red)
    assert (0xDA, 0xFB, 0xE1) in colours
    assert (0xFF, 0xEB, 0xE9) in colours


def test_decode_png_undoes_every_filter() -> None:
    """The screenshot decoder against a PNG written here with each of the five row filters."""
    width, height, bpp = 9, 10, 3
    rows = [bytes((x * 37 + y * 91 + c * 13) % 256 for x in range(width) for c in range(bpp)) for y in range(height)]
    filtered = bytearray()
    prev = bytes(width * bpp)
    for y, row in enumerate(rows):
        filt = y % 5
        out = bytearray()
        for i, v in enumerate(row):
            left = row[i - bpp] if i >= bpp else 0
            up, corner = prev[i], prev[i - bpp] if i >= bpp else 0
            pa, pb, pc = abs(up - corner), abs(left - corner), abs(left + up - 2 * corner)
            paeth = left if pa <= pb and pa <= pc else up if pb <= pc else corner
            pred = (0, left, up, (left + up) // 2, paeth)[filt]
            out.append((v - pred) & 0xFF)
        filtered += bytes([filt]) + out
        prev = row

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(bytes(filtered))) + chunk(b"IEND", b"")
    w, h, pixels = decode_png(png)
    assert (w, h) == (width, height)
    assert pixels == [tuple(row[i : i + 3]) for row in rows for i in range(0, width * bpp, bpp)]


def decode_png(data: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """Width, height and RGB pixels of an 8-bit RGB/RGBA, non-interlaced PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, bytearray(), b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(bytes(idat))
    stride = width * bpp
    assert len(raw) == height * (stride + 1)
    low, high = int.from_bytes(b"\x7f" * stride, "big"), int.from_bytes(b"\x80" * stride, "big")
    prev = bytes(stride)
    pixels: list[tuple[int, int, int]] = []
    for y in range(height):
        filt = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        if filt == 2:  # up: a bytewise add without carries between bytes, on one big integer
            a, b = int.from_bytes(line, "big"), int.from_bytes(prev, "big")
            line = bytearray((((a & low) + (b & low)) ^ ((a ^ b) & high)).to_bytes(stride, "big"))
        elif filt != 0:
            _unfilter(filt, line, prev, bpp)
        pixels += zip(line[0::bpp], line[1::bpp], line[2::bpp], strict=True)
        prev = bytes(line)
    return width, height, pixels


def _unfilter(filt: int, line: bytearray, prev: bytes, bpp: int) -> None:
    """PNG filters 1 (sub), 3 (average) and 4 (Paeth), in place."""
    assert filt in (1, 3, 4), f"unknown PNG filter {filt}"
    for i in range(bpp):  # no left neighbour: sub adds 0, average adds up/2, Paeth predicts up
        line[i] = (line[i] + (0 if filt == 1 else prev[i] // 2 if filt == 3 else prev[i])) & 0xFF
    for i in range(bpp, len(line)):
        left = line[i - bpp]
        if filt == 1:
            line[i] = (line[i] + left) & 0xFF
        elif filt == 3:
            line[i] = (line[i] + (left + prev[i]) // 2) & 0xFF
        else:
            up, corner = prev[i], prev[i - bpp]
            pa, pb, pc = abs(up - corner), abs(left - corner), abs(left + up - 2 * corner)
            line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
