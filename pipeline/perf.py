"""Benchmark records and the release gate's performance check.

``nox -s bench`` times the installed core wheel against onnxruntime (``bench/run_bench.py``) and writes a
:class:`BenchRecord` bound to the wheel's sha256 and to the machine it ran on (a :class:`Machine`
fingerprint: CPU model, the ISA extensions the kernels dispatch on, logical CPUs, architecture):
``build/pipeline/records/bench/<sha256>/<fingerprint>.json``. Figures are medians of alternating runs per
model and thread count, plus the peak RSS of a process that only creates the session and runs it.

When a release publishes a wheel, its records become **baselines**
(``build/pipeline/records/bench/released/<dist>/<version>/<fingerprint>.json``). The gate compares the wheel
being released with the last released version's baseline *from the same machine fingerprint* (figures from
another machine say nothing about this one) and refuses a median slower, or a peak RSS larger, than the
thresholds of ``matrix/policy.toml`` ``[performance]``, naming model, thread count, both figures and the
threshold. Without a baseline for this machine there is nothing to compare and the gate says so; with one, a
wheel that was not benchmarked here is refused (run ``nox -s bench``). ``--allow-perf-regression`` releases
anyway, and the provenance records that it was used and what it overrode.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from .versions import version_tuple

SCHEMA = 1

#: the CPU features the kernels dispatch on (x86-64 and Arm); other flags do not change the figures
_ISA_FLAGS = frozenset(
    {
        "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512dq", "avx512vl",
        "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16",
        "asimd", "asimddp", "i8mm", "bf16", "sve", "sve2", "sme", "fphp", "asimdhp",
    }
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Machine:
    cpu: str  #: the CPU model name
    arch: str  #: platform.machine()
    isa: tuple[str, ...]  #: the dispatch-relevant ISA extensions present, sorted
    logical_cpus: int

    @property
    def fingerprint(self) -> str:
        doc = json.dumps(asdict(self), sort_keys=True).encode("utf-8")
        return hashlib.sha256(doc).hexdigest()[:16]

    def describe(self) -> str:
        return f"{self.cpu} ({self.arch}, {self.logical_cpus} CPUs; {' '.join(self.isa) or 'no SIMD extensions'})"


def this_machine(cpuinfo: str | None = None) -> Machine:
    """The machine this process runs on (``cpuinfo``: the text of /proc/cpuinfo, read when not given)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo = ""
    cpu = ""
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "cpu model", "hardware") and not cpu:
            cpu = " ".join(value.split())
        elif key in ("flags", "features"):
            flags.update(value.split())
    if not cpu:
        cpu = platform.processor() or "unknown CPU"
    return Machine(
        cpu=cpu, arch=platform.machine(), isa=tuple(sorted(flags & _ISA_FLAGS)), logical_cpus=os.cpu_count() or 1
    )


@dataclass(frozen=True, kw_only=True)
class Figure:
    model: str
    threads: int
    median_ms: float
    min_ms: float
    peer_ms: float | None = None  #: onnxruntime's median in the same alternating runs
    peak_rss_mb: float | None = None


