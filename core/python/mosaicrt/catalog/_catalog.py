"""The EP catalog client: list, download, verify, cache and register execution providers on demand.

Trust: a TUF repository (python-tuf's ngclient), rooted in the ``root.json`` shipped inside the winml wheel.
Every file comes through TUF (length + sha256 from metadata signed by the threshold of the right keys, with
rollback, freeze and mix-and-match checks); the catalog is enumerated through each delegated role's signed
``<role>/index.json``. Certification is the delegation a target comes from: ``certified/…`` can only be
signed by the release's key, ``uncertified/…`` by a third party's.

Cache (per user, per catalog URL): ``<cache>/<url hash>/``
    metadata/            TUF's trusted metadata (root chain, timestamp, snapshot, targets)
    downloads/           partial downloads (removed on any failure)
    eps/<EP>/<dir>/      an extracted, verified bundle, moved into place in one rename
    eps/<EP>/current.json   which <dir> is current and what it holds (written last, atomically)
Changes to the cache happen under a file lock: two processes downloading at once do not corrupt it, and a
partial file is never used. Before a cached EP is loaded, each of its files is hashed again against the
manifest of the verified bundle.
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging import tags as packaging_tags
from packaging.version import InvalidVersion, Version
from tuf.api import exceptions as tuf_errors
from tuf.api.metadata import TargetFile
from tuf.ngclient import FetcherInterface, Updater, UpdaterConfig

from .. import _providers, _variant
from . import _errors as E
from ._fetch import CatalogFetcher

URL_ENV = "MOSAICRT_EP_CATALOG_URL"
CACHE_ENV = "MOSAICRT_EP_CATALOG_CACHE"
TIMEOUT_ENV = "MOSAICRT_EP_CATALOG_TIMEOUT"
ALLOW_UNCERTIFIED_ENV = "MOSAICRT_EP_CATALOG_ALLOW_UNCERTIFIED"
ROLES = ("certified", "uncertified")
_LOCK_WAIT_S = 300.0


class ReadyState(enum.Enum):
    NOT_PRESENT = "NotPresent"  #: not downloaded
    NOT_READY = "NotReady"  #: an older or unverified copy is cached: ensure_ready() brings the catalog's
    READY = "Ready"  #: downloaded, verified, can be registered


class Certification(enum.Enum):
    CERTIFIED = "Certified"
    UNCERTIFIED = "Uncertified"
    UNKNOWN = "Unknown"


ProgressCallback = Callable[[float], None]


# --------------------------------------------------------------------------------------
# small helpers


def _default_cache_root() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    import platformdirs

    return Path(platformdirs.user_cache_dir("mosaicrt", appauthor=False)) / "ep-catalog"


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def _file_lock(path: Path, wait_s: float = _LOCK_WAIT_S) -> Iterator[None]:
    """An exclusive lock between processes (and threads: each holder opens its own descriptor)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+b")  # noqa: SIM115 - closed in finally
    deadline = time.monotonic() + wait_s
    try:
        while True:
            try:
                if sys.platform == "win32":
                    import msvcrt

                    fh.seek(0)
                    msvcrt.locking(fh.fileno(), msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined,unused-ignore]
                else:
                    import fcntl

                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise E.CatalogError(f"the EP cache {path.parent} stayed locked for {wait_s:.0f} s") from None
                time.sleep(0.05)
        yield
    finally:
        try:
            if sys.platform == "win32":
                import msvcrt

                fh.seek(0)
                with contextlib.suppress(OSError):
                    msvcrt.locking(fh.fileno(), msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined,unused-ignore]
            else:
                import fcntl

                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        finally:
            fh.close()


