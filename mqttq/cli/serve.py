"""`mqttq serve`: the composition root that builds settings, storage and the broker.

This is the only module that picks a storage adapter. The broker and the adapters are
imported inside the command, so `mqttq --help` stays fast and the CLI does not load
asyncio machinery it does not need.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from mqttq import build
from mqttq.cli.data_dir_lock import DataDirLock, lock_data_dir
from mqttq.cli.errors import explain, print_error
from mqttq.cli.ready_file import write_ready_file
from mqttq.cli.serve_admin import AdminHandle, open_auth_store, reload_limits, start_admin
from mqttq.cli.serve_cluster import start_heartbeat
from mqttq.cli.serve_dashboard import DashboardHandle, start_dashboard
from mqttq.cli.serve_workers import WORKER_ENV, check_workers, run_workers
from mqttq.config import Settings, load_settings
from mqttq.config.schema import node_id_of
from mqttq.errors import MqttqError
from mqttq.heap import settle_heap
from mqttq.logs import configure_logging
from mqttq.storage import registry

if TYPE_CHECKING:
    from mqttq.auth.providers.chain import ProviderChain
    from mqttq.broker.server import Broker
    from mqttq.broker.sys_topics import SysTopics
    from mqttq.cli.serve_blocked import BlockedHandle
    from mqttq.cli.serve_integrations import IntegrationsHandle
    from mqttq.cluster.heartbeat import NodeHeartbeat
    from mqttq.cluster.link import ClusterLink
    from mqttq.storage.ports import AppContextStore, MessageLog, Storage

log = logging.getLogger(__name__)

SQLITE_FILE_NAME = "mqttq.sqlite3"
"""The embedded database inside `storage.data_dir`."""

SERVE_HELP = (
    "Run the MQTT broker until SIGTERM or Ctrl+C, then shut down cleanly (exit 0). "
    "Settings come from the defaults, then --config, then MQTTQ_<SECTION>__<KEY> "
    "environment variables, then these flags."
)
CONFIG_HELP = (
    "TOML file with the sections "
    + ", ".join(
        f"[[{section.name}]]" if section.name == "integration" else f"[{section.name}]"
        for section in fields(Settings)
    )
    + " (some with subsections, such as [listener.tls]). "
    "Without it mqttq runs embedded on its defaults. Backends: "
    + "; ".join(f"{key} = {' | '.join(registry.names(key))}" for key in registry.BACKENDS)
    + "."
)
"""--config's help, its section list read from the settings tree and its backend names from
the storage registry (never a stale list)."""


def serve(
    *,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            envvar="MQTTQ_CONFIG",
            show_envvar=True,
            metavar="PATH",
            help=CONFIG_HELP,
        ),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(
            metavar="HOST",
            help="Address the MQTT listener binds. "
            "Config key listener.host, env MQTTQ_LISTENER__HOST; default 127.0.0.1.",
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            metavar="PORT",
            help="TCP port of the MQTT listener; 0 picks a free port "
            "(see --ready-file). Config key listener.port, env MQTTQ_LISTENER__PORT; "
            "default 1883.",
        ),
    ] = None,
    data_dir: Annotated[
        # A str, not a Path: click turns "" into ".", and an empty data dir is a mistake.
        str | None,
        typer.Option(
            metavar="DIR",
            help="Directory of the embedded SQLite database (created if missing); one "
            "broker at a time (a second one on it exits 1). "
            "Config key storage.data_dir, env MQTTQ_STORAGE__DATA_DIR; default ./mqttq-data.",
        ),
    ] = None,
    log_level: Annotated[
        str | None,
        typer.Option(
            metavar="LEVEL",
            help="debug, info, warning, error or critical. "
            "Config key log.level, env MQTTQ_LOG__LEVEL; default warning.",
        ),
    ] = None,
    log_format: Annotated[
        str | None,
        typer.Option(
            metavar="FORMAT",
            help="json (one object per line) or text. "
            "Config key log.format, env MQTTQ_LOG__FORMAT; default json.",
        ),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            metavar="N",
            min=1,
            max=256,
            help="Run N nodes of one cluster on this machine (distributed mode only, "
            'storage.log = "kafka"): N worker processes sharing the MQTT port through '
            "SO_REUSEPORT, node ids <node id>-w<i>, data dirs <data dir>/w<i>, admin ports "
            "admin.port + i. 1: this process is the node.",
        ),
    ] = 1,
    ready_file: Annotated[
        Path | None,
        typer.Option(
            metavar="PATH",
            help='Once listening, write {"pid": ..., "mqtt_port": ...} (and tls_port, ws_port, '
            "wss_port for those listeners) as JSON to this file (atomically; removed again "
            "on a clean stop). For scripts and tests.",
        ),
    ] = None,
) -> None:
    """Run the broker until SIGTERM or SIGINT, then shut down and exit 0 (`SERVE_HELP`).

    Holds the data dir's lock (mqttq.cli.data_dir_lock) throughout: a second broker on the
    same data dir exits 1. A configuration error exits 2 and any other error a user can fix
    exits 1, each with one line on stderr.
    """
    overrides: dict[str, object] = {
        "listener.host": host,
        "listener.port": port,
        "storage.data_dir": data_dir,
        "log.level": log_level,
        "log.format": log_format,
    }
    settings: Settings | None = None
    lock: DataDirLock | None = None

    try:
        settings = load_settings(config, os.environ, overrides)
        configure_logging(settings.log.level, settings.log.format)
        check_workers(settings, workers)
        lock = lock_data_dir(settings.storage.data_dir)
        if workers > 1:
            code = run_workers(settings, workers, config, ready_file, announce=announces(settings))
            if code != 0:
                raise typer.Exit(code)
            return
        run_broker(settings, ready_file=ready_file, announce=announces(settings), config=config)
    except typer.Exit:
        raise
    except Exception as exc:
        explained = explain(exc, settings)
        if explained is None:
            raise
        message, exit_code = explained
        log.debug("serve failed", exc_info=True)
        print_error(message)
        raise typer.Exit(exit_code) from None
    finally:
        if lock is not None:
            lock.release()


def announces(settings: Settings) -> bool:
    """Whether `serve` prints its one `listening on ...` line on stderr: always at the
    default log level (warning), whether stderr is a terminal or not; at info and debug
    only on a terminal (elsewhere the "listening" log record says it, and a JSON log stays
    JSON); never at error and critical (asked to be quiet), nor in a `--workers` worker
    (its supervisor prints the line for all)."""
    if os.environ.get(WORKER_ENV):
        return False
    level = settings.log.level.lower()
    if level == "warning":
        return True
    if level in ("debug", "info"):
        return sys.stderr.isatty()
    return False


def run_broker(
    settings: Settings, *, ready_file: Path | None, announce: bool, config: Path | None = None
) -> None:
    """Start the broker (and its admin API), serve until SIGTERM/SIGINT, then shut it
    down; blocks throughout. SIGHUP re-reads the limits from `config`, the stored
    tenant quotas and the TLS listeners' certificates.

    Raises what start() raises (OSError for a taken port, StorageError, ...) after
    releasing whatever was opened.
    """
    from mqttq.broker.server import Broker  # noqa: PLC0415 (composition root, see module doc)
    from mqttq.cli.serve_integrations import check_integrations  # noqa: PLC0415

    check_integrations(settings)
    broker = Broker(
        settings,
        open_storage(settings),
        open_auth_store(settings),
        open_message_log(settings),
        open_app_contexts(settings),
        cluster=open_cluster_link(settings),
    )
    _run_event_loop(_serve(broker, settings, ready_file, announce, config))


def open_app_contexts(settings: Settings, *, force: bool = False) -> AppContextStore | None:
    """Where APPLICATION clients' consumer contexts live when the Kafka log is on
    (`storage.log = "kafka"`, or `force`): PostgreSQL with `auth.store = "postgres"`, else
    the embedded SQLite file; None when the log is off."""
    if settings.storage.log != "kafka" and not force:
        return None
    if settings.auth.store == "postgres":
        from mqttq.storage.postgres.app_context import PostgresAppContextStore  # noqa: PLC0415

        return PostgresAppContextStore(settings.postgres.url)
    from mqttq.storage.sqlite.app_context import SqliteAppContextStore  # noqa: PLC0415

    return SqliteAppContextStore(settings.storage.data_dir / SQLITE_FILE_NAME)


def open_storage(settings: Settings) -> Storage:
    """The storage adapters the settings name: `storage.backend` for sessions, subscriptions
    and retained messages (and queues), with DEVICE queues in Redis when
    `storage.device = "redis"`."""
    from mqttq.storage.ports import QueueFullPolicy  # noqa: PLC0415

    policy = QueueFullPolicy(settings.mqtt.queue_full_policy)
    limit = settings.mqtt.max_queued_messages
    backend = settings.storage.backend
    adapter = registry.load("storage.backend", backend)  # the class the name stands for
    base: Storage
    if backend == "memory":
        base = adapter(queue_limit=limit, queue_full_policy=policy)
    else:
        base = adapter(
            settings.storage.data_dir / SQLITE_FILE_NAME,
            queue_limit=limit,
            queue_full_policy=policy,
            commit_interval=settings.storage.commit_interval_ms / 1000,
        )
    if registry.BACKENDS["storage.device"][settings.storage.device] is None:
        return base  # DEVICE queues stay in the backend above
    from mqttq.storage.composite import CompositeStorage  # noqa: PLC0415

    redis = settings.redis
    queues = registry.load("storage.device", settings.storage.device)(
        redis.url,
        cluster=redis.cluster,
        key_prefix=redis.key_prefix,
        queue_limit=limit,
        queue_full_policy=policy,
        default_ttl=redis.default_ttl,
        flush_commands=redis.flush_commands,
        flush_interval=redis.flush_interval_ms / 1000,
        pipelining=redis.pipelining,
        # In a cluster the presence marker names the node (its downlinks), else the process.
        node=node_id_of(settings) if settings.storage.log == "kafka" else None,
    )
    return CompositeStorage(base, queues)


def open_message_log(settings: Settings) -> MessageLog | None:
    """The message log `storage.log` names: None (embedded: nothing Kafka is imported) or
    Kafka's `<kafka.topic_prefix>msg.all`."""
    if registry.BACKENDS["storage.log"][settings.storage.log] is None:
        return None
    kafka = settings.kafka
    # Loads confluent_kafka (only now).
    log: MessageLog = registry.load("storage.log", settings.storage.log)(
        kafka.bootstrap_servers,
        topic_prefix=kafka.topic_prefix,
        partitions=kafka.msg_all_partitions,
        produce_timeout_ms=kafka.produce_timeout_ms,
    )
    return log


