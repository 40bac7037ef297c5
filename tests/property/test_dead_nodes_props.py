"""Who cleans up after gone nodes, and which sessions (mqttq/cluster/dead_nodes.py): every
node reading the same index agrees on the one that cleans up, and the sessions concerned
are exactly those held by a gone node, disconnected at the right time."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mqttq.cluster.dead_nodes import gone_candidates, orphans, reaper
from mqttq.cluster.nodes import TTL_INTERVALS
from mqttq.cluster.records import SessionInfo

INTERVAL_MS = 1000
NOW = 10_000.0
NODES = [f"node-{n}" for n in range(5)]

ages = st.floats(0.0, 10.0, allow_nan=False)
"""Seconds since a node's last heartbeat."""
indexes = st.dictionaries(st.sampled_from(NODES), ages, max_size=5)


@given(indexes)
def test_every_reader_of_one_index_agrees_on_the_reaper(index: dict[str, float]) -> None:
    entries = [(node_id, NOW - age) for node_id, age in index.items()]
    choices = set()
    for own, own_age in index.items():
        alive, candidates = gone_candidates(entries, INTERVAL_MS, NOW, own=own)
        if own_age * 1000 > TTL_INTERVALS * INTERVAL_MS:
            continue  # a node that cannot beat sees itself alive: it is not a reader here
        assert own in alive and own not in candidates
        assert alive.isdisjoint(candidates)
        assert alive | set(candidates) == set(index)
        for heartbeat_at in candidates.values():
            assert (NOW - heartbeat_at) * 1000 > TTL_INTERVALS * INTERVAL_MS
        choices.add(reaper(alive))
    assert len(choices) <= 1
    if choices:
        (chosen,) = choices
        assert chosen == min(
            n for n, age in index.items() if age * 1000 <= TTL_INTERVALS * INTERVAL_MS
        )


def test_reaper_of_nobody_is_none() -> None:
    assert reaper([]) is None
    assert reaper(["node-b", "node-a"]) == "node-a"


sessions = st.builds(
    SessionInfo,
    node=st.one_of(st.none(), st.sampled_from(NODES)),
    last_node=st.sampled_from(NODES),
    protocol_level=st.just(5),
    expiry=st.sampled_from([0, 2, 3600]),
    client_type=st.just("DEVICE"),
    tenant=st.just("default"),
    disconnected_at=st.one_of(st.none(), st.floats(0.0, NOW, allow_nan=False)),
    epoch=st.text("abc", max_size=3),
)


@given(
    st.dictionaries(st.text("xyz", min_size=1, max_size=4), sessions, max_size=8),
    st.dictionaries(st.sampled_from(NODES), st.floats(0.0, NOW, allow_nan=False), max_size=3),
)
def test_orphans_are_the_sessions_held_by_gone_nodes(
    directory: dict[str, SessionInfo], gone: dict[str, float]
) -> None:
    found = {orphan.client_id: orphan for orphan in orphans(directory, gone)}
    for client_id, info in directory.items():
        holder = info.node if info.node is not None else info.last_node
        assert (client_id in found) == (holder in gone)
        if client_id not in found:
            continue
        orphan = found[client_id]
        assert orphan.info == info
        if info.node is None and info.disconnected_at is not None:
            assert orphan.disconnected_at == info.disconnected_at  # offline already
        else:
            assert orphan.disconnected_at == gone[holder]  # the last heartbeat


def test_a_session_connected_to_a_live_node_is_no_orphan() -> None:
    """The client left the dead node for node-2 (its last node is still the dead one's
    in no record: a connect event moved it): nothing to clean up."""
    moved = SessionInfo("node-2", "node-2", 5, 3600, "DEVICE", "default", None, "r2")
    offline_on_dead = SessionInfo(None, "node-3", 5, 3600, "DEVICE", "default", 50.0, "r1")
    found = orphans({"moved": moved, "left": offline_on_dead}, {"node-3": 70.0})
    assert [(o.client_id, o.disconnected_at) for o in found] == [("left", 50.0)]
