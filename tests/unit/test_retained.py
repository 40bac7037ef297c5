"""RetainedIndex: store, replace, delete and match retained messages (MQTT 5.0 3.3.1.3, 4.7)."""

from __future__ import annotations

from mqttq.model import Message
from mqttq.routing.retained import RetainedIndex


def _msg(topic: str, payload: bytes = b"v", expires_at: float | None = None) -> Message:
    return Message(topic=topic, payload=payload, retain=True, expires_at=expires_at)


def _index(*topics: str) -> RetainedIndex:
    index = RetainedIndex()
    for topic in topics:
        index.set(topic, _msg(topic))
    return index


def _topics(index: RetainedIndex, topic_filter: str, now: float = 0.0) -> list[str]:
    return sorted(m.topic for m in index.match(topic_filter, now))


def test_set_get_replace_mqtt_3_3_1_5() -> None:
    """A new retained message replaces the previous one for the topic."""
    index = RetainedIndex()
    first, second = _msg("a/b", b"1"), _msg("a/b", b"2")
    index.set("a/b", first)
    index.set("a/b", second)
    assert index.get("a/b") is second
    assert index.get("a") is None
    assert len(index) == 1
    assert index.all() == [second]


def test_set_none_deletes_mqtt_3_3_1_6() -> None:
    index = _index("a/b", "a/b/c", "a")
    index.set("a/b", None)
    index.set("never/set", None)
    assert index.get("a/b") is None
    assert len(index) == 2
    assert _topics(index, "#") == ["a", "a/b/c"]
    assert _topics(index, "a/+") == []


def test_delete_prunes_empty_levels() -> None:
    index = _index("a/b/c/d")
    index.set("a/b/c/d", None)
    assert index._root.children == {}
    assert len(index) == 0
    assert index.all() == []


def test_delete_stops_pruning_at_a_level_holding_a_message() -> None:
    """Pruning climbs from the deleted topic and stops at 'a/b', which holds a message (the
    climb once raised TypeError in the mypyc build: mypy typed the test `None`)."""
    index = _index("a/b", "a/b/c/d")
    index.set("a/b/c/d", None)
    assert _topics(index, "#") == ["a/b"]
    assert index._root.children["a"].children["b"].children == {}
    assert len(index) == 1


def test_exact_filter() -> None:
    index = _index("a/b", "a/c", "a/b/c")
    assert _topics(index, "a/b") == ["a/b"]
    assert _topics(index, "a/x") == []


def test_plus_expands_one_level_mqtt_4_7_1_3() -> None:
    index = _index("a/b", "a/c", "a/b/c", "a/", "x/b")
    assert _topics(index, "a/+") == ["a/", "a/b", "a/c"]
    assert _topics(index, "+/b") == ["a/b", "x/b"]
    assert _topics(index, "+/+/c") == ["a/b/c"]


def test_hash_matches_parent_and_children_mqtt_4_7_1_2() -> None:
    index = _index("a", "a/b", "a/b/c", "ab", "b")
    assert _topics(index, "a/#") == ["a", "a/b", "a/b/c"]
    assert _topics(index, "#") == ["a", "a/b", "a/b/c", "ab", "b"]
    assert _topics(index, "a/b/#") == ["a/b", "a/b/c"]


def test_dollar_topics_not_matched_by_leading_wildcards_mqtt_4_7_2_1() -> None:
    index = _index("$SYS/x", "$SYS", "a/$x", "a")
    assert _topics(index, "#") == ["a", "a/$x"]
    assert _topics(index, "+") == ["a"]
    assert _topics(index, "+/x") == []
    assert _topics(index, "$SYS/#") == ["$SYS", "$SYS/x"]
    assert _topics(index, "$SYS/+") == ["$SYS/x"]
    assert _topics(index, "a/+") == ["a/$x"]


def test_expired_messages_are_not_matched_mqtt_3_3_2_5() -> None:
    index = RetainedIndex()
    index.set("a/old", _msg("a/old", expires_at=10.0))
    index.set("a/new", _msg("a/new", expires_at=100.0))
    index.set("a/forever", _msg("a/forever"))
    assert _topics(index, "a/#", now=5.0) == ["a/forever", "a/new", "a/old"]
    assert _topics(index, "a/+", now=10.0) == ["a/forever", "a/new"]
    assert _topics(index, "a/old", now=10.0) == []
    assert _topics(index, "#", now=100.0) == ["a/forever"]
    # match() does not delete; expired() names what the owner deletes.
    assert len(index) == 3
    assert index.expired(50.0) == ["a/old"]
    assert index.expired(5.0) == []
    assert len(index) == 3


def test_empty_levels() -> None:
    index = _index("/", "/a", "a//b")
    assert _topics(index, "+/+") == ["/", "/a"]
    assert _topics(index, "a/+/b") == ["a//b"]
    assert _topics(index, "/#") == ["/", "/a"]
