"""The ai.onnx.ml operators of scikit-learn pipelines (scalers, imputers, encoders, linear models, ZipMap),
built as scikit-learn's converters lay them out, against onnxruntime."""

from __future__ import annotations

from typing import Any

import mosaicrt
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

F, I64, S = TensorProto.FLOAT, TensorProto.INT64, TensorProto.STRING
ML = "ai.onnx.ml"
RNG = np.random.default_rng(7)


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any]) -> bytes:
    graph = helper.make_graph(nodes, "sklearn", inputs, outputs)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8).SerializeToString()


def _run_both(model: bytes, feed: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    ours = mosaicrt.InferenceSession(model).run(None, feed)
    theirs = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)
    return ours, theirs


def _zipmap_output(name: str, key: int) -> Any:
    value = helper.make_map_type_proto(key, helper.make_tensor_type_proto(F, []))
    return helper.make_value_info(name, helper.make_sequence_type_proto(value))


@pytest.mark.parametrize("post", ["SOFTMAX", "LOGISTIC", "NONE", "SOFTMAX_ZERO"])
def test_scaled_multiclass_logistic_regression_with_zipmap(post: str) -> None:
    classes, features = 3, 4
    nodes = [
        helper.make_node("Scaler", ["x"], ["scaled"], domain=ML, offset=[0.5, -1.0, 2.0, 0.0],
                         scale=[2.0, 0.5, 1.0, 3.0]),
        helper.make_node("Normalizer", ["scaled"], ["normed"], domain=ML, norm="L2"),
        helper.make_node("LinearClassifier", ["normed"], ["label", "probabilities"], domain=ML,
                         coefficients=RNG.standard_normal(classes * features).astype(np.float32).tolist(),
                         intercepts=[0.1, -0.2, 0.3], classlabels_ints=[10, 20, 30], multi_class=1,
                         post_transform=post),
        helper.make_node("ZipMap", ["probabilities"], ["output_probability"], domain=ML,
                         classlabels_int64s=[10, 20, 30]),
    ]
    model = _model(nodes, [helper.make_tensor_value_info("x", F, [None, features])],
                   [helper.make_tensor_value_info("label", I64, [None]), _zipmap_output("output_probability", I64)])
    x = RNG.standard_normal((6, features)).astype(np.float32)
    (label, probs), (ort_label, ort_probs) = _run_both(model, {"x": x})
    np.testing.assert_array_equal(label, ort_label)
    assert isinstance(probs, list) and len(probs) == 6
    for ours, theirs in zip(probs, ort_probs, strict=True):
        assert list(ours) == list(theirs)
        np.testing.assert_allclose(list(ours.values()), list(theirs.values()), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("post", ["LOGISTIC", "NONE", "SOFTMAX", "SOFTMAX_ZERO"])
def test_binary_linear_classifier_with_string_labels(post: str) -> None:
    features = 5
    nodes = [helper.make_node("LinearClassifier", ["x"], ["label", "scores"], domain=ML,
                              coefficients=RNG.standard_normal(features).astype(np.float32).tolist(), intercepts=[0.2],
                              classlabels_strings=["no", "yes"], post_transform=post),
             helper.make_node("ZipMap", ["scores"], ["probability"], domain=ML, classlabels_strings=["no", "yes"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", F, [None, features])],
                   [helper.make_tensor_value_info("label", S, [None]), helper.make_tensor_value_info("scores", F, None),
                    _zipmap_output("probability", S)])
    x = RNG.standard_normal((8, features)).astype(np.float32)
    ours, theirs = _run_both(model, {"x": x})
    assert ours[0].tolist() == theirs[0].tolist()
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-5, atol=1e-6)
    assert [sorted(m) for m in ours[2]] == [sorted(m) for m in theirs[2]]


def test_linear_regressor_with_two_targets() -> None:
    features = 3
    node = helper.make_node("LinearRegressor", ["x"], ["y"], domain=ML, targets=2,
                            coefficients=RNG.standard_normal(2 * features).astype(np.float32).tolist(),
                            intercepts=[1.0, -2.0])
    model = _model([node], [helper.make_tensor_value_info("x", F, [None, features])],
                   [helper.make_tensor_value_info("y", F, None)])
    x = RNG.standard_normal((5, features)).astype(np.float32)
    ours, theirs = _run_both(model, {"x": x})
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-6)


def test_imputer_one_hot_encoder_and_feature_vectorizer() -> None:
    nodes = [helper.make_node("Imputer", ["num"], ["filled"], domain=ML, imputed_value_floats=[1.5, -3.0],
                              replaced_value_float=float("nan")),
             helper.make_node("OneHotEncoder", ["cat"], ["onehot"], domain=ML, cats_strings=["red", "green", "blue"],
                              zeros=1),
             helper.make_node("Reshape", ["onehot", "flat"], ["onehot2d"]),
             helper.make_node("FeatureVectorizer", ["filled", "onehot2d"], ["features"], domain=ML,
                              inputdimensions=[2, 3])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("num", F, [None, 2]),
                                           helper.make_tensor_value_info("cat", S, [None, 1])],
                              [helper.make_tensor_value_info("features", F, None)],
                              initializer=[helper.make_tensor("flat", I64, [2], [-1, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)],
                              ir_version=8).SerializeToString()
    num = np.array([[np.nan, 2.0], [3.0, np.nan], [4.0, 5.0]], np.float32)
    cat = np.array([["green"], ["purple"], ["red"]], dtype=object)
    ours, theirs = _run_both(model, {"num": num, "cat": cat})
    np.testing.assert_allclose(ours[0], theirs[0])


def test_one_hot_encoder_without_zeros_refuses_an_unknown_category() -> None:
    node = helper.make_node("OneHotEncoder", ["cat"], ["y"], domain=ML, cats_int64s=[1, 2], zeros=0)
    model = _model([node], [helper.make_tensor_value_info("cat", I64, [None])],
                   [helper.make_tensor_value_info("y", F, None)])
    with pytest.raises(mosaicrt.InvalidArgument, match="not a known category"):
        mosaicrt.InferenceSession(model).run(None, {"cat": np.array([1, 3], np.int64)})


def test_map_outputs_are_reported_with_their_type() -> None:
    node = helper.make_node("ZipMap", ["p"], ["m"], domain=ML, classlabels_strings=["a", "b"])
    model = _model([node], [helper.make_tensor_value_info("p", F, [None, 2])], [_zipmap_output("m", S)])
    sess = mosaicrt.InferenceSession(model)
    assert sess.get_outputs()[0].type == "seq(map(string,tensor(float)))"
    (maps,) = sess.run(None, {"p": np.array([[0.25, 0.75]], np.float32)})
    assert maps == [{"a": 0.25, "b": 0.75}]


def _forest(n_trees: int, classes: int, per_class_leaves: bool, features: int) -> dict[str, Any]:
    """Random depth-2 trees laid out as scikit-learn's converters do: nodes_* per node, one class_* entry per
    (leaf, class) scored (every class, or class 0 alone for a binary model's single score)."""
    attrs: dict[str, list[Any]] = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_values",
                                                   "nodes_modes", "nodes_truenodeids", "nodes_falsenodeids",
                                                   "class_treeids", "class_nodeids", "class_ids", "class_weights")}
    for t in range(n_trees):
        # node 0 splits to 1 and 2, both split to leaves 3..6
        for node, (true_id, false_id) in {0: (1, 2), 1: (3, 4), 2: (5, 6)}.items():
            attrs["nodes_treeids"].append(t)
            attrs["nodes_nodeids"].append(node)
            attrs["nodes_featureids"].append(int(RNG.integers(features)))
            attrs["nodes_values"].append(float(RNG.standard_normal()))
            attrs["nodes_modes"].append("BRANCH_LEQ")
            attrs["nodes_truenodeids"].append(true_id)
            attrs["nodes_falsenodeids"].append(false_id)
        for leaf in range(3, 7):
            for k, v in (("nodes_treeids", t), ("nodes_nodeids", leaf), ("nodes_featureids", 0), ("nodes_values", 0.0),
                         ("nodes_modes", "LEAF"), ("nodes_truenodeids", 0), ("nodes_falsenodeids", 0)):
                attrs[k].append(v)
            for c in range(classes if per_class_leaves else 1):
                attrs["class_treeids"].append(t)
                attrs["class_nodeids"].append(leaf)
                attrs["class_ids"].append(c)
                attrs["class_weights"].append(float(RNG.uniform(-1, 1)))
    return attrs


