"""The platform registry: every architecture and operating system the pipeline knows, declared once.

A matrix target (``matrix/targets.toml``) names an ``os`` and an ``arch``; everything else the
pipeline needs to know about them comes from here — conan's spelling, the ELF/PE/Mach-O machine
numbers, the bit width, the ISA family that ``core/cmake/target_features.cmake`` decides, the
wheel-tag spelling, the repair tool, the emulator kind, the Debian architecture. No other module
keeps its own table: they ask :func:`arch`, :func:`os_spec`, :func:`arch_of_machine` and friends.

Adding a target on a known arch is matrix data only; a new arch is one :class:`Arch` entry here
(plus its conan profile and its targets).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .errors import choices_hint

BinaryFormat = Literal["ELF", "PE", "MachO"]
Repair = Literal["auditwheel", "delocate", "none"]
EmulatorKind = Literal["qemu", "wine", "native", "none"]
Libc = Literal["glibc", "musl"]


@dataclass(frozen=True, kw_only=True)
class Arch:
    name: str  #: the matrix spelling (``arch = "..."`` in targets.toml)
    conan: str  #: conan's ``settings.arch``
    bits: Literal[32, 64]
    #: what core/cmake/target_features.cmake decides for this arch (the build manifest's target_arch)
    isa_family: str
    elf_machine: int  #: ELF ``e_machine``
    pe_machine: int | None = None  #: PE/COFF ``Machine`` (None: no Windows on this arch)
    macho_cputype: int | None = None  #: Mach-O ``cputype`` (None: no macOS on this arch)
    wheel_arch: str  #: the arch part of Linux wheel tags (``manylinux_2_28_<wheel_arch>``)
    windows_arch: str | None = None  #: the arch part of Windows tags (``win_<windows_arch>``)
    macos_arch: str | None = None  #: the arch part of macOS tags (``macosx_14_0_<macos_arch>``)
    #: what ``platform.machine()`` says on such a machine (lower case)
    machine_names: tuple[str, ...]
    #: Debian's name (``dpkg --add-architecture``) where its archive has the port: the emulated wheel suite's
    #: CPython comes from it
    debian_arch: str | None = None
    qemu: str | None = None  #: the qemu-user program that runs Linux binaries of this arch
    #: ARM 32-bit only: the ELF header must say EABI version 5, hard-float
    arm_eabi5_hard_float: bool = False

    @property
    def arm64_kernels(self) -> bool:
        """Whether the core compiles its Arm64 micro-kernels for this arch (decided from the target)."""
        return self.isa_family == "arm64"


@dataclass(frozen=True, kw_only=True)
class OsSpec:
    name: str  #: the matrix spelling (``os = "..."``)
    conan: str  #: conan's ``settings.os``
    binary_format: BinaryFormat
    repair: Repair  #: how wheels are made portable
    system_names: tuple[str, ...]  #: what ``platform.system()`` says (lower case)
    #: how binaries of another arch of this OS run on a linux-x86_64 build host
    cross_emulator: EmulatorKind


ARCHES: tuple[Arch, ...] = (
    Arch(
        name="x86_64",
        conan="x86_64",
        bits=64,
        isa_family="x86_64",
        elf_machine=62,
        pe_machine=0x8664,
        macho_cputype=0x01000007,
        wheel_arch="x86_64",
        windows_arch="amd64",
        macos_arch="x86_64",
        machine_names=("x86_64", "amd64", "x64"),
        debian_arch="amd64",
        qemu="qemu-x86_64",
    ),
    Arch(
        name="aarch64",
        conan="armv8",
        bits=64,
        isa_family="arm64",
        elf_machine=183,
        pe_machine=0xAA64,
        macho_cputype=0x0100000C,
        wheel_arch="aarch64",
        windows_arch="arm64",
        macos_arch="arm64",
        machine_names=("aarch64", "arm64", "armv8l"),
        debian_arch="arm64",
        qemu="qemu-aarch64",
    ),
    Arch(
        name="armv7",
        conan="armv7hf",
        bits=32,
        isa_family="armv7",
        elf_machine=40,
        pe_machine=0x01C4,
        wheel_arch="armv7l",
        machine_names=("armv7l", "armv7"),
        debian_arch="armhf",
        qemu="qemu-arm",
        arm_eabi5_hard_float=True,
    ),
    Arch(
        name="riscv64",
        conan="riscv64",
        bits=64,
        isa_family="riscv64",
        elf_machine=243,
        wheel_arch="riscv64",
        machine_names=("riscv64",),
        debian_arch=None,  # Debian 12's main archive has no riscv64 port: no emulated CPython to take
        qemu="qemu-riscv64",
    ),
)

OSES: tuple[OsSpec, ...] = (
    OsSpec(
        name="linux",
        conan="Linux",
        binary_format="ELF",
        repair="auditwheel",
        system_names=("linux",),
        cross_emulator="qemu",
    ),
    OsSpec(
        name="windows",
        conan="Windows",
        binary_format="PE",
        repair="none",
        system_names=("windows",),
        cross_emulator="wine",
    ),
    OsSpec(
        name="macos",
        conan="Macos",
        binary_format="MachO",
        repair="delocate",
        system_names=("darwin",),
        cross_emulator="none",
    ),
)

#: the tag family auditwheel gives a Linux wheel, by C library
LINUX_TAG_FAMILY: dict[Libc, str] = {"glibc": "manylinux", "musl": "musllinux"}


class UnknownPlatform(KeyError):
    """A name that is not in the registry (the message lists the known ones)."""

    def __str__(self) -> str:
        return str(self.args[0])


def arch_names() -> tuple[str, ...]:
    return tuple(a.name for a in ARCHES)


def os_names() -> tuple[str, ...]:
    return tuple(o.name for o in OSES)


def arch(name: str) -> Arch:
    for a in ARCHES:
        if a.name == name:
            return a
    raise UnknownPlatform(f"unknown arch '{name}'{choices_hint(name, arch_names())} (add it to pipeline/platforms.py)")


def os_spec(name: str) -> OsSpec:
    for o in OSES:
        if o.name == name:
            return o
    raise UnknownPlatform(f"unknown os '{name}'{choices_hint(name, os_names())} (add it to pipeline/platforms.py)")


def arch_of_machine(machine: str) -> Arch | None:
    """The arch a ``platform.machine()`` value names, or None."""
    low = machine.lower()
    return next((a for a in ARCHES if low in a.machine_names), None)


def os_of_system(system: str) -> OsSpec | None:
    """The OS a ``platform.system()`` value names, or None."""
    low = system.lower()
    return next((o for o in OSES if low in o.system_names), None)


def arch_of_binary(fmt: BinaryFormat, machine: int) -> str:
    """The arch name of a binary's machine field, or ``unknown:<n>``."""
    for a in ARCHES:
        number = {"ELF": a.elf_machine, "PE": a.pe_machine, "MachO": a.macho_cputype}[fmt]
        if number == machine:
            return a.name
    return f"unknown:{machine:#x}" if fmt != "ELF" else f"unknown:{machine}"


