"""pipeline.workflow: .github/ is generated from matrix/ — drift, derivation, hardening, bad input."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline import cibw
from pipeline.catalog.trust import ONLINE_ROLES
from pipeline.errors import MatrixError
from pipeline.matrix import load_matrix
from pipeline.workflow import ACTIONLINT_FILE, RELEASE_FILE, WORKFLOW_FILE, Generated, drift, generate, write
from pipeline.yamlout import Pinned, dump

from .conftest import REPO, edit


def _jobs(gen: Generated, file: str = WORKFLOW_FILE) -> Mapping[str, Any]:
    return gen.documents[file]["jobs"]


def _steps(gen: Generated) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for file, doc in gen.documents.items():
        for job_id, job in doc["jobs"].items():
            for step in job["steps"]:
                yield file, job_id, step


def _plain(value: Any) -> Any:
    """The document as PyYAML reads the text back (pinned actions become their reference)."""
    if isinstance(value, Pinned):
        return value.ref
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


# --------------------------------------------------------------------------------------
# drift and derivation


def test_committed_files_are_what_matrix_generates() -> None:
    gen = generate(load_matrix(REPO))
    assert set(gen.files) == {WORKFLOW_FILE, RELEASE_FILE, ACTIONLINT_FILE}
    assert drift(REPO, gen) == [], "regenerate with `nox -s workflows` and commit"


def test_check_mode_fails_on_a_hand_edit(real_matrix_repo: Path) -> None:
    gen = generate(load_matrix(real_matrix_repo))
    assert set(write(real_matrix_repo, gen)) == set(gen.files)
    assert drift(real_matrix_repo, gen) == []
    edit(real_matrix_repo / WORKFLOW_FILE, "timeout-minutes: 60", "timeout-minutes: 61")
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline", "workflows", "--check", "--root", str(real_matrix_repo)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert ".github/workflows/ci.yml differ from what matrix/ generates: run `nox -s workflows`" in proc.stderr


def test_the_text_is_the_document() -> None:
    gen = generate(load_matrix(REPO))
    for file, doc in gen.documents.items():
        parsed = yaml.safe_load(gen.files[file])
        parsed["on"] = parsed.pop(True) if True in parsed else parsed["on"]  # YAML 1.1 reads a bare on as true
        assert parsed == _plain(doc)
    assert yaml.safe_load(gen.files[ACTIONLINT_FILE]) == {"self-hosted-runner": {"labels": ["linux-x86_64-nvidia-gpu"]}}


def test_one_job_per_cell_on_the_matrix_runner() -> None:
    m = load_matrix(REPO)
    jobs = _jobs(generate(m))
    built = {j for j in jobs if j.startswith("build-")}
    expected = {f"build-{c.slug}" for c in m.cells() if c.variant.planned is None}
    assert built == expected
    for cell in m.cells():
        if cell.variant.name == "default":
            job = jobs[f"build-{cell.slug}"]
            assert job["runs-on"] == cell.target.ci_runner
            run = next(s for s in job["steps"] if s.get("id") == "cibuildwheel")
            assert run["run"] == (
                f"nox -s wheels -- --component {cell.component.name} --variant default --target {cell.target.name}"
            )
            assert run["env"] == cibw.environment(cell.target)
    assert jobs["build-core-default-windows-x86_64"]["runs-on"] == "windows-latest"
    assert jobs["build-core-default-windows-arm64"]["runs-on"] == "windows-11-arm"
    assert jobs["build-core-default-macos-arm64"]["runs-on"] == "macos-14"
    assert jobs["build-core-default-linux-aarch64"]["runs-on"] == "ubuntu-24.04-arm"
    # an EP build needs the core wheel of its target (its tests install it)
    assert jobs["build-dnnl-default-linux-x86_64"]["needs"] == ["plan", "build-core-default-linux-x86_64"]
    # test jobs per tested CPython where the runner runs the wheel natively; crosscheck per cross target
    assert jobs["test-core-default-linux-x86_64"]["strategy"]["matrix"]["python"] == list(m.pythons)
    assert "test-core-default-linux-riscv64" not in jobs and "test-core-default-linux-x86_64-musl" not in jobs
    assert {j for j in jobs if j.startswith("crosscheck-")} == {
        f"crosscheck-{t.name}" for t in m.targets if t.crosscheck
    }
    assert jobs["gpu-test-cuda-default-linux-x86_64"]["runs-on"] == "linux-x86_64-nvidia-gpu"


def test_a_variant_is_built_by_the_pipeline() -> None:
    """cibuildwheel builds a component's own distribution; a variant (own name, options) uses `nox -s build`."""
    jobs = _jobs(generate(load_matrix(REPO)))
    job = jobs["build-core-winml-linux-x86_64"]
    runs = [s["run"] for s in job["steps"] if "run" in s]
    assert runs[-1] == "nox -s build -- --component core --variant winml --target linux-x86_64"
    assert not any(s.get("id") == "cibuildwheel" for s in job["steps"])
    upload = job["steps"][-1]
    assert upload["with"]["path"] == "dist/linux-x86_64/mosaicrt_winml-*.whl"
    assert "test-core-winml-linux-x86_64" in jobs


