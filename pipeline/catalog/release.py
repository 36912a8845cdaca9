"""What the build and release steps ask of the EP catalog."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import ReleaseRefused
from ..layout import Layout
from ..matrix import Cell
from .bundle import build_bundle
from .repository import NewTarget, PublishedTarget, Repository, ensure_root, online_signers, publish
from .server import start_catalog_server, stop_catalog_server
from .trust import KEY_ENV_PREFIX, load_config


def catalog_dir(layout: Layout) -> Path:
    return layout.work / "catalog"


def open_repository(layout: Layout) -> Repository:
    return Repository(catalog_dir(layout) / "repository", load_config(layout.root))


def write_client_files(layout: Layout, min_windows_build: int, dest: Path) -> str:
    """The files a catalog-client wheel ships (``root.json``: the catalog's trusted root; ``config.json``: the
    default URL, the Windows build floor, the size limit), written to ``dest``; returns their hash (a build
    input: a new root or policy rebuilds the wheel)."""
    repo = open_repository(layout)
    root = ensure_root(repo)
    config = {
        "schema": 1,
        "default_url": repo.config.default_url,
        "min_windows_build": min_windows_build,
        "max_target_bytes": repo.config.max_target_bytes,
    }
    dest.mkdir(parents=True, exist_ok=True)
    body = json.dumps(config, indent=1, sort_keys=True).encode() + b"\n"
    (dest / "root.json").write_bytes(root)
    (dest / "config.json").write_bytes(body)
    return hashlib.sha256(root + b"\0" + body).hexdigest()


@dataclass(frozen=True, kw_only=True)
class CatalogResult:
    url: str
    changed: bool
    targets: tuple[PublishedTarget, ...]
    versions: dict[str, int]

    def to_dict(self) -> dict[str, object]:
        return {
            "catalog_url": self.url,
            "catalog_changed": self.changed,
            "catalog_versions": self.versions,
            "catalog_targets": [
                {"path": t.path, "sha256": t.sha256, "length": t.length, **{k: t.custom[k] for k in sorted(t.custom)}}
                for t in self.targets
            ],
        }


def publish_eps(layout: Layout, released: Sequence[tuple[Cell, Path, str]], *, say: bool = True) -> CatalogResult:
    """Publish every released EP wheel that has a ``[catalog]`` entry as a certified bundle, then serve the
    catalog. ``released``: (cell, wheel file, the sha256 the gate verified)."""
    repo = open_repository(layout)
    ensure_root(repo, say=say)
    dev = not any(k.startswith(KEY_ENV_PREFIX) for k in os.environ)
    signers = online_signers(repo, create=dev, say=say)
    new: list[NewTarget] = []
    for cell, wheel, sha256 in released:
        if cell.component.catalog is None:
            continue
        if hashlib.sha256(wheel.read_bytes()).hexdigest() != sha256:
            raise ReleaseRefused(f"{wheel.name} changed after the gate checked it; the catalog was not updated")
        if say:
            print(f"[catalog] bundling {wheel.name} with its runtime libraries", flush=True)
        bundle = build_bundle(wheel, cell, root=layout.root, deps_dir=catalog_dir(layout) / "runtime-wheels")
        new.append(NewTarget(path=bundle.path, data=bundle.data, custom=bundle.custom))
    published = publish(repo, "certified", new, signers=signers)
    server = start_catalog_server(catalog_dir(layout), repo.folder, port=repo.config.local_port)
    if say:
        state = "updated" if published.changed else "unchanged"
        print(f"[catalog] {state}: {len(published.targets)} certified target(s) at {server.url}", flush=True)
    return CatalogResult(url=server.url, changed=published.changed, targets=published.targets,
                         versions=dict(published.versions))  # fmt: skip


def stop_server(layout: Layout) -> bool:
    return stop_catalog_server(catalog_dir(layout))
