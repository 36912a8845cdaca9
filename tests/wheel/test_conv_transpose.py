"""ConvTranspose against onnxruntime: the column-pair scatter of width stride 2 (taps kw and kw + 1 written as
interleaved vectors) with every kind of edge it meets: pads cutting the first and last columns, output_padding,
odd and even kernel widths, rows shorter than a vector; and the other strides, groups and batch 2, at 1 and 2
threads, with constant filters (packed once) and filters fed at run time. Then 3-D Conv and ConvTranspose (the
N-D column paths, by rows of the last axis): strides, dilations, asymmetric pads wider than a tap on every axis,
groups."""

from __future__ import annotations

from typing import Any

import mosaicrt
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

CASES = [
    # (in channels, out channels, (H, W), kernel, strides, pads [t, l, b, r], output_padding, group)
    (16, 8, (9, 13), (2, 2), (2, 2), (0, 0, 0, 0), (0, 0), 1),   # UNet's up-convolution: no overlap
    (8, 6, (7, 11), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),    # overlapping taps, output padding
    (6, 4, (5, 9), (4, 4), (2, 2), (1, 1, 1, 1), (0, 0), 2),     # a GAN's 4x4 stride 2, two groups
    (5, 7, (6, 3), (3, 5), (1, 2), (0, 2, 0, 1), (0, 1), 1),     # odd kernel width: the last tap alone
    (4, 3, (4, 5), (2, 3), (2, 2), (0, 3, 0, 2), (0, 0), 1),     # pads wider than a tap: ranges cut on both sides
    (6, 6, (5, 6), (3, 3), (3, 1), (1, 1, 1, 1), (2, 0), 3),     # stride 1 along the width: the plain path
]


def _model(case: tuple[Any, ...], constant: bool) -> tuple[bytes, dict[str, np.ndarray]]:
    c, m, (h, w), k, s, pads, out_pad, group = case
    rng = np.random.default_rng(c * 7 + m)
    x = rng.standard_normal((2, c, h, w)).astype(np.float32)
    wt = (rng.standard_normal((c, m // group, *k)) / np.sqrt(c * k[0] * k[1])).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=list(k), strides=list(s),
                            pads=list(pads), output_padding=list(out_pad), group=group)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))]
    feed = {"x": x}
    inits = [numpy_helper.from_array(b, "b")]
    if constant:
        inits.append(numpy_helper.from_array(wt, "w"))
    else:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, list(wt.shape)))
        feed["w"] = wt
    graph = helper.make_graph([node], "convt", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString(), feed


def _compare_with_onnxruntime(model: bytes, feed: dict[str, np.ndarray], threads: int, rtol: float) -> None:
    import onnxruntime

    expected = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)[0]
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = threads
    got = mosaicrt.InferenceSession(model, opts).run(None, feed)[0]
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("constant", [True, False])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_conv_transpose_matches_onnxruntime(case: tuple[Any, ...], constant: bool, threads: int) -> None:
    model, feed = _model(case, constant)
    _compare_with_onnxruntime(model, feed, threads, 1e-5)


CASES_3D = [
    # (op, in channels, out channels, (D, H, W), kernel, strides, dilations, pads, group)
    ("Conv", 4, 6, (5, 9, 13), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1, 1, 1, 1), 1),
    ("Conv", 4, 6, (6, 8, 17), (2, 3, 4), (2, 1, 3), (1, 2, 1), (0, 2, 3, 1, 0, 2), 2),
    ("Conv", 3, 5, (4, 7, 9), (3, 1, 3), (1, 2, 2), (2, 1, 2), (2, 0, 1, 2, 0, 3), 1),
    ("ConvTranspose", 4, 6, (4, 5, 7), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1, 1, 1, 1), 1),
    ("ConvTranspose", 4, 6, (3, 4, 6), (2, 3, 3), (2, 2, 3), (1, 1, 2), (0, 1, 2, 1, 0, 1), 2),
]


def _model_3d(case: tuple[Any, ...]) -> tuple[bytes, dict[str, np.ndarray]]:
    op, c, m, spatial, k, s, d, pads, group = case
    rng = np.random.default_rng(sum(spatial) + c)
    x = rng.standard_normal((2, c, *spatial)).astype(np.float32)
    shape = (m, c // group, *k) if op == "Conv" else (c, m // group, *k)
    w = (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    node = helper.make_node(op, ["x", "w", "b"], ["y"], kernel_shape=list(k), strides=list(s), dilations=list(d),
                            pads=list(pads), group=group)
    graph = helper.make_graph([node], "nd", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString(), {"x": x}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CASES_3D, ids=str)
def test_3d_convolutions_match_onnxruntime(case: tuple[Any, ...], threads: int) -> None:
    model, feed = _model_3d(case)
    _compare_with_onnxruntime(model, feed, threads, 1e-4)