def test_a_planned_variant_is_not_built(real_matrix_repo: Path) -> None:
    edit(
        real_matrix_repo / "matrix" / "components.toml",
        'dist = "mosaicrt-winml"',
        'dist = "mosaicrt-winml"\nplanned = "later"',
    )
    jobs = _jobs(generate(load_matrix(real_matrix_repo)))
    assert not any("winml" in j for j in jobs)


def test_changing_a_target_in_matrix_changes_the_workflow(real_matrix_repo: Path) -> None:
    before = generate(load_matrix(real_matrix_repo))
    # linux-aarch64 moves from the arm runner to an x86-64 one (cibuildwheel under qemu)
    edit(real_matrix_repo / "matrix" / "targets.toml", 'ci_runner = "ubuntu-24.04-arm"', 'ci_runner = "ubuntu-24.04"')
    after = generate(load_matrix(real_matrix_repo))
    job_before = _jobs(before)["build-core-default-linux-aarch64"]
    job_after = _jobs(after)["build-core-default-linux-aarch64"]
    assert (job_before["runs-on"], job_after["runs-on"]) == ("ubuntu-24.04-arm", "ubuntu-24.04")
    assert not any("qemu" in s.get("run", "") for s in job_before["steps"])
    assert any("qemu-user-static" in s.get("run", "") for s in job_after["steps"])
    assert "test-core-default-linux-aarch64" in _jobs(before) and "test-core-default-linux-aarch64" not in _jobs(after)
    assert before.files[WORKFLOW_FILE] != after.files[WORKFLOW_FILE]
    # dropping a target from a component drops its jobs (and the release waits for one job fewer)
    edit(real_matrix_repo / "matrix" / "components.toml", '"linux-riscv64", ', "")
    dropped = generate(load_matrix(real_matrix_repo))
    assert "build-core-default-linux-riscv64" not in _jobs(dropped)
    assert "build-core-default-linux-riscv64" in _jobs(before, RELEASE_FILE)["release"]["needs"]
    assert "build-core-default-linux-riscv64" not in _jobs(dropped, RELEASE_FILE)["release"]["needs"]


# --------------------------------------------------------------------------------------
# hardening


def test_every_action_is_pinned_by_full_sha_with_its_release() -> None:
    gen = generate(load_matrix(REPO))
    for _file, _job, step in _steps(gen):
        if "uses" in step:
            assert isinstance(step["uses"], Pinned)
    for text in (gen.files[WORKFLOW_FILE], gen.files[RELEASE_FILE]):
        uses = re.findall(r"uses: (\S+)(.*)", text)
        assert uses
        for ref, comment in uses:
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", ref), ref
            assert re.fullmatch(r"  # v\d+\.\d+\.\d+", comment), comment


def test_least_privilege_and_no_untrusted_expansion_in_scripts() -> None:
    gen = generate(load_matrix(REPO))
    for file, doc in gen.documents.items():
        assert doc["permissions"] == {}
        assert doc["concurrency"]["group"] == "${{ github.workflow }}-${{ github.ref }}"
        for job_id, job in doc["jobs"].items():
            if job_id != "release":
                assert job["permissions"] == {"contents": "read"}, (file, job_id)
            for step in job["steps"]:
                assert "${{" not in step.get("run", ""), (file, job_id, step["name"])
                if "uses" in step and step["uses"].repo == "actions/checkout":
                    assert step["with"]["persist-credentials"] is False


