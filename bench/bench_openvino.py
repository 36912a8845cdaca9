#!/usr/bin/env python3
"""ms per run on mosaicrt's OpenVINO EP, mosaicrt's CPU EP and onnxruntime's CPU EP, with ratios.

    python bench/bench_openvino.py --threads 2 --repeat 20        # installed mosaicrt + mosaicrt-ep-openvino
    MOSAICRT_EP_OPENVINO_LIBRARY=<libmosaicrt_ep_openvino.so> python bench/bench_openvino.py   # a dev build

Models: the onnx package's light ResNet-50 (224x224, batch 1), the random-weight ResNet-18 and
transformer encoder of tests/wheel/models.py. Runs alternate between the runtimes (so machine noise
hits all of them alike); the table shows medians and minimums, and each runtime's median and
minimum over onnxruntime's (below 1: faster than onnxruntime). Goal: the OpenVINO EP at or below
onnxruntime on ResNet-50 at 2 threads.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "wheel")]

import models  # noqa: E402
import mosaicrt  # noqa: E402
import onnxruntime as ort  # noqa: E402

EP = "OpenVINOExecutionProvider"


def _runners(model: bytes, threads: int) -> dict[str, Any]:
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = threads
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return {
        "mosaicrt+openvino": mosaicrt.InferenceSession(model, sess_options=opts, providers=[EP]),
        "mosaicrt cpu": mosaicrt.InferenceSession(model, sess_options=opts, providers=["CPUExecutionProvider"]),
        "onnxruntime": ort.InferenceSession(model, so, providers=["CPUExecutionProvider"]),
    }


def _cases() -> dict[str, tuple[bytes, dict[str, np.ndarray[Any, Any]]]]:
    rng = np.random.default_rng(0)
    cases = {}
    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_resnet50.onnx"
    if light.exists():
        m = onnx.load(str(light))
        x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
        cases["resnet50 (light) b1"] = (m.SerializeToString(), {m.graph.input[0].name: x})
    r18 = models.resnet(224, batch=1)
    cases["resnet18 224 b1"] = (r18.SerializeToString(),
                                {r18.graph.input[0].name: rng.standard_normal((1, 3, 224, 224)).astype(np.float32)})
    tr = models.transformer(seq=64, batch=1)
    cases["transformer s64 b1"] = (tr.SerializeToString(),
                                   {tr.graph.input[0].name: rng.standard_normal((1, 64, 256)).astype(np.float32)})
    return cases


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args()
    lib = os.environ.get("MOSAICRT_EP_OPENVINO_LIBRARY")
    if lib and EP not in mosaicrt.get_available_providers():
        mosaicrt.register_execution_provider_library("openvino", lib)
    if EP not in mosaicrt.get_available_providers():
        print(f"{EP} is not available: pip install mosaicrt-ep-openvino", file=sys.stderr)
        return 1
    print(f"threads {args.threads}, {args.repeat} alternating runs per runtime")
    print(f"{'model':22} {'runtime':18} {'median ms':>10} {'min ms':>8} {'/ort med':>9} {'/ort min':>9} "
          f"{'max|diff|':>10}")
    for name, (data, feed) in _cases().items():
        runners = _runners(data, args.threads)
        outputs = {k: r.run(None, feed)[0] for k, r in runners.items()}  # warm-up (compilation, weight packing)
        times: dict[str, list[float]] = {k: [] for k in runners}
        for _ in range(args.repeat):
            for k, r in runners.items():
                t0 = time.perf_counter()
                r.run(None, feed)
                times[k].append((time.perf_counter() - t0) * 1e3)
        ort_med, ort_min = statistics.median(times["onnxruntime"]), min(times["onnxruntime"])
        for k, ts in times.items():
            diff = float(np.max(np.abs(outputs[k] - outputs["onnxruntime"])))
            print(f"{name:22} {k:18} {statistics.median(ts):10.2f} {min(ts):8.2f} "
                  f"{statistics.median(ts) / ort_med:9.2f} {min(ts) / ort_min:9.2f} {diff:10.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
