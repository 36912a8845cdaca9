"""pipeline.report: tables line up; the build report is machine-readable."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.build import BuildReport, CellResult
from pipeline.matrix import load_matrix
from pipeline.records import BuildRecord
from pipeline.report import build_table, table

from .conftest import REPO


def test_table_alignment() -> None:
    text = table(("a", "bb"), [("xxx", 1), ("y", None)])
    lines = text.splitlines()
    assert lines[0] == "a    bb"
    assert lines[1] == "---  --"
    assert lines[2] == "xxx  1"
    assert lines[3] == "y"


def test_build_report_json_and_summary(tmp_path: Path) -> None:
    matrix = load_matrix(REPO)
    x86, arm, win = (next(c for c in matrix.cells() if c.id == f"core/default/{t}")
                     for t in ("linux-x86_64", "linux-aarch64", "windows-x86_64"))  # fmt: skip
    wheel = tmp_path / "dist" / "linux-x86_64" / "mosaicrt-0.1.0-py3-none-manylinux_2_28_x86_64.whl"
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"wheel bytes")
    record = BuildRecord(
        cell=x86.id, wheel=wheel.name, sha256="0" * 64, input_hash="1" * 64, inputs={}, files={}, commands=("cmake",),
        started="2026-01-01T00:00:00+00:00", finished="2026-01-01T00:00:02+00:00", toolchain={},
    )  # fmt: skip
    cells = (
        CellResult(cell=x86, status="built", wheel=wheel, record=record, duration_s=2.0),
        CellResult(cell=arm, status="failed", reason="wheel build: cmake exited with 1",
                   log=tmp_path / "build" / "pipeline" / "logs" / "x.log"),
        CellResult(cell=win, status="skipped", skip="toolchain", reason="toolchain missing"),
    )
    report = BuildReport(host="linux-x86_64", duration_s=3.0, cells=cells)
    data = json.loads(report.to_json(tmp_path))
    assert data["schema"] == 2
    assert [c["status"] for c in data["cells"]] == ["built", "failed", "skipped"]
    assert data["cells"][0]["wheel"] == f"dist/linux-x86_64/{wheel.name}" and data["cells"][0]["size"] == 11
    assert data["cells"][0]["sha256"] == "0" * 64 and data["cells"][0]["record"]["commands"] == ["cmake"]
    assert data["cells"][1]["log"] == "build/pipeline/logs/x.log"
    assert data["cells"][2]["skip"] == "toolchain"
    summary = build_table(report).splitlines()[-1]
    assert summary == "1 built, 0 up-to-date, 1 skipped, 1 failed in 3.0s"
