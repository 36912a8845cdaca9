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
import shutil
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path

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


def changed_files(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """Files added, removed or modified between two :func:`tree_files` maps."""
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def tool_identity(name: str) -> str:
    """Resolved path, size and mtime of an executable on PATH ('missing' if absent)."""
    found = shutil.which(name)
    if found is None:
        return f"{name}:missing"
    real = Path(found).resolve()
    st = real.stat()
    return f"{name}:{real}:{st.st_size}:{st.st_mtime_ns}"


def cell_inputs(
    cell: Cell,
    *,
    root: Path,
    logic_version: str,
    component_files: dict[str, str] | None = None,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """The named inputs of a cell; their hash is the cell's input hash."""
    comp, target = cell.component, cell.target
    inputs = {
        "component": tree_hash(root / comp.path, component_files),
        "recipe": tree_hash(root / comp.recipe) if comp.recipe else "none",
        "profile": sha256_file(root / target.conan_profile),
        "target": json.dumps(asdict(target), sort_keys=True),
        "variant": json.dumps(asdict(cell.variant), sort_keys=True),
        "component_entry": json.dumps({k: v for k, v in asdict(comp).items() if k != "variants"}, sort_keys=True),
        "compilers": tool_identity(target.c_compiler) + ";" + tool_identity(target.cxx_compiler),
        "logic": logic_version,
    }
    for rel in comp.extra_inputs:  # files outside the component folder that its build reads
        path = root / rel
        inputs[f"extra:{rel}"] = tree_hash(path) if path.is_dir() else sha256_file(path)
    inputs.update(extra or {})
    return inputs


def combine(inputs: dict[str, str]) -> str:
    h = hashlib.sha256()
    for key in sorted(inputs):
        h.update(key.encode() + b"=" + inputs[key].encode() + b"\n")
    return h.hexdigest()


def changed_inputs(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """Names of inputs that differ (for the 'why rebuilt' line)."""
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
