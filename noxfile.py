"""nox sessions for mosaicrt. Each session is a few lines: the logic lives in ``pipeline/``.

nox -s main                      build, test, sign and publish the host target's wheels (= nox -s release)
nox -s verify -- http://127.0.0.1:PORT/simple/   check published wheels against the trust roots
nox -s ci                        the repository's own test suite (what .ci/run runs)
nox -s build -- --target T --component C --variant V
nox -s test  -- --python 3.12 --wheel dist/linux-x86_64/<file>.whl
nox -s matrix -- --json
nox -s crosscheck -- --target linux-armv7   cross builds + native tests under qemu/wine
nox -s workflows                 regenerate .github/workflows/ from matrix/ (-- --check, -- --rehearse JOB)
nox -s wheels -- --component core --target linux-x86_64   cibuildwheel, as the CI build jobs run it
nox -s catalog -- status         the winml EP catalog the release publishes (sign-root, serve, stop)
nox -s fuzz -- --seconds 60       libFuzzer + ASan/UBSan on the decoder, sessions, run() and the EP graph view
nox -l                           list every session
"""

from __future__ import annotations

import hashlib
import os
import sys
import sysconfig
from pathlib import Path

import nox

nox.needs_version = ">=2024.10.9"
nox.options.default_venv_backend = "virtualenv"
nox.options.sessions = ["main"]

ROOT = Path(__file__).resolve().parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")


def _install(session: nox.Session, *groups: str) -> None:
    """Install dependency groups once per venv; a reused venv with the same requirements skips pip.

    This keeps a no-op ``nox -s build`` at the cost of hashing its inputs. ``--reinstall`` or
    ``MOSAICRT_NOX_REINSTALL=1`` forces pip to run.
    """
    reqs = [r for g in groups for r in nox.project.dependency_groups(PYPROJECT, g)]
    stamp = Path(session.virtualenv.location) / ".mosaicrt-requirements"
    key = hashlib.sha256("\n".join(reqs).encode()).hexdigest()
    forced = os.environ.get("MOSAICRT_NOX_REINSTALL") == "1" or "--reinstall" in sys.argv
    if not forced and stamp.is_file() and stamp.read_text() == key:
        return
    session.install(*reqs)
    stamp.write_text(key)


def _pipeline(session: nox.Session, step: str, *args: str) -> None:
    session.run("python", "-m", "pipeline", step, *args, external=False)


@nox.session(reuse_venv=True)
def build(session: nox.Session) -> None:
    """Build wheels into dist/<target>/ (default: every cell of the host target; unchanged cells are skipped)."""
    _install(session, "build")
    _pipeline(session, "build", *session.posargs)


@nox.session(reuse_venv=True)
def test(session: nox.Session) -> None:
    """Install each wheel by file into a fresh venv per tested CPython; write sha256-bound test records."""
    _install(session, "test")
    _pipeline(session, "test", *session.posargs)


@nox.session(reuse_venv=True)
def crosscheck(session: nox.Session) -> None:
    """Cross-build the core + native tests per cross target; check machine type and Arm kernels; run under emulation."""
    _install(session, "build")
    _pipeline(session, "crosscheck", *session.posargs)


@nox.session(venv_backend="none")
def matrix(session: nox.Session) -> None:
    """Print every target/component/variant cell and why cells are skipped on this host (`-- --json` for CI)."""
    session.run(sys.executable, "-m", "pipeline", "matrix", *session.posargs)


@nox.session(reuse_venv=True, default=False)
def workflows(session: nox.Session) -> None:
    """Generate .github/workflows/ from matrix/ (`-- --check` compares; `-- --rehearse JOB` runs a
    linux-x86_64 job's steps in a fresh clone, with local stand-ins for the actions)."""
    if "--rehearse" in session.posargs:
        _install(session, "build", "test")  # a build job's stand-in for cibuildwheel is the pipeline build
        _pipeline(session, "workflows", *session.posargs)
    else:  # generation needs only the standard library
        session.run(sys.executable, "-m", "pipeline", "workflows", *session.posargs, external=True)


@nox.session(reuse_venv=True, default=False)
def wheels(session: nox.Session) -> None:
    """Build and test cells with cibuildwheel, as CI's build jobs do (`-- --component C --target T`;
    Linux needs a container engine; `-- --print-build-identifiers` needs none)."""
    _install(session, "wheels")
    _pipeline(session, "wheels", *session.posargs)


@nox.session(reuse_venv=True)
def main(session: nox.Session) -> None:
    """The main job = `nox -s release`: build → test → gate → attest/sign → verify → publish to the local index."""
    _install(session, "build", "test", "release")
    _pipeline(session, "release", *session.posargs)


@nox.session(reuse_venv=True, default=False)
def release(session: nox.Session) -> None:
    """Build and test what is missing, then publish signed, attested wheels (`-- --stop-index`, `--repository`)."""
    _install(session, "build", "test", "release")
    _pipeline(session, "release", *session.posargs)


