"""CMake plumbing of the crosscheck: environment, configure, streamed builds, and reading the build folder."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from .. import toolchains
from ..binaries import BinaryFormatError, BinaryInfo, read_binary
from ..build import CellFailure, CommandLog, conan_toolchain
from ..layout import Layout
from ..matrix import Cell, Matrix, Target


def environment(target: Target, layout: Layout, jobs: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("_PYTHON_HOST_PLATFORM", "MOSAICRT_LIBRARY")}
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(jobs)
    env = toolchains.environment(target, layout.root, env)
    if shutil.which("ccache"):
        toolchains.ccache_environment(env, root=layout.root, cache_dir=Layout.default(layout.root).ccache_dir)
    if target.os == "windows":
        # wine keeps its Windows installation (~700 MB, created on first use) in the prefix.
        env.setdefault("WINEPREFIX", str(layout.work / "wine-prefix"))
        env.setdefault("WINEDEBUG", "-all")
        env.setdefault("WINEDLLOVERRIDES", "mscoree=;mshtml=")  # no Mono/Gecko install prompts
    return env


def configure(
    matrix: Matrix,
    target: Target,
    layout: Layout,
    *,
    build_dir: Path,
    env: dict[str, str],
    log: Path,
    build_tests: bool,
    cmake_args: Sequence[str],
) -> None:
    """conan host profile → conan_toolchain.cmake → CMake configure of the core (+ native tests)."""
    core = matrix.component("core")
    cell = Cell(component=core, variant=core.variants[0], target=target)
    toolchain = conan_toolchain(cell, layout, env, CommandLog(log), out=layout.work / "conan" / target.name)
    args: list[str] = [
        "-G",
        "Ninja",
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DMOSAICRT_BUILD_TESTS={'ON' if build_tests else 'OFF'}",
        "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
    ]
    if target.emulator:  # else the target's programs run on the build host (e.g. x86-64 musl)
        args.append(f"-DCMAKE_CROSSCOMPILING_EMULATOR={';'.join(target.emulator)}")
    if toolchain is not None:
        args.append(f"--toolchain={toolchain}")
    args += [f"-D{key}={value}" for key, value in toolchains.cmake_defines(target, layout.root)]
    if shutil.which("ccache"):
        args += ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
    args += cmake_args
    # A cache configured with other arguments (an injected regression, another toolchain) is dropped:
    # CMake would otherwise keep stale -D values such as CMAKE_PROJECT_INCLUDE.
    stamp = build_dir / "crosscheck-args.json"
    if stamp.is_file() and stamp.read_text(encoding="utf-8") != json.dumps(args):
        (build_dir / "CMakeCache.txt").unlink(missing_ok=True)
        (build_dir / "mosaicrt_build_manifest.json").unlink(missing_ok=True)
    build_dir.mkdir(parents=True, exist_ok=True)
    (build_dir / "mosaicrt_build_manifest.json").unlink(missing_ok=True)
    stream(
        [tool("cmake"), "-S", layout.root / core.path, "-B", build_dir, *args],
        log=log,
        env=env,
        step="configure",
        say=None,
        prefix=target.name,
    )
    stamp.write_text(json.dumps(args), encoding="utf-8")


def stream(
    cmd: Sequence[str | Path],
    *,
    log: Path,
    env: dict[str, str],
    step: str,
    say: Callable[[str], None] | None,
    prefix: str,
    check: bool = True,
) -> int:
    """Run ``cmd``, appending its output to ``log``; echo Ninja's progress lines through ``say``."""
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"\n$ {' '.join(map(str, cmd))}\n")
        fh.flush()
        try:
            proc = subprocess.Popen(
                list(map(str, cmd)),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                text=True,
                errors="replace",
            )
        except OSError as exc:
            raise CellFailure(step, f"cannot run {cmd[0]}: {exc.strerror}") from None
        with proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                fh.write(line)
                if say is not None and re.match(r"^\[\d+/\d+\] ", line):
                    say(f"  [{prefix}] {line.rstrip()[:150]}")
            rc = proc.wait()
    if check and rc != 0:
        raise CellFailure(step, f"{Path(str(cmd[0])).name} exited with {rc}")
    return rc


def tool(name: str) -> str:
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else (shutil.which(name) or name)


def ctest() -> str:
    cmake = Path(tool("cmake"))
    sibling = cmake.parent / "ctest"
    return str(sibling) if sibling.exists() else tool("ctest")


def read_manifest(build_dir: Path) -> dict[str, object] | None:
    try:
        data = json.loads((build_dir / "mosaicrt_build_manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_compile_commands(build_dir: Path) -> list[dict[str, object]] | None:
    try:
        data = json.loads((build_dir / "compile_commands.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else None


def collect_binaries(build_dir: Path) -> tuple[dict[str, BinaryInfo], list[str]]:
    """Linked outputs (executables, shared libraries, DLLs) outside CMake's own scratch folders."""
    found: dict[str, BinaryInfo] = {}
    unreadable: list[str] = []
    for dirpath, dirnames, filenames in os.walk(build_dir):
        dirnames[:] = [d for d in dirnames if d != "CMakeFiles" and not d.startswith(".")]
        for name in filenames:
            path = Path(dirpath) / name
            if path.suffix in (".o", ".obj", ".a") or path.is_symlink():
                continue
            try:
                info = read_binary(path)
            except (OSError, BinaryFormatError) as exc:
                unreadable.append(f"{path.name}: {exc}")
                continue
            if info is not None and info.kind != "relocatable":
                found[path.relative_to(build_dir).as_posix()] = info
    return found, unreadable


def read_from(log: Path, offset: int) -> str:
    with log.open("rb") as fh:
        fh.seek(offset)
        return fh.read().decode("utf-8", errors="replace")


def first_error(log: Path, offset: int = 0) -> str:
    """The first compiler/linker/CMake error line after ``offset`` (for the one-line reason)."""
    lines = [line for line in read_from(log, offset).splitlines() if not line.startswith("$ ")]
    for pattern in (r"error:|undefined reference|CMake Error|Error:", r"FAILED:"):
        for line in lines:
            if re.search(pattern, line):
                return line.strip()[:200]
    return "see the log"
