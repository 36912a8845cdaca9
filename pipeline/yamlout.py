"""A small, deterministic YAML writer for the generated workflows.

PyYAML cannot write comments, and every pinned action carries its release in one
(``uses: actions/checkout@<sha>  # v4.2.2``). Only what the generator produces is supported:
mappings (insertion order), lists, strings, booleans, integers and :class:`Pinned` references.
Multi-line strings become literal blocks (``|``); a string YAML could read as something else
(``on``, ``3.11``, ``${{ … }}``) is quoted (single quotes unless it holds one).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_PLAIN = re.compile(r"[A-Za-z_./][A-Za-z0-9_./ =+-]*")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}


@dataclass(frozen=True, kw_only=True)
class Pinned:
    """An action reference by full commit SHA, written with its release as a comment."""

    repo: str
    sha: str
    version: str

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[0-9a-f]{40}", self.sha):
            raise ValueError(f"{self.repo}: '{self.sha}' is not a full 40-hex commit SHA")

    @property
    def ref(self) -> str:
        return f"{self.repo}@{self.sha}"


def scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Pinned):
        return f"{value.ref}  # {value.version}"
    if isinstance(value, str):
        plain = _PLAIN.fullmatch(value) and value.lower() not in _RESERVED and not value.endswith(" ")
        if plain:
            return value
        if "'" not in value and value.isprintable():
            return f"'{value}'"
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"cannot write {type(value).__name__} to YAML")


def _block(text: str, indent: str) -> list[str]:
    """A literal block; ``|`` keeps one final newline, ``|-`` none (more than one is not supported)."""
    if text.endswith("\n\n") or any(line != line.rstrip() for line in text.split("\n")):
        raise ValueError(f"cannot write this text as a literal block: {text!r}")
    body = text.rstrip("\n").split("\n")
    return ["|" if text.endswith("\n") else "|-"] + [f"{indent}{line}".rstrip() for line in body]


def _lines(value: object, indent: str) -> list[str]:
    """Lines of a mapping or list at ``indent``."""
    out: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            out += _entry(f"{indent}{scalar(key)}:", item, indent)
    elif isinstance(value, Sequence) and not isinstance(value, str):
        for item in value:
            if isinstance(item, Mapping) and item:
                first, *rest = _lines(item, indent + "  ")
                out.append(f"{indent}- {first[len(indent) + 2 :]}")
                out += rest
            else:
                out += _entry(f"{indent}-", item, indent)
    else:
        raise TypeError(f"expected a mapping or a list, got {type(value).__name__}")
    return out


def _entry(head: str, item: object, indent: str) -> list[str]:
    child = indent + "  "
    if isinstance(item, str) and "\n" in item:
        first, *rest = _block(item, child)
        return [f"{head} {first}", *rest]
    if isinstance(item, Mapping):
        return [f"{head} {{}}"] if not item else [head, *_lines(item, child)]
    if isinstance(item, Sequence) and not isinstance(item, str):
        if not item:
            return [f"{head} []"]
        if all(not isinstance(i, Mapping | list | tuple) and not (isinstance(i, str) and "\n" in i) for i in item):
            return [f"{head} [{', '.join(scalar(i) for i in item)}]"]
        return [head, *_lines(item, child)]
    return [f"{head} {scalar(item)}"]


def dump(document: Mapping[str, object], *, header: str = "") -> str:
    """The document as YAML text; ``header`` lines become leading comments. Top-level keys are
    separated by a blank line, and so are the entries of ``jobs``."""
    out = [f"# {line}".rstrip() for line in header.splitlines()]
    for key, item in document.items():
        out.append("")
        if key == "jobs" and isinstance(item, Mapping):
            out.append("jobs:")
            for i, (job, body) in enumerate(item.items()):
                if i:
                    out.append("")
                out += _entry(f"  {scalar(job)}:", body, "  ")
        else:
            out += _entry(f"{scalar(key)}:", item, "")
    return "\n".join(out).lstrip("\n") + "\n"
