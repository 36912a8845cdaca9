"""ConvInteger and QLinearConv over many geometries (1-D to 4-D, strides, dilations, asymmetric pads,
groups, 1x1 convolutions, uint8/int8 inputs and weights, zero points), checked exactly against an int64
numpy reference. The output planes are large enough to be packed in several slices, and every case runs
on 1 and 2 threads (the slices are spread over the threads)."""

from __future__ import annotations

import itertools

import mosaicrt
import numpy as np
import pytest
from onnx import TensorProto, helper

_ONNX = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}


def _reference(x: np.ndarray, w: np.ndarray, xz: int, wz: np.ndarray, *, strides: list[int], dil: list[int],
               pads: list[int], group: int) -> np.ndarray:
    """int64 conv of (x - xz) and (w - wz) by explicit sums over the kernel taps."""
    nd = x.ndim - 2
    xs = x.astype(np.int64) - xz
    ws = w.astype(np.int64) - wz.reshape((-1,) + (1,) * (nd + 1))
    xs = np.pad(xs, [(0, 0), (0, 0)] + [(pads[d], pads[d + nd]) for d in range(nd)])  # pads hold x - xz = 0
    n = x.shape[0]
    m, cg = w.shape[:2]
    kernel = w.shape[2:]
    out = [(xs.shape[2 + d] - dil[d] * (kernel[d] - 1) - 1) // strides[d] + 1 for d in range(nd)]
    y = np.zeros((n, m, *out), np.int64)
    mg = m // group
    for g in range(group):
        xg = xs[:, g * cg:(g + 1) * cg]
        wg = ws[g * mg:(g + 1) * mg]
        for tap in itertools.product(*[range(k) for k in kernel]):
            sl = tuple(slice(tap[d] * dil[d], tap[d] * dil[d] + (out[d] - 1) * strides[d] + 1, strides[d])
                       for d in range(nd))
            patch = xg[(slice(None), slice(None), *sl)]  # n, cg, out...
            y[:, g * mg:(g + 1) * mg] += np.einsum("nc...,mc->nm...", patch, wg[(slice(None), slice(None), *tap)])
    return y


CASES = [
    # spatial, kernel, strides, dilations, pads (begin..., end...), group, channels in/out
    ((40, 37), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1, (5, 7)),
    ((41, 30), (3, 3), (2, 2), (1, 1), (1, 0, 0, 1), 1, (4, 6)),
    ((33, 35), (7, 7), (2, 2), (1, 1), (3, 3, 3, 3), 1, (3, 9)),
    ((30, 31), (3, 3), (1, 2), (2, 1), (2, 1, 2, 0), 2, (6, 4)),
    ((36, 29), (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), 1, (16, 8)),  # packed straight from the image
    ((36, 29), (1, 1), (2, 2), (1, 1), (0, 0, 0, 0), 1, (8, 8)),
    ((26, 27), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 8, (8, 8)),  # depthwise
    ((5, 300), (2, 5), (1, 3), (1, 2), (0, 4, 1, 3), 1, (3, 5)),  # short, wide lines
    ((700,), (5,), (1,), (3,), (6, 2), 1, (3, 4)),
    ((301,), (4,), (3,), (1,), (0, 0), 1, (7, 3)),
    ((9, 10, 11), (3, 2, 3), (1, 2, 1), (1, 1, 2), (1, 0, 2, 1, 1, 0), 1, (2, 5)),
    ((4, 5, 6, 7), (2, 3, 2, 3), (1, 1, 2, 1), (1, 1, 1, 2), (0, 1, 1, 0, 1, 0, 0, 2), 1, (2, 3)),
    ((6, 300), (3, 3), (1, 1), (1, 1), (4, 4, 4, 4), 1, (2, 3)),  # pads wider than the kernel reach
]


def _model(op: str, types: tuple[int, int], shapes: tuple[tuple[int, ...], tuple[int, ...]],
           attrs: dict[str, object]) -> bytes:
    (x_type, w_type), (x_shape, w_shape) = types, shapes
    inputs = [helper.make_tensor_value_info("x", x_type, x_shape), helper.make_tensor_value_info("w", w_type, w_shape),
              helper.make_tensor_value_info("xz", x_type, []),
              helper.make_tensor_value_info("wz", w_type, [w_shape[0]])]
    if op == "ConvInteger":
        node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], **attrs)
        out = helper.make_tensor_value_info("y", TensorProto.INT32, None)
    else:
        node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"], **attrs)
        out = helper.make_tensor_value_info("y", TensorProto.UINT8, None)
    inits = []
    if op == "QLinearConv":
        inits = [helper.make_tensor("xs", TensorProto.FLOAT, [], [0.05]),
                 helper.make_tensor("ws", TensorProto.FLOAT, [], [0.02]),
                 helper.make_tensor("ys", TensorProto.FLOAT, [], [0.25]),
                 helper.make_tensor("yz", TensorProto.UINT8, [], [128])]
    graph = helper.make_graph([node], op, inputs, [out], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)], ir_version=8).SerializeToString()


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{len(c[0])}d-{'x'.join(map(str, c[1]))}-s{c[2]}-g{c[5]}")
@pytest.mark.parametrize("types", [(np.uint8, np.int8), (np.int8, np.int8), (np.uint8, np.uint8)],
                         ids=["u8s8", "s8s8", "u8u8"])
