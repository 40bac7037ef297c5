"""One TBMQ 1.x message row: checked, and turned into the Redis entry it becomes.

A row is checked column by column; every bad column is a `Problem` naming the client, the
serial number and the reason. A good row becomes an entry: its serial (the ZSET score), its
packet id (the message key's suffix), its expiry and the message as the JSON of
`mqttq.storage.formats.tbmq_json` (TBMQ 2.x's form, which the broker and TBMQ read).

The hot loop (`plan.Planner.plan`) checks a row with a few type tests and writes that JSON
directly, without building a `Message` first (`message_to_json` costs ~4x more per row);
this module holds what it calls for the rest: the MQTT 5 fields (`Mqtt5Tail`), and the
column-by-column checks that say what is wrong with a row the fast tests refused
(`deadline_of`, `row_problems`). The JSON is byte for byte `message_to_json`'s
(tests/migrate/test_migrate_validate.py checks that with Hypothesis).

What TBMQ 1.x stored, and how it is read:
- `user_properties`: `JacksonUtil.toString(UserProperties)`, `{"props":[{"k":..,"v":..}]}`,
  NULL when none (a bare list of `{"key","value"}` objects is accepted too, as codec_json does).
- `retain`: NULL (rows older than the column) reads as false.
- `packet_type`: `PUBLISH`, or `PUBREL` once the subscriber's PUBREC arrived [MQTT-4.3.3];
  a PUBREL row must be QoS 2, the only flow that has one.
- `msg_expiry_interval`: seconds from `time`, set only for MQTT 5 messages that carried one.
"""

from __future__ import annotations

import json
from binascii import b2a_base64
from dataclasses import dataclass
from enum import StrEnum
from json.encoder import encode_basestring_ascii
from typing import Any, Final

# Re-exported (`as`, PEP 484): migrate.options, migrate.plan and the Spark plan import it here.
from mqttq.codec.enums import MAX_PACKET_ID as MAX_PACKET_ID  # noqa: PLC0414
from mqttq.errors import ProtocolError
from mqttq.migrate import schema
from mqttq.routing.topics import validate_topic_name
from mqttq.storage.formats.tbmq_json import PUBLISH, PUBREL

MAX_SCORE: Final = 2**53
"""Largest serial a ZSET score (a double) holds exactly."""
MAX_CLIENT_ID_LENGTH: Final = 65535
"""Largest client id MQTT can carry [MQTT-1.5.4]."""


class Reason(StrEnum):
    """Why a row (or a client's session row) cannot be migrated; one per bad column."""

    CLIENT_ID = "client_id"
    SERIAL_NUMBER = "serial_number"
    TIME = "time"
    MSG_EXPIRY_INTERVAL = "msg_expiry_interval"
    PACKET_ID = "packet_id"
    PACKET_TYPE = "packet_type"
    QOS = "qos"
    TOPIC = "topic"
    PAYLOAD = "payload"
    USER_PROPERTIES = "user_properties"
    RETAIN = "retain"
    PAYLOAD_FORMAT_INDICATOR = "payload_format_indicator"
    CONTENT_TYPE = "content_type"
    RESPONSE_TOPIC = "response_topic"
    CORRELATION_DATA = "correlation_data"
    DUPLICATE_PACKET_ID = "duplicate_packet_id"
    """Two rows to migrate share a packet id: one Redis key cannot hold both."""
    SESSION = "device_session_ctx"
    """The client's session row has a counter out of range."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One bad value: which client, which row (None: the session row), why."""

    client_id: str
    serial_number: int | None
    reason: Reason
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {
            "client_id": self.client_id,
            "serial_number": self.serial_number,
            "reason": self.reason.value,
            "detail": self.detail,
        }


@dataclass(slots=True)
class Entry:
    """What one row becomes in Redis: `{c}_messages_<packet_id>` = json, PX ttl_ms, and
    the ZSET member for it with score `serial`."""

    serial: int
    packet_id: int
    deadline_ms: int
    """When the message expires (ms since the epoch): its expiry, else the default TTL."""
    json: str


def is_int(value: object) -> bool:
    """An integer column value (bool is not one)."""
    return type(value) is int


def client_id_problem(client_id: object) -> str | None:
    """Why `client_id` cannot name a Redis session, or None. An empty id would give an
    empty hash tag `{}`: Redis would then hash each key whole, and one client's keys would
    land in different cluster slots."""
    if not isinstance(client_id, str):
        return f"not a string but {type(client_id).__name__}"
    if not client_id:
        return "empty"
    if len(client_id) > MAX_CLIENT_ID_LENGTH:
        return f"longer than {MAX_CLIENT_ID_LENGTH} characters"
    return None


