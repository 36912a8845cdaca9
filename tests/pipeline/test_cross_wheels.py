"""Cross-built core wheels from this linux-x86_64 host: tag and binary architecture per target.

Slow (each compiles the core for a cross target; ccache shares objects with `nox -s crosscheck`,
whose build folders sit at the same depth). Missing compilers are installed as root (as the crosscheck
does); elsewhere the test is skipped with the command to run.
"""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

import pytest

from pipeline.binaries import parse
from pipeline.cli import main
from pipeline.matrix import load_matrix
from pipeline.toolchains import ensure_toolchain, system_installer, toolchain_problem

from .conftest import REPO

pytestmark = pytest.mark.slow

for _module in ("build", "scikit_build_core", "auditwheel", "conans"):
    pytest.importorskip(_module, reason="build tools are installed by `nox -s ci`")

MATRIX = load_matrix(REPO)
VERSION = (REPO / "core" / "VERSION").read_text().strip()

# target → (wheel file name pattern, native library inside, ELF/PE, arch, bits)
CASES = {
    "linux-aarch64": (r"py3-none-manylinux_\d+_\d+_aarch64", "mosaicrt/libmosaicrt.so", "ELF", "aarch64", 64),
    "linux-armv7": (r"py3-none-manylinux_\d+_\d+_armv7l", "mosaicrt/libmosaicrt.so", "ELF", "armv7", 32),
    "linux-riscv64": (r"py3-none-manylinux_\d+_\d+_riscv64", "mosaicrt/libmosaicrt.so", "ELF", "riscv64", 64),
    "linux-x86_64-musl": (r"py3-none-musllinux_1_2_x86_64", "mosaicrt/libmosaicrt.so", "ELF", "x86_64", 64),
    "windows-x86_64": (r"py3-none-win_amd64", "mosaicrt/libmosaicrt.dll", "PE", "x86_64", 64),
}


@pytest.mark.parametrize("target", list(CASES))
def test_cross_wheel_tag_and_machine(
    target: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    t = MATRIX.target(target)
    if toolchain_problem(t) is not None:
        # as root (CI, a fresh machine) install the target's Debian packages the way the crosscheck does
        check = ensure_toolchain(t, system_installer(), print)
        if not check.ok:
            pytest.skip(f"the {t.name} toolchain is not installed and not installable here: {check.detail}")
    # Cell folders at build/<x>/cells/<slug>/cmake: the depth `nox -s build` and the crosscheck use.
    # The wheels stay in build/xwheel-test/dist: test_emulated runs the aarch64 and armv7 wheels' suites on
    # these very files (its build of the same cell is a no-op).
    work = REPO / "build" / "xwheel-test"
    monkeypatch.setenv("CCACHE_DIR", str(REPO / "build" / "pipeline" / "ccache"))
    # the winml cell signs its EP catalog root with development keys: kept in this folder, not the user's config
    monkeypatch.setenv("MOSAICRT_CONFIG_DIR", str(work / "config"))
    for name in [k for k in os.environ if k.startswith("MOSAICRT_CATALOG_")]:
        monkeypatch.delenv(name)
    dist = work / "dist"
    rc = main(["build", "--target", target, "--component", "core", "--dist-dir", str(dist), "--work-dir", str(work)])
    out = capsys.readouterr().out
    assert rc == 0, out
    # one wheel per variant of the core declared for the target (windows-x86_64 also builds mosaicrt-winml)
    dists = sorted(c.variant.dist.replace("-", "_") for c in MATRIX.cells()
                   if c.component.name == "core" and c.target.name == target)  # fmt: skip
    wheels = sorted((dist / target).glob("*.whl"))
    assert [w.name.split("-")[0] for w in wheels] == dists, out
    for wheel in wheels:
        _check_wheel(wheel, target)


def _check_wheel(wheel: Path, target: str) -> None:
    tag, lib, fmt, arch, bits = CASES[target]
    name = wheel.name.split("-")[0]
    assert re.fullmatch(rf"{name}-{re.escape(VERSION)}-{tag}\.whl", wheel.name), wheel.name
    with zipfile.ZipFile(wheel) as zf:
        natives = [n for n in zf.namelist() if n.endswith((".so", ".dll")) or ".so." in n]
        assert lib in natives, (wheel.name, natives)
        for native in natives:
            info = parse(zf.read(native), symbols=False)
            assert info is not None, native
            assert (info.format, info.arch, info.bits) == (fmt, arch, bits), f"{native}: {info.describe()}"
            if arch == "armv7":
                assert (info.arm_eabi, info.arm_float_abi) == (5, "hard"), info.describe()
        assert not [n for n in zf.namelist() if n.endswith((".a", ".lib"))], "import libraries are not shipped"
