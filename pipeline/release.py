"""The release step: gate → attest → sign → verify as a consumer → publish → tag.

1. **Gate** (nothing is signed or uploaded unless every artifact passes). It works on what the earlier
   stages passed along — the :class:`~pipeline.build.BuildReport` (each cell's wheel and its
   :class:`~pipeline.records.BuildRecord`, whose input hash the build step has just confirmed is the current
   one) and the :class:`~pipeline.wheeltest.TestReport` (a passing row per tested CPython found here, made
   with the current wheel suite) — and re-reads from disk only the wheel bytes, to bind all of it to their
   sha256. A version that may be released (:func:`pipeline.source.check_version`).
2. **Stage**: the wheel is copied to the staging folder and re-hashed; provenance, test attestation and
   SBOM are signed as DSSE envelopes and bundled into ``<wheel>.asc``.
3. **Verify** every staged wheel as a consumer would (:mod:`pipeline.verify`) against the trust roots.
4. **Index check**: what the index holds is read from its listing. A file with the same name and other
   bytes is refused (never overwritten); files already published are skipped; interrupted uploads on the
   managed local index are removed and redone. All of this is decided before the first upload.
5. **Publish**: ``twine check``, then one ``twine upload <wheel> <wheel>.asc`` per wheel, core first; each is
   confirmed by reading the listing again.
6. **Tag**: ``<component>-v<version>`` at HEAD for each component released at a new version (skipped for a
   component with uncommitted changes, which is said).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import attest, hashing, perf
from .build import BuildReport
from .errors import PublishError, ReleaseRefused
from .index import fetch, list_files
from .layout import Layout
from .matrix import Cell, Component
from .publish import Index, bundle_name, index_state, repair_local, twine_check, twine_upload
from .records import BuildRecord, TestRecord
from .sbom import wheel_sbom
from .signing import Signer, TrustRoot
from .source import NotAGitCheckout, SourceInfo, VersionCheck, check_version, create_tag, source_info
from .verify import verify_file, verify_wheel
from .wheeltest import TestReport


@dataclass(frozen=True, kw_only=True)
class Artifact:
    wheel: Path
    sha256: str  #: of the bytes on disk now (re-read by the gate)
    cell: Cell
    build: BuildRecord  #: what the build step recorded for this cell


@dataclass(frozen=True, kw_only=True)
class Gated:
    artifact: Artifact
    problems: tuple[str, ...]
    records: tuple[TestRecord, ...] = ()
    version: VersionCheck | None = None
    source: SourceInfo | None = None
    performance: perf.PerfVerdict | None = None


@dataclass(frozen=True, kw_only=True)
class ReleaseOptions:
    tag: bool = True
    allow_dirty: bool = False
    quiet: bool = False
    invocation: tuple[str, ...] = ("python", "-m", "pipeline", "release")
    perf_thresholds: perf.Thresholds = field(default_factory=perf.Thresholds)
    allow_perf_regression: bool = False
    machine: perf.Machine | None = None  #: None: this machine


@dataclass(frozen=True, kw_only=True)
class ReleaseRow:
    wheel: str
    sha256: str
    status: str  #: uploaded / already published
    tag: str
    tag_status: str


@dataclass(frozen=True, kw_only=True)
class ReleaseResult:
    index: str
    rows: tuple[ReleaseRow, ...] = field(default_factory=tuple)

    def to_json(self) -> str:
        return json.dumps({"schema": 1, "index": self.index, "rows": [asdict(r) for r in self.rows]}, indent=2) + "\n"


def _say(opts: ReleaseOptions, line: str) -> None:
    if not opts.quiet:
        print(line, flush=True)


# --------------------------------------------------------------------------------------
# 1. gate: what the build and test steps passed along, checked against the bytes on disk


def artifacts_of(report: BuildReport) -> tuple[list[Artifact], list[str]]:
    """The wheel of every cell the build step reports current, re-hashed from disk; and the cells without one."""
    artifacts: list[Artifact] = []
    missing: list[str] = []
    for c in report.cells:
        if c.status in ("stale", "failed"):
            missing.append(f"{c.cell.id}: {c.reason}")
        elif c.status in ("built", "up-to-date") and c.wheel is not None and c.record is not None:
            sha = hashing.sha256_file(c.wheel) if c.wheel.is_file() else "missing"
            artifacts.append(Artifact(wheel=c.wheel, sha256=sha, cell=c.cell, build=c.record))
    artifacts.sort(key=lambda a: (a.cell.component.kind != "core", a.wheel.name))
    return artifacts, missing


def check_tests(tests: TestReport, sha256: str) -> tuple[list[str], list[TestRecord]]:
    """Problems with a digest's test results on the CPythons the test step found, and its passing records."""
    if not tests.pythons:
        return ["no tested CPython is available on this machine to require a test record for"], []
    rows = {r.python: r for r in tests.rows_for(sha256)}
    problems: list[str] = []
    records: list[TestRecord] = []
    for py in tests.pythons:
        row = rows.get(py.version)
        rec = row.test_record if row else None
        if row is not None and row.ok and rec is not None:
            records.append(rec)
        elif rec is None:
            problems.append(
                f"no test record for its sha256 {sha256[:16]}… on CPython {py.version}: never tested, or its bytes"
                " changed after testing (run `nox -s test`)"
            )
        elif rec.outcome == "passed":
            problems.append(f"tested on CPython {py.version} with an older wheel suite (run `nox -s test`)")
        else:
            problems.append(f"its test record on CPython {py.version} says {rec.outcome} ({rec.reason or 'failed'})")
    return problems, sorted(records, key=lambda r: r.python)


