"""Read what a built binary is for, straight from its bytes: ELF and PE/COFF headers and symbol tables.

No ``file``, ``readelf`` or cross ``nm`` is needed, so the crosscheck reads binaries of every
target the same way on any host. Only what the checks use is parsed:

- ELF: class (32/64 bit), byte order, type, ``e_machine``, ARM ``e_flags`` (EABI version,
  hard-float), and the ``.symtab``/``.dynsym`` symbols with defined/undefined state.
- PE: the COFF ``Machine`` field, the image kind (EXE/DLL) and the COFF symbol table that
  mingw-w64 links keep unless stripped.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

ELF_MAGIC = b"\x7fELF"
ELF_MACHINE = {3: "x86", 40: "armv7", 62: "x86_64", 183: "aarch64", 243: "riscv"}
PE_MACHINE = {0x014C: "x86", 0x8664: "x86_64", 0xAA64: "aarch64", 0x01C4: "armv7"}
ELF_TYPE = {1: "relocatable", 2: "executable", 3: "shared library"}

#: ARM e_flags: the EABI version lives in the top byte; bit 0x400 says the hard-float ABI.
EF_ARM_EABIMASK = 0xFF000000
EF_ARM_ABI_FLOAT_HARD = 0x00000400
EF_ARM_ABI_FLOAT_SOFT = 0x00000200

_SHT_SYMTAB = 2
_SHT_DYNSYM = 11
_STT_FUNC = 2
_STB_GLOBAL, _STB_WEAK = 1, 2
_STV_DEFAULT = 0
_STT_OBJECT = 1
_PE_DLL = 0x2000


class BinaryFormatError(ValueError):
    """The bytes claim a format (ELF/PE magic) but the headers are truncated or inconsistent."""


@dataclass(frozen=True, kw_only=True)
class Symbol:
    name: str
    defined: bool
    kind: Literal["func", "object", "other"] = "other"
    #: ELF: in .dynsym, defined, GLOBAL/WEAK binding, DEFAULT visibility (what a shared library exports)
    exported: bool = False


@dataclass(frozen=True, kw_only=True)
class BinaryInfo:
    format: Literal["ELF", "PE"]
    arch: str  #: x86_64, aarch64, armv7, ... or "unknown:<machine>"
    bits: int  #: 32 or 64
    kind: str  #: executable, shared library, relocatable (ELF); exe or dll (PE)
    arm_eabi: int | None = None  #: ELF ARM only: EABI version from e_flags
    arm_float_abi: Literal["hard", "soft", "unspecified"] | None = None  #: ELF ARM only
    symbols: tuple[Symbol, ...] = field(default=(), repr=False)

    def describe(self) -> str:
        extra = ""
        if self.arm_eabi is not None:
            extra = f", EABI{self.arm_eabi} {self.arm_float_abi}-float"
        return f"{self.format}{self.bits} {self.arch} {self.kind}{extra}"


def sniff(data: bytes) -> Literal["ELF", "PE"] | None:
    """The binary format of a file's first bytes, or None for anything else."""
    if data[:4] == ELF_MAGIC:
        return "ELF"
    if data[:2] == b"MZ":
        return "PE"
    return None


def read_binary(path: Path, *, symbols: bool = True) -> BinaryInfo | None:
    """Parse ``path``; None if it is not an ELF/PE file. Raises BinaryFormatError on broken headers."""
    with path.open("rb") as fh:
        head = fh.read(4)
    if sniff(head) is None:
        return None
    return parse(path.read_bytes(), symbols=symbols)


def parse(data: bytes, *, symbols: bool = True) -> BinaryInfo | None:
    fmt = sniff(data)
    try:
        if fmt == "ELF":
            return _parse_elf(data, symbols)
        if fmt == "PE":
            return _parse_pe(data, symbols)
    except struct.error as exc:
        raise BinaryFormatError(f"truncated {fmt} headers: {exc}") from None
    return None


# --------------------------------------------------------------------------------------- ELF


def _parse_elf(data: bytes, want_symbols: bool) -> BinaryInfo:
    if len(data) < 52:
        raise BinaryFormatError("truncated ELF header")
    ei_class, ei_data = data[4], data[5]
    if ei_class not in (1, 2) or ei_data not in (1, 2):
        raise BinaryFormatError(f"bad ELF ident (class {ei_class}, data {ei_data})")
    e = "<" if ei_data == 1 else ">"
    bits = 32 if ei_class == 1 else 64
    e_type, e_machine = struct.unpack_from(e + "HH", data, 16)
    if bits == 32:
        (e_shoff,) = struct.unpack_from(e + "I", data, 32)
        (e_flags,) = struct.unpack_from(e + "I", data, 36)
        e_shentsize, e_shnum = struct.unpack_from(e + "HH", data, 46)
    else:
        (e_shoff,) = struct.unpack_from(e + "Q", data, 40)
        (e_flags,) = struct.unpack_from(e + "I", data, 48)
        e_shentsize, e_shnum = struct.unpack_from(e + "HH", data, 58)
    arch = ELF_MACHINE.get(e_machine, f"unknown:{e_machine}")
    eabi: int | None = None
    float_abi: Literal["hard", "soft", "unspecified"] | None = None
    if e_machine == 40:
        eabi = (e_flags & EF_ARM_EABIMASK) >> 24
        if e_flags & EF_ARM_ABI_FLOAT_HARD:
            float_abi = "hard"
        elif e_flags & EF_ARM_ABI_FLOAT_SOFT:
            float_abi = "soft"
        else:
            float_abi = "unspecified"
    syms = _elf_symbols(data, e, bits, shoff=e_shoff, shentsize=e_shentsize, shnum=e_shnum) if want_symbols else ()
    return BinaryInfo(
        format="ELF",
        arch=arch,
        bits=bits,
        kind=ELF_TYPE.get(e_type, f"type {e_type}"),
        arm_eabi=eabi,
        arm_float_abi=float_abi,
        symbols=syms,
    )


