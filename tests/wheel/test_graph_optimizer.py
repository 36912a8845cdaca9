"""Graph optimizations (constant folding, Conv+BatchNormalization folding, Conv+Add+Relu fusion) keep results.

Every model here has random weights and is run with optimizations disabled and enabled: the two must agree
(within float rounding), and the optimized graph must have lost the nodes the optimizer is meant to remove.
"""

from __future__ import annotations

from typing import Any

import mosaicrt
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

Level = mosaicrt.GraphOptimizationLevel
LEVELS = (Level.ORT_DISABLE_ALL, Level.ORT_ENABLE_BASIC, Level.ORT_ENABLE_ALL)


def _session(model: onnx.ModelProto, level: Level) -> mosaicrt.InferenceSession:
    opts = mosaicrt.SessionOptions()
    opts.graph_optimization_level = level
    return mosaicrt.InferenceSession(model.SerializeToString(), sess_options=opts)


def _ops(sess: mosaicrt.InferenceSession) -> list[str]:
    return [a.op_type for a in sess.get_node_assignments()]


def _const(name: str, value: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(value, name)


def _residual_model(ir_version: int, list_initializers_as_inputs: bool, overridable: str = "") -> onnx.ModelProto:
    """Conv weights computed from constants (Reshape of a flat tensor times ConstantOfShape, a Transpose),
    Conv+BatchNormalization+Relu, a residual Conv+BN+Add+Relu and a Shape→Gather→Unsqueeze→Concat→Reshape
    chain reading a static shape, then a MatMul with a transposed constant weight."""
    rng = np.random.default_rng(3)
    c = 6
    inits = [
        _const("w1_flat", rng.standard_normal(c * c * 9).astype(np.float32)),
        _const("w_shape", np.array([c, c, 3, 3], np.int64)),
        _const("w2_t", rng.standard_normal((c, c, 3, 3)).astype(np.float32)),
        _const("b1", rng.standard_normal(c).astype(np.float32)),
        _const("fc_w_t", rng.standard_normal((5, c * 8 * 8)).astype(np.float32)),
        _const("fc_b", rng.standard_normal(5).astype(np.float32)),
        _const("zero", np.array([0], np.int64)),
        _const("minus_one", np.array([-1], np.int64)),
    ]
    for i in (1, 2):
        inits += [_const(f"bn{i}_s", rng.uniform(0.5, 2, c).astype(np.float32)),
                  _const(f"bn{i}_b", rng.standard_normal(c).astype(np.float32)),
                  _const(f"bn{i}_m", rng.standard_normal(c).astype(np.float32)),
                  _const(f"bn{i}_v", rng.uniform(0.5, 2, c).astype(np.float32))]
    half = helper.make_tensor("half", TensorProto.FLOAT, [1], [0.5])
    nodes = [
        helper.make_node("Reshape", ["w1_flat", "w_shape"], ["w1_r"]),
        helper.make_node("ConstantOfShape", ["w_shape"], ["w1_scale"], value=half),
        helper.make_node("Mul", ["w1_r", "w1_scale"], ["w1"]),
        helper.make_node("Transpose", ["w2_t"], ["w2"], perm=[1, 0, 2, 3]),
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn1_s", "bn1_b", "bn1_m", "bn1_v"], ["n1"], epsilon=1e-3),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c2", "bn2_s", "bn2_b", "bn2_m", "bn2_v"], ["n2"], epsilon=1e-3),
        helper.make_node("Sum", ["n2", "x"], ["s"]),
        helper.make_node("Relu", ["s"], ["r2"]),
        helper.make_node("Shape", ["r2"], ["r2_shape"]),
        helper.make_node("Gather", ["r2_shape", "zero"], ["batch"], axis=0),
        helper.make_node("Concat", ["batch", "minus_one"], ["flat_shape"], axis=0),
        helper.make_node("Reshape", ["r2", "flat_shape"], ["flat"]),
        helper.make_node("Transpose", ["fc_w_t"], ["fc_w"]),
        helper.make_node("MatMul", ["flat", "fc_w"], ["mm"]),
        helper.make_node("Add", ["mm", "fc_b"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 8, 8])]
    if list_initializers_as_inputs:
        inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits]
    elif overridable:
        (t,) = [t for t in inits if t.name == overridable]
        inputs.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    graph = helper.make_graph(nodes, "residual", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13 if ir_version >= 7 else 9)])
    model.ir_version = ir_version
    return model


def _x(shape: tuple[int, ...] = (1, 6, 8, 8), seed: int = 5) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(("ir_version", "listed"), [(3, True), (8, False)])
def test_folding_and_fusions_keep_results(ir_version: int, listed: bool) -> None:
    model = _residual_model(ir_version, listed)
    feed = {"x": _x()}
    results = {}
    for level in LEVELS:
        sess = _session(model, level)
        results[level] = sess.run(None, feed)[0]
        ops = _ops(sess)
        if level == Level.ORT_DISABLE_ALL:
            assert ops.count("ConstantOfShape") == 1 and ops.count("BatchNormalization") == 2
        else:
            # everything computed from constants or static shapes is gone
            for op in ("ConstantOfShape", "Transpose", "Shape", "Gather", "Concat", "BatchNormalization", "Mul"):
                assert op not in ops, (level, ops)
            assert ops.count("Reshape") == 1  # the one reading the activations
        if level == Level.ORT_ENABLE_ALL:
            assert ops.count("com.microsoft::FusedConv") == 2 and "Sum" not in ops and "Relu" not in ops, ops
    base = results[Level.ORT_DISABLE_ALL]
    assert np.std(base) > 0.1  # random weights: the outputs say something
    for level in LEVELS[1:]:
        np.testing.assert_allclose(results[level], base, rtol=1e-4, atol=1e-4)


def test_matches_onnxruntime() -> None:
    import onnxruntime

    model = _residual_model(8, False)
    feed = {"x": _x(seed=9)}
    expected = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, feed)[0]
    np.testing.assert_allclose(_session(model, Level.ORT_ENABLE_ALL).run(None, feed)[0], expected, rtol=1e-4,
                               atol=1e-4)


def test_overridable_initializer_is_not_folded() -> None:
    # From IR version 4 an initializer that is also a graph input is a default a feed may replace.
    model = _residual_model(8, False, overridable="bn1_s")
    sess = _session(model, Level.ORT_ENABLE_ALL)
    assert _ops(sess).count("BatchNormalization") == 1  # bn1 reads the overridable scale
    reference = _session(model, Level.ORT_DISABLE_ALL)
    for feed in ({"x": _x()}, {"x": _x(), "bn1_s": np.full(6, 3.0, np.float32)}):
        np.testing.assert_allclose(sess.run(None, feed)[0], reference.run(None, feed)[0], rtol=1e-4, atol=1e-4)
    default = sess.run(None, {"x": _x()})[0]
    overridden = sess.run(None, {"x": _x(), "bn1_s": np.full(6, 3.0, np.float32)})[0]
    assert not np.allclose(default, overridden)


def test_ir3_initializers_listed_as_inputs_are_constant() -> None:
    # Up to IR version 3 every initializer had to be listed among the inputs: they stay constants.
    sess = _session(_residual_model(3, True), Level.ORT_ENABLE_ALL)
    assert [i.name for i in sess.get_inputs()] == ["x"]
    with pytest.raises(mosaicrt.InvalidArgument, match="'bn1_s' is a constant initializer"):
        sess.run(None, {"x": _x(), "bn1_s": np.ones(6, np.float32)})


