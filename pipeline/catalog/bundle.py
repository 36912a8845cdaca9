"""EP bundles: what the EP catalog serves for one EP wheel — its plugin library and every library that
library needs at run time that the system does not provide, in one verifiable archive.

A bundle is a zip with ``manifest.json`` and ``lib/<files>``. The plugin library's bytes are the ones of the
released (signed, tested) wheel; the runtime libraries come from the wheels the EP wheel requires
(``Requires-Dist``, e.g. ``onednn-cpu-gomp`` for libdnnl), downloaded by pip for the wheel's platform. The
closure follows the binaries' own dependency lists (ELF DT_NEEDED / PE imports): a library found in a
required wheel is bundled; one found nowhere is recorded as a system library (libc, libgomp, …).
The archive is deterministic (sorted entries, fixed timestamps): the same inputs give the same bytes, so
re-publishing an unchanged EP leaves the catalog unchanged.
"""

from __future__ import annotations

import email.parser
import hashlib
import io
import json
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..binaries import BinaryFormatError, parse
from ..errors import PublishError
from ..matrix import Cell

_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
_LIB_SUFFIX = re.compile(r"(\.so(\.\d+)*|\.dll|\.dylib)$", re.IGNORECASE)
EP_ENTRY = "MrtEpCreateFactories"


@dataclass(frozen=True, kw_only=True)
class Bundle:
    path: str  #: the catalog target path
    data: bytes
    custom: dict[str, Any]


def ep_abi_version(root: Path) -> tuple[int, int]:
    """MRT_EP_ABI_VERSION_MAJOR/MINOR of the EP ABI header the EPs are built against."""
    text = (root / "core" / "include" / "mosaicrt" / "ep.h").read_text(encoding="utf-8")
    major = re.search(r"#define MRT_EP_ABI_VERSION_MAJOR (\d+)", text)
    minor = re.search(r"#define MRT_EP_ABI_VERSION_MINOR (\d+)", text)
    if not major or not minor:
        raise PublishError("core/include/mosaicrt/ep.h does not define MRT_EP_ABI_VERSION_MAJOR/MINOR")
    return int(major[1]), int(minor[1])


def _wheel_metadata(zf: zipfile.ZipFile) -> email.message.Message:
    name = next((n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)), None)
    if name is None:
        raise PublishError("the wheel has no .dist-info/METADATA")
    return email.parser.Parser().parsestr(zf.read(name).decode("utf-8"))


def _platform_tags(wheel_name: str) -> list[str]:
    return wheel_name[: -len(".whl")].rsplit("-", maxsplit=1)[-1].split(".")


def _pip_platforms(tags: list[str]) -> list[str]:
    """The wheel's platform tags plus the older manylinux tags a runtime dependency may carry."""
    out = list(tags)
    for tag in tags:
        m = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", tag)
        if m:
            major, minor, arch = int(m[1]), int(m[2]), m[3]
            out += [f"manylinux_{major}_{v}_{arch}" for v in range(minor - 1, 4, -1)]
            out += [f"manylinux2014_{arch}", f"manylinux2010_{arch}", f"manylinux1_{arch}"]
    return list(dict.fromkeys(out))


def runtime_wheels(requirements: list[str], tags: list[str], dest: Path) -> list[Path]:
    """Download (pip, no dependencies, binary only) the wheels the EP wheel requires, for its platform."""
    reqs = [r.split(";", 1)[0].strip() for r in requirements if "extra ==" not in r]
    if not reqs:
        return []
    dest.mkdir(parents=True, exist_ok=True)
    before = set(dest.glob("*.whl"))
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--dest", str(dest),
           "--python-version", "3.11", *[a for p in _pip_platforms(tags) for a in ("--platform", p)], *reqs]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PublishError(f"pip could not download the EP's runtime wheels {reqs}: {done.stderr.strip()[-600:]}")
    found: list[Path] = []
    for req in reqs:
        name = re.split(r"[\s<>=!~\[]", req, maxsplit=1)[0]
        norm = re.sub(r"[-_.]+", "_", name).lower()
        matches = sorted(p for p in dest.glob("*.whl") if p.name.lower().startswith(norm + "-"))
        if not matches:
            raise PublishError(f"pip reported success but no wheel of {name} is in {dest} ({sorted(before)})")
        found.append(matches[-1])
    return found


