"""pipeline.signing: DSSE PAE, ed25519 sign/verify, key sources, trust roots."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest

pytest.importorskip("cryptography", reason="the release tools are installed by `nox -s ci`")

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pipeline.errors import EnvironmentProblem, VerificationError
from pipeline.signing import (
    Envelope,
    Signer,
    TrustRoot,
    add_to_trust_file,
    create_dev_key,
    generate_ci_key,
    load_signer,
    load_trust,
    pae,
    read_trust_file,
    verify_envelope,
)


def _signer() -> Signer:
    return Signer(Ed25519PrivateKey.generate(), "ci", "test")


def _trust(tmp_path: Path, *signers: Signer) -> TrustRoot:
    path = tmp_path / "trust.json"
    for s in signers:
        add_to_trust_file(path, s.public, name="test key")
    return load_trust([path])


def test_pae_matches_the_dsse_spec_example() -> None:
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert pae("", b"") == b"DSSEv1 0  0 "


def test_sign_and_verify_round_trip_through_json(tmp_path: Path) -> None:
    s = _signer()
    env = s.sign("application/vnd.in-toto+json", b'{"a": 1}')
    again = Envelope.from_dict(json.loads(json.dumps(env.to_dict())))
    verified = verify_envelope(again, _trust(tmp_path, s), expected_type="application/vnd.in-toto+json")
    assert verified.payload == b'{"a": 1}' and verified.key.keyid == s.keyid
    assert verified.key.root == str(tmp_path / "trust.json")


def test_a_key_not_in_the_trust_root_is_rejected(tmp_path: Path) -> None:
    env = _signer().sign("t", b"x")
    with pytest.raises(VerificationError, match="which no trust root lists"):
        verify_envelope(env, _trust(tmp_path, _signer()))


def test_a_modified_payload_or_type_is_rejected(tmp_path: Path) -> None:
    s = _signer()
    env = s.sign("t", b"payload")
    trust = _trust(tmp_path, s)
    forged = Envelope(payload_type="t", payload=b"payloaD", signatures=env.signatures)
    with pytest.raises(VerificationError, match="does not verify"):
        verify_envelope(forged, trust)
    with pytest.raises(VerificationError, match="payload type"):
        verify_envelope(env, trust, expected_type="other")
    with pytest.raises(VerificationError, match="malformed DSSE"):
        Envelope.from_dict({"payload": "!!", "payloadType": "t", "signatures": []})


def test_dev_key_is_created_once_0600_and_trusted_locally(tmp_path: Path) -> None:
    env = {"MOSAICRT_CONFIG_DIR": str(tmp_path / "cfg")}
    with pytest.raises(EnvironmentProblem, match="keys --create-dev"):
        load_signer(env)  # loading never creates a key
    assert not (tmp_path / "cfg").exists()
    first = create_dev_key(env)
    with pytest.raises(EnvironmentProblem, match="never replaced"):
        create_dev_key(env)
    key = tmp_path / "cfg" / "release-key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert load_signer(env).keyid == first.keyid and first.source == "dev"
    local = read_trust_file(tmp_path / "cfg" / "trusted-keys.json")
    assert [k.keyid for k in local] == [first.keyid]
    key.chmod(0o644)
    with pytest.raises(EnvironmentProblem, match="chmod 600"):
        load_signer(env)


def test_ci_key_from_the_environment_pem_or_base64(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    seed = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    cfg = str(tmp_path / "cfg")
    a = load_signer({"MOSAICRT_SIGNING_KEY": pem.decode(), "MOSAICRT_CONFIG_DIR": cfg})
    b = load_signer({"MOSAICRT_SIGNING_KEY": base64.b64encode(seed).decode(), "MOSAICRT_CONFIG_DIR": cfg})
    assert a.keyid == b.keyid and a.source == "ci"
    assert not (tmp_path / "cfg").exists()  # no development key is made when CI provides one
    with pytest.raises(EnvironmentProblem, match="32-byte seed"):
        load_signer({"MOSAICRT_SIGNING_KEY": "bm90IGEga2V5"})
    secret, entry = generate_ci_key()
    assert load_signer({"MOSAICRT_SIGNING_KEY": secret}).keyid == entry["keyid"]


def test_trust_file_with_a_wrong_keyid_is_rejected(tmp_path: Path) -> None:
    s = _signer()
    entry = s.trust_entry("k")
    entry["keyid"] = "0" * 64
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schema": 1, "keys": [entry]}))
    with pytest.raises(VerificationError, match="keyid does not match"):
        read_trust_file(path)


def test_repository_trust_root_is_valid() -> None:
    from .conftest import REPO

    root = read_trust_file(REPO / "release" / "trust-root.json")
    assert all(k.keyid for k in root)
