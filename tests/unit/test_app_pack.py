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


def records(start: int, count: int, qos: int = 1, **kwargs: float | None) -> list[Record]:
    return [
        Record(offset, Message(f"t/{offset}", str(offset).encode(), qos, **kwargs))  # type: ignore[arg-type]
        for offset in range(start, start + count)
    ]


def publishes(sends: list[Send]) -> list[tuple[int, int | None, bool]]:
    return [(s.offset, s.packet_id, s.dup) for s in sends if s.message is not None]


def test_pack_assigns_ids_and_commits_after_every_puback() -> None:
    pack = PackProcessor(AckStrategy.RETRY_ALL, 3)
    pack.start(records(10, 3))
    sends = pack.next_sends(100, NOW)
    assert publishes(sends) == [(10, 1, False), (11, 2, False), (12, 3, False)]
    assert not pack.done
    assert pack.on_puback(1) and pack.on_puback(3)
    assert not pack.on_puback(3)  # already acknowledged
    assert not pack.done
    assert pack.on_puback(2)
    assert pack.done
    assert pack.commit_offset == 13
    assert pack.delivered == 3
    pack.committed()
    pack.start(records(13, 1))
    assert publishes(pack.next_sends(100, NOW)) == [(13, 4, False)]


def test_receive_maximum_limits_what_is_in_flight() -> None:
    pack = PackProcessor(AckStrategy.RETRY_ALL, 3)
    pack.start(records(0, 5))
    assert [s.offset for s in pack.next_sends(2, NOW)] == [0, 1]
    assert pack.next_sends(2, NOW) == []
    pack.on_puback(1)
    assert [s.offset for s in pack.next_sends(2, NOW)] == [2]


def test_qos2_flow_needs_pubrec_then_pubcomp() -> None:
    pack = PackProcessor(AckStrategy.RETRY_ALL, 3)
    pack.start(records(0, 1, qos=2))
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
        ]
    )
    sends = pack.next_sends(10, NOW)
    assert publishes(sends) == [(1, 1, False), (2, None, False)]
    assert pack.expired == 1
    pack.on_puback(1)
    assert pack.done and pack.commit_offset == 3


def test_retry_all_resends_with_dup_then_skips_and_reports_offsets() -> None:
    pack = PackProcessor(AckStrategy.RETRY_ALL, 2)
    pack.start(records(0, 3))
    pack.next_sends(10, NOW)
    pack.on_puback(2)
    for _ in range(2):
        assert publishes(pack.timed_out()) == [(0, 1, True), (2, 3, True)]
    assert pack.retried == 4
    assert pack.timed_out() == []
    assert pack.done
    assert pack.skipped == 2
    assert pack.skipped_offsets == [0, 2]
    assert pack.commit_offset == 3


def test_retry_all_with_zero_retries_never_gives_up() -> None:
    pack = PackProcessor(AckStrategy.RETRY_ALL, 0)
    pack.start(records(0, 1))
    pack.next_sends(10, NOW)
    for _ in range(50):
        assert publishes(pack.timed_out()) == [(0, 1, True)]
    assert pack.skipped == 0 and not pack.done


def test_skip_all_skips_unacked_and_unsent_at_once() -> None:
    pack = PackProcessor(AckStrategy.SKIP_ALL, 3)
    pack.start(records(5, 4))
    pack.next_sends(2, NOW)
    pack.on_puback(1)
    assert pack.timed_out() == []
    assert pack.done
    assert pack.skipped_offsets == [6, 7, 8]
    assert pack.skipped == 3
    assert not pack.on_puback(2)  # a late PUBACK of a skipped message is ignored


def test_disconnect_context_and_restore_resend_same_ids_with_dup() -> None:
    first = PackProcessor(AckStrategy.RETRY_ALL, 3)
    first.start(records(0, 3) + records(3, 2, qos=2))
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
    second.start(records(0, 3) + records(3, 2, qos=2))  # re-polled from the committed 0
    sends = second.next_sends(100, NOW)
    assert [(s.offset, s.packet_id, s.message is None, s.dup) for s in sends] == [
        (3, 4, True, True),  # PUBREL first
        (0, 1, False, True),
        (2, 3, False, True),
        (4, 5, False, False),  # new ids go on after the restored ones
    ]
    assert second.on_pubcomp(4) and second.on_puback(1) and second.on_puback(3)
    assert second.on_pubrec(5) and second.on_pubcomp(5)
    assert second.done and second.commit_offset == 5


def test_context_without_pack_is_empty() -> None:
    ctx = PackProcessor(AckStrategy.SKIP_ALL, 1).context("c", NOW)
    assert ctx == AppContext("c", None, [], NOW)


def test_context_between_packs_holds_the_last_commit() -> None:
    """Saved between packs, the context says where the last commit was (in case the
    commit itself never reached Kafka): a restore passes over those records."""
    pack = PackProcessor(AckStrategy.SKIP_ALL, 1)
    pack.start(records(0, 2))
    for send in pack.next_sends(10, NOW):
        assert send.packet_id is not None
        pack.on_puback(send.packet_id)
    pack.committed()
    ctx = pack.context("c", NOW)
    assert ctx == AppContext("c", 2, [], NOW)
    again = PackProcessor(AckStrategy.SKIP_ALL, 1, ctx)
    again.start(records(0, 3))  # Kafka's committed offset was still 0
    assert [s.offset for s in again.next_sends(10, NOW)] == [2]


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 30),
    st.lists(st.tuples(st.sampled_from(["ack", "drop", "reconnect"]), st.integers(0, 5))),
    st.integers(1, 8),
)
def test_nothing_is_lost_across_reconnects(
    total: int, script: list[tuple[str, int]], batch: int
) -> None:
    """A client that acks some messages and reconnects at random points gets every
    message acknowledged at least once, and ids in flight never collide."""
    log = records(0, total)
    committed = 0
    ctx: AppContext | None = None
    acked: set[int] = set()
    pack = PackProcessor(AckStrategy.RETRY_ALL, 0, ctx)
    inflight: dict[int, int] = {}

    def poll() -> None:
        nonlocal committed
        if pack.in_pack and pack.done:
            assert pack.commit_offset is not None
            committed = pack.commit_offset
            pack.committed()
        if not pack.in_pack and committed < total:
            pack.start(log[committed : committed + batch])
        for send in pack.next_sends(4, NOW):
            assert send.packet_id is not None and send.packet_id not in inflight
            inflight[send.packet_id] = send.offset

    steps = [*script, *([("ack", 0)] * (total * 4 + 10))]
    for action, pick in steps:
        poll()
        if action == "reconnect":
            ctx = pack.context("c", NOW)
            pack = PackProcessor(AckStrategy.RETRY_ALL, 0, ctx)
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
