"""One client's rows -> what is written to Redis for it (or why nothing is).

Rows stream in by (client_id, serial_number). `ClientRows` keeps the newest `limit` of a
client's rows in a bounded deque: the older ones are trimmed as they arrive, so a client with
millions of rows costs no more memory than one with `limit`. The limit is applied by serial
position over all rows, as TBMQ 1.x's size-based cleanup did; expiry is applied to what is
left, as its time-based cleanup did. So a trimmed row is never looked at again (it would
not be delivered anyway), and an expired row is counted and skipped.

`plan_client` then decides, from the kept rows:
- each live row becomes an `Entry`; a bad value anywhere in them is a `Problem`;
- two live rows with one packet id are a problem (both reported): one Redis key per id;
- the counters: `last_packet_id` from device_session_ctx (else the newest row's), and
  `last_serial` = the larger of device_session_ctx's and the newest row's serial, so the
  broker continues both where TBMQ left them.

A client with any problem is rejected whole, with every problem reported: a queue with a
silently missing message would be worse than no queue (the operator fixes the rows and runs
again with --resume; a rejected client is never written, so that run writes it).
"""

from __future__ import annotations

import time
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
    Problem,
    Reason,
    client_id_problem,
    deadline_of,
    entry_of,
    is_int,
)

Row = tuple[Any, ...]


@dataclass(slots=True)
class ClientPlan:
    """What one client becomes in Redis; nothing is written when `problems` is not empty."""

    client_id: str
    entries: list[Entry] = field(default_factory=list)
    """In serial order."""
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


class ClientRows:
    """One client's rows as they arrive: its session counters and its newest `limit` rows."""

    __slots__ = ("client_id", "kept", "session", "total")

    def __init__(self, client_id: str, limit: int, session: tuple[Any, Any] | None) -> None:
        self.client_id = client_id
        self.session = session
        """(last_serial_number, last_packet_id) of device_session_ctx; None: no row."""
        self.kept: deque[Row] = deque(maxlen=limit)
        self.total = 0


def session_of(row: Row) -> tuple[Any, Any] | None:
    """The session counters carried by a message row (None when the client has no
    device_session_ctx row)."""
    if not row[schema.HAS_SESSION]:
        return None
    return row[schema.SESSION_SERIAL], row[schema.SESSION_PACKET_ID]


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

    def rows_of(self, first: Row) -> ClientRows:
        """An empty accumulator for the client of message row `first`."""
        return ClientRows(first[schema.CLIENT_ID], self.limit, session_of(first))

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
        entries = plan.entries
        default_ttl_ms = self.default_ttl_ms
        valid_topics = self._valid_topics
        for row in rows.kept:
            serial, time_ms, expiry = row[schema.SERIAL], row[schema.TIME], row[schema.EXPIRY]
            if (
                type(serial) is int
                and 0 <= serial <= MAX_SCORE
                and type(time_ms) is int
                and time_ms >= 0
                and (expiry is None or (type(expiry) is int and expiry >= 0))
            ):
                deadline = time_ms + (default_ttl_ms if expiry is None else expiry * 1000)
            else:
                deadline_of(row, client_id, default_ttl_ms, problems)  # says what is wrong
                continue
            if deadline <= now:
                plan.expired += 1
                continue
            entry = entry_of(
                row, client_id, client_json, deadline, problems, valid_topics=valid_topics
            )
            if entry is not None:
                entries.append(entry)
        if len(entries) > 1:
            _check_packet_ids(client_id, entries, problems)
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


def _check_packet_ids(client_id: str, entries: list[Entry], problems: list[Problem]) -> None:
    """A problem for every entry whose packet id another entry has too."""
    if len({entry.packet_id for entry in entries}) == len(entries):
        return
    serials: dict[int, list[int]] = {}
    for entry in entries:
        serials.setdefault(entry.packet_id, []).append(entry.serial)
    if len(serials) == len(entries):
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
