"""ClusterRoutes: what the hub needs of the cluster it routes through.

With a cluster (distributed mode), the hub hands a delivery for a subscriber with no
session here to the cluster (`deliver`), stores retained messages for every node
(`set_retained`), tells every node where a session lives (`publish_session`), counts a
`$share` member connected to another node as online (`is_connected`) and adds the
cluster's counters to its own (`statistics`). `ClusterNode`
(broker/distributed/cluster_node.py) is the one provider; naming this Protocol instead of
it keeps the hub below the cluster code, which reads the hub's sessions and tenants.

A `typing.Protocol`: `ClusterNode` is not compiled, so a call to it leaves compiled code
whatever the hub names. What the session lifecycle asks of the cluster (claims, takeovers,
the sessions of gone nodes) it asks of the `ClusterNode` itself
(`Lifecycle.attach_cluster`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import asyncio

    from mqttq.broker.sessions.session import Session
    from mqttq.model import Message
    from mqttq.routing.router import Delivery

__all__ = ["ClusterRoutes"]


class ClusterRoutes(Protocol):
    """The cluster as the hub sees it (see the module docstring)."""

    def deliver(
        self, tenant: str, delivery: Delivery, message: Message
    ) -> asyncio.Future[Any] | None:
        """Route one delivery for a client without a session on this node; the future is
        what the publisher's answer waits for (None: nothing to wait for)."""
        ...

    def set_retained(self, tenant: str, topic: str, message: Message | None) -> asyncio.Future[Any]:
        """Set (None: clear) a retained message for every node."""
        ...

    def is_connected(self, client_id: str) -> bool:
        """True when the client is connected to some node."""
        ...

    def publish_session(self, session: Session) -> asyncio.Future[Any]:
        """Tell every node where `session` lives and what it subscribes to."""
        ...

    def statistics(self) -> dict[str, int]:
        """The cluster's counters."""
        ...
