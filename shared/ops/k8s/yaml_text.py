"""YAML text for manifests: block style, keys in the order given, a string left unquoted
only where no YAML reader could take it for anything else (a number, a boolean, null),
JSON's double quotes otherwise (a JSON string is a YAML double-quoted scalar).

Written here rather than with a YAML library so that the committed manifests cannot
change with a library's version: the tests compare them to this output, byte for byte."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# Starts with a letter or "/", then no space, quote, "#", "*", "&", "!", ",", "[", "{"...
_PLAIN = re.compile(r"[A-Za-z/][A-Za-z0-9_./:@=+-]*")
# Words YAML 1.1 or 1.2 readers take for booleans or null.
_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        plain = _PLAIN.fullmatch(value) and value.lower() not in _RESERVED \
            and not value.endswith(":")
        return value if plain else json.dumps(value)
    raise TypeError(f"no YAML scalar for {type(value).__name__}: {value!r}")


def _lines(value: Any, indent: str) -> list[str]:
    """``value`` (a mapping or a non-empty sequence) as lines, each starting with ``indent``."""
    lines: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            head = f"{indent}{scalar(key)}:"
            if _is_block(item):
                lines += [head, *_lines(item, indent + "  ")]
            else:
                lines.append(f"{head} {_inline(item)}")
        return lines
    for item in value:
        if _is_block(item):
            nested = _lines(item, indent + "  ")
            # The first line of the item goes on the dash's line.
            lines += [f"{indent}- {nested[0].lstrip()}", *nested[1:]]
        else:
            lines.append(f"{indent}- {_inline(item)}")
    return lines


def _is_block(value: Any) -> bool:
    return isinstance(value, Mapping | list | tuple) and len(value) > 0


def _inline(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{}"
    if isinstance(value, Sequence) and not isinstance(value, str):
        return "[]"
    return scalar(value)


def document(value: Mapping[str, Any]) -> str:
    return "\n".join(_lines(value, "")) + "\n"


def documents(values: Iterable[Mapping[str, Any]], header: str = "") -> str:
    """Several documents in one text, each opened by ``---``; ``header`` (comment lines
    without their "# ") first."""
    comment = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    return comment + "".join(f"---\n{document(value)}" for value in values)
