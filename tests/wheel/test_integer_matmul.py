"""MatMulInteger against an exact numpy definition, over the forms of B the runtime packs: on CPUs with the int16
kernels (AVX2 without VNNI, the portable kernel), products of one or two rows run over B's raw bytes and larger ones
over int16 panels, each form packed when a run first needs it. A session whose batch changes between runs uses both
forms of the same constant B, so every case here runs several row counts through one session."""
from __future__ import annotations

import mosaicrt
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

_ONNX = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}


def _bytes(rng: np.random.Generator, dtype: type, shape: tuple[int, ...], extreme: bool) -> np.ndarray:
    info = np.iinfo(dtype)
    if extreme:  # only the ends of the range: the largest products and pair sums
        return np.where(rng.integers(0, 2, shape) == 1, info.max, info.min).astype(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


def _model(a_type: type, b: np.ndarray, bz: np.ndarray | None, *, b_constant: bool, rank: int) -> bytes:
    k = b.shape[-2]
    a_shape = ["M", k] if rank == 2 else [b.shape[0], "M", k]
    inputs = [helper.make_tensor_value_info("a", _ONNX[a_type], a_shape),
              helper.make_tensor_value_info("az", _ONNX[a_type], [])]
    inits = []
    if b_constant:
        inits.append(numpy_helper.from_array(b, "b"))
    else:
        inputs.append(helper.make_tensor_value_info("b", _ONNX[b.dtype.type], list(b.shape)))
    names = ["a", "b", "az"]
    if bz is not None:
        inits.append(numpy_helper.from_array(bz, "bz"))
        names.append("bz")
    node = helper.make_node("MatMulInteger", names, ["y"])
    graph = helper.make_graph([node], "mmi", inputs, [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def _want(a: np.ndarray, az: np.ndarray, b: np.ndarray, bz: np.ndarray | None) -> np.ndarray:
    bs = b.astype(np.int64) - (0 if bz is None else bz.astype(np.int64))
    return np.matmul(a.astype(np.int64) - az.astype(np.int64), bs).astype(np.int32)


# K: odd (the padded last pair), deep; N: under one panel, not a multiple of 16, several panels
CASES = [(33, 10), (256, 512), (1031, 40), (7, 17)]


@pytest.mark.parametrize("a_type", [np.uint8, np.int8])
@pytest.mark.parametrize("b_type", [np.uint8, np.int8])
@pytest.mark.parametrize("zero_points", ["none", "scalar", "per column"])
@pytest.mark.parametrize("b_constant", [True, False])
def test_every_row_count_through_one_session(a_type: type, b_type: type, zero_points: str, b_constant: bool) -> None:
    rng = np.random.default_rng([a_type == np.int8, b_type == np.int8, len(zero_points), b_constant])
    for i, (k, n) in enumerate(CASES):
        extreme = i % 2 == 1
        b = _bytes(rng, b_type, (k, n), extreme)
        bz = {"none": None, "scalar": _bytes(rng, b_type, (), extreme),
              "per column": _bytes(rng, b_type, (n,), extreme)}[zero_points]
        opts = mosaicrt.SessionOptions()
        opts.intra_op_num_threads = 2 if i % 2 else 1
        sess = mosaicrt.InferenceSession(_model(a_type, b, bz, b_constant=b_constant, rank=2), opts)
        for m in (1, 2, 3, 7, 1, 2):  # the byte form, then the int16 panels, then the byte form again
            a = _bytes(rng, a_type, (m, k), extreme)
            az = _bytes(rng, a_type, (), extreme)
            feed = {"a": a, "az": az} | ({} if b_constant else {"b": b})
            got = sess.run(None, feed)[0]
            np.testing.assert_array_equal(got, _want(a, az, b, bz), err_msg=f"M={m} K={k} N={n}")


@pytest.mark.parametrize("b_type", [np.uint8, np.int8])
def test_a_stack_of_b_matrices_one_row_each(b_type: type) -> None:
    """B of 3 matrices (each packed for its own product), one row of A against each."""
    rng = np.random.default_rng(11)
    b = _bytes(rng, b_type, (3, 65, 24), False)
    sess = mosaicrt.InferenceSession(_model(np.uint8, b, None, b_constant=True, rank=3))
    for m in (1, 4):
        a = _bytes(rng, np.uint8, (3, m, 65), False)
        az = np.array(rng.integers(0, 256), np.uint8)
        np.testing.assert_array_equal(sess.run(None, {"a": a, "az": az})[0], _want(a, az, b, None))
