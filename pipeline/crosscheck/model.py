"""The crosscheck's results: one row per target, one :class:`Check` per column of the table."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Literal

Outcome = Literal["pass", "fail", "not run"]
Stage = Literal["configure", "build", "test"]
STAGES: tuple[Stage, ...] = ("configure", "build", "test")
CHECKS = ("toolchain", "build", "machine type", "arm kernels", "native tests", "wheel suite")

#: Fixed cause names, so a failure says which known regression shape it is.
CAUSES = {
    "host-decision": "the ISA decision followed the build host, not the target (onnxruntime #26175 shape)",
    "flag-leak": "Arm-only compile flags/definitions leak into a non-arm64 target (onnxruntime #26458 shape)",
    "arm-symbol-ref": (
        "generic code references an Arm-only symbol while the Arm backend is off (onnxruntime #26458 link failure)"
    ),
    "arm-missing": "the Arm64 micro-kernels are not compiled into an arm64 build",
}


@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    outcome: Outcome
    detail: str = ""  #: what was seen (pass) or why it failed / was not run
    cause: str | None = None  #: key of CAUSES when a known regression shape was recognised


@dataclass(frozen=True, kw_only=True)
class TargetResult:
    target: str
    checks: tuple[Check, ...]
    build_dir: str | None = None
    log: str | None = None
    kernels_run: tuple[str, ...] = ()
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return all(c.outcome != "fail" for c in self.checks)

    def check(self, name: str) -> Check:
        """The named check; one the row does not hold did not run."""
        return next((c for c in self.checks if c.name == name), Check(name=name, outcome="not run"))


@dataclass(frozen=True, kw_only=True)
class CrosscheckReport:
    host: str | None
    stage: Stage
    duration_s: float
    results: tuple[TargetResult, ...] = field(default_factory=tuple)
    unknown: tuple[str, ...] = ()  #: one line per requested name that is not a crosscheck target

    @property
    def ok(self) -> bool:
        return not self.unknown and all(r.ok for r in self.results)

    def to_json(self) -> str:
        data = {
            "schema": 1,
            "host": self.host,
            "stage": self.stage,
            "duration_s": round(self.duration_s, 3),
            "unknown": list(self.unknown),
            "targets": [asdict(r) for r in self.results],
        }
        return json.dumps(data, indent=2) + "\n"
