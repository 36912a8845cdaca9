"""Normalization operators against numpy references in double: InstanceNormalization, GroupNormalization,
LayerNormalization (with its mean and inverse standard deviation outputs) and BatchNormalization in training
mode, on rows long enough for the vector loops and their tails (1037 values: 32 at a time, then 8, then 5) and on
short ones, in float, double and float16 (the generic partial sums), at 1 and 2 threads."""

from __future__ import annotations

from typing import Any

import mosaicrt
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

_TYPES = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.float16: TensorProto.FLOAT16}
_TOL = {np.float32: 2e-5, np.float64: 1e-12, np.float16: 4e-3}


def _run(nodes: list[Any], x: np.ndarray, consts: dict[str, np.ndarray], outputs: list[str], *, opset: int,
         threads: int) -> list[np.ndarray]:
    dt = _TYPES[x.dtype.type]
    graph = helper.make_graph(nodes, "norm", [helper.make_tensor_value_info("x", dt, list(x.shape))],
                              [helper.make_tensor_value_info(o, dt, None) for o in outputs],
                              [numpy_helper.from_array(v, k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = threads
    return mosaicrt.InferenceSession(model.SerializeToString(), opts).run(None, {"x": x})


def _eps(value: float) -> float:
    return float(np.float32(value))  # epsilon is a float attribute


def _data(shape: tuple[int, ...], dtype: Any, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # an offset far from zero: a one-pass variance (E[x^2] - E[x]^2) would lose these digits
    return (rng.standard_normal(shape) * 2.0 + 30.0).astype(dtype)


def _close(got: np.ndarray, want: np.ndarray, dtype: Any) -> None:
    tol = _TOL[dtype]
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max())))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("spatial", [(17, 61), (5,)])
def test_instance_normalization_matches_numpy(spatial: tuple[int, ...], dtype: Any, threads: int) -> None:
    x = _data((2, 3, *spatial), dtype, 1)
    scale = np.array([0.5, -1.5, 2.0], dtype)
    bias = np.array([0.25, 1.0, -3.0], dtype)
    (y,) = _run([helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-3)], x,
                {"s": scale, "b": bias}, ["y"], opset=17, threads=threads)
    xd = x.astype(np.float64)
    axes = tuple(range(2, x.ndim))
    mean, var = xd.mean(axis=axes, keepdims=True), xd.var(axis=axes, keepdims=True)
    shape = (1, 3) + (1,) * len(spatial)
    want = (xd - mean) / np.sqrt(var + _eps(1e-3)) * scale.astype(np.float64).reshape(shape) + \
        bias.astype(np.float64).reshape(shape)
    _close(y, want, dtype)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_group_normalization_matches_numpy(dtype: Any, threads: int) -> None:
    x = _data((2, 6, 13, 40), dtype, 2)  # 2 groups of 3 channels: 1560 values a group
    scale = np.linspace(-1.0, 2.0, 6).astype(dtype)
    bias = np.linspace(0.5, -0.5, 6).astype(dtype)
    (y,) = _run([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, epsilon=1e-5)], x,
                {"s": scale, "b": bias}, ["y"], opset=21, threads=threads)
    xd = x.astype(np.float64).reshape(2, 2, -1)
    std = np.sqrt(xd.var(axis=2, keepdims=True) + _eps(1e-5))
    norm = ((xd - xd.mean(axis=2, keepdims=True)) / std).reshape(x.shape)
    want = norm * scale.astype(np.float64).reshape(1, 6, 1, 1) + bias.astype(np.float64).reshape(1, 6, 1, 1)
    _close(y, want, dtype)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("cols", [1037, 5])
def test_layer_normalization_and_its_statistics_match_numpy(cols: int, dtype: Any, threads: int) -> None:
    x = _data((3, 4, cols), dtype, 3)
    w = np.linspace(0.5, 1.5, cols).astype(dtype)
    b = np.linspace(-1.0, 1.0, cols).astype(dtype)
    node = helper.make_node("LayerNormalization", ["x", "w", "b"], ["y", "mean", "inv"], axis=-1, epsilon=1e-5)
    y, mean, inv = _run([node], x, {"w": w, "b": b}, ["y", "mean", "inv"], opset=17, threads=threads)
    xd = x.astype(np.float64)
    m, v = xd.mean(axis=-1, keepdims=True), xd.var(axis=-1, keepdims=True)
    _close(y, (xd - m) / np.sqrt(v + _eps(1e-5)) * w.astype(np.float64) + b.astype(np.float64), dtype)
    np.testing.assert_allclose(mean.astype(np.float64), m, rtol=1e-6 if dtype != np.float16 else 1e-3)
    np.testing.assert_allclose(inv.astype(np.float64), 1 / np.sqrt(v + _eps(1e-5)),
                               rtol=1e-5 if dtype != np.float16 else 2e-3)


@pytest.mark.parametrize("threads", [1, 2])
def test_batch_normalization_in_training_mode_uses_the_batch_statistics(threads: int) -> None:
    x = _data((3, 4, 11, 23), np.float32, 4)  # 253 values a plane, 3 planes a channel
    consts = {"s": np.array([1.0, 0.5, -2.0, 3.0], np.float32), "b": np.array([0.0, 1.0, 2.0, -1.0], np.float32),
              "m": np.zeros(4, np.float32), "v": np.ones(4, np.float32)}
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], training_mode=1,
                            momentum=0.75, epsilon=1e-5)
    y, rm, rv = _run([node], x, consts, ["y", "rm", "rv"], opset=15, threads=threads)
    xd = x.astype(np.float64)
    mean, var = xd.mean(axis=(0, 2, 3)), xd.var(axis=(0, 2, 3))
    shape = (1, 4, 1, 1)
    want = (xd - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + _eps(1e-5)) * consts["s"].reshape(shape) + \
        consts["b"].reshape(shape)
    _close(y, want, np.float32)
    np.testing.assert_allclose(rm, 0.25 * mean, rtol=1e-5)
    np.testing.assert_allclose(rv, 0.75 + 0.25 * var, rtol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_batch_normalization_of_rows_uses_the_running_statistics(dtype: Any, threads: int) -> None:
    x = _data((300, 37), dtype, 6)  # [N, C]: one value per channel and row
    rng = np.random.default_rng(7)
    consts = {"s": rng.standard_normal(37).astype(dtype), "b": rng.standard_normal(37).astype(dtype),
              "m": (rng.standard_normal(37) + 30).astype(dtype), "v": (rng.uniform(1, 5, 37)).astype(dtype)}
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)
    (y,) = _run([node], x, consts, ["y"], opset=15, threads=threads)
    c = {k: v.astype(np.float64) for k, v in consts.items()}
    want = (x.astype(np.float64) - c["m"]) / np.sqrt(c["v"] + _eps(1e-3)) * c["s"] + c["b"]
    _close(y, want, dtype)
