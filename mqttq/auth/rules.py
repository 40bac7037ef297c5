"""ACL rules in the form of EMQX's acl.conf and Mosquitto's acl_file: an ordered list of
(permission, action, topic filter); the first rule that matches decides, and a request no
rule matches is denied.

A rule matches a PUBLISH when its filter matches the topic name, and a subscription when
its filter *covers* the requested filter (`acl.filter_covers`: every topic the
subscription can receive is matched by the rule; a `$share/<group>/` prefix is ignored).
So with `deny subscribe a/#` first, `a/b` and `a/+` are refused, while `#` is not
covered by that rule and goes on to the next one. `%c` and `%u` levels name the client
id and user name, as in the allow lists (`acl.expand_acl`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from mqttq.auth.acl import expand_acl, filter_covers
from mqttq.errors import ProtocolError
from mqttq.routing.topics import filter_matches, parse_shared, validate_topic_filter

__all__ = ["ACTIONS", "PERMISSIONS", "AclRule", "AclRules", "parse_rule", "rule_dict"]

PERMISSIONS: Final = ("allow", "deny")
ACTIONS: Final = ("publish", "subscribe", "all")
PUBLISH: Final = "publish"
SUBSCRIBE: Final = "subscribe"


@dataclass(frozen=True, slots=True)
class AclRule:
    """One rule: `permission` allow | deny, `action` publish | subscribe | all, `topic`
    a topic filter."""

    permission: str
    action: str
    topic: str

    def applies_to(self, action: str) -> bool:
        """True when the rule is about `action` (publish or subscribe)."""
        return self.action in (action, "all")


def parse_rule(raw: Mapping[str, object]) -> AclRule:
    """An AclRule from a TOML table; ValueError says what is wrong with it."""
    unknown = sorted(set(raw) - {"permission", "action", "topic"})
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} (a rule has permission, action, topic)")
    values: dict[str, str] = {}
    for key, choices in (("permission", PERMISSIONS), ("action", ACTIONS), ("topic", None)):
        value = raw.get(key)
        if not isinstance(value, str) or not value:
            raise ValueError(f"{key} must be a non-empty string")
        if choices is not None and value.lower() not in choices:
            raise ValueError(f"{key} must be one of {', '.join(choices)}, got {value!r}")
        values[key] = value.lower() if choices is not None else value
    try:
        validate_topic_filter(values["topic"])
    except ProtocolError as error:
        raise ValueError(
            f"topic {values['topic']!r} is not a valid topic filter: {error}"
        ) from None
    return AclRule(values["permission"], values["action"], values["topic"])


def rule_dict(rule: AclRule) -> dict[str, str]:
    """The rule as a JSON object / TOML table: the form `parse_rule` reads."""
    return {"permission": rule.permission, "action": rule.action, "topic": rule.topic}


class AclRules:
    """An ordered rule list, ready to decide publishes and subscriptions."""

    __slots__ = ("rules",)

    def __init__(self, rules: Iterable[AclRule]) -> None:
        self.rules = tuple(rules)

    def __repr__(self) -> str:
        return f"AclRules({list(self.rules)!r})"

    def expanded(self, client_id: str, username: str | None) -> AclRules:
        """The rules with `%c` / `%u` levels replaced; a rule whose value is missing or
        unsafe is dropped (as `expand_acl` drops an allow list's filter)."""
        kept = []
        for rule in self.rules:
            topics = expand_acl([rule.topic], client_id, username)
            if topics:
                kept.append(AclRule(rule.permission, rule.action, topics[0]))
        return AclRules(kept)

    def may_publish(self, topic: str) -> bool:
        """The permission of the first publish rule whose filter matches `topic`; False
        when none does."""
        for rule in self.rules:
            if rule.applies_to(PUBLISH) and filter_matches(rule.topic, topic):
                return rule.permission == "allow"
        return False

    def may_subscribe(self, topic_filter: str) -> bool:
        """The permission of the first subscribe rule whose filter covers `topic_filter`
        (its filter part for `$share/<group>/<filter>`); False when none does or the
        filter is invalid."""
        try:
            _group, plain = parse_shared(topic_filter)
        except ProtocolError:
            return False
        for rule in self.rules:
            if rule.applies_to(SUBSCRIBE) and filter_covers(rule.topic, plain):
                return rule.permission == "allow"
        return False