def open_cluster_link(settings: Settings) -> ClusterLink | None:
    """This node's link to the other nodes sharing `[kafka]` (`storage.log = "kafka"`),
    named `node_id_of(settings)`; None when the log is off."""
    if settings.storage.log != "kafka":
        return None
    from mqttq.cluster.link import ClusterLink  # noqa: PLC0415 (loads confluent_kafka)

    kafka = settings.kafka
    return ClusterLink(
        kafka.bootstrap_servers,
        kafka.topic_prefix,
        node_id_of(settings),
        produce_timeout_ms=kafka.produce_timeout_ms,
    )


def _run_event_loop(main: Coroutine[Any, Any, None]) -> None:
    try:
        import uvloop  # noqa: PLC0415 (optional: not built for every platform)
    except ImportError:
        asyncio.run(main)
        return
    uvloop.run(main)


async def _serve(
    broker: Broker,
    settings: Settings,
    ready_file: Path | None,
    announce: bool,
    config: Path | None,
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, _on_signal, stop, signum)
    reloads: set[asyncio.Task[None]] = set()
    around: AroundBroker | None = None

    def on_hangup() -> None:
        broker.reload_certificates()
        admin = around.admin if around is not None else None
        task = asyncio.ensure_future(reload_limits(broker, config, admin))
        reloads.add(task)
        task.add_done_callback(reloads.discard)

    loop.add_signal_handler(signal.SIGHUP, on_hangup)
    around = await start_broker(broker, settings)
    settle_heap()
    written: Path | None = None
    try:
        if ready_file is not None:
            write_ready_file(ready_file, os.getpid(), broker.port, broker.ports)
            written = ready_file
        if announce:
            _announce(settings, broker.ports)
        log.info(
            "listening",
            extra={
                "host": settings.listener.host,
                "port": broker.port,
                "mode": mode_of(settings),
                "data_dir": str(settings.storage.data_dir.absolute()),
                "listeners": broker.ports,
                "build": build.describe(),
            },
        )
        serving = asyncio.create_task(broker.serve_forever())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            log.info("stopping on signal")
            # Around it first ($SYS, the sampler, the heartbeat, the admin API, the
            # integrations), then the broker: none of them runs against a closed log.
            await around.close()
        else:
            stopping.cancel()
        await serving
    finally:
        await around.close()
        if written is not None:
            written.unlink(missing_ok=True)
    log.info("stopped")


