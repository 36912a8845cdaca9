"""The build matrix: load ``matrix/*.toml`` once, validate it, freeze it.

Nothing downstream re-reads TOML: the rest of the pipeline receives a :class:`Matrix`
of frozen, keyword-only dataclasses. Every problem is a :class:`MatrixError` naming the
file and the dotted key, with a suggestion for near-miss names.

Files (all in ``matrix/``):

- ``targets.toml``    ``[target.<name>]``: os, arch, toolchain, wheel tag, emulator, CI runner
- ``components.toml`` ``[component.<name>]`` with ``[component.<name>.variant.<v>]``
- ``sdks.toml``       ``[sdk.<name>]``: how to detect an SDK a component needs, and how to get it
- ``python.toml``     ``[python] tested = [...]``: the CPython versions wheels are tested on
- ``policy.toml``     platform policy: Python floor, macOS floor, forbidden os/arch, retired EPs
- ``ci.toml``         CI runners and GPU test jobs; read by :mod:`pipeline.ci` (the workflow generator)

(Over ~400 lines on purpose: the typed model and its strict loader stay together, so each key's
type and documentation sit next to its validation — the habit of scikit-build-core's settings model.
Facts about an os or arch are not here: :mod:`pipeline.platforms` has them.)
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, cast, get_args

from . import platforms
from .errors import MatrixError, UsageError, VersionError, choices_hint, suggest
from .platforms import Libc, Repair
from .versions import read_version, version_tuple

Kind = Literal["core", "ep"]

# The Python API uses 3.11 features (tomllib, typing); no policy file may lower this.
HARD_PYTHON_FLOOR = "3.11"

MATRIX_FILES = ("targets.toml", "components.toml", "sdks.toml", "python.toml", "policy.toml", "ci.toml")


@dataclass(frozen=True, kw_only=True)
class Target:
    """One build target. Facts about its os and arch come from :mod:`pipeline.platforms`."""

    name: str
    os: str  #: a registry OS name (pipeline.platforms.OSES)
    arch: str  #: a registry arch name (pipeline.platforms.ARCHES)
    libc: Libc = "glibc"  #: Linux only: glibc (manylinux wheels) or musl (musllinux wheels)
    triple: str  #: compiler triple, e.g. aarch64-linux-gnu
    conan_profile: str  #: repo-relative path of the conan host profile
    #: the target of ``zig cc`` (e.g. x86_64-linux-gnu.2.28): zig compiles this target's C/C++ against
    #: that glibc (or musl) instead of the host's, so the wheels install on older distributions
    zig_target: str | None = None
    #: the system C/C++ compilers on PATH; optional ("") for a zig_target target that only zig builds
    c_compiler: str = ""
    cxx_compiler: str = ""
    toolchain_hint: str  #: how to install the compilers on a machine that lacks them
    emulator: tuple[str, ...] = ()  #: runs target binaries on the build host (qemu, wine)
    #: the emulator for the *wheel suite* when it differs from ``emulator`` (an oracle's own bug under emulation)
    suite_emulator: tuple[str, ...] = ()
    #: GitHub Actions runner label (declared in matrix/ci.toml); None: not built by the generated workflow,
    #: which then refuses to generate and says so
    ci_runner: str | None = None
    build_hosts: tuple[str, ...]  #: targets whose machines can build this one
    macos_deployment_target: str | None = None
    #: ``nox -s crosscheck`` builds the core's native tests for this target and runs them under ``emulator``
    crosscheck: bool = False
    #: Debian packages that provide the compilers and the emulator (installed by the crosscheck when root)
    debian_packages: tuple[str, ...] = ()
    #: substrings of kernel names the native kernel checks must report as run (e.g. "i8mm")
    crosscheck_kernels: tuple[str, ...] = ()

    @property
    def arch_spec(self) -> platforms.Arch:
        return platforms.arch(self.arch)

    @property
    def os_spec(self) -> platforms.OsSpec:
        return platforms.os_spec(self.os)

    @property
    def repair(self) -> Repair:
        """How the wheel is made portable (auditwheel → manylinux/musllinux, delocate, none)."""
        return self.os_spec.repair

    @property
    def wheel_platform(self) -> str:
        """Platform tag of the unrepaired wheel, e.g. linux_aarch64, win_amd64."""
        return platforms.wheel_platform(self.os, self.arch, macos_deployment_target=self.macos_deployment_target)

    @property
    def python_host_platform(self) -> str:
        """Value of _PYTHON_HOST_PLATFORM when cross building for this target."""
        return platforms.python_host_platform(
            self.os, self.arch, macos_deployment_target=self.macos_deployment_target
        )

    @property
    def shipped_tag_pattern(self) -> str:
        """A regular expression each platform tag of the shipped wheel matches (after repair)."""
        return platforms.repaired_tag_pattern(self.os, self.arch, self.libc, self.wheel_platform)

    @property
    def shipped_tag_hint(self) -> str:
        """:attr:`shipped_tag_pattern` for people, e.g. manylinux_*_x86_64."""
        return platforms.repaired_tag_hint(self.os, self.arch, self.libc, self.wheel_platform)

    @property
    def runs_natively_on_build_host(self) -> bool:
        """Its binaries run on a linux-x86_64 build host without an emulator (e.g. a musl target)."""
        return self.os == "linux" and self.arch == "x86_64"


@dataclass(frozen=True, kw_only=True)
class Sdk:
    name: str
    executables: tuple[str, ...] = ()  #: all must be found: on PATH, or inside one of ``executable_dists``
    #: Python distributions whose installed files may provide ``executables`` (``bin/<exe>``) when PATH has none
    executable_dists: tuple[str, ...] = ()
    python_dists: tuple[str, ...] = ()  #: all must be installed in the build environment
    #: (executable, CMake variable): the build passes the executable's resolved path as that CMake define
    cmake_executables: tuple[tuple[str, str], ...] = ()
    hint: str


@dataclass(frozen=True, kw_only=True)
class Variant:
    name: str
    dist: str  #: distribution (wheel) name
    cmake_defines: tuple[tuple[str, str], ...] = ()
    planned: str | None = None  #: declared but not buildable yet; the reason
    #: requirements the variant's wheel adds to the component's own (e.g. the TUF client of winml)
    dependencies: tuple[str, ...] = ()
    #: the variant's wheel test suite when it is not the component's
    tests: str | None = None
    #: the wheel ships the EP catalog's trusted root and client configuration (the winml variant)
    catalog_client: bool = False
    #: the targets it is built for, a subset of the component's (empty: all of them)
    targets: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class CatalogEntry:
    """How an EP component appears in the EP catalog (``[component.<name>.catalog]``)."""

    ep_name: str  #: the provider name sessions ask for, e.g. DnnlExecutionProvider
    device_types: tuple[str, ...]  #: CPU / GPU / NPU
    vendor_ids: tuple[int, ...] = ()  #: PCI vendor ids it serves; empty: any vendor
    #: environment defaults the client sets (unless already set) before loading the EP's libraries
    environment: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, kw_only=True)
class Component:
    name: str
    path: str  #: repo-relative folder with the component's pyproject.toml and VERSION
    kind: Kind
    import_package: str
    tag_prefix: str
    version: str
    targets: tuple[str, ...]
    sdks: tuple[str, ...] = ()
    recipe: str | None = None  #: repo-relative conan recipe folder
    max_wheel_mb: float
    variants: tuple[Variant, ...]
    #: repo-relative wheel test suite (a folder with pytest.ini and requirements.txt); default tests/wheel
    tests: str = "tests/wheel"
    #: components whose wheels (same target) are installed next to this one for its tests (an EP needs a core)
    test_with: tuple[str, ...] = ()
    #: repo-relative files/folders outside ``path`` that the build reads (e.g. the EP ABI header): hashed inputs
    extra_inputs: tuple[str, ...] = ()
    #: shared libraries the wheel links but must not bundle (``auditwheel repair --exclude``), e.g. libdnnl.so.3
    repair_exclude: tuple[str, ...] = ()
    #: "target": the target's compilers (zig where the target says so); "system": always the system
    #: compilers (a component whose build drives the host compiler itself, e.g. nvcc)
    toolchain: Literal["target", "system"] = "target"
    #: published in the EP catalog (the winml variant downloads it on demand)
    catalog: CatalogEntry | None = None

    @property
    def tag(self) -> str:
        return f"{self.tag_prefix}-v{self.version}"


@dataclass(frozen=True, kw_only=True)
class Forbidden:
    os: str
    arch: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class RetiredEp:
    name: str
    replacements: tuple[str, ...]
    message: str


@dataclass(frozen=True, kw_only=True)
class Policy:
    python_floor: str
    macos_min_deployment_target: str
    forbidden: tuple[Forbidden, ...] = ()
    retired_eps: tuple[RetiredEp, ...] = ()
    #: the winml variant downloads EPs by default only on Windows builds at or above this one
    winml_min_windows_build: int = 26200
    #: the release gate's performance thresholds (relative): a median slower / a peak RSS larger than the last
    #: released version's on the same machine by more than these is refused
    perf_latency_regression: float = 0.10
    perf_rss_regression: float = 0.25

    def retired(self, name: str) -> RetiredEp | None:
        key = name.lower().removeprefix("ep-")
        return next((r for r in self.retired_eps if r.name == key), None)


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One (component, variant, target) build."""

    component: Component
    variant: Variant
    target: Target

    @property
    def id(self) -> str:
        return f"{self.component.name}/{self.variant.name}/{self.target.name}"

    @property
    def tests(self) -> str:
        """The repo-relative wheel test suite of this cell's wheel (the variant's, else the component's)."""
        return self.variant.tests or self.component.tests

    @property
    def slug(self) -> str:
        return self.id.replace("/", "-")

    @property
    def dist(self) -> str:
        return self.variant.dist


