"""MQTT over WebSocket ([listener.ws]) and WebSocket over TLS ([listener.wss]): paho with
transport="websockets" on both, MQTT packets split across frames and several packets in
one frame (websockets' own client sending raw bytes), the upgrade refused on a wrong
path, and text frames refused [MQTT-6.0.0-1]."""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import Iterator

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from tests.conftest import BrokerFactory, BrokerProcess
from tests.integration.admin_api import AdminApi, metric_value
from tests.integration.paho_client import PahoClient, PahoClients
from tests.integration.test_tls import ports
from tests.integration.tls_pki import Pki, make_pki
from tests.integration.waiting import DEADLINE, HOST
from tests.integration.wire import connect_packet, publish_packet, subscribe_packet

pytestmark = pytest.mark.mqttq_only

CONNACK_ACCEPTED_311 = b"\x20\x02\x00\x00"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("ws-pki"))


@pytest.fixture
def web_broker(broker_factory: BrokerFactory, pki: Pki) -> BrokerProcess:
    config = (
        '[listener.ws]\nport = 0\npath = "/mqtt"\n'
        f'[listener.wss]\nport = 0\npath = "/secure"\ncertfile = "{pki.certfile}"\n'
        f'keyfile = "{pki.keyfile}"\n'
    )
    return broker_factory(config=config)


@pytest.fixture
def paho_clients() -> Iterator[PahoClients]:
    made = PahoClients()
    yield made
    made.close_all()


def ws_paho(port: int, client_id: str, path: str, **options: object) -> PahoClient:
    client = PahoClient(port, client_id, transport="websockets", **options)  # type: ignore[arg-type]
    client.client.ws_set_options(path=path)
    return client


def test_paho_over_ws_and_wss_talks_to_tcp_clients(
    web_broker: BrokerProcess, pki: Pki, paho_clients: PahoClients
) -> None:
    listening = ports(web_broker)
    browser = paho_clients.track(ws_paho(listening["ws"], "browser", "/mqtt"))
    browser.connect()
    secure = paho_clients.track(ws_paho(listening["wss"], "secure-browser", "/secure", protocol=4))
    secure.client.tls_set(ca_certs=str(pki.cafile))
    secure.connect()
    assert browser.subscribe("web/#", 1) == [1]
    assert secure.subscribe("web/#", 1) == [1]
    device = paho_clients.connect(web_broker.port, "device")
    assert device.publish("web/temp", b"21.5", 1) == 0
    assert [m.payload for m in browser.wait_messages(1)] == [b"21.5"]
    assert [m.payload for m in secure.wait_messages(1)] == [b"21.5"]
    # And the other way round: a WebSocket publisher, a TCP subscriber.
    assert device.subscribe("dev/cmd", 1) == [1]
    assert secure.publish("dev/cmd", b"on", 1) == 0
    assert [m.payload for m in device.wait_messages(1)] == [b"on"]

    admin = AdminApi(web_broker.data_dir)
    sessions = {
        s["client_id"]: s["listener"] for s in admin.ok("GET", "/api/v1/sessions")["sessions"]
    }
    assert sessions == {"browser": "ws", "secure-browser": "wss", "device": "tcp"}
    text = admin.metrics()
    for name in ("ws", "wss", "tcp"):
        assert metric_value(text, "mqttq_listener_connections", listener=name) == 1


def ws_connect(port: int, path: str = "/mqtt") -> ClientConnection:
    return connect(f"ws://{HOST}:{port}{path}", subprotocols=["mqtt"], open_timeout=DEADLINE)


def receive(socket: ClientConnection, size: int) -> bytes:
    """Bytes from binary messages until `size` of them arrived."""
    data = b""
    while len(data) < size:
        message = socket.recv(timeout=DEADLINE)
        assert isinstance(message, bytes)
        data += message
    return data


def test_packets_split_across_frames_and_packed_into_one(web_broker: BrokerProcess) -> None:
    port = ports(web_broker)["ws"]
    with ws_connect(port) as subscriber, ws_connect(port) as publisher:
        assert subscriber.subprotocol == "mqtt"
        connect = connect_packet("split", level=4)
        # A CONNECT in three messages, cut inside its fixed header and inside its body.
        for piece in (connect[:1], connect[1:7], connect[7:]):
            subscriber.send(piece)
        assert receive(subscriber, 4) == CONNACK_ACCEPTED_311
        # A SUBSCRIBE in one fragmented message (continuation frames).
        subscribe = subscribe_packet(1, [("ws/t", 0)], v5=False)
        subscriber.send([subscribe[:3], subscribe[3:]])
        assert receive(subscriber, 5) == b"\x90\x03\x00\x01\x00"
        # CONNECT and two PUBLISHes packed into one message.
        packed = connect_packet("packed", level=4) + b"".join(
            publish_packet("ws/t", payload, v5=False) for payload in (b"one", b"two")
        )
        publisher.send(packed)
        assert receive(publisher, 4) == CONNACK_ACCEPTED_311
        expected = b"".join(
            publish_packet("ws/t", payload, v5=False) for payload in (b"one", b"two")
        )
        assert receive(subscriber, len(expected)) == expected


def test_wrong_path_gets_404_and_text_frames_are_refused(web_broker: BrokerProcess) -> None:
    port = ports(web_broker)["ws"]
    with pytest.raises(InvalidStatus) as refused:
        ws_connect(port, "/elsewhere")
    assert refused.value.response.status_code == 404
    with ws_connect(port) as socket:
        socket.send("not binary")
        with pytest.raises(ConnectionClosed) as closed:
            socket.recv(timeout=DEADLINE)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1003


def test_wss_serves_the_certificate(web_broker: BrokerProcess, pki: Pki) -> None:
    context = ssl.create_default_context(cafile=str(pki.cafile))
    url = f"wss://{HOST}:{ports(web_broker)['wss']}/secure"
    with connect(url, ssl=context, subprotocols=["mqtt"], open_timeout=DEADLINE) as socket:
        socket.send(connect_packet("over-wss", level=4))
        assert receive(socket, 4) == CONNACK_ACCEPTED_311
    # A client that does not trust the CA fails the handshake.
    stranger = ssl.create_default_context(cafile=str(make_pki(pki.directory / "x").cafile))
    with pytest.raises(ssl.SSLCertVerificationError):
        connect(url, ssl=stranger, subprotocols=["mqtt"], open_timeout=DEADLINE)


def test_connections_that_never_upgrade_or_handshake_are_closed(
    broker_factory: BrokerFactory, pki: Pki
) -> None:
    broker = broker_factory(
        config="[mqtt]\nconnect_timeout = 1\n[listener.ws]\nport = 0\n"
        f'[listener.wss]\nport = 0\ncertfile = "{pki.certfile}"\nkeyfile = "{pki.keyfile}"\n'
    )
    listening = ports(broker)
    for name, first_bytes in (("ws", b"GET /mqtt HTTP/1.1\r\nHost: x\r\n"), ("wss", b"")):
        with socket.create_connection((HOST, listening[name]), timeout=DEADLINE * 2) as silent:
            silent.sendall(first_bytes)  # a request that never ends; no ClientHello at all
            with contextlib.suppress(ConnectionResetError):  # a reset closes it too
                assert silent.recv(1024) == b"", name
