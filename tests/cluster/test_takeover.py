"""Session takeover across nodes (issue 15): a client connecting to node 2 while it is
connected to node 1 is disconnected on node 1 with 0x8E Session taken over; two racing
CONNECTs on two nodes end with one live connection, never two; a clean start on another
node clears the shared session (subscriptions, Redis queue)."""

from __future__ import annotations

import time

import pytest
import redis

from tests.cluster.cluster_helpers import PERSISTENT, payloads, wait_routed
from tests.cluster.conftest import Nodes
from tests.integration.helpers import Clients
from tests.integration.raw_client import RawClient
from tests.integration.waiting import wait_for
from tests.integration.wire import (
    CONNACK,
    DISCONNECT,
    RC,
    ConnectionClosed,
    Will,
    assert_disconnected_with,
    connect_packet,
)

pytestmark = [pytest.mark.mqttq_only, pytest.mark.slow]


def test_connect_on_another_node_takes_the_session_over(nodes: Nodes, clients: Clients) -> None:
    """The persistent session moves with its client: node 1's connection gets 0x8E, node
    2 answers session present, and messages reach the client on node 2."""
    one, two = nodes(2)
    first = clients.connected(one, "mover", level=5, clean=False, props=PERSISTENT)
    assert first.subscribe(("m/#", 1)).reason_codes == (1,)
    second = clients.raw(two)
    connack = second.connect("mover", level=5, clean=False, props=PERSISTENT)
    assert connack.session_present
    assert_disconnected_with(first.wait_closed(timeout=60), RC.SESSION_TAKEN_OVER)

    publisher = clients.connected(one, "pub", level=5)
    wait_routed(publisher, "m", second)
    for n in range(5):
        publisher.publish("m/x", b"after-%d" % n, qos=1)
    assert payloads(second, 5) == [b"after-%d" % n for n in range(5)]


def _taken_over(client: RawClient, wait: float) -> bool:
    """True once the server sent DISCONNECT 0x8E and closed (within `wait` seconds)."""
    try:
        pkt = client.try_recv(wait)
    except ConnectionClosed:
        raise AssertionError("closed without DISCONNECT 0x8E") from None
    if pkt is None:
        return False
    assert (pkt.type, pkt.reason_code) == (DISCONNECT, RC.SESSION_TAKEN_OVER), pkt
    assert client.wait_closed() == []
    return True


def test_racing_connects_end_with_one_session(nodes: Nodes, clients: Clients) -> None:
    """The same client id connects to two nodes at once, several times: each time one
    connection is taken over (0x8E) and the other one lives on."""
    one, two = nodes(2)
    for attempt in range(5):
        pair = [clients.raw(one), clients.raw(two)]
        packet = connect_packet("racer", level=5, clean=attempt % 2 == 0, props=PERSISTENT)
        for client in pair:
            client.send(packet)
        for client in pair:
            connack = client.recv(timeout=60)
            assert (connack.type, connack.reason_code) == (CONNACK, 0), connack
            client.v5 = True
        deadline = time.monotonic() + 60
        losers: list[RawClient] = []
        while not losers:
            assert time.monotonic() < deadline, f"attempt {attempt}: both connections live"
            losers = [client for client in pair if _taken_over(client, 0.2)]
        assert len(losers) == 1, f"attempt {attempt}: both connections taken over"
        (survivor,) = [client for client in pair if client not in losers]
        survivor.ping()  # alive, and still so after the loser's node let go
        survivor.expect_silence(1.0)
        survivor.disconnect()


def test_clean_start_on_another_node_clears_the_shared_session(
    nodes: Nodes, redis_url: str, clients: Clients
) -> None:
    """A persistent session left on node 1 with queued messages; the client comes back on
    node 2 with clean start: no session present, its Redis queue is gone, and its old
    subscription no longer routes anything to it."""
    one, two = nodes(2)
    away = clients.connected(one, "fresh", level=5, clean=False, props=PERSISTENT)
    assert away.subscribe(("old/#", 1)).reason_codes == (1,)
    away.disconnect()
    publisher = clients.connected(one, "pub", level=5)
    for n in range(3):
        publisher.publish("old/x", b"queued-%d" % n, qos=1)
    store = redis.Redis.from_url(redis_url)
    wait_for(lambda: store.zcard("{fresh}_messages") == 3, timeout=60, what="3 queued")

    again = clients.raw(two)
    connack = again.connect("fresh", level=5, clean=True, props=PERSISTENT)
    assert not connack.session_present
    wait_for(lambda: store.zcard("{fresh}_messages") == 0, timeout=60, what="queue cleared")
    assert again.subscribe(("new/#", 1)).reason_codes == (1,)
    wait_routed(publisher, "new", again)
    publisher.publish("old/x", b"not-for-you", qos=1)
    publisher.publish("new/x", b"for-you", qos=1)
    assert payloads(again, 1) == [b"for-you"]  # nothing of old/# came before it
    again.expect_silence(1.0)


@pytest.mark.parametrize("clean", [True, False])
def test_the_old_connections_will_follows_the_session(
    nodes: Nodes, clients: Clients, clean: bool
) -> None:
    """Taken over by a connection on another node: with clean start the old session ends
    and its connection's will is published [MQTT-3.1.2-8]; resumed, it is not
    [MQTT-3.1.3-9]."""
    one, two = nodes(2)
    watcher = clients.connected(one, "watcher", level=5)
    watcher.subscribe(("will/#", 1))
    old = clients.connected(
        one, "willing", level=5, clean=False, props=PERSISTENT, will=Will("will/w", b"gone")
    )
    new = clients.raw(two)
    new.connect("willing", level=5, clean=clean, props=PERSISTENT)
    assert_disconnected_with(old.wait_closed(timeout=60), RC.SESSION_TAKEN_OVER)
    probe = clients.connected(two, "prober", level=5)
    wait_routed(probe, "will", watcher)  # wills go through msg.all like any PUBLISH
    if clean:
        assert payloads(watcher, 1) == [b"gone"]
    else:
        watcher.expect_silence(1.0)