@dataclass(frozen=True, kw_only=True)
class Matrix:
    root: Path  #: repository root; every path in the matrix is relative to it
    targets: tuple[Target, ...]
    components: tuple[Component, ...]
    sdks: tuple[Sdk, ...]
    pythons: tuple[str, ...]
    policy: Policy

    def target(self, name: str) -> Target:
        for t in self.targets:
            if t.name == name:
                return t
        raise UsageError(f"unknown target '{name}'{choices_hint(name, [t.name for t in self.targets])}")

    def component(self, name: str) -> Component:
        for c in self.components:
            if c.name == name:
                return c
        retired = self.policy.retired(name)
        if retired is not None:
            raise UsageError(f"component '{name}': {retired.message}")
        raise UsageError(f"unknown component '{name}'{choices_hint(name, [c.name for c in self.components])}")

    def sdk(self, name: str) -> Sdk:
        return next(s for s in self.sdks if s.name == name)

    def cell_for_wheel(self, filename: str) -> Cell | None:
        """**The** wheel → cell mapping: the distribution name gives (component, variant), the platform tag
        gives the target (so glibc and musl wheels of one arch are told apart). None: not a matrix wheel."""
        m = re.fullmatch(r"(?P<name>[^-]+)-[^-]+(-\d[^-]*)?-[^-]+-[^-]+-(?P<plat>[^-]+)\.whl", filename)
        if m is None:
            return None
        norm = m["name"].lower()
        plats = m["plat"].split(".")
        for cell in self.cells():
            if re.sub(r"[-_.]+", "_", cell.dist).lower() != norm:
                continue
            target = cell.target
            if all(re.fullmatch(target.shipped_tag_pattern, p) or p == target.wheel_platform for p in plats):
                return cell
        return None

    @property
    def has_ep_catalog(self) -> bool:
        """A variant ships the EP catalog client or an EP is published in it: the release keeps the catalog."""
        return any(c.catalog is not None or any(v.catalog_client for v in c.variants) for c in self.components)

    def cells(self) -> tuple[Cell, ...]:
        """Every declared cell, in declaration order (component, variant, target)."""
        return tuple(
            Cell(component=c, variant=v, target=self.target(t))
            for c in self.components
            for v in c.variants
            for t in (v.targets or c.targets)
        )


