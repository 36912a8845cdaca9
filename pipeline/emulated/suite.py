"""The wheel suite under qemu-user: an emulated venv around a sysroot's CPython, the run, its test record."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .. import toolchains
from ..errors import EnvironmentProblem
from ..hashing import sha256_file
from ..layout import Layout
from ..matrix import Target
from ..records import Counts, Outcome, TestRecord, records_for_sha, write_record
from ..wheeltest import WheelSuite, clean_env, parse_junit, positive_int_env, suite_hash
from .sysroot import (
    ABSENT_PLUGIN,
    PYTHON,
    Say,
    Sysroot,
    prepare_sysroot,
    read_requirements,
    sysroot_spec,
    wheel_requires,
)

# ------------------------------------------------------------------------------------- toolchain


def ensure_toolchains(targets: Sequence[Target], say: Say = print) -> None:
    """The emulated targets' compilers and qemu, installed from the targets' Debian packages when missing
    (:func:`pipeline.toolchains.ensure_toolchain`, the crosscheck's installer).

    All of them at once: the suite's plugin tests build a library for the emulated arch (``CXX``)
    and one for another arch (to check it is refused).
    """
    installer = toolchains.system_installer()
    for target in targets:
        status = toolchains.ensure_toolchain(target, installer, say)
        if not status.ok:
            raise EnvironmentProblem(f"{target.name}: {status.detail}")


# ------------------------------------------------------------------------------------ the suite


def emulator_command(emulator: Sequence[str], root: Path) -> list[str]:
    """The matrix target's emulator with its ``-L`` pointed at the sysroot (appended when absent).

    ``["qemu-aarch64", "-cpu", "max", "-L", "/usr/aarch64-linux-gnu"]`` → ``[..., "-L", "<root>"]``:
    the sysroot holds the target's libc and loader, so the cross compiler's folder is not used.
    """
    if not emulator or not Path(emulator[0]).name.startswith("qemu-"):
        raise EnvironmentProblem(f"the emulated wheel tests need a qemu-user emulator; the target has {list(emulator)}")
    cmd = list(emulator)
    for i, arg in enumerate(cmd):
        if arg == "-L" and i + 1 < len(cmd):
            cmd[i + 1] = str(root)
            return cmd
        if arg.startswith("-L") and len(arg) > 2:
            cmd[i] = "-L" + str(root)
            return cmd
    return [*cmd, "-L", str(root)]


def with_cpu_options(emulator: Sequence[str], *options: str) -> list[str]:
    """The emulator with qemu CPU properties added: ``-cpu max`` + ``sme=off`` → ``-cpu max,sme=off``."""
    cmd = list(emulator)
    if "-cpu" in cmd[:-1]:
        i = cmd.index("-cpu") + 1
        cmd[i] = ",".join([cmd[i], *options])
    else:
        cmd[1:1] = ["-cpu", ",".join(["max", *options])]
    return cmd


def target_tools(target: Target) -> dict[str, str]:
    """The command names a test may call for "the compiler" → the target's cross compilers."""
    return {"cc": target.c_compiler, "gcc": target.c_compiler, "c++": target.cxx_compiler, "g++": target.cxx_compiler}


@dataclass(frozen=True, kw_only=True)
class EmulatedVenv:
    """A venv-shaped folder whose interpreter is the sysroot's CPython under qemu."""

    path: Path
    python: Path  #: ``bin/python3.11``: a host script that runs the emulated interpreter
    site_packages: Path


def venv_script(emulator: Sequence[str], sysroot: Sysroot, launcher: Path) -> str:
    """The launcher script: qemu with ``-0 <launcher>`` so the interpreter finds its pyvenv.cfg."""
    cmd = [*emulator_command(emulator, sysroot.root), "-0", str(launcher), str(sysroot.python)]
    return "#!/bin/sh\n" + "unset QEMU_LD_PREFIX QEMU_ARGV0 QEMU_SET_ENV QEMU_UNSET_ENV\n" + \
        f"exec {shlex.join(cmd)} \"$@\"\n"


def make_venv(
    path: Path,
    sysroot: Sysroot,
    emulator: Sequence[str],
    wheels: Sequence[Path],
    *,
    tools: Mapping[str, str] | None = None,
) -> EmulatedVenv:
    """A fresh emulated venv at ``path`` with ``wheels`` unzipped into its site-packages.

    ``tools`` maps command names to host programs linked into ``bin/`` (first on PATH in
    :func:`suite_env`): ``cc``/``c++`` → the target's cross compilers, so a test that builds a library
    with "the C compiler" builds one the emulated process can load, as on a machine of that arch.
    """
    shutil.rmtree(path, ignore_errors=True)
    site_packages = path / "lib" / f"python{PYTHON}" / "site-packages"
    site_packages.mkdir(parents=True)
    (path / "pyvenv.cfg").write_text(
        f"home = {sysroot.python.parent}\ninclude-system-site-packages = false\nversion = {sysroot.python_full}\n",
        encoding="utf-8",
    )
    python = path / "bin" / f"python{PYTHON}"
    python.parent.mkdir()
    python.write_text(venv_script(emulator, sysroot, python), encoding="utf-8")
    python.chmod(0o755)
    for alias in ("python", "python3"):
        (python.parent / alias).symlink_to(python.name)
    for name, program in (tools or {}).items():
        found = shutil.which(program)
        if found is None:
            raise EnvironmentProblem(f"{program} is not on PATH (needed as `{name}` by the emulated wheel tests)")
        (python.parent / name).symlink_to(found)
    # the shared test dependencies, after the venv's own site-packages
    (site_packages / "_mosaicrt_test_deps.pth").write_text(
        "".join(f"{p}\n" for p in sysroot.paths), encoding="utf-8"
    )
    (site_packages / f"{ABSENT_PLUGIN}.py").write_text(_ABSENT_PLUGIN_SOURCE, encoding="utf-8")
    for wheel in wheels:
        unpack_wheel(wheel, site_packages)
    return EmulatedVenv(path=path, python=python, site_packages=site_packages)


def unpack_wheel(wheel: Path, site_packages: Path) -> None:
    """Install a wheel by unzipping it (pip refuses a wheel for another platform): purelib/platlib
    of ``*.data`` land in site-packages, and the RECORD's files keep their bytes."""
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            name = info.filename
            parts = name.split("/")
            if parts[0].endswith(".data"):
                if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                    continue  # scripts/headers/data: nothing the suite imports
                name = "/".join(parts[2:])
            if ".." in parts or name.startswith("/"):
                raise EnvironmentProblem(f"{wheel.name}: unsafe path {info.filename!r}")
            dest = site_packages / name
            if info.is_dir():
                dest.mkdir(parents=True, exist_ok=True)
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(zf.read(info))
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                dest.chmod(mode)
    with zipfile.ZipFile(wheel) as zf:
        dist_info = {n.split("/")[0] for n in zf.namelist() if n.split("/")[0].endswith(".dist-info")}
    for d in dist_info:
        (site_packages / d / "INSTALLER").write_text("mosaicrt-emulated\n", encoding="utf-8")


def suite_command(venv: EmulatedVenv, suite_dir: Path, junit: Path, *, markers: str | None = None) -> list[str]:
    cmd = [
        str(venv.python),
        "-m",
        "pytest",
        str(suite_dir),
        "-c",
        str(suite_dir / "pytest.ini"),
        "--rootdir",
        str(suite_dir),
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        ABSENT_PLUGIN,
        f"--junitxml={junit}",
    ]
    if markers:
        cmd += ["-m", markers]
    return cmd


def emulated_shards() -> int:
    """Emulated pytest processes per suite run: ``$MOSAICRT_EMULATED_SHARDS``, else 2 where there are two cores or
    more. An emulated CPython keeps one core busy and the suite's sessions add their own threads, so two shards on
    two cores contend; whether that wins has varied by machine: on an AMD Zen 3 VM two shards took 423 s and 293 s
    against 317 s for one; on an AMD Zen 1 VM (where the aarch64 suite took 822 s in one process, the longest step
    of CI) four of the suite's modules (2467 tests) took 240 s in two shards against 300 s in one."""
    return positive_int_env("MOSAICRT_EMULATED_SHARDS", 2 if (os.cpu_count() or 1) >= 2 else 1)


#: processes of the wheel suite's shutdown stress (tests/wheel/test_shutdown.py) under emulation
EMULATED_SHUTDOWN_PROCESSES = 8


def suite_env(
    wheel: Path, sysroot: Sysroot, env_extra: Mapping[str, str] | None = None, *, bin_dir: Path | None = None
) -> dict[str, str]:
    """The suite's environment: the host test environment without PYTHONPATH/QEMU settings, plus the
    wheel's identity and the oracles absent for this arch (the suite's plugin skips what needs them).
    ``bin_dir`` (the venv's ``bin``) goes first on PATH, as an activated venv's does."""
    env = clean_env(
        {
            "MOSAICRT_TEST_WHEEL": str(wheel.resolve()),
            "MOSAICRT_TEST_WHEEL_SHA256": sha256_file(wheel),
            "MOSAICRT_ABSENT_ORACLES": json.dumps(dict(sysroot.absent), sort_keys=True),
            "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            # every process of the shutdown stress starts an emulated CPython (seconds each under qemu): two per
            # exit mode here; the full 500 run natively (a value already set in the environment wins)
            "MOSAICRT_SHUTDOWN_PROCESSES": os.environ.get(
                "MOSAICRT_SHUTDOWN_PROCESSES", str(EMULATED_SHUTDOWN_PROCESSES)
            ),
        }
    )
    env = {k: v for k, v in env.items() if not k.startswith("QEMU_")}
    if bin_dir is not None:
        env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", os.defpath)])
    env.update(env_extra or {})
    return env


def run_suite(
    wheel: Path,
    sysroot: Sysroot,
    *,
    emulator: Sequence[str],
    suite_dir: Path,
    log: Path,
    junit: Path,
    env_extra: Mapping[str, str] | None = None,
    companions: Sequence[Path] = (),
    tools: Mapping[str, str] | None = None,
    venv_dir: Path | None = None,
    markers: str | None = None,
    timeout_s: float = 3600,
    shards: int = 1,
    say: Say = print,
) -> tuple[int, Counts]:
    """Run ``suite_dir`` against ``wheel`` in a fresh emulated venv; (pytest's exit code, junit counts).

    ``env_extra`` adds to the environment (the target's cross compiler as ``CXX``, so tests that
    build a plugin library build one for the emulated arch); ``tools`` are linked into the venv's
    ``bin`` (see :func:`make_venv`). The venv is made at ``venv_dir`` (default: ``<sysroot>/venv``),
    outside the source tree, and the suite runs from it.

    ``shards`` > 1 splits the collected tests round-robin over that many emulated pytest processes run at
    once (an emulated CPython keeps one core busy); their junit files are merged into ``junit`` and their
    logs appended to ``log``.
    """
    venv = make_venv(venv_dir or sysroot.base / "venv", sysroot, emulator, [wheel, *companions], tools=tools)
    for p in (log.parent, junit.parent):
        p.mkdir(parents=True, exist_ok=True)
    junit.unlink(missing_ok=True)
    env = suite_env(wheel, sysroot, env_extra, bin_dir=venv.python.parent)
    t0 = time.monotonic()
    say(
        f"[{wheel.name} {sysroot.arch}] running {suite_dir.name} under {emulator[0]}"
        + (f" in {shards} shards" if shards > 1 else "")
        + f"; log: {log}"
    )
    parts = [(junit, log, None)] if shards <= 1 else [
        (junit.with_name(f"{junit.stem}.shard{k}.xml"), log.with_name(f"{log.stem}.shard{k}.log"), f"{k}/{shards}")
        for k in range(shards)
    ]
    procs = []
    for part_junit, part_log, shard in parts:
        part_junit.unlink(missing_ok=True)
        cmd = suite_command(venv, suite_dir, part_junit, markers=markers)
        (venv.path / "pytest-tmp").mkdir(parents=True, exist_ok=True)  # pytest makes only the last component
        cmd.append(f"--basetemp={venv.path / 'pytest-tmp' / (shard or '0').replace('/', '-')}")
        part_env = {**env, "MOSAICRT_TEST_SHARD": shard} if shard else env
        fh = part_log.open("w", encoding="utf-8")
        fh.write(f"# sysroot: {sysroot.describe()}\n# launcher {venv.python}:\n")
        fh.write("".join(f"#   {line}\n" for line in venv.python.read_text(encoding="utf-8").splitlines()))
        extra = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted((env_extra or {}).items()))
        shard_note = f"MOSAICRT_TEST_SHARD={shard} " if shard else ""
        fh.write(f"\n$ {shard_note}{extra + ' ' if extra else ''}{shlex.join(cmd)}\n")
        fh.flush()
        procs.append((subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=part_env, cwd=venv.path), fh))
    rcs = []
    for proc, fh in procs:
        try:
            rc = proc.wait(timeout=max(1.0, timeout_s - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            fh.write(f"\n# timed out after {timeout_s:.0f}s\n")
            rc = 124
        fh.write(f"\n# exit {rc} after {time.monotonic() - t0:.0f}s\n")
        fh.close()
        rcs.append(rc)
    if shards > 1:
        # A shard without tests (fewer tests than shards) exits 5; the others decide.
        decisive = [rc for rc in rcs if rc != 5] or [5]
        rc = next((r for r in decisive if r != 0), 0)
        _merge_junit([j for j, _, _ in parts], junit)
        with log.open("w", encoding="utf-8") as out:
            for (_, part_log, shard), part_rc in zip(parts, rcs, strict=True):
                out.write(f"######## shard {shard}: exit {part_rc}\n")
                out.write(part_log.read_text(encoding="utf-8", errors="replace"))
                part_log.unlink()
    else:
        rc = rcs[0]
    counts = parse_junit(junit) if junit.is_file() else Counts()
    say(
        f"[{wheel.name} {sysroot.arch}] pytest exit {rc} in {time.monotonic() - t0:.0f}s: {counts.passed} passed,"
        f" {counts.failures} failed, {counts.errors} errors, {counts.skipped} skipped"
    )
    return rc, counts


def _merge_junit(parts: Sequence[Path], out: Path) -> None:
    """One junit file holding every shard's test suites (a missing shard file adds nothing: its log says why)."""
    merged = ET.Element("testsuites")
    for part in parts:
        if not part.is_file():
            continue
        root = ET.parse(part).getroot()
        merged.extend([root] if root.tag == "testsuite" else root.findall("testsuite"))
        part.unlink()
    ET.ElementTree(merged).write(out, encoding="utf-8", xml_declaration=True)


def failed_tests(junit: Path) -> list[str]:
    """``file::name`` of every test case with a failure or error in a junit file (pytest's classname is
    the dotted module path, the name carries the parameters)."""
    out = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            out.append(f"{case.get('classname', '')}::{case.get('name', '')}")
    return out


def outcome_of(rc: int, counts: Counts) -> tuple[Outcome, str | None]:
    """The record's outcome, decided as for host wheels."""
    if rc == 0 and counts.tests > 0 and counts.failures == counts.errors == 0:
        return "passed", None
    if counts.tests == 0:
        return "error", f"no tests ran (pytest exit {rc})"
    return "failed", f"pytest exit {rc}"


#: The suite's generator of the ONNX backend node cases (tests/wheel/node_cases.py): ``--write FILE`` writes them,
#: and the suite reads that file when $MOSAICRT_NODE_CASES names it.
NODE_CASES_SCRIPT = "node_cases.py"
NODE_CASES_ENV = "MOSAICRT_NODE_CASES"


def host_node_cases(suite_dir: Path, sysroot: Sysroot, work: Path, say: Say = print) -> dict[str, str]:
    """The suite's node cases generated on the host, as the environment that points the emulated suite at them.

    Generating them runs onnx's reference implementation in Python: 15 s natively, minutes of an emulated run's
    collection. The cases are data (models, inputs, expected outputs), so the host generates them
    with the onnx and numpy versions of the sysroot: this interpreter when it has them, else a host venv with
    them pinned. The suite checks the file's versions itself and generates the cases when they differ; anything
    that fails here only costs that time (said, and the run goes on without the file).
    """
    script = suite_dir / NODE_CASES_SCRIPT
    onnx_version, numpy_version = sysroot.wheels.get("onnx"), sysroot.wheels.get("numpy")
    if not script.is_file() or not onnx_version or not numpy_version:
        return {}
    dest = work / "node-cases" / f"onnx-{onnx_version}-numpy-{numpy_version}-{sha256_file(script)[:12]}.pickle"
    if not dest.is_file():
        python = _host_python_with(onnx_version, numpy_version, work, say)
        if python is None:
            return {}
        dest.parent.mkdir(parents=True, exist_ok=True)
        say(f"[node cases] generating them on the host (onnx {onnx_version}, numpy {numpy_version})")
        try:
            proc = subprocess.run([python, str(script), "--write", str(dest)], capture_output=True, text=True,
                                  env=clean_env(), cwd=suite_dir, timeout=900, check=False)  # fmt: skip
        except subprocess.TimeoutExpired:
            say("[node cases] generating them on the host took over 900 s; the emulated suite generates them")
            return {}
        if proc.returncode != 0 or not dest.is_file():
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
            say(f"[node cases] generating them on the host failed ({' / '.join(tail)}); the emulated suite does")
            return {}
    return {NODE_CASES_ENV: str(dest)}


def _host_python_with(onnx_version: str, numpy_version: str, work: Path, say: Say) -> str | None:
    """A host interpreter with exactly these onnx and numpy versions: this one, else a venv made for them."""
    try:
        if (importlib.metadata.version("onnx"), importlib.metadata.version("numpy")) == (onnx_version, numpy_version):
            return sys.executable
    except importlib.metadata.PackageNotFoundError:
        pass
    venv = work / "venvs" / f"host-node-cases-onnx-{onnx_version}-numpy-{numpy_version}"
    python = venv / "bin" / "python"
    if python.is_file():
        return str(python)
    say(f"[node cases] a host venv with onnx {onnx_version} and numpy {numpy_version}: {venv}")
    for cmd in ([sys.executable, "-m", "venv", "--clear", str(venv)],
                [str(python), "-m", "pip", "install", "-q", f"onnx=={onnx_version}", f"numpy=={numpy_version}"]):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=clean_env(), check=False)
        if proc.returncode != 0:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-2:]
            say(f"[node cases] {shlex.join(cmd[:4])} failed ({' / '.join(tail)}); the emulated suite generates them")
            shutil.rmtree(venv, ignore_errors=True)
            return None
    return str(python)


