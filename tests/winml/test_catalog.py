"""The EP catalog client of the winml build against real TUF catalogs on a real HTTP server: listing,
download with progress, verification, caching, registration and use in a session; and every attack or fault
refused by name with nothing registered and the cache left clean."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import mosaicrt
import numpy as np
import pytest
from conftest import Catalog, assert_clean, ep_custom, make_bundle
from mosaicrt import catalog as C
from mosaicrt.catalog import ExecutionProviderCatalog, ReadyState
from onnx import TensorProto, helper
from securesystemslib.signer import CryptoSigner
from tuf.api.metadata import Metadata, TargetFile, Targets, Timestamp

from pipeline.catalog import repository as R
from pipeline.catalog.trust import RoleSigner

_tags = itertools.count()


def _names() -> tuple[str, str]:
    """A fresh (registration name, EP name) for the fake EP: each test registers its own."""
    tag = f"w{os.getpid()}x{next(_tags)}"
    return f"{tag}:cpu", f"FakeCpu_{tag}"


def _client(cat: Catalog, cache: Path, **kw: object) -> ExecutionProviderCatalog:
    kw.setdefault("timeout_s", 5)
    return ExecutionProviderCatalog(cat.url, root=cat.root(), cache_dir=cache, download=True, **kw)  # type: ignore[arg-type]


def _publish_fake(cat: Catalog, lib: Path, role: str = "certified", **custom: object) -> tuple[str, str, str]:
    reg, ep = _names()
    path = f"{role}/{ep}/any/{ep}-1.0.0.zip"
    cat.add(path, make_bundle(lib, ep), ep_custom(ep, reg, **custom), role=role)
    return reg, ep, path


def _relu_model() -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _registered(ep: str) -> bool:
    return ep in mosaicrt.get_available_providers()


# --------------------------------------------------------------------------------------
# the happy path


def test_download_verify_register_and_run(catalog: Catalog, cache: Path, fake_ep_library: Path) -> None:
    _, ep, _ = _publish_fake(catalog, fake_ep_library)
    client = _client(catalog, cache)
    providers = {p.name: p for p in client.find_all_providers()}
    p = providers[ep]
    assert (p.version, p.certification, p.device_types) == ("1.0.0", C.Certification.CERTIFIED, ("CPU",))
    assert p.ready_state is ReadyState.NOT_PRESENT and p.library_path is None
    seen: list[float] = []
    assert p.ensure_ready(progress=seen.append) is ReadyState.READY
    assert seen[0] == 0.0 and seen[-1] == 100.0 and seen == sorted(seen)
    assert p.library_path is not None and Path(p.library_path).is_file()
    assert not _registered(ep)
    assert p.try_register() and _registered(ep)
    sess = mosaicrt.InferenceSession(_relu_model(), providers=[ep])
    (out,) = sess.run(None, {"x": np.array([[-1, 2, -3], [4, -5, 6]], np.float32)})
    assert out.tolist() == [[0, 2, 0], [4, 0, 6]]
    assert [a.provider for a in sess.get_node_assignments()] == [ep]
    # offline: a new client (another session) finds the EP in the cache and needs no network
    catalog.stop()
    with pytest.warns(RuntimeWarning, match="cached EPs only"):
        offline = {q.name: q for q in _client(catalog, cache).find_all_providers()}
    assert offline[ep].ready_state is ReadyState.READY
    offline[ep].ensure_ready()
    assert client.remove(ep) and not (cache.glob(f"*/eps/{ep}") and list(cache.glob(f"*/eps/{ep}")))


def test_unreachable_catalog_is_one_warning_and_bounded(catalog: Catalog, cache: Path) -> None:
    catalog.stop()
    client = _client(catalog, cache, timeout_s=2)
    t0 = time.monotonic()
    with pytest.warns(RuntimeWarning, match="not used") as caught:
        assert client.find_all_providers() == []
    assert len(caught) == 1 and time.monotonic() - t0 < 10


def test_download_off_lists_the_cache_only(catalog: Catalog, cache: Path, fake_ep_library: Path) -> None:
    _publish_fake(catalog, fake_ep_library)
    client = ExecutionProviderCatalog(catalog.url, root=catalog.root(), cache_dir=cache, download=False)
    with pytest.warns(RuntimeWarning, match="EP download is off"):
        assert client.find_all_providers() == []
    assert not catalog.faults.requests  # no network use at all


def test_ensure_and_register_certified(catalog: Catalog, cache: Path, fake_ep_library: Path) -> None:
    _, ep, _ = _publish_fake(catalog, fake_ep_library)
    _, gpu_only, _ = _publish_fake(catalog, fake_ep_library, device_types=["NPU"])
    done = _client(catalog, cache).ensure_and_register_certified()
    assert ep in done and gpu_only not in done  # no NPU here: not downloaded
    assert _registered(ep)


def test_two_processes_downloading_at_once_share_one_good_copy(catalog: Catalog, cache: Path,
                                                              fake_ep_library: Path) -> None:  # fmt: skip
    _, ep, _ = _publish_fake(catalog, fake_ep_library)
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from mosaicrt.catalog import ExecutionProviderCatalog
        c = ExecutionProviderCatalog({catalog.url!r}, root=Path(sys.argv[1]).read_bytes(), cache_dir=Path(sys.argv[2]),
                                     download=True, timeout_s=10)
        p = {{q.name: q for q in c.find_all_providers()}}[{ep!r}]
        print(p.ensure_ready().name)
    """)
    root_file = cache.parent / "root.json"
    root_file.write_bytes(catalog.root())
    procs = [subprocess.Popen([sys.executable, "-c", script, str(root_file), str(cache)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]  # fmt: skip
    outs = [p.communicate(timeout=120) for p in procs]
    assert [o[0].strip() for o in outs] == ["READY", "READY"], outs
    assert len(list(cache.glob(f"*/eps/{ep}/*-*"))) == 1
    assert_clean_partials(cache)


def assert_clean_partials(cache: Path) -> None:
    assert not [p for p in cache.glob("*/downloads/*") if p.is_file()]


# --------------------------------------------------------------------------------------
# attacks and faults: refused by name, nothing registered, the cache clean


def _refused(client: ExecutionProviderCatalog, ep: str, error: type[C.CatalogError], cache: Path) -> C.CatalogError:
    with pytest.raises(error) as info:
        {p.name: p for p in client.find_all_providers()}[ep].ensure_ready()
    assert not _registered(ep)
    assert_clean(cache, ep)
    return info.value


def test_tampered_ep_file(catalog: Catalog, cache: Path, fake_ep_library: Path) -> None:
    _, ep, path = _publish_fake(catalog, fake_ep_library)
    served = next((catalog.repo.targets_dir / Path(path).parent).glob("*.zip"))
    data = bytearray(served.read_bytes())
    data[len(data) // 2] ^= 0x01
    served.write_bytes(bytes(data))
    err = _refused(_client(catalog, cache), ep, C.TamperedTarget, cache)
    assert err.reason == "tampered" and path in str(err)


def _attacker_signed_role(cat: Catalog, role: str, lib: Path, signer: RoleSigner) -> str:
    """A new version of a delegated role, signed by ``signer``, with snapshot/timestamp re-signed by the
    real online keys (an attacker who holds those but not the role's key)."""
    reg, ep = _names()
    path = f"{role}/{ep}/any/{ep}-1.0.0.zip"
    data = make_bundle(lib, ep)
    md = cat.repo.load(role, Targets)
    assert md is not None
    tf = TargetFile.from_data(path, data, ["sha256"])
    tf.unrecognized_fields["custom"] = ep_custom(ep, reg)
    md.signed.targets[path] = tf
    md.signed.version += 1
    dest = R._target_file_path(cat.repo, path, tf.hashes["sha256"])
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)
    cat.repo._sign_write(md, [signer], role)
    R._write_snapshot(cat.repo, cat.signers, force=True)
    R._write_timestamp(cat.repo, cat.signers, force=True)
    return ep


def test_targets_signed_by_the_wrong_key(catalog: Catalog, cache: Path, fake_ep_library: Path) -> None:
    wrong = RoleSigner("certified", CryptoSigner.generate_ed25519(), "attacker")
    ep = _attacker_signed_role(catalog, "certified", fake_ep_library, wrong)
    with pytest.raises(C.UntrustedMetadata, match="not signed by the keys trusted"):
        _client(catalog, cache).find_all_providers()
    assert not _registered(ep)
    assert_clean(cache, ep)


def test_uncertified_ep_refused_unless_allowed(catalog: Catalog, cache: Path, fake_ep_library: Path) -> None:
    third = RoleSigner("uncertified", CryptoSigner.generate_ed25519(), "third party")
    reg, ep = _names()
    path = f"uncertified/{ep}/any/{ep}-1.0.0.zip"
    catalog.add(path, make_bundle(fake_ep_library, ep), ep_custom(ep, reg), role="uncertified",
                signers={**catalog.signers, "uncertified": [third]}, delegate=[third.signer.public_key])
    listed = {p.name: p for p in _client(catalog, cache).find_all_providers()}
    assert listed[ep].certification is C.Certification.UNCERTIFIED
    err = _refused(_client(catalog, cache), ep, C.UncertifiedRefused, cache)
    assert "uncertified" in str(err) and "MOSAICRT_EP_CATALOG_ALLOW_UNCERTIFIED" in str(err)
    allowed = {p.name: p for p in _client(catalog, cache, allow_uncertified=True).find_all_providers()}[ep]
    assert allowed.ensure_ready() is ReadyState.READY  # the same EP, opted in: the refusal was the policy


def test_third_party_cannot_sign_certified_paths(catalog: Catalog, cache: Path, fake_ep_library: Path) -> None:
    """The third party lists a certified/… path (and puts it in its index): TUF resolves certified/… only
    through the certified delegation, so the EP is not offered at all."""
    third = RoleSigner("uncertified", CryptoSigner.generate_ed25519(), "third party")
    reg, ep = _names()
    catalog.add(f"uncertified/{ep}/any/{ep}-1.0.0.zip", make_bundle(fake_ep_library, ep), ep_custom(ep, reg),
                role="uncertified", signers={**catalog.signers, "uncertified": [third]},
                delegate=[third.signer.public_key])  # fmt: skip
    _, forged = _names()
    path = f"certified/{forged}/any/{forged}-1.0.0.zip"
    data = make_bundle(fake_ep_library, forged)
    md = catalog.repo.load("uncertified", Targets)
    assert md is not None
    tf = TargetFile.from_data(path, data, ["sha256"])
    tf.unrecognized_fields["custom"] = ep_custom(forged, reg)
    md.signed.targets[path] = tf
    index = json.dumps({"schema": 1, "targets": sorted(md.signed.targets)}).encode()
    md.signed.targets["uncertified/index.json"] = TargetFile.from_data("uncertified/index.json", index, ["sha256"])
    md.signed.version += 1
    for p, blob in ((path, data), ("uncertified/index.json", index)):
        dest = R._target_file_path(catalog.repo, p, md.signed.targets[p].hashes["sha256"])
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(blob)
    catalog.repo._sign_write(md, [third], "uncertified")
    R._write_snapshot(catalog.repo, catalog.signers, force=True)
    R._write_timestamp(catalog.repo, catalog.signers, force=True)
    client = _client(catalog, cache, allow_uncertified=True)
    offered = {p.name: p.certification for p in client.find_all_providers()}
    assert offered.get(ep) is C.Certification.UNCERTIFIED  # its own EP is still offered, as uncertified
    assert forged not in offered
    with pytest.raises(C.UnknownProvider):
        client.find_provider(forged)
    assert_clean(cache, forged)


@pytest.mark.parametrize("role", ["timestamp", "snapshot"])
def test_rollback_refused(role: str, catalog: Catalog, cache: Path, fake_ep_library: Path) -> None:
    meta = catalog.repo.metadata_dir
    old = {p.name: p.read_bytes() for p in meta.iterdir()}
    _, ep, _ = _publish_fake(catalog, fake_ep_library)
    _client(catalog, cache).find_all_providers()  # trusts the new versions
    if role == "timestamp":
        (meta / "timestamp.json").write_bytes(old["timestamp.json"])
    else:  # a timestamp (validly signed, newer) that points at the old snapshot version
        old_snap = max(n for n in old if n.endswith(".snapshot.json"))
        ts = catalog.repo.load("timestamp", Timestamp)
        assert ts is not None
        ts.signed.snapshot_meta.version = int(old_snap.split(".")[0])
        ts.signed.version += 1
        catalog.repo._sign_write(ts, catalog.signers["timestamp"], "timestamp")
    with pytest.raises(C.RollbackAttack, match="rollback"):
        _client(catalog, cache).find_all_providers()
    assert_clean(cache, ep)


def test_expired_timestamp_is_a_freeze(catalog: Catalog, cache: Path, fake_ep_library: Path) -> None:
    _, ep, _ = _publish_fake(catalog, fake_ep_library)
    ts = catalog.repo.load("timestamp", Timestamp)
    assert ts is not None
    ts.signed.expires = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    ts.signed.version += 1
    catalog.repo._sign_write(ts, catalog.signers["timestamp"], "timestamp")
    with pytest.raises(C.ExpiredMetadata, match="expired"):
        _client(catalog, cache).find_all_providers()
    assert not _registered(ep)
    assert_clean(cache, ep)


def test_mix_and_match_refused(catalog: Catalog, cache: Path, fake_ep_library: Path) -> None:
    _publish_fake(catalog, fake_ep_library)
    v_old = catalog.repo._versions("certified")[-1]
    _, ep, _ = _publish_fake(catalog, fake_ep_library)
    v_new = catalog.repo._versions("certified")[-1]
    meta = catalog.repo.metadata_dir
    (meta / f"{v_new}.certified.json").write_bytes((meta / f"{v_old}.certified.json").read_bytes())
    with pytest.raises(C.InconsistentMetadata, match="mix-and-match"):
        _client(catalog, cache).find_all_providers()
    assert_clean(cache, ep)


def test_endless_data_refused(catalog: Catalog, cache: Path, fake_ep_library: Path) -> None:
    _, ep, _ = _publish_fake(catalog, fake_ep_library)
    catalog.faults.match, catalog.faults.extra_bytes = ep, 4 << 20
    err = _refused(_client(catalog, cache), ep, C.OversizedTarget, cache)
    assert "more data than the signed metadata declares" in str(err)


def test_oversized_declared_target_refused_before_download(catalog: Catalog, cache: Path,
                                                         fake_ep_library: Path) -> None:  # fmt: skip
    _, ep, _ = _publish_fake(catalog, fake_ep_library)
    client = _client(catalog, cache, max_target_bytes=1024)
    err = _refused(client, ep, C.OversizedTarget, cache)
    assert "over this client's limit" in str(err)
    assert not any(ep in r and "/targets/" in r for r in catalog.faults.requests)


def test_interrupted_download_keeps_nothing(catalog: Catalog, cache: Path, fake_ep_library: Path) -> None:
    _, ep, _ = _publish_fake(catalog, fake_ep_library)
    catalog.faults.match, catalog.faults.cut_at = ep, 0.5
    _refused(_client(catalog, cache), ep, C.InterruptedDownload, cache)
    catalog.faults.cut_at = None  # the next attempt succeeds: the failure left nothing behind
    assert {p.name: p for p in _client(catalog, cache).find_all_providers()}[ep].ensure_ready() is ReadyState.READY


@pytest.mark.parametrize("custom", [{"platform_tags": ["win_amd64"]}, {"ep_abi": {"major": 99, "min_minor": 0}},
                                    {"ep_abi": {"major": 1, "min_minor": 999}}])  # fmt: skip
def test_other_platform_or_abi_is_not_offered(custom: dict[str, object], catalog: Catalog, cache: Path,
                                             fake_ep_library: Path) -> None:  # fmt: skip
    _, ep, _ = _publish_fake(catalog, fake_ep_library, **custom)
    client = _client(catalog, cache)
    assert ep not in {p.name for p in client.find_all_providers()}
    with pytest.raises(C.IncompatibleProvider, match=r"platform|EP ABI"):
        client.find_provider(ep)
    assert not _registered(ep)
    assert_clean(cache, ep)


def test_bundle_that_contradicts_its_manifest(catalog: Catalog, cache: Path, fake_ep_library: Path) -> None:
    reg, ep = _names()
    good = make_bundle(fake_ep_library, ep)
    import io
    import zipfile

    src, buf = zipfile.ZipFile(io.BytesIO(good)), io.BytesIO()
    with zipfile.ZipFile(buf, "w") as out:  # signed by the catalog, but the library is not what it lists
        for n in src.namelist():
            out.writestr(n, src.read(n) if n == "manifest.json" else src.read(n) + b"x")
    catalog.add(f"certified/{ep}/any/{ep}.zip", buf.getvalue(), ep_custom(ep, reg))
    _refused(_client(catalog, cache), ep, C.BadBundle, cache)


# --------------------------------------------------------------------------------------
# the variant itself


def test_this_is_the_winml_build() -> None:
    details = mosaicrt.get_build_details()
    assert details.get("dynamic_ep_download") == "on"
    config = json.loads((Path(mosaicrt.__file__).parent / "_catalog" / "config.json").read_text())
    assert config["default_url"].startswith("http") and config["min_windows_build"] >= 26100
    Metadata.from_bytes((Path(mosaicrt.__file__).parent / "_catalog" / "root.json").read_bytes())  # a TUF root


def test_installing_mosaicrt_next_to_winml_is_reported(tmp_path: Path) -> None:
    """Another distribution that claims the `mosaicrt` package (what `pip install mosaicrt` adds)."""
    site = tmp_path / "site"
    info = site / "mosaicrt-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mosaicrt\nVersion: 0.1.0\n")
    (info / "RECORD").write_text("")
    env = {**os.environ, "PYTHONPATH": str(site)}
    run = subprocess.run([sys.executable, "-c", "import mosaicrt"], capture_output=True, text=True, env=env,
                         cwd=tmp_path, check=False)  # fmt: skip
    assert run.returncode != 0
    assert "VariantClash" in run.stderr and "mosaicrt and mosaicrt-winml" in run.stderr
    assert "pip uninstall -y mosaicrt mosaicrt-winml && pip install mosaicrt-winml" in run.stderr


@pytest.mark.parametrize(("platform", "build", "env", "on"), [
    ("linux", None, "", False), ("linux", None, "1", True), ("win32", 26100, "", False),
    ("win32", 26100, "1", False), ("win32", 26200, "", True), ("win32", 26200, "0", False)])  # fmt: skip
def test_download_gate(platform: str, build: int | None, env: str, on: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from mosaicrt import _variant

    monkeypatch.setattr(sys, "platform", platform)
    if build is not None:
        version = type("WindowsVersion", (), {"build": build})
        monkeypatch.setattr(sys, "getwindowsversion", version, raising=False)
    monkeypatch.setenv("MOSAICRT_DYNAMIC_EP_DOWNLOAD", env)
    enabled, why = _variant.download_decision()
    assert enabled is on, why
    if platform == "win32" and build == 26100:
        assert "26200" in why and "26100" in why


def test_session_fetches_a_missing_provider(catalog: Catalog, cache: Path, fake_ep_library: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """providers=[EP] with download opted in: the session gets it from the catalog and runs on it."""
    _, ep, _ = _publish_fake(catalog, fake_ep_library)
    monkeypatch.setenv("MOSAICRT_DYNAMIC_EP_DOWNLOAD", "1")
    monkeypatch.setenv("MOSAICRT_EP_CATALOG_URL", catalog.url)
    # the shipped root is the release's; this catalog has its own: trust it for this process's default catalog
    monkeypatch.setattr(ExecutionProviderCatalog, "_default", _client(catalog, cache))
    sess = mosaicrt.InferenceSession(_relu_model(), providers=[ep, "CPUExecutionProvider"])
    assert [a.provider for a in sess.get_node_assignments()] == [ep]


def test_policy_session_fetches_the_certified_ep_for_the_cpu(catalog: Catalog, cache: Path, fake_ep_library: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A device policy (PREFER_CPU) with download on: the certified catalog EP serving the CPU is fetched, and
    the policy then picks it (plugin EPs on the CPU come before the CPU EP)."""
    _, ep, _ = _publish_fake(catalog, fake_ep_library)
    _, npu_only, _ = _publish_fake(catalog, fake_ep_library, device_types=["NPU"])
    monkeypatch.setenv("MOSAICRT_EP_CATALOG_URL", catalog.url)
    monkeypatch.setattr(ExecutionProviderCatalog, "_default", _client(catalog, cache))
    opts = mosaicrt.SessionOptions()
    opts.add_session_config_entry("session.dynamic_ep_download", "1")
    opts.set_provider_selection_policy(mosaicrt.ExecutionProviderDevicePolicy.PREFER_CPU)
    sess = mosaicrt.InferenceSession(_relu_model(), sess_options=opts)
    assert _registered(ep) and not _registered(npu_only)  # no NPU here: not fetched
    assert ep in {a.provider for a in sess.get_node_assignments()} | set(sess.get_providers())