# --------------------------------------------------------------------------------------
# Loading


T = TypeVar("T")


class _Table:
    """A TOML table being read: every access is typed, unknown keys are errors."""

    def __init__(self, file: str, key: str, data: object, allowed: tuple[str, ...]) -> None:
        self.file = file
        self.key = key
        if not isinstance(data, dict):
            raise MatrixError(file, key, f"must be a table, got {_type_name(data)}")
        self.data: dict[str, Any] = data
        for k in data:
            if k not in allowed:
                raise MatrixError(file, self.sub(k), f"unknown key{suggest(k, allowed)}")

    def sub(self, k: str) -> str:
        return f"{self.key}.{k}" if self.key else k

    def error(self, k: str, problem: str) -> MatrixError:
        return MatrixError(self.file, self.sub(k), problem)

    def _get(self, k: str, check: Callable[[object], bool], what: str, default: object) -> Any:
        if k not in self.data:
            if default is _REQUIRED:
                raise self.error(k, f"required key is missing ({what})")
            return default
        value = self.data[k]
        if not check(value):
            raise self.error(k, f"expected {what}, got {_type_name(value)} {value!r}")
        return value

    def string(self, k: str, default: object = None) -> Any:
        value = self._get(k, lambda v: isinstance(v, str), "a string", default)
        if isinstance(value, str) and not value.strip():
            raise self.error(k, "must not be empty")
        return value

    def choice(self, k: str, allowed: tuple[str, ...], default: object = None) -> Any:
        value = self.string(k, default)
        if value is not None and value not in allowed:
            raise self.error(k, f"'{value}' is not allowed{choices_hint(value, allowed)}")
        return value

    def boolean(self, k: str, default: object = False) -> Any:
        return self._get(k, lambda v: isinstance(v, bool), "true or false", default)

    def number(self, k: str, default: object = None) -> Any:
        check = lambda v: isinstance(v, int | float) and not isinstance(v, bool)  # noqa: E731
        return self._get(k, check, "a number", default)

    def str_list(self, k: str, default: object = ()) -> tuple[str, ...]:
        check = lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)  # noqa: E731
        return tuple(self._get(k, check, "a list of strings", default))

    def str_map(self, k: str) -> tuple[tuple[str, str], ...]:
        check = lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values())  # noqa: E731
        value = self._get(k, check, "a table of strings", {})
        return tuple(sorted(value.items()))

    def table(self, k: str, allowed: tuple[str, ...], *, required: bool = False) -> _Table:
        if k not in self.data and required:
            raise self.error(k, "required table is missing")
        return _Table(self.file, self.sub(k), self.data.get(k, {}), allowed)

    def tables(self, k: str) -> dict[str, object]:
        value = self.data.get(k, {})
        if not isinstance(value, dict):
            raise self.error(k, f"must be a table of named tables, got {_type_name(value)}")
        return value


