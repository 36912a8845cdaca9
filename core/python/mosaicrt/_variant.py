"""Which build of the core this is (``mosaicrt`` or the winml variant ``mosaicrt-winml``), and whether dynamic
EP download may run. Imported by the package's ``__init__``; it imports nothing heavy (no TUF client)."""

from __future__ import annotations

import json
import os
import sys
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

#: Distributions that install the ``mosaicrt`` import package (matrix/components.toml: the core's variants).
CORE_DISTRIBUTIONS = ("mosaicrt", "mosaicrt-winml")
DOWNLOAD_ENV = "MOSAICRT_DYNAMIC_EP_DOWNLOAD"
SESSION_CONFIG_KEY = "session.dynamic_ep_download"
_HERE = Path(__file__).resolve().parent
CATALOG_FILES = _HERE / "_catalog"


class VariantClash(ImportError):
    """Two distributions of the core are installed into one environment: their files overwrite each other."""


def installed_core_distributions() -> list[str]:
    found = []
    for name in CORE_DISTRIBUTIONS:
        try:
            importlib_metadata.distribution(name)
        except importlib_metadata.PackageNotFoundError:
            continue
        found.append(name)
    return found


def check_single_variant() -> None:
    """Refuse to import when more than one core distribution is installed (the last one installed has
    silently replaced the other's files, so neither is what its metadata says)."""
    found = installed_core_distributions()
    if len(found) < 2:
        return
    keep = "mosaicrt-winml" if "mosaicrt-winml" in found else found[-1]
    raise VariantClash(
        f"both {' and '.join(found)} are installed in {sys.prefix}; they provide the same `mosaicrt` package and"
        f" overwrite each other's files. Keep one: `pip uninstall -y {' '.join(found)} && pip install {keep}`"
        " (mosaicrt-winml is mosaicrt plus EP download on demand)"
    )


def catalog_config() -> dict[str, Any] | None:
    """The winml build's catalog client configuration (None: this build has no dynamic EP download)."""
    path = CATALOG_FILES / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_winml_build() -> bool:
    return catalog_config() is not None and (CATALOG_FILES / "root.json").is_file()


def download_decision(session_value: str | None = None) -> tuple[bool, str]:
    """(enabled, why). Windows at or above the policy's build: on unless turned off; older Windows: off;
    other OSes: off unless ``MOSAICRT_DYNAMIC_EP_DOWNLOAD=1`` or the session entry ``session.dynamic_ep_download=1``."""
    config = catalog_config()
    if config is None:
        return False, ("this is the `mosaicrt` build: EP download on demand ships in `mosaicrt-winml`"
                       " (pip uninstall -y mosaicrt && pip install mosaicrt-winml)")
    choice = session_value if session_value not in (None, "") else os.environ.get(DOWNLOAD_ENV, "")
    if choice in ("0", "false", "off"):
        return False, f"turned off ({SESSION_CONFIG_KEY} / ${DOWNLOAD_ENV})"
    floor = int(config.get("min_windows_build", 26200))
    if sys.platform == "win32":
        build = sys.getwindowsversion().build  # type: ignore[attr-defined,unused-ignore]
        if build < floor:
            return False, (f"EP download needs Windows build {floor} or newer, this is build {build}:"
                           " the installed EPs are used")
        return True, f"Windows build {build} ≥ {floor}"
    if choice in ("1", "true", "on"):
        return True, f"opted in ({SESSION_CONFIG_KEY} / ${DOWNLOAD_ENV})"
    return False, f"off on {sys.platform} unless opted in: set {DOWNLOAD_ENV}=1 or the session entry {SESSION_CONFIG_KEY}=1"
