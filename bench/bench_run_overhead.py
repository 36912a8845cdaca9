"""Per-call cost of InferenceSession.run() on a tiny model: mosaicrt vs onnxruntime.

The model (Add + Relu on a 1x4 float tensor) does almost no work, so the time is the Python
binding's marshalling plus the runtime's per-run bookkeeping. Both sessions use one intra-op
thread and the CPU EP; the feed dict and arrays are reused across calls, as serving code does.
The runtimes are timed in alternating rounds so machine load affects both alike; the median
and the fastest round are printed. The target: mosaicrt <= 1.5x onnxruntime.

    MOSAICRT_LIBRARY=$PWD/build/dev/libmosaicrt.so PYTHONPATH=core/python python3 bench/bench_run_overhead.py
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import mosaicrt
import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper


def tiny_model() -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    bias = numpy_helper.from_array(np.array([1.0, -1.0, 0.5, 0.0], np.float32), "bias")
    nodes = [helper.make_node("Add", ["x", "bias"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "tiny", [x], [y], [bias]),
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model.SerializeToString()


def per_call_us(call: Callable[[], Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000, help="run() calls per round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    data = tiny_model()
    feed = {"x": np.array([[1.0, 2.0, -3.0, 4.0]], np.float32)}
    sessions: dict[str, Any] = {}
    for name, rt in (("onnxruntime", onnxruntime), ("mosaicrt", mosaicrt)):
        opts = rt.SessionOptions()
        opts.intra_op_num_threads = 1
        sessions[name] = rt.InferenceSession(data, sess_options=opts, providers=["CPUExecutionProvider"])
    expected = sessions["onnxruntime"].run(None, feed)[0]
    np.testing.assert_array_equal(sessions["mosaicrt"].run(None, feed)[0], expected)

    samples: dict[str, list[float]] = {name: [] for name in sessions}
    for s in sessions.values():  # warm up
        per_call_us(lambda s=s: s.run(None, feed), args.calls // 10)
    for _ in range(args.rounds):
        for name, s in sessions.items():
            samples[name].append(per_call_us(lambda s=s: s.run(None, feed), args.calls))

    print(f"run() per-call time on a tiny model ({args.rounds} rounds x {args.calls} calls)")
    print(f"{'runtime':<12} {'median us':>10} {'min us':>8}")
    for name, values in samples.items():
        print(f"{name:<12} {statistics.median(values):>10.2f} {min(values):>8.2f}")
    ratio = statistics.median(samples["mosaicrt"]) / statistics.median(samples["onnxruntime"])
    best = min(samples["mosaicrt"]) / min(samples["onnxruntime"])
    print(f"ratio mosaicrt/onnxruntime: median {ratio:.2f}x, fastest {best:.2f}x (target <= 1.5x)")


if __name__ == "__main__":
    main()
