"""pipeline.attest + pipeline.sbom + pipeline.verify: statement shapes, SBOM contents, consumer checks."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("cryptography", reason="the release tools are installed by `nox -s ci`")
pytest.importorskip("cyclonedx", reason="the release tools are installed by `nox -s ci`")

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pipeline import attest
from pipeline.errors import VerificationError
from pipeline.hashing import sha256_file
from pipeline.records import Counts, TestRecord, read_build_record
from pipeline.sbom import check_sbom_against_wheel, wheel_sbom
from pipeline.signing import Signer, add_to_trust_file, load_trust
from pipeline.source import SourceInfo
from pipeline.verify import verify_file

from .releasekit import HOST, make_repo, make_wheel


def _record(wheel: Path, python: str, outcome: str = "passed") -> TestRecord:
    return TestRecord(wheel=wheel.name, sha256=sha256_file(wheel), outcome=outcome, python=python,  # type: ignore[arg-type]
                      python_full=python + ".1", platform=HOST, counts=Counts(tests=5), suite_hash="s",
                      created="2026-01-01T00:00:00+00:00", duration_s=1.0, log="/tmp/log")  # fmt: skip


def _statements(tmp_path: Path, outcome: str = "passed") -> tuple[Path, dict[str, dict[str, Any]]]:
    repo = make_repo(tmp_path)
    wheel = repo.build("beta")
    sha = sha256_file(wheel)
    build = read_build_record(repo.layout.state_file(repo.cell("beta").slug))
    assert build is not None
    src = SourceInfo(repository="file:///r", commit="c" * 40, dirty=False, component_dirty=False)
    prov = attest.provenance(wheel.name, sha, cell=repo.cell("beta"), source=src, build=build,
                             invocation=["python", "-m", "pipeline"])  # fmt: skip
    test = attest.test_result(wheel.name, sha, records=[_record(wheel, "3.11", outcome)], required=["3.11"])
    sbom = attest.statement(wheel.name, sha, attest.CYCLONEDX, json.loads(wheel_sbom(wheel, sha)))
    return wheel, {"provenance": prov, "test": test, "sbom": sbom}


def test_provenance_is_an_in_toto_slsa_v1_statement(tmp_path: Path) -> None:
    wheel, st = _statements(tmp_path)
    prov = st["provenance"]
    assert prov["_type"] == "https://in-toto.io/Statement/v1"
    assert prov["subject"] == [{"name": wheel.name, "digest": {"sha256": sha256_file(wheel)}}]
    assert prov["predicateType"] == "https://slsa.dev/provenance/v1"
    bd = prov["predicate"]["buildDefinition"]
    assert bd["externalParameters"]["cell"]["id"] == "beta/default/linux-x86_64"
    assert bd["externalParameters"]["cell"]["kind"] == "ep"
    assert bd["externalParameters"]["source"] == {
        "repository": "file:///r", "commit": "c" * 40, "dirty": False, "component_dirty": False
    }  # fmt: skip
    assert bd["resolvedDependencies"][0]["digest"] == {"gitCommit": "c" * 40}
    assert bd["internalParameters"]["commands"][0].startswith("python -m build --wheel")
    # from the build record, as measured when the build ran: not re-read when the release runs
    tools = bd["internalParameters"]["toolchain"]
    assert tools == {"compiler": "gcc (fixture) 12.2.0", "cmake": "cmake version 3.30.0"}
    assert bd["internalParameters"]["input_hash"] == prov["predicate"]["runDetails"]["metadata"]["invocationId"]
    assert prov["predicate"]["runDetails"]["builder"]["id"]
    assert prov["predicate"]["runDetails"]["metadata"]["startedOn"] == "2026-01-01T00:00:00+00:00"
    assert prov["predicate"]["runDetails"]["metadata"]["finishedOn"] == "2026-01-01T00:01:00+00:00"
    test = st["test"]["predicate"]
    assert test["result"] == "passed" and test["records"][0]["python"] == "3.11" and "log" not in test["records"][0]


def test_sbom_lists_native_libraries_with_hashes(tmp_path: Path) -> None:
    wheel, st = _statements(tmp_path)
    bom = st["sbom"]["predicate"]
    assert bom["bomFormat"] == "CycloneDX" and bom["specVersion"] == "1.6"
    assert bom["metadata"]["component"]["hashes"][0]["content"] == sha256_file(wheel)
    assert bom["metadata"]["component"]["purl"].startswith("pkg:pypi/fixture-beta@1.0.0")
    by_name = {c["name"]: c for c in bom["components"]}
    own = {p["name"]: p["value"] for p in by_name["libbeta.so"]["properties"]}
    bundled = {p["name"]: p["value"] for p in by_name["libhelper-1a2b3c.so.1"]["properties"]}
    assert own == {"mosaicrt:path": "beta/libbeta.so", "mosaicrt:bundled": "false"}
    assert bundled["mosaicrt:bundled"] == "true"
    assert "numpy" in by_name and "not inside the wheel" in by_name["numpy"]["description"]
    with zipfile.ZipFile(wheel) as zf:
        assert check_sbom_against_wheel(bom, zf, sha256_file(wheel)) == []
        by_name["libbeta.so"]["hashes"][0]["content"] = "0" * 64
        assert check_sbom_against_wheel(bom, zf, sha256_file(wheel)) == [
            "the SBOM hash of beta/libbeta.so does not match the wheel"
        ]


def _sign_bundle(tmp_path: Path, wheel: Path, st: dict[str, dict[str, Any]]) -> Any:
    signer = Signer(Ed25519PrivateKey.generate(), "ci", "test")
    add_to_trust_file(tmp_path / "trust.json", signer.public, name="test")
    envs = {k: attest.sign_statement(signer, v) for k, v in st.items()}
    (wheel.parent / (wheel.name + ".asc")).write_bytes(attest.bundle_bytes(wheel.name, sha256_file(wheel), envs))
    return load_trust([tmp_path / "trust.json"])


def test_verify_accepts_a_good_bundle_and_names_the_problems_of_bad_ones(tmp_path: Path) -> None:
    wheel, st = _statements(tmp_path)
    trust = _sign_bundle(tmp_path, wheel, st)
    v = verify_file(wheel, trust)
    assert v.ok, v.problems
    assert v.commit == "c" * 40 and v.cell == "beta/default/linux-x86_64" and v.tested == ("3.11",)

    other = make_wheel(tmp_path / "other", "fixture-beta", "1.0.0", "beta", salt="x")
    (other.parent / (other.name + ".asc")).write_bytes((wheel.parent / (wheel.name + ".asc")).read_bytes())
    bad = verify_file(other, trust)
    assert not bad.ok and len(bad.problems) == 3
    assert all("does not match the wheel's sha256" in p for p in bad.problems)

    (wheel.parent / (wheel.name + ".asc")).unlink()
    assert verify_file(wheel, trust).problems[0].startswith("no release bundle")


def test_a_failed_test_attestation_is_rejected(tmp_path: Path) -> None:
    wheel, st = _statements(tmp_path, outcome="failed")
    v = verify_file(wheel, _sign_bundle(tmp_path, wheel, st))
    assert v.problems == ("test attestation: result is 'failed', not 'passed'",)


def test_bundle_parse_errors() -> None:
    with pytest.raises(VerificationError, match="not JSON"):
        attest.parse_bundle(b"\xff")
    with pytest.raises(VerificationError, match="mediaType"):
        attest.parse_bundle(b'{"mediaType": "x"}')
    with pytest.raises(VerificationError, match="no sbom attestation"):
        attest.parse_bundle(json.dumps({"mediaType": attest.BUNDLE_MEDIA_TYPE, "envelopes": {
            "provenance": {}, "test": {}}}).encode())  # fmt: skip