def _conv_add_relu(z_dims: list[Any]) -> onnx.ModelProto:
    """Conv(x) + z -> Relu with x of a symbolic batch and z declared with `z_dims` (symbolic or absent): the
    optimizer cannot compare the Add's operand shapes, so the fused Conv compares them on each run."""
    rng = np.random.default_rng(11)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["z", "c"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    inits = [_const("w", rng.standard_normal((5, 6, 3, 3)).astype(np.float32)),
             _const("b", rng.standard_normal(5).astype(np.float32))]
    graph = helper.make_graph(nodes, "conv_add", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6, 8, 8]),
                                                  helper.make_tensor_value_info("z", TensorProto.FLOAT, z_dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(("x_shape", "z_shape"), [
    ((2, 6, 8, 8), (2, 5, 8, 8)),   # the same shape at run time: added in the Conv's output stage
    ((1, 6, 8, 8), (1, 5, 1, 8)),   # z broadcast against the Conv's output
    ((1, 6, 8, 8), (3, 5, 8, 8)),   # the Conv's output broadcast against z: the sum is z's shape
    ((2, 6, 8, 8), (5, 1, 1)),      # z of lower rank
])
def test_residual_add_of_shapes_not_known_is_fused_and_broadcasts(x_shape: tuple[int, ...],
                                                                 z_shape: tuple[int, ...]) -> None:
    model = _conv_add_relu(["A", "B", "C", "D"][:len(z_shape)])
    feed = {"x": _x(x_shape), "z": _x(z_shape, seed=8)}
    fused = _session(model, Level.ORT_ENABLE_ALL)
    assert "Add" not in _ops(fused) and "Relu" not in _ops(fused)
    want = _session(model, Level.ORT_DISABLE_ALL).run(None, feed)[0]
    got = fused.run(None, feed)[0]
    assert got.shape == want.shape == np.broadcast_shapes((x_shape[0], 5, 8, 8), z_shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert (got >= 0).all()


def test_residual_add_of_shapes_that_differ_is_not_fused() -> None:
    # Static shapes that broadcast: the Add stays a node of its own.
    model = _conv_add_relu([1, 5, 1, 8])
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    fused = _session(model, Level.ORT_ENABLE_ALL)
    assert "Add" in _ops(fused)
    feed = {"x": _x((1, 6, 8, 8)), "z": _x((1, 5, 1, 8), seed=8)}
    np.testing.assert_allclose(fused.run(None, feed)[0], _session(model, Level.ORT_DISABLE_ALL).run(None, feed)[0],
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("read", [False, True])
def test_optional_outputs_nothing_reads_are_dropped(read: bool, tmp_path: Any) -> None:
    # A Dropout's mask and a MaxPool's Indices that nothing reads are no longer made (the optimized model's nodes
    # have lost them); read by a later node or returned as a graph output, they stay, with their values.
    nodes = [helper.make_node("Dropout", ["x"], ["d", "mask"], ratio=0.5),
             helper.make_node("MaxPool", ["d"], ["p", "idx"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Relu", ["p"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if read:
        nodes.append(helper.make_node("Cast", ["idx"], ["idx_f"], to=TensorProto.FLOAT))
        outputs += [helper.make_tensor_value_info("mask", TensorProto.BOOL, None),
                    helper.make_tensor_value_info("idx_f", TensorProto.FLOAT, None)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])]
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 13)])
    opts = mosaicrt.SessionOptions()
    opts.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    sess = mosaicrt.InferenceSession(model.SerializeToString(), sess_options=opts)
    kept = {n.op_type: [o for o in n.output if o] for n in onnx.load(opts.optimized_model_filepath).graph.node}
    assert kept["Dropout"] == (["d", "mask"] if read else ["d"])
    assert kept["MaxPool"] == (["p", "idx"] if read else ["p"])
    x = _x((1, 3, 6, 6))
    got = sess.run(None, {"x": x})
    np.testing.assert_array_equal(got[0], np.maximum(x.reshape(1, 3, 3, 2, 3, 2).max(axis=(3, 5)), 0))
    if read:
        assert got[1].dtype == np.bool_ and got[1].all()
        want = _session(model, Level.ORT_DISABLE_ALL).run(None, {"x": x})
        np.testing.assert_array_equal(got[2], want[2])


def test_shapes_with_symbolic_dims_are_not_folded() -> None:
    # Shape of a value with a symbolic batch dim stays a node: each run sees its own batch.
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["ones"],
                              value=helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])),
             helper.make_node("Add", ["x", "ones"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sess = _session(model, Level.ORT_ENABLE_ALL)
    assert "Shape" in _ops(sess)
    for n in (1, 4):
        x = _x((n, 3))
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x + 1)


def test_large_expansions_are_not_folded() -> None:
    # A constant expanded beyond the folding cap (64 MiB) stays a node computed per run.
    n = (64 << 20) // 4 + 1
    nodes = [helper.make_node("Expand", ["v", "shape"], ["big"]),
             helper.make_node("ReduceSum", ["big"], ["total"], keepdims=0),
             helper.make_node("Add", ["x", "total"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
                              [_const("v", np.array([1.0], np.float32)), _const("shape", np.array([n], np.int64))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sess = _session(model, Level.ORT_ENABLE_ALL)
    assert _ops(sess) == ["Expand", "ReduceSum", "Add"]
    np.testing.assert_allclose(sess.run(None, {"x": np.zeros(1, np.float32)})[0], [float(n)], rtol=1e-6)


@pytest.mark.parametrize("reshape_to", [3, 7])
def test_folded_graph_output_and_failing_node(reshape_to: int) -> None:
    # A graph output computed from constants only becomes a constant output; a node whose kernel fails on
    # its constant inputs (Reshape of 3 values to 7) is left in the graph, so the run reports the error as
    # it would without folding.
    nodes = [helper.make_node("Add", ["a", "b"], ["sum"]),
             helper.make_node("Reshape", ["a", "shape"], ["r"]),
             helper.make_node("Add", ["x", "r"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("sum", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [_const("a", np.array([1.0, 2.0, 3.0], np.float32)), _const("b", np.array([4.0, 5.0, 6.0], np.float32)),
         _const("shape", np.array([reshape_to], np.int64))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sess = _session(model, Level.ORT_ENABLE_ALL)
    x = np.ones(3, np.float32)
    if reshape_to == 7:
        assert _ops(sess) == ["Reshape", "Add"]
        with pytest.raises(mosaicrt.InvalidArgument, match="Reshape"):
            sess.run(None, {"x": x})
        return
    assert _ops(sess) == ["Add"]
    total, y = sess.run(None, {"x": x})
    np.testing.assert_array_equal(y, [2.0, 3.0, 4.0])
    total[:] = 0  # callers own their outputs: the folded constant must not change
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], [5.0, 7.0, 9.0])


@pytest.mark.parametrize("const_shape", [(4, 1, 1), (1, 4, 1, 1), (1,), (4,)])
def test_per_channel_mul_add_folding(const_shape: tuple[int, ...]) -> None:
    # Conv → Mul → Add and BatchNormalization → Mul → Add with constants per channel fold into the Conv's
    # weights/bias and the BN's scale/bias. A [4] constant broadcasts along the last axis (width 4 here),
    # not the channels: it must not fold.
    rng = np.random.default_rng(11)
    inits = [_const("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32)),
             _const("b", rng.standard_normal(4).astype(np.float32)),
             _const("s", rng.uniform(0.5, 2, 4).astype(np.float32)),
             _const("sh", rng.standard_normal(4).astype(np.float32)),
             _const("m", rng.standard_normal(4).astype(np.float32)),
             _const("v", rng.uniform(0.5, 2, 4).astype(np.float32))]
    for i in range(4):
        inits.append(_const(f"c{i}", rng.uniform(0.5, 2, const_shape).astype(np.float32)))
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Mul", ["c", "c0"], ["cm"]),
             helper.make_node("Add", ["c1", "cm"], ["ca"]),
             helper.make_node("BatchNormalization", ["ca", "s", "sh", "m", "v"], ["n"]),
             helper.make_node("Mul", ["n", "c2"], ["nm"]),
             helper.make_node("Add", ["nm", "c3"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feed = {"x": _x((2, 3, 4, 4))}
    base = _session(model, Level.ORT_DISABLE_ALL).run(None, feed)[0]
    sess = _session(model, Level.ORT_ENABLE_BASIC)
    ops = _ops(sess)
    if const_shape == (4,):
        assert ops.count("Mul") == 2 and ops.count("Add") == 2, ops
    else:
        assert ops == ["Conv"], ops
    np.testing.assert_allclose(sess.run(None, feed)[0], base, rtol=1e-4, atol=1e-4)


CONV_CASES = [
    # (in channels, out channels, size, kernel, stride, pad, dilation, group)
    (3, 20, 17, 3, 1, 1, 1, 1),
    (8, 40, 15, 3, 2, 1, 1, 1),
    (6, 13, 12, 1, 2, 0, 1, 1),
    (5, 7, 9, 5, 1, 2, 2, 1),
    (8, 16, 11, 3, 1, 0, 1, 2),
    (4, 300, 7, 3, 1, 1, 1, 1),  # more output channels than one GEMM M block
    (16, 24, 10, 1, 1, 0, 1, 1),
    (16, 128, 6, 1, 1, 0, 1, 2),  # few positions, many channels: computed transposed (pointwise, groups)
    (32, 96, 13, 3, 2, 1, 1, 1),  # few positions after a stride (direct on AVX-512, else transposed with im2col)
    (24, 100, 7, 3, 1, 1, 1, 1),  # 49 positions (direct on AVX-512, else evened-out row panels); 100 channels
    (40, 100, 7, 1, 1, 0, 1, 1),  # pointwise, transposed: tiles of 16 channels into the planes, the last of 4
    (600, 70, 7, 1, 1, 0, 1, 1),  # deeper than a GEMM K step: each filter panel through all of K (whole_k_rows)
    (520, 80, 13, 1, 2, 0, 1, 1),  # strided, 49 positions from 13 x 13, as deep
    # maps of (H, W): tiles of the transposed GEMM 3 and 7 positions high (4 + 3 on AVX2), 67 = 8 x 8 + 3 channels
    (16, 67, (1, 3), 1, 1, 0, 1, 1),
    (16, 67, (1, 7), 1, 1, 0, 1, 1),
]


@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("threads", [1, 2])
def test_conv_with_constant_filters_matches_fed_filters(case: tuple[Any, ...], threads: int) -> None:
    # Constant filters take the packed paths (im2col inside the GEMM panels or the direct kernel, bias/residual/
    # Relu per GEMM block; pointwise outputs of few positions computed transposed); filters fed at run time take
    # the plain im2col + GEMM path. Both must agree, with and without the fused residual Add and Relu.
    c, m, size, k, stride, pad, dilation, group = case
    hw = size if isinstance(size, tuple) else (size, size)
    rng = np.random.default_rng([c, m, *hw, k, stride, pad, dilation, group])
    w = rng.standard_normal((m, c // group, k, k)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    out_h, out_w = ((s + 2 * pad - dilation * (k - 1) - 1) // stride + 1 for s in hw)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=[stride, stride], pads=[pad] * 4,
                              dilations=[dilation, dilation], group=group),
             helper.make_node("Add", ["c", "z"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]

    def model(filters_are_inputs: bool) -> onnx.ModelProto:
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c, *hw]),
                  helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, m, out_h, out_w])]
        if filters_are_inputs:
            inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, list(w.shape)))
        graph = helper.make_graph(nodes, "conv", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                                  [_const("w", w), _const("b", b)])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    feed = {"x": _x((2, c, *hw), seed=1), "z": _x((2, m, out_h, out_w), seed=2)}
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = threads
    fused = mosaicrt.InferenceSession(model(False).SerializeToString(), sess_options=opts)
    assert _ops(fused) == ["com.microsoft::FusedConv"]
    plain = mosaicrt.InferenceSession(model(True).SerializeToString(), sess_options=opts)
    assert "Add" in _ops(plain)
    np.testing.assert_allclose(fused.run(None, feed)[0], plain.run(None, {**feed, "w": w})[0], rtol=1e-4, atol=1e-4)


POINTWISE_CASES = [
    # 1x1 convolutions of at most 2048 input channels per group (or any number on maps of at most 256 positions)
    # on maps of >= 64 positions run on the pointwise kernel on AVX-512 and AVX2 CPUs (on AVX2 not on maps of more
    # than 1024 positions with in x out channels per group >= 16384): (in channels, out channels, (H, W), group,
    # batch)
    (1, 1, (8, 8), 1, 1),        # one tile of 64 positions, one channel
    (3, 7, (9, 9), 1, 2),        # 81 positions: a tile and one of 17 (a last vector of 1); 7 = 6 + 1 channels
    (16, 13, (7, 10), 1, 1),     # 70 = 64 + 6 positions; 13 = 6 + 6 + 1 channels
    (128, 64, (16, 17), 1, 2),   # the deepest it takes on more than 256 positions; two spans (256 + 16)
    (64, 13, (24, 25), 1, 1),    # spans of 512 positions: 512 + 88
    (129, 20, (16, 17), 1, 1),   # deeper on 272 positions: spans of 192 (192 + 80)
    (300, 13, (20, 20), 1, 1),   # spans of one tile: 6 x 64 + 16
    (2049, 7, (16, 17), 1, 1),   # one deeper than 2048 on 272 positions: the GEMM
    (129, 20, (8, 9), 1, 1),     # on 72: the pointwise kernel
    (520, 27, (13, 13), 1, 1),   # SqueezeNet's last layer, shallower: 169 positions in 3 tiles, 27 = 4 x 6 + 3
    (32, 12, (12, 12), 2, 2),    # groups of 16 -> 6
    (24, 144, (14, 14), 1, 1),   # a MobileNetV2 expansion, 196 positions
    (40, 197, (9, 10), 1, 2),    # 33 blocks of channels (the last of 5) on a small input: at 2 threads by blocks
    (64, 256, (33, 32), 1, 1),   # 1056 positions, 64 x 256: on AVX2 the GEMM
    (48, 99, (35, 36), 3, 1),    # 1260 positions in groups of 16 -> 33 (blocks of 6 channels, the last of 3)
    (200, 151, (20, 20), 1, 1),  # deep, 26 blocks (the last of 1): on AVX-512 each span's rows copied whole; 400
                                 # positions in 4 spans (at 2 threads even ones: 96 + 96 + 96 + 112)
]


@pytest.mark.parametrize("case", POINTWISE_CASES, ids=lambda c: f"c{c[0]}m{c[1]}-{c[2][0]}x{c[2][1]}-g{c[3]}n{c[4]}")
@pytest.mark.parametrize("epilogue", ["none", "relu", "clip", "residual_relu", "leaky_relu"])
@pytest.mark.parametrize("threads", [1, 2])
def test_pointwise_convs_match_numpy(case: tuple[Any, ...], epilogue: str, threads: int) -> None:
    # Every output stage the kernel applies in its registers (bias, residual, Relu, Clip), and one it does not
    # (LeakyRelu: the GEMM path), against the products in float64.
    c, m, (h, w_), group, batch = case
    rng = np.random.default_rng(c * m + h + w_)
    w = (rng.standard_normal((m, c // group, 1, 1)) / np.sqrt(c // group)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    x = _x((batch, c, h, w_), seed=3)
    z = _x((batch, m, h, w_), seed=4)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=group)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))]
    feed = {"x": x}
    last = "c"
    if epilogue == "residual_relu":
        nodes.append(helper.make_node("Add", ["z", "c"], ["s"]))
        inputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, list(z.shape)))
        feed["z"] = z
        last = "s"
    act = {"relu": ("Relu", {}), "residual_relu": ("Relu", {}), "clip": ("Clip", {}),
           "leaky_relu": ("LeakyRelu", {"alpha": 0.1})}.get(epilogue)
    inits = [_const("w", w), _const("b", b), _const("lo", np.array(-0.5, np.float32)),
             _const("hi", np.array(0.7, np.float32))]
    if act:
        nodes.append(helper.make_node(act[0], [last, *(["lo", "hi"] if act[0] == "Clip" else [])], ["y"], **act[1]))
    else:
        nodes[-1].output[0] = "y"
    graph = helper.make_graph(nodes, "pw", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = mosaicrt.InferenceSession(model.SerializeToString(), sess_options=opts)
    assert len(_ops(sess)) == 1, _ops(sess)
    got = sess.run(None, feed)[0]
    xg = x.astype(np.float64).reshape(batch, group, c // group, h * w_)
    wg = w.astype(np.float64).reshape(group, m // group, c // group)
    want = np.einsum("gmk,ngkp->ngmp", wg, xg).reshape(batch, m, h, w_) + b.reshape(1, m, 1, 1)
    if epilogue == "residual_relu":
        want = want + z
    if epilogue in ("relu", "residual_relu"):
        want = np.maximum(want, 0)
    elif epilogue == "clip":
        want = np.clip(want, -0.5, 0.7)
    elif epilogue == "leaky_relu":
        want = np.where(want >= 0, want, 0.1 * want)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


STRIDED_POINTWISE_CASES = [
    # 1x1 convolutions with strides and no padding: on AVX-512 CPUs the pointwise kernel over the input subsampled
    # at the strides where the output has >= 64 positions: (in channels, out channels, (H, W), strides, group,
    # batch)
    (40, 52, (28, 28), (2, 2), 1, 1),   # a ResNet downsample, smaller: 196 positions
    (24, 20, (15, 33), (2, 1), 1, 2),   # rows strided only, odd sides: 8 x 33
    (16, 30, (26, 29), (3, 2), 2, 1),   # groups of 8 -> 15, strides 3 x 2: 9 x 15
    (8, 12, (9, 20), (2, 2), 1, 1),     # 5 x 10 = 50 positions: the GEMM
]


@pytest.mark.parametrize("case", STRIDED_POINTWISE_CASES,
                         ids=lambda c: f"c{c[0]}m{c[1]}-{c[2][0]}x{c[2][1]}-s{c[3][0]}{c[3][1]}-g{c[4]}n{c[5]}")
@pytest.mark.parametrize("epilogue", ["none", "residual_relu"])
@pytest.mark.parametrize("threads", [1, 2])
def test_strided_pointwise_convs_match_numpy(case: tuple[Any, ...], epilogue: str, threads: int) -> None:
    c, m, (h, w_), (sh, sw), group, batch = case
    rng = np.random.default_rng(c * m + h)
    w = (rng.standard_normal((m, c // group, 1, 1)) / np.sqrt(c // group)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    x = _x((batch, c, h, w_), seed=6)
    oh, ow = (h - 1) // sh + 1, (w_ - 1) // sw + 1
    z = _x((batch, m, oh, ow), seed=7)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=group, strides=[sh, sw])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))]
    feed = {"x": x}
    if epilogue == "residual_relu":
        nodes += [helper.make_node("Add", ["c", "z"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
        inputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, list(z.shape)))
        feed["z"] = z
    else:
        nodes[-1].output[0] = "y"
    graph = helper.make_graph(nodes, "spw", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [_const("w", w), _const("b", b)])
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = mosaicrt.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                                     .SerializeToString(), sess_options=opts)
    assert len(_ops(sess)) == 1, _ops(sess)
    got = sess.run(None, feed)[0]
    xs = x.astype(np.float64)[:, :, ::sh, ::sw].reshape(batch, group, c // group, oh * ow)
    wg = w.astype(np.float64).reshape(group, m // group, c // group)
    want = np.einsum("gmk,ngkp->ngmp", wg, xs).reshape(batch, m, oh, ow) + b.reshape(1, m, 1, 1)
    if epilogue == "residual_relu":
        want = np.maximum(want + z, 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


DIRECT_CASES = [
    # 2-D windows with >= 8 output channels per group run on the direct kernel on AVX-512 and on AVX2 CPUs:
    # (in channels, out channels, (H, W), (KH, KW), strides, pads [t, l, b, r], dilations, group, auto_pad)
    (128, 32, (56, 57), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, "NOTSET"),  # DenseNet's growth layer
    (5, 9, (13, 20), (5, 3), (1, 1), (2, 0, 1, 3), (1, 2), 1, "NOTSET"),     # 9 channels: a padded block of 16
    (6, 20, (9, 31), (2, 4), (1, 1), (0, 0, 0, 0), (2, 1), 1, "NOTSET"),     # 20: a padded block of 32
    (24, 100, (9, 10), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, "NOTSET"),   # 100: blocks of 16, the last partial
    (40, 48, (7, 7), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, "NOTSET"),     # 49 positions: tiles of 7, 48 lanes
    (8, 64, (28, 28), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, "NOTSET"),    # 196 positions: 33 tiles in 4 chunks
    (12, 16, (5, 5), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, "NOTSET"),     # one block, one chunk split in 2
    (16, 32, (17, 15), (3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 2, "SAME_UPPER"),
    (3, 44, (40, 6), (7, 1), (1, 1), (3, 0, 3, 0), (1, 1), 1, "NOTSET"),      # one-column kernel, narrow plane
    (8, 8, (3, 70), (3, 3), (1, 1), (4, 4, 4, 4), (1, 1), 1, "NOTSET"),      # pads wider than the window reach
    (3, 64, (64, 61), (7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1, "NOTSET"),    # a ResNet stem (147 steps: lanes)
    (5, 64, (64, 61), (7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1, "NOTSET"),    # 245 steps: 4 phase planes
    (3, 24, (33, 34), (3, 3), (2, 2), (0, 0, 0, 0), (1, 1), 1, "NOTSET"),    # SqueezeNet's, odd sizes
    (16, 20, (29, 23), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, "NOTSET"),
    (6, 12, (31, 26), (3, 5), (3, 2), (2, 1, 0, 2), (2, 1), 1, "NOTSET"),    # stride 3 x 2, dilated rows
    (8, 16, (20, 21), (4, 4), (4, 4), (0, 0, 0, 0), (1, 1), 1, "SAME_LOWER"),
    (96, 64, (7, 7), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, "NOTSET"),     # 864 steps: filters in 2 pieces
    (200, 16, (9, 8), (4, 4), (2, 1), (1, 2, 1, 1), (1, 1), 1, "NOTSET"),    # 3200 steps of 16 lanes: 2 pieces
    # row tiles (16 or 32 lanes, rows of at least 10 positions, more than 196 steps): one base per tile of a row
    (24, 16, (5, 150), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, "NOTSET"),   # rows wider than a chunk: 3 shares
    (32, 30, (14, 14), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, "NOTSET"),   # 4 rows a chunk, tiles of 14
    (24, 32, (31, 60), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, "NOTSET"),   # strided: rows of 30, tiles of 10
    (200, 32, (6, 24), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, "NOTSET"),   # 1800 steps: 2 pieces, tiles of 12
    (24, 10, (21, 70), (3, 3), (1, 2), (0, 2, 1, 0), (2, 3), 1, "NOTSET"),   # dilated, strided columns, odd rows
    # positions in the lanes (at most 196 steps on AVX-512, 32 on AVX2; rows of at least 16): the cases of 5, 6, 8
    # and 3 -> 24 channels and the 7x7 stem above, and
    (4, 24, (40, 37), (7, 7), (1, 1), (3, 3, 3, 3), (1, 1), 1, "NOTSET"),    # 196 steps, 7 staged rows a tile
    (3, 64, (40, 150), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, "NOTSET"),   # a stem: rows of 75 in 2 shares
    (16, 64, (20, 55), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, "NOTSET"),   # SqueezeNet's expansion, 144 steps
    (4, 27, (18, 40), (2, 5), (1, 1), (0, 2, 1, 2), (3, 1), 1, "NOTSET"),    # 27 channels: blocks of 6, one of 3
    # tiles of 64 flat positions over the staged rows, the columns past each output row dropped:
    (16, 24, (70, 90), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, "NOTSET"),   # 3 spans of tiles, the last partial
    (6, 8, (12, 16), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, "NOTSET"),     # staged rows of 18: most vectors in 2
    (5, 7, (21, 35), (5, 5), (2, 2), (1, 1, 1, 1), (1, 1), 1, "NOTSET"),     # phase rows of 19, 17 of them outputs
    # AVX2 tiles of 16 flat positions: vectors of 8 that span a row's end and the next row's start, stored whole
    # over outputs written next, except a span's last tile and where more than 8 columns a row are dropped
    (8, 13, (21, 37), (2, 2), (1, 1), (1, 0, 0, 1), (1, 1), 1, "NOTSET"),    # 32 steps; 13 = 6 + 6 + 1 channels
    (3, 10, (30, 40), (3, 3), (1, 1), (0, 0, 0, 0), (5, 5), 1, "NOTSET"),    # 10 columns a row dropped
    (3, 32, (64, 63), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, "NOTSET"),    # a MobileNetV2 stem, smaller
    # at 2 threads, bands of chunks with their own staged rows (the 128 -> 32 and 150-wide cases above, and)
    (24, 40, (20, 30), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, "NOTSET"),   # 48 lanes: chunks across rows
    (12, 16, (23, 19), (5, 3), (2, 1), (2, 1, 2, 1), (1, 1), 1, "NOTSET"),   # odd bands, halo of 2 phase rows
    # fewer than 8 channels a group (ResNeXt's 4 of 32 groups): the lanes kernel too, partial blocks of 6
    (64, 32, (20, 33), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 16, "NOTSET"),  # 2 a group, 4 inputs
    (24, 8, (17, 40), (3, 3), (2, 1), (1, 1, 1, 1), (1, 1), 8, "NOTSET"),    # 1 a group, 3 inputs, stride 2
    (10, 5, (21, 30), (3, 5), (1, 1), (1, 2, 1, 2), (1, 1), 1, "NOTSET"),    # 5 output channels, one group
]


@pytest.mark.parametrize("case", DIRECT_CASES, ids=lambda c: f"c{c[0]}m{c[1]}-{c[2][0]}x{c[2][1]}-k{c[3][0]}x{c[3][1]}")
@pytest.mark.parametrize("threads", [1, 2])
def test_direct_convs_with_constant_filters_match_fed_filters(case: tuple, threads: int) -> None:
    """Constant filters of 2-D convolutions (the direct kernel where the CPU has AVX-512 or AVX2), with bias,
    the fused residual Add and Relu, against the same Conv with filters fed at run time (im2col + GEMM)."""
    c, m, (h, w_), (kh, kw), st, pads, dil, group, auto_pad = case
    rng = np.random.default_rng(c * m + h)
    w = rng.standard_normal((m, c // group, kh, kw)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    attrs: dict[str, object] = {"kernel_shape": [kh, kw], "strides": list(st), "dilations": list(dil),
                                "group": group}
    if auto_pad == "NOTSET":
        attrs["pads"] = list(pads)
        out = ((h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // st[0] + 1,
               (w_ + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // st[1] + 1)
    else:
        attrs["auto_pad"] = auto_pad
        out = (-(-h // st[0]), -(-w_ // st[1]))
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs),
             helper.make_node("Add", ["c", "z"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]

    def model(filters_are_inputs: bool, batch: int = 2) -> onnx.ModelProto:
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, c, h, w_]),
                  helper.make_tensor_value_info("z", TensorProto.FLOAT, [batch, m, *out])]
        if filters_are_inputs:
            inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, list(w.shape)))
        graph = helper.make_graph(nodes, "conv", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                                  [_const("w", w), _const("b", b)])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    feed = {"x": _x((2, c, h, w_), seed=1), "z": _x((2, m, *out), seed=2)}
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = threads
    fused = mosaicrt.InferenceSession(model(False).SerializeToString(), sess_options=opts)
    assert _ops(fused) == ["com.microsoft::FusedConv"]
    plain = mosaicrt.InferenceSession(model(True).SerializeToString(), sess_options=opts)
    got = fused.run(None, feed)[0]
    assert got.shape == (2, m, *out)
    np.testing.assert_allclose(got, plain.run(None, {**feed, "w": w})[0], rtol=1e-4, atol=1e-4)
    # one image: the work split inside the image instead of across images, the same arithmetic per output
    one = mosaicrt.InferenceSession(model(False, batch=1).SerializeToString(), sess_options=opts)
    np.testing.assert_array_equal(one.run(None, {"x": feed["x"][:1], "z": feed["z"][:1]})[0], got[:1])
    # and the bare Conv (no epilogue)
    bare = helper.make_model(helper.make_graph(
        [nodes[0]], "bare", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c, h, w_])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)], [_const("w", w), _const("b", b)]),
        opset_imports=[helper.make_opsetid("", 17)])
    import onnxruntime
    want = onnxruntime.InferenceSession(bare.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": feed["x"]})[0]
    np.testing.assert_allclose(mosaicrt.InferenceSession(bare.SerializeToString(), sess_options=opts).run(
        None, {"x": feed["x"]})[0], want, rtol=1e-4, atol=1e-4)
    # Conv + Relu without a residual: the bias and the Relu are applied in the kernel's registers
    relu = helper.make_model(helper.make_graph(
        [nodes[0], helper.make_node("Relu", ["c"], ["y"])], "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c, h, w_])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [_const("w", w), _const("b", b)]),
        opset_imports=[helper.make_opsetid("", 17)])
    relu_sess = mosaicrt.InferenceSession(relu.SerializeToString(), sess_options=opts)
    assert _ops(relu_sess) == ["com.microsoft::FusedConv"]
    np.testing.assert_allclose(relu_sess.run(None, {"x": feed["x"]})[0], np.maximum(want, 0), rtol=1e-4, atol=1e-4)
    # Conv + Clip (Relu6 and other bounds): also applied in the registers; bounds inside the outputs' range so
    # that both clamp
    lo, hi = np.float32(np.quantile(want, 0.3)), np.float32(np.quantile(want, 0.8))
    clip = helper.make_model(helper.make_graph(
        [nodes[0], helper.make_node("Clip", ["c", "lo", "hi"], ["y"])], "clip",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c, h, w_])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [_const("w", w), _const("b", b), _const("lo", np.array(lo)), _const("hi", np.array(hi))]),
        opset_imports=[helper.make_opsetid("", 17)])
    clip_sess = mosaicrt.InferenceSession(clip.SerializeToString(), sess_options=opts)
    assert _ops(clip_sess) == ["com.microsoft::FusedConv"]
    np.testing.assert_allclose(clip_sess.run(None, {"x": feed["x"]})[0], np.clip(want, lo, hi), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("spatial", [(19,), (5, 6, 7)])
def test_conv_1d_and_3d_with_constant_filters(spatial: tuple[int, ...]) -> None:
    # 1-D convolutions take the 2-D panel path (promoted), 3-D ones the N-D im2col path; both with
    # the per-block output stage. Compared with the same model whose filters are fed at run time.
    rng = np.random.default_rng(len(spatial))
    nsp = len(spatial)
    w = rng.standard_normal((14, 3) + (3,) * nsp).astype(np.float32)
    b = rng.standard_normal(14).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1] * (2 * nsp), strides=[2] + [1] * (nsp - 1)),
             helper.make_node("Relu", ["c"], ["y"])]

    def model(fed: bool) -> onnx.ModelProto:
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, *spatial])]
        if fed:
            inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, list(w.shape)))
        graph = helper.make_graph(nodes, "conv", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                                  [_const("w", w), _const("b", b)])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    x = _x((2, 3, *spatial), seed=4)
    fused = _session(model(False), Level.ORT_ENABLE_ALL)
    assert _ops(fused) == ["com.microsoft::FusedConv"]
    got = fused.run(None, {"x": x})[0]
    expected = _session(model(True), Level.ORT_ENABLE_ALL).run(None, {"x": x, "w": w})[0]
    assert np.std(expected) > 0.1
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def _depthwise_model(geometry: tuple[Any, ...], *, seed: int,
                     relu: bool) -> tuple[onnx.ModelProto, np.ndarray, np.ndarray]:
    """A depthwise Conv (group = channels, `mult` outputs per channel) on a 2 x c x hw input, with a Relu after it
    or not; the model, its input, and onnxruntime's output. geometry: c, mult, hw, kernel, stride, the 4 pads,
    dilation."""
    import onnxruntime

    c, mult, hw, k, stride, pads, dilation = geometry
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((c * mult, 1, k, k)).astype(np.float32)
    b = rng.standard_normal(c * mult).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c" if relu else "y"], group=c, strides=[stride, stride],
                              pads=list(pads), dilations=[dilation, dilation])]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    graph = helper.make_graph(nodes, "dw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c, *hw])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [_const("w", w), _const("b", b)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = _x((2, c, *hw), seed=seed % 7 + 2)
    expected = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    return model, x, expected


@pytest.mark.parametrize(
    "geometry",
    [(8, 1, 9, 3, 1, 1, 1), (6, 2, 10, 3, 2, 1, 1), (4, 1, 11, 3, 1, 2, 2), (5, 1, 12, 5, 2, 2, 1)],
    ids=str,
)
def test_depthwise_conv_matches_onnxruntime(geometry: tuple[int, int, int, int, int, int, int]) -> None:
    # Depthwise convolutions (3x3 windows unrolled, other sizes generic) with the fused Relu.
    # geometry: channels, channel multiplier, spatial size, kernel, stride, pad, dilation
    c, mult, size, k, stride, pad, dilation = geometry
    model, x, expected = _depthwise_model((c, mult, (size, size), k, stride, [pad] * 4, dilation),
                                          seed=c * 100 + size, relu=True)
    np.testing.assert_allclose(_session(model, Level.ORT_ENABLE_ALL).run(None, {"x": x})[0], expected, rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize(
    "geometry",
    # channels, channel multiplier, input rows x columns, kernel, stride, pads (top, left, bottom, right), dilation
    [(5, 1, (53, 47), 3, 1, (1, 1, 1, 1), 1), (5, 1, (61, 70), 3, 2, (2, 0, 0, 3), 1),
     (3, 2, (50, 41), 3, 1, (0, 2, 3, 1), 2), (4, 1, (57, 66), 5, 2, (2, 2, 1, 1), 1)],
    ids=str,
)
def test_depthwise_rows_in_bands_match_onnxruntime(threads: int, geometry: tuple[Any, ...]) -> None:
    # With several threads, single-plane depthwise convolutions run in bands of output rows, each band a plane of
    # its own starting at the first input row it reads: the first band keeps the top padding, the last one reads
    # into the bottom padding, over strides, a dilated window, a 5x5 one and a channel multiplier.
    model, x, expected = _depthwise_model(geometry, seed=geometry[0] * 1000 + geometry[2][0], relu=False)
    assert expected.shape[2] >= 8 * threads  # enough rows for a band per thread
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = threads
    got = mosaicrt.InferenceSession(model.SerializeToString(), sess_options=opts).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


ACTIVATIONS = [
    # (op, attributes, extra constant inputs, opset)
    ("Tanh", {}, [], 17),
    ("Sigmoid", {}, [], 17),
    ("LeakyRelu", {"alpha": 0.3}, [], 17),
    ("HardSigmoid", {"alpha": 0.4, "beta": 0.45}, [], 17),
    ("Clip", {}, [np.float32(0.0), np.float32(6.0)], 17),   # Relu6
    ("Clip", {}, ["", np.float32(0.5)], 13),                # only a max
    ("Clip", {"min": -0.5, "max": 0.25}, [], 6),            # bounds as attributes
]
ACTIVATION_GEOMETRIES = [(8, 16, 12, 3, 1, 1, 1), (16, 96, 7, 1, 1, 0, 1), (24, 100, 6, 1, 1, 0, 1),
                         (12, 12, 9, 3, 2, 1, 12)]


@pytest.mark.parametrize("activation", ACTIVATIONS, ids=lambda a: f"{a[0]}-opset{a[3]}")
@pytest.mark.parametrize("geometry", ACTIVATION_GEOMETRIES, ids=str)
def test_conv_activation_fusion_keeps_results(activation: tuple[Any, ...], geometry: tuple[int, ...]) -> None:
    # Conv followed by an activation FusedConv applies (Relu is covered above): fused into one FusedConv whose
    # output matches the unfused graph, on a direct, a few-positions (transposed GEMM) and a depthwise geometry.
    op, attrs, bounds, opset = activation
    c, m, size, k, stride, pad, group = geometry
    rng = np.random.default_rng(c + m)
    w = (rng.standard_normal((m, c // group, k, k)) * 0.5).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    inits = [_const("w", w), _const("b", b)]
    act_inputs = ["c"]
    for i, bound in enumerate(bounds):
        if isinstance(bound, str):
            act_inputs.append(bound)
        else:
            inits.append(_const(f"bound{i}", np.array(bound, np.float32)))
            act_inputs.append(f"bound{i}")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=[stride, stride], pads=[pad] * 4, group=group),
             helper.make_node(op, act_inputs, ["y"], **attrs)]
    graph = helper.make_graph(nodes, "act", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    x = _x((2, c, size, size), seed=3) * 3
    fused = _session(model, Level.ORT_ENABLE_ALL)
    assert _ops(fused) == ["com.microsoft::FusedConv"]
    expected = _session(model, Level.ORT_DISABLE_ALL).run(None, {"x": x})[0]
    assert np.std(expected) > 0.05
    np.testing.assert_allclose(fused.run(None, {"x": x})[0], expected, rtol=1e-5, atol=1e-6)


def test_clip_with_bounds_fed_at_run_time_is_not_fused() -> None:
    w = np.ones((4, 3, 1, 1), np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Clip", ["c", "lo"], ["y"])]
    graph = helper.make_graph(nodes, "clip", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4]),
                                              helper.make_tensor_value_info("lo", TensorProto.FLOAT, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [_const("w", w)])
    sess = _session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), Level.ORT_ENABLE_ALL)
    assert _ops(sess) == ["Conv", "Clip"]
    x = _x((1, 3, 4, 4))
    np.testing.assert_allclose(sess.run(None, {"x": x, "lo": np.float32(0.5)})[0],
                               np.maximum(x.sum(axis=1, keepdims=True).repeat(4, axis=1), 0.5), rtol=1e-6)


def _check_fused_conv_at_1_and_2_threads(model: onnx.ModelProto, feed: dict[str, np.ndarray],
                                         expected: np.ndarray) -> None:
    """The model runs as one FusedConv and matches `expected` at 1 and at 2 threads.

    Both sessions stay alive: a 2-thread session created after the 1-thread one was freed could get its output
    buffer where that one left the right values, and an output left unwritten would pass."""
    sessions: list[mosaicrt.InferenceSession] = []
    for threads in (1, 2):
        opts = mosaicrt.SessionOptions()
        opts.intra_op_num_threads = threads
        sessions.append(mosaicrt.InferenceSession(model.SerializeToString(), sess_options=opts))
        assert _ops(sessions[-1]) == ["com.microsoft::FusedConv"]
        np.testing.assert_allclose(sessions[-1].run(None, feed)[0], expected, rtol=1e-4, atol=1e-4)



# Where a fused residual may give its memory to the convolution's output (OpContext::output_in_input: the pointwise
# kernel writes each output element over the residual element it has just read) and where it must not.
RESIDUAL_MEMORY_CASES = [
    "dies",          # z = Conv(x) is read last by the fused Add: the output is made in z's memory
    "feed",          # z is a graph input: the caller's array must stay as it was
    "read_later",    # z is read again after the Add
    "is_input",      # the Add's other operand is the Conv's own input, read last there: Relu(Conv(a) + a)
    "graph_output",  # z is also a graph output
    "concat_slice",  # z was made in its slice of a Concat that ran before the Add
]


@pytest.mark.parametrize("case", RESIDUAL_MEMORY_CASES)
@pytest.mark.parametrize("threads", [1, 2])
def test_fused_residual_memory_reuse_keeps_results(case: str, threads: int) -> None:
    c, m, h, w_ = 24, 24, 12, 11  # 132 positions: the pointwise kernel on AVX-512 CPUs
    rng = np.random.default_rng(17)
    inits = [_const(n, (rng.standard_normal((m, c, 1, 1)) / np.sqrt(c)).astype(np.float32)) for n in ("w0", "w1", "w2")]
    inits += [_const(n, rng.standard_normal(m).astype(np.float32)) for n in ("b0", "b1", "b2")]
    x = _x((1, c, h, w_), seed=21)
    feed = {"x": x}
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, w_])]
    outputs = ["y"]
    nodes = [helper.make_node("Relu", ["x"], ["a"])]
    if case == "feed":
        z = "zin"
        feed["zin"] = _x((1, m, h, w_), seed=22)
        inputs.append(helper.make_tensor_value_info("zin", TensorProto.FLOAT, [1, m, h, w_]))
    elif case == "is_input":
        z = "a"
    else:
        z = "z"
        nodes.append(helper.make_node("Conv", ["a", "w0", "b0"], ["z"]))
    nodes.append(helper.make_node("Conv", ["a", "w1", "b1"], ["c1"]))
    if case == "concat_slice":
        nodes.append(helper.make_node("Concat", ["z", "c1"], ["cat"], axis=1))
        outputs.append("cat")
    conv_in = "a" if case == "is_input" else "c1"
    nodes += [helper.make_node("Conv", [conv_in, "w2", "b2"], ["c2"]), helper.make_node("Add", ["c2", z], ["s"]),
              helper.make_node("Relu", ["s"], ["y"])]
    if case == "read_later":
        nodes.append(helper.make_node("Mul", ["z", "y"], ["later"]))
        outputs.append("later")
    if case == "graph_output":
        outputs.append("z")
    graph = helper.make_graph(nodes, "residual_memory", inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    # the graph in float64 with numpy (an onnxruntime on the aarch64 runs rejected the graph-output case)
    w = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in inits}

    def conv(v: np.ndarray, i: int) -> np.ndarray:
        return np.einsum("mk,nkhw->nmhw", w[f"w{i}"][:, :, 0, 0], v) + w[f"b{i}"].reshape(1, -1, 1, 1)

    vals: dict[str, np.ndarray] = {k: v.astype(np.float64) for k, v in feed.items()}
    vals["a"] = np.maximum(vals["x"], 0)
    if case not in ("feed", "is_input"):
        vals["z"] = conv(vals["a"], 0)
    vals["c1"] = conv(vals["a"], 1)
    vals["cat"] = np.concatenate([vals.get("z", vals["a"]), vals["c1"]], axis=1)
    vals["y"] = np.maximum(conv(vals[conv_in], 2) + vals[z], 0)
    vals["later"] = vals.get("z", vals["a"]) * vals["y"]
    expected = [vals[o] for o in outputs]
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = mosaicrt.InferenceSession(model.SerializeToString(), sess_options=opts)
    assert "com.microsoft::FusedConv" in _ops(sess)
    kept = {k: v.copy() for k, v in feed.items()}
    for _ in range(2):  # the second run reuses the first one's freed buffers
        got = sess.run(None, feed)
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)
    for k, v in kept.items():
        np.testing.assert_array_equal(feed[k], v)

