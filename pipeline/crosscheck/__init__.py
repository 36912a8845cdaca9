"""The crosscheck step: build the core and its native tests for each cross target and prove them right.

Per target (``crosscheck = true`` in ``matrix/targets.toml``)::

    toolchain     compilers + emulator on PATH; installed from Debian packages when root
                  (pipeline.toolchains)
    build         conan host profile → conan_toolchain.cmake → CMake (Ninja, ccache, tests ON,
                  compile_commands.json) → build of the library and the native test programs (cmake)
    machine type  every produced ELF/PE binary is for the target: format, arch, bit width, and ARM
                  EABI5 hard-float where the platform registry asks for it (checks)
    arm kernels   the Arm64 micro-kernels are compiled in iff the target's arch is arm64: the build
                  manifest (written by core/cmake/target_features.cmake), the compile commands (no
                  Arm-only flags, definitions or sources elsewhere) and the symbol tables (Arm kernel
                  symbols defined only on arm64, never referenced elsewhere — an undefined reference is
                  the armv7 link failure of onnxruntime #26458) (checks)
    native tests  ctest under the target's emulator (qemu-user, wine) or natively (a musl x86-64
                  target); the kernel-check lines ("igemm kernel i8mm: 120 cases OK") say which
                  kernels ran (checks)

Modules, one job each: ``model`` (results), ``checks`` (pure checks with named causes), ``cmake``
(configure/build plumbing and reading the build folder), ``driver`` (the per-target flow), ``report``
(table, JSON, exit status). Known regression shapes have fixed cause names (:data:`CAUSES`).
"""

from __future__ import annotations

from .checks import (
    ARM_FLAGS,
    ARM_SOURCE,
    ARM_SYMBOL,
    TestRun,
    arm_symbols,
    check_arm_kernels,
    check_machine,
    check_native_tests,
    compile_command_leaks,
    parse_ctest,
    undefined_arm_refs,
)
from .driver import CrosscheckOptions, crosscheck, probe_emulator, select_targets
from .model import CAUSES, CHECKS, STAGES, Check, CrosscheckReport, Outcome, Stage, TargetResult
from .report import crosscheck_report_path, format_table, raise_for_report, write_report

__all__ = [
    "ARM_FLAGS",
    "ARM_SOURCE",
    "ARM_SYMBOL",
    "CAUSES",
    "CHECKS",
    "STAGES",
    "Check",
    "CrosscheckOptions",
    "CrosscheckReport",
    "Outcome",
    "Stage",
    "TargetResult",
    "TestRun",
    "arm_symbols",
    "check_arm_kernels",
    "check_machine",
    "check_native_tests",
    "compile_command_leaks",
    "crosscheck",
    "crosscheck_report_path",
    "format_table",
    "parse_ctest",
    "probe_emulator",
    "raise_for_report",
    "select_targets",
    "undefined_arm_refs",
    "write_report",
]
