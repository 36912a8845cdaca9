"""LeakyRelu, PRelu and Shrink against numpy on long rows of random signs (their branch-free selects), with the
edge values kept as the operators define them: NaN stays NaN, -0 stays -0, a positive x passes through whatever
the slope is (an infinite or NaN slope included), in float, double and float16, with PRelu's slope broadcast
per channel and elementwise."""

from __future__ import annotations

from typing import Any

import mosaicrt
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

_TYPES = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.float16: TensorProto.FLOAT16}


def _x(dtype: Any) -> np.ndarray:
    x = (np.random.default_rng(3).standard_normal((2, 4, 1031)) * 3).astype(dtype)
    x.flat[:6] = [np.nan, -0.0, 0.0, np.inf, -np.inf, -1e-30]
    return x


def _run(node: Any, x: np.ndarray, inits: list[Any]) -> np.ndarray:
    t = _TYPES[x.dtype.type]
    graph = helper.make_graph([node], "sel", [helper.make_tensor_value_info("x", t, list(x.shape))],
                              [helper.make_tensor_value_info("y", t, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    return mosaicrt.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]


def _same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", list(_TYPES), ids=lambda t: t.__name__)
def test_leaky_relu_selects(dtype: Any) -> None:
    x = _x(dtype)
    got = _run(helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.1), x, [])
    with np.errstate(invalid="ignore"):
        want = np.where(x < 0, (x.astype(np.float64) * np.float64(np.float32(0.1))).astype(dtype), x)
    _same(got, want)


@pytest.mark.parametrize("dtype", list(_TYPES), ids=lambda t: t.__name__)
@pytest.mark.parametrize("slope_shape", [(4, 1), (1031,), (2, 4, 1031)], ids=str)
def test_prelu_selects_and_ignores_the_slope_of_positive_values(dtype: Any, slope_shape: tuple[int, ...]) -> None:
    x = _x(dtype)
    s = (np.random.default_rng(4).uniform(0.1, 0.5, slope_shape)).astype(dtype)
    s.flat[0] = np.inf
    s.flat[-1] = np.nan
    got = _run(helper.make_node("PRelu", ["x", "s"], ["y"]), x, [numpy_helper.from_array(s, "s")])
    with np.errstate(invalid="ignore", over="ignore"):
        want = np.where(x < 0, (x.astype(np.float64) * s.astype(np.float64)).astype(dtype), x)
    _same(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda t: t.__name__)
def test_shrink_selects(dtype: Any) -> None:
    x = _x(dtype)
    got = _run(helper.make_node("Shrink", ["x"], ["y"], lambd=1.5, bias=0.25), x, [])
    with np.errstate(invalid="ignore"):
        want = np.where(x < -1.5, x + dtype(0.25), np.where(x > 1.5, x - dtype(0.25), dtype(0))).astype(dtype)
    want[np.isnan(x)] = 0  # NaN is neither below -lambd nor above it
    _same(got, want)
