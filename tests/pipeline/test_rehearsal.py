"""`nox -s workflows -- --rehearse JOB`: the generated jobs' commands run here before they reach GitHub.

Each rehearsal clones HEAD afresh. The plan job is quick; the linux-x86_64 core build + test jobs
build the core wheel (ccache and the zig cache of this checkout carry over, as the workflow's caches
do on GitHub) and run the wheel suite twice (cibuildwheel's test command, then the test job's
`nox -s test`): that pair is marked ``rehearsal`` — it runs the core wheel suite twice more, which
`nox -s ci` (already running that suite on every CPython) cannot afford on 2 cores; run it with
`nox -s rehearse` (or `nox -s workflows -- --rehearse JOB` for any job).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.errors import UsageError
from pipeline.matrix import load_matrix
from pipeline.rehearse import rehearsable_jobs, rehearse
from pipeline.workflow import WORKFLOW_FILE, generate

from .conftest import REPO


def _committed_head_is_current() -> None:
    """The rehearsal runs HEAD: the workflow files there must be what HEAD's matrix generates."""
    dirty = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "--", ".github", "matrix"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert not dirty, f"commit .github/ and matrix/ before rehearsing HEAD:\n{dirty}"


def _cli(*args: str, work: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MOSAICRT_BUILD_JOBS": os.environ.get("MOSAICRT_BUILD_JOBS", "2")}
    cmd = [sys.executable, "-m", "pipeline", "workflows", "--rehearsal-dir", str(work), *args]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)


def test_only_linux_x86_64_jobs_that_publish_nothing_are_rehearsable() -> None:
    m = load_matrix(REPO)
    gen = generate(m)
    jobs = rehearsable_jobs(m, gen.documents[WORKFLOW_FILE])
    assert {"plan", "build-core-default-linux-x86_64", "test-core-default-linux-x86_64"} <= set(jobs)
    assert "build-core-default-windows-x86_64" not in jobs and "gpu-test-cuda-default-linux-x86_64" not in jobs
    with pytest.raises(UsageError, match=r"job 'build-core-default-macos-arm64' cannot be rehearsed here"):
        rehearse(REPO, m, gen, "build-core-default-macos-arm64", work=Path("/nonexistent"))
    with pytest.raises(UsageError, match=r"no job 'plna' in .github/workflows/ci.yml \(did you mean 'plan'\?\)"):
        rehearse(REPO, m, gen, "plna", work=Path("/nonexistent"))


def test_rehearse_the_plan_job(tmp_path: Path) -> None:
    _committed_head_is_current()
    proc = _cli("--rehearse", "plan", work=tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "rehearsal of plan passed: 6 steps" in proc.stdout
    plan = json.loads((tmp_path / "artifacts" / "plan" / "plan.json").read_text())
    cells = {c["cell"] for c in plan["include"]}
    assert "core/default/linux-x86_64" in cells and plan["python"] == list(load_matrix(REPO).pythons)
    assert "up to date: .github/workflows/ci.yml" in proc.stdout  # the drift check ran in the clone


def test_a_failing_step_fails_the_rehearsal(tmp_path: Path) -> None:
    """A rehearsal can fail: the build-job stand-in refuses a test job whose wheel was never built."""
    _committed_head_is_current()
    proc = _cli("--rehearse", "test-core-default-linux-x86_64", "--python", "3.11", work=tmp_path)
    assert proc.returncode != 0
    assert "download-artifact wheel-core-default-linux-x86_64: no such artifact" in proc.stderr


@pytest.mark.slow
@pytest.mark.rehearsal
def test_rehearse_the_linux_x86_64_core_build_and_test_jobs(tmp_path: Path) -> None:
    _committed_head_is_current()
    proc = _cli(
        "--rehearse",
        "build-core-default-linux-x86_64",
        "--rehearse",
        "test-core-default-linux-x86_64",
        "--python",
        "3.11",
        work=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-4000:]
    assert "rehearsal of build-core-default-linux-x86_64 passed" in proc.stdout
    assert "rehearsal of test-core-default-linux-x86_64 passed" in proc.stdout
    wheels = list((tmp_path / "artifacts" / "wheel-core-default-linux-x86_64").glob("mosaicrt-*.whl"))
    assert len(wheels) == 1 and "manylinux" in wheels[0].name
    records = list((tmp_path / "artifacts").glob("test-records-core-default-linux-x86_64-3.11/**/*.json"))
    assert records, "the test job uploads sha256-bound test records"
