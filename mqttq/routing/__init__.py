"""Routing layer: topic rules, the subscription trie, the router and retained messages.

Pure code: no I/O, no asyncio, no clock (time is passed in).
"""

from __future__ import annotations

from mqttq.routing.retained import RetainedIndex
from mqttq.routing.router import Delivery, Router, SharedGroup
from mqttq.routing.topics import (
    filter_matches,
    has_wildcard,
    parse_shared,
    validate_topic_filter,
    validate_topic_name,
)
from mqttq.routing.trie import SubscriptionTrie

__all__ = [
    "Delivery",
    "RetainedIndex",
    "Router",
    "SharedGroup",
    "SubscriptionTrie",
    "filter_matches",
    "has_wildcard",
    "parse_shared",
    "validate_topic_filter",
    "validate_topic_name",
]
