"""OrtValue and IOBinding: tensors in caller memory and runs that write into preallocated buffers."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ._dtypes import CODE_OF_DTYPE, TYPE_STRINGS, code_of_dtype, dtype_of_element_type, type_string
from ._errors import InvalidArgument, NotImplementedInRuntime

if TYPE_CHECKING:
    from ._session import InferenceSession, RunOptions

_CPU = "cpu"


def _check_device(device_type: str, device_id: int) -> None:
    if str(device_type).lower() != _CPU:
        raise NotImplementedInRuntime(
            f"OrtValue/IOBinding on device {device_type!r}: mosaicrt's Python API keeps values in CPU memory "
            "(EPs with device memory copy at their partition boundaries)")
    if int(device_id) != 0:
        raise InvalidArgument(f"CPU device id must be 0, got {device_id}")


def data_pointer(arr: np.ndarray[Any, Any]) -> int:
    """Address of a C-contiguous array's first byte (cheapest route for writable arrays)."""
    if arr.flags.writeable and arr.nbytes:
        try:
            return ctypes.addressof(ctypes.c_char.from_buffer(arr))  # type: ignore[arg-type]
        except (TypeError, ValueError):  # extension dtypes (ml_dtypes.bfloat16) have no buffer format
            pass
    return int(arr.__array_interface__["data"][0])


class OrtValue:
    """A tensor in CPU memory, shaped like onnxruntime's OrtValue. It wraps a numpy array
    without copying (``ortvalue_from_numpy``) or owns one (``ortvalue_from_shape_and_type``,
    run outputs)."""

    __slots__ = ("_array",)

    def __init__(self, array: np.ndarray[Any, Any]) -> None:
        if not isinstance(array, np.ndarray):
            raise InvalidArgument(f"OrtValue wraps a numpy array, got {type(array).__name__}")
        if code_of_dtype(array.dtype) is None:
            raise InvalidArgument(f"numpy dtype {array.dtype} has no ONNX element type mosaicrt supports")
        self._array = array if array.flags.c_contiguous else np.ascontiguousarray(array)

    @staticmethod
    def ortvalue_from_numpy(numpy_obj: Any, device_type: str = _CPU, device_id: int = 0,
                            vendor_id: int = -1) -> OrtValue:
        """Wrap `numpy_obj` (no copy when it is already a C-contiguous array); keep it alive while used."""
        _check_device(device_type, device_id)
        return OrtValue(np.asarray(numpy_obj))

    @staticmethod
    def ortvalue_from_numpy_with_onnx_type(data: Any, onnx_element_type: int) -> OrtValue:
        dtype = dtype_of_element_type(int(onnx_element_type))
        arr = np.asarray(data)
        if arr.dtype.itemsize != dtype.itemsize:
            raise InvalidArgument(f"array of {arr.dtype} cannot be viewed as ONNX element type {onnx_element_type}")
        return OrtValue(np.ascontiguousarray(arr).view(dtype))

    @staticmethod
    def ortvalue_from_shape_and_type(shape: Sequence[int], element_type: Any, device_type: str = _CPU,
                                     device_id: int = 0, vendor_id: int = -1) -> OrtValue:
        """A new (uninitialized) tensor; element_type is a numpy type or an ONNX element type code."""
        _check_device(device_type, device_id)
        dtype = dtype_of_element_type(element_type) if isinstance(element_type, int) else np.dtype(element_type)
        return OrtValue(np.empty(tuple(int(d) for d in shape), dtype=dtype))

    def numpy(self) -> np.ndarray[Any, Any]:
        """The tensor as a numpy array (the wrapped array itself: no copy)."""
        return self._array

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def data_type(self) -> str:
        return type_string(self._array.dtype)

    def element_type(self) -> int:
        """The ONNX element type code (1 = float, 7 = int64, ...), as onnxruntime returns it."""
        return CODE_OF_DTYPE[self._array.dtype]

    def device_name(self) -> str:
        return "cpu"

    def is_tensor(self) -> bool:
        return True

    def is_tensor_sequence(self) -> bool:
        return False

    def is_sparse_tensor(self) -> bool:
        return False

    def has_value(self) -> bool:
        return True

    def data_ptr(self) -> int:
        return data_pointer(self._array)

    def tensor_size_in_bytes(self) -> int:
        return int(self._array.nbytes)

    def update_inplace(self, np_arr: Any) -> None:
        """Copy `np_arr` (same shape and dtype) into this value's memory."""
        src = np.asarray(np_arr)
        if src.shape != self._array.shape or src.dtype != self._array.dtype:
            raise InvalidArgument(f"update_inplace: {src.dtype}{list(src.shape)} does not match "
                                  f"{self._array.dtype}{list(self._array.shape)}")
        np.copyto(self._array, src)

    def __repr__(self) -> str:
        return f"OrtValue({self.data_type()}, shape={self.shape()})"


