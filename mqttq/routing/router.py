"""Router: every session's subscriptions, and which sessions get a published message."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mqttq.model import Message, Subscription
from mqttq.routing.topics import parse_shared
from mqttq.routing.trie import SubscriptionTrie

__all__ = ["Delivery", "Router", "SharedGroup"]


@dataclass(slots=True, init=False)
class Delivery:
    """One copy of a message for one session, with the options it is delivered under.

    `qos` is already min(message QoS, granted QoS) [MQTT-3.8.4-8]; `retain` is the RETAIN
    flag to send [MQTT-3.3.1-12/13]; `subscription_identifiers` go into the PUBLISH
    [MQTT-3.3.4-3]; `shared` marks a delivery made for a `$share` group.
    """

    client_id: str
    qos: int
    retain: bool
    subscription_identifiers: tuple[int, ...] = ()
    shared: bool = False
    share: tuple[str, str] | None = field(default=None, compare=False)
    """(share name, topic filter) of the `$share` group the delivery was made for."""

    def __init__(  # noqa: PLR0917 (the fields, as the generated one takes them)
        self,
        client_id: str,
        qos: int,
        retain: bool,
        subscription_identifiers: tuple[int, ...] = (),
        shared: bool = False,
        share: tuple[str, str] | None = None,
    ) -> None:
        # Written out, as Message's: the generated one runs interpreted, and routing
        # builds one per matching session for every message.
        self.client_id = client_id
        self.qos = qos
        self.retain = retain
        self.subscription_identifiers = subscription_identifiers
        self.shared = shared
        self.share = share


class SharedGroup:
    """The sessions subscribed to one `$share/<group>/<filter>` [MQTT-4.8.2].

    Each member keeps its own subscription options. `pick` chooses exactly one member per
    message, round robin.
    """

    __slots__ = ("_cursor", "_members", "_order", "share_name", "topic_filter")

    def __init__(self, share_name: str, topic_filter: str) -> None:
        self.share_name = share_name
        self.topic_filter = topic_filter
        """The filter part (after `$share/<group>/`)."""
        self._members: dict[str, Subscription] = {}
        self._order: list[str] = []
        self._cursor = 0

    def __len__(self) -> int:
        return len(self._order)

    def members(self) -> list[tuple[str, Subscription]]:
        """(client_id, subscription) in round-robin order, starting from the first joiner."""
        return [(client_id, self._members[client_id]) for client_id in self._order]

    def upsert(self, client_id: str, subscription: Subscription) -> bool:
        """Add a member or replace its subscription (keeping its turn); True when new."""
        is_new = client_id not in self._members
        self._members[client_id] = subscription
        if is_new:
            self._order.append(client_id)
        return is_new

    def discard(self, client_id: str) -> bool:
        """Remove a member; True when it was one. Later members keep their relative turns."""
        if self._members.pop(client_id, None) is None:
            return False
        index = self._order.index(client_id)
        del self._order[index]
        if index < self._cursor:
            self._cursor -= 1
        if self._cursor >= len(self._order):
            self._cursor = 0
        return True

    def pick(self, is_online: Callable[[str], bool]) -> tuple[str, Subscription]:
        """Next member in round robin among those online; among all when none is online.

        Falling back to an offline member means the broker queues the message in that
        member's session instead of dropping it (only a group with no member drops it).
        The group must not be empty.
        """
        order = self._order
        count = len(order)
        start = self._cursor
        for step in range(count):
            index = (start + step) % count
            client_id = order[index]
            if is_online(client_id):
                self._cursor = (index + 1) % count
                return client_id, self._members[client_id]
        client_id = order[start]
        self._cursor = (start + 1) % count
        return client_id, self._members[client_id]


_MATCH_CACHE_LIMIT = 16384
"""Topics whose trie matches are kept between subscription changes (a full cache is
emptied and refilled: cheaper per message than an LRU, and a change empties it anyway)."""

_GROUP_KEY = "\x00"
"""Prefixes a ShareName to key its group in the trie. Client ids never contain U+0000
[MQTT-1.5.4-2], so a group key cannot collide with a client id at the same filter."""


class Router:
    """Subscriptions of every session and the routing decision for each published message.

    Pure state, no I/O: the broker calls `subscribe`/`unsubscribe` as SUBSCRIBE/UNSUBSCRIBE
    packets are accepted (filters already validated) and `route` for each PUBLISH. One
    trie holds both kinds of subscription, so a message costs one walk: a non-shared entry
    is (client_id, Subscription), a shared one ("\\x00" + ShareName, SharedGroup) stored
    under the filter part.
    """

    __slots__ = ("_cache", "_clients", "_groups", "_trie")

    def __init__(self) -> None:
        self._clients: dict[str, dict[str, Subscription]] = {}
        self._trie: SubscriptionTrie[str, Subscription | SharedGroup] = SubscriptionTrie()
        self._groups: dict[tuple[str, str], SharedGroup] = {}
        self._cache: dict[str, tuple[list[tuple[str, Subscription | SharedGroup]], bool]] = {}
        """topic -> (trie matches, True when no client appears twice among them); emptied
        by every subscription change, so it never outlives what it was computed from."""

    def subscribe(self, client_id: str, subscription: Subscription) -> bool:
        """Add or replace the client's subscription to `subscription.topic_filter`.

        True when new, False when it replaced an existing one with the identical filter
        [MQTT-3.8.4-3]. `$share/<group>/<filter>` joins that group [MQTT-4.8.2]. A malformed
        `$share` filter raises ProtocolError(TOPIC_FILTER_INVALID) and changes nothing.
        """
        topic_filter = subscription.topic_filter
        share_name, inner = parse_shared(topic_filter)
        subscriptions = self._clients.get(client_id)
        if subscriptions is None:
            subscriptions = self._clients[client_id] = {}
        is_new = topic_filter not in subscriptions
        subscriptions[topic_filter] = subscription
        self._cache.clear()
        if share_name is None:
            self._trie.add(topic_filter, client_id, subscription)
        else:
            group = self._groups.get((share_name, inner))
            if group is None:
                group = self._groups[share_name, inner] = SharedGroup(share_name, inner)
                self._trie.add(inner, _GROUP_KEY + share_name, group)
            group.upsert(client_id, subscription)
        return is_new

    def unsubscribe(self, client_id: str, topic_filter: str) -> bool:
        """Remove the client's subscription to exactly `topic_filter`; False when it had none."""
        subscriptions = self._clients.get(client_id)
        if subscriptions is None or subscriptions.pop(topic_filter, None) is None:
            return False
        if not subscriptions:
            del self._clients[client_id]
        self._cache.clear()
        share_name, inner = parse_shared(topic_filter)
        if share_name is None:
            self._trie.remove(topic_filter, client_id)
        else:
            key = (share_name, inner)
            group = self._groups[key]
            group.discard(client_id)
            if not group:
                del self._groups[key]
                self._trie.remove(inner, _GROUP_KEY + share_name)
        return True

    def remove_client(self, client_id: str) -> None:
        """Drop every subscription of the client (its session ended)."""
        subscriptions = self._clients.get(client_id)
        if subscriptions is None:
            return
        for topic_filter in list(subscriptions):
            self.unsubscribe(client_id, topic_filter)

    def has_subscription(self, client_id: str, topic_filter: str) -> bool:
        """True when `client_id` holds a subscription on exactly `topic_filter`."""
        subscriptions = self._clients.get(client_id)
        return subscriptions is not None and topic_filter in subscriptions

    def subscriptions_of(self, client_id: str) -> list[Subscription]:
        """The client's subscriptions in the order they were first made."""
        subscriptions = self._clients.get(client_id)
        return [] if subscriptions is None else list(subscriptions.values())

    def clients(self) -> list[str]:
        """Client ids holding at least one subscription."""
        return list(self._clients)

    def shared_groups(self) -> list[SharedGroup]:
        """Every non-empty `$share` group, for inspection."""
        return list(self._groups.values())

    def route(self, message: Message, is_online: Callable[[str], bool]) -> list[Delivery]:
        """Deliveries for a published message: one per matching client, one per shared group.

        Non-shared: a client with overlapping matching subscriptions gets one delivery
        [MQTT-3.3.4-2] at the maximum of min(message QoS, subscription QoS) over them
        [MQTT-3.8.4-8], with every matching subscription identifier (ascending, no
        duplicates) [MQTT-3.3.4-3] [MQTT-3.3.4-4]; RETAIN kept only if a matching
        subscription has Retain As Published, else 0 [MQTT-3.3.1-12] [MQTT-3.3.1-13]; a
        No Local subscription of the publisher itself is skipped [MQTT-3.8.3-3].

        Shared: one delivery per matching group to one member [MQTT-4.8.2], round robin
        among members for which `is_online` is true, else among all members (see
        `SharedGroup.pick`). The member's own options apply: QoS min(message, granted),
        its identifier, and Retain As Published [MQTT-3.3.1-12] [MQTT-3.3.1-13], which the
        spec states for every subscription with no exception for shared ones. No Local is
        not applied: it is a Protocol Error on a shared subscription [MQTT-3.8.3-4],
        rejected before it gets here. A client matching both ways gets both deliveries;
        non-shared deliveries come first.
        """
        topic = message.topic
        cached = self._cache.get(topic)
        if cached is None:
            cached = self._match(topic)
        matches, distinct = cached
        if len(matches) == 1:
            client_id, entry = matches[0]
            if isinstance(entry, SharedGroup):
                return [_shared_delivery(entry, message, is_online)]
            if entry.no_local and client_id == message.publisher_id:
                return []
            qos = message.qos
            sid = entry.subscription_identifier
            return [
                Delivery(
                    client_id,
                    qos if qos < entry.qos else entry.qos,
                    message.retain and entry.retain_as_published,
                    () if sid is None else (sid,),
                    False,
                )
            ]
        if not matches:
            return []
        if distinct:
            return _one_each(matches, message, is_online)
        return _merge(matches, message, is_online)

    def _match(self, topic: str) -> tuple[list[tuple[str, Subscription | SharedGroup]], bool]:
        matches = self._trie.match(topic)
        clients = [key for key, entry in matches if not isinstance(entry, SharedGroup)]
        entry = (matches, len(set(clients)) == len(clients))
        cache = self._cache
        if len(cache) >= _MATCH_CACHE_LIMIT:
            cache.clear()
        cache[topic] = entry
        return entry


