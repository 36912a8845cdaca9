"""Concurrency and leak checks of the core under sanitizers (``core/tests/native/stress_check.cc``).

* ThreadSanitizer build: one session run from many threads with every result checked; sessions
  created and destroyed on many threads at once; EP library registration and unregistration
  racing session creation. Any TSan report fails the check.
* AddressSanitizer + LeakSanitizer build (the fuzz build, :func:`pipeline.fuzz.asan_build`):
  create/run/destroy cycles with the CPU EP and, when its SDK is installed, the oneDNN EP built with
  the same sanitizers. A leak report, or RSS growth after warm-up beyond the allowance, fails.

Each run of the stress program prints one JSON line; :func:`run_stress` returns it as a
:class:`StressResult` together with any sanitizer report found in its output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import BuildError
from .sanitizers import ASAN_UBSAN, TSAN, build_sanitized, ensure_clang, sanitizer_cmake_args

STRESS = "mrt_stress_check"
FAKE_EP = "mrt_fake_ep"

#: Lines that start a sanitizer report in a program's output.
REPORT_MARKERS = ("WARNING: ThreadSanitizer", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                  "runtime error:", "ERROR: ThreadSanitizer")


@dataclass(frozen=True, kw_only=True)
class StressResult:
    args: tuple[str, ...]
    returncode: int
    numbers: Mapping[str, object] = field(default_factory=dict)  #: the program's JSON line
    sanitizer_report: str = ""  #: the first report's first 40 lines, "" when clean
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.sanitizer_report


def sanitizer_report(output: str) -> str:
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if any(marker in line for marker in REPORT_MARKERS):
            return "\n".join(lines[max(0, i - 2):i + 40])
    return ""


def run_stress(binary: Path, args: Sequence[str], *, env: Mapping[str, str] | None = None,
               timeout: float = 600) -> StressResult:
    import time

    started = time.monotonic()
    proc = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, check=False)
    numbers: dict[str, object] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            numbers = json.loads(line)
    return StressResult(args=tuple(args), returncode=proc.returncode, numbers=numbers,
                        sanitizer_report=sanitizer_report(proc.stdout + "\n" + proc.stderr),
                        seconds=round(time.monotonic() - started, 2))


def tsan_build(root: Path, build_dir: Path, *, jobs: int = 2) -> Path:
    """The stress program and the fake EP built with ThreadSanitizer."""
    return build_sanitized(root, build_dir, TSAN, [STRESS, FAKE_EP], jobs=jobs)


TSAN_ENV = {"TSAN_OPTIONS": "halt_on_error=0:second_deadlock_stack=1"}
LSAN_ENV = {
    # quarantine off: freed memory is reused at once, so RSS follows what is live
    "ASAN_OPTIONS": "detect_leaks=1:quarantine_size_mb=0:allocator_may_return_null=1",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
}


def dnnl_ep_build(root: Path, build_dir: Path, *, jobs: int = 2, python: str = sys.executable) -> Path | None:
    """The oneDNN EP library built with ASan + UBSan; None when oneDNN's SDK wheel is not installed
    in ``python`` (``pip install onednn-devel-cpu-gomp``)."""
    probe = subprocess.run([python, str(root / "eps" / "dnnl" / "cmake" / "find_onednn_prefix.py"),
                            "onednn-devel-cpu-gomp"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return None
    cc, cxx = ensure_clang(install=False)
    args = [*sanitizer_cmake_args(cc, cxx, ASAN_UBSAN), f"-DPython_EXECUTABLE={python}"]
    log = build_dir.with_suffix(".log")
    build_dir.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        for cmd in (["cmake", "-S", str(root / "eps" / "dnnl"), "-B", str(build_dir), *args],
                    ["cmake", "--build", str(build_dir), "-j", str(jobs)]):
            if subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False).returncode != 0:
                raise BuildError(f"oneDNN EP sanitizer build failed; log {log}")
    libs = sorted(build_dir.glob("libmosaicrt_ep_dnnl*.so"))
    if not libs:
        raise BuildError(f"oneDNN EP sanitizer build made no library in {build_dir}; log {log}")
    return libs[0]
