"""A CycloneDX SBOM of one wheel: what is inside it, with hashes.

The BOM's subject (``metadata.component``) is the wheel itself (purl ``pkg:pypi/<dist>@<version>`` with its
file name, and its sha256). Components:

* every native library in the wheel — the runtime's own and the ones ``auditwheel repair`` bundled into
  ``<dist>.libs/`` — with its sha256 and its path in the wheel (property ``mosaicrt:path``,
  ``mosaicrt:bundled`` = true for repaired-in libraries);
* the Python import package, hashed over all its files;
* the declared runtime dependencies (``Requires-Dist``), marked as not inside the wheel.
"""

from __future__ import annotations

import hashlib
import re
import uuid
import zipfile
from email.parser import Parser
from pathlib import Path
from typing import Any

from .wheelcheck import NATIVE_SUFFIXES

PATH_PROP = "mosaicrt:path"
BUNDLED_PROP = "mosaicrt:bundled"


def is_native(name: str) -> bool:
    return name.endswith(NATIVE_SUFFIXES) or ".so." in name


def wheel_sbom(wheel: Path, sha256: str) -> str:
    """CycloneDX 1.6 JSON for the wheel at ``wheel`` (whose sha256 the caller computed once)."""
    # Imported here: verifying (nox -s verify) reads SBOMs as JSON and needs no cyclonedx install.
    from cyclonedx.model import HashAlgorithm, HashType, Property
    from cyclonedx.model.bom import Bom, BomMetaData
    from cyclonedx.model.component import Component, ComponentScope, ComponentType
    from cyclonedx.output.json import JsonV1Dot6
    from packageurl import PackageURL

    def _sha(data: bytes) -> HashType:
        return HashType(alg=HashAlgorithm.SHA_256, content=hashlib.sha256(data).hexdigest())

    with zipfile.ZipFile(wheel) as zf:
        names = sorted(n for n in zf.namelist() if not n.endswith("/"))
        dist_info = next(n.split("/", 1)[0] for n in names if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(zf.read(f"{dist_info}/METADATA").decode("utf-8"))
        dist, version = meta["Name"], meta["Version"]
        root = Component(
            name=dist,
            version=version,
            type=ComponentType.LIBRARY,
            bom_ref=f"wheel:{wheel.name}",
            purl=PackageURL("pypi", None, dist.lower(), version, qualifiers={"file_name": wheel.name}),
            hashes=[HashType(alg=HashAlgorithm.SHA_256, content=sha256)],
            description=meta.get("Summary"),
        )
        bom = Bom(
            metadata=BomMetaData(component=root),
            serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"mosaicrt-wheel:{sha256}"),
        )
        inside: list[Component] = []
        packages: dict[str, hashlib._Hash] = {}
        for name in names:
            data = zf.read(name)
            top = name.split("/", 1)[0]
            if is_native(name):
                inside.append(
                    Component(
                        name=Path(name).name,
                        type=ComponentType.LIBRARY,
                        bom_ref=f"file:{name}",
                        hashes=[_sha(data)],
                        scope=ComponentScope.REQUIRED,
                        properties=[
                            Property(name=PATH_PROP, value=name),
                            Property(name=BUNDLED_PROP, value=str(top.endswith(".libs")).lower()),
                        ],
                    )
                )
            if top != dist_info and not top.endswith(".libs"):
                h = packages.setdefault(top, hashlib.sha256())
                h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
        for top, h in sorted(packages.items()):
            inside.append(
                Component(
                    name=top,
                    version=version,
                    type=ComponentType.LIBRARY,
                    bom_ref=f"package:{top}",
                    description="Python import package (hash over its file names and contents)",
                    hashes=[HashType(alg=HashAlgorithm.SHA_256, content=h.hexdigest())],
                    properties=[Property(name=PATH_PROP, value=top + "/")],
                )
            )
        for req in meta.get_all("Requires-Dist") or []:
            m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
            if m is None:
                continue
            inside.append(
                Component(
                    name=m.group(1),
                    type=ComponentType.LIBRARY,
                    bom_ref=f"requires:{m.group(1)}",
                    purl=PackageURL("pypi", None, m.group(1).lower()),
                    description=f"declared dependency, not inside the wheel: {req}",
                    scope=ComponentScope.OPTIONAL if "extra ==" in req else ComponentScope.REQUIRED,
                )
            )
    for comp in inside:
        bom.components.add(comp)
    bom.register_dependency(root, inside)
    return str(JsonV1Dot6(bom).output_as_string(indent=1))


def check_sbom_against_wheel(bom: dict[str, Any], wheel: zipfile.ZipFile, sha256: str) -> list[str]:
    """Problems: the SBOM's subject hash or a listed native library's hash disagrees with the wheel."""
    problems = []
    if bom.get("bomFormat") != "CycloneDX":
        return ["the SBOM is not a CycloneDX document"]
    subject_hashes = [h.get("content") for h in bom.get("metadata", {}).get("component", {}).get("hashes", [])]
    if sha256 not in subject_hashes:
        problems.append("the SBOM describes another wheel (its subject hash differs)")
    names = set(wheel.namelist())
    listed = set()
    for comp in bom.get("components", []):
        path = next((p["value"] for p in comp.get("properties", []) if p.get("name") == PATH_PROP), None)
        if path is None or path.endswith("/"):
            continue
        listed.add(path)
        if path not in names:
            problems.append(f"the SBOM lists {path}, which the wheel does not contain")
            continue
        want = next((h["content"] for h in comp.get("hashes", []) if h.get("alg") == "SHA-256"), None)
        if want != hashlib.sha256(wheel.read(path)).hexdigest():
            problems.append(f"the SBOM hash of {path} does not match the wheel")
    missing = sorted(n for n in names if is_native(n) and n not in listed)
    if missing:
        problems.append(f"native libraries missing from the SBOM: {', '.join(missing)}")
    return problems
