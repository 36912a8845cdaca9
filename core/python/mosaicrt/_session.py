"""InferenceSession, SessionOptions and RunOptions, shaped like onnxruntime's Python API."""

from __future__ import annotations

import concurrent.futures
import ctypes
import datetime
import difflib
import enum
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from . import _capi, _providers, _variant
from ._capi import check, lib
from ._dtypes import CODE_OF_DTYPE, ELEM_TYPES, TYPE_STRINGS, code_of_dtype, dtype_of_element_type, numpy_type_of
from ._errors import (
    ExecutionProviderError,
    InvalidArgument,
    MosaicrtError,
    NotImplementedInRuntime,
    RuntimeFailure,
    raise_for_code,
)
from ._ortvalue import IOBinding, OrtValue, data_pointer
from ._providers import CPU_PROVIDER, EpDevice, ExecutionProviderDevicePolicy

# Kept under the old private names for code that imported them.
_ELEM_TYPES = ELEM_TYPES
_CODE_OF_DTYPE = CODE_OF_DTYPE


def get_device() -> str:
    """"GPU" when a GPU execution provider can run here, else "CPU" (onnxruntime's convention)."""
    gpu = any(d.device.type == _providers.HardwareDeviceType.GPU for d in _providers.get_ep_devices())
    return "GPU" if gpu else "CPU"


# ---- logging: mosaicrt's Python layer reports through `warnings` at severity WARNING (2) ----
_logging = {"default_severity": 2}


def set_default_logger_severity(severity: int) -> None:
    """0 verbose, 1 info, 2 warning, 3 error, 4 fatal: mosaicrt's warnings (provider fallback) are
    issued only at severity 2 or lower."""
    level = int(severity)
    if not 0 <= level <= 4:
        raise InvalidArgument(f"logger severity must be 0..4, got {severity}")
    _logging["default_severity"] = level


def _warn(message: str, severity: int, stacklevel: int) -> None:
    """Issue a warning unless the session's severity (-1: the default logger's) is above WARNING.
    `stacklevel` counts from the caller of _warn (1) to the user's line."""
    if (_logging["default_severity"] if severity < 0 else severity) <= 2:
        warnings.warn(message, UserWarning, stacklevel=stacklevel + 1)


