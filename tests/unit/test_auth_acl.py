"""mqttq.auth.acl: publish/subscribe checks, filter covering, %c/%u expansion."""

from __future__ import annotations

import pytest

from mqttq.auth.acl import (
    client_id_allowed,
    expand_acl,
    filter_covers,
    may_publish,
    may_subscribe,
)

COVERS = [
    # (acl filter, requested filter, covered)
    ("#", "#", True),
    ("#", "a", True),
    ("#", "a/b/c", True),
    ("#", "+/+", True),
    ("#", "/", True),
    ("a/#", "a", True),  # '#' matches the parent level too
    ("a/#", "a/#", True),
    ("a/#", "a/+", True),
    ("a/#", "a/+/b", True),
    ("a/#", "a/b/#", True),
    ("a/#", "b", False),
    ("a/#", "#", False),
    ("a/#", "+/b", False),
    ("a/+", "a/b", True),
    ("a/+", "a/+", True),
    ("a/+", "a/", True),
    ("a/+", "a/#", False),  # 'a/#' also matches 'a' and 'a/b/c'
    ("a/+", "a", False),
    ("a/+", "a/b/c", False),
    ("a/+/c", "a/+/c", True),
    ("a/+/c", "a/b/c", True),
    ("a/+/c", "a/+/d", False),
    ("a/b", "a/b", True),
    ("a/b", "a/+", False),
    ("a/b", "a/b/#", False),
    ("a/b", "a/c", False),
    ("a/b/#", "a/#", False),
    ("+", "a", True),
    ("+", "+", True),
    ("+", "#", False),
    ("+", "a/b", False),
    ("+/#", "#", True),  # every topic has a first level: same topics as '#'
    ("+/#", "a", True),
    ("+/+/#", "#", False),
    ("+/+/#", "a", False),
    # `X/#` also matches its parent `X`, which `X/+/#` does not, unless there is no parent
    # topic: `#` and `/#` (a topic name is at least one character; found by Hypothesis).
    ("+/#", "#", True),
    ("/+/#", "/#", True),
    ("+/+/#", "/#", True),
    ("a/+/#", "a/#", False),
    ("/+/+/#", "/#", False),
    ("a//b", "a//b", True),  # empty levels are levels
    ("a/+/b", "a//b", True),
    ("a//b", "a/+/b", False),
    # Topics starting with '$' [MQTT-4.7.2-1]: a leading wildcard never matches them.
    ("#", "$SYS/x", False),
    ("#", "$SYS/#", False),
    ("+/x", "$SYS/x", False),
    ("+/#", "$SYS", False),
    ("$SYS/#", "$SYS/x", True),
    ("$SYS/#", "$SYS/+/y", True),
    ("$SYS/+", "$SYS/x", True),
    # A requested leading wildcard matches no '$' topic, so these stay covered ...
    ("#", "+/x", True),
    ("+/x", "+/x", True),
    # ... and a '$' ACL filter covers no leading wildcard.
    ("$SYS/#", "#", False),
    ("$SYS/#", "+/x", False),
    ("$x", "$x", True),
    ("a/$x", "a/+", False),
    ("a/+", "a/$x", True),  # '$' matters in the first level only
    # Invalid filters cover and are covered by nothing.
    ("a/#/b", "a/x/b", False),
    ("a+", "a+", False),
    ("#", "a/#/b", False),
    ("#", "", False),
    ("", "a", False),
]


@pytest.mark.parametrize(("acl_filter", "requested", "covered"), COVERS)
def test_filter_covers(acl_filter: str, requested: str, covered: bool) -> None:
    assert filter_covers(acl_filter, requested) is covered


PUBLISH = [
    (["#"], "a/b", True),
    (["#"], "$SYS/x", False),
    (["$SYS/#"], "$SYS/x", True),
    (["a/+"], "a/b", True),
    (["a/+"], "a/b/c", False),
    (["a/#"], "a", True),
    (["x", "a/#"], "a/b", True),
    ([], "a", False),
    (["a/b"], "a/c", False),
]


