"""Concat assembled in place: the producers of a batch-1 Concat's inputs write into their slices of its output.

The session gives each input that a CPU EP kernel makes (once: the first Concat that reads it) its slice of the
Concat's buffer as its output; every other input is copied as before. Each model here is run with the
optimizations (and so the placement) on and off: the outputs must be the same bits, at 1 and 2 threads and over
repeated runs (the buffers are reused), whichever inputs qualify.
"""

from __future__ import annotations

from typing import Any

import mosaicrt
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

Level = mosaicrt.GraphOptimizationLevel


def _session(model: onnx.ModelProto, level: Any = Level.ORT_ENABLE_ALL, threads: int = 1) -> Any:
    opts = mosaicrt.SessionOptions()
    opts.graph_optimization_level = level
    opts.intra_op_num_threads = threads
    return mosaicrt.InferenceSession(model.SerializeToString(), sess_options=opts)


def _const(name: str, value: np.ndarray[Any, Any]) -> onnx.TensorProto:
    return numpy_helper.from_array(value, name)


def _convs(rng: np.random.Generator, specs: list[tuple[str, str, int, int, int]]) -> tuple[list[Any], list[Any]]:
    """Conv nodes with bias from (name = output, input, in channels, out channels, square kernel) specs."""
    nodes, inits = [], []
    for name, x, c, m, k in specs:
        w = (rng.standard_normal((m, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
        b = rng.standard_normal(m).astype(np.float32)
        nodes.append(helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [name], pads=[k // 2] * 4, name=name))
        inits += [_const(f"{name}_w", w), _const(f"{name}_b", b)]
    return nodes, inits


def _check(model: onnx.ModelProto, feed: dict[str, np.ndarray[Any, Any]]) -> None:
    expected = _session(model, Level.ORT_DISABLE_ALL).run(None, feed)
    sessions: list[mosaicrt.InferenceSession] = []  # all alive: none reuses another's freed buffers
    for threads in (1, 2):
        sess = _session(model, threads=threads)
        sessions.append(sess)
        for _ in range(3):
            got = sess.run(None, feed)
            assert len(got) == len(expected)
            for g, e in zip(got, expected, strict=True):
                assert g.dtype == e.dtype and g.shape == e.shape
                np.testing.assert_array_equal(g, e)


def test_inception_block_branches_are_written_into_the_concat() -> None:
    # Four branches (1x1, 1x1 -> 3x3 with Relu, pooling -> 1x1, a max pool) concatenated along channels, then
    # a Relu; and the same Concat's output as a graph output, returned to the caller.
    rng = np.random.default_rng(0)
    nodes, inits = _convs(rng, [("a", "x", 8, 6, 1), ("b1", "x", 8, 4, 1), ("b2", "b1r", 4, 5, 3),
                                ("c", "cp", 8, 3, 1)])
    nodes += [helper.make_node("Relu", ["b1"], ["b1r"]),
              helper.make_node("AveragePool", ["x"], ["cp"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
              helper.make_node("MaxPool", ["x"], ["d"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
              helper.make_node("Concat", ["a", "b2", "c", "d"], ["cat"], axis=1),
              helper.make_node("Relu", ["cat"], ["y"])]
    graph = helper.make_graph(nodes, "inception",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 9, 11])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("cat", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feed = {"x": rng.standard_normal((1, 8, 9, 11)).astype(np.float32)}
    _check(model, feed)
    sess = _session(model)
    y, cat = sess.run(None, feed)
    assert cat.shape == (1, 22, 9, 11)
    cat[...] = 0  # the caller owns what it gets: the session's next run is unaffected
    y[...] = 0
    for got, want in zip(sess.run(None, feed), _session(model, Level.ORT_DISABLE_ALL).run(None, feed), strict=True):
        np.testing.assert_array_equal(got, want)


def test_inputs_that_cannot_be_placed_are_copied() -> None:
    # With a negative axis: a graph input, a constant, a value that is also a graph output, one read by another
    # node too, one an Identity forwards (its producer hands on another tensor), the same value twice, and one
    # conv output that can be placed.
    rng = np.random.default_rng(1)
    nodes, inits = _convs(rng, [("p", "x", 3, 4, 3), ("q", "x", 3, 2, 1), ("r", "x", 3, 5, 1), ("s", "x", 3, 3, 3)])
    inits.append(_const("k", rng.standard_normal((1, 2, 6, 7)).astype(np.float32)))
    nodes += [helper.make_node("Identity", ["s"], ["s_id"]),
              helper.make_node("Neg", ["r"], ["r_neg"]),
              helper.make_node("Concat", ["p", "x", "k", "q", "r", "s_id", "p"], ["y"], axis=-3)]
    graph = helper.make_graph(nodes, "mixed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 7])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("q", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("r_neg", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    _check(model, {"x": rng.standard_normal((1, 3, 6, 7)).astype(np.float32)})


@pytest.mark.parametrize("case", ["batch_2", "inner_axis", "last_axis", "int32", "dynamic_batch"])
def test_concat_layouts(case: str) -> None:
    # Batch 2 and an inner axis with a leading dimension above 1 (the inputs are not contiguous slices: copied),
    # the last axis of [1, 1, n] MatMul outputs and int32 values (placed), a batch left symbolic (planned for
    # the feed's shape: placed).
    rng = np.random.default_rng(2)
    shape: list[Any] = [2, 3, 5, 4] if case == "batch_2" else [1, 3, 5, 4]
    axis = {"inner_axis": 2, "last_axis": 2}.get(case, 1)
    if case == "last_axis":
        shape = [1, 1, 6]
        inits = [_const("w1", rng.standard_normal((6, 7)).astype(np.float32)),
                 _const("w2", rng.standard_normal((6, 5)).astype(np.float32))]
        nodes = [helper.make_node("MatMul", ["x", "w1"], ["u"]), helper.make_node("MatMul", ["x", "w2"], ["v"])]
    else:
        nodes, inits = _convs(rng, [("u", "x", 3, 2, 3), ("v", "x", 3, 3, 1)])
    elem = TensorProto.FLOAT
    cat_inputs = ["u", "v"]
    if case == "int32":
        nodes += [helper.make_node("Cast", ["u"], ["ui"], to=TensorProto.INT32),
                  helper.make_node("Cast", ["v"], ["vi"], to=TensorProto.INT32)]
        cat_inputs, elem = ["ui", "vi"], TensorProto.INT32
    if case == "inner_axis":  # u [1, 2, 5, 4] and -u along the rows
        cat_inputs = ["u", "u2"]
        nodes.append(helper.make_node("Neg", ["u"], ["u2"]))
        nodes.append(helper.make_node("Relu", ["v"], ["v_out"]))
    nodes.append(helper.make_node("Concat", cat_inputs, ["y"], axis=axis))
    declared = ["N", *shape[1:]] if case == "dynamic_batch" else shape
    outputs = [helper.make_tensor_value_info("y", elem, None)]
    if case == "inner_axis":
        outputs.append(helper.make_tensor_value_info("v_out", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "layouts", [helper.make_tensor_value_info("x", TensorProto.FLOAT, declared)],
                              outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    _check(model, {"x": x})


def test_bound_concat_output_receives_the_result() -> None:
    # IOBinding: the Concat's output goes to the caller's buffer, its inputs' producers write their own.
    rng = np.random.default_rng(3)
    nodes, inits = _convs(rng, [("a", "x", 4, 3, 3), ("b", "x", 4, 5, 1)])
    nodes.append(helper.make_node("Concat", ["a", "b"], ["y"], axis=1))
    graph = helper.make_graph(nodes, "bound", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    _check_bound(model, "y", rng.standard_normal((1, 4, 6, 6)).astype(np.float32))


def _check_bound(model: onnx.ModelProto, output: str, x: np.ndarray[Any, Any]) -> None:
    """Runs the model twice with `output` bound to a caller's buffer: it must receive the unoptimized result."""
    expected = _session(model, Level.ORT_DISABLE_ALL).run([output], {"x": x})[0]
    sess = _session(model)
    out = np.full(expected.shape, np.nan, np.float32)
    binding = sess.io_binding()
    binding.bind_cpu_input("x", x)
    binding.bind_output(output, "cpu", 0, np.float32, list(out.shape), out.ctypes.data)
    for _ in range(2):
        sess.run_with_iobinding(binding)
        np.testing.assert_array_equal(out, expected)


def _dense_block(rng: np.random.Generator, layers: int, batch: Any, *, inner_outputs: bool = False) -> onnx.ModelProto:
    """A DenseNet block: each layer reads the Concat of everything before it (Relu -> 3x3 conv, 3 new channels)
    and the next Concat adds its output (after the previous Concat's output in even layers, before it in odd
    ones), so every Concat reads the previous one's output, which the next layer reads too. With
    `inner_outputs` the middle Concat is also a graph output."""
    c, prev = 4, "x"
    nodes, inits = [], []
    for i in range(layers):
        conv_nodes, conv_inits = _convs(rng, [(f"c{i}", f"r{i}", c, 3, 3)])
        nodes += [helper.make_node("Relu", [prev], [f"r{i}"]), *conv_nodes,
                  helper.make_node("Concat", [prev, f"c{i}"] if i % 2 == 0 else [f"c{i}", prev], [f"cat{i}"], axis=1)]
        inits += conv_inits
        prev, c = f"cat{i}", c + 3
    nodes.append(helper.make_node("Sigmoid", [prev], ["y"]))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if inner_outputs:
        outputs.append(helper.make_tensor_value_info(f"cat{layers // 2}", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "dense", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4, 7, 5])],
                              outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("batch", [1, "N"])
@pytest.mark.parametrize("inner_outputs", [False, True])
def test_dense_chain_of_concats(batch: Any, inner_outputs: bool) -> None:
    # Each Concat is assembled inside the next one's buffer (the chain shares the last Concat's), the Concats'
    # outputs being read by the next layer too; a Concat that is a graph output keeps its own buffer.
    rng = np.random.default_rng(4)
    model = _dense_block(rng, 5, batch, inner_outputs=inner_outputs)
    _check(model, {"x": rng.standard_normal((1, 4, 7, 5)).astype(np.float32)})


def test_symbolic_batch_plans_per_feed_shape() -> None:
    # With the batch left symbolic, the placement is planned for each run's feed shapes: batch 1 is assembled in
    # place, batch 3 (inputs not contiguous slices) copied, and runs alternating between them stay exact.
    rng = np.random.default_rng(5)
    model = _dense_block(rng, 4, "N")
    reference = _session(model, Level.ORT_DISABLE_ALL)
    feeds = [{"x": rng.standard_normal((b, 4, 7, 5)).astype(np.float32)} for b in (1, 3, 1, 2, 1)]
    sessions: list[mosaicrt.InferenceSession] = []  # all alive: none reuses another's freed buffers
    for threads in (1, 2):
        sess = _session(model, threads=threads)
        sessions.append(sess)
        for feed in feeds * 2:
            np.testing.assert_array_equal(sess.run(None, feed)[0], reference.run(None, feed)[0])


def test_bound_output_of_a_concat_chain() -> None:
    # IOBinding on the last Concat of a chain: the chain is assembled in its own buffers and the last Concat
    # copies into the caller's.
    rng = np.random.default_rng(6)
    model = _dense_block(rng, 3, "N")
    model.graph.output.append(helper.make_tensor_value_info("cat2", TensorProto.FLOAT, None))
    _check_bound(model, "cat2", rng.standard_normal((1, 4, 7, 5)).astype(np.float32))
