"""Sans-I/O MQTT connection machinery: the state table, MqttConnection, CONNECT
negotiation, packet-id/QoS windows and topic aliases. No asyncio, no clock: time is passed in.
"""

from __future__ import annotations

from mqttq.protocol.connect import ConnectDecision, ConnectPolicy, negotiate
from mqttq.protocol.connection import ConnectionLimits, MqttConnection
from mqttq.protocol.state import TRANSITIONS, ConnState, next_state

__all__ = [
    "TRANSITIONS",
    "ConnState",
    "ConnectDecision",
    "ConnectPolicy",
    "ConnectionLimits",
    "MqttConnection",
    "negotiate",
    "next_state",
]
