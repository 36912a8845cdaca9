"""pipeline.wheelcheck: a wheel holds what its cell promises, for the right architecture."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

import pytest

from pipeline.matrix import load_matrix
from pipeline.wheelcheck import check_wheel

from .conftest import REPO
from .test_binaries import make_elf, make_pe

MATRIX = load_matrix(REPO)
X86 = MATRIX.target("linux-x86_64")
WIN = MATRIX.target("windows-x86_64")


def elf(machine: int) -> bytes:
    return make_elf(bits=64, machine=machine)


def pe(machine: int) -> bytes:
    return make_pe(machine=machine, dll=True)


def make_wheel(
    folder: Path,
    files: dict[str, bytes],
    *,
    name: str = "mosaicrt",
    version: str = "0.1.0",
    tag: str = "py3-none-manylinux_2_28_x86_64",
    tamper: str | None = None,
) -> Path:
    dist_info = f"{name}-{version}.dist-info"
    files = {
        **files,
        f"{dist_info}/METADATA": f"Metadata-Version: 2.4\nName: {name}\nVersion: {version}\n"
        f"Requires-Python: >=3.11\n".encode(),
        f"{dist_info}/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(),
    }
    rows = []
    for n, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{n},sha256={digest},{len(data)}")
    rows.append(f"{dist_info}/RECORD,,")
    if tamper:
        files[tamper] = files[tamper] + b"tampered"
    path = folder / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for n, data in files.items():
            zf.writestr(n, data)
        zf.writestr(f"{dist_info}/RECORD", "\n".join(rows) + "\n")
    return path


GOOD = {"mosaicrt/__init__.py": b"", "mosaicrt/libmosaicrt.so": elf(62)}


def check(path: Path, target=X86, max_mb: float = 3) -> list[str]:  # type: ignore[no-untyped-def]
    return check_wheel(path, dist="mosaicrt", version="0.1.0", import_package="mosaicrt", target=target, max_mb=max_mb)


def test_good_wheel_passes(tmp_path: Path) -> None:
    assert check(make_wheel(tmp_path, GOOD)) == []


def test_compressed_manylinux_tag_passes(tmp_path: Path) -> None:
    assert check(make_wheel(tmp_path, GOOD, tag="py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64")) == []


@pytest.mark.parametrize(
    ("kwargs", "files", "expected"),
    [
        ({"tag": "py3-none-linux_x86_64"}, GOOD, "platform tag is linux_x86_64, expected manylinux_*_x86_64"),
        ({"tag": "cp311-cp311-manylinux_2_28_x86_64"}, GOOD, "expected py3-none"),
        ({"version": "0.2.0"}, GOOD, "version is 0.2.0, VERSION says 0.1.0"),
        ({}, {**GOOD, "mosaicrt/libmosaicrt.so": elf(183)}, "is built for aarch64, target linux-x86_64 is x86_64"),
        ({}, {**GOOD, "mosaicrt/kernel.cc": b"int x;"}, "build or source file shipped: 'mosaicrt/kernel.cc'"),
        ({}, {**GOOD, "stray/file.txt": b""}, "unexpected top-level entry 'stray/file.txt'"),
        ({}, {"mosaicrt/__init__.py": b""}, "no native library inside mosaicrt/"),
        ({}, {"mosaicrt/libmosaicrt.so": elf(62)}, "missing mosaicrt/__init__.py"),
        ({"tamper": "mosaicrt/libmosaicrt.so"}, GOOD, "RECORD hash mismatch for mosaicrt/libmosaicrt.so"),
    ],
)
def test_problems_are_reported(tmp_path: Path, kwargs: dict[str, str], files: dict[str, bytes], expected: str) -> None:
    problems = check(make_wheel(tmp_path, files, **kwargs))
    assert any(expected in p for p in problems), problems


def test_size_limit(tmp_path: Path) -> None:
    problems = check(make_wheel(tmp_path, GOOD), max_mb=0.0001)
    assert any("over the component limit" in p for p in problems)


def test_windows_wheel(tmp_path: Path) -> None:
    files = {"mosaicrt/__init__.py": b"", "mosaicrt/libmosaicrt.dll": pe(0x8664)}
    assert check(make_wheel(tmp_path, files, tag="py3-none-win_amd64"), target=WIN) == []
    files["mosaicrt/libmosaicrt.dll"] = pe(0xAA64)
    problems = check(make_wheel(tmp_path, files, tag="py3-none-win_amd64"), target=WIN)
    assert any("built for aarch64" in p for p in problems)
