"""Compacted-topic replicas (mqttq/cluster/replica.py): whatever the records, a process
applies exactly the other processes' records, in log order, never a marker; it is caught
up once its own marker was read; and a copy built from its own writes plus what it
applies equals the topic's last-write-wins state when processes write disjoint keys."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mqttq.cluster.replica import MARKER_PREFIX, ReplicaReader, new_marker, record_headers

WRITERS = ("me", "w1", "w2")

records = st.lists(
    st.tuples(
        st.sampled_from(WRITERS),
        st.sampled_from(["a", "b", "c", "d", "e", "f"]),
        st.one_of(st.none(), st.binary(min_size=1, max_size=4)),
        st.booleans(),  # a marker of that writer instead of a data record
    ),
    max_size=40,
)


@given(records, st.integers(0, 40))
def test_a_replica_applies_exactly_the_others_records(
    log: list[tuple[str, str, bytes | None, bool]], marker_at: int
) -> None:
    marker = new_marker()
    reader = ReplicaReader("me", marker)
    entries: list[tuple[bytes, bytes | None, list[tuple[str, bytes]]]] = []
    for writer, key, value, is_marker in log:
        name = new_marker() if is_marker else f"{writer}-{key}"  # disjoint keys per writer
        entries.append((name.encode(), value, record_headers("node", writer)))
    position = min(marker_at, len(entries))
    entries.insert(position, (marker.encode(), b"1", record_headers("node", "me")))

    copy: dict[str, bytes] = {}
    applied = []
    for key, value, headers in entries:
        writer = headers[1][1].decode()
        name = key.decode()
        if writer == "me" and not name.startswith(MARKER_PREFIX):
            # A process applies its own writes when it makes them.
            if value is None:
                copy.pop(name, None)
            else:
                copy[name] = value
        change = reader.read(key, value, headers)
        if change is not None:
            applied.append(change.key)
            if change.value is None:
                copy.pop(change.key, None)
            else:
                copy[change.key] = change.value
    expected_order = [
        key.decode()
        for key, _, headers in entries
        if headers[1][1] != b"me" and not key.startswith(MARKER_PREFIX.encode())
    ]
    assert applied == expected_order
    assert reader.caught_up

    last: dict[str, bytes] = {}
    for key, value, _ in entries:
        name = key.decode()
        if name.startswith(MARKER_PREFIX):
            continue
        if value is None:
            last.pop(name, None)
        else:
            last[name] = value
    assert copy == last
