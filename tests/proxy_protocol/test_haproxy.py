"""PROXY protocol v1 and v2 end to end through a real HAProxy: the address the broker
sees for a client (the admin API's `peer`) is the client's own socket address, not
HAProxy's; bad headers, untrusted peers and slow headers are refused, counted and
logged once, and the other clients carry on."""

from __future__ import annotations

import contextlib
import socket

import pytest

from tests.integration.admin_api import metric_value
from tests.integration.raw_client import RawClient
from tests.integration.waiting import DEADLINE, HOST, wait_for
from tests.integration.wire import connect_packet
from tests.proxy_protocol.conftest import ProxiedBroker

pytestmark = pytest.mark.mqttq_only


def read_until_closed(sock: socket.socket) -> bytes:
    """What the broker sent before it closed `sock` (an abort, a reset, reads as closed)."""
    received = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(4096):
            received += chunk
    return received


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_the_admin_api_shows_the_clients_own_address(proxied: ProxiedBroker, version: str) -> None:
    port = proxied.v1_port if version == "v1" else proxied.v2_port
    client = RawClient(port)
    try:
        client.connect(f"through-haproxy-{version}")
        host, local_port = client.sock.getsockname()[:2]
        session = proxied.session(f"through-haproxy-{version}")
        assert session["peer"] == f"{host}:{local_port}"
    finally:
        client.close()


def test_mqtt_flows_through_haproxy_both_ways(proxied: ProxiedBroker) -> None:
    subscriber = RawClient(proxied.v2_port)
    publisher = RawClient(proxied.v1_port)
    try:
        subscriber.connect("proxied-sub")
        publisher.connect("proxied-pub")
        subscriber.subscribe(("proxied/#", 1))
        publisher.publish("proxied/x", b"across", qos=1)
        [message] = subscriber.receive_messages(1)
        assert (message.topic, message.payload) == ("proxied/x", b"across")
    finally:
        subscriber.close()
        publisher.close()


def test_a_connection_without_a_header_is_closed_and_others_carry_on(
    proxied: ProxiedBroker,
) -> None:
    direct = socket.create_connection((HOST, proxied.broker.port), timeout=DEADLINE)
    try:
        direct.sendall(connect_packet("no-header"))
        assert read_until_closed(direct) == b""  # closed without an answer (no CONNACK)
    finally:
        direct.close()
    wait_for(lambda: "no PROXY header" in proxied.broker.stderr_text(), what="the log line")
    assert proxied.broker.stderr_text().count("refused: no PROXY header") == 1
    still = RawClient(proxied.v1_port)
    try:
        still.connect("after-the-bad-one")
        assert proxied.session("after-the-bad-one")["peer"].startswith("127.0.0.1:")
    finally:
        still.close()


def test_a_malformed_header_is_closed(proxied: ProxiedBroker) -> None:
    stats = proxied.broker.broker._endpoints.proxy
    before = stats.malformed
    direct = socket.create_connection((HOST, proxied.broker.port), timeout=DEADLINE)
    try:
        direct.sendall(b"PROXY TCP4 1.2.3.999 127.0.0.1 5 1883\r\n" + connect_packet("bad"))
        assert read_until_closed(direct) == b""
    finally:
        direct.close()
    wait_for(lambda: stats.malformed == before + 1, what="the refusal counted")


def test_a_header_by_hand_names_any_address(proxied: ProxiedBroker) -> None:
    """A trusted balancer may name a client anywhere (v1, then the MQTT bytes at once)."""
    client = RawClient(proxied.broker.port)
    try:
        client.send(b"PROXY TCP4 203.0.113.9 127.0.0.1 40123 1883\r\n")
        client.connect("named-by-hand")
        assert proxied.session("named-by-hand")["peer"] == "203.0.113.9:40123"
    finally:
        client.close()


def test_websocket_listener_takes_a_header(proxied: ProxiedBroker) -> None:
    ws_port = proxied.broker.broker.ports["ws"]
    sock = socket.create_connection((HOST, ws_port), timeout=DEADLINE)
    try:
        sock.sendall(
            b"PROXY TCP6 2001:db8::5 ::1 50505 8083\r\n"
            b"GET /mqtt HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            b"Sec-WebSocket-Protocol: mqtt\r\n\r\n"
        )
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(4096)
            assert chunk, answer
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 101")
        packet = connect_packet("ws-proxied")
        # One masked binary frame.
        mask = b"\x01\x02\x03\x04"
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(packet))
        sock.sendall(bytes([0x82, 0x80 | len(body)]) + mask + body)
        frame = sock.recv(4096)
        assert frame[0] == 0x82 and frame[2] == 0x20  # a binary frame holding CONNACK
        assert proxied.session("ws-proxied")["peer"] == "2001:db8::5:50505"
    finally:
        sock.close()


