"""Sessions fetching the EPs they want from the catalog (winml builds with download on)."""

from __future__ import annotations

import warnings
from collections.abc import Iterable

from ._catalog import Certification, ExecutionProviderCatalog
from ._errors import CatalogError

_POLICY_DEVICES = {  # ExecutionProviderDevicePolicy name -> the device types it prefers, in order
    "PREFER_GPU": ("GPU",),
    "MAX_PERFORMANCE": ("GPU", "NPU"),
    "PREFER_NPU": ("NPU",),
    "MAX_EFFICIENCY": ("NPU",),
    "MIN_OVERALL_POWER": ("NPU",),
}


def provide(names: Iterable[str]) -> list[str]:
    """Make the named EPs available from the catalog; returns the ones registered. Any failure is one
    warning and the session goes on with the installed EPs."""
    wanted = list(names)
    registered: list[str] = []
    problems: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            catalog = ExecutionProviderCatalog.get_default()
            for name in wanted:
                try:
                    p = catalog.find_provider(name)
                    p.ensure_ready()
                    if p.try_register():
                        registered.append(name)
                except CatalogError as exc:
                    problems.append(f"{name}: {exc}")
        except CatalogError as exc:
            problems.append(str(exc))
    problems += [str(w.message) for w in caught]
    if problems:
        warnings.warn("EP download from the catalog: " + " | ".join(problems) + "; using the installed EPs",
                      RuntimeWarning, stacklevel=4)
    return registered


def provide_for_policy(policy_name: str, present_types: set[str], available: set[str]) -> list[str]:
    """For a device policy: the certified catalog EPs serving a preferred device type that is present."""
    types = [t for t in _POLICY_DEVICES.get(policy_name, ("CPU",)) if t in present_types]
    if not types:
        return []
    try:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            offered = ExecutionProviderCatalog.get_default().find_all_providers()
    except CatalogError as exc:
        warnings.warn(f"EP download from the catalog: {exc}; using the installed EPs", RuntimeWarning, stacklevel=4)
        return []
    names = [p.name for p in offered if p.certification is Certification.CERTIFIED
             and set(p.device_types) & set(types) and p.name not in available]  # fmt: skip
    return provide(names) if names else []
