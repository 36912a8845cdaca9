"""Exceptions raised by mosaicrt; each carries the core's message and error code.

Two names per failure: mosaicrt's own classes (InvalidModel, RuntimeFailure, ...) and, as their
bases, the classes onnxruntime code catches (``InvalidProtobuf``, ``RuntimeException``, ``Fail``, ...,
importable from ``mosaicrt.capi.onnxruntime_pybind11_state`` like onnxruntime's). Every one of
them derives from MosaicrtError.
"""

from __future__ import annotations


class MosaicrtError(Exception):
    """Base class of every error reported by the mosaicrt core."""

    code = 5

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# ---- onnxruntime's names (the classes its Python binding raises) ----
class Fail(MosaicrtError):
    """onnxruntime's generic failure (FAIL); a terminated run is one."""


class EngineError(MosaicrtError):
    """onnxruntime's ENGINE_ERROR."""


class RuntimeException(MosaicrtError):
    """onnxruntime's RUNTIME_EXCEPTION: a kernel failed while running."""


class InvalidProtobuf(MosaicrtError):
    """onnxruntime's INVALID_PROTOBUF: the model bytes cannot be decoded."""


class InvalidGraph(MosaicrtError):
    """onnxruntime's INVALID_GRAPH: the graph violates ONNX rules."""


class NoModel(MosaicrtError):
    """onnxruntime's NO_MODEL."""


class ModelLoaded(MosaicrtError):
    """onnxruntime's MODEL_LOADED."""


class NotImplementedByRuntime(MosaicrtError):
    """onnxruntime's NOT_IMPLEMENTED (exported as ``NotImplemented`` in the capi module)."""


class EPFail(MosaicrtError):
    """onnxruntime's EP_FAIL: an execution provider failed."""


class NotFound(MosaicrtError):
    """onnxruntime's NOT_FOUND."""


# ---- mosaicrt's classes, one per core error code ----
class InvalidArgument(MosaicrtError, ValueError):
    """Bad input from the caller: unknown names, wrong dtype/rank/shape, bad values (same name in onnxruntime)."""

    code = 1


class InvalidModel(InvalidProtobuf, InvalidGraph, ValueError):
    """The model bytes are malformed or violate ONNX rules."""

    code = 2


class NotImplementedInRuntime(NotImplementedByRuntime, NotImplementedError):
    """Valid ONNX that mosaicrt does not support (operator, opset, element type, attribute)."""

    code = 3


class NoSuchFile(MosaicrtError, FileNotFoundError):
    """A model or external-data file is missing or unreadable (same name in onnxruntime)."""

    code = 4


class RuntimeFailure(RuntimeException, Fail, RuntimeError):
    """A kernel failed while running (onnxruntime reports these as RuntimeException or Fail)."""

    code = 5


class OutOfMemory(Fail, MemoryError):
    code = 6


class InternalError(EngineError):
    """A bug in mosaicrt: please report it with the model."""

    code = 7


class ExecutionProviderError(EPFail):
    """An EP library cannot be loaded or is incompatible (the message names the file and, for
    ABI skew, both versions), or an EP registration/selection request cannot be honoured."""

    code = 8


class RunCancelled(Fail):
    """RunOptions.terminate stopped the run between two nodes."""

    code = 9


_BY_CODE: dict[int, type[MosaicrtError]] = {
    cls.code: cls
    for cls in (InvalidArgument, InvalidModel, NotImplementedInRuntime, NoSuchFile, RuntimeFailure, OutOfMemory,
                InternalError, ExecutionProviderError, RunCancelled)
}


def raise_for_code(code: int, message: str) -> None:
    raise _BY_CODE.get(code, MosaicrtError)(message)
