"""Fixtures for the end-to-end tests (the broker fixtures live in tests/conftest.py, the
services' in the plugins it names)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .helpers import (
    Bystander,
    Clients,
)
from .waiting import (
    BrokerUnderTest,
)


@pytest.fixture
def bystander(clients: Clients) -> Callable[[BrokerUnderTest], Bystander]:
    """`bystander(broker)`: connect a well-behaved client before an attack on `broker`."""
    return lambda broker: Bystander(clients, broker)
