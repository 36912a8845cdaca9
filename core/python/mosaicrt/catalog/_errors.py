"""Why the EP catalog refused something. Every refusal has its own class and a short ``reason`` slug; nothing
is registered and the download cache is left as it was."""

from __future__ import annotations


class CatalogError(Exception):
    reason = "catalog"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class DownloadDisabled(CatalogError):
    reason = "disabled"


class CatalogUnavailable(CatalogError):
    """The catalog could not be reached in time (offline, refused, timed out)."""

    reason = "unavailable"


class TamperedTarget(CatalogError):
    """A downloaded file's length or hash is not the one the signed metadata states."""

    reason = "tampered"


class UntrustedMetadata(CatalogError):
    """Metadata not signed by the threshold of keys trusted for its role (e.g. targets signed by the wrong key)."""

    reason = "untrusted-signature"


class RollbackAttack(CatalogError):
    """Metadata older than what this client already trusted (a rollback of timestamp/snapshot/targets)."""

    reason = "rollback"


class ExpiredMetadata(CatalogError):
    """Metadata past its expiry (an indefinite-freeze attack or a stale mirror)."""

    reason = "expired"


class InconsistentMetadata(CatalogError):
    """Metadata versions that do not belong together (mix-and-match) or that contradict each other."""

    reason = "mix-and-match"


class OversizedTarget(CatalogError):
    """More data than the metadata declares, or a target larger than the client accepts (endless data)."""

    reason = "oversized"


class UncertifiedRefused(CatalogError):
    """An EP signed by the third-party (uncertified) role where only certified EPs are allowed."""

    reason = "uncertified"


class IncompatibleProvider(CatalogError):
    """No catalog entry of the EP fits this platform or this core's EP ABI."""

    reason = "incompatible"


class InterruptedDownload(CatalogError):
    """The download stopped before the declared length (connection lost); nothing was kept."""

    reason = "interrupted"


class BadBundle(CatalogError):
    """A verified bundle whose contents do not match its own manifest (or escape their folder)."""

    reason = "bad-bundle"


class UnknownProvider(CatalogError):
    reason = "unknown-provider"