@pytest.mark.parametrize("case", ["forest-3-classes", "boosting-binary-logistic", "forest-strings-softmax",
                                  "boosting-binary-none"])
def test_tree_ensemble_classifier_matches_onnxruntime(case: str) -> None:
    features = 4
    if case == "forest-3-classes":
        attrs = _forest(5, 3, True, features) | {"classlabels_int64s": [0, 1, 2], "post_transform": "NONE"}
    elif case == "forest-strings-softmax":
        attrs = _forest(3, 3, True, features) | {"classlabels_strings": ["cat", "dog", "eel"],
                                                 "post_transform": "SOFTMAX", "base_values": [0.1, 0.0, -0.1]}
    else:
        post = "LOGISTIC" if case == "boosting-binary-logistic" else "NONE"
        attrs = _forest(4, 2, False, features) | {"classlabels_int64s": [0, 1], "post_transform": post,
                                                  "base_values": [0.25]}
    strings = "classlabels_strings" in attrs
    node = helper.make_node("TreeEnsembleClassifier", ["x"], ["label", "probabilities"], domain=ML, **attrs)
    model = _model([node], [helper.make_tensor_value_info("x", F, [None, features])],
                   [helper.make_tensor_value_info("label", S if strings else I64, [None]),
                    helper.make_tensor_value_info("probabilities", F, None)])
    x = RNG.standard_normal((16, features)).astype(np.float32)
    ours, theirs = _run_both(model, {"x": x})
    assert ours[0].tolist() == theirs[0].tolist()
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-5, atol=1e-6)
