"""pipeline.layout: every generated file lives under dist/ or build/pipeline/ (both git-ignored)."""

from __future__ import annotations

from pathlib import Path

from pipeline.layout import Layout


def test_default_layout(tmp_path: Path) -> None:
    layout = Layout.default(tmp_path)
    assert layout.dist_for("linux-x86_64") == tmp_path / "dist" / "linux-x86_64"
    generated = [
        layout.cell_dir("core-default-linux-x86_64"),
        layout.state_file("core-default-linux-x86_64"),
        layout.log_file("core-default-linux-x86_64"),
        layout.build_report,
        layout.test_report,
        layout.records,
        layout.conan_home,
        layout.ccache_dir,
        layout.venvs,
    ]
    for path in generated:
        assert path.is_relative_to(tmp_path / "build" / "pipeline"), path
    assert len(set(generated)) == len(generated)
