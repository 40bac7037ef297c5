"""Which nodes are gone, who cleans up after them, and which sessions that concerns (pure).

A node killed with `kill -9` leaves its clients' session records saying "connected on
it" in `<prefix>client.session`. Every node reads the node index at each heartbeat
(keys.py); a node whose last beat is older than its keys' TTL and whose record key has
expired is gone. Its sessions count as disconnected at its last heartbeat (a session it
held offline keeps its own disconnect time).

Exactly one live node cleans up, with no coordination: the live node with the smallest
node id. Every node computes it from the same Redis data; two nodes that disagree for
one beat while a node joins or leaves both clean up, which is harmless: the clean-up
records are the same and the session keeps one owner (ClusterNode breaks the tie).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from mqttq.cluster.nodes import NodeState, node_state
from mqttq.cluster.records import SessionInfo

__all__ = ["Orphan", "gone_candidates", "orphans", "reaper"]


@dataclass(frozen=True, slots=True)
class Orphan:
    """A session of a gone node."""

    client_id: str
    info: SessionInfo
    disconnected_at: float
    """When the session counts as disconnected (seconds since the epoch)."""


def gone_candidates(
    index: Iterable[tuple[str, float]], interval_ms: int, now: float, *, own: str
) -> tuple[set[str], dict[str, float]]:
    """(alive, candidates) from the node index (node id, last heartbeat in seconds):
    the nodes still beating (this node `own` always among them), and the others whose
    last beat is older than the keys' TTL with that beat's time. A candidate is gone once
    its record key is seen expired."""
    alive = {own}
    candidates: dict[str, float] = {}
    for node_id, heartbeat_at in index:
        if node_id == own:
            continue
        if node_state(heartbeat_at, interval_ms, now) is NodeState.GONE:
            candidates[node_id] = heartbeat_at
        else:
            alive.add(node_id)
    return alive, candidates


def reaper(alive: Iterable[str]) -> str | None:
    """The node that cleans up after gone nodes: the live one with the smallest id."""
    return min(alive, default=None)


def orphans(directory: Mapping[str, SessionInfo], gone: Mapping[str, float]) -> list[Orphan]:
    """The sessions of the `gone` nodes (node id -> last heartbeat): connected to one of
    them (disconnected now, at its last heartbeat), or held offline by one (disconnected
    at their own time)."""
    if not gone:
        return []
    found = []
    for client_id, info in directory.items():
        holder = info.node if info.node is not None else info.last_node
        last_beat = gone.get(holder)
        if last_beat is None:
            continue
        at = last_beat
        if info.node is None and info.disconnected_at is not None:
            at = info.disconnected_at
        found.append(Orphan(client_id, info, at))
    return found
