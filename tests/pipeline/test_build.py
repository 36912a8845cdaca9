"""pipeline.build on the two tiny fixture components: real wheels in seconds.

Covers: dist/<target>/ layout, the build report, up-to-date detection, rebuilding only the
changed component, a failing compile recorded with its log while other cells carry on,
and a wheel deleted or altered in dist/ being rebuilt.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.build import BuildOptions, BuildReport, build, raise_for_report
from pipeline.errors import BuildError, ExitCode, ToolchainError
from pipeline.layout import Layout
from pipeline.matrix import load_matrix
from pipeline.plan import Selection, plan
from pipeline.records import read_build_record

from .conftest import edit

for _module in ("build", "scikit_build_core", "auditwheel"):
    pytest.importorskip(_module, reason="build tools are installed by `nox -s ci`")

NOTHING = Selection()


def run(root: Path, sel: Selection = NOTHING, force: bool = False) -> tuple[BuildReport, Layout]:
    matrix = load_matrix(root)
    layout = Layout(root=root, dist=root / "dist", work=root / "build" / "pipeline")
    host = matrix.target("linux-x86_64")
    planned = plan(matrix, sel, host)
    report = build(planned, layout, host=host, opts=BuildOptions(force=force, jobs=1, quiet=True))
    raise_for_report(report, planned, sel, layout, host)
    return report, layout


def statuses(report: BuildReport) -> dict[str, str]:
    return {c.cell.id: c.status for c in report.cells}


def test_build_then_up_to_date_then_only_changed_component(tworepo: Path) -> None:
    report, layout = run(tworepo)
    assert statuses(report) == {
        "alpha/default/linux-x86_64": "built",
        "alpha/default/linux-aarch64": "skipped",
        "beta/default/linux-x86_64": "built",
    }
    wheels = sorted(p.name for p in (tworepo / "dist" / "linux-x86_64").glob("*.whl"))
    assert [w.split("-")[0] for w in wheels] == ["fixture_alpha", "fixture_beta"]
    assert all("-py3-none-manylinux" in w for w in wheels)
    data = json.loads(layout.build_report.read_text())
    assert {c["cell"]: c["status"] for c in data["cells"]} == statuses(report)
    built = next(c for c in data["cells"] if c["cell"] == "alpha/default/linux-x86_64")
    assert len(built["sha256"]) == 64 and built["wheel"].startswith("dist/linux-x86_64/")

    # the build record: what ran, when, with which tools (measured during the build), for these bytes
    record = read_build_record(layout.state_file("alpha-default-linux-x86_64"))
    assert record is not None and record.sha256 == built["sha256"] and record.input_hash == built["input_hash"]
    assert any(" -m build --wheel --no-isolation " in c for c in record.commands)
    assert any(" -m auditwheel repair " in c for c in record.commands)
    assert record.started <= record.finished
    assert record.toolchain["compiler"].startswith("g++") and record.toolchain["cmake"].startswith("cmake version")

    again, _ = run(tworepo)
    assert statuses(again)["alpha/default/linux-x86_64"] == "up-to-date"
    assert statuses(again)["beta/default/linux-x86_64"] == "up-to-date"

    edit(tworepo / "comps" / "beta" / "beta.c", "return 42", "return 7")
    third, _ = run(tworepo)
    assert statuses(third)["alpha/default/linux-x86_64"] == "up-to-date"
    beta = next(c for c in third.cells if c.cell.id == "beta/default/linux-x86_64")
    assert beta.status == "built"
    assert beta.changed_inputs == ("component (beta.c)",)


def test_failing_compile_is_recorded_and_other_cells_continue(tworepo: Path) -> None:
    edit(tworepo / "comps" / "alpha" / "alpha.c", "return 42;", "return 42 +;")
    with pytest.raises(BuildError) as info:
        run(tworepo)
    assert info.value.exit_code == ExitCode.BUILD
    assert "alpha/default/linux-x86_64 (wheel build: " in str(info.value)
    layout = Layout(root=tworepo, dist=tworepo / "dist", work=tworepo / "build" / "pipeline")
    data = json.loads(layout.build_report.read_text())
    cells = {c["cell"]: c for c in data["cells"]}
    assert cells["beta/default/linux-x86_64"]["status"] == "built"
    failed = cells["alpha/default/linux-x86_64"]
    assert failed["status"] == "failed"
    log = tworepo / failed["log"]
    assert "error" in log.read_text().lower() and "alpha.c" in log.read_text()
    # fixed → builds again
    edit(tworepo / "comps" / "alpha" / "alpha.c", "return 42 +;", "return 42;")
    report, _ = run(tworepo)
    assert statuses(report)["alpha/default/linux-x86_64"] == "built"


def test_deleted_or_altered_wheel_is_rebuilt(tworepo: Path) -> None:
    sel = Selection(components=("alpha",))
    run(tworepo, sel)
    wheel = next((tworepo / "dist" / "linux-x86_64").glob("fixture_alpha-*.whl"))
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    report, _ = run(tworepo, sel)
    cell = next(c for c in report.cells if c.cell.id == "alpha/default/linux-x86_64")
    assert cell.status == "built"
    assert cell.changed_inputs == ("wheel missing or altered in dist/",)
    wheel = next((tworepo / "dist" / "linux-x86_64").glob("fixture_alpha-*.whl"))
    wheel.unlink()
    report, _ = run(tworepo, sel)
    assert statuses(report)["alpha/default/linux-x86_64"] == "built"
    forced, _ = run(tworepo, sel, force=True)
    assert statuses(forced)["alpha/default/linux-x86_64"] == "built"


def test_version_bump_replaces_the_old_wheel(tworepo: Path) -> None:
    sel = Selection(components=("beta",))
    run(tworepo, sel)
    (tworepo / "comps" / "beta" / "VERSION").write_text("1.1.0\n")
    run(tworepo, sel)
    names = sorted(p.name for p in (tworepo / "dist" / "linux-x86_64").glob("fixture_beta-*.whl"))
    assert len(names) == 1 and names[0].startswith("fixture_beta-1.1.0-")


def test_requested_cross_target_without_toolchain_fails_clearly(tworepo: Path) -> None:
    with pytest.raises(ToolchainError) as info:
        run(tworepo, Selection(targets=("linux-aarch64",)))
    assert info.value.exit_code == ExitCode.TOOLCHAIN
    assert "alpha/default/linux-aarch64 cannot be built here: toolchain missing: fixture-missing-aarch64-gcc" in str(
        info.value
    )


def test_a_cell_folder_configured_otherwise_starts_from_an_empty_cmake_cache(tmp_path: Path) -> None:
    """Another compiler (or checkout, or define) than the cell's CMake cache was configured with: the cache is
    dropped before the build, so CMake never re-runs its configure without the command line's definitions."""
    from pipeline.build import CONFIGURE_STAMP, _drop_cache_configured_otherwise

    cmake = tmp_path / "cmake"
    (cmake / "CMakeFiles" / "4.4.5").mkdir(parents=True)
    (cmake / "CMakeFiles" / "mosaicrt_objects.dir").mkdir()
    (cmake / "CMakeFiles" / "mosaicrt_objects.dir" / "graph.cc.o").write_bytes(b"obj")
    cmd = ["python", "-m", "build", "-Cbuild-dir=x", "-Ccmake.define.CMAKE_CXX_COMPILER=/a/c++"]

    def configured(with_cmd: list[str] | None) -> None:
        (cmake / "CMakeCache.txt").write_text("MOSAICRT_INSTALL_PYTHON:BOOL=ON\n")
        (cmake / "CMakeFiles" / "4.4.5").mkdir(exist_ok=True)
        (cmake / CONFIGURE_STAMP).unlink(missing_ok=True)  # a folder from before the stamp existed
        if with_cmd is not None:
            (cmake / CONFIGURE_STAMP).write_text(json.dumps([c for c in with_cmd if c.startswith("-C")]))

    configured(cmd)
    _drop_cache_configured_otherwise(cmake, cmd)
    assert (cmake / "CMakeCache.txt").is_file()  # same settings: kept
    for before in (None, [*cmd[:-1], "-Ccmake.define.CMAKE_CXX_COMPILER=/b/c++"]):  # unknown / other settings
        configured(before)
        _drop_cache_configured_otherwise(cmake, cmd)
        assert not (cmake / "CMakeCache.txt").exists() and not (cmake / "CMakeFiles" / "4.4.5").exists()
        assert (cmake / "CMakeFiles" / "mosaicrt_objects.dir" / "graph.cc.o").is_file()  # objects stay
