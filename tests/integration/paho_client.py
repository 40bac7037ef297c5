"""PahoClient: paho-mqtt 2.x wrapped for tests (3.1, 3.1.1 and 5.0), with waiting helpers,
clean or persistent sessions; PahoClients closes every client it made at teardown."""

from __future__ import annotations

import threading
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties as PahoProperties
from paho.mqtt.reasoncodes import ReasonCode as PahoReasonCode
from paho.mqtt.subscribeoptions import SubscribeOptions

from tests.integration.waiting import DEADLINE, HOST, wait_for

# --- paho ---

_PAHO_PROTOCOL = {3: paho.MQTTv31, 4: paho.MQTTv311, 5: paho.MQTTv5}


def _code(reason: PahoReasonCode | int) -> int:
    return reason if isinstance(reason, int) else reason.value


def paho_props(packet_type: int, **values: Any) -> PahoProperties:
    """paho Properties for a packet type, e.g. paho_props(PacketTypes.PUBLISH, ContentType=..)."""
    props = PahoProperties(packet_type)
    for name, value in values.items():
        setattr(props, name, value)
    return props


class PahoClient:
    """paho-mqtt 2.x (callback API v2) driven synchronously: each call waits for its
    acknowledgement. Automatic reconnection is off so that a broken connection stays
    visible to the test. `clean=False` resumes (or keeps) a session: 5.0 asks for
    `session_expiry` seconds, 3.x keeps it while Clean Session is 0."""

    def __init__(
        self,
        port: int,
        client_id: str = "",
        *,
        protocol: int = 5,
        host: str = HOST,
        clean: bool = True,
        session_expiry: int = 0,
        transport: str = "tcp",
    ):
        self.host, self.port, self.protocol = host, port, protocol
        self.clean, self.session_expiry = clean, session_expiry
        self.client = paho.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=_PAHO_PROTOCOL[protocol],
            clean_session=None if protocol == 5 else clean,
            reconnect_on_failure=False,
            transport=transport,  # type: ignore[arg-type]
        )
        self._lock = threading.Lock()
        self.connack: tuple[int, bool] | None = None
        """(reason code, session present) of the last CONNACK."""
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
            props = PahoProperties(PacketTypes.CONNECT)
            if self.session_expiry:
                props.SessionExpiryInterval = self.session_expiry
            self.client.connect(self.host, self.port, 60, clean_start=self.clean, properties=props)
        else:
            self.client.connect(self.host, self.port, 60)
        self.client.loop_start()
        self._started = True
        connack = wait_for(lambda: self.connack, what="CONNACK")
        assert connack[0] == 0, f"connection refused: {connack}"
        return connack[1]

    def subscribe(
        self,
        topic: str,
        qos: int = 1,
        *,
        no_local: bool = False,
        retain_as_published: bool = False,
    ) -> list[int]:
        """Subscribe and return the SUBACK reason codes."""
        if self.protocol == 5:
            options = SubscribeOptions(
                qos=qos, noLocal=no_local, retainAsPublished=retain_as_published
            )
            result, mid = self.client.subscribe(topic, options=options)
        else:
            result, mid = self.client.subscribe(topic, qos)
        assert result == paho.MQTT_ERR_SUCCESS, result
        wait_for(lambda: mid in self._subacks, what=f"SUBACK for {topic}")
        return self._subacks[mid]

    def publish(
        self,
        topic: str,
        payload: bytes = b"",
        qos: int = 0,
        *,
        retain: bool = False,
        props: PahoProperties | None = None,
    ) -> int:
        """Publish; for QoS > 0 wait for the PUBACK / PUBCOMP and return its reason code."""
        info = self.client.publish(topic, payload, qos, retain, props)
        assert info.rc == paho.MQTT_ERR_SUCCESS, info.rc
        if qos == 0:
            return 0
        wait_for(lambda: info.mid in self._pubacks, what=f"ack of publish to {topic}")
        return self._pubacks[info.mid]

    def wait_messages(self, count: int, *, timeout: float = DEADLINE) -> list[paho.MQTTMessage]:
        """Wait until at least `count` messages arrived; return all received so far."""
        wait_for(
            lambda: len(self.messages) >= count,
            timeout=timeout,
            what=f"{count} messages (have {len(self.messages)}: {self.payloads()})",
        )
        with self._lock:
            return list(self.messages)

    def payloads(self) -> list[bytes]:
        with self._lock:
            return [message.payload for message in self.messages]

    def disconnect(self) -> None:
        """A normal DISCONNECT (a persistent session stays), then stop the network thread."""
        if self._started:
            self.client.disconnect()
            self.client.loop_stop()
            self._started = False

    def close(self) -> None:
        """DISCONNECT if still connected (which also wakes the network thread at once), stop
        the network thread, close the socket."""
        if self.client.is_connected():
            self.client.disconnect()
        if self._started:
            self.client.loop_stop()
            self._started = False
        sock = self.client.socket()
        if sock is not None:
            sock.close()


class PahoClients:
    """Creates connected PahoClients; `close_all` at teardown."""

    def __init__(self) -> None:
        self._clients: list[PahoClient] = []

    def connect(self, port: int, client_id: str, **options: Any) -> PahoClient:
        """A new client, connected (options: see PahoClient)."""
        client = self.track(PahoClient(port, client_id, **options))
        client.connect()
        return client

    def track(self, client: PahoClient) -> PahoClient:
        """Close `client` at teardown too."""
        self._clients.append(client)
        return client

    def close_all(self) -> None:
        for client in self._clients:
            client.close()
