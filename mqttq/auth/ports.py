"""AuthStore: where credentials and tenant quotas live (SQLite embedded, PostgreSQL
distributed). One contract suite (tests/auth/test_auth_store_contract.py) runs on both."""

from __future__ import annotations

from typing import Protocol

from mqttq.auth.model import Credential, Tenant
from mqttq.errors import MqttqError

__all__ = ["AuthStore", "AuthStoreError", "CredentialExists"]


class AuthStoreError(MqttqError):
    """The store cannot be reached or used; the message says which and why."""


class CredentialExists(AuthStoreError):
    """`add_credential` for a username that already has one."""

    def __init__(self, username: str) -> None:
        super().__init__(f"credential {username!r} already exists")
        self.username = username


class AuthStore(Protocol):
    """Credentials by username and tenants by name. Every method is a coroutine; a write
    is durable when it returns. Unreachable storage raises AuthStoreError."""

    async def open(self) -> None:
        """Connect and create the tables if they do not exist."""
        ...

    async def close(self) -> None: ...

    async def get_credential(self, username: str) -> Credential | None: ...

    async def list_credentials(self, tenant: str | None = None) -> list[Credential]:
        """All credentials (of one tenant when given), ordered by username."""
        ...

    async def tenant_has_credentials(self, tenant: str) -> bool:
        """True when at least one credential names `tenant` (such a tenant is closed to
        anonymous clients)."""
        ...

    async def add_credential(self, credential: Credential) -> None:
        """Insert; raises CredentialExists when the username is taken."""
        ...

    async def put_credential(self, credential: Credential) -> None:
        """Insert or replace (passwd, ACL changes)."""
        ...

    async def delete_credential(self, username: str) -> bool:
        """True when a credential was removed."""
        ...

    async def get_tenant(self, name: str) -> Tenant | None: ...

    async def list_tenants(self) -> list[Tenant]:
        """Every tenant with a stored quota, ordered by name."""
        ...

    async def put_tenant(self, tenant: Tenant) -> None:
        """Insert or replace the tenant's quota."""
        ...

    async def delete_tenant(self, name: str) -> bool:
        """True when a tenant row was removed (its clients fall back to the default quota)."""
        ...
