"""Which end reason each way of closing a connection gets (no I/O): the reason codes the
broker kicks with, the client's DISCONNECT codes and the protocol faults."""

from __future__ import annotations

import pytest

from mqttq.broker.sessions.end_reasons import (
    client_disconnect_reason,
    error_reason,
    kick_reason,
)
from mqttq.reasons import ReasonCode


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (ReasonCode.SESSION_TAKEN_OVER, "taken_over"),
        (ReasonCode.ADMINISTRATIVE_ACTION, "kicked"),
        (ReasonCode.SERVER_SHUTTING_DOWN, "server_shutting_down"),
        (ReasonCode.MAXIMUM_CONNECT_TIME, "token_expired"),
        (ReasonCode.QUOTA_EXCEEDED, "server_disconnect"),
        (ReasonCode.SERVER_UNAVAILABLE, "server_disconnect"),
    ],
)
def test_kick_reasons(code: ReasonCode, reason: str) -> None:
    assert kick_reason(code) == reason


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (0x00, "normal"),
        (0x04, "disconnect_with_will"),
        (0x80, "client_error"),
        (0x99, "client_error"),
    ],
)
def test_client_disconnect_reasons(code: int, reason: str) -> None:
    assert client_disconnect_reason(code) == reason


def test_error_reasons() -> None:
    assert error_reason(ReasonCode.KEEP_ALIVE_TIMEOUT) == "keep_alive_timeout"
    assert error_reason(ReasonCode.PROTOCOL_ERROR) == "protocol_error"
    assert error_reason(ReasonCode.MALFORMED_PACKET) == "protocol_error"