class GraphOptimizationLevel(enum.IntEnum):
    """How much the session may rewrite the graph (onnxruntime's names)."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(enum.IntEnum):
    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


def _no_such_attribute(owner: str, name: str, known: Iterable[str]) -> AttributeError:
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return AttributeError(f"'{owner}' object has no attribute {name!r}{hint}")


def _not_implemented(what: str, why: str) -> NotImplementedInRuntime:
    return NotImplementedInRuntime(f"{what} is not supported by mosaicrt: {why}")


class SessionOptions:
    """Options for InferenceSession. Every field of onnxruntime's SessionOptions is here and
    either works or raises NotImplementedError naming it; unknown attributes raise AttributeError."""

    # field -> default; set through __setattr__, which validates
    _FIELDS: ClassVar[dict[str, Any]] = {
        "intra_op_num_threads": 0,
        "inter_op_num_threads": 0,  # used by onnxruntime only in ORT_PARALLEL mode, which mosaicrt refuses
        "log_severity_level": -1,  # -1: the default logger's (set_default_logger_severity)
        "log_verbosity_level": 0,
        "logid": "",
        "graph_optimization_level": GraphOptimizationLevel.ORT_ENABLE_ALL,
        "execution_mode": ExecutionMode.ORT_SEQUENTIAL,
        "execution_order": ExecutionOrder.DEFAULT,
        "enable_profiling": False,
        "profile_file_prefix": "mosaicrt_profile_",
        "optimized_model_filepath": "",
        # Allocator hints without a counterpart: mosaicrt has no arena and no memory-pattern
        # planner (its allocator reuses buffers by tensor lifetime), so either value is honoured.
        "enable_cpu_mem_arena": True,
        "enable_mem_pattern": True,
        "enable_mem_reuse": True,
        "use_deterministic_compute": False,  # mosaicrt's kernels are deterministic either way
        "use_per_session_threads": True,
    }
    __slots__ = ("__dict__",)  # fields live in __dict__; __setattr__ admits only _FIELDS and private names
    intra_op_num_threads: int
    inter_op_num_threads: int
    log_severity_level: int
    log_verbosity_level: int
    logid: str
    graph_optimization_level: GraphOptimizationLevel
    execution_mode: ExecutionMode
    execution_order: ExecutionOrder
    enable_profiling: bool
    profile_file_prefix: str
    optimized_model_filepath: str
    enable_cpu_mem_arena: bool
    enable_mem_pattern: bool
    enable_mem_reuse: bool
    use_deterministic_compute: bool
    use_per_session_threads: bool

    def __init__(self) -> None:
        for name, value in self._FIELDS.items():
            object.__setattr__(self, name, value)
        self._config: dict[str, str] = {}
        self._devices: list[tuple[list[EpDevice], dict[str, Any]]] = []
        self._providers: list[tuple[str, dict[str, Any]]] = []
        self._policy: ExecutionProviderDevicePolicy | None = None
        self._delegate: Any = None
        self._initializers: dict[str, OrtValue] = {}

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
            return
        if name not in self._FIELDS:
            raise _no_such_attribute("SessionOptions", name, self._FIELDS)
        object.__setattr__(self, name, self._validate(name, value))

    @staticmethod
    def _validate(name: str, value: Any) -> Any:
        if name in ("intra_op_num_threads", "inter_op_num_threads", "log_severity_level", "log_verbosity_level"):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"SessionOptions.{name} must be an int, got {type(value).__name__}")
            return value
        if name in ("logid", "profile_file_prefix", "optimized_model_filepath"):
            if not isinstance(value, (str, os.PathLike)):
                raise TypeError(f"SessionOptions.{name} must be a string, got {type(value).__name__}")
            return os.fspath(value)
        if name == "graph_optimization_level":
            return GraphOptimizationLevel(value)
        if name == "execution_mode":
            mode = ExecutionMode(value)
            if mode == ExecutionMode.ORT_PARALLEL:
                raise _not_implemented("SessionOptions.execution_mode = ORT_PARALLEL",
                                       "nodes run one after another (each kernel uses intra_op_num_threads)")
            return mode
        if name == "execution_order":
            order = ExecutionOrder(value)
            if order != ExecutionOrder.DEFAULT:
                raise _not_implemented(f"SessionOptions.execution_order = {order.name}",
                                       "nodes run in the model's topological order")
            return order
        if name == "enable_mem_reuse" and not value:
            raise _not_implemented("SessionOptions.enable_mem_reuse = False",
                                   "the allocator always reuses buffers of values whose last use has passed")
        if name == "use_per_session_threads" and not value:
            raise _not_implemented("SessionOptions.use_per_session_threads = False",
                                   "there is no global thread pool; each session has its own")
        return bool(value)

    # ---- providers ----
    def add_provider(self, provider_name: str, provider_options: Mapping[str, Any] | None = None) -> None:
        """Append an EP by name (used when InferenceSession gets no providers=[...])."""
        self._providers.append((str(provider_name), dict(provider_options or {})))

    def has_providers(self) -> bool:
        return bool(self._providers or self._devices or self._policy is not None or self._delegate is not None)

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

    # ---- configuration ----
    def add_session_config_entry(self, key: str, value: str) -> None:
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key: str) -> str:
        try:
            return self._config[key]
        except KeyError:
            raise RuntimeFailure(f"SessionOptions has no configuration entry {key!r}") from None

    def add_free_dimension_override_by_name(self, dim_name: str, dim_value: int) -> None:
        """Fix the symbolic input dimension `dim_name` (dim_param) to `dim_value`."""
        self._config[f"session.free_dimension_override_by_name.{dim_name}"] = str(int(dim_value))

    def add_free_dimension_override_by_denotation(self, dim_denotation: str, dim_value: int) -> None:
        """Fix every input dimension with this denotation (e.g. "DATA_BATCH") to `dim_value`."""
        self._config[f"session.free_dimension_override_by_denotation.{dim_denotation}"] = str(int(dim_value))

    def add_initializer(self, name: str, ortvalue: OrtValue) -> None:
        """Replace the model's initializer `name` (same element type) with this value."""
        if not isinstance(ortvalue, OrtValue):
            raise InvalidArgument(f"add_initializer takes an OrtValue, got {type(ortvalue).__name__}")
        self._initializers[str(name)] = ortvalue

    def add_external_initializers(self, names: Sequence[str], ortvalues: Sequence[OrtValue]) -> None:
        """Supply the data of initializers the model keeps in external files (the files are not read)."""
        if len(names) != len(ortvalues):
            raise InvalidArgument(f"add_external_initializers: {len(names)} names for {len(ortvalues)} values")
        for name, value in zip(names, ortvalues, strict=True):
            self.add_initializer(name, value)

    def add_external_initializers_from_files_in_memory(self, *args: Any) -> None:
        raise _not_implemented("SessionOptions.add_external_initializers_from_files_in_memory",
                               "pass the data with add_external_initializers")

    def register_custom_ops_library(self, library_path: str) -> None:
        raise _not_implemented("SessionOptions.register_custom_ops_library",
                               "custom operators come from plugin EPs (register_execution_provider_library)")

    def set_load_cancellation_flag(self, value: bool) -> None:
        raise _not_implemented("SessionOptions.set_load_cancellation_flag", "session creation cannot be cancelled")

    def set_ep_context_data_read_func(self, *args: Any) -> None:
        raise _not_implemented("SessionOptions.set_ep_context_data_read_func", "there are no EP context models")

    def clear_ep_context_data_read_func(self) -> None:
        raise _not_implemented("SessionOptions.clear_ep_context_data_read_func", "there are no EP context models")

    def _handle(self, providers: list[tuple[str, dict[str, Any]]] | None = None) -> tuple[Any, Any]:
        """A native options handle and the delegate adapter to keep alive while it is used."""
        handle = _capi.SessionOptionsP()
        check(lib.MrtCreateSessionOptions(ctypes.byref(handle)))
        try:
            threads = int(self.intra_op_num_threads)
            check(lib.MrtSessionOptionsSetIntraOpNumThreads(handle, threads))
            level = int(self.graph_optimization_level)
            check(lib.MrtSessionOptionsSetConfigEntry(handle, b"session.graph_optimization_level", str(level).encode()))
            for key, entry in self._config.items():
                check(lib.MrtSessionOptionsSetConfigEntry(handle, key.encode(), entry.encode()))
            for name, value in self._initializers.items():
                tensor = _borrowed_value(value.numpy())
                try:
                    check(lib.MrtSessionOptionsAddInitializer(handle, name.encode(), tensor))
                finally:
                    lib.MrtReleaseValue(tensor)
            call = _providers.apply_selection(handle, providers or [], self._devices, policy=self._policy,
                                              delegate=self._delegate)
        except BaseException:
            lib.MrtReleaseSessionOptions(handle)
            raise
        return handle, call


class _NativeRunOptions:
    """Owns one MrtRunOptions*."""

    __slots__ = ("_release", "address", "handle")

    def __init__(self) -> None:
        self.handle: Any = _capi.RunOptionsP()
        check(lib.MrtCreateRunOptions(ctypes.byref(self.handle)))
        self.address = ctypes.cast(self.handle, ctypes.c_void_p).value
        self._release = lib.MrtReleaseRunOptions

    def __del__(self) -> None:
        handle, self.handle = self.handle, None
        if handle:
            self._release(handle)


class RunOptions:
    """Per-run options. `terminate = True` (from any thread) stops runs using these options
    before their next node; they raise RunCancelled (onnxruntime's Fail)."""

    _FIELDS = ("log_severity_level", "log_verbosity_level", "logid", "terminate", "only_execute_path_to_fetches")

    def __init__(self) -> None:
        self._native = _NativeRunOptions()
        self._terminate = False
        self._config: dict[str, str] = {}
        self.log_severity_level = -1
        self.log_verbosity_level = 0
        self.logid = ""
        # mosaicrt always runs every node; requesting a subset of outputs gives the same values.
        self.only_execute_path_to_fetches = False

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_") or name in self._FIELDS:
            object.__setattr__(self, name, value)
            return
        raise _no_such_attribute("RunOptions", name, self._FIELDS)

    @property
    def terminate(self) -> bool:
        return self._terminate

    @terminate.setter
    def terminate(self, value: bool) -> None:
        check(lib.MrtRunOptionsSetTerminate(self._native.handle, 1 if value else 0))
        self._terminate = bool(value)

    def add_run_config_entry(self, key: str, value: str) -> None:
        self._config[str(key)] = str(value)

    def get_run_config_entry(self, key: str) -> str:
        try:
            return self._config[key]
        except KeyError:
            raise RuntimeFailure(f"RunOptions has no configuration entry {key!r}") from None

    def add_active_adapter(self, adapter: Any) -> None:
        raise _not_implemented("RunOptions.add_active_adapter", "LoRA adapters are not supported")


