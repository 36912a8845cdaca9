"""pipeline.cli: one line on stderr and an exit code per kind of failure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.errors import ExitCode

from .conftest import REPO, edit


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def test_matrix_table_shows_every_cell_and_skip_reasons(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = cli(capsys, "matrix")
    assert rc == 0 and err == ""
    for target in ("linux-x86_64", "linux-aarch64", "linux-armv7", "windows-x86_64", "windows-arm64", "macos-arm64"):
        assert target in out
    winml = [line for line in out.splitlines() if " winml " in line]
    assert [line.split()[4] for line in winml] == ["linux-x86_64", "windows-x86_64", "windows-arm64"]
    assert "buildable" in winml[0] and "mosaicrt-winml" in winml[0]


def test_matrix_json_for_ci(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = cli(capsys, "matrix", "--json")
    assert rc == 0
    data = json.loads(out)
    assert data["python"] == ["3.11", "3.12", "3.13", "3.14"]
    cells = {c["cell"]: c for c in data["include"]}
    assert cells["core/default/macos-arm64"]["runner"] == "macos-14"
    assert cells["core/default/linux-x86_64"]["tag"].startswith("core-v")
    assert cells["core/winml/linux-x86_64"]["dist"] == "mosaicrt-winml"


def test_matrix_typo_is_one_line_with_exit_code(capsys: pytest.CaptureFixture[str], real_matrix_repo: Path) -> None:
    edit(real_matrix_repo / "matrix" / "components.toml", "\nimport_package =", "\nimport_pakage =")
    rc, _, err = cli(capsys, "matrix", "--root", str(real_matrix_repo))
    assert rc == ExitCode.MATRIX == 3
    assert err == (
        "error: matrix/components.toml: component.core.import_pakage: unknown key (did you mean 'import_package'?)\n"
    )


def test_version_typo_exit_code(capsys: pytest.CaptureFixture[str], real_matrix_repo: Path) -> None:
    (real_matrix_repo / "core" / "VERSION").write_text("0.1.0.dev\n")
    rc, _, err = cli(capsys, "build", "--root", str(real_matrix_repo))
    assert rc == ExitCode.VERSION
    assert err.startswith("error: core/VERSION: '0.1.0.dev' is not a version") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("build", "--target", "linux-aarch65"), "unknown target 'linux-aarch65' (did you mean 'linux-aarch64'?)"),
        (("build", "--component", "rocm"), "the ROCm EP was retired; use the MIGraphX EP"),
        (("test", "--python", "3.10"), "CPython 3.10 is not in matrix/python.toml"),
        (("biuld",), "invalid choice: 'biuld'"),
    ],
)
def test_usage_errors(capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str) -> None:
    rc, _, err = cli(capsys, *args)
    assert rc == ExitCode.USAGE
    assert message in err and err.startswith("error: ") and err.count("\n") == 1


def test_missing_toolchain_exit_code(capsys: pytest.CaptureFixture[str], tworepo: Path) -> None:
    rc, out, err = cli(capsys, "build", "--root", str(tworepo), "--target", "linux-aarch64")
    assert rc == ExitCode.TOOLCHAIN
    assert "toolchain missing: fixture-missing-aarch64-gcc not on PATH" in err
    assert "alpha/default/linux-aarch64" in out  # the table is still printed
    report = json.loads((tworepo / "build" / "pipeline" / "reports" / "build-report.json").read_text())
    assert report["cells"][0]["status"] == "skipped"


def test_test_step_without_wheels(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, _, err = cli(
        capsys,
        "test",
        "--root",
        str(REPO),
        "--dist-dir",
        str(tmp_path / "dist"),
        "--work-dir",
        str(tmp_path / "work"),
        "--python",
        "3.11",
    )
    assert rc == ExitCode.USAGE
    assert "no wheels to test in" in err and "run `nox -s build` first" in err


def test_records_step_shows_untested_after_a_byte_flip(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from pipeline.hashing import sha256_file
    from pipeline.records import Counts, TestRecord, write_record

    dist = tmp_path / "dist" / "linux-x86_64"
    dist.mkdir(parents=True)
    wheel = dist / "mosaicrt-0.1.0-py3-none-manylinux_2_28_x86_64.whl"
    wheel.write_bytes(b"pretend wheel")
    write_record(
        tmp_path / "work" / "records" / "tests",
        TestRecord(wheel=wheel.name, sha256=sha256_file(wheel), outcome="passed", python="3.11", python_full="3.11.7",
                   platform="linux-x86_64", counts=Counts(tests=4), suite_hash="s", created="now", duration_s=1.0),
    )  # fmt: skip
    args = ("records", "--dist-dir", str(tmp_path / "dist"), "--work-dir", str(tmp_path / "work"))
    args += ("--target", "linux-x86_64")
    rc, out, _ = cli(capsys, *args)
    assert rc == 0
    assert "3.11    passed" in out and "3.12    untested" in out
    wheel.write_bytes(b"pretend wheeL")
    rc, out, _ = cli(capsys, *args)
    assert "3.11    untested" in out and "passed" not in out
