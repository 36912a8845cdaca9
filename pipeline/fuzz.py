"""Coverage-guided fuzzing of the core (``nox -s fuzz``): build, seed, run, report.

The targets are libFuzzer programs in ``core/tests/fuzz`` built with clang, AddressSanitizer and
UndefinedBehaviorSanitizer over every object of the core:

=========  ==================================================================================
decode     the ModelProto wire decoder (and the encoder on what it accepts)
session    session creation: inlining, type inference, the graph optimizer, partitioning
run        run() on small fuzzed models with fuzzed inputs
ep_graph   the graph and node views a plugin EP receives (read byte by byte by a probe EP)
=========  ==================================================================================

Seed corpora are generated, never committed: every model of the onnx package's backend node
cases (with its first test data set packed in for ``run``) and the small test models of
``tests/wheel/models.py``. A dictionary of the protobuf field keys of ModelProto and what it
holds is written next to them. Inputs that once crashed a target live in
``tests/fuzz/regressions/<target>/`` and are replayed before any fuzzing.

Usage::

    python -m pipeline fuzz --seconds 60            # every target, 60 s each
    python -m pipeline fuzz --runs 1000000 --target decode

The report (``build/pipeline/reports/fuzz.json`` + a printed table) has per target: executions,
coverage (edges and features as libFuzzer counts them), corpus size, time and crashes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .errors import TestFailure, UsageError, choices_hint
from .sanitizers import ASAN_UBSAN, CLANG_VERSION, cmake_build, ensure_clang, sanitizer_cmake_args

SeedKind = Literal["model", "model+feed"]


@dataclass(frozen=True, kw_only=True)
class FuzzTarget:
    name: str
    description: str
    seeds: SeedKind  #: plain model bytes, or the run target's packed (length, model, feed) layout
    max_len: int  #: libFuzzer -max_len: the largest input it builds by mutation

    @property
    def binary_name(self) -> str:
        return f"mrt_fuzz_{self.name}"


TARGETS: tuple[FuzzTarget, ...] = (
    FuzzTarget(name="decode", description="ModelProto wire decoder + encoder", seeds="model", max_len=65536),
    FuzzTarget(name="session", description="session creation (inference, optimizer, partitioning)", seeds="model",
               max_len=65536),
    FuzzTarget(name="run", description="run() on fuzzed models and inputs", seeds="model+feed", max_len=32768),
    FuzzTarget(name="ep_graph", description="graph/node views handed to plugin EPs", seeds="model", max_len=65536),
)
TARGET_NAMES = tuple(t.name for t in TARGETS)


def select_targets(names: Sequence[str]) -> tuple[FuzzTarget, ...]:
    if not names:
        return TARGETS
    by_name = {t.name: t for t in TARGETS}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise UsageError(f"unknown fuzz target {unknown[0]!r}{choices_hint(unknown[0], TARGET_NAMES)}")
    return tuple(by_name[n] for n in names)


# ---------------------------------------------------------------------------------------------
# the dictionary: protobuf keys of the messages the decoder reads
# ---------------------------------------------------------------------------------------------

VARINT, LEN, I32, I64 = 0, 2, 5, 1

#: (message, field name, field number, wire type) for ModelProto and everything it holds.
PROTO_FIELDS: tuple[tuple[str, str, int, int], ...] = (
    ("ModelProto", "ir_version", 1, VARINT), ("ModelProto", "producer_name", 2, LEN),
    ("ModelProto", "producer_version", 3, LEN), ("ModelProto", "domain", 4, LEN),
    ("ModelProto", "model_version", 5, VARINT), ("ModelProto", "doc_string", 6, LEN),
    ("ModelProto", "graph", 7, LEN), ("ModelProto", "opset_import", 8, LEN),
    ("ModelProto", "metadata_props", 14, LEN), ("ModelProto", "functions", 25, LEN),
    ("OperatorSetIdProto", "domain", 1, LEN), ("OperatorSetIdProto", "version", 2, VARINT),
    ("GraphProto", "node", 1, LEN), ("GraphProto", "name", 2, LEN), ("GraphProto", "initializer", 5, LEN),
    ("GraphProto", "doc_string", 10, LEN), ("GraphProto", "input", 11, LEN), ("GraphProto", "output", 12, LEN),
    ("GraphProto", "value_info", 13, LEN), ("GraphProto", "sparse_initializer", 15, LEN),
    ("NodeProto", "input", 1, LEN), ("NodeProto", "output", 2, LEN), ("NodeProto", "name", 3, LEN),
    ("NodeProto", "op_type", 4, LEN), ("NodeProto", "attribute", 5, LEN), ("NodeProto", "domain", 7, LEN),
    ("AttributeProto", "name", 1, LEN), ("AttributeProto", "f", 2, I32), ("AttributeProto", "i", 3, VARINT),
    ("AttributeProto", "s", 4, LEN), ("AttributeProto", "t", 5, LEN), ("AttributeProto", "g", 6, LEN),
    ("AttributeProto", "floats", 7, LEN), ("AttributeProto", "floats", 7, I32),
    ("AttributeProto", "ints", 8, LEN), ("AttributeProto", "ints", 8, VARINT),
    ("AttributeProto", "strings", 9, LEN), ("AttributeProto", "tensors", 10, LEN),
    ("AttributeProto", "graphs", 11, LEN), ("AttributeProto", "ref_attr_name", 21, LEN),
    ("AttributeProto", "type", 20, VARINT),
    ("TensorProto", "dims", 1, VARINT), ("TensorProto", "dims", 1, LEN), ("TensorProto", "data_type", 2, VARINT),
    ("TensorProto", "float_data", 4, LEN), ("TensorProto", "int32_data", 5, LEN),
    ("TensorProto", "string_data", 6, LEN), ("TensorProto", "int64_data", 7, LEN), ("TensorProto", "name", 8, LEN),
    ("TensorProto", "raw_data", 9, LEN), ("TensorProto", "double_data", 10, LEN),
    ("TensorProto", "uint64_data", 11, LEN), ("TensorProto", "external_data", 13, LEN),
    ("TensorProto", "data_location", 14, VARINT),
    ("ValueInfoProto", "name", 1, LEN), ("ValueInfoProto", "type", 2, LEN),
    ("TypeProto", "tensor_type", 1, LEN), ("TypeProto", "sequence_type", 4, LEN),
    ("TypeProto", "map_type", 5, LEN), ("TypeProto", "optional_type", 9, LEN),
    ("TypeProto.Tensor", "elem_type", 1, VARINT), ("TypeProto.Tensor", "shape", 2, LEN),
    ("TensorShapeProto", "dim", 1, LEN), ("Dimension", "dim_value", 1, VARINT), ("Dimension", "dim_param", 2, LEN),
    ("FunctionProto", "name", 1, LEN), ("FunctionProto", "input", 4, LEN), ("FunctionProto", "output", 5, LEN),
    ("FunctionProto", "attribute", 6, LEN), ("FunctionProto", "node", 7, LEN),
    ("FunctionProto", "opset_import", 9, LEN), ("FunctionProto", "domain", 10, LEN),
    ("StringStringEntryProto", "key", 1, LEN), ("StringStringEntryProto", "value", 2, LEN),
)

#: Values worth splicing in: common op types and domains, and varints at the edges of ranges.
DICT_STRINGS = ("Conv", "Relu", "Add", "MatMul", "Gemm", "Reshape", "Concat", "Loop", "If", "Scan", "Constant",
                "Cast", "Gather", "Slice", "Transpose", "ai.onnx", "com.microsoft", "ai.onnx.ml")


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        b = value & 0x7F
        value >>= 7
        out.append(b | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _dict_literal(data: bytes) -> str:
    return '"' + "".join(f"\\x{b:02x}" for b in data) + '"'


def dictionary_text() -> str:
    """A libFuzzer dictionary: one key per (message, field, wire type), plus values."""
    lines = ["# protobuf keys (field number << 3 | wire type) of ModelProto and what it holds"]
    seen: set[bytes] = set()
    for message, field, number, wire in PROTO_FIELDS:
        key = _varint(number << 3 | wire)
        if key not in seen:
            seen.add(key)
        lines.append(f"{message}_{field}_{wire}={_dict_literal(key)}")
    lines.append("# strings and edge-case varints")
    lines += [f"str_{s.replace('.', '_')}={_dict_literal(s.encode())}" for s in DICT_STRINGS]
    for name, value in (("zero", 0), ("max_int32", 2**31 - 1), ("neg_one", -1), ("max_int64", 2**63 - 1),
                        ("big_dim", 1 << 40)):
        lines.append(f"varint_{name}={_dict_literal(_varint(value))}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# seeds
# ---------------------------------------------------------------------------------------------


def pack_run_input(model: bytes, feed: bytes) -> bytes:
    """The run target's input layout: little-endian u32 model length, the model, the feed pool."""
    return struct.pack("<I", len(model)) + model + feed


