"""Strict reader/writer for the fixed yaml layout of selected_operators.yaml and functions.yaml.

No yaml library is a dependency of this project, and these files only ever hold string keys,
booleans, strings and lists of strings nested in mappings indented by two spaces. This module
reads exactly that subset (anything else is an error naming the line) and writes it back.
"""

from __future__ import annotations

import re
from typing import Union

Value = Union[bool, str, list, dict]

_KEY = re.compile(r"^(?P<key>[^\s#'\"-][^#]*?|'[^']*'|\"[^\"]*\"):(?: (?P<value>.*))?$")
_PLAIN = re.compile(r"^[A-Za-z0-9_.:/;,|<>\-+]+$")


class YamlError(ValueError):
    """A file outside the supported yaml subset, with the file and line in the message."""


def _scalar(text: str, where: str) -> Value:
    if text == "true":
        return True
    if text == "false":
        return False
    if text == "[]":
        return []
    if text == "{}":
        return {}
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if _PLAIN.match(text):
        return text
    raise YamlError(f"{where}: unsupported value {text!r} (plain words, quoted strings, true/false, [] or {{}})")


def _unquote(key: str) -> str:
    return key[1:-1] if key[:1] in "'\"" else key


def loads(text: str, name: str = "<yaml>") -> Value:
    """Parses `text`; `name` goes into error messages."""
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not stripped.strip() or stripped.strip() == "---":
            continue
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise YamlError(f"{name}:{number}: tab in indentation; indent with spaces")
        lines.append((len(stripped) - len(stripped.lstrip(" ")), stripped.strip(), f"{name}:{number}"))
    if not lines:
        raise YamlError(f"{name}: empty file")
    value, end = _block(lines, 0, lines[0][0])
    if end != len(lines):
        raise YamlError(f"{lines[end][2]}: unexpected indentation")
    return value


def _block(lines, i: int, indent: int):
    if lines[i][1].startswith("- ") or lines[i][1] == "-":
        return _sequence(lines, i, indent)
    return _mapping(lines, i, indent)


def _sequence(lines, i: int, indent: int):
    items = []
    while i < len(lines) and lines[i][0] == indent and (lines[i][1].startswith("- ") or lines[i][1] == "-"):
        _, text, where = lines[i]
        rest = text[2:].strip()
        if not rest:
            raise YamlError(f"{where}: empty list item")
        if _KEY.match(rest):
            # "- key: value" opens a mapping whose keys sit two columns further in.
            inner = list(lines)
            inner[i] = (indent + 2, rest, where)
            item, i = _mapping(inner, i, indent + 2)
            items.append(item)
        else:
            items.append(_scalar(rest, where))
            i += 1
    return items, i


def _mapping(lines, i: int, indent: int):
    out: dict = {}
    while i < len(lines) and lines[i][0] == indent:
        _, text, where = lines[i]
        match = _KEY.match(text)
        if not match:
            raise YamlError(f"{where}: expected 'key: value', got {text!r}")
        key = _unquote(match.group("key").strip())
        if key in out:
            raise YamlError(f"{where}: duplicate key {key!r}")
        value = match.group("value")
        i += 1
        if value is not None and value.strip():
            out[key] = _scalar(value.strip(), where)
        elif i < len(lines) and (lines[i][0] > indent or (lines[i][0] == indent and lines[i][1].startswith("-"))):
            out[key], i = _block(lines, i, lines[i][0])
        else:
            out[key] = None
    if i < len(lines) and lines[i][0] > indent:
        raise YamlError(f"{lines[i][2]}: unexpected indentation")
    return out, i


def _emit_scalar(value) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    text = str(value)
    return text if _PLAIN.match(text) and text not in ("true", "false") else "'" + text + "'"


def dumps(value: dict) -> str:
    """Writes a mapping of the supported subset, keys in the given order."""
    out: list[str] = []
    _emit_mapping(value, 0, out)
    return "\n".join(out) + "\n"


def _emit_mapping(mapping: dict, indent: int, out: list[str]) -> None:
    pad = " " * indent
    for key, value in mapping.items():
        name = _emit_scalar(key)
        if isinstance(value, dict):
            if value:
                out.append(f"{pad}{name}:")
                _emit_mapping(value, indent + 2, out)
            else:
                out.append(f"{pad}{name}: {{}}")
        elif isinstance(value, list):
            if value:
                out.append(f"{pad}{name}:")
                out.extend(f"{pad}- {_emit_scalar(item)}" for item in value)
            else:
                out.append(f"{pad}{name}: []")
        else:
            out.append(f"{pad}{name}: {_emit_scalar(value)}")
