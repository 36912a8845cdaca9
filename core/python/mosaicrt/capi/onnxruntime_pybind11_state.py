"""onnxruntime's exception classes under the import path onnxruntime code uses.

``from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument`` becomes
``from mosaicrt.capi.onnxruntime_pybind11_state import InvalidArgument``. mosaicrt raises its own
classes (mosaicrt.InvalidModel, RuntimeFailure, ...), each a subclass of the onnxruntime name
below that onnxruntime raises in the same situation; every one derives from mosaicrt.MosaicrtError.
"""

from __future__ import annotations

from .._errors import (
    EngineError,
    EPFail,
    Fail,
    InvalidArgument,
    InvalidGraph,
    InvalidProtobuf,
    ModelLoaded,
    NoModel,
    NoSuchFile,
    NotFound,
    NotImplementedByRuntime,
    RuntimeException,
)
from .._ortvalue import IOBinding as SessionIOBinding
from .._ortvalue import OrtValue
from .._session import (
    ExecutionMode,
    ExecutionOrder,
    GraphOptimizationLevel,
    InferenceSession,
    ModelMetadata,
    NodeArg,
    RunOptions,
    SessionOptions,
)

NotImplemented = NotImplementedByRuntime

__all__ = [
    "EPFail",
    "EngineError",
    "ExecutionMode",
    "ExecutionOrder",
    "Fail",
    "GraphOptimizationLevel",
    "InferenceSession",
    "InvalidArgument",
    "InvalidGraph",
    "InvalidProtobuf",
    "ModelLoaded",
    "ModelMetadata",
    "NoModel",
    "NoSuchFile",
    "NodeArg",
    "NotFound",
    "NotImplemented",
    "OrtValue",
    "RunOptions",
    "RuntimeException",
    "SessionIOBinding",
    "SessionOptions",
]
