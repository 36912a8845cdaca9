"""recipes/: every host profile yields a CMake toolchain for its target; each component recipe exports offline."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.matrix import load_matrix

from .conftest import REPO

MATRIX = load_matrix(REPO)
EXPECTED = {  # target → (CMAKE_SYSTEM_NAME, CMAKE_SYSTEM_PROCESSOR) in the generated toolchain
    "linux-aarch64": ("Linux", "aarch64"),
    "linux-armv7": ("Linux", "armv7"),
    "windows-x86_64": ("Windows", "AMD64"),
    "windows-arm64": ("Windows", "ARM64"),
    "macos-arm64": ("Darwin", "arm64"),
}


def _conan() -> str:
    local = Path(sys.executable).parent / "conan"
    found = str(local) if local.exists() else shutil.which("conan")
    if found is None:
        pytest.skip("conan not installed (the ci session installs it)")
    return found


@pytest.fixture(scope="module")
def conan_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    env = {**os.environ, "CONAN_HOME": str(tmp_path_factory.mktemp("conan-home"))}
    subprocess.run([_conan(), "profile", "detect", "--force"], env=env, check=True, capture_output=True)
    subprocess.run([_conan(), "remote", "disable", "conancenter"], env=env, check=True, capture_output=True)
    return env


@pytest.mark.parametrize("target", [t.name for t in MATRIX.targets])
def test_profile_generates_the_targets_toolchain(target: str, conan_env: dict[str, str], tmp_path: Path) -> None:
    t = MATRIX.target(target)
    proc = subprocess.run(
        [_conan(), "install", str(REPO / "recipes" / "core"), "-pr:h", str(REPO / t.conan_profile),
         "-pr:b", "default", "-of", str(tmp_path)],
        env=conan_env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    toolchain = next(tmp_path.rglob("conan_toolchain.cmake")).read_text()
    if target in EXPECTED:
        system, processor = EXPECTED[target]
        assert f"set(CMAKE_SYSTEM_NAME {system})" in toolchain
        assert f"set(CMAKE_SYSTEM_PROCESSOR {processor})" in toolchain
    if t.os == "linux" and t.cxx_compiler and t.zig_target is None:
        assert f'set(CMAKE_CXX_COMPILER "{t.cxx_compiler}")' in toolchain
    if t.macos_deployment_target:
        assert f'set(CMAKE_OSX_DEPLOYMENT_TARGET "{t.macos_deployment_target}"' in toolchain


@pytest.mark.parametrize("component", [c.name for c in MATRIX.components if c.recipe])
def test_each_recipe_exports_its_component_sources(component: str, conan_env: dict[str, str]) -> None:
    """Every component has its own recipe, versioned from its own VERSION file."""
    comp = MATRIX.component(component)
    home = Path(conan_env["CONAN_HOME"])
    before = set(home.rglob("VERSION"))
    proc = subprocess.run([_conan(), "export", str(REPO / str(comp.recipe))], env=conan_env, capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    dist = next(v.dist for v in comp.variants if v.name == "default")
    assert f"{dist}/{comp.version}" in proc.stdout + proc.stderr  # recipe name = distribution name
    versions = [p for p in set(home.rglob("VERSION")) - before if "build" not in p.parts]
    assert versions, "VERSION missing from the exported sources"
    assert all(p.read_text().strip() == comp.version for p in versions if p.parent.name != "include")
    assert not [p for p in versions if "build" in p.relative_to(home).parts], "build outputs were exported"


def test_macos_x86_64_is_refused_by_the_recipe(conan_env: dict[str, str], tmp_path: Path) -> None:
    profile = tmp_path / "macos-x86_64"
    profile.write_text((REPO / "recipes" / "profiles" / "macos-arm64").read_text().replace("arch=armv8", "arch=x86_64"))
    proc = subprocess.run(
        [_conan(), "install", str(REPO / "recipes" / "core"), "-pr:h", str(profile), "-pr:b", "default",
         "-of", str(tmp_path / "out")],
        env=conan_env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "macOS x86_64 is not supported" in proc.stdout + proc.stderr
