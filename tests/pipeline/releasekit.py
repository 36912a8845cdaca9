"""Helpers for the release tests: a git repository of the two fixture components with synthetic wheels.

The wheels are real zip wheels (METADATA, WHEEL, RECORD, a package and an ELF "library"), their build
records are what ``pipeline.build`` writes, and their test records come from ``pipeline.records`` — so the
release runs exactly as after ``nox -s build`` and ``nox -s test``, without compiling anything.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import shutil
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

from pipeline.hashing import cell_input_hash, sha256_file
from pipeline.layout import Layout
from pipeline.matrix import Cell, Matrix, load_matrix
from pipeline.plan import PlannedCell, Selection, host_target, plan
from pipeline.records import BuildRecord, Counts, Outcome, TestRecord, write_build_record, write_record
from pipeline.wheelcheck import normalize
from pipeline.wheeltest import find_pythons, suite_hash, suites_for

from .conftest import FIXTURES

HOST = "linux-x86_64"
PLATFORM_TAG = "manylinux_2_17_x86_64"
ELF = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + b"\x03\x00\x3e\x00" + b"\0" * 44


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(folder: Path, dist: str, version: str, package: str, *, salt: str = "", bundled: bool = True) -> Path:
    """A small but well-formed py3-none wheel with a native library (and one in <dist>.libs/)."""
    norm = normalize(dist)
    info = f"{norm}-{version}.dist-info"
    files = {
        f"{package}/__init__.py": f"# {dist} {version} {salt}\n".encode(),
        f"{package}/lib{package}.so": ELF + salt.encode(),
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\nSummary: fixture {dist}\n"
            f"Requires-Python: >=3.11\nRequires-Dist: numpy>=1.24\n"
            f"Description-Content-Type: text/plain\n\nThe {dist} fixture.\n"
        ).encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: releasekit\nRoot-Is-Purelib: false\nTag: py3-none-"
        + PLATFORM_TAG.encode()
        + b"\n",
    }
    if bundled:
        files[f"{norm}.libs/libhelper-1a2b3c.so.1"] = ELF + b"helper"
    record = "".join(f"{name},sha256={_b64(data)},{len(data)}\n" for name, data in files.items())
    record += f"{info}/RECORD,,\n"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{norm}-{version}-py3-none-{PLATFORM_TAG}.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), data)
        zf.writestr(zipfile.ZipInfo(f"{info}/RECORD", date_time=(2026, 1, 1, 0, 0, 0)), record)
    path.write_bytes(buf.getvalue())
    return path


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=release-test", "-c", "user.email=release-test@localhost", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@dataclass
class Repo:
    root: Path
    layout: Layout

    @property
    def matrix(self) -> Matrix:
        return load_matrix(self.root)

    def cell(self, component: str) -> Cell:
        return self.planned(component).cell

    def planned(self, component: str) -> PlannedCell:
        """The cell as the build step plans it on this machine (with the SDK defines it resolves)."""
        matrix = self.matrix
        return next(
            pc for pc in plan(matrix, Selection(), host_target(matrix))
            if pc.cell.component.name == component and pc.cell.target.name == HOST
        )  # fmt: skip

    def build(self, component: str, *, salt: str = "") -> Path:
        """What `nox -s build` leaves: the wheel in dist/<host>/ and the cell's build record, whose input hash
        is computed the way the build step computes it (:func:`pipeline.hashing.cell_input_hash` of the
        planned cell)."""
        pc = self.planned(component)
        cell = pc.cell
        folder = self.layout.dist_for(HOST)
        for old in folder.glob(f"{normalize(cell.dist)}-*.whl"):
            old.unlink()
        wheel = make_wheel(folder, cell.dist, cell.component.version, cell.component.import_package, salt=salt)
        inputs = cell_input_hash(cell, root=self.root, sdk_defines=pc.sdk_defines)
        record = BuildRecord(
            cell=cell.id,
            wheel=wheel.name,
            sha256=sha256_file(wheel),
            input_hash=inputs.hash,
            inputs=inputs.named,
            files=inputs.files,
            commands=(f"python -m build --wheel {cell.component.path}", "python -m auditwheel repair x.whl"),
            started="2026-01-01T00:00:00+00:00",
            finished="2026-01-01T00:01:00+00:00",
            toolchain={"compiler": "gcc (fixture) 12.2.0", "cmake": "cmake version 3.30.0"},
        )
        write_build_record(self.layout.state_file(cell.slug), record)
        return wheel

    def test(self, wheel: Path, outcome: Outcome = "passed", pythons: list[str] | None = None) -> None:
        """What `nox -s test` leaves: one record per Python for the wheel's current sha256."""
        for py in pythons if pythons is not None else available_pythons():
            write_record(
                self.layout.records,
                TestRecord(
                    wheel=wheel.name,
                    sha256=sha256_file(wheel),
                    outcome=outcome,
                    python=py,
                    python_full=py + ".0",
                    platform=HOST,
                    counts=Counts(tests=12, failures=0 if outcome == "passed" else 2),
                    suite_hash=suite_hash(self.root, suites_for(self.matrix, [wheel]).get(wheel.name)),
                    created="2026-01-01T00:00:00+00:00",
                    duration_s=1.0,
                    reason=None if outcome == "passed" else "pytest exit 1",
                ),
            )

    def build_and_test(self, salt: str = "") -> dict[str, Path]:
        wheels = {}
        for comp in ("alpha", "beta"):
            wheels[comp] = self.build(comp, salt=salt)
            self.test(wheels[comp])
        return wheels

    def tags(self) -> list[str]:
        return git(self.root, "tag", "--list").split()


@functools.cache
def available_pythons() -> list[str]:
    """The fixture matrix's tested CPythons present here: the ones the release gate requires."""
    found, _ = find_pythons(load_matrix(FIXTURES / "tworepo").pythons)
    return [p.version for p in found]


def make_repo(tmp_path: Path) -> Repo:
    root = tmp_path / "repo"
    shutil.copytree(FIXTURES / "tworepo", root, ignore=shutil.ignore_patterns("build", "dist", "__pycache__"))
    (root / ".gitignore").write_text("build/\ndist/\n")
    suite = root / "tests" / "wheel"  # the wheel test suite folder the matrix expects
    suite.mkdir(parents=True, exist_ok=True)
    for name, text in (("pytest.ini", "[pytest]\n"), ("requirements.txt", "pytest\n")):
        if not (suite / name).exists():
            (suite / name).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "fixture")
    layout = Layout(root=root, dist=root / "dist", work=root / "build" / "pipeline")
    return Repo(root=root, layout=layout)

