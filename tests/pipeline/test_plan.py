"""pipeline.plan: what this host builds, and the reason for every skipped cell."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import UsageError
from pipeline.matrix import load_matrix
from pipeline.plan import Selection, host_target, is_requested, plan

from .conftest import REPO


def test_host_target_detection() -> None:
    m = load_matrix(REPO)
    assert host_target(m, system="Linux", machine="x86_64").name == "linux-x86_64"  # type: ignore[union-attr]
    assert host_target(m, system="Linux", machine="aarch64").name == "linux-aarch64"  # type: ignore[union-attr]
    assert host_target(m, system="Darwin", machine="arm64").name == "macos-arm64"  # type: ignore[union-attr]
    assert host_target(m, system="Windows", machine="AMD64").name == "windows-x86_64"  # type: ignore[union-attr]
    assert host_target(m, system="Darwin", machine="x86_64") is None  # forbidden by policy: not a target
    assert host_target(m, system="Linux", machine="riscv64").name == "linux-riscv64"  # type: ignore[union-attr]
    assert host_target(m, system="Linux", machine="s390x") is None


def test_default_plan_builds_the_host_target_only() -> None:
    m = load_matrix(REPO)
    host = m.target("linux-x86_64")
    planned = {pc.cell.id: pc for pc in plan(m, Selection(), host)}
    assert planned["core/default/linux-x86_64"].availability == "buildable"
    assert planned["core/winml/linux-x86_64"].availability == "buildable"
    mac = planned["core/default/macos-arm64"]
    assert mac.availability == "skipped"
    assert "built on macos-arm64 (CI runner macos-14), not on linux-x86_64" in mac.reason  # type: ignore[operator]


def test_missing_cross_toolchain_is_named_with_the_fix(tworepo: Path) -> None:
    m = load_matrix(tworepo)
    host = m.target("linux-x86_64")
    planned = {pc.cell.id: pc for pc in plan(m, Selection(targets=("linux-aarch64",)), host)}
    cross = planned["alpha/default/linux-aarch64"]
    assert cross.availability == "skipped"
    assert cross.reason == (
        "toolchain missing: fixture-missing-aarch64-gcc not on PATH (fix: apt-get install g++-aarch64-linux-gnu)"
    )
    assert is_requested(cross, Selection(targets=("linux-aarch64",)), host)
    assert not is_requested(cross, Selection(components=("alpha",)), host)
    assert planned["alpha/default/linux-x86_64"].reason == (
        "not selected (buildable here: nox -s build -- --target linux-x86_64)"
    )


def test_component_and_variant_selection(tworepo: Path) -> None:
    m = load_matrix(tworepo)
    host = m.target("linux-x86_64")
    planned = {pc.cell.id: pc for pc in plan(m, Selection(components=("beta",)), host)}
    assert planned["beta/default/linux-x86_64"].availability == "buildable"
    assert planned["alpha/default/linux-x86_64"].reason == "not selected (--component/--variant)"


def test_missing_sdk_skips_with_hint(tworepo: Path) -> None:
    comps = tworepo / "matrix" / "components.toml"
    comps.write_text(comps.read_text().replace('import_package = "beta"', 'import_package = "beta"\nsdks = ["cuda"]'))
    m = load_matrix(tworepo)
    planned = {pc.cell.id: pc for pc in plan(m, Selection(), m.target("linux-x86_64"))}
    reason = planned["beta/default/linux-x86_64"].reason or ""
    if "nvcc" in reason:
        assert reason.startswith("SDK missing: cuda (nvcc not on PATH; fix: pip install nvidia-cuda-nvcc")


@pytest.mark.parametrize(
    ("sel", "message"),
    [
        (Selection(targets=("linux-x86-64",)), "unknown target 'linux-x86-64' (did you mean 'linux-x86_64'?)"),
        (Selection(components=("alpah",)), "unknown component 'alpah' (did you mean 'alpha'?)"),
        (Selection(components=("rocm",)), "component 'rocm': the ROCm EP was retired"),
        (Selection(variants=("defualt",)), "unknown variant 'defualt' (did you mean 'default'?)"),
    ],
)
def test_bad_selection_is_a_usage_error(tworepo: Path, sel: Selection, message: str) -> None:
    m = load_matrix(tworepo)
    with pytest.raises(UsageError) as info:
        plan(m, sel, m.target("linux-x86_64"))
    assert message in str(info.value)


def test_unknown_host_builds_nothing(tworepo: Path) -> None:
    m = load_matrix(tworepo)
    planned = plan(m, Selection(), None)
    assert all(pc.availability == "skipped" for pc in planned)
