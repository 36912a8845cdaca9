"""Generate ``.github/workflows/ci.yml``, ``release.yml`` (and actionlint's runner list) from ``matrix/``.

One job per thing the matrix declares, each running the nox session a person runs locally:

- ``plan``: the cells as JSON, and the committed workflow is current — ``nox -s matrix -- --json``,
  ``nox -s workflows -- --check``
- ``build-<cell>``: cibuildwheel for one (component, default variant, target) —
  ``nox -s wheels -- --component C --variant V --target T``; another variant (its own distribution name,
  options and files) is built by ``nox -s build -- --component C --variant V --target T``
- ``test-<cell>`` (per tested CPython) and ``gpu-test-<cell>``: the wheel suite on the installed wheel,
  sha256-bound records — ``nox -s test -- --python X --wheel W``
- ``crosscheck-<target>``: cross build + native tests under qemu/wine — ``nox -s crosscheck -- --target T``
- ``release`` (release.yml, tags only): gate, sign, PyPI by trusted publishing — ``nox -s release``

Hardening is built in, not added later: every action pinned by full commit SHA (the release in a
comment), ``permissions: {}`` at the top and the least each job needs, one concurrency group per
ref, no secret outside the tag-only release job (which runs in the ``pypi`` environment), and no
``${{ }}`` inside ``run:`` — values reach scripts through ``env:``.

(Over ~400 lines: each job's shape sits next to the others so a reader can check them as one workflow.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import cibw
from .ci import CiConfig, check_runner, load_ci
from .errors import MatrixError
from .matrix import Cell, Matrix, Target
from .wheelcheck import normalize
from .yamlout import Pinned, dump

WORKFLOW_FILE = ".github/workflows/ci.yml"
RELEASE_FILE = ".github/workflows/release.yml"
ACTIONLINT_FILE = ".github/actionlint.yaml"

#: Every action the workflow uses, by full commit SHA of the release named beside it.
ACTIONS: Mapping[str, Pinned] = {
    "checkout": Pinned(repo="actions/checkout", sha="11bd71901bbe5b1630ceea73d27597364c9af683", version="v4.2.2"),
    "setup-python": Pinned(
        repo="actions/setup-python", sha="a26af69be951a213d495a4c3e4e4022e16d87065", version="v5.6.0"
    ),
    "cache": Pinned(repo="actions/cache", sha="5a3ec84eff668545956fd18022155c47e93e2684", version="v4.2.3"),
    "upload-artifact": Pinned(
        repo="actions/upload-artifact", sha="ea165f8d65b6e75b540449e92b4886f43607fa02", version="v4.6.2"
    ),
    "download-artifact": Pinned(
        repo="actions/download-artifact", sha="d3f86a106a0bac45b974a628896c90dbdf5c8093", version="v4.3.0"
    ),
    "attest-build-provenance": Pinned(
        repo="actions/attest-build-provenance", sha="977bb373ede98d70efbf0b7b13af9c3d6651dc60", version="v4.1.0"
    ),
    "pypi-publish": Pinned(
        repo="pypa/gh-action-pypi-publish", sha="dc37677b2e1c63e2034f94d8a5b11f265b73ba33", version="v1.14.2"
    ),
}

#: pip's cache folder per runner OS (what ``pip cache dir`` says on GitHub's images)
PIP_CACHE = {"linux": "~/.cache/pip", "macos": "~/Library/Caches/pip", "windows": "~\\AppData\\Local\\pip\\Cache"}

#: where the pipeline keeps compiler caches (pipeline.layout / pipeline.toolchains)
ZIG_CACHE = "build/zig-cache"
CROSSCHECK_CCACHE = "build/crosscheck/ccache"
STAGING = "build/pipeline/release/staging"
CATALOG = "build/pipeline/catalog/repository"  # the TUF repository nox -s release updates (pipeline.catalog)
#: the online roles of the EP catalog the release signs with (pipeline/catalog/trust.py ONLINE_ROLES; a test
#: keeps them equal without importing the TUF tooling here)
CATALOG_ONLINE_ROLES = ("targets", "snapshot", "timestamp", "certified")
TEST_RECORDS = "build/pipeline/records/tests"

HEADER = """\
Generated from matrix/ by `nox -s workflows` (pipeline/workflow.py): do not edit by hand.
A test fails when this file differs from what the generator writes; regenerate and commit it.
Each job runs the nox session a person runs locally (README: "CI jobs and local sessions")."""


@dataclass(frozen=True, kw_only=True)
class Generated:
    """The generated files: repo-relative path → text; ``documents``: each workflow file's document (the
    data its text renders), for the rehearsal and the checks of ``run:`` scripts."""

    files: Mapping[str, str]
    documents: Mapping[str, Mapping[str, Any]]


def build_job_id(cell: Cell) -> str:
    return f"build-{cell.slug}"


def test_job_id(cell: Cell) -> str:
    return f"test-{cell.slug}"


def gpu_test_job_id(cell: Cell) -> str:
    return f"gpu-test-{cell.slug}"


def crosscheck_job_id(target: Target) -> str:
    return f"crosscheck-{target.name}"


def artifact_name(cell: Cell) -> str:
    return f"wheel-{cell.slug}"


def wheel_glob(cell: Cell) -> str:
    return f"dist/{cell.target.name}/{normalize(cell.dist)}-*.whl"


def ci_cells(matrix: Matrix) -> list[Cell]:
    """The cells CI builds: every declared cell except variants still marked ``planned``."""
    return [c for c in matrix.cells() if c.variant.planned is None]


def cibuildwheel_cells(matrix: Matrix) -> list[Cell]:
    """The cells cibuildwheel builds: each component's own distribution (variants use the pipeline's build)."""
    return [c for c in ci_cells(matrix) if c.variant.name == "default"]


# --------------------------------------------------------------------------------------
# steps


def _checkout() -> dict[str, Any]:
    return {"name": "check out", "uses": ACTIONS["checkout"], "with": {"persist-credentials": False}}


def _setup_python(version: str) -> dict[str, Any]:
    return {"name": "set up CPython", "uses": ACTIONS["setup-python"], "with": {"python-version": version}}


def _install_nox(ci: CiConfig) -> dict[str, Any]:
    return {"name": "install nox", "run": f'python -m pip install "{ci.nox}"'}


def _pip_cache(os_name: str, key: str, caches: bool) -> list[dict[str, Any]]:
    if not caches:
        return []
    return [
        {
            "name": "pip cache",
            "uses": ACTIONS["cache"],
            "with": {
                "path": PIP_CACHE[os_name],
                "key": f"pip-{key}-${{{{ hashFiles('pyproject.toml', '*/pyproject.toml', 'eps/*/pyproject.toml', "
                f"'tests/**/requirements.txt') }}}}",
                "restore-keys": f"pip-{key}-",
            },
        }
    ]


def _download(name: str, path: str) -> dict[str, Any]:
    return {"name": f"download {name}", "uses": ACTIONS["download-artifact"], "with": {"name": name, "path": path}}


def _companions(matrix: Matrix, cell: Cell) -> list[Cell]:
    """The cells whose wheels are installed next to this one for its tests (``test_with``)."""
    out = []
    for name in cell.component.test_with:
        comp = matrix.component(name)
        out.append(Cell(component=comp, variant=comp.variants[0], target=cell.target))
    return out


# --------------------------------------------------------------------------------------
# jobs


def _plan_job(ci: CiConfig, runner: str) -> dict[str, Any]:
    return {
        "name": "plan: the matrix cells",
        "runs-on": runner,
        "permissions": {"contents": "read"},
        "timeout-minutes": 10,
        "steps": [
            _checkout(),
            _setup_python(ci.python),
            _install_nox(ci),
            {
                "name": "cells as JSON",
                "run": "nox -s matrix -- --json > plan.json\npython -m json.tool plan.json",
            },
            {"name": "the committed workflow is the generated one", "run": "nox -s workflows -- --check"},
            {
                "name": "upload the plan",
                "uses": ACTIONS["upload-artifact"],
                "with": {"name": "plan", "path": "plan.json", "if-no-files-found": "error", "retention-days": 7},
            },
        ],
    }


def _build_job(matrix: Matrix, ci: CiConfig, cell: Cell, caches: bool) -> dict[str, Any]:
    runner = check_runner(ci, cell.id, cell.target.name, cell.target.os, cell.target.ci_runner)
    by_cibuildwheel = cell in cibuildwheel_cells(matrix)
    if by_cibuildwheel:
        cibw.check_config(matrix, cell)
    target = cell.target
    companions = _companions(matrix, cell) if by_cibuildwheel else []
    steps: list[dict[str, Any]] = [_checkout(), _setup_python(ci.python), *_pip_cache(runner.os, cell.slug, caches)]
    if by_cibuildwheel and target.os == "linux" and runner.arch != target.arch:
        steps.append(
            {
                "name": f"run {target.arch} containers under qemu",
                "run": "sudo apt-get update -q\nsudo apt-get install -y -q --no-install-recommends qemu-user-static",
            }
        )
    steps += [_download(artifact_name(c), cibw.COMPANIONS_DIR) for c in companions]
    steps.append(_install_nox(ci))
    selection = f"--component {cell.component.name} --variant {cell.variant.name} --target {target.name}"
    if by_cibuildwheel:
        steps.append(
            {"name": "cibuildwheel: build, repair, test on every CPython", "id": "cibuildwheel",
             "env": dict(sorted(cibw.environment(target).items())), "run": f"nox -s wheels -- {selection}"}
        )  # fmt: skip
    else:
        # A variant is the component rebuilt with its own options and distribution name (and possibly
        # extra files): the pipeline's build makes it; its tests run in the test jobs.
        steps.append({"name": "build the variant (pipeline build)", "run": f"nox -s build -- {selection}"})
    steps.append(
        {
            "name": "upload the wheel",
            "uses": ACTIONS["upload-artifact"],
            "with": {
                "name": artifact_name(cell),
                "path": wheel_glob(cell),
                "if-no-files-found": "error",
                "retention-days": 7,
            },
        }
    )
    return {
        "name": f"build {cell.id}",
        "runs-on": runner.label,
        "needs": ["plan", *(build_job_id(c) for c in companions)],
        "permissions": {"contents": "read"},
        "timeout-minutes": 120 if runner.arch != target.arch else 60,
        "steps": steps,
    }


def natively_tested(ci: CiConfig, cell: Cell) -> bool:
    """A runner's own CPython can install the wheel: same os and arch, and glibc on Linux."""
    runner = ci.runner(cell.target.ci_runner or "")
    return (
        runner is not None
        and (runner.os, runner.arch) == (cell.target.os, cell.target.arch)
        and cell.target.libc == "glibc"
    )


