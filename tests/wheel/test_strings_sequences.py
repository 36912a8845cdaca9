"""String tensors, sequences and optionals through the Python API, checked against onnxruntime or numpy."""

from __future__ import annotations

import threading
from typing import Any

import mosaicrt
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

S, F, I64 = TensorProto.STRING, TensorProto.FLOAT, TensorProto.INT64


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any], *, opset: int = 21, ml: bool = False,
           initializers: list[Any] | None = None) -> bytes:
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("ai.onnx.ml", 4)] if ml else [])
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=initializers or [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=10).SerializeToString()


def _both(model: bytes, feed: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    ours = mosaicrt.InferenceSession(model).run(None, feed)
    theirs = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)
    return ours, theirs


def _with_reference(model: bytes, feed: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """mosaicrt and the onnx package's reference evaluator (the specification's own implementation; used
    where onnxruntime differs from it or needs an installed locale)."""
    ours = mosaicrt.InferenceSession(model).run(None, feed)
    theirs = ReferenceEvaluator(onnx.load_from_string(model)).run(None, feed)
    return ours, [np.asarray(t, dtype=object) if np.asarray(t).dtype.kind in "OU" else t for t in theirs]


def _assert_same(ours: list[Any], theirs: list[Any]) -> None:
    assert len(ours) == len(theirs)
    for a, raw in zip(ours, theirs, strict=True):
        b = np.asarray(raw)
        assert a.shape == b.shape and a.dtype == b.dtype, (a, b)
        if b.dtype == object:
            assert a.tolist() == b.tolist()
        else:
            np.testing.assert_array_equal(a, b)


def _sequence_info(name: str, elem: int) -> Any:
    return helper.make_value_info(name, helper.make_sequence_type_proto(helper.make_tensor_type_proto(elem, None)))


WORDS = np.array([["Grüße", "monday", "ΑΒΓ café"], ["", "x y  z", "Дом"]], dtype=object)


def test_string_input_and_output_round_trip_with_their_declared_types() -> None:
    model = _model([helper.make_node("StringConcat", ["a", "b"], ["y"])],
                   [helper.make_tensor_value_info("a", S, [2, 3]), helper.make_tensor_value_info("b", S, [3])],
                   [helper.make_tensor_value_info("y", S, [2, 3])])
    sess = mosaicrt.InferenceSession(model)
    assert [i.type for i in sess.get_inputs()] == ["tensor(string)", "tensor(string)"]
    (y,) = sess.run(None, {"a": WORDS, "b": np.array(["!", "?", "…"])})  # a numpy str array works too
    assert y.dtype == object and y.shape == (2, 3)
    assert y.tolist() == [[w + s for w, s in zip(row, ["!", "?", "…"], strict=True)] for row in WORDS.tolist()]


def test_string_elements_move_through_shape_operators() -> None:
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("Reshape", ["t", "shape"], ["r"]),
             helper.make_node("Gather", ["r", "idx"], ["g"], axis=0),
             helper.make_node("Concat", ["g", "r"], ["c"], axis=0),
             helper.make_node("Slice", ["c", "starts", "ends"], ["s"]),
             helper.make_node("Where", ["cond", "s", "fill"], ["y"])]
    inits = [helper.make_tensor("shape", I64, [1], [6]), helper.make_tensor("idx", I64, [2], [5, 0]),
             helper.make_tensor("starts", I64, [1], [1]), helper.make_tensor("ends", I64, [1], [7]),
             helper.make_tensor("fill", S, [], [b"-"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", S, [2, 3]),
                           helper.make_tensor_value_info("cond", TensorProto.BOOL, [6])],
                   [helper.make_tensor_value_info("y", S, None)], initializers=inits)
    cond = np.array([True, False, True, True, False, True])
    (y,) = mosaicrt.InferenceSession(model).run(None, {"x": WORDS, "cond": cond})
    r = WORDS.T.reshape(6)
    expected = np.where(cond, np.concatenate([r[[5, 0]], r])[1:7], "-")
    assert y.tolist() == expected.tolist()


@pytest.mark.parametrize("action,sensitive", [("LOWER", 0), ("UPPER", 1), ("NONE", 0), ("NONE", 1)])
def test_string_normalizer_removes_stopwords_then_changes_case(action: str, sensitive: int) -> None:
    # (onnxruntime needs the en_US.UTF-8 locale installed for this operator, and the onnx package's reference
    # also strips accents, which the specification does not ask for: the expected values are computed here)
    stopwords = ["Monday", "x y  z"]
    node = helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action=action,
                            is_case_sensitive=sensitive, stopwords=stopwords)
    model = _model([node], [helper.make_tensor_value_info("x", S, [1, 6])],
                   [helper.make_tensor_value_info("y", S, None)])
    words = ["Monday", "monday", "Grüne", "ÀÉÎ", "x Y  z", "ΣΑΒ ñ"]
    key = (lambda w: w) if sensitive else str.lower
    kept = [w for w in words if key(w) not in {key(s) for s in stopwords}]
    change = {"LOWER": str.lower, "UPPER": str.upper, "NONE": lambda w: w}[action]
    (y,) = mosaicrt.InferenceSession(model).run(None, {"x": np.array([words], dtype=object)})
    assert y.tolist() == [[change(w) for w in kept]]