@dataclass(frozen=True, kw_only=True)
class Seed:
    name: str
    model: bytes
    feed: bytes  #: the concatenated raw bytes of the model's first test inputs ("" when none)

    def for_target(self, target: FuzzTarget) -> bytes:
        return pack_run_input(self.model, self.feed) if target.seeds == "model+feed" else self.model


def onnx_node_case_seeds(limit: int | None = None, max_bytes: int = 65536) -> Iterator[Seed]:
    """The onnx package's backend node cases (generated by ``collect_testcases``): each model with its
    first data set's inputs as the feed."""
    import warnings

    import numpy as np
    from onnx import TensorProto, numpy_helper  # type: ignore[import-not-found,unused-ignore]
    from onnx.backend.test.case.node import collect_testcases  # type: ignore[import-not-found,unused-ignore]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case generators emit numpy overflow warnings
        cases = sorted(collect_testcases(), key=lambda c: c.name)
    for case in cases[:limit]:
        if case.model is None:
            continue
        model: bytes = case.model.SerializeToString()
        if len(model) > max_bytes:
            continue
        feed = bytearray()
        inputs = case.data_sets[0][0] if case.data_sets else []
        for given in inputs:
            value = numpy_helper.to_array(given) if isinstance(given, TensorProto) else given
            if isinstance(value, np.ndarray | np.generic) and value.dtype.kind not in "OUS":
                feed += np.ascontiguousarray(value).tobytes()
        yield Seed(name=case.name, model=model, feed=bytes(feed[:16384]))


