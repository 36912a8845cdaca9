"""Publishing with twine, and deciding what an index already holds.

What is on the index is read from its simple pages (file name + sha256), never guessed from upload errors:
twine >= 6.1 refuses ``--skip-existing`` for indexes other than PyPI. Each wheel is uploaded together with
its release bundle in one request (``twine upload <wheel> <wheel>.asc``), so the index never shows a wheel
without its signatures except after a crash in the middle of that request — which :func:`index_state`
recognises (a truncated copy of our bytes, or a wheel whose bundle is missing) and, on the managed local
index, repairs.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from . import attest
from .errors import EnvironmentProblem, PublishError
from .index import IndexFile, LocalIndex, fetch

State = Literal["absent", "published", "conflict", "torn", "unsigned"]


@dataclass(frozen=True, kw_only=True)
class Index:
    """Where a release goes: the simple URL to read, and how twine reaches the upload endpoint."""

    simple_url: str
    twine_args: tuple[str, ...]  #: --repository-url URL / --repository NAME (.pypirc); empty: TWINE_* variables
    env: Mapping[str, str]  #: extra environment for twine (credentials of the managed index)
    local: LocalIndex | None = None  #: the managed local index (repairs allowed)

    @classmethod
    def managed(cls, idx: LocalIndex) -> Index:
        user, password = idx.credentials()
        return cls(
            simple_url=idx.simple_url,
            twine_args=("--repository-url", idx.url),
            env={"TWINE_USERNAME": user, "TWINE_PASSWORD": password},
            local=idx,
        )


@dataclass(frozen=True, kw_only=True)
class FileState:
    state: State
    detail: str = ""


def index_state(wheel: Path, sha256: str, listing: Mapping[str, IndexFile], bundle_ok: bool | None) -> FileState:
    """What the index holds for this wheel. ``bundle_ok``: does the index's bundle verify (None: none there)."""
    remote = listing.get(wheel.name)
    if remote is None:
        return FileState(state="absent")
    remote_sha = remote.sha256 or _download_sha(remote.url)
    if remote_sha != sha256:
        if _is_truncated_copy(remote.url, wheel):
            return FileState(state="torn", detail="a truncated copy (an upload was interrupted)")
        return FileState(
            state="conflict",
            detail=f"{wheel.name} is already on the index with sha256 {remote_sha[:16]}…, this build is"
            f" {sha256[:16]}…: the same version with different bytes is never overwritten; write a new VERSION",
        )
    if bundle_ok is None:
        return FileState(state="unsigned", detail="on the index without its release bundle")
    if not bundle_ok:
        return FileState(state="unsigned", detail="on the index with a release bundle that does not verify")
    return FileState(state="published")


def _download_sha(url: str) -> str:
    data = fetch(url)
    return hashlib.sha256(data or b"").hexdigest()


def _is_truncated_copy(url: str, wheel: Path) -> bool:
    data = fetch(url) or b""
    ours = wheel.read_bytes()
    return len(data) < len(ours) and ours.startswith(data)


def repair_local(idx: LocalIndex, filenames: Sequence[str]) -> None:
    """Remove interrupted uploads of our own files from the managed index's folder, so they upload again."""
    for name in filenames:
        (idx.packages / name).unlink(missing_ok=True)


#: twine upload: attempts when the index answers 5xx or the request fails in transit (twine also retries a
#: 5xx a few times within one attempt), and the longest one attempt may take (twine has no overall
#: timeout). Then the release stops with a clear error.
UPLOAD_ATTEMPTS = 2
UPLOAD_RETRY_DELAY_S = 1.0
TWINE_TIMEOUT_S = 600.0
_TRANSIENT = re.compile(r"\b5\d\d (Server Error|Internal|Bad Gateway|Service Unavailable|Gateway)|timed out|"
                        r"Timeout|ConnectionError|Connection (refused|reset|aborted)|RemoteDisconnected", re.I)


def _twine(args: Sequence[str], env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import importlib.util

    if importlib.util.find_spec("twine") is None:
        raise EnvironmentProblem(
            f"twine is missing from {sys.executable} (run through `nox -s release`, or `pip install --group release`)"
        )
    full_env = {**os.environ, **(env or {}), "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    cmd = [sys.executable, "-m", "twine", *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, env=full_env, check=False, timeout=TWINE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, 124, "", f"twine timed out after {TWINE_TIMEOUT_S:.0f}s")


def twine_check(wheels: Sequence[Path]) -> None:
    proc = _twine(["check", *map(str, wheels)])
    if proc.returncode != 0:
        raise PublishError(f"twine check failed: {_last_lines(proc)}")


def twine_upload(index: Index, wheel: Path, bundle: Path) -> None:
    args = ["upload", "--non-interactive", "--disable-progress-bar", *index.twine_args, str(wheel), str(bundle)]
    for attempt in range(UPLOAD_ATTEMPTS):
        if attempt:
            time.sleep(UPLOAD_RETRY_DELAY_S * 2 ** (attempt - 1))
        proc = _twine(args, index.env)
        if proc.returncode == 0:
            return
        if not _TRANSIENT.search(proc.stdout + proc.stderr):
            break  # a final answer (400 file exists, 403 credentials, ...): retrying cannot help
    tries = f" (after {attempt + 1} attempts)" if attempt else ""
    raise PublishError(
        f"twine upload of {wheel.name} failed{tries}: {_last_lines(proc)}; nothing later was uploaded —"
        " re-run the release to complete it (published files are recognised and skipped)"
    )


def _last_lines(proc: subprocess.CompletedProcess[str], n: int = 4) -> str:
    text = (proc.stdout + "\n" + proc.stderr).strip().splitlines()
    return " | ".join(line.strip() for line in text[-n:] if line.strip())


def bundle_name(wheel_name: str) -> str:
    return wheel_name + attest.BUNDLE_SUFFIX
