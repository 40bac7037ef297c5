"""Fixtures of the dashboard tests: ONE Debian chromium for the whole session (Playwright
for Python, its own browser download never used), a new browser context per test, and a
real broker as `mqttq serve` builds it (tests/harness.py InProcessBroker: admin server,
sampler, a WebSocket listener, all on port 0) with admin users made in its credential
store. The tests drive the page as a person would and check what the broker did with real
MQTT clients (tests/integration/raw_client.py)."""

from __future__ import annotations

import json
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from mqttq.admin.token import read_discovery
from tests.conftest import BrokerProcess, InProcessBroker
from tests.integration.raw_client import RawClient
from tests.integration.waiting import BrokerFactory

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

__all__ = ["Dashboard", "DashboardFactory", "log_in"]

TOKEN = "dashboard-test-token-0123456789"
PASSWORD = "correct horse battery staple"
VIEWPORT = {"width": 1280, "height": 800}
WAIT_MS = 15_000
"""How long the page may take to show what a test waits for (the sampler's steps, the
broker's answers); a deadline for waiting, never a measured time."""

BASE_CONFIG = f"""
[admin]
port = 0
token = "{TOKEN}"
sample_interval = 1.0

[listener.ws]
port = 0
"""


@dataclass
class Dashboard:
    """A running broker with its admin server (`url`), MQTT over TCP (`mqtt_port`) and over
    WebSocket (`ws_url`)."""

    broker: InProcessBroker | BrokerProcess
    url: str
    mqtt_port: int
    ws_url: str
    clients: list[RawClient] = field(default_factory=list)

    def add_user(self, username: str, role: str = "admin", password: str = PASSWORD) -> None:
        """An admin user in the broker's credential store (what `mqttq admin-user add`
        writes), usable at once."""
        broker = self.broker
        assert isinstance(broker, InProcessBroker), "a broker process: use mqttq admin-user"
        from mqttq.auth.admin_users import Role, new_admin_user  # noqa: PLC0415
        from mqttq.cli.admin_user import admin_user_store  # noqa: PLC0415

        async def add() -> None:
            store = admin_user_store(broker.settings())
            await store.open()
            try:
                await store.add_admin_user(
                    new_admin_user(username, password, Role(role), time.time())
                )
            finally:
                await store.close()

        # On the broker's loop: Playwright's sync API owns this thread's event loop.
        broker.call(add())

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """Call the admin API with the bearer token: (status, decoded JSON or None)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {TOKEN}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                raw = answer.read()
                return answer.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as error:
            raw = error.read()
            return error.code, json.loads(raw) if raw else None

    def client(self) -> RawClient:
        """A new MQTT client connected by TCP (not yet CONNECTed), closed after the test."""
        made = RawClient(self.mqtt_port)
        self.clients.append(made)
        return made


DashboardFactory = Callable[..., Dashboard]


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    """Debian's chromium, one for the dashboard's tests (they share the xdist group
    `browser`, so a worker runs them one after the other with one launch).

    Not session-scoped: while Playwright's sync API is alive it keeps its event loop
    marked as running in the main thread (the loop runs in a greenlet), so every later
    test on the same worker that calls asyncio.run() would fail. The package scope ends it
    when the worker leaves tests/dashboard."""
    executable = shutil.which("chromium")
    if executable is None:
        pytest.skip(
            "chromium is not installed (Debian package `chromium`; scripts/test.sh installs it)"
        )
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page in its own context (cookies, storage) at 1280x800."""
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(WAIT_MS)
    sync_api.expect.set_options(timeout=WAIT_MS)
    errors: list[str] = []
    opened = context.new_page()
    opened.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield opened
    finally:
        context.close()
    assert not errors, f"the page raised: {errors}"


@pytest.fixture
def dashboard_factory(broker_factory: BrokerFactory) -> Iterator[DashboardFactory]:
    """`dashboard_factory(extra_config="")`: a started broker serving the dashboard."""
    made: list[Dashboard] = []

    def make(extra_config: str = "") -> Dashboard:
        broker = broker_factory(config=BASE_CONFIG + extra_config)
        assert isinstance(broker, InProcessBroker)
        discovery = read_discovery(broker.data_dir)
        assert discovery is not None, "the admin server did not start"
        ws_port = broker.broker.ports["ws"]
        board = Dashboard(broker, discovery["url"], broker.port, f"ws://127.0.0.1:{ws_port}/mqtt")
        made.append(board)
        return board

    yield make
    for board in made:
        for client in board.clients:
            client.close()


@pytest.fixture
def dashboard(dashboard_factory: DashboardFactory) -> Dashboard:
    """A broker with the default dashboard configuration and an admin user `admin`."""
    board = dashboard_factory()
    board.add_user("admin", "admin")
    return board


def log_in(page: Any, board: Dashboard, username: str = "admin", password: str = PASSWORD) -> None:
    """Open the dashboard, log in through its form and wait for the page to show who."""
    page.goto(board.url + "/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    sync_api.expect(page.get_by_test_id("whoami")).to_contain_text(username)
