"""The parts of `mqttq serve` around the broker: the credential store it uses, the admin
HTTP API it serves, and re-reading limits on SIGHUP. Like serve.py, the only place that
picks adapters."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from mqttq.config import Settings, load_settings
from mqttq.errors import ConfigError, MqttqError

if TYPE_CHECKING:
    from mqttq.admin.server import AdminServer
    from mqttq.auth.ports import AuthStore
    from mqttq.broker.server import Broker
    from mqttq.integrations.manager import IntegrationManager

log = logging.getLogger("mqttq.cli.serve")

AUTH_DB_NAME = "auth.db"
"""The embedded credential and tenant database inside `storage.data_dir`."""

__all__ = ["AUTH_DB_NAME", "AdminHandle", "open_auth_store", "reload_limits", "start_admin"]


def open_auth_store(settings: Settings) -> AuthStore:
    """The credential store the settings name (not opened yet): SQLite in the data dir,
    or PostgreSQL at `postgres.url`."""
    if settings.auth.store == "postgres":
        if not settings.postgres.url:
            raise ConfigError("postgres.url", 'must be set when auth.store = "postgres"')
        from mqttq.storage.postgres.auth import PostgresAuthStore  # noqa: PLC0415

        return PostgresAuthStore(settings.postgres.url)
    from mqttq.storage.sqlite.auth import SqliteAuthStore  # noqa: PLC0415

    return SqliteAuthStore(settings.storage.data_dir / AUTH_DB_NAME)


class AdminHandle:
    """A started admin API: its discovery file is removed and its server closed by
    `close()`."""

    def __init__(self, server: AdminServer, data_dir: Path) -> None:
        self.server = server
        self.data_dir = data_dir

    async def close(self) -> None:
        from mqttq.admin.token import remove_discovery  # noqa: PLC0415

        remove_discovery(self.data_dir)
        await self.server.close()


async def start_admin(
    broker: Broker, settings: Settings, integrations: IntegrationManager | None = None
) -> AdminHandle | None:
    """Serve the admin API on the broker's loop (when `admin.enabled`) and write
    <data_dir>/admin.json so that `mqttq tenant` and `mqttq credentials` find it. When
    its port cannot be bound: AdminBindError if `admin.required`, else a warning and
    None (the broker runs without the API)."""
    admin = settings.admin
    if not admin.enabled:
        return None
    from mqttq.admin.broker_backend import BrokerAdmin  # noqa: PLC0415
    from mqttq.admin.server import AdminServer  # noqa: PLC0415
    from mqttq.admin.token import load_or_create_token, write_discovery  # noqa: PLC0415

    data_dir = settings.storage.data_dir
    token = load_or_create_token(data_dir, admin.token)
    server = AdminServer(
        BrokerAdmin(broker),
        host=admin.host,
        port=admin.port,
        token=token,
        uri_rate=admin.max_request_rate,
        rate_wait=settings.mqtt_limit.rate_wait_ms / 1000,
        integrations=integrations,
    )
    listener = settings.listener
    if listener.proxy_protocol or listener.ws.proxy_protocol:
        from mqttq.admin.metrics import ProxyCollector  # noqa: PLC0415

        server.add_collector(ProxyCollector(lambda: broker.proxy_connections))
    try:
        await server.start()
    except OSError as exc:
        error = AdminBindError(admin.host, admin.port, exc)
        if admin.required:
            raise error from exc
        # Two brokers on one host share the default port: MQTT matters more than the API.
        log.warning("admin API off: %s (admin.required = true makes this an error)", error)
        return None
    write_discovery(data_dir, server.url, os.getpid())
    log.info("admin API listening", extra={"url": server.url})
    return AdminHandle(server, data_dir)


class AdminBindError(MqttqError):
    """The admin API's port cannot be bound."""

    def __init__(self, host: str, port: int, exc: OSError) -> None:
        reason = exc.strerror or str(exc)
        super().__init__(
            f"cannot listen for the admin API on {host}:{port}: {reason}; set another "
            "admin.port (MQTTQ_ADMIN__PORT, 0 picks a free one) or admin.enabled = false"
        )


async def reload_limits(
    broker: Broker, config: Path | None, admin: AdminHandle | None = None
) -> None:
    """SIGHUP: re-read the config file's `[mqtt_limit]` (wait bound, burst, TCP rate, node
    limits, default tenant quota) and `admin.max_request_rate`, and every stored tenant
    quota; a bad file changes nothing and is logged."""
    try:
        settings = load_settings(config, os.environ, {})
    except ConfigError as exc:
        log.warning("SIGHUP: configuration not reloaded: %s", exc)
        return
    limits = settings.mqtt_limit
    broker.set_rate_timing(limits.rate_wait_ms / 1000, limits.burst_seconds)
    broker.set_node_limits(limits.cluster)
    broker.set_tcp_connection_rate(limits.max_tcp_connection_rate)
    broker.set_default_quota(limits.tenant)
    if admin is not None:
        admin.server.rate_limit.set_rate(
            settings.admin.max_request_rate, limits.rate_wait_ms / 1000
        )
    try:
        tenants = await broker.reload_tenants()
    except MqttqError as exc:
        log.warning("SIGHUP: tenant quotas not reloaded: %s", exc)
        return
    log.info("SIGHUP: limits reloaded", extra={"tenants": tenants})
