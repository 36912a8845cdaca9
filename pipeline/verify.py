"""Consumer-side verification of a wheel: what a downstream user (and the release itself) checks.

For a wheel and its release bundle (``<wheel>.asc``, see :mod:`pipeline.attest`):

1. every envelope is signed by a key of the trust root (the report names the key and the root);
2. every statement's subject is the wheel's file name and its exact sha256;
3. the provenance is SLSA v1 with the source commit, the matrix cell and the build's input hash;
4. the test attestation says "passed", with a passing record for every required Python;
5. the SBOM's subject is the wheel and its native-library hashes match the wheel's contents.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import attest
from .errors import VerificationError
from .sbom import check_sbom_against_wheel
from .signing import TrustRoot, Verified, verify_envelope


@dataclass(frozen=True, kw_only=True)
class Verdict:
    wheel: str
    sha256: str
    problems: tuple[str, ...] = ()
    signer: str | None = None  #: "<keyid> (<name>) via <trust file>"
    commit: str | None = None
    cell: str | None = None
    tested: tuple[str, ...] = field(default_factory=tuple)  #: Pythons with a passing record

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        if not self.ok:
            return f"REJECTED {self.wheel}: " + "; ".join(self.problems)
        return (
            f"OK {self.wheel} sha256 {self.sha256[:16]}…: signed by {self.signer}; built from {self.commit}"
            f" as {self.cell}; tests passed on CPython {', '.join(self.tested)}"
        )


def _statement(verified: Verified, wheel_name: str, sha256: str, predicate_type: str, kind: str) -> dict[str, Any]:
    try:
        stmt = json.loads(verified.payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise VerificationError(f"{kind}: the signed payload is not JSON") from None
    if not isinstance(stmt, dict) or stmt.get("_type") != attest.STATEMENT_TYPE:
        raise VerificationError(f"{kind}: not an in-toto Statement v1")
    if stmt.get("predicateType") != predicate_type:
        raise VerificationError(f"{kind}: predicateType is {stmt.get('predicateType')!r}, expected {predicate_type}")
    subjects = stmt.get("subject")
    if not isinstance(subjects, list) or not subjects:
        raise VerificationError(f"{kind}: the statement has no subject")
    digests = [s.get("digest", {}).get("sha256") for s in subjects if isinstance(s, dict)]
    if sha256 not in digests:
        raise VerificationError(
            f"{kind}: subject digest {', '.join(str(d)[:16] for d in digests)}… does not match the wheel's sha256"
            f" {sha256[:16]}… (the wheel was modified after it was attested)"
        )
    if not any(isinstance(s, dict) and s.get("name") == wheel_name for s in subjects):
        raise VerificationError(f"{kind}: the subject names another file, not {wheel_name}")
    predicate = stmt.get("predicate")
    if not isinstance(predicate, dict):
        raise VerificationError(f"{kind}: the statement has no predicate")
    return predicate


def _require(data: dict[str, Any], dotted: str, kind: str) -> Any:
    cur: Any = data
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur or cur[part] in (None, ""):
            raise VerificationError(f"{kind}: invalid provenance, {dotted} is missing")
        cur = cur[part]
    return cur


def check_provenance(predicate: dict[str, Any]) -> tuple[str, str]:
    """(commit, cell id) of a valid SLSA v1 provenance predicate."""
    kind = "provenance"
    if _require(predicate, "buildDefinition.buildType", kind) != attest.BUILD_TYPE:
        raise VerificationError(f"{kind}: buildType is not {attest.BUILD_TYPE}")
    for key in ("component", "variant", "target", "dist", "version"):
        _require(predicate, f"buildDefinition.externalParameters.cell.{key}", kind)
    commit = _require(predicate, "buildDefinition.externalParameters.source.commit", kind)
    _require(predicate, "buildDefinition.externalParameters.source.repository", kind)
    _require(predicate, "buildDefinition.internalParameters.input_hash", kind)
    _require(predicate, "buildDefinition.internalParameters.toolchain", kind)
    deps = _require(predicate, "buildDefinition.resolvedDependencies", kind)
    if not any(isinstance(d, dict) and d.get("digest", {}).get("gitCommit") == commit for d in deps):
        raise VerificationError(f"{kind}: resolvedDependencies does not pin the source commit {commit}")
    _require(predicate, "runDetails.builder.id", kind)
    dirty = predicate["buildDefinition"]["externalParameters"]["source"].get("component_dirty")
    cell = str(predicate["buildDefinition"]["externalParameters"]["cell"].get("id"))
    return str(commit) + (" (with uncommitted changes)" if dirty else ""), cell


def check_test_result(predicate: dict[str, Any], required: Sequence[str] | None) -> tuple[str, ...]:
    records = predicate.get("records")
    if predicate.get("result") != "passed" or not isinstance(records, list) or not records:
        raise VerificationError(f"test attestation: result is {predicate.get('result')!r}, not 'passed'")
    failed = [r.get("python") for r in records if r.get("outcome") != "passed"]
    if failed:
        raise VerificationError(f"test attestation: tests did not pass on CPython {', '.join(map(str, failed))}")
    tested = tuple(str(r.get("python")) for r in records)
    want = list(required) if required is not None else list(predicate.get("required_pythons", []))
    missing = [p for p in want if p not in tested]
    if missing:
        raise VerificationError(f"test attestation: no passing record for required CPython {', '.join(missing)}")
    return tested


def verify_wheel(
    wheel_name: str,
    data: bytes,
    bundle: bytes | None,
    trust: TrustRoot,
    *,
    required_pythons: Sequence[str] | None = None,
) -> Verdict:
    """Check a wheel's bytes against its release bundle; every problem found is listed."""
    sha = hashlib.sha256(data).hexdigest()
    if bundle is None:
        return Verdict(
            wheel=wheel_name,
            sha256=sha,
            problems=(f"no release bundle ({wheel_name}{attest.BUNDLE_SUFFIX}): the wheel is unsigned",),
        )
    problems: list[str] = []
    try:
        envelopes = attest.parse_bundle(bundle)
    except VerificationError as exc:
        return Verdict(wheel=wheel_name, sha256=sha, problems=(str(exc),))
    signer = commit = cell = None
    tested: tuple[str, ...] = ()
    predicates: dict[str, dict[str, Any]] = {}
    for kind, ptype in attest.KINDS.items():
        try:
            verified = verify_envelope(envelopes[kind], trust, expected_type=attest.PAYLOAD_TYPE)
            predicates[kind] = _statement(verified, wheel_name, sha, ptype, kind)
            if kind == "provenance":
                k = verified.key
                signer = f"{k.keyid[:16]} ({k.name}) via {k.root}"
        except VerificationError as exc:
            msg = str(exc)
            problems.append(msg if msg.startswith(kind) else f"{kind}: {msg}")
    try:
        if "provenance" in predicates:
            commit, cell = check_provenance(predicates["provenance"])
        if "test" in predicates:
            tested = check_test_result(predicates["test"], required_pythons)
    except VerificationError as exc:
        problems.append(str(exc))
    if "sbom" in predicates:
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                problems += [f"sbom: {p}" for p in check_sbom_against_wheel(predicates["sbom"], zf, sha)]
        except zipfile.BadZipFile:
            problems.append("the wheel is not a readable zip file")
    return Verdict(
        wheel=wheel_name, sha256=sha, problems=tuple(problems), signer=signer, commit=commit, cell=cell, tested=tested
    )


def verify_file(wheel: Path, trust: TrustRoot, *, bundle: Path | None = None) -> Verdict:
    """A wheel file, with its bundle next to it (``<wheel>.asc``) unless given."""
    bundle = bundle or wheel.with_name(wheel.name + attest.BUNDLE_SUFFIX)
    return verify_wheel(wheel.name, wheel.read_bytes(), bundle.read_bytes() if bundle.is_file() else None, trust)
