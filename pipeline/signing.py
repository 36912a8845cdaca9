"""Release signing: ed25519 keys, DSSE envelopes, and the trust roots a verifier accepts.

Keys
    * **CI key**: ``$MOSAICRT_SIGNING_KEY`` holds an ed25519 private key, either PEM (PKCS#8) or the base64
      of the raw 32-byte seed. When set it is always the signer.
    * **Development key**: otherwise ``<config>/release-key`` (``<config>`` = ``$MOSAICRT_CONFIG_DIR``, else
      ``$XDG_CONFIG_HOME/mosaicrt``, else ``~/.config/mosaicrt``: outside the repository). It is created on first
      use with mode 0600, and at that moment its public key is added to the *local* trust file
      ``<config>/trusted-keys.json`` — trusted on this machine only, never by anyone else.

Trust roots (both files have the same format, see :class:`TrustRoot`)
    * ``release/trust-root.json`` in the repository: the keys every consumer accepts (the CI release key).
    * ``<config>/trusted-keys.json``: keys this machine additionally accepts (its own development key).
    A verifier reports which root accepted a signature.

Envelopes follow DSSE v1: the signature covers ``PAE(payloadType, payload)``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .errors import EnvironmentProblem, VerificationError

KEY_ENV = "MOSAICRT_SIGNING_KEY"
CONFIG_ENV = "MOSAICRT_CONFIG_DIR"
DEV_KEY_NAME = "release-key"
LOCAL_TRUST_NAME = "trusted-keys.json"
REPO_TRUST_ROOT = Path("release") / "trust-root.json"

KeySource = Literal["ci", "dev"]


# --------------------------------------------------------------------------------------
# DSSE


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: what is actually signed."""
    ptype = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(ptype), ptype, len(payload), payload)


@dataclass(frozen=True, kw_only=True)
class Signature:
    keyid: str
    sig: bytes


@dataclass(frozen=True, kw_only=True)
class Envelope:
    payload_type: str
    payload: bytes
    signatures: tuple[Signature, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "payloadType": self.payload_type,
            "payload": base64.b64encode(self.payload).decode("ascii"),
            "signatures": [{"keyid": s.keyid, "sig": base64.b64encode(s.sig).decode("ascii")} for s in self.signatures],
        }

    @classmethod
    def from_dict(cls, data: object) -> Envelope:
        """Parse a DSSE JSON object; any structural problem is a :class:`VerificationError`."""
        try:
            if not isinstance(data, dict):
                raise TypeError("not an object")
            sigs = tuple(
                Signature(keyid=str(s.get("keyid", "")), sig=base64.b64decode(s["sig"], validate=True))
                for s in data["signatures"]
            )
            return cls(
                payload_type=str(data["payloadType"]),
                payload=base64.b64decode(data["payload"], validate=True),
                signatures=sigs,
            )
        except (KeyError, TypeError, AttributeError, binascii.Error) as exc:
            raise VerificationError(f"malformed DSSE envelope ({exc})") from None


def keyid_of(public: Ed25519PublicKey) -> str:
    """sha256 of the raw 32-byte public key, hex."""
    return hashlib.sha256(_raw_public(public)).hexdigest()


def _raw_public(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


@dataclass(frozen=True)
class Signer:
    key: Ed25519PrivateKey
    source: KeySource
    origin: str  #: where the key came from (env var name or file path), for messages

    @property
    def public(self) -> Ed25519PublicKey:
        return self.key.public_key()

    @property
    def keyid(self) -> str:
        return keyid_of(self.public)

    def sign(self, payload_type: str, payload: bytes) -> Envelope:
        sig = self.key.sign(pae(payload_type, payload))
        return Envelope(payload_type=payload_type, payload=payload, signatures=(Signature(keyid=self.keyid, sig=sig),))

    def trust_entry(self, name: str) -> dict[str, str]:
        return trust_entry(self.public, name)


def trust_entry(public: Ed25519PublicKey, name: str) -> dict[str, str]:
    """The JSON entry that lists ``public`` in a trust root."""
    return {
        "keyid": keyid_of(public),
        "keytype": "ed25519",
        "public": base64.b64encode(_raw_public(public)).decode("ascii"),
        "name": name,
    }


# --------------------------------------------------------------------------------------
# Keys


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV])
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    return base / "mosaicrt"


