#!/usr/bin/env python3
"""Times mosaicrt against onnxruntime on the same models, inputs and thread count.

    python bench/run_bench.py                      # all models, at 1 and at 2 threads
    python bench/run_bench.py --models resnet18 --threads 2 --repeat 20 --json out.json
    python bench/run_bench.py --record dist/linux-x86_64/mosaicrt-<v>-<tag>.whl   # + a benchmark record

Both runtimes run the same serialized model with sequential node execution and `intra_op_num_threads` set to
--threads. onnxruntime keeps its default graph optimizations (it is the peer to beat). The two runtimes are
timed in short alternating blocks so load changes on a shared machine hit both alike; a model faster than
SAMPLE_MS is timed in samples of as many back-to-back runs as fill it (the mean per run). The table shows the
median latency per model, the ratio mosaicrt / onnxruntime of the medians (lower is better for mosaicrt),
the ratio of the fastest runs (steadier on a busy machine) and the largest output difference, then the
geometric mean of the ratios per thread count.
--record WHEEL (the wheel installed here, by file) also measures each model's peak RSS in a process of its own
(mosaicrt only: create the session, run it) and writes a benchmark record bound to the wheel's sha256 and this
machine's fingerprint (pipeline/perf.py), which the release gate compares with the last release's.
--profile also times every node of each model alone in both runtimes and prints per-op-type totals, to
show which kernels dominate.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "wheel"))
sys.path.insert(0, str(ROOT))

import models  # noqa: E402

from pipeline import perf  # noqa: E402  (stdlib only: the record format and the machine fingerprint)


@dataclass(frozen=True)
class Result:
    model: str
    threads: int
    repeat: int
    mosaicrt_ms: float | None
    onnxruntime_ms: float
    ratio: float | None
    max_abs_diff: float | None
    mosaicrt_min_ms: float | None = None
    onnxruntime_min_ms: float | None = None
    error: str = ""


# What a run is timed with: wall time, or (--clock thread-cpu, only with --threads 1, where both runtimes
# compute on the calling thread) that thread's CPU time, which a busy machine's preemptions do not inflate.
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "thread-cpu": time.thread_time}
_clock = time.perf_counter


def _time_runs(fn: Callable[[], object]) -> float:
    start = _clock()
    fn()
    return (_clock() - start) * 1e3


BLOCK = 3
# A timed sample of a whole-model timing is the mean of k back-to-back runs, k = the runs that fill SAMPLE_MS
# (1 for any model slower than that), the same k for both runtimes: a model of tens of microseconds timed one
# run at a time after each block's pause measured the wake-up from the pause, not the model (the quantized MLP
# at 2 threads: medians 0.032 against 0.022 ms, fastest runs equal, 2 ms later both ~0.016).
SAMPLE_MS = 2.0
SWITCH_PAUSE_S = 2.0  # before each block of a whole-model timing: the other runtime's spinning threads go idle
PROFILE_PAUSE_S = 0.05  # the same in the per-node profile (in one process, many short nodes)


def _time_alternating(sessions: dict[str, Any], feed: dict[str, Any], repeat: int,
                      warmup: int) -> dict[str, list[float]]:
    """`repeat` timed runs per session, taken in short alternating blocks (order flipped every round).

    Blocks rather than strict one-by-one interleaving: onnxruntime's pool threads keep spinning for a while
    after a run (tens of milliseconds), which steals a core from whichever runtime runs next; so each block
    starts after a pause of PROFILE_PAUSE_S (the other runtime's threads slow down) and an untimed run.
    Alternating blocks still spread load changes on a shared machine over both runtimes. (Without the pause,
    blocks of 3 measured the transformer at 2 threads 10.3 ms in mosaicrt against 6.9 ms with it, while
    onnxruntime, which runs after a runtime whose threads sleep, was unaffected.)"""
    for sess in sessions.values():
        for _ in range(warmup):
            sess.run(None, feed)
    times: dict[str, list[float]] = {name: [] for name in sessions}
    order = list(sessions)
    while any(len(t) < repeat for t in times.values()):
        for name in order:
            sess = sessions[name]
            time.sleep(PROFILE_PAUSE_S)
            sess.run(None, feed)
            for _ in range(min(BLOCK, repeat - len(times[name]))):
                times[name].append(_time_runs(lambda: sess.run(None, feed)))  # noqa: B023
        order.reverse()
    return times


# A runtime's timing process: loads the model and the feed, then answers each line "<n> <k>" on stdin with one
# untimed run and n samples, each the mean milliseconds of k runs (a JSON list on stdout).
_WORKER = """
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[5])
from run_bench import _make_session
runtime, model, feed_path, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
feed = dict(np.load(feed_path))
sess = _make_session(runtime, open(model, "rb").read(), threads)
clock = time.perf_counter
for line in sys.stdin:
    n, k = map(int, line.split())
    sess.run(None, feed)
    out = []
    for _ in range(n):
        t = clock()
        for _ in range(k):
            sess.run(None, feed)
        out.append((clock() - t) * 1e3 / k)
    print(json.dumps(out), flush=True)
