"""The dashboard's part of `mqttq serve`: the admin user store the login reads and the
sampler behind /api/v1/history, started once the admin API listens (nothing runs when
the admin API is off: the history has no reader then)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from mqttq.auth.ports import AuthStoreError

if TYPE_CHECKING:
    from mqttq.admin.server import AdminServer
    from mqttq.auth.admin_users import AdminUserStore
    from mqttq.broker.sampler import Sampler
    from mqttq.broker.server import Broker
    from mqttq.config import Settings

__all__ = ["DashboardHandle", "start_dashboard"]

log = logging.getLogger("mqttq.cli.serve")


class DashboardHandle:
    """A started sampler and an open admin user store; `close` stops and closes both."""

    def __init__(self, sampler: Sampler, users: AdminUserStore | None) -> None:
        self.sampler = sampler
        self.users = users

    async def close(self) -> None:
        await self.sampler.stop()
        if self.users is not None:
            await self.users.close()


async def start_dashboard(
    broker: Broker, settings: Settings, server: AdminServer
) -> DashboardHandle:
    """Open the admin user store (a store that cannot be opened leaves the login off,
    with a warning: the bearer token still works), start the sampler, and give both to
    `server`'s dashboard."""
    from mqttq.broker.sampler import sampler_for  # noqa: PLC0415
    from mqttq.cli.admin_user import admin_user_store  # noqa: PLC0415

    store = admin_user_store(settings)
    users: AdminUserStore | None = store
    try:
        await store.open()
    except AuthStoreError as exc:
        log.warning("dashboard login off: cannot open the admin users: %s", exc)
        users = None
    sampler = sampler_for(broker, settings)
    sampler.start()
    server.dashboard.configure(
        users=users,
        idle_timeout=settings.admin.session_idle_timeout,
        sampler=sampler,
    )
    return DashboardHandle(sampler, users)
