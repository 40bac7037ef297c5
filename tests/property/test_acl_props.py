"""Properties of mqttq.auth.acl.filter_covers against the reference matcher.

`filter_covers(a, r)` promises: every topic name `r` matches, `a` matches. Filters and
topics are drawn from a small alphabet of levels (with an empty level and a `$` level, the
two corners of [MQTT-4.7]) so that collisions, and so counterexamples, are likely.
"""

from __future__ import annotations

import itertools
from functools import cache

from hypothesis import given, settings
from hypothesis import strategies as st

from mqttq.auth.acl import filter_covers
from mqttq.routing.topics import filter_matches

LITERALS = ("a", "b", "", "$s")
# Topic levels: the filters' literals plus a value no filter names (what '+' alone
# matches) and a '$' value no filter names.
TOPIC_LEVELS = (*LITERALS, "z", "$z")

_FAST = settings(max_examples=300, deadline=None)


@st.composite
def filters(draw: st.DrawFn, max_levels: int = 4) -> str:
    """A valid plain topic filter of 1..max_levels levels."""
    levels = draw(st.lists(st.sampled_from((*LITERALS, "+")), min_size=0, max_size=max_levels))
    if not levels or (len(levels) < max_levels and draw(st.booleans())):
        levels.append("#")
    text = "/".join(levels)
    return text if text else "#"  # a filter of one empty level is the invalid ""


@st.composite
def topics(draw: st.DrawFn) -> str:
    """A valid topic name (at least one level, not the empty string)."""
    levels = draw(st.lists(st.sampled_from(TOPIC_LEVELS), min_size=1, max_size=6))
    text = "/".join(levels)
    return text if text else "/"


@cache
def universe(depth: int) -> tuple[str, ...]:
    """Every topic name of 1..depth levels over TOPIC_LEVELS."""
    names = []
    for size in range(1, depth + 1):
        for levels in itertools.product(TOPIC_LEVELS, repeat=size):
            name = "/".join(levels)
            if name:
                names.append(name)
    return tuple(names)


def covers_by_brute_force(acl_filter: str, requested: str) -> bool:
    """Covering decided over every topic up to one level deeper than either filter: a
    topic deeper than that behaves like its prefix of that depth for both filters."""
    depth = max(acl_filter.count("/"), requested.count("/")) + 2
    return all(
        filter_matches(acl_filter, topic)
        for topic in universe(depth)
        if filter_matches(requested, topic)
    )


@_FAST
@given(filters(max_levels=3), filters(max_levels=3))
def test_covers_agrees_with_brute_force(acl_filter: str, requested: str) -> None:
    assert filter_covers(acl_filter, requested) == covers_by_brute_force(acl_filter, requested)


@_FAST
@given(filters(), filters(), st.lists(topics(), min_size=1, max_size=40))
def test_covered_filters_match_nothing_more(
    acl_filter: str, requested: str, probes: list[str]
) -> None:
    if filter_covers(acl_filter, requested):
        for topic in probes:
            if filter_matches(requested, topic):
                assert filter_matches(acl_filter, topic), topic


@_FAST
@given(filters(max_levels=6))
def test_every_filter_covers_itself(topic_filter: str) -> None:
    assert filter_covers(topic_filter, topic_filter)


@_FAST
@given(filters(), filters(), filters())
def test_covering_is_transitive(first: str, second: str, third: str) -> None:
    if filter_covers(first, second) and filter_covers(second, third):
        assert filter_covers(first, third)


@_FAST
@given(filters())
def test_hash_covers_everything_but_dollar_topics(requested: str) -> None:
    assert filter_covers("#", requested) is not requested.startswith("$")
