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

import hashlib
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.parser import HeaderParser
from pathlib import Path
from typing import Literal

from . import platforms
from .errors import EnvironmentProblem
from .hashing import sha256_file
from .layout import Layout
from .matrix import Target
from .records import Counts, Outcome, TestRecord, records_for_sha, write_record
from .wheelcheck import normalize
from .wheeltest import WheelSuite, clean_env, parse_junit, suite_hash

PYTHON = "3.11"  #: the Debian 12 CPython the sysroot holds (the matrix's floor CPython)
GLIBC_MINOR = 36  #: Debian 12's glibc is 2.36: manylinux wheels up to manylinux_2_36 run in the sysroot
STAMP_SCHEMA = 1
APT = ("apt-get", "-o", "DPkg::Lock::Timeout=600")
#: Debian 12's CPython 3.11 and the libraries it loads at run time (extracted, not installed)
DEBIAN_PYTHON = (
    "python3.11",
    "python3.11-minimal",
    "libpython3.11-minimal",
    "libpython3.11-stdlib",
    "libc6",
    "zlib1g",
    "libexpat1",
    "libffi8",
    "libssl3",
    "libbz2-1.0",
    "liblzma5",
    "libsqlite3-0",
    "libncursesw6",
    "libtinfo6",
    "libuuid1",
    "libcrypt1",
    "libgcc-s1",
    "libstdc++6",
    "libdb5.3",
    "libgdbm6",
)
#: Debian packages standing in for a required PyPI project that has no wheel for the platform
DEBIAN_FALLBACK: Mapping[str, tuple[str, ...]] = {
    "numpy": ("python3-numpy", "libblas3", "liblapack3", "libgfortran5"),
}
#: links ``update-alternatives`` makes when libblas3/liblapack3 are installed (dpkg -x runs no scripts):
#: (link in the multiarch lib folder, its target relative to that folder)
DEBIAN_ALTERNATIVES: Mapping[str, tuple[tuple[str, str], ...]] = {
    "libblas3": (("libblas.so.3", "blas/libblas.so.3"),),
    "liblapack3": (("liblapack.so.3", "lapack/liblapack.so.3"),),
}
#: ``/proc/cpuinfo`` of the emulated CPU, per registry arch, one block per host CPU. qemu 7.2 passes the
#: host's (x86) file through, and onnxruntime's aarch64 CPU detection (pytorch cpuinfo) dereferences
#: NULL when it finds no Arm processor in it; qemu reads ``<-L prefix>/proc/cpuinfo`` first. The block
#: is deliberately plain (a Cortex-A72 with base features): programs take their ISA extensions from
#: HWCAP, which qemu derives from ``-cpu``; a richer Features line made onnxruntime use dotprod on a
#: ``-cpu cortex-a72`` that has none (SIGILL).
CPUINFO: Mapping[str, str] = {
    "aarch64": (
        "processor\t: {index}\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd evtstrm cpuid\n"
        "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd08\n"
        "CPU revision\t: 0\n\n"
    ),
}
#: the package that runs the suite; a missing wheel for it is an error, never a skip
RUNNER = "pytest"
#: the pytest plugin written into each emulated venv (see _ABSENT_PLUGIN_SOURCE)
ABSENT_PLUGIN = "mosaicrt_absent_oracles"

Say = Callable[[str], None]
Source = Literal["pypi", "debian"]


# ----------------------------------------------------------------------------------- the spec


