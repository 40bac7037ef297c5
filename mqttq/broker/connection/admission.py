"""Admission of a CONNECT: who the client is (the authentication provider chain: blocked
list, then `[auth] providers`; or, for a CONNECT with an Authentication Method, the SCRAM
exchange of broker/connection/enhanced.py), its tenant, its will against its publish ACL, and the
connection rate (node, then tenant; a bounded wait for a token, then 0x9F). The count
limits come later, with the session. An identity that expires (a token's `exp`) closes
the connection then, with 0xA0 Maximum connect time on 5.0. The connection is a
`ClientLink` (broker/connection/link.py), what admission needs of it."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, cast

from mqttq.auth.blocked.service import BlockedClients
from mqttq.auth.identity import AuthRefusal, Identity
from mqttq.auth.model import DEFAULT_TENANT
from mqttq.auth.ports import AuthStoreError
from mqttq.auth.providers.base import AuthRequest
from mqttq.auth.providers.chain import ProviderChain
from mqttq.auth.providers.credentials import CredentialsProvider
from mqttq.broker.connection.enhanced import authenticate_connect
from mqttq.broker.net.tls import certificate_common_name
from mqttq.codec.packets import ConnectPacket
from mqttq.limits.limiter import Limits, Refused
from mqttq.reasons import ReasonCode

if TYPE_CHECKING:
    from mqttq.auth.authenticator import Authenticator
    from mqttq.broker.connection.link import ClientLink

__all__ = ["address_refused", "admit", "auth_request", "chain_of", "tenant_property"]

logger = logging.getLogger("mqttq.broker.session")


async def admit(
    client: ClientLink,
    packet: ConnectPacket,
    client_id: str,
    authenticator: Authenticator,
    limits: Limits,
) -> Identity | None:
    """The client's identity once it may go on to its session; None when the CONNECT was
    refused (0x86 bad user name or password, 0x87 not authorized, 0x8A banned, 0x88 a
    store or service down, 0x9F connection rate exceeded; the 3.x return codes for
    those). On a listener with `identity_as_username` the certificate's CN is the user
    name for the credentials provider, and the CONNECT's password is not used."""
    request = auth_request(client, packet, client_id)
    chain = chain_of(authenticator)
    try:
        if request.authentication_method is None:
            result = await chain.decide(request)
        else:  # SCRAM (negotiate refused other methods with 0x8C)
            timeout = client.conn.limits.connect_timeout
            enhanced = await authenticate_connect(
                client, request, authenticator.store, chain, timeout
            )
            if enhanced is None:  # the client went away during the exchange
                return None
            result = enhanced
    except AuthStoreError as error:
        logger.warning("client %r: credential store failed: %s", client_id, error)
        code, message = ReasonCode.SERVER_UNAVAILABLE, "credential store unavailable"
        _refuse(client, chain, request, code, "unavailable", message)
        return None
    if isinstance(result, AuthRefusal):
        limits.count_refusal(result.tenant or DEFAULT_TENANT, result.reason)
        code = result.reason_code
        if code == ReasonCode.BANNED and not client.conn.is_v5:
            code = ReasonCode.NOT_AUTHORIZED  # 3.x has no "banned": return code 5
        _refuse(client, chain, request, code, result.reason, result.message)
        return None
    will = packet.will
    if will is not None and not result.may_publish(will.topic):
        limits.count_refusal(result.tenant, "acl_publish")
        message = "the will topic is not allowed"
        _refuse(client, chain, request, ReasonCode.NOT_AUTHORIZED, "acl_publish", message)
        return None
    loop = asyncio.get_running_loop()
    admitted = limits.admit_connect(result.tenant, loop.time())
    if isinstance(admitted, Refused):
        code, message = (
            ReasonCode.CONNECTION_RATE_EXCEEDED,
            f"{admitted.layer} connection rate exceeded",
        )
        _refuse(client, chain, request, code, "connection_rate", message)
        return None
    if admitted > 0:
        await asyncio.sleep(admitted)  # the token is ours; the wait was bounded
    if result.expires_at is not None:
        _close_at_expiry(client, result.expires_at, loop, authenticator.expiry_checks)
    return result


