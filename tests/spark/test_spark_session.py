"""The Spark foundation: options parsing, JDBC options, one-line errors, the progress bar,
and the shared session really running Python on separate executor processes."""

from __future__ import annotations

import io
import os
from typing import TYPE_CHECKING

import pytest
from rich.console import Console

from mqttq.spark.progress import stage_progress
from mqttq.spark.session import SparkError, jdbc_options, parse_conf, redact, spark_error_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_parse_conf_keeps_pairs_in_order_and_values_with_equals() -> None:
    assert parse_conf(["spark.a=1", "spark.b.c=x=y", "spark.empty="]) == (
        ("spark.a", "1"),
        ("spark.b.c", "x=y"),
        ("spark.empty", ""),
    )


@pytest.mark.parametrize("bad", ["spark.executor.memory", "=2g", "bad key=1"])
def test_parse_conf_names_the_bad_value(bad: str) -> None:
    with pytest.raises(SparkError, match=f"bad --conf {bad!r}"):
        parse_conf(["spark.ok=1", bad])


def test_jdbc_options_from_a_postgres_url() -> None:
    assert jdbc_options("postgresql://tb%40mq:s%3Acret@db.example:5433/thingsboard?ssl=true") == {
        "url": "jdbc:postgresql://db.example:5433/thingsboard?ssl=true",
        "driver": "org.postgresql.Driver",
        "user": "tb@mq",
        "password": "s:cret",
    }
    assert jdbc_options("postgres://127.0.0.1/db")["url"] == "jdbc:postgresql://127.0.0.1/db"


def test_jdbc_options_refuse_another_form_without_showing_the_password() -> None:
    with pytest.raises(SparkError, match=r"postgresql://USER:PASSWORD@HOST:PORT/DB") as caught:
        jdbc_options("mysql://root:hunter2@db/x")
    assert "hunter2" not in str(caught.value)
    assert redact("postgresql://u:pw@h/db") == "postgresql://u:***@h/db"


def test_executors_are_separate_processes_running_this_tree(spark: SparkSession) -> None:
    def where(_: int) -> tuple[int, str]:
        import mqttq  # noqa: PLC0415 (imported on the executor)

        return os.getpid(), mqttq.__file__ or ""

    seen = spark.sparkContext.parallelize(range(8), 8).map(where).distinct().collect()
    assert os.getpid() not in {pid for pid, _ in seen}
    assert {path.split("/")[-2:] == ["mqttq", "__init__.py"] for _, path in seen} == {True}


def test_a_java_failure_is_one_line(spark: SparkSession) -> None:
    reader = spark.read.format("jdbc").options(
        **jdbc_options("postgresql://nobody:pw@127.0.0.1:1/none"), dbtable="device_publish_msg"
    )
    with pytest.raises(Exception) as caught:
        reader.load()
    line = spark_error_line(caught.value)
    assert "\n" not in line
    assert "Connection refused" in line
    assert "at org." not in line


def test_stage_progress_draws_tasks_on_a_terminal_only(spark: SparkSession) -> None:
    # Nested, so cloudpickle ships it by value: the executors cannot import `tests`.
    def slow(value: int) -> int:
        import time  # noqa: PLC0415 (runs on the executor)

        time.sleep(1)
        return value

    terminal = io.StringIO()
    console = Console(file=terminal, force_terminal=True, width=100)
    with stage_progress(spark, console, "counting"):
        assert spark.sparkContext.parallelize(range(4), 4).map(slow).sum() == 6
    assert "counting" in terminal.getvalue()
    assert "tasks" in terminal.getvalue()

    piped = io.StringIO()
    with stage_progress(spark, Console(file=piped, force_terminal=False), "counting"):
        spark.sparkContext.parallelize(range(2), 2).count()
    assert piped.getvalue() == ""
