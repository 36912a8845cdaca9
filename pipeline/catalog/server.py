"""The local EP catalog server: the repository folder served as static files on 127.0.0.1, detached so it
keeps serving after ``nox -s release`` ends (like the local index). State in ``<work>/catalog/server.json``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import PublishError
from ..index import _LAUNCHER, _alive, _free_port, stop_detached
from ..index import _answers as index_answers


@dataclass(frozen=True, kw_only=True)
class CatalogServer:
    port: int
    pid: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"


def _answers(url: str) -> bool:
    return index_answers(url, "metadata/timestamp.json")


def _state(state_dir: Path) -> CatalogServer | None:
    try:
        info = json.loads((state_dir / "server.json").read_text(encoding="utf-8"))
        return CatalogServer(port=int(info["port"]), pid=int(info["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def running_catalog(state_dir: Path) -> CatalogServer | None:
    found = _state(state_dir)
    return found if found is not None and _alive(found.pid) and _answers(found.url) else None


def start_catalog_server(state_dir: Path, repository: Path, *, port: int) -> CatalogServer:
    """Reuse this work folder's running catalog server, or start one on ``port`` (else a free port)."""
    found = running_catalog(state_dir)
    if found is not None:
        return found
    state_dir.mkdir(parents=True, exist_ok=True)
    chosen = _free_port(port)
    cmd = [sys.executable, "-m", "http.server", str(chosen), "--bind", "127.0.0.1", "--directory", str(repository)]
    launched = subprocess.run([sys.executable, "-c", _LAUNCHER, str(state_dir / "server.log"), *cmd],
                              capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)  # fmt: skip
    if launched.returncode != 0 or not launched.stdout.strip().isdigit():
        raise PublishError(f"could not start the catalog server: {launched.stderr.strip() or launched.stdout.strip()}")
    server = CatalogServer(port=chosen, pid=int(launched.stdout.strip()))
    (state_dir / "server.json").write_text(json.dumps({"port": chosen, "pid": server.pid}) + "\n", encoding="utf-8")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not _alive(server.pid):
            raise PublishError(f"the catalog server exited at start; see {state_dir / 'server.log'}")
        if _answers(server.url):
            print(f"started the EP catalog server {server.url} (pid {server.pid})", flush=True)
            return server
        time.sleep(0.1)
    stop_catalog_server(state_dir)
    raise PublishError(f"the catalog server did not answer within 30 s; see {state_dir / 'server.log'}")


def stop_catalog_server(state_dir: Path) -> bool:
    return stop_detached(state_dir)
