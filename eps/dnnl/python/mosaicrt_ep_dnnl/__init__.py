"""mosaicrt oneDNN execution provider (``DnnlExecutionProvider``).

Installing this wheel next to ``mosaicrt`` (or ``mosaicrt-winml``) makes the EP available
without any registration call: the wheel advertises :func:`library_path` in the entry point
group ``mosaicrt.execution_providers``, and mosaicrt loads the library it returns. Explicit
use: ``mosaicrt.register_execution_provider_library("dnnl", mosaicrt_ep_dnnl.library_path())``.

The library links ``libdnnl.so.3`` from the ``onednn-cpu-gomp`` wheel, found through its
RPATH (``<prefix>/lib`` relative to this package); :func:`library_path` also preloads it by
absolute path when the usual layout does not hold (e.g. a ``--target`` install).
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
import sys
from pathlib import Path

__all__ = ["EP_NAME", "__version__", "get_ep_names", "get_library_path", "library_path"]

EP_NAME = "DnnlExecutionProvider"

try:
    __version__ = importlib.metadata.version("mosaicrt-ep-dnnl")
except importlib.metadata.PackageNotFoundError:  # running from a source tree
    __version__ = "0+unknown"

_HERE = Path(__file__).resolve().parent
_LIB_NAMES = {"linux": "libmosaicrt_ep_dnnl.so", "darwin": "libmosaicrt_ep_dnnl.dylib", "win32": "mosaicrt_ep_dnnl.dll"}
_preloaded: list[ctypes.CDLL] = []


def _onednn_library() -> Path | None:
    """libdnnl.so.3 as installed by the onednn-cpu-gomp wheel (its own file list knows where)."""
    try:
        dist = importlib.metadata.distribution("onednn-cpu-gomp")
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        if f.name == "libdnnl.so.3":
            path = Path(str(dist.locate_file(f))).resolve()
            if path.is_file():
                return path
    return None


def _preload_onednn() -> None:
    if _preloaded or not sys.platform.startswith("linux"):
        return
    lib = _onednn_library()
    if lib is not None:
        # RTLD_GLOBAL: the plugin's NEEDED libdnnl.so.3 then resolves to this copy by soname.
        _preloaded.append(ctypes.CDLL(str(lib), mode=os.RTLD_NOW | ctypes.RTLD_GLOBAL))


def library_path() -> str:
    """Absolute path of the EP's plugin library (what mosaicrt registers)."""
    name = _LIB_NAMES.get(sys.platform, _LIB_NAMES["linux"])
    path = _HERE / name
    if not path.is_file():
        raise FileNotFoundError(f"{name} is missing from {_HERE}: the mosaicrt-ep-dnnl installation is incomplete")
    # oneDNN runs on GNU OpenMP next to mosaicrt's own thread pool: spinning OpenMP workers would
    # fight it for the cores. libgomp reads this when it loads (with the plugin), so set it first;
    # an explicit OMP_WAIT_POLICY in the environment wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    _preload_onednn()
    return str(path)


def get_library_path() -> str:
    """onnxruntime's plugin packaging convention: the same as :func:`library_path`."""
    return library_path()


def get_ep_names() -> list[str]:
    """Names of the EPs the library provides."""
    return ["DnnlExecutionProvider"]
