"""One value of a key in the key's type: from TOML or a typed flag the type must already be
right (`check_type`); from an environment variable or a string flag it is read from text
(`parse_text`). The `ValueError`s raised say what was expected and what was found
(`describe`), for the loader to prefix with the key.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Final

__all__ = ["check_type", "describe", "parse_text"]

_TYPE_WORDS: Final[dict[type, str]] = {
    int: "an integer",
    float: "a number",
    bool: "true or false",
    str: "a string",
    Path: "a path (string)",
}
_STRINGS: Final = tuple[str, ...]
"""The type of a list-of-strings key (`auth.providers`)."""
_TRUE_WORDS: Final = frozenset({"1", "true", "yes", "on"})
_FALSE_WORDS: Final = frozenset({"0", "false", "no", "off"})


def check_type(kind: type, raw: object) -> object:
    """A value from TOML or a typed override: the type must already be right."""
    if kind == _STRINGS:
        if isinstance(raw, list | tuple) and all(isinstance(item, str) for item in raw):
            return tuple(raw)
        raise ValueError(f"expected an array of strings, got {describe(raw)}")
    expected = f"expected {_TYPE_WORDS[kind]}, got {describe(raw)}"
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        raise ValueError(expected)
    if kind is int:
        # bool is an int subclass in Python; `port = true` is still a mistake.
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        raise ValueError(expected)
    if kind is float:
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            if not math.isfinite(raw):
                raise ValueError(f"must be a finite number, got {raw}")
            return float(raw)
        raise ValueError(expected)
    if kind is Path:
        if isinstance(raw, Path):
            return raw
        if isinstance(raw, str):
            return parse_text(Path, raw)
        raise ValueError(expected)
    if isinstance(raw, str):
        return raw
    raise ValueError(expected)


def parse_text(kind: type, raw: str) -> object:
    """A value from an environment variable or a string override."""
    stripped = raw.strip()
    if kind is str:
        return raw
    if kind == _STRINGS:
        # "jwt,credentials"; also a TOML or Python spelling: ["jwt", "credentials"].
        items = (item.strip().strip("'\"").strip() for item in stripped.strip("[]()").split(","))
        return tuple(item for item in items if item)
    if kind is Path:
        if not stripped:
            raise ValueError("must not be empty")
        return Path(raw).expanduser()
    if kind is bool:
        if stripped.lower() in _TRUE_WORDS:
            return True
        if stripped.lower() in _FALSE_WORDS:
            return False
        raise ValueError(f"expected true or false, got {raw!r}")
    if kind is int:
        try:
            return int(stripped, 0) if stripped.lower().startswith("0x") else int(stripped)
        except ValueError:
            raise ValueError(f"expected an integer, got {raw!r}") from None
    try:
        number = float(stripped)
    except ValueError:
        raise ValueError(f"expected a number, got {raw!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"must be a finite number, got {raw!r}")
    return number


def describe(raw: object) -> str:
    """How a raw value reads in a message: its kind and its value (`integer 5`)."""
    if isinstance(raw, bool):
        return f"boolean {str(raw).lower()}"
    if isinstance(raw, int):
        return f"integer {raw}"
    if isinstance(raw, float):
        return f"float {raw}"
    if isinstance(raw, str):
        return f"string {raw!r}"
    if isinstance(raw, list):
        return "an array"
    if isinstance(raw, dict):
        return "a table"
    return type(raw).__name__
