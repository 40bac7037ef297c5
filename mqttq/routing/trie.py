"""Subscription trie: topic filters keyed by level, matched in time proportional to the nodes
a topic can reach, never by scanning every subscription.
"""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ["SubscriptionTrie"]

K = TypeVar("K")
V = TypeVar("V")


class _Node(Generic[K, V]):
    """One filter level. Wildcard children live apart so match() needs no dict lookup for them."""

    __slots__ = ("children", "multi", "single", "values")

    def __init__(self) -> None:
        self.children: dict[str, _Node[K, V]] = {}
        self.single: _Node[K, V] | None = None
        """Child for a '+' level."""
        self.multi: _Node[K, V] | None = None
        """Child for a '#' level; it only ever holds values."""
        self.values: dict[K, V] = {}
        """Entries whose filter ends at this node."""

    def is_empty(self) -> bool:
        return not self.values and not self.children and self.single is None and self.multi is None


class SubscriptionTrie(Generic[K, V]):
    """Map (topic filter, key) -> value, answering "which entries match this topic name?".

    Filters are taken literally level by level ('+' and '#' are wildcards; a `$share/`
    prefix is NOT interpreted, so strip it first). At most one value per (filter, key).
    Matching follows [MQTT-4.7.1-2] ('a/#' matches 'a'), [MQTT-4.7.1-3] ('+' matches one
    level) and [MQTT-4.7.2-1] (a topic starting with '$' is not matched by a filter whose
    first level is a wildcard). Nodes left empty by remove() are pruned.
    """

    __slots__ = ("_root", "_size")

    def __init__(self) -> None:
        self._root: _Node[K, V] = _Node()
        self._size = 0

    def __len__(self) -> int:
        """Number of (filter, key) entries."""
        return self._size

    def add(self, topic_filter: str, key: K, value: V) -> bool:
        """Store value for (topic_filter, key); True when new, False when it replaced one."""
        node = self._root
        for level in topic_filter.split("/"):
            if level == "+":
                child = node.single
                if child is None:
                    child = node.single = _Node()
            elif level == "#":
                child = node.multi
                if child is None:
                    child = node.multi = _Node()
            else:
                child = node.children.get(level)
                if child is None:
                    child = node.children[level] = _Node()
            node = child
        is_new = key not in node.values
        node.values[key] = value
        if is_new:
            self._size += 1
        return is_new

    def get(self, topic_filter: str, key: K) -> V | None:
        """The value stored for (topic_filter, key), or None."""
        node = self._find(topic_filter)
        return None if node is None else node.values.get(key)

    def remove(self, topic_filter: str, key: K) -> V | None:
        """Remove (topic_filter, key); its value, or None when absent. Prunes empty nodes."""
        path: list[tuple[_Node[K, V], str]] = []
        node: _Node[K, V] | None = self._root
        for level in topic_filter.split("/"):
            assert node is not None
            path.append((node, level))
            if level == "+":
                node = node.single
            elif level == "#":
                node = node.multi
            else:
                node = node.children.get(level)
            if node is None:
                return None
        assert node is not None
        if key not in node.values:
            return None
        value = node.values.pop(key)
        self._size -= 1
        while path and node.is_empty():
            parent, level = path.pop()
            if level == "+":
                parent.single = None
            elif level == "#":
                parent.multi = None
            else:
                del parent.children[level]
            node = parent
        return value

    def match(self, topic: str) -> list[tuple[K, V]]:
        """Every (key, value) whose filter matches the topic name, each exactly once.

        Cost is proportional to the trie nodes the topic's levels can reach.
        """
        result: list[tuple[K, V]] = []
        levels = topic.split("/")
        root = self._root
        first = levels[0]
        child = root.children.get(first)
        nodes: list[_Node[K, V]]
        # Only the first level may hide wildcard children, from '$' topics [MQTT-4.7.2-1].
        if first.startswith("$"):
            if child is None:
                return result
            nodes = [child]
        else:
            multi = root.multi
            if multi is not None:
                result.extend(multi.values.items())
            single = root.single
            if single is None:
                if child is None:
                    return result
                nodes = [child]
            elif child is None:
                nodes = [single]
            else:
                nodes = [child, single]
        del levels[0]
        for level in levels:
            if len(nodes) == 1:
                # One live path is the common case: reuse the list instead of building one.
                node = nodes[0]
                multi = node.multi
                if multi is not None:
                    result.extend(multi.values.items())
                child = node.children.get(level)
                single = node.single
                if single is None:
                    if child is None:
                        return result
                    nodes[0] = child
                elif child is None:
                    nodes[0] = single
                else:
                    nodes = [child, single]
                continue
            next_nodes: list[_Node[K, V]] = []
            for node in nodes:
                multi = node.multi
                if multi is not None:
                    result.extend(multi.values.items())
                child = node.children.get(level)
                if child is not None:
                    next_nodes.append(child)
                single = node.single
                if single is not None:
                    next_nodes.append(single)
            if not next_nodes:
                return result
            nodes = next_nodes
        for node in nodes:
            values = node.values
            if values:
                result.extend(values.items())
            multi = node.multi
            # 'a/#' also matches 'a' itself [MQTT-4.7.1-2].
            if multi is not None:
                result.extend(multi.values.items())
        return result

    def items(self) -> list[tuple[str, K, V]]:
        """Every (topic_filter, key, value), for inspection and tests (walks the whole trie)."""
        out: list[tuple[str, K, V]] = []
        stack: list[tuple[_Node[K, V], str | None]] = [(self._root, None)]
        while stack:
            node, prefix = stack.pop()
            if prefix is not None:
                out.extend((prefix, key, value) for key, value in node.values.items())
            for level, child in node.children.items():
                stack.append((child, level if prefix is None else f"{prefix}/{level}"))
            if node.single is not None:
                stack.append((node.single, "+" if prefix is None else f"{prefix}/+"))
            if node.multi is not None:
                stack.append((node.multi, "#" if prefix is None else f"{prefix}/#"))
        return out

    def _find(self, topic_filter: str) -> _Node[K, V] | None:
        node: _Node[K, V] | None = self._root
        for level in topic_filter.split("/"):
            if node is None:
                return None
            if level == "+":
                node = node.single
            elif level == "#":
                node = node.multi
            else:
                node = node.children.get(level)
        return node
