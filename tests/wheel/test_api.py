"""The Python API's shape (onnxruntime-like) and its behaviour on bad input."""

from __future__ import annotations

from pathlib import Path

import mosaicrt
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


def _add_relu_model(dynamic: bool = True) -> onnx.ModelProto:
    dim = "N" if dynamic else 2
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [dim, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [dim, 3])
    bias = numpy_helper.from_array(np.array([1.0, -2.0, 0.5], np.float32), "bias")
    nodes = [helper.make_node("Add", ["x", "bias"], ["t"], name="add"),
             helper.make_node("Relu", ["t"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [x], [y], [bias])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_version_and_providers() -> None:
    assert mosaicrt.__version__.count(".") == 2
    assert mosaicrt.get_available_providers()[-1] == "CPUExecutionProvider"
    assert mosaicrt.get_device() in ("CPU", "GPU")
    info = mosaicrt.get_build_details()
    assert isinstance(mosaicrt.get_build_info(), str) and info["version"] in mosaicrt.get_build_info()
    assert info["abi"].startswith("1.")
    assert ("", "Conv") in mosaicrt.get_cpu_operators()


def test_run_from_bytes_and_path(tmp_path: Path) -> None:
    model = _add_relu_model()
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    x = np.array([[0.0, 1.0, 2.0], [-5.0, 3.0, -0.5]], np.float32)
    expected = np.maximum(x + np.array([1.0, -2.0, 0.5], np.float32), 0)
    for source in (model.SerializeToString(), str(path), path):
        sess = mosaicrt.InferenceSession(source)
        (y,) = sess.run(None, {"x": x})
        np.testing.assert_array_equal(y, expected)
        assert sess.run(["y"], {"x": x})[0].shape == (2, 3)


def test_io_metadata() -> None:
    sess = mosaicrt.InferenceSession(_add_relu_model().SerializeToString())
    (inp,) = sess.get_inputs()
    assert (inp.name, inp.type, inp.shape) == ("x", "tensor(float)", ["N", 3])
    (out,) = sess.get_outputs()
    assert (out.name, out.type) == ("y", "tensor(float)")
    assert sess.get_providers() == ["CPUExecutionProvider"]


def test_session_options_threads() -> None:
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = mosaicrt.InferenceSession(_add_relu_model().SerializeToString(), sess_options=opts)
    assert sess.run(None, {"x": np.zeros((4, 3), np.float32)})[0].shape == (4, 3)
    opts.intra_op_num_threads = -1
    with pytest.raises(mosaicrt.InvalidArgument, match="intra_op_num_threads"):
        mosaicrt.InferenceSession(_add_relu_model().SerializeToString(), sess_options=opts)


@pytest.mark.parametrize(
    ("feed", "error", "match"),
    [
        ({"nope": np.zeros((2, 3), np.float32)}, mosaicrt.InvalidArgument, "unknown input name 'nope'"),
        ({}, mosaicrt.InvalidArgument, "missing input 'x'"),
        ({"x": np.zeros((2, 3), np.float64)}, mosaicrt.InvalidArgument, "element type float64"),
        ({"x": np.zeros((2, 3, 1), np.float32)}, mosaicrt.InvalidArgument, "rank 3"),
        ({"x": np.zeros((2, 4), np.float32)}, mosaicrt.InvalidArgument, "dimension 1"),
        ({"x": np.array([["a", "b", "c"]])}, mosaicrt.InvalidArgument, "string"),
    ],
)
def test_bad_feeds_raise_clear_errors(feed: dict[str, np.ndarray], error: type, match: str) -> None:
    sess = mosaicrt.InferenceSession(_add_relu_model().SerializeToString())
    with pytest.raises(error, match=match):
        sess.run(None, feed)


def test_unknown_output_name() -> None:
    sess = mosaicrt.InferenceSession(_add_relu_model().SerializeToString())
    with pytest.raises(mosaicrt.InvalidArgument, match="unknown output name 'z'"):
        sess.run(["z"], {"x": np.zeros((1, 3), np.float32)})


def test_non_contiguous_and_scalar_inputs() -> None:
    sess = mosaicrt.InferenceSession(_add_relu_model().SerializeToString())
    x = np.arange(12, dtype=np.float32).reshape(3, 4)[:, :3]  # a strided view
    expected = np.maximum(x + np.array([1.0, -2.0, 0.5], np.float32), 0)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], expected)


def test_nan_propagates() -> None:
    sess = mosaicrt.InferenceSession(_add_relu_model().SerializeToString())
    (y,) = sess.run(None, {"x": np.array([[np.nan, 0, 0]], np.float32)})
    assert np.isnan(y[0, 0])


def test_missing_file() -> None:
    with pytest.raises(mosaicrt.NoSuchFile, match="cannot open model file"):
        mosaicrt.InferenceSession("/nonexistent/model.onnx")