def _test_steps(
    matrix: Matrix, ci: CiConfig, cell: Cell, *, python: str, os_name: str, caches: bool
) -> list[dict[str, Any]]:
    dist = f"dist/{cell.target.name}"
    steps: list[dict[str, Any]] = [
        _checkout(),
        _setup_python(python),
        *_pip_cache(os_name, f"test-{cell.slug}", caches),
    ]
    steps.append(_download(artifact_name(cell), dist))
    steps += [_download(artifact_name(c), dist) for c in _companions(matrix, cell)]
    steps.append(_install_nox(ci))
    script = f'wheels=({wheel_glob(cell)})\nnox -s test -- --python "$PYTHON" --wheel "${{wheels[0]}}"'
    steps.append({"name": "wheel suite on the installed wheel", "env": {"PYTHON": python}, "run": script})
    return steps


def _test_job(matrix: Matrix, ci: CiConfig, cell: Cell, caches: bool) -> dict[str, Any]:
    runner = check_runner(ci, cell.id, cell.target.name, cell.target.os, cell.target.ci_runner)
    steps = _test_steps(matrix, ci, cell, python="${{ matrix.python }}", os_name=runner.os, caches=caches)
    steps.append(
        {
            "name": "upload the test records",
            "uses": ACTIONS["upload-artifact"],
            "with": {
                "name": f"test-records-{cell.slug}-${{{{ matrix.python }}}}",
                "path": TEST_RECORDS,
                "if-no-files-found": "error",
                "retention-days": 7,
            },
        }
    )
    return {
        "name": f"test {cell.id} on CPython ${{{{ matrix.python }}}}",
        "runs-on": runner.label,
        "needs": [build_job_id(cell), *(build_job_id(c) for c in _companions(matrix, cell))],
        "permissions": {"contents": "read"},
        "timeout-minutes": 60,
        "strategy": {"fail-fast": False, "matrix": {"python": list(matrix.pythons)}},
        "steps": steps,
    }


