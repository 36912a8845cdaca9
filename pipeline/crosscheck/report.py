"""The crosscheck's table for people, its JSON report, and its exit status."""

from __future__ import annotations

from pathlib import Path

from ..errors import CrosscheckFailure, UsageError
from ..layout import Layout
from .model import CHECKS, Check, CrosscheckReport


def format_table(report: CrosscheckReport) -> str:
    """The target-by-check table, then one line per failed check (its reason) and per unknown target."""
    from ..report import table

    rows = []
    for r in report.results:
        cells = [_cell(r.check(name)) for name in CHECKS]
        rows.append((r.target, *cells, f"{r.duration_s:.0f}s"))
    lines = [table(("target", *CHECKS, "time"), rows)]
    for r in report.results:
        for c in r.checks:
            if c.outcome == "fail":
                lines.append(f"FAIL {r.target} {c.name}: {c.detail}")
        if r.kernels_run:
            lines.append(f"{r.target}: kernels run under emulation: {', '.join(r.kernels_run)}")
    lines += [f"FAIL {u}" for u in report.unknown]
    passed = sum(r.ok for r in report.results)
    lines.append(f"{passed}/{len(report.results) + len(report.unknown)} targets passed in {report.duration_s:.0f}s")
    return "\n".join(lines)


def _cell(c: Check) -> str:
    if c.outcome == "pass":
        return f"pass ({c.detail})" if c.detail and len(c.detail) <= 28 else "pass"
    return "FAIL" if c.outcome == "fail" else "-"


def raise_for_report(report: CrosscheckReport) -> None:
    if report.unknown:
        raise UsageError("; ".join(report.unknown))
    bad = [f"{r.target} {c.name}" for r in report.results for c in r.checks if c.outcome == "fail"]
    if bad:
        raise CrosscheckFailure(f"crosscheck failed: {', '.join(bad)} (reasons above)")


def crosscheck_report_path(layout: Layout) -> Path:
    return layout.work / "reports" / "crosscheck-report.json"


def write_report(report: CrosscheckReport, layout: Layout) -> Path:
    path = crosscheck_report_path(layout)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report.to_json(), encoding="utf-8")
    return path
