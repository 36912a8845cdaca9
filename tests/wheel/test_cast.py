"""Cast between float32 and float16 on whole tensors (the vector conversions where the CPU has them) against
numpy: every one of the 65536 float16 values to float32 exactly, and float32 values to float16 rounded to
nearest even: halfway cases both ways, float16 subnormals and the smallest values that round up to one, values
that round to infinity, infinities, NaN; odd lengths for the vectors' tails; 1 and 2 threads."""

from __future__ import annotations

import mosaicrt
import numpy as np
import pytest
from onnx import TensorProto, helper


def _cast(x: np.ndarray, to: int, threads: int) -> np.ndarray:
    src = TensorProto.FLOAT if x.dtype == np.float32 else TensorProto.FLOAT16
    graph = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=to)], "cast",
                              [helper.make_tensor_value_info("x", src, list(x.shape))],
                              [helper.make_tensor_value_info("y", to, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = threads
    return mosaicrt.InferenceSession(model.SerializeToString(), opts).run(None, {"x": x})[0]


@pytest.mark.parametrize("threads", [1, 2])
def test_every_float16_value_widens_exactly(threads: int) -> None:
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    x = np.concatenate([bits, bits[:37]]).view(np.float16)  # 65573 values: a tail of 5 past the vectors
    got = _cast(x, TensorProto.FLOAT, threads)
    with np.errstate(invalid="ignore"):  # (numpy on some CPUs warns on signalling NaNs)
        want = x.astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))  # signed zeros included


def _float_cases() -> np.ndarray:
    rng = np.random.default_rng(5)
    with np.errstate(invalid="ignore"):  # (numpy on some CPUs warns on signalling NaNs)
        halves = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    finite = halves[np.isfinite(halves)].astype(np.float64)
    with np.errstate(over="ignore"):  # (65504's next one up is infinity)
        up = np.nextafter(finite.astype(np.float16), np.float16(np.inf)).astype(np.float64)
    mid = ((finite + up) / 2)[np.isfinite(up)].astype(np.float32)  # exactly halfway between neighbours
    near = np.concatenate([np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf))])
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65519.99, 65520.0, 1e6, -1e6, 2.0 ** -24,
                         2.0 ** -25, 2.0 ** -25 * 1.0001, 2.0 ** -26, 1e-10, -1e-10, 5.96e-8, 6.1e-5], np.float32)
    wide = rng.standard_normal(40_000).astype(np.float32) * np.float32(1000.0)
    raw = rng.integers(0, 2 ** 32, 40_000, dtype=np.uint64).astype(np.uint32).view(np.float32)  # any bit pattern
    return np.concatenate([mid, near, specials, wide, raw, finite.astype(np.float32)[:3]])


@pytest.mark.parametrize("threads", [1, 2])
def test_float32_rounds_to_the_nearest_even_float16(threads: int) -> None:
    x = _float_cases()
    assert x.size % 16 != 0
    got = _cast(x, TensorProto.FLOAT16, threads)
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(np.float16)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint16), want[~nan].view(np.uint16))
