"""pipeline.versions: one VERSION per component, read by CMake, wheel metadata, conan and the matrix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from pipeline.errors import VersionError
from pipeline.matrix import load_matrix
from pipeline.versions import VERSION_RE, parse_version, read_version

from .conftest import REPO

CORE_VERSION = read_version(REPO / "core" / "VERSION")


@pytest.mark.parametrize("text", ["0.1.0\n", "1.4.0", "10.20.30  \n"])
def test_valid_versions(text: str) -> None:
    assert parse_version(text, source="x/VERSION") == text.strip()


@pytest.mark.parametrize("text", ["0.1", "v1.0.0", "1.0.0-rc1", "", "1.0.0\n2.0.0\n", "1.0.x"])
def test_invalid_versions_name_the_file(text: str) -> None:
    with pytest.raises(VersionError, match=r"^x/VERSION: '.*' is not a version: write MAJOR.MINOR.PATCH"):
        parse_version(text, source="x/VERSION")


def test_missing_version_file(tmp_path: Path) -> None:
    with pytest.raises(VersionError, match="VERSION: missing"):
        read_version(tmp_path / "VERSION")


def test_matrix_reads_version_file() -> None:
    assert load_matrix(REPO).component("core").version == CORE_VERSION


def test_wheel_metadata_reads_the_same_version_file() -> None:
    """core/pyproject.toml takes its version from VERSION through the regex provider, with the same regex."""
    data = tomllib.loads((REPO / "core" / "pyproject.toml").read_text())
    assert "version" in data["project"]["dynamic"]
    provider = data["tool"]["scikit-build"]["metadata"]["version"]
    assert provider["provider"] == "scikit_build_core.metadata.regex"
    assert provider["input"] == "VERSION"
    assert provider["regex"] == VERSION_RE.pattern


def test_wheel_metadata_version_from_the_build_backend(tmp_path: Path) -> None:
    pytest.importorskip("scikit_build_core")
    code = (
        "import scikit_build_core.build as b, sys, pathlib;"
        "n = b.prepare_metadata_for_build_wheel(sys.argv[1]);"
        "print(pathlib.Path(sys.argv[1], n, 'METADATA').read_text())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], cwd=REPO / "core", capture_output=True, text=True, check=True
    ).stdout
    assert f"\nVersion: {CORE_VERSION}\n" in out
    assert "\nName: mosaicrt\n" in out


def test_cmake_reads_the_same_version_file(tmp_path: Path) -> None:
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake not on PATH (the ci session installs it)")
    subprocess.run(
        [cmake, "-S", str(REPO / "core"), "-B", str(tmp_path), "-G", "Ninja"]
        if shutil.which("ninja")
        else [cmake, "-S", str(REPO / "core"), "-B", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    manifest = json.loads((tmp_path / "mosaicrt_build_manifest.json").read_text())
    assert manifest["version"] == CORE_VERSION
    cache = (tmp_path / "CMakeCache.txt").read_text()
    assert f"CMAKE_PROJECT_VERSION:STATIC={CORE_VERSION}" in cache


def test_conan_recipe_reads_the_same_version_file(tmp_path: Path) -> None:
    conan = shutil.which("conan") or str(Path(sys.executable).parent / "conan")
    if not Path(conan).exists():
        pytest.skip("conan not installed (the ci session installs it)")
    env = {**os.environ, "CONAN_HOME": str(tmp_path / "conan-home")}
    out = subprocess.run(
        [conan, "inspect", str(REPO / "recipes" / "core"), "-f", "json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    info = json.loads(out)
    assert info["name"] == "mosaicrt"
    assert info["version"] == CORE_VERSION


def test_cmake_rejects_a_bad_version_file(tmp_path: Path) -> None:
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake not on PATH (the ci session installs it)")
    src = tmp_path / "core"
    shutil.copytree(REPO / "core", src, ignore=shutil.ignore_patterns("build", "__pycache__"))
    (src / "VERSION").write_text("1.0\n")
    proc = subprocess.run(
        [cmake, "-S", str(src), "-B", str(tmp_path / "b")], capture_output=True, text=True, check=False
    )
    assert proc.returncode != 0
    assert "VERSION must hold MAJOR.MINOR.PATCH" in proc.stderr
