"""`mqttq session ls|inspect --application`: APPLICATION sessions as operators see them
(topic, committed offset, lag, unacknowledged ids), read from Kafka and the
application_session_ctx store without the broker; rich table and --json."""

from __future__ import annotations

from tests.integration.helpers import Clients
from tests.integration.test_cli_tenant import run_cli
from tests.integration.wire import PUBACK, ack_packet
from tests.kafka_app.app_helpers import connect_app
from tests.kafka_app.conftest import AppBrokerFactory


def test_ls_and_inspect_show_application_sessions(
    app_broker: AppBrokerFactory, clients: Clients
) -> None:
    broker = app_broker()
    app = connect_app(clients, broker, "opsapp")
    app.subscribe(("ops/#", 1))
    publisher = clients.connected(broker, "pub")
    for n in range(3):
        publisher.publish("ops/a", b"%d" % n, qos=1)
    got = app.receive_messages(3, ack=False)
    app.send(ack_packet(PUBACK, got[0].packet_id or 0, v5=True))
    app.ping()
    app.disconnect()
    app.close()
    for n in range(3, 7):
        publisher.publish("ops/a", b"%d" % n, qos=1)
    config = str(broker.workdir / "broker.toml")
    env = {"MQTTQ_STORAGE__DATA_DIR": str(broker.data_dir), "COLUMNS": "200"}

    listed = run_cli("session", "ls", "--application", "--config", config, "--json", env=env)
    (view,) = listed.json()
    assert view["client_id"] == "opsapp"
    assert view["topic"] == f"{app_broker.prefix}msg.app.opsapp"
    assert view["unacked_packet_ids"] == [2, 3]  # saved at the disconnect
    assert view["end_offset"] == 7
    # Only the first message was acknowledged: nothing is committed when it came in one pack
    # with the next two, offset 1 when the log was read with it alone in the first pack (a
    # matter of when the broker's consumer polled Kafka); never past it.
    committed = view["committed_offset"] or 0
    assert committed in (0, 1)
    assert view["lag"] == 7 - committed

    detail = run_cli("session", "inspect", "opsapp", "--application", "--config", config, env=env)
    assert detail.code == 0, detail
    assert "msg.app.opsapp" in detail.stdout
    assert "2@1 PUBLISH" in detail.stdout and "3@2 PUBLISH" in detail.stdout
    table = run_cli("session", "ls", "--application", "--config", config, env=env)
    assert (
        table.code == 0
        and "opsapp" in table.stdout
        and f"{7 - committed} messages not consumed" in table.stdout
    )

    unknown = run_cli("session", "inspect", "nobody", "--application", "--config", config, env=env)
    assert unknown.code == 1 and "no APPLICATION session 'nobody'" in unknown.error()
    no_kafka = run_cli("session", "ls", "--application", env=env)
    assert no_kafka.code == 2 and "[kafka]" in no_kafka.error()