@dataclass(frozen=True)
class NodeArg:
    """Name, type string ("tensor(float)") and shape (ints, symbolic names or None) of a model input/output."""

    name: str
    type: str
    shape: list[int | str | None] | None


@dataclass(frozen=True)
class NodeAssignment:
    """Which execution provider runs a node; `note` says why it fell back to the CPU EP.

    `partition` names the group of nodes the EP runs as one unit ("" on the CPU EP); `copies`
    lists the host/device memory copies made before that partition runs ("" for none).
    """

    node_name: str
    op_type: str
    provider: str
    note: str
    partition: str = ""
    copies: str = ""


@dataclass(frozen=True)
class TransferCounts:
    """Copies between host and device memory a session made since it was created."""

    to_device: int
    to_host: int
    device_resident: int  # device inputs read in place: produced by the same EP, no copy
    constants_uploaded: int


@dataclass(frozen=True)
class ModelMetadata:
    """ModelProto facts, as onnxruntime's get_modelmeta() returns them."""

    producer_name: str
    graph_name: str
    domain: str
    description: str
    graph_description: str
    version: int
    custom_metadata_map: dict[str, str] = field(default_factory=dict)


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


def _fetch_from_catalog(requested: list[tuple[str, dict[str, Any]]], options: SessionOptions) -> None:
    """winml builds with EP download on: fetch the EPs the session wants that are not installed (named in
    providers=[...], or for a device policy the certified EPs serving a preferred device that is present)."""
    if not _variant.is_winml_build():
        return
    entry = options._config.get(_variant.SESSION_CONFIG_KEY)
    if not _variant.download_decision(entry)[0]:
        return
    from .catalog import _auto

    available = set(_providers.get_available_providers())
    missing = [n for n, _ in requested if n not in available]
    if missing:
        _auto.provide(missing)
    elif not requested and options._policy is not None:
        present = {d.device.type.name for d in _providers.get_ep_devices()}
        _auto.provide_for_policy(options._policy.name, present, available)


def _available_only(requested: list[tuple[str, dict[str, Any]]], severity: int) -> list[tuple[str, dict[str, Any]]]:
    """Drop providers this installation cannot run, with a warning (onnxruntime's behaviour)."""
    available = _providers.get_available_providers()
    kept = [(n, o) for n, o in requested if n in available]
    for name, _ in requested:
        if name not in available:
            _warn(f"Specified provider '{name}' is not in available provider names. Available providers: "
                  f"'{', '.join(available)}'; using the others", severity, stacklevel=4)
    return kept


class _NativeSession:
    """Owns one MrtSession*. Copies of an InferenceSession (copy.copy, copy.deepcopy) share it; it
    is released once, when the last of them is gone. MrtRun is safe to call concurrently."""

    __slots__ = ("_release", "address", "handle")

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.address = ctypes.cast(handle, ctypes.c_void_p).value
        self._release = lib.MrtReleaseSession

    def __del__(self) -> None:
        handle, self.handle = self.handle, None
        if handle:
            self._release(handle)

    def __copy__(self) -> _NativeSession:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _NativeSession:
        return self

    def __reduce__(self) -> Any:
        raise TypeError("a mosaicrt InferenceSession cannot be pickled; create it again from the model in the "
                        "other process")


# The hot path calls the run entry point through an all-pointer prototype: arguments are
# ints and prebuilt ctypes arrays, so ctypes does no per-argument type conversion.
_run_fn = ctypes.CFUNCTYPE(ctypes.c_void_p, *([ctypes.c_void_p] * 10))(("MrtRunWithOptions", lib))
_release_value_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(("MrtReleaseValue", lib))
_MAX_PLANS = 64  # per thread and session


