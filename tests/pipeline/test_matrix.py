"""pipeline.matrix: loading, validation errors (file + key + suggestion), policy rules, cells."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pipeline.errors import ExitCode, MatrixError, UsageError, VersionError
from pipeline.matrix import Matrix, load_matrix

from .conftest import REPO, edit


def test_the_repository_matrix_loads() -> None:
    m = load_matrix(REPO)
    assert {t.name for t in m.targets} == {
        "linux-x86_64",
        "linux-aarch64",
        "linux-armv7",
        "linux-riscv64",
        "linux-x86_64-musl",
        "windows-x86_64",
        "windows-arm64",
        "macos-arm64",
    }
    core = m.component("core")
    assert [v.name for v in core.variants] == ["default", "winml"]
    assert core.variants[0].dist == "mosaicrt"
    assert core.variants[1].dist == "mosaicrt-winml"
    assert core.variants[1].planned is None and core.variants[1].catalog_client
    assert core.version == (REPO / "core" / "VERSION").read_text().strip()
    assert core.tag == f"core-v{core.version}"
    assert m.pythons == ("3.11", "3.12", "3.13", "3.14")


def test_matrix_is_frozen() -> None:
    m = load_matrix(REPO)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.targets[0].arch = "armv7"  # type: ignore[misc]
    assert isinstance(m.targets, tuple)


def test_cells_expand_components_variants_targets() -> None:
    m = load_matrix(REPO)
    cells = m.cells()
    assert len(cells) == sum(len(v.targets or c.targets) for c in m.components for v in c.variants)
    assert len([c for c in cells if c.component.name == "core"]) == 8 + 3  # winml: linux + the two Windows
    ids = {c.id for c in cells}
    assert "core/default/linux-x86_64" in ids
    assert "dnnl/default/linux-x86_64" in ids
    assert "core/winml/windows-x86_64" in ids and "core/winml/macos-arm64" not in ids
    assert cells[0].slug == "core-default-linux-x86_64"


# (file, old snippet, new snippet, expected text in the one-line error)
ERRORS = [
    pytest.param(
        "targets.toml",
        'arch = "x86_64"\ntriple = "x86_64-linux-gnu"',
        'arhc = "x86_64"\ntriple = "x86_64-linux-gnu"',
        ["matrix/targets.toml", "target.linux-x86_64.arhc", "unknown key", "did you mean 'arch'?"],
        id="typo-in-target-key",
    ),
    pytest.param(
        "targets.toml",
        'arch = "aarch64"\ntriple = "aarch64-linux-gnu"',
        'arch = "aarch46"\ntriple = "aarch64-linux-gnu"',
        ["target.linux-aarch64.arch", "'aarch46' is not allowed", "did you mean 'aarch64'?"],
        id="bad-enum-value",
    ),
    pytest.param(
        "targets.toml",
        'ci_runner = "ubuntu-24.04"\nbuild_hosts = ["linux-x86_64"]\n',
        'ci_runner = "ubuntu-24.04"\n',
        ["target.linux-x86_64.build_hosts", "required key is missing"],
        id="missing-key",
    ),
    pytest.param(
        "targets.toml",
        'build_hosts = ["linux-x86_64", "linux-aarch64"]',
        'build_hosts = ["linux-x86_64", "linux-arch64"]',
        ["target.linux-aarch64.build_hosts", "unknown target 'linux-arch64'", "did you mean 'linux-aarch64'?"],
        id="unknown-build-host",
    ),
    pytest.param(
        "components.toml",
        'path = "core"',
        'pth = "core"',
        ["matrix/components.toml", "component.core.pth", "did you mean 'path'?"],
        id="typo-in-component-key",
    ),
    pytest.param(
        "components.toml",
        'path = "core"',
        'path = "cores"',
        ["component.core.path", "folder 'cores' does not exist"],
        id="missing-component-folder",
    ),
    pytest.param(
        "components.toml",
        '"linux-armv7", ',
        '"linux-armv8", ',
        ["component.core.targets", "unknown target 'linux-armv8'", "did you mean 'linux-armv7'?"],
        id="unknown-component-target",
    ),
    pytest.param(
        "components.toml",
        'recipe = "recipes/core"',
        'recipe = "recipes/kore"',
        ["component.core.recipe", "recipes/kore/conanfile.py' does not exist"],
        id="missing-recipe",
    ),
    pytest.param(
        "components.toml",
        "max_wheel_mb = 3.5",
        'max_wheel_mb = 3.5\nsdks = ["cudaa"]',
        ["component.core.sdks", "unknown SDK 'cudaa'", "did you mean 'cuda'?"],
        id="unknown-sdk",
    ),
    pytest.param(
        "components.toml",
        'dist = "mosaicrt-winml"',
        'dist = "mosaicrt"',
        ["component.core.dist", "distribution 'mosaicrt' is also built by core/default"],
        id="duplicate-dist",
    ),
    pytest.param(
        "components.toml",
        "max_wheel_mb = 3.5",
        'max_wheel_mb = "3.5"',
        ["component.core.max_wheel_mb", "expected a number, got string"],
        id="wrong-type",
    ),
    pytest.param(
        "components.toml",
        "[component.core.variant.winml]",
        "[component.core.variant.default]",
        ["component.core.variant.default", "the default variant is the component itself"],
        id="variant-named-default",
    ),
    pytest.param(
        "components.toml",
        "catalog_client = ",
        "catalog_clent = ",
        ["component.core.variant.winml.catalog_clent", "did you mean 'catalog_client'?"],
        id="typo-in-variant-key",
    ),
    pytest.param(
        "sdks.toml",
        'hint = "pip install onednn-devel',
        'hnt = "pip install onednn-devel',
        ["matrix/sdks.toml", "sdk.onednn.hnt", "did you mean 'hint'?"],
        id="typo-in-sdk",
    ),
    pytest.param(
        "python.toml",
        "[python]",
        "[pyhton]",
        ["matrix/python.toml", "pyhton", "did you mean 'python'?"],
        id="typo-in-table-name",
    ),
    pytest.param(
        "python.toml", "tested = [", "tested = ", ["matrix/python.toml", "invalid TOML"], id="toml-syntax-error"
    ),
    pytest.param(
        "policy.toml",
        "[retired_ep.rocm]",
        "[retired_eps.rocm]",
        ["matrix/policy.toml", "retired_eps", "did you mean 'retired_ep'?"],
        id="typo-in-policy-table",
    ),
]


@pytest.mark.parametrize(("file", "old", "new", "expected"), ERRORS)
def test_validation_errors_name_file_key_and_fix(
    real_matrix_repo: Path, file: str, old: str, new: str, expected: list[str]
) -> None:
    edit(real_matrix_repo / "matrix" / file, old, new)
    with pytest.raises(MatrixError) as info:
        load_matrix(real_matrix_repo)
    message = str(info.value)
    assert "\n" not in message
    for part in expected:
        assert part in message
    assert info.value.exit_code == ExitCode.MATRIX


def test_unknown_matrix_file_is_an_error(real_matrix_repo: Path) -> None:
    (real_matrix_repo / "matrix" / "target.toml").write_text("")
    with pytest.raises(MatrixError, match=r"matrix/target.toml: unknown matrix file \(did you mean 'targets.toml'\?\)"):
        load_matrix(real_matrix_repo)


def test_missing_matrix_file_is_an_error(real_matrix_repo: Path) -> None:
    (real_matrix_repo / "matrix" / "sdks.toml").unlink()
    with pytest.raises(MatrixError, match=r"matrix/sdks\.toml: file is missing"):
        load_matrix(real_matrix_repo)


# ---- policy rules --------------------------------------------------------------------


def test_cp310_rejected_in_tested_pythons(real_matrix_repo: Path) -> None:
    edit(real_matrix_repo / "matrix" / "python.toml", 'tested = ["3.11"', 'tested = ["3.10", "3.11"')
    with pytest.raises(MatrixError, match=r"python.tested: CPython 3.10 is below the policy floor 3.11"):
        load_matrix(real_matrix_repo)


def test_policy_floor_cannot_drop_to_cp310(real_matrix_repo: Path) -> None:
    edit(real_matrix_repo / "matrix" / "policy.toml", 'floor = "3.11"', 'floor = "3.10"')
    with pytest.raises(MatrixError, match=r"policy.toml: python.floor: CPython 3.10 is below the supported floor"):
        load_matrix(real_matrix_repo)


def test_macos_deployment_target_below_14_rejected(real_matrix_repo: Path) -> None:
    edit(
        real_matrix_repo / "matrix" / "targets.toml",
        'macos_deployment_target = "14.0"',
        'macos_deployment_target = "13.3"',
    )
    with pytest.raises(MatrixError, match=r"target.macos-arm64.macos_deployment_target: 13.3 is below the policy"):
        load_matrix(real_matrix_repo)


def test_macos_floor_in_policy_cannot_drop(real_matrix_repo: Path) -> None:
    edit(
        real_matrix_repo / "matrix" / "policy.toml", 'min_deployment_target = "14.0"', 'min_deployment_target = "12.0"'
    )
    with pytest.raises(MatrixError, match=r"macos.min_deployment_target: 12.0 is below the project's macOS floor"):
        load_matrix(real_matrix_repo)


def test_macos_profile_must_agree_with_deployment_target(real_matrix_repo: Path) -> None:
    edit(
        real_matrix_repo / "matrix" / "targets.toml",
        'macos_deployment_target = "14.0"',
        'macos_deployment_target = "15.0"',
    )
    with pytest.raises(MatrixError, match=r"sets os.version=14.0 but the target needs os.version=15.0"):
        load_matrix(real_matrix_repo)


def test_macos_x86_64_forbidden(real_matrix_repo: Path) -> None:
    targets = real_matrix_repo / "matrix" / "targets.toml"
    edit(
        targets,
        '[target.macos-arm64]\nos = "macos"\narch = "aarch64"',
        '[target.macos-x86_64]\nos = "macos"\narch = "x86_64"',
    )
    with pytest.raises(MatrixError, match=r"target.macos-x86_64.arch: macos/x86_64 is forbidden .*macos-arm64"):
        load_matrix(real_matrix_repo)


def test_retired_rocm_ep_points_at_migraphx_and_vitis_ai(real_matrix_repo: Path) -> None:
    (real_matrix_repo / "eps" / "rocm").mkdir(parents=True)
    comps = real_matrix_repo / "matrix" / "components.toml"
    comps.write_text(
        comps.read_text() + '\n[component.rocm]\npath = "eps/rocm"\nkind = "ep"\ndist = "mosaicrt-ep-rocm"\n'
        'import_package = "mosaicrt_ep_rocm"\ntargets = ["linux-x86_64"]\nmax_wheel_mb = 5\n'
    )
    with pytest.raises(MatrixError) as info:
        load_matrix(real_matrix_repo)
    assert "component.rocm.kind" in str(info.value)
    assert "MIGraphX" in str(info.value) and "Vitis AI" in str(info.value)


def test_asking_for_rocm_by_name_gives_the_migration_hint() -> None:
    m = load_matrix(REPO)
    with pytest.raises(UsageError, match=r"ROCm EP was retired; use the MIGraphX EP .* Vitis AI"):
        m.component("rocm")
    with pytest.raises(UsageError, match="ROCm EP was retired"):
        m.component("ep-rocm")


def test_unknown_names_suggest() -> None:
    m: Matrix = load_matrix(REPO)
    with pytest.raises(UsageError, match=r"unknown target 'linux-x86-64' \(did you mean 'linux-x86_64'\?\)"):
        m.target("linux-x86-64")
    with pytest.raises(UsageError, match=r"unknown component 'cor' \(did you mean 'core'\?\)"):
        m.component("cor")


# ---- impossible combinations ---------------------------------------------------------


def test_derived_target_keys_are_refused(real_matrix_repo: Path) -> None:
    """Facts the platform registry owns cannot be restated (and contradicted) in targets.toml."""
    edit(
        real_matrix_repo / "matrix" / "targets.toml",
        'triple = "x86_64-w64-mingw32"',
        'triple = "x86_64-w64-mingw32"\nrepair = "auditwheel"',
    )
    with pytest.raises(MatrixError, match=r"target.windows-x86_64.repair: remove this key: it is derived from os"):
        load_matrix(real_matrix_repo)


def test_unknown_arch_points_at_the_registry(real_matrix_repo: Path) -> None:
    edit(real_matrix_repo / "matrix" / "targets.toml", 'arch = "armv7"', 'arch = "armv7x"')
    with pytest.raises(MatrixError, match=r"target.linux-armv7.arch: 'armv7x' is not allowed \(did you mean 'armv7'"):
        load_matrix(real_matrix_repo)


def test_profile_for_another_arch_is_rejected(real_matrix_repo: Path) -> None:
    edit(
        real_matrix_repo / "matrix" / "targets.toml",
        'conan_profile = "recipes/profiles/linux-armv7"',
        'conan_profile = "recipes/profiles/linux-aarch64"',
    )
    with pytest.raises(
        MatrixError, match=r"target.linux-armv7.conan_profile: .* sets arch=armv8 but the target needs arch=armv7hf"
    ):
        load_matrix(real_matrix_repo)


def test_missing_profile_is_rejected(real_matrix_repo: Path) -> None:
    (real_matrix_repo / "recipes" / "profiles" / "linux-armv7").unlink()
    with pytest.raises(
        MatrixError, match=r"target.linux-armv7.conan_profile: 'recipes/profiles/linux-armv7' does not exist"
    ):
        load_matrix(real_matrix_repo)


def test_deployment_target_on_non_macos_is_rejected(real_matrix_repo: Path) -> None:
    edit(
        real_matrix_repo / "matrix" / "targets.toml",
        'ci_runner = "windows-latest"',
        'ci_runner = "windows-latest"\nmacos_deployment_target = "14.0"',
    )
    with pytest.raises(MatrixError, match=r"macos_deployment_target: only applies to macOS targets"):
        load_matrix(real_matrix_repo)


def test_bad_version_file_names_the_file(real_matrix_repo: Path) -> None:
    (real_matrix_repo / "core" / "VERSION").write_text("0.1\n")
    with pytest.raises(VersionError) as info:
        load_matrix(real_matrix_repo)
    assert "core/VERSION: '0.1' is not a version" in str(info.value)
    assert "matrix/components.toml" in str(info.value)
    assert info.value.exit_code == ExitCode.VERSION


def test_ep_component_gets_ep_tag_prefix(tworepo: Path) -> None:
    m = load_matrix(tworepo)
    assert m.component("beta").tag == "ep-beta-v1.0.0"
    assert m.component("alpha").tag == "alpha-v1.0.0"