def _translate(exc: BaseException, what: str) -> E.CatalogError:
    """A TUF/transport failure as the catalog refusal that names it."""
    text = f"{what}: {exc}"
    if isinstance(exc, E.CatalogError):
        return exc
    if isinstance(exc, tuf_errors.ExpiredMetadataError):
        return E.ExpiredMetadata(f"{text} (refused: expired metadata; a frozen or stale catalog)")
    if isinstance(exc, tuf_errors.UnsignedMetadataError):
        return E.UntrustedMetadata(f"{text} (refused: not signed by the keys trusted for that role)")
    if isinstance(exc, tuf_errors.BadVersionNumberError):
        if str(exc).startswith("Expected"):
            return E.InconsistentMetadata(f"{text} (refused: metadata versions do not match: mix-and-match)")
        return E.RollbackAttack(f"{text} (refused: older than the metadata already trusted: rollback)")
    if isinstance(exc, tuf_errors.LengthOrHashMismatchError):
        return E.TamperedTarget(f"{text} (refused: length or sha256 differs from the signed metadata)")
    if isinstance(exc, tuf_errors.DownloadLengthMismatchError):
        return E.OversizedTarget(f"{text} (refused: more data than the signed metadata declares)")
    if isinstance(exc, tuf_errors.SlowRetrievalError):
        return E.CatalogUnavailable(f"{text} (timed out)")
    if isinstance(exc, tuf_errors.DownloadHTTPError):
        return E.CatalogUnavailable(f"{text} (HTTP {exc.status_code})")
    if isinstance(exc, tuf_errors.DownloadError):
        return E.InterruptedDownload(text) if "interrupted" in str(exc) else E.CatalogUnavailable(text)
    if isinstance(exc, tuf_errors.RepositoryError):
        return E.InconsistentMetadata(f"{text} (refused: inconsistent metadata)")
    return E.CatalogError(f"{text} ({type(exc).__name__})")


def _ep_abi() -> tuple[int, int]:
    from .._capi import lib

    raw = dict(item.split("=", 1) for item in lib.MrtGetBuildInfo().decode().split(",") if "=" in item)
    major, _, minor = raw.get("ep_abi", "1.0").partition(".")
    return int(major), int(minor or 0)


def _platforms() -> set[str]:
    return {t.platform for t in packaging_tags.sys_tags()}


# --------------------------------------------------------------------------------------
# the catalog


@dataclass(frozen=True)
class _Entry:
    path: str
    info: TargetFile
    role: str

    @property
    def custom(self) -> dict[str, Any]:
        return dict(self.info.custom or {})

    @property
    def sha256(self) -> str:
        return str(self.info.hashes["sha256"])

    @property
    def version(self) -> Version:
        try:
            return Version(str(self.custom.get("ep_version", "0")))
        except InvalidVersion:
            return Version("0")


@dataclass
class ExecutionProvider:
    """One EP the catalog offers for this machine (the newest compatible version)."""

    name: str
    version: str
    certification: Certification
    device_types: tuple[str, ...]
    vendor_ids: tuple[int, ...]
    target_path: str
    _catalog: ExecutionProviderCatalog = field(repr=False)
    _entry: _Entry | None = field(repr=False, default=None)

    @property
    def ready_state(self) -> ReadyState:
        return self._catalog._ready_state(self)

    @property
    def library_path(self) -> str | None:
        current = self._catalog._cached(self.name)
        if current is None or self._entry is not None and current.get("target_sha256") != self._entry.sha256:
            return None
        return str(self._catalog._ep_dir(self.name) / current["dir"] / current["library"])

    def ensure_ready(self, progress: ProgressCallback | None = None) -> ReadyState:
        """Download and verify the EP and its runtime libraries (progress: 0–100). Raises a CatalogError
        subclass naming the refusal; the cache then holds what it held before."""
        self._catalog._ensure_ready(self, progress)
        return self.ready_state

    def try_register(self) -> bool:
        """Register the ready EP with mosaicrt (its libraries re-verified first). False when not ready."""
        return self._catalog._register(self)