def test_secrets_only_in_the_tag_only_release_job() -> None:
    gen = generate(load_matrix(REPO))
    ci_text, release_text = gen.files[WORKFLOW_FILE], gen.files[RELEASE_FILE]
    assert "secrets." not in ci_text and "id-token" not in ci_text and "release" not in _jobs(gen)
    assert gen.documents[WORKFLOW_FILE]["on"].keys() == {"push", "pull_request", "workflow_dispatch"}
    rel_doc = gen.documents[RELEASE_FILE]
    tags = rel_doc["on"]["push"]["tags"]
    assert rel_doc["on"] == {"push": {"tags": tags}} and {"core-v*", "ep-dnnl-v*", "ep-cuda-v*"} <= set(tags)
    assert tags == sorted(f"{c.tag}".rsplit("-v", 1)[0] + "-v*" for c in load_matrix(REPO).components)
    assert "actions/cache@" not in release_text  # nothing a pull request wrote reaches what is published
    release = rel_doc["jobs"]["release"]
    assert release["permissions"] == {"contents": "write", "id-token": "write", "attestations": "write"}
    assert release["environment"]["name"] == "pypi"
    assert set(release["needs"]) == set(rel_doc["jobs"]) - {"plan", "release"}
    signing = next(s for s in release["steps"] if s.get("run") == "nox -s release -- --no-tag")
    assert release_text.count("secrets.") == len(signing["env"]) == 1 + len(ONLINE_ROLES)
    assert all(v.startswith("${{ secrets.") for v in signing["env"].values())
    assert {k.removeprefix("MOSAICRT_CATALOG_KEY_").lower() for k in signing["env"]} - {"mosaicrt_signing_key"} == set(
        ONLINE_ROLES
    )
    uses = [s["uses"].repo for s in release["steps"] if "uses" in s]
    assert "pypa/gh-action-pypi-publish" in uses and "actions/attest-build-provenance" in uses
    publish = next(s for s in release["steps"] if s.get("uses") and s["uses"].repo == "pypa/gh-action-pypi-publish")
    assert "password" not in publish["with"]  # trusted publishing: no token
    scripts = "\n".join(s.get("run", "") for s in release["steps"])
    assert "-C build/pipeline/catalog/repository metadata targets" in scripts and "nox -s release" in scripts


# --------------------------------------------------------------------------------------
# bad input: generation fails naming the cell and the fix


def test_target_without_runner(real_matrix_repo: Path) -> None:
    edit(real_matrix_repo / "matrix" / "targets.toml", 'ci_runner = "windows-11-arm"\n', "")
    m = load_matrix(real_matrix_repo)  # a target without a runner is fine for local builds
    with pytest.raises(MatrixError) as err:
        generate(m)
    msg = str(err.value)
    assert "target.windows-arm64.ci_runner" in msg and "cell core/default/windows-arm64 has no CI runner" in msg
    assert "set ci_runner to a windows runner declared in matrix/ci.toml (windows-latest, windows-11-arm)" in msg


def test_unknown_runner_label(real_matrix_repo: Path) -> None:
    edit(real_matrix_repo / "matrix" / "targets.toml", 'ci_runner = "macos-14"', 'ci_runner = "macos-41"')
    with pytest.raises(MatrixError) as err:
        generate(load_matrix(real_matrix_repo))
    msg = str(err.value)
    assert "cell core/default/macos-arm64: unknown runner label 'macos-41' (did you mean 'macos-14'?)" in msg
    assert '[runner."macos-41"] in matrix/ci.toml' in msg


def test_runner_of_the_wrong_os(real_matrix_repo: Path) -> None:
    edit(real_matrix_repo / "matrix" / "targets.toml", 'ci_runner = "windows-latest"', 'ci_runner = "ubuntu-24.04"')
    with pytest.raises(
        MatrixError, match=r"cell core/default/windows-x86_64: runner 'ubuntu-24.04' is a linux machine"
    ):
        generate(load_matrix(real_matrix_repo))


