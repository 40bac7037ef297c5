"""Topic name/filter validation, `$share` parsing, reference matcher (MQTT 5.0 4.7, 4.8.2)."""

from __future__ import annotations

import pytest

from mqttq.errors import ProtocolError
from mqttq.reasons import ReasonCode
from mqttq.routing.topics import (
    MAX_TOPIC_LENGTH,
    filter_matches,
    has_wildcard,
    parse_shared,
    validate_topic_filter,
    validate_topic_name,
)


def _name_error(topic: str) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        validate_topic_name(topic)
    assert info.value.reason_code is ReasonCode.TOPIC_NAME_INVALID
    return info.value


def _filter_error(topic_filter: str) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        validate_topic_filter(topic_filter)
    assert info.value.reason_code is ReasonCode.TOPIC_FILTER_INVALID
    return info.value


# --- topic names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "topic", ["a", "/", "a/b/c", "/finance", "a//b", "$SYS/broker", "\u00e9t\u00e9/\u4e2d", " "]
)
def test_valid_topic_names_are_accepted(topic: str) -> None:
    assert validate_topic_name(topic) is None


def test_empty_topic_name_is_invalid_mqtt_4_7_3_1() -> None:
    assert "4.7.3-1" in _name_error("").message


@pytest.mark.parametrize("topic", ["a/+", "+", "a/#", "#", "a+b", "a#"])
def test_topic_name_with_wildcard_is_invalid_mqtt_3_3_2_2(topic: str) -> None:
    assert "3.3.2-2" in _name_error(topic).message


def test_topic_name_with_null_character_is_invalid_mqtt_4_7_3_2() -> None:
    assert "4.7.3-2" in _name_error("a/\x00/b").message


def test_topic_name_length_limit_is_utf8_bytes_mqtt_4_7_3_3() -> None:
    validate_topic_name("a" * MAX_TOPIC_LENGTH)
    assert "4.7.3-3" in _name_error("a" * (MAX_TOPIC_LENGTH + 1)).message
    # 'é' is two UTF-8 bytes: 32768 characters are 65536 bytes, one too many.
    _name_error("\u00e9" * 32768)
    validate_topic_name("\u00e9" * 32767 + "a")


def test_topic_name_with_lone_surrogate_is_invalid_mqtt_1_5_4_1() -> None:
    assert "1.5.4-1" in _name_error("a/\ud800").message


# --- topic filters -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "topic_filter",
    [
        "#",
        "+",
        "sport/#",
        "sport/tennis/#",
        "+/tennis/#",
        "sport/+/player1",
        "+/+",
        "/+",
        "a//b",
        "$SYS/#",
        "$share/group/a/b",
        "$share/g/#",
        "$share/g/+/x",
        "$share/g/$SYS/#",
        "$shared/x",
        "$sharegroup",
    ],
)
def test_valid_topic_filters_are_accepted(topic_filter: str) -> None:
    assert validate_topic_filter(topic_filter) is None


@pytest.mark.parametrize("topic_filter", ["sport/tennis#", "sport/#/ranking", "#/a", "##", "a/#b"])
def test_hash_must_be_alone_and_last_mqtt_4_7_1_2(topic_filter: str) -> None:
    _filter_error(topic_filter)


@pytest.mark.parametrize("topic_filter", ["sport+", "a/b+/c", "++", "+a"])
def test_plus_must_occupy_whole_level_mqtt_4_7_1_3(topic_filter: str) -> None:
    assert "4.7.1-3" in _filter_error(topic_filter).message


def test_empty_filter_is_invalid_mqtt_4_7_3_1() -> None:
    _filter_error("")


def test_filter_with_null_character_is_invalid_mqtt_4_7_3_2() -> None:
    _filter_error("a/\x00")


def test_filter_length_limit_mqtt_4_7_3_3() -> None:
    validate_topic_filter("a" * MAX_TOPIC_LENGTH)
    _filter_error("a" * (MAX_TOPIC_LENGTH + 1))


