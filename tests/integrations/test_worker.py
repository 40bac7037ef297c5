"""The integration worker against a real HTTP receiver: order, retries while the sink is
down, dead letters for what it refuses, pause/resume, and a sink that cannot start."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

from mqttq.integrations.memory import MemoryBacklog, MemoryDeadLetters
from mqttq.integrations.record import Delivery
from mqttq.integrations.sink import Rejected
from mqttq.integrations.sinks.http import HttpSink, HttpSinkSettings
from mqttq.integrations.spec import DeliverySettings
from mqttq.integrations.worker import Backoff, IntegrationWorker
from tests.integrations.http_receivers import Receiver


def deliveries(count: int, start: int = 1) -> list[Delivery]:
    return [
        Delivery(
            topic=f"sensors/{seq % 3}",
            payload=json.dumps({"n": seq}).encode(),
            client_id="dev-1",
            timestamp_ms=1_700_000_000_000,
            seq=seq,
        )
        for seq in range(start, start + count)
    ]


def worker_for(
    url: str, backlog: MemoryBacklog, dead: MemoryDeadLetters, **table: Any
) -> IntegrationWorker:
    sink = HttpSink(HttpSinkSettings.from_table({"url": url, **table}, "integration[0]"), "hook")
    delivery = DeliverySettings(batch_size=10, linger_ms=0, retry_initial_ms=5, retry_max_ms=20)
    return IntegrationWorker("hook", sink, backlog, dead, delivery)


async def wait_until(predicate: Any, timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


def received_numbers(receiver: Receiver) -> list[int]:
    numbers: list[int] = []
    for request in receiver.received:
        if request.status >= 300:
            continue
        body = request.json()
        for item in body if isinstance(body, list) else [body]:
            numbers.append(json.loads(item["payload"])["n"])
    return numbers


def test_sink_down_then_back_loses_nothing_and_keeps_order() -> None:
    async def scenario() -> None:
        receiver = Receiver()
        await receiver.start()
        port = receiver.port
        await receiver.stop()  # the sink is down before the first message
        backlog = MemoryBacklog(deliveries(25))
        dead = MemoryDeadLetters()
        worker = worker_for(receiver.url(), backlog, dead, body="array")
        task = asyncio.create_task(worker.run())
        await wait_until(lambda: worker.stats.failed >= 3)
        assert worker.state == "retrying"
        assert backlog.settled == []
        assert "127.0.0.1" in worker.stats.last_error
        await receiver.start(port)
        await wait_until(lambda: len(backlog.settled) == 25)
        for seq_delivery in deliveries(5, start=26):
            backlog.add(seq_delivery)
        await wait_until(lambda: len(backlog.settled) == 30)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await receiver.stop()
        assert received_numbers(receiver) == list(range(1, 31))
        assert worker.stats.delivered == 30
        assert worker.stats.retried >= 10  # the first batch at least once more
        assert worker.stats.dead_lettered == 0
        assert dead.letters == []
        assert worker.state == "stopped"

    asyncio.run(scenario())


def test_a_poison_message_goes_to_the_dead_letters_and_the_rest_flow() -> None:
    async def scenario() -> None:
        def answer(body: bytes) -> int:
            return 422 if json.loads(json.loads(body)["payload"])["n"] == 4 else 200

        async with Receiver(answer=answer) as receiver:
            backlog = MemoryBacklog(deliveries(8))
            dead = MemoryDeadLetters()
            worker = worker_for(receiver.url(), backlog, dead)
            task = asyncio.create_task(worker.run())
            await wait_until(lambda: len(backlog.settled) == 8)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert received_numbers(receiver) == [1, 2, 3, 5, 6, 7, 8]
        ((name, rejected),) = dead.letters
        assert name == "hook"
        assert rejected.delivery.seq == 4
        assert "422" in rejected.reason
        assert (worker.stats.delivered, worker.stats.dead_lettered) == (7, 1)
        assert "422" in worker.stats.last_error

    asyncio.run(scenario())


def test_paused_worker_takes_nothing_until_resumed() -> None:
    async def scenario() -> None:
        async with Receiver() as receiver:
            backlog = MemoryBacklog()
            dead = MemoryDeadLetters()
            worker = worker_for(receiver.url(), backlog, dead)
            task = asyncio.create_task(worker.run())
            backlog.add(deliveries(1)[0])
            await wait_until(lambda: len(backlog.settled) == 1)
            worker.pause()
            for item in deliveries(3, start=2):
                backlog.add(item)
            await asyncio.sleep(0.2)
            assert worker.state == "paused"
            assert backlog.lag() == 3
            assert received_numbers(receiver) == [1]
            worker.resume()
            await wait_until(lambda: len(backlog.settled) == 4)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert received_numbers(receiver) == [1, 2, 3, 4]

    asyncio.run(scenario())


def test_a_sink_that_cannot_start_fails_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MQTTQ_TEST_UNSET_URL", raising=False)

    async def scenario() -> None:
        backlog = MemoryBacklog(deliveries(2))
        worker = worker_for("${MQTTQ_TEST_UNSET_URL}", backlog, MemoryDeadLetters())
        await asyncio.wait_for(worker.run(), 10)
        assert worker.state == "failed"
        assert "MQTTQ_TEST_UNSET_URL" in worker.stats.last_error
        assert backlog.lag() == 2  # nothing taken, nothing lost

    asyncio.run(scenario())


def test_backoff_doubles_to_its_ceiling_with_full_jitter() -> None:
    backoff = Backoff(0.1, 1.0, rand=lambda: 1.0)
    assert [backoff.next() for _ in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    backoff.reset()
    assert backoff.next() == 0.1
    assert Backoff(0.1, 1.0, rand=lambda: 0.0).next() == 0.001


def two_publishers(count: int) -> list[Delivery]:
    """`count` deliveries each of publishers "a" and "b", interleaved; `n` counts per
    publisher, `seq` across both."""
    return [
        Delivery(
            topic=f"sensors/{publisher}",
            payload=json.dumps({"n": n}).encode(),
            client_id=publisher,
            timestamp_ms=1_700_000_000_000,
            seq=2 * n + index,
        )
        for n in range(count)
        for index, publisher in enumerate("ab")
    ]


def arrived_by_publisher(receiver: Receiver) -> dict[str, list[int]]:
    """What each publisher's accepted requests carried, in arrival order."""
    out: dict[str, list[int]] = {}
    for request in receiver.received:
        if request.status < 300:
            for item in request.json():
                out.setdefault(item["client_id"], []).append(json.loads(item["payload"])["n"])
    return out