def emulated_test_record(
    wheel: Path,
    target: Target,
    sysroot: Sysroot,
    *,
    root: Path,
    work: Path,
    suite: WheelSuite | None = None,
    emulator: Sequence[str] | None = None,
    markers: str | None = None,
    say: Say = print,
) -> TestRecord:
    """Test ``wheel`` (built for ``target``) under emulation; the record, stored like a host record.

    ``root`` is the repository (the suite and its hash), ``work`` the folder for logs, junit
    files and the venv; ``emulator`` replaces the target's (e.g. other ``-cpu`` options, see
    :func:`with_cpu_options`). Write the result with :func:`pipeline.records.write_record`.
    """
    wsuite = suite or WheelSuite()
    start = time.monotonic()
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", wheel.stem)
    log = work / "logs" / f"test-{stem}-py{PYTHON}-{target.name}.log"
    junit = work / "junit" / f"{stem}-py{PYTHON}-{target.name}.xml"
    rc, counts = run_suite(
        wheel,
        sysroot,
        emulator=emulator or target.emulator,
        suite_dir=root / wsuite.path,
        log=log,
        junit=junit,
        env_extra={"CXX": target.cxx_compiler, "CC": target.c_compiler,
                   **host_node_cases(root / wsuite.path, sysroot, work, say)},
        companions=wsuite.companions,
        tools=target_tools(target),
        venv_dir=work / "venvs" / f"emulated-{target.name}",
        markers=markers,
        shards=emulated_shards(),
        say=say,
    )
    outcome, reason = outcome_of(rc, counts)
    if outcome == "failed" and junit.is_file():
        failed = failed_tests(junit)
        reason = f"{reason}: {', '.join(failed[:5])}" + (f" and {len(failed) - 5} more" if len(failed) > 5 else "")
    return TestRecord(
        wheel=wheel.name,
        sha256=sha256_file(wheel),
        outcome=outcome,
        python=PYTHON,
        python_full=sysroot.python_full,
        platform=target.name,
        counts=counts,
        suite_hash=suite_hash(root, wsuite),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        duration_s=round(time.monotonic() - start, 2),
        log=str(log),
        reason=reason,
    )