_REQUIRED = object()


def _type_name(value: object) -> str:
    return {dict: "table", list: "array", str: "string", bool: "boolean", int: "integer", float: "float"}.get(
        type(value), type(value).__name__
    )


def _read_toml(path: Path, display: str) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise MatrixError(display, "", "file is missing") from None
    except tomllib.TOMLDecodeError as exc:
        raise MatrixError(display, "", f"invalid TOML: {exc}") from None


def load_matrix(root: Path, matrix_dir: Path | None = None) -> Matrix:
    """Load and validate ``<root>/matrix`` (or ``matrix_dir``); paths inside are relative to ``root``."""
    root = root.resolve()
    mdir = (matrix_dir or root / "matrix").resolve()
    if not mdir.is_dir():
        raise MatrixError(_display(mdir, root), "", "matrix folder is missing")
    for extra in sorted(mdir.glob("*.toml")):
        if extra.name not in MATRIX_FILES:
            raise MatrixError(_display(extra, root), "", f"unknown matrix file{choices_hint(extra.name, MATRIX_FILES)}")

    def doc(name: str, top: tuple[str, ...]) -> _Table:
        path = mdir / name
        return _Table(_display(path, root), "", _read_toml(path, _display(path, root)), top)

    policy = _load_policy(doc("policy.toml", ("python", "macos", "forbidden", "retired_ep", "winml", "performance")))
    pythons = _load_pythons(doc("python.toml", ("python",)), policy)
    sdks = _load_sdks(doc("sdks.toml", ("sdk",)))
    targets = _load_targets(doc("targets.toml", ("target",)), policy, root)
    components = _load_components(doc("components.toml", ("component",)), targets, sdks, policy, root)
    return Matrix(root=root, targets=targets, components=components, sdks=sdks, pythons=pythons, policy=policy)


