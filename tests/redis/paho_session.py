"""A paho-mqtt 2.x client driven synchronously, with persistent sessions (3.1.1 and 5.0).

Each call waits for its acknowledgement; automatic reconnection is off so that a broken
connection stays visible to the test. `PahoClients` closes every client at teardown.
"""

from __future__ import annotations

import threading
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from tests.integration.waiting import (
    wait_for,
)

HOST = "127.0.0.1"
_PROTOCOLS = {4: paho.MQTTv311, 5: paho.MQTTv5}


def _code(reason: Any) -> int:
    return int(reason.value) if hasattr(reason, "value") else int(reason)


class PahoSession:
    """One client: `clean=False` resumes (or keeps) a session; 5.0 asks for
    `session_expiry` seconds, 3.1.1 keeps the session while Clean Session is 0."""

    def __init__(
        self,
        port: int,
        client_id: str,
        *,
        protocol: int = 5,
        clean: bool = True,
        session_expiry: int = 0,
    ) -> None:
        self.port, self.protocol = port, protocol
        self.clean, self.session_expiry = clean, session_expiry
        self.client = paho.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=_PROTOCOLS[protocol],
            clean_session=None if protocol == 5 else clean,
            reconnect_on_failure=False,
        )
        self._lock = threading.Lock()
        self.connack: tuple[int, bool] | None = None
        self._subacks: dict[int, list[int]] = {}
        self._pubacks: dict[int, int] = {}
        self.messages: list[paho.MQTTMessage] = []
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = self._on_subscribe
        self.client.on_publish = self._on_publish
        self.client.on_message = self._on_message
        self._started = False

    def _on_connect(self, _c: Any, _u: Any, flags: Any, reason: Any, _p: Any) -> None:
        self.connack = (_code(reason), bool(flags.session_present))

    def _on_subscribe(self, _c: Any, _u: Any, mid: int, codes: Any, _p: Any) -> None:
        with self._lock:
            self._subacks[mid] = [_code(code) for code in codes]

    def _on_publish(self, _c: Any, _u: Any, mid: int, reason: Any, _p: Any) -> None:
        with self._lock:
            self._pubacks[mid] = _code(reason)

    def _on_message(self, _c: Any, _u: Any, message: paho.MQTTMessage) -> None:
        with self._lock:
            self.messages.append(message)

    def connect(self) -> bool:
        """Connect, wait for a successful CONNACK; return its Session Present flag."""
        if self.protocol == 5:
            props = Properties(PacketTypes.CONNECT)
            props.SessionExpiryInterval = self.session_expiry
            self.client.connect(HOST, self.port, 60, clean_start=self.clean, properties=props)
        else:
            self.client.connect(HOST, self.port, 60)
        self.client.loop_start()
        self._started = True
        connack = wait_for(lambda: self.connack, what="CONNACK")
        assert connack[0] == 0, f"connection refused: {connack}"
        return connack[1]

    def subscribe(self, topic: str, qos: int = 1) -> list[int]:
        result, mid = self.client.subscribe(topic, qos)
        assert result == paho.MQTT_ERR_SUCCESS, result
        wait_for(lambda: mid in self._subacks, what=f"SUBACK for {topic}")
        return self._subacks[mid]

    def publish(self, topic: str, payload: bytes, qos: int = 1) -> int:
        """Publish; for QoS > 0 wait for the PUBACK / PUBCOMP and return its reason code."""
        info = self.client.publish(topic, payload, qos)
        assert info.rc == paho.MQTT_ERR_SUCCESS, info.rc
        if qos == 0:
            return 0
        wait_for(lambda: info.mid in self._pubacks, what=f"ack of publish to {topic}")
        return self._pubacks[info.mid]

    def wait_messages(self, count: int) -> list[paho.MQTTMessage]:
        wait_for(
            lambda: len(self.messages) >= count,
            what=f"{count} messages (have {len(self.messages)}: {self.payloads()})",
        )
        with self._lock:
            return list(self.messages)

    def payloads(self) -> list[bytes]:
        with self._lock:
            return [message.payload for message in self.messages]

    def disconnect(self) -> None:
        """A normal DISCONNECT (the session stays when it is persistent)."""
        if self._started:
            self.client.disconnect()
            self.client.loop_stop()
            self._started = False


class PahoClients:
    """Creates connected clients; `close_all` at teardown."""

    def __init__(self) -> None:
        self._clients: list[PahoSession] = []

    def connect(self, port: int, client_id: str, **options: Any) -> PahoSession:
        """A new client, connected."""
        client = self.track(PahoSession(port, client_id, **options))
        client.connect()
        return client

    def track(self, client: PahoSession) -> PahoSession:
        """Close `client` at teardown too."""
        self._clients.append(client)
        return client

    def close_all(self) -> None:
        for client in self._clients:
            client.disconnect()
