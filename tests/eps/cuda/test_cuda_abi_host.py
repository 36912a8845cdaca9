"""The CUDA EP library driven directly through the EP ABI (no mosaicrt core needed).

Uses the ctypes ABI host of the oneDNN suite (tests/eps/dnnl/abi_host.py) to create the EP on
CUDA device 0 and run every single-op case against onnx's reference evaluator. This checks the
kernels on a GPU machine even before the core's session side is installed. Skips without a GPU.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from cuda_cases import OP_CASES, single_op  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dnnl"))
abi_host = pytest.importorskip("abi_host", reason="tests/eps/dnnl/abi_host.py (the ctypes EP ABI host) is missing")


def _library() -> str:
    env = os.environ.get("MOSAICRT_EP_CUDA_LIBRARY")
    if env:
        return env
    mod = pytest.importorskip("mosaicrt_ep_cuda", reason="mosaicrt-ep-cuda is not installed")
    path: str = mod.library_path()
    return path


def _gpus() -> int:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


@pytest.fixture(scope="module")
def host() -> Any:
    if _gpus() == 0:
        pytest.skip("no NVIDIA GPU/driver: CUDAExecutionProvider reports no supported device")
    return abi_host.Host(_library(), {"device_id": "0", "device_memory": "0"})


def test_factory_identity(host: Any) -> None:
    assert (host.name, host.vendor) == ("CUDAExecutionProvider", "mosaicrt")
    assert not host.supports(0), "a CPU device must not be supported"


def test_without_gpu_ep_creation_fails_cleanly() -> None:
    if _gpus() > 0:
        pytest.skip("this machine has an NVIDIA GPU")
    with pytest.raises(abi_host.PluginError, match="CUDAExecutionProvider cannot be created"):
        abi_host.Host(_library(), {"device_id": "0", "device_memory": "0"})


@pytest.mark.parametrize("case", sorted(OP_CASES))
def test_op_via_abi(host: Any, case: str) -> None:
    op, inputs, consts, attrs = OP_CASES[case]
    model = single_op(op, inputs, consts, **attrs)
    expected = ReferenceEvaluator(model).run(None, inputs)
    got = host.run_node(model, inputs, repeat=2)
    for g, e in zip(got, expected, strict=True):
        assert g is not None
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4, err_msg=case)
