"""Two builds of the core library timed against each other in one process: A/B of a kernel change.

On a shared or virtual machine the speed of a core drifts by tens of percent from one second to the next, so two
builds timed in separate processes (or one after the other) differ by more than most kernel changes. Here both
libraries are loaded into one process, each through its own copy of the mosaicrt Python package, and their
sessions run the same model in alternating groups of runs: every drift falls on both alike. Printed: the median
run time of each, their ratio (B / A), the median of the ratios of neighbouring groups, and the largest difference
between the two builds' first outputs.

    python3 bench/ab_libraries.py build/base/libmosaicrt.so build/dev/libmosaicrt.so --model light_squeezenet
    python3 bench/ab_libraries.py A.so B.so --conv 3,64,224,224,3,2,0 --threads 2 --seconds 3

--model takes the benchmark's models (bench/run_bench.py); --conv C,M,H,W,K,S,P a Conv (K x K window, stride S,
padding P) + Relu on a 1 x C x H x W input; --qconv C,M,H,W,K,S,P the same as a QLinearConv (uint8 input and output,
int8 weights with one scale per output channel, as quantize_static makes them); --depthwise C,H,W,K,S,P a depthwise
Conv + Clip(0, 6); --maxpool C,H,W,K,S,P a MaxPool. The mosaicrt package is core/python/mosaicrt of this checkout.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests" / "wheel")]


def _ints(text: str, count: int, what: str) -> list[int]:
    values = [int(v) for v in text.split(",")]
    if len(values) != count:
        raise SystemExit(f"{what} takes {count} comma-separated integers, got {text!r}")
    return values


def _model(nodes: list[Any], shape: list[int], inits: list[Any], dtype: int = TensorProto.FLOAT) -> bytes:
    graph = helper.make_graph(nodes, "ab", [helper.make_tensor_value_info("x", dtype, shape)],
                              [helper.make_tensor_value_info("y", dtype, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    data: bytes = model.SerializeToString()
    return data


def build_case(args: argparse.Namespace) -> tuple[bytes, dict[str, np.ndarray]]:
    """The model and its feed from the command line."""
    rng = np.random.default_rng(0)
    if args.model:
        import models
        import run_bench

        specs = dict(models.benchmark_models())
        specs.update(run_bench.light_models())
        if args.model not in specs:
            raise SystemExit(f"unknown model {args.model!r}; one of: {', '.join(sorted(specs))}")
        spec = specs[args.model]
        return spec.build().SerializeToString(), spec.make_input(1, rng)
    if args.conv:
        c, m, h, w, k, s, p = _ints(args.conv, 7, "--conv")
        weights = numpy_helper.from_array((rng.standard_normal((m, c, k, k)) * 0.1).astype(np.float32), "w")
        bias = numpy_helper.from_array(rng.standard_normal(m).astype(np.float32), "b")
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k, k], strides=[s, s], pads=[p] * 4),
                 helper.make_node("Relu", ["c"], ["y"])]
        return _model(nodes, [1, c, h, w], [weights, bias]), {"x": rng.standard_normal((1, c, h, w)).astype(np.float32)}
    if args.qconv:
        c, m, h, w, k, s, p = _ints(args.qconv, 7, "--qconv")
        # weights spread over the whole int8 range, as a per-channel symmetric quantization leaves them
        weights = np.clip(np.round(rng.standard_normal((m, c, k, k)) * 40), -127, 127).astype(np.int8)
        inits = [numpy_helper.from_array(weights, "w"),
                 numpy_helper.from_array(np.array(0.02, np.float32), "xs"),
                 numpy_helper.from_array(np.array(0, np.uint8), "xz"),
                 numpy_helper.from_array(np.full(m, 0.002, np.float32), "ws"),
                 numpy_helper.from_array(np.zeros(m, np.int8), "wz"),
                 numpy_helper.from_array(np.array(0.05, np.float32), "ys"),
                 numpy_helper.from_array(np.array(0, np.uint8), "yz"),
                 numpy_helper.from_array(rng.integers(-2000, 2000, m).astype(np.int32), "b")]
        nodes = [helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
                                  kernel_shape=[k, k], strides=[s, s], pads=[p] * 4)]
        feed = {"x": rng.integers(0, 256, (1, c, h, w)).astype(np.uint8)}
        return _model(nodes, [1, c, h, w], inits, TensorProto.UINT8), feed
    if args.depthwise:
        c, h, w, k, s, p = _ints(args.depthwise, 6, "--depthwise")
        inits = [numpy_helper.from_array((rng.standard_normal((c, 1, k, k)) * 0.3).astype(np.float32), "w"),
                 numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "b"),
                 numpy_helper.from_array(np.array(0, np.float32), "lo"),
                 numpy_helper.from_array(np.array(6, np.float32), "hi")]
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=c, kernel_shape=[k, k], strides=[s, s],
                                  pads=[p] * 4),
                 helper.make_node("Clip", ["c", "lo", "hi"], ["y"])]
        return _model(nodes, [1, c, h, w], inits), {"x": rng.standard_normal((1, c, h, w)).astype(np.float32)}
    c, h, w, k, s, p = _ints(args.maxpool, 6, "--maxpool")
    nodes = [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[k, k], strides=[s, s], pads=[p] * 4)]
    return _model(nodes, [1, c, h, w], []), {"x": rng.standard_normal((1, c, h, w)).astype(np.float32)}


def load_package(library: Path, name: str, packages: Path) -> Any:
    """The mosaicrt package imported as `name`, bound to `library` (its loader reads MOSAICRT_LIBRARY once)."""
    shutil.copytree(ROOT / "core" / "python" / "mosaicrt", packages / name)
    include = ROOT / "core" / "include"
    if include.is_dir():  # the plugin headers the package looks for next to itself
        shutil.copytree(include, packages / name / "include")
    os.environ["MOSAICRT_LIBRARY"] = str(library.resolve())
    return importlib.import_module(name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("library_a", type=Path)
    parser.add_argument("library_b", type=Path)
    case = parser.add_mutually_exclusive_group(required=True)
    case.add_argument("--model", help="a model of bench/run_bench.py")
    case.add_argument("--conv", metavar="C,M,H,W,K,S,P")
    case.add_argument("--qconv", metavar="C,M,H,W,K,S,P")
    case.add_argument("--depthwise", metavar="C,H,W,K,S,P")
    case.add_argument("--maxpool", metavar="C,H,W,K,S,P")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=5.0, help="timing time, both builds together")
    parser.add_argument("--group", type=int, default=3, help="runs of one build before switching")
    args = parser.parse_args()
    for lib in (args.library_a, args.library_b):
        if not lib.is_file():
            raise SystemExit(f"no library at {lib}")
    data, feed = build_case(args)

    with tempfile.TemporaryDirectory() as tmp:
        sys.path.insert(0, tmp)
        sessions = []
        for lib, name in ((args.library_a, "mosaicrt_build_a"), (args.library_b, "mosaicrt_build_b")):
            package = load_package(lib, name, Path(tmp))
            options = package.SessionOptions()
            options.intra_op_num_threads = args.threads
            sessions.append(package.InferenceSession(data, options))
        a, b = sessions
        diff = float(np.max(np.abs(np.asarray(a.run(None, feed)[0], np.float64) -
                                   np.asarray(b.run(None, feed)[0], np.float64))))
        for _ in range(3):
            a.run(None, feed)
            b.run(None, feed)
        times: tuple[list[float], list[float]] = ([], [])
        ratios = []
        start = time.perf_counter()
        # A B B A: each build runs first as often as second
        while time.perf_counter() - start < args.seconds:
            group: tuple[list[float], list[float]] = ([], [])
            for which in (0, 1, 1, 0):
                session = sessions[which]
                for _ in range(args.group):
                    t = time.perf_counter()
                    session.run(None, feed)
                    group[which].append(time.perf_counter() - t)
            times[0].extend(group[0])
            times[1].extend(group[1])
            ratios.append(statistics.median(group[1]) / statistics.median(group[0]))
    ma, mb = statistics.median(times[0]) * 1e3, statistics.median(times[1]) * 1e3
    what = args.model or (f"conv {args.conv}" if args.conv else f"qconv {args.qconv}" if args.qconv else
                          f"depthwise {args.depthwise}" if args.depthwise else f"maxpool {args.maxpool}")
    print(f"{what}, {args.threads} thread(s), {len(times[0])} runs each: A {ma:.3f} ms, B {mb:.3f} ms, "
          f"B / A {mb / ma:.3f} (median of group ratios {statistics.median(ratios):.3f}); "
          f"largest output difference {diff:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
