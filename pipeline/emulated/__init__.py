"""Wheel tests of cross wheels under qemu-user, with a CPython for the wheel's arch from Debian packages.

A cross wheel (``linux-aarch64``, ``linux-armv7``) is tested the way a host wheel is
(:mod:`pipeline.wheeltest`): by its exact file, in a fresh environment, with the wheel suite and
its junit counts written into a :class:`~pipeline.records.TestRecord` bound to the wheel's sha256.
What differs is where the interpreter comes from and how it runs:

* :func:`prepare_sysroot` downloads Debian's CPython 3.11 for the target's Debian architecture
  (``arm64``, ``armhf``) and its runtime libraries with ``apt-get download`` and unpacks them with
  ``dpkg -x`` into ``<cache>/<arch>/root`` — a sysroot, not an installation, and no container.
  The suite's test dependencies come from PyPI wheels for that platform (``pip download
  --platform``), unpacked into ``<cache>/<arch>/site``; a requirement the wheel needs (numpy) falls
  back to Debian's package where PyPI has no wheel (armv7). The suite's oracles (onnx,
  onnxruntime, ml_dtypes) are installed only where a wheel exists; the sysroot records which are
  absent and why. A stamp file lists every package and version: a second call does no network.
* :func:`run_suite` makes a fresh venv-shaped folder whose ``bin/python3.11`` is a host script
  that starts the sysroot's interpreter under qemu (``-L <sysroot>``, ``-0`` so the interpreter
  finds its ``pyvenv.cfg``). There is no binfmt_misc here: the script is what lets the suite's
  child processes (``subprocess.run([sys.executable, ...])``) run emulated too. The wheel is
  unzipped into the venv's site-packages (pip refuses a wheel for another platform).
* The emulated machine is made to look like one of its arch where the host shows through: the
  venv's ``bin`` (first on PATH) has ``cc``/``c++`` → the target's cross compilers, so a test that
  builds a library builds one the emulated process can load; the sysroot has a ``/proc/cpuinfo``
  for the arch (:data:`CPUINFO`), since qemu passes the host's through.
* :func:`emulated_test_record` runs the suite and returns the record, stored like a host record
  (python "3.11", platform = the target's name, the same suite hash).
"""

from __future__ import annotations

from .suite import (
    _ABSENT_PLUGIN_SOURCE,
    EMULATED_SHUTDOWN_PROCESSES,
    NODE_CASES_ENV,
    NODE_CASES_SCRIPT,
    EmulatedVenv,
    emulated_test_record,
    emulator_command,
    ensure_toolchains,
    failed_tests,
    host_node_cases,
    make_venv,
    outcome_of,
    run_emulated,
    run_suite,
    suite_command,
    suite_env,
    target_tools,
    with_cpu_options,
)
from .sysroot import (
    ABSENT_PLUGIN,
    PYTHON,
    Sysroot,
    SysrootSpec,
    load_sysroot,
    pip_platforms,
    prepare_sysroot,
    read_requirements,
    requirement_name,
    sysroot_spec,
    wheel_requires,
)

__all__ = [
    "ABSENT_PLUGIN",
    "EMULATED_SHUTDOWN_PROCESSES",
    "NODE_CASES_ENV",
    "NODE_CASES_SCRIPT",
    "PYTHON",
    "_ABSENT_PLUGIN_SOURCE",
    "EmulatedVenv",
    "Sysroot",
    "SysrootSpec",
    "emulated_test_record",
    "emulator_command",
    "ensure_toolchains",
    "failed_tests",
    "host_node_cases",
    "load_sysroot",
    "make_venv",
    "outcome_of",
    "pip_platforms",
    "prepare_sysroot",
    "read_requirements",
    "requirement_name",
    "run_emulated",
    "run_suite",
    "suite_command",
    "suite_env",
    "sysroot_spec",
    "target_tools",
    "wheel_requires",
    "with_cpu_options",
]
