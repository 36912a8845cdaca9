"""Editing a built wheel: a variant is its component's wheel under another distribution name.

scikit-build-core takes the distribution name from ``[project] name`` in pyproject.toml, which PEP 621 keeps
static, so the build step renames the wheel it built: the ``.dist-info`` (and ``.data``) folder, ``Name:``
in METADATA, the variant's extra ``Requires-Dist`` lines, RECORD (every hash recomputed) and the file
name. Entries keep their order, timestamps and compression: the edit is deterministic.
"""

from __future__ import annotations

import base64
import hashlib
import re
import tomllib
import zipfile
from collections.abc import Sequence
from pathlib import Path

from .errors import BuildError


def project_name(component_dir: Path) -> str:
    data = tomllib.loads((component_dir / "pyproject.toml").read_text(encoding="utf-8"))
    name = data.get("project", {}).get("name")
    if not isinstance(name, str):
        raise BuildError(f"{component_dir}/pyproject.toml has no [project] name")
    return name


def _file_name_part(dist: str) -> str:
    return re.sub(r"[-_.]+", "_", dist)


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def _edit_metadata(text: str, dist: str, requires: Sequence[str]) -> str:
    head, sep, body = text.partition("\n\n")
    lines = head.split("\n")
    names = [i for i, line in enumerate(lines) if line.startswith("Name: ")]
    if len(names) != 1:
        raise BuildError(f"the wheel's METADATA has {len(names)} Name: lines")
    lines[names[0]] = f"Name: {dist}"
    present = {line.removeprefix("Requires-Dist: ").strip() for line in lines if line.startswith("Requires-Dist: ")}
    last_req = max((i for i, line in enumerate(lines) if line.startswith("Requires-Dist: ")), default=len(lines) - 1)
    new = [f"Requires-Dist: {r}" for r in requires if r not in present]
    lines[last_req + 1 : last_req + 1] = new
    return "\n".join(lines) + sep + body


def rename_distribution(wheel: Path, dist: str, requires: Sequence[str], out_dir: Path) -> Path:
    """``wheel`` as distribution ``dist`` with ``requires`` added; written to ``out_dir``, path returned."""
    parts = wheel.name[: -len(".whl")].split("-")
    if len(parts) < 5:
        raise BuildError(f"{wheel.name} is not a wheel file name")
    old_prefix = f"{parts[0]}-{parts[1]}"
    new_prefix = f"{_file_name_part(dist)}-{parts[1]}"
    out_dir.mkdir(parents=True, exist_ok=True)
    dest = out_dir / ("-".join([_file_name_part(dist), *parts[1:]]) + ".whl")
    record_name = f"{new_prefix}.dist-info/RECORD"
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(dest, "w") as dst:
        if f"{old_prefix}.dist-info/METADATA" not in src.namelist():
            raise BuildError(f"{wheel.name} has no {old_prefix}.dist-info/METADATA")
        records: list[str] = []
        for info in src.infolist():
            name = info.filename
            if name == f"{old_prefix}.dist-info/RECORD":
                continue
            data = src.read(name)
            for suffix in (".dist-info/", ".data/"):
                if name.startswith(old_prefix + suffix):
                    name = new_prefix + suffix + name[len(old_prefix + suffix) :]
            if name == f"{new_prefix}.dist-info/METADATA":
                data = _edit_metadata(data.decode("utf-8"), dist, requires).encode("utf-8")
            out = zipfile.ZipInfo(name, date_time=info.date_time)
            out.compress_type, out.external_attr = info.compress_type, info.external_attr
            dst.writestr(out, data)
            if not name.endswith("/"):  # RECORD lists files only
                records.append(f"{name},{_record_hash(data)},{len(data)}")
        records.append(f"{record_name},,")
        rec = zipfile.ZipInfo(record_name, date_time=src.getinfo(f"{old_prefix}.dist-info/METADATA").date_time)
        rec.compress_type = zipfile.ZIP_DEFLATED
        dst.writestr(rec, "\n".join(records) + "\n")
    return dest
