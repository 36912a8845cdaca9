"""Read what a built binary is for: ELF, PE/COFF and Mach-O headers and symbol tables, through LIEF.

No ``file``, ``readelf`` or cross ``nm`` is needed, so the crosscheck and the wheel check read
binaries of every target the same way on any host. The machine numbers are turned into arch
names by the platform registry (:func:`pipeline.platforms.arch_of_binary`). Only what the checks
use is kept:

- ELF: class (32/64 bit), type, machine, ARM ``e_flags`` (EABI version, hard-float), and the
  ``.symtab``/``.dynsym`` symbols with defined/undefined state and whether a library exports them.
- PE: the COFF ``Machine``, the image kind (EXE/DLL) and the COFF symbols that mingw-w64 links keep
  unless stripped.
- Mach-O: the CPU type (a fat binary reports its first slice).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import lief

from .platforms import BinaryFormat, arch_of_binary

#: ARM e_flags: the EABI version lives in the top byte; these bits say the float ABI.
EF_ARM_EABIMASK = 0xFF000000
EF_ARM_ABI_FLOAT_HARD = 0x00000400
EF_ARM_ABI_FLOAT_SOFT = 0x00000200
_ELF_EM_ARM = 40

_MACHO_MAGICS = (b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xca\xfe\xba\xbe", b"\xbe\xba\xfe\xca")

lief.logging.disable()  # LIEF logs parse warnings on stderr; problems reach callers as BinaryFormatError


class BinaryFormatError(ValueError):
    """The bytes claim a format (ELF/PE/Mach-O magic) but cannot be read as one."""


@dataclass(frozen=True, kw_only=True)
class Symbol:
    name: str
    defined: bool
    kind: Literal["func", "object", "other"] = "other"
    #: ELF: in .dynsym, defined, GLOBAL/WEAK binding, DEFAULT visibility (what a shared library exports)
    exported: bool = False


@dataclass(frozen=True, kw_only=True)
class BinaryInfo:
    format: BinaryFormat
    arch: str  #: a registry arch name (x86_64, aarch64, armv7, riscv64) or "unknown:<machine>"
    bits: int  #: 32 or 64
    kind: str  #: executable, shared library, relocatable (ELF); exe or dll (PE); the Mach-O file type
    arm_eabi: int | None = None  #: ELF ARM only: EABI version from e_flags
    arm_float_abi: Literal["hard", "soft", "unspecified"] | None = None  #: ELF ARM only
    symbols: tuple[Symbol, ...] = field(default=(), repr=False)
    #: the shared libraries it loads at start (ELF DT_NEEDED, PE imported DLLs, Mach-O load commands)
    needed: tuple[str, ...] = ()

    def describe(self) -> str:
        extra = ""
        if self.arm_eabi is not None:
            extra = f", EABI{self.arm_eabi} {self.arm_float_abi}-float"
        return f"{self.format}{self.bits} {self.arch} {self.kind}{extra}"


def sniff(data: bytes) -> BinaryFormat | None:
    """The binary format of a file's first bytes, or None for anything else."""
    if data[:4] == b"\x7fELF":
        return "ELF"
    if data[:2] == b"MZ":
        return "PE"
    if data[:4] in _MACHO_MAGICS:
        return "MachO"
    return None


def read_binary(path: Path, *, symbols: bool = True) -> BinaryInfo | None:
    """Parse ``path``; None if it is not an ELF/PE/Mach-O file. Raises BinaryFormatError on broken headers."""
    with path.open("rb") as fh:
        head = fh.read(4)
    if sniff(head) is None:
        return None
    return parse(path.read_bytes(), symbols=symbols)


def parse(data: bytes, *, symbols: bool = True) -> BinaryInfo | None:
    """Parse an image held in memory (e.g. a member of a wheel); None when it is not a binary."""
    fmt = sniff(data)
    if fmt is None:
        return None
    parsed = lief.parse(data)
    if isinstance(parsed, lief.ELF.Binary):
        return _elf(parsed, symbols)
    if isinstance(parsed, lief.PE.Binary):
        return _pe(parsed, symbols)
    if isinstance(parsed, lief.MachO.Binary):
        return _macho(parsed)
    raise BinaryFormatError(f"the {fmt} headers cannot be read (truncated or inconsistent)")


def arch_of(data: bytes) -> str | None:
    """The arch of an image ('unknown:<n>' for an unknown machine), or None if it is not a readable binary."""
    try:
        info = parse(data, symbols=False)
    except BinaryFormatError:
        return None
    return info.arch if info else None


