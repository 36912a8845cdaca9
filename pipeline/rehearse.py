"""Rehearse a generated CI job on this machine: ``nox -s workflows -- --rehearse JOB``.

The job's ``run:`` steps are executed as GitHub would run them (``bash --noprofile --norc -eo
pipefail``) in a fresh clone of HEAD, with the environment the workflow, the job and the step set,
plus the variables a runner provides (``GITHUB_WORKSPACE``, ``GITHUB_OUTPUT``, ``RUNNER_OS`` …).
The actions are replaced by local equivalents:

=====================  ==================================================================================
action                 local equivalent
=====================  ==================================================================================
checkout               the fresh clone itself
setup-python           a new venv of this machine's CPython of that version, first on PATH
cache                  a folder inside the workspace becomes a link to the same folder of this checkout
                       (so ccache and zig caches carry over between rehearsals); ``~`` paths: this home
upload-artifact        files copied to ``<rehearsal dir>/artifacts/<name>/``
download-artifact      files copied back from there (a job's needs are rehearsed first, in order)
=====================  ==================================================================================

One step is not a ``run:`` GitHub would do the same way: cibuildwheel (step id ``cibuildwheel``)
needs a container engine for Linux wheels, which this machine lacks. Its stand-in builds the same
cell with the pipeline's own build (``python -m pipeline build``) and then runs the component's
cibuildwheel ``before-test`` and ``test-command`` against that wheel, in a fresh venv of the job's
CPython, exactly as configured in ``[tool.cibuildwheel]``. The rehearsal says so when it does it.

Only jobs on a linux x86_64 runner can be rehearsed; the release job never is (it publishes).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import cibw, toolchains
from .ci import load_ci
from .errors import EnvironmentProblem, PipelineError, UsageError, choices_hint
from .matrix import Cell, Matrix, load_matrix
from .wheeltest import find_pythons
from .workflow import ACTIONS, WORKFLOW_FILE, Generated, build_job_id, ci_cells, drift, generate, wheel_glob
from .yamlout import Pinned

_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
#: what a rehearsal keeps from this machine's environment (the rest comes from the workflow)
_KEEP_ENV = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "TERM", "TMPDIR", "http_proxy", "https_proxy", "no_proxy")


class RehearsalFailed(PipelineError):
    """A rehearsed step failed (the step, its command and its exit status are in the message)."""


@dataclass(frozen=True, kw_only=True)
class StepResult:
    name: str
    how: str  #: "run" or the local equivalent used
    seconds: float


def rehearsable_jobs(matrix: Matrix, document: Mapping[str, Any]) -> list[str]:
    ci = load_ci(matrix)
    out = []
    for job_id, job in document["jobs"].items():
        runner = ci.runner(str(job.get("runs-on", "")))
        linux_x86_64 = runner is not None and (runner.os, runner.arch) == ("linux", "x86_64") and not runner.gpu
        if job_id != "release" and linux_x86_64:
            out.append(job_id)
    return out


def rehearse(
    root: Path, matrix: Matrix, generated: Generated, job_id: str, *, work: Path, python: str | None = None
) -> list[StepResult]:
    """Run ``job_id`` of the committed ci.yml in a fresh clone of HEAD; raise :class:`RehearsalFailed`."""
    document = generated.documents[WORKFLOW_FILE]
    jobs = rehearsable_jobs(matrix, document)
    if job_id not in document["jobs"]:
        raise UsageError(f"no job '{job_id}' in {WORKFLOW_FILE}{choices_hint(job_id, jobs)}")
    if job_id not in jobs:
        raise UsageError(
            f"job '{job_id}' cannot be rehearsed here: only jobs on a linux x86_64 runner that publish nothing"
            f" ({', '.join(jobs)})"
        )
    job_dir = work / job_id
    clone = _fresh_clone(root, job_dir)
    # The rehearsed job is the committed one, generated from the clone's own matrix.
    clone_matrix = load_matrix(clone)
    clone_generated = generate(clone_matrix)
    stale = drift(clone, clone_generated)
    if stale:
        raise UsageError(
            f"HEAD's {', '.join(stale)} differ from what this checkout's generator makes of HEAD's matrix/:"
            " the rehearsal runs HEAD, so run `nox -s workflows` and commit"
        )
    job = clone_generated.documents[WORKFLOW_FILE]["jobs"][job_id]
    ctx = _contexts(clone, job, python)
    env = _base_env(clone, job_dir, ctx)
    env.update(_expand_map(clone_generated.documents[WORKFLOW_FILE].get("env", {}), ctx))
    env.update(_expand_map(job.get("env", {}), ctx))
    cell = next((c for c in ci_cells(clone_matrix) if build_job_id(c) == job_id), None)
    artifacts = work / "artifacts"
    results = []
    print(f"rehearsing {job_id} in {clone} (matrix: {ctx.get('matrix.python', '-')})", flush=True)
    for i, step in enumerate(job["steps"], 1):
        name = step.get("name") or step.get("id") or step.get("uses", "")
        started = time.monotonic()
        step_env = {**env, **_expand_map(step.get("env", {}), ctx)}
        print(f"[{job_id} {i}/{len(job['steps'])}] {name}", flush=True)
        if step.get("id") == "cibuildwheel":
            if cell is None:
                raise UsageError(f"step {name} of {job_id}: no matrix cell for this build job")
            how = _cibuildwheel_stand_in(clone, clone_matrix, cell, root=root, env=step_env, job_dir=job_dir)
        elif "uses" in step:
            how = _action(step, clone=clone, root=root, artifacts=artifacts, env=env, ctx=ctx, job_dir=job_dir)
        else:
            _run(step["run"], clone / step.get("working-directory", "."), step_env, f"{job_id}: {name}")
            _apply_github_env(env)
            how = "run"
        results.append(StepResult(name=name, how=how, seconds=time.monotonic() - started))
        print(f"    {how} ({results[-1].seconds:.1f}s)", flush=True)
    print(f"rehearsal of {job_id} passed: {len(results)} steps in {sum(r.seconds for r in results):.0f}s")
    return results


# --------------------------------------------------------------------------------------


def _fresh_clone(root: Path, job_dir: Path) -> Path:
    head = _git(root, "rev-parse", "HEAD")
    shutil.rmtree(job_dir, ignore_errors=True)
    job_dir.mkdir(parents=True)
    clone = job_dir / "workspace"
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(root), str(clone)], check=True)
    _git(clone, "checkout", "--quiet", "--detach", head)
    return clone


def _git(where: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise EnvironmentProblem(f"git {' '.join(args)} in {where} failed: {out.stderr.strip()}")
    return out.stdout.strip()


def _contexts(clone: Path, job: Mapping[str, Any], python: str | None) -> dict[str, str]:
    ctx = {
        "github.workspace": str(clone),
        "github.sha": _git(clone, "rev-parse", "HEAD"),
        "github.ref": "refs/heads/rehearsal",
        "github.ref_name": "rehearsal",
        "github.event_name": "workflow_dispatch",
        "github.workflow": "ci",
        "runner.os": "Linux",
    }
    versions = job.get("strategy", {}).get("matrix", {}).get("python")
    if versions:
        wanted = [python] if python else list(versions)
        if python and python not in versions:
            raise UsageError(f"--python {python} is not in the job's matrix ({', '.join(versions)})")
        found, _ = find_pythons(wanted[:1] if python else wanted)
        if not found:
            raise EnvironmentProblem(f"no CPython {' or '.join(wanted)} here (PATH or pyenv) to rehearse with")
        ctx["matrix.python"] = found[0].version
    return ctx


def _expand(value: object, ctx: Mapping[str, str]) -> str:
    text = str(value).lower() if isinstance(value, bool) else str(value)

    def one(m: re.Match[str]) -> str:
        if m[1] not in ctx:
            raise UsageError(f"the rehearsal cannot evaluate ${{{{ {m[1]} }}}} (known: {', '.join(sorted(ctx))})")
        return ctx[m[1]]

    return _EXPR.sub(one, text)


def _expand_map(values: Mapping[str, object], ctx: Mapping[str, str]) -> dict[str, str]:
    return {k: _expand(v, ctx) for k, v in values.items()}


def _base_env(clone: Path, job_dir: Path, ctx: Mapping[str, str]) -> dict[str, str]:
    runner_dir = job_dir / "runner"
    (runner_dir / "temp").mkdir(parents=True, exist_ok=True)
    files = {k: runner_dir / f"{k.lower()}.txt" for k in ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH")}
    files["GITHUB_STEP_SUMMARY"] = runner_dir / "summary.md"
    for f in files.values():
        f.touch()
    env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
    env.update({k: str(v) for k, v in files.items()})
    env.update(
        {
            "CI": "true",
            "GITHUB_WORKSPACE": str(clone),
            "GITHUB_SHA": ctx["github.sha"],
            "GITHUB_REF": ctx["github.ref"],
            "GITHUB_REF_NAME": ctx["github.ref_name"],
            "RUNNER_OS": "Linux",
            "RUNNER_ARCH": "X64",
            "RUNNER_TEMP": str(runner_dir / "temp"),
        }
    )
    return env


def _apply_github_env(env: dict[str, str]) -> None:
    """What a step appended to $GITHUB_ENV / $GITHUB_PATH applies to the steps after it."""
    for line in Path(env["GITHUB_ENV"]).read_text(encoding="utf-8").splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            env[k] = v
    for line in Path(env["GITHUB_PATH"]).read_text(encoding="utf-8").splitlines():
        if line.strip() and line.strip() not in env["PATH"].split(os.pathsep):
            env["PATH"] = line.strip() + os.pathsep + env["PATH"]


def _run(script: str, cwd: Path, env: Mapping[str, str], what: str) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False, dir=env.get("RUNNER_TEMP")) as fh:
        fh.write(script)
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", fh.name], cwd=cwd, env=dict(env), check=False
    )
    if proc.returncode != 0:
        raise RehearsalFailed(f"step '{what}' failed with exit status {proc.returncode}:\n{script}")


def _action(
    step: Mapping[str, Any],
    *,
    clone: Path,
    root: Path,
    artifacts: Path,
    env: dict[str, str],
    ctx: Mapping[str, str],
    job_dir: Path,
) -> str:
    uses = step["uses"].ref if isinstance(step["uses"], Pinned) else str(step["uses"])
    given = step.get("with", {})
    # only the inputs a local equivalent uses are evaluated (a cache key's hashFiles() is GitHub's business)
    used = {"cache": ("path",)}.get(next((k for k, v in ACTIONS.items() if v.ref == uses), ""), tuple(given))
    args = _expand_map({k: v for k, v in given.items() if k in used}, ctx)
    if uses == ACTIONS["checkout"].ref:
        return "checkout → the fresh clone"
    if uses == ACTIONS["setup-python"].ref:
        version = args["python-version"]
        found, _ = find_pythons([version])
        if not found:
            raise EnvironmentProblem(f"setup-python wants CPython {version}: none here (PATH or pyenv)")
        exe = found[0].executable
        venv = job_dir / f"python{version}"
        subprocess.run([exe, "-m", "venv", str(venv)], check=True)
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
        env["pythonLocation"] = str(venv)
        return f"setup-python → venv of {exe}"
    if uses == ACTIONS["cache"].ref:
        linked = []
        for raw in args["path"].splitlines():
            path = raw.strip()
            if not path or path.startswith("~"):
                continue  # this machine's home is already the cache
            local = root / path
            local.mkdir(parents=True, exist_ok=True)
            target = clone / path
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                target.symlink_to(local, target_is_directory=True)
            linked.append(path)
        return f"cache → {', '.join(linked) + ' linked to this checkout' if linked else 'this home folder'}"
    if uses == ACTIONS["upload-artifact"].ref:
        return _upload(args, clone, artifacts)
    if uses == ACTIONS["download-artifact"].ref:
        return _download(args, clone, artifacts)
    raise UsageError(f"the rehearsal has no local equivalent for {uses}")


def _upload(args: Mapping[str, str], clone: Path, artifacts: Path) -> str:
    name = args["name"]
    files = [p for pattern in args["path"].splitlines() if pattern.strip() for p in sorted(clone.glob(pattern.strip()))]
    if not files and args.get("if-no-files-found", "warn") == "error":
        raise RehearsalFailed(f"upload-artifact {name}: no files match {args['path']!r}")
    dest = artifacts / name
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for f in files:
        if f.is_dir():  # a folder uploads its contents (upload-artifact keeps paths below it)
            shutil.copytree(f, dest, dirs_exist_ok=True)
        else:
            shutil.copy2(f, dest / f.name)
    return f"upload-artifact → {dest} ({len(files)} files)"


def _download(args: Mapping[str, str], clone: Path, artifacts: Path) -> str:
    dest = clone / args.get("path", ".")
    if "name" in args:
        sources = [artifacts / args["name"]]
        if not sources[0].is_dir():
            raise RehearsalFailed(
                f"download-artifact {args['name']}: no such artifact in {artifacts}"
                " (rehearse the job that uploads it first, e.g. --rehearse build-…)"
            )
    else:
        sources = sorted(p for p in artifacts.glob(args.get("pattern", "*")) if p.is_dir())
    dest.mkdir(parents=True, exist_ok=True)
    for src in sources:
        target = dest if "name" in args or args.get("merge-multiple") == "true" else dest / src.name
        shutil.copytree(src, target, dirs_exist_ok=True)
    return f"download-artifact → {dest}"


def _cibuildwheel_stand_in(
    clone: Path, matrix: Matrix, cell: Cell, *, root: Path, env: Mapping[str, str], job_dir: Path
) -> str:
    """Build the cell with the pipeline, then run its cibuildwheel before-test + test-command on the wheel."""
    print(
        "    cibuildwheel needs a container engine for Linux wheels: building the same cell with the pipeline"
        " and running the component's cibuildwheel test command on it",
        flush=True,
    )
    config = cibw.check_config(matrix, cell)
    # the compiler caches of this checkout (what the workflow's caches hold on GitHub)
    build_env = toolchains.zig_cache_environment(root, env)
    build_env.setdefault("CCACHE_DIR", str(root / "build" / "pipeline" / "ccache"))
    build_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{build_env['PATH']}"
    selection = ["--target", cell.target.name, "--component", cell.component.name, "--variant", cell.variant.name]
    cmd = [sys.executable, "-m", "pipeline", "build", "--root", str(clone), *selection]
    if os.environ.get("MOSAICRT_BUILD_JOBS"):
        cmd += ["--jobs", os.environ["MOSAICRT_BUILD_JOBS"]]
    if subprocess.run(cmd, cwd=clone, env=build_env, check=False).returncode != 0:
        raise RehearsalFailed(f"the pipeline build of {cell.id} failed (log under {clone}/build/pipeline/logs)")
    wheels = sorted((clone / "dist" / cell.target.name).glob(Path(wheel_glob(cell)).name))
    if len(wheels) != 1:
        raise RehearsalFailed(f"expected one {cell.dist} wheel in dist/{cell.target.name}, found {len(wheels)}")
    python = shutil.which("python", path=env["PATH"])
    if python is None:
        raise EnvironmentProblem("no python on the job's PATH (setup-python did not run?)")
    venv = job_dir / "cibw-test-venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    test_env = {k: v for k, v in env.items() if not k.startswith("PIP_") or k == "PIP_DISABLE_PIP_VERSION_CHECK"}
    test_env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    test_env["VIRTUAL_ENV"] = str(venv)

    def fill(command: str) -> str:
        return command.replace("{project}", shlex.quote(str(clone))).replace(
            "{package}", shlex.quote(str(clone / cell.component.path))
        )

    test_cwd = job_dir / "cibw-test-cwd"
    test_cwd.mkdir(exist_ok=True)
    if config.before_test:
        _run(fill(config.before_test), test_cwd, test_env, f"{cell.id}: cibuildwheel before-test")
    _run(f"python -m pip install {shlex.quote(str(wheels[0]))}", test_cwd, test_env, f"{cell.id}: install the wheel")
    _run(fill(config.test_command), test_cwd, test_env, f"{cell.id}: cibuildwheel test-command")
    return f"cibuildwheel → pipeline build + the configured test command ({wheels[0].name})"
