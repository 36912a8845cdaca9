"""mosaicrt: a multi-execution-provider ONNX inference runtime.

The API follows onnxruntime's: ``InferenceSession``, ``SessionOptions``, ``RunOptions``,
``OrtValue``, ``IOBinding``, ``get_available_providers``. Everything runs in the native core
through its C ABI. onnxruntime's exception classes are importable from
``mosaicrt.capi.onnxruntime_pybind11_state``.
"""

from __future__ import annotations

from ._variant import check_single_variant as _check_single_variant

_check_single_variant()  # mosaicrt and mosaicrt-winml in one environment: refuse, naming both and the fix

from ._capi import lib as _lib  # noqa: E402
from ._capi import library_path as _library_path
from ._errors import (
    EngineError,
    EPFail,
    ExecutionProviderError,
    Fail,
    InternalError,
    InvalidArgument,
    InvalidGraph,
    InvalidModel,
    InvalidProtobuf,
    MosaicrtError,
    NoSuchFile,
    NotImplementedInRuntime,
    OutOfMemory,
    RunCancelled,
    RuntimeException,
    RuntimeFailure,
)
from ._ortvalue import IOBinding, OrtValue
from ._providers import (
    EpDevice,
    ExecutionProviderDevicePolicy,
    HardwareDevice,
    HardwareDeviceType,
    get_all_providers,
    get_available_providers,
    get_ep_devices,
    get_ep_discovery_problems,
    get_registered_execution_provider_libraries,
    register_execution_provider_library,
    unregister_execution_provider_library,
)
from ._session import (
    ExecutionMode,
    ExecutionOrder,
    GraphOptimizationLevel,
    InferenceSession,
    ModelMetadata,
    NodeArg,
    NodeAssignment,
    RunOptions,
    SessionOptions,
    TransferCounts,
    get_device,
    set_default_logger_severity,
)
from .capi import onnxruntime_pybind11_state as _pybind_state  # noqa: F401 - makes capi.<module> reachable

# onnxruntime's spellings
OrtExecutionProviderDevicePolicy = ExecutionProviderDevicePolicy
OrtHardwareDeviceType = HardwareDeviceType
OrtEpDevice = EpDevice
OrtHardwareDevice = HardwareDevice
SessionIOBinding = IOBinding

__version__: str = _lib.MrtGetVersionString().decode()


def get_version_string() -> str:
    return __version__


def get_build_details() -> dict[str, str]:
    """Facts about the native build: version, target arch, SIMD kernels, library path, C ABI."""
    info = dict(item.split("=", 1) for item in _lib.MrtGetBuildInfo().decode().split(",") if "=" in item)
    info["library"] = _library_path
    abi = _lib.MrtGetAbiVersion()
    info["abi"] = f"{abi >> 16}.{abi & 0xFFFF}"
    return info


def get_build_info() -> str:
    """One line describing the build, like onnxruntime's (get_build_details() has the same facts as a dict)."""
    return "mosaicrt Build Info: " + ", ".join(f"{k}={v}" for k, v in get_build_details().items())


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
    "EPFail",
    "EngineError",
    "EpDevice",
    "ExecutionMode",
    "ExecutionOrder",
    "ExecutionProviderDevicePolicy",
    "ExecutionProviderError",
    "Fail",
    "GraphOptimizationLevel",
    "HardwareDevice",
    "HardwareDeviceType",
    "IOBinding",
    "InferenceSession",
    "InternalError",
    "InvalidArgument",
    "InvalidGraph",
    "InvalidModel",
    "InvalidProtobuf",
    "ModelMetadata",
    "MosaicrtError",
    "NoSuchFile",
    "NodeArg",
    "NodeAssignment",
    "NotImplementedInRuntime",
    "OrtEpDevice",
    "OrtExecutionProviderDevicePolicy",
    "OrtHardwareDevice",
    "OrtHardwareDeviceType",
    "OrtValue",
    "OutOfMemory",
    "RunCancelled",
    "RunOptions",
    "RuntimeException",
    "RuntimeFailure",
    "SessionIOBinding",
    "SessionOptions",
    "TransferCounts",
    "__version__",
    "get_all_providers",
    "get_available_providers",
    "get_build_details",
    "get_build_info",
    "get_cpu_operators",
    "get_device",
    "get_ep_devices",
    "get_ep_discovery_problems",
    "get_include",
    "get_registered_execution_provider_libraries",
    "get_version_string",
    "register_execution_provider_library",
    "set_default_logger_severity",
    "unregister_execution_provider_library",
]
