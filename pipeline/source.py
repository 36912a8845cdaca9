"""The source side of a release: git commit, dirty state, and component release tags.

Release tags are ``<tag_prefix>-v<version>`` (``core-v0.1.0``, ``ep-dnnl-v0.3.1``). A component whose
files changed since the tag of its current version must get a new VERSION before it is released again;
a VERSION lower than an already released one is refused. Tags are created locally and never pushed.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import EnvironmentProblem
from .versions import version_tuple


class NotAGitCheckout(Exception):
    pass


def git(root: Path, *args: str) -> str:
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise EnvironmentProblem("git is not installed (apt-get install git)") from None
    if proc.returncode != 0:
        raise NotAGitCheckout(proc.stderr.strip() or f"git {' '.join(args)} exited with {proc.returncode}")
    return proc.stdout


@dataclass(frozen=True, kw_only=True)
class SourceInfo:
    repository: str  #: remote URL of origin, else file:// URL of the checkout
    commit: str
    dirty: bool  #: uncommitted changes anywhere in the checkout
    component_dirty: bool  #: uncommitted changes inside the component's folder


def source_info(root: Path, component_path: str) -> SourceInfo:
    commit = git(root, "rev-parse", "HEAD").strip()
    try:
        repo = git(root, "remote", "get-url", "origin").strip()
    except NotAGitCheckout:
        repo = root.resolve().as_uri()
    return SourceInfo(
        repository=repo,
        commit=commit,
        dirty=bool(git(root, "status", "--porcelain").strip()),
        component_dirty=bool(git(root, "status", "--porcelain", "--", component_path).strip()),
    )


def released_versions(root: Path, tag_prefix: str) -> dict[str, str]:
    """version → tag for every release tag of a component."""
    pattern = re.compile(rf"^{re.escape(tag_prefix)}-v(\d+\.\d+\.\d+)$")
    out = {}
    for line in git(root, "tag", "--list", f"{tag_prefix}-v*").split():
        m = pattern.match(line)
        if m:
            out[m.group(1)] = line
    return out


def changed_since(root: Path, tag: str, path: str) -> list[str]:
    """Files under ``path`` that differ between ``tag`` and the working tree (tracked and untracked)."""
    diff = git(root, "diff", "--name-only", tag, "--", path).split("\n")
    untracked = git(root, "ls-files", "--others", "--exclude-standard", "--", path).split("\n")
    return sorted({f for f in diff + untracked if f})


@dataclass(frozen=True, kw_only=True)
class VersionCheck:
    tag: str
    ok: bool
    tag_exists: bool
    reason: str


def check_version(root: Path, *, name: str, path: str, tag_prefix: str, version: str) -> VersionCheck:
    """May this component be released at ``version``? (see the module docstring)."""
    tag = f"{tag_prefix}-v{version}"
    released = released_versions(root, tag_prefix)
    if version in released:
        changed = changed_since(root, tag, path)
        if changed:
            more = f", +{len(changed) - 3} more" if len(changed) > 3 else ""
            return VersionCheck(
                tag=tag,
                ok=False,
                tag_exists=True,
                reason=f"{name} changed since its release {tag} ({', '.join(changed[:3])}{more}):"
                f" write a new version into {path}/VERSION",
            )
        return VersionCheck(tag=tag, ok=True, tag_exists=True, reason=f"unchanged since {tag}")
    newer = sorted((v for v in released if version_tuple(v) > version_tuple(version)), key=version_tuple)
    if newer:
        return VersionCheck(
            tag=tag,
            ok=False,
            tag_exists=False,
            reason=f"{path}/VERSION {version} is older than the released {released[newer[-1]]}: versions only go up",
        )
    return VersionCheck(tag=tag, ok=True, tag_exists=False, reason=f"new version; tag {tag} is created on release")


def create_tag(root: Path, tag: str) -> None:
    """A lightweight tag at HEAD (local only)."""
    git(root, "tag", tag, "HEAD")
