"""EP ABI 1.1 through the Python API: a 1.0 plugin built against the 1.0 header still runs;
groups and Compile (splitting, cycle refusal, Compile failure, wrong-shaped outputs); the
subgraph's ONNX bytes; device memory with copies only at partition boundaries, counted by the
core. Plugins: core/tests/plugins/fake_ep.cc (the 1.0 one, unchanged) and fake_device_ep.cc."""

from __future__ import annotations

import ctypes
import gc
import itertools
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import mosaicrt
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

PLUGINS = Path(__file__).resolve().parent.parent.parent / "core" / "tests" / "plugins"
CXX = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler (c++/g++) to build the test plugin libraries")
_tags = itertools.count()
X = np.array([[-1.0, 0.5, 2.0], [3.0, -4.0, 0.0]], np.float32)


def _compile(out: Path, source: Path, *includes: Path) -> Path:
    cmd = [str(CXX), "-std=c++17", "-O1", "-shared", "-fPIC", "-fvisibility=hidden",
           *[f"-I{i}" for i in includes], f"-I{mosaicrt.get_include()}", str(source), "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("plugins11")
    return {
        # The 1.0 test plugin, its source unchanged, compiled against the released 1.0 header.
        "v1_0": _compile(d / "libfake_ep_1_0.so", PLUGINS / "fake_ep.cc", PLUGINS / "ep_abi_1_0"),
        "device": _compile(d / "libfake_device_ep.so", PLUGINS / "fake_device_ep.cc"),
    }


@pytest.fixture
def device_ep(libs: dict[str, Path]) -> Iterator[str]:
    name = f"d{next(_tags)}"
    mosaicrt.register_execution_provider_library(name, libs["device"])
    yield f"FakeDevice_{name}"
    gc.collect()
    mosaicrt.unregister_execution_provider_library(name)


def _model(nodes: list[onnx.NodeProto], outputs: list[str], inits: list[onnx.TensorProto] | None = None
           ) -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    ys = [helper.make_tensor_value_info(o, TensorProto.FLOAT, [2, 3]) for o in outputs]
    graph = helper.make_graph(nodes, "g", [x], ys, initializer=inits or [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _chain() -> bytes:
    """x -> Add(x, x) -> Relu -> Sigmoid: two device nodes, then one the device EP does not run."""
    return _model([helper.make_node("Add", ["x", "x"], ["a"], name="add"),
                   helper.make_node("Relu", ["a"], ["r"], name="relu"),
                   helper.make_node("Sigmoid", ["r"], ["y"], name="sigmoid")], ["y"])


CHAIN_EXPECTED = 1 / (1 + np.exp(-np.maximum(X + X, 0)))


def _by_node(sess: mosaicrt.InferenceSession) -> dict[str, mosaicrt.NodeAssignment]:
    return {a.node_name: a for a in sess.get_node_assignments()}


def test_1_0_plugin_built_against_the_1_0_header_runs_on_this_core(libs: dict[str, Path]) -> None:
    plugin = ctypes.CDLL(str(libs["v1_0"]))
    plugin.MrtEpGetAbiVersion.restype = ctypes.c_uint32
    assert plugin.MrtEpGetAbiVersion() == 0x00010000  # built as 1.0
    name = f"old{next(_tags)}:npu"
    mosaicrt.register_execution_provider_library(name, libs["v1_0"])
    try:
        ep = f"FakeNpu_{name.split(':', maxsplit=1)[0]}"
        sess = mosaicrt.InferenceSession(_chain(), providers=[ep])
        nodes = _by_node(sess)
        assert {k: a.provider for k, a in nodes.items()} == {"add": ep, "relu": ep, "sigmoid": "CPUExecutionProvider"}
        assert nodes["add"].partition != nodes["relu"].partition  # a 1.0 EP's nodes are each their own unit
        assert all(a.copies == "" for a in nodes.values())  # host memory: nothing to copy
        np.testing.assert_allclose(sess.run(None, {"x": X})[0], CHAIN_EXPECTED, rtol=1e-6)
        del sess
    finally:
        gc.collect()
        mosaicrt.unregister_execution_provider_library(name)


@pytest.mark.parametrize("mode", ["kernels", "compile"])
def test_consecutive_device_nodes_exchange_values_without_a_host_copy(device_ep: str, mode: str) -> None:
    sess = mosaicrt.InferenceSession(_chain(), providers=[(device_ep, {"mode": mode})])
    nodes = _by_node(sess)
    assert nodes["add"].provider == nodes["relu"].provider == device_ep
    assert nodes["add"].partition == nodes["relu"].partition == f"{device_ep}_0"
    assert nodes["add"].copies == "to device 'x'"
    assert nodes["sigmoid"].copies == "to host 'r'"
    assert sess.get_transfer_counts() == mosaicrt.TransferCounts(0, 0, 0, 0)
    for runs in (1, 2):
        np.testing.assert_allclose(sess.run(None, {"x": X})[0], CHAIN_EXPECTED, rtol=1e-6)
        counts = sess.get_transfer_counts()
        # x goes in once and r comes out once per run; a (Add -> Relu) never leaves the device.
        assert (counts.to_device, counts.to_host) == (runs, runs)
        # Per-node kernels read x's second use and a in place; a compiled partition keeps a inside.
        assert counts.device_resident == (2 * runs if mode == "kernels" else 0)


def test_device_outputs_and_initializers(device_ep: str) -> None:
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3) - 2, "w")
    model = _model([helper.make_node("Mul", ["x", "w"], ["m"], name="mul"),
                    helper.make_node("Relu", ["m"], ["y"], name="relu")], ["y"], [w])
    sess = mosaicrt.InferenceSession(model, providers=[(device_ep, {"mode": "kernels"})])
    assert _by_node(sess)["relu"].copies == "to host (graph output) 'y'"
    expected = np.maximum(X * numpy_helper.to_array(w), 0)
    for _ in range(2):
        np.testing.assert_allclose(sess.run(None, {"x": X})[0], expected)
    counts = sess.get_transfer_counts()
    assert counts == mosaicrt.TransferCounts(to_device=2, to_host=2, device_resident=2, constants_uploaded=1)


def test_group_with_a_cycle_is_refused_and_named(device_ep: str) -> None:
    # Relu and Add in one group; the path relu -> sigmoid -> add leaves the group and returns.
    model = _model([helper.make_node("Relu", ["x"], ["a"], name="relu"),
                    helper.make_node("Sigmoid", ["a"], ["s"], name="sigmoid"),
                    helper.make_node("Add", ["a", "s"], ["y"], name="add")], ["y"])
    sess = mosaicrt.InferenceSession(model, providers=[(device_ep, {"group": "all"})])
    nodes = _by_node(sess)
    assert {a.provider for a in nodes.values()} == {"CPUExecutionProvider"}
    for n in ("relu", "add"):
        assert "would form a cycle" in nodes[n].note and "node 'sigmoid' (Sigmoid)" in nodes[n].note
        assert f"'{device_ep}_0'" in nodes[n].note
    a = np.maximum(X, 0)
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], a + 1 / (1 + np.exp(-a)), rtol=1e-6)


