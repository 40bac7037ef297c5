"""Exception hierarchy. Every protocol error carries the MQTT reason code to send."""

from __future__ import annotations

from mqttq.reasons import ReasonCode


class MqttqError(Exception):
    """Root of every error mqttq raises on purpose."""


class Incomplete(MqttqError):
    """The buffer ends before the value does; feed more bytes and try again."""


class ProtocolError(MqttqError):
    """A peer broke the MQTT rules; `reason_code` is what goes on the wire (5.0).

    For 3.x clients the broker closes the connection instead (3.1.1 has no DISCONNECT
    from the server).
    """

    def __init__(self, reason_code: ReasonCode, message: str) -> None:
        super().__init__(message)
        self.reason_code = reason_code
        self.message = message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.reason_code.name}, {self.message!r})"


class MalformedPacket(ProtocolError):
    """Bytes that do not decode to a valid packet [MQTT-4.13]."""

    def __init__(self, message: str) -> None:
        super().__init__(ReasonCode.MALFORMED_PACKET, message)


class PacketTooLarge(ProtocolError):
    """A packet larger than the Maximum Packet Size this side announced."""

    def __init__(self, message: str) -> None:
        super().__init__(ReasonCode.PACKET_TOO_LARGE, message)


class ConfigError(MqttqError):
    """Bad configuration; the message names the key and the problem."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"config key {key!r}: {problem}")
        self.key = key
        self.problem = problem


class StorageError(MqttqError):
    """A storage backend failed; the operation did not take effect."""
