"""GatherElements against numpy's take_along_axis: every axis of a 4-D tensor, indices smaller than the data on
the other axes, negative indices, int32 and int64 indices, 1 and 2 threads, and an out-of-range index refused."""

from __future__ import annotations

import mosaicrt
import numpy as np
import pytest
from onnx import TensorProto, helper


def _session(x_shape: tuple[int, ...], i_shape: tuple[int, ...], axis: int, itype: int, threads: int) -> object:
    graph = helper.make_graph([helper.make_node("GatherElements", ["x", "i"], ["y"], axis=axis)], "ge",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape)),
                               helper.make_tensor_value_info("i", itype, list(i_shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = threads
    return mosaicrt.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
                                     .SerializeToString(), opts)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("itype", [TensorProto.INT64, TensorProto.INT32])
@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1])
def test_gather_elements_matches_take_along_axis(axis: int, itype: int, threads: int) -> None:
    rng = np.random.default_rng(axis + 5)
    x = rng.standard_normal((3, 4, 37, 300)).astype(np.float32)
    i_shape = [2, 3, 30, 250]
    i_shape[axis] = 41  # longer than the data along the axis itself
    d = x.shape[axis]
    idx = rng.integers(-d, d, i_shape)  # negative ones count from the end
    idx = idx.astype(np.int64 if itype == TensorProto.INT64 else np.int32)
    got = _session(x.shape, idx.shape, axis, itype, threads).run(None, {"x": x, "i": idx})[0]
    sub = x[tuple(slice(0, n) if k != axis % 4 else slice(None) for k, n in enumerate(i_shape))]
    want = np.take_along_axis(sub, np.where(idx < 0, idx + d, idx).astype(np.int64), axis=axis)
    np.testing.assert_array_equal(got, want)


def test_gather_elements_refuses_an_index_out_of_range() -> None:
    x = np.zeros((2, 5), np.float32)
    idx = np.array([[0, 4], [5, 1]], np.int64)
    with pytest.raises(mosaicrt.MosaicrtError, match="out of bounds"):
        _session(x.shape, idx.shape, 1, TensorProto.INT64, 1).run(None, {"x": x, "i": idx})