def isa_family_names() -> dict[str, str]:
    """Arch name → ISA family, for messages that compare a build manifest with the host."""
    return {a.name: a.isa_family for a in ARCHES}


def wheel_platform(os_name: str, arch_name: str, *, macos_deployment_target: str | None = None) -> str:
    """The platform tag of an unrepaired wheel (what scikit-build-core writes for the target)."""
    a = arch(arch_name)
    if os_name == "linux":
        return f"linux_{a.wheel_arch}"
    if os_name == "windows":
        if a.windows_arch is None:
            raise UnknownPlatform(f"no Windows wheel tag for arch '{arch_name}'")
        return f"win_{a.windows_arch}"
    if os_name == "macos":
        if a.macos_arch is None or macos_deployment_target is None:
            raise UnknownPlatform(f"no macOS wheel tag for arch '{arch_name}' without a deployment target")
        return f"macosx_{macos_deployment_target.replace('.', '_')}_{a.macos_arch}"
    raise UnknownPlatform(f"unknown os '{os_name}'")


def python_host_platform(os_name: str, arch_name: str, *, macos_deployment_target: str | None = None) -> str:
    """The value of ``_PYTHON_HOST_PLATFORM`` that makes a cross build tag its wheel for the target."""
    plat = wheel_platform(os_name, arch_name, macos_deployment_target=macos_deployment_target)
    if os_name == "macos":
        _, major, minor, rest = plat.split("_", 3)
        return f"macosx-{major}.{minor}-{rest}"
    return plat.replace("_", "-", 1)


def repaired_tag_pattern(os_name: str, arch_name: str, libc: Libc, wheel_plat: str) -> str:
    """A regular expression every platform tag of the shipped (repaired) wheel must match."""
    if os_name == "linux":
        family = LINUX_TAG_FAMILY[libc]
        legacy = "|manylinux\\d+" if libc == "glibc" else ""
        return rf"({family}_\d+_\d+{legacy})_{arch(arch_name).wheel_arch}"
    return wheel_plat.replace(".", r"\.")


def repaired_tag_hint(os_name: str, arch_name: str, libc: Libc, wheel_plat: str) -> str:
    """The same rule for people: ``manylinux_*_x86_64``, ``musllinux_*_aarch64``, ``win_amd64``."""
    if os_name == "linux":
        return f"{LINUX_TAG_FAMILY[libc]}_*_{arch(arch_name).wheel_arch}"
    return wheel_plat


def cibuildwheel_arch(os_name: str, arch_name: str) -> str:
    """cibuildwheel's ``--archs`` spelling: Linux uses the wheel arch, Windows AMD64/ARM64, macOS the Mach-O name."""
    a = arch(arch_name)
    spelling = {"linux": a.wheel_arch, "windows": (a.windows_arch or "").upper(), "macos": a.macos_arch or ""}
    if os_name not in spelling:
        raise UnknownPlatform(f"unknown os '{os_name}'")
    if not spelling[os_name]:
        raise UnknownPlatform(f"cibuildwheel builds no {os_name} wheels for arch '{arch_name}'")
    return spelling[os_name]


def cibuildwheel_platform(os_name: str, arch_name: str, libc: Libc) -> str:
    """The platform half of a cibuildwheel build identifier: ``manylinux_x86_64``, ``win_arm64``, ``macosx_arm64``."""
    a = arch(arch_name)
    if os_name == "linux":
        return f"{LINUX_TAG_FAMILY[libc]}_{a.wheel_arch}"
    if os_name == "windows":
        return f"win_{a.windows_arch}"
    if os_name == "macos":
        return f"macosx_{a.macos_arch}"
    raise UnknownPlatform(f"unknown os '{os_name}'")
