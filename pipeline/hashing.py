"""Input hashing and the per-cell build cache.

A cell is rebuilt only when its input hash changes. The hash covers the component's files,
its conan recipe, the target's host profile, the matrix entries of the cell, the identity of
the compilers (resolved path + size + mtime; no process is started) and the build logic
itself. It is computed without invoking CMake, so a no-op build costs a directory walk.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from . import toolchains
from .matrix import Cell

#: Folder names never hashed (build outputs and caches inside a component).
EXCLUDED_DIRS = frozenset({"build", "dist", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".git"})
EXCLUDED_SUFFIXES = (".pyc", ".pyo", ".egg-info", ".swp", "~")
CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def iter_files(folder: Path) -> Iterable[Path]:
    """Files under ``folder`` in a stable order, skipping build outputs and caches."""
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in EXCLUDED_DIRS and not d.endswith(".egg-info"))
        for name in sorted(filenames):
            if not name.endswith(EXCLUDED_SUFFIXES):
                yield Path(dirpath) / name


def tree_files(folder: Path) -> dict[str, str]:
    """Relative path → sha256 (with an 'x:' prefix for executables) of every hashed file."""
    out = {}
    for path in iter_files(folder):
        mark = "x:" if os.access(path, os.X_OK) else ""
        out[path.relative_to(folder).as_posix()] = mark + sha256_file(path)
    return out


def tree_hash(folder: Path, files: dict[str, str] | None = None) -> str:
    """Content hash of a folder: relative paths, executable bits and bytes of every file."""
    h = hashlib.sha256()
    for rel, digest in sorted((files if files is not None else tree_files(folder)).items()):
        h.update(rel.encode() + b"\0" + digest.encode() + b"\n")
    return h.hexdigest()


#: The build logic is an input of every cell: editing these modules rebuilds.
LOGIC_MODULES = ("build.py", "wheelcheck.py", "wheeledit.py", "hashing.py", "platforms.py", "toolchains.py")


def logic_version() -> str:
    here = Path(__file__).parent
    return combine({name: sha256_file(here / name) for name in LOGIC_MODULES if (here / name).is_file()})


@dataclass(frozen=True, kw_only=True)
class CellInputs:
    """The named inputs of a cell and the one hash over them."""

    named: dict[str, str]
    files: dict[str, str]  #: the component's files (relative path → sha256), to name what changed
    hash: str


def cell_input_hash(
    cell: Cell,
    *,
    root: Path,
    sdk_defines: Sequence[tuple[str, str]] = (),
    component_files: dict[str, str] | None = None,
    logic: str | None = None,
    catalog_client: str | None = None,
) -> CellInputs:
    """**The** input hash of a cell: the build decides "up to date" with it, the build record stores it, the
    release gate recomputes it to prove the sources did not change since, and the provenance states it.

    ``sdk_defines`` are the CMake defines the plan resolved for the cell's SDKs (e.g. the path of nvcc):
    they change what is built, so they are inputs for everyone who asks.
    """
    comp, target = cell.component, cell.target
    files = component_files if component_files is not None else tree_files(root / comp.path)
    named = {
        "component": tree_hash(root / comp.path, files),
        "recipe": tree_hash(root / comp.recipe) if comp.recipe else "none",
        "profile": sha256_file(root / target.conan_profile),
        "target": json.dumps(asdict(target), sort_keys=True),
        "variant": json.dumps(asdict(cell.variant), sort_keys=True),
        "component_entry": json.dumps({k: v for k, v in asdict(comp).items() if k != "variants"}, sort_keys=True),
        "compilers": toolchains.identity(target, component_toolchain=comp.toolchain),
        "logic": logic if logic is not None else logic_version(),
    }
    for rel in comp.extra_inputs:  # files outside the component folder that its build reads
        path = root / rel
        named[f"extra:{rel}"] = tree_hash(path) if path.is_dir() else sha256_file(path)
    if sdk_defines:
        named["sdk"] = json.dumps(sorted(sdk_defines))
    if catalog_client is not None:  # the EP catalog root + client configuration a winml wheel ships
        named["catalog_client"] = catalog_client
    return CellInputs(named=named, files=files, hash=combine(named))


def combine(inputs: dict[str, str]) -> str:
    h = hashlib.sha256()
    for key in sorted(inputs):
        h.update(key.encode() + b"=" + inputs[key].encode() + b"\n")
    return h.hexdigest()


def changed_keys(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """Keys added, removed or changed between two maps (inputs, or files from :func:`tree_files`)."""
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
