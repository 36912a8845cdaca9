"""2-D MaxPool over many geometries (kernels, strides, pads, ceil_mode, auto_pad, planes narrower than a
vector step), of float and 8-bit planes, checked exactly against a numpy reference, and against the same node
with its indices output (a separate kernel)."""

from __future__ import annotations

import math
from typing import Any

import mosaicrt
import numpy as np
import pytest
from onnx import TensorProto, helper


def _reference(x: np.ndarray, k: tuple[int, int], s: tuple[int, int], pads: tuple[int, int, int, int],
               out: tuple[int, int]) -> np.ndarray:
    n, c, h, w = x.shape
    xp = np.full((n, c, h + pads[0] + pads[2] + k[0] + s[0] * 2, w + pads[1] + pads[3] + k[1] + s[1] * 2), -np.inf,
                 np.float32)
    xp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + w] = x
    y = np.full((n, c, *out), -np.inf, np.float32)
    for kh in range(k[0]):
        for kw in range(k[1]):
            y = np.maximum(y, xp[:, :, kh:kh + s[0] * out[0]:s[0], kw:kw + s[1] * out[1]:s[1]])
    return y


CASES = [
    # (H, W), kernel, strides, pads [t, l, b, r], ceil_mode
    ((111, 111), (3, 3), (2, 2), (0, 0, 0, 0), 0),  # SqueezeNet's
    ((27, 27), (3, 3), (2, 2), (0, 0, 0, 0), 1),
    ((112, 112), (3, 3), (2, 2), (1, 1, 1, 1), 0),  # ResNet's
    ((56, 56), (2, 2), (2, 2), (0, 0, 0, 0), 0),  # DenseNet's transition (AveragePool)
    ((17, 19), (2, 2), (2, 2), (0, 0, 0, 0), 1),
    ((9, 30), (3, 5), (1, 1), (1, 2, 1, 2), 0),
    ((13, 11), (4, 2), (3, 1), (2, 0, 1, 1), 1),
    ((5, 3), (3, 3), (1, 2), (1, 1, 1, 1), 0),  # narrower than a vector step
    ((8, 40), (1, 7), (1, 3), (0, 3, 0, 3), 0),
    ((6, 150), (3, 3), (1, 1), (1, 1, 1, 1), 0),  # rows of several 64-byte vectors
    ((5, 70), (2, 17), (1, 1), (0, 8, 1, 8), 0),  # the widest window kept in registers with stride 1
    ((4, 90), (3, 33), (1, 2), (1, 16, 1, 15), 1),  # and with stride 2
    ((5, 40), (2, 18), (2, 1), (0, 0, 0, 0), 1),  # one column wider: the row buffer
    ((6, 61), (3, 4), (2, 2), (1, 3, 2, 0), 0),  # stride 2 from a left pad, an odd row
    # a row's last vector whose last output's window reaches one column into the next 16 (or 32) of the input
    ((3, 33), (3, 3), (1, 1), (0, 0, 0, 0), 0),
    ((3, 65), (3, 3), (2, 2), (0, 0, 0, 0), 0),
    ((9, 33), (3, 3), (2, 2), (0, 0, 0, 0), 0),  # and with rows in pairs (16 outputs a row)
]


