"""Fixtures of the Spark tests: ONE SparkSession for the whole pytest run (one SparkContext
per process is all Spark allows), on `local-cluster[2,1,1024]` so that executors are
separate JVMs with their own Python workers: serialization and per-partition connections
are proven, not only threads. Real PostgreSQL and Redis come from the shared fixtures
(the root conftest's `pytest_plugins`).

pyspark missing is a failure with the install hint, never a silent skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from mqttq.spark.session import (
    POSTGRES_JDBC,
    SPARK_MISSING,
    SparkError,
    SparkOptions,
    build_session,
    require_pyspark,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["spark"]

TEST_MASTER = "local-cluster[2,1,1024]"


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The test run's SparkSession: two executor JVMs (1 core, 1 GiB each), the PostgreSQL
    JDBC driver on the class path; stopped when the run ends."""
    try:
        require_pyspark()
    except SparkError:
        pytest.fail(SPARK_MISSING, pytrace=False)
    session = build_session(
        SparkOptions(
            master=TEST_MASTER,
            app_name="mqttq-tests",
            packages=(POSTGRES_JDBC,),
            # Two cores shared with other test runs: keep the JVMs small and patient.
            conf=(("spark.driver.memory", "1g"), ("spark.network.timeout", "300s")),
        )
    )
    yield session
    session.stop()
