"""Release faults against a real local pypiserver: the disk filling up while staging, two releases at
once, the index answering 500 or not answering in time, the signing key unreadable. Each fault leaves
the index and build/ consistent (nothing half-published, no half-staged files), and a rerun once the
fault is gone converges to the complete release.

The index faults put a small HTTP proxy in front of the real pypiserver; it forwards every request
unless told to fail some (500) or to stall them (longer than the client's timeout).
"""

from __future__ import annotations

import errno
import http.server
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline import index as index_mod
from pipeline import publish
from pipeline import release as release_mod
from pipeline.errors import ExitCode
from pipeline.hashing import sha256_file
from pipeline.index import start_local_index
from pipeline.signing import dev_key_path

from .conftest import REPO
from .releasekit import Repo
from .test_release import (
    listing,
    release,
    repo,  # noqa: F401 - the fixture repository of the release tests
)

pytest.importorskip("pypiserver", reason="the release tools are installed by `nox -s ci`")
pytest.importorskip("twine", reason="the release tools are installed by `nox -s ci`")


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_mod, "RETRY_DELAY_S", 0.05)
    monkeypatch.setattr(publish, "UPLOAD_RETRY_DELAY_S", 0.05)


def _complete(repo: Repo, wheels: dict[str, Path]) -> None:
    files = listing(repo)
    assert sorted(files) == sorted([w.name for w in wheels.values()] + [w.name + ".asc" for w in wheels.values()])
    assert all(files[w.name] == sha256_file(w) for w in wheels.values())


def _staging(repo: Repo) -> Path:
    return repo.layout.work / "release" / "staging"


# --------------------------------------------------------------------------------------
# disk full


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, check=False).returncode == 0


