"""The oneDNN EP through mosaicrt: discovery, a ResNet-style model, node assignment, per-op results.

Runs in a fresh venv with the core and EP wheels installed by file (`nox -s test`); from a dev
tree, MOSAICRT_EP_DNNL_LIBRARY makes the tests register that library explicitly.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import onnxruntime as ort
import op_cases
import pytest
from conftest import plugin_library
from resnet_model import resnet_small

mosaicrt = pytest.importorskip("mosaicrt")

EP = "DnnlExecutionProvider"
CPU = "CPUExecutionProvider"
DEV = bool(os.environ.get("MOSAICRT_EP_DNNL_LIBRARY"))


@pytest.fixture(scope="module", autouse=True)
def _registered() -> None:
    if DEV and EP not in mosaicrt.get_available_providers():
        mosaicrt.register_execution_provider_library("dnnl", plugin_library())


def _session(model: Any, providers: list[str], **kw: Any) -> Any:
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = 2
    for k, v in kw.items():
        setattr(opts, k, v)
    return mosaicrt.InferenceSession(model.SerializeToString(), sess_options=opts, providers=providers)


def _assignments(sess: Any) -> dict[str, tuple[str, str, str]]:
    # op_type is "domain::Op" for non-ONNX domains (com.microsoft::FusedConv): keep the op name.
    return {a.node_name: (a.op_type.split("::")[-1], a.provider, a.note) for a in sess.get_node_assignments()}


@pytest.mark.skipif(DEV, reason="discovery needs the installed wheel's entry point")
def test_listed_without_registration() -> None:
    providers = mosaicrt.get_available_providers()
    assert EP in providers
    assert providers[-1] == CPU


@pytest.mark.skipif(DEV, reason="discovery needs the installed wheel's entry point")
def test_ep_device_reports_version_and_cpu() -> None:
    import mosaicrt_ep_dnnl

    pairs = [d for d in mosaicrt.get_ep_devices() if d.ep_name == EP]
    assert pairs, "the oneDNN EP offers no device"
    assert all(d.ep_version == mosaicrt_ep_dnnl.__version__ for d in pairs)
    assert all(int(d.device.type) == 0 for d in pairs)  # CPU


@pytest.mark.parametrize("head", ["Gemm", "MatMul"])
@pytest.mark.parametrize("batch", [1, 2])
def test_resnet_matches_cpu_ep_and_onnxruntime(head: str, batch: int) -> None:
    model = resnet_small(batch=batch, head=head)
    x = np.random.default_rng(batch).standard_normal((batch, 3, 32, 32)).astype(np.float32)
    dnnl = _session(model, [EP])
    assert dnnl.get_providers() == [EP, CPU]
    got = dnnl.run(None, {"input": x})
    ref = _session(model, [CPU]).run(None, {"input": x})
    oracle = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"input": x})
    for g, r, o in zip(got, ref, oracle, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(g, o, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(got[0].sum(axis=1), 1.0, rtol=1e-5)
    # A second run reuses the cached primitives and gives the same bytes.
    again = dnnl.run(None, {"input": x})
    for a, b in zip(got, again, strict=True):
        np.testing.assert_array_equal(a, b)


def test_onednn_takes_the_convolutions() -> None:
    sess = _session(resnet_small(), [EP])
    table = _assignments(sess)
    convs = {n: v for n, v in table.items() if v[0] in ("Conv", "FusedConv")}
    assert len(convs) >= 8
    assert all(p == EP for _, p, _ in convs.values()), convs
    by_op: dict[str, set[str]] = {}
    for op, provider, _ in table.values():
        by_op.setdefault(op, set()).add(provider)
    for op in ("MaxPool", "GlobalAveragePool", "Add", "Gemm", "Softmax"):
        assert by_op.get(op) == {EP}, (op, by_op.get(op))
    assert by_op.get("Flatten") == {CPU}  # not an oneDNN op: the CPU EP takes it


def test_unoptimized_graph_runs_conv_bn_relu_on_onednn() -> None:
    model = resnet_small(batch=1)
    sess = _session(model, [EP], graph_optimization_level=mosaicrt.GraphOptimizationLevel.ORT_DISABLE_ALL)
    table = _assignments(sess)
    for op in ("Conv", "BatchNormalization", "Relu"):
        assert {p for o, p, _ in table.values() if o == op} == {EP}, op
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    got = sess.run(None, {"input": x})
    ref = _session(model, [CPU]).run(None, {"input": x})
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-3, atol=1e-4)


SUPPORTED = op_cases.supported_cases()
DECLINED = op_cases.declined_cases()


def _oracle(model: Any, feeds: dict[str, np.ndarray[Any, Any]]) -> list[np.ndarray[Any, Any]]:
    if model.graph.node[0].domain == "com.microsoft":
        return list(_session(model, [CPU]).run(None, feeds))  # the CPU EP's FusedConv
    return list(ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds))


@pytest.mark.parametrize(("cid", "model", "feeds"), SUPPORTED, ids=[c[0] for c in SUPPORTED])
def test_op_runs_on_onednn_and_matches(cid: str, model: Any, feeds: dict[str, np.ndarray[Any, Any]]) -> None:
    sess = _session(model, [EP], graph_optimization_level=mosaicrt.GraphOptimizationLevel.ORT_DISABLE_ALL)
    [(op, provider, note)] = _assignments(sess).values()
    assert provider == EP, f"{cid}: {op} fell back to {provider} ({note})"
    got = sess.run(None, feeds)
    want = _oracle(model, feeds)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("cid", "model", "feeds"), DECLINED, ids=[c[0] for c in DECLINED])
def test_unsupported_combination_falls_back_to_cpu(cid: str, model: Any,
                                                   feeds: dict[str, np.ndarray[Any, Any]]) -> None:
    sess = _session(model, [EP], graph_optimization_level=mosaicrt.GraphOptimizationLevel.ORT_DISABLE_ALL)
    [(op, provider, _)] = _assignments(sess).values()
    assert provider == CPU, f"{cid}: {op} should fall back to the CPU EP"
    got = sess.run(None, feeds)
    want = list(ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)


def test_unknown_provider_option_is_a_clear_error() -> None:
    model = op_cases.supported_cases()[0][1]
    with pytest.raises(mosaicrt.MosaicrtError, match="unknown provider option 'bogus'"):
        mosaicrt.InferenceSession(model.SerializeToString(), providers=[(EP, {"bogus": "1"})])


def test_wrong_input_shape_is_a_python_error_not_a_crash() -> None:
    model = resnet_small(batch=1)
    sess = _session(model, [EP])
    with pytest.raises(mosaicrt.MosaicrtError):
        sess.run(None, {"input": np.zeros((1, 5, 32, 32), np.float32)})