def parse_private_key(text: str, *, origin: str) -> Ed25519PrivateKey:
    """PEM (PKCS#8) or base64 of the raw 32-byte ed25519 seed."""
    text = text.strip()
    if text.startswith("-----BEGIN"):
        try:
            key = serialization.load_pem_private_key(text.encode(), password=None)
        except (ValueError, TypeError) as exc:
            raise EnvironmentProblem(f"{origin}: not a readable unencrypted PEM private key ({exc})") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise EnvironmentProblem(f"{origin}: the PEM key is not ed25519 (got {type(key).__name__})")
        return key
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error:
        raw = b""
    if len(raw) != 32:
        raise EnvironmentProblem(
            f"{origin}: expected an ed25519 PEM private key or the base64 of a 32-byte seed"
            " (make one with `python -m pipeline keys --generate-ci`)"
        )
    return Ed25519PrivateKey.from_private_bytes(raw)


def dev_key_path(env: Mapping[str, str] | None = None) -> Path:
    return config_dir(env) / DEV_KEY_NAME


def load_signer(env: Mapping[str, str] | None = None) -> Signer:
    """The CI key when ``$MOSAICRT_SIGNING_KEY`` is set, else this machine's development key. Only loads: a
    machine without a key gets an error naming :func:`create_dev_key`'s command."""
    env = os.environ if env is None else env
    if env.get(KEY_ENV):
        return Signer(parse_private_key(env[KEY_ENV], origin=f"${KEY_ENV}"), "ci", f"${KEY_ENV}")
    path = dev_key_path(env)
    if not path.exists():
        raise EnvironmentProblem(
            f"no signing key: set ${KEY_ENV} (CI) or create this machine's development key with"
            f" `python -m pipeline keys --create-dev` (it would be {path})"
        )
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise EnvironmentProblem(f"{path} is readable by others (mode {mode:o}); fix: chmod 600 {path}")
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise EnvironmentProblem(f"the signing key {path} cannot be read ({exc}); nothing was signed") from None
    return Signer(parse_private_key(text, origin=str(path)), "dev", str(path))


def create_dev_key(env: Mapping[str, str] | None = None) -> Signer:
    """Create this machine's development key (mode 0600) and trust it on this machine only.

    A key that already exists is an error: keys are never replaced silently.
    """
    path = dev_key_path(env)
    if path.exists():
        raise EnvironmentProblem(f"a development key already exists at {path}; it is never replaced")
    key = _create_dev_key(path)
    signer = Signer(key, "dev", str(path))
    folder = config_dir(env)
    add_to_trust_file(folder / LOCAL_TRUST_NAME, signer.public, name=f"development key of {_hostname()}")
    return signer


def _hostname() -> str:
    import socket

    return socket.gethostname()


def _create_dev_key(path: Path) -> Ed25519PrivateKey:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    return key


def generate_ci_key() -> tuple[str, dict[str, str]]:
    """A new key for CI: (base64 seed for the secret variable, trust-root entry to commit)."""
    key = Ed25519PrivateKey.generate()
    seed = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    return base64.b64encode(seed).decode("ascii"), trust_entry(key.public_key(), "ci release key")


# --------------------------------------------------------------------------------------
# Trust roots


@dataclass(frozen=True, kw_only=True)
class TrustedKey:
    keyid: str
    public: Ed25519PublicKey
    name: str
    root: str  #: which trust file listed it


@dataclass(frozen=True, kw_only=True)
class TrustRoot:
    """Accepted public keys, merged from one or more trust files.

    File format: ``{"schema": 1, "keys": [{"keyid", "keytype": "ed25519", "public": <base64 raw>, "name"}]}``;
    the keyid must be the sha256 of the raw public key (checked on load).
    """

    keys: tuple[TrustedKey, ...]
    sources: tuple[str, ...]

    def find(self, keyid: str) -> TrustedKey | None:
        return next((k for k in self.keys if k.keyid == keyid), None)

    def describe(self) -> str:
        return ", ".join(self.sources) if self.sources else "no trust file"


