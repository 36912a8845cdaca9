"""Wheel test suite: runs against the installed mosaicrt wheel (or a dev build via MOSAICRT_LIBRARY)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

NODE_CASE_RESULTS: dict[str, str] = {}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not NODE_CASE_RESULTS:
        return
    counts: dict[str, int] = {}
    for status in NODE_CASE_RESULTS.values():
        counts[status] = counts.get(status, 0) + 1
    total = len(NODE_CASE_RESULTS)
    terminalreporter.write_line(
        f"onnx backend node cases: {counts.get('pass', 0)} passed, {counts.get('fail', 0)} failed, "
        f"{counts.get('unsupported', 0)} unsupported by the CPU EP (of {total} run)"
    )
