"""Pack processing of an APPLICATION client's Kafka topic, sans I/O (seed 002, TBMQ's
`ApplicationPersistenceProcessorImpl`).

The consumer polls a pack of records; `PackProcessor` decides what goes on the wire: each
record becomes a PUBLISH with a packet id (QoS 1/2), a PUBLISH without one (QoS 0), or
nothing (expired: skipped without using a packet id [MQTT-3.3.2-5]). It applies PUBACK /
PUBREC / PUBCOMP, and says when the pack is done and which offset to commit. When the pack
timeout passes with messages unacknowledged, the ack strategy decides: `retry_all` sends
them again with DUP=1 (up to `retries` times, 0 = no limit), `skip_all` gives up on them at
once. Nothing is ever passed over silently: every skipped message is counted and its offset
reported, so the shell can log it (TBMQ issue #320 commits past them without a word).

A client that disconnects leaves an `AppContext`: the in-flight (offset, packet id, kind)
entries and the offset up to which every other record of the pack was handled. The next
connection re-polls from the committed offset; the processor built with that context
re-sends exactly those entries, with their packet ids and DUP=1 (PUBREL for those that had
their PUBREC) [MQTT-4.4.0-1], passes over the records already handled, and goes on.
No I/O, no clock: `now` is passed in.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import StrEnum

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


@dataclass(frozen=True, slots=True)
class Record:
    """One record polled from the client's topic."""

    offset: int
    message: Message


@dataclass(frozen=True, slots=True)
class Send:
    """One packet to write: a PUBLISH of `message` (packet id None at QoS 0), or a PUBREL
    of `packet_id` when `message` is None."""

    offset: int
    packet_id: int | None
    message: Message | None
    dup: bool = False


