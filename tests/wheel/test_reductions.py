"""Reductions over every axis pattern (one reduced group, several separate groups, empty dims) and the
element types the spec allows, checked against numpy."""

from __future__ import annotations

import itertools

import mosaicrt
import numpy as np
import onnx
import pytest
from onnx import helper

_FLOAT_KINDS = ("ReduceMean", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp")
_KINDS = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")


def _expected(kind: str, x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    acc = np.float64 if x.dtype.kind == "f" else (np.uint64 if x.dtype.kind == "u" else np.int64)
    v = x.astype(acc)
    ax = axes or None
    with np.errstate(all="ignore"):
        if kind == "ReduceSum":
            r = v.sum(axis=ax, keepdims=keepdims)
        elif kind == "ReduceMean":
            r = v.mean(axis=ax, keepdims=keepdims)
        elif kind == "ReduceMax":
            r = v.max(axis=ax, keepdims=keepdims, initial=-np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min)
        elif kind == "ReduceMin":
            r = v.min(axis=ax, keepdims=keepdims, initial=np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).max)
        elif kind == "ReduceProd":
            r = v.prod(axis=ax, keepdims=keepdims)
        elif kind == "ReduceL1":
            r = np.abs(v).sum(axis=ax, keepdims=keepdims)
        elif kind == "ReduceL2":
            r = np.sqrt((v * v).sum(axis=ax, keepdims=keepdims))
        elif kind == "ReduceLogSum":
            r = np.log(v.sum(axis=ax, keepdims=keepdims))
        elif kind == "ReduceLogSumExp":
            r = np.log(np.exp(v).sum(axis=ax, keepdims=keepdims))
        else:
            r = (v * v).sum(axis=ax, keepdims=keepdims)
    return np.asarray(r).astype(x.dtype)


def _run(kind: str, x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    inp = helper.make_tensor_value_info("x", elem, list(x.shape))
    out = helper.make_tensor_value_info("y", elem, None)
    axes_init = [helper.make_tensor("axes", onnx.TensorProto.INT64, [len(axes)], list(axes))]
    node = helper.make_node(kind, ["x", "axes"], ["y"], keepdims=int(keepdims))
    graph = helper.make_graph([node], "reduce", [inp], [out], axes_init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    return mosaicrt.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]


def _axis_patterns(rank: int) -> list[tuple[int, ...]]:
    return [axes for n in range(1, rank + 1) for axes in itertools.combinations(range(rank), n)]


# Mean, L2, LogSum and LogSumExp of integers are left out: their integer rounding is not numpy's. The types
# narrower than their accumulator (small integers, float16) are reduced as that type and narrowed after.
_CASES = [(kind, dtype) for kind in _KINDS
          for dtype in (np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8,
                        np.uint16, np.uint32, np.uint64)
          if kind not in _FLOAT_KINDS or np.dtype(dtype).kind == "f"]


@pytest.mark.parametrize(("kind", "dtype"), _CASES)
def test_every_axis_pattern_matches_numpy(kind: str, dtype: type) -> None:
    rng = np.random.default_rng(7)
    shape = (3, 2, 4, 5)
    if np.dtype(dtype).kind == "f":
        x = rng.uniform(0.5, 1.5, shape).astype(dtype)
    else:
        x = rng.integers(1, 4, shape).astype(dtype)
    for axes in _axis_patterns(len(shape)):
        for keepdims in (True, False):
            got = _run(kind, x, axes, keepdims)
            want = _expected(kind, x, axes, keepdims)
            assert got.shape == want.shape, (axes, keepdims)
            rtol = 1e-2 if dtype == np.float16 else 1e-5
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                       err_msg=f"{kind} axes={axes} keepdims={keepdims}")


@pytest.mark.parametrize("kind", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.uint8, np.int16, np.uint16, np.int64])
def test_empty_reduced_groups_give_the_identity(kind: str, dtype: type) -> None:
    # Two separate reduced groups, one of them empty: every output is the reducer's identity.
    x = np.zeros((2, 0, 3, 4), dtype)
    for axes in ((1, 3), (0, 1), (1,), (0, 1, 2, 3)):
        got = _run(kind, x, axes, True)
        want = _expected(kind, x, axes, True)
        np.testing.assert_array_equal(got, want, err_msg=f"{kind} axes={axes}")


def test_long_rows_and_int8_max_over_separate_groups() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (3, 70, 2, 130)).astype(np.int8)
    for kind in ("ReduceMax", "ReduceMin", "ReduceSum"):
        np.testing.assert_array_equal(_run(kind, x, (1, 3), False), _expected(kind, x, (1, 3), False))
    f = rng.standard_normal((2, 300, 3, 257)).astype(np.float32)
    np.testing.assert_allclose(_run("ReduceSum", f, (1, 3), True), _expected("ReduceSum", f, (1, 3), True),
                               rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("n", [1, 3, 4, 7, 8, 9, 15, 16, 17, 33, 37, 128, 1001])
def test_softmax_rows_match_numpy(op: str, n: int) -> None:
    """Float rows of every length around the vector widths, with -inf entries, large values, and a row
    holding a NaN (all NaN out)."""
    rng = np.random.default_rng(n)
    x = (rng.standard_normal((5, n)) * 20).astype(np.float32)
    x[1, : max(1, n // 2)] = -np.inf if n > 1 else x[1, 0]
    x[2] += 80.0
    x[3, n // 2] = np.nan
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], axis=-1)], "sm",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    got = mosaicrt.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    v = x.astype(np.float64)
    shifted = v - v.max(axis=-1, keepdims=True)
    lse = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    want = shifted - lse if op == "LogSoftmax" else np.exp(shifted - lse)
    assert np.isnan(got[3]).all()
    keep = [0, 1, 2, 4]
    np.testing.assert_allclose(got[keep], want[keep].astype(np.float32), rtol=2e-5, atol=1e-6)