@dataclass(slots=True)
class AroundBroker:
    """What `mqttq serve` runs around a started broker: its integrations, admin API and
    cluster heartbeat. `close` stops them in order, then the broker."""

    broker: Broker
    integrations: IntegrationsHandle | None = None
    admin: AdminHandle | None = None
    heartbeat: NodeHeartbeat | None = None
    sys_topics: SysTopics | None = None
    blocked: BlockedHandle | None = None
    auth: ProviderChain | None = None
    dashboard: DashboardHandle | None = None
    closed: bool = False

    async def close(self) -> None:
        """Stop what runs around the broker, then the broker; a second call does nothing."""
        if self.closed:
            return
        self.closed = True
        if self.sys_topics is not None:
            await self.sys_topics.stop()
        if self.dashboard is not None:
            await self.dashboard.close()
        if self.heartbeat is not None:
            await self.heartbeat.stop()  # first: the cluster stops counting this node at once
        if self.admin is not None:
            await self.admin.close()
        if self.integrations is not None:
            await self.integrations.close()  # before the broker: the workers write storage
        # Idempotent: also covers a failure between start() and serve_forever().
        await self.broker.shutdown()
        if self.blocked is not None:
            await self.blocked.close()
        if self.auth is not None:
            await self.auth.close()  # after the broker: no CONNECT asks it any more