def check_build(art: Artifact) -> list[str]:
    """The bytes are the ones the build recorded (the build step has just confirmed its inputs are current)."""
    if art.sha256 != art.build.sha256:
        return [
            f"its bytes (sha256 {art.sha256[:16]}…) are not the ones the build of {art.cell.id} recorded"
            f" ({art.build.sha256[:16]}…): it was changed after the build, so no provenance can be made (rebuild)"
        ]
    return []


def gate(
    build: BuildReport, tests: TestReport, layout: Layout, opts: ReleaseOptions, *, external_index: bool
) -> tuple[list[Gated], list[str]]:
    """Each current wheel with its problems (none: it may be released), and the cells that have no wheel."""
    artifacts, missing = artifacts_of(build)
    out = []
    versions: dict[str, tuple[VersionCheck | None, SourceInfo | None, str | None]] = {}
    stale = [c.cell.component for c in build.cells if c.status == "stale"]
    for comp in {c.name: c for c in stale}.values():  # a stale cell may also need a new VERSION: say both
        versions[comp.name] = _version_and_source(layout.root, comp)
        vc, _, vproblem = versions[comp.name]
        if vproblem or (vc is not None and not vc.ok):
            missing.append(f"{comp.name}: {vproblem or (vc.reason if vc else '')}")
    machine = opts.machine or perf.this_machine()  # read once: every wheel is gated on this machine
    for art in artifacts:
        comp = art.cell.component
        problems, records = check_tests(tests, art.sha256)
        problems = check_build(art) + problems
        if comp.name not in versions:
            versions[comp.name] = _version_and_source(layout.root, comp)
        vc, src, vproblem = versions[comp.name]
        if vproblem:
            problems.append(vproblem)
        elif vc is not None and not vc.ok:
            problems.append(vc.reason)
        if src is not None and src.component_dirty and external_index and not opts.allow_dirty:
            problems.append(
                f"{comp.path} has uncommitted changes: commit them (or --allow-dirty)"
                " before releasing to a shared index"
            )
        verdict = check_performance(art, layout, opts, machine)
        problems += verdict.problems
        out.append(
            Gated(
                artifact=art, problems=tuple(problems), records=tuple(records), version=vc, source=src,
                performance=verdict,
            )
        )  # fmt: skip
    return out, missing


