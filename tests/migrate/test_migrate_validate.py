"""Rows -> Redis entries, without any server: the JSON form, validation, limit and expiry.

The JSON written by the migration must be exactly `codec_json.message_to_json`'s (what the
broker writes and TBMQ reads); Hypothesis compares the two on arbitrary valid rows.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqttq.codec.properties import Properties
from mqttq.migrate.plan import ClientPlan, Planner
from mqttq.migrate.validate import Reason, user_properties_of
from mqttq.model import Message
from mqttq.storage.formats.tbmq_json import message_from_json, message_to_json

NOW = 1_750_000_000_000
HOUR_MS = 3_600_000


def row(
    client_id: str = "dev",
    serial: Any = 1,
    *,
    topic: Any = "t/x",
    time_ms: Any = NOW,
    packet_id: Any = 1,
    packet_type: Any = "PUBLISH",
    qos: Any = 1,
    payload: Any = b"p",
    user_properties: Any = None,
    retain: Any = False,
    expiry: Any = None,
    payload_format: Any = None,
    content_type: Any = None,
    response_topic: Any = None,
    correlation: Any = None,
) -> tuple[Any, ...]:
    """A message row in the positions of `schema`."""
    return (
        client_id,
        serial,
        topic,
        time_ms,
        packet_id,
        packet_type,
        qos,
        payload,
        user_properties,
        retain,
        expiry,
        payload_format,
        content_type,
        response_topic,
        correlation,
    )


def plan_of(
    rows: list[tuple[Any, ...]],
    *,
    limit: int = 10_000,
    default_ttl: int = 3600,
    session: tuple[Any, Any] | None = None,
    planner: Planner | None = None,
) -> ClientPlan:
    """The plan of one client's rows; `session`: its device_session_ctx counters."""
    planner = planner or Planner(limit, default_ttl)
    client = planner.rows_of(rows[0], session)
    for r in rows:
        client.kept.append(r)
    client.total = len(rows)
    return planner.plan(client, NOW)


# --- the JSON form ------------------------------------------------------------------------

valid_text = st.text(st.characters(codec="utf-8"), max_size=20)
topic_names = st.text(
    st.characters(codec="utf-8", exclude_characters="+#\x00"), min_size=1, max_size=30
)
pairs = st.lists(st.tuples(valid_text, valid_text), max_size=3)


@st.composite
def valid_rows(draw: st.DrawFn) -> tuple[tuple[Any, ...], list[tuple[str, str]]]:
    qos = draw(st.integers(0, 2))
    packet_type = "PUBREL" if qos == 2 and draw(st.booleans()) else "PUBLISH"
    props = draw(pairs)
    as_json: str | None = None
    empty_as_json: bool = draw(st.booleans())
    if props or empty_as_json:
        as_json = json.dumps({"props": [{"k": k, "v": v} for k, v in props]})
    return (
        row(
            draw(valid_text.filter(bool)),
            draw(st.integers(0, 2**53)),
            topic=draw(topic_names),
            time_ms=draw(st.integers(NOW, 4_000_000_000_000)),
            packet_id=draw(st.integers(1, 65535)),
            packet_type=packet_type,
            qos=qos,
            payload=draw(st.binary(max_size=64)),
            user_properties=as_json,
            retain=draw(st.sampled_from([None, False, True])),
            expiry=draw(st.none() | st.integers(1, 2**31 - 1)),
            payload_format=draw(st.sampled_from([None, 0, 1])),
            content_type=draw(st.none() | valid_text),
            response_topic=draw(st.none() | topic_names),
            correlation=draw(st.none() | st.binary(max_size=16)),
        ),
        props,
    )


@settings(deadline=None, max_examples=300)
@given(valid_rows())
def test_entry_json_is_codec_json_form(case: tuple[tuple[Any, ...], list[tuple[str, str]]]) -> None:
    r, props = case
    (cid, serial, topic, time_ms, packet_id, packet_type, qos, payload) = r[:8]
    retain, expiry, payload_format, content_type, response_topic, correlation = r[9:15]
    plan = plan_of([r], default_ttl=10**9)
    assert not plan.problems, plan.problems
    [entry] = plan.entries
    message = Message(
        topic,
        payload,
        qos,
        bool(retain),
        Properties(
            payload_format_indicator=payload_format,
            message_expiry_interval=expiry,
            content_type=content_type,
            response_topic=response_topic,
            correlation_data=correlation,
            user_properties=props,
        ),
        created_at=time_ms / 1000,
        expires_at=None if expiry is None else (time_ms + expiry * 1000) / 1000,
    )
    assert entry.json == message_to_json(
        message, client_id=cid, packet_id=packet_id, packet_type=packet_type
    )
    assert (entry.serial, entry.packet_id) == (serial, packet_id)
    ttl_ms = 10**12 if expiry is None else expiry * 1000
    assert entry.deadline_ms == time_ms + ttl_ms
    stored = message_from_json(entry.json)
    assert (stored.message.payload, stored.packet_type) == (payload, packet_type)


