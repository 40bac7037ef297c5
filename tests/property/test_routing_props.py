"""Hypothesis: the trie, the router and the retained index agree with the reference matcher."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mqttq.errors import ProtocolError
from mqttq.model import Message, Subscription
from mqttq.reasons import ReasonCode
from mqttq.routing.retained import RetainedIndex
from mqttq.routing.router import Router
from mqttq.routing.topics import (
    filter_matches,
    parse_shared,
    validate_topic_filter,
    validate_topic_name,
)
from mqttq.routing.trie import SubscriptionTrie

_NAMES = ["a", "b", "c", "$x", ""]

topic_levels = st.sampled_from(_NAMES)
topics = st.lists(topic_levels, min_size=1, max_size=5).map("/".join).filter(bool)


@st.composite
def topic_filters(draw: st.DrawFn) -> str:
    """Valid plain filters: '+' anywhere, '#' only as the whole last level."""
    levels = draw(st.lists(st.sampled_from([*_NAMES, "+"]), min_size=1, max_size=5))
    if draw(st.booleans()):
        levels.append("#")
    topic_filter = "/".join(levels)
    return topic_filter or "+"


clients = st.sampled_from(["c1", "c2", "c3"])

_FAST = settings(max_examples=150, deadline=None)


@_FAST
@given(st.lists(st.tuples(topic_filters(), clients), max_size=25), st.lists(topics, max_size=8))
def test_trie_match_equals_brute_force(entries: list[tuple[str, str]], probes: list[str]) -> None:
    trie: SubscriptionTrie[str, str] = SubscriptionTrie()
    for topic_filter, client_id in entries:
        trie.add(topic_filter, client_id, topic_filter)
    unique = set(entries)
    for topic in probes:
        got = trie.match(topic)
        expected = sorted((c, f) for f, c in unique if filter_matches(f, topic))
        assert sorted(got) == expected
        assert len(got) == len(set(got))


_operations = st.lists(
    st.tuples(st.booleans(), topic_filters(), clients, st.integers(0, 3)), max_size=40
)


@_FAST
@given(_operations, st.lists(topics, max_size=5))
def test_trie_add_remove_matches_model_dict(
    operations: list[tuple[bool, str, str, int]], probes: list[str]
) -> None:
    trie: SubscriptionTrie[str, int] = SubscriptionTrie()
    model: dict[tuple[str, str], int] = {}
    for is_add, topic_filter, client_id, value in operations:
        if is_add:
            assert trie.add(topic_filter, client_id, value) is (
                (topic_filter, client_id) not in model
            )
            model[topic_filter, client_id] = value
        else:
            assert trie.remove(topic_filter, client_id) == model.pop(
                (topic_filter, client_id), None
            )
        assert len(trie) == len(model)
    assert sorted(trie.items()) == sorted((f, c, v) for (f, c), v in model.items())
    for topic in probes:
        expected = sorted((c, v) for (f, c), v in model.items() if filter_matches(f, topic))
        assert sorted(trie.match(topic)) == expected
    for topic_filter, client_id in list(model):
        trie.remove(topic_filter, client_id)
    assert trie.items() == []
    assert trie._root.is_empty()


_retained_ops = st.lists(
    st.tuples(topics, st.one_of(st.none(), st.floats(0, 10), st.just(-1.0))), max_size=30
)


@_FAST
@given(_retained_ops, st.lists(topic_filters(), max_size=6), st.floats(0, 10))
def test_retained_match_equals_brute_force(
    operations: list[tuple[str, float | None]], probes: list[str], now: float
) -> None:
    index = RetainedIndex()
    model: dict[str, Message] = {}
    for topic, expires_at in operations:
        if expires_at == -1.0:
            index.set(topic, None)
            model.pop(topic, None)
        else:
            message = Message(topic=topic, payload=b"", retain=True, expires_at=expires_at)
            index.set(topic, message)
            model[topic] = message
    assert len(index) == len(model)
    for topic_filter in probes:
        got = sorted(m.topic for m in index.match(topic_filter, now))
        expected = sorted(
            t for t, m in model.items() if filter_matches(topic_filter, t) and not m.is_expired(now)
        )
        assert got == expected


_router_subs = st.lists(
    st.tuples(
        clients,
        st.one_of(
            topic_filters(),
            st.tuples(st.sampled_from(["g", "h"]), topic_filters()).map(
                lambda pair: f"$share/{pair[0]}/{pair[1]}"
            ),
        ),
        st.integers(0, 2),
        st.one_of(st.none(), st.integers(1, 4)),
    ),
    max_size=15,
)


@_FAST
@given(_router_subs, topics, st.integers(0, 2), st.sets(clients))
def test_router_matches_brute_force(
    subs: list[tuple[str, str, int, int | None]], topic: str, qos: int, online: set[str]
) -> None:
    """One plain delivery per matching client (max QoS, all ids) and one per matching group,
    to an online member whenever the group has one."""
    router = Router()
    model: dict[str, dict[str, Subscription]] = {}
    for client_id, topic_filter, sub_qos, sid in subs:
        sub = Subscription(topic_filter, qos=sub_qos, subscription_identifier=sid)
        router.subscribe(client_id, sub)
        model.setdefault(client_id, {})[topic_filter] = sub
    deliveries = router.route(Message(topic=topic, payload=b"", qos=qos), online.__contains__)
    plain = {d.client_id: d for d in deliveries if not d.shared}
    assert len(plain) == sum(not d.shared for d in deliveries)
    members: dict[tuple[str, str], set[str]] = {}
    for client_id, client_subs in model.items():
        matching = []
        for topic_filter, sub in client_subs.items():
            share_name, inner = parse_shared(topic_filter)
            if not filter_matches(inner, topic):
                continue
            if share_name is None:
                matching.append(sub)
            else:
                members.setdefault((share_name, inner), set()).add(client_id)
        if not matching:
            assert client_id not in plain
            continue
        delivery = plain[client_id]
        assert delivery.qos == max(min(qos, s.qos) for s in matching)
        ids = {s.subscription_identifier for s in matching} - {None}
        assert delivery.subscription_identifiers == tuple(sorted(ids))
    shared = [d for d in deliveries if d.shared]
    assert len(shared) == len(members)
    # Each shared delivery goes to a member of a matching group, online ones first.
    for delivery in shared:
        assert any(
            delivery.client_id in group and (delivery.client_id in online or not group & online)
            for group in members.values()
        )


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.one_of(st.sampled_from("/+#$\x00"), st.characters(exclude_categories=())),
        max_size=30,
    )
)
def test_validation_raises_only_protocol_error(text: str) -> None:
    for validate, reason in (
        (validate_topic_name, ReasonCode.TOPIC_NAME_INVALID),
        (validate_topic_filter, ReasonCode.TOPIC_FILTER_INVALID),
    ):
        try:
            validate(text)
        except ProtocolError as error:
            assert error.reason_code is reason


@_FAST
@given(st.lists(st.sampled_from(["a", "+", "#", "$share", "g", "", "$x", "a+", "#b"]), max_size=6))
def test_filter_validation_on_structured_input(levels: list[str]) -> None:
    """Valid filters are exactly those following [MQTT-4.7.1-1/2/3] and [MQTT-4.8.2-1/2]."""
    text = "/".join(levels)
    try:
        validate_topic_filter(text)
    except ProtocolError as error:
        assert error.reason_code is ReasonCode.TOPIC_FILTER_INVALID
        return
    assert text
    inner = text
    if text.startswith("$share/"):
        share_name, _, inner = text[len("$share/") :].partition("/")
        assert share_name and "+" not in share_name and "#" not in share_name and inner
    else:
        assert text != "$share"
    parts = inner.split("/")
    for position, level in enumerate(parts):
        assert level in ("+", "#") or ("+" not in level and "#" not in level)
        assert level != "#" or position == len(parts) - 1
