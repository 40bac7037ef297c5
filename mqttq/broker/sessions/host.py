"""SessionHost: what a session needs of the broker that holds it.

A session counts what it sends and drops (`stats`), shares PUBLISH encodings with the other
sessions sending the same message (`encoded`), bounds its queue (`max_queued_messages`,
`reject_when_full`), runs its storage work in the background (`tasks`), and tells storage
when a stored entry's flow ended (`forget`) or its PUBREC arrived (`mark_pubrel`). `Hub`
(broker/delivery/hub.py) is the one SessionHost; naming this base class instead of it keeps
`session.py` below the hub that routes into it.

A base class rather than a `typing.Protocol`, for the reason `Outlet` gives: these are read
and called for every message a session delivers, and a compiled base class keeps that a
native call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from mqttq.broker.delivery.encoded import EncodedPublishes
from mqttq.broker.delivery.pending import BackgroundTasks
from mqttq.broker.delivery.stats import BrokerStats

__all__ = ["SessionHost"]


class SessionHost:
    """The broker as its sessions see it (see the module docstring)."""

    def __init__(
        self,
        stats: BrokerStats,
        tasks: BackgroundTasks,
        encoded: EncodedPublishes,
        max_queued_messages: int,
        reject_when_full: bool,
    ) -> None:
        self.stats = stats
        """The broker's counters (messages out, drops)."""
        self.tasks = tasks
        """Storage writes and other work the broker waits for at shutdown."""
        self.encoded = encoded
        """PUBLISH bytes of messages going to several sessions (Session.send_publish)."""
        self.max_queued_messages = max_queued_messages
        """Messages a session's queue holds at most."""
        self.reject_when_full = reject_when_full
        """A full queue refuses the new message (reject_new) instead of dropping its
        oldest one."""
        self.clock: Callable[[], float] = time.time
        """Wall-clock seconds (`time.time`) that message times are read from: when a message
        was made and when it expires, whether it expired, the lifetime it has left, and when
        a session went offline. Replaced by a test that moves time on (tests/harness.py);
        a read of it is one attribute and one call, as `time.time()` was."""

    def forget(self, client_id: str, packet_id: int) -> None:
        """A stored entry's flow ended (PUBACK, PUBCOMP, expired, discarded)."""
        raise NotImplementedError

    def mark_pubrel(self, client_id: str, packet_id: int) -> asyncio.Future[None]:
        """PUBREC arrived for a stored entry; its PUBREL goes out once this settles."""
        raise NotImplementedError