DEPTHWISE_BLOCK_CASES = [
    # Outputs up to 32 wide run 8 channels at a time in the vector lanes (AVX2 CPUs), the channels past the last
    # block of 8 plane by plane; on AVX-512 CPUs 3x3 windows of stride 1 or 2 more than 8 wide run plane by plane,
    # 16 columns a vector read in place: (channels, (H, W), (KH, KW), strides, pads [t, l, b, r], dilations)
    (16, (7, 7), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    (20, (14, 14), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),       # 2 blocks + 4 single channels
    (24, (9, 11), (5, 3), (1, 2), (2, 0, 1, 3), (1, 1)),        # asymmetric pads, rectangular window
    (8, (13, 13), (3, 3), (1, 1), (2, 2, 2, 2), (2, 2)),        # dilated
    (32, (28, 30), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),       # 30 wide: near the blocked path's limit
    (9, (5, 6), (1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),          # 1x1 window; 30 positions: a part group of 8
    (16, (56, 56), (3, 3), (2, 2), (0, 1, 1, 0), (1, 1)),       # stride 2 down to 28 x 28
    (12, (17, 33), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),       # 33 wide: 16 + 16 + 1 columns
    (10, (29, 35), (3, 3), (2, 2), (0, 1, 1, 0), (1, 1)),       # stride 2, 18 wide, asymmetric pads
    (9, (11, 10), (3, 3), (1, 1), (2, 2, 2, 2), (1, 1)),        # pads past the window: rows and columns of 0 only
    (8, (40, 47), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),        # stride 2, 24 wide: a third vector of columns
    (12, (21, 37), (3, 3), (2, 2), (2, 1, 0, 2), (1, 1)),       # stride 2, two top rows of padding, none below
    (16, (6, 50), (3, 3), (1, 1), (0, 2, 3, 1), (1, 1)),        # stride 1: bottom windows reach 2 padded rows
    # on AVX-512 CPUs the narrow maps' channels go 16 at a time first, then 8, then plane by plane
    (37, (7, 7), (5, 5), (1, 1), (2, 2, 2, 2), (1, 1)),         # 16 + 16 + 5 single channels; 49 = 3 x 16 + 1
    (48, (9, 8), (3, 3), (2, 2), (1, 0, 1, 2), (2, 1)),         # 3 x 16, stride 2, dilated rows, asymmetric pads
    (17, (3, 5), (3, 3), (1, 1), (2, 2, 2, 2), (1, 1)),         # pads past the window: padded rows of 0 only
    (32, (8, 8), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),         # 2 x 16, 64 positions: four full groups
    (16, (6, 9), (2, 4), (1, 1), (0, 1, 1, 2), (2, 1)),         # dilated rows, a 2x4 window, asymmetric pads
    (20, (12, 4), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),        # 4 wide, 12 rows: 16 + 4 single channels
    # plane by plane (fewer than 8 channels, or outputs more than 32 wide): 3- and 5-wide windows of column stride 1
    # or 2 read the plane in place, the blocks of 8 outputs at a row's ends with masked loads; others go through a
    # zero-padded copy split by column phase
    (3, (9, 80), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),         # stride 2, 40 wide: one edge block, 4 inside
    (3, (7, 75), (3, 5), (1, 2), (1, 2, 1, 2), (1, 1)),         # stride 2, 5-wide window, a 6-column tail
    (2, (6, 45), (5, 5), (1, 1), (2, 2, 2, 2), (1, 1)),         # stride 1, 5x5, a 5-column tail
    (3, (8, 66), (3, 3), (1, 1), (0, 1, 2, 1), (2, 1)),         # stride 1, dilated rows, asymmetric pads
    (2, (5, 40), (3, 5), (1, 1), (1, 6, 1, 6), (1, 1)),         # pads past the window at both ends of the rows
    (3, (5, 9), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),          # 5 wide: a single edge block per row
    (4, (6, 48), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),         # the last whole block's last tap: the right pad
    (2, (5, 63), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),         # the same at stride 2
    (2, (4, 21), (3, 3), (1, 2), (1, 3, 1, 0), (1, 1)),         # stride 2, 3 columns of padding on the left only
    (2, (5, 70), (2, 4), (2, 2), (0, 1, 1, 2), (1, 1)),         # 4-wide window: the phase copy
    (2, (6, 90), (1, 1), (2, 2), (0, 0, 0, 0), (1, 1)),         # 1x1 window, stride 2
    (3, (8, 66), (3, 3), (1, 1), (2, 3, 2, 3), (1, 3)),         # dilated columns
    (2, (4, 100), (3, 3), (2, 3), (1, 0, 1, 0), (1, 2)),        # column stride 3
    (2, (9, 70), (3, 3), (2, 2), (1, 2, 1, 2), (1, 2)),         # stride 2 with dilated columns
]


@pytest.mark.parametrize("epilogue", ["residual_relu", "clip", "relu"])
@pytest.mark.parametrize("case", DEPTHWISE_BLOCK_CASES, ids=str)
def test_depthwise_channel_blocks_match_onnxruntime(case: tuple[Any, ...], epilogue: str) -> None:
    # With the residual Add and Relu fused into the depthwise Conv (its epilogue runs per output plane), or a
    # Clip or a Relu alone (applied in the registers by the blocks of 16 channels).
    c, (h, w_), kernel, strides, pads, dil = case
    import onnxruntime

    rng = np.random.default_rng(c + h * 7 + kernel[0])
    w = rng.standard_normal((c, 1, *kernel)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    oh = (h + pads[0] + pads[2] - dil[0] * (kernel[0] - 1) - 1) // strides[0] + 1
    ow = (w_ + pads[1] + pads[3] - dil[1] * (kernel[1] - 1) - 1) // strides[1] + 1
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=c, strides=list(strides),
                              pads=[pads[0], pads[1], pads[2], pads[3]], dilations=list(dil))]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c, h, w_])]
    inits = [_const("w", w), _const("b", b)]
    feed = {"x": _x((2, c, h, w_), seed=6)}
    if epilogue == "residual_relu":
        nodes += [helper.make_node("Add", ["c", "z"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
        inputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, c, oh, ow]))
        feed["z"] = _x((2, c, oh, ow), seed=7)
    elif epilogue == "clip":  # bounds that both clamp some of the outputs
        inits += [_const("lo", np.array(-1.0, np.float32)), _const("hi", np.array(1.5, np.float32))]
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
    else:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    graph = helper.make_graph(nodes, "dw", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    expected = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, feed)[0]
    _check_fused_conv_at_1_and_2_threads(model, feed, expected)


