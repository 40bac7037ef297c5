"""Pack processing of an APPLICATION client's Kafka topic, sans I/O (seed 002, TBMQ's
`ApplicationPersistenceProcessorImpl`).

The consumer polls packs of records; `PackProcessor` decides what goes on the wire: each
record becomes a PUBLISH with a packet id (QoS 1/2), a PUBLISH without one (QoS 0), or
nothing (expired: skipped without using a packet id [MQTT-3.3.2-5]). It applies PUBACK /
PUBREC / PUBCOMP, and says which offsets may be committed. Several packs may be in flight
at once (the next one is written while the client acknowledges the previous one), but
commits follow the packs' order: a pack's offset is committed only once it and every pack
started before it are resolved, so a commit never passes over a message still owed.

When a pack's timeout passes with messages unacknowledged, the ack strategy decides:
`retry_all` sends them again with DUP=1 (up to `retries` times, 0 = no limit), `skip_all`
gives up on them at once. Nothing is ever passed over silently: every skipped message is
counted and its offset reported, so the shell can log it (TBMQ issue #320 commits past
them without a word).

A client that disconnects leaves an `AppContext`: the in-flight (offset, packet id, kind)
entries and the offset up to which every other record was handled. The next connection
re-polls from the committed offset; the processor built with that context re-sends exactly
those entries, with their packet ids and DUP=1 (PUBREL for those that had their PUBREC)
[MQTT-4.4.0-1], passes over the records already handled, and goes on.
No I/O, no clock: `now` is passed in.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from mqttq.model import AppContext, Message, PendingKind, Unacked
from mqttq.protocol.inflight import PacketIdAllocator

__all__ = [
    "AckStrategy",
    "AppContext",
    "PackProcessor",
    "PendingKind",
    "Record",
    "Send",
    "Unacked",
]


class AckStrategy(StrEnum):
    """What a pack timeout does with the messages still unacknowledged."""

    RETRY_ALL = "retry_all"
    SKIP_ALL = "skip_all"


class Record(NamedTuple):
    """One record polled from the client's topic (tuples: one of each per message, and a
    tuple is built about three times faster than a frozen dataclass)."""

    offset: int
    message: Message


class Send(NamedTuple):
    """One packet to write: a PUBLISH of `message` (packet id None at QoS 0), or a PUBREL
    of `packet_id` when `message` is None."""

    offset: int
    packet_id: int | None
    message: Message | None
    dup: bool = False


@dataclass(slots=True, eq=False)
class _Pack:
    partition: int
    end: int
    """The offset after its last record: what is committed once it is resolved."""
    deadline: float
    unresolved: int = 0
    """Entries neither completed, expired, sent at QoS 0 nor skipped."""
    attempts: int = 0


@dataclass(slots=True, eq=False)
class _Entry:
    pack: _Pack
    offset: int
    message: Message
    packet_id: int = 0
    """0 until sent (a restored entry brings its old id)."""
    kind: PendingKind = PendingKind.PUBLISH
    dup: bool = False


class PackProcessor:
    """The delivery state of one APPLICATION consumer (see the module docstring).

    Counters: `delivered` (PUBLISHes completed), `expired`, `skipped` (given up by the ack
    strategy), `retried` (PUBLISH/PUBREL sent again after a timeout); `skipped_offsets`
    holds the offsets the last `timed_out` skipped, for the log line.
    """

    def __init__(
        self,
        strategy: AckStrategy,
        retries: int,
        restored: AppContext | None = None,
        taken: set[int] | None = None,
        *,
        pack_timeout: float = 20.0,
    ) -> None:
        """`taken`: the packet ids in use on the client's connection, shared by every
        processor of one client (its own topic and its shared subscriptions).
        `pack_timeout`: seconds a pack waits for its acknowledgements."""
        self.strategy = strategy
        self.retries = retries
        """Re-sends per pack under retry_all before giving up; 0 = no limit."""
        self.pack_timeout = pack_timeout
        self._packs: deque[_Pack] = deque()
        """Started and not yet committed, in the order they were started."""
        self._waiting: deque[_Entry] = deque()
        self._inflight: dict[int, _Entry] = {}
        self._restored: dict[int, Unacked] = {}
        self._restore_end: int | None = None
        last = 0
        self._taken = taken if taken is not None else set()
        if restored is not None and restored.offset is not None:
            self._restore_end = restored.offset
            for item in restored.unacked:
                self._restored[item.offset] = item
                self._taken.add(item.packet_id)
            last = max((item.packet_id for item in restored.unacked), default=0)
        self._ids = PacketIdAllocator(self._taken, last)
        self._last_end: int | None = None
        """The end of the last pack started: a context saved when everything was handled
        says so, in case the commit itself did not reach Kafka."""
        self.delivered = 0
        self.expired = 0
        self.skipped = 0
        self.retried = 0
        self.skipped_offsets: list[int] = []

    # ------------------------------------------------------------------ packs

    @property
    def packs(self) -> int:
        """Packs started and not yet taken by `pop_commits`."""
        return len(self._packs)

    @property
    def waiting(self) -> bool:
        """Deliveries are waiting to be sent (for the window or the write buffer)."""
        return bool(self._waiting)

    @property
    def done(self) -> bool:
        """Every record of every pack started was handled."""
        return not self._waiting and not self._inflight

    @property
    def committable(self) -> bool:
        """The oldest pack is resolved: `pop_commits` has an offset to give."""
        packs = self._packs
        return bool(packs) and packs[0].unresolved == 0

    def pop_commits(self) -> dict[int, int]:
        """Take the resolved packs at the head of the order (none after one still owed):
        the offset to commit per partition (its last such pack's end)."""
        commits: dict[int, int] = {}
        packs = self._packs
        while packs and packs[0].unresolved == 0:
            pack = packs.popleft()
            commits[pack.partition] = pack.end
        return commits

    @property
    def next_deadline(self) -> float | None:
        """When the earliest pack still owed acknowledgements times out (None: none)."""
        deadlines = [pack.deadline for pack in self._packs if pack.unresolved]
        return min(deadlines) if deadlines else None

    def postpone(self, now: float) -> None:
        """The client is not reading: every pack's timeout starts again from `now`."""
        for pack in self._packs:
            pack.deadline = now + self.pack_timeout

    def start(self, records: list[Record], now: float, partition: int = 0) -> None:
        """Take a new pack of `partition`'s records (in offset order); earlier packs may
        still be in flight."""
        if not records:
            return
        pack = _Pack(partition, records[-1].offset + 1, now + self.pack_timeout)
        restore_end = self._restore_end
        resent: list[_Entry] = []
        fresh: list[_Entry] = []
        for record in records:
            offset = record.offset
            if restore_end is not None and offset < restore_end:
                saved = self._restored.pop(offset, None)
                if saved is None:
                    continue  # handled on the earlier connection
                entry = _Entry(pack, offset, record.message, saved.packet_id, saved.kind, True)
                (resent if saved.kind is PendingKind.PUBREL else fresh).append(entry)
                continue
            fresh.append(_Entry(pack, offset, record.message))
        if restore_end is not None and records[-1].offset + 1 >= restore_end:
            self._end_restore()
        # The PUBRELs of the earlier connection go first (TBMQ's order), then PUBLISHes.
        self._waiting.extend(resent)
        self._waiting.extend(fresh)
        pack.unresolved = len(resent) + len(fresh)
        self._packs.append(pack)
        self._last_end = pack.end

    def _end_restore(self) -> None:
        """Past the restored context: ids of entries never re-polled are free again."""
        self._restore_end = None
        self._taken.difference_update(item.packet_id for item in self._restored.values())
        self._restored.clear()

    def next_sends(self, window: int, now: float, limit: int = 0) -> list[Send]:
        """What to write now, while fewer than `window` (the client's Receive Maximum
        [MQTT-4.9.0-2]) QoS 1/2 deliveries are in flight, at most `limit` (0: no limit).
        Expired messages are dropped here, before they take a packet id."""
        sends: list[Send] = []
        waiting = self._waiting
        inflight = self._inflight
        while waiting and len(inflight) < window and (not limit or len(sends) < limit):
            entry = waiting.popleft()
            message = entry.message
            if entry.kind is PendingKind.PUBREL:
                inflight[entry.packet_id] = entry
                sends.append(Send(entry.offset, entry.packet_id, None, True))
                continue
            if not entry.dup and message.is_expired(now):
                self.expired += 1
                entry.pack.unresolved -= 1
                continue
            if message.qos == 0:
                self.delivered += 1
                entry.pack.unresolved -= 1
                sends.append(Send(entry.offset, None, message))
                continue
            if not entry.packet_id:
                entry.packet_id = self._ids.allocate()
                self._taken.add(entry.packet_id)
            inflight[entry.packet_id] = entry
            sends.append(Send(entry.offset, entry.packet_id, message, entry.dup))
        return sends

    # ------------------------------------------------------------------ acknowledgements

    def on_puback(self, packet_id: int) -> bool:
        """PUBACK of a QoS 1 delivery; False when the id is not one in flight."""
        entry = self._inflight.get(packet_id)
        if entry is None or entry.kind is not PendingKind.PUBLISH or entry.message.qos != 1:
            return False
        self._complete(packet_id, entry)
        return True

    def on_pubrec(self, packet_id: int, failed: bool = False) -> bool:
        """PUBREC of a QoS 2 delivery: True when a PUBREL is to be sent. An error PUBREC
        ends the flow [MQTT-4.4.0-2]."""
        entry = self._inflight.get(packet_id)
        if entry is None or entry.kind is not PendingKind.PUBLISH or entry.message.qos != 2:
            return False
        if failed:
            self._complete(packet_id, entry)
            return False
        entry.kind = PendingKind.PUBREL
        return True

    def on_pubcomp(self, packet_id: int) -> bool:
        """PUBCOMP: the QoS 2 delivery is complete."""
        entry = self._inflight.get(packet_id)
        if entry is None or entry.kind is not PendingKind.PUBREL:
            return False
        self._complete(packet_id, entry)
        return True

    def _complete(self, packet_id: int, entry: _Entry) -> None:
        del self._inflight[packet_id]
        self._taken.discard(packet_id)
        entry.pack.unresolved -= 1
        self.delivered += 1

    def owns(self, packet_id: int) -> bool:
        """The id is one of this processor's deliveries in flight."""
        return packet_id in self._inflight

    def abandon(self, packet_id: int) -> None:
        """A delivery that could not be written (larger than the client's Maximum Packet
        Size [MQTT-3.1.2-25]): done, as the spec says, without an acknowledgement."""
        entry = self._inflight.get(packet_id)
        if entry is not None:
            self._complete(packet_id, entry)

    def timed_out(self, now: float) -> list[Send]:
        """Apply the ack strategy to every pack whose timeout passed at `now` with
        messages still owed. retry_all with retries left: its in-flight deliveries are
        returned, to send again (PUBLISH with DUP=1, or PUBREL), and its timeout starts
        again. Otherwise every unacknowledged or unsent message of the pack is skipped
        (counted, offsets in `skipped_offsets`) and the pack is resolved."""
        sends: list[Send] = []
        self.skipped_offsets = []
        for pack in self._packs:
            if not pack.unresolved or pack.deadline > now:
                continue
            if self.strategy is AckStrategy.RETRY_ALL and (
                self.retries == 0 or pack.attempts < self.retries
            ):
                pack.attempts += 1
                pack.deadline = now + self.pack_timeout
                sends.extend(self._resend(pack))
            else:
                self._skip(pack)
        self.retried += len(sends)
        return sends

    def _resend(self, pack: _Pack) -> list[Send]:
        sends = []
        for packet_id, entry in self._inflight.items():
            if entry.pack is pack:
                entry.dup = True
                message = None if entry.kind is PendingKind.PUBREL else entry.message
                sends.append(Send(entry.offset, packet_id, message, True))
        return sends

    def _skip(self, pack: _Pack) -> None:
        inflight = [pid for pid, entry in self._inflight.items() if entry.pack is pack]
        unsent = [entry for entry in self._waiting if entry.pack is pack]
        skipped = sorted(
            [self._inflight[pid].offset for pid in inflight] + [entry.offset for entry in unsent]
        )
        for packet_id in inflight:
            del self._inflight[packet_id]
            self._taken.discard(packet_id)
        if unsent:
            self._waiting = deque(entry for entry in self._waiting if entry.pack is not pack)
            # A restored entry not re-sent yet held its old id.
            self._taken.difference_update(entry.packet_id for entry in unsent if entry.packet_id)
        pack.unresolved = 0
        self.skipped += len(skipped)
        self.skipped_offsets.extend(skipped)

    # ------------------------------------------------------------------ disconnect

    def context(self, client_id: str, now: float) -> AppContext:
        """What to save when the connection ends: the in-flight entries, and the offset
        below which every other record started was handled."""
        unacked = [Unacked(e.offset, pid, e.kind) for pid, e in self._inflight.items()]
        # Restored entries not re-sent yet keep their ids; the first record never sent
        # is where this connection's work stops.
        unacked.extend(Unacked(e.offset, e.packet_id, e.kind) for e in self._waiting if e.packet_id)
        unsent = [e.offset for e in self._waiting if not e.packet_id]
        offset = min(unsent) if unsent else self._last_end
        if self._restore_end is not None:
            # A context that was never fully re-polled stays owed, with its ids.
            unacked.extend(self._restored.values())
            offset = max(offset or 0, self._restore_end)
        unacked.sort(key=lambda item: item.offset)
        return AppContext(client_id, offset, unacked, now)