def run_emulated(
    wheel: Path,
    target: Target,
    layout: Layout,
    *,
    suite: WheelSuite | None = None,
    cache_dir: Path | None = None,
    emulator: Sequence[str] | None = None,
    force: bool = False,
    say: Say = print,
) -> tuple[TestRecord, bool]:
    """The whole step for one cross wheel, as ``nox -s test -- --target T`` needs it: (record, fresh).

    A passing record of the same bytes, suite and target is reused (``fresh`` False) unless
    ``force``. Otherwise: the target's toolchain (installed as root when missing), its sysroot
    (cached under ``cache_dir``, default ``<work>/emulated``), the suite under qemu, and the record
    written to ``layout.records`` like a host record.
    """
    wsuite = suite or WheelSuite()
    sha = sha256_file(wheel)
    previous = records_for_sha(layout.records, sha).get(PYTHON)
    if (
        previous is not None
        and not force
        and previous.outcome == "passed"
        and previous.platform == target.name
        and previous.suite_hash == suite_hash(layout.root, wsuite)
    ):
        say(f"[{wheel.name} {target.name}] passed before with the same bytes and suite: up to date")
        return previous, False
    ensure_toolchains([target], say)
    spec = sysroot_spec(
        target,
        requires=wheel_requires(wheel),
        suite_requirements=read_requirements(layout.root / wsuite.path / "requirements.txt"),
    )
    sysroot = prepare_sysroot(spec, cache_dir or layout.work / "emulated", say)
    record = emulated_test_record(
        wheel, target, sysroot, root=layout.root, work=layout.work, suite=wsuite, emulator=emulator, say=say
    )
    write_record(layout.records, record)
    return record, True


