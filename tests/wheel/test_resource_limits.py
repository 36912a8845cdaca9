"""Resource limits (core/src/resource_limits.h): models that declare huge tensors, nest subgraphs
deeply, have very many nodes or attributes are refused with a clear error naming the limit and how
to raise it -- or run, when within it -- without exhausting memory or the stack. Each limit is
overridable per session (config entry) and per process (environment)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import mosaicrt
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper


def _model(nodes: list, inputs: list, outputs: list, inits: list | None = None) -> bytes:  # type: ignore[type-arg]
    graph = helper.make_graph(nodes, "limits", inputs, outputs, inits or [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


def _options(**entries: int) -> mosaicrt.SessionOptions:
    opts = mosaicrt.SessionOptions()
    for key, value in entries.items():
        opts.add_session_config_entry(f"session.{key}", str(value))
    return opts


def _chain(n: int) -> bytes:
    nodes = [helper.make_node("Relu", ["x" if i == 0 else f"v{i - 1}"], [f"v{i}" if i < n - 1 else "y"], name=f"n{i}")
             for i in range(n)]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])


def test_a_huge_constant_is_refused_not_allocated() -> None:
    # ConstantOfShape of 1e5 x 1e5 x 10 floats (400 GB): constant folding must not try to allocate it
    shape = numpy_helper.from_array(np.array([100_000, 100_000, 10], np.int64), "shape")
    data = _model([helper.make_node("ConstantOfShape", ["shape"], ["c"], name="big"),
                   helper.make_node("Add", ["c", "x"], ["y"], name="add")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [shape])
    opts = _options(max_tensor_bytes=1 << 30)
    with pytest.raises(mosaicrt.MosaicrtError, match=r"over the limit of 1073741824 bytes.*session.max_tensor_bytes"):
        sess = mosaicrt.InferenceSession(data, opts)
        sess.run(None, {"x": np.ones(1, np.float32)})


def test_a_run_that_would_allocate_over_the_limit_fails_cleanly_and_the_session_stays_usable() -> None:
    data = _model([helper.make_node("Expand", ["x", "shape"], ["y"], name="expand")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1]),
                   helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    sess = mosaicrt.InferenceSession(data, _options(max_tensor_bytes=1 << 20))
    x = np.ones(1, np.float32)
    with pytest.raises(mosaicrt.MosaicrtError, match="over the limit of 1048576 bytes"):
        sess.run(None, {"x": x, "shape": np.array([1 << 20, 1 << 20], np.int64)})
    assert sess.run(None, {"x": x, "shape": np.array([2, 3], np.int64)})[0].shape == (2, 3)


def test_kernel_scratch_sized_like_a_huge_output_is_refused_before_it_is_allocated() -> None:
    # GridSample from small inputs to a 2^36-element output, and TfIdfVectorizer whose n-gram indexes ask for
    # 2^40 output columns: each kernel's scratch obeys the tensor limit too, and the sessions stay usable.
    grid = helper.make_node("GridSample", ["x", "g"], ["y"], name="gs")
    gs = mosaicrt.InferenceSession(_model([grid], [helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
                                                   helper.make_tensor_value_info("g", TensorProto.FLOAT, None)],
                                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
                                   _options(max_tensor_bytes=1 << 30))
    x = np.ones((1, 1 << 16, 1, 1), np.float32)
    with pytest.raises(mosaicrt.MosaicrtError, match="GridSample output needs more than the limit of 1073741824 bytes"):
        gs.run(None, {"x": x, "g": np.zeros((1, 1 << 10, 1 << 10, 2), np.float32)})
    assert gs.run(None, {"x": x[:, :2], "g": np.zeros((1, 3, 4, 2), np.float32)})[0].shape == (1, 2, 3, 4)
    tfidf = helper.make_node("TfIdfVectorizer", ["t"], ["y"], name="tfidf", mode="TF", min_gram_length=1,
                             max_gram_length=1, max_skip_count=0, ngram_counts=[0], ngram_indexes=[1 << 40],
                             pool_int64s=[5])
    sess = mosaicrt.InferenceSession(_model([tfidf], [helper.make_tensor_value_info("t", TensorProto.INT64, None)],
                                            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
                                     _options(max_tensor_bytes=1 << 30))
    with pytest.raises(mosaicrt.MosaicrtError, match="over the limit of 1073741824 bytes"):
        sess.run(None, {"t": np.array([5, 5], np.int64)})


def _nested_if(depth: int) -> bytes:
    """`depth` If nodes, each the then/else branch of the one above; the innermost yields x."""
    def leaf(level: int, tag: str) -> object:
        return helper.make_graph([helper.make_node("Identity", ["x"], [f"o{tag}{level}"], name=f"id{tag}{level}")],
                                 f"leaf{tag}{level}", [],
                                 [helper.make_tensor_value_info(f"o{tag}{level}", TensorProto.FLOAT, [1])])

    def branch(level: int) -> object:
        if level == depth:
            return leaf(level, "t")
        body = [helper.make_node("If", ["cond"], [f"o{level}"], name=f"if{level}", then_branch=branch(level + 1),
                                 else_branch=leaf(level, "e"))]
        return helper.make_graph(body, f"g{level}", [], [helper.make_tensor_value_info(f"o{level}", TensorProto.FLOAT,
                                                                                         [1])])
    top = [helper.make_node("If", ["cond"], ["y"], name="if0", then_branch=branch(1), else_branch=leaf(0, "e"))]
    return _model(top, [helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])


def test_deep_subgraph_nesting_runs_within_the_limit_and_is_refused_beyond_it() -> None:
    # (protobuf itself refuses to parse much deeper messages; the decoder's limit guards the stack
    # of every recursive pass over subgraphs)
    data = _nested_if(20)
    sess = mosaicrt.InferenceSession(data)
    (y,) = sess.run(None, {"cond": np.array(True), "x": np.array([2.5], np.float32)})
    assert y.tolist() == [2.5]
    with pytest.raises(mosaicrt.MosaicrtError, match=r"nested deeper than 8 levels.*session.max_graph_depth"):
        mosaicrt.InferenceSession(data, _options(max_graph_depth=8))


def test_100k_node_graph_runs_within_the_default_and_is_refused_under_a_lower_limit() -> None:
    data = _chain(100_000)
    sess = mosaicrt.InferenceSession(data)
    x = np.array([-1, 0, 1, 2], np.float32)
    assert sess.run(None, {"x": x})[0].tolist() == [0, 0, 1, 2]
    with pytest.raises(mosaicrt.MosaicrtError, match=r"more than 50000 nodes.*session.max_nodes"):
        mosaicrt.InferenceSession(data, _options(max_nodes=50_000))


def test_huge_attribute_counts_are_refused() -> None:
    node = helper.make_node("Relu", ["x"], ["y"], name="r")
    node.attribute.extend(helper.make_attribute(f"a{i}", i) for i in range(5000))
    data = _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    with pytest.raises(mosaicrt.MosaicrtError, match=r"more than 1024 attributes.*session.max_node_attributes"):
        mosaicrt.InferenceSession(data)


def test_a_malformed_limit_is_a_clear_error() -> None:
    with pytest.raises(mosaicrt.MosaicrtError, match=r"session\.max_nodes must be a positive integer, got 'lots'"):
        mosaicrt.InferenceSession(_chain(3), _options(max_nodes="lots"))  # type: ignore[arg-type]


def test_the_environment_sets_the_process_default() -> None:
    code = textwrap.dedent(
        f"""
        import mosaicrt, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_resource_limits import _chain
        try:
            mosaicrt.InferenceSession(_chain(20))
        except mosaicrt.MosaicrtError as exc:
            print("refused:", exc)
        else:
            print("accepted")
        """
    )
    env = {**os.environ, "MOSAICRT_MAX_NODES": "10"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert "refused:" in out and "more than 10 nodes" in out and "MOSAICRT_MAX_NODES" in out