def test_a_worker_behind_sends_its_publishers_in_lanes_at_once() -> None:
    async def scenario() -> None:
        # Answers nothing until two requests wait at once: one request at a time never ends.
        async with Receiver(hold_until_in_flight=2) as receiver:
            backlog = MemoryBacklog(two_publishers(20))
            worker = worker_for(receiver.url(), backlog, MemoryDeadLetters(), body="array")
            assert worker.lanes == 4
            task = asyncio.create_task(worker.run())
            await wait_until(lambda: len(backlog.settled) == 40, timeout=10)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert receiver.max_in_flight == 2
        assert all(len(request.json()) <= 10 for request in receiver.received)  # batch_size
        for request in receiver.received:  # each request holds one publisher's deliveries
            assert len({item["client_id"] for item in request.json()}) == 1
        assert arrived_by_publisher(receiver) == {"a": list(range(20)), "b": list(range(20))}
        assert backlog.settled == two_publishers(20)
        assert worker.stats.delivered == 40

    asyncio.run(scenario())


def test_a_worker_a_little_behind_sends_as_many_requests_as_its_batch_fills() -> None:
    async def scenario() -> None:
        async with Receiver() as receiver:
            # 12 publishers, one delivery each, taken at once: more than one send of 10,
            # and sent as two requests (its publishers shared between two lanes), not four.
            backlog = MemoryBacklog(
                [
                    Delivery(topic="t", payload=b'{"n": 0}', client_id=f"dev-{n}", seq=n)
                    for n in range(12)
                ]
            )
            worker = worker_for(receiver.url(), backlog, MemoryDeadLetters(), body="array")
            assert worker.lanes == 4
            task = asyncio.create_task(worker.run())
            await wait_until(lambda: len(backlog.settled) == 12, timeout=10)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert sorted(len(request.json()) for request in receiver.received) == [6, 6]
        assert worker.stats.delivered == 12

    asyncio.run(scenario())


def test_a_failing_lane_settles_nothing_and_each_publishers_order_holds() -> None:
    async def scenario() -> None:
        b_down = True

        def answer(body: bytes) -> int:
            publishers = {item["client_id"] for item in json.loads(body)}
            return 503 if b_down and "b" in publishers else 200

        async with Receiver(answer=answer) as receiver:
            backlog = MemoryBacklog(two_publishers(20))
            dead = MemoryDeadLetters()
            worker = worker_for(receiver.url(), backlog, dead, body="array")
            task = asyncio.create_task(worker.run())
            # Lane "a" delivers both its batches; lane "b" keeps failing.
            await wait_until(
                lambda: worker.stats.failed >= 3 and len(arrived_by_publisher(receiver)) == 1
            )
            assert arrived_by_publisher(receiver) == {"a": list(range(20))}
            # Lane "a" goes on with what comes after (more than a batch: the worker is
            # behind), without waiting for lane "b".
            later = [
                Delivery(
                    topic="sensors/a",
                    payload=json.dumps({"n": n}).encode(),
                    client_id="a",
                    seq=20 + n,
                )
                for n in range(20, 35)
            ]
            for delivery in later:
                backlog.add(delivery)
            await wait_until(lambda: len(arrived_by_publisher(receiver)["a"]) == 35)
            assert backlog.settled == []  # nothing past the failure is settled
            assert worker.stats.delivered == 0
            assert worker.state == "retrying"
            b_down = False
            await wait_until(lambda: len(backlog.settled) == 55)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert arrived_by_publisher(receiver) == {"a": list(range(35)), "b": list(range(20))}
        assert backlog.settled == two_publishers(20) + later
        assert (worker.stats.delivered, worker.stats.dead_lettered) == (55, 0)
        assert worker.stats.retried >= 10  # b's first batch at least once more
        assert dead.letters == []

    asyncio.run(scenario())