def _libraries(zf: zipfile.ZipFile) -> dict[str, str]:
    """Base name → member name of every shared library in a wheel."""
    return {Path(n).name: n for n in zf.namelist() if _LIB_SUFFIX.search(n) and not n.endswith("/")}


def build_bundle(wheel: Path, cell: Cell, *, root: Path, deps_dir: Path) -> Bundle:
    """The catalog bundle of one released EP wheel (``cell.component.catalog`` must be set)."""
    entry = cell.component.catalog
    if entry is None:
        raise PublishError(f"{cell.component.name} is not published in the EP catalog (no [catalog] table)")
    with zipfile.ZipFile(wheel) as zf:
        meta = _wheel_metadata(zf)
        package = cell.component.import_package
        plugin: tuple[str, bytes] | None = None
        for name in zf.namelist():
            if not name.startswith(package + "/") or not _LIB_SUFFIX.search(name):
                continue
            data = zf.read(name)
            try:
                info = parse(data)
            except BinaryFormatError:
                continue
            if info is not None and any(s.name == EP_ENTRY and s.exported for s in info.symbols):
                plugin = (Path(name).name, data)
        if plugin is None:
            raise PublishError(f"{wheel.name}: no library under {package}/ exports {EP_ENTRY}")
    tags = _platform_tags(wheel.name)
    deps = runtime_wheels(meta.get_all("Requires-Dist") or [], tags, deps_dir)
    files: dict[str, bytes] = {plugin[0]: plugin[1]}
    sources: dict[str, str] = {plugin[0]: wheel.name}
    system: set[str] = set()
    available: dict[str, tuple[Path, str]] = {}
    for dep in deps:
        with zipfile.ZipFile(dep) as dz:
            for base, member in _libraries(dz).items():
                available.setdefault(base, (dep, member))
    pending = [plugin[0]]
    order: list[str] = []  # bundled dependencies in discovery order; loaded deepest first
    while pending:
        current = pending.pop()
        info = parse(files[current], symbols=False)
        for needed in info.needed if info else ():
            base = Path(needed).name
            if base in files or base in system:
                continue
            if base in available:
                dep, member = available[base]
                with zipfile.ZipFile(dep) as dz:
                    files[base] = dz.read(member)
                sources[base] = dep.name
                order.append(base)
                pending.append(base)
            else:
                system.add(base)
    major, minor = ep_abi_version(root)
    preload = [f"lib/{n}" for n in reversed(order)]
    manifest = {
        "schema": 1,
        "ep_name": entry.ep_name,
        "library": f"lib/{plugin[0]}",
        "preload": preload,
        "files": {f"lib/{n}": hashlib.sha256(d).hexdigest() for n, d in sorted(files.items())},
        "sources": {f"lib/{n}": w for n, w in sorted(sources.items())},
        "system_libraries": sorted(system),
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as out:
        for name, data in [("manifest.json", json.dumps(manifest, indent=1, sort_keys=True).encode() + b"\n"),
                           *((f"lib/{n}", d) for n, d in sorted(files.items()))]:  # fmt: skip
            zi = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = 0o644 << 16
            out.writestr(zi, data, compresslevel=6)
    data = buf.getvalue()
    version = cell.component.version
    custom: dict[str, Any] = {
        "kind": "ep-bundle",
        "ep_name": entry.ep_name,
        "ep_version": version,
        "registration_name": cell.component.name,
        "distribution": cell.dist,
        "device_types": list(entry.device_types),
        "vendor_ids": list(entry.vendor_ids),
        "environment": dict(entry.environment),
        "ep_abi": {"major": major, "min_minor": minor},
        "platform_tags": tags,
        "os": cell.target.os,
        "arch": cell.target.arch,
        "size": sum(len(d) for d in files.values()),
        "library": manifest["library"],
        "source_wheel": {"name": wheel.name, "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()},
    }
    path = f"certified/{entry.ep_name}/{tags[0]}/{wheel.name[: -len('.whl')]}.zip"
    return Bundle(path=path, data=data, custom=custom)