"""


def _time_in_processes(data: bytes, feed: dict[str, Any], threads: int, repeat: int,
                       warmup: int) -> dict[str, list[float]]:
    """`repeat` timed runs per runtime, each runtime in a process of its own, in short alternating blocks
    (order flipped every round); each block starts after SWITCH_PAUSE_S and one untimed run. onnxruntime's
    pool threads keep spinning after its runs, on the order of a second: in one process an idle onnxruntime
    session took the second core from mosaicrt's 2-thread runs (ResNet-18: 27.9 ms alone, 40.2 ms next to
    an idle onnxruntime session), and from another process for about a second after its last run (the
    quantized ResNet-18: 20 ms 50 ms after an onnxruntime block, 11 ms 2 s after). Stopping the idle
    process (SIGSTOP) instead disturbed the 2-thread runs after each resume. mosaicrt's idle threads sleep,
    so onnxruntime's blocks are not disturbed either way."""
    import subprocess
    import tempfile

    if _clock is not time.perf_counter:
        sessions = {rt: _make_session(rt, data, threads) for rt in ("mosaicrt", "onnxruntime")}
        return _time_alternating(sessions, feed, repeat, warmup)
    with tempfile.TemporaryDirectory(prefix="mosaicrt-bench-") as tmp:
        model = Path(tmp) / "model.onnx"
        model.write_bytes(data)
        feed_path = Path(tmp) / "feed.npz"
        np.savez(feed_path, **feed)
        workers = {rt: subprocess.Popen([sys.executable, "-c", _WORKER, rt, str(model), str(feed_path), str(threads),
                                         str(Path(__file__).resolve().parent)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                   for rt in ("mosaicrt", "onnxruntime")}  # fmt: skip
        try:
            def block(rt: str, n: int, k: int = 1) -> list[float]:
                w = workers[rt]
                assert w.stdin is not None and w.stdout is not None
                time.sleep(SWITCH_PAUSE_S)
                w.stdin.write(f"{n} {k}\n")
                w.stdin.flush()
                line = w.stdout.readline()
                if not line:
                    raise RuntimeError(f"the {rt} timing process ended (exit {w.wait()})")
                return [float(v) for v in json.loads(line)]

            fastest = min(min(block(rt, max(warmup, 1))) for rt in workers)
            k = max(1, math.ceil(SAMPLE_MS / max(fastest, 1e-3)))
            times: dict[str, list[float]] = {rt: [] for rt in workers}
            order = list(workers)
            while any(len(t) < repeat for t in times.values()):
                for rt in order:
                    n = min(BLOCK, repeat - len(times[rt]))
                    if n > 0:
                        times[rt] += block(rt, n, k)
                order.reverse()
            return times
        finally:
            for w in workers.values():
                if w.stdin is not None:
                    w.stdin.close()
                w.wait(timeout=60)


def bench_model(spec: models.ModelSpec, threads: int, repeat: int, warmup: int, batch: int) -> Result:
    data = spec.build().SerializeToString()
    feed = spec.make_input(batch, np.random.default_rng(0))

    ort_sess = _make_session("onnxruntime", data, threads)
    expected = ort_sess.run(None, feed)
    try:
        mrt_sess = _make_session("mosaicrt", data, threads)
        got = mrt_sess.run(None, feed)
    except Exception as exc:  # report and keep timing the rest
        for _ in range(warmup):
            ort_sess.run(None, feed)
        ort_times = [_time_runs(lambda: ort_sess.run(None, feed)) for _ in range(repeat)]
        return Result(spec.name, threads, repeat, None, statistics.median(ort_times), None, None, None,
                      min(ort_times), f"{type(exc).__name__}: {exc}")
    diff = max(float(np.max(np.abs(g.astype(np.float64) - e))) for g, e in zip(got, expected, strict=True))

    ort_sess = mrt_sess = None  # no sessions in this process while timing (_time_in_processes)
    times = _time_in_processes(data, feed, threads, repeat, warmup)
    mrt_ms = statistics.median(times["mosaicrt"])
    ort_ms = statistics.median(times["onnxruntime"])
    return Result(spec.name, threads, repeat, mrt_ms, ort_ms, mrt_ms / ort_ms, diff,
                  min(times["mosaicrt"]), min(times["onnxruntime"]))


@dataclass(frozen=True)
class OpProfile:
    op_type: str
    nodes: int
    mosaicrt_ms: float
    onnxruntime_ms: float


@dataclass(frozen=True)
class NodeProfile:
    node: str
    op_type: str
    detail: str  # input shapes and the attributes that shape the work
    mosaicrt_ms: float
    onnxruntime_ms: float


@dataclass(frozen=True)
class ModelProfile:
    ops: list[OpProfile]
    nodes: list[NodeProfile]


_DETAIL_ATTRS = ("kernel_shape", "strides", "pads", "group", "axis", "perm", "transA", "transB")


def _node_detail(node: Any, shapes: Sequence[tuple[int, ...]]) -> str:
    from onnx import helper

    parts = ["x".join(map(str, shape)) or "scalar" for shape in shapes]
    for attr in node.attribute:
        if attr.name in _DETAIL_ATTRS:
            value = helper.get_attribute_value(attr)
            parts.append(f"{attr.name}={list(value) if isinstance(value, Sequence) else value}")
    return " ".join(parts)


def _run_overhead_ms(runtime: str, threads: int, repeat: int) -> float:
    """Median time of one run() of a one-element Identity model: the per-call cost subtracted per node."""
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = models.IR_VERSION
    sess = _make_session(runtime, model.SerializeToString(), threads)
    feed = {"x": np.zeros(1, np.float32)}
    for _ in range(3):
        sess.run(None, feed)
    return statistics.median(_time_runs(lambda: sess.run(None, feed)) for _ in range(max(repeat, 20)))


def _make_session(runtime: str, data: bytes, threads: int) -> Any:
    if runtime == "onnxruntime":
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
    import mosaicrt

    mopts = mosaicrt.SessionOptions()
    mopts.intra_op_num_threads = threads
    return mosaicrt.InferenceSession(data, mopts)


def profile_model(spec: models.ModelSpec, threads: int, repeat: int, batch: int) -> ModelProfile:
    """Times every node of the model alone (its real input values, constant inputs kept as initializers) in
    both runtimes and sums the medians per op type, minus each runtime's per-run() call overhead.

    Isolated nodes lose onnxruntime's fusions (e.g. Conv+BatchNormalization+Relu), so the onnxruntime column
    says what the same op costs there, not what the fused model costs."""
    import onnx
    import onnxruntime as ort
    from onnx import helper

    model = spec.build()
    feed = spec.make_input(batch, np.random.default_rng(0))
    inferred = onnx.shape_inference.infer_shapes(model)
    elem_types = {vi.name: vi.type.tensor_type.elem_type
                  for vi in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]}
    # capture every intermediate value with onnxruntime (graph optimizations off so none is fused away)
    capture = onnx.ModelProto()
    capture.CopyFrom(model)
    present = {o.name for o in capture.graph.output}
    for node in capture.graph.node:
        for out in node.output:
            if out and out not in present:
                capture.graph.output.append(helper.make_tensor_value_info(out, elem_types.get(out, 1), None))
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = threads
    cap_sess = ort.InferenceSession(capture.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in cap_sess.get_outputs()]
    values: dict[str, np.ndarray[Any, Any]] = dict(zip(names, cap_sess.run(None, feed), strict=True))
    values.update(feed)
    inits = {t.name: t for t in model.graph.initializer}

    overhead = {rt: _run_overhead_ms(rt, threads, repeat) for rt in ("mosaicrt", "onnxruntime")}
    totals: dict[str, list[float]] = {}
    per_node: list[NodeProfile] = []
    for node in model.graph.node:
        graph_inputs = []
        node_inits = []
        node_feed = {}
        for name in node.input:
            if not name or name in node_feed:
                continue
            if name in inits:
                node_inits.append(inits[name])
            else:
                arr = values[name]
                node_feed[name] = arr
                graph_inputs.append(helper.make_tensor_value_info(name, elem_types.get(name, 1), arr.shape))
        # (the type ORT computed: a model's own value_info can be wrong, e.g. a Dropout mask declared float)
        outputs = [helper.make_tensor_value_info(
            o, helper.np_dtype_to_tensor_dtype(values[o].dtype) if o in values else elem_types.get(o, 1), None)
            for o in node.output if o]
        graph = helper.make_graph([node], f"node_{node.name}", graph_inputs, outputs, node_inits)
        single = helper.make_model(graph, opset_imports=list(model.opset_import))
        single.ir_version = model.ir_version
        data = single.SerializeToString()
        sessions = {rt: _make_session(rt, data, threads) for rt in ("mosaicrt", "onnxruntime")}
        times = _time_alternating(sessions, node_feed, repeat, warmup=1)
        mrt_ms = max(statistics.median(times["mosaicrt"]) - overhead["mosaicrt"], 0.0)
        ort_ms = max(statistics.median(times["onnxruntime"]) - overhead["onnxruntime"], 0.0)
        entry = totals.setdefault(node.op_type, [0, 0.0, 0.0])
        entry[0] += 1
        entry[1] += mrt_ms
        entry[2] += ort_ms
        shapes = [tuple(values[n].shape) if n in values else tuple(inits[n].dims) for n in node.input if n]
        per_node.append(NodeProfile(node.name, node.op_type, _node_detail(node, shapes), mrt_ms, ort_ms))
    ops = [OpProfile(op, int(n), m, o) for op, (n, m, o) in totals.items()]
    return ModelProfile(sorted(ops, key=lambda p: -p.mosaicrt_ms),
                        sorted(per_node, key=lambda p: -(p.mosaicrt_ms - p.onnxruntime_ms)))


def format_profile(name: str, model_profile: ModelProfile, top: int = 8) -> str:
    profile = model_profile.ops
    header = f"{'op':<22}{'nodes':>6}{'mosaicrt ms':>13}{'onnxruntime ms':>16}{'ratio':>8}"
    lines = [f"per-op profile of {name} (isolated nodes, call overhead subtracted):", header, "-" * len(header)]
    for p in profile:
        ratio = f"{p.mosaicrt_ms / p.onnxruntime_ms:.2f}" if p.onnxruntime_ms > 0 else "-"
        lines.append(f"{p.op_type:<22}{p.nodes:>6}{p.mosaicrt_ms:>13.3f}{p.onnxruntime_ms:>16.3f}{ratio:>8}")
    total_m = sum(p.mosaicrt_ms for p in profile)
    total_o = sum(p.onnxruntime_ms for p in profile)
    lines.append(f"{'total':<22}{sum(p.nodes for p in profile):>6}{total_m:>13.3f}{total_o:>16.3f}"
                 f"{(total_m / total_o if total_o else 0):>8.2f}")
    lines.append(f"nodes losing the most time to onnxruntime (top {top}):")
    for n in model_profile.nodes[:top]:
        lines.append(f"  {n.mosaicrt_ms:9.3f} ms vs {n.onnxruntime_ms:9.3f} ms  {n.op_type} {n.detail}")
    return "\n".join(lines)


def format_table(results: Sequence[Result]) -> str:
    header = (f"{'model':<14}{'threads':>8}{'mosaicrt ms':>13}{'onnxruntime ms':>16}{'ratio':>8}"
              f"{'min ratio':>11}{'max|diff|':>11}")
    lines = [header, "-" * len(header)]
    for r in results:
        mrt = f"{r.mosaicrt_ms:.3f}" if r.mosaicrt_ms is not None else "error"
        ratio = f"{r.ratio:.2f}" if r.ratio is not None else "-"
        diff = f"{r.max_abs_diff:.1e}" if r.max_abs_diff is not None else "-"
        min_ratio = (f"{r.mosaicrt_min_ms / r.onnxruntime_min_ms:.2f}"
                     if r.mosaicrt_min_ms is not None and r.onnxruntime_min_ms else "-")
        lines.append(f"{r.model:<14}{r.threads:>8}{mrt:>13}{r.onnxruntime_ms:>16.3f}{ratio:>8}{min_ratio:>11}"
                     f"{diff:>11}")
        if r.error:
            lines.append(f"    mosaicrt failed: {r.error}")
    return "\n".join(lines)


LIGHT_MODELS = ("resnet50", "inception_v1", "densenet121", "squeezenet", "shufflenet")


def light_models() -> dict[str, models.ModelSpec]:
    """The onnx package's light models (`light_<name>.onnx`: real architectures whose weights are computed by
    ConstantOfShape, so outputs are uniform: they time the runtime, they prove nothing about accuracy)."""
    import onnx

    folder = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"

    def spec(name: str) -> models.ModelSpec:
        path = folder / f"light_{name}.onnx"

        def feed(batch: int, rng: np.random.Generator) -> dict[str, np.ndarray[Any, Any]]:
            model = onnx.load(str(path))
            inits = {t.name for t in model.graph.initializer}
            (inp,) = [i for i in model.graph.input if i.name not in inits]
            dims = [d.dim_value or batch for d in inp.type.tensor_type.shape.dim]
            dims[0] = batch
            return {inp.name: rng.standard_normal(dims).astype(np.float32)}

        return models.ModelSpec(f"light_{name}", lambda: onnx.load(str(path)), feed)

    return {f"light_{n}": spec(n) for n in LIGHT_MODELS if (folder / f"light_{n}.onnx").exists()}


def _thread_counts(text: str) -> list[int]:
    try:
        counts = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        counts = []
    if not counts or any(t < 1 for t in counts):
        raise argparse.ArgumentTypeError(f"expected thread counts such as 1,2, got {text!r}")
    return counts


def geomean_lines(results: Sequence[Result]) -> list[str]:
    lines = []
    for threads in sorted({r.threads for r in results}):
        ratios = [r.ratio for r in results if r.threads == threads and r.ratio]
        if ratios:
            g = statistics.geometric_mean(ratios)
            worst = max((r for r in results if r.threads == threads and r.ratio), key=lambda r: r.ratio or 0.0)
            lines.append(f"geometric mean ratio at {threads} thread{'s' if threads > 1 else ''}: {g:.2f}"
                         f" over {len(ratios)} models (highest: {worst.model} {worst.ratio:.2f})")
    return lines


def _peak_rss_mb(name: str, threads: int, batch: int) -> float | None:
    """Peak RSS of a process that creates the mosaicrt session of one model and runs it three times."""
    import subprocess

    cmd = [sys.executable, __file__, "--rss-probe", name, "--threads", str(threads), "--batch", str(batch)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        print(f"  peak RSS of {name} at {threads} threads not measured: {proc.stderr.strip()[-300:]}",
              file=sys.stderr)
        return None
    return float(proc.stdout.split()[-1])


def _rss_probe(spec: models.ModelSpec, threads: int, batch: int) -> int:
    import resource

    data = spec.build().SerializeToString()
    feed = spec.make_input(batch, np.random.default_rng(0))
    sess = _make_session("mosaicrt", data, threads)
    for _ in range(3):
        sess.run(None, feed)
    print(f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0:.1f}")  # Linux: KiB
    return 0


def write_bench_record(wheel: Path, results: Sequence[Result], record_dir: Path, args: argparse.Namespace,
                       peer: str) -> Path:
    from pipeline.hashing import sha256_file

    figures = []
    for r in results:
        if r.mosaicrt_ms is None:
            continue
        figures.append({"model": r.model, "threads": r.threads, "median_ms": round(r.mosaicrt_ms, 4),
                        "min_ms": round(r.mosaicrt_min_ms or r.mosaicrt_ms, 4), "peer_ms": round(r.onnxruntime_ms, 4),
                        "peak_rss_mb": _peak_rss_mb(r.model, r.threads, args.batch)})
    rec = perf.make_record(wheel=wheel, sha256=sha256_file(wheel), figures=figures, repeat=args.repeat,
                           clock=args.clock, peer=peer)
    return perf.write_record(record_dir, rec)


def main(argv: Sequence[str] | None = None) -> int:
    available = {**light_models(), **models.benchmark_models()}
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=_thread_counts, default=[1, 2],
                        help="intra-op threads for both runtimes, one or a list such as 1,2 (default 1,2)")
    parser.add_argument("--models", default=",".join(available),
                        help=f"comma-separated subset of: {', '.join(available)}")
    parser.add_argument("--repeat", type=int, default=10, help="timed runs per runtime and model (default 10)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs first (default 2)")
    parser.add_argument("--batch", type=int, default=1, help="batch size (default 1)")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall time (default) or the calling thread's CPU time (needs --threads 1)")
    parser.add_argument("--profile", action="store_true",
                        help="also time every node alone in both runtimes and print per-op-type totals")
    parser.add_argument("--record", type=Path, metavar="WHEEL",
                        help="the core wheel installed here: measure peak RSS and write its benchmark record")
    parser.add_argument("--record-dir", type=Path, default=ROOT / "build" / "pipeline" / "records" / "bench",
                        help="where benchmark records go (default: build/pipeline/records/bench)")
    parser.add_argument("--rss-probe", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.rss_probe:
        return _rss_probe(available[args.rss_probe], args.threads[0], args.batch)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in available]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(available)}")
    if args.repeat < 1 or args.warmup < 0 or args.batch < 1:
        parser.error("--repeat and --batch must be >= 1 and --warmup >= 0")
    if args.clock == "thread-cpu" and args.threads != [1]:
        parser.error("--clock thread-cpu measures only the calling thread: use it with --threads 1")
    if args.record is not None and not args.record.is_file():
        parser.error(f"--record {args.record}: no such wheel file")
    global _clock  # noqa: PLW0603 - one setting for the whole run
    _clock = CLOCKS[args.clock]

    import mosaicrt
    import onnxruntime as ort

    machine = perf.this_machine()
    print(f"mosaicrt {mosaicrt.__version__} ({mosaicrt.get_build_details().get('library', '?')}), "
          f"onnxruntime {ort.__version__}; threads={','.join(map(str, args.threads))}, batch={args.batch}, "
          f"repeat={args.repeat}, clock={args.clock}\n"
          f"machine {machine.fingerprint}: {machine.describe()}", flush=True)
    results = []
    for threads in args.threads:
        for name in names:
            result = bench_model(available[name], threads, args.repeat, args.warmup, args.batch)
            results.append(result)
            print(f"  {name} @{threads}: mosaicrt {result.mosaicrt_ms or float('nan'):.3f} ms, "
                  f"onnxruntime {result.onnxruntime_ms:.3f} ms", file=sys.stderr, flush=True)
    print(format_table(results))
    for line in geomean_lines(results):
        print(line)
    profiles: dict[str, ModelProfile] = {}
    if args.profile:
        for name in names:
            profiles[name] = profile_model(available[name], args.threads[-1], max(3, min(args.repeat, 10)),
                                           args.batch)
            print("\n" + format_profile(name, profiles[name]), flush=True)
    if args.json:
        payload: dict[str, Any] = {
            "mosaicrt": mosaicrt.__version__,
            "onnxruntime": ort.__version__,
            "machine": {"fingerprint": machine.fingerprint, **asdict(machine)},
            "threads": args.threads,
            "clock": args.clock,
            "batch": args.batch,
            "results": [asdict(r) for r in results],
            "profiles": {name: asdict(prof) for name, prof in profiles.items()},
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    if args.record is not None:
        path = write_bench_record(args.record, results, args.record_dir, args, f"onnxruntime {ort.__version__}")
        print(f"benchmark record: {path} (the release gate compares it with the last release's on this machine)")
    return 0 if all(not r.error for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
