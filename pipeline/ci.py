"""``matrix/ci.toml``: the GitHub Actions runners and what runs on them, loaded once and frozen.

The matrix itself says which runner builds each target (``ci_runner`` in ``targets.toml``); this file
declares what each runner label *is* (os, arch, GPU, GitHub-hosted or not), so a label the
workflow generator does not know is an error naming the cell and the fix, never a silent job that
waits forever for a machine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from . import platforms
from .errors import MatrixError, choices_hint
from .matrix import _REQUIRED, Matrix, _read_toml, _Table

CI_FILE = "ci.toml"


@dataclass(frozen=True, kw_only=True)
class Runner:
    label: str  #: the ``runs-on`` label
    os: str  #: registry OS name
    arch: str  #: registry arch name
    gpu: bool = False  #: has an NVIDIA GPU and driver
    hosted: bool = True  #: a GitHub-hosted standard runner (else larger/self-hosted: declared to actionlint)


@dataclass(frozen=True, kw_only=True)
class GpuTests:
    component: str  #: the component whose wheel suite needs a GPU
    target: str  #: the target whose wheel is tested there
    runner: str  #: a runner label with ``gpu = true``


@dataclass(frozen=True, kw_only=True)
class CiConfig:
    python: str  #: the CPython that runs nox in every job
    nox: str  #: the requirement each job installs (``nox==…``)
    runners: tuple[Runner, ...]
    gpu_tests: tuple[GpuTests, ...] = ()

    def runner(self, label: str) -> Runner | None:
        return next((r for r in self.runners if r.label == label), None)

    def labels(self) -> tuple[str, ...]:
        return tuple(r.label for r in self.runners)


_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def load_ci(matrix: Matrix, matrix_dir: Path | None = None) -> CiConfig:
    """Read and check ``matrix/ci.toml`` against an already loaded matrix."""
    mdir = matrix_dir or matrix.root / "matrix"
    path = mdir / CI_FILE
    try:
        display = str(path.relative_to(matrix.root))
    except ValueError:
        display = str(path)
    doc = _Table(display, "", _read_toml(path, display), ("ci", "runner", "gpu_tests"))
    ci = doc.table("ci", ("python", "nox"), required=True)
    python = ci.string("python", _REQUIRED)
    if python not in matrix.pythons:
        raise ci.error(
            "python", f"'{python}' is not a tested CPython (matrix/python.toml: {', '.join(matrix.pythons)})"
        )
    nox_req = ci.string("nox", _REQUIRED)
    if not re.fullmatch(r"nox==[0-9][0-9.]*", nox_req):
        raise ci.error("nox", f"'{nox_req}' must pin one release, e.g. nox==2026.10.20 (CI installs exactly it)")
    runners = []
    for label, body in doc.tables("runner").items():
        t = _Table(display, f'runner."{label}"', body, ("os", "arch", "gpu", "hosted"))
        if not _LABEL.fullmatch(label):
            raise t.error("os", f"'{label}' is not a runner label GitHub accepts")
        runners.append(
            Runner(
                label=label,
                os=t.choice("os", platforms.os_names(), _REQUIRED),
                arch=t.choice("arch", platforms.arch_names(), _REQUIRED),
                gpu=t.boolean("gpu"),
                hosted=t.boolean("hosted", True),
            )
        )
    if not runners:
        raise doc.error("runner", 'declare at least one [runner."<label>"]')
    labels = [r.label for r in runners]
    gpu_tests = []
    for comp, body in doc.tables("gpu_tests").items():
        t = _Table(display, f"gpu_tests.{comp}", body, ("runner", "target"))
        component = next((c for c in matrix.components if c.name == comp), None)
        if component is None:
            raise t.error(
                "runner", f"unknown component '{comp}'{choices_hint(comp, [c.name for c in matrix.components])}"
            )
        target = t.string("target", _REQUIRED)
        if target not in component.targets:
            raise t.error("target", f"'{target}' is not a target of {comp}{choices_hint(target, component.targets)}")
        label = t.string("runner", _REQUIRED)
        runner = next((r for r in runners if r.label == label), None)
        if runner is None:
            raise t.error("runner", f"unknown runner label '{label}'{choices_hint(label, labels)} (declare it above)")
        if not runner.gpu:
            raise t.error("runner", f"runner '{label}' has no GPU: set gpu = true on it or pick a GPU runner")
        tgt = matrix.target(target)
        if (runner.os, runner.arch) != (tgt.os, tgt.arch):
            raise t.error(
                "runner", f"runner '{label}' is {runner.os}/{runner.arch}, the {target} wheel needs {tgt.os}/{tgt.arch}"
            )
        gpu_tests.append(GpuTests(component=comp, target=target, runner=label))
    return CiConfig(python=python, nox=nox_req, runners=tuple(runners), gpu_tests=tuple(gpu_tests))


def check_runner(ci: CiConfig, cell_id: str, target_name: str, target_os: str, label: str | None) -> Runner:
    """The runner that builds a cell, or a :class:`MatrixError` naming the cell and the fix."""
    key = f"target.{target_name}.ci_runner"
    if label is None:
        raise MatrixError(
            "matrix/targets.toml",
            key,
            f"cell {cell_id} has no CI runner: set ci_runner to a {target_os} runner declared in matrix/ci.toml"
            f" ({', '.join(r.label for r in ci.runners if r.os == target_os) or 'declare one'})",
        )
    runner = ci.runner(label)
    if runner is None:
        raise MatrixError(
            "matrix/targets.toml",
            key,
            f"cell {cell_id}: unknown runner label '{label}'{choices_hint(label, ci.labels())};"
            f' use a declared label or declare it as [runner."{label}"] in matrix/ci.toml',
        )
    if runner.os != target_os:
        raise MatrixError(
            "matrix/targets.toml",
            key,
            f"cell {cell_id}: runner '{label}' is a {runner.os} machine, and cibuildwheel builds {target_os} wheels"
            f" only on {target_os}: use one of {', '.join(r.label for r in ci.runners if r.os == target_os) or 'none'}",
        )
    return runner
