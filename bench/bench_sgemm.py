"""SGEMM throughput: a one-MatMul mosaicrt session against numpy's BLAS (OpenBLAS in the PyPI wheels).

For each n (default 256, 512, 1024, 2048) and thread count (default 1 and 2), C = A @ B with A, B float32 n x n
is timed in mosaicrt (a session holding one MatMul with both operands fed, so nothing is prepacked ahead) and
in numpy with its BLAS limited to the same thread count (threadpoolctl when installed, else the OPENBLAS /
OMP thread variables of a child process). Medians of alternating rounds; GFLOP/s = 2 n^3 / time. The goal of
the CPU performance work: mosaicrt at >= 90 % of numpy at n = 1024 and 2048 on 2 threads.

    python bench/bench_sgemm.py                   # n = 256..2048, 1 and 2 threads
    python bench/bench_sgemm.py --sizes 1024 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def _matmul_model(n: int) -> bytes:
    from onnx import TensorProto, helper

    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, n])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [n, n])
    c = helper.make_tensor_value_info("c", TensorProto.FLOAT, [n, n])
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["c"])], "sgemm", [a, b], [c])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _median_ms(fn: Callable[[], Any], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _numpy_ms(n: int, threads: int, repeat: int) -> float:
    """numpy's matmul with its BLAS on `threads` threads, timed in a child process whose BLAS thread variables
    are set before numpy loads (the portable way to bound OpenBLAS)."""
    env = dict(os.environ)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    code = (
        "import sys, time, statistics, numpy as np\n"
        "n, repeat = int(sys.argv[1]), int(sys.argv[2])\n"
        "rng = np.random.default_rng(0)\n"
        "a = rng.standard_normal((n, n), dtype=np.float32); b = rng.standard_normal((n, n), dtype=np.float32)\n"
        "a @ b\n"
        "t = []\n"
        "for _ in range(repeat):\n"
        "    t0 = time.perf_counter(); a @ b; t.append((time.perf_counter() - t0) * 1e3)\n"
        "print(statistics.median(t))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(n), str(repeat)], env=env, capture_output=True,
                         text=True, check=True)  # fmt: skip
    return float(out.stdout.split()[-1])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="256,512,1024,2048", help="matrix sizes n (default 256,512,1024,2048)")
    parser.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    parser.add_argument("--repeat", type=int, default=7, help="timed runs per size and runtime (default 7)")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    thread_counts = [int(t) for t in args.threads.split(",") if t.strip()]

    import mosaicrt

    print(f"mosaicrt {mosaicrt.__version__}, numpy {np.__version__} (the BLAS its wheel bundles);"
          f" medians of {args.repeat} runs")
    header = f"{'n':>6}{'threads':>9}{'mosaicrt GFLOP/s':>18}{'numpy GFLOP/s':>15}{'mosaicrt/numpy':>16}"
    print(header)
    print("-" * len(header))
    rows = []
    rng = np.random.default_rng(0)
    for threads in thread_counts:
        for n in sizes:
            opts = mosaicrt.SessionOptions()
            opts.intra_op_num_threads = threads
            sess = mosaicrt.InferenceSession(_matmul_model(n), opts)
            feed = {"a": rng.standard_normal((n, n), dtype=np.float32),
                    "b": rng.standard_normal((n, n), dtype=np.float32)}  # fmt: skip
            mrt_ms = _median_ms(lambda: sess.run(None, feed), args.repeat)  # noqa: B023
            # checked after the timing: this process's BLAS threads spin for a while after a product, and on a
            # machine of few cores they would take a core from the runs timed next
            got = sess.run(None, feed)[0]
            np.testing.assert_allclose(got, feed["a"] @ feed["b"], rtol=1e-3, atol=1e-2 * np.sqrt(n))
            np_ms = _numpy_ms(n, threads, args.repeat)
            flop = 2.0 * n**3
            row = {"n": n, "threads": threads, "mosaicrt_gflops": flop / mrt_ms / 1e6,
                   "numpy_gflops": flop / np_ms / 1e6}  # fmt: skip
            row["ratio"] = row["mosaicrt_gflops"] / row["numpy_gflops"]
            rows.append(row)
            print(f"{n:>6}{threads:>9}{row['mosaicrt_gflops']:>18.1f}{row['numpy_gflops']:>15.1f}"
                  f"{row['ratio'] * 100:>15.0f}%", flush=True)  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
