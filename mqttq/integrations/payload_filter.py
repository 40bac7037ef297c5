"""Payload filters: which JSON payloads an integration takes.

A filter is one predicate on a JSON payload, written as text:

    $.kind == "alarm"        $.temp > 30        $.sensor.battery <= 0.2
    exists $.alert           $.tags[0] != "test"

A path starts at `$` and goes down `.name` and `[index]` steps. The value on the right is a
JSON literal (string, number, true, false, null). `==`/`!=` compare any JSON values; `<`, `<=`,
`>`, `>=` compare numbers with numbers and strings with strings, and are false otherwise. A
payload that is not JSON, or has no value at the path, does not match (except `!=`, which
matches when the value is absent or different).
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

_MISSING: Final = object()
_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_\-]*)|\[(\d+)\]|\[\"([^\"]*)\"\]")
_COMPARISON = re.compile(r"^\s*(\S.*?)\s*(==|!=|<=|>=|<|>)\s*(.+?)\s*$")
_EXISTS = re.compile(r"^\s*exists\s+(.+?)\s*$")
_ORDERING: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _parse_path(text: str) -> tuple[str | int, ...]:
    if not text.startswith("$"):
        raise ValueError(f"a path starts with '$', got {text!r}")
    steps: list[str | int] = []
    at = 1
    while at < len(text):
        match = _STEP.match(text, at)
        if match is None:
            raise ValueError(f"cannot read the path {text!r} at {text[at:]!r}")
        name, index, quoted = match.groups()
        steps.append(int(index) if index is not None else (name if name is not None else quoted))
        at = match.end()
    return tuple(steps)


def _lookup(document: Any, steps: tuple[str | int, ...]) -> Any:
    value = document
    for step in steps:
        if isinstance(step, int):
            if not isinstance(value, list) or step >= len(value):
                return _MISSING
            value = value[step]
        else:
            if not isinstance(value, dict) or step not in value:
                return _MISSING
            value = value[step]
    return value


def _comparable(left: Any, right: Any) -> bool:
    numbers = (int, float)
    if isinstance(left, bool) or isinstance(right, bool):
        return False
    return (isinstance(left, numbers) and isinstance(right, numbers)) or (
        isinstance(left, str) and isinstance(right, str)
    )


@dataclass(frozen=True, slots=True)
class PayloadFilter:
    """A parsed predicate; `matches(payload)` says whether a payload passes it."""

    text: str
    path: tuple[str | int, ...]
    op: str
    value: Any = None

    @classmethod
    def parse(cls, text: str) -> PayloadFilter:
        """Parse `text`; ValueError says what is wrong with it."""
        exists = _EXISTS.match(text)
        if exists is not None:
            return cls(text, _parse_path(exists.group(1)), "exists")
        comparison = _COMPARISON.match(text)
        subject = text.strip().removeprefix("exists").strip()
        if comparison is None or not subject.startswith("$"):
            why = "" if subject.startswith("$") else " (a path starts with '$')"
            raise ValueError(
                f"expected '$.path OP value' (OP one of ==, !=, <, <=, >, >=) "
                f"or 'exists $.path'{why}, got {text!r}"
            )
        path, op, literal = comparison.groups()
        try:
            value = json.loads(literal)
        except json.JSONDecodeError:
            raise ValueError(
                f'the value {literal!r} is not a JSON literal (quote strings: "...")'
            ) from None
        if isinstance(value, (dict, list)):
            raise ValueError(f"compare with a string, number, true, false or null, got {literal}")
        return cls(text, _parse_path(path), op, value)

    def matches(self, payload: bytes) -> bool:
        try:
            document = json.loads(payload)
        except (ValueError, RecursionError):
            return self.op == "!="
        found = _lookup(document, self.path)
        if self.op == "exists":
            return found is not _MISSING
        if self.op == "==":
            return found is not _MISSING and _same(found, self.value)
        if self.op == "!=":
            return found is _MISSING or not _same(found, self.value)
        if found is _MISSING or not _comparable(found, self.value):
            return False
        return _ORDERING[self.op](found, self.value)


def _same(left: Any, right: Any) -> bool:
    # JSON's true is not the number 1.
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    return bool(left == right)