class _Plan:
    """Prebuilt ctypes arrays for one (feed names, output names) combination, reused by every
    run on one thread: only data pointers and shapes are written per call."""

    __slots__ = ("bound", "bound_arrays", "guess", "guess_shapes", "in_names", "key", "n_in", "n_out", "out_info",
                 "out_names", "outputs", "refs", "shapes", "static", "static_index")

    def __init__(self, key: Any, feed_names: Sequence[str], out_names: Sequence[str] | None,
                 statics: list[Any]) -> None:
        self.key = key
        self.n_in = len(feed_names)
        self.in_names = (ctypes.c_char_p * max(self.n_in, 1))(*[n.encode() for n in feed_names])
        self.refs = (_capi.TensorRef * max(self.n_in, 1))()
        self.shapes: list[Any] = []
        for i in range(self.n_in):
            self._shape_room(i, 8)
        self.out_names = (ctypes.c_char_p * len(out_names))(*[n.encode() for n in out_names]) if out_names else None
        self.n_out = len(statics)
        self.outputs = (ctypes.c_void_p * max(self.n_out, 1))()
        self.out_info = (_capi.TensorRef * max(self.n_out, 1))()
        # Outputs of fixed shape are preallocated as numpy arrays and bound: nodes write into them.
        self.static = statics
        self.static_index = [k for k, st in enumerate(statics) if st is not None]
        self.bound = (_capi.TensorRef * max(self.n_out, 1))()
        self.bound_arrays: list[Any] = [None] * self.n_out
        for k, st in enumerate(statics):
            if st is not None:
                self._describe(k, *st)
                self.bound[k].data_bytes = int(np.prod(st[0], dtype=np.int64)) * st[1].itemsize
        # Outputs whose shape depends on the inputs' (a batch dimension): the shapes and types the last run gave
        # them, for the feed shapes it had (guess_shapes). A run with the same feed shapes preallocates and binds
        # them as the fixed ones are; an output that comes out otherwise is returned as made, and learned.
        self.guess: list[tuple[int, tuple[int, ...], np.dtype[Any]]] = []
        self.guess_shapes: tuple[tuple[int, ...], ...] | None = None

    def learn(self, feed_shapes: tuple[tuple[int, ...], ...], results: list[Any]) -> None:
        """Remember the shapes and types of this run's outputs that are not fixed, and bind them for the next
        run with the same feed shapes."""
        for k, _shape, _dtype in self.guess:  # unbind the previous guess
            self.bound[k].data = None
            self.bound[k].data_bytes = 0
        self.guess = []
        for k, st in enumerate(self.static):
            arr = results[k]
            if st is not None or type(arr) is not np.ndarray or arr.dtype not in CODE_OF_DTYPE or not arr.size:
                continue
            self._describe(k, arr.shape, arr.dtype)  # (bound by a run whose feeds have these shapes)
            self.guess.append((k, arr.shape, arr.dtype))
        self.guess_shapes = feed_shapes if self.guess else None

    def _describe(self, k: int, shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        """Output k's bound layout: its type and shape (the shape array kept alive in bound_arrays)."""
        dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        self.bound_arrays[k] = dims
        ref = self.bound[k]
        ref.elem_type = CODE_OF_DTYPE[dtype]
        ref.rank = len(shape)
        ref.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))

    def _shape_room(self, i: int, rank: int) -> Any:
        room = (ctypes.c_int64 * max(rank, 1))()
        if i < len(self.shapes):
            self.shapes[i] = room
        else:
            self.shapes.append(room)
        self.refs[i].shape = ctypes.cast(room, ctypes.POINTER(ctypes.c_int64))
        return room


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
        for key, value in kwargs.items():  # onnxruntime's extra keywords
            if key not in ("disabled_optimizers", "read_config_from_model"):
                raise TypeError(f"InferenceSession got an unexpected keyword argument {key!r}")
            if value:
                raise _not_implemented(f"InferenceSession({key}=...)",
                                       "graph optimizations are chosen by graph_optimization_level only")
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            self._model_bytes: bytes | None = bytes(path_or_bytes)
            self._model_path: str | None = None
        elif isinstance(path_or_bytes, (str, os.PathLike)):
            self._model_bytes = None
            self._model_path = os.fspath(path_or_bytes)
        else:
            raise TypeError(
                f"InferenceSession needs a model path or the model's bytes, got {type(path_or_bytes).__name__}"
            )
        self._sess_options = sess_options or SessionOptions()
        self._enable_fallback = True
        self._tls = threading.local()
        self._create(providers, provider_options)

    # ---- copies share the native session (released with the last of them) ----
    def __copy__(self) -> InferenceSession:
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin._tls = threading.local()
        return twin

    def __deepcopy__(self, memo: dict[int, Any]) -> InferenceSession:
        return self.__copy__()

    def __reduce__(self) -> Any:
        raise TypeError("a mosaicrt InferenceSession cannot be pickled; create it again from the model in the "
                        "other process")

    # ---- creation ----
    def _create(self, providers: Sequence[Any] | None, provider_options: Sequence[Mapping[str, Any]] | None) -> None:
        options = self._sess_options
        severity = int(options.log_severity_level)
        requested = _normalize_providers(providers, provider_options) or list(options._providers)
        if requested and (options._policy is not None or options._delegate is not None):
            raise InvalidArgument("pass either providers=[...] or a provider selection policy/delegate, not both")
        explicit = bool(requested)
        _fetch_from_catalog(requested, options)
        if requested:
            requested = _available_only(requested, severity)
            if not requested:
                requested = [(CPU_PROVIDER, {})]
        try:
            native = self._open(requested)
        except (ExecutionProviderError, RuntimeFailure) as exc:  # an EP failed; caller mistakes are not retried
            non_cpu = [n for n, _ in requested if n != CPU_PROVIDER]
            if not (explicit and non_cpu and self._enable_fallback):
                raise
            _warn(f"creating the session with {[n for n, _ in requested]} failed ({exc}); falling back to "
                  f"['{CPU_PROVIDER}'] and retrying", severity, stacklevel=3)
            requested = [(CPU_PROVIDER, {})]
            native = self._open(requested)
        self._native = native
        self._requested_options = {n: {str(k): str(v) for k, v in o.items()} for n, o in requested}
        self._providers = self._read_providers()
        self._assignments = self._read_assignments()
        self._inputs = self._io_list(_capi.IO_INPUT)
        self._outputs = self._io_list(_capi.IO_OUTPUT)
        self._overridable = self._io_list(_capi.IO_OVERRIDABLE_INITIALIZER)
        self._index_io()
        self._tls = threading.local()  # plans belong to one native session
        self._profiling_start_ns = 0
        if options.enable_profiling:
            check(lib.MrtSessionStartProfiling(self._native.handle))
            self._profiling_start_ns = time.time_ns()
        if options.optimized_model_filepath:
            check(lib.MrtSessionSaveOptimizedModel(self._native.handle, os.fsencode(options.optimized_model_filepath)))

    def _open(self, requested: list[tuple[str, dict[str, Any]]]) -> _NativeSession:
        opts, delegate_call = self._sess_options._handle(requested)
        handle = _capi.SessionP()
        try:
            if self._model_bytes is not None:
                data = self._model_bytes
                check(lib.MrtCreateSessionFromBytes(data, len(data), opts, ctypes.byref(handle)))
            else:
                assert self._model_path is not None
                check(lib.MrtCreateSession(os.fsencode(self._model_path), opts, ctypes.byref(handle)))
        except MosaicrtError as exc:
            _providers.reraise_delegate_error(delegate_call, exc)
            raise
        finally:
            lib.MrtReleaseSessionOptions(opts)
        return _NativeSession(handle)

    def _index_io(self) -> None:
        """Static facts the hot path reads instead of asking the core on every run."""
        self._in_dtypes: dict[str, np.dtype[Any] | None] = {}
        for arg in (*self._inputs, *self._overridable):
            code = _code_of_type_string(arg.type)
            np_type = numpy_type_of(code) if code is not None else None
            self._in_dtypes[arg.name] = np.dtype(np_type) if np_type is not None else None
        self._out_index = {o.name: i for i, o in enumerate(self._outputs)}
        # Strings, sequences and optionals go through MrtRun with native values (_run_values); every
        # other session takes the zero-copy path (_run_arrays).
        self._in_types = {arg.name: arg.type for arg in (*self._inputs, *self._overridable)}
        self._values_path = any(not arg.type.startswith("tensor(") or arg.type == "tensor(string)"
                                for arg in (*self._inputs, *self._outputs))
        self._out_static: list[Any] = []
        for o in self._outputs:
            code = _code_of_type_string(o.type)
            np_type = numpy_type_of(code) if code is not None else None
            fixed = o.shape is not None and all(isinstance(d, int) and d >= 0 for d in o.shape)
            if np_type is None or not fixed or np.dtype(np_type).kind == "V":
                self._out_static.append(None)
            else:
                self._out_static.append((tuple(o.shape or ()), np.dtype(np_type)))

    def _io_list(self, kind: int) -> list[NodeArg]:
        handle = self._native.handle
        count = ctypes.c_size_t()
        check(lib.MrtSessionGetIoCount(handle, kind, ctypes.byref(count)))
        result = []
        for i in range(count.value):
            name = ctypes.c_char_p()
            elem = ctypes.c_int32()
            rank = ctypes.c_size_t()
            check(lib.MrtSessionGetIoInfo(handle, kind, i, ctypes.byref(name), ctypes.byref(elem), ctypes.byref(rank)))
            shape: list[int | str | None] | None = None
            if rank.value != ctypes.c_size_t(-1).value:
                shape = []
                for d in range(rank.value):
                    value = ctypes.c_int64()
                    symbol = ctypes.c_char_p()
                    check(lib.MrtSessionGetIoDim(handle, kind, i, d, ctypes.byref(value), ctypes.byref(symbol)))
                    sym = (symbol.value or b"").decode("utf-8", "replace")
                    shape.append(value.value if value.value >= 0 else (sym or None))
            type_str = ELEM_TYPES.get(elem.value, (None, f"tensor(unknown:{elem.value})"))[1]
            onnx_type = ctypes.c_char_p()
            check(lib.MrtSessionGetIoType(handle, kind, i, ctypes.byref(onnx_type)))
            if not _text(onnx_type.value).startswith("tensor("):  # seq(...), optional(...)
                type_str = _text(onnx_type.value)
            result.append(NodeArg((name.value or b"").decode("utf-8", "replace"), type_str, shape))
        return result

    def _read_providers(self) -> list[str]:
        count = ctypes.c_size_t()
        check(lib.MrtSessionGetProviderCount(self._native.handle, ctypes.byref(count)))
        names = []
        for i in range(count.value):
            name = ctypes.c_char_p()
            check(lib.MrtSessionGetProvider(self._native.handle, i, ctypes.byref(name)))
            names.append((name.value or b"").decode())
        return names

    def _read_assignments(self) -> list[NodeAssignment]:
        count = ctypes.c_size_t()
        check(lib.MrtSessionGetNodeCount(self._native.handle, ctypes.byref(count)))
        result = []
        for i in range(count.value):
            fields = [ctypes.c_char_p() for _ in range(4)]
            check(lib.MrtSessionGetNodeAssignment(self._native.handle, i, *[ctypes.byref(f) for f in fields]))
            place = [ctypes.c_char_p() for _ in range(2)]
            check(lib.MrtSessionGetNodePartition(self._native.handle, i, *[ctypes.byref(f) for f in place]))
            result.append(NodeAssignment(*[(f.value or b"").decode("utf-8", "replace") for f in fields + place]))
        return result

    def get_transfer_counts(self) -> TransferCounts:
        """Host/device copies made by this session's runs so far (EPs with device memory)."""
        counts = [ctypes.c_uint64() for _ in range(4)]
        check(lib.MrtSessionGetTransferCounts(self._native.handle, *[ctypes.byref(c) for c in counts]))
        return TransferCounts(*[int(c.value) for c in counts])

    # ---- metadata ----
    def get_inputs(self) -> list[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        return list(self._outputs)

    def get_overridable_initializers(self) -> list[NodeArg]:
        """Initializers that are also graph inputs: a feed of that name replaces them for one run."""
        return list(self._overridable)

    def get_modelmeta(self) -> ModelMetadata:
        texts = [ctypes.c_char_p() for _ in range(5)]
        version = ctypes.c_int64()
        n_custom = ctypes.c_size_t()
        check(lib.MrtSessionGetModelMetadata(self._native.handle, *[ctypes.byref(t) for t in texts],
                                             ctypes.byref(version), ctypes.byref(n_custom)))
        custom = {}
        for i in range(n_custom.value):
            key, value = ctypes.c_char_p(), ctypes.c_char_p()
            check(lib.MrtSessionGetCustomMetadata(self._native.handle, i, ctypes.byref(key), ctypes.byref(value)))
            custom[_text(key.value)] = _text(value.value)
        producer, graph, domain, description, graph_description = (_text(t.value) for t in texts)
        return ModelMetadata(producer, graph, domain, description, graph_description, int(version.value), custom)

    def get_providers(self) -> list[str]:
        """EPs this session uses, in the order they claim nodes (the CPU EP last)."""
        return list(self._providers)

    def get_provider_options(self) -> dict[str, dict[str, str]]:
        """Options of each EP the session uses (as given, values as strings)."""
        return {name: dict(self._requested_options.get(name, {})) for name in self._providers}

    def get_node_assignments(self) -> list[NodeAssignment]:
        """Which EP runs each node, in execution order (after graph optimization)."""
        return list(self._assignments)

    def get_session_options(self) -> SessionOptions:
        return self._sess_options

    # ---- providers ----
    def set_providers(self, providers: Sequence[Any] | None = None,
                      provider_options: Sequence[Mapping[str, Any]] | None = None) -> None:
        """Recreate the native session with other EPs (copies made earlier keep the old one)."""
        self._create(providers, provider_options)

    def disable_fallback(self) -> None:
        """When an explicitly requested EP fails while the session is created (ExecutionProviderError,
        RuntimeFailure), raise instead of warning and retrying with the CPU EP only."""
        self._enable_fallback = False

    def enable_fallback(self) -> None:
        self._enable_fallback = True

    # ---- profiling ----
    def end_profiling(self) -> str:
        """Stop profiling and write the Chrome-trace JSON (one event per executed node); returns its path
        ("" when profiling was not enabled)."""
        with _profile_lock:  # the events string lives until the next call
            if not self._profiling_start_ns:
                return ""
            events = ctypes.c_char_p()
            check(lib.MrtSessionEndProfiling(self._native.handle, ctypes.byref(events)))
            self._profiling_start_ns = 0
            body = _text(events.value)
        stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S-%f")
        path = Path(f"{self._sess_options.profile_file_prefix}{stamp}.json")
        path.write_text("[\n" + body + ("\n" if body else "") + "]\n", encoding="utf-8")
        return str(path)

    def get_profiling_start_time_ns(self) -> int:
        return self._profiling_start_ns

    # ---- running ----
    def _input_index(self, name: str) -> None:
        if name not in self._in_dtypes:
            valid = ", ".join(repr(i.name) for i in self._inputs) or "none"
            raise InvalidArgument(f"unknown input name {name!r}; the model's inputs are {valid}")

    def _output_index(self, name: str) -> int:
        try:
            return self._out_index[name]
        except KeyError:
            valid = ", ".join(repr(o.name) for o in self._outputs)
            raise InvalidArgument(f"unknown output name {name!r}; the model's outputs are {valid}") from None

    def _as_feed(self, name: str, value: Any) -> np.ndarray[Any, Any]:
        """The slow path of input conversion: lists/scalars take the model's element type."""
        if isinstance(value, OrtValue):
            value = value.numpy()
        if isinstance(value, np.ndarray):
            arr = value
        else:
            want = self._in_dtypes.get(name)
            try:
                arr = np.asarray(value, dtype=want) if want is not None else np.asarray(value)
            except (TypeError, ValueError) as exc:
                raise InvalidArgument(
                    f"input {name!r}: cannot convert {type(value).__name__} to {want}: {exc}") from None
        if arr.dtype == object or arr.dtype.kind in "USO":
            raise InvalidArgument(f"input {name!r}: string/object arrays (dtype {arr.dtype}) fit string inputs only; "
                                  f"the model expects {self._in_types.get(name, 'a numeric tensor')}")
        if code_of_dtype(arr.dtype) is None:
            hint = " (install ml_dtypes for bfloat16)" if arr.dtype.name == "bfloat16" else ""
            raise InvalidArgument(f"input {name!r}: numpy dtype {arr.dtype} is not supported{hint}")
        # (np.ascontiguousarray would turn 0-d arrays into 1-d ones)
        return arr if arr.flags.c_contiguous else arr.copy(order="C")

    def _plan(self, feed_names: tuple[str, ...], out_names: tuple[str, ...] | None, binding: bool) -> _Plan:
        plans: dict[Any, _Plan] | None = getattr(self._tls, "plans", None)
        if plans is None:
            plans = self._tls.plans = {}
        key = (feed_names, out_names, binding)
        # Taken out while in use and put back after a successful run, so a run started on this
        # thread while another is filling the arrays (a signal handler, a finalizer) builds its own.
        plan = plans.pop(key, None)
        if plan is None:
            if out_names is None:
                statics = list(self._out_static)
            else:
                statics = [self._out_static[self._out_index[n]] if n in self._out_index else None for n in out_names]
            if len(plans) >= _MAX_PLANS:
                plans.clear()
            plan = _Plan(key, feed_names, out_names, statics)
        return plan

    def _run_arrays(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any],
                    bound: Sequence[np.ndarray[Any, Any] | None] | None, run_options: RunOptions | None,
                    strict_bound: bool = False) -> list[np.ndarray[Any, Any]]:
        """One run through MrtRunWithOptions. Outputs of fixed shape (and those in `bound`) are
        written by the core into numpy arrays allocated here; the rest are wrapped without a copy."""
        native = self._native  # keeps the native session alive for this call
        plan = self._plan(tuple(input_feed), tuple(output_names) if output_names else None, bound is not None)
        keep: list[Any] = []
        refs, shapes = plan.refs, plan.shapes
        code_of = CODE_OF_DTYPE
        for i, (name, given) in enumerate(input_feed.items()):
            value = given
            if type(value) is not np.ndarray or value.dtype not in code_of or not value.flags.c_contiguous:
                value = self._as_feed(name, value)
            keep.append(value)
            ref = refs[i]
            ref.elem_type = code_of[value.dtype]
            nd = value.ndim
            ref.rank = nd
            if nd:
                room = shapes[i] if nd <= len(shapes[i]) else plan._shape_room(i, nd)
                room[:nd] = value.shape
            ref.data = data_pointer(value)
            ref.data_bytes = value.nbytes
        n_out = plan.n_out
        results: list[Any] = [None] * n_out
        feed_shapes = None
        if bound is None:  # run(): outputs of fixed shape go into arrays allocated here
            for k in plan.static_index:
                st = plan.static[k]
                arr = results[k] = np.empty(st[0], st[1])
                plan.bound[k].data = data_pointer(arr) or None
            if len(plan.static_index) < n_out:  # and those the last run with these feed shapes gave
                feed_shapes = tuple([v.shape for v in keep])
                same = feed_shapes == plan.guess_shapes
                for k, shape, dtype in plan.guess:
                    ref = plan.bound[k]
                    if same:
                        arr = results[k] = np.empty(shape, dtype)
                        ref.data = data_pointer(arr)
                        ref.data_bytes = arr.nbytes
                    else:
                        ref.data = None
                        ref.data_bytes = 0
            bound_refs = plan.bound if plan.static_index or plan.guess else None
        else:  # IOBinding: the caller's buffers (their own plan, so the static layout above is kept)
            for k, buffer in enumerate(bound):
                ref = plan.bound[k]
                if buffer is None:
                    ref.data = None
                    ref.data_bytes = 0
                    continue
                room = (ctypes.c_int64 * max(buffer.ndim, 1))(*buffer.shape)
                keep.append(room)
                ref.elem_type = _element_code(buffer.dtype)
                ref.rank = buffer.ndim
                ref.shape = ctypes.cast(room, ctypes.POINTER(ctypes.c_int64))
                ref.data_bytes = buffer.nbytes
                ref.data = data_pointer(buffer) or None
                results[k] = buffer
            bound_refs = plan.bound
        ro = run_options._native.address if run_options is not None else None
        status = _run_fn(native.address, ro, plan.in_names, refs, plan.n_in, plan.out_names,
                         len(output_names) if output_names else 0, bound_refs, plan.outputs, plan.out_info)
        if status:
            check(ctypes.cast(status, _capi.StatusP))
        outputs, info = plan.outputs, plan.out_info
        made = False
        for k in range(n_out):
            value = outputs[k]
            if value is None:
                continue
            outputs[k] = None
            if strict_bound and results[k] is not None:
                _release_value_fn(value)
                raise InvalidArgument(f"output {k} does not fit its bound buffer of shape {list(results[k].shape)} "
                                      f"and type {results[k].dtype}")
            results[k] = _wrap_output(value, info[k])
            made = True
        if made and feed_shapes is not None:
            plan.learn(feed_shapes, results)
        plans = getattr(self._tls, "plans", None)
        if plans is not None:
            plans[plan.key] = plan
        return results

    def run(
        self,
        output_names: Iterable[str] | None,
        input_feed: Mapping[str, Any],
        run_options: RunOptions | None = None,
    ) -> list[np.ndarray[Any, Any]]:
        """Run the model; returns one numpy array per requested output (all outputs when None)."""
        if not isinstance(input_feed, Mapping):
            raise InvalidArgument(f"input_feed must be a dict of name -> array, got {type(input_feed).__name__}")
        names = list(output_names) if output_names is not None else None
        if self._values_path:
            return self._run_values(names, input_feed, run_options)
        return self._run_arrays(names, input_feed, None, run_options)

    def _run_values(self, output_names: list[str] | None, input_feed: Mapping[str, Any],
                    run_options: RunOptions | None) -> list[Any]:
        """One run through MrtRun with native values: string arrays, lists for sequences, None for an
        optional without a value. Outputs come back the same way (object arrays of str for strings)."""
        native = self._native
        if run_options is not None and run_options.terminate:  # (MrtRun has no run options: checked here)
            raise_for_code(9, "the run was terminated before it started: RunOptions.terminate is set")
        made: list[Any] = []
        try:
            names = []
            for name, value in input_feed.items():
                self._input_index(name)
                names.append(name.encode())
                made.append(self._native_value(name, value, self._in_types.get(name, "")))
            outs = output_names if output_names is not None else [o.name for o in self._outputs]
            for name in outs:
                self._output_index(name)
            in_names = (ctypes.c_char_p * max(len(names), 1))(*names)
            in_values = (_capi.ValueP * max(len(made), 1))(*made)
            out_names = (ctypes.c_char_p * max(len(outs), 1))(*[n.encode() for n in outs])
            results = (_capi.ValueP * max(len(outs), 1))()
            check(lib.MrtRun(native.handle, in_names, in_values, len(made), out_names if output_names is not None
                             else None, len(outs) if output_names is not None else 0, results))
        finally:
            for v in made:
                lib.MrtReleaseValue(v)
        return [_python_value(results[k]) for k in range(len(outs))]

    def _native_value(self, name: str, value: Any, onnx_type: str) -> Any:
        """A new MrtValue for one feed (the caller releases it)."""
        inner = onnx_type[len("optional("):-1] if onnx_type.startswith("optional(") else onnx_type
        if value is None:
            handle = _capi.ValueP()
            check(lib.MrtCreateNone(ctypes.byref(handle)))
            return handle
        if isinstance(value, OrtValue):
            value = value.numpy()
        if inner.startswith("seq(") or (isinstance(value, (list, tuple)) and not inner.startswith("tensor(")):
            if not isinstance(value, (list, tuple)):
                raise InvalidArgument(f"input {name!r} is a sequence ({onnx_type}): pass a list of arrays, "
                                      f"got {type(value).__name__}")
            item_type = inner[len("seq("):-1] if inner.startswith("seq(") else ""
            items = [self._native_value(f"{name}[{k}]", v, item_type) for k, v in enumerate(value)]
            try:
                # (the element type is given for an empty list only: the run checks items against the model)
                code = 0 if items else TYPE_STRINGS.get(item_type, 0)
                handles = (_capi.ValueP * max(len(items), 1))(*items)
                handle = _capi.ValueP()
                check(lib.MrtCreateSequence(code, handles, len(items), ctypes.byref(handle)))
                return handle
            finally:
                for item in items:
                    lib.MrtReleaseValue(item)
        want_strings = inner == "tensor(string)"
        arr = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=object if want_strings else None)
        if arr.dtype.kind in "USO":
            return _string_value(name, arr)
        arr = self._as_feed(name, arr) if inner == onnx_type else np.ascontiguousarray(arr)
        if code_of_dtype(arr.dtype) is None:
            raise InvalidArgument(f"input {name!r}: numpy dtype {arr.dtype} is not supported")
        shape = (ctypes.c_int64 * max(arr.ndim, 1))(*arr.shape)
        handle = _capi.ValueP()
        check(lib.MrtCreateTensor(CODE_OF_DTYPE[arr.dtype], shape, arr.ndim, data_pointer(arr) or None, arr.nbytes,
                                  ctypes.byref(handle)))
        return handle

    def run_with_ort_values(self, output_names: Iterable[str] | None, input_dict_ort_values: Mapping[str, OrtValue],
                            run_options: RunOptions | None = None) -> list[OrtValue]:
        feed = {name: (v.numpy() if isinstance(v, OrtValue) else v) for name, v in input_dict_ort_values.items()}
        return [OrtValue(a) for a in self.run(output_names, feed, run_options)]

    def run_async(self, output_names: Iterable[str] | None, input_feed: Mapping[str, Any],
                  callback: Callable[[list[np.ndarray[Any, Any]], Any, str], None], user_data: Any,
                  run_options: RunOptions | None = None) -> None:
        """Run on a worker thread; then callback(outputs, user_data, error) with error "" on success."""
        names = list(output_names) if output_names is not None else None
        feed = dict(input_feed)

        def work() -> None:
            try:
                outputs = self.run(names, feed, run_options)
            except Exception as exc:  # reported through the callback, as onnxruntime does
                callback([], user_data, f"{type(exc).__name__}: {exc}")
                return
            callback(outputs, user_data, "")

        _async_pool().submit(work)

    def io_binding(self) -> IOBinding:
        return IOBinding(self)

    def run_with_iobinding(self, iobinding: IOBinding, run_options: RunOptions | None = None) -> None:
        if iobinding._session is not self:
            raise InvalidArgument("the IOBinding belongs to another session")
        iobinding._run(run_options)