def _display(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _version_ge(t: _Table, k: str, value: str, floor: str) -> bool:
    try:
        return version_tuple(value) >= version_tuple(floor)
    except ValueError:
        raise t.error(k, f"'{value}' is not a dotted version like {floor}") from None


def _load_policy(doc: _Table) -> Policy:
    py = doc.table("python", ("floor",), required=True)
    floor = py.string("floor", _REQUIRED)
    if not _version_ge(py, "floor", floor, HARD_PYTHON_FLOOR):
        raise py.error(
            "floor", f"CPython {floor} is below the supported floor {HARD_PYTHON_FLOOR}: cp310 and older are not built"
        )
    mac = doc.table("macos", ("min_deployment_target",), required=True)
    mac_floor = mac.string("min_deployment_target", _REQUIRED)
    if not _version_ge(mac, "min_deployment_target", mac_floor, "14.0"):
        raise mac.error("min_deployment_target", f"{mac_floor} is below the project's macOS floor 14.0")
    forbidden: list[Forbidden] = []
    raw_forbidden = doc.data.get("forbidden", [])
    if not isinstance(raw_forbidden, list):
        raise doc.error("forbidden", "must be an array of tables ([[forbidden]])")
    for i, entry in enumerate(raw_forbidden):
        t = _Table(doc.file, f"forbidden[{i}]", entry, ("os", "arch", "reason"))
        forbidden.append(
            Forbidden(
                os=t.choice("os", platforms.os_names(), _REQUIRED),
                arch=t.choice("arch", platforms.arch_names(), _REQUIRED),
                reason=t.string("reason", _REQUIRED),
            )
        )
    retired: list[RetiredEp] = []
    for name, body in doc.tables("retired_ep").items():
        t = _Table(doc.file, f"retired_ep.{name}", body, ("replacements", "message"))
        retired.append(
            RetiredEp(
                name=name, replacements=t.str_list("replacements", _REQUIRED), message=t.string("message", _REQUIRED)
            )
        )
    winml = doc.table("winml", ("min_windows_build",))
    min_build = winml.number("min_windows_build", Policy.winml_min_windows_build)
    if not isinstance(min_build, int) or min_build <= 0:
        raise winml.error("min_windows_build", f"expected a positive Windows build number, got {min_build!r}")
    perf = doc.table("performance", ("latency_regression", "rss_regression"))
    thresholds = {}
    for key, default in (("latency_regression", Policy.perf_latency_regression),
                         ("rss_regression", Policy.perf_rss_regression)):  # fmt: skip
        value = perf.number(key, default)
        if not 0 < value < 10:
            raise perf.error(key, f"expected a relative threshold such as 0.10 (10 %), got {value!r}")
        thresholds[key] = float(value)
    return Policy(
        python_floor=floor,
        macos_min_deployment_target=mac_floor,
        forbidden=tuple(forbidden),
        retired_eps=tuple(retired),
        winml_min_windows_build=min_build,
        perf_latency_regression=thresholds["latency_regression"],
        perf_rss_regression=thresholds["rss_regression"],
    )


def _load_pythons(doc: _Table, policy: Policy) -> tuple[str, ...]:
    t = doc.table("python", ("tested",), required=True)
    tested = t.str_list("tested", _REQUIRED)
    if not tested:
        raise t.error("tested", "list at least one CPython version")
    for v in tested:
        if not _version_ge(t, "tested", v, "0.0") or len(version_tuple(v)) != 2:
            raise t.error("tested", f"'{v}' must look like 3.12")
        if version_tuple(v) < version_tuple(policy.python_floor):
            raise t.error(
                "tested",
                f"CPython {v} is below the policy floor {policy.python_floor} (matrix/policy.toml python.floor);"
                f" remove it (cp310 and older are not supported)",
            )
    if len(set(tested)) != len(tested):
        raise t.error("tested", "lists a version twice")
    return tuple(sorted(tested, key=version_tuple))


def _load_sdks(doc: _Table) -> tuple[Sdk, ...]:
    sdks = []
    for name, body in doc.tables("sdk").items():
        t = _Table(
            doc.file,
            f"sdk.{name}",
            body,
            ("executables", "executable_dists", "python_dists", "cmake_executables", "hint"),
        )
        sdk = Sdk(
            name=name,
            executables=t.str_list("executables"),
            executable_dists=t.str_list("executable_dists"),
            python_dists=t.str_list("python_dists"),
            cmake_executables=t.str_map("cmake_executables"),
            hint=t.string("hint", _REQUIRED),
        )
        if not sdk.executables and not sdk.python_dists:
            raise t.error("executables", "an SDK needs executables or python_dists to detect it")
        for exe, _ in sdk.cmake_executables:
            if exe not in sdk.executables:
                raise t.error("cmake_executables", f"'{exe}' is not one of this SDK's executables")
        sdks.append(sdk)
    return tuple(sdks)


_TARGET_KEYS = tuple(f for f in Target.__dataclass_fields__ if f != "name")
# Derived from the platform registry; a targets.toml that still sets them gets a pointed error.
_DERIVED_TARGET_KEYS = {
    "wheel_platform": "derived from os/arch by pipeline/platforms.py",
    "python_host_platform": "derived from os/arch by pipeline/platforms.py",
    "repair": "derived from os (and libc) by pipeline/platforms.py",
}


def _load_targets(doc: _Table, policy: Policy, root: Path) -> tuple[Target, ...]:
    targets: list[Target] = []
    raw = doc.tables("target")
    if not raw:
        raise doc.error("target", "declare at least one [target.<name>]")
    for name, body in raw.items():
        if isinstance(body, dict):
            for key, why in _DERIVED_TARGET_KEYS.items():
                if key in body:
                    raise MatrixError(doc.file, f"target.{name}.{key}", f"remove this key: it is {why}")
        t = _Table(doc.file, f"target.{name}", body, _TARGET_KEYS)
        target = Target(
            name=name,
            os=t.choice("os", platforms.os_names(), _REQUIRED),
            arch=t.choice("arch", platforms.arch_names(), _REQUIRED),
            libc=t.choice("libc", get_args(Libc), "glibc"),
            triple=t.string("triple", _REQUIRED),
            conan_profile=t.string("conan_profile", _REQUIRED),
            zig_target=t.string("zig_target"),
            c_compiler=t.string("c_compiler", _REQUIRED if "zig_target" not in t.data else None) or "",
            cxx_compiler=t.string("cxx_compiler", _REQUIRED if "zig_target" not in t.data else None) or "",
            toolchain_hint=t.string("toolchain_hint", _REQUIRED),
            emulator=t.str_list("emulator"),
            suite_emulator=t.str_list("suite_emulator"),
            ci_runner=t.string("ci_runner"),
            build_hosts=t.str_list("build_hosts", _REQUIRED),
            macos_deployment_target=t.string("macos_deployment_target"),
            crosscheck=t.boolean("crosscheck"),
            debian_packages=t.str_list("debian_packages"),
            crosscheck_kernels=t.str_list("crosscheck_kernels"),
        )
        _check_target(t, target, policy, root)
        targets.append(target)
    names = [x.name for x in targets]
    for target in targets:
        for host in target.build_hosts:
            if host not in names:
                raise MatrixError(
                    doc.file, f"target.{target.name}.build_hosts", f"unknown target '{host}'{choices_hint(host, names)}"
                )
    return tuple(targets)


def _check_target(t: _Table, target: Target, policy: Policy, root: Path) -> None:
    for rule in policy.forbidden:
        if (rule.os, rule.arch) == (target.os, target.arch):
            raise t.error("arch", f"{target.os}/{target.arch} is forbidden by matrix/policy.toml: {rule.reason}")
    if target.os == "macos":
        if target.macos_deployment_target is None:
            raise t.error(
                "macos_deployment_target",
                f"required for macOS targets (at least {policy.macos_min_deployment_target})",
            )
        if not _version_ge(
            t, "macos_deployment_target", target.macos_deployment_target, policy.macos_min_deployment_target
        ):
            raise t.error(
                "macos_deployment_target",
                f"{target.macos_deployment_target} is below the policy floor {policy.macos_min_deployment_target}",
            )
    elif target.macos_deployment_target is not None:
        raise t.error("macos_deployment_target", f"only applies to macOS targets, not {target.os}")
    if target.crosscheck and not target.emulator and not target.runs_natively_on_build_host:
        raise t.error("crosscheck", "a crosscheck target needs an emulator to run its native tests (qemu, wine)")
    if target.libc != "glibc" and target.os != "linux":
        raise t.error("libc", f"only Linux targets choose their C library, not {target.os}")
    if target.zig_target is not None and target.zig_target.endswith("-musl") != (target.libc == "musl"):
        raise t.error("zig_target", f"'{target.zig_target}' does not build for the target's libc ({target.libc})")
    try:
        target.wheel_platform  # noqa: B018 - the registry must know a wheel tag for this os/arch
    except platforms.UnknownPlatform as exc:
        raise t.error("arch", str(exc)) from None
    _check_profile(t, target, root)


def _check_profile(t: _Table, target: Target, root: Path) -> None:
    """The conan host profile must exist and agree with the target's os/arch (and macOS floor)."""
    path = root / target.conan_profile
    if not path.is_file():
        raise t.error("conan_profile", f"'{target.conan_profile}' does not exist (add it under recipes/profiles/)")
    settings = read_profile_settings(path)
    want = {"os": target.os_spec.conan, "arch": target.arch_spec.conan}
    if target.macos_deployment_target is not None:
        want["os.version"] = target.macos_deployment_target
    for key, value in want.items():
        got = settings.get(key)
        if got is not None and got != value:
            raise t.error(
                "conan_profile", f"'{target.conan_profile}' sets {key}={got} but the target needs {key}={value}"
            )


def read_profile_settings(path: Path) -> dict[str, str]:
    """The ``[settings]`` of a conan profile file (includes are not followed)."""
    section = ""
    out: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
        elif section == "settings" and "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


_COMPONENT_KEYS = (
    *(f for f in Component.__dataclass_fields__ if f not in ("name", "version", "variants", "catalog")),
    "catalog",
    "dist",
    "variant",
)
_VARIANT_KEYS = ("dist", "cmake_defines", "planned", "dependencies", "tests", "catalog_client", "targets")
_CATALOG_KEYS = ("ep_name", "device_types", "vendor_ids", "environment")
_DEVICE_TYPES = ("CPU", "GPU", "NPU")


def _suite(t: _Table, root: Path, default: str | None) -> str | None:
    tests = t.string("tests", default)
    if "tests" in t.data and not all((root / tests / f).is_file() for f in ("pytest.ini", "requirements.txt")):
        raise t.error("tests", f"'{tests}' must be a test folder with pytest.ini and requirements.txt")
    return cast("str | None", tests)


def _catalog_entry(t: _Table, kind: str) -> CatalogEntry | None:
    if "catalog" not in t.data:
        return None
    if kind != "ep":
        raise t.error("catalog", "only an EP component (kind = \"ep\") is published in the EP catalog")
    ct = t.table("catalog", _CATALOG_KEYS)
    device_types = ct.str_list("device_types", _REQUIRED)
    for d in device_types:
        if d not in _DEVICE_TYPES:
            raise ct.error("device_types", f"'{d}' is not a device type{choices_hint(d, _DEVICE_TYPES)}")
    raw_ids = ct._get("vendor_ids", lambda v: isinstance(v, list) and all(isinstance(x, int) for x in v),
                      "a list of integers (PCI vendor ids)", [])
    return CatalogEntry(ep_name=ct.string("ep_name", _REQUIRED), device_types=device_types, vendor_ids=tuple(raw_ids),
                        environment=ct.str_map("environment"))


def _load_components(
    doc: _Table, targets: tuple[Target, ...], sdks: tuple[Sdk, ...], policy: Policy, root: Path
) -> tuple[Component, ...]:
    target_names = [x.name for x in targets]
    sdk_names = [s.name for s in sdks]
    components: list[Component] = []
    dists: dict[str, str] = {}
    raw = doc.tables("component")
    if not raw:
        raise doc.error("component", "declare at least one [component.<name>]")
    for name, body in raw.items():
        t = _Table(doc.file, f"component.{name}", body, _COMPONENT_KEYS)
        kind = cast(Kind, t.choice("kind", get_args(Kind), _REQUIRED))
        retired = policy.retired(name)
        if kind == "ep" and retired is not None:
            raise t.error("kind", retired.message)
        path = t.string("path", _REQUIRED)
        folder = root / path
        if not folder.is_dir():
            raise t.error("path", f"folder '{path}' does not exist")
        if not (folder / "pyproject.toml").is_file():
            raise t.error("path", f"'{path}' has no pyproject.toml (a component builds one wheel)")
        try:
            version = read_version(folder / "VERSION", display=f"{path}/VERSION")
        except VersionError as exc:
            raise VersionError(f"{exc.message} (component '{name}' in {doc.file})") from None
        comp_targets = t.str_list("targets", _REQUIRED)
        for tn in comp_targets:
            if tn not in target_names:
                raise t.error("targets", f"unknown target '{tn}'{choices_hint(tn, target_names)}")
        comp_sdks = t.str_list("sdks")
        for sn in comp_sdks:
            if sn not in sdk_names:
                raise t.error(
                    "sdks", f"unknown SDK '{sn}'{choices_hint(sn, sdk_names)} (declare it in matrix/sdks.toml)"
                )
        recipe = t.string("recipe")
        if recipe is not None and not (root / recipe / "conanfile.py").is_file():
            raise t.error("recipe", f"'{recipe}/conanfile.py' does not exist")
        default_dist = t.string("dist", _REQUIRED)
        variants = [Variant(name="default", dist=default_dist)]
        for vname, vbody in t.tables("variant").items():
            vt = _Table(doc.file, f"component.{name}.variant.{vname}", vbody, _VARIANT_KEYS)
            if vname == "default":
                raise vt.error("dist", "the default variant is the component itself; name this variant differently")
            variants.append(
                Variant(
                    name=vname,
                    dist=vt.string("dist", _REQUIRED),
                    cmake_defines=vt.str_map("cmake_defines"),
                    planned=vt.string("planned"),
                    dependencies=vt.str_list("dependencies"),
                    tests=_suite(vt, root, None),
                    catalog_client=vt.boolean("catalog_client"),
                    targets=vt.str_list("targets"),
                )
            )
            for tn in variants[-1].targets:
                if tn not in comp_targets:
                    hint = choices_hint(tn, comp_targets)
                    raise vt.error("targets", f"'{tn}' is not one of the component's targets{hint}")
        for v in variants:
            owner = dists.get(v.dist)
            if owner is not None:
                raise t.error("dist", f"distribution '{v.dist}' is also built by {owner}; dist names must be unique")
            dists[v.dist] = f"{name}/{v.name}"
        max_mb = t.number("max_wheel_mb", _REQUIRED)
        if max_mb <= 0:
            raise t.error("max_wheel_mb", "must be positive")
        tests = cast(str, _suite(t, root, "tests/wheel"))
        extra_inputs = t.str_list("extra_inputs")
        for extra in extra_inputs:
            if not (root / extra).exists():
                raise t.error("extra_inputs", f"'{extra}' does not exist")
        components.append(
            Component(
                name=name,
                path=path,
                kind=kind,
                import_package=t.string("import_package", _REQUIRED),
                tag_prefix=t.string("tag_prefix", name if kind == "core" else f"ep-{name}"),
                version=version,
                targets=comp_targets,
                sdks=comp_sdks,
                recipe=recipe,
                max_wheel_mb=float(max_mb),
                variants=tuple(variants),
                tests=tests,
                test_with=t.str_list("test_with"),
                extra_inputs=extra_inputs,
                repair_exclude=t.str_list("repair_exclude"),
                toolchain=t.choice("toolchain", ("target", "system"), "target"),
                catalog=_catalog_entry(t, kind),
            )
        )
    names = [c.name for c in components]
    for c in components:
        for other in c.test_with:
            if other not in names or other == c.name:
                raise MatrixError(
                    doc.file,
                    f"component.{c.name}.test_with",
                    f"'{other}' is not another component{choices_hint(other, [n for n in names if n != c.name])}",
                )
    return tuple(components)