def wheel_model_seeds(root: Path) -> Iterator[Seed]:
    """Small instances of the architectures in tests/wheel/models.py (conv nets, transformer, MLPs)."""
    sys.path.insert(0, str(root / "tests" / "wheel"))
    try:
        import models  # type: ignore[import-not-found,unused-ignore]
    finally:
        sys.path.pop(0)
    builders: dict[str, Callable[[], Any]] = {
        "resnet": lambda: models.resnet(16, widths=(4, 8), blocks=(1, 1), batch=1),
        "transformer": lambda: models.transformer(seq=4, batch=1, d_model=16, heads=2, layers=1, d_ff=32),
        "float_mlp": lambda: models.float_mlp((8, 16, 4), batch=1),
    }
    for name, build in builders.items():
        model: bytes = build().SerializeToString()
        yield Seed(name=f"models_{name}", model=model, feed=bytes(range(256)) * 4)


def write_seeds(seeds: Iterable[Seed], target: FuzzTarget, folder: Path) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    n = 0
    for seed in seeds:
        (folder / seed.name).write_bytes(seed.for_target(target))
        n += 1
    return n


# ---------------------------------------------------------------------------------------------
# build
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class FuzzBuild:
    build_dir: Path

    def binary(self, target: FuzzTarget) -> Path:
        return self.build_dir / "tests" / "fuzz" / target.binary_name


ASAN_TARGETS = (*(t.binary_name for t in TARGETS), "mrt_stress_check", "mrt_fake_ep")


def asan_build(root: Path, build_dir: Path, *, jobs: int = 2, install: bool = False,
               targets: Sequence[str] = ASAN_TARGETS) -> FuzzBuild:
    """The ASan + UBSan (+ libFuzzer coverage) build of the core: the fuzz targets and the native
    stress program share its objects (pipeline/hardening.py uses it for the leak check)."""
    cc, cxx = ensure_clang(install=install)
    args = [*sanitizer_cmake_args(cc, cxx, ASAN_UBSAN, fuzzing=True), "-DMOSAICRT_BUILD_FUZZERS=ON",
            "-DMOSAICRT_BUILD_TESTS=ON"]
    started = time.monotonic()
    print(f"fuzz: building {len(targets)} programs with clang-{CLANG_VERSION} + ASan + UBSan in {build_dir} ...",
          flush=True)
    cmake_build(root, build_dir, args, targets, jobs=jobs, what="ASan/UBSan")
    print(f"fuzz: built in {time.monotonic() - started:.1f}s", flush=True)
    return FuzzBuild(build_dir=build_dir)


