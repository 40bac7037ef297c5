"""The sans-I/O pack processor of APPLICATION clients (mqttq.protocol.app_pack)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mqttq.model import Message
from mqttq.protocol.app_pack import (
    AckStrategy,
    AppContext,
    PackProcessor,
    PendingKind,
    Record,
    Send,
    Unacked,
)

NOW = 1000.0
TIMEOUT = 20.0
"""The processors' default pack timeout."""


def records(start: int, count: int, qos: int = 1, **kwargs: float | None) -> list[Record]:
    return [
        Record(offset, Message(f"t/{offset}", str(offset).encode(), qos, **kwargs))  # type: ignore[arg-type]
        for offset in range(start, start + count)
    ]


def publishes(sends: list[Send]) -> list[tuple[int, int | None, bool]]:
    return [(s.offset, s.packet_id, s.dup) for s in sends if s.message is not None]


def test_pack_assigns_ids_and_commits_after_every_puback() -> None:
    pack = PackProcessor(AckStrategy.RETRY_ALL, 3)
    pack.start(records(10, 3), NOW)
    sends = pack.next_sends(100, NOW)
    assert publishes(sends) == [(10, 1, False), (11, 2, False), (12, 3, False)]
    assert not pack.done
    assert pack.on_puback(1) and pack.on_puback(3)
    assert not pack.on_puback(3)  # already acknowledged
    assert not pack.done
    assert pack.on_puback(2)
    assert pack.done
    assert pack.pop_commits() == {0: 13}
    assert pack.delivered == 3
    pack.start(records(13, 1), NOW)
    assert publishes(pack.next_sends(100, NOW)) == [(13, 4, False)]


def test_receive_maximum_limits_what_is_in_flight() -> None:
    pack = PackProcessor(AckStrategy.RETRY_ALL, 3)
    pack.start(records(0, 5), NOW)
    assert [s.offset for s in pack.next_sends(2, NOW)] == [0, 1]
    assert pack.next_sends(2, NOW) == []
    pack.on_puback(1)
    assert [s.offset for s in pack.next_sends(2, NOW)] == [2]


def test_qos2_flow_needs_pubrec_then_pubcomp() -> None:
    pack = PackProcessor(AckStrategy.RETRY_ALL, 3)
    pack.start(records(0, 1, qos=2), NOW)
    (send,) = pack.next_sends(10, NOW)
    assert send.packet_id == 1
    assert not pack.on_puback(1)
    assert not pack.on_pubcomp(1)  # no PUBREL sent yet
    assert pack.on_pubrec(1)
    assert not pack.done
    assert pack.context("c", NOW).unacked == [Unacked(0, 1, PendingKind.PUBREL)]
    assert pack.on_pubcomp(1)
    assert pack.done


def test_expired_messages_are_skipped_without_a_packet_id() -> None:
    pack = PackProcessor(AckStrategy.RETRY_ALL, 3)
    pack.start(
        [
            Record(0, Message("a", b"", 1, expires_at=NOW - 1)),
            Record(1, Message("b", b"", 1, expires_at=NOW + 60)),
            Record(2, Message("c", b"", 0)),
        ],
        NOW,
    )
    sends = pack.next_sends(10, NOW)
    assert publishes(sends) == [(1, 1, False), (2, None, False)]
    assert pack.expired == 1
    pack.on_puback(1)
    assert pack.done and pack.pop_commits() == {0: 3}


def test_retry_all_resends_with_dup_then_skips_and_reports_offsets() -> None:
    pack = PackProcessor(AckStrategy.RETRY_ALL, 2)
    pack.start(records(0, 3), NOW)
    pack.next_sends(10, NOW)
    pack.on_puback(2)
    assert pack.timed_out(NOW + TIMEOUT - 1) == []  # not yet
    for attempt in range(2):
        now = NOW + TIMEOUT * (attempt + 1)
        assert publishes(pack.timed_out(now)) == [(0, 1, True), (2, 3, True)]
        assert pack.next_deadline == now + TIMEOUT  # the timeout starts again
    assert pack.retried == 4
    assert pack.timed_out(NOW + TIMEOUT * 3) == []
    assert pack.done
    assert pack.skipped == 2
    assert pack.skipped_offsets == [0, 2]
    assert pack.pop_commits() == {0: 3}