@dataclass(frozen=True, kw_only=True)
class SysrootSpec:
    """What a sysroot for one arch holds. Its :attr:`key` decides whether a cached sysroot is reused."""

    arch: str  #: registry arch name (``aarch64``)
    debian_arch: str  #: ``arm64``, ``armhf``
    multiarch: str  #: Debian's multiarch triplet: the library folder (``arm-linux-gnueabihf``)
    pip_platforms: tuple[str, ...]  #: ``pip download --platform`` values, most specific first
    requires: tuple[str, ...]  #: installed or the preparation fails (the runner, the wheel's own dependencies)
    oracles: tuple[str, ...]  #: installed where a wheel for the platform exists; absent ones are recorded

    @property
    def key(self) -> str:
        data = {
            "schema": STAMP_SCHEMA,
            "python": PYTHON,
            "arch": self.arch,
            "debian_arch": self.debian_arch,
            "multiarch": self.multiarch,
            "pip_platforms": list(self.pip_platforms),
            "debian_python": list(DEBIAN_PYTHON),
            "fallback": {k: list(v) for k, v in DEBIAN_FALLBACK.items()},
            "cpuinfo": CPUINFO.get(self.arch),
            "requires": list(self.requires),
            "oracles": list(self.oracles),
        }
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def requirement_name(line: str) -> str:
    """The normalized project name of a requirement line (``ml-dtypes>=0.4`` → ``ml_dtypes``)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
    if match is None:
        raise EnvironmentProblem(f"cannot read the requirement {line!r}")
    return normalize(match.group(1))


def read_requirements(path: Path) -> tuple[str, ...]:
    """The requirement lines of a requirements.txt (comments and blank lines dropped)."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return tuple(line for line in lines if line)


def wheel_requires(wheel: Path) -> tuple[str, ...]:
    """The wheel's unconditional ``Requires-Dist`` entries (those without an environment marker)."""
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
        if len(names) != 1:
            raise EnvironmentProblem(f"{wheel.name} has no single .dist-info/METADATA")
        meta = HeaderParser().parsestr(zf.read(names[0]).decode("utf-8"))
    return tuple(r.strip() for r in meta.get_all("Requires-Dist") or [] if ";" not in r)


def pip_platforms(wheel_arch: str, glibc_minor: int = GLIBC_MINOR) -> tuple[str, ...]:
    """Every platform tag a wheel for the sysroot may carry, newest first (pip does not expand
    ``--platform manylinux_2_36_<arch>`` to older glibc versions by itself)."""
    tags = [f"manylinux_2_{minor}_{wheel_arch}" for minor in range(glibc_minor, 16, -1)]
    return (*tags, f"manylinux2014_{wheel_arch}", f"linux_{wheel_arch}")


def sysroot_spec(target: Target, *, requires: Sequence[str], suite_requirements: Sequence[str]) -> SysrootSpec:
    """The sysroot for a matrix target: ``requires`` = the wheel's dependencies, plus the suite's file.

    The suite's runner (pytest) is required; its other requirements are oracles. Facts about the
    arch (Debian's name, the wheel-tag spelling) come from :mod:`pipeline.platforms`.
    """
    arch = platforms.arch(target.arch)
    if target.os != "linux" or arch.debian_arch is None or arch.qemu is None:
        raise EnvironmentProblem(
            f"{target.name}: no emulated CPython for {target.os}/{target.arch} (needs a Linux arch with a Debian"
            " architecture and a qemu-user program in pipeline/platforms.py)"
        )
    runner = [r for r in suite_requirements if requirement_name(r) == RUNNER]
    oracles = [r for r in suite_requirements if requirement_name(r) != RUNNER]
    return SysrootSpec(
        arch=arch.name,
        debian_arch=arch.debian_arch,
        multiarch=target.triple,
        pip_platforms=pip_platforms(arch.wheel_arch),
        requires=tuple(dict.fromkeys([*(runner or [RUNNER]), *requires])),
        oracles=tuple(oracles),
    )


# ------------------------------------------------------------------------------------ the sysroot


