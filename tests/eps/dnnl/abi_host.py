"""A test-only host of the plugin EP ABI (mosaicrt/ep.h) in ctypes: drives a plugin library directly.

It loads the library, negotiates the ABI, creates the factory and an EP, offers it the nodes of
an ONNX graph (constants from initializers, shapes from the feeds), and runs the claimed nodes
one at a time on numpy arrays. Used to test the oneDNN EP without the mosaicrt core. It speaks
EP ABI 1.1 but serves host memory and per-node kernels only (no groups, Compile or device memory):
a plugin EP driven by it must be asked for host memory where it offers a choice.
"""

from __future__ import annotations

import ctypes as C
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

ABI_MAJOR, ABI_MINOR = 1, 1
ABI_VERSION = (ABI_MAJOR << 16) | ABI_MINOR
FLOAT = 1
NP_TYPES = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_, 11: np.float64}


class Tensor(C.Structure):
    _fields_ = [("elem_type", C.c_int32), ("rank", C.c_size_t), ("dims", C.POINTER(C.c_int64)),
                ("data", C.c_void_p), ("data_bytes", C.c_size_t)]


class Value(C.Structure):
    _fields_ = [("name", C.c_char_p), ("elem_type", C.c_int32), ("rank", C.c_int64),
                ("dims", C.POINTER(C.c_int64)), ("constant_value", C.POINTER(Tensor))]


class Attribute(C.Structure):
    _fields_ = [("name", C.c_char_p), ("type", C.c_int32), ("f", C.c_float), ("i", C.c_int64), ("s", C.c_char_p),
                ("s_len", C.c_size_t), ("count", C.c_size_t), ("floats", C.POINTER(C.c_float)),
                ("ints", C.POINTER(C.c_int64)), ("strings", C.POINTER(C.c_char_p)), ("t", C.POINTER(Tensor))]


class Node(C.Structure):
    _fields_ = [("name", C.c_char_p), ("op_type", C.c_char_p), ("domain", C.c_char_p), ("opset", C.c_int64),
                ("input_count", C.c_size_t), ("inputs", C.POINTER(Value)), ("output_count", C.c_size_t),
                ("outputs", C.POINTER(Value)), ("attribute_count", C.c_size_t),
                ("attributes", C.POINTER(Attribute))]


class Graph(C.Structure):
    _fields_ = [("node_count", C.c_size_t), ("nodes", C.POINTER(Node))]


class Device(C.Structure):
    _fields_ = [("type", C.c_int32), ("vendor_id", C.c_uint32), ("device_id", C.c_uint32), ("vendor", C.c_char_p),
                ("name", C.c_char_p), ("metadata_count", C.c_size_t), ("metadata_keys", C.POINTER(C.c_char_p)),
                ("metadata_values", C.POINTER(C.c_char_p))]


CreateStatusFn = C.CFUNCTYPE(C.c_void_p, C.c_int, C.c_char_p)
CountFn = C.CFUNCTYPE(C.c_size_t, C.c_void_p)
GetInputFn = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_size_t, C.POINTER(Tensor))
AllocFn = C.CFUNCTYPE(C.c_void_p, C.c_void_p, C.c_size_t, C.c_int32, C.POINTER(C.c_int64), C.c_size_t,
                      C.POINTER(Tensor))
ThreadsFn = C.CFUNCTYPE(C.c_int32, C.c_void_p)


class Api(C.Structure):
    _fields_ = [("abi_version", C.c_uint32), ("CreateStatus", CreateStatusFn),
                ("KernelContextGetInputCount", CountFn), ("KernelContextGetOutputCount", CountFn),
                ("KernelContextGetInput", GetInputFn), ("KernelContextAllocateOutput", AllocFn),
                ("KernelContextGetThreadCount", ThreadsFn),
                ("SubgraphToOnnx", C.c_void_p)]  # 1.1; this host hands out no subgraphs


class Ep(C.Structure):
    pass