def test_unsupported_op_named_at_creation() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    node = helper.make_node("FancyOp", ["x"], ["y"], name="fancy", domain="com.example")
    graph = helper.make_graph([node], "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 3)])
    with pytest.raises(mosaicrt.NotImplementedInRuntime) as info:
        mosaicrt.InferenceSession(model.SerializeToString())
    message = str(info.value)
    for part in ("fancy", "FancyOp", "com.example", "opset 3"):
        assert part in message


def test_graph_errors() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    node = helper.make_node("Relu", ["undefined_value"], ["y"], name="r")
    graph = helper.make_graph([node], "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(mosaicrt.InvalidModel, match="'undefined_value' is not a graph input"):
        mosaicrt.InferenceSession(model.SerializeToString())


def test_truncated_model_names_offset() -> None:
    data = _add_relu_model().SerializeToString()
    with pytest.raises(mosaicrt.InvalidModel, match=r"malformed model at byte \d+"):
        mosaicrt.InferenceSession(data[: len(data) // 2])
    with pytest.raises(mosaicrt.InvalidModel, match="empty"):
        mosaicrt.InferenceSession(b"")


def test_shape_mismatch_in_kernel_is_an_error() -> None:
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", "K"])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, ["K2", "M"])
    node = helper.make_node("MatMul", ["a", "b"], ["c"], name="mm")
    graph = helper.make_graph([node], "g", [a, b], [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)])
    sess = mosaicrt.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                                     .SerializeToString())
    with pytest.raises(mosaicrt.InvalidArgument, match="mm"):
        sess.run(None, {"a": np.zeros((2, 3), np.float32), "b": np.zeros((4, 5), np.float32)})


def test_external_data(tmp_path: Path) -> None:
    weights = np.arange(3000, dtype=np.float32).reshape(1000, 3)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1000, 3])
    w = numpy_helper.from_array(weights, "w")
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1000, 3])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "ext.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="ext.data", size_threshold=16)
    assert (tmp_path / "ext.data").exists()
    sess = mosaicrt.InferenceSession(str(path))
    np.testing.assert_array_equal(sess.run(None, {"x": np.ones((1000, 3), np.float32)})[0], weights + 1)
    with pytest.raises(mosaicrt.InvalidArgument, match="external file"):
        mosaicrt.InferenceSession(path.read_bytes())
    opts = mosaicrt.SessionOptions()
    opts.add_session_config_entry("session.model_dir", str(tmp_path))
    assert mosaicrt.InferenceSession(path.read_bytes(), sess_options=opts).run(
        None, {"x": np.ones((1000, 3), np.float32)})[0].shape == (1000, 3)
    (tmp_path / "ext.data").unlink()
    with pytest.raises(mosaicrt.NoSuchFile, match=r"ext\.data"):
        mosaicrt.InferenceSession(str(path))


def test_external_data_path_traversal_refused(tmp_path: Path) -> None:
    model = onnx.load_model_from_string(_add_relu_model().SerializeToString())
    init = model.graph.initializer[0]
    init.ClearField("raw_data")
    init.ClearField("float_data")
    init.data_location = TensorProto.EXTERNAL
    entry = init.external_data.add()
    entry.key, entry.value = "location", "../../etc/passwd"
    path = tmp_path / "evil.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(mosaicrt.InvalidModel, match="relative path inside"):
        mosaicrt.InferenceSession(str(path))


def test_concurrent_runs_share_a_session() -> None:
    from concurrent.futures import ThreadPoolExecutor

    sess = mosaicrt.InferenceSession(_add_relu_model().SerializeToString())
    xs = [np.full((8, 3), i, np.float32) for i in range(16)]
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda x: sess.run(None, {"x": x})[0], xs))
    for x, y in zip(xs, outs, strict=True):
        np.testing.assert_array_equal(y, np.maximum(x + np.array([1.0, -2.0, 0.5], np.float32), 0))


def test_model_local_functions_are_inlined() -> None:
    # y = scaled_relu(x, alpha=2.0) twice, the function defined in the model itself
    fn = helper.make_function(
        "custom.ops", "ScaledRelu", ["a"], ["b"],
        [helper.make_node("Constant", [], ["s"], value_float=1.0),
         helper.make_node("Relu", ["a"], ["r"]),
         helper.make_node("LeakyRelu", ["r"], ["t"], alpha=0.5),
         helper.make_node("Mul", ["t", "s"], ["u"]),
         helper.make_node("Mul", ["u", "u"], ["b"])],
        opset_imports=[helper.make_opsetid("", 17)],
    )
    nodes = [helper.make_node("ScaledRelu", ["x"], ["h"], domain="custom.ops", name="first"),
             helper.make_node("ScaledRelu", ["h"], ["y"], domain="custom.ops", name="second")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    model = helper.make_model(graph, functions=[fn],
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("custom.ops", 1)])
    x = np.array([-1.0, 0.5, 1.0, 2.0], np.float32)
    (y,) = mosaicrt.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    h = np.maximum(x, 0) ** 2
    np.testing.assert_allclose(y, h**2, rtol=1e-6)