def test_user_properties_column_forms() -> None:
    assert user_properties_of(None) == []
    assert user_properties_of("") == []
    assert user_properties_of("null") == []
    assert user_properties_of('{"props":[{"k":"a","v":"1"},{"k":"a","v":"2"}]}') == [
        ("a", "1"),
        ("a", "2"),
    ]
    assert user_properties_of('[{"key":"b","value":"x"}]') == [("b", "x")]
    assert isinstance(user_properties_of("{not json"), str)
    assert isinstance(user_properties_of('{"props":[{"k":"a","v":1}]}'), str)
    assert isinstance(user_properties_of('{"props":"x"}'), str)


# --- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"packet_id": None}, Reason.PACKET_ID),
        ({"packet_id": 0}, Reason.PACKET_ID),
        ({"packet_id": 65536}, Reason.PACKET_ID),
        ({"qos": 3}, Reason.QOS),
        ({"qos": -1}, Reason.QOS),
        ({"qos": None}, Reason.QOS),
        ({"topic": ""}, Reason.TOPIC),
        ({"topic": "a/+/b"}, Reason.TOPIC),
        ({"topic": None}, Reason.TOPIC),
        ({"packet_type": None}, Reason.PACKET_TYPE),
        ({"packet_type": "PUBACK"}, Reason.PACKET_TYPE),
        ({"packet_type": "PUBREL", "qos": 1}, Reason.PACKET_TYPE),
        ({"payload": "text, not bytea"}, Reason.PAYLOAD),
        ({"payload": None}, Reason.PAYLOAD),
        ({"user_properties": "{"}, Reason.USER_PROPERTIES),
        ({"payload_format": 2}, Reason.PAYLOAD_FORMAT_INDICATOR),
        ({"response_topic": "r/#"}, Reason.RESPONSE_TOPIC),
        ({"correlation": "text"}, Reason.CORRELATION_DATA),
        ({"retain": "yes"}, Reason.RETAIN),
        ({"time_ms": None}, Reason.TIME),
        ({"time_ms": -5}, Reason.TIME),
        ({"expiry": -1}, Reason.MSG_EXPIRY_INTERVAL),
    ],
)
def test_a_bad_value_rejects_the_client(change: dict[str, Any], reason: Reason) -> None:
    good = row("dev", 1, packet_id=1)
    bad = row("dev", 2, **{"packet_id": 2, **change})
    plan = plan_of([good, bad, row("dev", 3, packet_id=3)])
    assert plan.rejected
    assert [(p.client_id, p.serial_number, p.reason) for p in plan.problems] == [("dev", 2, reason)]


def test_every_bad_row_of_a_client_is_reported() -> None:
    rows = [
        row("dev", 1, qos=7, topic=""),
        row("dev", 2),  # packet id 1 as well: see below
        row("dev", 3, packet_id=None),
        row("dev", 4, packet_id=4),
    ]
    rows[1] = row("dev", 2, packet_id=4)
    plan = plan_of(rows)
    found = sorted((p.serial_number or 0, p.reason.value) for p in plan.problems)
    assert found == [
        (1, "qos"),
        (1, "topic"),
        (2, "duplicate_packet_id"),
        (3, "packet_id"),
        (4, "duplicate_packet_id"),
    ]
    assert "serials 2, 4" in plan.problems[-1].detail


def test_empty_client_id_is_rejected() -> None:
    plan = plan_of([row("", 1)])
    assert [p.reason for p in plan.problems] == [Reason.CLIENT_ID]


# --- limit, expiry, counters ------------------------------------------------------------


def test_only_the_newest_limit_rows_are_kept() -> None:
    rows = [row("dev", s, packet_id=s) for s in range(1, 11)]
    plan = plan_of(rows, limit=3)
    assert [e.serial for e in plan.entries] == [8, 9, 10]
    assert (plan.trimmed, plan.expired, plan.rows) == (7, 0, 10)


def test_bad_or_duplicate_rows_beyond_the_limit_do_not_matter() -> None:
    rows = [row("dev", 1, qos=9, packet_id=3), *(row("dev", s, packet_id=s) for s in (2, 3, 4))]
    plan = plan_of(rows, limit=3)
    assert not plan.problems
    assert [e.packet_id for e in plan.entries] == [2, 3, 4]


