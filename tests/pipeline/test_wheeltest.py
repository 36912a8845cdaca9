"""pipeline.wheeltest: interpreter discovery, clean install environment, junit parsing."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pipeline.wheeltest import SUITE, clean_env, find_pythons, parse_junit

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


def test_the_wheel_suite_is_self_contained() -> None:
    suite = REPO / SUITE
    assert (suite / "pytest.ini").is_file(), "the wheel suite carries its own pytest config"
    assert (suite / "requirements.txt").is_file()
    assert (suite / "test_smoke.py").is_file()
    assert "error" in (suite / "pytest.ini").read_text()
