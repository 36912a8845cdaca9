"""Component versions: one ``VERSION`` file per component is the single source.

CMake reads it (``file(READ ...)`` in the component's CMakeLists.txt), the wheel metadata
reads it (scikit-build-core's regex provider in the component's pyproject.toml), the conan
recipe reads it (``set_version``), and the matrix reads it through :func:`read_version`.
Release tags are ``<tag_prefix>-v<version>``, e.g. ``core-v1.4.0`` or ``ep-dnnl-v0.3.1``.
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import VersionError

VERSION_RE = re.compile(r"^(?P<value>\d+\.\d+\.\d+)\s*$")


def parse_version(text: str, *, source: str) -> str:
    """Validate the text of a VERSION file; ``source`` names the file in the error."""
    m = VERSION_RE.match(text)
    if m is None:
        shown = text.strip().splitlines()[0] if text.strip() else ""
        raise VersionError(f"{source}: '{shown}' is not a version: write MAJOR.MINOR.PATCH on one line, e.g. 0.1.0")
    return m.group("value")


def read_version(path: Path, *, display: str | None = None) -> str:
    """Read and validate a VERSION file."""
    name = display or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise VersionError(f"{name}: missing; every component needs a VERSION file holding e.g. 0.1.0") from None
    except OSError as exc:
        raise VersionError(f"{name}: cannot be read ({exc.strerror})") from None
    return parse_version(text, source=name)


def version_tuple(version: str) -> tuple[int, ...]:
    """'3.11' -> (3, 11); used for Python and macOS version comparisons."""
    return tuple(int(part) for part in version.split("."))
