"""A session names what it needs (Outlet, SessionHost), not who provides it (Client, Hub):
session.py and the two base classes import nothing from the connection, delivery-hub or
distributed modules above them, not even for type checking, and Client and Hub are the
classes that provide them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mqttq
from mqttq.broker.connection.client import Client
from mqttq.broker.delivery.hub import Hub
from mqttq.broker.sessions.host import SessionHost
from mqttq.broker.sessions.outlet import Outlet

PACKAGE = Path(mqttq.__file__).parent
ABOVE = (
    "mqttq.broker.connection",
    "mqttq.broker.delivery.hub",
    "mqttq.broker.delivery.intake",
    "mqttq.broker.delivery.inbox",
    "mqttq.broker.distributed",
    "mqttq.broker.server",
)


def imported_modules(path: Path) -> set[str]:
    """Every module an `import` or `from ... import` names, wherever it stands."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("module", ["session", "outlet", "host"])
def test_the_session_modules_name_nothing_above_them(module: str) -> None:
    imported = imported_modules(PACKAGE / "broker" / "sessions" / f"{module}.py")
    assert imported, "the module could not be read"
    assert sorted(name for name in imported if name.startswith(ABOVE)) == []


def test_client_and_hub_provide_what_a_session_needs() -> None:
    assert issubclass(Client, Outlet)
    assert issubclass(Hub, SessionHost)
