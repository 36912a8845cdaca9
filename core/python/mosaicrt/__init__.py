"""mosaicrt: a multi-execution-provider ONNX inference runtime.

The API follows onnxruntime's: ``InferenceSession``, ``SessionOptions``,
``get_available_providers``. Everything runs in the native core through its C ABI.
"""

from __future__ import annotations

from ._capi import lib as _lib
from ._capi import library_path as _library_path
from ._errors import (
    ExecutionProviderError,
    InternalError,
    InvalidArgument,
    InvalidModel,
    MosaicrtError,
    NoSuchFile,
    NotImplementedInRuntime,
    OutOfMemory,
    RuntimeFailure,
)
from ._providers import (
    EpDevice,
    ExecutionProviderDevicePolicy,
    HardwareDevice,
    HardwareDeviceType,
    get_available_providers,
    get_ep_devices,
    get_ep_discovery_problems,
    get_registered_execution_provider_libraries,
    register_execution_provider_library,
    unregister_execution_provider_library,
)
from ._session import (
    GraphOptimizationLevel,
    InferenceSession,
    NodeArg,
    NodeAssignment,
    SessionOptions,
    get_device,
)

# onnxruntime's spelling of the policy enum
OrtExecutionProviderDevicePolicy = ExecutionProviderDevicePolicy

__version__: str = _lib.MrtGetVersionString().decode()


def get_build_info() -> dict[str, str]:
    """Facts about the native build: version, target arch, SIMD kernels, library path."""
    info = dict(item.split("=", 1) for item in _lib.MrtGetBuildInfo().decode().split(",") if "=" in item)
    info["library"] = _library_path
    abi = _lib.MrtGetAbiVersion()
    info["abi"] = f"{abi >> 16}.{abi & 0xFFFF}"
    return info


def get_include() -> str:
    """Directory holding the C headers (mosaicrt/mosaicrt.h, mosaicrt/ep.h) for building plugin EPs."""
    from pathlib import Path

    here = Path(__file__).resolve().parent
    for candidate in (here / "include", here.parent.parent / "include"):  # wheel layout, source tree
        if (candidate / "mosaicrt" / "ep.h").is_file():
            return str(candidate)
    raise FileNotFoundError(f"the mosaicrt C headers are missing next to {here}")


def get_cpu_operators() -> list[tuple[str, str]]:
    """(domain, op_type) pairs the built-in CPU execution provider implements ("" = ai.onnx)."""
    result = []
    for item in _lib.MrtGetCpuOperators().decode().split(","):
        if "::" in item:
            domain, op = item.split("::", 1)
            result.append((domain, op))
    return result


__all__ = [
    "EpDevice",
    "ExecutionProviderDevicePolicy",
    "ExecutionProviderError",
    "GraphOptimizationLevel",
    "HardwareDevice",
    "HardwareDeviceType",
    "InferenceSession",
    "InternalError",
    "InvalidArgument",
    "InvalidModel",
    "MosaicrtError",
    "NoSuchFile",
    "NodeArg",
    "NodeAssignment",
    "NotImplementedInRuntime",
    "OrtExecutionProviderDevicePolicy",
    "OutOfMemory",
    "RuntimeFailure",
    "SessionOptions",
    "__version__",
    "get_available_providers",
    "get_build_info",
    "get_cpu_operators",
    "get_device",
    "get_ep_devices",
    "get_ep_discovery_problems",
    "get_include",
    "get_registered_execution_provider_libraries",
    "register_execution_provider_library",
    "unregister_execution_provider_library",
]
