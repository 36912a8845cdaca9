"""Stage records: what the build made (:class:`BuildRecord`) and what testing found (:class:`TestRecord`).

A **build record** is written by the build step for one cell when it produces a wheel, at
``<work>/state/<cell slug>.json``: the wheel's name and sha256, the cell's input hash and named inputs
(:func:`pipeline.hashing.cell_input_hash`, the same function the gate and the provenance use), the
commands the build actually ran, its start and end times, and the toolchain versions measured while it
ran. The provenance of a release is made from this record, never from logs.

A **test record** lives at ``<records>/<sha256>/<python>.json``. Looking a wheel up always hashes its
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

BUILD_RECORD_SCHEMA = 2


@dataclass(frozen=True, kw_only=True)
class BuildRecord:
    """One cell's wheel as the build step made it. Frozen; written once per build of the cell."""

    cell: str  #: the cell id, component/variant/target
    wheel: str  #: file name in dist/<target>/
    sha256: str
    input_hash: str  #: :func:`pipeline.hashing.cell_input_hash` of the cell when it was built
    inputs: dict[str, str]  #: the named inputs behind ``input_hash`` (to say what changed)
    files: dict[str, str]  #: the component's files → sha256 (to name changed files)
    commands: tuple[str, ...]  #: every command the build ran, in order, as run
    started: str  #: ISO 8601 UTC
    finished: str  #: ISO 8601 UTC
    toolchain: dict[str, str]  #: tool → version, measured by the build while it ran

    def to_json(self) -> str:
        data = asdict(self)
        data["commands"] = list(self.commands)
        return json.dumps({"schema": BUILD_RECORD_SCHEMA, **data}, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> BuildRecord:
        data = json.loads(text)
        if not isinstance(data, dict) or data.pop("schema", None) != BUILD_RECORD_SCHEMA:
            raise ValueError("not a build record of this pipeline version")
        data["commands"] = tuple(data["commands"])
        return cls(**data)


def write_build_record(path: Path, record: BuildRecord) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(record.to_json(), encoding="utf-8")
    tmp.replace(path)


def read_build_record(path: Path) -> BuildRecord | None:
    """The record at ``path``; None when there is none or it is unreadable (an older schema: rebuild)."""
    try:
        return BuildRecord.from_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError, KeyError):
        return None


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
