"""MQTT over WebSocket (RFC 6455, subprotocol `mqtt`) [MQTT-6.0.0].

`WebSocketConnection` sits between the network transport (plain TCP, or TLS for wss) and
the same `Client` protocol object TCP clients get: it answers the HTTP upgrade on the
configured path, then hands the payload of every binary frame to the client as a plain
byte stream (an MQTT packet may span frames, and a frame may hold several packets), and
frames what the client writes as binary messages. The frame codec is websockets' sans-I/O
`ServerProtocol`; flow control (pause/resume of reading and writing, buffer limits) is
the underlying transport's, passed through.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, Final, cast

from websockets.exceptions import NegotiationError
from websockets.frames import Frame, Opcode
from websockets.http11 import Request
from websockets.protocol import State
from websockets.server import ServerProtocol
from websockets.typing import Subprotocol

__all__ = ["SUBPROTOCOLS", "WebSocketConnection", "WebSocketTransport"]

logger = logging.getLogger("mqttq.broker.websocket")

SUBPROTOCOLS: Final = (Subprotocol("mqtt"), Subprotocol("mqttv3.1"))
"""`mqtt` [MQTT-6.0.0-3]; `mqttv3.1` is what MQTT 3.1 clients ask for."""
CLOSE_NORMAL: Final = 1000
CLOSE_UNSUPPORTED_DATA: Final = 1003
"""A text frame: MQTT is sent in binary frames only [MQTT-6.0.0-1]."""
CLOSE_TIMEOUT: Final = 2.0
"""Seconds the broker waits for the client's Close frame after sending its own; frames
arriving meanwhile are read and dropped, so the client reads what was sent before the
Close (a DISCONNECT's reason code) instead of a reset."""


class WebSocketTransport(asyncio.Transport):
    """The transport an MQTT `Client` writes to on a WebSocket connection: every write
    becomes one binary message; everything else is the network transport's."""

    def __init__(self, connection: WebSocketConnection, raw: asyncio.Transport) -> None:
        super().__init__()
        self._connection = connection
        self._raw = raw
        self._closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._raw.get_extra_info(name, default)

    def is_closing(self) -> bool:
        return self._closing or self._raw.is_closing()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self.is_closing():
            self._connection.send_binary(bytes(data))

    def close(self) -> None:
        """Send a Close frame (1000), then close the network connection."""
        if not self._closing:
            self._closing = True
            self._connection.close(CLOSE_NORMAL)

    def abort(self) -> None:
        self._closing = True
        self._raw.abort()

    def can_write_eof(self) -> bool:
        return False

    def pause_reading(self) -> None:
        self._raw.pause_reading()

    def resume_reading(self) -> None:
        self._raw.resume_reading()

    def is_reading(self) -> bool:
        return self._raw.is_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._raw.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self._raw.get_write_buffer_size()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._connection.app = cast(asyncio.Protocol, protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._connection.app or self._connection


class WebSocketConnection(asyncio.Protocol):
    """One WebSocket connection (see the module docstring). `app_factory` makes the MQTT
    protocol once the upgrade on `path` succeeded; `max_size` bounds one message; a
    connection not upgraded within `upgrade_timeout` seconds is closed (the MQTT connect
    timeout only starts with the MQTT protocol)."""

    __slots__ = ("_app_factory", "_path", "_raw", "_timeout", "_upgrade_timer", "_ws", "app")

    def __init__(
        self,
        app_factory: Callable[[], asyncio.Protocol],
        path: str,
        max_size: int,
        upgrade_timeout: float,
    ) -> None:
        self._app_factory = app_factory
        self._path = path
        self._timeout = upgrade_timeout
        self._upgrade_timer: asyncio.TimerHandle | None = None
        self._ws = ServerProtocol(
            subprotocols=list(SUBPROTOCOLS),
            select_subprotocol=_select_subprotocol,
            max_size=max_size,
            logger=logger,
        )
        self._raw: asyncio.Transport | None = None
        self.app: asyncio.Protocol | None = None

    # ------------------------------------------------------------ network side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._raw = cast(asyncio.Transport, transport)
        loop = asyncio.get_running_loop()
        self._upgrade_timer = loop.call_later(self._timeout, self._upgrade_timed_out)

    def _upgrade_timed_out(self) -> None:
        self._upgrade_timer = None
        if self.app is None and self._raw is not None:
            logger.debug("no WebSocket upgrade within %.0f s: closing", self._timeout)
            self._raw.abort()

    def data_received(self, data: bytes) -> None:
        ws = self._ws
        ws.receive_data(data)
        for event in ws.events_received():
            if isinstance(event, Request):
                self._upgrade(event)
            elif isinstance(event, Frame):
                self._frame(event)
        self._flush()

    def eof_received(self) -> bool | None:
        self._ws.receive_eof()
        self._flush()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._upgrade_timer is not None:
            self._upgrade_timer.cancel()
        if self.app is not None:
            self.app.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.app is not None:
            self.app.pause_writing()

    def resume_writing(self) -> None:
        if self.app is not None:
            self.app.resume_writing()

    def _upgrade(self, request: Request) -> None:
        ws = self._ws
        path = request.path.partition("?")[0]
        if path != self._path:
            response = ws.reject(404, f"no MQTT endpoint at {path}; it is at {self._path}\n")
        else:
            response = ws.accept(request)
        ws.send_response(response)
        if response.status_code != 101:
            logger.debug("WebSocket upgrade refused (%d): %s", response.status_code, path)
            return
        raw = self._raw
        assert raw is not None
        if self._upgrade_timer is not None:
            self._upgrade_timer.cancel()
            self._upgrade_timer = None
        self.app = self._app_factory()
        self.app.connection_made(WebSocketTransport(self, raw))

    def _frame(self, frame: Frame) -> None:
        if frame.opcode is Opcode.TEXT:
            if self._ws.state is State.OPEN:
                self._ws.send_close(CLOSE_UNSUPPORTED_DATA, "MQTT needs binary frames")
        elif (
            frame.opcode in (Opcode.BINARY, Opcode.CONT)
            and self.app is not None
            and frame.data
            and self._ws.state is State.OPEN  # closing: dropped
        ):
            # An MQTT packet may continue in the next frame: the client parses a stream.
            self.app.data_received(bytes(frame.data))

    # ------------------------------------------------------------ MQTT side

    def send_binary(self, data: bytes) -> None:
        """Frame `data` as one binary message and write it."""
        self._ws.send_binary(data)
        self._flush()

    def close(self, code: int) -> None:
        """Start the closing handshake; the network connection closes when the client's
        Close frame arrives, or after CLOSE_TIMEOUT."""
        ws = self._ws
        if ws.state is State.OPEN:
            ws.send_close(code)
        self._flush()
        raw = self._raw
        if raw is not None and not raw.is_closing():
            asyncio.get_running_loop().call_later(CLOSE_TIMEOUT, _close_if_open, raw)

    def _flush(self) -> None:
        raw = self._raw
        if raw is None or raw.is_closing():
            return
        for data in self._ws.data_to_send():
            if data:
                raw.write(data)
            else:  # the protocol says: end of the stream
                raw.close()
                return


def _close_if_open(raw: asyncio.Transport) -> None:
    if not raw.is_closing():
        raw.close()


def _select_subprotocol(
    _protocol: ServerProtocol, offered: Sequence[Subprotocol]
) -> Subprotocol | None:
    """The first of SUBPROTOCOLS the client offers. A client offering none is served
    anyway (older browser libraries send no Sec-WebSocket-Protocol); one offering only
    others gets a 400 naming `mqtt`."""
    for name in SUBPROTOCOLS:
        if name in offered:
            return name
    if offered:
        raise NegotiationError(f"no supported subprotocol in {', '.join(offered)}; use mqtt")
    return None
