"""`mqttq bench p2p --node-ports`: which node each client of a pair connects to."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqttq.bench.options import BenchError, BenchOptions


@given(st.lists(st.integers(1, 65535), min_size=1, max_size=5), st.integers(0, 1000))
def test_pairs_spread_over_the_nodes(ports: list[int], index: int) -> None:
    same = BenchOptions(node_ports=tuple(ports))
    cross = BenchOptions(node_ports=tuple(ports), cross_nodes=True)
    node = ports[index % len(ports)]
    assert same.port_for(index, subscriber=False) == node == same.port_for(index, subscriber=True)
    assert cross.port_for(index, subscriber=False) == node
    assert cross.port_for(index, subscriber=True) == ports[(index + 1) % len(ports)]


def test_without_node_ports_every_client_uses_port() -> None:
    options = BenchOptions(port=1234, cross_nodes=True)
    assert options.port_for(7, subscriber=True) == options.port_for(7, subscriber=False) == 1234
    with pytest.raises(BenchError, match="--node-ports"):
        BenchOptions(node_ports=(0,)).validate()