def test_conv_integer_geometries(case: tuple, types: tuple[type, type]) -> None:
    spatial, kernel, strides, dil, pads, group, (c, m) = case
    xt, wt = types
    rng = np.random.default_rng(len(spatial) * 1000 + sum(spatial))
    info = np.iinfo(xt)
    x = rng.integers(info.min, info.max, (2, c, *spatial), endpoint=True).astype(xt)
    w = rng.integers(np.iinfo(wt).min, np.iinfo(wt).max, (m, c // group, *kernel), endpoint=True).astype(wt)
    xz = np.array(rng.integers(info.min, info.max, endpoint=True), xt)
    wz = rng.integers(np.iinfo(wt).min, np.iinfo(wt).max, (m,), endpoint=True).astype(wt)
    attrs = {"kernel_shape": list(kernel), "strides": list(strides), "dilations": list(dil), "pads": list(pads),
             "group": group}
    want = _reference(x, w, int(xz), wz, strides=list(strides), dil=list(dil), pads=list(pads), group=group)
    model = _model("ConvInteger", (_ONNX[xt], _ONNX[wt]), (x.shape, w.shape), attrs)
    sessions: list[mosaicrt.InferenceSession] = []
    for threads in (1, 2):
        opts = mosaicrt.SessionOptions()
        opts.intra_op_num_threads = threads
        sess = mosaicrt.InferenceSession(model, opts)
        sessions.append(sess)  # all alive: none reuses another's freed buffers
        (got,) = sess.run(None, {"x": x, "w": w, "xz": xz, "wz": wz})
        assert got.dtype == np.int32 and got.shape == want.shape, (got.shape, want.shape)
        np.testing.assert_array_equal(got.astype(np.int64), want, err_msg=f"{threads} threads")


@pytest.mark.parametrize("case", CASES[:8], ids=lambda c: f"{len(c[0])}d-{'x'.join(map(str, c[1]))}-s{c[2]}-g{c[5]}")
def test_qlinear_conv_geometries(case: tuple) -> None:
    """QLinearConv's requantized output: round-half-even of the exact accumulator times the scale ratio
    (the ratio 0.004 is exact enough in float64 that no value lands within rounding of a tie by chance)."""
    spatial, kernel, strides, dil, pads, group, (c, m) = case
    rng = np.random.default_rng(sum(spatial))
    x = rng.integers(0, 255, (1, c, *spatial), endpoint=True).astype(np.uint8)
    w = rng.integers(-128, 127, (m, c // group, *kernel), endpoint=True).astype(np.int8)
    xz, wz = np.array(131, np.uint8), rng.integers(-5, 5, (m,), endpoint=True).astype(np.int8)
    attrs = {"kernel_shape": list(kernel), "strides": list(strides), "dilations": list(dil), "pads": list(pads),
             "group": group}
    acc = _reference(x, w, int(xz), wz, strides=list(strides), dil=list(dil), pads=list(pads), group=group)
    scale = np.float64(np.float32(np.float32(0.05) * np.float32(0.02))) / np.float64(np.float32(0.25))
    want = np.clip(np.round(acc * np.float64(np.float32(scale))) + 128, 0, 255).astype(np.uint8)
    model = _model("QLinearConv", (TensorProto.UINT8, TensorProto.INT8), (x.shape, w.shape), attrs)
    sessions: list[mosaicrt.InferenceSession] = []
    for threads in (1, 2):
        opts = mosaicrt.SessionOptions()
        opts.intra_op_num_threads = threads
        sessions.append(mosaicrt.InferenceSession(model, opts))  # all alive (see above)
        (got,) = sessions[-1].run(None, {"x": x, "w": w, "xz": xz, "wz": wz})
        np.testing.assert_array_equal(got, want, err_msg=f"{threads} threads")


# 2-D convolutions with constant int8 weights whose zero points are 0 (what quantizers emit): on
# AVX512-VNNI these run the direct kernel (no column matrix; 1x1 of stride 1 excepted), elsewhere the
# im2col path; both must be exact.
DIRECT_CASES = [
    # spatial, kernel, strides, dilations, pads, group, (in, out channels)
    ((56, 56), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1, (64, 64)),
    ((7, 7), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1, (40, 24)),  # small planes, tiles past the plane
    ((29, 31), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 1, (13, 9)),  # channels not a multiple of 4 or 8
    ((40, 37), (7, 7), (2, 2), (1, 1), (3, 2, 1, 3), 1, (3, 16)),  # a first layer, asymmetric pads
    ((20, 23), (1, 1), (2, 2), (1, 1), (0, 0, 0, 0), 1, (32, 16)),  # 1x1 downsampling: one phase read
    ((20, 23), (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), 1, (24, 16)),  # 1x1 stride 1: columns from the image
    ((5, 3), (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), 1, (10, 7)),  # read in place beside zero slots, under 16 pixels
    ((25, 26), (3, 3), (3, 4), (1, 1), (0, 2, 1, 0), 1, (8, 12)),
    ((30, 28), (3, 3), (1, 1), (2, 3), (2, 3, 2, 3), 1, (6, 8)),  # dilated
    ((31, 33), (3, 3), (2, 1), (2, 1), (1, 0, 2, 1), 2, (12, 16)),  # groups, dilation with stride
    ((11, 50), (2, 5), (1, 2), (1, 1), (0, 0, 0, 0), 1, (5, 8)),
    # blocks of 16, 32, 48 and 64 output channels, the last one partial; a deep 7x7 stage; chunks of positions
    # that do not divide the plane; dilated rows with contiguous kernel-row runs, dilated columns with one run
    # per tap of a channel count divisible by 4
    ((9, 10), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1, (20, 100)),
    ((7, 7), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1, (256, 96)),
    ((10, 10), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1, (32, 136)),
    ((15, 17), (3, 3), (1, 1), (2, 1), (2, 1, 2, 1), 1, (8, 32)),
    ((12, 12), (3, 3), (1, 1), (2, 2), (2, 2, 2, 2), 1, (16, 64)),
    # stride-2 rows wider than 16 output columns (gathered 16 at a time, the last 16 overlapping)
    ((30, 75), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 1, (6, 8)),
    # small maps, where the AVX2 plane kernel tiles 4 positions x 16 output channels: a last tile of 2 and of 3
    # positions, output channels not a multiple of 16, a map in two items of positions (6 x 5) and one in four
    # with a last item of one position (7 x 7 from a stride-2 14 x 14)
    ((6, 5), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1, (12, 40)),
    ((3, 5), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1, (20, 24)),
    ((14, 14), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 1, (36, 72)),
]


def _direct_model(op: str, x_type: int, x_shape: tuple[int, ...], w: np.ndarray, wz: np.ndarray | None, *,
                  attrs: dict[str, object], x_scale: float = 0.05, w_scale: float = 0.02,
                  y_scale: float = 0.25) -> bytes:
    inputs = [helper.make_tensor_value_info("x", x_type, x_shape), helper.make_tensor_value_info("xz", x_type, [])]
    inits = [helper.make_tensor("w", TensorProto.INT8, w.shape, w.tobytes(), raw=True)]
    if wz is not None:
        inits.append(helper.make_tensor("wz", TensorProto.INT8, wz.shape, wz.tobytes(), raw=True))
    if op == "ConvInteger":
        node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz" if wz is not None else ""], ["y"], **attrs)
        out = helper.make_tensor_value_info("y", TensorProto.INT32, None)
    else:
        node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz" if wz is not None else "", "ys",
                                                "yz"], ["y"], **attrs)
        out = helper.make_tensor_value_info("y", TensorProto.UINT8, None)
        inits += [helper.make_tensor("xs", TensorProto.FLOAT, [], [x_scale]),
                  helper.make_tensor("ws", TensorProto.FLOAT, [], [w_scale]),
                  helper.make_tensor("ys", TensorProto.FLOAT, [], [y_scale]),
                  helper.make_tensor("yz", TensorProto.UINT8, [], [128])]
        if wz is None:  # QLinearConv's w_zero_point is not optional before opset 10's optional-input rules
            inits.append(helper.make_tensor("wz", TensorProto.INT8, [], [0]))
            node.input[5] = "wz"
    graph = helper.make_graph([node], op, inputs, [out], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)], ir_version=8).SerializeToString()


