"""Execution providers: plugin EP libraries, hardware devices and the EP selection policy.

Installed EP wheels advertise their native library through the ``mosaicrt.execution_providers``
entry point group: each entry point names a zero-argument function returning the library's
path (or the path itself as a string attribute). They are found and registered lazily, the
first time anything asks which providers exist or creates a session.
``MOSAICRT_DISABLE_EP_DISCOVERY=1`` turns that off.
"""

from __future__ import annotations

import ctypes
import enum
import os
import threading
import warnings
from dataclasses import dataclass, field
from importlib import metadata as importlib_metadata
from typing import Any

from ._capi import EpDeviceInfo, SelectionDelegate, check, lib
from ._errors import ExecutionProviderError, MosaicrtError

ENTRY_POINT_GROUP = "mosaicrt.execution_providers"
CPU_PROVIDER = "CPUExecutionProvider"
# EPs this project ships as plugin wheels (mosaicrt-ep-<name>), whether installed or not.
PROJECT_PROVIDERS = ("CUDAExecutionProvider", "DnnlExecutionProvider")


class HardwareDeviceType(enum.IntEnum):
    CPU = 0
    GPU = 1
    NPU = 2


class ExecutionProviderDevicePolicy(enum.IntEnum):
    """Which devices a session prefers when no EP is named explicitly."""

    DEFAULT = 0  # same as PREFER_CPU
    PREFER_CPU = 1
    PREFER_NPU = 2
    PREFER_GPU = 3
    MAX_PERFORMANCE = 4  # GPU, then NPU, then CPU
    MAX_EFFICIENCY = 5  # NPU first
    MIN_OVERALL_POWER = 6  # NPU first


@dataclass(frozen=True)
class HardwareDevice:
    type: HardwareDeviceType
    vendor: str
    vendor_id: int
    device_id: int
    name: str
    metadata: dict[str, str] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class EpDevice:
    """One (execution provider, hardware device) pair, as returned by get_ep_devices()."""

    ep_name: str
    ep_vendor: str
    ep_version: str
    library_path: str  # "" for the built-in CPU EP
    device: HardwareDevice
    id: int  # identifies the pair in this process
    # Options the EP applies on this device unless the session gives others. EP ABI 1.x has no
    # way for a factory to report defaults, so this is empty for every EP today.
    ep_options: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def ep_metadata(self) -> dict[str, str]:
        return {"version": self.ep_version, "library_path": self.library_path}


_lock = threading.RLock()
_state = {"discovered": False}
_discovery_problems: list[str] = []
_registered: dict[str, str] = {}  # registration name -> library path (this process)


def _text(b: bytes | None) -> str:
    return (b or b"").decode("utf-8", "replace")


def _entry_point_library(ep: importlib_metadata.EntryPoint) -> str:
    target = ep.load()
    path = target() if callable(target) else target
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"entry point {ep.value!r} gave {type(path).__name__}, expected a library path")
    return os.fspath(path)


