"""pipeline.source: release tags, changes since a tag, version ordering (in a temporary git repository)."""

from __future__ import annotations

from pathlib import Path

from pipeline.source import changed_since, check_version, create_tag, released_versions, source_info

from .releasekit import git


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "r"
    (root / "comp").mkdir(parents=True)
    (root / "comp" / "a.c").write_text("int a;\n")
    (root / "other.txt").write_text("x\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one")
    return root


def check(root: Path, version: str) -> tuple[bool, str]:
    vc = check_version(root, name="comp", path="comp", tag_prefix="ep-comp", version=version)
    return vc.ok, vc.reason


def test_new_version_then_tag_then_changes(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    assert check(root, "1.0.0") == (True, "new version; tag ep-comp-v1.0.0 is created on release")
    create_tag(root, "ep-comp-v1.0.0")
    assert released_versions(root, "ep-comp") == {"1.0.0": "ep-comp-v1.0.0"}
    assert check(root, "1.0.0") == (True, "unchanged since ep-comp-v1.0.0")
    (root / "other.txt").write_text("changes outside the component do not count\n")
    assert check(root, "1.0.0")[0]
    (root / "comp" / "new.c").write_text("int b;\n")  # untracked files count
    ok, reason = check(root, "1.0.0")
    assert not ok and reason == (
        "comp changed since its release ep-comp-v1.0.0 (comp/new.c): write a new version into comp/VERSION"
    )
    git(root, "add", "-A")
    git(root, "commit", "-qm", "two")
    assert changed_since(root, "ep-comp-v1.0.0", "comp") == ["comp/new.c"]
    assert check(root, "1.0.1")[0]


def test_versions_only_go_up(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    create_tag(root, "ep-comp-v1.10.0")
    git(root, "tag", "ep-comp-vbogus")
    ok, reason = check(root, "1.9.0")
    assert not ok and "older than the released ep-comp-v1.10.0" in reason
    assert check(root, "1.11.0")[0]


def test_source_info_reports_dirty_state(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    info = source_info(root, "comp")
    assert len(info.commit) == 40 and not info.dirty and info.repository.startswith("file://")
    (root / "other.txt").write_text("dirty\n")
    info = source_info(root, "comp")
    assert info.dirty and not info.component_dirty
    (root / "comp" / "a.c").write_text("int a2;\n")
    assert source_info(root, "comp").component_dirty
