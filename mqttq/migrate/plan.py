"""One client's rows -> what is written to Redis for it (or why nothing is).

Rows stream in by (client_id, serial_number). `ClientRows` keeps the newest `limit` of a
client's rows in a bounded deque: the older ones are trimmed as they arrive, so a client with
millions of rows costs no more memory than one with `limit`. The limit is applied by serial
position over all rows, as TBMQ 1.x's size-based cleanup did; expiry is applied to what is
left, as its time-based cleanup did. So a trimmed row is never looked at again (it would
not be delivered anyway), and an expired row is counted and skipped.

`Planner.plan` then decides, from the kept rows:
- each live row becomes an entry; a bad value anywhere in them is a `Problem`;
- two live rows with one packet id are a problem (both reported): one Redis key per id;
- the counters: `last_packet_id` from device_session_ctx (else the newest row's), and
  `last_serial` = the larger of device_session_ctx's and the newest row's serial, so the
  broker continues both where TBMQ left them.

A client with any problem is rejected whole, with every problem reported: a queue with a
silently missing message would be worse than no queue (the operator fixes the rows and runs
again with --resume; a rejected client is never written, so that run writes it).

The entries are kept as the two strings the write script takes, not as objects: `heads`
("serial packet_id deadline_ms") and `texts` (the JSON). This loop is the migration's hot
path on the Python side (docs/benchmarks.md, issue 4): per row it unpacks the tuple once,
checks types with `type(x) is int` (a bool is no int here), and formats each string once;
the JSON's first fields (client id, topic) are formatted once per (client, topic). `entries`
builds `Entry` objects on demand, for --verify and tests.
"""

from __future__ import annotations

import time
from binascii import b2a_base64
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii
from typing import Any

from mqttq.migrate import schema
from mqttq.migrate.validate import (
    MAX_PACKET_ID,
    MAX_SCORE,
    Entry,
    Mqtt5Tail,
    Problem,
    Reason,
    client_id_problem,
    deadline_of,
    is_int,
    row_problems,
    valid_topic_json,
)
from mqttq.storage.formats.tbmq_json import PUBLISH, PUBREL

Row = tuple[Any, ...]


@dataclass(slots=True)
class ClientPlan:
    """What one client becomes in Redis; nothing is written when `problems` is not empty."""

    client_id: str
    heads: list[str] = field(default_factory=list)
    """Per entry, in serial order: "serial packet_id deadline_ms" (decimal)."""
    texts: list[str] = field(default_factory=list)
    """Per entry, in the same order: the message's JSON (ASCII: every string escaped)."""
    last_packet_id: int | None = None
    last_serial: int | None = None
    rows: int = 0
    """Message rows read for the client."""
    expired: int = 0
    trimmed: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def rejected(self) -> bool:
        return bool(self.problems)

    @property
    def count(self) -> int:
        """How many entries (messages to write)."""
        return len(self.texts)

    @property
    def entries(self) -> list[Entry]:
        """The entries as objects, in serial order (built on each call)."""
        return [
            Entry(int(serial), int(packet_id), int(deadline), text)
            for (serial, packet_id, deadline), text in zip(
                map(str.split, self.heads), self.texts, strict=True
            )
        ]


class ClientRows:
    """One client's rows as they arrive: its session counters and its newest `limit` rows."""

    __slots__ = ("client_id", "kept", "session", "total")

    def __init__(self, client_id: str, limit: int, session: tuple[Any, Any] | None) -> None:
        self.client_id = client_id
        self.session = session
        """(last_serial_number, last_packet_id) of device_session_ctx; None: no row."""
        self.kept: deque[Row] = deque(maxlen=limit)
        self.total = 0


