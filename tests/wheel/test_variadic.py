"""Sum / Mean / Max / Min over several inputs whose broadcast grows with a later input."""

from __future__ import annotations

import mosaicrt
import numpy as np
import pytest
from onnx import TensorProto, helper

_NUMPY = {"Sum": lambda xs: np.sum(np.broadcast_arrays(*xs), axis=0),
          "Mean": lambda xs: np.mean(np.broadcast_arrays(*xs), axis=0),
          "Max": lambda xs: np.max(np.broadcast_arrays(*xs), axis=0),
          "Min": lambda xs: np.min(np.broadcast_arrays(*xs), axis=0)}


@pytest.mark.parametrize("op", sorted(_NUMPY))
@pytest.mark.parametrize(
    "shapes", [[(3,), (3,), (2, 3)], [(1, 3), (2, 1), (4, 2, 3)], [(5,), (2, 1, 5), (1,), (1, 3, 1)]]
)
def test_later_inputs_may_broadcast_the_output_wider(op: str, shapes: list[tuple[int, ...]]) -> None:
    rng = np.random.default_rng(len(shapes))
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    names = [f"x{i}" for i in range(len(xs))]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(x.shape))
              for n, x in zip(names, xs, strict=True)]
    graph = helper.make_graph([helper.make_node(op, names, ["y"])], "variadic", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    (y,) = mosaicrt.InferenceSession(model.SerializeToString()).run(None, dict(zip(names, xs, strict=True)))
    np.testing.assert_allclose(y, _NUMPY[op](xs), rtol=1e-6, atol=1e-6)
