"""Attestations about one wheel: in-toto Statement v1 documents, bound to the wheel's sha256.

* provenance — predicate SLSA Provenance v1: source repository + commit + dirty flag, the matrix cell,
  and from the cell's :class:`~pipeline.records.BuildRecord`: its input hash, the commands the build ran,
  the toolchain versions measured during the build, and its start and end times;
* test result — predicate :data:`TEST_RESULT`: every test record of the wheel's exact bytes;
* SBOM — predicate CycloneDX (see :mod:`pipeline.sbom`).

All three are signed as DSSE envelopes (:mod:`pipeline.signing`) and shipped together as one *release
bundle* next to the wheel: ``<wheel>.asc`` — the slot the package upload API has for a file that
accompanies a distribution (twine uploads it in the same request as the wheel).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from .errors import VerificationError
from .matrix import Cell
from .records import BuildRecord, TestRecord
from .signing import Envelope, Signer
from .source import SourceInfo

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
SLSA_PROVENANCE = "https://slsa.dev/provenance/v1"
TEST_RESULT = "https://mosaicrt.dev/test-result/v1"
CYCLONEDX = "https://cyclonedx.org/bom"
BUILD_TYPE = "https://mosaicrt.dev/build/wheel/v1"
BUILDER_ID = "https://mosaicrt.dev/builder/pipeline"
BUNDLE_MEDIA_TYPE = "application/vnd.mosaicrt.release-bundle.v1+json"
BUNDLE_SUFFIX = ".asc"
KINDS = {"provenance": SLSA_PROVENANCE, "test": TEST_RESULT, "sbom": CYCLONEDX}


def statement(wheel_name: str, sha256: str, predicate_type: str, predicate: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": wheel_name, "digest": {"sha256": sha256}}],
        "predicateType": predicate_type,
        "predicate": dict(predicate),
    }


def provenance(
    wheel_name: str,
    sha256: str,
    *,
    cell: Cell,
    source: SourceInfo,
    build: BuildRecord,
    invocation: Sequence[str],
    release_gate: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """SLSA v1 provenance made from the cell's build record: its input hash and inputs, the commands the
    build ran, the toolchain versions it measured while running, and when it started and finished; plus
    what the release gate decided beyond tests (``release_gate``: the performance verdict, and whether
    ``--allow-perf-regression`` overrode it)."""
    comp = cell.component
    predicate = {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": {
                "cell": {
                    "id": cell.id,
                    "component": comp.name,
                    "kind": comp.kind,
                    "variant": cell.variant.name,
                    "target": cell.target.name,
                    "dist": cell.dist,
                    "version": comp.version,
                    "path": comp.path,
                    "cmake_defines": dict(cell.variant.cmake_defines),
                },
                "source": {
                    "repository": source.repository,
                    "commit": source.commit,
                    "dirty": source.dirty,
                    "component_dirty": source.component_dirty,
                },
                "invocation": list(invocation),
                "release_gate": dict(release_gate or {}),
            },
            "internalParameters": {
                "input_hash": build.input_hash,
                "inputs": dict(build.inputs),
                "commands": list(build.commands),
                "toolchain": dict(build.toolchain),
            },
            "resolvedDependencies": [
                {"uri": f"git+{source.repository}@{source.commit}", "digest": {"gitCommit": source.commit}}
            ],
        },
        "runDetails": {
            "builder": {"id": BUILDER_ID},
            "metadata": {"invocationId": build.input_hash, "startedOn": build.started, "finishedOn": build.finished},
        },
    }
    return statement(wheel_name, sha256, SLSA_PROVENANCE, predicate)


def test_result(
    wheel_name: str, sha256: str, *, records: Sequence[TestRecord], required: Sequence[str]
) -> dict[str, Any]:
    rows = []
    for r in records:
        row = asdict(r)
        row.pop("log", None)  # a local path; the counts carry the result
        rows.append(row)
    passed = bool(records) and all(r.outcome == "passed" for r in records)
    predicate = {
        "result": "passed" if passed else "failed",
        "required_pythons": list(required),
        "suite": "tests/wheel",
        "records": rows,
    }
    return statement(wheel_name, sha256, TEST_RESULT, predicate)


def sign_statement(signer: Signer, stmt: Mapping[str, Any]) -> Envelope:
    payload = json.dumps(stmt, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return signer.sign(PAYLOAD_TYPE, payload)


def bundle_bytes(wheel_name: str, sha256: str, envelopes: Mapping[str, Envelope]) -> bytes:
    doc = {
        "mediaType": BUNDLE_MEDIA_TYPE,
        "wheel": wheel_name,
        "sha256": sha256,
        "envelopes": {kind: envelopes[kind].to_dict() for kind in KINDS},
    }
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8")


def parse_bundle(data: bytes) -> dict[str, Envelope]:
    """The envelopes of a release bundle, by kind; a malformed bundle is a :class:`VerificationError`."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise VerificationError("the release bundle is not JSON") from None
    if not isinstance(doc, dict) or doc.get("mediaType") != BUNDLE_MEDIA_TYPE:
        raise VerificationError(f"the release bundle's mediaType is not {BUNDLE_MEDIA_TYPE}")
    envs = doc.get("envelopes")
    if not isinstance(envs, dict):
        raise VerificationError("the release bundle has no envelopes")
    missing = [kind for kind in KINDS if kind not in envs]
    if missing:
        raise VerificationError(f"the release bundle has no {' and no '.join(missing)} attestation")
    return {kind: Envelope.from_dict(envs[kind]) for kind in KINDS}