def _shared_delivery(
    group: SharedGroup, message: Message, is_online: Callable[[str], bool]
) -> Delivery:
    client_id, sub = group.pick(is_online)
    qos = message.qos
    sid = sub.subscription_identifier
    return Delivery(
        client_id,
        qos if qos < sub.qos else sub.qos,
        message.retain and sub.retain_as_published,
        () if sid is None else (sid,),
        True,
        (group.share_name, group.topic_filter),
    )


def _one_each(
    matches: list[tuple[str, Subscription | SharedGroup]],
    message: Message,
    is_online: Callable[[str], bool],
) -> list[Delivery]:
    """`_merge` for matches in which no client appears twice: nothing to fold."""
    qos = message.qos
    retain = message.retain
    publisher_id = message.publisher_id
    deliveries: list[Delivery] = []
    groups: list[SharedGroup] = []
    for client_id, sub in matches:
        if isinstance(sub, SharedGroup):
            groups.append(sub)
            continue
        if sub.no_local and client_id == publisher_id:
            continue
        sid = sub.subscription_identifier
        deliveries.append(
            Delivery(
                client_id,
                qos if qos < sub.qos else sub.qos,
                retain and sub.retain_as_published,
                () if sid is None else (sid,),
                False,
            )
        )
    for group in groups:
        deliveries.append(_shared_delivery(group, message, is_online))
    return deliveries


