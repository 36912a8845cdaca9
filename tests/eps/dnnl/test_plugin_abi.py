"""The oneDNN EP library driven directly through the plugin ABI (a ctypes host, no mosaicrt core).

Checks what the ABI promises (entry points, versions, devices, claims, no exception across the
boundary) and every supported op against onnxruntime (FusedConv: onnx's reference Conv + the activation).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import onnxruntime as ort
import op_cases
import pytest
from abi_host import ABI_VERSION, Host, PluginError
from onnx.reference import ReferenceEvaluator

SUPPORTED = op_cases.supported_cases()
DECLINED = op_cases.declined_cases()


@pytest.fixture(scope="module")
def host(dnnl_library: str) -> Iterator[Host]:
    h = Host(dnnl_library)
    yield h
    h.close()


def _reference(model: Any, feeds: dict[str, np.ndarray[Any, Any]]) -> list[np.ndarray[Any, Any]]:
    if model.graph.node[0].domain == "com.microsoft":
        return [_fused_conv_reference(model, feeds)]
    # onnxruntime is the oracle: onnx's reference evaluator applies opset-13 Softmax semantics to older opsets.
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return list(sess.run(None, feeds))


def _fused_conv_reference(model: Any, feeds: dict[str, np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
    """FusedConv = Conv then the activation: evaluate the plain Conv and apply it in numpy."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    node = m.graph.node[0]
    attrs = {a.name: a for a in node.attribute}
    act = attrs["activation"].s.decode()
    params = list(attrs["activation_params"].floats) if "activation_params" in attrs else []
    node.domain, node.op_type = "", "Conv"
    for name in ("activation", "activation_params"):
        if name in attrs:
            node.attribute.remove(attrs[name])
    del m.opset_import[1:]
    (y,) = ReferenceEvaluator(m).run(None, feeds)
    if act == "Relu":
        return np.maximum(y, 0)
    if act == "LeakyRelu":
        return np.where(y > 0, y, y * params[0]).astype(np.float32)
    if act == "Sigmoid":
        return (1 / (1 + np.exp(-y))).astype(np.float32)
    if act == "Tanh":
        return np.tanh(y)
    if act == "Clip":
        return np.clip(y, params[0], params[1])
    raise AssertionError(act)


def test_exports_exactly_the_three_entry_points(dnnl_library: str) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("ELF symbol check")
    out = subprocess.run(["nm", "-D", "--defined-only", dnnl_library], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        pytest.skip("nm is not available")
    names = sorted(line.split()[-1] for line in out.stdout.splitlines() if re.search(r" [TDBRW] ", line))
    assert names == ["MrtEpCreateFactories", "MrtEpGetAbiVersion", "MrtEpReleaseFactory"]


def test_abi_version_and_factory_identity(host: Host) -> None:
    assert host.plugin_abi == ABI_VERSION
    assert host.name == "DnnlExecutionProvider"
    assert host.vendor
    assert re.fullmatch(r"\d+\.\d+\.\d+", host.version)


def test_supports_cpu_devices_only(host: Host) -> None:
    assert host.supports(0)
    assert not host.supports(1)
    assert not host.supports(2)


def test_core_with_another_abi_major_is_refused(dnnl_library: str) -> None:
    import abi_host

    saved = abi_host.ABI_VERSION
    abi_host_version = (2 << 16) | 0
    try:
        abi_host.ABI_VERSION = abi_host_version
        with pytest.raises(PluginError, match=rf"2\.0.*{abi_host.ABI_MAJOR}\.{abi_host.ABI_MINOR}"):
            Host(dnnl_library)
    finally:
        abi_host.ABI_VERSION = saved


def test_unknown_provider_option_is_an_error(dnnl_library: str) -> None:
    with pytest.raises(PluginError, match="unknown provider option 'nonsense'"):
        Host(dnnl_library, {"nonsense": "1"})


@pytest.mark.parametrize(("cid", "model", "feeds"), SUPPORTED, ids=[c[0] for c in SUPPORTED])
def test_op_matches_reference(host: Host, cid: str, model: Any, feeds: dict[str, np.ndarray[Any, Any]]) -> None:
    shapes = {k: (list(v.shape), 1) for k, v in feeds.items()}
    assert host.capability(model, shapes) == [True], f"{cid} was not claimed"
    got = host.run_node(model, feeds, repeat=2)  # the second run reuses the cached primitive
    want = _reference(model, feeds)
    assert got[0] is not None
    assert got[0].shape == want[0].shape
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("cid", "model", "feeds"), DECLINED, ids=[c[0] for c in DECLINED])
def test_declines_unsupported_combination(host: Host, cid: str, model: Any,
                                          feeds: dict[str, np.ndarray[Any, Any]]) -> None:
    shapes = {k: (list(v.shape), 1) for k, v in feeds.items()}
    assert host.capability(model, shapes) == [False]
    with pytest.raises(PluginError):
        host.run_node(model, feeds)  # CreateKernel refuses it too (the core then falls back to CPU)


def test_bad_input_shape_is_a_status_not_a_crash(host: Host) -> None:
    _, model, _ = op_cases.conv_case("conv", (1, 8, 6, 6), (4, 8, 3, 3))
    with pytest.raises(PluginError, match="channels"):
        host.run_node(model, {"x": np.zeros((1, 5, 6, 6), np.float32)})


def test_new_input_shape_after_first_run(host: Host) -> None:
    _, model, _ = op_cases.conv_case("conv", (1, 4, 8, 8), (4, 4, 3, 3), pads=[1, 1, 1, 1])
    for shape in ((1, 4, 8, 8), (3, 4, 5, 7)):
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        got = host.run_node(model, {"x": x})
        (want,) = ReferenceEvaluator(model).run(None, {"x": x})
        np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4)
