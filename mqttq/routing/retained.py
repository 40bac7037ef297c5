"""Retained messages indexed by topic level, so a new subscription's filter walks only the
branches it can reach [MQTT-3.3.1-9].
"""

from __future__ import annotations

from mqttq.model import Message

__all__ = ["RetainedIndex"]


class _Level:
    """One topic level; `message` is the retained message whose topic ends here."""

    __slots__ = ("children", "message")

    def __init__(self) -> None:
        self.children: dict[str, _Level] = {}
        self.message: Message | None = None

    def is_empty(self) -> bool:
        return self.message is None and not self.children


class RetainedIndex:
    """At most one retained message per topic name [MQTT-3.3.1-5].

    `set(topic, None)` deletes, which is what a retained PUBLISH with an empty payload does
    [MQTT-3.3.1-6] (the caller decides that; this index only stores). `match` answers the
    retained messages a new subscription receives [MQTT-3.3.1-9]; it skips messages expired
    at `now` [MQTT-3.3.2-5] without removing them (see `expired`).
    """

    __slots__ = ("_by_topic", "_root")

    def __init__(self) -> None:
        self._root = _Level()
        self._by_topic: dict[str, Message] = {}

    def __len__(self) -> int:
        """Number of stored retained messages, expired or not."""
        return len(self._by_topic)

    def get(self, topic: str) -> Message | None:
        """The message retained for exactly this topic name, expired or not."""
        return self._by_topic.get(topic)

    def all(self) -> list[Message]:
        """Every stored message, expired or not (for snapshots and admin listings)."""
        return list(self._by_topic.values())

    def set(self, topic: str, message: Message | None) -> None:
        """Retain `message` for `topic`, replacing any previous one; None deletes it."""
        if message is None:
            self._delete(topic)
            return
        node = self._root
        for level in topic.split("/"):
            child = node.children.get(level)
            if child is None:
                child = node.children[level] = _Level()
            node = child
        node.message = message
        self._by_topic[topic] = message

    def _delete(self, topic: str) -> None:
        if self._by_topic.pop(topic, None) is None:
            return
        path: list[tuple[_Level, str]] = []
        node = self._root
        for level in topic.split("/"):
            path.append((node, level))
            node = node.children[level]
        node.message = None
        # Prune levels no other topic needs, so wildcard walks never visit dead branches. (A
        # method, not `node.message is None` here: mypy would type that test None, narrowed
        # by the line above, and mypyc's code would then refuse a parent holding a message.)
        while path and node.is_empty():
            parent, level = path.pop()
            del parent.children[level]
            node = parent

    def match(self, topic_filter: str, now: float) -> list[Message]:
        """Unexpired retained messages whose topic the plain filter matches.

        '+' and '#' expand only the branches that exist; 'a/#' includes 'a' [MQTT-4.7.1-2];
        topics starting with '$' are not matched by a filter starting with a wildcard
        [MQTT-4.7.2-1]. Pass the filter part of a `$share` filter. Order is unspecified.
        """
        levels = topic_filter.split("/")
        depth = len(levels)
        found: list[Message] = []
        stack: list[tuple[_Level, int]] = [(self._root, 0)]
        while stack:
            node, index = stack.pop()
            if index == depth:
                message = node.message
                if message is not None and not message.is_expired(now):
                    found.append(message)
                continue
            level = levels[index]
            if level == "#":
                self._collect(node, index == 0, now, found)
            elif level == "+":
                for name, child in node.children.items():
                    if index == 0 and name[:1] == "$":
                        continue
                    stack.append((child, index + 1))
            else:
                exact = node.children.get(level)
                if exact is not None:
                    stack.append((exact, index + 1))
        return found

    @staticmethod
    def _collect(start: _Level, at_root: bool, now: float, found: list[Message]) -> None:
        """Every unexpired message at `start` and below ('#' includes its parent level)."""
        stack = [start]
        while stack:
            node = stack.pop()
            message = node.message
            if message is not None and not message.is_expired(now):
                found.append(message)
            if at_root and node is start:
                stack.extend(child for name, child in node.children.items() if name[:1] != "$")
            else:
                stack.extend(node.children.values())

    def expired(self, now: float) -> list[str]:
        """The topics whose message is expired at `now` (walks all messages); the caller
        deletes them with `set(topic, None)`."""
        return [topic for topic, message in self._by_topic.items() if message.is_expired(now)]
