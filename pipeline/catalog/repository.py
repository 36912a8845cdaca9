"""The EP catalog as a TUF repository on disk (python-tuf's metadata API), served as static files.

Layout of ``<folder>`` (consistent snapshots):
    metadata/N.root.json, N.targets.json, N.certified.json, N.uncertified.json, N.snapshot.json, timestamp.json
    targets/<dir>/<sha256>.<name>                     (the target ``<dir>/<name>``)

The top-level targets role lists no targets itself; it delegates ``certified/…`` to ``certified`` (the
release's own EPs) and ``uncertified/…`` to ``uncertified`` (a third party's key), both terminating. Target
paths are ``<role>/<ep>/<platform>/<file>`` (TUF path patterns match one segment per ``*``). Each
delegated role also signs ``<role>/index.json``, the list of its targets, so a client can enumerate the
catalog through verified downloads only.

Writes happen in the order targets → delegated role → top-level targets → snapshot → timestamp, each file
atomically: a client reading at any moment sees the previous catalog or the next one.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

from securesystemslib.signer import Key
from tuf.api.metadata import (
    DelegatedRole,
    Delegations,
    Metadata,
    MetaFile,
    Root,
    Snapshot,
    TargetFile,
    Targets,
    Timestamp,
)
from tuf.api.serialization.json import JSONSerializer

from ..errors import EnvironmentProblem, UsageError
from .trust import DELEGATED_ROLES, KEY_ENV_PREFIX, CatalogConfig, RoleSigner, role_signers

T = TypeVar("T", Root, Snapshot, Targets, Timestamp)
ROOT_ENV = "MOSAICRT_CATALOG_ROOT"  #: a root metadata file signed offline, to seed a fresh repository (CI)
INDEX_NAME = "index.json"
_SERIALIZER = JSONSerializer(compact=False)


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True, kw_only=True)
class NewTarget:
    """A file to publish under a delegated role: ``path`` like ``certified/<ep>/<platform>/<file>``."""

    path: str
    data: bytes
    custom: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class PublishedTarget:
    path: str
    sha256: str
    length: int
    custom: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class Published:
    changed: bool  #: new metadata versions were written
    targets: tuple[PublishedTarget, ...]  #: every target of the role now (not only the new ones)
    versions: Mapping[str, int]


class Repository:
    def __init__(self, folder: Path, config: CatalogConfig) -> None:
        self.folder = folder
        self.config = config
        self.metadata_dir = folder / "metadata"
        self.targets_dir = folder / "targets"

    # ---- reading

    def _versions(self, role: str) -> list[int]:
        pattern = re.compile(rf"(\d+)\.{re.escape(role)}\.json")
        if not self.metadata_dir.is_dir():
            return []
        return sorted(int(m[1]) for p in self.metadata_dir.iterdir() if (m := pattern.fullmatch(p.name)))

    def path_of(self, role: str, version: int | None = None) -> Path:
        if role == "timestamp":
            return self.metadata_dir / "timestamp.json"
        if version is None:
            versions = self._versions(role)
            if not versions:
                return self.metadata_dir / f"1.{role}.json"
            version = versions[-1]
        return self.metadata_dir / f"{version}.{role}.json"

    def load(self, role: str, kind: type[T]) -> Metadata[T] | None:
        path = self.path_of(role)
        if not path.is_file():
            return None
        md: Metadata[Any] = Metadata.from_bytes(path.read_bytes())
        if not isinstance(md.signed, kind):
            raise EnvironmentProblem(f"{path} is not {kind.__name__} metadata")
        return cast("Metadata[T]", md)

    def root_bytes(self) -> bytes:
        path = self.path_of("root")
        if not path.is_file():
            raise EnvironmentProblem(f"the EP catalog at {self.folder} has no root metadata yet")
        return path.read_bytes()

    # ---- writing

    def _sign_write(self, md: Metadata[Any], signers: Sequence[RoleSigner], role: str) -> None:
        md.signatures.clear()
        for s in signers:
            md.sign(s.signer, append=True)
        _atomic_write(self.path_of(role, md.signed.version), md.to_bytes(_SERIALIZER))

    def _expiry(self, role: str) -> datetime:
        return _now() + timedelta(days=self.config.role(role).expires_days)


# --------------------------------------------------------------------------------------
# root


def sign_root(
    repo: Repository, *, root_signers: Sequence[RoleSigner], online: Mapping[str, Sequence[Key]]
) -> tuple[int, bool]:
    """Write a new root version when the keys or thresholds changed (or the root nears expiry); returns
    (version, written). A new version is signed by the new root keys and, for a rotation, the old ones must
    be among them (a client accepts N+1 only when N's keys signed it)."""
    cfg = repo.config
    old = repo.load("root", Root)
    root = Root(expires=repo._expiry("root"), consistent_snapshot=True)
    for s in root_signers:
        root.add_key(s.signer.public_key, "root")
    for role, keys in online.items():
        for k in keys:
            root.add_key(k, role)
    for role in ("root", "targets", "snapshot", "timestamp"):
        root.roles[role].threshold = cfg.role(role).threshold
    if old is not None:
        same = (
            {r: (sorted(v.keyids), v.threshold) for r, v in old.signed.roles.items()}
            == {r: (sorted(v.keyids), v.threshold) for r, v in root.roles.items()}
        )
        half_life = timedelta(days=cfg.role("root").expires_days / 2)
        if same and old.signed.expires - _now() > half_life:
            return old.signed.version, False
        old_ids = set(old.signed.roles["root"].keyids)
        have = {s.keyid for s in root_signers}
        if len(old_ids & have) < old.signed.roles["root"].threshold:
            raise EnvironmentProblem(
                f"the new catalog root must also be signed by {old.signed.roles['root'].threshold} key(s) of root"
                f" v{old.signed.version}; none of the given root keys is one of them"
            )
        root.version = old.signed.version + 1
    md = Metadata(root)
    repo._sign_write(md, root_signers, "root")
    return root.version, True


def ensure_root(repo: Repository, *, env: Mapping[str, str] | None = None, say: bool = True) -> bytes:
    """The repository's current root metadata. A repository without one gets it here:
    * ``$MOSAICRT_CATALOG_ROOT`` names a root signed offline: it is copied in (CI);
    * otherwise, on a development machine (no ``$MOSAICRT_CATALOG_KEY_*``), the root-signing step runs with
      this machine's development keys, and says so;
    * otherwise it is an error naming the explicit step."""
    env = os.environ if env is None else env
    if repo.path_of("root").is_file() and repo._versions("root"):
        return repo.root_bytes()
    seed = env.get(ROOT_ENV)
    if seed:
        data = Path(seed).read_bytes()
        md = Metadata[Root].from_bytes(data)
        _atomic_write(repo.path_of("root", md.signed.version), data)
        return data
    if any(k.startswith(KEY_ENV_PREFIX) for k in env):
        raise EnvironmentProblem(
            f"the EP catalog at {repo.folder} has no root: sign one offline with `python -m pipeline catalog"
            f" sign-root` and pass it as ${ROOT_ENV}"
        )
    signers = role_signers("root", repo.config.role("root").threshold, create=True, env=env, say=say)
    online = {r: [s.signer.public_key for s in role_signers(r, repo.config.role(r).threshold, create=True, env=env,
                                                             say=say)]
              for r in ("targets", "snapshot", "timestamp")}  # fmt: skip
    version, _ = sign_root(repo, root_signers=signers, online=online)
    if say:
        print(
            f"signed the EP catalog root v{version} with this machine's development root key ({signers[0].origin});"
            " a catalog others trust is rooted offline: `python -m pipeline catalog sign-root`",
            flush=True,
        )
    return repo.root_bytes()


def check_online_keys(repo: Repository, signers: Mapping[str, Sequence[RoleSigner]]) -> None:
    """Every online signer is one the current root lists for its role (else the client would refuse)."""
    root = repo.load("root", Root)
    assert root is not None
    for role, ss in signers.items():
        if role not in root.signed.roles:
            continue
        listed = set(root.signed.roles[role].keyids)
        for s in ss:
            if s.keyid not in listed:
                raise EnvironmentProblem(
                    f"the catalog root v{root.signed.version} does not list the '{role}' key {s.keyid[:16]}…"
                    f" ({s.origin}): re-sign the root with `python -m pipeline catalog sign-root`"
                )


# --------------------------------------------------------------------------------------
# targets, snapshot, timestamp


def _target_file_path(repo: Repository, path: str, sha256: str) -> Path:
    directory, _, name = path.rpartition("/")
    return repo.targets_dir / directory / f"{sha256}.{name}"


def _index_target(role: str, paths: Sequence[str]) -> NewTarget:
    body = json.dumps({"schema": 1, "role": role, "targets": sorted(paths)}, indent=1).encode() + b"\n"
    return NewTarget(path=f"{role}/{INDEX_NAME}", data=body, custom={"kind": "index"})


def _targets_equal(a: Mapping[str, TargetFile], b: Mapping[str, TargetFile]) -> bool:
    return {k: (v.length, v.hashes, v.custom) for k, v in a.items()} == {
        k: (v.length, v.hashes, v.custom) for k, v in b.items()
    }


def _top_targets(repo: Repository, extra_uncertified: Sequence[Key]) -> tuple[Targets, bool]:
    """The top-level targets with both delegations; True if it must be (re)written."""
    old = repo.load("targets", Targets)
    signed = old.signed if old is not None else Targets(expires=repo._expiry("targets"))
    changed = old is None
    if signed.delegations is None or signed.delegations.roles is None:
        signed.delegations = Delegations(keys={}, roles={})
        changed = True
    roles = signed.delegations.roles
    assert roles is not None
    # `uncertified` is delegated once a third-party key is registered (a delegated role without metadata
    # would make every client lookup fail).
    for role in ("certified", *(("uncertified",) if extra_uncertified else ())):
        if role not in roles:
            roles[role] = DelegatedRole(
                name=role, keyids=[], threshold=repo.config.role(role).threshold, terminating=True,
                paths=[f"{role}/*", f"{role}/*/*/*"],
            )  # fmt: skip
            changed = True
    for key in extra_uncertified:
        if key.keyid not in roles["uncertified"].keyids:
            signed.add_key(key, "uncertified")
            changed = True
    return signed, changed


def publish(
    repo: Repository,
    role: str,
    new: Sequence[NewTarget],
    *,
    signers: Mapping[str, Sequence[RoleSigner]],
    delegate_keys: Sequence[Key] = (),
) -> Published:
    """Add (or replace, same path) ``new`` under the delegated ``role`` and publish the next versions.

    ``signers``: for ``role`` itself and for targets/snapshot/timestamp. Nothing is re-signed when the
    role's targets are unchanged, except a timestamp/snapshot past half its validity (kept fresh)."""
    if role not in DELEGATED_ROLES:
        raise UsageError(f"targets are published under a delegated role ({', '.join(DELEGATED_ROLES)}), not {role!r}")
    for t in new:
        parts = t.path.split("/")
        if len(parts) != 4 or parts[0] != role or any(p in ("", ".", "..") for p in parts):
            raise UsageError(f"target path {t.path!r} is not '{role}/<ep>/<platform>/<file>'")
    check_online_keys(repo, signers)
    top, top_changed = _top_targets(repo, delegate_keys if role == "uncertified" else ())
    if role == "certified":
        for s in signers["certified"]:
            if s.keyid not in (top.delegations.roles["certified"].keyids if top.delegations and top.delegations.roles
                               else []):  # fmt: skip
                top.add_key(s.signer.public_key, "certified")
                top_changed = True
    dele = top.delegations.roles.get(role) if top.delegations and top.delegations.roles else None
    if dele is None or (not dele.keyids and role == "uncertified"):
        raise EnvironmentProblem(
            "no third-party key is delegated the 'uncertified' role: the third party's first publication passes"
            " its public key (publish(..., delegate_keys=[key]) with its own signer for the role)"
        )
    old_md = repo.load(role, Targets)
    old_targets = dict(old_md.signed.targets) if old_md is not None else {}
    wanted = {k: v for k, v in old_targets.items() if not k.endswith(f"/{INDEX_NAME}")}
    blobs: dict[str, bytes] = {}
    for t in new:
        tf = TargetFile.from_data(t.path, t.data, ["sha256"])
        tf.unrecognized_fields["custom"] = dict(t.custom)
        wanted[t.path] = tf
        blobs[t.path] = t.data
    index = _index_target(role, list(wanted))
    itf = TargetFile.from_data(index.path, index.data, ["sha256"])
    itf.unrecognized_fields["custom"] = dict(index.custom)
    wanted[index.path] = itf
    blobs[index.path] = index.data
    role_changed = old_md is None or not _targets_equal(old_targets, wanted)

    versions: dict[str, int] = {}
    if role_changed or _near_expiry(old_md, repo, role):
        for path, data in blobs.items():
            dest = _target_file_path(repo, path, wanted[path].hashes["sha256"])
            if not dest.is_file():
                _atomic_write(dest, data)
        signed = Targets(expires=repo._expiry(role), targets=wanted)
        signed.version = (old_md.signed.version + 1) if old_md is not None else 1
        repo._sign_write(Metadata(signed), signers[role], role)
        role_changed = True
    if top_changed or _near_expiry(repo.load("targets", Targets), repo, "targets"):
        old_top = repo.load("targets", Targets)
        top.version = (old_top.signed.version + 1) if old_top is not None else 1
        top.expires = repo._expiry("targets")
        repo._sign_write(Metadata(top), signers["targets"], "targets")
        top_changed = True
    snap_changed = _write_snapshot(repo, signers, force=role_changed or top_changed)
    _write_timestamp(repo, signers, force=snap_changed)
    for r in ("root", "targets", *DELEGATED_ROLES, "snapshot"):
        vs = repo._versions(r)
        if vs:
            versions[r] = vs[-1]
    current = repo.load(role, Targets)
    assert current is not None
    published = tuple(
        PublishedTarget(path=p, sha256=tf.hashes["sha256"], length=tf.length, custom=tf.custom)
        for p, tf in sorted(current.signed.targets.items())
        if not p.endswith(f"/{INDEX_NAME}")
    )
    return Published(changed=role_changed or top_changed or snap_changed, targets=published, versions=versions)


def _near_expiry(md: Metadata[Any] | None, repo: Repository, role: str) -> bool:
    if md is None:
        return True
    return bool(md.signed.expires - _now() < timedelta(days=repo.config.role(role).expires_days / 2))


def _write_snapshot(repo: Repository, signers: Mapping[str, Sequence[RoleSigner]], *, force: bool) -> bool:
    old = repo.load("snapshot", Snapshot)
    meta = {"targets.json": MetaFile(version=repo._versions("targets")[-1])}
    for r in DELEGATED_ROLES:
        vs = repo._versions(r)
        if vs:
            meta[f"{r}.json"] = MetaFile(version=vs[-1])
    same = old is not None and {k: v.version for k, v in old.signed.meta.items()} == {
        k: v.version for k, v in meta.items()
    }
    if same and not force and not _near_expiry(old, repo, "snapshot"):
        return False
    snap = Snapshot(expires=repo._expiry("snapshot"), meta=meta)
    snap.version = (old.signed.version + 1) if old is not None else 1
    repo._sign_write(Metadata(snap), signers["snapshot"], "snapshot")
    return True


def _write_timestamp(repo: Repository, signers: Mapping[str, Sequence[RoleSigner]], *, force: bool) -> None:
    old = repo.load("timestamp", Timestamp)
    if old is not None and not force and not _near_expiry(old, repo, "timestamp"):
        return
    ts = Timestamp(expires=repo._expiry("timestamp"), snapshot_meta=MetaFile(version=repo._versions("snapshot")[-1]))
    ts.version = (old.signed.version + 1) if old is not None else 1
    repo._sign_write(Metadata(ts), signers["timestamp"], "timestamp")


def online_signers(repo: Repository, *, create: bool, env: Mapping[str, str] | None = None,
                   say: bool = True) -> dict[str, list[RoleSigner]]:  # fmt: skip
    """The release's online signers: targets, snapshot, timestamp and certified."""
    return {
        r: role_signers(r, repo.config.role(r).threshold, create=create, env=env, say=say)
        for r in ("targets", "snapshot", "timestamp", "certified")
    }