def _text(b: bytes | None) -> str:
    return (b or b"").decode("utf-8", "replace")


def _element_code(dtype: np.dtype[Any]) -> int:
    code = code_of_dtype(dtype)
    if code is None:
        raise InvalidArgument(f"numpy dtype {dtype} has no ONNX element type mosaicrt supports")
    return code


def _code_of_type_string(type_str: str) -> int | None:
    for code, (_, s) in ELEM_TYPES.items():
        if s == type_str:
            return code
    return None


_profile_lock = threading.Lock()
_pool_lock = threading.Lock()
_pool: list[concurrent.futures.ThreadPoolExecutor] = []


def _async_pool() -> concurrent.futures.ThreadPoolExecutor:
    with _pool_lock:
        if not _pool:
            _pool.append(concurrent.futures.ThreadPoolExecutor(max_workers=max(os.cpu_count() or 1, 2),
                                                               thread_name_prefix="mosaicrt-run-async"))
        return _pool[0]


def _borrowed_value(arr: np.ndarray[Any, Any]) -> Any:
    """A native value viewing `arr` (the caller keeps `arr` alive until it is released)."""
    arr = np.ascontiguousarray(arr) if arr.ndim else arr
    code = _element_code(arr.dtype)
    shape = (ctypes.c_int64 * max(arr.ndim, 1))(*arr.shape)
    handle = _capi.ValueP()
    check(lib.MrtCreateTensorBorrowed(code, shape, arr.ndim, data_pointer(arr) or None, arr.nbytes,
                                      ctypes.byref(handle)))
    return handle


