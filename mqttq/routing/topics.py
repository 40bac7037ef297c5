"""Topic names, topic filters and `$share` filters: validation and the reference matcher.

The rules come from MQTT 5.0 sections 4.7 (topic names and filters) and 4.8.2 (shared
subscriptions); 3.1.1 has the same rules for 4.7. Everything here is pure and allocation-light
because `validate_topic_name` runs once per incoming PUBLISH.
"""

from __future__ import annotations

from typing import Final

from mqttq.errors import ProtocolError
from mqttq.reasons import ReasonCode

__all__ = [
    "MAX_TOPIC_LENGTH",
    "SHARE_PREFIX",
    "filter_matches",
    "has_wildcard",
    "parse_shared",
    "validate_topic_filter",
    "validate_topic_name",
]

MAX_TOPIC_LENGTH: Final = 65535
"""Largest UTF-8 encoded length of a topic name or filter [MQTT-4.7.3-3]."""

SHARE_PREFIX = "$share/"
"""Marks a Shared Subscription's topic filter [MQTT-4.8.2-1]."""

_SHARE_LEN = len(SHARE_PREFIX)


def _check_string(text: str, reason: ReasonCode, what: str) -> None:
    """Rules common to topic names and filters [MQTT-4.7.3-1/2/3], [MQTT-1.5.4-1]."""
    if not text:
        raise ProtocolError(reason, f"{what} is empty [MQTT-4.7.3-1]")
    if "\x00" in text:
        raise ProtocolError(reason, f"{what} contains U+0000 [MQTT-4.7.3-2]")
    if text.isascii():
        size = len(text)
    else:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            # Only lone surrogates fail to encode; they are ill-formed UTF-8 [MQTT-1.5.4-1].
            raise ProtocolError(reason, f"{what} is not well-formed UTF-8 [MQTT-1.5.4-1]") from None
    if size > MAX_TOPIC_LENGTH:
        raise ProtocolError(reason, f"{what} longer than {MAX_TOPIC_LENGTH} bytes [MQTT-4.7.3-3]")


def validate_topic_name(topic: str) -> None:
    """Accept a valid topic name or raise ProtocolError(TOPIC_NAME_INVALID).

    A topic name is non-empty [MQTT-4.7.3-1], has no U+0000 [MQTT-4.7.3-2], encodes to at
    most 65535 UTF-8 bytes [MQTT-4.7.3-3] and contains no wildcard [MQTT-3.3.2-2].
    """
    _check_string(topic, ReasonCode.TOPIC_NAME_INVALID, "topic name")
    if "+" in topic or "#" in topic:
        raise ProtocolError(
            ReasonCode.TOPIC_NAME_INVALID, "topic name contains a wildcard [MQTT-3.3.2-2]"
        )


def _check_filter_levels(topic_filter: str) -> None:
    """Wildcard placement rules of a plain (non-shared) filter [MQTT-4.7.1-1/2/3]."""
    if "+" not in topic_filter and "#" not in topic_filter:
        return
    levels = topic_filter.split("/")
    last = len(levels) - 1
    for index, level in enumerate(levels):
        if "#" in level and (level != "#" or index != last):
            raise ProtocolError(
                ReasonCode.TOPIC_FILTER_INVALID,
                "'#' must be alone in the last level [MQTT-4.7.1-1] [MQTT-4.7.1-2]",
            )
        if "+" in level and level != "+":
            raise ProtocolError(
                ReasonCode.TOPIC_FILTER_INVALID, "'+' must be alone in its level [MQTT-4.7.1-3]"
            )


def parse_shared(topic_filter: str) -> tuple[str | None, str]:
    """Split `$share/<ShareName>/<filter>` into (ShareName, filter); (None, topic_filter) otherwise.

    Checks only the shared-subscription structure: ShareName is at least one character
    [MQTT-4.8.2-1], holds no '/', '+' or '#' and is followed by '/' and a non-empty filter
    [MQTT-4.8.2-2]. `$share` alone is invalid too. The filter part itself is checked by
    `validate_topic_filter`. Raises ProtocolError(TOPIC_FILTER_INVALID).
    """
    if not topic_filter.startswith("$share"):
        return None, topic_filter
    if topic_filter == "$share":
        raise ProtocolError(
            ReasonCode.TOPIC_FILTER_INVALID, "'$share' without ShareName and filter [MQTT-4.8.2-1]"
        )
    if not topic_filter.startswith(SHARE_PREFIX):
        return None, topic_filter
    slash = topic_filter.find("/", _SHARE_LEN)
    if slash < 0:
        raise ProtocolError(
            ReasonCode.TOPIC_FILTER_INVALID,
            "ShareName must be followed by '/' and a topic filter [MQTT-4.8.2-2]",
        )
    share_name = topic_filter[_SHARE_LEN:slash]
    if not share_name:
        raise ProtocolError(ReasonCode.TOPIC_FILTER_INVALID, "empty ShareName [MQTT-4.8.2-1]")
    if "+" in share_name or "#" in share_name:
        raise ProtocolError(
            ReasonCode.TOPIC_FILTER_INVALID, "ShareName contains '+' or '#' [MQTT-4.8.2-2]"
        )
    inner = topic_filter[slash + 1 :]
    if not inner:
        raise ProtocolError(
            ReasonCode.TOPIC_FILTER_INVALID,
            "no topic filter after the ShareName [MQTT-4.8.2-2]",
        )
    return share_name, inner


def validate_topic_filter(topic_filter: str) -> None:
    """Accept a valid topic filter (plain or `$share/...`) or raise TOPIC_FILTER_INVALID.

    Non-empty, no U+0000, at most 65535 UTF-8 bytes [MQTT-4.7.3-1/2/3]; '#' only alone in
    the last level [MQTT-4.7.1-1/2]; '+' only alone in its level [MQTT-4.7.1-3]; a shared
    filter follows [MQTT-4.8.2-1/2] and its filter part follows the plain rules.
    """
    _check_string(topic_filter, ReasonCode.TOPIC_FILTER_INVALID, "topic filter")
    _share_name, inner = parse_shared(topic_filter)
    _check_filter_levels(inner)


def has_wildcard(topic_filter: str) -> bool:
    """True when the filter contains '+' or '#' (the Wildcard Subscription Available check)."""
    return "+" in topic_filter or "#" in topic_filter


def filter_matches(topic_filter: str, topic: str) -> bool:
    """Reference matcher: does the plain (valid, non-shared) filter match the topic name?

    '+' matches exactly one level (possibly empty), '#' the parent level and any number of
    child levels, so 'sport/#' matches 'sport' [MQTT-4.7.1-2]. Topics starting with '$' are
    not matched by filters starting with '+' or '#' [MQTT-4.7.2-1]. Pass the filter part of a
    shared filter (see `parse_shared`).
    """
    if topic[:1] == "$" and topic_filter[:1] in ("+", "#"):
        return False
    filter_levels = topic_filter.split("/")
    topic_levels = topic.split("/")
    topic_depth = len(topic_levels)
    for index, level in enumerate(filter_levels):
        if level == "#":
            return True
        if index >= topic_depth:
            return False
        if level != "+" and level != topic_levels[index]:
            return False
    return len(filter_levels) == topic_depth
