"""ctypes bindings to the mosaicrt C ABI (include/mosaicrt/mosaicrt.h).

The shared library is looked up next to this file (the wheel layout) unless the
``MOSAICRT_LIBRARY`` environment variable names another one (development builds).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import sys
from pathlib import Path
from typing import Any

from ._errors import raise_for_code

ABI_MAJOR = 1  # the C ABI major version this package speaks
ABI_MINOR = 5  # the newest function it calls (MrtBeginProcessExit) arrived in 1.5


def _library_names() -> list[str]:
    if sys.platform == "win32":
        return ["libmosaicrt.dll", "mosaicrt.dll"]
    if sys.platform == "darwin":
        return ["libmosaicrt.dylib"]
    return ["libmosaicrt.so"]


def _find_library() -> str:
    override = os.environ.get("MOSAICRT_LIBRARY")
    if override:
        if not Path(override).is_file():
            raise ImportError(f"MOSAICRT_LIBRARY={override!r} does not name a file")
        return override
    here = Path(__file__).resolve().parent
    for name in _library_names():
        candidate = here / name
        if candidate.is_file():
            return str(candidate)
    raise ImportError(
        f"the mosaicrt native library ({' or '.join(_library_names())}) is missing from {here}; "
        "reinstall the mosaicrt wheel or set MOSAICRT_LIBRARY to a development build"
    )


class Status(ctypes.Structure):
    pass


class EpDeviceInfo(ctypes.Structure):
    """MrtEpDeviceInfo (mosaicrt.h)."""

    _fields_ = [
        ("id", ctypes.c_uint64),
        ("ep_name", ctypes.c_char_p),
        ("ep_vendor", ctypes.c_char_p),
        ("ep_version", ctypes.c_char_p),
        ("library_path", ctypes.c_char_p),
        ("device_type", ctypes.c_int32),
        ("vendor_id", ctypes.c_uint32),
        ("device_id", ctypes.c_uint32),
        ("device_vendor", ctypes.c_char_p),
        ("device_name", ctypes.c_char_p),
        ("metadata_count", ctypes.c_size_t),
        ("metadata_keys", ctypes.POINTER(ctypes.c_char_p)),
        ("metadata_values", ctypes.POINTER(ctypes.c_char_p)),
    ]


class SessionOptionsHandle(ctypes.Structure):
    pass


class SessionHandle(ctypes.Structure):
    pass


class ValueHandle(ctypes.Structure):
    pass


class RunOptionsHandle(ctypes.Structure):
    pass


class TensorRef(ctypes.Structure):
    """MrtTensorRef (mosaicrt.h): a dense tensor in caller memory."""

    _fields_ = [
        ("elem_type", ctypes.c_int32),
        ("rank", ctypes.c_size_t),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("data", ctypes.c_void_p),
        ("data_bytes", ctypes.c_size_t),
    ]


StatusP = ctypes.POINTER(Status)
SessionOptionsP = ctypes.POINTER(SessionOptionsHandle)
SessionP = ctypes.POINTER(SessionHandle)
ValueP = ctypes.POINTER(ValueHandle)
RunOptionsP = ctypes.POINTER(RunOptionsHandle)
TensorRefP = ctypes.POINTER(TensorRef)
EpDeviceInfoP = ctypes.POINTER(EpDeviceInfo)
# MrtEpSelectionDelegate (ctypes callbacks cannot return pointer types: the status travels as void*)
SelectionDelegate = ctypes.CFUNCTYPE(ctypes.c_void_p, EpDeviceInfoP, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
                                     ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p)
c_size_p = ctypes.POINTER(ctypes.c_size_t)
c_char_pp = ctypes.POINTER(ctypes.c_char_p)

IO_INPUT = 0
IO_OUTPUT = 1
IO_OVERRIDABLE_INITIALIZER = 2


def _declare(lib: ctypes.CDLL) -> None:
    def fn(name: str, restype: object, *argtypes: object) -> None:
        f = getattr(lib, name)
        f.restype = restype
        f.argtypes = list(argtypes)

    fn("MrtGetAbiVersion", ctypes.c_uint32)
    fn("MrtGetVersionString", ctypes.c_char_p)
    fn("MrtGetBuildInfo", ctypes.c_char_p)
    fn("MrtGetCpuOperators", ctypes.c_char_p)
    fn("MrtStatusGetCode", ctypes.c_int, StatusP)
    fn("MrtStatusGetMessage", ctypes.c_char_p, StatusP)
    fn("MrtReleaseStatus", None, StatusP)
    fn("MrtCreateSessionOptions", StatusP, ctypes.POINTER(SessionOptionsP))
    fn("MrtReleaseSessionOptions", None, SessionOptionsP)
    fn("MrtSessionOptionsSetIntraOpNumThreads", StatusP, SessionOptionsP, ctypes.c_int32)
    fn("MrtSessionOptionsSetConfigEntry", StatusP, SessionOptionsP, ctypes.c_char_p, ctypes.c_char_p)
    fn("MrtCreateSession", StatusP, ctypes.c_char_p, SessionOptionsP, ctypes.POINTER(SessionP))
    fn("MrtCreateSessionFromBytes", StatusP, ctypes.c_void_p, ctypes.c_size_t, SessionOptionsP,
       ctypes.POINTER(SessionP))
    fn("MrtReleaseSession", None, SessionP)
    fn("MrtSessionGetIoCount", StatusP, SessionP, ctypes.c_int, c_size_p)
    fn("MrtSessionGetIoInfo", StatusP, SessionP, ctypes.c_int, ctypes.c_size_t, c_char_pp,
       ctypes.POINTER(ctypes.c_int32), c_size_p)
    fn("MrtSessionGetIoDim", StatusP, SessionP, ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t,
       ctypes.POINTER(ctypes.c_int64), c_char_pp)
    fn("MrtRun", StatusP, SessionP, c_char_pp, ctypes.POINTER(ValueP), ctypes.c_size_t, c_char_pp,
       ctypes.c_size_t, ctypes.POINTER(ValueP))
    fn("MrtCreateTensor", StatusP, ctypes.c_int32, ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t,
       ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ValueP))
    fn("MrtCreateTensorBorrowed", StatusP, ctypes.c_int32, ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t,
       ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ValueP))
    fn("MrtValueGetInfo", StatusP, ValueP, ctypes.POINTER(ctypes.c_int32), c_size_p,
       ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)), ctypes.POINTER(ctypes.c_void_p), c_size_p)
    fn("MrtReleaseValue", None, ValueP)
    # ABI 1.1: plugin EPs, devices, provider selection
    fn("MrtCreateStatus", StatusP, ctypes.c_int, ctypes.c_char_p)
    fn("MrtRegisterExecutionProviderLibrary", StatusP, ctypes.c_char_p, ctypes.c_char_p)
    fn("MrtUnregisterExecutionProviderLibrary", StatusP, ctypes.c_char_p)
    fn("MrtGetAvailableProviders", ctypes.c_char_p)
    fn("MrtGetEpDevices", StatusP, EpDeviceInfoP, ctypes.c_size_t, c_size_p)
    fn("MrtSessionOptionsAppendExecutionProvider", StatusP, SessionOptionsP, ctypes.c_char_p, c_char_pp, c_char_pp,
       ctypes.c_size_t)
    fn("MrtSessionOptionsAppendExecutionProviderForDevices", StatusP, SessionOptionsP,
       ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t, c_char_pp, c_char_pp, ctypes.c_size_t)
    fn("MrtSessionOptionsSetEpSelectionPolicy", StatusP, SessionOptionsP, ctypes.c_int)
    fn("MrtSessionOptionsSetEpSelectionDelegate", StatusP, SessionOptionsP, SelectionDelegate, ctypes.c_void_p)
    fn("MrtSessionGetProviderCount", StatusP, SessionP, c_size_p)
    fn("MrtSessionGetProvider", StatusP, SessionP, ctypes.c_size_t, c_char_pp)
    fn("MrtSessionGetNodeCount", StatusP, SessionP, c_size_p)
    fn("MrtSessionGetNodeAssignment", StatusP, SessionP, ctypes.c_size_t, c_char_pp, c_char_pp, c_char_pp,
       c_char_pp)
    # ABI 1.2: run options, caller-described tensors, profiling, model facts
    fn("MrtCreateRunOptions", StatusP, ctypes.POINTER(RunOptionsP))
    fn("MrtReleaseRunOptions", None, RunOptionsP)
    fn("MrtRunOptionsSetTerminate", StatusP, RunOptionsP, ctypes.c_int32)
    fn("MrtRunWithOptions", StatusP, SessionP, RunOptionsP, c_char_pp, TensorRefP, ctypes.c_size_t, c_char_pp,
       ctypes.c_size_t, TensorRefP, ctypes.POINTER(ValueP), TensorRefP)
    fn("MrtSessionOptionsAddInitializer", StatusP, SessionOptionsP, ctypes.c_char_p, ValueP)
    fn("MrtSessionStartProfiling", StatusP, SessionP)
    fn("MrtSessionEndProfiling", StatusP, SessionP, c_char_pp)
    fn("MrtSessionSaveOptimizedModel", StatusP, SessionP, ctypes.c_char_p)
    fn("MrtSessionGetModelMetadata", StatusP, SessionP, c_char_pp, c_char_pp, c_char_pp, c_char_pp, c_char_pp,
       ctypes.POINTER(ctypes.c_int64), c_size_p)
    fn("MrtSessionGetCustomMetadata", StatusP, SessionP, ctypes.c_size_t, c_char_pp, c_char_pp)
    # ABI 1.3: partitions and device-memory copies
    fn("MrtSessionGetNodePartition", StatusP, SessionP, ctypes.c_size_t, c_char_pp, c_char_pp)
    c_u64_p = ctypes.POINTER(ctypes.c_uint64)
    fn("MrtSessionGetTransferCounts", StatusP, SessionP, c_u64_p, c_u64_p, c_u64_p, c_u64_p)
    # ABI 1.4: strings, sequences and optionals
    fn("MrtValueGetKind", StatusP, ValueP, ctypes.POINTER(ctypes.c_int))
    fn("MrtCreateStringTensor", StatusP, ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t,
       ctypes.POINTER(ctypes.c_char_p), c_size_p, ctypes.POINTER(ValueP))
    fn("MrtValueGetString", StatusP, ValueP, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p), c_size_p)
    fn("MrtCreateSequence", StatusP, ctypes.c_int32, ctypes.POINTER(ValueP), ctypes.c_size_t, ctypes.POINTER(ValueP))
    fn("MrtCreateNone", StatusP, ctypes.POINTER(ValueP))
    fn("MrtValueGetSequenceInfo", StatusP, ValueP, c_size_p, ctypes.POINTER(ctypes.c_int32))
    fn("MrtValueGetSequenceItem", StatusP, ValueP, ctypes.c_size_t, ctypes.POINTER(ValueP))
    fn("MrtSessionGetIoType", StatusP, SessionP, ctypes.c_int, ctypes.c_size_t, c_char_pp)
    fn("MrtValueGetMap", StatusP, ValueP, ctypes.POINTER(ValueP), ctypes.POINTER(ValueP))
    # ABI 1.5: exiting the process
    fn("MrtBeginProcessExit", ctypes.c_int64, ctypes.c_uint32)


def _load() -> ctypes.CDLL:
    path = _find_library()
    try:
        lib = ctypes.CDLL(path)
    except OSError as exc:
        raise ImportError(f"cannot load the mosaicrt native library {path}: {exc}") from exc
    lib.MrtGetAbiVersion.restype = ctypes.c_uint32
    abi = lib.MrtGetAbiVersion()
    if abi >> 16 != ABI_MAJOR or abi & 0xFFFF < ABI_MINOR:
        raise ImportError(
            f"the mosaicrt native library {path} has C ABI {abi >> 16}.{abi & 0xFFFF} but this Python "
            f"package needs ABI {ABI_MAJOR}.{ABI_MINOR} or a newer {ABI_MAJOR}.x; "
            "reinstall mosaicrt so both come from one wheel"
        )
    _declare(lib)
    return lib


lib = _load()
library_path: str = lib._name

#: How long interpreter exit waits for runs on other (daemon) threads to stop at their next node.
EXIT_WAIT_MS = 10_000


def _begin_process_exit() -> None:
    """atexit hook. After it, the interpreter tears down and exit() destroys the native libraries' static
    objects, which a run still going on a daemon thread would touch: stop those runs and keep other threads
    out of the library from now on (MrtBeginProcessExit; this thread keeps using it)."""
    left = lib.MrtBeginProcessExit(EXIT_WAIT_MS)
    if left:
        sys.stderr.write(f"mosaicrt: {left} call(s) on other threads still running {EXIT_WAIT_MS / 1000:g} s after "
                         "the interpreter began to exit; the process may crash on its way out\n")


atexit.register(_begin_process_exit)


def check(status: Any) -> None:
    """Raise the matching Python exception for a non-NULL MrtStatus (and release it)."""
    if not status:
        return
    code = lib.MrtStatusGetCode(status)
    message = lib.MrtStatusGetMessage(status).decode("utf-8", "replace")
    lib.MrtReleaseStatus(status)
    raise_for_code(code, message)
