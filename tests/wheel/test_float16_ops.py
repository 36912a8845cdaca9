"""float16 tensors through the float32 compute paths in blocks (converted in bulk, computed in float, rounded
back): elementwise binary ops under every broadcast pattern and unary ops, on runs longer than a block and with
a tail, against numpy computing in float32 and rounding once; and Conv with float16 filters, constant (widened
and packed once) or fed at run time, against the same convolution in float32 rounded to float16."""

from __future__ import annotations

from typing import Any

import mosaicrt
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

F16 = TensorProto.FLOAT16


def _session(nodes: list[Any], inputs: dict[str, np.ndarray], inits: list[Any], threads: int = 1) -> Any:
    graph = helper.make_graph(nodes, "f16", [helper.make_tensor_value_info(k, F16, list(v.shape))
                                             for k, v in inputs.items()],
                              [helper.make_tensor_value_info("y", F16, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = threads
    return mosaicrt.InferenceSession(model.SerializeToString(), opts)


def _half(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 3).astype(np.float16)


_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide, "Max": np.maximum}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("op", list(_BINARY))
@pytest.mark.parametrize(("a_shape", "b_shape"), [
    ((3, 700), (3, 700)),        # same shape: one flat run (blocks of 256 and a tail)
    ((3, 700), (700,)),          # b broadcast along rows
    ((3, 1, 530), (3, 4, 1)),    # both broadcast: runs with one side fixed
    ((5, 300), (1, 1)),          # a scalar b
    ((1,), (2, 3, 300)),         # a scalar a
    ((40000,), (40000,)),        # split between the threads
])
def test_float16_binary_ops_match_float32_rounded_once(op: str, a_shape: tuple[int, ...], b_shape: tuple[int, ...],
                                                       threads: int) -> None:
    a, b = _half(a_shape, 1), _half(b_shape, 2)
    if op == "Div":
        b = np.where(np.abs(b) < 0.1, np.float16(0.5), b)
    sess = _session([helper.make_node(op, ["a", "b"], ["y"])], {"a": a, "b": b}, [], threads)
    got = sess.run(None, {"a": a, "b": b})[0]
    want = _BINARY[op](a.astype(np.float32), b.astype(np.float32)).astype(np.float16)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("op", "fn"), [("Relu", lambda v: np.maximum(v, 0)), ("Neg", np.negative),
                                        ("Abs", np.abs), ("Sqrt", lambda v: np.sqrt(np.abs(v)))])
def test_float16_unary_ops_match_float32_rounded_once(op: str, fn: Any, threads: int) -> None:
    x = _half((3, 40001), 3)  # blocks of 256, a tail, split between the threads
    nodes = [helper.make_node("Abs", ["x"], ["a"]), helper.make_node(op, ["a"], ["y"])] if op == "Sqrt" else \
        [helper.make_node(op, ["x"], ["y"])]
    got = _session(nodes, {"x": x}, [], threads).run(None, {"x": x})[0]
    want = fn(x.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("constant", [True, False])
@pytest.mark.parametrize("geometry", [(16, 24, 3, 20), (8, 40, 1, 15), (32, 64, 3, 14)], ids=str)
def test_float16_conv_computes_in_float32(geometry: tuple[int, int, int, int], constant: bool, threads: int) -> None:
    c, m, k, hw = geometry  # in channels, out channels, kernel, map side
    x = _half((1, c, hw, hw), 4)
    w = (_half((m, c, k, k), 5).astype(np.float32) / np.sqrt(c * k * k)).astype(np.float16)
    b = _half((m,), 6)
    inputs = {"x": x} if constant else {"x": x, "w": w}
    inits = [numpy_helper.from_array(b, "b")] + ([numpy_helper.from_array(w, "w")] if constant else [])
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[k, k], pads=[k // 2] * 4)
    got = _session([node], inputs, inits, threads).run(None, inputs)[0]
    ref_graph = helper.make_graph(
        [node], "f32", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w.astype(np.float32), "w"), numpy_helper.from_array(b.astype(np.float32), "b")])
    ref = mosaicrt.InferenceSession(helper.make_model(ref_graph, opset_imports=[helper.make_opsetid("", 17)])
                                    .SerializeToString()).run(None, {"x": x.astype(np.float32)})[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float16).astype(np.float32), rtol=2e-3, atol=2e-3)
