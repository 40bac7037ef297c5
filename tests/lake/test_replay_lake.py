"""`mqttq lake replay`: archived messages (a lake written by pyarrow) published again into
a real broker; a real MQTT 5 subscriber receives them in each publisher's order, with their
MQTT 5 properties, across day (and hour) partitions and pieces, each once, with never more
PUBLISHes unacknowledged than `--max-in-flight`; the window and the filter leave the rest
out; errors are one line."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from mqttq.cli.lake import lake_app
from tests.conftest import BrokerUnderTest
from tests.integration.raw_client import RawClient
from tests.integration.wire import Prop
from tests.lake.lake_rows import Row, at, write_lake
from tests.lake.test_replay_pieces import fleet, write_hourly
from tests.services import free_port

runner = CliRunner()
T0 = at("2026-11-10T10:00:00")
PROPS_ROW = Row(
    "acme",
    "a",
    "sensors/a/t",
    T0,
    b"a0",
    partition=0,
    offset=0,
    content_type="application/json",
    response_topic="replies/a",
    correlation_data=b"\x00corr",
    user_properties=(("site", "north"), ("site", "south"), ("k", "v")),
    expires_at=T0 + timedelta(seconds=3600),
)
ROWS = [
    PROPS_ROW,
    # Publisher b interleaves with a in time; each keeps its own order.
    *(
        Row(
            "acme",
            "b",
            "sensors/b/t",
            T0 + timedelta(seconds=2 * i + 1),
            f"b{i}".encode(),
            partition=1,
            offset=10 + i,
        )
        for i in range(3)
    ),
    *(
        Row(
            "acme",
            "a",
            "sensors/a/t",
            T0 + timedelta(seconds=2 * i),
            f"a{i}".encode(),
            partition=0,
            offset=i,
        )
        for i in range(1, 5)
    ),
    Row("beta", "c", "other/x", T0, b"not matched"),
    Row("acme", "a", "sensors/a/t", at("2026-11-09T10:00:00"), b"before the window"),
    Row("acme", "a", "sensors/a/t", at("2026-11-11T00:00:00"), b"after the window"),
]
WINDOW = ("--since", "2026-11-10T00:00:00Z", "--until", "2026-11-11T00:00:00Z")


def replay(lake: Path, port: int, *args: str) -> Result:
    return runner.invoke(
        lake_app,
        ["replay", "--lake", str(lake), *WINDOW, "--port", str(port), *args],
        catch_exceptions=False,
    )


def test_replay_delivers_in_order_with_properties(broker: BrokerUnderTest, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    write_lake(lake, ROWS)
    subscriber = RawClient(broker.port)
    subscriber.connect("replay-sub", level=5)
    subscriber.subscribe(("replay/#", 1))
    result = replay(
        lake,
        broker.port,
        "--filter",
        "sensors/#",
        "--prefix",
        "replay/",
        "--json",
        "--rate",
        "1000",
    )
    assert result.exit_code == 0, (result.stdout, result.stderr)
    summary = json.loads(result.stdout)
    assert summary["event"] == "replayed"
    assert (summary["selected"], summary["published"], summary["refused"]) == (8, 8, 0)
    received = subscriber.receive_messages(8)
    subscriber.expect_silence(0.3)
    by_topic: dict[str, list[bytes]] = {}
    for message in received:
        assert message.qos == 1
        by_topic.setdefault(message.topic, []).append(message.payload)
    assert by_topic == {
        "replay/sensors/a/t": [b"a0", b"a1", b"a2", b"a3", b"a4"],
        "replay/sensors/b/t": [b"b0", b"b1", b"b2"],
    }
    first = next(m for m in received if m.payload == b"a0")
    assert first.props.get(Prop.CONTENT_TYPE) == "application/json"
    assert first.props.get(Prop.RESPONSE_TOPIC) == "replies/a"
    assert first.props.get(Prop.CORRELATION_DATA) == b"\x00corr"
    assert first.props.all(Prop.USER_PROPERTY) == [
        ("site", "north"),
        ("site", "south"),
        ("k", "v"),
    ]
    assert 3500 <= first.props.get(Prop.MESSAGE_EXPIRY_INTERVAL) <= 3600
    plain = next(m for m in received if m.payload == b"b1")
    assert Prop.CONTENT_TYPE not in plain.props
    subscriber.disconnect()


def subscribed(broker: BrokerUnderTest, topic_filter: str) -> RawClient:
    """An MQTT 5 subscriber to `topic_filter` at QoS 1."""
    subscriber = RawClient(broker.port)
    subscriber.connect("replay-sub", level=5)
    subscriber.subscribe((topic_filter, 1))
    return subscriber


def replayed(lake: Path, broker: BrokerUnderTest, since: str, until: str, *args: str) -> Any:
    """`mqttq lake replay --json` of [since, until) into `broker`: its summary (exit 0)."""
    result = runner.invoke(
        lake_app,
        ["replay", "--lake", str(lake), "--since", since, "--until", until,
         "--port", str(broker.port), "--json", *args],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def received_by_topic(subscriber: RawClient, count: int) -> dict[str, list[bytes]]:
    """`count` messages, then nothing more: their payloads by topic, in arrival order."""
    received = subscriber.receive_messages(count)
    subscriber.expect_silence(0.3)
    by_topic: dict[str, list[bytes]] = {}
    for message in received:
        assert message.qos == 1
        by_topic.setdefault(message.topic, []).append(message.payload)
    return by_topic


def test_replay_across_days_keeps_each_publishers_order_within_the_window(
    broker: BrokerUnderTest, tmp_path: Path
) -> None:
    # Three days, publishers a and b interleaving every hour; the window starts at 20:00 of
    # the first day and ends at 04:00 of the third; pieces of at most 10 rows (each day is
    # cut by time), at most 3 PUBLISHes waiting for their PUBACK.
    lake = tmp_path / "lake"
    write_lake(lake, fleet(days=3, per_hour=1))
    subscriber = subscribed(broker, "replay/#")
    summary = replayed(
        lake, broker, "2026-11-10T20:00:00Z", "2026-11-12T04:00:00Z",
        "--filter", "sensors/#", "--prefix", "replay/", "--max-in-flight", "3",
        "--piece-rows", "10",
    )  # fmt: skip
    assert (summary["selected"], summary["published"], summary["refused"]) == (64, 64, 0)
    # Nothing waits for a PUBACK before three were sent: the window fills, never overflows.
    assert summary["peak_in_flight"] == 3
    assert received_by_topic(subscriber, 64) == {
        "replay/sensors/a/t": [f"a{step}".encode() for step in range(20, 52)],
        "replay/sensors/b/t": [f"b{step}".encode() for step in range(20, 52)],
    }
    subscriber.disconnect()


def test_replay_of_an_hourly_lake(broker: BrokerUnderTest, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    write_hourly(lake, fleet(days=2, per_hour=2))
    subscriber = subscribed(broker, "sensors/#")
    summary = replayed(
        lake, broker, "2026-11-10T22:30:00Z", "2026-11-11T01:30:00Z", "--max-in-flight", "1"
    )
    assert (summary["selected"], summary["published"], summary["peak_in_flight"]) == (12, 12, 1)
    # Steps 45 (22:30) to 50 (01:00): hours 22 and 23 of one day, 0 and 1 of the next.
    assert received_by_topic(subscriber, 12) == {
        "sensors/a/t": [f"a{step}".encode() for step in range(45, 51)],
        "sensors/b/t": [f"b{step}".encode() for step in range(45, 51)],
    }
    subscriber.disconnect()


def test_replay_errors_are_one_line(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    write_lake(lake, ROWS)
    refused = replay(lake, free_port(), "--json")
    assert refused.exit_code == 1
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("mqttq: error: replay to 127.0.0.1:")
    bad_filter = replay(lake, free_port(), "--filter", "a/#/b")
    assert bad_filter.exit_code == 2
    (line,) = bad_filter.stderr.strip().splitlines()
    assert line.startswith("mqttq: error: bad --filter 'a/#/b'")
    missing = replay(tmp_path / "nowhere", free_port())
    assert missing.exit_code == 1
    assert missing.stderr.startswith("mqttq: error: no lake at ")
    for option in ("--max-in-flight", "--piece-rows"):
        bad = replay(lake, free_port(), option, "0")
        assert bad.exit_code == 2
        (line,) = bad.stderr.strip().splitlines()
        assert line.startswith(f"mqttq: error: bad {option} 0: give 1")
