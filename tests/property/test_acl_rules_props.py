"""Properties of mqttq.auth.rules.AclRules (`[[auth.anonymous_acl]]`): the first rule
that matches decides, a request no rule matches is denied, and rules after the deciding
one never change the answer. Checked against a reference written here from the
promise: the brute-force matcher and coverer of test_acl_props."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mqttq.auth.rules import ACTIONS, PERMISSIONS, AclRule, AclRules
from mqttq.routing.topics import filter_matches
from tests.property.test_acl_props import covers_by_brute_force, filters, topics

_FAST = settings(max_examples=300, deadline=None)


@st.composite
def rules(draw: st.DrawFn, max_levels: int = 3) -> AclRule:
    return AclRule(
        draw(st.sampled_from(PERMISSIONS)),
        draw(st.sampled_from(ACTIONS)),
        draw(filters(max_levels=max_levels)),
    )


def reference(rule_list: list[AclRule], action: str, matches: object) -> bool:
    """The permission of the first rule for `action` that `matches(rule)`; deny else."""
    for rule in rule_list:
        if rule.action in (action, "all") and matches(rule):  # type: ignore[operator]
            return rule.permission == "allow"
    return False


@_FAST
@given(st.lists(rules(), max_size=6), topics())
def test_publish_is_decided_by_the_first_matching_rule(
    rule_list: list[AclRule], topic: str
) -> None:
    expected = reference(rule_list, "publish", lambda rule: filter_matches(rule.topic, topic))
    assert AclRules(rule_list).may_publish(topic) is expected


@_FAST
@given(st.lists(rules(), max_size=5), filters(max_levels=3))
def test_subscribe_is_decided_by_the_first_covering_rule(
    rule_list: list[AclRule], requested: str
) -> None:
    expected = reference(
        rule_list, "subscribe", lambda rule: covers_by_brute_force(rule.topic, requested)
    )
    assert AclRules(rule_list).may_subscribe(requested) is expected
    # A shared subscription is decided on its filter part.
    assert AclRules(rule_list).may_subscribe(f"$share/g/{requested}") is expected


@_FAST
@given(st.lists(rules(), max_size=4), rules(), st.lists(rules(), max_size=4), topics())
def test_rules_after_the_deciding_one_do_not_matter(
    before: list[AclRule], decider: AclRule, after: list[AclRule], topic: str
) -> None:
    head = AclRules([*before, decider])
    whole = AclRules([*before, decider, *after])
    if any(filter_matches(r.topic, topic) and r.action != "subscribe" for r in (*before, decider)):
        assert whole.may_publish(topic) is head.may_publish(topic)


@_FAST
@given(topics(), filters())
def test_no_rule_denies_and_allow_all_allows_but_dollar_topics(topic: str, requested: str) -> None:
    assert not AclRules([]).may_publish(topic)
    assert not AclRules([]).may_subscribe(requested)
    everything = AclRules([AclRule("allow", "all", "#")])
    assert everything.may_publish(topic) is not topic.startswith("$")
    assert everything.may_subscribe(requested) is not requested.startswith("$")


@_FAST
@given(topics(), filters())
def test_a_rule_for_one_action_leaves_the_other_alone(topic: str, requested: str) -> None:
    deny_publish = AclRules([AclRule("deny", "publish", "#"), AclRule("allow", "all", "#")])
    deny_subscribe = AclRules([AclRule("deny", "subscribe", "#"), AclRule("allow", "all", "#")])
    assert not deny_publish.may_publish(topic)
    assert deny_publish.may_subscribe(requested) is not requested.startswith("$")
    assert not deny_subscribe.may_subscribe(requested)
    assert deny_subscribe.may_publish(topic) is not topic.startswith("$")


def test_the_issue_example() -> None:
    example = AclRules(
        [AclRule("deny", "subscribe", "test/nosubscribe"), AclRule("allow", "all", "#")]
    )
    assert not example.may_subscribe("test/nosubscribe")
    assert example.may_subscribe("test/other")
    assert example.may_publish("test/nosubscribe")


def test_client_id_levels_are_expanded_and_unsafe_values_drop_the_rule() -> None:
    own = AclRules([AclRule("allow", "all", "devices/%c/#"), AclRule("deny", "all", "#")])
    assert own.expanded("dev1", None).may_publish("devices/dev1/t")
    assert not own.expanded("dev1", None).may_publish("devices/dev2/t")
    # A client id with '+' would widen the filter: the rule is dropped, so: denied.
    assert not own.expanded("a+b", None).may_publish("devices/a+b/t")