def test_retry_all_with_zero_retries_never_gives_up() -> None:
    pack = PackProcessor(AckStrategy.RETRY_ALL, 0)
    pack.start(records(0, 1), NOW)
    pack.next_sends(10, NOW)
    for attempt in range(50):
        assert publishes(pack.timed_out(NOW + TIMEOUT * (attempt + 1))) == [(0, 1, True)]
    assert pack.skipped == 0 and not pack.done


def test_skip_all_skips_unacked_and_unsent_at_once() -> None:
    pack = PackProcessor(AckStrategy.SKIP_ALL, 3)
    pack.start(records(5, 4), NOW)
    pack.next_sends(2, NOW)
    pack.on_puback(1)
    assert pack.timed_out(NOW + TIMEOUT) == []
    assert pack.done
    assert pack.skipped_offsets == [6, 7, 8]
    assert pack.skipped == 3
    assert not pack.on_puback(2)  # a late PUBACK of a skipped message is ignored


def test_disconnect_context_and_restore_resend_same_ids_with_dup() -> None:
    first = PackProcessor(AckStrategy.RETRY_ALL, 3)
    first.start(records(0, 3) + records(3, 2, qos=2), NOW)
    first.next_sends(4, NOW)  # offsets 0..3 sent, 4 waits for the window
    first.on_puback(2)
    assert first.on_pubrec(4)
    ctx = first.context("app1", NOW)
    assert ctx.offset == 4
    assert ctx.unacked == [
        Unacked(0, 1, PendingKind.PUBLISH),
        Unacked(2, 3, PendingKind.PUBLISH),
        Unacked(3, 4, PendingKind.PUBREL),
    ]
    second = PackProcessor(AckStrategy.RETRY_ALL, 3, ctx)
    second.start(records(0, 3) + records(3, 2, qos=2), NOW)  # re-polled from offset 0
    sends = second.next_sends(100, NOW)
    assert [(s.offset, s.packet_id, s.message is None, s.dup) for s in sends] == [
        (3, 4, True, True),  # PUBREL first
        (0, 1, False, True),
        (2, 3, False, True),
        (4, 5, False, False),  # new ids go on after the restored ones
    ]
    assert second.on_pubcomp(4) and second.on_puback(1) and second.on_puback(3)
    assert second.on_pubrec(5) and second.on_pubcomp(5)
    assert second.done and second.pop_commits() == {0: 5}


def test_context_without_pack_is_empty() -> None:
    ctx = PackProcessor(AckStrategy.SKIP_ALL, 1).context("c", NOW)
    assert ctx == AppContext("c", None, [], NOW)


def test_context_between_packs_holds_the_last_commit() -> None:
    """Saved between packs, the context says where the last commit was (in case the
    commit itself never reached Kafka): a restore passes over those records."""
    pack = PackProcessor(AckStrategy.SKIP_ALL, 1)
    pack.start(records(0, 2), NOW)
    for send in pack.next_sends(10, NOW):
        assert send.packet_id is not None
        pack.on_puback(send.packet_id)
    assert pack.pop_commits() == {0: 2}
    ctx = pack.context("c", NOW)
    assert ctx == AppContext("c", 2, [], NOW)
    again = PackProcessor(AckStrategy.SKIP_ALL, 1, ctx)
    again.start(records(0, 3), NOW)  # Kafka's committed offset was still 0
    assert [s.offset for s in again.next_sends(10, NOW)] == [2]