@pytest.mark.parametrize("case", DIRECT_CASES, ids=lambda c: f"{'x'.join(map(str, c[0]))}-k{c[1][0]}x{c[1][1]}"
                         f"-s{c[2][0]}{c[2][1]}-d{c[3][0]}{c[3][1]}-g{c[5]}-c{c[6][0]}m{c[6][1]}")
@pytest.mark.parametrize(("op", "x_type"), [("ConvInteger", np.uint8), ("ConvInteger", np.int8),
                                           ("QLinearConv", np.uint8)], ids=["ConvInteger-u8", "ConvInteger-s8",
                                                                            "QLinearConv-u8"])
def test_constant_int8_weights(case: tuple, x_type: type, op: str) -> None:
    spatial, kernel, strides, dil, pads, group, (c, m) = case
    rng = np.random.default_rng(sum(spatial) + c * m)
    info = np.iinfo(x_type)
    x = rng.integers(info.min, info.max, (2, c, *spatial), endpoint=True).astype(x_type)
    w = rng.integers(-128, 127, (m, c // group, *kernel), endpoint=True).astype(np.int8)
    xz = np.array(rng.integers(info.min, info.max, endpoint=True), x_type)
    attrs = {"kernel_shape": list(kernel), "strides": list(strides), "dilations": list(dil), "pads": list(pads),
             "group": group}
    acc = _reference(x, w, int(xz), np.zeros(m, np.int64), strides=list(strides), dil=list(dil), pads=list(pads),
                     group=group)
    if op == "ConvInteger":
        want = acc
    else:
        scale = np.float64(np.float32(np.float32(0.05) * np.float32(0.02))) / np.float64(np.float32(0.25))
        want = np.clip(np.round(acc * np.float64(np.float32(scale))) + 128, 0, 255).astype(np.uint8)
    onnx_x = _ONNX[x_type]
    for wz in (np.zeros(m, np.int8), None):
        model = _direct_model(op, onnx_x, x.shape, w, wz, attrs=attrs)
        sessions: list[mosaicrt.InferenceSession] = []
        for threads in (1, 2):
            opts = mosaicrt.SessionOptions()
            opts.intra_op_num_threads = threads
            sessions.append(mosaicrt.InferenceSession(model, opts))  # all alive (see above)
            (got,) = sessions[-1].run(None, {"x": x, "xz": xz})
            assert got.shape == want.shape, (got.shape, want.shape)
            wz_text = "zeros" if wz is not None else "absent"
            np.testing.assert_array_equal(got.astype(want.dtype), want,
                                          err_msg=f"{threads} threads, w_zero_point {wz_text}")


@pytest.mark.parametrize("y_scale", [0.002, 0.0005], ids=["multiplier-0.5", "multiplier-2"])
def test_qlinear_conv_multipliers_of_half_and_above(y_scale: float) -> None:
    """Multipliers of 1/2 and above round in double throughout (the int32 shortcut needs smaller ones): exact,
    saturated values included."""
    rng = np.random.default_rng(11)
    x = (100 + rng.integers(-6, 6, (1, 24, 13, 14), endpoint=True)).astype(np.uint8)
    w = rng.integers(-4, 4, (40, 24, 3, 3), endpoint=True).astype(np.int8)
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    model = _direct_model("QLinearConv", TensorProto.UINT8, x.shape, w, None, attrs=attrs, y_scale=y_scale)
    (got,) = mosaicrt.InferenceSession(model).run(None, {"x": x, "xz": np.array(100, np.uint8)})
    acc = _reference(x, w, 100, np.zeros(40, np.int64), strides=[1, 1], dil=[1, 1], pads=[1, 1, 1, 1], group=1)
    scale = np.float64(np.float32(np.float32(0.05) * np.float32(0.02))) / np.float64(np.float32(y_scale))
    want = np.clip(np.round(acc * np.float64(np.float32(scale))) + 128, 0, 255).astype(np.uint8)
    assert 0 < np.count_nonzero(want == 255) < want.size // 2  # some saturate, most do not
    np.testing.assert_array_equal(got, want)


def test_constant_weights_with_nonzero_zero_points() -> None:
    """Constant int8 weights whose zero points are not all 0 take the im2col path: still exact."""
    rng = np.random.default_rng(7)
    x = rng.integers(0, 255, (1, 16, 20, 20), endpoint=True).astype(np.uint8)
    w = rng.integers(-128, 127, (16, 16, 3, 3), endpoint=True).astype(np.int8)
    wz = np.zeros(16, np.int8)
    wz[5] = 3
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    model = _direct_model("ConvInteger", TensorProto.UINT8, x.shape, w, wz, attrs=attrs)
    (got,) = mosaicrt.InferenceSession(model).run(None, {"x": x, "xz": np.array(100, np.uint8)})
    want = _reference(x, w, 100, wz.astype(np.int64), strides=[1, 1], dil=[1, 1], pads=[1, 1, 1, 1], group=1)
    np.testing.assert_array_equal(got.astype(np.int64), want)



@pytest.mark.parametrize("x_type", [np.uint8, np.int8], ids=["x-u8", "x-s8"])
def test_constant_uint8_weights_of_zero_point_128(x_type: type) -> None:
    """Constant uint8 weights with zero point 128 are int8 weights with zero point 0 once their top bit is flipped:
    the AVX2 plane kernel takes them (bytes far from 128 saturate its pairs: the fix must restore them); exact."""
    rng = np.random.default_rng(5)
    info = np.iinfo(x_type)
    x = rng.integers(info.min, info.max, (1, 12, 17, 19), endpoint=True).astype(x_type)
    w = rng.choice(np.array([0, 1, 2, 128, 200, 254, 255], np.uint8), (24, 12, 3, 3))
    xz = np.array(info.max // 3, x_type)
    attrs = {"kernel_shape": [3, 3], "pads": [1, 0, 1, 2], "strides": [1, 2]}
    inits = [helper.make_tensor("w", TensorProto.UINT8, w.shape, w.tobytes(), raw=True),
             helper.make_tensor("wz", TensorProto.UINT8, [], [128])]
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", _ONNX[x_type], x.shape),
                                            helper.make_tensor_value_info("xz", _ONNX[x_type], [])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)], ir_version=8).SerializeToString()
    want = _reference(x, w, int(xz), np.full(24, 128, np.int64), strides=[1, 2], dil=[1, 1], pads=[1, 0, 1, 2],
                      group=1)
    for threads in (1, 2):
        opts = mosaicrt.SessionOptions()
        opts.intra_op_num_threads = threads
        (got,) = mosaicrt.InferenceSession(model, opts).run(None, {"x": x, "xz": xz})
        np.testing.assert_array_equal(got.astype(np.int64), want, err_msg=f"{threads} threads")