def deadline_of(
    row: tuple[Any, ...], client_id: str, default_ttl_ms: int, problems: list[Problem]
) -> int | None:
    """When the row's message expires (ms since the epoch): `time` + its expiry interval,
    else + the default TTL [MQTT-3.3.2-5]. None (and problems appended) when the serial,
    time or expiry interval is unusable."""
    serial = row[schema.SERIAL]
    time_ms = row[schema.TIME]
    expiry = row[schema.EXPIRY]
    bad = len(problems)
    if not is_int(serial) or not 0 <= serial <= MAX_SCORE:
        problems.append(
            Problem(client_id, None, Reason.SERIAL_NUMBER, f"{serial!r} is not in 0..2^53")
        )
        return None
    if not is_int(time_ms) or time_ms < 0:
        problems.append(Problem(client_id, serial, Reason.TIME, f"{time_ms!r} is not a time in ms"))
    if expiry is not None and (not is_int(expiry) or expiry < 0):
        problems.append(
            Problem(client_id, serial, Reason.MSG_EXPIRY_INTERVAL, f"{expiry!r} is not 0 or more")
        )
    if len(problems) > bad:
        return None
    ttl_ms = default_ttl_ms if expiry is None else expiry * 1000
    return int(time_ms + ttl_ms)


def row_problems(
    row: tuple[Any, ...], client_id: str, deadline_ms: int, problems: list[Problem]
) -> None:
    """Append a problem for each bad column of a live row (any column but the serial, time
    and expiry interval, which `deadline_of` checked)."""
    _base_problems(row, client_id, problems)
    Mqtt5Tail().render(row, deadline_ms, client_id, problems)


MAX_REMEMBERED_TOPICS: Final = 65536


def valid_topic_json(topic: object, valid_topics: dict[str, str]) -> str | None:
    """`topic` as a JSON string when it is a valid topic name (remembered), else None."""
    if not isinstance(topic, str) or _topic_problem(topic) is not None:
        return None
    if len(valid_topics) >= MAX_REMEMBERED_TOPICS:
        valid_topics.clear()
    encoded: str = encode_basestring_ascii(topic)
    valid_topics[topic] = encoded
    return encoded


def _base_problems(row: tuple[Any, ...], client_id: str, problems: list[Problem]) -> None:
    """A problem for each bad column among those every row needs."""
    serial = row[schema.SERIAL]

    def problem(reason: Reason, detail: str) -> None:
        problems.append(Problem(client_id, serial, reason, detail))

    packet_id = row[schema.PACKET_ID]
    if not is_int(packet_id) or not 1 <= packet_id <= MAX_PACKET_ID:
        problem(Reason.PACKET_ID, f"{packet_id!r} is not in 1..65535")
    qos = row[schema.QOS]
    if not is_int(qos) or not 0 <= qos <= 2:
        problem(Reason.QOS, f"{qos!r} is not 0, 1 or 2")
    packet_type = row[schema.PACKET_TYPE]
    if packet_type not in (PUBLISH, PUBREL):
        problem(Reason.PACKET_TYPE, f"{packet_type!r} is not PUBLISH or PUBREL")
    elif packet_type == PUBREL and qos != 2 and is_int(qos) and 0 <= qos <= 2:
        problem(Reason.PACKET_TYPE, f"PUBREL with qos {qos}: only QoS 2 has a PUBREL")
    topic_problem = _topic_problem(row[schema.TOPIC])
    if topic_problem is not None:
        problem(Reason.TOPIC, topic_problem)
    payload = row[schema.PAYLOAD]
    if type(payload) is not bytes:
        problem(Reason.PAYLOAD, f"not bytea but {_kind(payload)}")
    retain = row[schema.RETAIN]
    if retain is not None and type(retain) is not bool:
        problem(Reason.RETAIN, f"{retain!r} is not a boolean")


def _kind(value: object) -> str:
    return "NULL" if value is None else type(value).__name__


def _topic_problem(topic: object) -> str | None:
    if not isinstance(topic, str):
        return f"not a string but {_kind(topic)}"
    try:
        validate_topic_name(topic)
    except ProtocolError as exc:
        return f"{topic[:100]!r}: {exc.message}"
    return None


MAX_REMEMBERED_PROPERTIES: Final = 4096


