"""IntegrationManager over a real store (a SQLite file; a real PostgreSQL for two nodes),
the memory runtime and a real HTTP receiver: live create/update/pause/resume/remove, a bad
table refused by key, a restart bringing integrations back, config tables replacing stored
ones, and changes made elsewhere (another node, the CLI on the same file) followed."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from mqttq.errors import ConfigError
from mqttq.integrations.manager import (
    IntegrationExists,
    IntegrationManager,
    StoredIntegration,
    UnknownIntegration,
)
from mqttq.integrations.memory import MemoryRuntime
from mqttq.integrations.record import Delivery
from mqttq.integrations.stores.postgres import PostgresIntegrationStore
from mqttq.integrations.stores.sqlite import SqliteIntegrationStore
from tests.integrations.http_receivers import Receiver

SECRET = "s3cr3t-token"


@pytest.fixture(autouse=True)
def hook_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_TOKEN", SECRET)


def hook(receiver: Receiver, name: str = "hook", **extra: Any) -> dict[str, Any]:
    """An http integration table posting one envelope per message to `receiver`."""
    return {
        "name": name,
        "type": "http",
        "filters": ["sensors/#"],
        "url": receiver.url(f"/{name}"),
        "headers": {"Authorization": "Bearer ${HOOK_TOKEN}"},
        "linger_ms": 0,
        "retry_initial_ms": 5,
        "retry_max_ms": 20,
        **extra,
    }


def message(n: int) -> Delivery:
    return Delivery(
        topic=f"sensors/{n}",
        payload=json.dumps({"n": n}).encode(),
        client_id="dev-1",
        timestamp_ms=1_700_000_000_000,
        seq=n,
    )


def numbers(receiver: Receiver, path: str = "/hook") -> list[int]:
    """The `n` of every message `receiver` accepted on `path`, in arrival order."""
    return [
        json.loads(request.json()["payload"])["n"]
        for request in receiver.received
        if request.path == path and request.status < 300
    ]


async def wait_until(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    """Until `predicate()` (the timeout guards against a hang; it asserts no speed)."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def sqlite_store(path: Path) -> AsyncIterator[SqliteIntegrationStore]:
    store = SqliteIntegrationStore(path, poll_interval=0.02)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def running(
    manager: IntegrationManager, configured: list[dict[str, Any]] | None = None
) -> AsyncIterator[IntegrationManager]:
    await manager.start(configured or ())
    try:
        yield manager
    finally:
        await manager.stop()