def test_gpu_tests_need_a_gpu_runner(real_matrix_repo: Path) -> None:
    edit(real_matrix_repo / "matrix" / "ci.toml", 'runner = "linux-x86_64-nvidia-gpu"', 'runner = "ubuntu-24.04"')
    with pytest.raises(MatrixError, match=r"gpu_tests.cuda.runner: runner 'ubuntu-24.04' has no GPU"):
        generate(load_matrix(real_matrix_repo))


def test_cibuildwheel_python_range_contradicts_matrix(real_matrix_repo: Path) -> None:
    edit(real_matrix_repo / "matrix" / "python.toml", '"3.14"]', '"3.14", "3.15"]')
    with pytest.raises(MatrixError) as err:
        generate(load_matrix(real_matrix_repo))
    msg = str(err.value)
    assert msg.startswith("core/pyproject.toml: tool.cibuildwheel.build: cell core/default/linux-x86_64:")
    assert "matrix/python.toml tests 3.11, 3.12, 3.13, 3.14, 3.15" in msg
    assert "set build = ['cp311-*', 'cp312-*', 'cp313-*', 'cp314-*', 'cp315-*']" in msg


def test_cibuildwheel_archs_contradict_matrix(real_matrix_repo: Path) -> None:
    edit(
        real_matrix_repo / "matrix" / "components.toml",
        'targets = ["linux-x86_64"]        # oneDNN',
        'targets = ["linux-x86_64", "linux-aarch64"]  #',
    )
    with pytest.raises(MatrixError) as err:
        generate(load_matrix(real_matrix_repo))
    assert str(err.value) == (
        "eps/dnnl/pyproject.toml: tool.cibuildwheel.linux.archs: cell dnnl/default/linux-aarch64:"
        " does not build aarch64 (has: x86_64); add 'aarch64' for target linux-aarch64"
    )


@pytest.mark.parametrize(
    ("change", "key", "fix"),
    [
        ({"test_command": ""}, "tool.cibuildwheel.test-command", "no test command"),
        ({"images": {}}, "tool.cibuildwheel.linux.manylinux-x86_64-image", "set the manylinux image"),
        ({"before_test": "pip install pytest"}, "tool.cibuildwheel.before-test", "must install the core wheel"),
        ({"repair_command": {"linux": ""}}, "tool.cibuildwheel.linux.repair-wheel-command", "--exclude libdnnl.so.3"),
    ],
)
def test_cibuildwheel_config_checks(change: dict[str, Any], key: str, fix: str) -> None:
    m = load_matrix(REPO)
    cell = next(c for c in m.cells() if c.id == "dnnl/default/linux-x86_64")
    good = cibw.read_config(REPO, "eps/dnnl")
    assert cibw.check_config(m, cell, good) == good
    with pytest.raises(MatrixError) as err:
        cibw.check_config(m, cell, dataclasses.replace(good, **change))
    assert key in str(err.value) and fix in str(err.value) and "cell dnnl/default/linux-x86_64" in str(err.value)


def test_macos_floor_must_agree() -> None:
    m = load_matrix(REPO)
    cell = next(c for c in m.cells() if c.id == "core/default/macos-arm64")
    good = cibw.read_config(REPO, "core")
    bad = dataclasses.replace(good, environment={**good.environment, "macos": {"MACOSX_DEPLOYMENT_TARGET": "13.0"}})
    with pytest.raises(MatrixError, match=r"is '13.0', the matrix target macos-arm64 says '14.0'"):
        cibw.check_config(m, cell, bad)


def test_yaml_writer_quotes_what_yaml_would_misread() -> None:
    doc = {"on": {"a": ["3.11", "yes", "${{ x }}", "it's", "x: y", 3, True]}, "jobs": {"j": {"run": "a\nb\n"}}}
    assert yaml.safe_load(dump(doc)) == {
        "on": {"a": ["3.11", "yes", "${{ x }}", "it's", "x: y", 3, True]},
        "jobs": {"j": {"run": "a\nb\n"}},
    }
    with pytest.raises(ValueError, match="not a full 40-hex commit SHA"):
        Pinned(repo="actions/checkout", sha="v4", version="v4")