def test_qlinear_conv_requantizes_near_ties_as_double() -> None:
    """Products a hair from a tie round as in double: with these scales the multiplier is 0.0018720394...; a sum
    of 48343 makes 90.50000072, output 91 (a requantization in float makes it 90.5, rounded to even: 90)."""
    xs, ws, ys = np.float32(0.015644282), np.float32(0.082143046), np.float32(0.68645406)
    rng = np.random.default_rng(5)
    w = np.array([127, 127, 127, 1], np.int8).reshape(1, 4, 1, 1)
    x = rng.integers(0, 255, (1, 4, 3, 7), endpoint=True).astype(np.uint8)
    x[0, :, 1, 2] = [255, 125, 0, 83]  # 127 * 380 + 83 = 48343
    model = _direct_model("QLinearConv", TensorProto.UINT8, x.shape, w, None, attrs={"kernel_shape": [1, 1]},
                          x_scale=xs, w_scale=ws, y_scale=ys)
    (got,) = mosaicrt.InferenceSession(model).run(None, {"x": x, "xz": np.array(0, np.uint8)})
    acc = np.einsum("nchw,mc->nmhw", x.astype(np.int64), w[:, :, 0, 0].astype(np.int64))
    multiplier = np.float64(np.float32(np.float64(np.float32(xs * ws)) / np.float64(ys)))
    want = np.clip(np.round(acc * multiplier) + 128, 0, 255).astype(np.uint8)  # _direct_model's y zero point
    assert acc[0, 0, 1, 2] == 48343 and want[0, 0, 1, 2] == 128 + 91
    np.testing.assert_array_equal(got, want)
