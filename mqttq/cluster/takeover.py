"""Which connection of a client survives racing CONNECTs on several nodes (pure).

Every CONNECT writes a connect event (client id, node, request id) to
`<prefix>client.session.event`, keyed by client id, so all events of one client sit in one
partition, in one order that every node reads. A node registers its request before
writing it and answers the CONNECT only once it read its own event back. The rule each
node applies to its own connections, in that common order, is:

- its own event read back: the connection is confirmed;
- another request's event for a client whose local connection is confirmed: that event
  is newer, so the local connection is taken over (DISCONNECT 0x8E on 5.0);
- another request's event while the local one is not confirmed yet: that event is older
  (it precedes ours in the partition), nothing to do.

So the latest event wins and every node agrees which one that is: two racing CONNECTs end
with one connection, never two and never none.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["ConnectOrder", "Verdict"]


class Verdict(Enum):
    """What one connect event means for this node."""

    IGNORE = "ignore"
    OWN = "own"
    """This node's request came back: its connection is confirmed."""
    TAKEN_OVER = "taken_over"
    """A newer connection of the client exists: disconnect the local one."""


class ConnectOrder:
    """This node's connections, one request per client id, and the verdict per event."""

    __slots__ = ("_local",)

    def __init__(self) -> None:
        self._local: dict[str, tuple[str, bool]] = {}
        """client id -> (request id, confirmed)."""

    def register(self, client_id: str, request: str) -> None:
        """A CONNECT of `client_id` is about to write its event `request` (it replaces
        any earlier connection of the client on this node)."""
        self._local[client_id] = (request, False)

    def read(self, client_id: str, request: str) -> Verdict:
        """The verdict of the next event of `client_id` in the partition's order."""
        local = self._local.get(client_id)
        if local is None:
            return Verdict.IGNORE
        own, confirmed = local
        if own == request:
            self._local[client_id] = (own, True)
            return Verdict.OWN
        if confirmed:
            del self._local[client_id]
            return Verdict.TAKEN_OVER
        return Verdict.IGNORE

    def request_of(self, client_id: str) -> str | None:
        """The request of the client's local connection, confirmed or not."""
        local = self._local.get(client_id)
        return None if local is None else local[0]

    def forget(self, client_id: str) -> None:
        """The client has no connection on this node any more (later events: IGNORE)."""
        self._local.pop(client_id, None)

    def holds(self, client_id: str) -> str | None:
        """The request of the client's confirmed local connection, if any."""
        local = self._local.get(client_id)
        return local[0] if local is not None and local[1] else None