WINOGRAD_CASES = [
    # 3x3 stride-1 convolutions with at least 32 input (64 at several threads) and 64 output channels on maps of
    # more than 64 positions run by Winograd F(2x2, 3x3) in 2x2 output tiles (on AVX-512, odd maps of fewer than
    # 64 tiles go to the direct kernel: the sizes below keep them on Winograd): (in channels, out channels, (H, W),
    # pads [t, l, b, r])
    (32, 64, (20, 19), (1, 1, 1, 1)),     # Winograd at 1 thread, the direct kernel at 2
    (64, 64, (14, 14), (1, 1, 1, 1)),
    (72, 64, (17, 15), (1, 1, 1, 1)),     # odd output sizes: the last tile of each row and column is partial
    (64, 96, (20, 17), (0, 0, 0, 0)),     # no padding
    (80, 64, (11, 12), (2, 0, 1, 3)),     # asymmetric pads
    (64, 64, (3, 130), (1, 1, 1, 1)),     # 2 tile rows, the second half empty
    (64, 64, (56, 56), (1, 1, 1, 1)),     # 784 tiles: pieces of tiles, one thread each
    (64, 64, (25, 25), (1, 1, 1, 1)),     # 169 tiles, one piece: at 2 threads a piece each (85 and 84 tiles)
    (256, 256, (14, 14), (1, 1, 1, 1)),   # one piece of 49 tiles: its steps split between the threads
]


