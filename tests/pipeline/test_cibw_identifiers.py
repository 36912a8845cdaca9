"""`cibuildwheel --print-build-identifiers` per component and platform agrees with matrix/.

What cibuildwheel itself reads: the component's [tool.cibuildwheel] plus the CIBW_* variables the
generated build job sets for the cell. No container engine is needed to list the identifiers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline import cibw
from pipeline.matrix import Cell, load_matrix
from pipeline.workflow import cibuildwheel_cells

from .conftest import REPO, edit

MATRIX = load_matrix(REPO)
CELLS = cibuildwheel_cells(MATRIX)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cibw-cache")


def test_every_platform_and_component_is_covered() -> None:
    assert {c.target.os for c in CELLS} == {"linux", "windows", "macos"}
    assert {c.component.name for c in CELLS} == {c.name for c in MATRIX.components}


@pytest.mark.parametrize("cell", CELLS, ids=[c.id for c in CELLS])
def test_identifiers_agree_with_the_matrix(cell: Cell, cache_dir: Path) -> None:
    got = cibw.print_identifiers(MATRIX, cell, cache_dir=cache_dir)
    want = cibw.expected_identifiers(MATRIX, cell.target)
    assert got == want, f"{cell.id}: cibuildwheel would build {got}, the matrix says {want}"
    assert len(want) == len(MATRIX.pythons)


def test_a_contradicting_config_is_seen(real_matrix_repo: Path, cache_dir: Path) -> None:
    """The comparison can fail: a build selector that drops a CPython shows up in the identifiers."""
    edit(real_matrix_repo / "core" / "pyproject.toml", ', "cp314-*"]', "]")
    matrix = load_matrix(real_matrix_repo)
    cell = next(c for c in cibuildwheel_cells(matrix) if c.id == "core/default/windows-arm64")
    got = cibw.print_identifiers(matrix, cell, cache_dir=cache_dir)
    assert got == ["cp311-win_arm64", "cp312-win_arm64", "cp313-win_arm64"]
    assert got != cibw.expected_identifiers(matrix, cell.target)
