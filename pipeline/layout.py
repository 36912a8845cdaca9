"""Where the pipeline keeps its files. Everything generated lives under ``dist/`` and ``build/``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class Layout:
    root: Path  #: repository root
    dist: Path  #: wheels, one folder per target: dist/<target>/
    work: Path  #: persistent build state: cmake build dirs, cache state, logs, reports, records

    @classmethod
    def default(cls, root: Path) -> Layout:
        return cls(root=root, dist=root / "dist", work=root / "build" / "pipeline")

    def dist_for(self, target: str) -> Path:
        return self.dist / target

    def cell_dir(self, slug: str) -> Path:
        return self.work / "cells" / slug

    def state_file(self, slug: str) -> Path:
        return self.work / "state" / f"{slug}.json"

    def log_file(self, slug: str) -> Path:
        return self.work / "logs" / f"{slug}.log"

    @property
    def build_report(self) -> Path:
        return self.work / "reports" / "build-report.json"

    @property
    def test_report(self) -> Path:
        return self.work / "reports" / "test-report.json"

    @property
    def records(self) -> Path:
        return self.work / "records" / "tests"

    @property
    def bench_records(self) -> Path:
        """Benchmark records (``nox -s bench``) by wheel sha256, and the released baselines (pipeline.perf)."""
        return self.work / "records" / "bench"

    @property
    def release_report(self) -> Path:
        return self.work / "reports" / "release-report.json"

    @property
    def index_state(self) -> Path:
        """State folder of the managed local package index (packages, pid, log, credentials)."""
        return self.work / "index"

    @property
    def conan_home(self) -> Path:
        return self.work / "conan-home"

    @property
    def ccache_dir(self) -> Path:
        return self.work / "ccache"

    @property
    def venvs(self) -> Path:
        return self.work / "test-venvs"
