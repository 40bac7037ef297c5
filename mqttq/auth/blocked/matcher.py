"""BlockList: the blocked-client entries in memory, indexed for the check every CONNECT
(and every accepted connection) makes.

Client ids and user names are dict lookups; addresses are one dict lookup per prefix
length in use (the address masked to that length), so a thousand /32 entries and a few
networks cost a handful of lookups; regular expressions are compiled once, when the entry
is added. Expired entries match nothing from the moment they expire and are dropped by
`purge`. Not thread-safe: the broker uses it on its event loop.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from mqttq.auth.blocked.entries import BlockedClient

__all__ = ["BlockList", "host_of"]

_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def host_of(address: str) -> _Address | None:
    """The IP address in `address` (`1.2.3.4`, `::1`, `[::1]:1883`, `1.2.3.4:1883`), an
    IPv4-mapped IPv6 address as its IPv4 address; None when there is none."""
    text = address.strip()
    if text.startswith("["):
        text = text[1 : text.find("]")] if "]" in text else text[1:]
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    if "%" in text:  # a scoped IPv6 address: fe80::1%eth0
        text = text.split("%", 1)[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


@dataclass(slots=True)
class _Networks:
    """Entries of one IP version: prefix length -> network address (int) -> entry."""

    bits: int
    by_length: dict[int, dict[int, BlockedClient]] = field(default_factory=dict)
    masks: list[tuple[int, int]] = field(default_factory=list)
    """(prefix length, mask) of every length in use, longest first."""

    def add(
        self, network: ipaddress.IPv4Network | ipaddress.IPv6Network, entry: BlockedClient
    ) -> None:
        self.by_length.setdefault(network.prefixlen, {})[int(network.network_address)] = entry
        self._remask()

    def remove(self, network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> None:
        table = self.by_length.get(network.prefixlen)
        if table is not None:
            table.pop(int(network.network_address), None)
            if not table:
                del self.by_length[network.prefixlen]
                self._remask()

    def _remask(self) -> None:
        full = (1 << self.bits) - 1
        self.masks = [
            (length, full ^ ((1 << (self.bits - length)) - 1))
            for length in sorted(self.by_length, reverse=True)
        ]

    def match(self, value: int, now: float) -> BlockedClient | None:
        for length, mask in self.masks:
            entry = self.by_length[length].get(value & mask)
            if entry is not None and not entry.expired(now):
                return entry
        return None


class BlockList:
    """The entries, indexed (see the module docstring)."""

    __slots__ = ("_by_id", "_client_ids", "_regexes", "_usernames", "_v4", "_v6")

    def __init__(self, entries: Iterable[BlockedClient] = ()) -> None:
        self._by_id: dict[str, BlockedClient] = {}
        self._client_ids: dict[str, BlockedClient] = {}
        self._usernames: dict[str, BlockedClient] = {}
        self._v4 = _Networks(32)
        self._v6 = _Networks(128)
        self._regexes: dict[str, tuple[re.Pattern[str], BlockedClient]] = {}
        for entry in entries:
            self.put(entry)

    def __len__(self) -> int:
        return len(self._by_id)

    def entries(self) -> list[BlockedClient]:
        """Every entry (expired ones too, until purged), oldest first."""
        return sorted(self._by_id.values(), key=lambda entry: (entry.created_at, entry.id))

    def get(self, entry_id: str) -> BlockedClient | None:
        return self._by_id.get(entry_id)

    def put(self, entry: BlockedClient) -> None:
        """Add `entry`, or replace the entry with its id."""
        self.remove(entry.id)
        self._by_id[entry.id] = entry
        if entry.kind == "client_id":
            self._client_ids[entry.value] = entry
        elif entry.kind == "username":
            self._usernames[entry.value] = entry
        elif entry.kind == "address":
            network = ipaddress.ip_network(entry.value, strict=False)
            (self._v4 if network.version == 4 else self._v6).add(network, entry)
        else:
            self._regexes[entry.id] = (re.compile(entry.value), entry)

    def remove(self, entry_id: str) -> BlockedClient | None:
        """Drop the entry with this id; the entry, or None when there was none."""
        entry = self._by_id.pop(entry_id, None)
        if entry is None:
            return None
        if entry.kind == "client_id":
            self._client_ids.pop(entry.value, None)
        elif entry.kind == "username":
            self._usernames.pop(entry.value, None)
        elif entry.kind == "address":
            network = ipaddress.ip_network(entry.value, strict=False)
            (self._v4 if network.version == 4 else self._v6).remove(network)
        else:
            self._regexes.pop(entry.id, None)
        return entry

    def replace(self, entries: Iterable[BlockedClient]) -> None:
        """Hold exactly `entries` from now on."""
        for entry_id in list(self._by_id):
            self.remove(entry_id)
        for entry in entries:
            self.put(entry)

    def purge(self, now: float) -> list[BlockedClient]:
        """Drop the entries expired at `now`; they are returned."""
        gone = [entry for entry in self._by_id.values() if entry.expired(now)]
        for entry in gone:
            self.remove(entry.id)
        return gone

    def match_address(self, address: str, now: float) -> BlockedClient | None:
        """The live entry blocking `address` (see `host_of`), or None."""
        if not (self._v4.masks or self._v6.masks):
            return None
        ip = host_of(address)
        if ip is None:
            return None
        return (self._v4 if ip.version == 4 else self._v6).match(int(ip), now)

    def match(
        self, client_id: str, username: str | None, address: str | None, now: float
    ) -> BlockedClient | None:
        """The live entry blocking a client with this id, user name and address, or None.
        Checked in the order client id, user name, address, regular expressions."""
        entry = self._client_ids.get(client_id)
        if entry is not None and not entry.expired(now):
            return entry
        if username is not None:
            entry = self._usernames.get(username)
            if entry is not None and not entry.expired(now):
                return entry
        if address is not None:
            entry = self.match_address(address, now)
            if entry is not None:
                return entry
        for pattern, entry in self._regexes.values():
            subject = client_id if entry.match_on == "client_id" else username
            if subject is not None and not entry.expired(now) and pattern.fullmatch(subject):
                return entry
        return None