def check_performance(art: Artifact, layout: Layout, opts: ReleaseOptions, machine: perf.Machine) -> perf.PerfVerdict:
    """The wheel's benchmark record on `machine` against the last released version's (pipeline.perf)."""
    dist, version = perf.wheel_identity(art.wheel.name)
    try:
        return perf.check(
            layout.bench_records, dist=dist, version=version, sha256=art.sha256, machine=machine,
            thresholds=opts.perf_thresholds, override=opts.allow_perf_regression,
        )  # fmt: skip
    except ValueError as exc:  # an unreadable record or baseline: say which
        return perf.PerfVerdict(status="not benchmarked", machine=machine.fingerprint, detail=str(exc))


def _version_and_source(root: Path, comp: Component) -> tuple[VersionCheck | None, SourceInfo | None, str | None]:
    try:
        vc = check_version(root, name=comp.name, path=comp.path, tag_prefix=comp.tag_prefix, version=comp.version)
        return vc, source_info(root, comp.path), None
    except NotAGitCheckout as exc:
        return None, None, f"{root} is not a git checkout with a commit: versions and provenance need one ({exc})"


def raise_refused(gated: Sequence[Gated], missing: Sequence[str]) -> None:
    bad = [g for g in gated if g.problems]
    if not bad and not missing:
        return
    lines = [f"{g.artifact.wheel.name}: " + "; ".join(g.problems) for g in bad] + list(missing)
    raise ReleaseRefused(f"release refused, nothing was uploaded — {len(lines)} problem(s): " + " | ".join(lines))


# --------------------------------------------------------------------------------------
# 2-3. stage and verify


@dataclass(frozen=True, kw_only=True)
class Staged:
    artifact: Artifact
    wheel: Path
    bundle: Path


def stage(
    gated: Sequence[Gated], layout: Layout, signer: Signer, opts: ReleaseOptions, *, required: Sequence[str]
) -> list[Staged]:
    folder = layout.work / "release" / "staging"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    out = []
    for g in gated:
        art = g.artifact
        assert g.source is not None
        wheel = folder / art.wheel.name
        shutil.copy2(art.wheel, wheel)
        if hashing.sha256_file(wheel) != art.sha256:
            raise ReleaseRefused(f"{art.wheel.name} changed while the release was running; nothing was uploaded")
        gate_record = {"performance": g.performance.to_dict()} if g.performance is not None else {}
        prov = attest.provenance(
            wheel.name, art.sha256, cell=art.cell, source=g.source, build=art.build, invocation=opts.invocation,
            release_gate=gate_record,
        )  # fmt: skip
        test = attest.test_result(wheel.name, art.sha256, records=g.records, required=required)
        bom_json = wheel_sbom(wheel, art.sha256)
        (folder / f"{wheel.name}.cdx.json").write_text(bom_json, encoding="utf-8")
        sbom = attest.statement(wheel.name, art.sha256, attest.CYCLONEDX, json.loads(bom_json))
        envelopes = {
            "provenance": attest.sign_statement(signer, prov),
            "test": attest.sign_statement(signer, test),
            "sbom": attest.sign_statement(signer, sbom),
        }
        for kind, env in envelopes.items():
            (folder / f"{wheel.name}.{kind}.dsse.json").write_text(json.dumps(env.to_dict(), indent=1) + "\n")
        bundle = folder / bundle_name(wheel.name)
        bundle.write_bytes(attest.bundle_bytes(wheel.name, art.sha256, envelopes))
        out.append(Staged(artifact=art, wheel=wheel, bundle=bundle))
    return out


def verify_staged(staged: Sequence[Staged], trust: TrustRoot, opts: ReleaseOptions) -> None:
    bad = []
    for s in staged:
        verdict = verify_file(s.wheel, trust, bundle=s.bundle)
        if not verdict.ok:
            bad.append(f"{s.wheel.name}: " + "; ".join(verdict.problems))
        else:
            _say(opts, f"[verify] {verdict.summary()}")
    if bad:
        raise ReleaseRefused("release refused at the consumer check, nothing was uploaded — " + " | ".join(bad))


# --------------------------------------------------------------------------------------
# 4-6. index, publish, tag


