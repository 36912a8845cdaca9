"""Fixtures of the winml suite: real TUF catalogs made with the pipeline's repository code (from the source
tree), served over HTTP by a real server that can misbehave, and a real plugin EP library to put in them
(core/tests/plugins/fake_ep.cc, compiled here)."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import json
import os
import shutil
import subprocess
import sys
import threading
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mosaicrt
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the repository side of the catalog: pipeline/catalog (tuf + cryptography)

from pipeline.catalog.repository import NewTarget, Repository, ensure_root, online_signers, publish  # noqa: E402
from pipeline.catalog.trust import CatalogConfig, RolePolicy, RoleSigner  # noqa: E402

FAKE_EP_SOURCE = REPO / "core" / "tests" / "plugins" / "fake_ep.cc"
CXX = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
PLATFORM_TAG = "linux_x86_64"  # replaced per test by this interpreter's most specific platform tag


def _platform_tag() -> str:
    from packaging import tags

    return next(iter(tags.sys_tags())).platform


@pytest.fixture(scope="session")
def fake_ep_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if CXX is None:
        pytest.fail("a C++ compiler (c++/g++) is needed to build the test plugin EP for the catalog tests")
    out = tmp_path_factory.mktemp("plugin") / "libmosaicrt_fake_ep.so"
    subprocess.run([CXX, "-std=c++17", "-O1", "-shared", "-fPIC", "-fvisibility=hidden", f"-I{mosaicrt.get_include()}",
                    str(FAKE_EP_SOURCE), "-o", str(out)], check=True, capture_output=True, text=True)  # fmt: skip
    return out


def make_bundle(library: Path, ep_name: str, extra: dict[str, bytes] | None = None) -> bytes:
    """A bundle as the release makes it: manifest.json + lib/<files>."""
    files = {f"lib/{library.name}": library.read_bytes(), **{f"lib/{k}": v for k, v in (extra or {}).items()}}
    manifest = {
        "schema": 1, "ep_name": ep_name, "library": f"lib/{library.name}", "preload": [],
        "files": {k: hashlib.sha256(v).hexdigest() for k, v in files.items()},
    }  # fmt: skip
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        for k, v in files.items():
            zf.writestr(k, v)
    return buf.getvalue()


def ep_custom(ep_name: str, registration: str, **over: Any) -> dict[str, Any]:
    abi = mosaicrt.get_build_details()["ep_abi"].split(".")
    custom: dict[str, Any] = {
        "kind": "ep-bundle", "ep_name": ep_name, "ep_version": "1.0.0", "registration_name": registration,
        "device_types": ["CPU"], "vendor_ids": [], "ep_abi": {"major": int(abi[0]), "min_minor": int(abi[1])},
        "platform_tags": [_platform_tag()], "library": "lib/libmosaicrt_fake_ep.so",
    }  # fmt: skip
    custom.update(over)
    return custom


# --------------------------------------------------------------------------------------
# a served repository


@dataclass
class Faults:
    """How the server misbehaves for target files (paths containing ``match``)."""

    match: str = ""
    extra_bytes: int = 0  #: send this many bytes more than the file (endless data)
    cut_at: float | None = None  #: declare the full length, send this fraction, close (interrupted)
    requests: list[str] = field(default_factory=list)


class _Handler(http.server.SimpleHTTPRequestHandler):
    faults: Faults

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.faults.requests.append(self.path)
        f = self.faults
        if f.match and f.match in self.path and (f.extra_bytes or f.cut_at is not None):
            path = Path(self.translate_path(self.path))
            data = path.read_bytes()
            self.send_response(200)
            if f.cut_at is not None:
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[: int(len(data) * f.cut_at)])
                self.wfile.flush()
                self.close_connection = True
                return
            self.end_headers()  # no length: the body runs on
            self.wfile.write(data + b"\0" * f.extra_bytes)
            self.close_connection = True
            return
        super().do_GET()


@dataclass
class Catalog:
    repo: Repository
    signers: dict[str, list[RoleSigner]]
    url: str
    faults: Faults
    stop: Callable[[], None]
    env: dict[str, str]

    def add(self, path: str, data: bytes, custom: dict[str, Any], *, role: str = "certified",
            signers: dict[str, list[RoleSigner]] | None = None, delegate: list[Any] | None = None) -> None:
        publish(self.repo, role, [NewTarget(path=path, data=data, custom=custom)],
                signers=signers or self.signers, delegate_keys=delegate or [])

    def root(self) -> bytes:
        return self.repo.root_bytes()


def config(max_mb: int = 64) -> CatalogConfig:
    days = {"root": 365, "targets": 90, "snapshot": 7, "timestamp": 1, "certified": 90, "uncertified": 90}
    return CatalogConfig(default_url="http://127.0.0.1:1/", local_port=1, max_target_bytes=max_mb << 20,
                         roles={r: RolePolicy(threshold=1, expires_days=d) for r, d in days.items()})  # fmt: skip


@pytest.fixture
def catalog(tmp_path: Path) -> Iterator[Catalog]:
    env = {"MOSAICRT_CONFIG_DIR": str(tmp_path / "keys")}
    repo = Repository(tmp_path / "repo", config())
    ensure_root(repo, env=env, say=False)
    signers = online_signers(repo, create=True, env=env, say=False)
    publish(repo, "certified", [], signers=signers)
    faults = Faults()
    handler = functools.partial(type("H", (_Handler,), {"faults": faults}), directory=str(repo.folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    stopped = []

    def stop() -> None:
        if not stopped:
            server.shutdown()
            server.server_close()
            stopped.append(True)

    yield Catalog(repo=repo, signers=signers, url=f"http://127.0.0.1:{server.server_port}/", faults=faults,
                  stop=stop, env=env)  # fmt: skip
    stop()


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def assert_clean(cache_dir: Path, ep_name: str) -> None:
    """Nothing of the EP in the cache and no partial download left."""
    for sub in cache_dir.glob("*/eps/" + ep_name):
        assert not sub.exists(), f"{sub} was left in the cache"
    leftovers = [p for p in cache_dir.glob("*/downloads/*") if p.is_file()]
    assert not leftovers, f"partial downloads left: {leftovers}"
    stray = [p for p in cache_dir.glob("*/eps/*/.tmp-*")]
    assert not stray, f"staging folders left: {stray}"
