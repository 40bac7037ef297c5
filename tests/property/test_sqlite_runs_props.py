"""The SQLite run layout (schema 6) behaves exactly like the in-memory store.

Generated sequences of queue operations (enqueue with expiries and past the limit, remove
by packet id, unknown removals, PUBREL marks, clears, fetches at a moving clock) run on
`MemoryStorage` and on `SqliteStorage` with a tiny writer index (so clients are evicted and
read back from their runs all the time), under both queue-full policies. Every result must
match: serials, packet ids, messages, PUBREL state, refusals.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mqttq.model import Message
from mqttq.storage.memory import MemoryStorage
from mqttq.storage.ports import QueuedMessage, QueueFullPolicy, Storage
from mqttq.storage.sqlite import runs as sqlite_runs
from mqttq.storage.sqlite.store import SqliteStorage

CLIENTS = ("a", "b", "c")
LIMIT = 4

Op = tuple[Any, ...]

enqueues = st.tuples(
    st.just("enqueue"),
    st.lists(
        st.tuples(st.sampled_from(CLIENTS), st.sampled_from([None, 5.0, 50.0])),
        min_size=1,
        max_size=7,
    ),
)
operations = st.one_of(
    enqueues,
    st.tuples(st.just("remove"), st.sampled_from(CLIENTS), st.lists(st.integers(0, 5), max_size=4)),
    st.tuples(st.just("remove_unknown"), st.sampled_from(CLIENTS), st.integers(1, 65535)),
    st.tuples(st.just("pubrel"), st.sampled_from(CLIENTS), st.integers(0, 5)),
    st.tuples(st.just("clear"), st.sampled_from(CLIENTS)),
    st.tuples(st.just("fetch"), st.sampled_from(CLIENTS)),
    st.tuples(st.just("tick"), st.sampled_from([0.0, 10.0, 100.0])),
)


def _view(entries: list[QueuedMessage | None]) -> list[tuple[Any, ...] | None]:
    return [
        None if e is None else (e.serial, e.packet_id, e.message.payload, e.pubrel) for e in entries
    ]


async def _play(storage: Storage, ops: list[Op]) -> list[Any]:
    """Run `ops`; what each returned (removals aim at live entries by position)."""
    await storage.open()
    seen: list[Any] = []
    now = 0.0
    number = 0
    try:
        for op in ops:
            kind = op[0]
            if kind == "enqueue":
                items = []
                for client, expires_in in op[1]:
                    number += 1
                    expires_at = None if expires_in is None else now + expires_in
                    items.append((client, Message("t", b"m%d" % number, 1, expires_at=expires_at)))
                seen.append(_view(await storage.enqueue(items)))
            elif kind == "tick":
                now = op[1]
            elif kind == "clear":
                await storage.clear(op[1])
            elif kind == "remove_unknown":
                held = {e.packet_id for e in await storage.fetch(op[1], -1.0)}
                if op[2] not in held:
                    await storage.remove(op[1], op[2])
            else:
                client = op[1]
                live = await storage.fetch(client, -1.0)  # before any expiry: all of them
                if kind == "fetch":
                    seen.append(_view(list(await storage.fetch(client, now))))
                elif live and kind == "pubrel":
                    await storage.mark_pubrel(client, live[op[2] % len(live)].packet_id)
                elif live and kind == "remove":
                    wanted = sorted({live[i % len(live)].packet_id for i in op[2]})
                    await storage.remove_many([(client, packet_id) for packet_id in wanted])
        for client in CLIENTS:
            seen.append(_view(list(await storage.fetch(client, now))))
    finally:
        await storage.close()
    return seen


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(operations, min_size=1, max_size=25),
    policy=st.sampled_from(list(QueueFullPolicy)),
    run_limit=st.sampled_from([2, sqlite_runs.RUN_LIMIT]),
)
def test_sqlite_runs_match_the_memory_store(
    ops: list[Op], policy: QueueFullPolicy, run_limit: int
) -> None:
    """With runs of at most 2 entries too, so that one call's entries span several runs."""
    expected = asyncio.run(_play(MemoryStorage(queue_limit=LIMIT, queue_full_policy=policy), ops))
    with tempfile.TemporaryDirectory(prefix="mqttq-runs-") as tmp:
        sqlite = SqliteStorage(
            Path(tmp) / "mqttq.db",
            queue_limit=LIMIT,
            queue_full_policy=policy,
            commit_interval=0.0005,
            index_limit=2,
            run_limit=run_limit,
        )
        assert asyncio.run(_play(sqlite, ops)) == expected


async def _reread(path: Path, policy: QueueFullPolicy, now: float) -> list[Any]:
    """Each client's queue as a new store reads it from the file (no mirror after a
    restart over queued entries)."""
    storage = SqliteStorage(path, queue_limit=LIMIT, queue_full_policy=policy)
    await storage.open()
    try:
        return [_view(list(await storage.fetch(client, now))) for client in CLIENTS]
    finally:
        await storage.close()


@settings(max_examples=100, deadline=None)
@given(
    ops=st.lists(operations, min_size=1, max_size=25),
    policy=st.sampled_from(list(QueueFullPolicy)),
)
def test_what_the_mirror_hands_out_is_what_the_file_holds(
    ops: list[Op], policy: QueueFullPolicy
) -> None:
    """The fetches the store answers from memory (`queue_mirror`: every client of a new
    file, then each one cleared) equal a read of the file by the next run of the broker."""
    with tempfile.TemporaryDirectory(prefix="mqttq-mirror-") as tmp:
        path = Path(tmp) / "mqttq.db"
        store = SqliteStorage(path, queue_limit=LIMIT, queue_full_policy=policy)
        seen = asyncio.run(_play(store, ops))
        now = next((op[1] for op in reversed(ops) if op[0] == "tick"), 0.0)
        assert asyncio.run(_reread(path, policy, now)) == seen[-len(CLIENTS) :]
