"""InferenceSession and SessionOptions, shaped like onnxruntime's Python API."""

from __future__ import annotations

import ctypes
import enum
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _capi, _providers
from ._capi import check, lib
from ._errors import InvalidArgument, MosaicrtError
from ._providers import EpDevice, ExecutionProviderDevicePolicy

# ONNX element type code -> (numpy dtype, onnxruntime-style type string)
_ELEM_TYPES: dict[int, tuple[Any, str]] = {
    1: (np.float32, "tensor(float)"),
    2: (np.uint8, "tensor(uint8)"),
    3: (np.int8, "tensor(int8)"),
    4: (np.uint16, "tensor(uint16)"),
    5: (np.int16, "tensor(int16)"),
    6: (np.int32, "tensor(int32)"),
    7: (np.int64, "tensor(int64)"),
    8: (None, "tensor(string)"),
    9: (np.bool_, "tensor(bool)"),
    10: (np.float16, "tensor(float16)"),
    11: (np.float64, "tensor(double)"),
    12: (np.uint32, "tensor(uint32)"),
    13: (np.uint64, "tensor(uint64)"),
    14: (np.complex64, "tensor(complex64)"),
    15: (np.complex128, "tensor(complex128)"),
    16: (None, "tensor(bfloat16)"),
}
_CODE_OF_DTYPE: dict[np.dtype[Any], int] = {
    np.dtype(t): code for code, (t, _) in _ELEM_TYPES.items() if t is not None and code not in (14, 15)
}


def _register_bfloat16() -> None:
    """bfloat16 arrays need the optional ml_dtypes package (numpy has no bfloat16)."""
    try:
        import ml_dtypes
    except ImportError:
        return
    _ELEM_TYPES[16] = (ml_dtypes.bfloat16, "tensor(bfloat16)")
    _CODE_OF_DTYPE[np.dtype(ml_dtypes.bfloat16)] = 16


_register_bfloat16()


def _register_narrow_types() -> None:
    """float8/float4/int4/int2 arrays (ml_dtypes), one element per byte as the runtime holds them."""
    try:
        import ml_dtypes
    except ImportError:
        return
    names = {17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2", 20: "float8_e5m2fnuz", 21: "uint4",
             22: "int4", 23: "float4_e2m1fn", 24: "float8_e8m0fnu", 25: "uint2", 26: "int2"}
    onnx_names = {17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2", 20: "float8e5m2fnuz", 21: "uint4",
                  22: "int4", 23: "float4e2m1", 24: "float8e8m0", 25: "uint2", 26: "int2"}
    for code, attr in names.items():
        t = getattr(ml_dtypes, attr, None)
        if t is None:
            continue
        _ELEM_TYPES[code] = (t, f"tensor({onnx_names[code]})")
        _CODE_OF_DTYPE[np.dtype(t)] = code


_register_narrow_types()


def get_device() -> str:
    """"GPU" when a GPU execution provider can run here, else "CPU" (onnxruntime's convention)."""
    gpu = any(d.device.type == _providers.HardwareDeviceType.GPU for d in _providers.get_ep_devices())
    return "GPU" if gpu else "CPU"


