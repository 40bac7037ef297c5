"""Kafka topic names of APPLICATION clients (mqttq.storage.kafka.app_topics): examples and
properties (every name is a legal Kafka topic; distinct valid filters never collide)."""

from __future__ import annotations

import hashlib
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from mqttq.routing.topics import validate_topic_filter
from mqttq.storage.kafka.app_topics import (
    MAX_TOPIC_LENGTH,
    app_group,
    app_topic,
    shared_group,
    shared_topic,
)

_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
_FAST = settings(max_examples=200, deadline=None)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_alphanumeric_client_id_is_kept() -> None:
    assert app_topic("tbmq.", "sensorApp42") == "tbmq.msg.app.sensorApp42"


def test_client_id_with_other_characters_is_hashed() -> None:
    for client_id in ("app-1", "app_1", "a.b", "app/1", "é", "a b", ""):
        assert app_topic("tbmq.", client_id) == f"tbmq.msg.app.{sha(client_id)}"


def test_shared_filter_examples_of_the_seed() -> None:
    assert shared_topic("tbmq.", "test/topic") == "tbmq.msg.app.shared.test.topic"
    assert shared_topic("tbmq.", "test/#") == "tbmq.msg.app.shared.test.mlw"
    assert shared_topic("tbmq.", "test/+") == "tbmq.msg.app.shared.test.slw"
    assert shared_topic("", "+/a/#") == "msg.app.shared.slw.a.mlw"


def test_shared_filter_with_other_characters_or_wildcard_words_is_hashed() -> None:
    for topic_filter in ("a-b/c", "a/b c", "ü/+", "a/slw", "mlw/#"):
        assert shared_topic("p.", topic_filter) == f"p.msg.app.shared.{sha(topic_filter)}"


def test_groups_name_the_client_and_the_share() -> None:
    assert app_group("t.", "c1").endswith("-c1")
    assert shared_group("t.", "g1", "a/+") == (
        "t.application-shared-msg-consumer-group-g1-t.msg.app.shared.a.slw"
    )


@_FAST
@given(st.text(max_size=300))
def test_client_topic_is_always_legal(client_id: str) -> None:
    name = app_topic("tbmq.", client_id)
    assert _LEGAL.fullmatch(name) is not None
    assert len(name) <= MAX_TOPIC_LENGTH


@_FAST
@given(st.text(max_size=40), st.text(max_size=40))
def test_distinct_client_ids_get_distinct_topics(a: str, b: str) -> None:
    if a != b:
        assert app_topic("", a) != app_topic("", b)


_levels = st.sampled_from(["a", "b", "slw", "mlw", "x1", "", "+", "é", "a-b", "sl"])


@st.composite
def filters(draw: st.DrawFn) -> str:
    levels = draw(st.lists(_levels, min_size=1, max_size=5))
    if draw(st.booleans()):
        levels.append("#")
    return "/".join(levels) or "+"


@_FAST
@given(filters(), filters())
def test_distinct_valid_filters_get_distinct_legal_topics(a: str, b: str) -> None:
    validate_topic_filter(a)
    validate_topic_filter(b)
    name_a, name_b = shared_topic("tbmq.", a), shared_topic("tbmq.", b)
    assert _LEGAL.fullmatch(name_a) is not None
    assert len(name_a) <= MAX_TOPIC_LENGTH
    assert (name_a == name_b) == (a == b)