def test_disconnected_group_is_split_into_partitions(device_ep: str) -> None:
    model = _model([helper.make_node("Relu", ["x"], ["a"], name="relu_a"),
                    helper.make_node("Sigmoid", ["x"], ["s"], name="sigmoid"),
                    helper.make_node("Relu", ["s"], ["b"], name="relu_b")], ["a", "b"])
    sess = mosaicrt.InferenceSession(model, providers=[(device_ep, {"group": "all"})])
    nodes = _by_node(sess)
    assert nodes["relu_a"].provider == nodes["relu_b"].provider == device_ep
    assert {nodes["relu_a"].partition, nodes["relu_b"].partition} == {f"{device_ep}_0", f"{device_ep}_1"}
    a, b = sess.run(None, {"x": X})
    np.testing.assert_allclose(a, np.maximum(X, 0))
    np.testing.assert_allclose(b, 1 / (1 + np.exp(-X)), rtol=1e-6)


def test_failed_compile_falls_back_with_the_reason(device_ep: str) -> None:
    sess = mosaicrt.InferenceSession(_chain(), providers=[(device_ep, {"fail": "compile"})])
    nodes = _by_node(sess)
    for n in ("add", "relu"):
        assert nodes[n].provider == "CPUExecutionProvider"
        assert nodes[n].note == (f"{device_ep} could not compile partition '{device_ep}_0': "
                                 f"the fake device compiler rejects {device_ep}_0")
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], CHAIN_EXPECTED, rtol=1e-6)


def test_wrong_shaped_partition_output_names_ep_and_partition(device_ep: str) -> None:
    sess = mosaicrt.InferenceSession(_chain(), providers=[(device_ep, {"bad_shape": "1"})])
    with pytest.raises(mosaicrt.ExecutionProviderError) as info:
        sess.run(None, {"x": X})
    msg = str(info.value)
    assert f"execution provider '{device_ep}'" in msg and f"partition '{device_ep}_0'" in msg
    assert "output 'r'" in msg and "float32[2,3,1]" in msg and "float32[2,3]" in msg


def test_subgraph_to_onnx_bytes_are_the_partition(device_ep: str, tmp_path: Path) -> None:
    w = numpy_helper.from_array(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), "w")
    model = _model([helper.make_node("Sigmoid", ["x"], ["s"], name="sigmoid"),
                    helper.make_node("Mul", ["s", "w"], ["m"], name="mul"),
                    helper.make_node("Add", ["m", "x"], ["a"], name="add"),
                    helper.make_node("Relu", ["a"], ["y"], name="relu")], ["y", "m"], [w])
    sess = mosaicrt.InferenceSession(model, providers=[(device_ep, {"onnx_dir": str(tmp_path)})])
    assert {a.partition for a in sess.get_node_assignments() if a.provider == device_ep} == {f"{device_ep}_0"}
    part = onnx.load(str(tmp_path / f"{device_ep}_0.onnx"))
    onnx.checker.check_model(part, full_check=True)
    g = part.graph
    assert [n.name for n in g.node] == ["mul", "add", "relu"]
    assert [i.name for i in g.input] == ["s", "x"] and [i.name for i in g.initializer] == ["w"]
    assert sorted(o.name for o in g.output) == ["m", "y"]
    s = 1 / (1 + np.exp(-X))
    got = dict(zip([o.name for o in g.output], ReferenceEvaluator(part).run(None, {"s": s, "x": X}), strict=True))
    m = s * numpy_helper.to_array(w)
    np.testing.assert_allclose(got["m"], m, rtol=1e-6)
    np.testing.assert_allclose(got["y"], np.maximum(m + X, 0), rtol=1e-6)
    y, m_out = sess.run(None, {"x": X})
    np.testing.assert_allclose(y, np.maximum(m + X, 0), rtol=1e-6)
    np.testing.assert_allclose(m_out, m, rtol=1e-6)
