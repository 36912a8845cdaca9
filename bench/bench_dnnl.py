#!/usr/bin/env python3
"""ms per run of ResNet-style models on mosaicrt's oneDNN EP, mosaicrt's CPU EP and onnxruntime.

    python bench/bench_dnnl.py --threads 2 --repeat 20          # installed mosaicrt + mosaicrt-ep-dnnl
    MOSAICRT_EP_DNNL_LIBRARY=<libmosaicrt_ep_dnnl.so> python bench/bench_dnnl.py   # a dev build

Models: ResNet-18 (224x224, batch 1; tests/wheel/models.py) and the small ResNet of the oneDNN EP
tests (32x32, batch 2). Runs are timed in alternating blocks; the table shows medians.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "wheel"), str(ROOT / "tests" / "eps" / "dnnl")]

import models  # noqa: E402
import mosaicrt  # noqa: E402
import onnxruntime as ort  # noqa: E402
from resnet_model import resnet_small  # noqa: E402

EP = "DnnlExecutionProvider"


def _runners(model: bytes, threads: int) -> dict[str, Any]:
    opts = mosaicrt.SessionOptions()
    opts.intra_op_num_threads = threads
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return {
        "mosaicrt+dnnl": mosaicrt.InferenceSession(model, sess_options=opts, providers=[EP]),
        "mosaicrt cpu": mosaicrt.InferenceSession(model, sess_options=opts, providers=["CPUExecutionProvider"]),
        "onnxruntime": ort.InferenceSession(model, so, providers=["CPUExecutionProvider"]),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args()
    lib = os.environ.get("MOSAICRT_EP_DNNL_LIBRARY")
    if lib and EP not in mosaicrt.get_available_providers():
        mosaicrt.register_execution_provider_library("dnnl", lib)
    cases = {
        "resnet18 224 b1": (models.resnet(224, batch=1), (1, 3, 224, 224)),
        "resnet-small 32 b2": (resnet_small(batch=2), (2, 3, 32, 32)),
    }
    print(f"{'model':22} {'runtime':16} {'median ms':>10} {'min ms':>8}")
    for name, (model, shape) in cases.items():
        data = model.SerializeToString()
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        feed = {model.graph.input[0].name: x}
        runners = _runners(data, args.threads)
        times: dict[str, list[float]] = {k: [] for k in runners}
        for r in runners.values():
            r.run(None, feed)  # warm-up (primitive creation, weight reorders)
        for _ in range(args.repeat):
            for k, r in runners.items():
                t0 = time.perf_counter()
                r.run(None, feed)
                times[k].append((time.perf_counter() - t0) * 1e3)
        for k, ts in times.items():
            print(f"{name:22} {k:16} {statistics.median(ts):10.2f} {min(ts):8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
