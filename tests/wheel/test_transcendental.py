"""Exp, Tanh, Sigmoid and Erf on float tensors long enough for the whole-array vector kernels (16 or 8 lanes and
a tail), against numpy in double: relative error within a few float ulp over the whole range, and the special
values (infinities, NaN, overflow and underflow of exp, signed zeros) exact."""

from __future__ import annotations

import math
from typing import Any

import mosaicrt
import numpy as np
import pytest
from onnx import TensorProto, helper

_ERF = np.vectorize(math.erf, otypes=[np.float64])
_REFERENCE = {
    "Exp": np.exp,
    "Tanh": np.tanh,
    "Sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)),
    "Erf": _ERF,
}


def _values() -> np.ndarray:
    rng = np.random.default_rng(11)
    parts = [rng.uniform(-10, 10, 30011), rng.uniform(-90, 90, 20000), rng.standard_normal(10000) * 1e-3,
             np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 88.7, 88.8, -87.3, -104.0, -200.0, 1e-30, -1e-30, 20.0,
                       -20.0, 9.0, 5.0])]
    return np.concatenate(parts).astype(np.float32)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("op", list(_REFERENCE))
def test_vector_transcendentals_are_accurate(op: str, threads: int) -> None:
    x = _values()
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "t",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = mosaicrt.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                                     .SerializeToString(), opts)
    got = sess.run(None, {"x": x})[0].astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        want: Any = _REFERENCE[op](x.astype(np.float64))
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    with np.errstate(over="ignore"):
        inf = np.isinf(want.astype(np.float32))  # exp overflowing float
        assert np.array_equal(got[inf], want[inf].astype(np.float32))
    ok = ~nan & ~inf
    tiny = np.abs(want[ok]) < np.finfo(np.float32).tiny * 2**10  # near float underflow: absolute terms
    err = np.abs(got[ok] - want[ok])
    rel = err / np.maximum(np.abs(want[ok]), np.finfo(np.float32).tiny)
    assert np.all((rel < 6e-7) | tiny & (err < 1e-37)), float(rel.max())  # 5 ulp
    zeros = x == 0
    if op not in {"Exp", "Sigmoid"}:
        assert np.array_equal(np.signbit(got[zeros]), np.signbit(x[zeros]))  # odd functions keep the zero's sign
