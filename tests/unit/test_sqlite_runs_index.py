"""The writer's in-memory view of a client's runs (`sqlite_runs.ClientQueue`)."""

from __future__ import annotations

from mqttq.storage.sqlite.runs import ClientQueue


def _queue_of_single_runs(count: int) -> ClientQueue:
    queue = ClientQueue(count, count)
    for serial in range(1, count + 1):
        queue.serial_of[serial] = serial  # packet id = serial here
        queue.starts.append(serial)
        queue.live[serial] = 1
    return queue


def test_a_drained_backlog_of_one_entry_runs_keeps_its_starts_small() -> None:
    """Runs emptied oldest first leave `starts` in bulk: it never holds more than about
    twice the runs still live, and every live serial still finds its own run."""
    queue = _queue_of_single_runs(10_000)
    for serial in range(1, 9_990):
        del queue.serial_of[serial]
        queue.forget_runs([queue.run_of(serial)])
        assert len(queue.starts) <= 2 * len(queue.live) + 17
    assert list(queue.live) == list(range(9_990, 10_001))
    assert [queue.run_of(s) for s in range(9_990, 10_001)] == list(range(9_990, 10_001))


def test_run_of_finds_the_run_of_a_live_serial_past_emptied_runs() -> None:
    queue = ClientQueue(10, 10)
    for first, serials in ((1, (1, 2, 3)), (4, (4,)), (5, (5, 6)), (7, (7, 8, 9, 10))):
        queue.starts.append(first)
        queue.live[first] = len(serials)
        for serial in serials:
            queue.serial_of[serial] = serial
    queue.forget_runs([4])  # still in `starts` (too few gone to compact)
    queue.forget_runs([5])
    assert queue.starts == [1, 4, 5, 7]
    assert [queue.run_of(s) for s in (1, 3, 7, 10)] == [1, 1, 7, 7]
    assert list(queue.live) == [1, 7]
