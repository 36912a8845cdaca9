"""Gemm and MatMul against constant weights (packed once per session), at one row (batch 1: the classifier of
a CNN, a decoding step) and a few rows (a few tokens), over depths of one and several K steps and widths that
leave partial column panels, checked against a float64 numpy reference at 1 and 2 threads."""

from __future__ import annotations

import mosaicrt
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

SHAPES = [
    # (M, K, N)
    (1, 1283, 1000),  # several K steps, the last short; 1000 = 31 full panels of 32 and one of 8
    (1, 300, 33),     # one column past a panel
    (1, 5, 17),       # depth below one unrolled step
    (1, 2048, 64),
    (1, 256, 100),    # exactly one K step
    (2, 700, 40),
    (3, 1030, 50),    # a few rows packed to their own height, several K steps
    (4, 256, 24),     # one K step, a partial panel
    (5, 40, 8),       # an edge tile of at most 8 columns
    (7, 600, 12),     # an edge tile of at most 16 columns
    (12, 513, 45),    # a full-height block
    (13, 257, 70),    # 12 + 1 rows: a one-row tile below a full one
]


def _session(model: bytes, threads: int) -> mosaicrt.InferenceSession:
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = threads
    return mosaicrt.InferenceSession(model, sess_options=opts)


def _tolerance(a: np.ndarray, b: np.ndarray, k: int) -> float:
    """Float32 sums of k products: a bound that grows as the square root of k (rounding errors of random sign)
    times the largest term, about 50 times what the runtime's sums show here."""
    return 1e-5 * np.sqrt(k) * float(np.abs(a).max() * np.abs(b).max())


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("threads", [1, 2])
def test_gemm_with_constant_b(shape: tuple[int, int, int], trans_a: int, trans_b: int, threads: int) -> None:
    m, k, n = shape
    rng = np.random.default_rng(m * 1000 + k + n)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    c = rng.standard_normal(n).astype(np.float32)
    x = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    alpha, beta = 0.75, 1.5
    node = helper.make_node("Gemm", ["x", "b", "c"], ["y"], transA=trans_a, transB=trans_b, alpha=alpha, beta=beta)
    graph = helper.make_graph([node], "gemm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(b, "b"), numpy_helper.from_array(c, "c")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    got = _session(model.SerializeToString(), threads).run(None, {"x": x})[0]
    am, bm = (x.T if trans_a else x), (b.T if trans_b else b)
    want = alpha * (am.astype(np.float64) @ bm.astype(np.float64)) + beta * c.astype(np.float64)
    assert got.shape == (m, n)
    np.testing.assert_allclose(got, want, rtol=0, atol=_tolerance(am, bm, k))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("threads", [1, 2])
def test_matmul_with_constant_b_and_batch_dims(shape: tuple[int, int, int], threads: int) -> None:
    """A [1, m, k] input (one sequence) against constant [k, n] weights: the batch folds into the rows."""
    m, k, n = shape
    rng = np.random.default_rng(m + k * 7 + n)
    b = rng.standard_normal((k, n)).astype(np.float32)
    x = rng.standard_normal((1, m, k)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "b"], ["y"])], "mm",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, m, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    got = _session(model.SerializeToString(), threads).run(None, {"x": x})[0]
    want = x.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=0, atol=_tolerance(x, b, k))
