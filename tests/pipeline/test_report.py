"""pipeline.report: tables line up; the build report is machine-readable."""

from __future__ import annotations

import json

from pipeline.build import BuildReport, CellResult
from pipeline.report import build_table, table


def test_table_alignment() -> None:
    text = table(("a", "bb"), [("xxx", 1), ("y", None)])
    lines = text.splitlines()
    assert lines[0] == "a    bb"
    assert lines[1] == "---  --"
    assert lines[2] == "xxx  1"
    assert lines[3] == "y"


def test_build_report_json_and_summary() -> None:
    cells = (
        CellResult(
            cell="c/default/t",
            component="c",
            variant="default",
            target="t",
            dist="d",
            version="1.0.0",
            status="built",
            wheel="dist/t/d.whl",
            sha256="0" * 64,
            duration_s=2.0,
        ),
        CellResult(
            cell="c/default/u",
            component="c",
            variant="default",
            target="u",
            dist="d",
            version="1.0.0",
            status="failed",
            reason="wheel build: cmake exited with 1",
            log="build/pipeline/logs/x.log",
        ),
        CellResult(
            cell="c/default/v",
            component="c",
            variant="default",
            target="v",
            dist="d",
            version="1.0.0",
            status="skipped",
            reason="toolchain missing",
        ),
    )
    report = BuildReport(host="t", duration_s=3.0, cells=cells)
    data = json.loads(report.to_json())
    assert data["schema"] == 1
    assert [c["status"] for c in data["cells"]] == ["built", "failed", "skipped"]
    assert data["cells"][1]["log"] == "build/pipeline/logs/x.log"
    summary = build_table(report).splitlines()[-1]
    assert summary == "1 built, 0 up-to-date, 1 skipped, 1 failed in 3.0s"