def _string_value(name: str, arr: np.ndarray[Any, Any]) -> Any:
    """A native string tensor from an array of str (or bytes, taken as UTF-8)."""
    encoded = []
    for item in arr.ravel(order="C").tolist():
        if isinstance(item, bytes):
            encoded.append(item)
        elif isinstance(item, str):
            encoded.append(item.encode("utf-8", "surrogateescape"))
        else:
            raise InvalidArgument(f"input {name!r}: a string tensor holds str or bytes, got {type(item).__name__}")
    n = len(encoded)
    strings = (ctypes.c_char_p * max(n, 1))(*encoded)
    lengths = (ctypes.c_size_t * max(n, 1))(*[len(b) for b in encoded])
    shape = (ctypes.c_int64 * max(arr.ndim, 1))(*arr.shape)
    handle = _capi.ValueP()
    check(lib.MrtCreateStringTensor(shape, arr.ndim, strings, lengths, ctypes.byref(handle)))
    return handle


def _python_value(value: Any) -> Any:
    """A Python value for one output MrtValue, which it releases: a numpy array (object array of str for
    strings), a list for a sequence, a dict for a map, None for an optional without a value."""
    try:
        kind = ctypes.c_int()
        check(lib.MrtValueGetKind(value, ctypes.byref(kind)))
        if kind.value == 2:
            return None
        if kind.value == 3:  # a map: a dict of Python scalars, as onnxruntime returns them
            keys, values = _capi.ValueP(), _capi.ValueP()
            check(lib.MrtValueGetMap(value, ctypes.byref(keys), ctypes.byref(values)))
            return dict(zip(_python_value(keys).tolist(), _python_value(values).tolist(), strict=True))
        if kind.value == 1:
            count = ctypes.c_size_t()
            check(lib.MrtValueGetSequenceInfo(value, ctypes.byref(count), None))
            items = []
            for k in range(count.value):
                item = _capi.ValueP()
                check(lib.MrtValueGetSequenceItem(value, k, ctypes.byref(item)))
                items.append(_python_value(item))
            return items
        elem = ctypes.c_int32()
        rank = ctypes.c_size_t()
        shape_p = ctypes.POINTER(ctypes.c_int64)()
        data = ctypes.c_void_p()
        nbytes = ctypes.c_size_t()
        check(lib.MrtValueGetInfo(value, ctypes.byref(elem), ctypes.byref(rank), ctypes.byref(shape_p),
                                  ctypes.byref(data), ctypes.byref(nbytes)))
        info = _capi.TensorRef(elem.value, rank.value, shape_p, data.value, nbytes.value)
        shape = tuple(shape_p[i] for i in range(info.rank))
        if info.elem_type == 8:
            out = np.empty(shape, dtype=object)
            flat = out.reshape(-1)
            text = ctypes.c_void_p()
            length = ctypes.c_size_t()
            for i in range(flat.size):
                check(lib.MrtValueGetString(value, i, ctypes.byref(text), ctypes.byref(length)))
                flat[i] = ctypes.string_at(text.value or 0, length.value).decode("utf-8", "surrogateescape") \
                    if length.value else ""
            return out
        owned, value = value, None
        return _wrap_output(owned, info)  # takes ownership
    finally:
        if value is not None:
            lib.MrtReleaseValue(value)


