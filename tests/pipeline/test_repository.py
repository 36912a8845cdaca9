"""Repository-level contracts: README commands, .ci/run, nox sessions, recipes and profiles."""

from __future__ import annotations

import ast
import re

from pipeline.matrix import load_matrix

from .conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def _quick_start_commands() -> list[str]:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section)


def test_readme_has_the_two_quick_start_commands() -> None:
    assert _quick_start_commands() == [
        "python3 -m pip install nox && nox -s main",
        "python3 -m pip install nox && nox -s ci",
    ]


def test_ci_run_calls_exactly_the_readme_test_command() -> None:
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    commands = [line for line in script.splitlines() if line and not line.startswith(("#", "set ", "cd "))]
    assert commands == [_quick_start_commands()[1]]
    assert script.startswith("#!/usr/bin/env bash")
    assert (REPO / ".ci" / "run").stat().st_mode & 0o111


def _sessions() -> dict[str, str]:
    tree = ast.parse((REPO / "noxfile.py").read_text(encoding="utf-8"))
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any("session" in ast.unparse(d) for d in node.decorator_list):
            out[node.name] = ast.get_docstring(node) or ""
    return out


def test_every_session_is_documented_in_noxfile_and_readme() -> None:
    sessions = _sessions()
    assert {"main", "build", "test", "matrix", "ci", "lint", "bench"} <= set(sessions)
    for name, doc in sessions.items():
        assert doc, f"session {name} has no docstring (nox -l shows it)"
        assert f"nox -s {name}" in README, f"README does not list nox -s {name}"


def test_sessions_stay_thin() -> None:
    tree = ast.parse((REPO / "noxfile.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in _sessions():
            body = [s for s in node.body if not isinstance(s, ast.Expr) or not isinstance(s.value, ast.Constant)]
            assert len(body) <= 6, f"session {node.name} has grown; move logic into pipeline/"


def test_every_target_has_a_profile_and_every_profile_a_target() -> None:
    m = load_matrix(REPO)
    declared = {t.conan_profile for t in m.targets}
    present = {f"recipes/profiles/{p.name}" for p in (REPO / "recipes" / "profiles").iterdir()}
    assert declared == present


def test_gitignore_covers_generated_folders() -> None:
    ignored = (REPO / ".gitignore").read_text(encoding="utf-8").split()
    for folder in ("build/", "dist/", ".nox/"):
        assert folder in ignored
