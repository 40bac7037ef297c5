"""SubscriptionTrie: add / remove / match following MQTT 5.0 section 4.7."""

from __future__ import annotations

from mqttq.routing.trie import SubscriptionTrie


def _matched(trie: SubscriptionTrie[str, str], topic: str) -> list[tuple[str, str]]:
    return sorted(trie.match(topic))


def _trie(*filters: str) -> SubscriptionTrie[str, str]:
    trie: SubscriptionTrie[str, str] = SubscriptionTrie()
    for topic_filter in filters:
        trie.add(topic_filter, topic_filter, topic_filter)
    return trie


def test_add_reports_new_then_replaced_and_len_counts_entries() -> None:
    trie: SubscriptionTrie[str, int] = SubscriptionTrie()
    assert trie.add("a/b", "c1", 1) is True
    assert trie.add("a/b", "c1", 2) is False
    assert trie.add("a/b", "c2", 3) is True
    assert trie.add("a/+", "c1", 4) is True
    assert len(trie) == 3
    assert sorted(trie.match("a/b")) == [("c1", 2), ("c1", 4), ("c2", 3)]
    assert trie.get("a/b", "c1") == 2
    assert trie.get("a/b", "nobody") is None
    assert trie.get("x", "c1") is None


def test_exact_filter_matches_only_its_topic() -> None:
    trie = _trie("a/b")
    assert _matched(trie, "a/b") == [("a/b", "a/b")]
    assert _matched(trie, "a") == []
    assert _matched(trie, "a/b/c") == []
    assert _matched(trie, "a/c") == []


def test_plus_matches_exactly_one_level_mqtt_4_7_1_3() -> None:
    trie = _trie("a/+/c", "+")
    assert [k for k, _ in _matched(trie, "a/b/c")] == ["a/+/c"]
    assert [k for k, _ in _matched(trie, "a//c")] == ["a/+/c"]
    assert _matched(trie, "a/b/c/d") == []
    assert [k for k, _ in _matched(trie, "x")] == ["+"]


def test_hash_matches_parent_and_descendants_mqtt_4_7_1_2() -> None:
    """'sport/#' matches 'sport' and everything below it."""
    trie = _trie("sport/#", "#")
    assert [k for k, _ in _matched(trie, "sport")] == ["#", "sport/#"]
    assert [k for k, _ in _matched(trie, "sport/tennis/player1")] == ["#", "sport/#"]
    assert [k for k, _ in _matched(trie, "sports")] == ["#"]


def test_dollar_topic_not_matched_by_leading_wildcards_mqtt_4_7_2_1() -> None:
    trie = _trie("#", "+/x", "+", "$SYS/#", "$SYS/+")
    assert [k for k, _ in _matched(trie, "$SYS/x")] == ["$SYS/#", "$SYS/+"]
    assert [k for k, _ in _matched(trie, "$SYS")] == ["$SYS/#"]
    assert [k for k, _ in _matched(trie, "a/x")] == ["#", "+/x"]


def test_every_matching_entry_is_returned_once() -> None:
    trie = _trie("a/b/c", "a/+/c", "+/+/+", "a/#", "#", "a/b/#", "+/b/#")
    got = [k for k, _ in trie.match("a/b/c")]
    assert sorted(got) == sorted(["a/b/c", "a/+/c", "+/+/+", "a/#", "#", "a/b/#", "+/b/#"])
    assert len(got) == len(set(got))


def test_remove_returns_value_and_stops_matching() -> None:
    trie = _trie("a/+", "a/#")
    assert trie.remove("a/+", "a/+") == "a/+"
    assert trie.remove("a/+", "a/+") is None
    assert trie.remove("never/added", "k") is None
    assert trie.remove("a/#", "other-key") is None
    assert [k for k, _ in _matched(trie, "a/b")] == ["a/#"]
    assert len(trie) == 1


def test_remove_prunes_empty_nodes() -> None:
    trie = _trie("keep/x")
    for topic_filter in ("a/b/c/d", "a/+/#", "a/b/+", "#", "+"):
        trie.add(topic_filter, "k", topic_filter)
        trie.remove(topic_filter, "k")
    assert trie.items() == [("keep/x", "keep/x", "keep/x")]
    trie.remove("keep/x", "keep/x")
    root = trie._root
    assert root.is_empty()


def test_remove_keeps_nodes_still_used() -> None:
    trie = _trie("a/b", "a/b/c")
    trie.remove("a/b/c", "a/b/c")
    assert [k for k, _ in _matched(trie, "a/b")] == ["a/b"]
    trie.add("a/b/c", "k", "v")
    trie.remove("a/b", "a/b")
    assert _matched(trie, "a/b/c") == [("k", "v")]
    assert _matched(trie, "a/b") == []


def test_items_lists_filters() -> None:
    trie = _trie("a/+/#", "#", "+", "a", "/")
    assert sorted(f for f, _, _ in trie.items()) == sorted(["a/+/#", "#", "+", "a", "/"])


def test_empty_levels_are_distinct_levels() -> None:
    trie = _trie("/", "a//b", "+/+")
    assert sorted(k for k, _ in trie.match("/")) == ["+/+", "/"]
    assert sorted(k for k, _ in trie.match("a//b")) == ["a//b"]
