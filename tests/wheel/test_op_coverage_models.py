"""Operators of the models people deploy (Resize/Upsample, the recurrent layers, narrow-type casts), checked
against onnxruntime on attribute matrices and on small detector/U-Net/sequence models built with onnx.helper."""

from __future__ import annotations

import itertools
from typing import Any

import mosaicrt
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

RTOL = 1e-3
ATOL = 1e-4


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto],
           initializers: list[onnx.TensorProto] | None = None, opset: int = 19) -> bytes:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=initializers or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8 if opset <= 17 else 9
    return model.SerializeToString()


def _run_both(model: bytes, feed: dict[str, np.ndarray[Any, Any]]) -> tuple[list[Any], list[Any]]:
    ours = mosaicrt.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)
    return ours, ref


def _assert_close(ours: list[Any], ref: list[Any], atol: float = ATOL) -> None:
    assert len(ours) == len(ref)
    for a, e in zip(ours, ref, strict=True):
        assert a.dtype == e.dtype and a.shape == e.shape, (a.dtype, a.shape, e.dtype, e.shape)
        if a.dtype.kind in "iu":
            assert np.abs(a.astype(np.int64) - e.astype(np.int64)).max(initial=0) <= 1  # rounding of .5 ties
        else:
            np.testing.assert_allclose(a.astype(np.float32), e.astype(np.float32), rtol=RTOL, atol=atol)


# --- Resize / Upsample ------------------------------------------------------------------------------------------

# Scales give whole output sizes: for fractional ones (in * scale not an integer) onnxruntime's align_corners
# divides by the rounded output length, the onnx reference (and mosaicrt, which the node cases check) by
# in * scale; the two agree on every whole size.
_COORDS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric"]
_RESIZE_CASES = (
    [("linear", c, "round_prefer_floor", s) for c in _COORDS for s in ((2.0, 1.5), (0.5, 0.8))]
    + [("cubic", c, "round_prefer_floor", s) for c in _COORDS[:4] for s in ((2.0, 1.5), (0.75, 0.8))]
    + [("nearest", c, m, s) for c, m in itertools.product(["half_pixel", "asymmetric", "align_corners"],
                                                           ["round_prefer_floor", "round_prefer_ceil", "floor",
                                                            "ceil"])
       for s in ((2.0, 3.0), (0.5, 0.7))]
)


@pytest.mark.parametrize(("mode", "coord", "nearest_mode", "scales"), _RESIZE_CASES)
def test_resize_matches_onnxruntime(mode: str, coord: str, nearest_mode: str, scales: tuple[float, float]) -> None:
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 10)).astype(np.float32)
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode, coordinate_transformation_mode=coord,
                            nearest_mode=nearest_mode)
    init = [numpy_helper.from_array(np.array([1, 1, *scales], np.float32), "scales")]
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], init)
    _assert_close(*_run_both(model, {"x": x}))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.float16, np.float64, np.int32])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_element_types(dtype: Any, mode: str) -> None:
    x = (np.random.default_rng(1).random((1, 2, 5, 6)) * 100).astype(dtype)
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode)
    init = [numpy_helper.from_array(np.array([1, 2, 9, 4], np.int64), "sizes")]
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = _model([node], [helper.make_tensor_value_info("x", elem, x.shape)],
                   [helper.make_tensor_value_info("y", elem, None)], init)
    ours = mosaicrt.InferenceSession(model).run(None, {"x": x})[0]
    assert ours.shape == (1, 2, 9, 4) and ours.dtype == dtype
    if dtype in (np.int32, np.float64):  # onnxruntime has no Resize-19 for these: compare with its float32 result
        model32 = _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], init)
        ref = ort.InferenceSession(model32).run(None, {"x": x.astype(np.float32)})[0]
        ref = np.round(ref).astype(dtype) if dtype == np.int32 else ref.astype(dtype)
        _assert_close([ours], [ref])
        return
    _assert_close([ours], ort.InferenceSession(model).run(None, {"x": x}), atol=1e-2)


@pytest.mark.parametrize(("op", "opset", "mode", "scales"), [
    ("Resize", 10, "nearest", (1.0, 1.0, 2.0, 3.0)),
    ("Resize", 10, "nearest", (1.0, 1.0, 0.5, 0.6)),
    ("Resize", 10, "linear", (1.0, 1.0, 2.0, 1.5)),
    ("Upsample", 9, "nearest", (1.0, 1.0, 2.0, 2.0)),
    ("Upsample", 9, "linear", (1.0, 1.0, 2.0, 3.0)),
])
def test_old_resize_forms(op: str, opset: int, mode: str, scales: tuple[float, ...]) -> None:
    x = np.random.default_rng(2).standard_normal((1, 2, 4, 5)).astype(np.float32)
    node = helper.make_node(op, ["x", "scales"], ["y"], mode=mode)
    init = [numpy_helper.from_array(np.array(scales, np.float32), "scales")]
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], init, opset=opset)
    _assert_close(*_run_both(model, {"x": x}))


def test_resize_refuses_bad_attributes_at_session_creation() -> None:
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="bicubic")
    init = [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], init)
    with pytest.raises(mosaicrt.MosaicrtError, match=r"Resize.*mode.*'bicubic'"):
        mosaicrt.InferenceSession(model)
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest", antialias=1)
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], init)
    with pytest.raises(mosaicrt.MosaicrtError, match="antialias"):
        mosaicrt.InferenceSession(model)


def _conv(name: str, x: str, cin: int, cout: int, *, rng: np.random.Generator,
          init: list[onnx.TensorProto]) -> tuple[onnx.NodeProto, onnx.NodeProto, str]:
    w = (rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2 / (9 * cin))).astype(np.float32)
    b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
    init += [numpy_helper.from_array(w, f"{name}_w"), numpy_helper.from_array(b, f"{name}_b")]
    conv = helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_c"], pads=[1, 1, 1, 1])
    relu = helper.make_node("Relu", [f"{name}_c"], [f"{name}_r"])
    return conv, relu, f"{name}_r"


def _unet(coord: str, mode: str) -> bytes:
    """Two-level U-Net: encoder convs + MaxPool, decoder Resize (x2 by scales) + skip Concat + conv head."""
    rng = np.random.default_rng(3)
    init: list[onnx.TensorProto] = [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "up2")]
    nodes: list[onnx.NodeProto] = []
    c1, r1, e1 = _conv("e1", "x", 3, 8, rng=rng, init=init)
    nodes += [c1, r1, helper.make_node("MaxPool", [e1], ["p1"], kernel_shape=[2, 2], strides=[2, 2])]
    c2, r2, e2 = _conv("e2", "p1", 8, 16, rng=rng, init=init)
    nodes += [c2, r2, helper.make_node("MaxPool", [e2], ["p2"], kernel_shape=[2, 2], strides=[2, 2])]
    c3, r3, e3 = _conv("mid", "p2", 16, 16, rng=rng, init=init)
    nodes += [c3, r3]
    nodes.append(helper.make_node("Resize", [e3, "", "up2"], ["u2"], mode=mode, coordinate_transformation_mode=coord))
    nodes.append(helper.make_node("Concat", ["u2", e2], ["k2"], axis=1))
    c4, r4, d2 = _conv("d2", "k2", 32, 8, rng=rng, init=init)
    nodes += [c4, r4]
    nodes.append(helper.make_node("Resize", [d2, "", "up2"], ["u1"], mode=mode, coordinate_transformation_mode=coord))
    nodes.append(helper.make_node("Concat", ["u1", e1], ["k1"], axis=1))
    c5, _, _ = _conv("head", "k1", 16, 2, rng=rng, init=init)
    nodes.append(helper.make_node(c5.op_type, list(c5.input), ["y"], pads=[1, 1, 1, 1]))
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 32, 32])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 32, 32])], init, opset=17)


@pytest.mark.parametrize(("coord", "mode"), [("align_corners", "linear"), ("asymmetric", "linear"),
                                             ("half_pixel", "linear"), ("pytorch_half_pixel", "linear"),
                                             ("asymmetric", "nearest")])
def test_unet_with_resize(coord: str, mode: str) -> None:
    feed = {"x": np.random.default_rng(4).standard_normal((2, 3, 32, 32)).astype(np.float32)}
    _assert_close(*_run_both(_unet(coord, mode), feed))


