"""Concurrency through the Python API: one session run from 8 threads x 1000 runs with distinct
inputs (every result checked against numpy), sessions created and destroyed on many threads at
once, and plugin EP registration/unregistration racing session creation. (The same shapes run
natively under ThreadSanitizer in tests/pipeline/test_hardening.py.)"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import mosaicrt
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

PLUGINS = Path(__file__).resolve().parent.parent.parent / "core" / "tests" / "plugins"
W = (np.arange(64 * 16, dtype=np.float32).reshape(64, 16) % 11 - 5) / 8
B = (np.arange(16, dtype=np.float32) % 5) / 4 - 0.5


def _model_bytes() -> bytes:
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"], name="mm"),
             helper.make_node("Add", ["xw", "b"], ["z"], name="add"),
             helper.make_node("Relu", ["z"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "conc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])],
                              [numpy_helper.from_array(W, "w"), numpy_helper.from_array(B, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model.SerializeToString()


def _feed(key: int) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(key)
    return rng.standard_normal((1 + key % 4, 64)).astype(np.float32)


def _expected(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return np.maximum(x @ W + B, 0)


def _run_threads(n_threads: int, body: Callable[[int], int]) -> list[int]:
    with ThreadPoolExecutor(n_threads) as pool:
        return list(pool.map(body, range(n_threads)))


def test_one_session_8_threads_x_1000_runs_distinct_inputs() -> None:
    sess = mosaicrt.InferenceSession(_model_bytes())

    def worker(t: int) -> int:
        checked = 0
        for r in range(1000):
            x = _feed(t * 100_003 + r)
            (y,) = sess.run(["y"], {"x": x})
            np.testing.assert_allclose(y, _expected(x), rtol=1e-4, atol=1e-5)
            checked += 1
        return checked

    assert _run_threads(8, worker) == [1000] * 8


def test_sessions_created_and_destroyed_on_many_threads() -> None:
    data = _model_bytes()

    def worker(t: int) -> int:
        for i in range(15):
            sess = mosaicrt.InferenceSession(data)
            x = _feed(t * 1000 + i)
            np.testing.assert_allclose(sess.run(None, {"x": x})[0], _expected(x), rtol=1e-4, atol=1e-5)
            del sess
        return 15

    assert _run_threads(8, worker) == [15] * 8


@pytest.fixture(scope="module")
def fake_ep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler to build the test plugin library")
    out = tmp_path_factory.mktemp("plugins") / "libfake_ep_race.so"
    subprocess.run([cxx, "-std=c++17", "-O1", "-shared", "-fPIC", "-fvisibility=hidden", f"-I{mosaicrt.get_include()}",
                    str(PLUGINS / "fake_ep.cc"), "-o", str(out)], check=True, capture_output=True)
    return out


def test_ep_registration_races_session_creation(fake_ep: Path) -> None:
    data = _model_bytes()
    stop = threading.Event()
    counts = {"registered": 0, "refused_unregister": 0}

    def registrar() -> None:
        deadline = time.monotonic() + 2.0
        try:
            rounds = 0
            while rounds < 150 or time.monotonic() < deadline:
                rounds += 1
                try:
                    mosaicrt.register_execution_provider_library("race:cpu", fake_ep)
                    counts["registered"] += 1
                except mosaicrt.MosaicrtError:
                    pass  # still registered: the last unregister was refused while a session used it
                time.sleep(0.002)  # registered for a moment: sessions being created now may take it
                try:
                    mosaicrt.unregister_execution_provider_library("race:cpu")
                except mosaicrt.MosaicrtError:
                    counts["refused_unregister"] += 1
        finally:
            stop.set()

    def user(t: int) -> tuple[int, int]:
        used = refused = 0
        i = 0
        while not stop.is_set():
            i += 1
            x = _feed(t * 7919 + i)
            # Severity 3: an EP that is unregistered right now makes the session fall back to the
            # CPU EP quietly (onnxruntime's behaviour for an unavailable provider, minus the warning).
            opts = mosaicrt.SessionOptions()
            opts.log_severity_level = 3
            # the fake EP runs Relu (its Add does not broadcast)
            sess = mosaicrt.InferenceSession(data, opts, providers=[("FakeCpu_race", {"ops": "Relu"}),
                                                                    "CPUExecutionProvider"])
            np.testing.assert_allclose(sess.run(None, {"x": x})[0], _expected(x), rtol=1e-4, atol=1e-5)
            if "FakeCpu_race" in sess.get_providers():
                used += 1
            else:
                refused += 1
            del sess
        return used, refused

    reg = threading.Thread(target=registrar)
    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(user, t) for t in range(4)]
        reg.start()
        reg.join()
        results = [f.result() for f in futures]
    with contextlib.suppress(mosaicrt.MosaicrtError):
        mosaicrt.unregister_execution_provider_library("race:cpu")
    assert counts["registered"] >= 1
    assert sum(u for u, _ in results) > 0, results
