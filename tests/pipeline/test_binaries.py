"""pipeline.binaries: ELF/PE headers and symbol tables read from bytes (fixture images built here)."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from pipeline.binaries import BinaryFormatError, Symbol, arch_of, parse, read_binary
from pipeline.matrix import load_matrix
from pipeline.toolchains import ensure_toolchain, system_installer

from .conftest import REPO

MATRIX = load_matrix(REPO)

# (name, defined, is_function)
Sym = tuple[str, bool, bool]


def make_elf(*, bits: int, machine: int, flags: int = 0, etype: int = 3, symbols: tuple[Sym, ...] = ()) -> bytes:
    """A minimal little-endian ELF: header, .symtab, .strtab and their section headers."""
    strtab = b"\0"
    offsets = []
    for name, _, _ in symbols:
        offsets.append(len(strtab))
        strtab += name.encode() + b"\0"
    ent = 16 if bits == 32 else 24
    symtab = bytes(ent)  # the null symbol
    for (_, defined, func), off in zip(symbols, offsets, strict=True):
        info = (1 << 4) | (2 if func else 1)  # GLOBAL, FUNC/OBJECT
        shndx = 1 if defined else 0
        if bits == 32:
            symtab += struct.pack("<IIIBBH", off, 0, 0, info, 0, shndx)
        else:
            symtab += struct.pack("<IBBHQQ", off, info, 0, shndx, 0, 0)
    ehsize = 52 if bits == 32 else 64
    sym_off = ehsize
    str_off = sym_off + len(symtab)
    sh_off = str_off + len(strtab)
    if bits == 32:
        sh = lambda t, o, s, link, es: struct.pack("<10I", 0, t, 0, 0, o, s, link, 0, 4, es)  # noqa: E731
        shentsize = 40
    else:
        sh = lambda t, o, s, link, es: struct.pack("<IIQQQQIIQQ", 0, t, 0, 0, o, s, link, 0, 8, es)  # noqa: E731
        shentsize = 64
    sections = sh(0, 0, 0, 0, 0) + sh(2, sym_off, len(symtab), 2, ent) + sh(3, str_off, len(strtab), 0, 0)
    ident = b"\x7fELF" + bytes([1 if bits == 32 else 2, 1, 1]) + bytes(9)
    if bits == 32:
        header = ident + struct.pack("<HHIIIIIHHHHHH", etype, machine, 1, 0, 0, sh_off, flags, ehsize, 0, 0,
                                     shentsize, 3, 0)
    else:
        header = ident + struct.pack("<HHIQQQIHHHHHH", etype, machine, 1, 0, 0, sh_off, flags, ehsize, 0, 0,
                                     shentsize, 3, 0)
    assert len(header) == ehsize
    return header + symtab + strtab + sections


def make_pe(*, machine: int, dll: bool = False, symbols: tuple[Sym, ...] = ()) -> bytes:
    """A minimal PE image: DOS stub, COFF header, an optional-header magic, a COFF symbol table."""
    strtab = b""
    records = b""
    for name, defined, func in symbols:
        raw = name.encode()
        if len(raw) <= 8:
            field = raw.ljust(8, b"\0")
        else:
            field = struct.pack("<II", 0, 4 + len(strtab))
            strtab += raw + b"\0"
        records += field + struct.pack("<IhHBB", 0, 1 if defined else 0, 0x20 if func else 0, 2, 0)
    coff_off = 0x40 + 4
    opt = struct.pack("<H", 0x20B) + bytes(238)
    sym_off = coff_off + 20 + len(opt)
    characteristics = 0x0022 | (0x2000 if dll else 0)
    dos = b"MZ" + bytes(0x3A) + struct.pack("<I", 0x40)
    coff = struct.pack("<HHIIIHH", machine, 0, 0, sym_off if symbols else 0, len(symbols), len(opt), characteristics)
    return dos + b"PE\0\0" + coff + opt + records + struct.pack("<I", 4 + len(strtab)) + strtab


def test_elf64_aarch64_shared_library_with_symbols() -> None:
    data = make_elf(
        bits=64,
        machine=183,
        symbols=(("_ZN3mrt17sgemm_neon_kernelEv", True, True), ("MrtRun", True, True), ("memcpy", False, True)),
    )
    info = parse(data)
    assert info is not None
    assert (info.format, info.arch, info.bits, info.kind) == ("ELF", "aarch64", 64, "shared library")
    assert info.arm_eabi is None
    assert Symbol(name="memcpy", defined=False, kind="func") in info.symbols
    assert {s.name for s in info.symbols if s.defined} == {"_ZN3mrt17sgemm_neon_kernelEv", "MrtRun"}


@pytest.mark.parametrize(
    ("flags", "abi"), [(0x05000400, "hard"), (0x05000200, "soft"), (0x05000000, "unspecified")]
)
def test_elf32_arm_eabi_and_float_abi(flags: int, abi: str) -> None:
    info = parse(make_elf(bits=32, machine=40, flags=flags, etype=2))
    assert info is not None
    assert (info.arch, info.bits, info.kind, info.arm_eabi, info.arm_float_abi) == ("armv7", 32, "executable", 5, abi)
    assert info.describe() == f"ELF32 armv7 executable, EABI5 {abi}-float"


def test_unknown_machine_and_not_a_binary() -> None:
    info = parse(make_elf(bits=64, machine=999))
    assert info is not None and info.arch == "unknown:999"
    assert parse(b"#!/bin/sh\necho hi\n") is None


def test_arch_of_names_registry_arches() -> None:
    assert arch_of(make_elf(bits=64, machine=62)) == "x86_64"
    assert arch_of(make_elf(bits=64, machine=183)) == "aarch64"
    assert arch_of(make_elf(bits=32, machine=40)) == "armv7"
    assert arch_of(make_elf(bits=64, machine=243)) == "riscv64"
    assert arch_of(make_elf(bits=64, machine=999)) == "unknown:999"
    assert arch_of(make_pe(machine=0x8664)) == "x86_64"
    assert arch_of(make_pe(machine=0xAA64)) == "aarch64"
    assert arch_of(b"#!/bin/sh\n") is None


def test_truncated_elf_is_an_error_not_a_crash() -> None:
    data = make_elf(bits=64, machine=62, symbols=(("x", True, True),))
    with pytest.raises(BinaryFormatError, match="ELF headers cannot be read"):
        parse(data[:40])
    with pytest.raises(BinaryFormatError, match="section headers run past"):
        parse(data[:-10])


def test_pe_machine_kind_and_coff_symbols() -> None:
    data = make_pe(
        machine=0x8664,
        dll=True,
        symbols=(("MrtRun", True, True), ("_ZN3mrt22igemm_block_i8mm_probeEv", False, True)),
    )
    info = parse(data)
    assert info is not None
    assert (info.format, info.arch, info.bits, info.kind) == ("PE", "x86_64", 64, "dll")
    assert Symbol(name="MrtRun", defined=True, kind="func") in info.symbols
    assert Symbol(name="_ZN3mrt22igemm_block_i8mm_probeEv", defined=False, kind="func") in info.symbols
    arm = parse(make_pe(machine=0xAA64))
    assert arm is not None and (arm.arch, arm.kind) == ("aarch64", "exe")


def test_mz_without_pe_signature() -> None:
    with pytest.raises(BinaryFormatError, match="PE headers cannot be read"):
        parse(b"MZ" + bytes(0x3A) + struct.pack("<I", 0x40) + b"NOPE" + bytes(40))


# Real cross compilers, one per registry arch/format the crosscheck reads: (extra flags, format, bits).
CROSS_TARGETS = {
    "linux-aarch64": ([], "ELF", 64),
    "linux-armv7": (["-mfpu=neon", "-mfloat-abi=hard"], "ELF", 32),
    "linux-riscv64": ([], "ELF", 64),
    "windows-x86_64": (["-static"], "PE", 64),
}


@pytest.mark.parametrize("name", list(CROSS_TARGETS))
def test_real_cross_compiled_binaries(tmp_path: Path, name: str) -> None:
    """The reader agrees with real cross compilers; as root a missing compiler is installed the way the
    crosscheck installs it (a fresh CI machine runs these), elsewhere the skip names the command."""
    target = MATRIX.target(name)
    cc = target.c_compiler
    if shutil.which(cc) is None:
        check = ensure_toolchain(target, system_installer(), print)
        if not check.ok:
            pytest.skip(f"{cc} not installed and not installable here: {check.detail}")
    flags, fmt, bits = CROSS_TARGETS[name]
    src = tmp_path / "t.c"
    src.write_text("int mrt_probe_neon_kernel(void) { return 7; }\nint main(void) { return mrt_probe_neon_kernel(); }")
    out = tmp_path / ("t.exe" if fmt == "PE" else "t")
    subprocess.run([cc, *flags, "-O1", "-o", str(out), str(src)], check=True)
    info = read_binary(out)
    assert info is not None
    assert (info.format, info.arch, info.bits) == (fmt, target.arch, bits)
    assert any(s.name.endswith("mrt_probe_neon_kernel") and s.defined for s in info.symbols)
    if target.arch_spec.arm_eabi5_hard_float:
        assert (info.arm_eabi, info.arm_float_abi) == (5, "hard")