def _gpu_test_job(matrix: Matrix, ci: CiConfig, cell: Cell, runner_label: str, caches: bool) -> dict[str, Any]:
    runner = ci.runner(runner_label)
    assert runner is not None  # load_ci checked the label
    return {
        "name": f"GPU test {cell.id}",
        "runs-on": runner.label,
        "needs": [build_job_id(cell), *(build_job_id(c) for c in _companions(matrix, cell))],
        "permissions": {"contents": "read"},
        "timeout-minutes": 60,
        "steps": _test_steps(matrix, ci, cell, python=ci.python, os_name=runner.os, caches=caches),
    }


def crosscheck_host(matrix: Matrix, target: Target) -> Target:
    """The linux-x86_64 build host a crosscheck target lists (the crosscheck runs there)."""
    for name in target.build_hosts:
        host = matrix.target(name)
        if (host.os, host.arch, host.libc) == ("linux", "x86_64", "glibc"):
            return host
    raise MatrixError(
        "matrix/targets.toml",
        f"target.{target.name}.build_hosts",
        f"crosscheck target {target.name} needs a linux x86_64 build host in build_hosts (the crosscheck runs there)",
    )


def _crosscheck_job(matrix: Matrix, ci: CiConfig, target: Target, caches: bool) -> dict[str, Any]:
    host = crosscheck_host(matrix, target)
    runner = check_runner(ci, f"crosscheck/{target.name}", host.name, host.os, host.ci_runner)
    steps: list[dict[str, Any]] = [_checkout(), _setup_python(ci.python), *_pip_cache(runner.os, "crosscheck", caches)]
    steps += (
        [
            {
                "name": "compiler caches (ccache, zig)",
                "uses": ACTIONS["cache"],
                "with": {
                    "path": f"{CROSSCHECK_CCACHE}\n{ZIG_CACHE}",
                    "key": f"crosscheck-{target.name}-${{{{ github.sha }}}}",
                    "restore-keys": f"crosscheck-{target.name}-",
                },
            }
        ]
        if caches
        else []
    )
    if target.debian_packages:
        packages = " ".join(target.debian_packages)
        steps.append(
            {
                "name": "cross compilers and emulator",
                "run": f"sudo apt-get update -q\nsudo apt-get install -y -q --no-install-recommends {packages}",
            }
        )
    steps.append(_install_nox(ci))
    steps.append({"name": f"crosscheck {target.name}", "run": f"nox -s crosscheck -- --target {target.name}"})
    return {
        "name": f"crosscheck {target.name}",
        "runs-on": runner.label,
        "needs": ["plan"],
        "permissions": {"contents": "read"},
        "timeout-minutes": 60,
        "steps": steps,
    }