def _number(read: Callable[[], object]) -> int:
    """An enum-typed header field as its number; LIEF warns (and returns the int) for values it has no name for."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value = read()
    number = getattr(value, "value", value)
    if not isinstance(number, int):
        raise BinaryFormatError(f"unreadable header field {value!r}")
    return number


def _text(name: str | bytes) -> str:
    return name.decode("utf-8", errors="replace") if isinstance(name, bytes) else name


# --------------------------------------------------------------------------------------- ELF

_ELF_KIND = {"REL": "relocatable", "EXEC": "executable", "DYN": "shared library", "CORE": "core"}


def _elf(b: lief.ELF.Binary, want_symbols: bool) -> BinaryInfo:
    header = b.header
    # LIEF reads what it can; a header or section table cut short must not pass as a clean binary.
    if header.header_size not in (52, 64):
        raise BinaryFormatError("the ELF headers cannot be read (truncated ELF header)")
    if len(b.sections) < header.numberof_sections:
        raise BinaryFormatError(
            f"ELF section headers run past the end of the file ({len(b.sections)} of {header.numberof_sections} read)"
        )
    machine = _number(lambda: header.machine_type)
    bits = 32 if header.identity_class == lief.ELF.Header.CLASS.ELF32 else 64
    eabi: int | None = None
    float_abi: Literal["hard", "soft", "unspecified"] | None = None
    if machine == _ELF_EM_ARM:
        flags = int(header.processor_flag)
        eabi = (flags & EF_ARM_EABIMASK) >> 24
        if flags & EF_ARM_ABI_FLOAT_HARD:
            float_abi = "hard"
        else:
            float_abi = "soft" if flags & EF_ARM_ABI_FLOAT_SOFT else "unspecified"
    kind = _ELF_KIND.get(header.file_type.name, header.file_type.name.lower())
    return BinaryInfo(
        format="ELF",
        arch=arch_of_binary("ELF", machine),
        bits=bits,
        kind=kind,
        arm_eabi=eabi,
        arm_float_abi=float_abi,
        symbols=_elf_symbols(b) if want_symbols else (),
        needed=tuple(str(x) for x in b.libraries),
    )


def _elf_symbols(b: lief.ELF.Binary) -> tuple[Symbol, ...]:
    out: dict[tuple[str, bool], Symbol] = {}
    tables = ((b.symtab_symbols, False), (b.dynamic_symbols, True))
    for table, dynamic in tables:
        for s in table:
            name = _text(s.name)
            if not name:
                continue
            defined = s.shndx != 0
            kind: Literal["func", "object", "other"] = "other"
            if s.type == lief.ELF.Symbol.TYPE.FUNC:
                kind = "func"
            elif s.type == lief.ELF.Symbol.TYPE.OBJECT:
                kind = "object"
            exported = (
                dynamic
                and defined
                and s.binding in (lief.ELF.Symbol.BINDING.GLOBAL, lief.ELF.Symbol.BINDING.WEAK)
                and s.visibility == lief.ELF.Symbol.VISIBILITY.DEFAULT
            )
            sym = Symbol(name=name, defined=defined, kind=kind, exported=exported)
            known = out.get((name, defined))
            if known is None or (exported and not known.exported):
                out[(name, defined)] = sym
    return tuple(out.values())


# ---------------------------------------------------------------------------------------- PE

def _pe(b: lief.PE.Binary, want_symbols: bool) -> BinaryInfo:
    machine = _number(lambda: b.header.machine)
    bits = 64 if b.optional_header.magic == lief.PE.PE_TYPE.PE32_PLUS else 32
    kind = "dll" if b.header.has_characteristic(lief.PE.Header.CHARACTERISTICS.DLL) else "exe"
    return BinaryInfo(
        format="PE",
        arch=arch_of_binary("PE", machine),
        bits=bits,
        kind=kind,
        symbols=_coff_symbols(b) if want_symbols else (),
        needed=tuple(str(imp.name) for imp in b.imports),
    )


def _coff_symbols(b: lief.PE.Binary) -> tuple[Symbol, ...]:
    out: dict[tuple[str, bool], Symbol] = {}
    for s in b.symbols:
        name = _text(s.name)
        is_func = s.is_function
        # EXTERNAL: functions and globals; STATIC functions: internal-linkage code (sections are not symbols).
        if not name or not (s.is_external or (s.storage_class == lief.COFF.Symbol.STORAGE_CLASS.STATIC and is_func)):
            continue
        defined = not s.is_undefined
        sym = Symbol(name=name, defined=defined, kind="func" if is_func else "object")
        out.setdefault((name, defined), sym)
    return tuple(out.values())


# ------------------------------------------------------------------------------------- Mach-O


def _macho(b: lief.MachO.Binary) -> BinaryInfo:
    header = b.header
    cpu = _number(lambda: header.cpu_type) & 0xFFFFFFFF
    bits = 64 if header.magic in (lief.MachO.MACHO_TYPES.MAGIC_64, lief.MachO.MACHO_TYPES.CIGAM_64) else 32
    return BinaryInfo(format="MachO", arch=arch_of_binary("MachO", cpu), bits=bits, kind=header.file_type.name.lower(),
                      needed=tuple(str(lib.name) for lib in b.libraries))