def read_trust_file(path: Path) -> list[TrustedKey]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise VerificationError(f"trust file {path}: cannot be read ({exc.strerror})") from None
    except ValueError as exc:
        raise VerificationError(f"trust file {path}: invalid JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise VerificationError(f'trust file {path}: expected {{"schema": 1, "keys": [...]}}')
    out = []
    for i, entry in enumerate(data["keys"]):
        where = f"trust file {path}: keys[{i}]"
        if not isinstance(entry, dict) or entry.get("keytype") != "ed25519":
            raise VerificationError(f"{where}: expected an object with keytype 'ed25519'")
        try:
            raw = base64.b64decode(str(entry["public"]), validate=True)
            public = Ed25519PublicKey.from_public_bytes(raw)
        except (KeyError, ValueError, binascii.Error):
            raise VerificationError(f"{where}: 'public' must be the base64 of a 32-byte ed25519 public key") from None
        if entry.get("keyid") != keyid_of(public):
            raise VerificationError(f"{where}: keyid does not match the public key (expected {keyid_of(public)})")
        out.append(TrustedKey(keyid=entry["keyid"], public=public, name=str(entry.get("name", "")), root=str(path)))
    return out


def load_trust(files: Iterable[Path]) -> TrustRoot:
    """Merge the trust files that exist (a missing local trust file is simply empty)."""
    keys: list[TrustedKey] = []
    sources = []
    for path in files:
        if path.is_file():
            keys += read_trust_file(path)
            sources.append(str(path))
    return TrustRoot(keys=tuple(keys), sources=tuple(sources))


def default_trust_files(
    repo_root: Path | None, *, local: bool = True, env: Mapping[str, str] | None = None
) -> list[Path]:
    files = [repo_root / REPO_TRUST_ROOT] if repo_root is not None else []
    if local:
        files.append(config_dir(env) / LOCAL_TRUST_NAME)
    return files


def add_to_trust_file(path: Path, public: Ed25519PublicKey, *, name: str) -> None:
    """Add a key to a trust file (created if missing); a key already listed is left alone."""
    data: dict[str, Any] = {"schema": 1, "keys": []}
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
    entry = trust_entry(public, name)
    if any(k.get("keyid") == entry["keyid"] for k in data.get("keys", [])):
        return
    data.setdefault("keys", []).append(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


@dataclass(frozen=True, kw_only=True)
class Verified:
    payload_type: str
    payload: bytes
    key: TrustedKey


def verify_envelope(envelope: Envelope, trust: TrustRoot, *, expected_type: str | None = None) -> Verified:
    """Accept the envelope if one signature verifies under a trusted key; else say why not."""
    if expected_type is not None and envelope.payload_type != expected_type:
        raise VerificationError(f"payload type is {envelope.payload_type!r}, expected {expected_type!r}")
    if not envelope.signatures:
        raise VerificationError("the envelope carries no signature")
    message = pae(envelope.payload_type, envelope.payload)
    unknown: list[str] = []
    for sig in envelope.signatures:
        key = trust.find(sig.keyid)
        if key is None:
            unknown.append(sig.keyid)
            continue
        try:
            key.public.verify(sig.sig, message)
        except InvalidSignature:
            continue
        return Verified(payload_type=envelope.payload_type, payload=envelope.payload, key=key)
    if unknown and len(unknown) == len(envelope.signatures):
        shown = ", ".join(k[:16] for k in unknown)
        raise VerificationError(
            f"signed by key {shown}, which no trust root lists (trusted: {trust.describe()}); add its public key"
            " to release/trust-root.json (release key) or the local trusted-keys.json (a development key)"
        )
    raise VerificationError("the signature does not verify: the signed content was modified or the signature forged")