def _release_job(matrix: Matrix, ci: CiConfig, needs: list[str]) -> dict[str, Any]:
    host = matrix.target("linux-x86_64") if any(t.name == "linux-x86_64" for t in matrix.targets) else None
    if host is None or host.ci_runner is None:
        raise MatrixError("matrix/targets.toml", "target.linux-x86_64", "the release job runs on linux-x86_64's runner")
    runner = check_runner(ci, "release", host.name, host.os, host.ci_runner)
    # What is published is what the pipeline's gate accepts: `nox -s release` builds and tests the release
    # runner's cells itself (a build record and sha256-bound test records for exactly those bytes), after
    # every build, test and crosscheck job of the matrix passed (`needs`).
    steps: list[dict[str, Any]] = [_checkout(), _setup_python(ci.python)]
    steps.append(_install_nox(ci))
    steps.append(
        {
            "name": "gate, attest, sign, verify (nox -s release)",
            "env": {
                "MOSAICRT_SIGNING_KEY": "${{ secrets.MOSAICRT_SIGNING_KEY }}",
                **{
                    f"MOSAICRT_CATALOG_KEY_{role.upper()}": f"${{{{ secrets.MOSAICRT_CATALOG_KEY_{role.upper()} }}}}"
                    for role in CATALOG_ONLINE_ROLES
                },
            },
            "run": "nox -s release -- --no-tag",
        }
    )
    steps.append(
        {
            "name": "collect the release files",
            "run": (
                "mkdir -p build/ci/pypi build/ci/assets\n"
                f"cp {STAGING}/*.whl build/ci/pypi/\n"
                f"cp {STAGING}/* build/ci/assets/\n"
                # the TUF repository nox -s release writes: metadata/ (signed roles) and targets/ (the EPs)
                f"tar -czf build/ci/assets/ep-catalog.tar.gz -C {CATALOG} metadata targets"
            ),
        }
    )
    steps.append(
        {
            "name": "sigstore build provenance (GitHub attestations)",
            "uses": ACTIONS["attest-build-provenance"],
            "with": {"subject-path": "build/ci/pypi/*.whl"},
        }
    )
    steps.append(
        {
            "name": "publish to PyPI (trusted publishing, PEP 740 attestations)",
            "uses": ACTIONS["pypi-publish"],
            "with": {"packages-dir": "build/ci/pypi/", "attestations": True},
        }
    )
    steps.append(
        {
            "name": "release assets: signed bundles, SLSA provenance, SBOMs, the TUF EP catalog",
            "env": {"GH_TOKEN": "${{ github.token }}", "TAG": "${{ github.ref_name }}"},
            "run": (
                'gh release view "$TAG" > /dev/null 2>&1 || gh release create "$TAG" --verify-tag --title "$TAG"'
                ' --notes "mosaicrt release $TAG"\n'
                'gh release upload "$TAG" build/ci/assets/* --clobber'
            ),
        }
    )
    return {
        "name": "release (tags only)",
        "if": "startsWith(github.ref, 'refs/tags/')",
        "runs-on": runner.label,
        "needs": needs,
        "environment": {"name": "pypi", "url": "https://pypi.org/project/mosaicrt/"},
        "permissions": {"contents": "write", "id-token": "write", "attestations": "write"},
        "timeout-minutes": 60,
        "steps": steps,
    }


