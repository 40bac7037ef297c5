"""The lake `mqttq lake run` wrote from the Kafka log (the session's `lake_scenario`: a real
broker on Kafka, a SIGKILLed and restarted stream) read by `report traffic`, `lake query`
and `lake replay`: the numbers are those of the records in the log, decoded by mqttq's
own decoder, and replay delivers them to a real subscriber in each publisher's order."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from mqttq.cli.lake import lake_app
from mqttq.cli.report import report_app
from tests.conftest import BrokerUnderTest
from tests.integration.raw_client import RawClient
from tests.lake.conftest import Scenario
from tests.spark.conftest import spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["spark"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("spark"),
    pytest.mark.timeout(900),  # the scenario: Kafka, a broker, three Spark drivers
]

runner = CliRunner()


def window(scenario: Scenario) -> tuple[str, ...]:
    times = [message.created_at for _, _, _, message in scenario.records]
    since = datetime.fromtimestamp(min(times), UTC) - timedelta(minutes=5)
    until = datetime.fromtimestamp(max(times), UTC) + timedelta(minutes=5)
    return ("--since", since.isoformat(), "--until", until.isoformat())


def test_traffic_and_query_on_the_streamed_lake(
    spark: SparkSession, lake_scenario: Scenario
) -> None:
    records = [message for _, _, _, message in lake_scenario.records]
    result = runner.invoke(
        report_app,
        ["traffic", "--lake", str(lake_scenario.lake), *window(lake_scenario), "--json"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, (result.stdout, result.stderr)
    data = json.loads(result.stdout)
    summary = data["summary"]
    assert summary["messages"] == len(records)
    assert summary["payload_bytes"] == sum(len(m.payload) for m in records)
    qos = Counter(m.qos for m in records)
    assert (summary["qos0"], summary["qos1"], summary["qos2"]) == (qos[0], qos[1], qos[2])
    assert summary["retained"] == sum(1 for m in records if m.retain)
    per_client = Counter(m.publisher_id for m in records)
    assert {t["client_id"]: t["messages"] for t in data["top_talkers"]} == dict(per_client)

    query = runner.invoke(
        lake_app,
        ["query", "--lake", str(lake_scenario.lake), "--json",
         "SELECT count(*) AS n, count(DISTINCT kafka_partition, kafka_offset) AS offsets "
         "FROM messages"],
        catch_exceptions=False,
    )  # fmt: skip
    assert query.exit_code == 0, query.stderr
    assert json.loads(query.stdout) == [{"n": len(records), "offsets": len(records)}]


def test_replay_of_the_streamed_lake(lake_scenario: Scenario, broker: BrokerUnderTest) -> None:
    expected = [m for _, _, _, m in sorted(lake_scenario.records) if m.topic == "bulk/x"]
    subscriber = RawClient(broker.port)
    subscriber.connect("replay-sub", level=5)
    subscriber.subscribe(("again/#", 1))
    result = runner.invoke(
        lake_app,
        ["replay", "--lake", str(Path(lake_scenario.lake)), *window(lake_scenario),
         "--filter", "bulk/#", "--prefix", "again/", "--port", str(broker.port), "--json"],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert json.loads(result.stdout)["published"] == len(expected) == 20
    received = subscriber.receive_messages(len(expected))
    assert [m.payload for m in received] == [m.payload for m in expected]
    assert {m.topic for m in received} == {"again/bulk/x"}
    subscriber.disconnect()