def plan_uploads(staged: Sequence[Staged], index: Index, trust: TrustRoot) -> tuple[list[Staged], list[Staged]]:
    """(to upload, already published); conflicts raise before anything is uploaded."""
    listings: dict[str, dict[str, Any]] = {}
    upload: list[Staged] = []
    done: list[Staged] = []
    conflicts: list[str] = []
    repairs: list[str] = []
    for s in staged:
        dist = s.artifact.cell.dist
        if dist not in listings:
            listings[dist] = list_files(index.simple_url, dist)
        listing = listings[dist]
        bundle_ok: bool | None = None
        remote_bundle = listing.get(bundle_name(s.wheel.name))
        if remote_bundle is not None and s.wheel.name in listing:
            data = fetch(remote_bundle.url)
            bundle_ok = data is not None and verify_wheel(s.wheel.name, s.wheel.read_bytes(), data, trust).ok
        st = index_state(s.wheel, s.artifact.sha256, listing, bundle_ok)
        if st.state == "published":
            done.append(s)
        elif st.state == "absent":
            if remote_bundle is not None:  # a bundle left without its wheel
                repairs.append(bundle_name(s.wheel.name))
            upload.append(s)
        elif st.state == "conflict":
            conflicts.append(st.detail)
        else:  # torn or unsigned: an interrupted upload of our own files
            repairs += [s.wheel.name] + ([bundle_name(s.wheel.name)] if remote_bundle is not None else [])
            upload.append(s)
    if conflicts:
        raise ReleaseRefused("release refused, nothing was uploaded — " + " | ".join(conflicts))
    if repairs:
        if index.local is None:
            raise PublishError(
                f"the index holds incomplete uploads ({', '.join(repairs)}): remove them there, then re-run"
            )
        repair_local(index.local, repairs)
    return upload, done


def publish(
    gated: Sequence[Gated],
    layout: Layout,
    *,
    signer: Signer,
    trust: TrustRoot,
    index: Index,
    opts: ReleaseOptions,
    required: Sequence[str],
) -> ReleaseResult:
    """Steps 2-6 for artifacts that passed the gate (``required``: the CPythons whose test records they carry)."""
    try:
        staged = stage(gated, layout, signer, opts, required=required)
    except OSError as exc:  # disk full, quota, read-only: nothing is uploaded and no half-staged file is kept
        shutil.rmtree(layout.work / "release" / "staging", ignore_errors=True)
        raise ReleaseRefused(f"staging failed ({exc}); nothing was uploaded — fix it and re-run the release") from None
    verify_staged(staged, trust, opts)
    upload, done = plan_uploads(staged, index, trust)
    if upload:
        twine_check([s.wheel for s in upload])
    status = {s.wheel.name: "already published" for s in done}
    for s in upload:
        _say(opts, f"[publish] uploading {s.wheel.name} + {s.bundle.name} to {index.simple_url}")
        twine_upload(index, s.wheel, s.bundle)
        listing = list_files(index.simple_url, s.artifact.cell.dist)
        got = listing.get(s.wheel.name)
        if got is None or (got.sha256 is not None and got.sha256 != s.artifact.sha256):
            raise PublishError(f"{s.wheel.name} was uploaded but the index does not list it with our sha256")
        status[s.wheel.name] = "uploaded"
    for g in gated:  # published: its benchmark records become the baselines of the next release
        perf.remember_release(layout.bench_records, g.artifact.sha256)
    rows = []
    tagged: dict[str, str] = {}
    for g in gated:
        comp = g.artifact.cell.component
        if comp.name not in tagged:
            tagged[comp.name] = _tag(layout.root, comp, g, opts)
        rows.append(
            ReleaseRow(
                wheel=g.artifact.wheel.name,
                sha256=g.artifact.sha256,
                status=status[g.artifact.wheel.name],
                tag=comp.tag,
                tag_status=tagged[comp.name],
            )
        )
    return ReleaseResult(index=index.simple_url, rows=tuple(rows))


def _tag(root: Path, comp: Component, g: Gated, opts: ReleaseOptions) -> str:
    if g.version is not None and g.version.tag_exists:
        return "exists"
    if not opts.tag:
        return "not created (--no-tag)"
    if g.source is not None and g.source.component_dirty:
        return "not created: uncommitted changes in " + comp.path
    create_tag(root, comp.tag)
    return "created"
