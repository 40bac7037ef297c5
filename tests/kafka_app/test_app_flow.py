"""Flow control of APPLICATION clients: a subscriber that does not read pauses its consumer
(counted in /metrics), keeps the broker's memory bounded and does not slow anyone else;
once it reads again it gets everything, in order.

The subscription is QoS 0: its packs need no acknowledgement, so without flow control the
consumer would poll and write on and on into the socket's buffer."""

from __future__ import annotations

import re

from tests.integration.admin_api import AdminApi
from tests.integration.helpers import Bystander, Clients
from tests.integration.raw_client import RawClient
from tests.integration.waiting import wait_for
from tests.integration.wire import PUBACK, publish_packet
from tests.kafka_app.app_helpers import connect_app
from tests.kafka_app.conftest import AppBrokerFactory

HIGH_WATERMARK = 1280 * 1024
PAYLOAD = 16 * 1024
COUNT = 2000
"""32 MB pushed at a client that reads nothing."""


def metric(api: AdminApi, name: str) -> float:
    status, text = api.call("GET", "/metrics")
    assert status == 200
    match = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def test_non_reading_subscriber_pauses_and_stays_bounded(
    app_broker: AppBrokerFactory, clients: Clients
) -> None:
    broker = app_broker()
    api = AdminApi(broker.data_dir)
    bystander = Bystander(clients, broker)
    slow = connect_app(clients, broker, "slowapp", rcvbuf=4096)
    slow.subscribe(("big/#", 0))
    publisher = clients.connected(broker, "bigpub")
    publish_many(publisher, COUNT)
    wait_for(lambda: metric(api, "mqttq_app_flow_control_pauses_total") >= 1, what="a pause")
    bystander.check()  # others are served while the consumer is paused
    view = api.ok("GET", "/api/v1/sessions/slowapp")
    # Bounded by the high watermark (1280 KB) plus one flush (10 messages), not by the
    # 32 MB sent; the rest waits in Kafka (the lag).
    assert 0 < view["write_buffer_bytes"] < HIGH_WATERMARK + 11 * (PAYLOAD + 64), view
    application = view["application"]
    assert application["topic"].endswith("msg.app.slowapp")
    assert application["lag"] > COUNT // 2, application
    # Measured once a second: a broker quick to pause may not have measured it yet.
    lag = 'mqttq_app_consumer_lag{client_id="slowapp"}'
    wait_for(lambda: metric(api, lag) > 0, what="the lag in /metrics")
    got = read_all(slow)
    assert got == list(range(COUNT))


def read_all(client: RawClient) -> list[int]:
    numbers: list[int] = []
    while len(numbers) < COUNT:
        batch = client.receive_messages(min(100, COUNT - len(numbers)), timeout=60)
        numbers.extend(int.from_bytes(m.payload[:4], "big") for m in batch)
    return numbers


def publish_many(publisher: RawClient, count: int) -> None:
    """QoS 1 PUBLISHes in windows of 200 (under the broker's Receive Maximum), every
    PUBACK a success."""
    payload = b"x" * PAYLOAD
    for start in range(0, count, 200):
        ids = []
        for n in range(start, min(count, start + 200)):
            packet_id = publisher.next_packet_id()
            ids.append(packet_id)
            data = n.to_bytes(4, "big") + payload
            publisher.send(publish_packet("big/a", data, v5=True, qos=1, packet_id=packet_id))
        for packet_id in ids:
            ack = publisher.wait_packet(PUBACK, packet_id=packet_id)
            assert ack.reason_code in (0, None), ack