def _refuse(  # noqa: PLR0917 (what one refusal is)
    client: ClientLink,
    chain: ProviderChain,
    request: AuthRequest,
    code: ReasonCode,
    reason: str,
    message: str,
) -> None:
    """Refuse the CONNECT with `code`, after recording it in the failed-connections log
    of the blocked-clients provider (when the chain has one)."""
    blocked = chain.provider("blocked")
    if isinstance(blocked, BlockedClients):
        blocked.record_refusal(request, code, reason, message)
    client.refuse(code, message)


def address_refused(client: ClientLink, authenticator: Authenticator) -> bool:
    """True when the blocked list blocks the address a connection comes from (after a
    PROXY protocol header, the client's): the listener closes it before reading a byte.
    Counted under the default tenant as a `blocked` refusal."""
    chain = authenticator.chain
    blocked = None if chain is None else chain.provider("blocked")
    if not isinstance(blocked, BlockedClients):
        return False
    transport = client.transport
    peer = None if transport is None else transport.get_extra_info("peername")
    if not peer or not blocked.address_refused(str(peer[0])):
        return False
    client.hub.limits.count_refusal(DEFAULT_TENANT, "blocked")
    logger.debug("connection from %s closed: its address is blocked", peer[0])
    return True


def chain_of(authenticator: Authenticator) -> ProviderChain:
    """The authenticator's provider chain; the credentials provider alone when none was
    set (a broker built without `mqttq serve`'s composition)."""
    chain = authenticator.chain
    if chain is None:
        chain = authenticator.chain = ProviderChain([CredentialsProvider(authenticator)])
    return chain


def auth_request(client: ClientLink, packet: ConnectPacket, client_id: str) -> AuthRequest:
    """What the providers are asked about this CONNECT."""
    transport = client.transport
    peer = None if transport is None else transport.get_extra_info("peername")
    properties = packet.properties
    return AuthRequest(
        client_id=client_id,
        username=packet.username,
        password=packet.password,
        address=str(peer[0]) if peer else "",
        listener=client.listener.name,
        cert_cn=certificate_common_name(transport),
        tenant_property=tenant_property(packet),
        protocol_level=int(packet.protocol_level),
        authentication_method=properties.authentication_method,
        authentication_data=properties.authentication_data,
        identity_as_username=client.listener.identity_as_username,
        local_is_loopback=client.local_is_loopback,
    )


def _close_at_expiry(
    client: ClientLink, expires_at: float, loop: asyncio.AbstractEventLoop, due: dict[str, float]
) -> None:
    """Make sure the client's connection is looked at when its authentication expires.

    One check per client id is pending at a time (`due`: client id -> when): a device
    reconnecting with the same token adds nothing, and the check holds the client id, not
    the connection. At its time the check looks at whoever is connected under that id
    now: closed with 0xA0 Maximum connect time on 5.0 (a plain close on 3.x, which has no
    server DISCONNECT) when its authentication has expired, looked at again at its own
    expiry when that is later."""
    client_id = client.client_id
    pending = due.get(client_id)
    if pending is not None and pending <= expires_at:
        return  # an earlier check will look again then
    due[client_id] = expires_at
    hub = client.hub
    # At least a second: the client is attached to its session after admission, and a
    # check that ran before would not find it.
    delay = max(1.0, expires_at - time.time())

    def check() -> None:
        if due.get(client_id) == expires_at:
            del due[client_id]
        session = hub.sessions.get(client_id)
        connected = None if session is None else session.client
        identity: Identity | None = getattr(connected, "identity", None)
        if connected is None or identity is None or identity.expires_at is None:
            return
        if identity.expires_at <= time.time():
            logger.info("client %r: authentication expired, disconnecting", client_id)
            connected.kick(ReasonCode.MAXIMUM_CONNECT_TIME, "authentication expired")
        else:
            _close_at_expiry(cast("ClientLink", connected), identity.expires_at, loop, due)

    loop.call_later(delay, check)


def tenant_property(packet: ConnectPacket) -> str | None:
    """The CONNECT's `tenant` user property (5.0), used for clients without credentials."""
    for name, value in packet.properties.user_properties:
        if name == "tenant" and value:
            return value
    return None
