"""EmptyAuthStore: the AuthStore of a broker built without one (tests, embedding code):
it knows no credentials and no tenants, and refuses writes."""

from __future__ import annotations

from mqttq.auth.model import Credential, Tenant
from mqttq.auth.ports import AuthStoreError

__all__ = ["EmptyAuthStore"]

_NO_STORE = "no credential store is configured for this broker"


class EmptyAuthStore:
    """Reads find nothing; writes raise AuthStoreError (nothing would keep them)."""

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def get_credential(self, username: str) -> Credential | None:
        return None

    async def list_credentials(self, tenant: str | None = None) -> list[Credential]:
        return []

    async def tenant_has_credentials(self, tenant: str) -> bool:
        return False

    async def add_credential(self, credential: Credential) -> None:
        raise AuthStoreError(_NO_STORE)

    async def put_credential(self, credential: Credential) -> None:
        raise AuthStoreError(_NO_STORE)

    async def delete_credential(self, username: str) -> bool:
        return False

    async def get_tenant(self, name: str) -> Tenant | None:
        return None

    async def list_tenants(self) -> list[Tenant]:
        return []

    async def put_tenant(self, tenant: Tenant) -> None:
        raise AuthStoreError(_NO_STORE)

    async def delete_tenant(self, name: str) -> bool:
        return False
