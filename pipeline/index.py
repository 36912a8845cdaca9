"""Package indexes: reading a PEP 503 simple index, and the managed local pypiserver.

The local index is a real pypiserver on 127.0.0.1 with upload authentication (htpasswd, a random password
kept in its state folder, mode 0600) and anonymous downloads. It is started detached so that it outlives the
session that started it (``pip install --index-url <url>/simple/ mosaicrt`` works afterwards); its state
folder holds ``packages/``, ``server.json`` (pid, port), ``server.log``, ``htpasswd`` and ``credentials.json``.
A running server is reused; ``python -m pipeline release --stop-index`` stops it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from .errors import EnvironmentProblem, PublishError

TIMEOUT_S = 30.0
#: Attempts for a request the index failed transiently (HTTP 5xx, a timeout, a refused or reset
#: connection), RETRY_DELAY_S apart and doubling; then a clear refusal. Other answers are final.
ATTEMPTS = 3
RETRY_DELAY_S = 0.5


def normalize_project(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True, kw_only=True)
class IndexFile:
    filename: str
    url: str
    sha256: str | None


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")
            self._text = ""

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append((self._href, self._text.strip()))
            self._href = None


def fetch(url: str) -> bytes | None:
    """The body at ``url``; None for 404; :class:`PublishError` when the index cannot be reached or keeps
    failing (``ATTEMPTS`` tries for 5xx answers, timeouts and connection errors)."""
    failures: list[str] = []
    for attempt in range(ATTEMPTS):
        if attempt:
            time.sleep(RETRY_DELAY_S * 2 ** (attempt - 1))
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp:
                body: bytes = resp.read()
                return body
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            if exc.code < 500:
                raise PublishError(f"{url}: HTTP {exc.code} {exc.reason}") from None
            failures.append(f"HTTP {exc.code} {exc.reason}")
        except (urllib.error.URLError, OSError) as exc:  # refused, reset, timed out
            failures.append(str(getattr(exc, "reason", exc)))
    raise PublishError(
        f"cannot reach the index at {url}: {len(failures)} attempts failed ({'; '.join(failures)}); is it running?"
    )


def _links(page: bytes, base: str) -> list[tuple[str, str]]:
    parser = _Links()
    parser.feed(page.decode("utf-8", errors="replace"))
    return [(urllib.parse.urljoin(base, href), text) for href, text in parser.links]


def list_projects(simple_url: str) -> list[str]:
    page = fetch(simple_url)
    return [] if page is None else [text for _, text in _links(page, simple_url) if text]


def list_files(simple_url: str, project: str) -> dict[str, IndexFile]:
    """Files of a project by file name, with the sha256 the index announces (PEP 503 URL fragment)."""
    url = f"{simple_url.rstrip('/')}/{normalize_project(project)}/"
    page = fetch(url)
    out: dict[str, IndexFile] = {}
    for href, _ in _links(page or b"", url):
        clean, _, frag = href.partition("#")
        name = urllib.parse.unquote(clean.rsplit("/", 1)[-1])
        sha = frag.removeprefix("sha256=") if frag.startswith("sha256=") else None
        out[name] = IndexFile(filename=name, url=clean, sha256=sha)
    return out


# --------------------------------------------------------------------------------------
# The managed local index


@dataclass(frozen=True, kw_only=True)
class LocalIndex:
    state_dir: Path
    port: int
    pid: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def simple_url(self) -> str:
        return self.url + "simple/"

    @property
    def packages(self) -> Path:
        return self.state_dir / "packages"

    def credentials(self) -> tuple[str, str]:
        data = json.loads((self.state_dir / "credentials.json").read_text(encoding="utf-8"))
        return str(data["username"]), str(data["password"])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:  # a zombie child of this process counts as dead
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == 0


def _answers(url: str, probe: str = "simple/") -> bool:
    """The server at ``url`` serves ``probe`` (the index: its simple page; the EP catalog: its timestamp)."""
    try:
        with urllib.request.urlopen(url + probe, timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def running_index(state_dir: Path) -> LocalIndex | None:
    try:
        info = json.loads((state_dir / "server.json").read_text(encoding="utf-8"))
        idx = LocalIndex(state_dir=state_dir, port=int(info["port"]), pid=int(info["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return idx if _alive(idx.pid) and _answers(idx.url) else None


def _free_port(preferred: int | None) -> int:
    for port in ([preferred] if preferred else []) + [0]:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise PublishError("no free TCP port on 127.0.0.1 for the local index")


def _write_credentials(state_dir: Path) -> None:
    creds = state_dir / "credentials.json"
    if creds.is_file() and (state_dir / "htpasswd").is_file():
        return
    password = secrets.token_urlsafe(24)
    with warnings.catch_warnings():  # passlib imports the deprecated crypt module
        warnings.simplefilter("ignore", DeprecationWarning)
        from passlib.apache import HtpasswdFile

    ht = HtpasswdFile(str(state_dir / "htpasswd"), new=True, default_scheme="sha256_crypt")
    ht.set_password("mosaicrt", password)
    ht.save()
    fd = os.open(creds, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"username": "mosaicrt", "password": password}, fh)


_LAUNCHER = """
import subprocess, sys
with open(sys.argv[1], "a") as log:
    p = subprocess.Popen(sys.argv[2:], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True)