def test_disk_full_while_staging_uploads_nothing_and_a_rerun_converges(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = repo.build_and_test()
    release_dir = repo.layout.work / "release"
    mounted = _mount_tmpfs(release_dir, "16k")  # room for four of the twelve staged files
    if not mounted:  # not root / no mount permission: the same failure, injected at the third file copy
        real_copy = release_mod.shutil.copy2
        calls: list[object] = []

        def copy_until_full(src: Any, dst: Any, **kw: Any) -> Any:
            calls.append(dst)
            if len(calls) >= 2:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
            return real_copy(src, dst, **kw)

        monkeypatch.setattr(release_mod.shutil, "copy2", copy_until_full)
    try:
        rc, _, err = release(repo, capsys)
        assert rc == ExitCode.RELEASE, err
        assert "No space left on device" in err and "nothing was uploaded" in err
        assert listing(repo) == {}
        assert not _staging(repo).exists()  # no half-staged release left behind
        assert repo.tags() == []
    finally:
        if mounted:
            subprocess.run(["umount", str(release_dir)], check=True)
        monkeypatch.undo()
    rc, _, err = release(repo, capsys)
    assert rc == 0, err
    _complete(repo, wheels)


# --------------------------------------------------------------------------------------
# two releases at once


def test_two_releases_at_once_one_waits_and_each_file_is_published_once(
    repo: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheels = repo.build_and_test()
    start_local_index(repo.layout.index_state, quiet=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "MOSAICRT_PROGRESS": "plain"}
    cmd = [sys.executable, "-m", "pipeline", "release", "--root", str(repo.root), "--no-build"]
    # the key is made once, before the race (each run would otherwise offer to create it)
    subprocess.run([sys.executable, "-m", "pipeline", "keys", "--create-dev"], env=env, check=True, capture_output=True)
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    joined = [out for out, _ in outs]
    assert any("waiting for another pipeline run" in out for out in joined), joined
    uploaded = [out.count(" uploaded ") + out.count(" uploaded\n") for out in joined]
    assert sum("already published" in out for out in joined) == 1, joined  # the second found it all done
    assert min(uploaded) == 0, joined
    _complete(repo, wheels)


# --------------------------------------------------------------------------------------
# the index answering 500 / timing out


class FaultProxy:
    """A forwarding HTTP proxy to the real index; ``mode``: "ok", "500" (every request), "500-post" (only
    uploads), "500-once" (the first request to each path), "stall" (GETs answered after ``stall_s``)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.mode = "ok"
        self.stall_s = 3.0
        self.seen: list[tuple[str, str, int]] = []
        self._failed_once: set[str] = set()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _fault(self) -> bool:
                mode = proxy.mode
                fail = (mode == "500" or (mode == "500-post" and self.command == "POST")
                        or (mode == "500-once" and self.path not in proxy._failed_once))
                if mode == "500-once":
                    proxy._failed_once.add(self.path)
                if mode == "stall" and self.command == "GET":
                    time.sleep(proxy.stall_s)
                if fail:
                    length = int(self.headers.get("Content-Length") or 0)
                    self.rfile.read(length)
                    # recorded before answering: the client may retry (or the test read `seen`) at once
                    proxy.seen.append((self.command, self.path, 500))
                    self.send_response(500, "Internal Server Error")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                return fail

            def _forward(self) -> None:
                if self._fault():
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                req = urllib.request.Request(proxy.upstream + self.path, data=body, headers=headers,
                                             method=self.command)
                try:
                    with urllib.request.urlopen(req, timeout=30) as resp:
                        status, data, rheaders = resp.status, resp.read(), resp.headers
                except urllib.error.HTTPError as exc:
                    status, data, rheaders = exc.code, exc.read(), exc.headers
                proxy.seen.append((self.command, self.path, status))
                self.send_response(status)
                for k, v in rheaders.items():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length", "server", "date"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    idx = start_local_index(repo.layout.index_state, quiet=True)
    user, password = idx.credentials()
    monkeypatch.setenv("TWINE_USERNAME", user)
    monkeypatch.setenv("TWINE_PASSWORD", password)
    p = FaultProxy(idx.url)
    yield p
    p.close()


def _release_via(repo: Repo, proxy: FaultProxy, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return release(repo, capsys, "--no-tag", "--repository-url", proxy.url + "/", "--index-url", proxy.url + "/simple/")


def test_index_answering_500_is_retried_then_refused_and_a_rerun_converges(
    repo: Repo, proxy: FaultProxy, capsys: pytest.CaptureFixture[str]
) -> None:
    wheels = repo.build_and_test()
    proxy.mode = "500"
    rc, _, err = _release_via(repo, proxy, capsys)
    assert rc == ExitCode.PUBLISH, err
    assert f"{index_mod.ATTEMPTS} attempts failed" in err and "HTTP 500" in err
    failed = [path for _, path, status in proxy.seen if status == 500]
    assert failed and all(failed.count(p) == index_mod.ATTEMPTS for p in failed), proxy.seen  # bounded retries
    assert listing(repo) == {}

    proxy.mode = "500-once"  # one failure per request is absorbed by the retries
    rc, _, err = _release_via(repo, proxy, capsys)
    assert rc == 0, err
    _complete(repo, wheels)


def test_uploads_answered_500_are_retried_then_refused_and_a_rerun_converges(
    repo: Repo, proxy: FaultProxy, capsys: pytest.CaptureFixture[str]
) -> None:
    wheels = repo.build_and_test()
    proxy.mode = "500-post"
    rc, _, err = _release_via(repo, proxy, capsys)
    assert rc == ExitCode.PUBLISH, err
    assert f"after {publish.UPLOAD_ATTEMPTS} attempts" in err and "re-run the release" in err
    posts = len([s for s in proxy.seen if s[0] == "POST"])
    assert publish.UPLOAD_ATTEMPTS <= posts <= 5 * publish.UPLOAD_ATTEMPTS  # bounded (twine retries inside one attempt)
    assert listing(repo) == {}

    proxy.mode = "ok"
    rc, _, err = _release_via(repo, proxy, capsys)
    assert rc == 0, err
    _complete(repo, wheels)


def test_an_index_that_does_not_answer_in_time_is_refused_and_a_rerun_converges(
    repo: Repo, proxy: FaultProxy, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = repo.build_and_test()
    monkeypatch.setattr(index_mod, "TIMEOUT_S", 0.5)
    proxy.mode, proxy.stall_s = "stall", 2.0
    t0 = time.monotonic()
    rc, _, err = _release_via(repo, proxy, capsys)
    assert rc == ExitCode.PUBLISH, err
    assert "timed out" in err and f"{index_mod.ATTEMPTS} attempts failed" in err
    assert time.monotonic() - t0 < 30  # bounded
    assert listing(repo) == {}

    proxy.mode = "ok"
    rc, _, err = _release_via(repo, proxy, capsys)
    assert rc == 0, err
    _complete(repo, wheels)


# --------------------------------------------------------------------------------------
# signing key


def test_an_unreadable_signing_key_signs_and_uploads_nothing_and_a_rerun_converges(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    wheels = repo.build_and_test()
    from pipeline.cli import main

    assert main(["keys", "--create-dev"]) == 0
    capsys.readouterr()
    key = dev_key_path()
    saved = key.read_bytes()
    key.unlink()
    key.mkdir(mode=0o700)  # the key's path no longer reads as a file (chmod 000 does not stop root)
    try:
        rc, _, err = release(repo, capsys)
        assert rc == ExitCode.ENVIRONMENT, err
        assert f"the signing key {key} cannot be read" in err
        assert listing(repo) == {}
        assert not _staging(repo).exists()
    finally:
        key.rmdir()
        key.write_bytes(saved)
        key.chmod(0o600)
    rc, _, err = release(repo, capsys)
    assert rc == 0, err
    _complete(repo, wheels)
