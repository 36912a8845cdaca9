"""Random operators: distributions, seeds (reproducible across sessions, continuing from run to run), the
*Like forms' types, Bernoulli, Multinomial, Dropout in training mode, and refusals of bad attributes."""

from __future__ import annotations

from typing import Any

import mosaicrt
import numpy as np
import pytest
from onnx import TensorProto, helper


def _session(node: Any, inputs: list[Any], out_type: int = TensorProto.FLOAT, opset: int = 22) -> Any:
    graph = helper.make_graph([node], "random", inputs, [helper.make_tensor_value_info("y", out_type, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return mosaicrt.InferenceSession(model.SerializeToString())


def test_random_uniform_and_normal_follow_their_distributions() -> None:
    uni = _session(helper.make_node("RandomUniform", [], ["y"], shape=[200_000], low=-2.0, high=3.0), [])
    (u,) = uni.run(None, {})
    assert u.dtype == np.float32 and u.shape == (200_000,)
    assert u.min() >= -2.0 and u.max() < 3.0
    assert abs(u.mean() - 0.5) < 0.02 and abs(u.var() - 25 / 12) < 0.05
    norm = _session(helper.make_node("RandomNormal", [], ["y"], shape=[400, 500], mean=1.0, scale=2.0,
                                     dtype=TensorProto.DOUBLE), [], TensorProto.DOUBLE)
    (z,) = norm.run(None, {})
    assert z.dtype == np.float64 and z.shape == (400, 500)
    assert abs(z.mean() - 1.0) < 0.02 and abs(z.std() - 2.0) < 0.02
    # about 4.6 % of a normal sample lies beyond 2 standard deviations
    assert 0.04 < np.mean(np.abs(z - 1.0) > 4.0) < 0.052


def test_a_seed_gives_the_same_sequence_in_every_session_and_runs_continue_it() -> None:
    def make(seed: float) -> Any:
        return _session(helper.make_node("RandomUniform", [], ["y"], shape=[64], seed=seed), [])

    a, b, other = make(7.0), make(7.0), make(8.0)
    a1, a2 = a.run(None, {})[0], a.run(None, {})[0]
    b1, b2 = b.run(None, {})[0], b.run(None, {})[0]
    np.testing.assert_array_equal(a1, b1)
    np.testing.assert_array_equal(a2, b2)
    assert not np.array_equal(a1, a2), "a second run continues the sequence (the node is never folded)"
    assert not np.array_equal(a1, other.run(None, {})[0])


def test_without_a_seed_sessions_draw_differently() -> None:
    def make() -> Any:
        return _session(helper.make_node("RandomNormal", [], ["y"], shape=[32]), [])

    assert not np.array_equal(make().run(None, {})[0], make().run(None, {})[0])


@pytest.mark.parametrize(("elem", "np_type"), [(TensorProto.FLOAT, np.float32), (TensorProto.FLOAT16, np.float16)])
def test_uniform_draws_that_round_to_high_stay_inside_the_open_interval(elem: int, np_type: type) -> None:
    # high is the output type's next value after low: about half of the draws, computed in double, round up to
    # high when stored; the interval [low, high) holds only low
    high = float(np.nextafter(np_type(1.0), np_type(2.0)))
    sess = _session(helper.make_node("RandomUniform", [], ["y"], shape=[4096], low=1.0, high=high, dtype=elem,
                                     seed=5.0), [], elem)
    (y,) = sess.run(None, {})
    assert y.dtype == np_type and (y == np_type(1.0)).all()


@pytest.mark.parametrize(("elem", "np_type"), [(TensorProto.FLOAT16, np.float16), (TensorProto.DOUBLE, np.float64)])
def test_like_forms_take_the_input_shape_and_type_unless_dtype_says(elem: int, np_type: type) -> None:
    x = np.zeros((3, 5, 7), np_type)
    sess = _session(helper.make_node("RandomUniformLike", ["x"], ["y"], seed=1.0),
                    [helper.make_tensor_value_info("x", elem, list(x.shape))], elem)
    (y,) = sess.run(None, {"x": x})
    assert y.dtype == np_type and y.shape == x.shape and (y >= 0).all() and (y < 1).all()
    sess = _session(helper.make_node("RandomNormalLike", ["x"], ["y"], dtype=TensorProto.FLOAT),
                    [helper.make_tensor_value_info("x", elem, list(x.shape))])
    (y,) = sess.run(None, {"x": x})
    assert y.dtype == np.float32 and y.shape == x.shape


@pytest.mark.parametrize(("dtype", "np_type"), [(None, np.float32), (TensorProto.INT32, np.int32),
                                                 (TensorProto.BOOL, np.bool_)])
def test_bernoulli_draws_ones_with_the_input_probability(dtype: int | None, np_type: type) -> None:
    kw = {"dtype": dtype} if dtype is not None else {}
    out = dtype if dtype is not None else TensorProto.FLOAT
    sess = _session(helper.make_node("Bernoulli", ["p"], ["y"], seed=3.0, **kw),
                    [helper.make_tensor_value_info("p", TensorProto.FLOAT, [4, 50_000])], out)
    p = np.array([[0.0], [0.3], [0.9], [1.0]], np.float32).repeat(50_000, axis=1)
    (y,) = sess.run(None, {"p": p})
    assert y.dtype == np_type and y.shape == p.shape
    freq = y.astype(np.float64).mean(axis=1)
    assert freq[0] == 0 and freq[3] == 1
    assert abs(freq[1] - 0.3) < 0.01 and abs(freq[2] - 0.9) < 0.01


def test_multinomial_draws_classes_by_their_probability() -> None:
    with np.errstate(divide="ignore"):
        logits = np.log(np.array([[0.2, 0.8, 0.0], [0.5, 0.25, 0.25]], np.float32))
    sess = _session(helper.make_node("Multinomial", ["x"], ["y"], sample_size=40_000, seed=5.0,
                                     dtype=TensorProto.INT64),
                    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])], TensorProto.INT64)
    (y,) = sess.run(None, {"x": logits})
    assert y.dtype == np.int64 and y.shape == (2, 40_000)
    assert not (y[0] == 2).any(), "a class of probability 0 (-inf) is never drawn"
    np.testing.assert_allclose(np.bincount(y[0], minlength=3) / 40_000, [0.2, 0.8, 0.0], atol=0.01)
    np.testing.assert_allclose(np.bincount(y[1], minlength=3) / 40_000, [0.5, 0.25, 0.25], atol=0.01)
    with pytest.raises(mosaicrt.InvalidArgument, match="log-probabilities"):
        sess.run(None, {"x": np.array([[np.nan, 0, 0], [0, 0, 0]], np.float32)})


