"""mosaicrt OpenVINO execution provider (``OpenVINOExecutionProvider``).

Installing this wheel next to ``mosaicrt`` (or ``mosaicrt-winml``) makes the EP available without
a registration call: the wheel advertises :func:`library_path` in the entry point group
``mosaicrt.execution_providers``. Explicit use, as onnxruntime's plugin packages offer it:
``mosaicrt.register_execution_provider_library("openvino", get_library_path())``.

The library loads OpenVINO's C API from the ``openvino`` wheel at run time (the release it was
built against). When that wheel is missing or another release, :func:`library_path` warns once
and the EP reports no devices; mosaicrt keeps working.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
import warnings
from pathlib import Path

__all__ = ["EP_NAME", "OPENVINO_RELEASE", "__version__", "get_ep_names", "get_library_path", "library_path",
           "openvino_problem"]

EP_NAME = "OpenVINOExecutionProvider"

try:
    __version__ = importlib.metadata.version("mosaicrt-ep-openvino")
except importlib.metadata.PackageNotFoundError:  # running from a source tree
    __version__ = "0+unknown"

try:
    from ._build_info import OPENVINO_RELEASE
except ImportError:  # a source tree without a build
    OPENVINO_RELEASE = ""

_HERE = Path(__file__).resolve().parent
_LIB_NAMES = {"linux": "libmosaicrt_ep_openvino.so", "darwin": "libmosaicrt_ep_openvino.dylib",
              "win32": "mosaicrt_ep_openvino.dll"}
_warned: list[str] = []


def _openvino_libs() -> Path | None:
    """The folder of the installed openvino wheel's native libraries."""
    try:
        dist = importlib.metadata.distribution("openvino")
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        if f.name.startswith("libopenvino_c.") or f.name == "openvino_c.dll":
            return Path(str(dist.locate_file(f))).resolve().parent
    return None


def openvino_problem() -> str | None:
    """Why OpenVINO cannot be used by this EP (None when the pinned release is installed)."""
    try:
        installed = importlib.metadata.version("openvino")
    except importlib.metadata.PackageNotFoundError:
        return f"the openvino wheel is not installed; pip install openvino=={OPENVINO_RELEASE or '<release>'}"
    if OPENVINO_RELEASE and installed != OPENVINO_RELEASE:
        return (f"openvino {installed} is installed, but mosaicrt-ep-openvino {__version__} was built against "
                f"openvino {OPENVINO_RELEASE}; pip install openvino=={OPENVINO_RELEASE}")
    return None


def get_library_path() -> str:
    """Absolute path of the EP's plugin library (what mosaicrt registers)."""
    name = _LIB_NAMES.get(sys.platform, _LIB_NAMES["linux"])
    path = _HERE / name
    if not path.is_file():
        raise FileNotFoundError(f"{name} is missing from {_HERE}: the mosaicrt-ep-openvino installation is incomplete")
    problem = openvino_problem()
    if problem and not _warned:
        _warned.append(problem)
        warnings.warn(f"OpenVINOExecutionProvider will report no devices: {problem}", RuntimeWarning, stacklevel=2)
    libs = _openvino_libs()
    if libs is not None:  # the library finds OpenVINO here even in a --target install
        os.environ.setdefault("MOSAICRT_OPENVINO_LIBS", str(libs))
    return str(path)


def get_ep_names() -> list[str]:
    """Names of the EPs the library provides."""
    return [EP_NAME]


library_path = get_library_path  # the entry point's name, shared with the other EP packages