@pytest.mark.parametrize("fused", ["residual_relu", "leaky_relu"])
@pytest.mark.parametrize("case", WINOGRAD_CASES, ids=str)
def test_winograd_convolutions_match_onnxruntime(case: tuple[Any, ...], fused: str) -> None:
    # Batch 2, at 1 and 2 threads: with bias, a residual Add and Relu fused (the output stage runs on each
    # finished piece of an output row), or without bias and with a fused LeakyRelu.
    c, m, (h, w_), pads = case
    import onnxruntime

    rng = np.random.default_rng(c + m + h)
    w = (rng.standard_normal((m, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    oh, ow = h + pads[0] + pads[2] - 2, w_ + pads[1] + pads[3] - 2
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c, h, w_])]
    feed = {"x": _x((2, c, h, w_), seed=8)}
    if fused == "residual_relu":
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=list(pads)),
                 helper.make_node("Add", ["c", "z"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
        inputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, m, oh, ow]))
        feed["z"] = _x((2, m, oh, ow), seed=9)
    else:
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=list(pads)),
                 helper.make_node("LeakyRelu", ["c"], ["y"], alpha=0.2)]
    graph = helper.make_graph(nodes, "wino", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [_const("w", w), _const("b", b)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    expected = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, feed)[0]
    assert expected.shape == (2, m, oh, ow)
    _check_fused_conv_at_1_and_2_threads(model, feed, expected)


# --- QDQ: DequantizeLinear → Conv / MatMul → QuantizeLinear run as QLinearConv / QLinearMatMul -----------------


def _qdq_model(*, w_type: int = TensorProto.INT8, per_channel: bool = True, y_zero_point: bool = True,
               bias: str = "float", spatial: tuple[int, ...] = (10, 10), scale_input: bool = False,
               opset: int = 19) -> onnx.ModelProto:
    """x → Q → DQ → Conv(DQ(W), bias) → Q → DQ → Conv(DQ(W2), DQ(int32 bias)) → Q → DQ → Flatten → Q → DQ →
    MatMul(DQ(B per column)) → Q → DQ → y: the shape quantize_static gives a CNN head (random weights)."""
    rng = np.random.default_rng(31)
    c_in, c_mid, c_out, k = 3, 8, 6, 3
    w_np = np.int8 if w_type == TensorProto.INT8 else np.uint8
    lo, hi = (-127, 128) if w_type == TensorProto.INT8 else (0, 256)
    nd = len(spatial)
    kernel = (k,) * nd
    pads = [1] * (2 * nd)

    def weights(name: str, shape: tuple[int, ...], axis: int, channels: int) -> list[onnx.TensorProto]:
        n = channels if per_channel else 1
        zp = np.zeros(n, w_np) if w_type == TensorProto.INT8 else rng.integers(100, 156, n).astype(np.uint8)
        scale = rng.uniform(0.002, 0.01, n).astype(np.float32)
        if not per_channel:
            zp, scale = zp.reshape(()), scale.reshape(())
        return [_const(f"{name}_q", rng.integers(lo, hi, shape).astype(w_np)), _const(f"{name}_s", scale),
                _const(f"{name}_zp", zp)]

    inits = [*weights("w1", (c_mid, c_in, *kernel), 0, c_mid), *weights("w2", (c_out, c_mid, *kernel), 0, c_out)]
    flat = c_out * int(np.prod(spatial))
    inits += weights("fc", (flat, 5), 1, 5)
    for name, scale, zp in (("x", 0.02, 128), ("a1", 0.03, 100), ("a2", 0.05, 120), ("a3", 0.05, 120),
                            ("y", 0.1, 110)):  # fmt: skip
        inits.append(_const(f"{name}_s", np.array(scale, np.float32)))
        inits.append(_const(f"{name}_zp", np.array(zp, np.uint8)))
    inits.append(_const("b1", (rng.standard_normal(c_mid) * 0.1).astype(np.float32)))
    inits += [_const("b2_q", rng.integers(-2000, 2000, c_out).astype(np.int32)),
              _const("b2_s", np.array(0.02 * 0.005, np.float32))]
    axis = {"axis": 0}
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_s", "x_zp"], ["x_q"]),
        helper.make_node("DequantizeLinear", ["x_q", "x_s", "x_zp"], ["x_f"]),
        helper.make_node("DequantizeLinear", ["w1_q", "w1_s", "w1_zp"], ["w1_f"], **axis),
        helper.make_node("Conv", ["x_f", "w1_f"] + (["b1"] if bias == "float" else []), ["c1"], pads=pads),
        helper.make_node("QuantizeLinear", ["c1", "a1_s", "a1_zp"], ["c1_q"]),
        helper.make_node("DequantizeLinear", ["c1_q", "a1_s", "a1_zp"], ["c1_f"]),
        helper.make_node("DequantizeLinear", ["w2_q", "w2_s", "w2_zp"], ["w2_f"], **axis),
        helper.make_node("DequantizeLinear", ["b2_q", "b2_s"], ["b2_f"]),
        helper.make_node("Conv", ["c1_f", "w2_f", "b2_f"], ["c2"], pads=pads),
        helper.make_node("QuantizeLinear", ["c2", "a2_s", "a2_zp"], ["c2_q"]),
        helper.make_node("DequantizeLinear", ["c2_q", "a2_s", "a2_zp"], ["c2_f"]),
        helper.make_node("Flatten", ["c2_f"], ["flat"]),
        helper.make_node("QuantizeLinear", ["flat", "a3_s", "a3_zp"], ["flat_q"]),
        helper.make_node("DequantizeLinear", ["flat_q", "a3_s", "a3_zp"], ["flat_f"]),
        helper.make_node("DequantizeLinear", ["fc_q", "fc_s", "fc_zp"], ["fc_f"], axis=1),
        helper.make_node("MatMul", ["flat_f", "fc_f"], ["mm"]),
        helper.make_node("QuantizeLinear", ["mm", "y_s"] + (["y_zp"] if y_zero_point else []), ["mm_q"]),
        helper.make_node("DequantizeLinear", ["mm_q", "y_s"] + (["y_zp"] if y_zero_point else []), ["y"]),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c_in, *spatial])]
    if scale_input:  # the first activation scale is fed: not a constant, so that group is not fused
        inits = [t for t in inits if t.name != "x_s"]
        inputs.append(helper.make_tensor_value_info("x_s", TensorProto.FLOAT, []))
    graph = helper.make_graph(nodes, "qdq", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    return model


def _qdq_feed(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    feed = {"x": np.random.default_rng(32).standard_normal(shape).astype(np.float32)}
    if len(model.graph.input) > 1:
        feed["x_s"] = np.array(0.02, np.float32)
    return feed


def _assert_within_steps(got: np.ndarray, want: np.ndarray, step: float, steps: int = 2) -> None:
    """Quantized outputs (multiples of `step`): nearly all equal within one step, none further than `steps` (each
    layer's integer and float sums may round a tie apart, and a flip can grow by a step at the next layer; the
    kernels differ per CPU)."""
    assert np.abs(want).max() > 4 * step  # the outputs are not all clamped or zero
    diff = np.abs(got.astype(np.float64) - want)
    assert float(np.mean(diff <= step * 1.001)) >= 0.9, diff.max() / step
    np.testing.assert_allclose(got, want, rtol=0, atol=steps * step * 1.001)


@pytest.mark.parametrize(("w_type", "per_channel", "y_zero_point", "bias", "spatial"), [
    (TensorProto.INT8, True, True, "float", (10, 10)),
    (TensorProto.UINT8, False, True, "float", (10, 10)),
    (TensorProto.INT8, True, False, "none", (10, 10)),
    (TensorProto.INT8, False, True, "float", (12,)),
])  # fmt: skip
def test_qdq_groups_run_as_integer_ops(w_type: int, per_channel: bool, y_zero_point: bool, bias: str,
                                       spatial: tuple[int, ...]) -> None:
    model = _qdq_model(w_type=w_type, per_channel=per_channel, y_zero_point=y_zero_point, bias=bias, spatial=spatial)
    feed = _qdq_feed(model)
    plain = _session(model, Level.ORT_DISABLE_ALL)
    fused = _session(model, Level.ORT_ENABLE_ALL)
    assert "QLinearConv" not in _ops(plain)
    ops = _ops(fused)
    assert ops.count("QLinearConv") == 2 and ops.count("QLinearMatMul") == 1, ops
    assert "Conv" not in ops and "MatMul" not in ops
    # the weights' and biases' DequantizeLinear nodes are gone; the activations keep one DQ before Flatten
    # and the output's
    assert ops.count("DequantizeLinear") == 2 and ops.count("QuantizeLinear") == 2, ops
    _assert_within_steps(fused.run(None, feed)[0], plain.run(None, feed)[0], 0.1)


def _onnxruntime_qdq_reference(model: onnx.ModelProto, feed: dict[str, np.ndarray]) -> np.ndarray:
    """onnxruntime's output for a QDQ model: with its integer QDQ fusion where its u8 x s8 kernels are exact on
    this CPU, else its unfused graph (DequantizeLinear, float operator, QuantizeLinear: the model as written)."""
    import onnxruntime
    from oracles import onnxruntime_u8s8_is_exact

    options = onnxruntime.SessionOptions()
    if not onnxruntime_u8s8_is_exact():
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feed)[0]


def test_qdq_fusion_matches_onnxruntime() -> None:
    model = _qdq_model()
    feed = _qdq_feed(model)
    want = _onnxruntime_qdq_reference(model, feed)
    _assert_within_steps(_session(model, Level.ORT_ENABLE_ALL).run(None, feed)[0], want, 0.1)


def test_qdq_group_with_a_fed_scale_stays_float() -> None:
    model = _qdq_model(scale_input=True)
    feed = _qdq_feed(model)
    fused = _session(model, Level.ORT_ENABLE_ALL)
    ops = _ops(fused)
    assert ops.count("Conv") == 1 and ops.count("QLinearConv") == 1 and ops.count("QLinearMatMul") == 1, ops
    _assert_within_steps(fused.run(None, feed)[0], _session(model, Level.ORT_DISABLE_ALL).run(None, feed)[0], 0.1)


def test_qdq_fusion_is_extended_level_only() -> None:
    model = _qdq_model()
    ops = _ops(_session(model, Level.ORT_ENABLE_BASIC))
    assert "QLinearConv" not in ops and ops.count("Conv") == 2


def test_quantize_static_qdq_resnet_runs_in_integers_and_matches_onnxruntime() -> None:
    """What onnxruntime's quantizer makes of a ResNet (pre-processed, QDQ, per-channel int8 weights): every Conv,
    residual Add, the MaxPool and the GlobalAveragePool run on 8-bit values, as in onnxruntime."""
    from models import qdq_resnet

    model = qdq_resnet(32)
    feed = {"input": np.random.default_rng(33).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    fused = _session(model, Level.ORT_ENABLE_ALL)
    ops = _ops(fused)
    convs = sum(n.op_type == "Conv" for n in model.graph.node)
    adds = sum(n.op_type == "Add" for n in model.graph.node)
    assert ops.count("QLinearConv") == convs and ops.count("com.microsoft::QLinearAdd") == adds, ops
    assert "com.microsoft::QLinearGlobalAveragePool" in ops and "Conv" not in ops and "Add" not in ops, ops
    got = fused.run(None, feed)[0]
    want = _onnxruntime_qdq_reference(model, feed)
    plain = _session(model, Level.ORT_DISABLE_ALL).run(None, feed)[0]
    # the output is dequantized: its values are multiples of the last DequantizeLinear's scale
    last = next(n for n in model.graph.node if n.output[0] == model.graph.output[0].name)
    scale = float(numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == last.input[1])))
    assert float(np.abs(want).max()) > 10 * scale  # not all clamped
    # 20 requantized layers, each within rounding of the float path: the integer path stays within a few output
    # steps of onnxruntime's (on x86-64 with AVX-512 VNNI it is exact on this input), and so does the float path
    _assert_within_steps(got, want, scale, steps=4)
    _assert_within_steps(plain, want, scale, steps=4)


