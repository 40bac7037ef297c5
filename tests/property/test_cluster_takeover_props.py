"""Racing CONNECTs (mqttq/cluster/takeover.py): whatever the interleaving of connect
events in a client's partition, every node reading it in order ends with exactly one
connection of the client, the one whose event came last."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mqttq.cluster.takeover import ConnectOrder, Verdict

# A schedule: a list of node numbers, each one a CONNECT made by that node. A node
# registers its request when it writes the event; the partition holds them in the order
# of the schedule; each node then reads the whole partition.


@given(st.lists(st.integers(0, 2), min_size=1, max_size=12), st.integers(0, 2))
def test_the_last_event_wins_on_every_node(schedule: list[int], lag_node: int) -> None:
    nodes = [ConnectOrder() for _ in range(3)]
    events = [(node, f"r{i}") for i, node in enumerate(schedule)]
    kicked: list[str] = []
    connected: dict[str, int] = {}
    # Each node reads each event after its own registration of it, but a node may be
    # slow to read: `lag_node` reads only once every event is written.
    read_upto = [0, 0, 0]

    def catch_up(n: int, upto: int) -> None:
        for node, request in events[read_upto[n] : upto]:
            verdict = nodes[n].read("c", request)
            if verdict is Verdict.OWN:
                assert node == n
                connected[request] = n
            elif verdict is Verdict.TAKEN_OVER:
                kicked.append(n_request[n])
        read_upto[n] = upto

    n_request: dict[int, str] = {}
    for i, (node, request) in enumerate(events):
        # The node's earlier connection is replaced locally (the broker kicks it itself).
        previous = n_request.get(node)
        if previous is not None and previous in connected:
            kicked.append(previous)
        nodes[node].register("c", request)
        n_request[node] = request
        for n in range(3):
            if n != lag_node:
                catch_up(n, i + 1)
    for n in range(3):
        catch_up(n, len(events))
    alive = [request for request in connected if request not in kicked]
    assert alive == [events[-1][1]]
    holders = [n for n in range(3) if nodes[n].holds("c") is not None]
    assert holders == [events[-1][0]]