class _OwnedOutput:
    """Exposes one MrtValue's memory to numpy without a copy; releases the value when the
    last array viewing it is gone."""

    __slots__ = ("__array_interface__", "_value")

    def __init__(self, value: int, interface: dict[str, Any]) -> None:
        self._value = value
        self.__array_interface__ = interface

    def __del__(self) -> None:
        value, self._value = self._value, 0
        if value:
            _release_value_fn(value)


def _wrap_output(value: int, info: Any) -> np.ndarray[Any, Any]:
    """Wrap an output value as a numpy array (zero copy); takes ownership of `value`."""
    try:
        dtype = dtype_of_element_type(info.elem_type)
    except InvalidArgument:
        _release_value_fn(value)
        raise
    shape = tuple(info.shape[i] for i in range(info.rank))
    if not info.data_bytes or not info.data:
        _release_value_fn(value)
        return np.empty(shape, dtype=dtype)
    interface = {"shape": shape, "typestr": dtype.str, "data": (info.data, False), "version": 3}
    if dtype.kind == "V" or (dtype.kind == "f" and dtype.itemsize == 1):
        # extension dtypes (ml_dtypes bfloat16, float8, int4, ...): expose raw bytes, then view
        raw = np.asarray(_OwnedOutput(value, {**interface, "typestr": f"|V{dtype.itemsize}"}))
        return raw.view(dtype)
    return np.asarray(_OwnedOutput(value, interface))


__all__ = ["ExecutionMode", "ExecutionOrder", "GraphOptimizationLevel", "InferenceSession", "ModelMetadata",
           "NodeArg", "NodeAssignment", "RunOptions", "SessionOptions", "dtype_of_element_type", "get_device",
           "set_default_logger_severity"]
