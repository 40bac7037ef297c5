"""The Redis keys of the cluster's node registry (after `[redis] key_prefix`).

- `mqttq:cluster:nodes`: ZSET; member = node id, score = the node's last heartbeat (ms since
  the epoch). The index of nodes ever seen recently; an entry whose node record is gone is a
  node that stopped without a clean stop (pruned after `INDEX_RETENTION_MS`).
- `mqttq:cluster:{<node>}:node`: HASH; the node's record (`NodeRecord`), with a TTL of three
  heartbeat intervals: a node that stops beating disappears by itself.
- `mqttq:cluster:{<node>}:tenants`: HASH; field = tenant, value = `[connections, sessions,
  topics]` (JSON) held on that node; same TTL, rewritten at every heartbeat.

The two per-node keys share the hash tag `{<node>}`, so that on a Redis Cluster one
MULTI/EXEC writes both (they live in one slot); the index lives in a slot of its own and is
written beside them, not inside the transaction.
"""

from __future__ import annotations

from typing import Final

__all__ = ["INDEX_RETENTION_MS", "ClusterKeys"]

INDEX_RETENTION_MS: Final = 600_000
"""How long a node that vanished without a clean stop stays listed (as gone): 10 minutes."""


class ClusterKeys:
    """Key names of the node registry under `prefix`."""

    __slots__ = ("nodes", "prefix")

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self.nodes = f"{prefix}mqttq:cluster:nodes"

    def node(self, node_id: str) -> str:
        """The HASH holding `node_id`'s record."""
        return f"{self.prefix}mqttq:cluster:{{{node_id}}}:node"

    def tenants(self, node_id: str) -> str:
        """The HASH holding `node_id`'s counts per tenant."""
        return f"{self.prefix}mqttq:cluster:{{{node_id}}}:tenants"
