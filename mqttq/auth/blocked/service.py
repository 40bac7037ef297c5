"""BlockedClients: the broker's blocked-client list, the "blocked" authentication
provider, the store that keeps it, and the failed-connections log.

The provider is asked before every other one (`ProviderChain.set_blocked`): a CONNECT
whose client id, user name or address an entry matches is refused with 0x8A Banned (3.x:
return code 5), before any password is checked. `address_refused` answers the same for a
bare address, for the listener to close a connection from a blocked address before it
reads a byte (after the PROXY protocol header, when the listener takes one).

Entries added here (the admin API) are stored, then applied at once; entries added
elsewhere (another node, the CLI on the store) arrive through the store's change feed.
Either way `on_blocked` is called with each new entry, so that the broker disconnects the
clients it matches. Expired entries match nothing and are purged from memory and from the
store by `purge` (the broker calls it periodically).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from mqttq.auth.blocked.entries import BlockedClient
from mqttq.auth.blocked.failed import DEFAULT_SIZE, FailedConnection, FailedConnections
from mqttq.auth.blocked.matcher import BlockList
from mqttq.auth.blocked.ports import BlockedStore
from mqttq.auth.identity import AuthRefusal
from mqttq.auth.providers.base import SKIP, AuthRequest, Decision, banned

__all__ = ["BlockedClients"]

logger = logging.getLogger("mqttq.auth.blocked")

OnBlocked = Callable[[BlockedClient], None]


class BlockedClients:
    """The blocked-client list of one broker (see the module docstring). Implements the
    `AuthProvider` port as the provider named "blocked"."""

    name = "blocked"
    cacheable = False
    """A block must take effect at once: never remembered by the chain."""

    def __init__(
        self,
        store: BlockedStore,
        *,
        failed_size: int = DEFAULT_SIZE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.blocks = BlockList()
        self.failed = FailedConnections(failed_size, clock=clock)
        """The last refused CONNECTs (of any reason), recorded by the admission."""
        self.on_blocked: OnBlocked | None = None
        """Called with each entry added (here or elsewhere): the broker's disconnects."""
        self._clock = clock
        self.refused_connects = 0
        """CONNECTs refused by an entry since start."""
        self.refused_addresses = 0
        """Connections closed at accept by an address entry since start."""

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Open the store, load its entries and follow its changes."""
        await self.store.open()
        self.blocks.replace(await self.store.load())
        self.store.follow(self._changed)
        logger.debug("%d blocked-client entries from %s", len(self.blocks), self.store.where)

    async def stop(self) -> None:
        """Stop following and close the store."""
        await self.store.close()

    # The AuthProvider members: the store is opened by `start`, not by the chain.
    async def open(self) -> None:
        """Nothing: `start` opens the store (the chain does not own it)."""

    async def close(self) -> None:
        """Nothing: `stop` closes the store."""

    # ------------------------------------------------------------------ checks

    async def authenticate(self, request: AuthRequest) -> Decision:
        """0x8A Banned when an entry matches the request's client id, user name (or the
        certificate's CN when it is the user name) or address; else SKIP."""
        username = request.username
        if username is None and request.identity_as_username:
            username = request.cert_cn
        entry = self.refusal(request.client_id, username, request.address or None)
        if entry is None:
            return SKIP
        return banned(_message(entry), reason="blocked")

    def refusal(
        self, client_id: str, username: str | None, address: str | None
    ) -> BlockedClient | None:
        """The live entry that blocks a client with these, or None; counted."""
        entry = self.blocks.match(client_id, username, address, self._clock())
        if entry is not None:
            self.refused_connects += 1
        return entry

    def address_refused(self, address: str) -> bool:
        """True when a live entry blocks `address` (an IP address, with or without a
        port): the listener closes the connection before reading from it."""
        entry = self.blocks.match_address(address, self._clock())
        if entry is None:
            return False
        self.refused_addresses += 1
        return True

    def record_refusal(
        self, request: AuthRequest, reason_code: int, reason: str, message: str
    ) -> FailedConnection:
        """Remember one refused CONNECT in the failed-connections log."""
        return self.failed.record(
            client_id=request.client_id,
            address=request.address,
            username=request.username,
            listener=request.listener,
            protocol_level=request.protocol_level,
            reason=reason,
            reason_code=reason_code,
            message=message,
        )

    def banned_refusal(self, entry: BlockedClient) -> AuthRefusal:
        """The refusal an entry makes (for callers outside the chain)."""
        return banned(_message(entry), reason="blocked")

    # ------------------------------------------------------------------ changes

    def entries(self) -> list[BlockedClient]:
        """The live entries, oldest first."""
        now = self._clock()
        return [entry for entry in self.blocks.entries() if not entry.expired(now)]

    def get(self, entry_id: str) -> BlockedClient | None:
        """The live entry with this id, or None."""
        entry = self.blocks.get(entry_id)
        return None if entry is None or entry.expired(self._clock()) else entry

    async def add(self, entry: BlockedClient) -> BlockedClient:
        """Store `entry` (replacing the one with its id), then apply it: the clients it
        matches are disconnected."""
        await self.store.put(entry)
        self._apply(entry)
        return entry

    async def remove(self, entry_id: str) -> bool:
        """Remove the entry with this id (from the store and from memory); False when
        neither had it."""
        removed = await self.store.delete(entry_id)
        return self.blocks.remove(entry_id) is not None or removed

    async def purge(self) -> int:
        """Drop expired entries from memory and from the store; how many."""
        gone = self.blocks.purge(self._clock())
        for entry in gone:
            await self.store.delete(entry.id)
        return len(gone)

    def _changed(self, entry_id: str, entry: BlockedClient | None) -> None:
        if entry is None:
            self.blocks.remove(entry_id)
        else:
            self._apply(entry)

    def _apply(self, entry: BlockedClient) -> None:
        self.blocks.put(entry)
        if self.on_blocked is not None and not entry.expired(self._clock()):
            self.on_blocked(entry)

    def matches_client(
        self, entry: BlockedClient, client_id: str, username: str | None, address: str | None
    ) -> bool:
        """True when `entry` alone blocks a client with these (a connected client is
        disconnected by a new entry only when that entry matches it)."""
        return BlockList([entry]).match(client_id, username, address, self._clock()) is not None


def _message(entry: BlockedClient) -> str:
    """The log line's and the CONNACK reason string's text: the entry's id, never its
    value or reason (what the operator wrote is not the client's business)."""
    return f"blocked (entry {entry.id})"