_TYPES = {np.float32: TensorProto.FLOAT, np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0][0]}x{c[0][1]}-k{c[1][0]}{c[1][1]}-s{c[2][0]}{c[2][1]}")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int8], ids=["float", "uint8", "int8"])
def test_max_pool_2d_geometries(case: tuple, threads: int, dtype: type) -> None:
    (h, w), k, s, pads, ceil = case
    out = []
    for d, size in enumerate((h, w)):
        span = (size + pads[d] + pads[d + 2] - k[d]) / s[d]
        o = (math.ceil(span) if ceil else math.floor(span)) + 1
        if ceil and (o - 1) * s[d] >= size + pads[d]:  # a window may not start in the end padding
            o -= 1
        out.append(o)
    rng = np.random.default_rng(h * w)
    if dtype == np.float32:
        x = rng.standard_normal((2, 3, h, w)).astype(np.float32)
    else:  # 8-bit planes (what the QDQ rewrite leaves): every byte value, the extremes included
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, (2, 3, h, w), endpoint=True).astype(dtype)
    want = _reference(x.astype(np.float32), k, s, pads, (out[0], out[1])).astype(dtype)
    attrs = {"kernel_shape": list(k), "strides": list(s), "pads": list(pads), "ceil_mode": ceil}
    results = []
    for with_indices in (False, True):
        outs = ["y", "i"] if with_indices else ["y"]
        node = helper.make_node("MaxPool", ["x"], outs, **attrs)
        value_infos = [helper.make_tensor_value_info("y", _TYPES[dtype], None)]
        if with_indices:
            value_infos.append(helper.make_tensor_value_info("i", TensorProto.INT64, None))
        graph = helper.make_graph([node], "pool", [helper.make_tensor_value_info("x", _TYPES[dtype], x.shape)],
                                  value_infos)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)], ir_version=8)
        opts = mosaicrt.SessionOptions()
        opts.intra_op_num_threads = threads
        results.append(mosaicrt.InferenceSession(model.SerializeToString(), opts).run(None, {"x": x})[0])
    for got in results:
        assert got.shape == want.shape, (got.shape, want.shape)
        np.testing.assert_array_equal(got, want)


