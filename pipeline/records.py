"""Test records: the result of testing one wheel on one Python, bound to the wheel's sha256.

A record lives at ``<records>/<sha256>/<python>.json``. Looking a wheel up always hashes its
current bytes, so a wheel that changed after testing (rebuilt, tampered) has no record.
The release step (gate) reads these records; it never trusts file names.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from .hashing import sha256_file

Outcome = Literal["passed", "failed", "error"]


@dataclass(frozen=True, kw_only=True)
class Counts:
    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0

    @property
    def passed(self) -> int:
        return self.tests - self.failures - self.errors - self.skipped


@dataclass(frozen=True, kw_only=True)
class TestRecord:
    __test__ = False  # not a pytest test class

    wheel: str  #: file name at test time (informational; the binding is sha256)
    sha256: str
    outcome: Outcome
    python: str  #: "3.12"
    python_full: str  #: "3.12.1"
    platform: str  #: the machine's matrix target (e.g. linux-x86_64)
    counts: Counts
    suite_hash: str  #: hash of tests/wheel at test time
    created: str  #: ISO 8601 UTC
    duration_s: float
    log: str | None = None
    reason: str | None = None  #: why outcome is not "passed"

    def to_json(self) -> str:
        return json.dumps({"schema": 1, **asdict(self)}, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> TestRecord:
        data = json.loads(text)
        data.pop("schema", None)
        data["counts"] = Counts(**data["counts"])
        return cls(**data)


def record_path(records_dir: Path, sha256: str, python: str) -> Path:
    return records_dir / sha256 / f"{python}.json"


def write_record(records_dir: Path, record: TestRecord) -> Path:
    path = record_path(records_dir, record.sha256, record.python)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(record.to_json(), encoding="utf-8")
    tmp.replace(path)
    return path


def records_for_sha(records_dir: Path, sha256: str) -> dict[str, TestRecord]:
    """All records of a digest, keyed by Python version (unreadable records are ignored)."""
    folder = records_dir / sha256
    out: dict[str, TestRecord] = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            rec = TestRecord.from_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, TypeError, KeyError):
            continue
        if rec.sha256 == sha256:
            out[rec.python] = rec
    return out


def records_for_wheel(records_dir: Path, wheel: Path) -> dict[str, TestRecord]:
    """Records for the wheel's *current* bytes."""
    return records_for_sha(records_dir, sha256_file(wheel))


def wheel_test_status(records_dir: Path, wheel: Path, pythons: list[str]) -> str:
    """'passed' when every listed Python has a passing record, 'failed' if any failed, else 'untested'."""
    recs = records_for_wheel(records_dir, wheel)
    if any(r.outcome != "passed" for r in recs.values()):
        return "failed"
    if pythons and all(p in recs for p in pythons):
        return "passed"
    return "untested"