class Mqtt5Tail:
    """The optional MQTT 5 fields of a message's JSON. `user_properties` texts seen before
    are not parsed again (a source's rows repeat a few of them; parsing one costs more than
    the rest of the row)."""

    __slots__ = ("_properties",)

    def __init__(self) -> None:
        self._properties: dict[str, str | Problem] = {}
        """user_properties text -> its JSON fragment, or the problem (client and serial
        left for the caller to fill in)."""

    def render(
        self, row: tuple[Any, ...], deadline_ms: int, client_id: str, problems: list[Problem]
    ) -> str:
        """The fields in `message_to_json`'s order, each with its leading comma; a problem
        appended for each bad one."""
        serial = row[schema.SERIAL]

        def problem(reason: Reason, detail: str) -> None:
            problems.append(Problem(client_id, serial, reason, detail))

        expiry = row[schema.EXPIRY]
        payload_format = row[schema.PAYLOAD_FORMAT]
        content_type = row[schema.CONTENT_TYPE]
        response_topic = row[schema.RESPONSE_TOPIC]
        correlation = row[schema.CORRELATION_DATA]
        parts = []
        if expiry is not None:
            parts.append(f',"msgExpiryInterval":{expiry}')
        if payload_format is not None:
            if payload_format not in (0, 1) or not is_int(payload_format):
                problem(Reason.PAYLOAD_FORMAT_INDICATOR, f"{payload_format!r} is not 0 or 1")
            parts.append(f',"payloadFormatIndicator":{payload_format}')
        if content_type is not None:
            if not isinstance(content_type, str):
                problem(Reason.CONTENT_TYPE, f"not a string but {_kind(content_type)}")
            else:
                parts.append(f',"contentType":{encode_basestring_ascii(content_type)}')
        if response_topic is not None:
            response_problem = _topic_problem(response_topic)
            if response_problem is not None:
                problem(Reason.RESPONSE_TOPIC, response_problem)
            else:
                parts.append(f',"responseTopic":{encode_basestring_ascii(response_topic)}')
        if correlation is not None:
            if type(correlation) is not bytes:
                problem(Reason.CORRELATION_DATA, f"not bytea but {_kind(correlation)}")
            else:
                encoded = b2a_base64(correlation, newline=False).decode()
                parts.append(f',"correlationData":"{encoded}"')
        properties = self._user_properties(row[schema.USER_PROPERTIES])
        if isinstance(properties, Problem):
            problem(properties.reason, properties.detail)
        elif properties:
            parts.append(properties)
        if expiry is not None:
            parts.append(f',"expiresAt":{deadline_ms}')
        return "".join(parts)

    def _user_properties(self, value: object) -> str | Problem:
        """The `"userProperties"` field ("" when none), or what is wrong with `value`."""
        if value is None:
            return ""
        known = self._properties.get(value) if type(value) is str else None
        if known is not None:
            return known
        pairs = user_properties_of(value)
        fragment: str | Problem
        if isinstance(pairs, str):
            fragment = Problem("", None, Reason.USER_PROPERTIES, pairs)
        elif pairs:
            props = ",".join(
                f'{{"k":{encode_basestring_ascii(k)},"v":{encode_basestring_ascii(v)}}}'
                for k, v in pairs
            )
            fragment = f',"userProperties":{{"props":[{props}]}}'
        else:
            fragment = ""
        if type(value) is str:
            if len(self._properties) >= MAX_REMEMBERED_PROPERTIES:
                self._properties.clear()
            self._properties[value] = fragment
        return fragment


def user_properties_of(value: object) -> list[tuple[str, str]] | str:
    """The pairs stored in a `user_properties` column, or a string saying why not."""
    if value is None:
        return []
    if not isinstance(value, str):
        return f"not a string but {_kind(value)}"
    if not value.strip():
        return []
    try:
        decoded = json.loads(value)
    except (ValueError, RecursionError):
        return f"not JSON: {value[:100]!r}"
    if decoded is None:
        return []
    if isinstance(decoded, dict):
        pairs, key_name, value_name = decoded.get("props"), "k", "v"
    else:
        pairs, key_name, value_name = decoded, "key", "value"
    if pairs is None:
        return []
    expected = 'not {"props": [{"k": .., "v": ..}]}'
    if not isinstance(pairs, list):
        return f"{expected}: {value[:100]!r}"
    result: list[tuple[str, str]] = []
    for pair in pairs:
        if not isinstance(pair, dict):
            return f"{expected}: {value[:100]!r}"
        key, val = pair.get(key_name), pair.get(value_name)
        if not isinstance(key, str) or not isinstance(val, str):
            return f"a user property without string key and value: {value[:100]!r}"
        result.append((key, val))
    return result
