"""pipeline.release against a real local pypiserver: the gate, idempotency, tamper refusals, crash recovery.

Each test uses a throwaway git repository of the two fixture components (alpha = core, beta = EP) with
synthetic wheels plus the build and test records the real steps would leave (tests/pipeline/releasekit.py).
In every fault test one wheel is bad and the other good: nothing at all may reach the index.
"""

from __future__ import annotations

import base64
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline import attest, perf, publish
from pipeline import release as release_mod
from pipeline.cli import main
from pipeline.errors import ExitCode
from pipeline.hashing import sha256_file
from pipeline.index import list_files, running_index, start_local_index, stop_local_index
from pipeline.release import check_tests
from pipeline.wheeltest import Interpreter, TestReport, TestRow

from .releasekit import Repo, available_pythons, git, make_repo

pytest.importorskip("pypiserver", reason="the release tools are installed by `nox -s ci`")
pytest.importorskip("twine", reason="the release tools are installed by `nox -s ci`")

DISTS = ("fixture-alpha", "fixture-beta")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Repo]:
    monkeypatch.setenv("MOSAICRT_CONFIG_DIR", str(tmp_path / "config"))
    for var in ("MOSAICRT_SIGNING_KEY", "TWINE_REPOSITORY_URL", "TWINE_REPOSITORY", "TWINE_USERNAME"):
        monkeypatch.delenv(var, raising=False)
    r = make_repo(tmp_path)
    if not available_pythons():
        pytest.skip("no tested CPython on this machine")
    yield r
    stop_local_index(r.layout.index_state)