# --- Dynamic quantization: DynamicQuantizeLinear → MatMulInteger → Cast → Mul (→ Add) as one node -------------


@pytest.mark.parametrize("weight_type", ["QUInt8", "QInt8"])
@pytest.mark.parametrize("batch", [1, 7])
def test_quantize_dynamic_mlp_runs_as_one_node_per_layer_and_matches_the_chain(weight_type: str, batch: int) -> None:
    """quantize_dynamic's chain per MatMul becomes com.microsoft DynamicQuantizeMatMul (bias Add and the hidden
    layers' Relu included); the result is bit for bit the unfused chain's, and matches onnxruntime (which fuses the
    same chain)."""
    import onnxruntime
    from models import quantized_mlp

    model = quantized_mlp(weight_type)
    layers = sum(n.op_type == "MatMulInteger" for n in model.graph.node)
    fused = _session(model, Level.ORT_ENABLE_ALL)
    ops = _ops(fused)
    assert ops.count("com.microsoft::DynamicQuantizeMatMul") == layers, ops
    assert sum(n.op_type == "Relu" for n in model.graph.node) == layers - 1
    for gone in ("DynamicQuantizeLinear", "MatMulInteger", "Cast", "Mul", "Add", "Relu"):
        assert gone not in ops, ops
    plain = _session(model, Level.ORT_DISABLE_ALL)
    assert "MatMulInteger" in _ops(plain)
    x = np.random.default_rng(batch).standard_normal((batch, 256)).astype(np.float32)
    got = fused.run(None, {"input": x})[0]
    np.testing.assert_array_equal(got, plain.run(None, {"input": x})[0])
    want = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"input": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_relu_whose_input_is_also_an_output_stays_after_the_fused_layer() -> None:
    """The first layer's pre-activation value is a graph output too: that layer keeps its Relu (its output must
    exist), the second layer's Relu is fused; both results bit for bit the unfused chain's."""
    from models import quantized_mlp

    model = quantized_mlp("QInt8")
    relus = [n for n in model.graph.node if n.op_type == "Relu"]
    model.graph.output.append(helper.make_tensor_value_info(relus[0].input[0], TensorProto.FLOAT, None))
    fused = _session(model, Level.ORT_ENABLE_ALL)
    ops = _ops(fused)
    assert ops.count("com.microsoft::DynamicQuantizeMatMul") == 3 and ops.count("Relu") == 1, ops
    x = np.random.default_rng(3).standard_normal((2, 256)).astype(np.float32)
    for got, want in zip(fused.run(None, {"input": x}), _session(model, Level.ORT_DISABLE_ALL).run(None, {"input": x}),
                         strict=True):
        np.testing.assert_array_equal(got, want)


