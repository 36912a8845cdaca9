"""Sanitizer builds of the core with clang: AddressSanitizer + UndefinedBehaviorSanitizer (the fuzz
targets, the leak check) and ThreadSanitizer (the concurrency checks).

Every object of the core is instrumented (the flags go into ``CMAKE_<LANG>_FLAGS``); the build dirs
are plain CMake + Ninja trees, so a rebuild after a source change is incremental, and ccache (when
installed) serves fresh checkouts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import BuildError, EnvironmentProblem

CLANG_VERSION = "14"
#: What to install when clang or its sanitizer/libFuzzer runtimes are missing (Debian 12).
CLANG_PACKAGES = (f"clang-{CLANG_VERSION}", f"libclang-rt-{CLANG_VERSION}-dev")
INSTALL_COMMAND = "apt-get install -y --no-install-recommends " + " ".join(CLANG_PACKAGES)


@dataclass(frozen=True, kw_only=True)
class Sanitizer:
    name: str
    compile_flags: str
    link_flags: str
    #: extra compile flags for fuzz builds (coverage instrumentation for libFuzzer)
    fuzz_flags: str = ""


ASAN_UBSAN = Sanitizer(
    name="asan+ubsan",
    compile_flags="-O1 -gline-tables-only -fno-omit-frame-pointer -fsanitize=address,undefined "
    "-fno-sanitize-recover=all",
    link_flags="-fsanitize=address,undefined",
    fuzz_flags="-fsanitize=fuzzer-no-link",
)
TSAN = Sanitizer(
    name="tsan",
    compile_flags="-O1 -gline-tables-only -fno-omit-frame-pointer -fsanitize=thread",
    link_flags="-fsanitize=thread",
)


def find_clang() -> tuple[str, str]:
    """clang and clang++ of the supported version, with the sanitizer and libFuzzer runtimes present."""
    cc, cxx = shutil.which(f"clang-{CLANG_VERSION}"), shutil.which(f"clang++-{CLANG_VERSION}")
    if not cc or not cxx:
        raise EnvironmentProblem(f"clang-{CLANG_VERSION} is not installed; run: {INSTALL_COMMAND}")
    probe = subprocess.run([cc, "-print-file-name=libclang_rt.fuzzer-x86_64.a"], capture_output=True, text=True,
                           check=False)
    runtime = Path(probe.stdout.strip())
    if not runtime.is_absolute() or not runtime.is_file():
        raise EnvironmentProblem(f"clang-{CLANG_VERSION} has no libFuzzer/sanitizer runtimes; run: {INSTALL_COMMAND}")
    return cc, cxx


def ensure_clang(*, install: bool) -> tuple[str, str]:
    """Find clang; with ``install`` (root, apt-get present) install it when missing, saying so."""
    try:
        return find_clang()
    except EnvironmentProblem:
        if not install or os.geteuid() != 0 or not shutil.which("apt-get"):
            raise
    print(f"sanitizers: installing {' '.join(CLANG_PACKAGES)} ({INSTALL_COMMAND})", flush=True)
    cmd = ["apt-get", "install", "-y", "--no-install-recommends", *CLANG_PACKAGES]
    rc = subprocess.run(cmd, check=False).returncode
    if rc != 0:
        raise EnvironmentProblem(f"`{INSTALL_COMMAND}` failed (exit {rc})")
    return find_clang()


def sanitizer_cmake_args(cc: str, cxx: str, sanitizer: Sanitizer, *, fuzzing: bool = False) -> list[str]:
    """CMake arguments for a clang build of the core with every object instrumented."""
    flags = f"{sanitizer.compile_flags} {sanitizer.fuzz_flags}".strip() if fuzzing else sanitizer.compile_flags
    link = sanitizer.link_flags
    args = [
        "-G", "Ninja", "-DCMAKE_BUILD_TYPE=None", f"-DCMAKE_C_COMPILER={cc}", f"-DCMAKE_CXX_COMPILER={cxx}",
        f"-DCMAKE_C_FLAGS={flags}", f"-DCMAKE_CXX_FLAGS={flags}", "-DMOSAICRT_OPTIMIZE_FLAGS=-O1",
        f"-DCMAKE_EXE_LINKER_FLAGS={link}", f"-DCMAKE_MODULE_LINKER_FLAGS={link}",
        f"-DCMAKE_SHARED_LINKER_FLAGS={link}",
    ]
    if shutil.which("ccache"):
        args += ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
    return args


def cmake_build(root: Path, build_dir: Path, cmake_args: Sequence[str], targets: Sequence[str], *,
                jobs: int, what: str) -> None:
    """Configure and build ``targets`` of ``core/``; the log goes to ``<build_dir>.log``."""
    log = build_dir.with_suffix(".log")
    build_dir.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        steps = [["cmake", "-S", str(root / "core"), "-B", str(build_dir), *cmake_args],
                 ["cmake", "--build", str(build_dir), "-j", str(jobs), "--target", *targets]]
        for cmd in steps:
            out.write("$ " + " ".join(cmd) + "\n")
            out.flush()
            rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
            if rc != 0:
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
                raise BuildError(f"{what} build failed (exit {rc}); log {log}:\n{tail}")


def build_sanitized(root: Path, build_dir: Path, sanitizer: Sanitizer, targets: Sequence[str], *, jobs: int = 2,
                    install: bool = False, extra_args: Sequence[str] = ()) -> Path:
    """Build ``targets`` (native test programs) of the core under ``sanitizer``; returns the build dir."""
    cc, cxx = ensure_clang(install=install)
    args = [*sanitizer_cmake_args(cc, cxx, sanitizer), "-DMOSAICRT_BUILD_TESTS=ON", *extra_args]
    cmake_build(root, build_dir, args, targets, jobs=jobs, what=sanitizer.name)
    return build_dir