def ack_all(pack: PackProcessor, sends: list[Send]) -> None:
    for send in sends:
        assert send.packet_id is not None
        assert pack.on_puback(send.packet_id)


def test_several_packs_in_flight_commit_in_order() -> None:
    """The next packs go out before the first is acknowledged; a later pack acknowledged
    first commits nothing until every earlier one is resolved."""
    pack = PackProcessor(AckStrategy.RETRY_ALL, 3)
    pack.start(records(0, 3), NOW)
    pack.start(records(3, 3), NOW)
    pack.start(records(6, 2), NOW)
    sends = pack.next_sends(100, NOW)
    assert publishes(sends) == [(n, n + 1, False) for n in range(8)]
    assert pack.packs == 3
    ack_all(pack, sends[3:])  # the second and third packs, before the first
    assert not pack.committable
    assert pack.pop_commits() == {}
    ack_all(pack, sends[1:3])
    assert pack.pop_commits() == {}  # offset 0 is still owed
    ack_all(pack, sends[:1])
    assert pack.committable
    assert pack.pop_commits() == {0: 8}  # the three at once, as one offset
    assert pack.packs == 0 and pack.done


def test_commit_stops_at_the_first_pack_still_owed() -> None:
    pack = PackProcessor(AckStrategy.RETRY_ALL, 3)
    pack.start(records(0, 2), NOW)
    pack.start(records(2, 2), NOW)
    pack.start(records(4, 2), NOW)
    sends = pack.next_sends(100, NOW)
    ack_all(pack, sends[:2] + sends[4:])
    assert pack.pop_commits() == {0: 2}
    ack_all(pack, sends[2:3])
    assert pack.pop_commits() == {}
    assert pack.context("c", NOW) == AppContext("c", 6, [Unacked(3, 4, PendingKind.PUBLISH)], NOW)


def test_packs_of_several_partitions_commit_per_partition() -> None:
    pack = PackProcessor(AckStrategy.RETRY_ALL, 3)
    pack.start(records(10, 2), NOW, partition=0)
    pack.start(records(40, 2), NOW, partition=1)
    pack.start(records(12, 1), NOW, partition=0)
    ack_all(pack, pack.next_sends(100, NOW))
    assert pack.pop_commits() == {0: 13, 1: 42}


def test_the_window_spans_packs() -> None:
    """Receive Maximum counts every delivery in flight, whatever its pack."""
    pack = PackProcessor(AckStrategy.RETRY_ALL, 3)
    pack.start(records(0, 2), NOW)
    pack.start(records(2, 2), NOW)
    assert [s.offset for s in pack.next_sends(3, NOW)] == [0, 1, 2]
    assert pack.next_sends(3, NOW) == []
    assert pack.on_puback(2)
    assert [s.offset for s in pack.next_sends(3, NOW)] == [3]


def test_each_pack_times_out_on_its_own() -> None:
    """A pack's timeout counts from its own start; retry_all re-sends only the
    deliveries of the packs whose time is up."""
    pack = PackProcessor(AckStrategy.RETRY_ALL, 1)
    pack.start(records(0, 2), NOW)
    first = pack.next_sends(100, NOW)
    pack.start(records(2, 2), NOW + 5)
    second = pack.next_sends(100, NOW + 5)
    ack_all(pack, first[1:] + second[1:])
    assert pack.next_deadline == NOW + TIMEOUT
    assert publishes(pack.timed_out(NOW + TIMEOUT)) == [(0, 1, True)]
    assert pack.next_deadline == NOW + 5 + TIMEOUT
    assert publishes(pack.timed_out(NOW + 5 + TIMEOUT)) == [(2, 3, True)]
    # Retries used up: the second pack is skipped first, but commits wait for the first.
    assert pack.timed_out(NOW + 5 + 2 * TIMEOUT) == []
    assert pack.skipped_offsets == [0, 2]
    assert pack.pop_commits() == {0: 4}


