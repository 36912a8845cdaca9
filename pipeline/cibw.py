"""cibuildwheel per matrix cell: the command, its environment, and the agreement of each component's
``[tool.cibuildwheel]`` configuration with ``matrix/``.

The generated workflow's build jobs run ``nox -s wheels -- --component C --variant V --target T``,
which runs :func:`command` — the same invocation a person can run locally (with a container engine
for Linux). The wheels are ``py3-none-<platform>``: cibuildwheel builds the first identifier and, for
the later CPythons, reuses that wheel and only runs the test command, so each platform is built once
and tested on every CPython of ``matrix/python.toml``.

What the matrix decides is checked, not trusted: :func:`check_config` refuses a configuration whose
Python range, archs, macOS floor, repair excludes or images contradict the matrix, naming the cell
and the fix; ``tests/pipeline/test_cibw_identifiers.py`` runs ``cibuildwheel
--print-build-identifiers`` per component and platform and compares with :func:`expected_identifiers`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import platforms
from .errors import EnvironmentProblem, MatrixError
from .matrix import Cell, Matrix, Target
from .wheelcheck import normalize

#: where a build job puts the wheels of the components a cell is tested with (``test_with``)
COMPANIONS_DIR = "build/ci/companions"


@dataclass(frozen=True, kw_only=True)
class CibwConfig:
    """The parts of a component's ``[tool.cibuildwheel]`` the matrix constrains."""

    file: str  #: repo-relative pyproject.toml
    build: tuple[str, ...]
    archs: Mapping[str, tuple[str, ...]]  #: per cibuildwheel platform (linux, windows, macos)
    images: Mapping[str, str]  #: e.g. manylinux-x86_64-image → manylinux_2_28
    test_command: str
    before_test: str
    repair_command: Mapping[str, str]  #: per platform
    environment: Mapping[str, Mapping[str, str]]  #: per platform


def cibw_platform(target: Target) -> str:
    return target.os  # the registry's os names are cibuildwheel's platform names


def cibw_arch(target: Target) -> str:
    return platforms.cibuildwheel_arch(target.os, target.arch)


def identifier_platform(target: Target) -> str:
    return platforms.cibuildwheel_platform(target.os, target.arch, target.libc)


def expected_identifiers(matrix: Matrix, target: Target) -> list[str]:
    """``cp311-manylinux_x86_64`` … : one identifier per tested CPython for the target."""
    plat = identifier_platform(target)
    return [f"cp{v.replace('.', '')}-{plat}" for v in matrix.pythons]


def build_selectors(matrix: Matrix) -> list[str]:
    return [f"cp{v.replace('.', '')}-*" for v in matrix.pythons]


def environment(target: Target) -> dict[str, str]:
    """The CIBW_* variables that select the cell's target (the component's file holds everything else)."""
    env = {"CIBW_PLATFORM": cibw_platform(target), "CIBW_ARCHS": cibw_arch(target)}
    if target.os == "linux":
        other = "musllinux" if target.libc == "glibc" else "manylinux"
        env["CIBW_SKIP"] = f"*-{other}_*"
    return env


def command(cell: Cell, output_dir: Path | str, *, print_identifiers: bool = False) -> list[str]:
    cmd = [sys.executable, "-m", "cibuildwheel", cell.component.path, "--output-dir", str(output_dir)]
    return [*cmd, "--print-build-identifiers"] if print_identifiers else cmd


def read_config(root: Path, path: str) -> CibwConfig:
    file = f"{path}/pyproject.toml"
    with (root / file).open("rb") as fh:
        data = tomllib.load(fh)
    tool = data.get("tool", {}).get("cibuildwheel")
    if not isinstance(tool, dict):
        raise MatrixError(file, "tool.cibuildwheel", "missing: every component is built by cibuildwheel in CI")

    def strings(value: Any) -> tuple[str, ...]:
        return tuple(value.split()) if isinstance(value, str) else tuple(str(v) for v in value or ())

    archs, repair, env = {}, {}, {}
    for plat in platforms.os_names():
        section = tool.get(plat, {})
        archs[plat] = strings(section.get("archs", tool.get("archs", ())))
        repair[plat] = str(section.get("repair-wheel-command", ""))
        env[plat] = {**tool.get("environment", {}), **section.get("environment", {})}
    images = {
        k: str(v)
        for k, v in (*tool.items(), *tool.get("linux", {}).items())
        if k.endswith("-image") and isinstance(v, str)
    }
    return CibwConfig(
        file=file,
        build=strings(tool.get("build", ())),
        archs=archs,
        images=images,
        test_command=str(tool.get("test-command", "")),
        before_test=str(tool.get("before-test", "")),
        repair_command=repair,
        environment=env,
    )


