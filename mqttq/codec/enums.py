"""MQTT constants: packet types, protocol levels, property identifiers, limits.

The reason codes live on the ground floor, in `mqttq.reasons` (`mqttq.errors` needs them);
they are re-exported here beside the other wire constants.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

from mqttq.reasons import ConnackReturnCode, ReasonCode

__all__ = [
    "MAX_PACKET_ID",
    "MAX_VARINT",
    "SESSION_EXPIRY_NEVER",
    "ConnackReturnCode",
    "PacketType",
    "PropertyId",
    "ProtocolLevel",
    "QoS",
    "ReasonCode",
    "RetainHandling",
]


class ProtocolLevel(IntEnum):
    """The protocol level byte of CONNECT [MQTT-3.1.2-2]."""

    MQTT_3_1 = 3  # protocol name "MQIsdp"
    MQTT_3_1_1 = 4
    MQTT_5 = 5


class PacketType(IntEnum):
    """Control packet type, the high nibble of the fixed header [MQTT-2.1.2]."""

    CONNECT = 1
    CONNACK = 2
    PUBLISH = 3
    PUBACK = 4
    PUBREC = 5
    PUBREL = 6
    PUBCOMP = 7
    SUBSCRIBE = 8
    SUBACK = 9
    UNSUBSCRIBE = 10
    UNSUBACK = 11
    PINGREQ = 12
    PINGRESP = 13
    DISCONNECT = 14
    AUTH = 15


class QoS(IntEnum):
    AT_MOST_ONCE = 0
    AT_LEAST_ONCE = 1
    EXACTLY_ONCE = 2


class RetainHandling(IntEnum):
    """Subscription option bits 4-5 [MQTT-3.8.3.1]."""

    SEND_ON_SUBSCRIBE = 0
    SEND_IF_NEW_SUBSCRIPTION = 1
    DO_NOT_SEND = 2


class PropertyId(IntEnum):
    """MQTT 5.0 property identifiers [MQTT-2.2.2.2]."""

    PAYLOAD_FORMAT_INDICATOR = 0x01
    MESSAGE_EXPIRY_INTERVAL = 0x02
    CONTENT_TYPE = 0x03
    RESPONSE_TOPIC = 0x08
    CORRELATION_DATA = 0x09
    SUBSCRIPTION_IDENTIFIER = 0x0B
    SESSION_EXPIRY_INTERVAL = 0x11
    ASSIGNED_CLIENT_IDENTIFIER = 0x12
    SERVER_KEEP_ALIVE = 0x13
    AUTHENTICATION_METHOD = 0x15
    AUTHENTICATION_DATA = 0x16
    REQUEST_PROBLEM_INFORMATION = 0x17
    WILL_DELAY_INTERVAL = 0x18
    REQUEST_RESPONSE_INFORMATION = 0x19
    RESPONSE_INFORMATION = 0x1A
    SERVER_REFERENCE = 0x1C
    REASON_STRING = 0x1F
    RECEIVE_MAXIMUM = 0x21
    TOPIC_ALIAS_MAXIMUM = 0x22
    TOPIC_ALIAS = 0x23
    MAXIMUM_QOS = 0x24
    RETAIN_AVAILABLE = 0x25
    USER_PROPERTY = 0x26
    MAXIMUM_PACKET_SIZE = 0x27
    WILDCARD_SUBSCRIPTION_AVAILABLE = 0x28
    SUBSCRIPTION_IDENTIFIER_AVAILABLE = 0x29
    SHARED_SUBSCRIPTION_AVAILABLE = 0x2A


SESSION_EXPIRY_NEVER = 0xFFFFFFFF
"""Session Expiry Interval meaning 'does not expire' [MQTT-3.1.2.11.2]."""

MAX_PACKET_ID: Final = 65535
"""The largest Packet Identifier; ids run 1..65535 and wrap back to 1 [MQTT-2.2.1]."""

MAX_VARINT = 268_435_455