print(p.pid)
"""


def start_local_index(state_dir: Path, *, quiet: bool = False) -> LocalIndex:
    """Reuse the running local index of ``state_dir`` or start one (detached) and wait until it answers."""
    found = running_index(state_dir)
    if found is not None:
        return found
    import importlib.util

    if importlib.util.find_spec("pypiserver") is None or importlib.util.find_spec("passlib") is None:
        raise EnvironmentProblem(
            f"pypiserver and passlib are missing from {sys.executable}"
            " (run through `nox -s release`, or `pip install --group release`)"
        )
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "packages").mkdir(exist_ok=True)
    _write_credentials(state_dir)
    previous = None
    with contextlib.suppress(OSError, ValueError, KeyError):
        previous = int(json.loads((state_dir / "server.json").read_text(encoding="utf-8"))["port"])
    port = _free_port(previous)
    cmd = [
        sys.executable, "-m", "pypiserver", "run", "-i", "127.0.0.1", "-p", str(port),
        "-P", str(state_dir / "htpasswd"), "-a", "update", "--disable-fallback", "--hash-algo", "sha256",
        str(state_dir / "packages"),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    # Started through a short-lived launcher so the server is nobody's child: it outlives this session.
    launcher = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, str(state_dir / "server.log"), *cmd],
        capture_output=True, text=True, env=env, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if launcher.returncode != 0 or not launcher.stdout.strip().isdigit():
        raise PublishError(f"could not start the local index: {launcher.stderr.strip() or launcher.stdout.strip()}")
    pid = int(launcher.stdout.strip())
    idx = LocalIndex(state_dir=state_dir, port=port, pid=pid)
    (state_dir / "server.json").write_text(json.dumps({"port": port, "pid": pid}) + "\n", encoding="utf-8")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not _alive(pid):
            raise PublishError(f"the local index exited at start; see {state_dir}/server.log")
        if _answers(idx.url):
            if not quiet:
                print(f"started the local index {idx.url} (pid {pid}; log {state_dir / 'server.log'})", flush=True)
            return idx
        time.sleep(0.1)
    stop_local_index(state_dir)
    raise PublishError(f"the local index did not answer within 30 s; see {state_dir}/server.log")


def stop_local_index(state_dir: Path) -> bool:
    """Stop the local index this state folder started (True if one was running)."""
    return stop_detached(state_dir)


def stop_detached(state_dir: Path) -> bool:
    """Stop the detached server whose ``server.json`` (pid) is in ``state_dir`` (True if one was running)."""
    try:
        pid = int(json.loads((state_dir / "server.json").read_text(encoding="utf-8"))["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not _alive(pid):
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
    return True