def test_dynamic_quant_chain_with_other_readers_is_left_alone() -> None:
    """A scale product another node also reads, a per-column weight scale, a bias that is not per column, and
    a MatMulInteger whose output is a graph output: only the chain whose values nobody else reads is fused."""
    rng = np.random.default_rng(5)
    k, n = 16, 6
    inits = [_const("w", rng.integers(-128, 127, (k, n)).astype(np.int8)),
             _const("wz", np.zeros(n, np.int8)),
             _const("ws", rng.uniform(0.01, 0.02, n).astype(np.float32)),
             _const("bias_row", rng.standard_normal((1, n)).astype(np.float32))]
    nodes = []
    for i in range(3):
        nodes += [helper.make_node("DynamicQuantizeLinear", ["x"], [f"q{i}", f"s{i}", f"z{i}"]),
                  helper.make_node("Mul", [f"s{i}", "ws"], [f"m{i}"]),
                  helper.make_node("MatMulInteger", [f"q{i}", "w", f"z{i}", "wz"], [f"acc{i}"]),
                  helper.make_node("Cast", [f"acc{i}"], [f"c{i}"], to=TensorProto.FLOAT),
                  helper.make_node("Mul", [f"c{i}", f"m{i}"], [f"y{i}"])]
    nodes.append(helper.make_node("Add", ["y0", "bias_row"], ["out0"]))  # [1, n]: not fused, y0 still is
    nodes.append(helper.make_node("Identity", ["m1"], ["scale1"]))      # m1 read twice: chain 1 stays
    outputs = [helper.make_tensor_value_info(v, TensorProto.FLOAT, None) for v in ("out0", "y1", "scale1", "y2")]
    outputs.append(helper.make_tensor_value_info("acc2", TensorProto.INT32, None))  # chain 2's product is an output
    graph = helper.make_graph(nodes, "dq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, k])], outputs,
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    fused = _session(model, Level.ORT_ENABLE_ALL)
    ops = _ops(fused)
    assert ops.count("com.microsoft::DynamicQuantizeMatMul") == 1 and ops.count("MatMulInteger") == 2, ops
    assert ops.count("Add") == 1, ops
    x = rng.standard_normal((3, k)).astype(np.float32)
    for got, want in zip(fused.run(None, {"x": x}), _session(model, Level.ORT_DISABLE_ALL).run(None, {"x": x}),
                         strict=True):
        np.testing.assert_array_equal(got, want)


# --- GELU written out as x * 0.5 * (1 + erf(x / sqrt 2)) → com.microsoft Gelu ------------------------------------


def _gelu_graph(form: str) -> onnx.ModelProto:
    """Three written-out GELUs of one input, each in another order, and one whose Erf output is also a graph
    output (left alone)."""
    f = TensorProto.FLOAT
    inits = [_const("sqrt2", np.array(np.sqrt(2.0), np.float32)), _const("rsqrt2", np.array(np.sqrt(0.5), np.float32)),
             _const("one", np.array(1.0, np.float32)), _const("half", np.array(0.5, np.float32))]
    nodes = []
    outs = []
    for i in range(4):
        x = f"x{i}"
        nodes.append(helper.make_node("Relu" if i % 2 else "Neg", ["x"], [x]))
        if form == "div" or i == 3:
            nodes.append(helper.make_node("Div", [x, "sqrt2"], [f"d{i}"]))
        else:
            nodes.append(helper.make_node("Mul", ["rsqrt2", x], [f"d{i}"]))
        nodes.append(helper.make_node("Erf", [f"d{i}"], [f"e{i}"]))
        nodes.append(helper.make_node("Add", ["one", f"e{i}"], [f"a{i}"]))
        if i % 2 == 0:
            nodes.append(helper.make_node("Mul", [x, f"a{i}"], [f"m{i}"]))
            nodes.append(helper.make_node("Mul", [f"m{i}", "half"], [f"y{i}"]))
        else:
            nodes.append(helper.make_node("Mul", ["half", x], [f"h{i}"]))
            nodes.append(helper.make_node("Mul", [f"a{i}", f"h{i}"], [f"y{i}"]))
        outs.append(helper.make_tensor_value_info(f"y{i}", f, None))
    outs.append(helper.make_tensor_value_info("e3", f, None))  # GELU 3's erf is read by the caller too
    graph = helper.make_graph(nodes, "gelu", [helper.make_tensor_value_info("x", f, [4, 300])], outs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("form", ["div", "mul"])
def test_written_out_gelu_becomes_one_node(form: str) -> None:
    model = _gelu_graph(form)
    fused = _session(model, Level.ORT_ENABLE_ALL)
    ops = _ops(fused)
    assert ops.count("com.microsoft::Gelu") == 3 and ops.count("Erf") == 1, ops
    x = np.random.default_rng(7).standard_normal((4, 300)).astype(np.float32) * 3
    for got, want in zip(fused.run(None, {"x": x}), _session(model, Level.ORT_DISABLE_ALL).run(None, {"x": x}),
                         strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# --- LayerNormalization written out (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add) -----------------


def _layernorm_graph(opset: int, bias: bool, last_axis: int, d_reads: int = 2) -> onnx.ModelProto:
    """A written-out layer normalization of x [2, 5, 96] over its last axis (axes -1 or 2, as an attribute before
    opset 18, an input from it); d_reads 3: the centred values are also a graph output (left alone)."""
    f = TensorProto.FLOAT
    rng = np.random.default_rng(opset + last_axis)
    inits = [_const("two", np.array(2.0, np.float32)), _const("eps", np.array(1e-5, np.float32)),
             _const("gamma", rng.standard_normal(96).astype(np.float32)),
             _const("beta", rng.standard_normal(96).astype(np.float32))]

    def mean(src: str, dst: str) -> onnx.NodeProto:
        if opset >= 18:
            return helper.make_node("ReduceMean", [src, "axes"], [dst])
        return helper.make_node("ReduceMean", [src], [dst], axes=[last_axis])

    if opset >= 18:
        inits.append(_const("axes", np.array([last_axis], np.int64)))
    nodes = [helper.make_node("Relu", ["x"], ["r"]), mean("r", "m"), helper.make_node("Sub", ["r", "m"], ["d"]),
             helper.make_node("Pow", ["d", "two"], ["p"]), mean("p", "v"),
             helper.make_node("Add", ["eps", "v"], ["ve"]),
             helper.make_node("Sqrt", ["ve"], ["s"]), helper.make_node("Div", ["d", "s"], ["n"]),
             helper.make_node("Mul", ["gamma", "n"], ["g" if bias else "y"])]
    if bias:
        nodes.append(helper.make_node("Add", ["g", "beta"], ["y"]))
    outs = [helper.make_tensor_value_info("y", f, None)]
    if d_reads == 3:
        outs.append(helper.make_tensor_value_info("d", f, None))
    graph = helper.make_graph(nodes, "ln", [helper.make_tensor_value_info("x", f, [2, 5, 96])], outs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize(("opset", "bias", "last_axis"), [(13, True, -1), (13, False, 2), (18, True, 2),
                                                          (18, False, -1)])
def test_written_out_layernorm_becomes_one_node(opset: int, bias: bool, last_axis: int) -> None:
    model = _layernorm_graph(opset, bias, last_axis)
    fused = _session(model, Level.ORT_ENABLE_ALL)
    assert _ops(fused) == ["Relu", "LayerNormalization"], _ops(fused)
    x = (np.random.default_rng(5).standard_normal((2, 5, 96)) * 4 + 3).astype(np.float32)
    got = fused.run(None, {"x": x})[0]
    want = _session(model, Level.ORT_DISABLE_ALL).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_layernorm_pattern_is_left_alone_when_its_parts_are_read_elsewhere_or_reduce_another_axis() -> None:
    kept = _session(_layernorm_graph(13, True, -1, d_reads=3), Level.ORT_ENABLE_ALL)
    assert "LayerNormalization" not in _ops(kept) and "Pow" in _ops(kept)
    other_axis = _session(_layernorm_graph(13, True, 1), Level.ORT_ENABLE_ALL)
    assert "LayerNormalization" not in _ops(other_axis)


# --- Attention scores: MatMul(Q, Transpose(K)) / c → com.microsoft FusedMatMul(Q, K, transB, alpha) ---------------


def _scores_graph(scale_op: str, transpose: bool, c_shape: tuple[int, ...] = (), k_reads: int = 1,
                  q_rank_known: bool = True) -> onnx.ModelProto:
    """Q [2, 3, 7, 16] and K [2, 3, 9, 16] (or K^T [2, 3, 16, 9] given directly) from Transposes of graph inputs,
    the scores Q K^T scaled by Div or Mul with a constant c; k_reads 2: K^T is also a graph output."""
    f = TensorProto.FLOAT
    c = np.full(c_shape, 4.0 if scale_op == "Div" else 0.25, np.float32)
    nodes = [helper.make_node("Transpose", ["q_in"], ["q"], perm=[0, 2, 1, 3]) if q_rank_known else
             helper.make_node("Identity", ["q_in"], ["q"])]
    if transpose:
        nodes += [helper.make_node("Transpose", ["k_in"], ["k"], perm=[0, 2, 1, 3]),
                  helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2])]
    else:
        nodes.append(helper.make_node("Transpose", ["k_in"], ["kt"], perm=[0, 2, 3, 1]))
    nodes += [helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node(scale_op, ["s", "c"], ["y"])]
    q_shape = [2, 7, 3, 16] if q_rank_known else None
    outs = [helper.make_tensor_value_info("y", f, None)]
    if k_reads == 2:
        outs.append(helper.make_tensor_value_info("kt", f, None))
    graph = helper.make_graph(nodes, "scores", [helper.make_tensor_value_info("q_in", f, q_shape),
                                                helper.make_tensor_value_info("k_in", f, [2, 9, 3, 16])],
                              outs, [_const("c", c)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _scores_feed() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(21)
    return {"q_in": rng.standard_normal((2, 7, 3, 16)).astype(np.float32),
            "k_in": rng.standard_normal((2, 9, 3, 16)).astype(np.float32)}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("scale_op", "transpose", "c_shape"), [("Div", True, ()), ("Mul", True, (1,)),
                                                                ("Div", False, ())])
def test_attention_scores_become_one_fused_matmul(scale_op: str, transpose: bool, c_shape: tuple[int, ...],
                                                  threads: int) -> None:
    model = _scores_graph(scale_op, transpose, c_shape)
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = threads
    fused = mosaicrt.InferenceSession(model.SerializeToString(), sess_options=opts)
    ops = _ops(fused)
    assert ops.count("com.microsoft::FusedMatMul") == 1 and "MatMul" not in ops and scale_op not in ops, ops
    assert ops.count("Transpose") == 2, ops  # Q's and K's head split stay; K's last-two swap went into transB
    feed = _scores_feed()
    want = _session(model, Level.ORT_DISABLE_ALL).run(None, feed)[0]
    np.testing.assert_allclose(fused.run(None, feed)[0], want, rtol=1e-5, atol=1e-6)


def test_scores_stay_unfused_when_the_transpose_is_read_twice_or_the_scale_is_no_scalar() -> None:
    ops = _ops(_session(_scores_graph("Div", True, k_reads=2), Level.ORT_ENABLE_ALL))
    # the scale fused, K^T kept for its other reader
    assert "com.microsoft::FusedMatMul" in ops and ops.count("Transpose") == 3, ops
    ops = _ops(_session(_scores_graph("Div", True, c_shape=(9,)), Level.ORT_ENABLE_ALL))
    assert "com.microsoft::FusedMatMul" not in ops and "Div" in ops, ops
    ops = _ops(_session(_scores_graph("Mul", True, q_rank_known=False), Level.ORT_ENABLE_ALL))
    assert "com.microsoft::FusedMatMul" not in ops, ops  # Q's rank unknown: it could be a vector


def test_transformer_block_gelus_are_fused() -> None:
    from models import transformer

    model = transformer(d_model=64, heads=4, d_ff=128, layers=2)
    fused = _session(model, Level.ORT_ENABLE_ALL)
    ops = _ops(fused)
    # each Gelu fused, then taken into the MatMul + bias before it; the 6 projections of each layer are MatMulAdds
    assert "com.microsoft::Gelu" not in ops and "Erf" not in ops and ops.count("ai.mosaicrt::MatMulAdd") == 12, ops
    x = np.random.default_rng(2).standard_normal((1, 16, 64)).astype(np.float32)
    np.testing.assert_allclose(fused.run(None, {"input": x})[0],
                               _session(model, Level.ORT_DISABLE_ALL).run(None, {"input": x})[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("k", [0, 5])
def test_dynamic_quantize_matmul_node_with_bias(k: int) -> None:
    """The com.microsoft op in a model, 1-D and 3-D inputs, K = 0 (the bias alone) included, against the
    arithmetic it stands for (quantize x as DynamicQuantizeLinear does, integer product, scale, bias)."""
    rng = np.random.default_rng(k)
    n = 4
    w = rng.integers(-128, 127, (k, n)).astype(np.int8)
    ws = np.array(0.02, np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    for shape in ([k], [2, 3, k]):
        node = helper.make_node("DynamicQuantizeMatMul", ["x", "w", "ws", "", "b"], ["y"], domain="com.microsoft")
        graph = helper.make_graph([node], "dqm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                                  [_const("w", w), _const("ws", ws), _const("b", bias)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                        helper.make_opsetid("com.microsoft", 1)])
        x = rng.standard_normal(shape).astype(np.float32)
        got = _session(model, Level.ORT_ENABLE_ALL).run(None, {"x": x})[0]
        lo, hi = min(float(x.min(initial=0)), 0.0), max(float(x.max(initial=0)), 0.0)
        scale = np.float32((hi - lo) / 255) if hi != lo else np.float32(1)
        zp = np.clip(np.round(np.float32(0 - lo / scale)), 0, 255)
        q = np.clip(np.round(x / scale) + zp, 0, 255)
        acc = (q.astype(np.int64) - int(zp)) @ w.astype(np.int64)
        want = (acc.astype(np.float32) * np.float32(scale * ws) + bias).astype(np.float32)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


PREACTIVATION_CASES = [
    # (in channels, out channels, (H, W), kernel, strides, pads, group, what follows the Conv)
    (96, 128, (14, 15), 1, 1, 0, 1, ""),           # 1x1: the stage applied while the input is packed
    (40, 24, (9, 11), 3, 1, 1, 1, ""),             # 3x3, padded: the staged input's padding stays 0
    (256, 64, (7, 7), 1, 1, 0, 1, "Relu"),         # few positions (the transposed GEMM), a trailing Relu
    (32, 48, (12, 10), 3, 2, 1, 2, "BatchNormalization+Relu"),  # grouped, strided, BN and Relu folded after
    (24, 16, (10, 10), 1, 1, 0, 1, "Add"),         # a residual after
    # 1x1 on the pointwise kernel (AVX-512), which applies the stage to each span of positions it reads
    (300, 20, (16, 17), 1, 1, 0, 1, "Relu"),       # 5 spans (4 x 64 + 16), each staged once for all the blocks
    (40, 200, (9, 10), 1, 1, 0, 1, ""),            # 34 blocks: at 2 threads by blocks, each staging every position
    (32, 24, (8, 12), 1, 1, 0, 2, "Add"),          # groups of 16 -> 12: each group's own scale and shift
]


@pytest.mark.parametrize("case", PREACTIVATION_CASES,
                         ids=lambda c: f"c{c[0]}m{c[1]}-k{c[3]}s{c[4]}g{c[6]}-{c[7] or 'bare'}")
@pytest.mark.parametrize("threads", [1, 2])
def test_preactivation_batchnorm_relu_moves_into_the_conv(case: tuple, threads: int, tmp_path: Any) -> None:
    """BatchNormalization → Relu → Conv (DenseNet's layers) runs as one ai.mosaicrt FusedConv whose input stage
    applies the BN and the Relu: same results as the graph without the rewrite, and the optimized model
    (saved with the op) loads and runs again."""
    c, m, (h, w_), k, s, pad, group, after = case
    rng = np.random.default_rng(c + m)
    inits = [_const("w", rng.standard_normal((m, c // group, k, k)).astype(np.float32) * 0.2),
             _const("b", rng.standard_normal(m).astype(np.float32)),
             _const("s", rng.uniform(0.5, 1.5, c).astype(np.float32)),
             _const("sh", rng.standard_normal(c).astype(np.float32)),
             _const("mu", rng.standard_normal(c).astype(np.float32)),
             _const("var", rng.uniform(0.5, 1.5, c).astype(np.float32))]
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "sh", "mu", "var"], ["n"], epsilon=1e-3),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("Conv", ["r", "w", "b"], ["c"], kernel_shape=[k, k], strides=[s, s], pads=[pad] * 4,
                              group=group)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c, h, w_])]
    oh, ow = (h + 2 * pad - k) // s + 1, (w_ + 2 * pad - k) // s + 1
    feed = {"x": rng.standard_normal((2, c, h, w_)).astype(np.float32)}
    last = "c"
    for op in after.split("+") if after else []:
        if op == "BatchNormalization":
            inits += [_const(f"{op}_{p}", rng.uniform(0.5, 1.5, m).astype(np.float32)) for p in ("s", "b", "m", "v")]
            nodes.append(helper.make_node(op, [last] + [f"{op}_{p}" for p in ("s", "b", "m", "v")], ["after_bn"]))
            last = "after_bn"
        elif op == "Relu":
            nodes.append(helper.make_node("Relu", [last], ["after_relu"]))
            last = "after_relu"
        else:
            inputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, m, oh, ow]))
            feed["z"] = rng.standard_normal((2, m, oh, ow)).astype(np.float32)
            nodes.append(helper.make_node("Add", [last, "z"], ["after_add"]))
            last = "after_add"
    graph = helper.make_graph(nodes, "preact", inputs, [helper.make_tensor_value_info(last, TensorProto.FLOAT, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)]).SerializeToString()

    def session(level: Any, path: str = "") -> mosaicrt.InferenceSession:
        opts = mosaicrt.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.graph_optimization_level = level
        opts.optimized_model_filepath = path
        return mosaicrt.InferenceSession(model, sess_options=opts)

    saved = str(tmp_path / "optimized.onnx")
    fused = session(mosaicrt.GraphOptimizationLevel.ORT_ENABLE_ALL, saved)
    ops = _ops(fused)
    assert ops == ["ai.mosaicrt::FusedConv"], ops
    want = session(mosaicrt.GraphOptimizationLevel.ORT_DISABLE_ALL).run(None, feed)[0]
    got = fused.run(None, feed)[0]
    assert got.shape == (2, m, oh, ow)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    reloaded = mosaicrt.InferenceSession(saved)
    np.testing.assert_allclose(reloaded.run(None, feed)[0], want, rtol=1e-5, atol=1e-5)


def test_preactivation_stays_when_the_batchnorm_output_is_read_twice() -> None:
    """The BN's output also feeding another node keeps BN and Relu as they are (the Conv alone cannot
    absorb them)."""
    rng = np.random.default_rng(5)
    inits = [_const("w", rng.standard_normal((8, 4, 1, 1)).astype(np.float32)),
             _const("s", np.ones(4, np.float32)), _const("sh", np.zeros(4, np.float32)),
             _const("mu", np.zeros(4, np.float32)), _const("var", np.ones(4, np.float32))]
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "sh", "mu", "var"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("Conv", ["r", "w"], ["y"]),
             helper.make_node("Identity", ["n"], ["n_out"])]
    graph = helper.make_graph(nodes, "twice", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("n_out", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    sess = mosaicrt.InferenceSession(model.SerializeToString())
    assert "ai.mosaicrt::FusedConv" not in _ops(sess) and "BatchNormalization" in _ops(sess)


MATMUL_ADD_CASES = [
    # (x shape, N, bias shape, bias first in the Add, residual Add after it); the input shapes are static
    ((5,), 7, (7,), False, False),              # 1-D x: a [7] output
    ((3, 5), 7, (7,), True, True),
    ((2, 4, 64), 96, (1, 96), False, True),     # batch folded into the GEMM's rows, a [1, N] bias
    ((1, 4, 256), 1024, (1, 1, 1024), True, False),
    ((2, 3, 300), 40, (40,), False, True),      # K over two of the GEMM's K steps: the sums on the last one only
    ((6, 33), 1, (1,), False, True),            # N = 1: the unpacked GEMM, then the sums
    ((130, 48), 70, (70,), True, True),         # several row blocks and a part column panel
]


@pytest.mark.parametrize("case", MATMUL_ADD_CASES, ids=str)
def test_matmul_bias_and_residual_adds_become_one_node(case: tuple[Any, ...]) -> None:
    # MatMul by a constant matrix, + a constant vector (either side of the Add), + a same-shaped value: one
    # ai.mosaicrt MatMulAdd, whose outputs are the unfused graph's bits at 1 and 2 threads.
    x_shape, n, bias_shape, bias_first, residual = case
    rng = np.random.default_rng(n + len(x_shape))
    k = x_shape[-1]
    out_shape = [*x_shape[:-1], n]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]),
             helper.make_node("Add", ["b", "mm"] if bias_first else ["mm", "b"], ["biased" if residual else "y"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))]
    feed = {"x": rng.standard_normal(x_shape).astype(np.float32)}
    if residual:
        nodes.append(helper.make_node("Add", ["z", "biased"], ["y"]))
        inputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, out_shape))
        feed["z"] = rng.standard_normal(out_shape).astype(np.float32)
    inits = [_const("w", (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)),
             _const("b", rng.standard_normal(bias_shape).astype(np.float32))]
    graph = helper.make_graph(nodes, "mm", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    expected = _session(model, Level.ORT_ENABLE_BASIC).run(None, feed)[0]
    assert list(expected.shape) == out_shape
    np.testing.assert_allclose(expected, (feed["x"] @ numpy_helper.to_array(inits[0]) + numpy_helper.to_array(inits[1])
                                          + feed.get("z", 0)).reshape(out_shape), rtol=1e-4, atol=1e-4)
    sessions: list[mosaicrt.InferenceSession] = []
    for threads in (1, 2):
        opts = mosaicrt.SessionOptions()
        opts.intra_op_num_threads = threads
        fused = mosaicrt.InferenceSession(model.SerializeToString(), sess_options=opts)
        sessions.append(fused)  # all alive (see _check_fused_conv_at_1_and_2_threads)
        assert _ops(fused) == ["ai.mosaicrt::MatMulAdd"]
        np.testing.assert_array_equal(fused.run(None, feed)[0], expected)


@pytest.mark.parametrize(("x_shape", "z_shape"), [
    ((2, 5, 8), (2, 5, 6)),   # the product's shape at run time: added on each tile
    ((2, 5, 8), (6,)),        # a residual broadcast along the rows
    ((1, 5, 8), (3, 5, 6)),   # the product broadcast against the residual: the sum is the residual's shape
    ((2, 5, 8), (2, 1, 6)),
])
def test_matmul_add_residual_of_shapes_not_known_is_fused_and_broadcasts(x_shape: tuple[int, ...],
                                                                        z_shape: tuple[int, ...]) -> None:
    # x and the residual with symbolic dims (the optimizer cannot compare the residual Add's operand shapes):
    # fused all the same, and the sum is the unfused graph's, whichever operand is broadcast.
    rng = np.random.default_rng(len(z_shape) + z_shape[0])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["biased"]),
             helper.make_node("Add", ["z", "biased"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "S", 8]),
              helper.make_tensor_value_info("z", TensorProto.FLOAT, ["A", "B", "C"][:len(z_shape)])]
    inits = [_const("w", rng.standard_normal((8, 6)).astype(np.float32)),
             _const("b", rng.standard_normal(6).astype(np.float32))]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, "mm", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feed = {"x": rng.standard_normal(x_shape).astype(np.float32), "z": rng.standard_normal(z_shape).astype(np.float32)}
    fused = _session(model, Level.ORT_ENABLE_ALL)
    assert _ops(fused) == ["ai.mosaicrt::MatMulAdd"]
    want = _session(model, Level.ORT_DISABLE_ALL).run(None, feed)[0]
    got = fused.run(None, feed)[0]
    assert got.shape == want.shape == np.broadcast_shapes((*x_shape[:-1], 6), z_shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", ["bias_per_row", "bias_raises_rank", "bias_overridable", "matmul_used_twice",
                                     "bias_not_constant", "read_by_subgraph"])
