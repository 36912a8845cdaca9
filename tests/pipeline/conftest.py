"""Shared fixtures: copies of the real matrix and of the two-component fixture repository."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

# Before anything imports conan: conan installs an import hook without find_spec, and securesystemslib (the
# EP catalog's signer, pipeline/catalog/) probes optional modules (boto3, ...) at import; through that hook
# each probe is an ImportWarning, an error here. Imported first, it finds them the normal way.
import securesystemslib.signer  # noqa: F401
import tuf.ngclient  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def edit(path: Path, old: str, new: str) -> None:
    """Replace one exact snippet in a file (the test fails if the snippet is absent)."""
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


@pytest.fixture
def real_matrix_repo(tmp_path: Path) -> Path:
    """A throwaway repository with the real matrix/ and recipes/, and a stand-in core/ folder."""
    root = tmp_path / "repo"
    shutil.copytree(REPO / "matrix", root / "matrix")
    shutil.copytree(REPO / "recipes", root / "recipes", ignore=shutil.ignore_patterns("__pycache__"))
    core = root / "core"
    core.mkdir()
    shutil.copy(REPO / "core" / "pyproject.toml", core / "pyproject.toml")
    shutil.copy(REPO / "core" / "VERSION", core / "VERSION")
    shutil.copytree(REPO / "core" / "include", core / "include")
    for ep in sorted((REPO / "eps").glob("*/pyproject.toml")):  # stand-ins for the plugin EP components
        (root / "eps" / ep.parent.name).mkdir(parents=True)
        for name in ("pyproject.toml", "VERSION"):
            shutil.copy(ep.parent / name, root / "eps" / ep.parent.name / name)
    for suite in [*sorted((REPO / "tests" / "eps").glob("*/pytest.ini")), REPO / "tests" / "winml" / "pytest.ini"]:
        shutil.copytree(suite.parent, root / suite.parent.relative_to(REPO),
                        ignore=shutil.ignore_patterns("__pycache__"))
    return root


@pytest.fixture
def tworepo(tmp_path: Path) -> Path:
    """The two tiny C components of fixtures/tworepo (they build in seconds)."""
    root = tmp_path / "tworepo"
    shutil.copytree(FIXTURES / "tworepo", root, ignore=shutil.ignore_patterns("build", "dist", "__pycache__"))
    return root


Editor = Callable[[Path, str, str], None]


@pytest.fixture
def editor() -> Editor:
    return edit