def test_yolo_style_fpn_nearest_upsample() -> None:
    """FPN neck: stride-2 convs down, nearest Resize x2 (by sizes from Shape arithmetic, as exporters emit) up."""
    rng = np.random.default_rng(5)
    init: list[onnx.TensorProto] = [numpy_helper.from_array(np.array([2, 2], np.int64), "two"),
                                    numpy_helper.from_array(np.array([2], np.int64), "s2"),
                                    numpy_helper.from_array(np.array([4], np.int64), "s4")]
    nodes: list[onnx.NodeProto] = []
    c1, r1, f1 = _conv("b1", "x", 3, 8, rng=rng, init=init)
    nodes += [c1, r1]
    w = (rng.standard_normal((16, 8, 3, 3)) * 0.2).astype(np.float32)
    init.append(numpy_helper.from_array(w, "down_w"))
    nodes.append(helper.make_node("Conv", [f1, "down_w"], ["f2"], pads=[1, 1, 1, 1], strides=[2, 2]))
    nodes.append(helper.make_node("Shape", ["f2"], ["shp"]))
    nodes.append(helper.make_node("Slice", ["shp", "s2", "s4"], ["hw"]))
    nodes.append(helper.make_node("Mul", ["hw", "two"], ["hw2"]))
    nodes.append(helper.make_node("Shape", ["f2"], ["nc_full"]))
    nodes.append(helper.make_node("Slice", ["nc_full", "zero", "s2"], ["nc"]))
    init.append(numpy_helper.from_array(np.array([0], np.int64), "zero"))
    nodes.append(helper.make_node("Concat", ["nc", "hw2"], ["sizes"], axis=0))
    nodes.append(helper.make_node("Resize", ["f2", "", "", "sizes"], ["up"], mode="nearest",
                                  coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    nodes.append(helper.make_node("Concat", ["up", f1], ["cat"], axis=1))
    c2, _, _ = _conv("out", "cat", 24, 6, rng=rng, init=init)
    nodes.append(helper.make_node(c2.op_type, list(c2.input), ["y"], pads=[1, 1, 1, 1]))
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], init, opset=13)
    for shape in ((1, 3, 32, 32), (2, 3, 24, 40)):
        _assert_close(*_run_both(model, {"x": np.random.default_rng(6).standard_normal(shape).astype(np.float32)}))


# --- RNN / GRU / LSTM -------------------------------------------------------------------------------------------

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _recurrent_node(op: str, hidden: int, inp: int, dirs: int, *, rng: np.random.Generator, prefix: str, x: str,
                    init: list[onnx.TensorProto], lens: str = "", with_states: bool = False,
                    peepholes: bool = False, **attrs: Any) -> onnx.NodeProto:
    g = _GATES[op]
    scale = 1 / np.sqrt(hidden)
    w = (rng.uniform(-scale, scale, (dirs, g * hidden, inp))).astype(np.float32)
    r = (rng.uniform(-scale, scale, (dirs, g * hidden, hidden))).astype(np.float32)
    b = (rng.uniform(-scale, scale, (dirs, 2 * g * hidden))).astype(np.float32)
    init += [numpy_helper.from_array(w, f"{prefix}_W"), numpy_helper.from_array(r, f"{prefix}_R"),
             numpy_helper.from_array(b, f"{prefix}_B")]
    inputs = [x, f"{prefix}_W", f"{prefix}_R", f"{prefix}_B", lens]
    if with_states:
        inputs.append("h0")
        if op == "LSTM":
            inputs.append("c0")
    if peepholes:
        p = rng.uniform(-scale, scale, (dirs, 3 * hidden)).astype(np.float32)
        init.append(numpy_helper.from_array(p, f"{prefix}_P"))
        inputs += [""] * (7 - len(inputs)) + [f"{prefix}_P"]
    outs = [f"{prefix}_Y", f"{prefix}_Yh"] + ([f"{prefix}_Yc"] if op == "LSTM" else [])
    direction = attrs.pop("direction", "forward")
    if dirs == 2:
        direction = "bidirectional"
    return helper.make_node(op, inputs, outs, hidden_size=hidden, direction=direction, **attrs)


_CELL_CASES = [
    ("RNN", "forward", {}), ("RNN", "reverse", {"activations": ["Relu"]}), ("RNN", "bidirectional", {"clip": 0.7}),
    ("GRU", "forward", {}), ("GRU", "bidirectional", {"linear_before_reset": 1}),
    ("GRU", "reverse", {"activations": ["HardSigmoid", "Softsign"], "activation_alpha": [0.3],
                        "activation_beta": [0.4]}),
    ("LSTM", "forward", {"peepholes": True}), ("LSTM", "bidirectional", {}),
    ("LSTM", "reverse", {"clip": 0.5, "input_forget": 1}),
    ("LSTM", "forward", {"activations": ["Sigmoid", "LeakyRelu", "Elu"], "activation_alpha": [0.2, 0.9]}),
]


def _cell_model(op: str, direction: str, attrs: dict[str, Any], layout: int) -> tuple[bytes, dict[str, Any]]:
    rng = np.random.default_rng(7)
    seq, batch, inp, hidden = 5, 3, 4, 6
    dirs = 2 if direction == "bidirectional" else 1
    attrs = dict(attrs)
    peep = bool(attrs.pop("peepholes", False))
    init: list[onnx.TensorProto] = []
    node = _recurrent_node(op, hidden, inp, dirs, rng=rng, prefix="l", x="x", init=init, lens="lens",
                           with_states=True, peepholes=peep, direction=direction, layout=layout, **attrs)
    x_shape = (seq, batch, inp)
    s_shape = (dirs, batch, hidden)
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
           helper.make_tensor_value_info("lens", TensorProto.INT32, [batch]),
           helper.make_tensor_value_info("h0", TensorProto.FLOAT, None)]
    feed = {"x": rng.standard_normal(x_shape).astype(np.float32), "lens": np.array([5, 2, 4], np.int32),
            "h0": rng.standard_normal(s_shape).astype(np.float32) * 0.5}
    if op == "LSTM":
        ins.append(helper.make_tensor_value_info("c0", TensorProto.FLOAT, None))
        feed["c0"] = rng.standard_normal(s_shape).astype(np.float32) * 0.5
    if layout:  # batch-major: X [N, S, I], states [N, D, H]
        feed = {k: (np.ascontiguousarray(v.transpose(1, 0, 2)) if v.ndim == 3 else v) for k, v in feed.items()}
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in node.output]
    return _model([node], ins, outs, init, opset=14), feed


@pytest.mark.parametrize(("op", "direction", "attrs"), _CELL_CASES)
def test_recurrent_cell_matches_onnxruntime(op: str, direction: str, attrs: dict[str, Any]) -> None:
    model, feed = _cell_model(op, direction, attrs, layout=0)
    ours, ref = _run_both(model, feed)
    _assert_close(ours, ref)
    # layout=1 (onnxruntime refuses it): the same numbers, batch-major
    model1, feed1 = _cell_model(op, direction, attrs, layout=1)
    ours1 = mosaicrt.InferenceSession(model1).run(None, feed1)
    _assert_close([ours1[0].transpose(1, 2, 0, 3)] + [o.transpose(1, 0, 2) for o in ours1[1:]], ref)


def _sequence_model() -> bytes:
    """Speech-style stack: 2-layer bidirectional LSTM, then a bidirectional GRU, then a linear head; batch and
    length are dynamic."""
    rng = np.random.default_rng(8)
    init: list[onnx.TensorProto] = [numpy_helper.from_array(np.array([0, 0, -1], np.int64), "merge"),
                                    numpy_helper.from_array(np.array([0, 2, 1, 3], np.int64), "perm_unused")]
    nodes: list[onnx.NodeProto] = []
    x, width = "x", 10
    for i, (op, hidden) in enumerate((("LSTM", 12), ("LSTM", 12), ("GRU", 8))):
        node = _recurrent_node(op, hidden, width, 2, rng=rng, prefix=f"l{i}", x=x, init=init, linear_before_reset=1) \
            if op == "GRU" else _recurrent_node(op, hidden, width, 2, rng=rng, prefix=f"l{i}", x=x, init=init)
        nodes.append(node)
        # Y [S, 2, N, H] -> [S, N, 2, H] -> [S, N, 2H]
        nodes.append(helper.make_node("Transpose", [node.output[0]], [f"t{i}"], perm=[0, 2, 1, 3]))
        nodes.append(helper.make_node("Reshape", [f"t{i}", "merge"], [f"m{i}"]))
        x, width = f"m{i}", 2 * hidden
    head = (rng.standard_normal((width, 5)) * 0.3).astype(np.float32)
    init.append(numpy_helper.from_array(head, "head"))
    nodes.append(helper.make_node("MatMul", [x, "head"], ["y"]))
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["S", "N", 10])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["S", "N", 5])], init, opset=14)


