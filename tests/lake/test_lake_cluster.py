"""`mqttq lake run` on `local-cluster[2,1,1024]` (issue 36): executors in JVMs of their own,
with their own Python workers decoding the properties, write the same lake."""

from __future__ import annotations

from collections import Counter

import pyarrow.dataset as ds
import pytest

from tests.lake.conftest import TOPIC, Scenario, run_to_end

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("spark"), pytest.mark.timeout(900)]


def test_the_same_log_on_a_local_cluster(lake_scenario: Scenario) -> None:
    lake = lake_scenario.lake.with_name("lake-cluster")
    code, lines, stderr = run_to_end(
        [
            "run",
            "--lake",
            str(lake),
            "--bootstrap-servers",
            lake_scenario.bootstrap,
            "--topic",
            TOPIC,
            "--available-now",
            "--master",
            "local-cluster[2,1,1024]",
            "--conf",
            "spark.executor.memory=512m",
            "--json",
        ]
    )
    assert code == 0, stderr
    assert lines[-1]["event"] == "stopped"
    assert lines[-1]["messages"] == len(lake_scenario.records)
    assert lines[-1]["quarantined"] == len(lake_scenario.foreign)
    rows = ds.dataset(lake / "messages", format="parquet", partitioning="hive").to_table()
    seen = Counter(
        zip(rows["kafka_partition"].to_pylist(), rows["kafka_offset"].to_pylist(), strict=True)
    )
    assert set(seen) == {(p, o) for p, o, _, _ in lake_scenario.records}
    assert max(seen.values()) == 1
    with_props = [r for r in rows.to_pylist() if r["user_properties"]]
    assert [len(r["user_properties"]) for r in with_props] == [3]
