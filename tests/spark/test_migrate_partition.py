"""The Spark engine's pieces that need no Spark: the partition predicates, and the grouping
of a partition's sorted rows into one plan per client."""

from __future__ import annotations

from typing import Any

from mqttq.migrate.plan import Planner
from mqttq.spark.migrate_partition import plans_of
from mqttq.spark.migrate_source import predicates

NOW_S = 1_700_000_000


def test_predicates_split_by_hash_and_quote_what_they_embed() -> None:
    assert predicates(2) == [
        "mod(abs(hashtext(client_id)::bigint), 2) = 0",
        "mod(abs(hashtext(client_id)::bigint), 2) = 1",
    ]
    assert predicates(2, "o'k\\_%", {1: "it's"}) == [
        "mod(abs(hashtext(client_id)::bigint), 2) = 0 AND client_id LIKE 'o''k\\_%' ESCAPE '\\'",
        "mod(abs(hashtext(client_id)::bigint), 2) = 1 AND client_id LIKE 'o''k\\_%' ESCAPE '\\'"
        " AND client_id > 'it''s'",
    ]


def message(client_id: str, serial: int, packet_id: int) -> tuple[Any, ...]:
    """A source row of kind 1 (bytea columns as Spark gives them: bytearray)."""
    row = (client_id, serial, "t", NOW_S * 1000, packet_id, "PUBLISH", 1, bytearray(b"p"))
    return (*row, None, False, None, None, None, None, None, None, None, 1)


def session(client_id: str, serial: int, packet_id: int) -> tuple[Any, ...]:
    return (client_id, *([None] * 14), serial, packet_id, 0)


def test_rows_become_one_plan_per_client_with_its_session_counters() -> None:
    rows = [
        message("a", 1, 1),
        message("a", 2, 2),
        session("b", 9, 9),
        session("c", 70000, 4),
        message("c", 65536, 1),
    ]
    planner = Planner(10, 3600, clock=lambda: NOW_S)
    plans = [
        (plan.client_id, plan.heads, plan.last_packet_id, plan.last_serial, rows)
        for plan, rows in plans_of(rows, planner)
    ]
    deadline = NOW_S * 1000 + 3_600_000
    assert plans == [
        ("a", [f"1 1 {deadline}", f"2 2 {deadline}"], 2, 2, 2),
        ("b", [], 9, 9, 0),
        ("c", [f"65536 1 {deadline}"], 4, 70000, 1),
    ]
