"""The `credentials` provider: the credential store and the anonymous policy, as before
providers existed (`mqttq.auth.authenticator.Authenticator`); it never skips."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mqttq.auth.providers.base import AuthRequest, Decision, not_authorized

if TYPE_CHECKING:
    from mqttq.auth.authenticator import Authenticator

__all__ = ["CredentialsProvider"]

_NO_CN = not_authorized("the client certificate has no CN")


class CredentialsProvider:
    """User name and password against the store; on a listener with
    `identity_as_username`, the certificate's CN as the user name, without a password.
    Not cached by the chain: the Authenticator remembers verified hashes itself, and a
    password change takes effect at once."""

    name = "credentials"
    cacheable = False

    def __init__(self, authenticator: Authenticator) -> None:
        self.authenticator = authenticator

    async def open(self) -> None:
        """Nothing to open: the broker opens the store."""

    async def close(self) -> None:
        """Nothing to close: the broker closes the store."""

    async def authenticate(self, request: AuthRequest) -> Decision:
        """Allow or deny (0x86 / 0x87); raises AuthStoreError when the store is down."""
        if request.identity_as_username:
            if request.cert_cn is None:
                return _NO_CN
            return await self.authenticator.authenticate_certificate(
                username=request.cert_cn,
                client_id=request.client_id,
                tenant_property=request.tenant_property,
            )
        return await self.authenticator.authenticate(
            username=request.username,
            password=request.password,
            client_id=request.client_id,
            tenant_property=request.tenant_property,
            local_is_loopback=request.local_is_loopback,
        )