@dataclass(frozen=True, kw_only=True)
class Sysroot:
    """A prepared sysroot: what :func:`run_suite` needs, read back from its stamp."""

    arch: str
    base: Path  #: ``<cache>/<arch>``
    root: Path  #: the extracted Debian packages: ``-L`` for qemu
    site: Path  #: the PyPI wheels (test dependencies)
    python_full: str  #: "3.11.2"
    multiarch: str
    debs: Mapping[str, str]  #: Debian package → version
    wheels: Mapping[str, str]  #: project → version (PyPI)
    sources: Mapping[str, Source]  #: required project → where it came from
    absent: Mapping[str, str] = field(default_factory=dict)  #: oracle project → why it is not installed

    @property
    def python(self) -> Path:
        return self.root / "usr" / "bin" / f"python{PYTHON}"

    @property
    def paths(self) -> tuple[Path, ...]:
        """Folders the emulated venv adds to sys.path (after its own site-packages)."""
        extra = [self.site]
        if "debian" in self.sources.values():
            extra.append(self.root / "usr" / "lib" / "python3" / "dist-packages")
        return tuple(extra)

    def describe(self) -> str:
        absent = "; ".join(f"{name}: {why}" for name, why in sorted(self.absent.items()))
        return (
            f"CPython {self.python_full} ({self.arch}, Debian {len(self.debs)} packages), "
            + ", ".join(f"{k} {v}" for k, v in sorted(self.wheels.items()))
            + "".join(f", {k} from Debian {self.debs.get(p, '?')}" for k, p in self._debian_projects())
            + (f"; absent: {absent}" if absent else "")
        )

    def _debian_projects(self) -> list[tuple[str, str]]:
        return [(k, DEBIAN_FALLBACK[k][0]) for k, src in sorted(self.sources.items()) if src == "debian"]


def _stamp_path(base: Path) -> Path:
    return base / "stamp.json"