@dataclass(frozen=True, kw_only=True)
class BenchRecord:
    wheel: str  #: file name when benchmarked (informational; the binding is sha256)
    sha256: str
    dist: str  #: distribution name, normalized (mosaicrt, mosaicrt-winml, ...)
    version: str
    machine: Machine
    figures: tuple[Figure, ...]
    created: str  #: ISO 8601 UTC
    repeat: int = 0
    clock: str = "wall"
    peer: str = ""  #: e.g. "onnxruntime 1.32.0"

    def figure(self, model: str, threads: int) -> Figure | None:
        return next((f for f in self.figures if (f.model, f.threads) == (model, threads)), None)

    def to_json(self) -> str:
        return json.dumps({"schema": SCHEMA, **asdict(self)}, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> BenchRecord:
        data = json.loads(text)
        if not isinstance(data, dict) or data.pop("schema", None) != SCHEMA:
            raise ValueError("not a benchmark record of this schema")
        data["machine"] = Machine(**{**data["machine"], "isa": tuple(data["machine"]["isa"])})
        data["figures"] = tuple(Figure(**f) for f in data["figures"])
        return cls(**data)


def now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def wheel_identity(filename: str) -> tuple[str, str]:
    """(normalized distribution, version) from a wheel file name."""
    parts = filename.split("-")
    if len(parts) < 5 or not filename.endswith(".whl"):
        raise ValueError(f"{filename} is not a wheel file name")
    return re.sub(r"[-_.]+", "-", parts[0]).lower(), parts[1]


# --------------------------------------------------------------------------------------
# storage


def record_path(records_dir: Path, sha256: str, fingerprint: str) -> Path:
    return records_dir / sha256 / f"{fingerprint}.json"


def baseline_path(records_dir: Path, dist: str, version: str, fingerprint: str) -> Path:
    return records_dir / "released" / dist / version / f"{fingerprint}.json"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


def write_record(records_dir: Path, record: BenchRecord) -> Path:
    return _write(record_path(records_dir, record.sha256, record.machine.fingerprint), record.to_json())


def _read(path: Path) -> BenchRecord | None:
    try:
        return BenchRecord.from_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        problem = f"{path} is not a readable benchmark record ({exc}): delete it and re-run `nox -s bench`"
        raise ValueError(problem) from None


def read_record(records_dir: Path, sha256: str, fingerprint: str) -> BenchRecord | None:
    return _read(record_path(records_dir, sha256, fingerprint))


def remember_release(records_dir: Path, sha256: str) -> list[Path]:
    """After a wheel is published: its records (from every machine that benchmarked these bytes) become the
    baselines the next release of its distribution is compared with."""
    out = []
    folder = records_dir / sha256
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        rec = _read(path)
        if rec is not None and rec.sha256 == sha256:
            target = baseline_path(records_dir, rec.dist, rec.version, rec.machine.fingerprint)
            out.append(_write(target, path.read_text(encoding="utf-8")))
    return out


def last_released(records_dir: Path, dist: str, version: str, fingerprint: str) -> BenchRecord | None:
    """The baseline of the highest released version below ``version`` that was benchmarked on this machine."""
    folder = records_dir / "released" / dist
    if not folder.is_dir():
        return None
    older = [d.name for d in folder.iterdir() if d.is_dir() and version_tuple(d.name) < version_tuple(version)]
    for v in sorted(older, key=version_tuple, reverse=True):
        rec = _read(baseline_path(records_dir, dist, v, fingerprint))
        if rec is not None:
            return rec
    return None


# --------------------------------------------------------------------------------------
# comparison


@dataclass(frozen=True, kw_only=True)
class Thresholds:
    latency: float = 0.10  #: a median this much slower (relative) than the baseline is a regression
    rss: float = 0.25  #: a peak RSS this much larger is a regression


@dataclass(frozen=True, kw_only=True)
class Regression:
    model: str
    threads: int
    metric: Literal["median latency", "peak RSS", "not benchmarked"]
    current: float | None
    baseline: float
    baseline_version: str
    threshold: float

    def describe(self) -> str:
        where = f"{self.model} at {self.threads} thread{'s' if self.threads != 1 else ''}"
        if self.metric == "not benchmarked" or self.current is None:
            return f"{where} was benchmarked for {self.baseline_version} on this machine but not for this wheel"
        unit = "ms" if self.metric == "median latency" else "MB"
        change = (self.current / self.baseline - 1.0) * 100.0
        return (
            f"{where}: {self.metric} {self.current:.3f} {unit} vs {self.baseline:.3f} {unit} in"
            f" {self.baseline_version} (+{change:.1f} %, threshold {self.threshold * 100:.0f} %)"
        )


def compare(current: BenchRecord, baseline: BenchRecord, thresholds: Thresholds) -> list[Regression]:
    """Every (model, threads) of the baseline that is slower, larger or missing in ``current``."""
    out: list[Regression] = []

    def regression(base: Figure, metric: Any, current: float | None, baseline_value: float, limit: float) -> None:
        out.append(
            Regression(
                model=base.model, threads=base.threads, metric=metric, current=current, baseline=baseline_value,
                baseline_version=baseline.version, threshold=limit,
            )
        )  # fmt: skip

    for base in baseline.figures:
        cur = current.figure(base.model, base.threads)
        if cur is None:
            regression(base, "not benchmarked", None, base.median_ms, thresholds.latency)
            continue
        if cur.median_ms > base.median_ms * (1.0 + thresholds.latency):
            regression(base, "median latency", cur.median_ms, base.median_ms, thresholds.latency)
        if (
            cur.peak_rss_mb is not None
            and base.peak_rss_mb is not None
            and cur.peak_rss_mb > base.peak_rss_mb * (1.0 + thresholds.rss)
        ):
            regression(base, "peak RSS", cur.peak_rss_mb, base.peak_rss_mb, thresholds.rss)
    return out


@dataclass(frozen=True, kw_only=True)
class PerfVerdict:
    status: Literal["passed", "regressed", "not benchmarked", "no baseline", "overridden"]
    detail: str
    machine: str  #: fingerprint
    baseline_version: str | None = None
    regressions: tuple[Regression, ...] = field(default_factory=tuple)

    @property
    def problems(self) -> list[str]:
        """What refuses the release (nothing when passed, without a baseline, or overridden)."""
        if self.status == "regressed":
            return [f"performance regression on this machine ({self.machine}): " + "; ".join(
                r.describe() for r in self.regressions
            ) + " (`--allow-perf-regression` releases anyway and records it in the provenance)"]  # fmt: skip
        if self.status == "not benchmarked":
            return [self.detail]
        return []

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "detail": self.detail,
            "machine": self.machine,
            "baseline_version": self.baseline_version,
            "regressions": [r.describe() for r in self.regressions],
        }