def release(repo: Repo, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["release", "--root", str(repo.root), "--no-build", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def listing(repo: Repo) -> dict[str, str | None]:
    """Every file on the managed index: name → sha256 (starting it if needed)."""
    idx = start_local_index(repo.layout.index_state, quiet=True)
    out: dict[str, str | None] = {}
    for dist in DISTS:
        out.update({name: f.sha256 for name, f in list_files(idx.simple_url, dist).items()})
    return out


def assert_refused(repo: Repo, capsys: pytest.CaptureFixture[str], *reasons: str) -> str:
    before = listing(repo)
    rc, _, err = release(repo, capsys)
    assert rc == ExitCode.RELEASE, err
    for reason in reasons:
        assert reason in err
    assert "nothing was uploaded" in err
    assert listing(repo) == before
    return err


# --------------------------------------------------------------------------------------
# gate decisions (no index)


def _report(pythons: list[str], rows: list[TestRow]) -> TestReport:
    found = tuple(Interpreter(version=p, full=p + ".0", executable=f"python{p}") for p in pythons)
    return TestReport(pythons=found, missing_pythons=(), rows=tuple(rows))


def test_gate_requires_a_passing_row_per_found_python(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    """The gate reads the rows the test step passed along (here: its check-only pass over the records)."""
    from pipeline.cli import run_tests
    from pipeline.plan import host_target

    wheel = repo.build("alpha")
    sha = sha256_file(wheel)
    host = host_target(repo.matrix)
    pythons = available_pythons()[:1]

    def problems() -> list[str]:
        report = run_tests(repo.matrix, host, repo.layout, [wheel], pythons=pythons, check_only=True)
        return check_tests(report, sha)[0]

    assert problems() and "no test record for its sha256" in problems()[0]
    repo.test(wheel, pythons=pythons)
    assert problems() == []
    (repo.root / "tests" / "wheel" / "test_new.py").write_text("def test_more() -> None:\n    pass\n")
    assert problems() == [f"tested on CPython {pythons[0]} with an older wheel suite (run `nox -s test`)"]
    capsys.readouterr()
    # in-memory reports: every Python the test step found needs its passing row
    rec = repo.layout.records / sha
    assert rec.is_dir()
    assert "no tested CPython" in check_tests(_report([], []), sha)[0][0]
    missing = check_tests(_report(["3.11", "3.12"], []), sha)[0]
    assert len(missing) == 2 and "on CPython 3.12" in missing[1]


# --------------------------------------------------------------------------------------
# the happy path, and idempotency


def test_release_publishes_signed_wheels_tags_and_is_idempotent(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    wheels = repo.build_and_test()
    rc, out, err = release(repo, capsys)
    assert rc == 0, err
    files = listing(repo)
    for w in wheels.values():
        assert files[w.name] == sha256_file(w)
        assert w.name + ".asc" in files
    assert len(files) == 4
    assert sorted(repo.tags()) == ["alpha-v1.0.0", "ep-beta-v1.0.0"]
    assert "pip install --index-url http://127.0.0.1:" in out and "fixture-alpha==1.0.0" in out
    assert "created development signing key" in out
    report = json.loads(repo.layout.release_report.read_text())
    assert {r["status"] for r in report["rows"]} == {"uploaded"}

    rc, out, err = release(repo, capsys)  # a finished release again: nothing changes
    assert rc == 0, err
    assert "already published" in out and "uploaded" not in out.replace("already published", "")
    assert listing(repo) == files
    assert sorted(repo.tags()) == ["alpha-v1.0.0", "ep-beta-v1.0.0"]

    # the consumer's check of the published index, and of a modified copy
    idx = running_index(repo.layout.index_state)
    assert idx is not None
    rc = main(["verify", "--root", str(repo.root), idx.simple_url])
    out, err = capsys.readouterr()
    assert rc == 0, err + out
    assert out.count("OK fixture_") == 2 and "via" in out and "trusted-keys.json" in out
    copy = repo.root / "copy" / wheels["alpha"].name
    copy.parent.mkdir()
    data = bytearray(wheels["alpha"].read_bytes())
    data[len(data) // 2] ^= 1
    copy.write_bytes(bytes(data))
    (copy.parent / (copy.name + ".asc")).write_bytes(
        (repo.layout.work / "release" / "staging" / (copy.name + ".asc")).read_bytes()
    )
    rc = main(["verify", "--root", str(repo.root), str(copy)])
    out, err = capsys.readouterr()
    assert rc == ExitCode.VERIFY
    assert "REJECTED" in out and "does not match the wheel's sha256" in out


def test_a_new_version_is_released_next_to_the_old_one(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    repo.build_and_test()
    assert release(repo, capsys)[0] == 0
    (repo.root / "comps" / "alpha" / "alpha.c").write_text("/* changed */\n")
    assert_refused(repo, capsys, "alpha changed since its release alpha-v1.0.0 (comps/alpha/alpha.c)")
    (repo.root / "comps" / "alpha" / "VERSION").write_text("1.1.0\n")
    git(repo.root, "commit", "-qam", "alpha 1.1.0")
    repo.test(repo.build("alpha", salt="1.1"))
    rc, _, err = release(repo, capsys)
    assert rc == 0, err
    assert "alpha-v1.1.0" in repo.tags()
    names = listing(repo)
    assert "fixture_alpha-1.1.0-py3-none-manylinux_2_17_x86_64.whl" in names
    assert "fixture_alpha-1.0.0-py3-none-manylinux_2_17_x86_64.whl" in names


def test_a_cell_whose_sdk_hands_cmake_an_executable_is_released(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The build hashes the SDK's resolved executables (they change what is built); the gate must compute the
    very same hash, or every release of such a cell would be refused as "sources changed"."""
    tools = tmp_path / "sdk-bin"
    tools.mkdir()
    exe = tools / "fixture-sdkc"
    exe.write_text("#!/bin/sh\necho fixture sdk compiler\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    sdks = repo.root / "matrix" / "sdks.toml"
    sdks.write_text(
        sdks.read_text()
        + '\n[sdk.fixturesdk]\nexecutables = ["fixture-sdkc"]\ncmake_executables = { fixture-sdkc = "FIXTURE_SDKC" }\n'
        'hint = "put fixture-sdkc on PATH"\n'
    )
    comps = repo.root / "matrix" / "components.toml"
    comps.write_text(comps.read_text().replace('dist = "fixture-beta"', 'dist = "fixture-beta"\nsdks = ["fixturesdk"]'))
    git(repo.root, "commit", "-qam", "beta needs an SDK with a CMake executable")
    assert repo.planned("beta").sdk_defines == (("FIXTURE_SDKC", str(exe)),)
    wheels = repo.build_and_test()
    rc, _, err = release(repo, capsys)
    assert rc == 0, err
    assert listing(repo)[wheels["beta"].name] == sha256_file(wheels["beta"])
    staged = repo.layout.work / "release" / "staging" / f"{wheels['beta'].name}.provenance.dsse.json"
    payload = json.loads(base64.b64decode(json.loads(staged.read_text())["payload"]))
    inputs = payload["predicate"]["buildDefinition"]["internalParameters"]["inputs"]
    assert json.loads(inputs["sdk"]) == [["FIXTURE_SDKC", str(exe)]]


# --------------------------------------------------------------------------------------
# faults: each refused, nothing uploaded


def test_a_byte_flipped_after_testing_is_refused(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    wheels = repo.build_and_test()
    data = bytearray(wheels["beta"].read_bytes())
    data[40] ^= 1
    wheels["beta"].write_bytes(bytes(data))
    err = assert_refused(
        repo, capsys, "beta/default/linux-x86_64: no build record matches its wheel", "wheel missing or altered"
    )
    assert "fixture_alpha" not in err  # the good wheel is fine, and still not uploaded


def test_a_wheel_never_tested_is_refused(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    repo.test(repo.build("alpha"))
    repo.build("beta")
    assert_refused(repo, capsys, "fixture_beta-1.0.0", "never tested, or its bytes changed after testing")


def test_a_failed_test_record_is_refused(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    repo.test(repo.build("alpha"))
    beta = repo.build("beta")
    repo.test(beta, "failed")
    assert_refused(repo, capsys, f"its test record on CPython {available_pythons()[0]} says failed")


def test_a_signature_by_an_untrusted_key_is_refused(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    repo.build_and_test()
    seed = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    monkeypatch.setenv("MOSAICRT_SIGNING_KEY", base64.b64encode(seed).decode())
    assert_refused(repo, capsys, "refused at the consumer check", "which no trust root lists")


def test_a_missing_build_record_means_no_provenance(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    repo.build_and_test()
    repo.layout.state_file(repo.cell("beta").slug).unlink()
    assert_refused(
        repo, capsys, "beta/default/linux-x86_64: no build record matches", "no previous build", "no provenance"
    )


def test_an_invalid_provenance_is_refused(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.build_and_test()
    real = attest.provenance

    def broken(*args: Any, **kwargs: Any) -> dict[str, Any]:
        stmt = real(*args, **kwargs)
        if "beta" in args[0]:
            del stmt["predicate"]["buildDefinition"]["externalParameters"]["source"]["commit"]
        return stmt

    monkeypatch.setattr(attest, "provenance", broken)
    assert_refused(repo, capsys, "invalid provenance, buildDefinition.externalParameters.source.commit is missing")


def test_sources_changed_after_the_build_are_refused(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    repo.build_and_test()
    (repo.root / "comps" / "beta" / "beta.c").write_text("/* edited after the build */\n")
    assert_refused(repo, capsys, "no build record matches its wheel and the current sources", "component (beta.c)")


def test_the_same_version_with_other_bytes_is_refused(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    repo.build_and_test()
    assert release(repo, capsys)[0] == 0
    git(repo.root, "tag", "-d", "ep-beta-v1.0.0")  # even without the tag, the index has the truth
    repo.test(repo.build("beta", salt="rebuilt differently"))
    err = assert_refused(repo, capsys, "is already on the index with sha256", "never overwritten")
    assert "fixture_beta-1.0.0" in err


def test_a_lower_version_than_released_is_refused(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    repo.build_and_test()
    git(repo.root, "tag", "ep-beta-v2.0.0")
    assert_refused(repo, capsys, "comps/beta/VERSION 1.0.0 is older than the released ep-beta-v2.0.0")


# --------------------------------------------------------------------------------------
# the index dies mid-release


def test_killing_the_index_mid_release_then_rerunning_converges(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = repo.build_and_test()
    real = publish.twine_upload
    calls: list[str] = []

    def upload_then_kill(index: Any, wheel: Path, bundle: Path) -> None:
        calls.append(wheel.name)
        real(index, wheel, bundle)
        if len(calls) == 1:
            assert index.local is not None
            os.kill(index.local.pid, signal.SIGKILL)  # the index dies after the first upload

    monkeypatch.setattr(release_mod, "twine_upload", upload_then_kill)
    rc, _, err = release(repo, capsys)
    assert rc == ExitCode.PUBLISH
    assert "re-run" in err or "cannot reach the index" in err
    assert repo.tags() == []  # no tag before everything is published

    rc, out, err = release(repo, capsys)  # restarts the index and completes
    assert rc == 0, err
    assert "already published" in out and "uploaded" in out
    files = listing(repo)
    assert sorted(files) == sorted([w.name for w in wheels.values()] + [w.name + ".asc" for w in wheels.values()])
    assert all(files[w.name] == sha256_file(w) for w in wheels.values())
    assert sorted(repo.tags()) == ["alpha-v1.0.0", "ep-beta-v1.0.0"]


def test_a_torn_upload_on_the_local_index_is_redone(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    wheels = repo.build_and_test()
    idx = start_local_index(repo.layout.index_state, quiet=True)
    beta = wheels["beta"]
    (idx.packages / beta.name).write_bytes(beta.read_bytes()[:100])  # killed while writing the file
    rc, _, err = release(repo, capsys)
    assert rc == 0, err
    files = listing(repo)
    assert files[beta.name] == sha256_file(beta) and beta.name + ".asc" in files
    assert len(files) == 4


def test_stop_index(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    start_local_index(repo.layout.index_state, quiet=True)
    rc, out, _ = release(repo, capsys, "--stop-index")
    assert rc == 0 and "stopped the local index" in out
    assert running_index(repo.layout.index_state) is None


# --------------------------------------------------------------------------------------
# the performance gate (pipeline.perf): a benchmark record against the last release's on this machine


def _bench(repo: Repo, wheel: Path, median_ms: float, rss_mb: float = 200.0) -> None:
    """What `nox -s bench` leaves for a wheel: its benchmark record on this machine."""
    figures = [{"model": "light_resnet50", "threads": t, "median_ms": median_ms * (2.0 if t == 1 else 1.0),
                "min_ms": median_ms * 0.9, "peer_ms": 28.0, "peak_rss_mb": rss_mb} for t in (1, 2)]  # fmt: skip
    rec = perf.make_record(wheel=wheel, sha256=sha256_file(wheel), figures=figures, repeat=10, clock="wall",
                           peer="onnxruntime (fixture)")  # fmt: skip
    perf.write_record(repo.layout.bench_records, rec)


def _release_next_alpha(repo: Repo) -> Path:
    (repo.root / "comps" / "alpha" / "VERSION").write_text("1.1.0\n")
    git(repo.root, "commit", "-qam", "alpha 1.1.0")
    wheel = repo.build("alpha", salt="1.1")
    repo.test(wheel)
    return wheel


def _gate_record(repo: Repo, wheel: Path) -> tuple[dict[str, Any], list[str]]:
    env = json.loads((repo.layout.work / "release" / "staging" / f"{wheel.name}.provenance.dsse.json").read_text())
    statement = json.loads(base64.b64decode(env["payload"]))
    params = statement["predicate"]["buildDefinition"]["externalParameters"]
    return params["release_gate"], params["invocation"]


def test_a_slower_benchmark_than_the_last_release_is_refused_and_one_within_the_threshold_released(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    wheels = repo.build_and_test()
    _bench(repo, wheels["alpha"], 30.0)
    rc, out, err = release(repo, capsys)
    assert rc == 0, err
    assert f"[performance] {wheels['alpha'].name}: no baseline" in out
    wheel = _release_next_alpha(repo)

    assert_refused(repo, capsys, "fixture-alpha 1.0.0 was benchmarked on this machine", "run `nox -s bench`")
    _bench(repo, wheel, 34.5)  # +15 % at 2 threads, +15 % at 1 thread
    assert_refused(
        repo, capsys, "performance regression on this machine",
        "light_resnet50 at 2 threads: median latency 34.500 ms vs 30.000 ms in 1.0.0 (+15.0 %, threshold 10 %)",
        "light_resnet50 at 1 thread: median latency 69.000 ms vs 60.000 ms in 1.0.0 (+15.0 %, threshold 10 %)",
    )  # fmt: skip
    _bench(repo, wheel, 30.0, rss_mb=300.0)  # the same speed, 50 % more memory
    assert_refused(repo, capsys, "peak RSS 300.000 MB vs 200.000 MB in 1.0.0 (+50.0 %, threshold 25 %)")

    _bench(repo, wheel, 32.5, rss_mb=210.0)  # +8.3 %, +5 %: within
    rc, out, err = release(repo, capsys)
    assert rc == 0, err
    assert "fixture_alpha-1.1.0" in "".join(listing(repo))
    gate_record, invocation = _gate_record(repo, wheel)
    verdict = gate_record["performance"]
    assert (verdict["status"], verdict["baseline_version"]) == ("passed", "1.0.0")
    assert "--allow-perf-regression" not in invocation


def test_allow_perf_regression_releases_and_the_provenance_says_so(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    wheels = repo.build_and_test()
    _bench(repo, wheels["alpha"], 30.0)
    assert release(repo, capsys)[0] == 0
    wheel = _release_next_alpha(repo)
    _bench(repo, wheel, 45.0)
    rc, out, err = release(repo, capsys, "--allow-perf-regression")
    assert rc == 0, err
    assert f"[performance] {wheel.name}: overridden" in out
    gate_record, invocation = _gate_record(repo, wheel)
    assert invocation[-1] == "--allow-perf-regression"
    assert gate_record["performance"]["status"] == "overridden"
    assert "light_resnet50 at 2 threads: median latency 45.000 ms vs 30.000 ms in 1.0.0 (+50.0 %, threshold 10 %)" in (
        gate_record["performance"]["regressions"]
    )