def _discover() -> None:
    """Register every installed EP wheel's library once (entry point group ENTRY_POINT_GROUP)."""
    with _lock:
        if _state["discovered"]:
            return
        _state["discovered"] = True
        if os.environ.get("MOSAICRT_DISABLE_EP_DISCOVERY", "") not in ("", "0"):
            return
        for ep in sorted(importlib_metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            if ep.name in _registered:
                continue
            dist = getattr(ep, "dist", None)
            where = f"{dist.name} {dist.version}" if dist is not None else ep.value
            try:
                path = _entry_point_library(ep)
                _register(ep.name, path)
            except Exception as exc:  # one broken EP wheel must not break the runtime
                problem = f"execution provider {ep.name!r} from {where} was not registered: {exc}"
                _discovery_problems.append(problem)
                warnings.warn(problem, RuntimeWarning, stacklevel=3)


def _register(name: str, path: str) -> None:
    check(lib.MrtRegisterExecutionProviderLibrary(name.encode(), os.fsencode(path)))
    _registered[name] = path


def register_execution_provider_library(registration_name: str, library_path: str | os.PathLike[str]) -> None:
    """Load a plugin EP library under `registration_name` (an error if the name is taken or
    the library is incompatible; the message names the file)."""
    _discover()
    with _lock:
        _register(str(registration_name), os.fspath(library_path))


def unregister_execution_provider_library(registration_name: str) -> None:
    """Unload a plugin EP library; refused while a live session uses it."""
    _discover()
    with _lock:
        check(lib.MrtUnregisterExecutionProviderLibrary(str(registration_name).encode()))
        _registered.pop(str(registration_name), None)


def get_registered_execution_provider_libraries() -> dict[str, str]:
    """Registration name -> library path of every plugin EP library loaded in this process."""
    _discover()
    with _lock:
        return dict(_registered)


def get_ep_discovery_problems() -> list[str]:
    """Why installed EP wheels could not be registered (empty when all loaded)."""
    _discover()
    return list(_discovery_problems)


def get_available_providers() -> list[str]:
    """Execution providers this installation can run: plugin EPs first, the CPU EP last."""
    _discover()
    with _lock:
        names = _text(lib.MrtGetAvailableProviders())
    return [n for n in names.split(",") if n]


def get_all_providers() -> list[str]:
    """Every EP name mosaicrt knows of: the ones available now plus the project's plugin EPs that
    are not installed (onnxruntime's get_all_providers lists the EPs of every build)."""
    available = get_available_providers()
    return [p for p in PROJECT_PROVIDERS if p not in available] + available


def _device_from_info(info: EpDeviceInfo) -> EpDevice:
    meta = {_text(info.metadata_keys[i]): _text(info.metadata_values[i]) for i in range(info.metadata_count)}
    try:
        dtype = HardwareDeviceType(info.device_type)
    except ValueError:
        dtype = HardwareDeviceType.CPU
    device = HardwareDevice(dtype, _text(info.device_vendor), int(info.vendor_id), int(info.device_id),
                            _text(info.device_name), meta)
    return EpDevice(_text(info.ep_name), _text(info.ep_vendor), _text(info.ep_version), _text(info.library_path),
                    device, int(info.id))


def _device_infos() -> list[EpDevice]:
    with _lock:
        count = ctypes.c_size_t()
        check(lib.MrtGetEpDevices(None, 0, ctypes.byref(count)))
        buf = (EpDeviceInfo * max(count.value, 1))()
        check(lib.MrtGetEpDevices(buf, count.value, ctypes.byref(count)))
        return [_device_from_info(buf[i]) for i in range(min(count.value, len(buf)))]


def get_ep_devices() -> list[EpDevice]:
    """Every (EP, device) pair available now: plugin EPs on the devices they support, then
    the CPU EP on the CPU."""
    _discover()
    return _device_infos()


def _options_arrays(options: dict[str, Any] | None) -> tuple[Any, Any, int]:
    items = [(str(k).encode(), str(v).encode()) for k, v in (options or {}).items()]
    keys = (ctypes.c_char_p * max(len(items), 1))(*[k for k, _ in items])
    values = (ctypes.c_char_p * max(len(items), 1))(*[v for _, v in items])
    return keys, values, len(items)


class _DelegateCall:
    """Adapts a Python selection delegate to MrtEpSelectionDelegate and keeps any exception
    it raised, so session creation can re-raise it as is."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.error: BaseException | None = None
        self.c_callback = self._make()

    def _make(self) -> Any:
        def call(devices: Any, n: int, selected: Any, max_selected: int, n_selected: Any, state: Any  # noqa: PLR0917
                 ) -> Any:
            try:
                all_devices = [_device_from_info(devices[i]) for i in range(n)]
                chosen = self.fn(all_devices, {}, {}, max_selected)
                if chosen is None:
                    chosen = []
                index_of = {d.id: i for i, d in enumerate(all_devices)}
                picks: list[int] = []
                for d in chosen:
                    if not isinstance(d, EpDevice) or d.id not in index_of:
                        raise ExecutionProviderError(
                            f"the selection delegate returned {d!r}, which is not one of the EpDevice objects it "
                            "was given"
                        )
                    picks.append(index_of[d.id])
                if len(picks) > max_selected:
                    raise ExecutionProviderError(
                        f"the selection delegate returned {len(picks)} devices; at most {max_selected} are allowed"
                    )
                for i, p in enumerate(picks):
                    selected[i] = p
                n_selected[0] = len(picks)
                return None
            except BaseException as exc:  # surfaced by InferenceSession after the C call returns
                self.error = exc
                msg = f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")
                return ctypes.cast(lib.MrtCreateStatus(5, msg), ctypes.c_void_p).value

        return SelectionDelegate(call)


def apply_selection(handle: Any, explicit: list[tuple[str, dict[str, Any]]],
                    devices: list[tuple[list[EpDevice], dict[str, Any]]], *,
                    policy: ExecutionProviderDevicePolicy | None, delegate: Any) -> _DelegateCall | None:
    """Write the EP choice into a native MrtSessionOptions handle. Returns the delegate
    adapter, which the caller keeps alive until session creation returns."""
    _discover()
    for name, opts in explicit:
        keys, values, n = _options_arrays(opts)
        check(lib.MrtSessionOptionsAppendExecutionProvider(handle, name.encode(), keys, values, n))
    for eps, opts in devices:
        ids = (ctypes.c_uint64 * len(eps))(*[d.id for d in eps])
        keys, values, n = _options_arrays({**eps[0].ep_options, **opts})
        check(lib.MrtSessionOptionsAppendExecutionProviderForDevices(handle, ids, len(eps), keys, values, n))
    if delegate is not None:
        call = _DelegateCall(delegate)
        check(lib.MrtSessionOptionsSetEpSelectionDelegate(handle, call.c_callback, None))
        return call
    if policy is not None:
        check(lib.MrtSessionOptionsSetEpSelectionPolicy(handle, int(policy)))
    return None


def reraise_delegate_error(call: _DelegateCall | None, error: MosaicrtError) -> None:
    """If the failure came from the Python delegate, raise the delegate's own exception."""
    if call is not None and call.error is not None:
        raise call.error from error
