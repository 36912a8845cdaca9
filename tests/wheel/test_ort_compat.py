"""onnxruntime code run unchanged against mosaicrt.

Each check is parametrized over both runtimes: onnxruntime is the oracle (a test dependency only),
so a check that fails for onnxruntime is a wrong check, and one that fails for mosaicrt is a gap.
"""

from __future__ import annotations

import copy
import gc
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import mosaicrt
import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

RUNTIMES = {"onnxruntime": onnxruntime, "mosaicrt": mosaicrt}
CPU = ["CPUExecutionProvider"]
BIAS = np.array([1.0, -2.0, 0.5], np.float32)


@pytest.fixture(params=list(RUNTIMES))
def rt(request: pytest.FixtureRequest) -> ModuleType:
    return RUNTIMES[request.param]


def _errors(rt: ModuleType) -> ModuleType:
    return rt.capi.onnxruntime_pybind11_state


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto],
           initializers: list[onnx.TensorProto] | None = None, opsets: dict[str, int] | None = None,
           **fields: Any) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, fields.pop("graph_name", "g"), inputs, outputs, initializers or [],
                              doc_string=fields.pop("graph_doc", None))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in
                                                    (opsets or {"": 17}).items()], **fields)
    model.ir_version = 8
    return model


def _add_relu(dim: int | str = "N", bias_is_input: bool = False) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [dim, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [dim, 3])
    inputs = [x]
    if bias_is_input:
        inputs.append(helper.make_tensor_value_info("bias", TensorProto.FLOAT, [3]))
    nodes = [helper.make_node("Add", ["x", "bias"], ["t"], name="add"),
             helper.make_node("Relu", ["t"], ["y"], name="relu")]
    return _model(nodes, inputs, [y], [numpy_helper.from_array(BIAS, "bias")])


def _expected(x: np.ndarray, bias: np.ndarray = BIAS) -> np.ndarray:
    return np.maximum(x + bias, 0)


def _session(rt: ModuleType, model: onnx.ModelProto | bytes | str, options: Any = None) -> Any:
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    return rt.InferenceSession(source, sess_options=options, providers=CPU)


X = np.array([[0.0, 1.0, 2.0], [-5.0, 3.0, -0.5]], np.float32)


# ---- sessions: copies and threads ----
def test_copied_session_outlives_the_original(rt: ModuleType) -> None:
    s = _session(rt, _add_relu())
    s2 = copy.copy(s)
    del s
    gc.collect()
    np.testing.assert_array_equal(s2.run(None, {"x": X})[0], _expected(X))


def test_copy_then_exit_does_not_crash(rt: ModuleType, tmp_path: Path) -> None:
    """The original crash: two objects owning one native handle (also at interpreter exit)."""
    script = (
        "import copy, gc, numpy as np, sys\n"
        f"import {rt.__name__} as rt\n"
        "s = rt.InferenceSession(open(sys.argv[1], 'rb').read(), providers=['CPUExecutionProvider'])\n"
        "s2 = copy.copy(s); s3 = copy.copy(s2); del s; gc.collect()\n"
        "x = np.ones((2, 3), np.float32)\n"
        "assert s2.run(None, {'x': x})[0].shape == (2, 3)\n"
        "del s2; gc.collect()\n"
        "print(s3.run(None, {'x': x})[0].sum())\n"
    )
    model = tmp_path / "m.onnx"
    onnx.save(_add_relu(), str(model))
    done = subprocess.run([sys.executable, "-c", script, str(model)], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.strip()) == pytest.approx(float(_expected(np.ones((2, 3), np.float32)).sum()))


def test_mosaicrt_deepcopy_shares_and_pickle_is_refused() -> None:
    s = _session(mosaicrt, _add_relu())
    s2 = copy.deepcopy(s)
    del s
    gc.collect()
    np.testing.assert_array_equal(s2.run(None, {"x": X})[0], _expected(X))
    import pickle

    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(s2)