# ---------------------------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class FuzzResult:
    target: str
    execs: int
    seconds: float
    coverage: int  #: edges covered (libFuzzer "cov")
    features: int  #: libFuzzer "ft"
    corpus: int  #: inputs in the corpus at the end
    crashes: tuple[str, ...]  #: artifact files (crash-*, leak-*, timeout-*, oom-*)
    exit_code: int
    log: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.crashes

    def to_json(self) -> dict[str, object]:
        return {**dataclasses.asdict(self), "crashes": list(self.crashes), "ok": self.ok}


_STATUS_LINE = re.compile(r"#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+)(?: corp: (\d+)/)?")
_EXECS = re.compile(r"stat::number_of_executed_units: (\d+)")


def parse_fuzzer_log(text: str) -> tuple[int, int, int, int]:
    """(execs, coverage, features, corpus) from a libFuzzer log: the final stats and last status line."""
    execs = cov = ft = corpus = 0
    for m in _STATUS_LINE.finditer(text):
        execs, cov, ft = int(m.group(1)), int(m.group(2)), int(m.group(3))
        corpus = int(m.group(4)) if m.group(4) else corpus
    if found := _EXECS.findall(text):
        execs = int(found[-1])
    return execs, cov, ft, corpus


def fuzzer_env() -> dict[str, str]:
    env = dict(os.environ)
    # Huge allocations are answered with NULL (the core turns that into MRT_OUT_OF_MEMORY) instead
    # of an ASan abort; leaks at exit are findings.
    env["ASAN_OPTIONS"] = "allocator_may_return_null=1:detect_leaks=1:abort_on_error=0:" + env.get("ASAN_OPTIONS", "")
    env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1:" + env.get("UBSAN_OPTIONS", "")
    return env


def replay(build: FuzzBuild, target: FuzzTarget, inputs: Sequence[Path], log: Path) -> int:
    """Run the target once on each input file (regressions); returns the exit code."""
    if not inputs:
        return 0
    with log.open("w") as out:
        return subprocess.run([str(build.binary(target)), *map(str, inputs)], stdout=out,
                              stderr=subprocess.STDOUT, env=fuzzer_env(), check=False).returncode


def fuzz_target(build: FuzzBuild, target: FuzzTarget, *, corpus: Path, seeds: Path, dictionary: Path,
                artifacts: Path, log: Path, runs: int | None, seconds: int | None, timeout_s: int = 10,
                rss_limit_mb: int = 2048) -> FuzzResult:
    """Fuzz one target from its corpus (kept between runs) and seeds; stops at the first crash."""
    if (runs is None) == (seconds is None):
        raise UsageError("give exactly one of runs / seconds")
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in artifacts.iterdir()}
    cmd = [str(build.binary(target)), str(corpus), str(seeds), f"-dict={dictionary}", f"-max_len={target.max_len}",
           f"-timeout={timeout_s}", f"-rss_limit_mb={rss_limit_mb}", f"-artifact_prefix={artifacts}/",
           "-print_final_stats=1", "-print_pcs=0", "-reload=0"]
    cmd.append(f"-runs={runs}" if runs is not None else f"-max_total_time={seconds}")
    started = time.monotonic()
    with log.open("w") as out:
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=fuzzer_env(), check=False).returncode
    elapsed = time.monotonic() - started
    execs, cov, ft, n_corpus = parse_fuzzer_log(log.read_text(errors="replace"))
    crashes = tuple(sorted(str(artifacts / p.name) for p in artifacts.iterdir() if p.name not in before))
    return FuzzResult(target=target.name, execs=execs, seconds=round(elapsed, 1), coverage=cov, features=ft,
                      corpus=n_corpus or sum(1 for _ in corpus.iterdir()), crashes=crashes, exit_code=rc,
                      log=str(log))