class ExecutionProviderCatalog:
    """The EP catalog of a winml build (``get_default()``), shaped like WinML's ExecutionProviderCatalog."""

    _default: ExecutionProviderCatalog | None = None
    _default_lock = threading.Lock()

    def __init__(self, url: str, *, root: bytes, cache_dir: Path | None = None, timeout_s: float | None = None,
                 allow_uncertified: bool | None = None, max_target_bytes: int | None = None,
                 download: bool | None = None, fetcher: FetcherInterface | None = None) -> None:  # fmt: skip
        self.url = url if url.endswith("/") else url + "/"
        self._root = root
        base = cache_dir or _default_cache_root()
        self.cache = base / hashlib.sha256(self.url.encode()).hexdigest()[:16]
        self.timeout_s = float(timeout_s if timeout_s is not None else os.environ.get(TIMEOUT_ENV, "15"))
        if allow_uncertified is None:
            allow_uncertified = os.environ.get(ALLOW_UNCERTIFIED_ENV, "") in ("1", "true", "on")
        self.allow_uncertified = allow_uncertified
        config = _variant.catalog_config() or {}
        self.max_target_bytes = int(max_target_bytes or config.get("max_target_bytes", 512 << 20))
        if download is None:
            download, self.download_reason = _variant.download_decision()
        else:
            self.download_reason = "set by the caller"
        self.download = download
        self.skipped: list[str] = []  #: catalog entries not offered here, and why
        self._updater: Updater | None = None
        #: HTTP(S) with timeouts by default; another FetcherInterface serves other transports (or tests)
        self._fetcher: FetcherInterface = fetcher or CatalogFetcher(self.timeout_s)
        self._lock = threading.RLock()

    # ---- construction

    @classmethod
    def get_default(cls) -> ExecutionProviderCatalog:
        """The catalog at ``$MOSAICRT_EP_CATALOG_URL``, else the URL shipped in this winml wheel."""
        with cls._default_lock:
            url = os.environ.get(URL_ENV) or (_variant.catalog_config() or {}).get("default_url")
            if cls._default is None or cls._default.url != (url or "").rstrip("/") + "/":
                if not _variant.is_winml_build():
                    raise E.DownloadDisabled(_variant.download_decision()[1])
                root = (_variant.CATALOG_FILES / "root.json").read_bytes()
                cls._default = cls(str(url), root=root)
            return cls._default

    # ---- paths and cache state

    def _ep_dir(self, name: str) -> Path:
        safe = "".join(ch for ch in name if ch.isalnum() or ch in "-_.")
        if safe != name or not safe:
            raise E.UnknownProvider(f"{name!r} is not a valid EP name")
        return self.cache / "eps" / safe

    def _cached(self, name: str) -> dict[str, Any] | None:
        try:
            data = json.loads((self._ep_dir(name) / "current.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _verify_cached(self, name: str) -> dict[str, Any] | None:
        """The current cached bundle when each of its files still hashes to the manifest; else None."""
        current = self._cached(name)
        if current is None:
            return None
        folder = self._ep_dir(name) / str(current.get("dir", ""))
        files = current.get("files")
        if not isinstance(files, dict) or not files:
            return None
        for rel, digest in files.items():
            path = folder / rel
            if not path.is_file() or _sha256_file(path) != digest:
                return None
        return current

    def _ready_state(self, provider: ExecutionProvider) -> ReadyState:
        current = self._verify_cached(provider.name)
        if current is None:
            return ReadyState.NOT_PRESENT if self._cached(provider.name) is None else ReadyState.NOT_READY
        if provider._entry is not None and current.get("target_sha256") != provider._entry.sha256:
            return ReadyState.NOT_READY
        return ReadyState.READY

    # ---- TUF

    def _require_download(self) -> None:
        if not self.download:
            raise E.DownloadDisabled(f"EP download is off: {self.download_reason}")

    def _get_updater(self) -> Updater:
        if self._updater is None:
            metadata_dir = self.cache / "metadata"
            metadata_dir.mkdir(parents=True, exist_ok=True)
            try:
                self._updater = Updater(
                    str(metadata_dir), self.url + "metadata/", str(self.cache / "downloads"), self.url + "targets/",
                    fetcher=self._fetcher, config=UpdaterConfig(app_user_agent="mosaicrt-catalog"),
                    bootstrap=self._root,
                )  # fmt: skip
                with _file_lock(self.cache / ".lock"):
                    self._updater.refresh()
            except BaseException as exc:
                self._updater = None
                raise _translate(exc, f"refreshing the EP catalog {self.url}") from exc
        return self._updater

    def _download_verified(self, updater: Updater, info: TargetFile, dest: Path,
                           on_bytes: Callable[[int], None] | None = None) -> None:  # fmt: skip
        counter = self._fetcher if isinstance(self._fetcher, CatalogFetcher) else None
        if counter is not None:
            counter.on_bytes = on_bytes
        try:
            updater.download_target(info, filepath=str(dest))
        except BaseException as exc:
            dest.unlink(missing_ok=True)
            raise _translate(exc, f"downloading {info.path}") from exc
        finally:
            if counter is not None:
                counter.on_bytes = None
        if counter is None and on_bytes is not None:
            on_bytes(info.length)

    def _entries(self) -> list[_Entry]:
        updater = self._get_updater()
        out: list[_Entry] = []
        downloads = self.cache / "downloads"
        downloads.mkdir(parents=True, exist_ok=True)
        for role in ROLES:
            try:
                info = updater.get_targetinfo(f"{role}/index.json")
            except BaseException as exc:
                raise _translate(exc, f"reading the '{role}' role of {self.url}") from exc
            if info is None:
                continue
            if info.length > 16 << 20:
                raise E.OversizedTarget(f"{role}/index.json declares {info.length} bytes (refused: oversized)")
            tmp = downloads / f".index-{role}-{os.getpid()}-{threading.get_ident()}"
            self._download_verified(updater, info, tmp)
            try:
                paths = json.loads(tmp.read_text(encoding="utf-8")).get("targets", [])
            finally:
                tmp.unlink(missing_ok=True)
            for path in paths if isinstance(paths, list) else []:
                if not isinstance(path, str) or not path.startswith(f"{role}/"):
                    continue
                try:
                    t = updater.get_targetinfo(path)
                except BaseException as exc:
                    raise _translate(exc, f"looking up {path}") from exc
                if t is not None and (t.custom or {}).get("kind") == "ep-bundle":
                    out.append(_Entry(path=path, info=t, role=role))
        return out

    def _compatible(self, e: _Entry, platforms: set[str], abi: tuple[int, int]) -> str | None:
        c = e.custom
        tags = c.get("platform_tags") or []
        if not any(t in platforms for t in tags):
            return f"{e.path}: built for {'.'.join(tags) or 'no platform'}, not this platform"
        need = c.get("ep_abi") or {}
        if need.get("major") != abi[0] or int(need.get("min_minor", 0)) > abi[1]:
            return (f"{e.path}: needs EP ABI {need.get('major')}.{need.get('min_minor')}+, this core has "
                    f"{abi[0]}.{abi[1]}")
        return None

    # ---- the WinML-shaped API

    def find_all_providers(self) -> list[ExecutionProvider]:
        """The EPs the catalog offers for this platform and core. Offline (or with download off): the EPs
        already in the cache, with one warning."""
        with self._lock:
            try:
                self._require_download()
                entries = self._entries()
            except (E.CatalogUnavailable, E.DownloadDisabled) as exc:
                warnings.warn(f"the EP catalog is not used ({exc}); cached EPs only", RuntimeWarning, stacklevel=2)
                return self._cached_providers()
            platforms, abi = _platforms(), _ep_abi()
            best: dict[str, _Entry] = {}
            self.skipped = []
            for e in entries:
                why = self._compatible(e, platforms, abi)
                if why:
                    self.skipped.append(why)
                    continue
                name = str(e.custom.get("ep_name", ""))
                old = best.get(name)
                rank = (e.version, e.role == "certified")
                if old is None or rank > (old.version, old.role == "certified"):
                    best[name] = e
            return [self._provider(e) for _, e in sorted(best.items())]

    def _provider(self, e: _Entry) -> ExecutionProvider:
        c = e.custom
        return ExecutionProvider(
            name=str(c.get("ep_name")), version=str(c.get("ep_version", "")),
            certification=Certification.CERTIFIED if e.role == "certified" else Certification.UNCERTIFIED,
            device_types=tuple(c.get("device_types") or ()), vendor_ids=tuple(c.get("vendor_ids") or ()),
            target_path=e.path, _catalog=self, _entry=e,
        )  # fmt: skip

    def _cached_providers(self) -> list[ExecutionProvider]:
        out = []
        eps = self.cache / "eps"
        for folder in sorted(eps.iterdir()) if eps.is_dir() else []:
            current = self._cached(folder.name)
            if current is None:
                continue
            out.append(ExecutionProvider(
                name=folder.name, version=str(current.get("ep_version", "")),
                certification=Certification(current.get("certification", "Unknown")),
                device_types=tuple(current.get("device_types") or ()), vendor_ids=tuple(current.get("vendor_ids") or ()),
                target_path=str(current.get("target_path", "")), _catalog=self,
            ))  # fmt: skip
        return out

    def find_provider(self, name: str) -> ExecutionProvider:
        found = {p.name: p for p in self.find_all_providers()}
        if name in found:
            return found[name]
        why = [s for s in self.skipped if f"/{name}/" in s]
        if why:
            raise E.IncompatibleProvider(f"{name}: no catalog entry fits here — " + "; ".join(why))
        raise E.UnknownProvider(f"the EP catalog {self.url} offers no {name} (it has: {', '.join(found) or 'none'})")

    def ensure_and_register_certified(self, progress: ProgressCallback | None = None) -> list[str]:
        """Make every certified EP that serves a device of this machine ready and register it; returns
        the registered names. One EP's failure is a warning and does not stop the others."""
        present = {d.device.type.name for d in _providers.get_ep_devices()} | {"CPU"}
        done = []
        for p in self.find_all_providers():
            if p.certification is not Certification.CERTIFIED or not present & set(p.device_types):
                continue
            try:
                p.ensure_ready(progress)
                if p.try_register():
                    done.append(p.name)
            except E.CatalogError as exc:
                warnings.warn(f"{p.name} from the EP catalog was not registered: {exc}", RuntimeWarning, stacklevel=2)
        return done

    def remove(self, name: str) -> bool:
        """Delete a downloaded EP from the cache (True if there was one). A registered EP stays loaded in
        this process until it is unregistered."""
        with self._lock, _file_lock(self.cache / ".lock"):
            folder = self._ep_dir(name)
            if not folder.exists():
                return False
            trash = folder.with_name(f".trash-{name}-{os.getpid()}")
            os.replace(folder, trash)
            shutil.rmtree(trash, ignore_errors=True)
            return True

    # ---- download, verify, install into the cache

    def _ensure_ready(self, provider: ExecutionProvider, progress: ProgressCallback | None) -> None:
        with self._lock:
            if provider._entry is None:  # listed from the cache while offline
                if self._verify_cached(provider.name) is None:
                    raise E.CatalogUnavailable(f"{provider.name}: not cached and the catalog is not reachable")
                return
            if provider.ready_state is ReadyState.READY:
                if progress:
                    progress(100.0)
                return
            self._require_download()
            e = provider._entry
            if e.role != "certified" and not self.allow_uncertified:
                raise E.UncertifiedRefused(
                    f"{provider.name} {provider.version} is signed by the uncertified (third-party) role and only"
                    f" certified EPs are allowed (opt in: {ALLOW_UNCERTIFIED_ENV}=1)"
                )
            if e.info.length > self.max_target_bytes:
                raise E.OversizedTarget(
                    f"{e.path} declares {e.info.length} bytes, over this client's limit of {self.max_target_bytes}"
                    " (refused: oversized)"
                )
            with _file_lock(self.cache / ".lock"):
                if self._ready_state(provider) is ReadyState.READY:  # another process finished it meanwhile
                    return
                self._install(provider, e, progress)

    def _install(self, provider: ExecutionProvider, e: _Entry, progress: ProgressCallback | None) -> None:
        updater = self._get_updater()
        downloads = self.cache / "downloads"
        downloads.mkdir(parents=True, exist_ok=True)
        part = downloads / f"{e.sha256[:16]}-{os.getpid()}-{threading.get_ident()}.part"
        received = [0]
        report = progress or _default_progress(provider.name, e.info.length)

        def on_bytes(n: int) -> None:
            received[0] += n
            if report is not None:
                report(min(100.0, 100.0 * received[0] / max(1, e.info.length)))

        if report is not None:
            report(0.0)
        self._download_verified(updater, e.info, part, on_bytes)
        ep_dir = self._ep_dir(provider.name)
        ep_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=ep_dir, prefix=".tmp-"))
        try:
            manifest = _extract(part, staging)
            if manifest.get("ep_name") != provider.name:
                raise E.BadBundle(f"{e.path}: the bundle is for {manifest.get('ep_name')!r}, not {provider.name}")
            final_name = f"{provider.version}-{e.sha256[:16]}"
            final = ep_dir / final_name
            if final.exists():
                shutil.rmtree(final)
            os.replace(staging, final)
            current = {
                "schema": 1, "dir": final_name, "library": manifest["library"], "preload": manifest["preload"],
                "files": manifest["files"], "target_path": e.path, "target_sha256": e.sha256,
                "ep_version": provider.version, "certification": provider.certification.value,
                "registration_name": e.custom.get("registration_name") or provider.name,
                "device_types": list(provider.device_types), "vendor_ids": list(provider.vendor_ids),
                "environment": {str(k): str(v) for k, v in (e.custom.get("environment") or {}).items()},
            }  # fmt: skip
            _atomic_write(ep_dir / "current.json", json.dumps(current, indent=1).encode() + b"\n")
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            if not any(p for p in ep_dir.iterdir() if not p.name.startswith(".")):
                shutil.rmtree(ep_dir, ignore_errors=True)
            raise
        finally:
            part.unlink(missing_ok=True)
        for old in ep_dir.iterdir():  # previous versions
            if old.is_dir() and old.name != final_name and not old.name.startswith(".tmp-"):
                shutil.rmtree(old, ignore_errors=True)

    # ---- registration

    def _register(self, provider: ExecutionProvider) -> bool:
        with self._lock:
            if provider.name in _providers.get_available_providers():
                return True  # installed from a wheel, or registered before
            current = self._verify_cached(provider.name)
            if current is None or (provider._entry is not None and current.get("target_sha256") != provider._entry.sha256):
                return False
            folder = self._ep_dir(provider.name) / current["dir"]
            for key, value in (current.get("environment") or {}).items():  # the EP's defaults; the user's win
                os.environ.setdefault(str(key), str(value))
            _preload(folder, current.get("preload") or [])
            _providers.register_execution_provider_library(str(current.get("registration_name") or provider.name),
                                                           folder / current["library"])  # fmt: skip
            return provider.name in _providers.get_available_providers()


