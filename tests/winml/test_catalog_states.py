"""The client's TUF state machine against an in-memory repository (a fetcher that serves the repository's files
from a dictionary, snapshot by snapshot): key rotation through a new root, a compromised old key refused after
it, and a repository that rolls everything back at once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Catalog, ep_custom, make_bundle
from mosaicrt import catalog as C
from mosaicrt.catalog import ExecutionProviderCatalog
from securesystemslib.signer import CryptoSigner
from tuf.api import exceptions
from tuf.api.metadata import Timestamp
from tuf.ngclient import FetcherInterface

from pipeline.catalog import repository as R
from pipeline.catalog.trust import RoleSigner, role_signers


class MemoryRepository(FetcherInterface):
    """Serves ``memory://catalog/<path>`` from a frozen copy of a repository folder."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def load(self, folder: Path) -> None:
        self.files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}

    def _fetch(self, url: str) -> Iterator[bytes]:
        path = url.removeprefix("memory://catalog/")
        if path not in self.files:
            raise exceptions.DownloadHTTPError(f"{path} not found", 404)
        return iter([self.files[path]])


def _client(memory: MemoryRepository, root: bytes, cache: Path) -> ExecutionProviderCatalog:
    return ExecutionProviderCatalog("memory://catalog/", root=root, cache_dir=cache, download=True, fetcher=memory)


def test_timestamp_key_rotation_then_the_old_key_is_refused(catalog: Catalog, cache: Path,
                                                            fake_ep_library: Path) -> None:  # fmt: skip
    memory = MemoryRepository()
    shipped_root = catalog.root()  # what the wheel ships: root v1
    reg, ep = "m1:cpu", "FakeCpu_m1"
    catalog.add(f"certified/{ep}/any/{ep}.zip", make_bundle(fake_ep_library, ep), ep_custom(ep, reg))
    memory.load(catalog.repo.folder)
    assert ep in {p.name for p in _client(memory, shipped_root, cache).find_all_providers()}

    # the timestamp key leaks: the repository rotates it with root v2 and re-signs the timestamp
    old_ts = catalog.signers["timestamp"]
    new_ts = [RoleSigner("timestamp", CryptoSigner.generate_ed25519(), "new timestamp key")]
    root_keys = role_signers("root", 1, create=False, env=catalog.env)
    online = {r: [s.signer.public_key for s in catalog.signers[r]] for r in ("targets", "snapshot")}
    online["timestamp"] = [new_ts[0].signer.public_key]
    assert R.sign_root(catalog.repo, root_signers=root_keys, online=online) == (2, True)
    catalog.signers["timestamp"] = new_ts
    R._write_timestamp(catalog.repo, catalog.signers, force=True)
    memory.load(catalog.repo.folder)
    client = _client(memory, shipped_root, cache)  # still ships v1: follows the chain to v2
    assert ep in {p.name for p in client.find_all_providers()}

    # the attacker signs a newer timestamp with the leaked (old) key: refused
    ts = catalog.repo.load("timestamp", Timestamp)
    assert ts is not None
    ts.signed.version += 1
    catalog.repo._sign_write(ts, old_ts, "timestamp")
    memory.load(catalog.repo.folder)
    with pytest.raises(C.UntrustedMetadata):
        _client(memory, shipped_root, cache).find_all_providers()


def test_a_repository_rolled_back_as_a_whole_is_refused(catalog: Catalog, cache: Path, fake_ep_library: Path) -> None:
    memory = MemoryRepository()
    memory.load(catalog.repo.folder)
    before = dict(memory.files)
    catalog.add("certified/FakeCpu_m2/any/x.zip", make_bundle(fake_ep_library, "FakeCpu_m2"),
                ep_custom("FakeCpu_m2", "m2:cpu"))  # fmt: skip
    memory.load(catalog.repo.folder)
    _client(memory, catalog.root(), cache).find_all_providers()
    memory.files = before  # a mirror serving yesterday's consistent catalog
    with pytest.raises(C.RollbackAttack):
        _client(memory, catalog.root(), cache).find_all_providers()
