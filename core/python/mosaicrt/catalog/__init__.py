"""Execution providers on demand (the ``mosaicrt-winml`` build): a TUF-verified EP catalog.

Shaped like WinML's ``ExecutionProviderCatalog``::

    from mosaicrt.catalog import ExecutionProviderCatalog
    catalog = ExecutionProviderCatalog.get_default()        # $MOSAICRT_EP_CATALOG_URL or the shipped URL
    for p in catalog.find_all_providers():
        print(p.name, p.version, p.ready_state, p.certification, p.device_types)
    p.ensure_ready(progress=lambda pct: ...)                # download + verify the EP and its libraries
    p.try_register()                                        # then sessions can use it
    catalog.ensure_and_register_certified()                 # every certified EP for this machine's devices
    catalog.remove("DnnlExecutionProvider")

Sessions use it by themselves when download is on (Windows at or above the policy's build, or
``MOSAICRT_DYNAMIC_EP_DOWNLOAD=1`` / the session entry ``session.dynamic_ep_download=1`` elsewhere): an EP named
in ``providers=[...]`` that is not installed is fetched, verified, registered and used; later sessions use
the cache without the network. Every refusal is a :class:`CatalogError` subclass named after the attack or
fault it stopped; nothing unverified is ever loaded.
"""

from __future__ import annotations

from .._variant import is_winml_build

if not is_winml_build():
    from .._variant import download_decision

    raise ImportError(f"mosaicrt.catalog is not available: {download_decision()[1]}")

from ._catalog import Certification, ExecutionProvider, ExecutionProviderCatalog, ReadyState  # noqa: E402
from ._errors import (  # noqa: E402
    BadBundle,
    CatalogError,
    CatalogUnavailable,
    DownloadDisabled,
    ExpiredMetadata,
    IncompatibleProvider,
    InconsistentMetadata,
    InterruptedDownload,
    OversizedTarget,
    RollbackAttack,
    TamperedTarget,
    UncertifiedRefused,
    UnknownProvider,
    UntrustedMetadata,
)

__all__ = [
    "BadBundle",
    "CatalogError",
    "CatalogUnavailable",
    "Certification",
    "DownloadDisabled",
    "ExecutionProvider",
    "ExecutionProviderCatalog",
    "ExpiredMetadata",
    "IncompatibleProvider",
    "InconsistentMetadata",
    "InterruptedDownload",
    "OversizedTarget",
    "ReadyState",
    "RollbackAttack",
    "TamperedTarget",
    "UncertifiedRefused",
    "UnknownProvider",
    "UntrustedMetadata",
]