@dataclass(slots=True)
class _Entry:
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
    holds the offsets of the last pack's skipped messages, for the log line.
    """

    def __init__(
        self,
        strategy: AckStrategy,
        retries: int,
        restored: AppContext | None = None,
        taken: set[int] | None = None,
    ) -> None:
        """`taken`: the packet ids in use on the client's connection, shared by every
        processor of one client (its own topic and its shared subscriptions)."""
        self.strategy = strategy
        self.retries = retries
        """Re-sends per pack under retry_all before giving up; 0 = no limit."""
        self._waiting: deque[_Entry] = deque()
        self._inflight: dict[int, _Entry] = {}
        self._restored: dict[int, Unacked] = {}
        self._restore_end: int | None = None
        reserved: set[int] = set()
        last = 0
        if restored is not None and restored.offset is not None:
            self._restore_end = restored.offset
            for item in restored.unacked:
                self._restored[item.offset] = item
                reserved.add(item.packet_id)
            last = max(reserved, default=0)
        self._reserved = reserved
        self._taken = taken if taken is not None else set()
        self._taken |= reserved
        self._ids = PacketIdAllocator(self._taken, last)
        self._pack_end: int | None = None
        self._handled: int | None = None
        """The end of the last pack committed: a context saved between packs says so, in
        case the commit itself did not reach Kafka."""
        self._attempts = 0
        self.delivered = 0
        self.expired = 0
        self.skipped = 0
        self.retried = 0
        self.skipped_offsets: list[int] = []

    # ------------------------------------------------------------------ packs

    @property
    def in_pack(self) -> bool:
        """A pack was started and not committed yet."""
        return self._pack_end is not None

    @property
    def done(self) -> bool:
        """Every record of the current pack was handled: its offset may be committed."""
        return not self._waiting and not self._inflight

    @property
    def commit_offset(self) -> int | None:
        """The offset to commit once the pack is done (the last record's + 1)."""
        return self._pack_end

    def start(self, records: list[Record]) -> None:
        """Take a new pack (the previous one must be done and committed)."""
        if not records:
            return
        assert self.done, "a pack starts once the previous one is done"
        self._attempts = 0
        self.skipped_offsets = []
        restore_end = self._restore_end
        resent: list[_Entry] = []
        fresh: list[_Entry] = []
        for record in records:
            offset = record.offset
            if restore_end is not None and offset < restore_end:
                saved = self._restored.pop(offset, None)
                if saved is None:
                    continue  # handled on the earlier connection
                entry = _Entry(offset, record.message, saved.packet_id, saved.kind, True)
                (resent if saved.kind is PendingKind.PUBREL else fresh).append(entry)
                continue
            fresh.append(_Entry(offset, record.message))
        if restore_end is not None and records[-1].offset + 1 >= restore_end:
            self._end_restore()
        # The PUBRELs of the earlier connection go first (TBMQ's order), then PUBLISHes.
        self._waiting.extend(resent)
        self._waiting.extend(fresh)
        self._pack_end = records[-1].offset + 1

    def _end_restore(self) -> None:
        """Past the restored context: ids it held and never re-sent are free again."""
        self._restore_end = None
        self._restored.clear()
        self._taken -= self._reserved
        self._reserved.clear()

    def committed(self) -> None:
        """The shell committed `commit_offset` (or sent the commit): the pack is over."""
        self._handled = self._pack_end
        self._pack_end = None

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
                self._reserved.discard(entry.packet_id)
                inflight[entry.packet_id] = entry
                sends.append(Send(entry.offset, entry.packet_id, None, True))
                continue
            if not entry.dup and message.is_expired(now):
                self.expired += 1
                continue
            if message.qos == 0:
                self.delivered += 1
                sends.append(Send(entry.offset, None, message))
                continue
            if entry.packet_id:
                self._reserved.discard(entry.packet_id)
            else:
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
        self._complete(packet_id)
        return True

    def on_pubrec(self, packet_id: int, failed: bool = False) -> bool:
        """PUBREC of a QoS 2 delivery: True when a PUBREL is to be sent. An error PUBREC
        ends the flow [MQTT-4.4.0-2]."""
        entry = self._inflight.get(packet_id)
        if entry is None or entry.kind is not PendingKind.PUBLISH or entry.message.qos != 2:
            return False
        if failed:
            self._complete(packet_id)
            return False
        entry.kind = PendingKind.PUBREL
        return True

    def on_pubcomp(self, packet_id: int) -> bool:
        """PUBCOMP: the QoS 2 delivery is complete."""
        entry = self._inflight.get(packet_id)
        if entry is None or entry.kind is not PendingKind.PUBREL:
            return False
        self._complete(packet_id)
        return True

    def _complete(self, packet_id: int) -> None:
        del self._inflight[packet_id]
        self._taken.discard(packet_id)
        self.delivered += 1

    def owns(self, packet_id: int) -> bool:
        """The id is one of this processor's deliveries in flight."""
        return packet_id in self._inflight

    def abandon(self, packet_id: int) -> None:
        """A delivery that could not be written (larger than the client's Maximum Packet
        Size [MQTT-3.1.2-25]): done, as the spec says, without an acknowledgement."""
        if packet_id in self._inflight:
            self._complete(packet_id)

    def timed_out(self) -> list[Send]:
        """The pack timeout passed before `done`. retry_all with retries left: the
        in-flight deliveries to send again (PUBLISH with DUP=1, or PUBREL). Otherwise
        every unacknowledged or unsent message of the pack is skipped (counted, offsets
        in `skipped_offsets`) and the pack is done; returns []."""
        if self.done:
            return []
        if self.strategy is AckStrategy.RETRY_ALL and (
            self.retries == 0 or self._attempts < self.retries
        ):
            self._attempts += 1
            sends = []
            for packet_id, entry in self._inflight.items():
                entry.dup = True
                message = None if entry.kind is PendingKind.PUBREL else entry.message
                sends.append(Send(entry.offset, packet_id, message, True))
            self.retried += len(sends)
            return sends
        skipped = sorted(
            [entry.offset for entry in self._inflight.values()]
            + [entry.offset for entry in self._waiting]
        )
        self._taken -= self._inflight.keys()
        self._inflight.clear()
        self._waiting.clear()
        self.skipped += len(skipped)
        self.skipped_offsets = skipped
        return []

    # ------------------------------------------------------------------ disconnect

    def context(self, client_id: str, now: float) -> AppContext:
        """What to save when the connection ends: the in-flight entries, and the offset
        below which every other record of the pack was handled."""
        unacked = [Unacked(e.offset, pid, e.kind) for pid, e in self._inflight.items()]
        # Restored entries not re-sent yet keep their ids; the first record never sent
        # is where this connection's work stops.
        unacked.extend(Unacked(e.offset, e.packet_id, e.kind) for e in self._waiting if e.packet_id)
        unsent = [e.offset for e in self._waiting if not e.packet_id]
        offset = min(unsent) if unsent else (self._pack_end or self._handled)
        if self._restore_end is not None:
            # A context that was never fully re-polled stays owed, with its ids.
            unacked.extend(self._restored.values())
            offset = max(offset or 0, self._restore_end)
        unacked.sort(key=lambda item: item.offset)
        return AppContext(client_id, offset, unacked, now)

    def unacked_ids(self) -> list[int]:
        """Packet ids in flight, in send order (for operators)."""
        return list(self._inflight)
