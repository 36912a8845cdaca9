"""mosaicrt CUDA execution provider (plugin EP library for NVIDIA GPUs).

mosaicrt finds this package through the ``mosaicrt.execution_providers`` entry point group and
calls :func:`library_path`; nothing needs to be imported by hand. Explicit use::

    import mosaicrt, mosaicrt_ep_cuda
    mosaicrt.register_execution_provider_library("cuda", mosaicrt_ep_cuda.library_path())

The library links the CUDA runtime and cuBLAS dynamically (``libcudart.so.13``,
``libcublas.so.13``) from NVIDIA's wheels (``nvidia-cuda-runtime``, ``nvidia-cublas``). Its run
path finds them when both are installed in the same site-packages; :func:`library_path` also
preloads them from any ``nvidia`` package folder on ``sys.path`` (user site, another venv
layer), so the plugin loads wherever pip put them. Without an NVIDIA driver the library still
loads; the EP then reports no supported device.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

__all__ = ["CUDA_MAJOR", "__version__", "get_ep_names", "get_library_path", "library_path"]

CUDA_MAJOR = 13
_LIB_NAME = "libmosaicrt_ep_cuda.so"
# Load order matters: cuBLAS needs cuBLASLt.
_RUNTIME_LIBS = (f"libcudart.so.{CUDA_MAJOR}", f"libcublasLt.so.{CUDA_MAJOR}", f"libcublas.so.{CUDA_MAJOR}")
_preloaded: list[ctypes.CDLL] = []

try:
    from importlib.metadata import PackageNotFoundError, version

    try:
        __version__ = version("mosaicrt-ep-cuda")
    except PackageNotFoundError:
        __version__ = "0+unknown"
except ImportError:  # pragma: no cover
    __version__ = "0+unknown"


def _nvidia_lib_dirs() -> list[Path]:
    """Folders of NVIDIA's CUDA wheels that may hold the runtime libraries, in sys.path order."""
    dirs: list[Path] = []
    for entry in sys.path:
        base = Path(entry or ".") / "nvidia"
        for sub in (f"cu{CUDA_MAJOR}/lib", "cuda_runtime/lib", "cublas/lib"):
            d = base / sub
            if d.is_dir() and d not in dirs:
                dirs.append(d)
    return dirs


def _preload_cuda_runtime() -> None:
    """Load cudart/cuBLAS globally from the nvidia wheels so the plugin's NEEDED entries resolve.

    Best effort and silent: when they are absent the core's load error names what is missing.
    """
    if _preloaded or sys.platform != "linux":
        return
    dirs = _nvidia_lib_dirs()
    for name in _RUNTIME_LIBS:
        for d in dirs:
            candidate = d / name
            if candidate.is_file():
                try:
                    _preloaded.append(ctypes.CDLL(os.fspath(candidate), mode=ctypes.RTLD_GLOBAL))
                except OSError:
                    continue
                break


def library_path() -> str:
    """Absolute path of the CUDA EP plugin library (after preloading the CUDA runtime)."""
    path = Path(__file__).resolve().parent / _LIB_NAME
    if not path.is_file():
        raise FileNotFoundError(f"mosaicrt-ep-cuda is installed without its library: {path} is missing")
    _preload_cuda_runtime()
    return os.fspath(path)


def get_library_path() -> str:
    """onnxruntime's plugin packaging convention: the same as :func:`library_path`."""
    return library_path()


def get_ep_names() -> list[str]:
    """Names of the EPs the library provides."""
    return ["CUDAExecutionProvider"]