def test_an_untrusted_address_is_refused(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker = broker_factory(
        config='[listener]\nproxy_protocol = true\nproxy_trusted = ["10.0.0.0/8"]\n'
    )
    sock = socket.create_connection((HOST, broker.port), timeout=DEADLINE)
    try:
        sock.sendall(b"PROXY TCP4 1.2.3.4 127.0.0.1 5 1883\r\n" + connect_packet("x"))
        assert read_until_closed(sock) == b""
    finally:
        sock.close()
    wait_for(lambda: "not in proxy_trusted" in broker.stderr_text(), what="the log line")


def test_a_header_that_never_ends_times_out(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker = broker_factory(
        config="[listener]\nproxy_protocol = true\nproxy_header_timeout = 0.2\n"
    )
    sock = socket.create_connection((HOST, broker.port), timeout=DEADLINE)
    try:
        sock.sendall(b"PROXY TCP4 1.2.3.4")
        assert read_until_closed(sock) == b""
    finally:
        sock.close()
    wait_for(lambda: "no complete header within 0.2 s" in broker.stderr_text(), what="the log line")


def test_refusals_are_logged_once_and_counted(broker_factory) -> None:  # type: ignore[no-untyped-def]
    """A broker of its own: the line is written once per kind a minute, and the module's
    shared broker may have spent that minute's line on another test's malformed header."""
    broker = broker_factory(config="[listener]\nproxy_protocol = true\n")
    logged_before = len(broker.stderr_text())
    for _ in range(3):
        sock = socket.create_connection((HOST, broker.port), timeout=DEADLINE)
        try:
            sock.sendall(b"GARBAGE\r\n")
            read_until_closed(sock)
        finally:
            sock.close()
    wait_for(lambda: broker.broker._endpoints.proxy.malformed == 3, what="three refusals counted")
    logged = broker.stderr_text()[logged_before:]
    assert logged.count("refused: no PROXY header") == 1, logged


def test_a_blocked_client_address_behind_the_balancer_is_closed(
    broker_factory,  # type: ignore[no-untyped-def]
) -> None:
    """The blocked list sees the address the header names, not the balancer's."""
    from tests.blocked.helpers import block, blocked_of  # noqa: PLC0415

    broker = broker_factory(config="[listener]\nproxy_protocol = true\n")
    block(broker, "address", "198.51.100.0/24")
    sock = socket.create_connection((HOST, broker.port), timeout=DEADLINE)
    try:
        sock.sendall(b"PROXY TCP4 198.51.100.7 127.0.0.1 40000 1883\r\n" + connect_packet("b"))
        assert read_until_closed(sock) == b""  # closed before any CONNACK
    finally:
        sock.close()
    assert blocked_of(broker).refused_addresses == 1
    assert broker.broker._endpoints.proxy.blocked == 1
    allowed = RawClient(broker.port)
    try:
        allowed.send(b"PROXY TCP4 203.0.113.7 127.0.0.1 40001 1883\r\n")
        allowed.connect("not-blocked")
    finally:
        allowed.close()


def test_the_failed_connections_log_has_the_address_from_the_header(
    broker_factory,  # type: ignore[no-untyped-def]
) -> None:
    from tests.blocked.helpers import blocked_of  # noqa: PLC0415

    broker = broker_factory(
        config='[listener]\nproxy_protocol = true\n[auth]\nanonymous = "never"\n'
    )
    client = RawClient(broker.port)
    try:
        client.send(b"PROXY TCP6 2001:db8::9 ::1 51515 1883\r\n")
        connack = client.connect("nobody-1", username="nobody", password=b"x", expect_success=False)
        assert connack.reason_code == 0x86  # Bad user name or password
    finally:
        client.close()
    [failed] = blocked_of(broker).failed.recent("nobody-1")
    assert failed.address == "2001:db8::9"


def test_anonymous_loopback_looks_at_the_address_the_client_connected_to(
    proxied: ProxiedBroker,
) -> None:
    """auth.anonymous = "loopback" (the default): a client that reached the balancer on a
    public address is not taken for a local one because the balancer is local."""
    remote = RawClient(proxied.broker.port)
    try:
        remote.send(b"PROXY TCP4 203.0.113.9 192.0.2.1 40124 1883\r\n")
        connack = remote.connect("from-afar", expect_success=False)
        assert connack.reason_code >= 0x80
    finally:
        remote.close()
    local = RawClient(proxied.broker.port)
    try:
        local.send(b"PROXY TCP4 203.0.113.9 127.0.0.1 40125 1883\r\n")
        assert local.connect("to-loopback").reason_code == 0
    finally:
        local.close()


PROXY_OUTCOMES = ("accepted", "local", "untrusted", "malformed", "timeouts", "blocked")


def proxy_counts(proxied: ProxiedBroker) -> dict[str, float | None]:
    """`mqttq_proxy_connections_total` by outcome, scraped from /metrics now."""
    text = proxied.metrics()
    return {
        outcome: metric_value(text, "mqttq_proxy_connections_total", outcome=outcome)
        for outcome in PROXY_OUTCOMES
    }


def test_metrics_count_proxy_connections_by_outcome(proxied: ProxiedBroker) -> None:
    before = proxy_counts(proxied)
    assert all(value is not None for value in before.values()), before
    client = RawClient(proxied.v2_port)  # HAProxy's v2 header: accepted
    try:
        client.connect("counted-through-haproxy")
    finally:
        client.close()
    direct = socket.create_connection((HOST, proxied.broker.port), timeout=DEADLINE)
    try:
        direct.sendall(b"PROXY TCP4 1.2.3.999 127.0.0.1 5 1883\r\n")  # malformed
        read_until_closed(direct)
    finally:
        direct.close()
    local = RawClient(proxied.broker.port)
    try:
        local.send(b"PROXY UNKNOWN\r\n")  # the balancer's own connection: local, accepted
        local.connect("the-balancers-own")
    finally:
        local.close()

    def counted() -> bool:
        now = proxy_counts(proxied)
        return (now["accepted"], now["malformed"], now["local"]) == (
            before["accepted"] + 2,  # type: ignore[operator]
            before["malformed"] + 1,  # type: ignore[operator]
            before["local"] + 1,  # type: ignore[operator]
        )

    wait_for(counted, what="accepted, malformed and local counted on /metrics")
    after = proxy_counts(proxied)
    for outcome in ("untrusted", "timeouts", "blocked"):
        assert after[outcome] == before[outcome]
