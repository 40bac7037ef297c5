"""MQTT 5 enhanced authentication (SCRAM) on a real connection: the asyncio side of
protocol/enhanced_auth.py's EnhancedAuth.

During CONNECT (`authenticate_connect`, called by the admission in place of the provider
chain when the CONNECT carries an Authentication Method): the client's first message
names a user; the blocked-clients provider is asked about that user, the credential is
read from the store, AUTH 0x18 carries the server's challenge, and the client's next
packet must be its AUTH 0x18 answer (a DISCONNECT ends the attempt; anything else is
0x82; nothing within the connect timeout closes it). Success gives the credential's
Identity, and the server's final message rides on the CONNACK (`connack_properties`).

On the live connection (`on_auth`, the dispatch table's AUTH handler): AUTH 0x19 starts a
re-authentication of the same user [MQTT-4.12.1]; the client goes on publishing while it
runs; success is AUTH 0x00 with the server's final message and the credential's current
ACLs; failure is DISCONNECT 0x87 (0x8C for a changed method, 0x82 out of order). An AUTH
on a connection whose CONNECT had no Authentication Method is 0x82 [MQTT-4.12.0-1].

What a connection keeps of its exchange is an `EnhancedSession`
(broker/connection/enhanced_session.py); the connection is a `ClientLink`
(broker/connection/link.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import TYPE_CHECKING

from mqttq.auth.acl import client_id_allowed
from mqttq.auth.identity import AuthRefusal, Identity, credential_identity
from mqttq.auth.model import Credential
from mqttq.auth.ports import AuthStore, AuthStoreError
from mqttq.auth.providers.base import AuthRequest, Skip
from mqttq.auth.scram import ScramSecret
from mqttq.broker.connection.enhanced_session import EnhancedSession
from mqttq.codec.packets import AuthPacket, DisconnectPacket
from mqttq.codec.properties import Properties
from mqttq.errors import ProtocolError
from mqttq.protocol.enhanced_auth import Authenticated, LookUp
from mqttq.reasons import ReasonCode

if TYPE_CHECKING:
    from mqttq.auth.providers.chain import ProviderChain
    from mqttq.broker.connection.link import ClientLink

__all__ = ["authenticate_connect", "on_auth"]

logger = logging.getLogger("mqttq.broker.session")


def _refusal(error: ProtocolError) -> AuthRefusal:
    reasons = {
        ReasonCode.BAD_USER_NAME_OR_PASSWORD: "bad_credentials",
        ReasonCode.BAD_AUTHENTICATION_METHOD: "bad_authentication_method",
        ReasonCode.NOT_AUTHORIZED: "not_authorized",
    }
    return AuthRefusal(
        error.reason_code, reasons.get(error.reason_code, "protocol_error"), error.message
    )


async def _secret(
    store: AuthStore, method: str, username: str
) -> tuple[Credential | None, ScramSecret | None]:
    credential = await store.get_credential(username)
    return credential, None if credential is None else credential.scram_secret(method)


async def authenticate_connect(
    client: ClientLink,
    request: AuthRequest,
    store: AuthStore,
    chain: ProviderChain,
    timeout: float,
) -> Identity | AuthRefusal | None:
    """Run the CONNECT's exchange (see the module docstring): the Identity, a refusal for
    the CONNACK, or None when the client went away (nothing left to answer). Raises
    AuthStoreError when the store cannot be read (the admission answers 0x88)."""
    result = await _exchange(client, request, store, chain, timeout)
    if result is not None:
        chain.count("scram", "allow" if isinstance(result, Identity) else "deny")
    return result


async def _exchange(
    client: ClientLink,
    request: AuthRequest,
    store: AuthStore,
    chain: ProviderChain,
    timeout: float,
) -> Identity | AuthRefusal | None:
    """`authenticate_connect`, uncounted."""
    method = request.authentication_method
    assert method is not None  # called only for a CONNECT with one
    session = EnhancedSession(store, request.client_id)
    exchange = session.exchange
    try:
        look_up = exchange.connect(method, request.authentication_data)
        username = look_up.username
        blocked = chain.provider("blocked")
        if blocked is not None:
            decision = await blocked.authenticate(dataclasses.replace(request, username=username))
            if not isinstance(decision, Skip):
                return decision
        credential, secret = await _secret(store, method, username)
        client.send(
            AuthPacket(
                ReasonCode.CONTINUE_AUTHENTICATION,
                Properties(
                    authentication_method=method,
                    authentication_data=exchange.credential(secret).data,
                ),
            )
        )
        client.flush_now()
        try:
            packet = await asyncio.wait_for(client.wait_packet(), timeout)
        except TimeoutError:
            client.close()
            return None
        if packet is None or type(packet) is DisconnectPacket:
            return None
        if type(packet) is not AuthPacket:
            name = packet.packet_type.name
            raise ProtocolError(ReasonCode.PROTOCOL_ERROR, f"{name} during enhanced authentication")
        done = exchange.receive_auth(packet)
    except ProtocolError as error:
        return _refusal(error)
    assert isinstance(done, Authenticated)  # AUTH 0x18 in AWAIT_FINAL gives nothing else
    if credential is None:  # removed during the exchange
        return _refusal(ProtocolError(ReasonCode.BAD_USER_NAME_OR_PASSWORD, "no such user"))
    if not client_id_allowed(credential.client_id_pattern, request.client_id):
        return AuthRefusal(
            ReasonCode.NOT_AUTHORIZED,
            "not_authorized",
            "client id not allowed for this user name",
            credential.tenant,
        )
    session.connack_data = done.data
    client.enhanced = session
    return credential_identity(credential, request.client_id, done.username)


def on_auth(client: ClientLink, packet: AuthPacket) -> None:
    """An AUTH on a live connection (see the module docstring); raises ProtocolError for
    the client to be disconnected with its reason code."""
    session = client.enhanced
    if session is None:
        raise ProtocolError(
            ReasonCode.PROTOCOL_ERROR,
            "AUTH on a connection without enhanced authentication [MQTT-4.12.0-1]",
        )
    step = session.exchange.receive_auth(packet)
    if isinstance(step, LookUp):
        task = client.loop.create_task(_challenge(client, session, step.username))
        task.add_done_callback(_reported)
        return
    if session.pending_identity is not None:
        client.identity = session.pending_identity
        session.pending_identity = None
    client.send(
        AuthPacket(
            ReasonCode.SUCCESS,
            Properties(
                authentication_method=session.exchange.method, authentication_data=step.data
            ),
        )
    )
    logger.info("client %r re-authenticated as %r", client.client_id, step.username)


async def _challenge(client: ClientLink, session: EnhancedSession, username: str) -> None:
    """Read the user's credential, check it still fits the connection, send AUTH 0x18."""
    exchange = session.exchange
    try:
        credential, secret = await _secret(session.store, exchange.method, username)
    except AuthStoreError as error:
        logger.warning("client %r: credential store failed: %s", client.client_id, error)
        if not client.closed:
            client.fail(ProtocolError(ReasonCode.UNSPECIFIED_ERROR, "credential store unavailable"))
        return
    if client.closed:
        return
    current = client.identity
    if credential is not None and current is not None:
        fresh = credential_identity(credential, session.client_id, username)
        if fresh.tenant != current.tenant or not client_id_allowed(
            credential.client_id_pattern, session.client_id
        ):
            client.fail(ProtocolError(ReasonCode.NOT_AUTHORIZED, "credential no longer fits"))
            return
        session.pending_identity = fresh  # the credential's current ACLs, once proven
    try:
        data = exchange.credential(secret).data
    except ProtocolError as error:
        client.fail(error)
        return
    client.send(
        AuthPacket(
            ReasonCode.CONTINUE_AUTHENTICATION,
            Properties(authentication_method=exchange.method, authentication_data=data),
        )
    )


def _reported(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and (error := task.exception()) is not None:
        logger.error("re-authentication failed", exc_info=error)