def test_skip_all_of_a_later_pack_keeps_the_earlier_owed() -> None:
    pack = PackProcessor(AckStrategy.SKIP_ALL, 3)
    pack.start(records(0, 2), NOW + 10)
    pack.start(records(2, 2), NOW)  # an older deadline than the first pack's
    sends = pack.next_sends(100, NOW)
    assert pack.timed_out(NOW + TIMEOUT) == []
    assert pack.skipped_offsets == [2, 3]
    assert pack.pop_commits() == {}  # never past offsets 0 and 1, still owed
    ack_all(pack, sends[:2])
    assert pack.pop_commits() == {0: 4}
    assert not pack.on_puback(sends[2].packet_id or 0)  # a late PUBACK of a skipped one


def test_postpone_restarts_every_timeout() -> None:
    pack = PackProcessor(AckStrategy.SKIP_ALL, 3, pack_timeout=2.0)
    pack.start(records(0, 1), NOW)
    pack.next_sends(100, NOW)
    pack.postpone(NOW + 30)
    assert pack.next_deadline == NOW + 32
    assert pack.timed_out(NOW + 31) == [] and pack.skipped == 0


def test_restored_ids_stay_taken_until_acknowledged() -> None:
    """Ids of a restored context that are re-polled stay in use (no new delivery can get
    them) until acknowledged; those never re-polled are freed once past the context."""
    taken: set[int] = set()
    ctx = AppContext(
        "c", 3, [Unacked(0, 9, PendingKind.PUBLISH), Unacked(1, 4, PendingKind.PUBLISH)]
    )
    pack = PackProcessor(AckStrategy.RETRY_ALL, 3, ctx, taken)
    assert taken == {4, 9}
    pack.start(records(1, 4), NOW)  # offset 0 was committed after all: 9 is free
    assert taken == {4}
    sends = pack.next_sends(100, NOW)
    assert publishes(sends) == [(1, 4, True), (3, 10, False), (4, 11, False)]
    ack_all(pack, sends)
    assert taken == set()
    assert pack.pop_commits() == {0: 5}


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 30),
    st.lists(st.tuples(st.sampled_from(["ack", "drop", "reconnect"]), st.integers(0, 5))),
    st.integers(1, 8),
    st.integers(1, 4),
    st.integers(1, 8),
)
def test_nothing_is_lost_across_reconnects(
    total: int, script: list[tuple[str, int]], batch: int, packs: int, window: int
) -> None:
    """A client that acks in any order and reconnects at random points, with up to
    `packs` packs in flight, gets every message acknowledged at least once; ids in
    flight never collide; the committed offset never passes an unacknowledged message."""
    log = records(0, total)
    committed = 0
    position = 0
    """The next offset the consumer reads (from the committed one after a reconnect)."""
    acked: set[int] = set()
    pack = PackProcessor(AckStrategy.RETRY_ALL, 0)
    inflight: dict[int, int] = {}

    def poll() -> None:
        nonlocal committed, position
        for offset in pack.pop_commits().values():
            assert offset > committed
            committed = offset
        assert set(range(committed)) <= acked
        while pack.packs < packs and position < total:
            pack.start(log[position : position + batch], NOW)
            position = min(total, position + batch)
        for send in pack.next_sends(window, NOW):
            assert send.packet_id is not None and send.packet_id not in inflight
            inflight[send.packet_id] = send.offset

    steps = [*script, *([("ack", 0)] * (total * 4 + 10))]
    for action, pick in steps:
        poll()
        if action == "reconnect":
            pack = PackProcessor(AckStrategy.RETRY_ALL, 0, pack.context("c", NOW))
            position = committed
            inflight.clear()
            continue
        if not inflight:
            continue
        packet_id = sorted(inflight)[pick % len(inflight)]
        if action == "ack":
            assert pack.on_puback(packet_id)
            acked.add(inflight.pop(packet_id))
    poll()
    assert committed == total
    assert acked == set(range(total))
    assert pack.skipped == 0