@pytest.mark.parametrize(("seq", "batch"), [(1, 1), (7, 2), (16, 3)])
def test_bidirectional_lstm_gru_sequence_model(seq: int, batch: int) -> None:
    model = _sequence_model()
    feed = {"x": np.random.default_rng(seq).standard_normal((seq, batch, 10)).astype(np.float32)}
    _assert_close(*_run_both(model, feed))


def test_recurrent_refuses_bad_attributes_at_session_creation() -> None:
    init: list[onnx.TensorProto] = []
    rng = np.random.default_rng(0)
    node = _recurrent_node("LSTM", 4, 3, 1, rng=rng, prefix="l", x="x", init=init,
                           activations=["Sigmoid", "Gelu", "Tanh"])
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 3])],
                   [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in node.output], init)
    with pytest.raises(mosaicrt.MosaicrtError, match=r"LSTM.*activation 'Gelu'"):
        mosaicrt.InferenceSession(model)
    node = _recurrent_node("GRU", 4, 3, 1, rng=rng, prefix="g", x="x", init=init, direction="sideways")
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 3])],
                   [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in node.output], init)
    with pytest.raises(mosaicrt.MosaicrtError, match=r"GRU.*direction.*'sideways'"):
        mosaicrt.InferenceSession(model)


# --- GridSample, Attention, RotaryEmbedding ---------------------------------------------------------------------


@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_matches_onnxruntime(mode: str, padding: str, align: int) -> None:
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3, 6, 7)).astype(np.float32)
    grid = rng.uniform(-1.3, 1.3, (2, 5, 4, 2)).astype(np.float32)  # some points fall outside
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding, align_corners=align)
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                            helper.make_tensor_value_info("grid", TensorProto.FLOAT, grid.shape)],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], opset=16)
    _assert_close(*_run_both(model, {"x": x, "grid": grid}))


@pytest.mark.parametrize(("q_heads", "kv_heads", "causal", "mask"), [
    (4, 4, 0, None), (4, 2, 1, None), (4, 1, 0, "bool"), (4, 2, 0, "float"), (2, 2, 1, "float")])
def test_attention_matches_onnxruntime(q_heads: int, kv_heads: int, causal: int, mask: str | None) -> None:
    rng = np.random.default_rng(10)
    b, sq, skv, d = 2, 5, 7, 8
    feed = {"q": rng.standard_normal((b, q_heads, sq, d)).astype(np.float32),
            "k": rng.standard_normal((b, kv_heads, skv, d)).astype(np.float32),
            "v": rng.standard_normal((b, kv_heads, skv, d)).astype(np.float32)}
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, v.shape) for n, v in feed.items()]
    names = ["q", "k", "v"]
    if mask == "bool":
        feed["m"] = rng.random((sq, skv)) > 0.3
        feed["m"][:, 0] = True
        ins.append(helper.make_tensor_value_info("m", TensorProto.BOOL, feed["m"].shape))
        names.append("m")
    elif mask == "float":
        feed["m"] = rng.standard_normal((b, 1, sq, skv)).astype(np.float32)
        ins.append(helper.make_tensor_value_info("m", TensorProto.FLOAT, feed["m"].shape))
        names.append("m")
    node = helper.make_node("Attention", names, ["y"], is_causal=causal)
    model = _model([node], ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], opset=23)
    model_proto = onnx.load_from_string(model)
    model_proto.ir_version = 10
    _assert_close(*_run_both(model_proto.SerializeToString(), feed))


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_matches_onnxruntime(interleaved: int) -> None:
    rng = np.random.default_rng(11)
    b, h, s, d, positions = 2, 3, 5, 8, 16
    angles = rng.uniform(0, 6.28, (positions, d // 2))
    feed = {"x": rng.standard_normal((b, h, s, d)).astype(np.float32),
            "pos": rng.integers(0, positions, (b, s)).astype(np.int64)}
    init = [numpy_helper.from_array(np.cos(angles).astype(np.float32), "cos"),
            numpy_helper.from_array(np.sin(angles).astype(np.float32), "sin")]
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], interleaved=interleaved)
    model = onnx.load_from_string(_model(
        [node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, feed["x"].shape),
                 helper.make_tensor_value_info("pos", TensorProto.INT64, feed["pos"].shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], init, opset=23))
    model.ir_version = 10
    _assert_close(*_run_both(model.SerializeToString(), feed))


@pytest.mark.parametrize("center", [0, 1])
def test_non_max_suppression_matches_onnxruntime(center: int) -> None:
    rng = np.random.default_rng(12)
    xy = rng.uniform(0, 10, (2, 40, 2))
    wh = rng.uniform(1, 4, (2, 40, 2))
    boxes = np.concatenate([xy, wh] if center else [xy[..., ::-1], (xy + wh)[..., ::-1]], axis=-1)
    feed = {"boxes": boxes.astype(np.float32), "scores": rng.random((2, 3, 40)).astype(np.float32)}
    init = [numpy_helper.from_array(np.array([6], np.int64), "max"),
            numpy_helper.from_array(np.array([0.4], np.float32), "iou"),
            numpy_helper.from_array(np.array([0.2], np.float32), "score")]
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores", "max", "iou", "score"], ["sel"],
                            center_point_box=center)
    model = _model([node], [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [2, 40, 4]),
                            helper.make_tensor_value_info("scores", TensorProto.FLOAT, [2, 3, 40])],
                   [helper.make_tensor_value_info("sel", TensorProto.INT64, None)], init, opset=11)
    ours, ref = _run_both(model, feed)
    assert ours[0].shape[0] > 6  # several classes keep boxes
    np.testing.assert_array_equal(ours[0], ref[0])


@pytest.mark.parametrize(("mode", "ctm"), [("avg", "half_pixel"), ("max", "half_pixel"), ("avg", "output_half_pixel")])
def test_roi_align_matches_onnxruntime(mode: str, ctm: str) -> None:
    rng = np.random.default_rng(13)
    x = rng.standard_normal((2, 4, 12, 10)).astype(np.float32)
    xy = rng.uniform(0, 14, (6, 2))
    rois = np.concatenate([xy, xy + rng.uniform(1, 8, (6, 2))], axis=1).astype(np.float32)
    idx = np.array([0, 1, 1, 0, 1, 0], np.int64)
    node = helper.make_node("RoiAlign", ["x", "rois", "idx"], ["y"], mode=mode, coordinate_transformation_mode=ctm,
                            output_height=3, output_width=4, spatial_scale=0.7, sampling_ratio=0)
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                            helper.make_tensor_value_info("rois", TensorProto.FLOAT, rois.shape),
                            helper.make_tensor_value_info("idx", TensorProto.INT64, idx.shape)],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], opset=16)
    _assert_close(*_run_both(model, {"x": x, "rois": rois, "idx": idx}))


@pytest.mark.parametrize("align", [0, 1])
def test_spatial_transformer_affine_grid_and_grid_sample(align: int) -> None:
    """Spatial-transformer block: AffineGrid from predicted theta, then bilinear GridSample."""
    rng = np.random.default_rng(14)
    x = rng.standard_normal((2, 3, 9, 11)).astype(np.float32)
    theta = (np.eye(2, 3)[None] + rng.normal(0, 0.2, (2, 2, 3))).astype(np.float32)
    init = [numpy_helper.from_array(np.array([2, 3, 7, 8], np.int64), "size")]
    nodes = [helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align),
             helper.make_node("GridSample", ["x", "grid"], ["y"], mode="linear", align_corners=align)]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                           helper.make_tensor_value_info("theta", TensorProto.FLOAT, theta.shape)],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], init, opset=20)
    _assert_close(*_run_both(model, {"x": x, "theta": theta}))


