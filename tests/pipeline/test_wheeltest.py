"""pipeline.wheeltest: interpreter discovery, clean install environment, junit parsing."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pipeline.wheeltest import SUITE, clean_env, failed_tests, find_pythons, parse_junit

from .conftest import REPO


def test_finds_this_interpreters_version_and_reports_missing() -> None:
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    found, missing = find_pythons([version, "3.99"])
    assert missing == ["3.99"]
    assert [p.version for p in found] == [version]
    assert found[0].full.startswith(version + ".")


def test_clean_env_switches_off_machine_pip_config_and_source_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/src")
    monkeypatch.setenv("MOSAICRT_LIBRARY", "/src/libmosaicrt.so")
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "file:///opt/pypi")
    env = clean_env({"X": "1"})
    assert "PYTHONPATH" not in env and "MOSAICRT_LIBRARY" not in env
    assert "PIP_FIND_LINKS" not in env and "PIP_EXTRA_INDEX_URL" not in env
    assert env["PIP_CONFIG_FILE"] == os.devnull
    assert env["X"] == "1"


def test_parse_junit(tmp_path: Path) -> None:
    xml = tmp_path / "j.xml"
    xml.write_text(
        '<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="10" failures="2" errors="1"'
        ' skipped="3"/></testsuites>'
    )
    c = parse_junit(xml)
    assert (c.tests, c.failures, c.errors, c.skipped, c.passed) == (10, 2, 1, 3, 4)


def test_failed_tests_are_named_with_their_message(tmp_path: Path) -> None:
    """A failed wheel suite's record names what failed, so a CI log without the venv's log still says why."""
    xml = tmp_path / "j.xml"
    xml.write_text(
        '<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="4" failures="1" errors="1">'
        '<testcase classname="test_a" name="test_ok"/>'
        '<testcase classname="test_a" name="test_bad"><failure message="AssertionError: 7 == 0&#10;more">'
        "traceback</failure></testcase>"
        '<testcase classname="test_b" name="test_setup"><error message="">traceback</error></testcase>'
        '<testcase classname="test_b" name="test_skip"><skipped message="no GPU"/></testcase>'
        "</testsuite></testsuites>"
    )
    assert failed_tests(xml) == ["test_a::test_bad (AssertionError: 7 == 0)", "test_b::test_setup (error)"]
    assert failed_tests(xml, limit=1) == ["test_a::test_bad (AssertionError: 7 == 0)"]


def test_the_wheel_suite_is_self_contained() -> None:
    suite = REPO / SUITE
    assert (suite / "pytest.ini").is_file(), "the wheel suite carries its own pytest config"
    assert (suite / "requirements.txt").is_file()
    assert (suite / "test_smoke.py").is_file()
    assert "error" in (suite / "pytest.ini").read_text()


def test_pairs_are_tested_two_at_a_time_in_their_own_venvs_and_reported_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading
    import time

    from pipeline import wheeltest
    from pipeline.layout import Layout
    from pipeline.records import Counts, TestRecord

    root = tmp_path / "repo"
    (root / SUITE).mkdir(parents=True)
    (root / SUITE / "requirements.txt").write_text("pytest\n")
    layout = Layout(root=root, dist=root / "dist", work=root / "build" / "pipeline")
    wheels = []
    for name in ("a", "b", "c"):
        w = tmp_path / f"mosaicrt_{name}-1.0-py3-none-any.whl"
        w.write_bytes(name.encode())
        wheels.append(w)
    pythons = [wheeltest.Interpreter(version="3.11", full="3.11.7", executable=sys.executable),
               wheeltest.Interpreter(version="3.12", full="3.12.1", executable="python3.12")]
    lock = threading.Lock()
    running: set[tuple[str, int]] = set()
    seen: list[tuple[str, str, int]] = []
    most = 0

    def fake_run_one(wheel: Path, sha: str, py: wheeltest.Interpreter, lay: Layout, *, shash: str,
                     platform_name: str, suite: wheeltest.WheelSuite | None = None, slot: int = 0) -> TestRecord:
        nonlocal most
        with lock:
            assert (py.version, slot) not in running, "two pairs share a venv"
            running.add((py.version, slot))
            most = max(most, len(running))
            seen.append((wheel.name, py.version, slot))
        time.sleep(0.2)
        with lock:
            running.discard((py.version, slot))
        return TestRecord(wheel=wheel.name, sha256=sha, outcome="passed", python=py.version, python_full=py.full,
                          platform=platform_name, counts=Counts(tests=3), suite_hash=shash, created="now",
                          duration_s=0.2)

    monkeypatch.setattr(wheeltest, "_run_one", fake_run_one)
    rows = wheeltest.run_wheel_tests(wheels, pythons, layout, platform_name="linux-x86_64", quiet=True, jobs=2)
    assert [(r.wheel, r.python) for r in rows] == [(w.name, p.version) for w in wheels for p in pythons]
    assert all(r.status == "passed" and r.record and Path(r.record).is_file() for r in rows)
    assert most == 2 and {slot for _, _, slot in seen} == {0, 1}
    # a second run finds every pair's record and runs nothing
    seen.clear()
    again = wheeltest.run_wheel_tests(wheels, pythons, layout, platform_name="linux-x86_64", quiet=True, jobs=2)
    assert {r.status for r in again} == {"up-to-date"} and not seen


def test_test_jobs_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.errors import UsageError
    from pipeline.wheeltest import wheel_test_jobs

    monkeypatch.setenv("MOSAICRT_TEST_JOBS", "3")
    assert wheel_test_jobs() == 3
    monkeypatch.setenv("MOSAICRT_TEST_JOBS", "zero")
    with pytest.raises(UsageError, match="MOSAICRT_TEST_JOBS"):
        wheel_test_jobs()