class Planner:
    """Turns clients' rows into `ClientPlan`s, for a queue limit and a default TTL."""

    def __init__(
        self, limit: int, default_ttl: int, *, clock: Callable[[], float] = time.time
    ) -> None:
        if not 1 <= limit <= MAX_PACKET_ID:
            raise ValueError(f"limit must be 1..65535, not {limit}")
        if default_ttl < 1:
            raise ValueError(f"default_ttl must be at least 1 second, not {default_ttl}")
        self.limit = limit
        self.default_ttl_ms = default_ttl * 1000
        self.clock = clock
        self._valid_topics: dict[str, str] = {}
        self._tail = Mqtt5Tail()

    def rows_of(self, first: Row, session: tuple[Any, Any] | None = None) -> ClientRows:
        """An empty accumulator for the client of message row `first`, with its session
        row's (last_serial_number, last_packet_id) when it has one."""
        return ClientRows(first[schema.CLIENT_ID], self.limit, session)

    def plan(self, rows: ClientRows, now_ms: int | None = None) -> ClientPlan:
        """The plan of a client whose rows all arrived (`now_ms`: expiry reference)."""
        now = int(self.clock() * 1000) if now_ms is None else now_ms
        client_id = rows.client_id
        plan = ClientPlan(client_id, rows=rows.total, trimmed=rows.total - len(rows.kept))
        problems = plan.problems
        id_problem = client_id_problem(client_id)
        if id_problem is not None:
            problems.append(Problem(str(client_id), None, Reason.CLIENT_ID, id_problem))
            return plan
        client_json = encode_basestring_ascii(client_id)
        add_head, add_text = plan.heads.append, plan.texts.append
        packet_ids: set[int] = set()
        add_packet_id = packet_ids.add
        default_ttl_ms = self.default_ttl_ms
        valid_topics = self._valid_topics
        tail = self._tail
        # topic -> the JSON up to the value of "time": the same for all of a client's rows
        # with that topic.
        heads_of_json: dict[Any, str] = {}
        expired = 0
        for row in rows.kept:
            (
                _client,
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
            ) = row
            if not (
                type(serial) is int
                and 0 <= serial <= MAX_SCORE
                and type(time_ms) is int
                and time_ms >= 0
            ):
                deadline_of(row, client_id, default_ttl_ms, problems)  # says what is wrong
                continue
            if expiry is None:
                deadline = time_ms + default_ttl_ms
            elif type(expiry) is int and expiry >= 0:
                deadline = time_ms + expiry * 1000
            else:
                deadline_of(row, client_id, default_ttl_ms, problems)
                continue
            if deadline <= now:
                expired += 1
                continue
            json_head = heads_of_json.get(topic)
            if json_head is None and type(topic) is str:
                topic_json = valid_topics.get(topic) or valid_topic_json(topic, valid_topics)
                if topic_json is not None:
                    json_head = f'{{"clientId":{client_json},"topicName":{topic_json},"time":'
                    heads_of_json[topic] = json_head
            if not (
                json_head is not None
                and type(packet_id) is int
                and 0 < packet_id <= MAX_PACKET_ID
                and type(qos) is int
                and 0 <= qos <= 2
                and (packet_type == PUBLISH or (packet_type == PUBREL and qos == 2))
                and type(payload) is bytes
                and (retain is None or type(retain) is bool)
            ):
                row_problems(row, client_id, deadline, problems)
                continue
            if (
                expiry is None
                and payload_format is None
                and content_type is None
                and response_topic is None
                and correlation is None
                and user_properties is None
            ):
                mqtt5 = ""
            else:
                bad = len(problems)
                mqtt5 = tail.render(row, deadline, client_id, problems)
                if len(problems) > bad:
                    continue
            add_text(
                f'{json_head}{time_ms},"qos":{qos},"packetId":{packet_id},'
                f'"packetType":"{packet_type}",'
                f'"payload":"{b2a_base64(payload, newline=False).decode()}",'
                f'"retained":{"true" if retain else "false"}{mqtt5}}}'
            )
            add_head(f"{serial} {packet_id} {deadline}")
            add_packet_id(packet_id)
        plan.expired = expired
        if len(packet_ids) != len(plan.heads):
            _check_packet_ids(client_id, plan.heads, problems)
        newest = rows.kept[-1] if rows.kept else None
        self._counters(plan, rows.session, newest)
        return plan

    def plan_session(self, row: Row) -> ClientPlan:
        """The plan of a client that has a device_session_ctx row and no message."""
        client_id = row[schema.S_CLIENT_ID]
        plan = ClientPlan(client_id)
        id_problem = client_id_problem(client_id)
        if id_problem is not None:
            plan.problems.append(Problem(str(client_id), None, Reason.CLIENT_ID, id_problem))
            return plan
        self._counters(plan, (row[schema.S_SERIAL], row[schema.S_PACKET_ID]), None)
        return plan

    def _counters(
        self, plan: ClientPlan, session: tuple[Any, Any] | None, newest: Row | None
    ) -> None:
        session_serial, session_packet_id = session if session is not None else (None, None)
        if session_packet_id is not None and (
            not is_int(session_packet_id) or not 0 <= session_packet_id <= MAX_PACKET_ID
        ):
            plan.problems.append(
                Problem(
                    plan.client_id,
                    None,
                    Reason.SESSION,
                    f"last_packet_id {session_packet_id!r} is not in 0..65535",
                )
            )
        if session_serial is not None and (
            not is_int(session_serial) or not 0 <= session_serial <= MAX_SCORE
        ):
            plan.problems.append(
                Problem(
                    plan.client_id,
                    None,
                    Reason.SESSION,
                    f"last_serial_number {session_serial!r} is not in 0..2^53",
                )
            )
        if plan.problems:
            return
        newest_id: Any = newest[schema.PACKET_ID] if newest is not None else None
        newest_serial: Any = newest[schema.SERIAL] if newest is not None else None
        if session_packet_id is not None:
            plan.last_packet_id = session_packet_id
        elif is_int(newest_id) and 1 <= newest_id <= MAX_PACKET_ID:
            plan.last_packet_id = newest_id
        serials = [s for s in (session_serial, newest_serial) if s is not None]
        if serials:
            plan.last_serial = max(serials)


def _check_packet_ids(client_id: str, heads: list[str], problems: list[Problem]) -> None:
    """A problem for every entry whose packet id another entry has too."""
    serials: dict[int, list[int]] = {}
    for head in heads:
        numbers = head.split()
        serials.setdefault(int(numbers[1]), []).append(int(numbers[0]))
    if len(serials) == len(heads):
        return
    for packet_id, shared in serials.items():
        if len(shared) > 1:
            listed = ", ".join(str(s) for s in shared)
            for serial in shared:
                problems.append(
                    Problem(
                        client_id,
                        serial,
                        Reason.DUPLICATE_PACKET_ID,
                        f"packet id {packet_id} is held by live rows with serials {listed}",
                    )
                )