def test_stft_with_hann_window_matches_onnxruntime() -> None:
    rng = np.random.default_rng(15)
    signal = rng.standard_normal((2, 256, 1)).astype(np.float32)
    init = [numpy_helper.from_array(np.array(64, np.int64), "n"), numpy_helper.from_array(np.array(16, np.int64),
                                                                                          "step")]
    nodes = [helper.make_node("HannWindow", ["n"], ["w"]),
             helper.make_node("STFT", ["signal", "step", "w"], ["spec"]),
             helper.make_node("DFT", ["spec", "", "axis"], ["back"], inverse=1)]
    init.append(numpy_helper.from_array(np.array(2, np.int64), "axis"))
    model = _model(nodes, [helper.make_tensor_value_info("signal", TensorProto.FLOAT, signal.shape)],
                   [helper.make_tensor_value_info("spec", TensorProto.FLOAT, None),
                    helper.make_tensor_value_info("back", TensorProto.FLOAT, None)], init, opset=20)
    _assert_close(*_run_both(model, {"signal": signal}), atol=1e-3)


# --- control flow -----------------------------------------------------------------------------------------------


def _scripted_model() -> bytes:
    """What torch scripting emits for a data-dependent loop and branch: a Loop whose trip count comes from the
    input's shape, carrying a running state that reads outer-scope weights, with an If inside the body, a scan
    output, and an If on a reduced value after the loop."""
    rng = np.random.default_rng(16)
    w = (rng.standard_normal((6, 6)) * 0.4).astype(np.float32)
    init = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(0, np.int64), "zero"),
            numpy_helper.from_array(np.array(0.0, np.float32), "fzero"),
            numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    # body(i, cond, h) -> (cond, h', h'_sum): h' = tanh(h @ w + x[i]) if i is even else relu(h @ w) * 2
    even_then = helper.make_graph(
        [helper.make_node("Gather", ["x", "i"], ["xi"], axis=0), helper.make_node("Add", ["hw", "xi"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h_even"])], "then", [],
        [helper.make_tensor_value_info("h_even", TensorProto.FLOAT, None)])
    odd_else = helper.make_graph(
        [helper.make_node("Relu", ["hw"], ["r"]), helper.make_node("Mul", ["r", "two"], ["h_odd"])], "else", [],
        [helper.make_tensor_value_info("h_odd", TensorProto.FLOAT, None)])
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h", "w"], ["hw"]),
         helper.make_node("Mod", ["i", "two_i"], ["parity"]),
         helper.make_node("Equal", ["parity", "zero"], ["is_even"]),
         helper.make_node("If", ["is_even"], ["h_next"], then_branch=even_then, else_branch=odd_else),
         helper.make_node("ReduceSum", ["h_next"], ["h_sum"], keepdims=0),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_next", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("h_sum", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.array(2, np.int64), "two_i")])
    pos_then = helper.make_graph([helper.make_node("Identity", ["h_final"], ["out_t"])], "pos", [],
                                 [helper.make_tensor_value_info("out_t", TensorProto.FLOAT, None)])
    neg_else = helper.make_graph([helper.make_node("Neg", ["h_final"], ["out_e"])], "neg", [],
                                 [helper.make_tensor_value_info("out_e", TensorProto.FLOAT, None)])
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["steps"], axis=0),
        helper.make_node("ReduceMean", ["x"], ["h0"], axes=[0], keepdims=0),
        helper.make_node("Loop", ["steps", "", "h0"], ["h_final", "sums"], body=body),
        helper.make_node("ReduceSum", ["h_final"], ["total"], keepdims=0),
        helper.make_node("Greater", ["total", "fzero"], ["positive"]),
        helper.make_node("If", ["positive"], ["y"], then_branch=pos_then, else_branch=neg_else),
    ]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 6])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6]),
                   helper.make_tensor_value_info("sums", TensorProto.FLOAT, ["T"])], init, opset=13)


@pytest.mark.parametrize("steps", [0, 1, 4, 9])
def test_scripted_loop_and_if_match_onnxruntime(steps: int) -> None:
    x = np.random.default_rng(steps).standard_normal((steps, 6)).astype(np.float32)
    if steps == 0:  # an empty loop: the state passes through and the scan output is empty
        x = np.zeros((0, 6), np.float32)
        ours = mosaicrt.InferenceSession(_scripted_model()).run(None, {"x": x})
        assert ours[1].shape == (0,)
        return
    _assert_close(*_run_both(_scripted_model(), {"x": x}))


def test_scan_cumulative_sum_matches_onnxruntime() -> None:
    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "xi"], ["acc_out"]), helper.make_node("Mul", ["acc_out", "scale"], ["yi"])],
        "body", [helper.make_tensor_value_info("acc", TensorProto.FLOAT, [3]),
                 helper.make_tensor_value_info("xi", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("yi", TensorProto.FLOAT, [3])])
    node = helper.make_node("Scan", ["init", "x"], ["final", "ys"], body=body, num_scan_inputs=1,
                            scan_input_directions=[1], scan_output_axes=[1])
    init = [numpy_helper.from_array(np.array(0.5, np.float32), "scale")]
    model = _model([node], [helper.make_tensor_value_info("init", TensorProto.FLOAT, [3]),
                            helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 3])],
                   [helper.make_tensor_value_info("final", TensorProto.FLOAT, None),
                    helper.make_tensor_value_info("ys", TensorProto.FLOAT, None)], init, opset=16)
    feed = {"init": np.ones(3, np.float32), "x": np.arange(15, dtype=np.float32).reshape(5, 3)}
    _assert_close(*_run_both(model, feed))


def test_unsupported_op_inside_a_branch_is_refused_at_session_creation() -> None:
    branch = helper.make_graph([helper.make_node("ImageDecoder", ["s"], ["o"])], "b", [],
                               [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)])
    ok = helper.make_graph([helper.make_node("Identity", ["x"], ["o2"])], "ok", [],
                           [helper.make_tensor_value_info("o2", TensorProto.FLOAT, None)])
    node = helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=ok)
    model = _model([node], [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
                            helper.make_tensor_value_info("s", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with pytest.raises(mosaicrt.NotImplementedInRuntime, match=r"If.*then_branch.*ImageDecoder"):
        mosaicrt.InferenceSession(model)


# --- com.microsoft operators (onnxruntime's quantizer and transformer optimizer) ---------------------------------


def _ms_model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], init: list[onnx.TensorProto],
              n_out: int = 1) -> bytes:
    outs = [onnx.ValueInfoProto(name=nodes[-1].output[i]) for i in range(n_out)]
    graph = helper.make_graph(nodes, "g", inputs, outs, initializer=init)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model.SerializeToString()


def _q(name: str, scale: float, zp: int, dtype: Any = np.uint8) -> list[onnx.TensorProto]:
    return [numpy_helper.from_array(np.array(scale, np.float32), f"{name}_s"),
            numpy_helper.from_array(np.array(zp, dtype), f"{name}_z")]


def _assert_within_one_lsb(ours: list[Any], ref: list[Any]) -> None:
    for a, e in zip(ours, ref, strict=True):
        assert a.dtype == e.dtype and a.shape == e.shape
        assert np.abs(a.astype(np.int32) - e.astype(np.int32)).max(initial=0) <= 1


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_contrib_ops_match_onnxruntime(dtype: Any) -> None:
    rng = np.random.default_rng(17)
    lo, hi = (0, 256) if dtype == np.uint8 else (-128, 128)
    zp = 128 if dtype == np.uint8 else 3
    a = rng.integers(lo, hi, (2, 4, 5, 5)).astype(dtype)
    b = rng.integers(lo, hi, (4, 1, 1)).astype(dtype)
    init = _q("a", 0.05, zp, dtype) + _q("b", 0.03, zp - 1, dtype) + _q("c", 0.07, zp, dtype)
    ins = [helper.make_tensor_value_info("a", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), a.shape),
           helper.make_tensor_value_info("b", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), b.shape)]
    cases = [
        [helper.make_node("QLinearAdd", ["a", "a_s", "a_z", "b", "b_s", "b_z", "c_s", "c_z"], ["y"],
                          domain="com.microsoft")],
        [helper.make_node("QLinearMul", ["a", "a_s", "a_z", "b", "b_s", "b_z", "c_s", "c_z"], ["y"],
                          domain="com.microsoft")],
        [helper.make_node("QLinearSigmoid", ["a", "a_s", "a_z", "c_s", "c_z"], ["y"], domain="com.microsoft")],
        [helper.make_node("QLinearLeakyRelu", ["a", "a_s", "a_z", "c_s", "c_z"], ["y"], domain="com.microsoft",
                          alpha=0.2)],
        [helper.make_node("QLinearGlobalAveragePool", ["a", "a_s", "a_z", "c_s", "c_z"], ["y"],
                          domain="com.microsoft")],
        [helper.make_node("QLinearConcat", ["c_s", "c_z", "a", "a_s", "a_z", "a", "b_s", "b_z"], ["y"],
                          domain="com.microsoft", axis=1)],
    ]
    for nodes in cases:
        _assert_within_one_lsb(*_run_both(_ms_model(nodes, ins, init), {"a": a, "b": b}))