def check(
    records_dir: Path,
    *,
    dist: str,
    version: str,
    sha256: str,
    machine: Machine,
    thresholds: Thresholds,
    override: bool = False,
) -> PerfVerdict:
    """The gate's verdict on one wheel, on this machine."""
    fp = machine.fingerprint
    baseline = last_released(records_dir, dist, version, fp)
    if baseline is None:
        return PerfVerdict(status="no baseline", machine=fp,
                           detail=f"no released {dist} below {version} was benchmarked on this machine")  # fmt: skip
    current = read_record(records_dir, sha256, fp)
    if current is None:
        detail = (
            f"{dist} {baseline.version} was benchmarked on this machine ({fp}) but this wheel (sha256"
            f" {sha256[:16]}…) was not: run `nox -s bench` before releasing"
        )
        if override:
            return PerfVerdict(status="overridden", machine=fp, baseline_version=baseline.version, detail=detail)
        return PerfVerdict(status="not benchmarked", machine=fp, baseline_version=baseline.version, detail=detail)
    regressions = tuple(compare(current, baseline, thresholds))
    if not regressions:
        return PerfVerdict(
            status="passed", machine=fp, baseline_version=baseline.version,
            detail=f"{len(baseline.figures)} figures within the thresholds of {baseline.version}'s",
        )  # fmt: skip
    return PerfVerdict(
        status="overridden" if override else "regressed",
        machine=fp,
        baseline_version=baseline.version,
        regressions=regressions,
        detail=f"{len(regressions)} regression(s) against {baseline.version}",
    )


def make_record(
    *,
    wheel: Path,
    sha256: str,
    figures: Sequence[Mapping[str, Any]],
    repeat: int,
    clock: str,
    peer: str,
    machine: Machine | None = None,
) -> BenchRecord:
    """The record of a benchmark run on ``wheel`` (figures as dicts with Figure's fields)."""
    dist, version = wheel_identity(wheel.name)
    return BenchRecord(
        wheel=wheel.name,
        sha256=sha256,
        dist=dist,
        version=version,
        machine=machine or this_machine(),
        figures=tuple(Figure(**dict(f)) for f in figures),
        created=now(),
        repeat=repeat,
        clock=clock,
        peer=peer,
    )