def test_outputs_are_owned_by_the_caller() -> None:
    """Outputs are zero-copy views of the core's buffers, except where the core would share
    memory with a constant or the caller's input: writing to an output changes nothing else."""
    w = numpy_helper.from_array(np.ones(3, np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Identity", ["w"], ["y"]), helper.make_node("Identity", ["x"], ["z"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [3])], [w])
    sess = mosaicrt.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                                     .SerializeToString())
    x = np.zeros(3, np.float32)
    y, z = sess.run(None, {"x": x})
    y[:] = 5
    z[:] = 7
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], np.ones(3, np.float32))
    np.testing.assert_array_equal(x, np.zeros(3, np.float32))


def _conv_bn_relu_model(bn_scale_is_input: bool) -> onnx.ModelProto:
    rng = np.random.default_rng(7)
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b"),
        numpy_helper.from_array(rng.uniform(0.5, 2, 4).astype(np.float32), "scale"),
        numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "shift"),
        numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "mean"),
        numpy_helper.from_array(rng.uniform(0.5, 2, 4).astype(np.float32), "var"),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])]
    if bn_scale_is_input:  # an initializer that is also a graph input may be overridden per run
        inputs.append(helper.make_tensor_value_info("scale", TensorProto.FLOAT, [4]))
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["n"], epsilon=1e-3),
             helper.make_node("Relu", ["n"], ["y"])]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("bn_scale_is_input", [False, True])
def test_graph_optimizations_keep_results(bn_scale_is_input: bool) -> None:
    import onnxruntime

    model = _conv_bn_relu_model(bn_scale_is_input).SerializeToString()
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    feeds: list[dict[str, np.ndarray]] = [{"x": x}]
    if bn_scale_is_input:
        feeds.append({"x": x, "scale": np.full(4, 3.0, np.float32)})  # overriding must take effect
    ort = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    for feed in feeds:
        expected = ort.run(None, feed)[0]
        for level in (mosaicrt.GraphOptimizationLevel.ORT_DISABLE_ALL, mosaicrt.GraphOptimizationLevel.ORT_ENABLE_ALL):
            opts = mosaicrt.SessionOptions()
            opts.graph_optimization_level = level
            got = mosaicrt.InferenceSession(model, sess_options=opts).run(None, feed)[0]
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)



LAZY_ML_DTYPES = """
import sys
import numpy as np
import mosaicrt

assert "ml_dtypes" not in sys.modules, "import mosaicrt imported ml_dtypes"
mode, to_bf16, from_f8 = sys.argv[1:]
if mode == "output":  # the session's output type asks for ml_dtypes
    sess = mosaicrt.InferenceSession(to_bf16)
    assert sess.get_outputs()[0].type == "tensor(bfloat16)"
    (y,) = sess.run(None, {"x": np.array([1.5, -2.0, 3.0], np.float32)})
    assert y.dtype.name == "bfloat16" and y.astype(np.float32).tolist() == [1.5, -2.0, 3.0], (y.dtype, y)
else:  # the caller imports ml_dtypes after mosaicrt and feeds its arrays
    import ml_dtypes
    x = np.array([0.5, -1.0, 2.0], ml_dtypes.float8_e4m3fn)
    assert mosaicrt.OrtValue.ortvalue_from_numpy(x).data_type() == "tensor(float8e4m3fn)"
    (z,) = mosaicrt.InferenceSession(from_f8).run(None, {"x": x})
    assert z.tolist() == [0.5, -1.0, 2.0], z
print("lazy ok")
"""


@pytest.mark.parametrize("mode", ["output", "input"])
def test_ml_dtypes_is_imported_only_when_a_type_needs_it(mode: str, tmp_path: Path) -> None:
    """`import mosaicrt` leaves ml_dtypes (most of a second to import) alone; a bfloat16 output imports it,
    and float8 arrays the caller makes after importing mosaicrt are accepted."""
    import subprocess
    import sys

    pytest.importorskip("ml_dtypes")

    def cast(src: int, dst: int, path: Path) -> str:
        g = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=dst)], "cast",
                              [helper.make_tensor_value_info("x", src, [3])],
                              [helper.make_tensor_value_info("y", dst, [3])])
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10), path)
        return str(path)

    models = [cast(TensorProto.FLOAT, TensorProto.BFLOAT16, tmp_path / "to_bf16.onnx"),
              cast(TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT, tmp_path / "from_f8.onnx")]
    run = subprocess.run([sys.executable, "-c", LAZY_ML_DTYPES, mode, *models], capture_output=True, text=True,
                         cwd=tmp_path, check=False)
    assert run.returncode == 0 and "lazy ok" in run.stdout, run.stdout + run.stderr