@pytest.mark.parametrize(("acl", "topic", "allowed"), PUBLISH)
def test_may_publish(acl: list[str], topic: str, allowed: bool) -> None:
    assert may_publish(acl, topic) is allowed


SUBSCRIBE = [
    (["a/#"], "a/+/b", True),
    (["a/#"], "$share/g/a/+/b", True),  # the group does not change the topics
    (["a/#"], "$share/g/b", False),
    (["a/#"], "$share/a/b", False),  # group 'a', filter 'b'
    (["#"], "$share/g/#", True),
    (["#"], "$share/g/$SYS/#", False),
    (["a/+"], "a/#", False),
    (["a/+", "a/#"], "a/#", True),
    ([], "a", False),
    (["#"], "$share/g", False),  # invalid shared filters are never allowed
    (["#"], "$share//a", False),
    (["#"], "$share/g+/a", False),
    (["#"], "a/#/b", False),
    (["#"], "$share", False),
]


@pytest.mark.parametrize(("acl", "topic_filter", "allowed"), SUBSCRIBE)
def test_may_subscribe(acl: list[str], topic_filter: str, allowed: bool) -> None:
    assert may_subscribe(acl, topic_filter) is allowed


EXPAND = [
    # (acl, client id, username, expanded)
    (["devices/%c/#"], "dev1", "alice", ("devices/dev1/#",)),
    (["users/%u/#"], "dev1", "alice", ("users/alice/#",)),
    (["%u/%c"], "dev1", "alice", ("alice/dev1",)),
    (["%c"], "dev1", None, ("dev1",)),
    (["users/%u/#", "public/#"], "dev1", None, ("public/#",)),  # no username: dropped
    (["a/%c-x/b", "a%u"], "dev1", "alice", ("a/%c-x/b", "a%u")),  # only whole levels
    (["a/#"], "x/#", "+", ("a/#",)),  # filters without placeholders are kept as they are
    (["a", "a/#/b", "", "b"], "c", "u", ("a", "b")),  # invalid filters are dropped
]


@pytest.mark.parametrize(("acl", "client_id", "username", "expanded"), EXPAND)
def test_expand_acl(
    acl: list[str], client_id: str, username: str | None, expanded: tuple[str, ...]
) -> None:
    assert expand_acl(acl, client_id, username) == expanded


# A client id or username that is not one plain level would widen the filter it fills.
HOSTILE = ["#", "+", "a/b", "x/#", "a+", "b#", "/", "", "$SYS", "$share", "\x00"]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_client_id_drops_its_filters(value: str) -> None:
    acl = ["devices/%c/#", "%c", "public/#"]
    assert expand_acl(acl, value, "alice") == ("public/#",)


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_username_drops_its_filters(value: str) -> None:
    acl = ["users/%u/#", "%u/%c", "devices/%c"]
    assert expand_acl(acl, "dev1", value) == ("devices/dev1",)


def test_hostile_client_id_cannot_reach_other_clients() -> None:
    acl = expand_acl(["devices/%c/#"], "+", "alice")
    assert not may_publish(acl, "devices/victim/cmd")
    assert not may_subscribe(acl, "devices/victim/#")
    own = expand_acl(["devices/%c/#"], "dev1", "alice")
    assert may_publish(own, "devices/dev1/state")
    assert not may_publish(own, "devices/dev2/state")
    assert may_subscribe(own, "devices/dev1/+")
    assert not may_subscribe(own, "devices/+/state")


@pytest.mark.parametrize(
    ("pattern", "client_id", "allowed"),
    [
        (None, "anything", True),
        (None, "", True),
        ("dev-*", "dev-1", True),
        ("dev-*", "dev-", True),
        ("dev-*", "DEV-1", False),  # case sensitive on every platform
        ("dev-*", "app-1", False),
        ("dev-?", "dev-12", False),
        ("dev-[0-9]", "dev-7", True),
        ("dev-[0-9]", "dev-x", False),
        ("exact", "exact", True),
        ("exact", "exactly", False),
    ],
)
def test_client_id_allowed(pattern: str | None, client_id: str, allowed: bool) -> None:
    assert client_id_allowed(pattern, client_id) is allowed
