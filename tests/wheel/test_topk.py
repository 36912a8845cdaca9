"""TopK against a numpy reference of the order it promises: values ranked (largest or smallest first), equal
values by their index, NaN above every number both ways. Small k (kept by insertion while the row is scanned)
and large k (a partial sort), on rows with many ties and with NaN, along the last axis and a middle one, for
float, double, float16 and int32."""

from __future__ import annotations

from typing import Any

import mosaicrt
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

_TYPES = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.float16: TensorProto.FLOAT16,
          np.int32: TensorProto.INT32}


def _reference(x: np.ndarray, k: int, axis: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    moved = np.moveaxis(x, axis, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    vals, idx = [], []
    for row in rows:
        order = sorted(range(row.size), key=lambda j: (
            0 if np.isnan(row[j]) else 1,  # NaN first either way (ranked above every number)
            (-row[j] if largest else row[j]) if not np.isnan(row[j]) else 0, j))
        if not largest:  # NaN last when the smallest come first
            order = [j for j in order if not np.isnan(row[j])] + [j for j in order if np.isnan(row[j])]
        sel = order[:k]
        vals.append(row[sel])
        idx.append(sel)
    shape = (*moved.shape[:-1], k)
    return (np.moveaxis(np.array(vals).reshape(shape), -1, axis),
            np.moveaxis(np.array(idx, dtype=np.int64).reshape(shape), -1, axis))


def _data(dtype: Any, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.integers(-20, 20, shape)  # many ties
    if dtype is np.int32:
        return x.astype(np.int32)
    x = (x + rng.integers(0, 2, shape) * 0.5).astype(dtype)
    x.flat[::37] = np.nan
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32], ids=lambda t: t.__name__)
@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize(("k", "axis"), [(1, -1), (5, -1), (16, -1), (17, -1), (5, 1), (40, 1)])
def test_topk_order_matches_the_reference(dtype: Any, largest: int, k: int, axis: int) -> None:
    x = _data(dtype, (3, 50, 4) if axis == 1 else (6, 300), k + largest)
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
    graph = helper.make_graph([node], "topk", [helper.make_tensor_value_info("x", _TYPES[dtype], list(x.shape))],
                              [helper.make_tensor_value_info("v", _TYPES[dtype], None),
                               helper.make_tensor_value_info("i", TensorProto.INT64, None)],
                              [numpy_helper.from_array(np.array([k], np.int64), "k")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    vals, idx = mosaicrt.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    want_vals, want_idx = _reference(x, k, axis, bool(largest))
    np.testing.assert_array_equal(idx, want_idx)
    np.testing.assert_array_equal(vals, want_vals)
