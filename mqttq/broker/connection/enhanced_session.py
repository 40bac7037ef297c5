"""EnhancedSession: what one connection keeps of its MQTT 5 enhanced authentication (SCRAM).

The exchange (protocol/enhanced_auth.py's `EnhancedAuth`), the store a re-authentication
reads the credential from, the identity a re-authentication proves, and the server's final
message for the CONNACK. A connection holds one from its CONNECT's exchange on
(`ClientLink.enhanced`); broker/connection/enhanced.py runs the exchanges.
"""

from __future__ import annotations

import secrets
from typing import Final

from mqttq.auth.identity import Identity
from mqttq.auth.ports import AuthStore
from mqttq.auth.scram import ScramSecret, scram_mechanisms
from mqttq.codec.properties import Properties
from mqttq.protocol.enhanced_auth import EnhancedAuth

__all__ = ["EnhancedSession"]

_DECOY_KEY: Final = secrets.token_bytes(32)
"""This process's secret for the salts of unknown users (immutable, made at import)."""


class EnhancedSession:
    """A connection's enhanced authentication: its exchange, who it authenticated as and
    the store re-authentications read. `connack_data` is the server's final message for
    the CONNACK, taken once by `connack_properties`."""

    __slots__ = ("client_id", "connack_data", "exchange", "pending_identity", "store")

    def __init__(self, store: AuthStore, client_id: str) -> None:
        self.exchange: EnhancedAuth[ScramSecret] = EnhancedAuth(scram_mechanisms(_DECOY_KEY))
        self.store = store
        self.client_id = client_id
        self.connack_data: bytes | None = None
        self.pending_identity: Identity | None = None
        """A re-authentication's Identity (the credential's current ACLs), in force once
        the proof is checked."""

    def connack_properties(self, properties: Properties) -> None:
        """Add the Authentication Method (the CONNECT's) and the server's final message
        to the CONNACK's properties (MQTT 5.0 3.2.2.3.17, 3.2.2.3.18)."""
        if self.connack_data is not None:
            properties.authentication_method = self.exchange.method
            properties.authentication_data = self.connack_data
            self.connack_data = None