Ep._fields_ = [("abi_version", C.c_uint32), ("GetName", C.CFUNCTYPE(C.c_char_p, C.c_void_p)),
               ("GetCapability", C.CFUNCTYPE(C.c_void_p, C.c_void_p, C.POINTER(Graph), C.POINTER(C.c_uint8))),
               ("CreateKernel", C.CFUNCTYPE(C.c_void_p, C.c_void_p, C.POINTER(Node), C.POINTER(C.c_void_p))),
               ("Compute", C.CFUNCTYPE(C.c_void_p, C.c_void_p, C.c_void_p, C.c_void_p)),
               ("ReleaseKernel", C.CFUNCTYPE(None, C.c_void_p, C.c_void_p))]


class Factory(C.Structure):
    _fields_ = [("abi_version", C.c_uint32), ("GetName", C.CFUNCTYPE(C.c_char_p, C.c_void_p)),
                ("GetVendor", C.CFUNCTYPE(C.c_char_p, C.c_void_p)),
                ("GetVersion", C.CFUNCTYPE(C.c_char_p, C.c_void_p)),
                ("GetOwnDevices", C.c_void_p),
                ("GetSupportedDevices", C.CFUNCTYPE(C.c_void_p, C.c_void_p, C.POINTER(C.POINTER(Device)), C.c_size_t,
                                                    C.POINTER(C.c_uint8))),
                ("CreateEp", C.CFUNCTYPE(C.c_void_p, C.c_void_p, C.POINTER(C.POINTER(Device)), C.c_size_t,
                                         C.POINTER(C.c_char_p), C.POINTER(C.c_char_p), C.c_size_t,
                                         C.POINTER(C.POINTER(Ep)))),
                ("ReleaseEp", C.CFUNCTYPE(None, C.c_void_p, C.POINTER(Ep)))]


def _abi_version() -> int:
    return ABI_VERSION


class PluginError(RuntimeError):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message


@dataclass
class _Run:
    inputs: list[np.ndarray[Any, Any] | None]
    outputs: list[np.ndarray[Any, Any] | None]
    keep: list[Any]
    threads: int


