"""Access control lists: which topics a client may publish to and subscribe to.

An ACL is a list of MQTT topic filters [MQTT-4.7]. A PUBLISH is allowed when one filter
matches its topic; a subscription is allowed when one filter *covers* the requested filter,
that is, matches every topic name the requested filter can match (so `a/#` allows a
subscription to `a/+/b`, and `a/+` does not allow `a/#`). A `$share/<group>/` prefix is
stripped first: the group does not change which topics a subscription receives.

Topics starting with `$` are not matched by a filter whose first level is a wildcard
[MQTT-4.7.2-1], on either side: the ACL `#` does not allow `$SYS/x`, and a subscription
to `#` never receives `$` topics, so the ACL `#` allows it.

ACL entries may name the client: a level that is exactly `%c` becomes its client id, `%u`
its username (`expand_acl`, done once at CONNECT).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import Final

from mqttq.errors import ProtocolError
from mqttq.routing.topics import filter_matches, parse_shared, validate_topic_filter

__all__ = [
    "CLIENT_ID_LEVEL",
    "USERNAME_LEVEL",
    "client_id_allowed",
    "expand_acl",
    "filter_covers",
    "may_publish",
    "may_subscribe",
]

CLIENT_ID_LEVEL: Final = "%c"
USERNAME_LEVEL: Final = "%u"


def _levels(topic_filter: str) -> list[str] | None:
    """The levels of a valid plain filter; None when the filter is invalid."""
    try:
        validate_topic_filter(topic_filter)
    except ProtocolError:
        return None
    return topic_filter.split("/")


def filter_covers(acl_filter: str, requested: str) -> bool:
    """True iff every topic name matched by the plain filter `requested` is matched by the
    plain filter `acl_filter` (both as `filter_matches` reads them). An invalid filter on
    either side covers, and is covered by, nothing."""
    allowed = _levels(acl_filter)
    wanted = _levels(requested)
    if allowed is None or wanted is None:
        return False
    if allowed[0] in ("+", "#") and wanted[0].startswith("$"):
        # `requested` matches only `$` topics, which a leading wildcard never matches.
        return False
    depth = len(wanted)
    for index, level in enumerate(allowed):
        if level == "#":
            # Matches the parent and every child of the prefix covered so far.
            return True
        if index >= depth:
            return False
        want = wanted[index]
        if want == "#":
            # `requested` matches topics of every depth from here on, and the parent:
            # `acl_filter` covers that only as `+/#` here, and only when the parent is
            # no topic at all (`#` or `/#`: a topic name is at least one character).
            parentless = index == 0 or (index == 1 and wanted[0] == "")
            return parentless and level == "+" and allowed[index + 1 :] == ["#"]
        if level == "+":
            continue
        if want == "+" or want != level:
            return False
    return len(allowed) == depth


def may_publish(acl: Sequence[str], topic: str) -> bool:
    """True when one filter of `acl` matches the topic name."""
    return any(filter_matches(acl_filter, topic) for acl_filter in acl)


def may_subscribe(acl: Sequence[str], topic_filter: str) -> bool:
    """True when one filter of `acl` covers `topic_filter` (its filter part, for a
    `$share/<group>/<filter>`). An invalid filter is never allowed."""
    try:
        _group, plain = parse_shared(topic_filter)
    except ProtocolError:
        return False
    return any(filter_covers(acl_filter, plain) for acl_filter in acl)


def _safe_level(value: str | None) -> bool:
    # A value that is not one plain topic level would widen the filter: `#` or `+` become
    # wildcards, `/` adds levels, a leading `$` reaches `$SYS`-like topics, an empty one
    # is a level shared by every client whose value is empty.
    if not value or value.startswith("$"):
        return False
    return "+" not in value and "#" not in value and "/" not in value


def expand_acl(acl: Sequence[str], client_id: str, username: str | None) -> tuple[str, ...]:
    """`acl` with each level that is exactly `%c` replaced by the client id and each `%u`
    by the username, in order. A filter is dropped (never widened) when a value it needs
    is missing (`%u` without a username) or is not one plain level: empty, starting with
    `$`, or containing `+`, `#` or `/`. Filters that are invalid after expansion are
    dropped too."""
    values = {
        CLIENT_ID_LEVEL: client_id if _safe_level(client_id) else None,
        USERNAME_LEVEL: username if _safe_level(username) else None,
    }
    expanded: list[str] = []
    for acl_filter in acl:
        result = acl_filter
        if "%" in acl_filter:
            replaced = [values.get(level, level) for level in acl_filter.split("/")]
            if any(level is None for level in replaced):
                continue
            result = "/".join(level for level in replaced if level is not None)
        if _levels(result) is not None:
            expanded.append(result)
    return tuple(expanded)


def client_id_allowed(pattern: str | None, client_id: str) -> bool:
    """True when `client_id` matches the credential's fnmatch-style pattern (case
    sensitive: `*`, `?`, `[seq]`); a None pattern allows any client id."""
    return pattern is None or fnmatch.fnmatchcase(client_id, pattern)
