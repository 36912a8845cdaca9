"""pipeline.toolchains: which compilers a target uses, whether they are here, and installing them."""

from __future__ import annotations

import dataclasses

import pytest

from pipeline.matrix import load_matrix
from pipeline.toolchains import Installer, cmake_defines, ensure_toolchain, kind_of, max_glibc, zig_wrappers

from .conftest import REPO

MATRIX = load_matrix(REPO)


def missing_compiler(target_name: str) -> object:
    t = MATRIX.target(target_name)
    return dataclasses.replace(t, cxx_compiler="fixture-missing-g++")


def test_missing_toolchain_without_root_prints_the_command() -> None:
    calls: list[list[str]] = []
    installer = Installer(root=False, run=lambda cmd: calls.append(list(cmd)) or 0)
    c = ensure_toolchain(missing_compiler("linux-armv7"), installer, print)  # type: ignore[arg-type]
    assert calls == []
    assert not c.ok
    assert c.detail == (
        "fixture-missing-g++ not on PATH; not root, so nothing was installed: run `sudo apt-get update && "
        "apt-get install -y --no-install-recommends gcc-arm-linux-gnueabihf g++-arm-linux-gnueabihf qemu-user ccache`"
    )


def test_missing_toolchain_as_root_installs_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[list[str]] = []
    installer = Installer(root=True, run=lambda cmd: calls.append(list(cmd)) or 0)
    c = ensure_toolchain(missing_compiler("windows-x86_64"), installer, print)  # type: ignore[arg-type]
    assert calls == [
        ["apt-get", "-o", "DPkg::Lock::Timeout=600", "update"],
        ["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "--no-install-recommends", "mingw-w64", "wine64",
         "wine", "ccache"],
    ]
    assert "installing Debian packages: apt-get update && apt-get install" in capsys.readouterr().out
    # The fake installer installs nothing, so the compiler is still missing: a clear failure.
    assert not c.ok and "still not on PATH after installing mingw-w64 wine64 wine" in c.detail


def test_zig_target_gets_generated_wrappers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    t = dataclasses.replace(MATRIX.target("linux-x86_64"), zig_target="x86_64-linux-gnu.2.28")
    assert kind_of(t) == "zig" and kind_of(t, component_toolchain="system") == "system"
    assert max_glibc(t) == (2, 28)
    defines = dict(cmake_defines(t, tmp_path))
    cc = tmp_path / "build" / "toolchains" / "x86_64-linux-gnu.2.28" / "cc"
    assert defines["CMAKE_C_COMPILER"] == str(cc)
    assert "-target x86_64-linux-gnu.2.28" in cc.read_text() and cc.stat().st_mode & 0o111
    assert cmake_defines(t, tmp_path, component_toolchain="system") == []
    mtime = cc.stat().st_mtime_ns
    again = zig_wrappers("x86_64-linux-gnu.2.28", tmp_path / "build" / "toolchains" / "x86_64-linux-gnu.2.28")
    assert again["cc"] == cc and cc.stat().st_mtime_ns == mtime  # unchanged wrappers are not rewritten (ccache)
    musl = dataclasses.replace(t, zig_target="x86_64-linux-musl", libc="musl")
    assert max_glibc(musl) is None