class Host:
    """One loaded plugin library with its first factory and one EP on a CPU device.

    A plugin keeps the MrtEpApi it was last given (one per process in the real core), so status
    and run registries are shared by all hosts, and every host stays alive (its callbacks too).
    """

    _statuses: dict[int, tuple[int, str]] = {}  # noqa: RUF012
    _runs: dict[int, _Run] = {}  # noqa: RUF012
    _counter = [1]  # noqa: RUF012
    _alive: list[Host] = []  # noqa: RUF012

    @property
    def _next(self) -> int:
        return self._counter[0]

    @_next.setter
    def _next(self, value: int) -> None:
        self._counter[0] = value

    def __init__(self, path: str, options: Mapping[str, str] | None = None) -> None:
        self._alive.append(self)
        self.lib = C.CDLL(path)
        self.lib.MrtEpGetAbiVersion.restype = C.c_uint32
        self.plugin_abi = int(self.lib.MrtEpGetAbiVersion())
        self._api = Api(_abi_version(), CreateStatusFn(self._create_status), CountFn(self._in_count),
                        CountFn(self._out_count), GetInputFn(self._get_input), AllocFn(self._alloc),
                        ThreadsFn(self._threads))
        create = self.lib.MrtEpCreateFactories
        create.restype = C.c_void_p
        create.argtypes = [C.POINTER(Api), C.c_char_p, C.POINTER(C.POINTER(Factory)), C.c_size_t,
                           C.POINTER(C.c_size_t)]
        arr = (C.POINTER(Factory) * 4)()
        count = C.c_size_t(0)
        self._check(create(C.byref(self._api), b"dnnl", arr, 4, C.byref(count)))
        assert count.value >= 1
        self.factory = arr[0]
        f = self.factory.contents
        self.name = f.GetName(self.factory).decode()
        self.vendor = f.GetVendor(self.factory).decode()
        self.version = f.GetVersion(self.factory).decode()
        self._cpu = Device(0, 0, 0, b"host", b"cpu", 0, None, None)
        self._devs = (C.POINTER(Device) * 1)(C.pointer(self._cpu))
        opts = dict(options or {})
        keys = (C.c_char_p * max(1, len(opts)))(*[k.encode() for k in opts])
        vals = (C.c_char_p * max(1, len(opts)))(*[v.encode() for v in opts.values()])
        ep = C.POINTER(Ep)()
        self._check(f.CreateEp(self.factory, self._devs, 1, keys, vals, len(opts), C.byref(ep)))
        self.ep = ep

    def supports(self, device_type: int) -> bool:
        dev = Device(device_type, 0, 0, b"x", b"y", 0, None, None)
        devs = (C.POINTER(Device) * 1)(C.pointer(dev))
        out = (C.c_uint8 * 1)()
        self._check(self.factory.contents.GetSupportedDevices(self.factory, devs, 1, out))
        return bool(out[0])

    def close(self) -> None:
        if self.ep:
            self.factory.contents.ReleaseEp(self.factory, self.ep)
            self.ep = None
        release = self.lib.MrtEpReleaseFactory
        release.argtypes = [C.POINTER(Factory)]
        release(self.factory)

    # ---- MrtEpApi ----
    def _create_status(self, code: int, message: bytes) -> int:
        key = self._next
        self._next += 1
        self._statuses[key] = (code, message.decode(errors="replace"))
        return key

    def _check(self, status: int | None) -> None:
        if status:
            code, msg = self._statuses.pop(status)
            raise PluginError(code, msg)

    def _in_count(self, ctx: int) -> int:
        return len(self._runs[ctx].inputs)

    def _out_count(self, ctx: int) -> int:
        return len(self._runs[ctx].outputs)

    def _get_input(self, ctx: int, i: int, out: Any) -> int:
        run = self._runs[ctx]
        if i >= len(run.inputs) or run.inputs[i] is None:
            return 0
        out[0] = self._tensor(run.inputs[i], run.keep)  # type: ignore[arg-type]
        return 1

    def _alloc(self, ctx: int, i: int, elem: int, dims: Any, rank: int, out: Any) -> int | None:  # noqa: PLR0917
        run = self._runs[ctx]
        if i >= len(run.outputs):
            return self._create_status(1, b"no such output")
        arr = np.empty([dims[k] for k in range(rank)], dtype=NP_TYPES[elem])
        run.outputs[i] = arr
        out[0] = self._tensor(arr, run.keep)
        return None

    def _threads(self, ctx: int) -> int:
        return self._runs[ctx].threads

    @staticmethod
    def _tensor(arr: np.ndarray[Any, Any], keep: list[Any]) -> Tensor:
        elem = {v: k for k, v in NP_TYPES.items()}[arr.dtype.type]
        dims = (C.c_int64 * max(1, arr.ndim))(*arr.shape)
        keep += [dims, arr]
        return Tensor(elem, arr.ndim, dims, arr.ctypes.data, arr.nbytes)

    # ---- graph view ----
    def node_view(self, model: onnx.ModelProto, shapes: Mapping[str, tuple[list[int], int]]) -> tuple[Graph, list[Any]]:
        keep: list[Any] = []
        opsets = {o.domain if o.domain != "ai.onnx" else "": o.version for o in model.opset_import}
        inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        nodes = (Node * len(model.graph.node))()
        for k, n in enumerate(model.graph.node):
            ins = (Value * max(1, len(n.input)))()
            for j, name in enumerate(n.input):
                ins[j] = self._value(name, inits, shapes, keep)
            outs = (Value * max(1, len(n.output)))()
            for j, name in enumerate(n.output):
                outs[j] = self._value(name, {}, shapes, keep)
            attrs = (Attribute * max(1, len(n.attribute)))()
            for j, a in enumerate(n.attribute):
                attrs[j] = self._attr(a, keep)
            keep += [ins, outs, attrs]
            nodes[k] = Node(n.name.encode(), n.op_type.encode(), n.domain.encode(), opsets.get(n.domain, 0),
                            len(n.input), ins, len(n.output), outs, len(n.attribute), attrs)
        keep.append(nodes)
        return Graph(len(model.graph.node), nodes), keep

    def _value(self, name: str, inits: Mapping[str, np.ndarray[Any, Any]],
               shapes: Mapping[str, tuple[list[int], int]], keep: list[Any]) -> Value:
        v = Value(name.encode(), 0, -1, None, None)
        keep.append(v.name)
        if name in inits:
            arr = np.ascontiguousarray(inits[name])
            t = self._tensor(arr, keep)
            keep.append(t)
            v.constant_value = C.pointer(t)
            v.elem_type, v.rank, v.dims = t.elem_type, t.rank, t.dims
        elif name in shapes:
            dims, elem = shapes[name]
            d = (C.c_int64 * max(1, len(dims)))(*dims)
            keep.append(d)
            v.elem_type, v.rank, v.dims = elem, len(dims), d
        return v

    @staticmethod
    def _attr(a: onnx.AttributeProto, keep: list[Any]) -> Attribute:
        out = Attribute()
        out.name = a.name.encode()
        out.type = a.type
        if a.type == onnx.AttributeProto.FLOAT:
            out.f = a.f
        elif a.type == onnx.AttributeProto.INT:
            out.i = a.i
        elif a.type == onnx.AttributeProto.STRING:
            out.s, out.s_len = a.s, len(a.s)
        elif a.type == onnx.AttributeProto.FLOATS:
            fl = (C.c_float * max(1, len(a.floats)))(*a.floats)
            keep.append(fl)
            out.floats, out.count = fl, len(a.floats)
        elif a.type == onnx.AttributeProto.INTS:
            il = (C.c_int64 * max(1, len(a.ints)))(*a.ints)
            keep.append(il)
            out.ints, out.count = il, len(a.ints)
        keep.append(out.name)
        return out

    # ---- driving the EP ----
    def capability(self, model: onnx.ModelProto, shapes: Mapping[str, tuple[list[int], int]]) -> list[bool]:
        graph, keep = self.node_view(model, shapes)
        take = (C.c_uint8 * max(1, graph.node_count))()
        self._check(self.ep.contents.GetCapability(self.ep, C.byref(graph), take))
        del keep
        return [bool(take[i]) for i in range(graph.node_count)]

    def run_node(self, model: onnx.ModelProto, feeds: Mapping[str, np.ndarray[Any, Any]], threads: int = 2,
                 repeat: int = 1) -> list[np.ndarray[Any, Any] | None]:
        """CreateKernel + Compute for the single node of `model` (raises PluginError on a status)."""
        assert len(model.graph.node) == 1
        shapes = {k: (list(v.shape), FLOAT if v.dtype == np.float32 else 7) for k, v in feeds.items()}
        graph, keep = self.node_view(model, shapes)
        kernel = C.c_void_p()
        self._check(self.ep.contents.CreateKernel(self.ep, C.byref(graph.nodes[0]), C.byref(kernel)))
        node = model.graph.node[0]
        inits = {t.name for t in model.graph.initializer}
        try:
            outs: list[np.ndarray[Any, Any] | None] = []
            for _ in range(repeat):
                ins = [None if (not name or name in inits) else np.ascontiguousarray(feeds[name])
                       for name in node.input]
                # constants are passed too, as the core does
                for j, name in enumerate(node.input):
                    if name in inits:
                        arr = next(numpy_helper.to_array(t) for t in model.graph.initializer if t.name == name)
                        ins[j] = np.ascontiguousarray(arr)
                run = _Run(inputs=ins, outputs=[None] * len(node.output), keep=[], threads=threads)  # type: ignore[arg-type]
                key = self._next
                self._next += 1
                self._runs[key] = run
                try:
                    self._check(self.ep.contents.Compute(self.ep, kernel, key))
                finally:
                    del self._runs[key]
                outs = run.outputs
            return outs
        finally:
            self.ep.contents.ReleaseKernel(self.ep, kernel)
            del keep
