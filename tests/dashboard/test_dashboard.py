"""The dashboard in a real browser (Debian's chromium driven by Playwright) against a real
broker: log in, the live message rate, sessions, retained messages, credentials, the
viewer role, the in-page MQTT client, field errors and an expired login. Each test checks
what a person sees and what the broker did (bytes an MQTT client receives, the API's
state), never how long anything took."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest

from tests.dashboard.conftest import PASSWORD, Dashboard, DashboardFactory, log_in
from tests.integration.wire import DISCONNECT, Prop

from playwright.sync_api import expect  # isort: skip (importorskip in conftest first)


CONNECT_MS = 35_000
"""The in-page MQTT client's connect timeout (frontend/src/views/mqtt.js: 30 s) and a
margin: how long the page may take to connect under load."""

pytestmark = [
    pytest.mark.mqttq_only,  # the dashboard is mqttq's own
    pytest.mark.xdist_group("browser"),  # one chromium for both modules (conftest.browser)
]

VIEWER_REFUSED = "viewer role: read only"


def test_log_in_with_the_right_password_and_not_with_a_wrong_one(
    page: Any, dashboard: Dashboard
) -> None:
    page.goto(dashboard.url + "/")
    expect(page.locator("form[action='/login']")).to_be_visible()
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", "not the password")
    page.click("button[type=submit]")
    expect(page.locator("#login-error")).to_have_text("wrong user name or password")
    expect(page.get_by_test_id("whoami")).to_have_count(0)

    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    expect(page.get_by_test_id("whoami")).to_contain_text("admin")
    expect(page.get_by_test_id("role")).to_have_text("admin")
    expect(page.get_by_test_id("stat-version-value")).to_have_text(re.compile(r"^\d+\.\d+"))


def test_the_message_rate_moves_while_a_client_publishes(page: Any, dashboard: Dashboard) -> None:
    log_in(page, dashboard)
    rate = page.get_by_test_id("stat-messages-in-value")
    expect(rate).to_have_text("0")
    publisher = dashboard.client()
    publisher.connect("rate-publisher")
    stop = threading.Event()

    def publish() -> None:
        # Bounded: at most 20,000 messages, stopped as soon as the page has seen the rate.
        for n in range(20_000):
            if stop.wait(0.005):
                return
            publisher.publish("rate/t", b"%d" % n)

    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    try:
        expect(rate).to_have_text(re.compile(r"^[1-9][\d,]*(\.\d+)?$"))
    finally:
        stop.set()
        thread.join()
    # The chart has the series the number came from.
    expect(page.get_by_test_id("chart-messages")).to_contain_text("in")


def test_find_a_session_and_disconnect_it(page: Any, dashboard: Dashboard) -> None:
    victim = dashboard.client()
    victim.connect("dash-victim-1", keepalive=0)
    other = dashboard.client()
    other.connect("someone-else")
    log_in(page, dashboard)
    page.get_by_test_id("nav-sessions").click()
    page.get_by_test_id("search-prefix").fill("dash-victim")
    page.get_by_test_id("search-state").select_option("connected")
    page.get_by_test_id("search-submit").click()
    rows = page.locator("[data-testid^=session-row-]")
    expect(rows).to_have_count(1)
    expect(page.get_by_test_id("session-row-dash-victim-1")).to_contain_text("connected")

    page.get_by_test_id("session-row-dash-victim-1").get_by_test_id("session-link").click()
    expect(page.get_by_test_id("session-title")).to_have_text("Session dash-victim-1")
    expect(page.get_by_test_id("session-detail")).to_contain_text("connected")
    page.get_by_test_id("session-disconnect").click()
    expect(page.get_by_test_id("confirm")).to_be_visible()
    page.get_by_test_id("confirm-ok").click()
    expect(page.get_by_test_id("notice")).to_have_text("dash-victim-1 disconnected")

    packets = victim.wait_closed()
    assert [(p.type, p.reason_code) for p in packets] == [(DISCONNECT, 0x98)]
    other.ping()  # the other client stays connected


def test_cancel_keeps_the_session_connected(page: Any, dashboard: Dashboard) -> None:
    client = dashboard.client()
    client.connect("dash-keep", keepalive=0)
    log_in(page, dashboard)
    page.goto(dashboard.url + "/#/sessions/dash-keep")
    page.get_by_test_id("session-remove").click()
    page.get_by_test_id("confirm-cancel").click()
    expect(page.get_by_test_id("confirm")).to_have_count(0)
    client.ping()
    status, _ = dashboard.api("GET", "/api/v1/sessions/dash-keep")
    assert status == 200


def test_delete_a_retained_message(page: Any, dashboard: Dashboard) -> None:
    publisher = dashboard.client()
    publisher.connect("retainer")
    publisher.publish("dash/r/1", b'{"t": 21.5}', qos=1, retain=True)
    publisher.publish("dash/r/2", b"\xff\x00binary", qos=1, retain=True)
    log_in(page, dashboard)
    page.get_by_test_id("nav-retained").click()
    page.get_by_test_id("retained-prefix").fill("dash/r/")
    page.get_by_test_id("retained-submit").click()
    first = page.get_by_test_id("retained-row-dash/r/1")
    expect(first.get_by_test_id("retained-payload")).to_have_text('{"t": 21.5}')
    page.get_by_test_id("payload-mode-json").check()
    expect(first.get_by_test_id("retained-payload")).to_have_text('{\n  "t": 21.5\n}')
    page.get_by_test_id("payload-mode-hex").check()
    second = page.get_by_test_id("retained-row-dash/r/2")
    expect(second.get_by_test_id("retained-payload")).to_have_text("ff 00 62 69 6e 61 72 79")

    first.get_by_test_id("retained-delete").click()
    page.get_by_test_id("confirm-ok").click()
    expect(page.get_by_test_id("notice")).to_have_text("retained message on dash/r/1 deleted")
    expect(page.get_by_test_id("retained-row-dash/r/1")).to_have_count(0)

    subscriber = dashboard.client()
    subscriber.connect("late-subscriber")
    subscriber.subscribe(("dash/r/#", 1))
    messages = subscriber.receive_messages(1)
    assert [(m.topic, m.payload) for m in messages] == [("dash/r/2", b"\xff\x00binary")]
    subscriber.expect_silence()


def test_a_credential_made_in_the_page_connects(
    page: Any, dashboard_factory: DashboardFactory
) -> None:
    board = dashboard_factory('[auth]\nanonymous = "never"\n')
    board.add_user("admin", "admin")
    refused = board.client()
    connack = refused.connect("dev-1", username="dev1", password=b"pw-123", expect_success=False)
    assert connack.reason_code == 0x86  # bad user name or password: no such credential yet

    log_in(page, board)
    page.get_by_test_id("nav-credentials").click()
    page.get_by_test_id("credential-new").click()
    page.get_by_test_id("field-username").fill("dev1")
    page.get_by_test_id("field-password").fill("pw-123")
    page.get_by_test_id("field-subscribe_acl").fill("devices/#")
    page.get_by_test_id("credential-save").click()
    expect(page.get_by_test_id("notice")).to_have_text("credential dev1 saved")
    expect(page.get_by_test_id("credential-row-dev1")).to_contain_text("devices/#")

    client = board.client()
    assert client.connect("dev-1", username="dev1", password=b"pw-123").reason_code == 0
    suback = client.subscribe(("elsewhere/#", 0), ("devices/#", 0))
    assert suback.reason_codes == (0x87, 0x00)


def test_a_viewer_is_refused_a_change_and_sees_why(page: Any, dashboard: Dashboard) -> None:
    publisher = dashboard.client()
    publisher.connect("retainer")
    publisher.publish("dash/keep", b"stays", qos=1, retain=True)
    dashboard.add_user("watcher", "viewer")
    log_in(page, dashboard, "watcher")
    expect(page.get_by_test_id("role")).to_have_text("viewer")
    page.get_by_test_id("nav-retained").click()
    page.get_by_test_id("retained-row-dash/keep").get_by_test_id("retained-delete").click()
    page.get_by_test_id("confirm-ok").click()
    expect(page.get_by_test_id("error")).to_contain_text("403")
    expect(page.get_by_test_id("error")).to_contain_text(VIEWER_REFUSED)

    subscriber = dashboard.client()
    subscriber.connect("check")
    subscriber.subscribe(("dash/keep", 0))
    assert [m.payload for m in subscriber.receive_messages(1)] == [b"stays"]


def test_the_in_page_mqtt_client_publishes_to_a_real_subscriber(
    page: Any, dashboard: Dashboard
) -> None:
    subscriber = dashboard.client()
    subscriber.connect("real-subscriber")
    subscriber.subscribe(("dash/ws/#", 1))
    log_in(page, dashboard)
    page.get_by_test_id("nav-mqtt").click()
    page.get_by_test_id("mqtt-url").fill(dashboard.ws_url)
    page.get_by_test_id("mqtt-client-id").fill("in-page")
    page.get_by_test_id("mqtt-connect").click()
    # As long as the page's own connect timeout (30 s): the first test of a worker may meet
    # the other workers' JVMs starting (a deadline, never a measured time).
    expect(page.get_by_test_id("mqtt-state")).to_have_text("connected", timeout=CONNECT_MS)
    page.get_by_test_id("mqtt-sub-filter").fill("dash/ws/#")
    page.get_by_test_id("mqtt-subscribe").click()
    expect(page.get_by_test_id("mqtt-subscriptions")).to_contain_text("dash/ws/#")

    page.get_by_test_id("mqtt-pub-topic").fill("dash/ws/1")
    page.get_by_test_id("mqtt-pub-payload").fill("from the page")
    page.get_by_test_id("mqtt-pub-qos").select_option("1")
    page.locator("details summary").click()
    page.get_by_test_id("mqtt-pub-content-type").fill("text/plain")
    page.get_by_test_id("mqtt-pub-user").fill("site=lab-2")
    page.get_by_test_id("mqtt-publish").click()

    (message,) = subscriber.receive_messages(1)
    assert (message.topic, message.payload, message.qos) == ("dash/ws/1", b"from the page", 1)
    assert message.props.get(Prop.CONTENT_TYPE) == "text/plain"
    assert message.props.all(Prop.USER_PROPERTY) == [("site", "lab-2")]
    # The page's own subscription got it too, and a real client's message arrives there.
    subscriber.publish("dash/ws/2", b"from a real client", qos=1)
    payloads = page.get_by_test_id("mqtt-message-payload")
    expect(payloads).to_have_text(["from a real client", "from the page"])


def test_a_bad_value_shows_the_fields_error(page: Any, dashboard: Dashboard) -> None:
    log_in(page, dashboard)
    page.get_by_test_id("nav-tenants").click()
    page.get_by_test_id("tenant-new").click()
    page.get_by_test_id("field-name").fill("acme")
    page.get_by_test_id("field-max_sessions").fill("-5")
    page.get_by_test_id("tenant-save").click()
    error = page.get_by_test_id("field-error-max_sessions")
    expect(error).not_to_be_empty()
    expect(page.get_by_test_id("field-max_sessions")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_test_id("field-error-name")).to_be_empty()
    status, _ = dashboard.api("GET", "/api/v1/tenants/acme")
    assert status == 404  # nothing was stored

    page.get_by_test_id("nav-credentials").click()
    page.get_by_test_id("credential-new").click()
    page.get_by_test_id("field-username").fill("bad name")
    page.get_by_test_id("field-password").fill("pw")
    page.get_by_test_id("credential-save").click()
    expect(page.get_by_test_id("field-error-username")).to_have_text("must not contain whitespace")


def test_an_expired_login_goes_to_the_login_page(page: Any, dashboard: Dashboard) -> None:
    log_in(page, dashboard)
    page.get_by_test_id("nav-sessions").click()  # a view that asks only when told
    expect(page.get_by_test_id("session-total")).to_have_text("0 sessions")
    cookies = page.context.cookies()
    assert [c["name"] for c in cookies] == ["mqttq_session"]
    assert cookies[0]["httpOnly"] and cookies[0]["sameSite"] == "Strict"
    page.context.clear_cookies()
    page.context.add_cookies([{**cookies[0], "value": "expired-or-unknown"}])
    page.get_by_test_id("nav-retained").click()
    expect(page.locator("form[action='/login']")).to_be_visible()
    expect(page.get_by_test_id("whoami")).to_have_count(0)


def test_log_out_ends_the_session(page: Any, dashboard: Dashboard) -> None:
    log_in(page, dashboard)
    page.get_by_test_id("logout").click()
    expect(page.locator("form[action='/login']")).to_be_visible()
    page.goto(dashboard.url + "/#/sessions")
    expect(page.locator("form[action='/login']")).to_be_visible()


def test_sessions_come_a_page_at_a_time(page: Any, dashboard: Dashboard) -> None:
    for n in range(55):
        dashboard.client().connect(f"pager-{n:02d}")
    log_in(page, dashboard)
    page.get_by_test_id("nav-sessions").click()
    page.get_by_test_id("search-prefix").fill("pager-")
    page.get_by_test_id("search-submit").click()
    expect(page.get_by_test_id("session-total")).to_have_text("55 sessions")
    rows = page.locator("[data-testid^=session-row-]")
    expect(rows).to_have_count(50)
    expect(rows.first).to_have_attribute("data-testid", "session-row-pager-00")
    page.get_by_test_id("page-next").click()
    expect(rows).to_have_count(5)
    expect(rows.first).to_have_attribute("data-testid", "session-row-pager-50")
    expect(page.get_by_test_id("page-next")).to_be_disabled()
    page.get_by_test_id("page-prev").click()
    expect(rows).to_have_count(50)


VIEWS = {
    "overview": "Overview",
    "sessions": "Sessions",
    "subscriptions": "Subscriptions",
    "retained": "Retained messages",
    "credentials": "Credentials",
    "tenants": "Tenants",
    "limits": "Node limits",
    "cluster": "Cluster",
    "kafka": "Kafka",
    "mqtt": "MQTT client",
}


def test_every_view_opens_without_an_error(page: Any, dashboard: Dashboard) -> None:
    subscriber = dashboard.client()
    subscriber.connect("views-subscriber")
    subscriber.subscribe(("views/#", 1))
    log_in(page, dashboard)
    for name, title in VIEWS.items():
        page.get_by_test_id(f"nav-{name}").click()
        view = page.get_by_test_id(f"view-{name}")
        expect(view.locator("h1")).to_have_text(title)
        expect(page.get_by_test_id(f"nav-{name}")).to_have_attribute("aria-current", "page")
        expect(page.locator(".error-box")).to_have_count(0)
    # Embedded: the cluster and Kafka views say why they are empty.
    page.get_by_test_id("nav-cluster").click()
    expect(page.get_by_test_id("cluster-embedded")).to_be_visible()
    page.get_by_test_id("nav-kafka").click()
    expect(page.get_by_test_id("kafka-embedded")).to_be_visible()
    page.get_by_test_id("nav-subscriptions").click()
    page.get_by_test_id("subs-filter").fill("views/")
    page.get_by_test_id("subs-submit").click()
    expect(page.get_by_test_id("subscription-table").locator("tbody tr")).to_have_count(1)
    expect(page.get_by_test_id("subscription-table")).to_contain_text("views-subscriber")
    page.get_by_test_id("subs-match").select_option("exact")
    page.get_by_test_id("subs-submit").click()
    expect(page.get_by_test_id("subscription-table").locator("tbody tr")).to_have_count(0)
    page.get_by_test_id("subs-filter").fill("views/#")
    page.get_by_test_id("subs-submit").click()
    expect(page.get_by_test_id("subscription-table").locator("tbody tr")).to_have_count(1)


def test_node_limits_change_live(page: Any, dashboard: Dashboard) -> None:
    log_in(page, dashboard)
    page.get_by_test_id("nav-limits").click()
    field = page.get_by_test_id("field-max_connections_per_node")
    expect(field).not_to_have_value("")
    field.fill("1")
    page.get_by_test_id("limits-save").click()
    expect(page.get_by_test_id("notice")).to_have_text("node limits applied")
    status, body = dashboard.api("GET", "/api/v1/limits")
    assert (status, body["node"]["max_connections_per_node"]) == (200, 1)
    first = dashboard.client()
    first.connect("first")
    second = dashboard.client()
    assert second.connect("second", expect_success=False).reason_code == 0x97  # quota exceeded
