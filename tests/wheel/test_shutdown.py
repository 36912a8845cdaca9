"""Exit while a run is in flight: 500 short-lived processes load the core and every installed EP,
start runs on a background thread and exit mid-run -- by returning from the script, sys.exit,
os._exit and SIGTERM. Each must end with its intended status, in bounded time, with nothing on
stderr (no crash, no "terminate called ...", no sanitizer-style abort).

The processes run a few at a time; each does the minimum (numpy + mosaicrt, one small session).
Every run of the wheel suite (each CPython, each emulated target) starts ``MOSAICRT_SHUTDOWN_PROCESSES``
processes, 40 by default (8 under qemu-user, where each is an emulated CPython); CI runs the full 500 once, in
the release test's consumer venv that holds the core and the oneDNN EP (tests/pipeline/test_e2e_release.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

PROCESSES = int(os.environ.get("MOSAICRT_SHUTDOWN_PROCESSES", "40"))
#: exit mode -> the status the process must end with
MODES = {"return": 0, "sys.exit": 3, "os._exit": 4, "sigterm": -signal.SIGTERM}
PER_PROCESS_TIMEOUT_S = 60

CHILD = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    import numpy as np
    import mosaicrt

    mode, model = sys.argv[1], sys.argv[2]
    providers = mosaicrt.get_available_providers()  # registers every installed EP
    sess = mosaicrt.InferenceSession(model, providers=providers)
    x = np.full((64, 128), 0.01, np.float32)
    running = threading.Event()

    def loop():
        while True:
            running.set()
            sess.run(None, {"x": x})

    threading.Thread(target=loop, daemon=True).start()
    running.wait()
    time.sleep(0.001 * (os.getpid() % 5))  # land at different points of a run
    if mode == "sys.exit":
        sys.exit(3)
    elif mode == "os._exit":
        os._exit(4)
    elif mode == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
    """
)


def _model(path: Path) -> None:
    """A chain of 128x128 MatMul + Relu: each run takes milliseconds, so exits land inside runs."""
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(12):
        w = f"w{i}"
        inits.append(numpy_helper.from_array((rng.standard_normal((128, 128)) / 12).astype(np.float32), w))
        nodes.append(helper.make_node("MatMul", [prev, w], [f"m{i}"], name=f"mm{i}"))
        nodes.append(helper.make_node("Relu", [f"m{i}"], [f"r{i}"], name=f"relu{i}"))
        prev = f"r{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="out"))
    graph = helper.make_graph(nodes, "exit", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 128])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 128])], inits)
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                       ir_version=8).SerializeToString())


@pytest.mark.slow
def test_processes_exit_mid_run_cleanly(tmp_path: Path) -> None:
    model = tmp_path / "exit.onnx"
    _model(model)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    modes = list(MODES)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}

    def one(i: int) -> tuple[str, int | None, str, float]:
        mode = modes[i % len(modes)]
        t0 = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, str(script), mode, str(model)], capture_output=True, text=True,
                                  timeout=PER_PROCESS_TIMEOUT_S, env=env, check=False)
        except subprocess.TimeoutExpired:
            return mode, None, "hang", time.monotonic() - t0
        return mode, proc.returncode, proc.stderr, time.monotonic() - t0

    with ThreadPoolExecutor(max(2, min(4, os.cpu_count() or 2))) as pool:
        results = list(pool.map(one, range(PROCESSES)))
    bad = [(m, rc, err[-400:]) for m, rc, err, _ in results if rc != MODES[m] or err]
    assert not bad, f"{len(bad)} of {PROCESSES} processes misbehaved, e.g. {bad[:3]}"
    slowest = max(t for *_, t in results)
    assert slowest < PER_PROCESS_TIMEOUT_S


SLOW_KERNEL_CHILD = textwrap.dedent(
    """
    import atexit, sys, threading, time
    import numpy as np

    def after_the_gate():  # registered before mosaicrt's own hook, so it runs after the gate closed
        print("exiting thread:", float(sess.run(None, {"x": x})[0].sum()), flush=True)

    atexit.register(after_the_gate)
    import mosaicrt

    mode, lib, model = sys.argv[1:4]
    mosaicrt.register_execution_provider_library("exitgate:cpu", lib)
    sess = mosaicrt.InferenceSession(model, providers=[("FakeCpu_exitgate", {"ops": "Relu", "sleep_ms": "300"}),
                                                       "CPUExecutionProvider"])
    x = np.array([[-1.0, 0.5, 2.0], [3.0, -4.0, 0.0]], np.float32)
    entered = threading.Event()

    def loop():
        while True:
            entered.set()
            sess.run(None, {"x": x})

    threading.Thread(target=loop, daemon=True).start()
    entered.wait()
    time.sleep(0.05)  # inside the 300 ms kernel
    if mode == "sys.exit":
        sys.exit(3)
    """
)


@pytest.mark.parametrize("mode", ["return", "sys.exit"])
def test_exit_waits_for_a_kernel_in_flight(tmp_path: Path, mode: str) -> None:
    """A daemon thread is inside a 300 ms EP kernel when the script exits. Interpreter exit must let the kernel
    finish before exit() destroys the EP library's static state (the test EP reports it on stderr and ends
    the process with 70 if it sees that), keep the daemon thread out afterwards, and still serve runs from the
    exiting thread's own atexit hooks."""
    from test_plugin_eps import CXX, EXPECTED, _compile
    from test_plugin_eps import _model as _plugin_model

    if CXX is None:
        pytest.skip("no C++ compiler (c++/g++) to build the test plugin library")
    lib = _compile(tmp_path, "fake_ep")
    model = tmp_path / "plugin.onnx"
    model.write_bytes(_plugin_model().SerializeToString())
    script = tmp_path / "slow_kernel_child.py"
    script.write_text(SLOW_KERNEL_CHILD)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    proc = subprocess.run([sys.executable, str(script), mode, str(lib), str(model)], capture_output=True, text=True,
                          timeout=PER_PROCESS_TIMEOUT_S, env=env, check=False)
    assert (proc.returncode, proc.stderr) == (MODES[mode], "")
    assert proc.stdout.startswith("exiting thread: ")
    assert abs(float(proc.stdout.split(":")[1]) - float(EXPECTED.sum())) < 1e-5
