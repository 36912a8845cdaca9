"""The CUDA execution provider (mosaicrt-ep-cuda) through the installed mosaicrt Python API.

Single-op models and small real-architecture models run on the CUDA EP and are compared with
onnx's reference evaluator (ops) or the CPU EP (models). Needs an NVIDIA GPU with a driver;
otherwise every GPU test skips with the reason, and test_no_gpu_* check the harmless path.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

mosaicrt = pytest.importorskip("mosaicrt", reason="mosaicrt is not installed in this environment")
mosaicrt_ep_cuda = pytest.importorskip("mosaicrt_ep_cuda", reason="mosaicrt-ep-cuda is not installed")
onnx = pytest.importorskip("onnx")
from cuda_cases import OP_CASES, single_op  # noqa: E402
from cuda_cases import rand as _rand  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

EP = "CUDAExecutionProvider"
PROVIDERS = [EP, "CPUExecutionProvider"]
NO_GPU_REASON = "no NVIDIA GPU/driver: CUDAExecutionProvider reports no supported device"


@functools.cache
def driver_gpu_count() -> int:
    """NVIDIA GPUs the driver reports (libcuda.so.1: cuInit + cuDeviceGetCount); 0 without a driver."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    if cuda.cuInit(0) != 0:
        return 0
    count = ctypes.c_int(0)
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


def _field(obj: Any, name: str) -> Any:
    return obj[name] if isinstance(obj, dict) else getattr(obj, name)


def _cuda_ep_devices() -> list[Any]:
    return [d for d in mosaicrt.get_ep_devices() if _field(d, "ep_name") == EP]


@pytest.fixture(scope="module")
def gpu() -> None:
    if driver_gpu_count() == 0:
        pytest.skip(NO_GPU_REASON)
    # A GPU and a driver exist: from here on, the EP must see them (a failure, not a skip).
    assert _cuda_ep_devices(), f"{driver_gpu_count()} NVIDIA GPU(s) present but {EP} reports no supported device"


def test_library_path_points_at_the_plugin() -> None:
    path = mosaicrt_ep_cuda.library_path()
    assert path.endswith("libmosaicrt_ep_cuda.so")


def test_provider_is_discovered_without_registration() -> None:
    assert EP in mosaicrt.get_available_providers()


def test_no_gpu_means_no_cuda_device() -> None:
    if driver_gpu_count() > 0:
        pytest.skip("this machine has an NVIDIA GPU")
    assert _cuda_ep_devices() == []


# ---- single-op models vs the onnx reference evaluator ----
def _assignments(sess: Any) -> dict[str, str]:
    """node name -> the EP that runs it."""
    return {a.node_name: a.provider for a in sess.get_node_assignments()}


@pytest.mark.parametrize("case", sorted(OP_CASES))
def test_op_matches_reference(gpu: None, case: str) -> None:
    op, inputs, consts, attrs = OP_CASES[case]
    model = single_op(op, inputs, consts, **attrs)
    data = model.SerializeToString()
    expected = ReferenceEvaluator(model).run(None, inputs)
    sess = mosaicrt.InferenceSession(data, providers=PROVIDERS)
    for _ in range(2):  # the second run uses cached device constants and pooled memory
        got = sess.run(None, inputs)
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4, err_msg=case)
    assignment = _assignments(sess)
    assert assignment.get(f"{op}_0") == EP, f"{case}: node ran on {assignment.get(f'{op}_0')}"


def test_layer_norm_optional_outputs(gpu: None) -> None:
    x = _rand(2, 3, 16)
    model = single_op(
        "LayerNormalization", {"x": x}, {"scale": _rand(16), "bias": _rand(16, seed=3)}, outputs=3, epsilon=1e-3
    )
    data = model.SerializeToString()
    expected = ReferenceEvaluator(model).run(None, {"x": x})
    got = mosaicrt.InferenceSession(data, providers=PROVIDERS).run(None, {"x": x})
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)


def test_empty_batch(gpu: None) -> None:
    x = np.zeros((0, 8), np.float32)
    data = single_op("Gemm", {"a": x}, {"b": _rand(8, 3), "c": _rand(3)}).SerializeToString()
    (y,) = mosaicrt.InferenceSession(data, providers=PROVIDERS).run(None, {"a": x})
    assert y.shape == (0, 3)


def test_unknown_provider_option_is_an_error(gpu: None) -> None:
    data = single_op("Relu", {"x": _rand(2, 2)}).SerializeToString()
    with pytest.raises(Exception, match="unknown provider option"):
        mosaicrt.InferenceSession(data, providers=PROVIDERS, provider_options=[{"no_such_option": "1"}, {}])


# ---- real-architecture models: CUDA EP vs CPU EP ----
def _model_cases() -> dict[str, tuple[Callable[[], Any], Callable[..., Any]]]:
    models = pytest.importorskip("models", reason="tests/wheel/models.py is not reachable")
    return {
        "resnet": (lambda: models.resnet(32), models.image_feed(32)),
        "transformer": (
            lambda: models.transformer(d_model=64, heads=4, d_ff=128, layers=2, gelu="erf"),
            models.sequence_feed(16, 64),
        ),
    }


@pytest.mark.parametrize("name", ["resnet", "transformer"])
def test_model_matches_cpu_ep(gpu: None, name: str) -> None:
    build, feed_fn = _model_cases()[name]
    data = build().SerializeToString()
    feed = feed_fn(2, np.random.default_rng(0))
    want = mosaicrt.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feed)
    sess = mosaicrt.InferenceSession(data, providers=PROVIDERS)
    got = sess.run(None, feed)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-3)
    assignment = _assignments(sess)
    assert EP in set(assignment.values()), f"{name}: no node ran on the CUDA EP: {assignment}"


@pytest.mark.parametrize("device_memory", ["1", "0"])
def test_consecutive_cuda_nodes_keep_values_on_the_device(gpu: None, device_memory: str) -> None:
    """EP ABI 1.1 device memory: Add -> Relu -> Sigmoid on the CUDA EP copies the input in once and
    the output out once; the values between the nodes never visit the host (counted by the core).
    With device_memory=0 the EP works on host memory (every node copies in and out itself)."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 256])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4, 256])
    nodes = [onnx.helper.make_node("Add", ["x", "x"], ["a"], name="add"),
             onnx.helper.make_node("Relu", ["a"], ["r"], name="relu"),
             onnx.helper.make_node("Sigmoid", ["r"], ["y"], name="sigmoid")]
    model = onnx.helper.make_model(onnx.helper.make_graph(nodes, "g", [x], [y]),
                                   opset_imports=[onnx.helper.make_opsetid("", 17)])
    sess = mosaicrt.InferenceSession(model.SerializeToString(),
                                     providers=[(EP, {"device_memory": device_memory}), "CPUExecutionProvider"])
    assert set(_assignments(sess).values()) == {EP}
    feed = {"x": np.random.default_rng(1).standard_normal((4, 256)).astype(np.float32)}
    np.testing.assert_allclose(sess.run(None, feed)[0], 1 / (1 + np.exp(-np.maximum(2 * feed["x"], 0))), rtol=1e-5,
                               atol=1e-6)
    counts = sess.get_transfer_counts()
    if device_memory == "1":
        # x in once (Add reads it twice: the second read is in place), a and r in place, y out once.
        assert (counts.to_device, counts.to_host, counts.device_resident) == (1, 1, 3)
    else:
        assert (counts.to_device, counts.to_host, counts.device_resident) == (0, 0, 0)