@contextlib.asynccontextmanager
async def following(manager: IntegrationManager, feed: AsyncIterator[str]) -> AsyncIterator[None]:
    """`manager.follow(feed)` in a task for the duration."""
    task = asyncio.create_task(manager.follow(feed))
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_create_delivers_what_enters_its_backlog_with_the_secret_expanded(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        runtime = MemoryRuntime()
        async with (
            Receiver() as receiver,
            sqlite_store(tmp_path / "auth.db") as store,
            running(IntegrationManager(store, runtime)) as manager,
        ):
            status = await manager.create(hook(receiver))
            assert status["state"] in ("starting", "running")
            assert status["headers"] == {"Authorization": "***"}
            assert status["origin"] == "api"
            runtime.backlogs["hook"].add(message(1))
            await wait_until(lambda: numbers(receiver) == [1])
            assert receiver.received[0].headers["Authorization"] == f"Bearer {SECRET}"
            assert receiver.received[0].json()["topic"] == "sensors/1"
            stored = await store.load()
            assert [item.name for item in stored] == ["hook"]
            assert stored[0].table["headers"] == {"Authorization": "Bearer ${HOOK_TOKEN}"}
            assert manager.status("hook")["delivered"] == 1
            with pytest.raises(IntegrationExists):
                await manager.create(hook(receiver))

    asyncio.run(scenario())


def test_update_keeps_the_backlog_and_a_masked_secret_keeps_its_stored_value(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        runtime = MemoryRuntime()
        async with (
            Receiver() as receiver,
            sqlite_store(tmp_path / "auth.db") as store,
            running(IntegrationManager(store, runtime)) as manager,
        ):
            await manager.create(hook(receiver))
            await manager.pause("hook")
            backlog = runtime.backlogs["hook"]
            backlog.add(message(1))
            backlog.add(message(2))
            shown = manager.status("hook")
            assert shown["headers"] == {"Authorization": "***"}
            status = await manager.update(
                "hook",
                {
                    "headers": shown["headers"],  # sent back masked, as a client would
                    "filters": ["sensors/#", "alarms/#"],
                    "url": receiver.url("/changed"),
                },
            )
            assert status["filters"] == ["sensors/#", "alarms/#"]
            assert status["state"] == "paused"  # an update keeps the paused flag
            assert runtime.backlogs["hook"] is backlog
            assert backlog.lag() == 2
            assert receiver.received == []
            await manager.resume("hook")
            await wait_until(lambda: numbers(receiver, "/changed") == [1, 2])
            assert {r.headers["Authorization"] for r in receiver.received} == {f"Bearer {SECRET}"}
            [stored] = await store.load()
            assert stored.table["headers"] == {"Authorization": "Bearer ${HOOK_TOKEN}"}
            assert stored.table["filters"] == ["sensors/#", "alarms/#"]

    asyncio.run(scenario())


def test_pause_holds_deliveries_in_the_backlog_and_resume_sends_them(tmp_path: Path) -> None:
    async def scenario() -> None:
        runtime = MemoryRuntime()
        async with (
            Receiver() as receiver,
            sqlite_store(tmp_path / "auth.db") as store,
            running(IntegrationManager(store, runtime)) as manager,
        ):
            await manager.create(hook(receiver))
            runtime.backlogs["hook"].add(message(1))
            await wait_until(lambda: numbers(receiver) == [1])
            status = await manager.pause("hook")
            assert status["state"] == "paused"
            assert [item.paused for item in await store.load()] == [True]
            runtime.backlogs["hook"].add(message(2))
            runtime.backlogs["hook"].add(message(3))
            assert manager.status("hook")["lag"] == 2
            assert numbers(receiver) == [1]
            status = await manager.resume("hook")
            assert status["state"] != "paused"
            assert [item.paused for item in await store.load()] == [False]
            await wait_until(lambda: numbers(receiver) == [1, 2, 3])
            await wait_until(lambda: manager.status("hook")["lag"] == 0)

    asyncio.run(scenario())


def test_remove_stops_it_and_forgets_its_backlog(tmp_path: Path) -> None:
    async def scenario() -> None:
        runtime = MemoryRuntime()
        async with (
            Receiver() as receiver,
            sqlite_store(tmp_path / "auth.db") as store,
            running(IntegrationManager(store, runtime)) as manager,
        ):
            await manager.create(hook(receiver))
            await manager.pause("hook")
            runtime.backlogs["hook"].add(message(1))
            await manager.remove("hook")
            assert "hook" not in runtime.backlogs
            assert "hook" not in runtime.attached
            assert manager.names() == []
            assert await store.load() == []
            with pytest.raises(UnknownIntegration):
                manager.status("hook")
            with pytest.raises(UnknownIntegration):
                await manager.remove("hook")
            status = await manager.create(hook(receiver))  # the name is free again
            assert status["lag"] == 0
            runtime.backlogs["hook"].add(message(2))
            await wait_until(lambda: numbers(receiver) == [2])

    asyncio.run(scenario())


def test_a_bad_table_is_refused_by_key_and_the_others_keep_running(tmp_path: Path) -> None:
    async def scenario() -> None:
        runtime = MemoryRuntime()
        async with (
            Receiver() as receiver,
            sqlite_store(tmp_path / "auth.db") as store,
            running(IntegrationManager(store, runtime)) as manager,
        ):
            await manager.create(hook(receiver))
            with pytest.raises(ConfigError) as refused:
                await manager.create({**hook(receiver, "other"), "url": "ftp://127.0.0.1/x"})
            assert refused.value.key == "integration.url"
            with pytest.raises(ConfigError) as refused:
                await manager.create({**hook(receiver, "other"), "filters": ["a/#/b"]})
            assert refused.value.key == "integration.filters"
            with pytest.raises(ConfigError) as refused:
                await manager.update("hook", {"batch_size": 0})
            assert refused.value.key == "integration.batch_size"
            assert manager.names() == ["hook"]
            [stored] = await store.load()
            assert stored.table == hook(receiver)
            runtime.backlogs["hook"].add(message(1))
            await wait_until(lambda: numbers(receiver) == [1])
            assert manager.status("hook")["batch_size"] == 100

    asyncio.run(scenario())


def test_a_new_manager_on_the_same_store_brings_them_back_with_paused_state(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        runtime = MemoryRuntime()  # the broker's stored backlogs outlive a manager
        async with Receiver() as receiver:
            async with (
                sqlite_store(tmp_path / "auth.db") as store,
                running(IntegrationManager(store, runtime)) as manager,
            ):
                await manager.create(hook(receiver))
                await manager.create(hook(receiver, "quiet"))
                await manager.pause("quiet")
            runtime.backlogs["hook"].add(message(1))  # arrives while no manager runs
            runtime.backlogs["quiet"].add(message(2))
            async with (
                sqlite_store(tmp_path / "auth.db") as store,
                running(IntegrationManager(store, runtime)) as manager,
            ):
                assert manager.names() == ["hook", "quiet"]
                assert manager.status("quiet")["state"] == "paused"
                await wait_until(lambda: numbers(receiver) == [1])
                assert manager.status("quiet")["lag"] == 1
                await manager.resume("quiet")
                await wait_until(lambda: numbers(receiver, "/quiet") == [2])

    asyncio.run(scenario())


def test_config_tables_replace_stored_ones_of_the_same_name(tmp_path: Path) -> None:
    async def scenario() -> None:
        runtime = MemoryRuntime()
        async with Receiver() as receiver:
            async with sqlite_store(tmp_path / "auth.db") as store:
                await store.save(StoredIntegration("hook", hook(receiver), paused=True))
                await store.save(StoredIntegration("kept", hook(receiver, "kept")))
            configured = [hook(receiver, url=receiver.url("/from-config"))]
            async with (
                sqlite_store(tmp_path / "auth.db") as store,
                running(IntegrationManager(store, runtime), configured) as manager,
            ):
                assert manager.names() == ["hook", "kept"]
                status = manager.status("hook")
                assert status["url"] == receiver.url("/from-config")
                assert status["origin"] == "config"
                assert status["state"] == "paused"  # the paused flag outlives the table
                assert manager.status("kept")["origin"] == "api"
                stored = {item.name: item for item in await store.load()}
                assert stored["hook"].table == configured[0]
                assert stored["hook"].origin == "config"
                await manager.resume("hook")
                runtime.backlogs["hook"].add(message(1))
                await wait_until(lambda: numbers(receiver, "/from-config") == [1])

    asyncio.run(scenario())


def test_the_cli_writing_the_file_while_the_broker_runs_is_followed(tmp_path: Path) -> None:
    """Another process (here a second store on the same file, as `mqttq integration
    --data-dir` is) creates, pauses, changes and deletes; the running manager follows."""

    async def scenario() -> None:
        runtime = MemoryRuntime()
        path = tmp_path / "auth.db"
        async with (
            Receiver() as receiver,
            sqlite_store(path) as store,
            sqlite_store(path) as cli,
            running(IntegrationManager(store, runtime)) as manager,
            following(manager, store.watch()),
        ):
            await cli.save(StoredIntegration("hook", hook(receiver)))
            await wait_until(lambda: manager.names() == ["hook"])
            runtime.backlogs["hook"].add(message(1))
            await wait_until(lambda: numbers(receiver) == [1])
            await cli.save(StoredIntegration("hook", hook(receiver), paused=True))
            await wait_until(lambda: manager.status("hook")["state"] == "paused")
            backlog = runtime.backlogs["hook"]
            backlog.add(message(2))
            changed = hook(receiver, url=receiver.url("/changed"))
            await cli.save(StoredIntegration("hook", changed))
            await wait_until(lambda: manager.status("hook")["url"] == receiver.url("/changed"))
            assert runtime.backlogs["hook"] is backlog  # restarted, backlog kept
            await wait_until(lambda: numbers(receiver, "/changed") == [2])
            await cli.delete("hook")
            await wait_until(lambda: manager.names() == [])
            assert "hook" not in runtime.backlogs

    asyncio.run(scenario())


def test_a_stored_table_that_no_longer_parses_leaves_the_running_one(tmp_path: Path) -> None:
    async def scenario() -> None:
        runtime = MemoryRuntime()
        path = tmp_path / "auth.db"
        async with (
            Receiver() as receiver,
            sqlite_store(path) as store,
            sqlite_store(path) as cli,
            running(IntegrationManager(store, runtime)) as manager,
        ):
            await manager.create(hook(receiver))
            await cli.save(StoredIntegration("hook", {**hook(receiver), "type": "carrier-pigeon"}))
            await cli.save(StoredIntegration("broken", {"name": "broken"}))
            await manager.sync("hook")
            await manager.sync_all()
            assert manager.names() == ["hook"]
            assert manager.status("hook")["type"] == "http"
            runtime.backlogs["hook"].add(message(1))
            await wait_until(lambda: numbers(receiver) == [1])

    asyncio.run(scenario())


def test_sync_of_an_unchanged_integration_changes_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        runtime = MemoryRuntime()
        async with (
            Receiver() as receiver,
            sqlite_store(tmp_path / "auth.db") as store,
            running(IntegrationManager(store, runtime)) as manager,
        ):
            await manager.create(hook(receiver))
            runtime.backlogs["hook"].add(message(1))
            await wait_until(lambda: numbers(receiver) == [1])
            await manager.sync("hook")
            await manager.sync_all()
            # Not restarted: its counters go on from where they were.
            assert manager.status("hook")["delivered"] == 1
            await manager.sync("never-heard-of")
            assert manager.names() == ["hook"]

    asyncio.run(scenario())


def test_two_nodes_on_one_postgres_follow_each_others_changes(postgres_url: str) -> None:
    async def scenario() -> None:
        runtime_a, runtime_b = MemoryRuntime(), MemoryRuntime()
        store_a = PostgresIntegrationStore(postgres_url)
        store_b = PostgresIntegrationStore(postgres_url)
        await store_a.open()
        await store_b.open()
        try:
            async with (
                Receiver() as receiver,
                running(IntegrationManager(store_a, runtime_a)) as node_a,
                running(IntegrationManager(store_b, runtime_b)) as node_b,
            ):
                # Created after B loaded and before it listens: the feed's RESYNC finds it.
                await node_a.create(hook(receiver, "early"))
                async with following(node_b, store_b.watch()), following(node_a, store_a.watch()):
                    await wait_until(lambda: node_b.names() == ["early"])
                    await node_a.create(hook(receiver))
                    await wait_until(lambda: node_b.names() == ["early", "hook"])
                    runtime_b.backlogs["hook"].add(message(1))
                    await wait_until(lambda: numbers(receiver) == [1])
                    await node_a.pause("hook")
                    await wait_until(lambda: node_b.status("hook")["state"] == "paused")
                    backlog = runtime_b.backlogs["hook"]
                    backlog.add(message(2))
                    await node_a.update("hook", {"url": receiver.url("/changed")})
                    await wait_until(
                        lambda: node_b.status("hook")["url"] == receiver.url("/changed")
                    )
                    assert node_b.status("hook")["state"] == "paused"
                    assert runtime_b.backlogs["hook"] is backlog
                    await node_b.resume("hook")  # the other way round
                    await wait_until(lambda: node_a.status("hook")["state"] != "paused")
                    await wait_until(lambda: numbers(receiver, "/changed") == [2])
                    await node_b.remove("hook")
                    await wait_until(lambda: node_a.names() == ["early"])
                    assert "hook" not in runtime_a.backlogs
                    assert [item.name for item in await store_a.load()] == ["early"]
        finally:
            await store_a.close()
            await store_b.close()

    asyncio.run(scenario())


def test_follow_logs_a_change_it_cannot_apply_and_applies_the_next(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        runtime = MemoryRuntime()
        path = tmp_path / "auth.db"
        store = SqliteIntegrationStore(path)
        await store.open()
        async with Receiver() as receiver, sqlite_store(path) as cli:
            manager = IntegrationManager(store, runtime)
            await manager.start()

            async def feed() -> AsyncIterator[str]:
                await cli.save(StoredIntegration("hook", hook(receiver)))
                await store.close()  # the store cannot be read for this change
                yield "hook"
                await store.open()
                yield "hook"

            await manager.follow(feed())  # returns when the feed ends
            try:
                assert manager.names() == ["hook"]
                runtime.backlogs["hook"].add(message(1))
                await wait_until(lambda: numbers(receiver) == [1])
            finally:
                await manager.stop()
                await store.close()

    asyncio.run(scenario())
    assert "cannot apply a change of hook" in caplog.text
    assert "is not open" in caplog.text


def test_counts_go_on_across_a_change(tmp_path: Path) -> None:
    async def scenario() -> None:
        runtime = MemoryRuntime()
        async with (
            Receiver() as receiver,
            sqlite_store(tmp_path / "auth.db") as store,
            running(IntegrationManager(store, runtime)) as manager,
        ):
            await manager.create(hook(receiver))
            runtime.backlogs["hook"].add(message(1))
            await wait_until(lambda: manager.status("hook")["delivered"] == 1)
            await manager.update("hook", {"batch_size": 5})
            runtime.backlogs["hook"].add(message(2))
            await wait_until(lambda: manager.status("hook")["delivered"] == 2)
            await manager.remove("hook")
            await manager.create(hook(receiver))  # a new integration of the same name
            assert manager.status("hook")["delivered"] == 0

    asyncio.run(scenario())
