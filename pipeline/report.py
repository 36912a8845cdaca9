"""Human tables and machine JSON for the matrix, build and test results."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .matrix import Matrix
from .plan import PlannedCell

if TYPE_CHECKING:  # the matrix table must work with the standard library alone (CI's plan job)
    from .build import BuildReport, Status
    from .wheeltest import TestRow


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [["" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def matrix_table(matrix: Matrix, planned: Sequence[PlannedCell], host: str | None) -> str:
    rows = [
        (
            pc.cell.component.name,
            pc.cell.variant.name,
            pc.cell.dist,
            pc.cell.component.version,
            pc.cell.target.name,
            pc.cell.target.ci_runner,
            pc.availability if pc.availability == "buildable" else f"skipped: {pc.reason}",
        )
        for pc in planned
    ]
    head = (
        f"host: {host or 'not a matrix target'}    tested CPython: {', '.join(matrix.pythons)}"
        f"    policy: CPython >= {matrix.policy.python_floor}, macOS >= {matrix.policy.macos_min_deployment_target}"
    )
    return head + "\n" + table(("component", "variant", "dist", "version", "target", "ci runner", "on this host"), rows)


def matrix_json(matrix: Matrix, planned: Sequence[PlannedCell], host: str | None) -> str:
    """``include`` entries for a CI matrix, plus this host's view of every cell."""
    include = []
    for pc in planned:
        c = pc.cell
        include.append(
            {
                "cell": c.id,
                "component": c.component.name,
                "kind": c.component.kind,
                "variant": c.variant.name,
                "dist": c.dist,
                "version": c.component.version,
                "tag": c.component.tag,
                "path": c.component.path,
                "target": c.target.name,
                "os": c.target.os,
                "arch": c.target.arch,
                "runner": c.target.ci_runner,
                "wheel_platform": c.target.wheel_platform,
                "emulator": list(c.target.emulator),
                "sdks": list(c.component.sdks),
                "planned": c.variant.planned,
                "host_status": pc.availability,
                "host_reason": pc.reason,
            }
        )
    return json.dumps({"host": host, "python": list(matrix.pythons), "include": include}, indent=2)


def build_table(report: BuildReport) -> str:
    rows = [
        (c.cell.id, c.status, c.wheel.name if c.wheel else (c.reason or ""), f"{c.duration_s:.1f}s")
        for c in report.cells
    ]
    shown: tuple[Status, ...] = ("built", "up-to-date", "stale", "skipped", "failed")
    summary = ", ".join(f"{report.count(s)} {s}" for s in shown if s != "stale" or report.count(s))  # stale: if any
    return table(("cell", "status", "wheel / reason", "time"), rows) + f"\n{summary} in {report.duration_s:.1f}s"


def test_table(rows: Sequence[TestRow]) -> str:
    out = []
    for r in rows:
        c = r.counts
        counts = (
            f"{c.passed}/{c.tests} passed, {c.failures} failed, {c.errors} errors, {c.skipped} skipped" if c else ""
        )
        out.append((r.wheel, r.python, r.status, counts, r.reason or ""))
    return table(("wheel", "python", "status", "counts", "reason"), out)