def test_expired_rows_are_skipped_and_counted() -> None:
    rows = [
        row("dev", 1, packet_id=1, time_ms=NOW - 2 * HOUR_MS),  # default TTL 1 h: expired
        row("dev", 2, packet_id=2, time_ms=NOW - 2 * HOUR_MS, expiry=3 * 3600),  # 1 h left
        row("dev", 3, packet_id=3, time_ms=NOW - 10_000, expiry=10),  # expires now: gone
        row("dev", 4, packet_id=4, time_ms=NOW - 10_000),
        # An expired row sharing a live row's packet id is no duplicate.
        row("dev", 5, packet_id=2, time_ms=NOW - 5 * HOUR_MS),
    ]
    plan = plan_of(rows)
    assert not plan.problems
    assert [(e.serial, e.deadline_ms) for e in plan.entries] == [
        (2, NOW + HOUR_MS),
        (4, NOW - 10_000 + HOUR_MS),
    ]
    assert plan.expired == 3


def test_counters_come_from_the_session_row() -> None:
    rows = [row("dev", 70_000, packet_id=4465)]
    plan = plan_of(rows, session=(70_010, 4475))
    assert (plan.last_packet_id, plan.last_serial) == (4475, 70_010)


def test_counters_without_a_session_row_come_from_the_newest_row() -> None:
    plan = plan_of([row("dev", 65_535, packet_id=65_535), row("dev", 65_536, packet_id=1)])
    assert (plan.last_packet_id, plan.last_serial) == (1, 65_536)


def test_serial_never_goes_back_behind_a_row() -> None:
    plan = plan_of([row("dev", 500, packet_id=5)], session=(10, None))
    assert (plan.last_packet_id, plan.last_serial) == (5, 500)


def test_bad_session_counters_reject_the_client() -> None:
    plan = plan_of([row("dev", 1)], session=(-1, 70_000))
    assert sorted(p.detail.split()[0] for p in plan.problems) == [
        "last_packet_id",
        "last_serial_number",
    ]
    assert all(p.reason is Reason.SESSION and p.serial_number is None for p in plan.problems)


def test_session_only_client() -> None:
    plan = Planner(10, 60).plan_session(("idle", 12, 7))
    assert (plan.entries, plan.last_packet_id, plan.last_serial) == ([], 7, 12)
    assert not plan.rejected


def test_limits_of_the_planner() -> None:
    with pytest.raises(ValueError, match="65535"):
        Planner(65_536, 60)
    with pytest.raises(ValueError, match="default_ttl"):
        Planner(10, 0)


def test_user_properties_are_parsed_once_and_reported_for_every_row() -> None:
    """The planner remembers user_properties texts: a repeated bad one is still reported
    for each row and client that holds it, a repeated good one gives the same JSON."""
    planner = Planner(10_000, 3600)
    good = '{"props":[{"k":"unit","v":"C"}]}'
    first = plan_of([row("a", 1, user_properties=good)], planner=planner)
    second = plan_of([row("b", 1, user_properties=good)], planner=planner)
    assert first.texts[0].endswith(',"userProperties":{"props":[{"k":"unit","v":"C"}]}}')
    assert second.texts[0].replace('"clientId":"b"', '"clientId":"a"') == first.texts[0]
    bad = "{broken"
    rejected = [
        plan_of([row(client, serial, user_properties=bad)], planner=planner)
        for client, serial in (("c", 5), ("d", 6), ("c", 7))
    ]
    assert [
        [(p.client_id, p.serial_number, p.reason, p.detail) for p in plan.problems]
        for plan in rejected
    ] == [
        [(client, serial, Reason.USER_PROPERTIES, "not JSON: '{broken'")]
        for client, serial in (("c", 5), ("d", 6), ("c", 7))
    ]


def test_entries_view_matches_the_strings_written() -> None:
    plan = plan_of([row("dev", s, packet_id=s, time_ms=NOW + s) for s in (3, 4)])
    assert plan.heads == [f"3 3 {NOW + 3 + 3_600_000}", f"4 4 {NOW + 4 + 3_600_000}"]
    assert [(e.serial, e.packet_id, e.deadline_ms, e.json) for e in plan.entries] == [
        (3, 3, NOW + 3 + 3_600_000, plan.texts[0]),
        (4, 4, NOW + 4 + 3_600_000, plan.texts[1]),
    ]
    assert plan.count == 2
