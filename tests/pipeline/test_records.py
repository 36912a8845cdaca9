"""pipeline.records: a test record is bound to the wheel's sha256, not its name."""

from __future__ import annotations

from pathlib import Path

from pipeline.hashing import sha256_file
from pipeline.records import Counts, TestRecord, records_for_wheel, write_record


def _record(wheel: Path, python: str = "3.11", outcome: str = "passed") -> TestRecord:
    return TestRecord(
        wheel=wheel.name,
        sha256=sha256_file(wheel),
        outcome=outcome,  # type: ignore[arg-type]
        python=python,
        python_full=python + ".0",
        platform="linux-x86_64",
        counts=Counts(tests=3, skipped=1),
        suite_hash="s",
        created="2026-01-01T00:00:00+00:00",
        duration_s=1.0,
    )


def test_record_round_trip(tmp_path: Path) -> None:
    wheel = tmp_path / "w-1.0.0-py3-none-any.whl"
    wheel.write_bytes(b"wheel bytes")
    rec = _record(wheel)
    path = write_record(tmp_path / "records", rec)
    assert path.parent.name == rec.sha256
    assert TestRecord.from_json(path.read_text()) == rec
    assert rec.counts.passed == 2


def test_changed_bytes_have_no_record(tmp_path: Path) -> None:
    wheel = tmp_path / "w-1.0.0-py3-none-any.whl"
    wheel.write_bytes(b"wheel bytes")
    records = tmp_path / "records"
    write_record(records, _record(wheel, "3.11"))
    write_record(records, _record(wheel, "3.12"))
    assert set(records_for_wheel(records, wheel)) == {"3.11", "3.12"}
    data = bytearray(wheel.read_bytes())
    data[0] ^= 1  # one flipped bit, same file name
    wheel.write_bytes(bytes(data))
    assert records_for_wheel(records, wheel) == {}


def test_a_record_filed_under_another_digest_is_ignored(tmp_path: Path) -> None:
    wheel = tmp_path / "w.whl"
    wheel.write_bytes(b"x")
    other = tmp_path / "other.whl"
    other.write_bytes(b"y")
    rec = _record(other)
    target = tmp_path / "r" / sha256_file(wheel) / "3.11.json"  # misfiled: name says wheel, content says other
    target.parent.mkdir(parents=True)
    target.write_text(rec.to_json())
    (tmp_path / "r" / sha256_file(wheel) / "3.12.json").write_text("{not json")
    assert records_for_wheel(tmp_path / "r", wheel) == {}