def test_threads_share_a_session_and_its_copies(rt: ModuleType) -> None:
    s = _session(rt, _add_relu())
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def work(seed: int, session: Any) -> None:
        rng = np.random.default_rng(seed)
        try:
            start.wait()
            for _ in range(30):
                x = rng.standard_normal((seed % 4 + 1, 3)).astype(np.float32)
                (y,) = session.run(["y"], {"x": x})
                np.testing.assert_array_equal(y, _expected(x))
        except BaseException as exc:  # collected and re-raised on the main thread
            errors.append(exc)

    # half the threads use the session, half their own copy; the main thread drops its references
    threads = [threading.Thread(target=work, args=(k, s if k % 2 else copy.copy(s))) for k in range(8)]
    for t in threads:
        t.start()
    del s
    gc.collect()
    for t in threads:
        t.join()
    assert not errors, errors[0]


# ---- OrtValue, IOBinding, run_with_ort_values ----
def test_outputs_whose_shape_follows_the_feeds_across_runs(rt: ModuleType) -> None:
    """Outputs shaped by the feeds (a batch dimension: y) or by their values (NonZero: nz), over runs that
    change the batch, come back to an earlier one, and change only the values: every run returns its own
    result, in arrays of its own (no later run writes into an earlier run's outputs), in one or both outputs
    requested."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3]),
            helper.make_tensor_value_info("nz", TensorProto.INT64, [2, None])]
    nodes = [helper.make_node("Add", ["x", "bias"], ["t"]), helper.make_node("Relu", ["t"], ["y"]),
             helper.make_node("Greater", ["x", "zero"], ["g"]), helper.make_node("NonZero", ["g"], ["nz"])]
    sess = _session(rt, _model(nodes, [x], outs, [numpy_helper.from_array(BIAS, "bias"),
                                                  numpy_helper.from_array(np.array(0.0, np.float32), "zero")]))
    rng = np.random.default_rng(5)
    feeds = [rng.standard_normal(shape).astype(np.float32)
             for shape in [(1, 3), (1, 3), (1, 3), (4, 3), (4, 3), (1, 3), (2, 3), (1, 3)]]
    got = [sess.run(None, {"x": f}) for f in feeds]
    got_y = [sess.run(["y"], {"x": f})[0] for f in feeds]
    for f, (y, nz), y_only in zip(feeds, got, got_y, strict=True):
        np.testing.assert_array_equal(y, _expected(f))
        np.testing.assert_array_equal(y_only, _expected(f))
        np.testing.assert_array_equal(nz, np.array(np.nonzero(f > 0), np.int64))
    assert len({id(y) for y, _ in got}) == len(feeds)


def test_ortvalue_roundtrip(rt: ModuleType) -> None:
    v = rt.OrtValue.ortvalue_from_numpy(X)
    assert v.shape() == [2, 3]
    assert v.data_type() == "tensor(float)"
    assert v.element_type() == TensorProto.FLOAT
    assert v.device_name() == "cpu"
    assert v.is_tensor() and v.has_value()
    np.testing.assert_array_equal(v.numpy(), X)
    w = rt.OrtValue.ortvalue_from_shape_and_type([4, 2], np.int64)
    assert (w.shape(), w.data_type()) == ([4, 2], "tensor(int64)")
    w.update_inplace(np.arange(8, dtype=np.int64).reshape(4, 2))
    np.testing.assert_array_equal(w.numpy(), np.arange(8).reshape(4, 2))


def test_run_with_ort_values(rt: ModuleType) -> None:
    s = _session(rt, _add_relu())
    (y,) = s.run_with_ort_values(["y"], {"x": rt.OrtValue.ortvalue_from_numpy(X)})
    assert y.shape() == [2, 3]
    np.testing.assert_array_equal(y.numpy(), _expected(X))


def test_iobinding_writes_into_preallocated_outputs(rt: ModuleType) -> None:
    s = _session(rt, _add_relu())
    out = np.full((2, 3), np.nan, np.float32)
    out_value = rt.OrtValue.ortvalue_from_numpy(out)
    binding = s.io_binding()
    binding.bind_cpu_input("x", X)
    binding.bind_ortvalue_output("y", out_value)
    s.run_with_iobinding(binding)
    np.testing.assert_array_equal(out, _expected(X))  # the caller's own array holds the result
    (result,) = binding.get_outputs()
    assert result.data_ptr() == out.ctypes.data
    # rebinding the input re-runs into the same buffer
    x2 = -X
    binding.bind_cpu_input("x", x2)
    s.run_with_iobinding(binding)
    np.testing.assert_array_equal(out, _expected(x2))


def test_iobinding_raw_buffers_and_allocated_outputs(rt: ModuleType) -> None:
    s = _session(rt, _add_relu())
    x = np.ascontiguousarray(X)
    out = np.zeros((2, 3), np.float32)
    binding = s.io_binding()
    binding.bind_input("x", "cpu", 0, np.float32, list(x.shape), x.ctypes.data)
    binding.bind_output("y", "cpu", 0, np.float32, list(out.shape), out.ctypes.data)
    s.run_with_iobinding(binding)
    np.testing.assert_array_equal(out, _expected(X))
    binding.clear_binding_outputs()
    binding.bind_output("y")
    s.run_with_iobinding(binding)
    (copied,) = binding.copy_outputs_to_cpu()
    np.testing.assert_array_equal(copied, _expected(X))


# ---- RunOptions and run_async ----
def _long_chain(n: int = 400, size: int = 256) -> onnx.ModelProto:
    nodes = [helper.make_node("MatMul", ["x" if i == 0 else f"t{i - 1}", "w"], [f"t{i}"], name=f"mm{i}")
             for i in range(n)]
    nodes.append(helper.make_node("Identity", [f"t{n - 1}"], ["y"]))
    w = numpy_helper.from_array(np.eye(size, dtype=np.float32), "w")
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [size, size])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [size, size])], [w])


def test_run_options_terminate_from_another_thread(rt: ModuleType) -> None:
    opts = rt.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = rt.GraphOptimizationLevel.ORT_DISABLE_ALL
    # 2000 products of 256 x 256: a few hundred milliseconds in either runtime, so the flag set after 50 ms finds the
    # run going (400 of them took onnxruntime about 90 ms on an AMD Zen 5 core, and it sometimes finished first)
    s = _session(rt, _long_chain(2000), opts)
    x = np.ones((256, 256), np.float32)
    ro = rt.RunOptions()
    ro.logid = "terminated-run"
    assert ro.terminate is False
    with pytest.raises(AttributeError):
        ro.terminat = True  # type: ignore[attr-defined]
    timer = threading.Timer(0.05, lambda: setattr(ro, "terminate", True))
    timer.start()
    start = time.perf_counter()
    with pytest.raises(_errors(rt).Fail, match=r"(?i)terminat"):
        s.run(None, {"x": x}, ro)
    stopped_after = time.perf_counter() - start
    timer.join()
    ro.terminate = False  # clearing the flag lets the same options run to the end
    small = _session(rt, _add_relu())
    np.testing.assert_array_equal(small.run(None, {"x": X}, ro)[0], _expected(X))
    assert stopped_after < 5.0


def test_run_async_calls_back_on_a_worker_thread(rt: ModuleType) -> None:
    opts = rt.SessionOptions()
    opts.intra_op_num_threads = 2  # onnxruntime runs async work on its intra-op pool
    s = _session(rt, _add_relu(), opts)
    done = threading.Event()
    seen: dict[str, Any] = {}

    def callback(results: list[np.ndarray], user_data: Any, err: str) -> None:
        seen.update(results=results, user_data=user_data, err=err, thread=threading.current_thread())
        done.set()

    s.run_async(None, {"x": X}, callback, "token")
    assert done.wait(30)
    assert seen["err"] == ""
    assert seen["user_data"] == "token"
    assert seen["thread"] is not threading.main_thread()
    np.testing.assert_array_equal(seen["results"][0], _expected(X))


# ---- metadata and providers ----
def test_modelmeta(rt: ModuleType) -> None:
    model = _add_relu()
    model.producer_name, model.producer_version, model.domain = "compat-test", "1.2", "ai.test"
    model.model_version, model.doc_string = 7, "adds a bias then clips"
    model.graph.name, model.graph.doc_string = "add_relu_graph", "the graph"
    onnx.helper.set_model_props(model, {"author": "tests", "license": "MIT"})
    meta = _session(rt, model).get_modelmeta()
    assert (meta.producer_name, meta.graph_name, meta.domain, meta.description, meta.version) == (
        model.producer_name, model.graph.name, model.domain, model.doc_string, model.model_version)
    assert meta.graph_description == model.graph.doc_string
    assert meta.custom_metadata_map == {p.key: p.value for p in model.metadata_props}


def test_provider_queries_and_set_providers(rt: ModuleType) -> None:
    s = _session(rt, _add_relu())
    assert "CPUExecutionProvider" in s.get_provider_options()
    assert isinstance(s.get_provider_options()["CPUExecutionProvider"], dict)
    s.set_providers(["CPUExecutionProvider"])
    assert s.get_providers() == ["CPUExecutionProvider"]
    np.testing.assert_array_equal(s.run(None, {"x": X})[0], _expected(X))
    s.disable_fallback()
    s.enable_fallback()
    assert "CPUExecutionProvider" in rt.get_all_providers()
    assert rt.get_version_string() == rt.__version__
    assert isinstance(rt.get_build_info(), str)
    rt.set_default_logger_severity(3)
    rt.set_default_logger_severity(2)
    assert [int(rt.OrtHardwareDeviceType.CPU), int(rt.OrtHardwareDeviceType.GPU),
            int(rt.OrtHardwareDeviceType.NPU)] == [0, 1, 2]
    cpu_devices = [d for d in rt.get_ep_devices() if d.ep_name == "CPUExecutionProvider"]
    assert cpu_devices and isinstance(cpu_devices[0].ep_options, dict)


def test_unavailable_provider_warns_and_falls_back(rt: ModuleType) -> None:
    if "CUDAExecutionProvider" in rt.get_available_providers():
        pytest.skip("CUDA is available to this runtime here; the fallback case needs a machine without it")
    with pytest.warns(UserWarning, match="CUDAExecutionProvider"):
        s = rt.InferenceSession(_add_relu().SerializeToString(),
                                providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert s.get_providers() == ["CPUExecutionProvider"]
    np.testing.assert_array_equal(s.run(None, {"x": X})[0], _expected(X))


def test_session_options_add_provider(rt: ModuleType) -> None:
    opts = rt.SessionOptions()
    opts.add_provider("CPUExecutionProvider", {})
    s = rt.InferenceSession(_add_relu().SerializeToString(), sess_options=opts)
    assert s.get_providers() == ["CPUExecutionProvider"]


def test_overridable_initializers(rt: ModuleType) -> None:
    s = _session(rt, _add_relu(bias_is_input=True))
    assert [(a.name, a.type, a.shape) for a in s.get_overridable_initializers()] == [("bias", "tensor(float)", [3])]
    assert s.get_inputs()[0].name == "x"
    other = np.array([5.0, 5.0, 5.0], np.float32)
    np.testing.assert_array_equal(s.run(None, {"x": X, "bias": other})[0], _expected(X, other))


# ---- feeds ----
def test_python_list_feed_takes_the_model_dtype(rt: ModuleType) -> None:
    (y,) = _session(rt, _add_relu()).run(None, {"x": X.tolist()})
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, _expected(X))
    ints = _model([helper.make_node("Add", ["a", "a"], ["b"])],
                  [helper.make_tensor_value_info("a", TensorProto.INT32, [3])],
                  [helper.make_tensor_value_info("b", TensorProto.INT32, [3])])
    (b,) = _session(rt, ints).run(None, {"a": [1, 2, 3]})  # numpy would make int64 of these
    assert b.dtype == np.int32
    np.testing.assert_array_equal(b, [2, 4, 6])


# ---- SessionOptions ----
ORT_FIELDS = ["enable_cpu_mem_arena", "enable_mem_pattern", "enable_mem_reuse", "enable_profiling", "execution_mode",
              "execution_order", "graph_optimization_level", "inter_op_num_threads", "intra_op_num_threads",
              "log_severity_level", "log_verbosity_level", "logid", "optimized_model_filepath", "profile_file_prefix",
              "use_deterministic_compute", "use_per_session_threads"]


def test_session_options_fields_and_typos(rt: ModuleType) -> None:
    opts = rt.SessionOptions()
    for name in ORT_FIELDS:
        setattr(opts, name, getattr(opts, name))  # every documented field reads and takes its default back
    opts.execution_mode = rt.ExecutionMode.ORT_SEQUENTIAL
    with pytest.raises(AttributeError, match="intra_op_num_thread"):
        opts.intra_op_num_thread = 4  # type: ignore[attr-defined]
    opts.add_session_config_entry("session.some_key", "1")
    assert opts.get_session_config_entry("session.some_key") == "1"
    with pytest.raises(RuntimeError):
        opts.get_session_config_entry("session.missing_key")
    _session(rt, _add_relu(), opts).run(None, {"x": X})


def test_mosaicrt_unsupported_settings_name_themselves() -> None:
    opts = mosaicrt.SessionOptions()
    for field, value in [("execution_mode", mosaicrt.ExecutionMode.ORT_PARALLEL),
                         ("execution_order", mosaicrt.ExecutionOrder.PRIORITY_BASED),
                         ("enable_mem_reuse", False), ("use_per_session_threads", False)]:
        with pytest.raises(NotImplementedError, match=field):
            setattr(opts, field, value)
    with pytest.raises(AttributeError, match="did you mean 'intra_op_num_threads'"):
        opts.intra_op_num_thread = 4  # type: ignore[attr-defined]
    with pytest.raises(NotImplementedError, match="register_custom_ops_library"):
        opts.register_custom_ops_library("libx.so")


def test_add_initializer_replaces_a_weight(rt: ModuleType) -> None:
    opts = rt.SessionOptions()
    new_bias = np.array([10.0, 20.0, 30.0], np.float32)
    value = rt.OrtValue.ortvalue_from_numpy(new_bias)  # onnxruntime needs it alive while sessions use it
    opts.add_initializer("bias", value)
    np.testing.assert_array_equal(_session(rt, _add_relu(), opts).run(None, {"x": X})[0], _expected(X, new_bias))


def test_add_external_initializers_without_the_data_file(rt: ModuleType, tmp_path: Path) -> None:
    model = _add_relu()
    path = tmp_path / "m.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="m.data",
                    size_threshold=0)
    (tmp_path / "m.data").unlink()
    data = np.array([7.0, -8.0, 9.0], np.float32)
    value = rt.OrtValue.ortvalue_from_numpy(data)
    opts = rt.SessionOptions()
    opts.add_external_initializers(["bias"], [value])
    np.testing.assert_array_equal(_session(rt, str(path), opts).run(None, {"x": X})[0], _expected(X, data))


def test_free_dimension_overrides(rt: ModuleType) -> None:
    opts = rt.SessionOptions()
    opts.add_free_dimension_override_by_name("N", 2)
    assert _session(rt, _add_relu(), opts).get_inputs()[0].shape == [2, 3]
    model = _add_relu()
    model.graph.input[0].type.tensor_type.shape.dim[0].denotation = "DATA_BATCH"
    opts = rt.SessionOptions()
    opts.add_free_dimension_override_by_denotation("DATA_BATCH", 5)
    s = _session(rt, model, opts)
    assert s.get_inputs()[0].shape == [5, 3]
    assert s.run(None, {"x": np.zeros((5, 3), np.float32)})[0].shape == (5, 3)


# ---- profiling and the optimized model ----
def _conv_bn_relu() -> onnx.ModelProto:
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")]
    for name, values in [("scale", rng.uniform(0.5, 1.5, 4)), ("shift", rng.standard_normal(4)),
                         ("mean", rng.standard_normal(4)), ("var", rng.uniform(0.5, 2.0, 4))]:
        inits.append(numpy_helper.from_array(values.astype(np.float32), name))
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["n"], name="bn"),
             helper.make_node("Relu", ["n"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["y"], name="pool")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1, 1])], inits)


def test_profiling_one_event_per_executed_node(rt: ModuleType, tmp_path: Path) -> None:
    opts = rt.SessionOptions()
    opts.enable_profiling = True
    opts.profile_file_prefix = str(tmp_path / "prof")
    opts.graph_optimization_level = rt.GraphOptimizationLevel.ORT_DISABLE_ALL
    model = _conv_bn_relu()
    s = _session(rt, model, opts)
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    runs = 3
    for _ in range(runs):
        s.run(None, {"x": x})
    path = Path(s.end_profiling())
    assert path.parent == tmp_path and path.name.startswith("prof")
    events = json.loads(path.read_text())
    nodes = [e for e in events if e.get("cat") == "Node" and "op_name" in e.get("args", {})
             and not e["name"].endswith(("_fence_before", "_fence_after"))]
    assert len(nodes) == runs * len(model.graph.node)
    assert sorted({e["args"]["op_name"] for e in nodes}) == sorted({n.op_type for n in model.graph.node})
    for e in nodes:
        assert e["ph"] == "X" and e["dur"] >= 0 and e["ts"] >= 0
        assert e["args"]["provider"] == "CPUExecutionProvider"
    conv = next(e for e in nodes if e["args"]["op_name"] == "Conv")
    assert conv["args"]["input_type_shape"] == [{"float": [1, 3, 8, 8]}, {"float": [4, 3, 3, 3]}, {"float": [4]}]
    assert conv["args"]["output_type_shape"] == [{"float": [1, 4, 8, 8]}]


def test_optimized_model_loads_in_onnxruntime(rt: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "optimized.onnx"
    opts = rt.SessionOptions()
    opts.optimized_model_filepath = str(out)
    model = _conv_bn_relu()
    s = _session(rt, model, opts)
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    (y,) = s.run(None, {"x": x})
    optimized = onnx.load(str(out))
    if rt is mosaicrt:  # the file holds the graph mosaicrt runs: BatchNormalization folded, Relu fused
        assert [n.op_type for n in optimized.graph.node] == [a.op_type.split("::")[-1]
                                                              for a in s.get_node_assignments()]
        assert "BatchNormalization" not in [n.op_type for n in optimized.graph.node]
        used = {name for n in optimized.graph.node for name in n.input}
        assert {t.name for t in optimized.graph.initializer} <= used  # folded parameters are dropped
        onnx.checker.check_model(optimized)
    oracle = onnxruntime.InferenceSession(str(out), providers=CPU)
    np.testing.assert_allclose(oracle.run(None, {"x": x})[0], y, rtol=1e-5, atol=1e-5)
    reference = onnxruntime.InferenceSession(model.SerializeToString(), providers=CPU).run(None, {"x": x})[0]
    np.testing.assert_allclose(y, reference, rtol=1e-4, atol=1e-5)


# ---- exceptions ----
def test_exception_classes_match_onnxruntime(rt: ModuleType, tmp_path: Path) -> None:
    errors = _errors(rt)
    with pytest.raises(errors.InvalidProtobuf):
        rt.InferenceSession(b"\x08\x07\x12\xff not a model", providers=CPU)
    with pytest.raises(errors.NoSuchFile):
        rt.InferenceSession(str(tmp_path / "missing.onnx"), providers=CPU)
    s = _session(rt, _add_relu())
    with pytest.raises(errors.InvalidArgument):
        s.run(None, {"x": X.astype(np.float64)})
    names = ["Fail", "InvalidArgument", "NoSuchFile", "InvalidProtobuf", "InvalidGraph", "RuntimeException",
             "NotImplemented", "EPFail", "EngineError", "NoModel", "ModelLoaded"]
    for name in names:
        assert issubclass(getattr(errors, name), Exception), name


def test_mosaicrt_keeps_its_own_hierarchy() -> None:
    errors = _errors(mosaicrt)
    assert issubclass(mosaicrt.InvalidModel, errors.InvalidProtobuf)
    assert issubclass(mosaicrt.InvalidModel, mosaicrt.MosaicrtError)
    assert issubclass(mosaicrt.NotImplementedInRuntime, errors.NotImplemented)
    assert issubclass(mosaicrt.NotImplementedInRuntime, NotImplementedError)
    assert issubclass(mosaicrt.RuntimeFailure, errors.RuntimeException)
    assert issubclass(mosaicrt.RunCancelled, errors.Fail)
    assert issubclass(mosaicrt.ExecutionProviderError, errors.EPFail)
    assert errors.InvalidArgument is mosaicrt.InvalidArgument
    for name in dir(errors):
        obj = getattr(errors, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, mosaicrt.MosaicrtError), name
