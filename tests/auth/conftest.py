"""Fixtures of the AuthStore contract suite: every adapter, each test on fresh storage.

A real PostgreSQL (tests/postgres_fixtures.py, a plugin of the root conftest); it starts
only when a PostgreSQL case runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mqttq.auth.ports import AuthStore
from mqttq.storage.postgres.auth import PostgresAuthStore
from mqttq.storage.sqlite.auth import SqliteAuthStore
from tests.auth.service import AuthService

__all__ = ["AuthStoreFactory", "auth_service", "make_auth_store"]


class AuthStoreFactory:
    """Builds new, unopened stores on one location (one SQLite file, or one PostgreSQL
    database), so a second store sees what the first one wrote."""

    def __init__(self, kind: str, location: str) -> None:
        self.kind = kind
        self.location = location

    def __call__(self) -> AuthStore:
        if self.kind == "sqlite":
            return SqliteAuthStore(Path(self.location))
        return PostgresAuthStore(self.location)


@pytest.fixture(params=["sqlite", "postgres"])
def make_auth_store(request: pytest.FixtureRequest, tmp_path: Path) -> AuthStoreFactory:
    """Parametrizes a test over both AuthStore adapters."""
    if request.param == "sqlite":
        return AuthStoreFactory("sqlite", str(tmp_path / "data" / "auth.db"))
    return AuthStoreFactory("postgres", request.getfixturevalue("postgres_url"))


@pytest.fixture
def auth_service() -> Iterator[AuthService]:
    """A real HTTP auth/JWKS service on 127.0.0.1 port 0 (tests/auth/service.py)."""
    service = AuthService()
    yield service
    service.close()
