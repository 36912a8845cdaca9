"""The EP catalog's repository side: trust configuration, root signing, publication, bundles, and the
variant plumbing of the build (distribution rename, matrix keys). The client side is tested by the winml
wheel suite (tests/winml) against the installed wheel."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from pipeline.catalog.bundle import build_bundle, ep_abi_version
from pipeline.catalog.repository import NewTarget, Repository, ensure_root, online_signers, publish, sign_root
from pipeline.catalog.trust import load_config, role_signers
from pipeline.errors import EnvironmentProblem, MatrixError, UsageError
from pipeline.matrix import load_matrix
from pipeline.wheeledit import rename_distribution

from .conftest import REPO, Editor

CXX = shutil.which("c++") or shutil.which("g++")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"MOSAICRT_CONFIG_DIR": str(tmp_path / "config")}


@pytest.fixture
def repo(tmp_path: Path) -> Repository:
    return Repository(tmp_path / "repo", load_config(REPO))


def test_config_names_the_file_and_key(tmp_path: Path) -> None:
    (tmp_path / "release").mkdir()
    text = (REPO / "release" / "catalog.toml").read_text()
    (tmp_path / "release" / "catalog.toml").write_text(text.replace("[role.snapshot]\nthreshold = 1",
                                                                    "[role.snapshot]\nthreshold = 0"))
    with pytest.raises(UsageError, match=r"catalog.toml: role.snapshot.threshold: expected an integer ≥ 1"):
        load_config(tmp_path)
    (tmp_path / "release" / "catalog.toml").write_text(text.replace("[role.uncertified]", "[role.other]"))
    with pytest.raises(UsageError, match=r"role\.uncertified: missing"):
        load_config(tmp_path)


def test_first_root_on_a_dev_machine_and_refused_in_ci(repo: Repository, env: dict[str, str],
                                                        capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    ci = {**env, "MOSAICRT_CATALOG_KEY_TARGETS": base64.b64encode(b"\1" * 32).decode()}
    with pytest.raises(EnvironmentProblem, match="sign-root"):
        ensure_root(repo, env=ci)
    root = json.loads(ensure_root(repo, env=env))
    assert "development root key" in capsys.readouterr().out
    assert root["signed"]["_type"] == "root" and root["signed"]["version"] == 1
    assert ensure_root(repo, env=env) == repo.root_bytes()  # kept, not re-signed
    # the dev keys were made 0600
    for key in (Path(env["MOSAICRT_CONFIG_DIR"]) / "catalog-keys").iterdir():
        assert key.stat().st_mode & 0o077 == 0


def test_root_rotation_needs_the_old_root_key(repo: Repository, env: dict[str, str], tmp_path: Path) -> None:
    ensure_root(repo, env=env, say=False)
    online = {r: [s.signer.public_key for s in role_signers(r, 1, create=True, env=env, say=False)]
              for r in ("targets", "snapshot", "timestamp")}  # fmt: skip
    stranger = role_signers("root", 1, create=True, env={"MOSAICRT_CONFIG_DIR": str(tmp_path / "other")}, say=False)
    with pytest.raises(EnvironmentProblem, match="must also be signed by 1 key"):
        sign_root(repo, root_signers=stranger, online=online)
    mine = role_signers("root", 1, create=False, env=env)
    assert sign_root(repo, root_signers=mine, online=online) == (1, False)  # same keys: nothing to do
    assert sign_root(repo, root_signers=mine + stranger, online=online) == (2, True)  # a second root key added


def test_publish_is_idempotent_and_versions_move_together(repo: Repository, env: dict[str, str]) -> None:
    ensure_root(repo, env=env, say=False)
    signers = online_signers(repo, create=True, env=env, say=False)
    t = NewTarget(path="certified/X/linux_x86_64/x-1.zip", data=b"one", custom={"kind": "ep-bundle"})
    first = publish(repo, "certified", [t], signers=signers)
    assert first.changed and [p.path for p in first.targets] == [t.path]
    again = publish(repo, "certified", [t], signers=signers)
    assert not again.changed and again.versions == first.versions
    t2 = NewTarget(path="certified/X/linux_x86_64/x-2.zip", data=b"two", custom={"kind": "ep-bundle"})
    third = publish(repo, "certified", [t2], signers=signers)
    assert third.versions["certified"] == first.versions["certified"] + 1
    assert third.versions["snapshot"] == first.versions["snapshot"] + 1
    assert {p.path for p in third.targets} == {t.path, t2.path}
    sha = hashlib.sha256(b"two").hexdigest()
    assert (repo.targets_dir / "certified" / "X" / "linux_x86_64" / f"{sha}.x-2.zip").read_bytes() == b"two"
    with pytest.raises(UsageError, match="is not 'certified/<ep>/<platform>/<file>'"):
        publish(repo, "certified", [NewTarget(path="certified/../x", data=b"")], signers=signers)
    with pytest.raises(EnvironmentProblem, match="no third-party key"):
        publish(repo, "uncertified", [], signers=signers)


def test_an_online_key_the_root_does_not_list_is_refused(repo: Repository, env: dict[str, str],
                                                          tmp_path: Path) -> None:  # fmt: skip
    ensure_root(repo, env=env, say=False)
    other = online_signers(repo, create=True, env={"MOSAICRT_CONFIG_DIR": str(tmp_path / "x")}, say=False)
    with pytest.raises(EnvironmentProblem, match="does not list the 'targets' key"):
        publish(repo, "certified", [], signers=other)


def _fake_ep_wheel(tmp_path: Path) -> Path:
    lib = tmp_path / "libmosaicrt_fake_ep.so"
    subprocess.run([str(CXX), "-std=c++17", "-O1", "-shared", "-fPIC", "-fvisibility=hidden",
                    f"-I{REPO / 'core' / 'include'}", str(REPO / "core" / "tests" / "plugins" / "fake_ep.cc"),
                    "-o", str(lib)], check=True, capture_output=True)  # fmt: skip
    wheel = tmp_path / "mosaicrt_ep_dnnl-0.1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("mosaicrt_ep_dnnl/__init__.py", "")
        zf.write(lib, "mosaicrt_ep_dnnl/libmosaicrt_ep_dnnl.so")
        zf.writestr("mosaicrt_ep_dnnl-0.1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: mosaicrt-ep-dnnl\n"
                    "Version: 0.1.0\n\n")  # fmt: skip
    return wheel


@pytest.mark.skipif(CXX is None, reason="no C++ compiler to build a plugin library")
def test_bundle_holds_the_plugin_and_is_reproducible(tmp_path: Path) -> None:
    matrix = load_matrix(REPO)
    cell = next(c for c in matrix.cells() if c.component.name == "dnnl" and c.target.name == "linux-x86_64")
    wheel = _fake_ep_wheel(tmp_path)
    one = build_bundle(wheel, cell, root=REPO, deps_dir=tmp_path / "deps")
    two = build_bundle(wheel, cell, root=REPO, deps_dir=tmp_path / "deps")
    assert one.data == two.data  # same inputs, same bytes: re-publishing changes nothing
    assert one.path == "certified/DnnlExecutionProvider/linux_x86_64/mosaicrt_ep_dnnl-0.1.0-py3-none-linux_x86_64.zip"
    major, minor = ep_abi_version(REPO)
    assert one.custom["ep_abi"] == {"major": major, "min_minor": minor}
    assert one.custom["device_types"] == ["CPU"] and one.custom["registration_name"] == "dnnl"
    assert one.custom["environment"] == {"OMP_WAIT_POLICY": "PASSIVE"}
    with zipfile.ZipFile(__import__("io").BytesIO(one.data)) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        assert manifest["library"] == "lib/libmosaicrt_ep_dnnl.so"
        lib = zf.read(manifest["library"])
    assert hashlib.sha256(lib).hexdigest() == manifest["files"]["lib/libmosaicrt_ep_dnnl.so"]
    assert "libc.so.6" in manifest["system_libraries"]  # not found in any required wheel: the system's


def test_rename_distribution_rewrites_metadata_and_record(tmp_path: Path) -> None:
    wheel = tmp_path / "mosaicrt-1.2.3-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("mosaicrt/__init__.py", "x = 1\n")
        zf.writestr("mosaicrt-1.2.3.dist-info/METADATA",
                    "Metadata-Version: 2.1\nName: mosaicrt\nVersion: 1.2.3\nRequires-Dist: numpy>=1.24\n\nbody\n")
        zf.writestr("mosaicrt-1.2.3.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        zf.writestr("mosaicrt-1.2.3.dist-info/RECORD", "stale\n")
    out = rename_distribution(wheel, "mosaicrt-winml", ["tuf>=6"], tmp_path / "out")
    assert out.name == "mosaicrt_winml-1.2.3-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(out) as zf:
        meta = zf.read("mosaicrt_winml-1.2.3.dist-info/METADATA").decode()
        assert "Name: mosaicrt-winml\n" in meta and meta.index("numpy") < meta.index("Requires-Dist: tuf>=6")
        assert meta.endswith("\n\nbody\n")
        rows = [r.split(",") for r in zf.read("mosaicrt_winml-1.2.3.dist-info/RECORD").decode().split()]
        for name, digest, size in rows:
            if name.endswith("RECORD"):
                continue
            data = zf.read(name)
            raw = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, int(size)) == (f"sha256={raw}", len(data))
        assert not [n for n in zf.namelist() if n.startswith("mosaicrt-1.2.3")]


def test_variant_keys_are_checked(real_matrix_repo: Path, editor: Editor) -> None:
    comp = real_matrix_repo / "matrix" / "components.toml"
    editor(comp, 'targets = ["linux-x86_64", "windows-x86_64", "windows-arm64"]', 'targets = ["linux-x86_64", "os2"]')
    with pytest.raises(MatrixError, match=r"component.core.variant.winml.targets: 'os2' is not one of the comp"):
        load_matrix(real_matrix_repo)


def test_catalog_table_is_checked(real_matrix_repo: Path, editor: Editor) -> None:
    comp = real_matrix_repo / "matrix" / "components.toml"
    editor(comp, 'device_types = ["CPU"]', 'device_types = ["TPU"]')
    with pytest.raises(MatrixError, match=r"component.dnnl.catalog.device_types: 'TPU' is not a device type"):
        load_matrix(real_matrix_repo)


def test_the_winml_cells_are_the_variant_targets() -> None:
    matrix = load_matrix(REPO)
    winml = [c for c in matrix.cells() if c.variant.name == "winml"]
    assert {c.target.name for c in winml} == {"linux-x86_64", "windows-x86_64", "windows-arm64"}
    assert all(c.dist == "mosaicrt-winml" and c.tests == "tests/winml" and c.variant.catalog_client for c in winml)
    assert matrix.cell_for_wheel("mosaicrt_winml-0.1.0-py3-none-win_amd64.whl") in winml
    assert matrix.policy.winml_min_windows_build == 26200
