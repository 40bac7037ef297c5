"""Fixtures for the end-to-end tests (the broker fixtures live in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

# A real PostgreSQL for the tests that need one (started on first use, once per session).
from tests.postgres_fixtures import postgres_server, postgres_url

from .helpers import (
    Bystander,
    Clients,
)
from .waiting import (
    BrokerUnderTest,
)

__all__ = ["postgres_server", "postgres_url"]


@pytest.fixture
def bystander(clients: Clients) -> Callable[[BrokerUnderTest], Bystander]:
    """`bystander(broker)`: connect a well-behaved client before an attack on `broker`."""
    return lambda broker: Bystander(clients, broker)