class IOBinding:
    """Inputs and outputs bound once, run many times (``session.io_binding()``). Outputs bound to
    OrtValues or raw buffers are written in place: the node producing them writes into that
    memory directly when the shape and type match, so nothing is copied afterwards."""

    def __init__(self, session: InferenceSession) -> None:
        self._session = session
        self._inputs: dict[str, np.ndarray[Any, Any]] = {}
        self._outputs: dict[str, OrtValue | None] = {}  # None: allocated by the run
        self._results: list[OrtValue] = []

    # ---- inputs ----
    def bind_cpu_input(self, name: str, arr_on_cpu: Any) -> None:
        self._session._input_index(name)
        self._inputs[name] = self._session._as_feed(name, arr_on_cpu)

    def bind_input(self, name: str, device_type: str, device_id: int, element_type: Any,  # noqa: PLR0917
                   shape: Sequence[int], buffer_ptr: int) -> None:
        """Bind an input to `buffer_ptr` (caller memory holding a C-contiguous tensor)."""
        _check_device(device_type, device_id)
        self._session._input_index(name)
        self._inputs[name] = _array_at(int(buffer_ptr), element_type, shape)

    def bind_ortvalue_input(self, name: str, ortvalue: OrtValue) -> None:
        self._session._input_index(name)
        self._inputs[name] = ortvalue.numpy()

    # ---- outputs ----
    def bind_output(self, name: str, device_type: str = _CPU, device_id: int = 0,  # noqa: PLR0917
                    element_type: Any = None, shape: Sequence[int] | None = None, buffer_ptr: int | None = None
                    ) -> None:
        """Without a buffer the run allocates the output; with one it writes into it."""
        _check_device(device_type, device_id)
        self._session._output_index(name)
        if buffer_ptr is None:
            self._outputs[name] = None
            return
        if element_type is None or shape is None:
            raise InvalidArgument("bind_output with buffer_ptr needs element_type and shape")
        self._outputs[name] = OrtValue(_array_at(int(buffer_ptr), element_type, shape))

    def bind_ortvalue_output(self, name: str, ortvalue: OrtValue) -> None:
        self._session._output_index(name)
        if not isinstance(ortvalue, OrtValue):
            raise InvalidArgument(f"bind_ortvalue_output takes an OrtValue, got {type(ortvalue).__name__}")
        self._outputs[name] = ortvalue

    def clear_binding_inputs(self) -> None:
        self._inputs.clear()

    def clear_binding_outputs(self) -> None:
        self._outputs.clear()
        self._results = []

    def synchronize_inputs(self) -> None:
        """CPU memory needs no synchronization."""

    def synchronize_outputs(self) -> None:
        """CPU memory needs no synchronization."""

    # ---- results ----
    def get_outputs(self) -> list[OrtValue]:
        return list(self._results)

    def get_outputs_as_ortvaluevector(self) -> list[OrtValue]:
        return list(self._results)

    def copy_outputs_to_cpu(self) -> list[np.ndarray[Any, Any]]:
        """Copies of the outputs of the last run."""
        return [v.numpy().copy() for v in self._results]

    def _run(self, run_options: RunOptions | None) -> None:
        if not self._outputs:
            raise InvalidArgument("run_with_iobinding: no outputs are bound (bind_output / bind_ortvalue_output)")
        names = list(self._outputs)
        bound = [v.numpy() if v is not None else None for v in self._outputs.values()]
        arrays = self._session._run_arrays(names, self._inputs, bound, run_options, strict_bound=True)
        self._results = [v if v is not None else OrtValue(a) for v, a in zip(self._outputs.values(), arrays,
                                                                           strict=True)]


def _array_at(ptr: int, element_type: Any, shape: Sequence[int]) -> np.ndarray[Any, Any]:
    """A numpy view of caller memory at `ptr` (no copy; the caller keeps it alive)."""
    if not ptr:
        raise InvalidArgument("buffer_ptr must not be 0")
    dtype = dtype_of_element_type(element_type) if isinstance(element_type, int) else np.dtype(element_type)
    dims = tuple(int(d) for d in shape)
    if any(d < 0 for d in dims):
        raise InvalidArgument(f"shape {list(dims)} has a negative dimension")
    nbytes = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    raw = memoryview((ctypes.c_char * max(nbytes, 1)).from_address(ptr)).cast("B")
    view: np.ndarray[Any, Any] = np.frombuffer(raw, dtype=dtype, count=int(np.prod(dims, dtype=np.int64)))
    return view.reshape(dims)


__all__ = ["TYPE_STRINGS", "IOBinding", "OrtValue", "data_pointer"]