# A pytest plugin loaded into each emulated run (``-p mosaicrt_absent_oracles``). A test module
# whose import fails because it imports an oracle that has no wheel for this platform is reported
# as skipped, with the reason the sysroot recorded, instead of as a collection error. Every other
# import error stays an error. The decision is made on the exception's module name, not on text.
# It also keeps a shard's share of the collected tests when the run is split (``run_suite(shards=)``).
_ABSENT_PLUGIN_SOURCE = '''\
"""Skips test modules that import an oracle absent for this platform (written by pipeline.emulated)."""

import json
import os

import pytest

ABSENT = json.loads(os.environ.get("MOSAICRT_ABSENT_ORACLES") or "{}")


def _missing_oracle(exc):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ModuleNotFoundError) and exc.name:
            top = exc.name.split(".")[0].lower()
            if top in ABSENT:
                return top
        exc = exc.__cause__ or exc.__context__
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_make_collect_report(collector):
    if not ABSENT or not isinstance(collector, pytest.Module):
        return None
    try:
        collector.obj
    except pytest.skip.Exception:  # the module skips itself (pytest.importorskip): pytest's own report says so
        return None
    except Exception as exc:  # noqa: BLE001 - inspected, then left to pytest's own report
        name = _missing_oracle(exc)
        if name is None:
            return None
        reason = f"needs {name}, absent under emulation: {ABSENT[name]}"
        return pytest.CollectReport(collector.nodeid, "skipped", (str(collector.path), 0, f"Skipped: {reason}"), [])
    return None


def pytest_collection_modifyitems(config, items):
    """MOSAICRT_TEST_SHARD=k/n: this process runs every n-th collected test, from the k-th on."""
    shard = os.environ.get("MOSAICRT_TEST_SHARD")
    if not shard:
        return
    k, n = (int(v) for v in shard.split("/"))
    keep = [item for i, item in enumerate(items) if i % n == k]
    config.hook.pytest_deselected(items=[item for i, item in enumerate(items) if i % n != k])
    items[:] = keep
'''

