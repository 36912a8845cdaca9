"""3-D Conv and ConvTranspose against onnxruntime (the N-D column paths, by rows of the last axis): strides,
dilations, asymmetric pads wider than a tap on every axis, groups, batch 2, 1 and 2 threads."""

from __future__ import annotations

from typing import Any

import mosaicrt
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

CONV_CASES = [
    # (op, in channels, out channels, (D, H, W), kernel, strides, dilations, pads, group)
    ("Conv", 4, 6, (5, 9, 13), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1, 1, 1, 1), 1),
    ("Conv", 4, 6, (6, 8, 17), (2, 3, 4), (2, 1, 3), (1, 2, 1), (0, 2, 3, 1, 0, 2), 2),
    ("Conv", 3, 5, (4, 7, 9), (3, 1, 3), (1, 2, 2), (2, 1, 2), (2, 0, 1, 2, 0, 3), 1),
    ("ConvTranspose", 4, 6, (4, 5, 7), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1, 1, 1, 1), 1),
    ("ConvTranspose", 4, 6, (3, 4, 6), (2, 3, 3), (2, 2, 3), (1, 1, 2), (0, 1, 2, 1, 0, 1), 2),
]


def _model(case: tuple[Any, ...]) -> tuple[bytes, dict[str, np.ndarray]]:
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
@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_3d_convolutions_match_onnxruntime(case: tuple[Any, ...], threads: int) -> None:
    import onnxruntime

    model, feed = _model(case)
    want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)[0]
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = threads
    got = mosaicrt.InferenceSession(model, opts).run(None, feed)[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