@pytest.mark.parametrize("out_type", [np.uint8, np.int8], ids=["u8", "s8"])
@pytest.mark.parametrize("n", [1, 15, 16, 1001, 40_003])
@pytest.mark.parametrize("threads", [1, 2])
def test_quantize_linear_float_rows(out_type: Any, n: int, threads: int) -> None:
    """QuantizeLinear of float32 with one scale (the input of every quantized CNN), 16 values a step plus a
    tail: round half to even of x / scale in float32, plus the zero point, saturated; NaN gives the lowest
    value. Ties, values past the range and infinities are placed all along the row (40 003 values: split over
    two threads at an offset that is not a multiple of 16)."""
    scale, zp = np.float32(0.25), out_type(3)
    rng = np.random.default_rng(n)
    x = (rng.integers(-700, 700, n).astype(np.float32) * np.float32(0.125))  # many exact ties at .5
    special = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 0.375, -0.375, 63.875], np.float32)
    x[rng.choice(n, min(n, 40), replace=False)] = rng.choice(special, min(n, 40))
    info = np.iinfo(out_type)
    q = np.round(x / scale).astype(np.float64) + int(zp)
    want = np.clip(np.nan_to_num(q, nan=info.min), info.min, info.max).astype(out_type)
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])
    t = helper.np_dtype_to_tensor_dtype(np.dtype(out_type))
    graph = helper.make_graph([node], "q", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
                              [helper.make_tensor_value_info("y", t, None)],
                              [helper.make_tensor("s", TensorProto.FLOAT, [], [float(scale)]),
                               helper.make_tensor("z", t, [], [int(zp)])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = threads
    (got,) = mosaicrt.InferenceSession(model.SerializeToString(), opts).run(None, {"x": x})
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("nan", [False, True], ids=["finite", "nan"])
@pytest.mark.parametrize("n", [1, 15, 16, 17, 512, 1001, 40_003])
def test_dynamic_quantize_linear_rows(n: int, nan: bool) -> None:
    """DynamicQuantizeLinear over rows of every length (16 values a step plus a tail, and past 16384 values the
    range and the quantization split over the threads): the range [min(x, 0), max(x, 0)] with NaN skipped,
    scale = range / 255, zero point = round(-min / scale) saturated, y = round half to even of x / scale (in
    float32) plus the zero point, saturated; NaN gives 0. The range is pinned by two values so that many others
    sit at a tie (k + 1/2) * scale and an ulp either side, where x * (1 / scale) rounds differently."""
    rng = np.random.default_rng(n)
    f32 = np.float32
    x = rng.standard_normal(n).astype(f32)
    if n > 2:
        lo, hi = f32(-3.1), f32(4.7)
        scale = f32((hi - lo) / f32(255))
        ties = ((rng.integers(-100, 100, n) + f32(0.5)).astype(f32) * scale).astype(f32)
        ties = np.nextafter(ties, np.where(rng.integers(0, 3, n) == 0, f32(-np.inf), f32(np.inf))) \
            if n > 16 else ties
        x = np.where(rng.integers(0, 2, n) == 0, ties, np.clip(x, lo, hi)).astype(f32)
        x[n // 2], x[-1] = lo, hi
    if nan:
        x[rng.choice(n, max(1, n // 50), replace=False)] = np.nan
    finite = x[~np.isnan(x)]
    lo, hi = min(np.float32(0), finite.min(initial=0)), max(np.float32(0), finite.max(initial=0))
    scale = np.float32(1) if hi == lo else np.float32((hi - lo) / np.float32(255))
    zp = np.float32(np.round(np.clip(np.float32(0) - lo / scale, 0, 255)))
    q = np.round(np.clip(x / scale, np.float32(-1e6), np.float32(1e6))) + zp
    want = np.clip(np.nan_to_num(q, nan=0), 0, 255).astype(np.uint8)
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    graph = helper.make_graph([node], "dq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
                              [helper.make_tensor_value_info(v, t, None) for v, t in
                               (("y", TensorProto.UINT8), ("s", TensorProto.FLOAT), ("z", TensorProto.UINT8))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = 2
    y, s, z = mosaicrt.InferenceSession(model.SerializeToString(), sess_options=opts).run(None, {"x": x})
    assert s == scale and z == np.uint8(zp)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("n", [1, 15, 16, 17, 1000, 40_003])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_qlinear_binary_same_shape_exact(op: str, dtype: Any, n: int) -> None:
    """Same-shaped operands (a quantized residual Add) take the vector paths (16 values a step, tails, the
    rows split over 2 threads): every byte equals the float32 arithmetic the op is defined by here, the
    dequantized values combined, divided by the output scale, rounded half to even, shifted, saturated."""
    rng = np.random.default_rng(n)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)
    (sa, za), (sb, zb), (sc, zc) = (0.05, 7), (0.03, -4), (0.07 if op == "QLinearAdd" else 0.9, 5)
    if dtype == np.uint8:
        za, zb, zc = za + 120, zb + 130, zc + 125
    init = _q("a", sa, za, dtype) + _q("b", sb, zb, dtype) + _q("c", sc, zc, dtype)
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    ins = [helper.make_tensor_value_info("a", t, [n]), helper.make_tensor_value_info("b", t, [n])]
    node = helper.make_node(op, ["a", "a_s", "a_z", "b", "b_s", "b_z", "c_s", "c_z"], ["y"], domain="com.microsoft")
    f32 = np.float32
    va = (a.astype(np.int32) - za).astype(f32) * f32(sa)
    vb = (b.astype(np.int32) - zb).astype(f32) * f32(sb)
    v = (va + vb if op == "QLinearAdd" else va * vb) / f32(sc)
    want = np.clip(np.rint(v) + f32(zc), info.min, info.max).astype(dtype)
    sessions: list[mosaicrt.InferenceSession] = []  # all alive: none reuses freed buffers
    for threads in (1, 2):
        opts = mosaicrt.SessionOptions()
        opts.intra_op_num_threads = threads
        sessions.append(mosaicrt.InferenceSession(_ms_model([node], ins, init), opts))
        (got,) = sessions[-1].run(None, {"a": a, "b": b})
        np.testing.assert_array_equal(got, want, err_msg=f"{threads} threads")


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_add_saturates_quotients_past_int32(dtype: Any) -> None:
    """An output scale of 1e-20 makes quotients far past int32's range: each saturates to the bound of its sign
    (a zero sum gives the zero point), on the vector paths and the tail alike."""
    info = np.iinfo(dtype)
    n = 16 * 16 + 5
    rng = np.random.default_rng(3)
    a = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)
    za, zb, zc = (128, 128, 128) if dtype == np.uint8 else (0, 0, 0)
    b[::7] = (2 * za - a[::7].astype(np.int32)).clip(info.min, info.max)  # some sums exactly zero
    init = _q("a", 0.5, za, dtype) + _q("b", 0.5, zb, dtype) + _q("c", 1e-20, zc, dtype)
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    ins = [helper.make_tensor_value_info("a", t, [n]), helper.make_tensor_value_info("b", t, [n])]
    node = helper.make_node("QLinearAdd", ["a", "a_s", "a_z", "b", "b_s", "b_z", "c_s", "c_z"], ["y"],
                            domain="com.microsoft")
    total = (a.astype(np.int32) - za) + (b.astype(np.int32) - zb)
    want = np.where(total > 0, info.max, np.where(total < 0, info.min, zc)).astype(dtype)
    assert (total == 0).any() and (total > 0).any() and (total < 0).any()
    (got,) = mosaicrt.InferenceSession(_ms_model([node], ins, init)).run(None, {"a": a, "b": b})
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("quant_out", [True, False])
def test_qgemm_matches_onnxruntime(quant_out: bool) -> None:
    rng = np.random.default_rng(18)
    a = rng.integers(0, 256, (5, 16)).astype(np.uint8)
    w = rng.integers(-127, 128, (8, 16)).astype(np.int8)
    bias = rng.integers(-500, 500, (8,)).astype(np.int32)
    init = [*_q("a", 0.02, 120), numpy_helper.from_array(w, "w"),
            numpy_helper.from_array(np.full(8, 0.01, np.float32), "w_s"),
            numpy_helper.from_array(np.zeros(8, np.int8), "w_z"), numpy_helper.from_array(bias, "bias"),
            *_q("y", 0.1, 100)]
    inputs = ["a", "a_s", "a_z", "w", "w_s", "w_z", "bias"] + (["y_s", "y_z"] if quant_out else [])
    node = helper.make_node("QGemm", inputs, ["y"], domain="com.microsoft", transB=1, alpha=1.0)
    model = _ms_model([node], [helper.make_tensor_value_info("a", TensorProto.UINT8, a.shape)], init)
    ours, ref = _run_both(model, {"a": a})
    # the definition, exactly: (a - 120) . w^T + bias in integers, times 0.02 * 0.01, requantized to 0.1 / 100
    exact = ((a.astype(np.int64) - 120) @ w.astype(np.int64).T + bias) * (np.float64(np.float32(0.02)) *
                                                                          np.float64(np.float32(0.01)))
    if quant_out:
        exact = np.clip(np.round(exact / np.float64(np.float32(0.1))) + 100, 0, 255).astype(np.uint8)
        _assert_within_one_lsb(ours, [exact])
    else:
        _assert_close(ours, [exact.astype(np.float32)])
    # onnxruntime too where its uint8 x int8 kernels are exact (oracles.onnxruntime_u8s8_is_exact)
    from oracles import onnxruntime_u8s8_is_exact

    if onnxruntime_u8s8_is_exact():
        (_assert_within_one_lsb if quant_out else _assert_close)(ours, ref)


def test_transformer_contrib_ops_match_onnxruntime() -> None:
    rng = np.random.default_rng(19)
    x = rng.standard_normal((2, 5, 16)).astype(np.float32)
    init = [numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), n) for n in ("bias", "gamma", "beta")]
    init.append(numpy_helper.from_array(rng.standard_normal((16, 12)).astype(np.float32), "w"))
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
           helper.make_tensor_value_info("skip", TensorProto.FLOAT, x.shape)]
    feed = {"x": x, "skip": rng.standard_normal(x.shape).astype(np.float32)}
    cases = [
        ([helper.make_node("Gelu", ["x"], ["y"], domain="com.microsoft")], 1),
        ([helper.make_node("BiasGelu", ["x", "bias"], ["y"], domain="com.microsoft")], 1),
        ([helper.make_node("FastGelu", ["x", "bias"], ["y"], domain="com.microsoft")], 1),
        ([helper.make_node("SkipLayerNormalization", ["x", "skip", "gamma", "beta", "bias"], ["y", "", "", "sum"],
                           domain="com.microsoft", epsilon=1e-5)], 1),
        ([helper.make_node("SkipSimplifiedLayerNormalization", ["x", "skip", "gamma"], ["y"],
                           domain="com.microsoft", epsilon=1e-6)], 1),
        ([helper.make_node("FusedMatMul", ["x", "w"], ["y"], domain="com.microsoft", alpha=0.5)], 1),
        ([helper.make_node("SimplifiedLayerNormalization", ["x", "gamma"], ["y"], epsilon=1e-6)], 1),
    ]
    for nodes, n_out in cases:
        _assert_close(*_run_both(_ms_model(nodes, ins, init, n_out), feed))


@pytest.mark.parametrize("n", [1, 7, 15, 16, 17, 31, 33, 1000, 1025])
def test_gelu_matches_the_erf_definition_at_every_length(n: int) -> None:
    # Lengths around the 8- and 16-lane loops, with large, tiny, infinite and NaN values among them.
    import math

    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    specials = np.array([0.0, -0.0, 1e-30, -9.5, 9.5, 40.0, -40.0, np.inf, -np.inf, np.nan], np.float32)
    x[: min(n, specials.size)] = specials[: min(n, specials.size)]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])]
    model = _ms_model([helper.make_node("Gelu", ["x"], ["y"], domain="com.microsoft")], ins, [], 1)
    got = mosaicrt.InferenceSession(model).run(None, {"x": x})[0]
    # at -inf the definition is -inf * 0: NaN, as onnxruntime gives
    want = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) if math.isfinite(v) else
                     (v if v != -math.inf else math.nan) for v in x.astype(np.float64)], np.float64)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-6, atol=1e-6, equal_nan=True)