def _elf_symbols(data: bytes, e: str, bits: int, *, shoff: int, shentsize: int, shnum: int) -> tuple[Symbol, ...]:
    if shoff == 0 or shnum == 0:
        return ()
    if shoff + shentsize * shnum > len(data):
        raise BinaryFormatError("ELF section headers run past the end of the file")
    sections = []
    for i in range(shnum):
        off = shoff + i * shentsize
        if bits == 32:
            _, sh_type, _, _, sh_offset, sh_size, sh_link, _, _, sh_entsize = struct.unpack_from(e + "10I", data, off)
        else:
            _, sh_type, _, _, sh_offset, sh_size, sh_link, _, _, sh_entsize = struct.unpack_from(
                e + "IIQQQQIIQQ", data, off
            )
        sections.append((sh_type, sh_offset, sh_size, sh_link, sh_entsize))
    out: dict[tuple[str, bool], Symbol] = {}
    for sh_type, sh_offset, sh_size, sh_link, sh_entsize in sections:
        if sh_type not in (_SHT_SYMTAB, _SHT_DYNSYM) or sh_link >= len(sections):
            continue
        str_off, str_size = sections[sh_link][1], sections[sh_link][2]
        strtab = data[str_off : str_off + str_size]
        entsize = sh_entsize or (16 if bits == 32 else 24)
        for pos in range(sh_offset + entsize, sh_offset + sh_size, entsize):  # entry 0 is the null symbol
            if bits == 32:
                st_name, _, _, st_info, st_other, st_shndx = struct.unpack_from(e + "IIIBBH", data, pos)
            else:
                st_name, st_info, st_other, st_shndx, _, _ = struct.unpack_from(e + "IBBHQQ", data, pos)
            name = _cstr(strtab, st_name)
            if not name:
                continue
            st_type = st_info & 0xF
            kind: Literal["func", "object", "other"] = (
                "func" if st_type == _STT_FUNC else "object" if st_type == _STT_OBJECT else "other"
            )
            exported = (sh_type == _SHT_DYNSYM and st_shndx != 0 and st_info >> 4 in (_STB_GLOBAL, _STB_WEAK)
                        and st_other & 3 == _STV_DEFAULT)
            sym = Symbol(name=name, defined=st_shndx != 0, kind=kind, exported=exported)
            known = out.get((name, sym.defined))
            if known is None or (exported and not known.exported):
                out[(name, sym.defined)] = sym
    return tuple(out.values())


def _cstr(table: bytes, offset: int) -> str:
    if offset >= len(table):
        return ""
    end = table.find(b"\0", offset)
    return table[offset : end if end >= 0 else len(table)].decode("utf-8", errors="replace")


# ---------------------------------------------------------------------------------------- PE


def _parse_pe(data: bytes, want_symbols: bool) -> BinaryInfo:
    if len(data) < 0x40:
        raise BinaryFormatError("truncated DOS header")
    (pe_off,) = struct.unpack_from("<I", data, 0x3C)
    if data[pe_off : pe_off + 4] != b"PE\0\0":
        raise BinaryFormatError("MZ file without a PE signature")
    machine, _, _, symtab_off, nsyms, opt_size, characteristics = struct.unpack_from("<HHIIIHH", data, pe_off + 4)
    opt_magic = struct.unpack_from("<H", data, pe_off + 24)[0] if opt_size >= 2 else 0
    bits = 64 if opt_magic == 0x20B else 32
    syms = _coff_symbols(data, symtab_off, nsyms) if want_symbols else ()
    return BinaryInfo(
        format="PE",
        arch=PE_MACHINE.get(machine, f"unknown:{machine:#x}"),
        bits=bits,
        kind="dll" if characteristics & _PE_DLL else "exe",
        symbols=syms,
    )


def _coff_symbols(data: bytes, off: int, count: int) -> tuple[Symbol, ...]:
    if off == 0 or count == 0:
        return ()
    end = off + 18 * count
    if end > len(data):
        raise BinaryFormatError("COFF symbol table runs past the end of the file")
    strtab = data[end:]
    out: dict[tuple[str, bool], Symbol] = {}
    i = 0
    while i < count:
        pos = off + 18 * i
        raw_name = data[pos : pos + 8]
        _, section, sym_type, storage, naux = struct.unpack_from("<IhHBB", data, pos + 8)
        if raw_name[:4] == b"\0\0\0\0":
            name = _cstr(strtab, struct.unpack_from("<I", raw_name, 4)[0])
        else:
            name = raw_name.rstrip(b"\0").decode("utf-8", errors="replace")
        i += 1 + naux
        is_func = (sym_type >> 4) == 2  # DTYPE_FUNCTION
        # EXTERNAL (2): functions and globals; STATIC (3) functions: internal-linkage code.
        if not name or not (storage == 2 or (storage == 3 and is_func)):
            continue
        kind: Literal["func", "object", "other"] = "func" if is_func else "object"
        sym = Symbol(name=name, defined=section != 0, kind=kind)
        out.setdefault((name, sym.defined), sym)
    return tuple(out.values())