@nox.session(reuse_venv=True, default=False)
def catalog(session: nox.Session) -> None:
    """The winml EP catalog: `-- status`, `-- sign-root [--root-key FILE]` (offline root step), `-- serve`/`stop`."""
    _install(session, "release")
    _pipeline(session, "catalog", *(session.posargs or ["status"]))


@nox.session(reuse_venv=True, default=False)
def verify(session: nox.Session) -> None:
    """Check wheels as a consumer: `-- <wheel file | wheel URL | simple index URL>` against the trust roots."""
    _install(session, "verify")
    _pipeline(session, "verify", *session.posargs)


@nox.session(reuse_venv=True, default=False)
def fuzz(session: nox.Session) -> None:
    """libFuzzer + ASan + UBSan on the decoder, session creation, run() and the EP graph view
    (`-- --seconds N` or `--runs N`, `--target decode`); installs clang-14 when missing (root)."""
    _install(session, "fuzz")
    _pipeline(session, "fuzz", "--install-clang", *session.posargs)


@nox.session(reuse_venv=True, default=False)
def rehearse(session: nox.Session) -> None:
    """Rehearse the generated linux-x86_64 CI jobs here (plan, core build + test) in fresh clones of HEAD."""
    _install(session, "ci")
    session.run("python", "-m", "pytest", "tests/pipeline/test_rehearsal.py", *session.posargs)


@nox.session(reuse_venv=True, default=False)
def hardening(session: nox.Session) -> None:
    """The sanitizer checks (their own clang builds): every fuzz target replays its regressions and fuzzes
    briefly (ASan+UBSan), 10,000-cycle leak checks (LSan), concurrency stress (TSan); installs clang-14 when
    missing (root). Longer fuzzing: `nox -s fuzz`."""
    _install(session, "ci")
    session.run("python", "-m", "pytest", "tests/pipeline/test_fuzz.py", "tests/pipeline/test_hardening.py",
                *session.posargs)


@nox.session(reuse_venv=True)
def ci(session: nox.Session) -> None:
    """The repository's own test suite, slow tests included (what .ci/run and the README run); the
    sanitizer builds (fuzz smoke, LeakSanitizer, ThreadSanitizer) are `nox -s hardening`, the rehearsal of the
    core build + test CI jobs `nox -s rehearse`."""
    _install(session, "ci")
    session.run("python", "-m", "pytest", "tests", "-m", "not sanitizer and not rehearsal", "--durations=25",
                *session.posargs)


@nox.session(reuse_venv=True, default=False)
def lint(session: nox.Session) -> None:
    """ruff and mypy (strict) over pipeline/, the noxfile, recipes/ and tests/pipeline/."""
    _install(session, "lint", "ci")
    session.run("ruff", "check", "pipeline", "tests", "noxfile.py", "recipes", "bench", "tools")
    session.run("mypy")


def _host_wheels(session: nox.Session, *patterns: str) -> list[str]:
    """The newest wheel per pattern in dist/<host target>/ (dist/ also holds cross wheels); the first
    pattern is required."""
    host_dist = ROOT / "dist" / sysconfig.get_platform()  # e.g. dist/linux-x86_64
    found = [sorted(host_dist.glob(p))[-1:] for p in patterns]
    if not found[0]:
        session.error(f"no {patterns[0]} in {host_dist}: run `nox -s build` first")
    return [str(w) for ws in found for w in ws]


def _more_benchmarks(eps: list[str]) -> list[list[str]]:
    """The benchmarks after the CPU EP's: SGEMM against numpy, then each EP whose wheel was built."""
    scripts = {"mosaicrt_ep_dnnl-": "bench/bench_dnnl.py", "mosaicrt_ep_openvino-": "bench/bench_openvino.py"}
    built = [script for prefix, script in scripts.items() if any(Path(w).name.startswith(prefix) for w in eps)]
    return [["bench/bench_sgemm.py"]] + [[script, "--threads", "2"] for script in built]


@nox.session(reuse_venv=True, default=False)
def bench(session: nox.Session) -> None:
    """Benchmarks against onnxruntime on the built host wheels: the CPU EP (bench/run_bench.py, at 1 and 2
    threads; writes the core wheel's benchmark record, which the release gate compares), SGEMM against
    numpy's BLAS (bench/bench_sgemm.py) and, when their wheels were built, the oneDNN EP
    (bench/bench_dnnl.py) and the OpenVINO EP (bench/bench_openvino.py)."""
    core, *eps = _host_wheels(session, "mosaicrt-*.whl", "mosaicrt_ep_dnnl-*.whl", "mosaicrt_ep_openvino-*.whl")
    session.install("--force-reinstall", "--no-deps", core, *eps)
    session.install(core, *eps, "onnx", "onnxruntime")
    session.run("python", "bench/run_bench.py", "--record", core, *session.posargs)
    for args in _more_benchmarks(eps):
        session.run("python", *args)