def _merge(
    matches: list[tuple[str, Subscription | SharedGroup]],
    message: Message,
    is_online: Callable[[str], bool],
) -> list[Delivery]:
    """Fold several matches into one delivery per client [MQTT-3.3.4-2], then one per group."""
    qos = message.qos
    retain = message.retain
    publisher_id = message.publisher_id
    deliveries: list[Delivery] = []
    by_client: dict[str, Delivery] = {}
    several_ids: list[Delivery] = []
    groups: list[SharedGroup] = []
    for client_id, sub in matches:
        if isinstance(sub, SharedGroup):
            groups.append(sub)
            continue
        if sub.no_local and client_id == publisher_id:
            continue
        granted = qos if qos < sub.qos else sub.qos
        sid = sub.subscription_identifier
        delivery = by_client.get(client_id)
        if delivery is None:
            by_client[client_id] = delivery = Delivery(
                client_id,
                granted,
                retain and sub.retain_as_published,
                () if sid is None else (sid,),
                False,
            )
            deliveries.append(delivery)
            continue
        if granted > delivery.qos:  # noqa: PLR1730 (max() is a slower call on the hot path)
            delivery.qos = granted
        if retain and sub.retain_as_published:
            delivery.retain = True
        if sid is not None:
            if len(delivery.subscription_identifiers) == 1:
                several_ids.append(delivery)
            delivery.subscription_identifiers += (sid,)
    for delivery in several_ids:
        ids = delivery.subscription_identifiers
        delivery.subscription_identifiers = tuple(sorted(set(ids)))
    for group in groups:
        deliveries.append(_shared_delivery(group, message, is_online))
    return deliveries