def _small_cnn() -> onnx.ModelProto:
    rng = np.random.default_rng(20)
    init: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []
    c1, r1, f1 = _conv("c1", "x", 3, 8, rng=rng, init=init)
    c2, r2, f2 = _conv("c2", f1, 8, 8, rng=rng, init=init)
    nodes += [c1, r1, c2, r2, helper.make_node("Add", [f1, f2], ["res"]),
              helper.make_node("Sigmoid", ["res"], ["gate"]), helper.make_node("Mul", ["res", "gate"], ["sw"]),
              helper.make_node("GlobalAveragePool", ["sw"], ["gap"]), helper.make_node("Flatten", ["gap"], ["flat"])]
    init += [numpy_helper.from_array((rng.standard_normal((8, 5)) * 0.5).astype(np.float32), "fc_w"),
             numpy_helper.from_array((rng.standard_normal(5) * 0.1).astype(np.float32), "fc_b")]
    nodes.append(helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["y"]))
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])], initializer=init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("fmt", ["QOperator", "QDQ"])
def test_statically_quantized_cnn_matches_onnxruntime(fmt: str, tmp_path: Any) -> None:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(21)
            self.batches = iter([{"x": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)} for _ in range(4)])

        def get_next(self) -> dict[str, np.ndarray[Any, Any]] | None:
            return next(self.batches, None)

    src, dst = tmp_path / "cnn.onnx", tmp_path / "cnn_q.onnx"
    onnx.save(_small_cnn(), src)
    quantize_static(str(src), str(dst), Reader(), quant_format=getattr(QuantFormat, fmt),
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    model = dst.read_bytes()
    ops = {n.op_type for n in onnx.load_from_string(model).graph.node}
    assert ("QLinearConv" in ops) if fmt == "QOperator" else ("QuantizeLinear" in ops)
    feed = {"x": np.random.default_rng(22).standard_normal((2, 3, 16, 16)).astype(np.float32)}
    ours, ref = _run_both(model, feed)
    # outputs are dequantized: within one quantization step of the output
    step = float(np.abs(ref[0]).max()) / 100
    np.testing.assert_allclose(ours[0], ref[0], atol=step)


def _mlp(k: int, hidden: int, out: int) -> onnx.ModelProto:
    rng = np.random.default_rng(23)
    init = [numpy_helper.from_array((rng.standard_normal((k, hidden)) / np.sqrt(k)).astype(np.float32), "w1"),
            numpy_helper.from_array((rng.standard_normal(hidden) * 0.1).astype(np.float32), "b1"),
            numpy_helper.from_array((rng.standard_normal((hidden, out)) / np.sqrt(hidden)).astype(np.float32), "w2")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", out])], initializer=init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize(("bits", "symmetric", "block"), [(4, False, 32), (4, True, 64), (8, False, 32)])
def test_matmul_nbits_mlp_from_the_onnxruntime_quantizer(bits: int, symmetric: bool, block: int) -> None:
    quantizer_mod = pytest.importorskip("onnxruntime.quantization.matmul_nbits_quantizer",
                                        reason="the MatMulNBits quantizer needs the onnx-ir package")
    q = quantizer_mod.MatMulNBitsQuantizer(_mlp(128, 96, 40), bits=bits, block_size=block, is_symmetric=symmetric)
    q.process()
    model = q.model.model if hasattr(q.model, "model") else q.model
    assert any(n.op_type == "MatMulNBits" for n in model.graph.node)
    feed = {"x": np.random.default_rng(24).standard_normal((3, 128)).astype(np.float32)}
    _assert_close(*_run_both(model.SerializeToString(), feed), atol=1e-3)


def test_matmul_nbits_with_float_zero_points_and_bias() -> None:
    """Weights quantized here block-wise (4-bit, float zero points, a K that is not a multiple of the block)."""
    rng = np.random.default_rng(25)
    k, n, block = 72, 20, 32
    blocks = (k + block - 1) // block
    q = rng.integers(0, 16, (n, blocks * block)).astype(np.uint8)
    packed = (q[:, 0::2] | (q[:, 1::2] << 4)).reshape(n, blocks, block // 2)
    scales = rng.uniform(0.01, 0.05, n * blocks).astype(np.float32)
    zps = rng.uniform(6, 10, n * blocks).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    init = [numpy_helper.from_array(packed, "b"), numpy_helper.from_array(scales, "s"),
            numpy_helper.from_array(zps, "z"), numpy_helper.from_array(bias, "bias")]
    node = helper.make_node("MatMulNBits", ["a", "b", "s", "z", "", "bias"], ["y"], domain="com.microsoft", K=k, N=n,
                            bits=4, block_size=block)
    model = _ms_model([node], [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3, k])], init)
    feed = {"a": rng.standard_normal((2, 3, k)).astype(np.float32)}
    ours, ref = _run_both(model, feed)
    w = ((q[:, :k].astype(np.float32) - np.repeat(zps.reshape(n, blocks), block, 1)[:, :k])
         * np.repeat(scales.reshape(n, blocks), block, 1)[:, :k])
    np.testing.assert_allclose(ours[0], feed["a"] @ w.T + bias, rtol=1e-4, atol=1e-4)
    _assert_close(ours, ref, atol=1e-3)


def test_encoder_after_the_onnxruntime_transformer_optimizer(tmp_path: Any) -> None:
    """The transformer encoder of the model tests, fused by onnxruntime.transformers.optimizer (BiasGelu,
    SkipLayerNormalization from com.microsoft), run against onnxruntime."""
    import models  # tests/wheel is on sys.path (conftest.py)
    from onnxruntime.transformers import optimizer

    src = tmp_path / "encoder.onnx"
    onnx.save(models.transformer(d_model=64, heads=4, d_ff=256, layers=2, gelu="erf"), src)
    optimized = optimizer.optimize_model(str(src), model_type="bert", num_heads=4, hidden_size=64, opt_level=0)
    fused = {n.op_type for n in optimized.model.graph.node if n.domain == "com.microsoft"}
    assert {"BiasGelu", "SkipLayerNormalization"} <= fused, fused
    optimized.save_model_to_file(str(tmp_path / "encoder_opt.onnx"))
    model = (tmp_path / "encoder_opt.onnx").read_bytes()
    for seq in (3, 17):
        feed = {"input": np.random.default_rng(seq).standard_normal((2, seq, 64)).astype(np.float32)}
        _assert_close(*_run_both(model, feed))


@pytest.mark.parametrize(("mask", "causal"), [(None, 0), ("lengths", 0), ("raw", 0), ("3d", 0), (None, 1),
                                              ("bias", 0)])
def test_ms_attention_matches_onnxruntime(mask: str | None, causal: int) -> None:
    rng = np.random.default_rng(26)
    b, s, d, heads = 2, 6, 32, 4
    init = [numpy_helper.from_array((rng.standard_normal((d, 3 * d)) * 0.2).astype(np.float32), "w"),
            numpy_helper.from_array((rng.standard_normal(3 * d) * 0.1).astype(np.float32), "bias")]
    feed: dict[str, Any] = {"x": rng.standard_normal((b, s, d)).astype(np.float32)}
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [b, s, d])]
    names = ["x", "w", "bias"]
    if mask == "lengths":
        feed["m"] = np.array([6, 3], np.int32)
    elif mask == "raw":
        feed["m"] = (rng.random((b, s)) > 0.3).astype(np.int32)
        feed["m"][:, 0] = 1
    elif mask == "3d":
        feed["m"] = (rng.random((b, s, s)) > 0.3).astype(np.int32)
        feed["m"][:, :, 0] = 1
    if mask in ("lengths", "raw", "3d"):
        ins.append(helper.make_tensor_value_info("m", TensorProto.INT32, feed["m"].shape))
        names.append("m")
    if mask == "bias":
        feed["ab"] = rng.standard_normal((1, heads, s, s)).astype(np.float32)
        ins.append(helper.make_tensor_value_info("ab", TensorProto.FLOAT, feed["ab"].shape))
        names += ["", "", "ab"]
    node = helper.make_node("Attention", names, ["y"], domain="com.microsoft", num_heads=heads, unidirectional=causal)
    _assert_close(*_run_both(_ms_model([node], ins, init), feed))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=["u8", "s8"])
