"""Plugin EP components in the matrix: declaration, SDK detection, test suites with companion wheels."""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path

import pytest

from pipeline.errors import EnvironmentProblem
from pipeline.matrix import load_matrix
from pipeline.plan import find_executable, sdk_cmake_defines, sdk_missing
from pipeline.wheelcheck import EP_ENTRY_POINTS
from pipeline.wheeltest import SUITE, suite_hash, suites_for

from .conftest import REPO

MATRIX = load_matrix(REPO)


def test_dnnl_component_is_an_ep_with_its_own_version_tag_and_suite() -> None:
    c = MATRIX.component("dnnl")
    assert c.kind == "ep"
    assert c.tag == f"ep-dnnl-v{(REPO / 'eps' / 'dnnl' / 'VERSION').read_text().strip()}"
    assert c.tests == "tests/eps/dnnl" and c.test_with == ("core",)
    assert "libdnnl.so.3" in c.repair_exclude
    assert "core/include/mosaicrt/ep.h" in c.extra_inputs
    assert MATRIX.component("cuda").max_wheel_mb == 20


def test_openvino_component_depends_on_the_openvino_wheel_without_bundling_it() -> None:
    c = MATRIX.component("openvino")
    assert c.kind == "ep" and c.import_package == "mosaicrt_ep_openvino" and c.path == "eps/openvino"
    assert c.tag == f"ep-openvino-v{(REPO / 'eps' / 'openvino' / 'VERSION').read_text().strip()}"
    assert c.tests == "tests/eps/openvino" and c.test_with == ("core",)
    assert MATRIX.sdk("openvino").python_dists == ("openvino",)
    assert {"libopenvino_c.so.2641", "libopenvino.so.2641"} <= set(c.repair_exclude)
    # The release it is built against (build requirement) is the one it needs at run time.
    import tomllib

    project = tomllib.loads((REPO / "eps" / "openvino" / "pyproject.toml").read_text())
    build_pin = next(r for r in project["build-system"]["requires"] if r.startswith("openvino"))
    assert project["project"]["dependencies"] == [build_pin]


def test_ep_abi_header_change_is_a_build_input_of_the_ep() -> None:
    from pipeline.hashing import cell_input_hash

    cell = next(c for c in MATRIX.cells() if c.id == "dnnl/default/linux-x86_64")
    inputs = cell_input_hash(cell, root=REPO, logic="x").named
    assert "extra:core/include/mosaicrt/ep.h" in inputs


def test_ep_entry_points_are_the_abi_ones() -> None:
    header = (REPO / "core" / "include" / "mosaicrt" / "ep.h").read_text()
    for name in EP_ENTRY_POINTS:
        assert name in header


def test_executable_found_on_path_and_handed_to_cmake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = tmp_path / "nvcc"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_executable("nvcc", ["no-such-dist"]) == str(exe)
    assert sdk_missing(MATRIX, ["cuda"]) is None
    # The CUDA EP takes its toolkit from its pinned build requirements, so the matrix hands CMake
    # nothing; an SDK that declares cmake_executables gets the resolved path.
    assert sdk_cmake_defines(MATRIX.sdk("cuda")) == []
    handed = dataclasses.replace(MATRIX.sdk("cuda"), cmake_executables=(("nvcc", "CMAKE_CUDA_COMPILER"),))
    assert sdk_cmake_defines(handed) == [("CMAKE_CUDA_COMPILER", str(exe))]


def test_missing_sdk_names_path_and_wheel_and_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    sdk = MATRIX.sdk("cuda")
    object.__setattr__(sdk, "executable_dists", ("no-such-nvcc-wheel",))
    try:
        reason = sdk_missing(MATRIX, ["cuda"])
    finally:
        object.__setattr__(sdk, "executable_dists", ("nvidia-cuda-nvcc",))
    assert reason is not None
    assert "nvcc not on PATH or in no-such-nvcc-wheel" in reason and "pip install nvidia-cuda-nvcc" in reason


def test_ep_wheel_is_tested_with_the_core_wheel(tmp_path: Path) -> None:
    core = tmp_path / "mosaicrt-0.1.0-py3-none-manylinux_2_35_x86_64.whl"
    ep = tmp_path / "mosaicrt_ep_dnnl-0.1.0-py3-none-manylinux_2_34_x86_64.whl"
    for w in (core, ep):
        w.write_bytes(os.urandom(16))
    suites = suites_for(MATRIX, [core, ep])
    assert suites[core.name].path == SUITE and suites[core.name].companions == ()
    assert suites[ep.name].path == Path("tests/eps/dnnl")
    assert suites[ep.name].companions == (core,)
    before = suite_hash(REPO, suites[ep.name])
    core.write_bytes(os.urandom(16))  # a new core wheel retests the EP
    assert suite_hash(REPO, suites[ep.name]) != before


def test_ep_wheel_without_a_core_wheel_says_how_to_build_it(tmp_path: Path) -> None:
    ep = tmp_path / "mosaicrt_ep_dnnl-0.1.0-py3-none-manylinux_2_34_x86_64.whl"
    ep.write_bytes(b"x")
    with pytest.raises(EnvironmentProblem, match="nox -s build -- --component core"):
        suites_for(MATRIX, [ep])
