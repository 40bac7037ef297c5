"""QueueMirror on its own: which clients it can vouch for, and its bound.

(That what it hands out equals what the SQLite file holds is checked on generated operation
sequences in tests/property/test_sqlite_runs_props.py.)
"""

from __future__ import annotations

from mqttq.model import Message
from mqttq.storage.ports import QueuedMessage
from mqttq.storage.sqlite.queue_mirror import QueueMirror


def _entries(client_id: str, first: int, count: int) -> list[tuple[str, QueuedMessage]]:
    return [
        (client_id, QueuedMessage(serial, serial, Message("t", b"%d" % serial, 1)))
        for serial in range(first, first + count)
    ]


def _enqueue(mirror: QueueMirror, pairs: list[tuple[str, QueuedMessage]]) -> None:
    mirror.enqueued([(c, e.message) for c, e in pairs], [e for _c, e in pairs])


def _payloads(mirror: QueueMirror, client_id: str) -> list[bytes] | None:
    taken = mirror.take(client_id, 0.0)
    return None if taken is None else [e.message.payload for e in taken[0]]


def test_only_clients_known_empty_are_mirrored() -> None:
    mirror = QueueMirror(queue_limit=10)
    _enqueue(mirror, _entries("a", 1, 2))  # a's queue before this is unknown
    assert _payloads(mirror, "a") is None
    mirror.reset("a")
    _enqueue(mirror, _entries("a", 3, 2))
    mirror.removed([("a", 3)])
    assert _payloads(mirror, "a") == [b"4"]


def test_a_new_file_mirrors_every_client_until_one_is_forgotten() -> None:
    mirror = QueueMirror(queue_limit=10)
    mirror.start_empty()
    _enqueue(mirror, _entries("a", 1, 2))
    assert _payloads(mirror, "a") == [b"1", b"2"]
    assert _payloads(mirror, "never-seen") == []
    mirror.forget(["a"])
    assert _payloads(mirror, "a") is None
    assert _payloads(mirror, "never-seen") is None  # "absent means empty" no longer holds


def test_a_queue_trimmed_at_its_limit_leaves_the_mirror() -> None:
    mirror = QueueMirror(queue_limit=2)
    mirror.reset("a")
    mirror.reset("b")
    _enqueue(mirror, _entries("a", 1, 3))  # the store drops the oldest: not mirrored
    _enqueue(mirror, _entries("b", 1, 2))
    assert _payloads(mirror, "a") is None
    assert _payloads(mirror, "b") == [b"1", b"2"]


def test_the_bound_counts_entries_and_clients_and_drops_the_least_recently_connected() -> None:
    mirror = QueueMirror(queue_limit=10, limit=6)
    for client_id in "abc":
        mirror.reset(client_id)
    assert _payloads(mirror, "a") == []  # a is now the most recently connected: b, c, a
    _enqueue(mirror, _entries("c", 1, 3))  # 3 clients + 3 entries: at the bound
    mirror.reset("d")  # one more client: b, the least recently connected, goes
    assert _payloads(mirror, "b") is None
    assert [_payloads(mirror, c) for c in "acd"] == [[], [b"1", b"2", b"3"], []]
    _enqueue(mirror, _entries("d", 1, 1))  # past the bound again (order a, c, d): a goes
    assert _payloads(mirror, "a") is None
    assert [_payloads(mirror, c) for c in "cd"] == [[b"1", b"2", b"3"], [b"1"]]


def test_client_ids_that_come_and_go_leave_nothing_behind_in_a_new_file() -> None:
    mirror = QueueMirror(queue_limit=10, limit=3)
    mirror.start_empty()
    for number in range(100):
        mirror.reset(f"c{number}")
        _enqueue(mirror, _entries(f"c{number}", 1, 1))
        mirror.removed([(f"c{number}", 1)])
    # Never past the bound, so every client is still vouched for.
    assert _payloads(mirror, "c0") == []
    assert _payloads(mirror, "someone-else") == []


def test_expired_entries_are_left_out_and_leave_the_mirror() -> None:
    mirror = QueueMirror(queue_limit=10)
    mirror.reset("a")
    keep = QueuedMessage(1, 1, Message("t", b"keep", 1, expires_at=None))
    gone = QueuedMessage(2, 2, Message("t", b"gone", 1, expires_at=5.0))
    mirror.enqueued([("a", keep.message), ("a", gone.message)], [keep, gone])
    assert mirror.take("a", 10.0) == ([keep], True)
    assert mirror.take("a", 10.0) == ([keep], False)