@pytest.mark.parametrize(("shape", "channels_last"), [((2, 6, 7, 7), 0), ((1, 3, 1, 1), 0), ((2, 5, 9, 4), 1),
                                                      ((1, 2, 300, 300), 0)])
def test_qlinear_global_average_pool_rounds_the_exact_mean(dtype: Any, shape: tuple[int, ...],
                                                           channels_last: int) -> None:
    """QLinearGlobalAveragePool, NCHW and NHWC: each channel's mean of (x - zp) * scale over the positions,
    requantized (round half to even, zero point, saturation), against float64 numpy. Ties of the rounding are
    left to the 1-LSB check, the rest must be exact; a channel at each end of the range saturates."""
    rng = np.random.default_rng(sum(shape) + channels_last)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)
    top, bottom = ((0, ..., 0), (-1, ..., -1)) if channels_last else ((0, 0), (-1, -1))
    x[top] = info.max  # a whole channel at each end of the range: both saturate
    x[bottom] = info.min
    x_s, x_z, y_s, y_z = 0.05, (120 if dtype == np.uint8 else -7), 0.03, (100 if dtype == np.uint8 else 5)
    init = _q("x", x_s, x_z, dtype) + _q("y", y_s, y_z, dtype)
    node = helper.make_node("QLinearGlobalAveragePool", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"],
                            domain="com.microsoft", channels_last=channels_last)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = _ms_model([node], [helper.make_tensor_value_info("x", elem, shape)], init)
    (got,) = mosaicrt.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    axes = (1, 2) if channels_last else (2, 3)
    mean = ((x.astype(np.float64) - x_z) * np.float64(np.float32(x_s))).mean(axis=axes, keepdims=True)
    pre = mean / np.float64(np.float32(y_s))
    want = np.clip(np.round(pre) + y_z, info.min, info.max).astype(dtype)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got[top] == info.max and got[bottom] == info.min
    tie = np.abs(np.abs(pre - np.floor(pre)) - 0.5) < 1e-4
    np.testing.assert_array_equal(got[~tie], want[~tie])
    assert np.abs(got.astype(np.int32) - want.astype(np.int32)).max(initial=0) <= 1


@pytest.mark.parametrize(("pads", "ceil", "include_pad", "channels_last"), [
    ([0, 0, 0, 0], 0, 0, 0), ([1, 1, 1, 1], 0, 1, 0), ([1, 0, 1, 0], 1, 0, 0), ([0, 0, 0, 0], 0, 0, 1)])
def test_qlinear_average_pool_matches_onnxruntime(pads: list[int], ceil: int, include_pad: int,
                                                  channels_last: int) -> None:
    rng = np.random.default_rng(27)
    shape = (2, 7, 9, 3) if channels_last else (2, 3, 7, 9)
    x = rng.integers(0, 256, shape).astype(np.uint8)
    init = _q("x", 0.05, 120) + _q("y", 0.04, 110)
    node = helper.make_node("QLinearAveragePool", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], domain="com.microsoft",
                            kernel_shape=[3, 3], strides=[2, 2], pads=pads, ceil_mode=ceil,
                            count_include_pad=include_pad, channels_last=channels_last)
    model = _ms_model([node], [helper.make_tensor_value_info("x", TensorProto.UINT8, shape)], init)
    _assert_within_one_lsb(*_run_both(model, {"x": x}))


