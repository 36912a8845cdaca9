"""The EP catalog's trust configuration (``release/catalog.toml``) and its signing keys.

Roles: ``root`` (offline), ``targets``, ``snapshot``, ``timestamp`` (online, the release signs with them)
and the delegated ``certified`` role (online, the release's own EPs). ``uncertified`` belongs to a third
party, who signs with its own key (its public key is delegated when it first publishes).

Keys (ed25519), for role R and signature i of its threshold:
    * CI: ``$MOSAICRT_CATALOG_KEY_<R>`` (i = 1) or ``$MOSAICRT_CATALOG_KEY_<R>_<i>``: a PEM (PKCS#8) private key
      or the base64 of a 32-byte seed. The root key is never read from the environment.
    * Development: ``<config>/catalog-keys/<r>-<i>.pem`` (mode 0600; ``<config>`` as for the release
      signing key, see :mod:`pipeline.signing`), created on first use with a message. The root key is
      created there only by the explicit root-signing step (:func:`pipeline.catalog.repository.sign_root`).
"""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from securesystemslib.signer import CryptoSigner

from ..errors import EnvironmentProblem, UsageError
from ..signing import config_dir, parse_private_key

CONFIG_FILE = Path("release") / "catalog.toml"
TOP_ROLES = ("root", "targets", "snapshot", "timestamp")
DELEGATED_ROLES = ("certified", "uncertified")
ONLINE_ROLES = ("targets", "snapshot", "timestamp", "certified")
KEY_ENV_PREFIX = "MOSAICRT_CATALOG_KEY_"


@dataclass(frozen=True, kw_only=True)
class RolePolicy:
    threshold: int
    expires_days: float


@dataclass(frozen=True, kw_only=True)
class CatalogConfig:
    default_url: str
    local_port: int
    max_target_bytes: int
    roles: Mapping[str, RolePolicy]

    def role(self, name: str) -> RolePolicy:
        return self.roles[name]


def load_config(root: Path) -> CatalogConfig:
    """``release/catalog.toml``; every problem names the file and the key."""
    path = root / CONFIG_FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path} is missing: the EP catalog's trust configuration") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc})") from None

    def bad(key: str, why: str) -> UsageError:
        return UsageError(f"{CONFIG_FILE}: {key}: {why}")

    cat = data.get("catalog")
    if not isinstance(cat, dict):
        raise bad("catalog", "the [catalog] table is missing")
    url = cat.get("default_url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise bad("catalog.default_url", f"expected an http(s) URL, got {url!r}")
    port = cat.get("local_port")
    if not isinstance(port, int) or not 0 < port < 65536:
        raise bad("catalog.local_port", f"expected a TCP port, got {port!r}")
    max_mb = cat.get("max_target_mb")
    if not isinstance(max_mb, int | float) or isinstance(max_mb, bool) or max_mb <= 0:
        raise bad("catalog.max_target_mb", f"expected a positive number, got {max_mb!r}")
    roles: dict[str, RolePolicy] = {}
    raw_roles = data.get("role", {})
    for name in (*TOP_ROLES, *DELEGATED_ROLES):
        body = raw_roles.get(name) if isinstance(raw_roles, dict) else None
        if not isinstance(body, dict):
            raise bad(f"role.{name}", "missing (every TUF role needs a threshold and an expiry)")
        threshold, days = body.get("threshold"), body.get("expires_days")
        if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 1:
            raise bad(f"role.{name}.threshold", f"expected an integer ≥ 1, got {threshold!r}")
        if not isinstance(days, int | float) or isinstance(days, bool) or days <= 0:
            raise bad(f"role.{name}.expires_days", f"expected a positive number of days, got {days!r}")
        roles[name] = RolePolicy(threshold=threshold, expires_days=float(days))
    unknown = set(raw_roles) - set(roles) if isinstance(raw_roles, dict) else set()
    if unknown:
        raise bad("role", f"unknown role(s) {', '.join(sorted(unknown))}")
    if not url.endswith("/"):
        url += "/"
    return CatalogConfig(default_url=url, local_port=port, max_target_bytes=int(max_mb * 1024 * 1024), roles=roles)


# --------------------------------------------------------------------------------------
# keys


def key_dir(env: Mapping[str, str] | None = None) -> Path:
    return config_dir(env) / "catalog-keys"


def _env_names(role: str, i: int) -> list[str]:
    base = KEY_ENV_PREFIX + role.upper()
    return [base, f"{base}_1"] if i == 1 else [f"{base}_{i}"]


def _write_key(path: Path, key: Ed25519PrivateKey) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)


def _read_key_file(path: Path) -> Ed25519PrivateKey:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise EnvironmentProblem(f"{path} is readable by others (mode {mode:o}); fix: chmod 600 {path}")
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise EnvironmentProblem(f"the catalog key {path} cannot be read ({exc})") from None
    return parse_private_key(text, origin=str(path))


@dataclass(frozen=True)
class RoleSigner:
    role: str
    signer: CryptoSigner
    origin: str  #: env var or file, for messages

    @property
    def keyid(self) -> str:
        return str(self.signer.public_key.keyid)


def role_signers(
    role: str, threshold: int, *, create: bool, env: Mapping[str, str] | None = None, say: bool = True
) -> list[RoleSigner]:
    """The ``threshold`` signers of an online role: from the environment (CI) or this machine's key folder.

    ``create``: make the missing development keys (never for root, never when a CI key is set)."""
    env = os.environ if env is None else env
    out: list[RoleSigner] = []
    for i in range(1, threshold + 1):
        name = next((n for n in _env_names(role, i) if env.get(n)), None)
        if name is not None and role != "root":
            key = parse_private_key(env[name], origin=f"${name}")
            out.append(RoleSigner(role, CryptoSigner(key), f"${name}"))
            continue
        path = key_dir(env) / f"{role}-{i}.pem"
        if not path.exists():
            if not create:
                how = (
                    "sign the catalog root with `python -m pipeline catalog sign-root`"
                    if role == "root"
                    else f"set ${_env_names(role, i)[0]} (CI) or let `nox -s release` create this machine's key"
                )
                raise EnvironmentProblem(f"no key for the catalog role '{role}' (#{i}) at {path}: {how}")
            _write_key(path, Ed25519PrivateKey.generate())
            if say:
                print(f"created the development key of the catalog role '{role}' at {path} (mode 0600)", flush=True)
        out.append(RoleSigner(role, CryptoSigner(_read_key_file(path)), str(path)))
    return out