def check_config(matrix: Matrix, cell: Cell, config: CibwConfig | None = None) -> CibwConfig:
    """The component's cibuildwheel configuration agrees with the matrix for this cell, or a
    :class:`MatrixError` that names the cell, the key and the fix."""
    comp, target = cell.component, cell.target
    cfg = config or read_config(matrix.root, comp.path)
    key = "tool.cibuildwheel"

    def fail(k: str, problem: str) -> MatrixError:
        return MatrixError(cfg.file, k, f"cell {cell.id}: {problem}")

    want = build_selectors(matrix)
    if sorted(cfg.build) != sorted(want):
        raise fail(
            f"{key}.build",
            f"builds {' '.join(cfg.build) or 'every CPython'} but matrix/python.toml tests {', '.join(matrix.pythons)};"
            f" set build = {want!r}",
        )
    plat, arch = cibw_platform(target), cibw_arch(target)
    if arch not in cfg.archs[plat]:
        raise fail(
            f"{key}.{plat}.archs",
            f"does not build {arch} (has: {', '.join(cfg.archs[plat]) or 'auto'});"
            f" add '{arch}' for target {target.name}",
        )
    if not cfg.test_command:
        raise fail(f"{key}.test-command", f"no test command: run the wheel suite ({comp.tests})")
    if comp.tests not in cfg.test_command:
        raise fail(f"{key}.test-command", f"does not run the component's suite {comp.tests} (matrix tests =)")
    for other in comp.test_with:
        glob = f"{COMPANIONS_DIR}/{normalize(matrix.component(other).variants[0].dist)}-*.whl"
        if glob not in cfg.before_test:
            raise fail(
                f"{key}.before-test", f"must install the {other} wheel it is tested with: add {{project}}/{glob}"
            )
    if target.os == "linux":
        family = platforms.LINUX_TAG_FAMILY[target.libc]
        image_key = f"{family}-{arch}-image"
        image = cfg.images.get(image_key)
        if image is None or not image.startswith(family):
            raise fail(f"{key}.linux.{image_key}", f"set the {family} image for {target.name} (e.g. {family}_…)")
        for lib in comp.repair_exclude:
            if f"--exclude {lib}" not in cfg.repair_command["linux"]:
                raise fail(
                    f"{key}.linux.repair-wheel-command",
                    f"must keep {lib} out of the wheel like the matrix says (repair_exclude): add --exclude {lib}",
                )
    if target.os == "macos":
        got = cfg.environment["macos"].get("MACOSX_DEPLOYMENT_TARGET")
        if got != target.macos_deployment_target:
            raise fail(
                f"{key}.macos.environment.MACOSX_DEPLOYMENT_TARGET",
                f"is {got!r}, the matrix target {target.name} says {target.macos_deployment_target!r}",
            )
    return cfg


def print_identifiers(matrix: Matrix, cell: Cell, *, cache_dir: Path | None = None) -> list[str]:
    """What ``cibuildwheel --print-build-identifiers`` says for the cell (no container engine needed)."""
    env = {**os.environ, **environment(cell.target)}
    if cache_dir is not None:
        env["CIBW_CACHE_PATH"] = str(cache_dir)
    env.pop("CIBW_BUILD", None)
    out = subprocess.run(
        command(cell, matrix.root / "build" / "ci" / "wheelhouse", print_identifiers=True),
        cwd=matrix.root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise EnvironmentProblem(f"cibuildwheel --print-build-identifiers failed for {cell.id}: {out.stderr.strip()}")
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def run_wheels(matrix: Matrix, cells: Sequence[Cell], output_root: Path) -> int:
    """Build and test each cell with cibuildwheel into ``<output_root>/<target>/`` (``nox -s wheels``)."""
    for cell in cells:
        check_config(matrix, cell)
        out = output_root / cell.target.name
        env = {**os.environ, **environment(cell.target)}
        print(f"cibuildwheel {cell.id} → {out} ({' '.join(f'{k}={v}' for k, v in environment(cell.target).items())})")
        proc = subprocess.run(command(cell, out), cwd=matrix.root, env=env, check=False)
        if proc.returncode != 0:
            return proc.returncode
    return 0
