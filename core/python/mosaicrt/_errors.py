"""Exceptions raised by mosaicrt; each carries the core's message and error code."""

from __future__ import annotations


class MosaicrtError(Exception):
    """Base class of every error reported by the mosaicrt core."""

    code = 5

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(MosaicrtError, ValueError):
    """Bad input from the caller: unknown names, wrong dtype/rank/shape, bad values."""

    code = 1


class InvalidModel(MosaicrtError, ValueError):
    """The model bytes are malformed or violate ONNX rules."""

    code = 2


class NotImplementedInRuntime(MosaicrtError, NotImplementedError):
    """Valid ONNX that mosaicrt does not support (operator, opset, element type, attribute)."""

    code = 3


class NoSuchFile(MosaicrtError, FileNotFoundError):
    """A model or external-data file is missing or unreadable."""

    code = 4


class RuntimeFailure(MosaicrtError, RuntimeError):
    """A kernel failed while running."""

    code = 5


class OutOfMemory(MosaicrtError, MemoryError):
    code = 6


class InternalError(MosaicrtError):
    """A bug in mosaicrt: please report it with the model."""

    code = 7


class ExecutionProviderError(MosaicrtError):
    """An EP library cannot be loaded or is incompatible (the message names the file and, for
    ABI skew, both versions), or an EP registration/selection request cannot be honoured."""

    code = 8


_BY_CODE: dict[int, type[MosaicrtError]] = {
    cls.code: cls
    for cls in (InvalidArgument, InvalidModel, NotImplementedInRuntime, NoSuchFile, RuntimeFailure, OutOfMemory,
                InternalError, ExecutionProviderError)
}


def raise_for_code(code: int, message: str) -> None:
    raise _BY_CODE.get(code, MosaicrtError)(message)