async def start_broker(broker: Broker, settings: Settings) -> AroundBroker:
    """Start `broker`, then its integrations, admin API and heartbeat (the composition of
    `mqttq serve`, also used by the tests' in-process broker). On a failure what was
    started is closed and the error raised."""
    from mqttq.broker.sys_topics import start_sys_topics  # noqa: PLC0415
    from mqttq.cli.serve_auth import add_auth_metrics, start_auth  # noqa: PLC0415
    from mqttq.cli.serve_blocked import start_blocked  # noqa: PLC0415
    from mqttq.cli.serve_integrations import start_integrations  # noqa: PLC0415

    around = AroundBroker(broker)
    broker.hub.events.configure(settings.events.kinds, settings.events.topic)  # [events]
    try:
        around.auth = await start_auth(broker, settings)  # [auth] providers
        around.blocked = await start_blocked(broker, settings)  # before the listeners open
        await broker.start()
        around.blocked.attach(broker)  # again, should the start have replaced the chain
        around.integrations = await start_integrations(broker, settings)
        around.admin = await start_admin(broker, settings, around.integrations.manager)
        add_auth_metrics(around.admin, broker.authenticator)
        if around.admin is not None:  # [admin] sample_interval, the dashboard's logins
            around.dashboard = await start_dashboard(broker, settings, around.admin.server)
        around.heartbeat = await start_heartbeat(broker, settings, around.admin)
        around.sys_topics = start_sys_topics(broker.hub, settings, broker.started_at)
    except BaseException:
        if around.sys_topics is not None:
            await around.sys_topics.stop()
        if around.dashboard is not None:
            await around.dashboard.close()
        if around.admin is not None:
            await around.admin.close()
        if around.integrations is not None:
            await around.integrations.close()
        await _release_after_failed_start(broker)
        if around.blocked is not None:
            await around.blocked.close()
        if around.auth is not None:
            await around.auth.close()
        raise
    return around


def _on_signal(stop: asyncio.Event, signum: int) -> None:
    if stop.is_set():
        # A second Ctrl+C / SIGTERM while shutting down: the user insists.
        os.write(2, b"mqttq: second signal, exiting without a clean shutdown\n")
        os._exit(128 + signum)
    stop.set()


async def _release_after_failed_start(broker: Broker) -> None:
    """Close what a failed start() opened; the start error is the one worth reporting."""
    try:
        await broker.shutdown()
    except (MqttqError, OSError):
        log.debug("shutdown after a failed start also failed", exc_info=True)


def mode_of(settings: Settings) -> str:
    """`distributed` when the Kafka message log is on, else `embedded`."""
    return "distributed" if settings.storage.log == "kafka" else "embedded"


def _announce(settings: Settings, ports: Mapping[str, int]) -> None:
    """`mqttq listening on HOST:PORT (MODE, data dir DIR)[; also tls HOST:PORT, ...]`, one
    line on stderr (the address in bold on a terminal)."""
    host = settings.listener.host
    shown = f"[{host}]" if ":" in host else host
    address = f"{shown}:{ports.get('tcp', 0)}"
    others = ", ".join(f"{name} {shown}:{port}" for name, port in ports.items() if name != "tcp")
    where = f"data dir {settings.storage.data_dir.absolute()}"
    if settings.storage.backend == "memory":
        where += ", sessions in memory: nothing survives a restart"
    line = Text.assemble(
        "mqttq listening on ", (address, "bold"), f" ({mode_of(settings)}, {where})"
    )
    if others:
        line.append(f"; also {others}")
    Console(stderr=True, soft_wrap=True, highlight=False).print(line)
