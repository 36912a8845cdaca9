"""Wheel content check: the wheel holds what the cell promises and nothing else.

Checks name/version/tag, size, the top-level layout, the RECORD hashes, the metadata, and
that every native library is built for the cell's target architecture (ELF/PE/Mach-O header).
For plugin EP wheels (``exports`` given) the plugin library inside the import package must
export exactly the EP entry points and nothing else (ELF dynamic symbol table).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
import zipfile
from email.parser import Parser
from pathlib import Path

from .matrix import Target

NATIVE_SUFFIXES = (".so", ".dll", ".dylib", ".pyd")
#: What a plugin EP library exports (mosaicrt/ep.h); anything more leaks internals.
EP_ENTRY_POINTS = ("MrtEpCreateFactories", "MrtEpGetAbiVersion", "MrtEpReleaseFactory")
FORBIDDEN = re.compile(r"(\.(cc|cpp|cxx|o|obj|pyc)$)|(CMakeCache\.txt$)|(/__pycache__/)")


def normalize(dist: str) -> str:
    return re.sub(r"[-_.]+", "_", dist).lower()


def platform_ok(plat: str, target: Target) -> bool:
    """Every platform tag of a (compressed) tag set matches what the target ships (manylinux_*_aarch64, ...)."""
    return all(re.fullmatch(target.shipped_tag_pattern, p) for p in plat.split("."))


_LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def glibc_of_tag(plat: str) -> tuple[int, int] | None:
    """The glibc a manylinux platform tag requires (manylinux_2_28_x86_64 → (2, 28)); None for other tags."""
    m = re.match(r"manylinux_(\d+)_(\d+)_", plat)
    if m:
        return int(m[1]), int(m[2])
    legacy = re.match(r"(manylinux\d+)_", plat)
    return _LEGACY_MANYLINUX.get(legacy[1]) if legacy else None


def check_wheel(
    path: Path,
    *,
    dist: str,
    version: str,
    import_package: str,
    target: Target,
    max_mb: float,
    exports: tuple[str, ...] | None = None,
    max_glibc: tuple[int, int] | None = None,
) -> list[str]:
    """Problems found in the wheel at ``path`` (empty list: the wheel is good).

    ``max_glibc``: the newest glibc the wheel may require (its manylinux tags must not be newer), for
    targets built against an old glibc so that older distributions can install them.
    """
    from . import binaries  # LIEF: only where wheels are checked (the build), not where they are tested

    problems: list[str] = []
    norm = normalize(dist)
    m = re.fullmatch(r"(?P<name>[^-]+)-(?P<ver>[^-]+)-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl", path.name)
    if m is None:
        return [f"{path.name}: not a wheel file name"]
    if m["name"].lower() != norm:
        problems.append(f"distribution is '{m['name']}', expected '{norm}'")
    if m["ver"] != version:
        problems.append(f"version is {m['ver']}, VERSION says {version}")
    if (m["py"], m["abi"]) != ("py3", "none"):
        problems.append(f"tag is {m['py']}-{m['abi']}, expected py3-none (ctypes, no CPython ABI)")
    if not platform_ok(m["plat"], target):
        problems.append(f"platform tag is {m['plat']}, expected {target.shipped_tag_hint}")
    if max_glibc is not None:
        for plat in m["plat"].split("."):
            need = glibc_of_tag(plat)
            if need is not None and need > max_glibc:
                problems.append(
                    f"platform tag {plat} needs glibc {need[0]}.{need[1]}, newer than the target's"
                    f" {max_glibc[0]}.{max_glibc[1]} (a symbol from a newer glibc was linked)"
                )
    size_mb = path.stat().st_size / 1e6
    if size_mb > max_mb:
        problems.append(f"wheel is {size_mb:.2f} MB, over the component limit {max_mb} MB")

    dist_info = f"{m['name']}-{m['ver']}.dist-info"
    allowed_top = {import_package, dist_info, f"{m['name']}.libs"}
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        for name in names:
            top = name.split("/", 1)[0]
            if top not in allowed_top:
                problems.append(f"unexpected top-level entry '{name}'")
            elif FORBIDDEN.search("/" + name):
                problems.append(f"build or source file shipped: '{name}'")
        if f"{import_package}/__init__.py" not in names:
            problems.append(f"missing {import_package}/__init__.py")
        natives = [n for n in names if n.endswith(NATIVE_SUFFIXES) or ".so." in n]
        if not any(n.startswith(import_package + "/") for n in natives):
            problems.append(f"no native library inside {import_package}/")
        for n in natives:
            arch = binaries.arch_of(zf.read(n))
            if arch != target.arch:
                problems.append(
                    f"{n} is built for {arch or 'no known binary format'}, target {target.name} is {target.arch}"
                )
        if exports is not None:
            problems += _check_exports(zf, [n for n in natives if n.startswith(import_package + "/")], exports)
        problems += _check_record(zf, names, dist_info)
        problems += _check_metadata(zf, names, dist_info, norm, version)
    return problems


def _check_record(zf: zipfile.ZipFile, names: list[str], dist_info: str) -> list[str]:
    record = f"{dist_info}/RECORD"
    if record not in names:
        return [f"missing {record}"]
    problems = []
    listed = set()
    for row in csv.reader(io.StringIO(zf.read(record).decode())):
        if not row:
            continue
        listed.add(row[0])
        if row[0] == record:
            continue
        if row[0] not in names:
            problems.append(f"RECORD lists missing file {row[0]}")
            continue
        algo, _, want = row[1].partition("=")
        got = base64.urlsafe_b64encode(hashlib.new(algo, zf.read(row[0])).digest()).rstrip(b"=").decode()
        if got != want:
            problems.append(f"RECORD hash mismatch for {row[0]}")
    unlisted = [n for n in names if n not in listed and not n.endswith("/")]
    if unlisted:
        problems.append(f"files not in RECORD: {', '.join(unlisted[:5])}")
    return problems


def _check_metadata(zf: zipfile.ZipFile, names: list[str], dist_info: str, norm: str, version: str) -> list[str]:
    problems = []
    meta_name = f"{dist_info}/METADATA"
    if meta_name not in names:
        return [f"missing {meta_name}"]
    meta = Parser().parsestr(zf.read(meta_name).decode())
    if normalize(meta.get("Name", "")) != norm:
        problems.append(f"METADATA Name is {meta.get('Name')!r}")
    if meta.get("Version") != version:
        problems.append(f"METADATA Version is {meta.get('Version')!r}, VERSION says {version}")
    if not meta.get("Requires-Python"):
        problems.append("METADATA has no Requires-Python")
    wheel_name = f"{dist_info}/WHEEL"
    if wheel_name in names:
        wheel = Parser().parsestr(zf.read(wheel_name).decode())
        if wheel.get("Root-Is-Purelib", "").lower() != "false":
            problems.append("WHEEL says Root-Is-Purelib: true for a wheel with native code")
    return problems


def _check_exports(zf: zipfile.ZipFile, libraries: list[str], exports: tuple[str, ...]) -> list[str]:
    """Each ELF plugin library exports exactly ``exports`` (PE/Mach-O are checked on their runners)."""
    from . import binaries  # LIEF: only where wheels are checked (the build), not where they are tested

    problems = []
    for name in libraries:
        data = zf.read(name)
        if data[:4] != b"\x7fELF":
            continue
        try:
            info = binaries.parse(data)
        except binaries.BinaryFormatError as exc:
            problems.append(f"{name}: cannot read its dynamic symbols ({exc})")
            continue
        got = {s.name for s in info.symbols if s.exported} if info else set()
        missing = sorted(set(exports) - got)
        extra = sorted(got - set(exports))
        if missing:
            problems.append(f"{name} does not export the entry point(s) {', '.join(missing)}")
        if extra:
            more = f" (+{len(extra) - 5} more)" if len(extra) > 5 else ""
            problems.append(
                f"{name} exports {len(extra)} symbol(s) besides the entry points: {', '.join(extra[:5])}{more}"
                " (hide them: visibility=hidden and a linker version script)"
            )
    return problems