@pytest.mark.parametrize(
    "topic_filter",
    [
        "$share",  # nothing after it
        "$share/",  # empty ShareName [MQTT-4.8.2-1]
        "$share//a",  # empty ShareName [MQTT-4.8.2-1]
        "$share/group",  # no '/' after ShareName [MQTT-4.8.2-2]
        "$share/group/",  # no filter after the '/' [MQTT-4.8.2-2]
        "$share/gr+oup/a",  # '+' in ShareName [MQTT-4.8.2-2]
        "$share/gr#oup/a",  # '#' in ShareName [MQTT-4.8.2-2]
        "$share/+/a",
        "$share/#/a",
        "$share/g/a#",  # filter part must itself be valid [MQTT-4.7.1-2]
        "$share/g/a/#/b",
        "$share/g/a+",
    ],
)
def test_invalid_shared_filters_mqtt_4_8_2_1_and_2(topic_filter: str) -> None:
    _filter_error(topic_filter)


def test_parse_shared_splits_share_name_and_filter_mqtt_4_8_2() -> None:
    assert parse_shared("$share/consumers/sensors/+/temp") == ("consumers", "sensors/+/temp")
    assert parse_shared("$share/g/#") == ("g", "#")
    assert parse_shared("$share/g//a") == ("g", "/a")
    assert parse_shared("sensors/#") == (None, "sensors/#")
    assert parse_shared("$shared/a") == (None, "$shared/a")
    assert parse_shared("$SYS/#") == (None, "$SYS/#")


def test_parse_shared_rejects_share_without_filter_mqtt_4_8_2_2() -> None:
    for bad in ("$share", "$share/g", "$share/g/", "$share//x"):
        with pytest.raises(ProtocolError) as info:
            parse_shared(bad)
        assert info.value.reason_code is ReasonCode.TOPIC_FILTER_INVALID


def test_has_wildcard() -> None:
    assert has_wildcard("a/+")
    assert has_wildcard("#")
    assert has_wildcard("$share/g/a/#")
    assert not has_wildcard("a/b")
    assert not has_wildcard("$share/g/a")


# --- reference matcher ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topic_filter", "topic", "expected"),
    [
        # Non-normative examples of 4.7.1.2 and 4.7.1.3.
        ("sport/tennis/player1/#", "sport/tennis/player1", True),
        ("sport/tennis/player1/#", "sport/tennis/player1/ranking", True),
        ("sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", True),
        ("sport/#", "sport", True),
        ("sport/tennis/+", "sport/tennis/player1", True),
        ("sport/tennis/+", "sport/tennis/player1/ranking", False),
        ("sport/+", "sport", False),
        ("sport/+", "sport/", True),
        ("+/+", "/finance", True),
        ("/+", "/finance", True),
        ("+", "/finance", False),
        ("#", "a/b/c", True),
        ("#", "/", True),
        ("a/b", "a/b", True),
        ("a/b", "a/b/c", False),
        ("a/b/c", "a/b", False),
        ("a/b", "a/c", False),
        ("a/#", "ab", False),
        ("a//b", "a//b", True),
        ("a/+/b", "a//b", True),
        ("A", "a", False),
    ],
)
def test_filter_matches_spec_examples_mqtt_4_7_1(
    topic_filter: str, topic: str, expected: bool
) -> None:
    assert filter_matches(topic_filter, topic) is expected


def test_hash_matches_parent_level_mqtt_4_7_1_2() -> None:
    """'sport/#' also matches 'sport' (non-normative example after [MQTT-4.7.1-2])."""
    assert filter_matches("sport/#", "sport")
    assert filter_matches("a/b/#", "a/b")
    assert not filter_matches("a/b/#", "a")


@pytest.mark.parametrize(
    ("topic_filter", "topic", "expected"),
    [
        ("#", "$SYS/monitor/Clients", False),
        ("+/monitor/Clients", "$SYS/monitor/Clients", False),
        ("+", "$SYS", False),
        ("+/#", "$SYS/x", False),
        ("$SYS/#", "$SYS/monitor/Clients", True),
        ("$SYS/monitor/+", "$SYS/monitor/Clients", True),
        ("$SYS/#", "$SYS", True),
        ("a/+", "a/$x", True),  # only the first level is special
        ("a/#", "a/$x/y", True),
    ],
)
def test_dollar_topics_not_matched_by_leading_wildcards_mqtt_4_7_2_1(
    topic_filter: str, topic: str, expected: bool
) -> None:
    assert filter_matches(topic_filter, topic) is expected