@pytest.mark.parametrize("with_segments", [True, False])
def test_embed_layer_normalization_matches_onnxruntime(with_segments: bool) -> None:
    rng = np.random.default_rng(28)
    b, s, h, vocab = 2, 7, 16, 50
    init = [numpy_helper.from_array(rng.standard_normal((vocab, h)).astype(np.float32), "word"),
            numpy_helper.from_array(rng.standard_normal((32, h)).astype(np.float32), "pos"),
            numpy_helper.from_array(rng.standard_normal((2, h)).astype(np.float32), "segemb"),
            numpy_helper.from_array(rng.standard_normal(h).astype(np.float32), "gamma"),
            numpy_helper.from_array(rng.standard_normal(h).astype(np.float32), "beta")]
    feed = {"ids": rng.integers(0, vocab, (b, s)).astype(np.int32),
            "mask": (rng.random((b, s)) > 0.3).astype(np.int32)}
    ins = [helper.make_tensor_value_info("ids", TensorProto.INT32, [b, s]),
           helper.make_tensor_value_info("mask", TensorProto.INT32, [b, s])]
    if with_segments:
        feed["seg"] = rng.integers(0, 2, (b, s)).astype(np.int32)
        ins.append(helper.make_tensor_value_info("seg", TensorProto.INT32, [b, s]))
    names = ["ids", "seg" if with_segments else "", "word", "pos", "segemb" if with_segments else "", "gamma", "beta",
             "mask"]
    node = helper.make_node("EmbedLayerNormalization", names, ["y", "mask_index"], domain="com.microsoft",
                            epsilon=1e-5)
    ours, ref = _run_both(_ms_model([node], ins, init, n_out=2), feed)
    _assert_close(ours[:1], ref[:1])
    np.testing.assert_array_equal(ours[1], ref[1])


@pytest.mark.parametrize(("interleaved", "offset"), [(0, False), (1, False), (0, True)])
def test_ms_rotary_embedding_matches_onnxruntime(interleaved: int, offset: bool) -> None:
    rng = np.random.default_rng(29)
    b, s, heads, d, positions = 2, 5, 3, 8, 16
    angles = rng.uniform(0, 6.28, (positions, d // 2))
    pos = np.array([4], np.int64) if offset else rng.integers(0, positions - 1, (b, s)).astype(np.int64)
    feed = {"x": rng.standard_normal((b, s, heads * d)).astype(np.float32), "pos": pos}
    init = [numpy_helper.from_array(np.cos(angles).astype(np.float32), "cos"),
            numpy_helper.from_array(np.sin(angles).astype(np.float32), "sin")]
    node = helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain="com.microsoft",
                            interleaved=interleaved, num_heads=heads)
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, feed["x"].shape),
           helper.make_tensor_value_info("pos", TensorProto.INT64, pos.shape)]
    _assert_close(*_run_both(_ms_model([node], ins, init), feed))


def _gqa_model(rotary: bool, window: int, packed: bool) -> bytes:
    rng = np.random.default_rng(30)
    init = []
    if rotary:
        angles = rng.uniform(0, 6.28, (64, 8))
        init = [numpy_helper.from_array(np.cos(angles).astype(np.float32), "cos"),
                numpy_helper.from_array(np.sin(angles).astype(np.float32), "sin")]
    names = ["q", "" if packed else "k", "" if packed else "v", "pk", "pv", "seqlens", "total"]
    names += ["cos", "sin"] if rotary else []
    attrs: dict[str, Any] = {"num_heads": 4, "kv_num_heads": 2, "do_rotary": int(rotary)}
    if window > 0:
        attrs["local_window_size"] = window
    node = helper.make_node("GroupQueryAttention", names, ["y", "present_k", "present_v"], domain="com.microsoft",
                            **attrs)
    ins = [helper.make_tensor_value_info("q", TensorProto.FLOAT, ["B", "S", 128 if packed else 64]),
           helper.make_tensor_value_info("pk", TensorProto.FLOAT, ["B", 2, "P", 16]),
           helper.make_tensor_value_info("pv", TensorProto.FLOAT, ["B", 2, "P", 16]),
           helper.make_tensor_value_info("seqlens", TensorProto.INT32, ["B"]),
           helper.make_tensor_value_info("total", TensorProto.INT32, [])]
    if not packed:
        ins += [helper.make_tensor_value_info("k", TensorProto.FLOAT, ["B", "S", 32]),
                helper.make_tensor_value_info("v", TensorProto.FLOAT, ["B", "S", 32])]
    return _ms_model([node], ins, init, n_out=3)


@pytest.mark.parametrize(("rotary", "window", "packed"), [(False, -1, False), (True, -1, False), (False, 3, False),
                                                           (True, -1, True)])
def test_group_query_attention_prompt_then_decode_matches_onnxruntime(rotary: bool, window: int,
                                                                      packed: bool) -> None:
    """A prompt of 5 tokens, then two decode steps feeding the present cache back as past."""
    model = _gqa_model(rotary, window, packed)
    rng = np.random.default_rng(31)
    b = 2
    hidden = 128 if packed else 64
    ours_k = ref_k = np.zeros((b, 2, 0, 16), np.float32)
    ours_v = ref_v = np.zeros((b, 2, 0, 16), np.float32)
    length = 0
    for s in (5, 1, 1):
        length += s
        feed = {"q": rng.standard_normal((b, s, hidden)).astype(np.float32),
                "seqlens": np.full(b, length - 1, np.int32), "total": np.array(length, np.int32)}
        if not packed:
            feed["k"] = rng.standard_normal((b, s, 32)).astype(np.float32)
            feed["v"] = rng.standard_normal((b, s, 32)).astype(np.float32)
        ours = mosaicrt.InferenceSession(model).run(None, {**feed, "pk": ours_k, "pv": ours_v})
        ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {**feed, "pk": ref_k,
                                                                                         "pv": ref_v})
        _assert_close(ours, ref)
        ours_k, ours_v, ref_k, ref_v = ours[1], ours[2], ref[1], ref[2]


def _random_forest_regressor(rng: np.random.Generator, trees: int, features: int, targets: int,
                             aggregate: str) -> bytes:
    """Complete depth-3 trees in the legacy TreeEnsembleRegressor encoding (as sklearn converters write it)."""
    attrs: dict[str, list[Any]] = {k: [] for k in (
        "nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_values", "nodes_modes", "nodes_truenodeids",
        "nodes_falsenodeids", "target_treeids", "target_nodeids", "target_ids", "target_weights")}
    modes = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT"]
    for t in range(trees):
        for node in range(15):  # 7 branches, 8 leaves
            attrs["nodes_treeids"].append(t)
            attrs["nodes_nodeids"].append(node)
            if node < 7:
                attrs["nodes_featureids"].append(int(rng.integers(0, features)))
                attrs["nodes_values"].append(float(rng.standard_normal()))
                attrs["nodes_modes"].append(modes[int(rng.integers(0, 4))])
                attrs["nodes_truenodeids"].append(2 * node + 1)
                attrs["nodes_falsenodeids"].append(2 * node + 2)
            else:
                attrs["nodes_featureids"].append(0)
                attrs["nodes_values"].append(0.0)
                attrs["nodes_modes"].append("LEAF")
                attrs["nodes_truenodeids"].append(0)
                attrs["nodes_falsenodeids"].append(0)
                for target in range(targets):
                    attrs["target_treeids"].append(t)
                    attrs["target_nodeids"].append(node)
                    attrs["target_ids"].append(target)
                    attrs["target_weights"].append(float(rng.standard_normal()))
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml", n_targets=targets,
                            aggregate_function=aggregate, base_values=[0.5] * targets, **attrs)
    graph = helper.make_graph([node], "forest",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", features])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", targets])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])
    model.ir_version = 8
    return model.SerializeToString()


@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
def test_tree_ensemble_regressor_matches_onnxruntime(aggregate: str) -> None:
    rng = np.random.default_rng(32)
    model = _random_forest_regressor(rng, trees=5, features=4, targets=2, aggregate=aggregate)
    _assert_close(*_run_both(model, {"x": rng.standard_normal((20, 4)).astype(np.float32)}))


@pytest.mark.parametrize("axis", [1, 2])
@pytest.mark.parametrize("threads", [1, 2])
def test_concat_of_large_blocks_matches_numpy(axis: int, threads: int) -> None:
    # Batch-1 Concat of blocks of hundreds of KiB: copied in pieces that the threads share.
    shapes = [(1, 40, 30, 50), (1, 7, 30, 50), (1, 64, 30, 50)] if axis == 1 else [(1, 9, 400, 50), (1, 9, 33, 50)]
    rng = np.random.default_rng(axis)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    names = [f"x{i}" for i in range(len(xs))]
    graph = helper.make_graph([helper.make_node("Concat", names, ["y"], axis=axis)], "concat",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(x.shape))
                               for n, x in zip(names, xs, strict=True)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = mosaicrt.InferenceSession(model.SerializeToString(), sess_options=opts)
    np.testing.assert_array_equal(sess.run(None, dict(zip(names, xs, strict=True)))[0], np.concatenate(xs, axis=axis))
