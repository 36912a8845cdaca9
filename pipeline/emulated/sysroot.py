"""A CPython for a foreign arch from Debian packages, unpacked into a cached sysroot (see the package docstring).

Over ~400 lines for one reason: the Debian side (apt download, dpkg -x, alternatives links, a
/proc/cpuinfo for the arch) and the PyPI side (platform-tagged downloads, Debian fallbacks, absent
oracles) of one cached, stamped sysroot are one job; splitting them would split the stamp's contents.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.parser import HeaderParser
from pathlib import Path
from typing import Literal

from .. import platforms
from ..errors import EnvironmentProblem
from ..matrix import Target
from ..wheelcheck import normalize
from ..wheeltest import clean_env

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


def run_command(
    cmd: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> tuple[int, str]:
    try:
        proc = subprocess.run(
            list(cmd), cwd=cwd, env=dict(env) if env is not None else None, capture_output=True, text=True, check=False
        )
    except OSError as exc:
        return 127, str(exc)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def tail(text: str, lines: int = 3) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])


def _ensure_debian_arch(debian_arch: str, say: Say) -> None:
    """``dpkg --add-architecture`` and ``apt-get update``, each only when needed (both need root)."""
    rc, out = run_command(["dpkg", "--print-foreign-architectures"])
    if rc != 0:
        raise EnvironmentProblem(f"dpkg does not answer ({tail(out)}): emulated wheel tests need Debian's dpkg/apt")
    if debian_arch not in out.split():
        if not is_root():
            raise EnvironmentProblem(
                f"Debian architecture {debian_arch} is not enabled and this is not root;"
                f" run: {root_commands(debian_arch)}"
            )
        say(f"[sysroot {debian_arch}] dpkg --add-architecture {debian_arch}")
        rc, out = run_command(["dpkg", "--add-architecture", debian_arch])
        if rc != 0:
            raise EnvironmentProblem(f"`dpkg --add-architecture {debian_arch}` failed: {tail(out)}")
    probe = ["apt-cache", "show", "--no-all-versions", f"python{PYTHON}-minimal:{debian_arch}"]
    if run_command(probe)[0] == 0:
        return
    if not is_root():
        raise EnvironmentProblem(
            f"apt has no package lists for {debian_arch} and this is not root; run: {root_commands(debian_arch)}"
        )
    say(f"[sysroot {debian_arch}] apt-get update (no package lists for {debian_arch} yet)")
    t0 = time.monotonic()
    rc, out = run_command([*APT, "update"], env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if run_command(probe)[0] != 0:
        raise EnvironmentProblem(
            f"`apt-get update` did not bring {debian_arch} package lists ({tail(out)});"
            f" run: {root_commands(debian_arch)}"
        )
    if rc != 0:  # another index failed (a mirror mid-sync) while the lists this needs came: go on, say so
        say(f"[sysroot {debian_arch}] warning: apt-get update exited {rc} ({tail(out)}); the {debian_arch} lists needed"
            " here are in")
    say(f"[sysroot {debian_arch}] apt-get update done in {time.monotonic() - t0:.0f}s")


def _apt_download(debian_arch: str, packages: Sequence[str], dest: Path, say: Say) -> list[Path]:
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    names = [f"{p}:{debian_arch}" for p in packages]
    say(f"[sysroot {debian_arch}] apt-get download {len(names)} packages: {' '.join(packages)}")
    t0 = time.monotonic()
    rc, out = run_command([*APT, "download", *names], cwd=dest)
    if rc != 0:
        raise EnvironmentProblem(
            f"`apt-get download` of the {debian_arch} CPython packages failed: {tail(out)}"
            f" (if the lists are stale, run: {root_commands(debian_arch)})"
        )
    debs = sorted(dest.glob("*.deb"))
    size = sum(d.stat().st_size for d in debs)
    took = time.monotonic() - t0
    say(f"[sysroot {debian_arch}] downloaded {len(debs)} .deb files, {size / 1e6:.1f} MB in {took:.0f}s")
    return debs


def _deb_fields(deb: Path) -> tuple[str, str]:
    rc, out = run_command(["dpkg-deb", "--showformat=${Package}\t${Version}", "--show", str(deb)])
    if rc != 0 or "\t" not in out:
        raise EnvironmentProblem(f"cannot read {deb.name}: {tail(out)}")
    name, version = out.splitlines()[-1].split("\t", 1)
    return name, version


def _extract(debs: Sequence[Path], root: Path, spec: SysrootSpec, packages: Sequence[str], say: Say) -> Path:
    """``dpkg -x`` every package into a fresh root, then the links maintainer scripts would have made."""
    t0 = time.monotonic()
    fresh = root.with_name(root.name + ".new")
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir(parents=True)
    for deb in debs:
        rc, out = run_command(["dpkg", "-x", str(deb), str(fresh)])
        if rc != 0:
            raise EnvironmentProblem(f"`dpkg -x {deb.name}` failed: {tail(out)}")
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
    rc, out = run_command(cmd, env=_pip_env())
    if rc != 0:
        say(f"[sysroot {spec.debian_arch}] {req}: no wheel for {spec.pip_platforms[0]} cp311 ({tail(out, 1)})")
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
    rc, out = run_command(cmd, env=_pip_env())
    if rc != 0:
        raise EnvironmentProblem(f"installing the {spec.arch} test dependencies into {site} failed: {tail(out)}")
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
    rc, out = run_command(cmd, env=env)
    parts = out.splitlines()[-1].split() if out else []
    if rc != 0 or len(parts) != 3:
        raise EnvironmentProblem(
            f"the {sysroot.arch} CPython in {sysroot.root} does not start under {arch.qemu}: {tail(out)}"
        )
    say(f"[sysroot {arch.debian_arch}] {arch.qemu}: Python {parts[0]} on {parts[1]}, numpy {parts[2]}"
        f" ({time.monotonic() - t0:.1f}s)")
    return parts[0]


