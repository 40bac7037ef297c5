"""CONNECT negotiation: client identifier, session expiry, keep alive and CONNACK properties.

Pure: the broker supplies its limits as a `ConnectPolicy` and a function that makes a new
unique client identifier; `negotiate` either returns what was agreed or raises
ProtocolError with the reason code for the refusing CONNACK.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from mqttq.codec.enums import SESSION_EXPIRY_NEVER, ProtocolLevel
from mqttq.codec.packets import ConnectPacket
from mqttq.codec.properties import Properties
from mqttq.errors import ProtocolError
from mqttq.protocol.enhanced_auth import AUTHENTICATION_METHODS
from mqttq.reasons import ReasonCode

__all__ = ["INTEGRATION_CLIENT_PREFIX", "ConnectDecision", "ConnectPolicy", "negotiate"]

INTEGRATION_CLIENT_PREFIX: Final = "$integration/"
"""Client ids of the broker's own integration sessions (`$integration/<name>`): no MQTT
client may connect with one, or it could take an integration's backlog."""


@dataclass(frozen=True, slots=True)
class ConnectPolicy:
    """The broker's side of the negotiation (plain values from the [mqtt] settings)."""

    max_keep_alive: int = 600
    max_session_expiry_interval: int = SESSION_EXPIRY_NEVER
    max_client_id_length: int = 65535
    allow_empty_client_id: bool = True
    receive_maximum: int = 1024
    max_packet_size: int = 1_048_576
    topic_alias_maximum: int = 64
    maximum_qos: int = 2
    retain_available: bool = True
    wildcard_subscription_available: bool = True
    subscription_identifier_available: bool = True
    shared_subscription_available: bool = True


@dataclass(slots=True)
class ConnectDecision:
    """What the broker agreed to for an accepted CONNECT."""

    client_id: str
    clean_start: bool
    session_expiry_interval: int
    """Seconds after disconnect the session lives; 0 = ends with the connection."""
    keep_alive: int
    """Seconds enforced (x 1.5) [MQTT-3.1.2-24]; 0 = none."""
    connack_properties: Properties = field(default_factory=Properties)

    @property
    def persistent(self) -> bool:
        return self.session_expiry_interval > 0


def negotiate(
    packet: ConnectPacket, policy: ConnectPolicy, new_client_id: Callable[[], str]
) -> ConnectDecision:
    """Apply the client-identifier, session and keep-alive rules to a CONNECT.

    Raises ProtocolError with CLIENT_IDENTIFIER_NOT_VALID (3.x: return code 2), BAD_
    AUTHENTICATION_METHOD, QOS_NOT_SUPPORTED or RETAIN_NOT_SUPPORTED (will) when refused.
    """
    level = packet.protocol_level
    v5 = level == ProtocolLevel.MQTT_5
    props = packet.properties
    client_id = packet.client_id
    reply = Properties()
    method = props.authentication_method
    if v5 and method is not None and method not in AUTHENTICATION_METHODS:
        # The exchange of a supported method is the admission's (protocol/enhanced_auth.py).
        raise ProtocolError(
            ReasonCode.BAD_AUTHENTICATION_METHOD,
            f"authentication method {method!r} not supported",
        )
    if not client_id:
        # 5.0 and 3.1.1 with clean session get an assigned id [MQTT-3.1.3-6]; 3.1.1
        # without clean session gets return code 2 (3.1.1's [MQTT-3.1.3-8]); 3.1 too.
        if not policy.allow_empty_client_id or level == ProtocolLevel.MQTT_3_1:
            raise ProtocolError(ReasonCode.CLIENT_IDENTIFIER_NOT_VALID, "empty client id")
        if not v5 and not packet.clean_start:
            raise ProtocolError(
                ReasonCode.CLIENT_IDENTIFIER_NOT_VALID,
                "empty client id needs clean session = 1 (3.1.1 [MQTT-3.1.3-8])",
            )
        client_id = new_client_id()
        if v5:
            reply.assigned_client_identifier = client_id  # [MQTT-3.2.2-16]
    elif len(client_id.encode()) > policy.max_client_id_length:
        raise ProtocolError(
            ReasonCode.CLIENT_IDENTIFIER_NOT_VALID,
            f"client id longer than {policy.max_client_id_length} bytes",
        )
    elif client_id.startswith(INTEGRATION_CLIENT_PREFIX):
        raise ProtocolError(
            ReasonCode.CLIENT_IDENTIFIER_NOT_VALID,
            f"client ids starting with {INTEGRATION_CLIENT_PREFIX!r} are the broker's own",
        )
    will = packet.will
    if will is not None:
        if will.qos > policy.maximum_qos:
            raise ProtocolError(ReasonCode.QOS_NOT_SUPPORTED, "will QoS above Maximum QoS")
        if will.retain and not policy.retain_available:
            raise ProtocolError(ReasonCode.RETAIN_NOT_SUPPORTED, "retained will not available")

    if v5:
        asked = props.session_expiry_interval or 0
    else:
        asked = 0 if packet.clean_start else SESSION_EXPIRY_NEVER
    expiry = min(asked, policy.max_session_expiry_interval)
    if v5 and expiry != asked:
        reply.session_expiry_interval = expiry

    keep_alive = packet.keep_alive
    if v5 and policy.max_keep_alive and (keep_alive == 0 or keep_alive > policy.max_keep_alive):
        # The client must use the Server Keep Alive instead [MQTT-3.2.2-21].
        keep_alive = policy.max_keep_alive
        reply.server_keep_alive = keep_alive

    if v5:
        reply.receive_maximum = policy.receive_maximum
        reply.maximum_packet_size = policy.max_packet_size
        reply.topic_alias_maximum = policy.topic_alias_maximum
        if policy.maximum_qos < 2:
            reply.maximum_qos = policy.maximum_qos
        if not policy.retain_available:
            reply.retain_available = 0
        reply.wildcard_subscription_available = int(policy.wildcard_subscription_available)
        reply.subscription_identifier_available = int(policy.subscription_identifier_available)
        reply.shared_subscription_available = int(policy.shared_subscription_available)
    return ConnectDecision(client_id, packet.clean_start, expiry, keep_alive, reply)