class GraphOptimizationLevel(enum.IntEnum):
    """How much the session may rewrite the graph (onnxruntime's names)."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class SessionOptions:
    """Options for InferenceSession (the subset of onnxruntime's that mosaicrt honours)."""

    def __init__(self) -> None:
        self.intra_op_num_threads: int = 0
        self.inter_op_num_threads: int = 0  # accepted for compatibility; nodes run in order
        self.log_severity_level: int = 2
        # Conv+BatchNormalization folding and Conv+Relu fusion; ORT_DISABLE_ALL runs the graph as written.
        self.graph_optimization_level: GraphOptimizationLevel = GraphOptimizationLevel.ORT_ENABLE_ALL
        self._config: dict[str, str] = {}
        self._devices: list[tuple[list[EpDevice], dict[str, Any]]] = []
        self._policy: ExecutionProviderDevicePolicy | None = None
        self._delegate: Any = None

    def add_provider_for_devices(self, ep_devices: Sequence[EpDevice], provider_options: Mapping[str, Any] | None
                                 = None) -> None:
        """Run the EP of `ep_devices` (pairs from get_ep_devices(), all of one EP) on exactly those devices."""
        devices = list(ep_devices)
        if not devices:
            raise InvalidArgument("add_provider_for_devices needs at least one EpDevice")
        for d in devices:
            if not isinstance(d, EpDevice):
                raise InvalidArgument(
                    f"add_provider_for_devices takes EpDevice objects from get_ep_devices(), got {d!r}")
        if len({d.ep_name for d in devices}) != 1:
            raise InvalidArgument(f"add_provider_for_devices: the devices belong to several EPs "
                                  f"({sorted({d.ep_name for d in devices})}); call it once per EP")
        self._devices.append((devices, dict(provider_options or {})))

    def set_provider_selection_policy(self, policy: ExecutionProviderDevicePolicy) -> None:
        """Choose EPs by device preference when no provider is named (see ExecutionProviderDevicePolicy)."""
        try:
            self._policy = ExecutionProviderDevicePolicy(policy)
        except ValueError:
            raise InvalidArgument(f"unknown provider selection policy {policy!r}") from None
        self._delegate = None

    def set_provider_selection_policy_delegate(self, delegate: Any) -> None:
        """A custom choice: delegate(ep_devices, model_metadata, runtime_metadata, max_selections)
        returns the chosen EpDevice objects in preference order. Exceptions it raises propagate
        from InferenceSession."""
        if not callable(delegate):
            raise InvalidArgument("the provider selection delegate must be callable")
        self._delegate = delegate
        self._policy = None

    def add_session_config_entry(self, key: str, value: str) -> None:
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key: str) -> str:
        return self._config[key]

    def _handle(self, providers: list[tuple[str, dict[str, Any]]] | None = None) -> tuple[Any, Any]:
        """A native options handle and the delegate adapter to keep alive while it is used."""
        handle = _capi.SessionOptionsP()
        check(lib.MrtCreateSessionOptions(ctypes.byref(handle)))
        try:
            threads = int(self.intra_op_num_threads)
            check(lib.MrtSessionOptionsSetIntraOpNumThreads(handle, threads))
            level = int(self.graph_optimization_level)
            check(lib.MrtSessionOptionsSetConfigEntry(handle, b"session.graph_optimization_level", str(level).encode()))
            for key, value in self._config.items():
                check(lib.MrtSessionOptionsSetConfigEntry(handle, key.encode(), value.encode()))
            call = _providers.apply_selection(handle, providers or [], self._devices, policy=self._policy,
                                              delegate=self._delegate)
        except BaseException:
            lib.MrtReleaseSessionOptions(handle)
            raise
        return handle, call


@dataclass(frozen=True)
class NodeArg:
    """Name, type string ("tensor(float)") and shape (ints, symbolic names or None) of a model input/output."""

    name: str
    type: str
    shape: list[int | str | None] | None


@dataclass(frozen=True)
class NodeAssignment:
    """Which execution provider runs a node; `note` says why it fell back to the CPU EP."""

    node_name: str
    op_type: str
    provider: str
    note: str


def _normalize_providers(providers: Sequence[Any] | None,
                         provider_options: Sequence[Mapping[str, Any]] | None) -> list[tuple[str, dict[str, Any]]]:
    """providers=[name | (name, options)] plus the parallel provider_options list (onnxruntime's forms)."""
    if providers is None:
        if provider_options is not None:
            raise InvalidArgument("provider_options needs providers")
        return []
    if isinstance(providers, str):
        raise InvalidArgument(f"providers must be a list of names, got the string {providers!r}")
    entries = list(providers)
    if provider_options is not None and len(provider_options) != len(entries):
        raise InvalidArgument(f"provider_options has {len(provider_options)} entries for {len(entries)} providers")
    result: list[tuple[str, dict[str, Any]]] = []
    for i, p in enumerate(entries):
        name, opts = (p[0], p[1]) if isinstance(p, tuple) and len(p) == 2 else (p, {})
        if not isinstance(name, str) or not isinstance(opts, Mapping):
            raise InvalidArgument(f"provider entries must be names or (name, options) tuples, got {p!r}")
        merged = dict(opts)
        if provider_options is not None:
            merged.update(provider_options[i])
        result.append((name, merged))
    return result