def test_string_split_and_regex_match_the_reference() -> None:
    # (onnxruntime splits "" with a delimiter into no parts; the specification's reference into one, "")
    nodes = [helper.make_node("StringSplit", ["x"], ["parts", "counts"], delimiter=",", maxsplit=2),
             helper.make_node("StringSplit", ["x"], ["words", "n"]),
             helper.make_node("RegexFullMatch", ["x"], ["m"], pattern=r"[a-z]+(,[a-z]*)*")]
    model = _model(nodes, [helper.make_tensor_value_info("x", S, [2, 2])],
                   [helper.make_tensor_value_info(n, t, None) for n, t in
                    [("parts", S), ("counts", I64), ("words", S), ("n", I64), ("m", TensorProto.BOOL)]])
    x = np.array([["a,b,,c", " lead  trail "], ["", "no-delimiter here"]], dtype=object)
    _assert_same(*_with_reference(model, {"x": x}))


def test_casts_between_strings_and_numbers_match_onnxruntime() -> None:
    nodes = [helper.make_node("Cast", ["f"], ["fs"], to=S), helper.make_node("Cast", ["i"], ["is"], to=S),
             helper.make_node("Cast", ["s"], ["sf"], to=F),
             helper.make_node("Cast", ["s"], ["sd"], to=TensorProto.DOUBLE),
             helper.make_node("Cast", ["n"], ["ni"], to=TensorProto.INT32)]
    model = _model(nodes, [helper.make_tensor_value_info("f", F, [7]), helper.make_tensor_value_info("i", I64, [3]),
                           helper.make_tensor_value_info("s", S, [6]), helper.make_tensor_value_info("n", S, [3])],
                   [helper.make_tensor_value_info(n, t, None) for n, t in
                    [("fs", S), ("is", S), ("sf", F), ("sd", TensorProto.DOUBLE), ("ni", TensorProto.INT32)]])
    feed = {"f": np.array([0.1, 1e-5, 3.0, np.nan, -np.inf, 1e20, 123456789], np.float32),
            "i": np.array([-5, 0, 2**62], np.int64),
            "s": np.array(["1.5", "-INF", "nan", "+inf", "1e3", " 7"], dtype=object),
            "n": np.array(["100", "-3", "3.7"], dtype=object)}
    ours, theirs = _both(model, feed)
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == np.asarray(b).dtype
        if a.dtype == object:
            assert a.tolist() == np.asarray(b).tolist()
        else:
            np.testing.assert_array_equal(a, b)


def test_cast_of_a_non_number_string_names_the_element() -> None:
    model = _model([helper.make_node("Cast", ["s"], ["y"], to=F)], [helper.make_tensor_value_info("s", S, [2])],
                   [helper.make_tensor_value_info("y", F, None)])
    with pytest.raises(mosaicrt.InvalidArgument, match=r"element 1 \('abc'\) is not a number"):
        mosaicrt.InferenceSession(model).run(None, {"s": np.array(["1", "abc"], dtype=object)})


def test_label_encoder_and_category_mapper_match_onnxruntime() -> None:
    nodes = [helper.make_node("LabelEncoder", ["x"], ["ids"], domain="ai.onnx.ml", keys_strings=["a", "b", "ü"],
                              values_int64s=[10, 20, 30], default_int64=-7),
             helper.make_node("LabelEncoder", ["ids"], ["back"], domain="ai.onnx.ml", keys_int64s=[10, 30],
                              values_strings=["A", "Ü"], default_string="?"),
             helper.make_node("CategoryMapper", ["x"], ["cat"], domain="ai.onnx.ml", cats_strings=["b", "a"],
                              cats_int64s=[1, 2], default_int64=0)]
    model = _model(nodes, [helper.make_tensor_value_info("x", S, [5])],
                   [helper.make_tensor_value_info(n, t, None) for n, t in [("ids", I64), ("back", S), ("cat", I64)]],
                   ml=True)
    _assert_same(*_both(model, {"x": np.array(["a", "ü", "zz", "b", ""], dtype=object)}))


