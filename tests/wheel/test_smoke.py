"""Smoke test of an installed mosaicrt wheel: the right bytes, loaded from the right place.

`nox -s test` sets MOSAICRT_TEST_WHEEL to the wheel file it installed; without it (a dev run
against MOSAICRT_LIBRARY) these checks are skipped.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
import zipfile
from pathlib import Path

import mosaicrt
import pytest

WHEEL = os.environ.get("MOSAICRT_TEST_WHEEL")
pytestmark = pytest.mark.skipif(not WHEEL, reason="MOSAICRT_TEST_WHEEL not set (run through `nox -s test`)")


def _package_dir() -> Path:
    return Path(mosaicrt.__file__).resolve().parent


def test_imported_from_the_venv_not_the_source_tree() -> None:
    assert Path(sys.prefix).resolve() in _package_dir().parents, f"mosaicrt imported from {_package_dir()}"
    assert "MOSAICRT_LIBRARY" not in os.environ


def test_version_matches_the_wheel() -> None:
    assert WHEEL is not None
    version = Path(WHEEL).name.split("-")[1]
    assert mosaicrt.__version__ == version
    assert importlib.metadata.version("mosaicrt") == version


def test_native_library_loaded_from_the_installed_package() -> None:
    library = Path(mosaicrt.get_build_details()["library"]).resolve()
    assert library.parent == _package_dir(), f"libmosaicrt loaded from {library}"
    assert library.name.startswith("libmosaicrt")


def test_installed_files_are_the_wheels_bytes() -> None:
    assert WHEEL is not None
    with zipfile.ZipFile(WHEEL) as zf:
        for name in zf.namelist():
            if name.startswith("mosaicrt/") and not name.endswith("/"):
                installed = _package_dir().parent / name
                assert installed.read_bytes() == zf.read(name), f"{name} differs from the wheel"
