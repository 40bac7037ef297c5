"""One `ClientType` (mqttq.auth.model): no module spells its values as bare strings."""

from __future__ import annotations

import ast
from pathlib import Path

import mqttq
from mqttq.auth.model import ClientType
from mqttq.storage.ports import SessionRecord

PACKAGE = Path(mqttq.__file__).parent
HOME = PACKAGE / "auth" / "model.py"


def _string_literals(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    values = {member.value for member in ClientType}
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in values and id(node) not in docstrings
    ]


def test_client_type_values_are_spelled_only_by_the_enum() -> None:
    found = {
        f"{path.relative_to(PACKAGE)}:{line}": value
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != HOME
        for line, value in _string_literals(path)
    }
    assert found == {}


def test_a_session_record_defaults_to_a_device() -> None:
    assert SessionRecord("c", 5, 0).client_type is ClientType.DEVICE
