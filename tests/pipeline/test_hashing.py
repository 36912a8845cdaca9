"""pipeline.hashing: input hashes change exactly when a cell's inputs change."""

from __future__ import annotations

from pathlib import Path

from pipeline.hashing import cell_input_hash, changed_keys, tree_files, tree_hash
from pipeline.matrix import load_matrix

from .conftest import edit


def _hashes(root: Path) -> dict[str, str]:
    m = load_matrix(root)
    return {c.id: cell_input_hash(c, root=root, logic="v1").hash for c in m.cells()}


def test_hash_is_stable(tworepo: Path) -> None:
    assert _hashes(tworepo) == _hashes(tworepo)


def test_source_change_invalidates_only_that_component(tworepo: Path) -> None:
    before = _hashes(tworepo)
    edit(tworepo / "comps" / "alpha" / "alpha.c", "return 42", "return 43")
    after = _hashes(tworepo)
    assert after["alpha/default/linux-x86_64"] != before["alpha/default/linux-x86_64"]
    assert after["alpha/default/linux-aarch64"] != before["alpha/default/linux-aarch64"]
    assert after["beta/default/linux-x86_64"] == before["beta/default/linux-x86_64"]


def test_version_change_invalidates_the_component(tworepo: Path) -> None:
    before = _hashes(tworepo)
    (tworepo / "comps" / "beta" / "VERSION").write_text("1.0.1\n")
    after = _hashes(tworepo)
    assert after["beta/default/linux-x86_64"] != before["beta/default/linux-x86_64"]
    assert after["alpha/default/linux-x86_64"] == before["alpha/default/linux-x86_64"]


def test_profile_change_invalidates_only_that_target(tworepo: Path) -> None:
    before = _hashes(tworepo)
    prof = tworepo / "recipes" / "profiles" / "linux-aarch64"
    prof.write_text(prof.read_text() + "\n# comment\n")
    after = _hashes(tworepo)
    assert after["alpha/default/linux-aarch64"] != before["alpha/default/linux-aarch64"]
    assert after["alpha/default/linux-x86_64"] == before["alpha/default/linux-x86_64"]


def test_build_outputs_and_caches_are_not_inputs(tworepo: Path) -> None:
    before = _hashes(tworepo)
    comp = tworepo / "comps" / "alpha"
    for junk in (
        "build/x.o",
        "dist/a.whl",
        "src/alpha/__pycache__/m.cpython-311.pyc",
        "src/alpha/m.pyc",
        "x.egg-info/PKG-INFO",
    ):
        (comp / junk).parent.mkdir(parents=True, exist_ok=True)
        (comp / junk).write_text("junk")
    assert _hashes(tworepo) == before


def test_logic_version_is_an_input(tworepo: Path) -> None:
    m = load_matrix(tworepo)
    cell = m.cells()[0]
    a = cell_input_hash(cell, root=tworepo, logic="v1").hash
    b = cell_input_hash(cell, root=tworepo, logic="v2").hash
    assert a != b


def test_tree_hash_sees_renames_and_new_files(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x")
    h1 = tree_hash(tmp_path)
    (tmp_path / "a.txt").rename(tmp_path / "b.txt")
    h2 = tree_hash(tmp_path)
    (tmp_path / "c.txt").write_text("")
    h3 = tree_hash(tmp_path)
    assert len({h1, h2, h3}) == 3


def test_changed_files_lists_the_difference(tmp_path: Path) -> None:
    (tmp_path / "a.c").write_text("1")
    (tmp_path / "b.c").write_text("1")
    old = tree_files(tmp_path)
    (tmp_path / "a.c").write_text("2")
    (tmp_path / "b.c").unlink()
    (tmp_path / "d.c").write_text("")
    assert changed_keys(old, tree_files(tmp_path)) == ["a.c", "b.c", "d.c"]