def test_a_lane_refused_for_good_goes_to_the_dead_letters_and_the_rest_is_settled() -> None:
    async def scenario() -> None:
        def answer(body: bytes) -> int:
            publishers = {item["client_id"] for item in json.loads(body)}
            return 400 if "b" in publishers else 200

        async with Receiver(answer=answer) as receiver:
            backlog = MemoryBacklog(two_publishers(4))
            dead = MemoryDeadLetters()
            worker = worker_for(receiver.url(), backlog, dead, body="array", max_connections=2)
            worker.delivery = DeliverySettings(batch_size=4, linger_ms=0, max_in_flight=10)
            task = asyncio.create_task(worker.run())
            await wait_until(lambda: len(backlog.settled) == 8)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert arrived_by_publisher(receiver) == {"a": list(range(4))}
        assert [rejected.delivery.client_id for _, rejected in dead.letters] == ["b"] * 4
        assert [json.loads(r.delivery.payload)["n"] for _, r in dead.letters] == list(range(4))
        assert (worker.stats.delivered, worker.stats.dead_lettered) == (4, 4)

    asyncio.run(scenario())


def test_a_batch_that_fits_one_request_is_sent_as_one() -> None:
    async def scenario() -> None:
        async with Receiver() as receiver:
            backlog = MemoryBacklog(two_publishers(5))
            worker = worker_for(receiver.url(), backlog, MemoryDeadLetters(), body="array")
            task = asyncio.create_task(worker.run())
            await wait_until(lambda: len(backlog.settled) == 10)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert [len(request.json()) for request in receiver.received] == [10]

    asyncio.run(scenario())


def test_one_connection_means_one_lane() -> None:
    backlog = MemoryBacklog()
    worker = worker_for("http://127.0.0.1:9/x", backlog, MemoryDeadLetters(), max_connections=1)
    assert worker.lanes == 1


def test_a_dead_letter_place_that_fails_ends_a_run_in_lanes_with_its_error() -> None:
    class Broken(MemoryDeadLetters):
        async def put(self, integration: str, rejected: Sequence[Rejected]) -> None:
            raise OSError("dead letters unavailable")

    async def scenario() -> None:
        async with Receiver(default=400) as receiver:
            backlog = MemoryBacklog(two_publishers(20))
            worker = worker_for(receiver.url(), backlog, Broken(), body="array")
            with pytest.raises(OSError, match="dead letters unavailable"):
                await asyncio.wait_for(worker.run(), 10)
        assert backlog.settled == []
        assert worker.state == "stopped"

    asyncio.run(scenario())


def test_a_publisher_sent_in_one_batch_stays_in_its_lane_while_that_is_busy() -> None:
    async def scenario() -> None:
        async with Receiver(hold=True) as receiver:
            backlog = MemoryBacklog(deliveries(5))  # fits one batch: sent as one, lane 0
            worker = worker_for(receiver.url(), backlog, MemoryDeadLetters(), body="array")
            task = asyncio.create_task(worker.run())
            await wait_until(lambda: receiver._in_flight == 1)
            for delivery in deliveries(5, start=6):  # taken while lane 0 waits for its answer
                backlog.add(delivery)
            await wait_until(lambda: not backlog.waiting)
            await asyncio.sleep(0.2)  # a second lane would have sent them by now
            assert receiver._in_flight == 1
            receiver.release()
            await wait_until(lambda: len(backlog.settled) == 10)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert receiver.max_in_flight == 1
        assert received_numbers(receiver) == list(range(1, 11))

    asyncio.run(scenario())


def test_a_worker_keeping_up_sends_in_the_backlogs_order_across_publishers() -> None:
    async def scenario() -> None:
        async with Receiver(hold=True) as receiver:
            backlog = MemoryBacklog(two_publishers(2))  # a, b, a, b: one batch, lane 0
            worker = worker_for(receiver.url(), backlog, MemoryDeadLetters(), body="array")
            task = asyncio.create_task(worker.run())
            await wait_until(lambda: receiver._in_flight == 1)
            later = [
                Delivery(topic="sensors/c", payload=b'{"n": 0}', client_id="c", seq=10 + n)
                for n in range(3)
            ]
            for delivery in later:  # a new publisher, one batch: it waits for the first
                backlog.add(delivery)
            await wait_until(lambda: not backlog.waiting)
            await asyncio.sleep(0.2)  # another lane would have sent it by now
            assert receiver._in_flight == 1
            receiver.release()
            await wait_until(lambda: len(backlog.settled) == 7)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert receiver.max_in_flight == 1
        assert [[item["client_id"] for item in r.json()] for r in receiver.received] == [
            ["a", "b", "a", "b"],
            ["c", "c", "c"],
        ]

    asyncio.run(scenario())
