"""Admission of a CONNECT: who the client is (credentials or the anonymous policy), its
tenant, its will against its publish ACL, and the connection rate (node, then tenant; a
bounded wait for a token, then 0x9F). The count limits come later, with the session."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from mqttq.auth.authenticator import AuthRefusal, Identity
from mqttq.auth.model import DEFAULT_TENANT
from mqttq.auth.ports import AuthStoreError
from mqttq.broker.net.tls import certificate_common_name
from mqttq.codec.packets import ConnectPacket
from mqttq.limits.limiter import Limits, Refused
from mqttq.reasons import ReasonCode

if TYPE_CHECKING:
    from mqttq.auth.authenticator import Authenticator
    from mqttq.broker.connection.client import Client

__all__ = ["admit", "tenant_property"]

logger = logging.getLogger("mqttq.broker.session")


async def admit(
    client: Client,
    packet: ConnectPacket,
    client_id: str,
    authenticator: Authenticator,
    limits: Limits,
) -> Identity | None:
    """The client's identity once it may go on to its session; None when the CONNECT was
    refused (0x86 bad user name or password, 0x87 not authorized, 0x88 credential store
    down, 0x9F connection rate exceeded; the 3.x return codes for those). On a listener
    with `identity_as_username` the certificate's CN is the user name, and the CONNECT's
    user name and password are not used."""
    tenant_hint = tenant_property(packet)
    result: Identity | AuthRefusal
    try:
        if client.listener.identity_as_username:
            common_name = certificate_common_name(client.transport)
            if common_name is None:
                client.refuse(ReasonCode.NOT_AUTHORIZED, "the client certificate has no CN")
                return None
            result = await authenticator.authenticate_certificate(
                username=common_name, client_id=client_id, tenant_property=tenant_hint
            )
        else:
            result = await authenticator.authenticate(
                username=packet.username,
                password=packet.password,
                client_id=client_id,
                tenant_property=tenant_hint,
                local_is_loopback=client.local_is_loopback,
            )
    except AuthStoreError as error:
        logger.warning("client %r: credential store failed: %s", client_id, error)
        client.refuse(ReasonCode.SERVER_UNAVAILABLE, "credential store unavailable")
        return None
    if isinstance(result, AuthRefusal):
        limits.count_refusal(result.tenant or DEFAULT_TENANT, result.reason)
        client.refuse(result.reason_code, result.message)
        return None
    will = packet.will
    if will is not None and not result.may_publish(will.topic):
        limits.count_refusal(result.tenant, "acl_publish")
        client.refuse(ReasonCode.NOT_AUTHORIZED, "the will topic is not allowed")
        return None
    loop = asyncio.get_running_loop()
    admitted = limits.admit_connect(result.tenant, loop.time())
    if isinstance(admitted, Refused):
        client.refuse(
            ReasonCode.CONNECTION_RATE_EXCEEDED, f"{admitted.layer} connection rate exceeded"
        )
        return None
    if admitted > 0:
        await asyncio.sleep(admitted)  # the token is ours; the wait was bounded
    return result


def tenant_property(packet: ConnectPacket) -> str | None:
    """The CONNECT's `tenant` user property (5.0), used for clients without credentials."""
    for name, value in packet.properties.user_properties:
        if name == "tenant" and value:
            return value
    return None