def test_matmul_add_is_left_alone_where_it_would_change_the_result(variant: str) -> None:
    # A bias that broadcasts over rows or adds dimensions, one a graph input may replace, a MatMul output read
    # elsewhere (by a node or by a subgraph), or a bias computed at run time: the graph keeps MatMul and Add, and
    # its results.
    rng = np.random.default_rng(5)
    bias = {"bias_per_row": rng.standard_normal((3, 6)), "bias_raises_rank": rng.standard_normal((1, 1, 6))}.get(
        variant, rng.standard_normal(6)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])]
    inits = [_const("w", rng.standard_normal((4, 6)).astype(np.float32))]
    feed = {"x": rng.standard_normal((3, 4)).astype(np.float32)}
    if variant == "bias_not_constant":
        nodes.insert(0, helper.make_node("Sin", ["b_in"], ["b"]))
        inputs.append(helper.make_tensor_value_info("b_in", TensorProto.FLOAT, [6]))
        feed["b_in"] = bias
    else:
        inits.append(_const("b", bias))
    if variant == "bias_overridable":
        inputs.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, [6]))
    if variant == "matmul_used_twice":
        outputs.append(helper.make_tensor_value_info("mm", TensorProto.FLOAT, None))
    if variant == "read_by_subgraph":  # an If whose branches read the MatMul's output from the outer graph
        branch_out = [helper.make_tensor_value_info("branch", TensorProto.FLOAT, None)]
        then_g = helper.make_graph([helper.make_node("Identity", ["mm"], ["branch"])], "then", [], branch_out)
        else_g = helper.make_graph([helper.make_node("Neg", ["mm"], ["branch"])], "else", [], branch_out)
        nodes.append(helper.make_node("If", ["cond"], ["picked"], then_branch=then_g, else_branch=else_g))
        inputs.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
        outputs.append(helper.make_tensor_value_info("picked", TensorProto.FLOAT, None))
        feed["cond"] = np.array(False)
    graph = helper.make_graph(nodes, "mm", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sess = _session(model, Level.ORT_ENABLE_ALL)
    assert "ai.mosaicrt::MatMulAdd" not in _ops(sess) and "MatMul" in _ops(sess) and "Add" in _ops(sess)
    got = sess.run(None, feed)
    want = _session(model, Level.ORT_DISABLE_ALL).run(None, feed)
    for g_, w_ in zip(got, want, strict=True):
        np.testing.assert_allclose(g_, w_, rtol=1e-6, atol=1e-6)
    if variant == "bias_overridable":  # the replaced bias is the one used
        other = np.full(6, 3.0, np.float32)
        np.testing.assert_allclose(sess.run(None, {**feed, "b": other})[0],
                                   feed["x"] @ numpy_helper.to_array(inits[0]) + other, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(1, 4, 64), (2, 37, 64), (3, 64)], ids=str)
def test_matmul_bias_gelu_becomes_one_node(shape: tuple[int, ...]) -> None:
    # A feed-forward layer: MatMul + bias -> Gelu -> MatMul + bias + residual. With com.microsoft Gelu in the
    # model the fused graph gives the unfused one's bits; with Gelu written out (fused first as com.microsoft
    # Gelu) it agrees within float rounding.
    rng = np.random.default_rng(len(shape) + shape[-2])
    d, f = shape[-1], 3 * shape[-1] + 5
    inits = [_const("w1", (rng.standard_normal((d, f)) / np.sqrt(d)).astype(np.float32)),
             _const("b1", rng.standard_normal(f).astype(np.float32)),
             _const("w2", (rng.standard_normal((f, d)) / np.sqrt(f)).astype(np.float32)),
             _const("b2", rng.standard_normal(d).astype(np.float32)),
             _const("half", np.array(0.5, np.float32)), _const("one", np.array(1.0, np.float32)),
             _const("sqrt2", np.array(np.sqrt(2.0), np.float32))]
    written_out = [helper.make_node("Div", ["h", "sqrt2"], ["hs"]), helper.make_node("Erf", ["hs"], ["he"]),
                   helper.make_node("Add", ["he", "one"], ["he1"]), helper.make_node("Mul", ["h", "half"], ["hh"]),
                   helper.make_node("Mul", ["hh", "he1"], ["g"])]
    feed = {"x": rng.standard_normal(shape).astype(np.float32)}
    for gelu in ("contrib", "written_out"):
        nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"]), helper.make_node("Add", ["m1", "b1"], ["h"]),
                 *([helper.make_node("Gelu", ["h"], ["g"], domain="com.microsoft")] if gelu == "contrib"
                   else written_out),
                 helper.make_node("MatMul", ["g", "w2"], ["m2"]), helper.make_node("Add", ["b2", "m2"], ["o"]),
                 helper.make_node("Add", ["o", "x"], ["y"])]
        graph = helper.make_graph(nodes, "ffn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                        helper.make_opsetid("com.microsoft", 1)])
        fused = _session(model, Level.ORT_ENABLE_ALL)
        assert _ops(fused) == ["ai.mosaicrt::MatMulAdd", "ai.mosaicrt::MatMulAdd"], _ops(fused)
        got = fused.run(None, feed)[0]
        want = _session(model, Level.ORT_ENABLE_BASIC).run(None, feed)[0]
        if gelu == "contrib":
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_value_a_subgraph_reads_is_not_fused_away() -> None:
    # Conv -> Relu would become one FusedConv, but an If branch reads the Conv's output from the outer graph:
    # the value must stay, and both outputs must be right.
    rng = np.random.default_rng(9)
    branch_out = [helper.make_tensor_value_info("branch", TensorProto.FLOAT, None)]
    then_g = helper.make_graph([helper.make_node("Neg", ["c"], ["branch"])], "then", [], branch_out)
    else_g = helper.make_graph([helper.make_node("Abs", ["c"], ["branch"])], "else", [], branch_out)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"]),
             helper.make_node("If", ["cond"], ["picked"], then_branch=then_g, else_branch=else_g)]
    graph = helper.make_graph(nodes, "captured",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 5]),
                               helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("picked", TensorProto.FLOAT, None)],
                              [_const("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feed = {"x": rng.standard_normal((1, 3, 5, 5)).astype(np.float32), "cond": np.array(True)}
    want = _session(model, Level.ORT_DISABLE_ALL).run(None, feed)
    got = _session(model, Level.ORT_ENABLE_ALL).run(None, feed)
    for g_, w_ in zip(got, want, strict=True):
        np.testing.assert_allclose(g_, w_, rtol=1e-5, atol=1e-5)