class InferenceSession:
    """Loads an ONNX model (path or bytes) and runs it.

    >>> sess = InferenceSession("model.onnx")
    >>> outputs = sess.run(None, {"input": array})
    """

    def __init__(
        self,
        path_or_bytes: str | bytes | os.PathLike[str],
        sess_options: SessionOptions | None = None,
        providers: Sequence[Any] | None = None,
        provider_options: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        self._handle = None
        requested = _normalize_providers(providers, provider_options)
        options = sess_options or SessionOptions()
        if requested and (options._policy is not None or options._delegate is not None):
            raise InvalidArgument("pass either providers=[...] or a provider selection policy/delegate, not both")
        self._sess_options = options
        opts, delegate_call = options._handle(requested)
        handle = _capi.SessionP()
        try:
            if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
                data = bytes(path_or_bytes)
                self._model_path: str | None = None
                check(lib.MrtCreateSessionFromBytes(data, len(data), opts, ctypes.byref(handle)))
            elif isinstance(path_or_bytes, (str, os.PathLike)):
                self._model_path = os.fspath(path_or_bytes)
                check(lib.MrtCreateSession(os.fsencode(self._model_path), opts, ctypes.byref(handle)))
            else:
                raise TypeError(
                    f"InferenceSession needs a model path or the model's bytes, got {type(path_or_bytes).__name__}"
                )
        except MosaicrtError as exc:
            _providers.reraise_delegate_error(delegate_call, exc)
            raise
        finally:
            lib.MrtReleaseSessionOptions(opts)
        self._handle = handle
        self._providers = self._read_providers()
        self._assignments = self._read_assignments()
        self._inputs = self._io_list(_capi.IO_INPUT)
        self._outputs = self._io_list(_capi.IO_OUTPUT)

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle:
            lib.MrtReleaseSession(handle)
            self._handle = None

    def _io_list(self, kind: int) -> list[NodeArg]:
        count = ctypes.c_size_t()
        check(lib.MrtSessionGetIoCount(self._handle, kind, ctypes.byref(count)))
        result = []
        for i in range(count.value):
            name = ctypes.c_char_p()
            elem = ctypes.c_int32()
            rank = ctypes.c_size_t()
            check(lib.MrtSessionGetIoInfo(self._handle, kind, i, ctypes.byref(name), ctypes.byref(elem),
                                          ctypes.byref(rank)))
            shape: list[int | str | None] | None = None
            if rank.value != ctypes.c_size_t(-1).value:
                shape = []
                for d in range(rank.value):
                    value = ctypes.c_int64()
                    symbol = ctypes.c_char_p()
                    check(lib.MrtSessionGetIoDim(self._handle, kind, i, d, ctypes.byref(value),
                                                 ctypes.byref(symbol)))
                    sym = (symbol.value or b"").decode("utf-8", "replace")
                    shape.append(value.value if value.value >= 0 else (sym or None))
            type_str = _ELEM_TYPES.get(elem.value, (None, f"tensor(unknown:{elem.value})"))[1]
            result.append(NodeArg((name.value or b"").decode("utf-8", "replace"), type_str, shape))
        return result

    def get_inputs(self) -> list[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        return list(self._outputs)

    def _read_providers(self) -> list[str]:
        count = ctypes.c_size_t()
        check(lib.MrtSessionGetProviderCount(self._handle, ctypes.byref(count)))
        names = []
        for i in range(count.value):
            name = ctypes.c_char_p()
            check(lib.MrtSessionGetProvider(self._handle, i, ctypes.byref(name)))
            names.append((name.value or b"").decode())
        return names

    def _read_assignments(self) -> list[NodeAssignment]:
        count = ctypes.c_size_t()
        check(lib.MrtSessionGetNodeCount(self._handle, ctypes.byref(count)))
        result = []
        for i in range(count.value):
            fields = [ctypes.c_char_p() for _ in range(4)]
            check(lib.MrtSessionGetNodeAssignment(self._handle, i, *[ctypes.byref(f) for f in fields]))
            result.append(NodeAssignment(*[(f.value or b"").decode("utf-8", "replace") for f in fields]))
        return result

    def get_providers(self) -> list[str]:
        """EPs this session uses, in the order they claim nodes (the CPU EP last)."""
        return list(self._providers)

    def get_node_assignments(self) -> list[NodeAssignment]:
        """Which EP runs each node, in execution order (after graph optimization)."""
        return list(self._assignments)

    def get_session_options(self) -> SessionOptions:
        return self._sess_options

    def run(
        self,
        output_names: Iterable[str] | None,
        input_feed: Mapping[str, Any],
        run_options: Any = None,
    ) -> list[np.ndarray[Any, Any]]:
        """Run the model; returns one numpy array per requested output (all outputs when None)."""
        if not isinstance(input_feed, Mapping):
            raise InvalidArgument(f"input_feed must be a dict of name -> array, got {type(input_feed).__name__}")
        keep_alive: list[np.ndarray[Any, Any]] = []
        values: list[Any] = []
        names: list[bytes] = []
        try:
            for name, value in input_feed.items():
                arr = _as_input_array(name, value)
                keep_alive.append(arr)
                names.append(str(name).encode())
                values.append(_borrow(arr))
            outs = list(output_names) if output_names is not None else []
            n_out = len(outs) if outs else len(self._outputs)
            out_buf = (_capi.ValueP * max(n_out, 1))()
            in_names = (ctypes.c_char_p * max(len(names), 1))(*names)
            in_vals = (_capi.ValueP * max(len(values), 1))(*values)
            out_names = (ctypes.c_char_p * max(len(outs), 1))(*[str(o).encode() for o in outs])
            check(lib.MrtRun(self._handle, in_names, in_vals, len(values), out_names if outs else None, len(outs),
                             out_buf))
            results = []
            taken = 0
            try:
                for i in range(n_out):
                    taken = i + 1
                    results.append(_to_numpy(out_buf[i]))  # takes ownership of the handle
            finally:
                for i in range(taken, n_out):
                    lib.MrtReleaseValue(out_buf[i])
            return results
        finally:
            for v in values:
                lib.MrtReleaseValue(v)


def _as_input_array(name: str, value: Any) -> np.ndarray[Any, Any]:
    arr = np.asarray(value)
    if arr.dtype == object or arr.dtype.kind in "USO":
        raise InvalidArgument(f"input {name!r}: string/object arrays are not supported (dtype {arr.dtype})")
    if arr.dtype not in _CODE_OF_DTYPE:
        hint = " (install ml_dtypes for bfloat16)" if arr.dtype.name == "bfloat16" else ""
        raise InvalidArgument(f"input {name!r}: numpy dtype {arr.dtype} is not supported{hint}")
    # (np.ascontiguousarray would turn 0-d arrays into 1-d ones)
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def _borrow(arr: np.ndarray[Any, Any]) -> Any:
    code = _CODE_OF_DTYPE[arr.dtype]
    shape = (ctypes.c_int64 * max(arr.ndim, 1))(*arr.shape)
    handle = _capi.ValueP()
    check(lib.MrtCreateTensorBorrowed(code, shape, arr.ndim, arr.ctypes.data if arr.size else None, arr.nbytes,
                                      ctypes.byref(handle)))
    return handle


class _OwnedOutput:
    """Exposes one MrtValue's memory to numpy without a copy; releases the value when the
    last array viewing it is gone."""

    __slots__ = ("__array_interface__", "_value")

    def __init__(self, value: Any, interface: dict[str, Any]) -> None:
        self._value = value
        self.__array_interface__ = interface

    def __del__(self) -> None:
        if self._value:
            lib.MrtReleaseValue(self._value)
            self._value = None


def _to_numpy(value: Any) -> np.ndarray[Any, Any]:
    """Wrap an output value as a numpy array (zero copy); takes ownership of `value`."""
    elem = ctypes.c_int32()
    rank = ctypes.c_size_t()
    shape_p = ctypes.POINTER(ctypes.c_int64)()
    data = ctypes.c_void_p()
    nbytes = ctypes.c_size_t()
    try:
        check(lib.MrtValueGetInfo(value, ctypes.byref(elem), ctypes.byref(rank), ctypes.byref(shape_p),
                                  ctypes.byref(data), ctypes.byref(nbytes)))
        np_type = _ELEM_TYPES.get(elem.value, (None, ""))[0]
        if np_type is None:
            raise InvalidArgument(f"output element type {elem.value} cannot be converted to numpy")
    except BaseException:
        lib.MrtReleaseValue(value)
        raise
    shape = tuple(shape_p[i] for i in range(rank.value))
    dtype = np.dtype(np_type)
    if not nbytes.value or not data.value:
        lib.MrtReleaseValue(value)
        return np.empty(shape, dtype=dtype)
    interface = {"shape": shape, "typestr": dtype.str, "data": (data.value, False), "version": 3}
    if dtype.kind == "V" or (dtype.kind == "f" and dtype.itemsize == 1):
        # extension dtypes (ml_dtypes bfloat16, float8, int4, ...): expose raw bytes, then view
        raw = np.asarray(_OwnedOutput(value, {**interface, "typestr": f"|V{dtype.itemsize}"}))
        return raw.view(dtype)
    return np.asarray(_OwnedOutput(value, interface))
