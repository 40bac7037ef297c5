"""TenantSpace: one tenant's own topic namespace (router, retained messages, topic count).

Tenant isolation is structural: every tenant routes through its own Router and keeps its
own RetainedIndex, so no filter of one tenant (`#`, `+/x`, `$share/g/#`) can ever match a
topic of another, and shared-subscription groups and retained messages are per tenant by
construction. The topic count limit ("distinct topic names with retained messages or
subscriptions") is kept here as reference counts: a topic filter counts once however many
sessions subscribe to it, a retained topic once, and a name that is both once.
"""

from __future__ import annotations

from collections.abc import Callable

from mqttq.limits.limiter import Refused
from mqttq.routing.retained import RetainedIndex
from mqttq.routing.router import Router
from mqttq.routing.topics import parse_shared

__all__ = ["TenantSpace"]


class TenantSpace:
    """The namespace of one tenant on this node."""

    __slots__ = ("_acquire", "_release", "name", "retained", "router", "topic_refs")

    def __init__(
        self,
        name: str,
        acquire_topic: Callable[[str, bool], Refused | None],
        release_topic: Callable[[str], None],
    ) -> None:
        self.name = name
        self.router = Router()
        self.retained = RetainedIndex()
        self.topic_refs: dict[str, int] = {}
        """Topic name or filter -> subscriptions on it + 1 if it holds a retained message."""
        self._acquire = acquire_topic
        self._release = release_topic

    def __repr__(self) -> str:
        return f"<TenantSpace {self.name!r}>"

    @staticmethod
    def topic_of(topic_filter: str) -> str:
        """What a subscription counts as: a shared one counts as its inner filter."""
        return parse_shared(topic_filter)[1]

    def add_topic_ref(self, topic: str, *, force: bool = False) -> Refused | None:
        """One more reference to `topic`; the first one takes a topic from the count
        limits (refused: nothing changes). `force` counts past the limit (restored state)."""
        refs = self.topic_refs.get(topic)
        if refs is None:
            refused = self._acquire(self.name, force)
            if refused is not None:
                return refused
            self.topic_refs[topic] = 1
        else:
            self.topic_refs[topic] = refs + 1
        return None

    def drop_topic_ref(self, topic: str) -> None:
        """One reference fewer; the last one gives the topic back."""
        refs = self.topic_refs.get(topic)
        if refs is None:
            return
        if refs > 1:
            self.topic_refs[topic] = refs - 1
        else:
            del self.topic_refs[topic]
            self._release(self.name)

    def drop_retained(self, topic: str) -> bool:
        """Delete `topic`'s retained message and the topic reference it held; False when
        it had none."""
        if self.retained.get(topic) is None:
            return False
        self.retained.set(topic, None)
        self.drop_topic_ref(topic)
        return True

    def purge_expired_retained(self, now: float) -> list[str]:
        """Delete every retained message expired at `now` [MQTT-3.3.2-5], giving back the
        topics they held; their topic names."""
        expired = self.retained.expired(now)
        for topic in expired:
            self.drop_retained(topic)
        return expired

    def remove_client(self, client_id: str) -> None:
        """Drop every subscription of `client_id` and the topic references they held."""
        for subscription in self.router.subscriptions_of(client_id):
            self.drop_topic_ref(self.topic_of(subscription.topic_filter))
        self.router.remove_client(client_id)
