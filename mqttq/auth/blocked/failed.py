"""FailedConnections: the last refused CONNECTs of this broker, bounded in memory (kept by
the blocked-clients provider, which the admission of every CONNECT reaches).

Every CONNECT the broker refuses (bad user name or password, not authorized, blocked,
quota or rate exceeded, a client id it will not take, the store down) is recorded with
its client id, address, user name, listener, reason and time. Two bounded views are kept:
a ring of the last `size` refusals of any client (oldest dropped first), and the latest
refusal of each of the last `size` client ids, so that one client refused in a loop does
not push every other client's last refusal out of sight. Nothing is stored on disk: the
log is per broker process, as TBMQ's "unauthorized clients" view is per node.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["DEFAULT_SIZE", "FailedConnection", "FailedConnections"]

DEFAULT_SIZE: Final = 1000


@dataclass(frozen=True, slots=True)
class FailedConnection:
    """One refused CONNECT. `reason` is the refusal's short name (`bad_credentials`,
    `not_authorized`, `blocked`, ...), `reason_code` the CONNACK's 5.0 reason code (a
    3.x client got the matching return code), `message` what the log line said."""

    client_id: str
    address: str
    username: str | None
    listener: str
    protocol_level: int
    reason: str
    reason_code: int
    message: str
    at: float

    def to_json(self) -> dict[str, Any]:
        """The admin API's shape (and the CLI's `--json`)."""
        return {
            "client_id": self.client_id,
            "address": self.address,
            "username": self.username,
            "listener": self.listener,
            "protocol_level": self.protocol_level,
            "reason": self.reason,
            "reason_code": self.reason_code,
            "message": self.message,
            "at": self.at,
        }


class FailedConnections:
    """The bounded log (see the module docstring); `size` 0 keeps nothing."""

    __slots__ = ("_clock", "_latest", "_ring", "by_reason", "size", "total")

    def __init__(self, size: int = DEFAULT_SIZE, *, clock: Callable[[], float] = time.time) -> None:
        if size < 0:
            raise ValueError("size must be 0 or more")
        self.size = size
        self._clock = clock
        self._ring: deque[FailedConnection] = deque(maxlen=size)
        self._latest: OrderedDict[str, FailedConnection] = OrderedDict()
        self.total = 0
        """Refusals recorded since start (also those no longer held)."""
        self.by_reason: dict[str, int] = {}
        """Refusals since start, per reason."""

    def __len__(self) -> int:
        return len(self._ring)

    def record(
        self,
        *,
        client_id: str,
        address: str,
        username: str | None,
        listener: str,
        protocol_level: int,
        reason: str,
        reason_code: int,
        message: str,
    ) -> FailedConnection:
        """Remember one refused CONNECT (now) and count it."""
        failed = FailedConnection(
            client_id,
            address,
            username,
            listener,
            protocol_level,
            reason,
            int(reason_code),
            message,
            self._clock(),
        )
        self.total += 1
        self.by_reason[reason] = self.by_reason.get(reason, 0) + 1
        if self.size:
            self._ring.append(failed)
            latest = self._latest
            latest[client_id] = failed
            latest.move_to_end(client_id)
            while len(latest) > self.size:
                latest.popitem(last=False)
        return failed

    def recent(self, client_id: str | None = None, limit: int = 100) -> list[FailedConnection]:
        """The last `limit` refusals, newest first; of one client id when given (its
        latest one too when the ring has let it go)."""
        if limit <= 0:
            return []
        found: list[FailedConnection] = []
        for failed in reversed(self._ring):
            if client_id is None or failed.client_id == client_id:
                found.append(failed)
                if len(found) >= limit:
                    return found
        if client_id is not None and not found:
            latest = self._latest.get(client_id)
            if latest is not None:
                found.append(latest)
        return found

    def statistics(self) -> dict[str, int]:
        """total (since start), held (in the ring), clients (with a latest refusal)."""
        return {"total": self.total, "held": len(self._ring), "clients": len(self._latest)}