def workflow(matrix: Matrix, ci: CiConfig, *, release: bool) -> dict[str, Any]:
    """``release=False``: ci.yml (pushes to main, pull requests; with caches, publishes nothing).
    ``release=True``: release.yml (component tags): the same jobs without any cache — a cache written by a
    pull request must never reach what is published — and the release job gated on all of them."""
    caches = not release
    cells = ci_cells(matrix)
    host = next((t for t in matrix.targets if (t.os, t.arch, t.libc) == ("linux", "x86_64", "glibc")), None)
    if host is None:
        raise MatrixError("matrix/targets.toml", "target", "the plan and release jobs need a linux x86_64 target")
    plan_runner = check_runner(ci, "plan", host.name, host.os, host.ci_runner)
    jobs: dict[str, Any] = {"plan": _plan_job(ci, plan_runner.label)}
    gate: list[str] = []
    for cell in cells:
        jobs[build_job_id(cell)] = _build_job(matrix, ci, cell, caches)
        gate.append(build_job_id(cell))
    for cell in cells:
        if natively_tested(ci, cell):
            jobs[test_job_id(cell)] = _test_job(matrix, ci, cell, caches)
            gate.append(test_job_id(cell))
    for gpu in ci.gpu_tests:
        for cell in cells:
            if (cell.component.name, cell.target.name) == (gpu.component, gpu.target):
                jobs[gpu_test_job_id(cell)] = _gpu_test_job(matrix, ci, cell, gpu.runner, caches)
                gate.append(gpu_test_job_id(cell))
    for target in matrix.targets:
        if target.crosscheck:
            jobs[crosscheck_job_id(target)] = _crosscheck_job(matrix, ci, target, caches)
            gate.append(crosscheck_job_id(target))
    if release:
        jobs["release"] = _release_job(matrix, ci, gate)
    tags = sorted({f"{c.tag_prefix}-v*" for c in matrix.components})
    on: dict[str, Any] = (
        {"push": {"tags": tags}}
        if release
        else {"push": {"branches": ["main"]}, "pull_request": {}, "workflow_dispatch": {}}
    )
    return {
        "name": "release" if release else "ci",
        "on": on,
        "permissions": {},
        "concurrency": {
            "group": "${{ github.workflow }}-${{ github.ref }}",
            "cancel-in-progress": not release,
        },
        "defaults": {"run": {"shell": "bash"}},
        "env": {"FORCE_COLOR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONUNBUFFERED": "1"},
        "jobs": jobs,
    }


def actionlint_config(ci: CiConfig) -> str:
    labels = [r.label for r in ci.runners if not r.hosted]
    lines = [
        "# Generated from matrix/ci.toml by `nox -s workflows`: runner labels that are not GitHub-hosted",
        "# standard runners (larger or self-hosted runners), so actionlint accepts them.",
        "self-hosted-runner:",
        "  labels:" if labels else "  labels: []",
        *(f"    - {label}" for label in labels),
    ]
    return "\n".join(lines) + "\n"


def generate(matrix: Matrix, matrix_dir: Path | None = None) -> Generated:
    ci = load_ci(matrix, matrix_dir)
    doc = workflow(matrix, ci, release=False)
    rel = workflow(matrix, ci, release=True)
    return Generated(
        files={
            WORKFLOW_FILE: dump(doc, header=HEADER),
            RELEASE_FILE: dump(rel, header=HEADER),
            ACTIONLINT_FILE: actionlint_config(ci),
        },
        documents={WORKFLOW_FILE: doc, RELEASE_FILE: rel},
    )


def drift(root: Path, generated: Generated) -> list[str]:
    """The generated files that differ from (or are missing in) the checkout at ``root``."""
    out = []
    for rel, text in generated.files.items():
        path = root / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            out.append(rel)
    return out


def write(root: Path, generated: Generated) -> list[str]:
    """Write the files that changed; returns their paths."""
    changed = drift(root, generated)
    for rel in changed:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(generated.files[rel], encoding="utf-8")
    return changed