def test_equal_on_strings_broadcasts() -> None:
    model = _model([helper.make_node("Equal", ["a", "b"], ["y"])],
                   [helper.make_tensor_value_info("a", S, [2, 3]), helper.make_tensor_value_info("b", S, [1, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.BOOL, None)])
    b = np.array([["Grüße", "x", "Дом"]], dtype=object)
    (y,) = mosaicrt.InferenceSession(model).run(None, {"a": WORDS, "b": b})
    np.testing.assert_array_equal(y, b == WORDS)


def test_loop_stacks_strings_made_in_its_body() -> None:
    # Each iteration makes a new string (StringConcat of the carried value and a suffix); the carried
    # values and the stacked scan output must still read correctly after the body's runs are gone.
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("StringConcat", ["acc_in", "suffix"], ["acc_out"]),
         helper.make_node("Identity", ["acc_out"], ["scan"])],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", S, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", S, [2]), helper.make_tensor_value_info("scan", S, [2])])
    node = helper.make_node("Loop", ["n", "", "start"], ["final", "all"], body=body)
    model = _model([node], [helper.make_tensor_value_info("n", I64, []), helper.make_tensor_value_info("start", S, [2]),
                            helper.make_tensor_value_info("suffix", S, [])],
                   [helper.make_tensor_value_info("final", S, None), helper.make_tensor_value_info("all", S, None)])
    final, stacked = mosaicrt.InferenceSession(model).run(
        None, {"n": np.array(4, np.int64), "start": np.array(["a", "β"], dtype=object),
               "suffix": np.array("-ñ", dtype=object)})
    assert final.tolist() == ["a" + "-ñ" * 4, "β" + "-ñ" * 4]
    assert stacked.tolist() == [[s + "-ñ" * k for s in ("a", "β")] for k in range(1, 5)]


def test_string_runs_from_several_threads_agree() -> None:
    model = _model([helper.make_node("StringConcat", ["a", "b"], ["c"]),
                    helper.make_node("Transpose", ["c"], ["y"], perm=[1, 0])],
                   [helper.make_tensor_value_info("a", S, [2, 3]), helper.make_tensor_value_info("b", S, [])],
                   [helper.make_tensor_value_info("y", S, None)])
    sess = mosaicrt.InferenceSession(model)
    errors: list[str] = []

    def work(k: int) -> None:
        for r in range(50):
            suffix = f"#{k}.{r}"
            (y,) = sess.run(None, {"a": WORDS, "b": np.array(suffix, dtype=object)})
            if y.tolist() != [[w + suffix for w in row] for row in WORDS.T.tolist()]:
                errors.append(f"thread {k} run {r}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_sequence_input_and_output_are_lists_with_declared_types() -> None:
    seq_f = _sequence_info("seq", F)
    nodes = [helper.make_node("SequenceInsert", ["seq", "x"], ["longer"]),
             helper.make_node("SequenceLength", ["longer"], ["n"]),
             helper.make_node("ConcatFromSequence", ["longer"], ["stacked"], axis=0, new_axis=1),
             helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0)]
    model = _model(nodes, [seq_f, helper.make_tensor_value_info("x", F, [2, 3])],
                   [_sequence_info("longer", F), helper.make_tensor_value_info("n", I64, []),
                    helper.make_tensor_value_info("stacked", F, None), _sequence_info("rows", F)])
    sess = mosaicrt.InferenceSession(model)
    assert sess.get_inputs()[0].type == "seq(tensor(float))"
    assert sess.get_outputs()[0].type == "seq(tensor(float))"
    items = [np.full((2, 3), k, np.float32) for k in range(2)]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    longer, n, stacked, rows = sess.run(None, {"seq": items, "x": x})
    theirs = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"seq": items, "x": x})
    assert isinstance(longer, list) and len(longer) == 3 and int(n) == 3
    for a, b in zip(longer, theirs[0], strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(stacked, theirs[2])
    assert [r.shape for r in rows] == [(1, 3), (1, 3)]
    # an empty list is an empty sequence
    longer, n, _, _ = sess.run(None, {"seq": [], "x": x})
    assert len(longer) == 1 and int(n) == 1


def test_optional_input_takes_none_or_a_value() -> None:
    opt = helper.make_value_info("maybe", helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [2])))
    nodes = [helper.make_node("OptionalHasElement", ["maybe"], ["has"]),
             helper.make_node("Identity", ["maybe"], ["same"])]
    same = helper.make_value_info("same", helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [2])))
    model = _model(nodes, [opt], [helper.make_tensor_value_info("has", TensorProto.BOOL, []), same])
    sess = mosaicrt.InferenceSession(model)
    assert sess.get_inputs()[0].type == "optional(tensor(float))"
    has, same_value = sess.run(None, {"maybe": None})
    assert not has and same_value is None
    has, same_value = sess.run(None, {"maybe": np.array([1, 2], np.float32)})
    assert has and same_value.tolist() == [1.0, 2.0]