def test_max_pool_same_padding_and_nan_inputs() -> None:
    """auto_pad SAME_UPPER, and NaN inputs: the runtime's max skips NaN values, with and without the indices
    output. A window of NaN only gives -inf without indices and NaN with them (left as it is: it is not
    compared here)."""
    x = np.random.default_rng(3).standard_normal((1, 2, 10, 13)).astype(np.float32)
    x[0, 0, 2, 3] = np.nan
    x[0, 1, 4:6, 0:2] = np.nan
    results = []
    for outs in (["y"], ["y", "i"]):
        node = helper.make_node("MaxPool", ["x"], outs, kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_UPPER")
        vis = [helper.make_tensor_value_info(o, TensorProto.FLOAT if o == "y" else TensorProto.INT64, None)
               for o in outs]
        graph = helper.make_graph([node], "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)], vis)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)], ir_version=8)
        results.append(mosaicrt.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0])
    clean = np.where(np.isnan(x), -np.inf, x)
    want = _reference(clean, (2, 2), (2, 2), (0, 0, 0, 1), (5, 7))
    np.testing.assert_array_equal(results[0], want)
    assert results[0][0, 1, 2, 0] == -np.inf  # the all-NaN window
    with_indices = results[1].copy()
    with_indices[0, 1, 2, 0] = -np.inf
    np.testing.assert_array_equal(with_indices, want)


def _nan_rows_paired() -> tuple[np.ndarray, tuple[int, int, int, int], tuple[int, int, int]]:
    # rows of at most 16 outputs (the row pairs of the AVX-512 kernel, whose windows share a middle row), NaN
    # inputs in shared and unshared rows, 11 output rows (the last one alone)
    x = np.random.default_rng(5).standard_normal((1, 3, 23, 29)).astype(np.float32)
    x[0, 0, 2, 5] = np.nan  # the middle row of output rows 0 and 1
    x[0, 1, 7, 10:13] = np.nan
    x[0, 2, 4:7, 20:23] = np.nan  # every tap of output (2, 10)
    return x, (0, 0, 0, 0), (2, 2, 10)


def _nan_columns() -> tuple[np.ndarray, tuple[int, int, int, int], tuple[int, int, int]]:
    # rows 37 wide (AVX2: 4 loads a window row, the taps' columns gathered by shuffles), NaN inputs at every
    # column position of a vector's 8 outputs
    x = np.random.default_rng(5).standard_normal((1, 3, 21, 37)).astype(np.float32)
    x[0, 0, :, ::3] = np.nan  # every third column
    x[0, 1, 4:9, 6:11] = np.nan  # a 5x5 block: the window of rows 5..7, columns 7..9 holds nothing else
    x[0, 2, ::2, 1::2] = np.nan  # the odd columns of even rows
    return x, (1, 1, 1, 1), (1, 3, 4)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", [_nan_rows_paired, _nan_columns], ids=["rows_paired", "columns"])
def test_max_pool_3x3_stride_2_skips_nan_inputs(case: Any, threads: int) -> None:
    """3x3 stride 2 with NaN inputs: NaN values are skipped, a window of NaN only gives -inf."""
    x, pads, nan_only = case()
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=list(pads))
    graph = helper.make_graph([node], "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)], ir_version=8)
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = threads
    got = mosaicrt.InferenceSession(model.SerializeToString(), opts).run(None, {"x": x})[0]
    out = tuple((size + pads[d] + pads[d + 2] - 3) // 2 + 1 for d, size in enumerate(x.shape[2:]))
    want = _reference(np.where(np.isnan(x), -np.inf, x), (3, 3), (2, 2), pads, out)
    np.testing.assert_array_equal(got, want)
    assert got[0][nan_only] == -np.inf


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0][0]}x{c[0][1]}-k{c[1][0]}{c[1][1]}-s{c[2][0]}{c[2][1]}")
@pytest.mark.parametrize("include_pad", [0, 1])
def test_average_pool_2d_geometries(case: tuple, include_pad: int) -> None:
    """AveragePool against a float64 numpy reference: the divisor counts the taps inside the input, or (with
    count_include_pad) inside the padded input, never past it (ceil_mode windows)."""
    (h, w), k, s, pads, ceil = case
    out = []
    for d, size in enumerate((h, w)):
        span = (size + pads[d] + pads[d + 2] - k[d]) / s[d]
        o = (math.ceil(span) if ceil else math.floor(span)) + 1
        if ceil and (o - 1) * s[d] >= size + pads[d]:
            o -= 1
        out.append(o)
    x = np.random.default_rng(h + w).standard_normal((2, 3, h, w)).astype(np.float32)
    xp = np.zeros((2, 3, h + pads[0] + pads[2] + k[0] + 2 * s[0], w + pads[1] + pads[3] + k[1] + 2 * s[1]))
    inside = np.zeros(xp.shape[2:])
    padded = np.zeros(xp.shape[2:])
    xp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + w] = x
    inside[pads[0]:pads[0] + h, pads[1]:pads[1] + w] = 1
    padded[:h + pads[0] + pads[2], :w + pads[1] + pads[3]] = 1
    total = np.zeros((2, 3, *out))
    count = np.zeros(out)
    for kh in range(k[0]):
        for kw in range(k[1]):
            sl = (slice(kh, kh + s[0] * out[0], s[0]), slice(kw, kw + s[1] * out[1], s[1]))
            total += xp[(slice(None), slice(None), *sl)]
            count += (padded if include_pad else inside)[sl]
    want = (total / count).astype(np.float32)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=list(k), strides=list(s), pads=list(pads),
                            ceil_mode=ceil, count_include_pad=include_pad)
    graph = helper.make_graph([node], "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
    got = mosaicrt.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(1, 2048, 7, 7), (2, 3, 5, 4), (1, 5, 9), (1, 4, 3, 5, 2)],
                         ids=["resnet-head", "batch-2", "1d", "3d"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float", "double"])
@pytest.mark.parametrize("threads", [1, 2])
def test_average_pool_over_the_whole_input(shape: tuple, dtype: type, threads: int) -> None:
    """A window that is the whole input and no padding (a classifier head's AveragePool): the plane means, with
    count_include_pad making no difference; with a pad the window is no longer the whole input."""
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(dtype)
    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE
    spatial = tuple(range(2, len(shape)))
    for include_pad, pad in ((0, 0), (1, 0), (0, 1), (1, 1)):
        node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=list(shape[2:]),
                                pads=[pad] * (2 * len(spatial)), count_include_pad=include_pad)
        graph = helper.make_graph([node], "pool", [helper.make_tensor_value_info("x", elem, shape)],
                                  [helper.make_tensor_value_info("y", elem, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
        opts = mosaicrt.SessionOptions()
        opts.intra_op_num_threads = threads
        got = mosaicrt.InferenceSession(model.SerializeToString(), sess_options=opts).run(None, {"x": x})[0]
        if pad == 0:
            want = x.astype(np.float64).mean(axis=spatial, keepdims=True)
        else:  # windows at every offset of the padded input: only the centre one is the whole input
            assert got.shape == (*shape[:2], *(3,) * len(spatial))
            centre = got[(slice(None), slice(None), *(1,) * len(spatial))]
            want = x.astype(np.float64).mean(axis=spatial)
            np.testing.assert_allclose(centre, want, rtol=1e-5, atol=1e-6)
            continue
        assert got.shape == want.shape and got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)