def regression_inputs(root: Path, target: FuzzTarget) -> list[Path]:
    folder = root / "tests" / "fuzz" / "regressions" / target.name
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")) if folder.is_dir() else []


def prepare_seeds(root: Path, work: Path, targets: Sequence[FuzzTarget], *, node_case_limit: int | None) -> Path:
    """Write every target's seed folder under ``work/seeds`` (regenerated each session).
    ``node_case_limit`` 0 leaves the onnx node cases out (generating them takes ~25 s)."""
    seeds_root = work / "seeds"
    shutil.rmtree(seeds_root, ignore_errors=True)
    node_cases = list(onnx_node_case_seeds(node_case_limit)) if node_case_limit != 0 else []
    seeds = [*node_cases, *wheel_model_seeds(root)]
    for target in targets:
        write_seeds(seeds, target, seeds_root / target.name)
    print(f"fuzz: {len(seeds)} seed models ({len(node_cases)} onnx node cases + tests/wheel/models.py) in "
          f"{seeds_root}", flush=True)
    return seeds_root


def format_table(results: Sequence[FuzzResult]) -> str:
    header = f"{'target':<10} {'execs':>10} {'exec/s':>8} {'cov':>6} {'ft':>7} {'corpus':>7} {'time':>8}  crashes"
    rows = [header, "-" * len(header)]
    for r in results:
        rate = r.execs / r.seconds if r.seconds else 0.0
        crashes = ", ".join(Path(c).name for c in r.crashes) or ("0" if r.ok else f"exit {r.exit_code}")
        rows.append(f"{r.target:<10} {r.execs:>10} {rate:>8.0f} {r.coverage:>6} {r.features:>7} {r.corpus:>7} "
                    f"{r.seconds:>7.1f}s  {crashes}")
    return "\n".join(rows)


def run_fuzz(root: Path, work: Path, *, names: Sequence[str] = (), runs: int | None = None,
             seconds: int | None = None, jobs: int = 2, node_case_limit: int | None = None,
             install: bool = False, report: Path | None = None) -> list[FuzzResult]:
    """Build, replay regressions, fuzz each selected target; write the JSON report; raise on a crash."""
    targets = select_targets(names)
    if runs is None and seconds is None:
        seconds = 60
    build = asan_build(root, work / "build", jobs=jobs, install=install)
    dictionary = work / "onnx_model.dict"
    dictionary.write_text(dictionary_text())
    seeds_root = prepare_seeds(root, work, targets, node_case_limit=node_case_limit)
    results: list[FuzzResult] = []
    for target in targets:
        logs = work / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        regressions = regression_inputs(root, target)
        rc = replay(build, target, regressions, logs / f"{target.name}.regressions.log")
        if rc != 0:
            raise TestFailure(f"fuzz target {target.name}: a regression input crashes again "
                              f"(exit {rc}; log {logs / f'{target.name}.regressions.log'})")
        how = f"{runs} runs" if runs is not None else f"{seconds}s"
        print(f"fuzz: {target.name} ({target.description}): {len(regressions)} regression inputs pass; "
              f"fuzzing for {how} ...", flush=True)
        result = fuzz_target(build, target, corpus=work / "corpus" / target.name, seeds=seeds_root / target.name,
                             dictionary=dictionary, artifacts=work / "crashes" / target.name,
                             log=logs / f"{target.name}.log", runs=runs, seconds=seconds)
        print(f"fuzz: {target.name}: {result.execs} execs, cov {result.coverage}, {result.seconds}s, "
              f"{'ok' if result.ok else 'CRASH ' + ', '.join(result.crashes)}", flush=True)
        results.append(result)
    print(format_table(results))
    report = report or work.parent / "pipeline" / "reports" / "fuzz.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps({"runs": runs, "seconds": seconds, "targets": [r.to_json() for r in results]},
                                 indent=2) + "\n")
    print(f"fuzz report: {report}")
    failed = [r for r in results if not r.ok]
    if failed:
        raise TestFailure("fuzzing found crashes: " + "; ".join(
            f"{r.target}: {', '.join(r.crashes) or f'exit {r.exit_code}'} (log {r.log})" for r in failed)
            + ". Reproduce with the target binary and the crash file; after the fix, copy the file to "
              "tests/fuzz/regressions/<target>/")
    return results