def test_wrong_kinds_of_values_are_refused_by_name() -> None:
    seq_f = _sequence_info("seq", F)
    model = _model([helper.make_node("SequenceLength", ["seq"], ["n"])], [seq_f],
                   [helper.make_tensor_value_info("n", I64, [])])
    sess = mosaicrt.InferenceSession(model)
    with pytest.raises(mosaicrt.InvalidArgument, match="'seq'"):
        sess.run(None, {"seq": np.zeros(3, np.float32)})
    with pytest.raises(mosaicrt.InvalidArgument, match=r"seq\(tensor\(float\)\)"):
        sess.run(None, {"seq": [np.zeros(3, np.int64)]})
    strings = _model([helper.make_node("Identity", ["s"], ["y"])], [helper.make_tensor_value_info("s", S, [1])],
                     [helper.make_tensor_value_info("y", S, None)])
    with pytest.raises(mosaicrt.InvalidArgument, match="'s'"):
        mosaicrt.InferenceSession(strings).run(None, {"s": np.zeros(1, np.float32)})
    numeric = _model([helper.make_node("Identity", ["x"], ["y"])], [helper.make_tensor_value_info("x", F, [1])],
                     [helper.make_tensor_value_info("y", F, None)])
    with pytest.raises(mosaicrt.InvalidArgument, match="string"):
        mosaicrt.InferenceSession(numeric).run(None, {"x": np.array(["1"], dtype=object)})


def test_string_initializers_survive_saving_the_optimized_model(tmp_path: Any) -> None:
    init = helper.make_tensor("suffix", S, [2], [b"!", "ü".encode()])
    model = _model([helper.make_node("StringConcat", ["x", "suffix"], ["y"])],
                   [helper.make_tensor_value_info("x", S, [2])], [helper.make_tensor_value_info("y", S, None)],
                   initializers=[init])
    options = mosaicrt.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "saved.onnx")
    mosaicrt.InferenceSession(model, options)
    (y,) = mosaicrt.InferenceSession(str(tmp_path / "saved.onnx")).run(None, {"x": np.array(["a", "b"], dtype=object)})
    assert y.tolist() == ["a!", "bü"]


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
def test_tfidf_over_a_string_pool_matches_onnxruntime(mode: str) -> None:
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode=mode, min_gram_length=1, max_gram_length=2,
                            max_skip_count=1, ngram_counts=[0, 3], ngram_indexes=[0, 1, 2, 3, 4],
                            pool_strings=["the", "cat", "sat", "the", "cat", "cat", "sat"],
                            weights=[1.0, 2.0, 0.5, 3.0, 1.5])
    model = _model([node], [helper.make_tensor_value_info("x", S, [2, 6])],
                   [helper.make_tensor_value_info("y", F, None)], opset=9)
    x = np.array([["the", "cat", "sat", "on", "the", "cat"], ["cat", "sat", "mat", "cat", "x", "sat"]], dtype=object)
    ours, theirs = _both(model, {"x": x})
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6)


_STRING_DATA_OPS = {
    "Unique": (helper.make_node("Unique", ["x"], ["y", "i", "inv", "c"], sorted=1), []),
    "Tile": (helper.make_node("Tile", ["x", "reps"], ["y"]), [helper.make_tensor("reps", I64, [2], [2, 1])]),
    "Expand": (helper.make_node("Expand", ["x", "shape"], ["y"]), [helper.make_tensor("shape", I64, [3], [2, 2, 3])]),
    "Compress": (helper.make_node("Compress", ["x", "cond"], ["y"], axis=1),
                 [helper.make_tensor("cond", TensorProto.BOOL, [3], [1, 0, 1])]),
    "Split": (helper.make_node("Split", ["x"], ["y", "z"], axis=0, num_outputs=2), []),
    "ReverseSequence": (helper.make_node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=0, time_axis=1),
                        [helper.make_tensor("lens", I64, [2], [2, 3])]),
    "ScatterElements": (helper.make_node("ScatterElements", ["x", "at", "upd"], ["y"], axis=1),
                        [helper.make_tensor("at", I64, [2, 2], [2, 0, 1, 1]),
                         helper.make_tensor("upd", S, [2, 2], [b"u1", b"u2", b"u3", b"u4"])]),
}


@pytest.mark.parametrize("op", sorted(_STRING_DATA_OPS))
def test_data_movement_operators_take_strings_like_onnxruntime(op: str) -> None:
    node, inits = _STRING_DATA_OPS[op]
    outs = [helper.make_value_info(o, onnx.TypeProto()) for o in node.output]
    model = _model([node], [helper.make_tensor_value_info("x", S, [2, 3])], outs, opset=18, initializers=inits)
    ours, theirs = _both(model, {"x": np.array([["b", "a", "c"], ["a", "ü", ""]], dtype=object)})
    assert [np.asarray(a).tolist() for a in ours] == [np.asarray(b).tolist() for b in theirs]