_preloaded: list[Any] = []


def _preload(folder: Path, names: Sequence[str]) -> None:
    """Load the bundle's runtime libraries first, by absolute path, so the EP library's dependencies resolve
    to these verified copies (ELF: by soname, RTLD_GLOBAL; Windows: the DLL folder is added to the search)."""
    if sys.platform == "win32":
        _preloaded.append(os.add_dll_directory(str(folder / "lib")))  # type: ignore[attr-defined,unused-ignore]
    mode = os.RTLD_NOW | ctypes.RTLD_GLOBAL if hasattr(os, "RTLD_NOW") else 0
    for rel in names:
        _preloaded.append(ctypes.CDLL(str(folder / rel), mode=mode))


def _extract(archive: Path, dest: Path) -> dict[str, Any]:
    """Unpack a verified bundle and check it against its own manifest (names, hashes, no path escapes)."""
    try:
        with zipfile.ZipFile(archive) as zf:
            manifest = json.loads(zf.read("manifest.json"))
            files = manifest.get("files")
            if not isinstance(files, dict) or not isinstance(manifest.get("library"), str):
                raise E.BadBundle("the bundle's manifest has no files/library")
            names = set(zf.namelist()) - {"manifest.json"}
            if names != set(files):
                raise E.BadBundle(f"the bundle holds {sorted(names)} but its manifest lists {sorted(files)}")
            for rel, digest in files.items():
                parts = rel.split("/")
                if rel.startswith("/") or "\\" in rel or any(p in ("", ".", "..") for p in parts):
                    raise E.BadBundle(f"the bundle's member {rel!r} escapes its folder")
                data = zf.read(rel)
                if hashlib.sha256(data).hexdigest() != digest:
                    raise E.BadBundle(f"the bundle's {rel} does not match its manifest")
                out = dest / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(data)
            if manifest["library"] not in files or not set(manifest.get("preload", [])) <= set(files):
                raise E.BadBundle("the bundle's manifest names a library it does not hold")
            return dict(manifest)
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise E.BadBundle(f"the bundle cannot be read ({exc})") from exc


def _default_progress(name: str, total: int) -> ProgressCallback | None:
    """A progress line on an interactive stderr for downloads over 4 MB (nothing otherwise)."""
    if total < (4 << 20) or not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty()):
        return None
    last = [-1]

    def show(percent: float) -> None:
        step = int(percent)
        if step != last[0]:
            last[0] = step
            end = "\n" if step >= 100 else ""
            sys.stderr.write(f"\rdownloading {name}: {step:3d}% of {total / 1e6:.1f} MB{end}")
            sys.stderr.flush()

    return show
