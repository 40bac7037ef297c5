"""Why a connection ended, as the `disconnected` client event names it.

The connection notes its reason where it ends (a DISCONNECT read, a kick, a protocol
error, the socket gone), once per connection and never on the per-message path; the
`disconnected` event carries it with the MQTT reason code where there is one.
"""

from __future__ import annotations

from typing import Final

from mqttq.reasons import ReasonCode

__all__ = [
    "BLOCKED",
    "CLIENT_ERROR",
    "CONNECTION_LOST",
    "DISCONNECT_WITH_WILL",
    "KEEP_ALIVE_TIMEOUT",
    "KICKED",
    "NORMAL",
    "PROTOCOL_ERROR",
    "SERVER_DISCONNECT",
    "SERVER_SHUTTING_DOWN",
    "TAKEN_OVER",
    "TOKEN_EXPIRED",
    "client_disconnect_reason",
    "error_reason",
    "kick_reason",
]

NORMAL: Final = "normal"
"""The client sent DISCONNECT 0x00 (at 3.1.1: any DISCONNECT)."""
DISCONNECT_WITH_WILL: Final = "disconnect_with_will"
"""The client sent DISCONNECT 0x04: close, and publish my will."""
CLIENT_ERROR: Final = "client_error"
"""The client sent DISCONNECT with an error reason code (0x80 and above)."""
KEEP_ALIVE_TIMEOUT: Final = "keep_alive_timeout"
"""Nothing received for 1.5 x the keep alive [MQTT-3.1.2-24]."""
PROTOCOL_ERROR: Final = "protocol_error"
"""The client broke the protocol; the reason code says how."""
TAKEN_OVER: Final = "taken_over"
"""Another connection with the same client id took the session over [MQTT-3.1.4-3]."""
KICKED: Final = "kicked"
"""An administrator disconnected the client or removed its session."""
BLOCKED: Final = "blocked"
"""The client matched an entry added to the blocked list."""
TOKEN_EXPIRED: Final = "token_expired"
"""The credential it authenticated with (a JWT's `exp`) expired."""
SERVER_SHUTTING_DOWN: Final = "server_shutting_down"
"""The broker is stopping."""
SERVER_DISCONNECT: Final = "server_disconnect"
"""The broker closed the connection for another reason, named by the reason code (a
3.1.1 PUBLISH refused, the message log unavailable for an APPLICATION client)."""
CONNECTION_LOST: Final = "connection_lost"
"""The socket closed without a DISCONNECT either way."""

_KICKS: Final[dict[int, str]] = {
    ReasonCode.SESSION_TAKEN_OVER: TAKEN_OVER,
    ReasonCode.ADMINISTRATIVE_ACTION: KICKED,
    ReasonCode.SERVER_SHUTTING_DOWN: SERVER_SHUTTING_DOWN,
    ReasonCode.MAXIMUM_CONNECT_TIME: TOKEN_EXPIRED,
}


def client_disconnect_reason(reason_code: int) -> str:
    """The reason of a DISCONNECT the client sent with `reason_code`."""
    if reason_code == ReasonCode.NORMAL_DISCONNECTION:
        return NORMAL
    if reason_code == ReasonCode.DISCONNECT_WITH_WILL_MESSAGE:
        return DISCONNECT_WITH_WILL
    return CLIENT_ERROR


def kick_reason(reason_code: int) -> str:
    """The reason of a server-side close with `reason_code` (a caller that knows better,
    the blocked list, names its own)."""
    return _KICKS.get(reason_code, SERVER_DISCONNECT)


def error_reason(reason_code: int) -> str:
    """The reason of a close for a client's protocol fault answered with `reason_code`."""
    if reason_code == ReasonCode.KEEP_ALIVE_TIMEOUT:
        return KEEP_ALIVE_TIMEOUT
    return PROTOCOL_ERROR
