"""Kafka topic and consumer group names of APPLICATION clients (TBMQ's layout).

A persistent APPLICATION client reads its own one-partition topic
`<prefix>msg.app.<client_id>`; the members of a shared subscription `$share/<group>/<filter>`
read `<prefix>msg.app.shared.<filter>` in one consumer group per (group, filter). Kafka
allows only `[a-zA-Z0-9._-]` and 249 characters in a topic name, so a client id that is not
`[a-zA-Z0-9]+` is replaced by its sha256 hex, and so is a filter with other characters than
letters, digits, `/`, `+` and `#`. Pure functions: no I/O.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

__all__ = [
    "MAX_TOPIC_LENGTH",
    "app_group",
    "app_topic",
    "shared_group",
    "shared_topic",
]

MAX_TOPIC_LENGTH: Final = 249
"""Kafka's limit on a topic name."""
_MAX_PLAIN: Final = 160
"""Longer ids and filters are hashed, so that a prefix still fits in MAX_TOPIC_LENGTH."""
_PLAIN_ID: Final = re.compile(r"[a-zA-Z0-9]+")
_PLAIN_FILTER: Final = re.compile(r"[a-zA-Z0-9/+#]+")
_WILDCARD_WORDS: Final = frozenset({"slw", "mlw"})


def _sha256(text: str) -> str:
    # surrogatepass: an id decoded from MQTT is valid UTF-8, but a name never fails here.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def app_topic(prefix: str, client_id: str) -> str:
    """`<prefix>msg.app.<client_id>`, or with the id's sha256 hex when it is not
    `[a-zA-Z0-9]+` (or longer than 160 characters)."""
    plain = _PLAIN_ID.fullmatch(client_id) is not None and len(client_id) <= _MAX_PLAIN
    return f"{prefix}msg.app.{client_id if plain else _sha256(client_id)}"


def shared_topic(prefix: str, topic_filter: str) -> str:
    """`<prefix>msg.app.shared.<name>` for the filter of a shared subscription (without
    its `$share/<group>/`): `/` -> `.`, `+` -> `slw`, `#` -> `mlw`; the sha256 hex of the
    filter when it has any other character, or a level that is literally `slw` or `mlw`
    (so that `a/slw` and `a/+` never share a topic), or is longer than 160 characters."""
    plain = (
        _PLAIN_FILTER.fullmatch(topic_filter) is not None
        and len(topic_filter) <= _MAX_PLAIN
        and not _WILDCARD_WORDS.intersection(topic_filter.split("/"))
    )
    if not plain:
        return f"{prefix}msg.app.shared.{_sha256(topic_filter)}"
    name = topic_filter.replace("/", ".").replace("+", "slw").replace("#", "mlw")
    return f"{prefix}msg.app.shared.{name}"


def app_group(prefix: str, client_id: str) -> str:
    """The consumer group of a client's own topic (its committed offset lives there)."""
    return f"{prefix}application-persisted-msg-consumer-group-{client_id}"


def shared_group(prefix: str, share_name: str, topic_filter: str) -> str:
    """The consumer group of every member of `$share/<share_name>/<topic_filter>`."""
    topic = shared_topic(prefix, topic_filter)
    return f"{prefix}application-shared-msg-consumer-group-{share_name}-{topic}"