def load_sysroot(spec: SysrootSpec, cache_dir: Path) -> Sysroot | None:
    """The cached sysroot when its stamp matches ``spec`` and its interpreter is there; else None."""
    base = cache_dir / spec.debian_arch
    try:
        data = json.loads(_stamp_path(base).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != spec.key:
        return None
    try:
        sysroot = Sysroot(
            arch=spec.arch,
            base=base,
            root=base / "root",
            site=base / "site",
            python_full=str(data["python_full"]),
            multiarch=spec.multiarch,
            debs=dict(data["debs"]),
            wheels=dict(data["wheels"]),
            sources=dict(data["sources"]),
            absent=dict(data["absent"]),
        )
    except (KeyError, TypeError, ValueError):
        return None  # a stamp from an interrupted or older writer: made again
    return sysroot if sysroot.python.is_file() and sysroot.site.is_dir() else None


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def root_commands(debian_arch: str) -> str:
    return f"sudo dpkg --add-architecture {debian_arch} && sudo {' '.join(APT)} update"


def prepare_sysroot(spec: SysrootSpec, cache_dir: Path, say: Say = print) -> Sysroot:
    """The sysroot for ``spec`` under ``cache_dir/<debian arch>``: reused when its stamp matches, else made.

    Network and (for a new Debian architecture) root are needed only when it is made. Raises
    :class:`EnvironmentProblem` with the commands to run when a step cannot be done.
    """
    cached = load_sysroot(spec, cache_dir)
    if cached is not None:
        say(f"[sysroot {spec.debian_arch}] cached: {cached.describe()}")
        return cached
    t0 = time.monotonic()
    base = cache_dir / spec.debian_arch
    base.mkdir(parents=True, exist_ok=True)
    _ensure_debian_arch(spec.debian_arch, say)

    # PyPI first: which required projects need a Debian stand-in, which oracles exist
    wheel_dir = base / "wheels"
    shutil.rmtree(wheel_dir, ignore_errors=True)
    wheel_dir.mkdir()
    sources: dict[str, Source] = {}
    absent: dict[str, str] = {}
    from_pypi: list[str] = []
    plat = spec.pip_platforms[0]
    for req in spec.requires:
        name = requirement_name(req)
        if _pip_download(spec, req, wheel_dir, say):
            sources[name] = "pypi"
            from_pypi.append(req)
        elif name in DEBIAN_FALLBACK:
            sources[name] = "debian"
            say(f"[sysroot {spec.debian_arch}] {req}: no wheel for {plat} cp311 on PyPI; using Debian's"
                f" {DEBIAN_FALLBACK[name][0]}")
        else:
            raise EnvironmentProblem(
                f"{req} is needed to test {spec.arch} wheels and PyPI has no wheel of it (or of a dependency)"
                f" for {plat} cp311 (log above; `pip download --only-binary=:all: --platform {plat}"
                f" --python-version {PYTHON} {req}` reproduces it)"
            )
    for req in spec.oracles:
        if _pip_download(spec, req, wheel_dir, say):
            from_pypi.append(req)
        else:
            absent[requirement_name(req)] = f"PyPI has no {plat} cp311 wheel of {req} or of a dependency"

    # Debian: the interpreter, its libraries, and the stand-ins
    packages = list(DEBIAN_PYTHON)
    for name, src in sources.items():
        if src == "debian":
            packages += DEBIAN_FALLBACK[name]
    deb_dir = base / "debs"
    debs = _apt_download(spec.debian_arch, packages, deb_dir, say)
    root = _extract(debs, base / "root", spec, packages, say)
    site = _install_site(spec, from_pypi, wheel_dir, base / "site", say)

    versions: dict[str, str] = {}
    for deb in debs:
        name, version = _deb_fields(deb)
        versions[name] = version
    wheels = {}
    for dist_info in sorted(site.glob("*.dist-info")):
        project, _, version = dist_info.name.removesuffix(".dist-info").rpartition("-")
        wheels[normalize(project)] = version
    sysroot = Sysroot(
        arch=spec.arch,
        base=base,
        root=root,
        site=site,
        python_full="",
        multiarch=spec.multiarch,
        debs=versions,
        wheels=wheels,
        sources=sources,
        absent=absent,
    )
    python_full = _probe_python(sysroot, say)
    stamp = {
        "key": spec.key,
        "arch": spec.arch,
        "python_full": python_full,
        "debs": versions,
        "wheels": wheels,
        "sources": sources,
        "absent": absent,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    tmp = _stamp_path(base).with_suffix(".tmp")
    tmp.write_text(json.dumps(stamp, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(_stamp_path(base))
    shutil.rmtree(wheel_dir, ignore_errors=True)
    made = load_sysroot(spec, cache_dir)
    assert made is not None
    say(f"[sysroot {spec.debian_arch}] ready in {time.monotonic() - t0:.0f}s ({_size(base)}): {made.describe()}")
    return made


def _run(cmd: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None) -> tuple[int, str]:
    try:
        proc = subprocess.run(
            list(cmd), cwd=cwd, env=dict(env) if env is not None else None, capture_output=True, text=True, check=False
        )
    except OSError as exc:
        return 127, str(exc)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def _tail(text: str, lines: int = 3) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])


def _ensure_debian_arch(debian_arch: str, say: Say) -> None:
    """``dpkg --add-architecture`` and ``apt-get update``, each only when needed (both need root)."""
    rc, out = _run(["dpkg", "--print-foreign-architectures"])
    if rc != 0:
        raise EnvironmentProblem(f"dpkg does not answer ({_tail(out)}): emulated wheel tests need Debian's dpkg/apt")
    if debian_arch not in out.split():
        if not is_root():
            raise EnvironmentProblem(
                f"Debian architecture {debian_arch} is not enabled and this is not root;"
                f" run: {root_commands(debian_arch)}"
            )
        say(f"[sysroot {debian_arch}] dpkg --add-architecture {debian_arch}")
        rc, out = _run(["dpkg", "--add-architecture", debian_arch])
        if rc != 0:
            raise EnvironmentProblem(f"`dpkg --add-architecture {debian_arch}` failed: {_tail(out)}")
    probe = ["apt-cache", "show", "--no-all-versions", f"python{PYTHON}-minimal:{debian_arch}"]
    if _run(probe)[0] == 0:
        return
    if not is_root():
        raise EnvironmentProblem(
            f"apt has no package lists for {debian_arch} and this is not root; run: {root_commands(debian_arch)}"
        )
    say(f"[sysroot {debian_arch}] apt-get update (no package lists for {debian_arch} yet)")
    t0 = time.monotonic()
    rc, out = _run([*APT, "update"], env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if rc != 0 or _run(probe)[0] != 0:
        raise EnvironmentProblem(
            f"`apt-get update` did not bring {debian_arch} package lists ({_tail(out)});"
            f" run: {root_commands(debian_arch)}"
        )
    say(f"[sysroot {debian_arch}] apt-get update done in {time.monotonic() - t0:.0f}s")


def _apt_download(debian_arch: str, packages: Sequence[str], dest: Path, say: Say) -> list[Path]:
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    names = [f"{p}:{debian_arch}" for p in packages]
    say(f"[sysroot {debian_arch}] apt-get download {len(names)} packages: {' '.join(packages)}")
    t0 = time.monotonic()
    rc, out = _run([*APT, "download", *names], cwd=dest)
    if rc != 0:
        raise EnvironmentProblem(
            f"`apt-get download` of the {debian_arch} CPython packages failed: {_tail(out)}"
            f" (if the lists are stale, run: {root_commands(debian_arch)})"
        )
    debs = sorted(dest.glob("*.deb"))
    size = sum(d.stat().st_size for d in debs)
    took = time.monotonic() - t0
    say(f"[sysroot {debian_arch}] downloaded {len(debs)} .deb files, {size / 1e6:.1f} MB in {took:.0f}s")
    return debs


def _deb_fields(deb: Path) -> tuple[str, str]:
    rc, out = _run(["dpkg-deb", "--showformat=${Package}\t${Version}", "--show", str(deb)])
    if rc != 0 or "\t" not in out:
        raise EnvironmentProblem(f"cannot read {deb.name}: {_tail(out)}")
    name, version = out.splitlines()[-1].split("\t", 1)
    return name, version


def _extract(debs: Sequence[Path], root: Path, spec: SysrootSpec, packages: Sequence[str], say: Say) -> Path:
    """``dpkg -x`` every package into a fresh root, then the links maintainer scripts would have made."""
    t0 = time.monotonic()
    fresh = root.with_name(root.name + ".new")
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir(parents=True)
    for deb in debs:
        rc, out = _run(["dpkg", "-x", str(deb), str(fresh)])
        if rc != 0:
            raise EnvironmentProblem(f"`dpkg -x {deb.name}` failed: {_tail(out)}")
    libdir = fresh / "usr" / "lib" / spec.multiarch
    for package in packages:
        for link, target in DEBIAN_ALTERNATIVES.get(package, ()):
            if not (libdir / target).exists():
                raise EnvironmentProblem(f"{package}:{spec.debian_arch} has no {target} under usr/lib/{spec.multiarch}")
            (libdir / link).unlink(missing_ok=True)
            (libdir / link).symlink_to(target)
    cpuinfo = CPUINFO.get(spec.arch)
    if cpuinfo is not None:
        (fresh / "proc").mkdir()
        text = "".join(cpuinfo.format(index=i) for i in range(os.cpu_count() or 1))
        (fresh / "proc" / "cpuinfo").write_text(text, encoding="utf-8")
    shutil.rmtree(root, ignore_errors=True)
    fresh.rename(root)
    say(f"[sysroot {spec.debian_arch}] extracted into {root} ({_size(root)}) in {time.monotonic() - t0:.0f}s")
    return root


def _pip_args(spec: SysrootSpec) -> list[str]:
    args = ["--only-binary=:all:", "--python-version", PYTHON, "--implementation", "cp", "--abi", "cp311"]
    for plat in spec.pip_platforms:
        args += ["--platform", plat]
    return args


def _pip_env() -> dict[str, str]:
    # PyPI only: the machine's pip configuration (local mirrors, constraints) does not apply
    return clean_env()


def _pip_download(spec: SysrootSpec, req: str, dest: Path, say: Say) -> bool:
    """Download ``req`` and its dependencies as wheels for the platform; False when one has none."""
    t0 = time.monotonic()
    before = {p.name for p in dest.glob("*.whl")}
    cmd = [sys.executable, "-m", "pip", "download", "-q", *_pip_args(spec), "-d", str(dest), req]
    rc, out = _run(cmd, env=_pip_env())
    if rc != 0:
        say(f"[sysroot {spec.debian_arch}] {req}: no wheel for {spec.pip_platforms[0]} cp311 ({_tail(out, 1)})")
        return False
    new = sorted(p for p in dest.glob("*.whl") if p.name not in before)
    size = sum(p.stat().st_size for p in new)
    listed = ", ".join(p.name.split("-")[0] + " " + p.name.split("-")[1] for p in new) or "already downloaded"
    took = time.monotonic() - t0
    say(f"[sysroot {spec.debian_arch}] pip download {req}: {listed} ({size / 1e6:.1f} MB, {took:.0f}s)")
    return True


def _install_site(spec: SysrootSpec, reqs: Sequence[str], wheel_dir: Path, site: Path, say: Say) -> Path:
    """Install the downloaded wheels into a fresh site folder, offline (``--no-index``)."""
    t0 = time.monotonic()
    fresh = site.with_name(site.name + ".new")
    shutil.rmtree(fresh, ignore_errors=True)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheel_dir),
           "--no-compile", "--target", str(fresh), *_pip_args(spec), *reqs]
    rc, out = _run(cmd, env=_pip_env())
    if rc != 0:
        raise EnvironmentProblem(f"installing the {spec.arch} test dependencies into {site} failed: {_tail(out)}")
    shutil.rmtree(site, ignore_errors=True)
    fresh.rename(site)
    say(f"[sysroot {spec.debian_arch}] installed {' '.join(reqs)} into {site} ({_size(site)}) in"
        f" {time.monotonic() - t0:.0f}s")
    return site


def _size(path: Path) -> str:
    total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return f"{total / 1e6:.0f} MB"


_PROBE = "import platform, sys; import numpy; print(platform.python_version(), platform.machine(), numpy.__version__)"


def _probe_python(sysroot: Sysroot, say: Say) -> str:
    """Start the sysroot's interpreter under qemu once, importing numpy; its full version."""
    arch = platforms.arch(sysroot.arch)
    assert arch.qemu is not None
    env = clean_env({"PYTHONPATH": os.pathsep.join(str(p) for p in sysroot.paths), "PYTHONNOUSERSITE": "1"})
    env = {k: v for k, v in env.items() if not k.startswith("QEMU_")}
    cmd = [arch.qemu, "-L", str(sysroot.root), str(sysroot.python), "-c", _PROBE]
    t0 = time.monotonic()
    rc, out = _run(cmd, env=env)
    parts = out.splitlines()[-1].split() if out else []
    if rc != 0 or len(parts) != 3:
        raise EnvironmentProblem(
            f"the {sysroot.arch} CPython in {sysroot.root} does not start under {arch.qemu}: {_tail(out)}"
        )
    say(f"[sysroot {arch.debian_arch}] {arch.qemu}: Python {parts[0]} on {parts[1]}, numpy {parts[2]}"
        f" ({time.monotonic() - t0:.1f}s)")
    return parts[0]


# ------------------------------------------------------------------------------------- toolchain


def missing_tools(tools: Sequence[str]) -> list[str]:
    return [t for t in dict.fromkeys(tools) if shutil.which(t) is None]


def ensure_tools(tools: Sequence[str], packages: Sequence[str], say: Say = print) -> None:
    """Install the Debian ``packages`` (as root) when one of ``tools`` is not on PATH."""
    missing = missing_tools(tools)
    if not missing:
        return
    install = [*APT, "install", "-y", "--no-install-recommends", *packages]
    if not is_root():
        raise EnvironmentProblem(
            f"{', '.join(missing)} not on PATH and this is not root; run: sudo {' '.join(APT)} update &&"
            f" sudo {' '.join(install)}"
        )
    say(f"{', '.join(missing)} missing: {' '.join(install)}")
    t0 = time.monotonic()
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    rc, out = _run(install, env=env)
    if rc != 0:
        rc, out = _run([*APT, "update"], env=env)
        if rc == 0:
            rc, out = _run(install, env=env)
    still = missing_tools(tools)
    if rc != 0 or still:
        raise EnvironmentProblem(f"`{' '.join(install)}` did not provide {', '.join(still or missing)}: {_tail(out)}")
    say(f"installed {' '.join(packages)} in {time.monotonic() - t0:.0f}s")


def ensure_toolchains(targets: Sequence[Target], say: Say = print) -> None:
    """The emulated targets' compilers and qemu, installed from the targets' Debian packages when missing.

    All of them at once: the suite's plugin tests build a library for the emulated arch (``CXX``)
    and one for another arch (to check it is refused).
    """
    tools = [t for target in targets for t in (target.c_compiler, target.cxx_compiler, *target.emulator[:1])]
    packages = [p for target in targets for p in target.debian_packages]
    ensure_tools(tools, list(dict.fromkeys(packages)), say)


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
    say: Say = print,
) -> tuple[int, Counts]:
    """Run ``suite_dir`` against ``wheel`` in a fresh emulated venv; (pytest's exit code, junit counts).

    ``env_extra`` adds to the environment (the target's cross compiler as ``CXX``, so tests that
    build a plugin library build one for the emulated arch); ``tools`` are linked into the venv's
    ``bin`` (see :func:`make_venv`). The venv is made at ``venv_dir`` (default: ``<sysroot>/venv``),
    outside the source tree, and the suite runs from it.
    """
    venv = make_venv(venv_dir or sysroot.base / "venv", sysroot, emulator, [wheel, *companions], tools=tools)
    for p in (log.parent, junit.parent):
        p.mkdir(parents=True, exist_ok=True)
    junit.unlink(missing_ok=True)
    cmd = suite_command(venv, suite_dir, junit, markers=markers)
    env = suite_env(wheel, sysroot, env_extra, bin_dir=venv.python.parent)
    t0 = time.monotonic()
    say(f"[{wheel.name} {sysroot.arch}] running {suite_dir.name} under {emulator[0]}; log: {log}")
    with log.open("w", encoding="utf-8") as fh:
        fh.write(f"# sysroot: {sysroot.describe()}\n# launcher {venv.python}:\n")
        fh.write("".join(f"#   {line}\n" for line in venv.python.read_text(encoding="utf-8").splitlines()))
        extra = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted((env_extra or {}).items()))
        fh.write(f"\n$ {extra + ' ' if extra else ''}{shlex.join(cmd)}\n")
        fh.flush()
        try:
            rc = subprocess.run(
                cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=venv.path, timeout=timeout_s, check=False
            ).returncode
        except subprocess.TimeoutExpired:
            fh.write(f"\n# timed out after {timeout_s:.0f}s\n")
            rc = 124
        fh.write(f"\n# exit {rc} after {time.monotonic() - t0:.0f}s\n")
    counts = parse_junit(junit) if junit.is_file() else Counts()
    say(
        f"[{wheel.name} {sysroot.arch}] pytest exit {rc} in {time.monotonic() - t0:.0f}s: {counts.passed} passed,"
        f" {counts.failures} failed, {counts.errors} errors, {counts.skipped} skipped"
    )
    return rc, counts


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
        env_extra={"CXX": target.cxx_compiler, "CC": target.c_compiler},
        companions=wsuite.companions,
        tools=target_tools(target),
        venv_dir=work / "venvs" / f"emulated-{target.name}",
        markers=markers,
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
    except Exception as exc:  # noqa: BLE001 - inspected, then left to pytest's own report
        name = _missing_oracle(exc)
        if name is None:
            return None
        reason = f"needs {name}, absent under emulation: {ABSENT[name]}"
        return pytest.CollectReport(collector.nodeid, "skipped", (str(collector.path), 0, f"Skipped: {reason}"), [])
    return None
'''