def test_dropout_in_training_mode_drops_and_rescales() -> None:
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [100_000]),
              helper.make_tensor_value_info("r", TensorProto.FLOAT, []),
              helper.make_tensor_value_info("t", TensorProto.BOOL, [])]
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"], seed=11)
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
               helper.make_tensor_value_info("mask", TensorProto.BOOL, None)]
    graph = helper.make_graph([node], "dropout", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    sess = mosaicrt.InferenceSession(model.SerializeToString())
    x = np.random.default_rng(0).uniform(1, 2, 100_000).astype(np.float32)
    y, mask = sess.run(None, {"x": x, "r": np.array(0.25, np.float32), "t": np.array(True)})
    assert mask.dtype == np.bool_ and abs(mask.mean() - 0.75) < 0.01
    np.testing.assert_allclose(y[mask], x[mask] / 0.75, rtol=1e-6)
    assert (y[~mask] == 0).all()
    y, mask = sess.run(None, {"x": x, "r": np.array(0.25, np.float32), "t": np.array(False)})
    np.testing.assert_array_equal(y, x)
    assert mask.all()


@pytest.mark.parametrize(("node", "message"), [
    (helper.make_node("RandomUniform", [], ["y"], shape=[3], dtype=TensorProto.INT32), "not a floating type"),
    (helper.make_node("RandomNormal", [], ["y"]), "shape attribute is required"),
    (helper.make_node("RandomUniform", [], ["y"], shape=[3], low=2.0, high=1.0), "low <= high"),
    (helper.make_node("Multinomial", ["x"], ["y"], dtype=TensorProto.FLOAT), "int32 or int64"),
])
def test_bad_attributes_are_refused_at_session_creation(node: Any, message: str) -> None:
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])] if node.input else []
    declared = next((a.i for a in node.attribute if a.name == "dtype"), TensorProto.FLOAT)
    with pytest.raises(mosaicrt.InvalidArgument, match=message):
        _session(node, inputs, declared)


def test_concurrent_runs_draw_disjoint_parts_of_the_seeded_sequence() -> None:
    # 8 threads x 25 runs on one session draw exactly the values 200 runs draw one after another on a fresh
    # session with the same seed (each run reserves its own positions of the stream; none is drawn twice).
    from concurrent.futures import ThreadPoolExecutor

    def make() -> Any:
        return _session(helper.make_node("RandomUniform", [], ["y"], shape=[3, 33], seed=4.0), [])

    fresh = make()
    sequential = np.sort(np.concatenate([fresh.run(None, {})[0].ravel() for _ in range(200)]))
    shared = make()
    with ThreadPoolExecutor(8) as pool:
        parts = list(pool.map(lambda _: np.concatenate([shared.run(None, {})[0].ravel() for _ in range(25)]),
                              range(8)))
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), sequential)
