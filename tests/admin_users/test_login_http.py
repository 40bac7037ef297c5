"""The dashboard's login over real HTTP against an in-process broker as `mqttq serve`
builds it: the login page, cookie flags, CSRF, roles, the login limit, the origin check,
logout, and the bearer token unchanged (mqttq/admin/dashboard/CONTRACT.md)."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from email.message import Message
from typing import Any

import pytest

from mqttq.admin.token import read_discovery
from mqttq.auth.admin_users import Role, new_admin_user
from mqttq.cli.admin_user import admin_user_store
from tests.conftest import InProcessBroker
from tests.integration.waiting import BrokerFactory, wait_for

TOKEN = "login-test-token-0123456789"
CONFIG = f'[admin]\nport = 0\ntoken = "{TOKEN}"\nsample_interval = 1.0\n'


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


@dataclass
class Answer:
    status: int
    headers: Message
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode()


@dataclass
class Browser:
    """Keeps the session cookie like a browser (SameSite aside)."""

    url: str
    cookie: str | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def send(
        self,
        method: str,
        path: str,
        *,
        form: dict[str, str] | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        data = None
        request = urllib.request.Request(self.url + path, method=method)
        if form is not None:
            data = urllib.parse.urlencode(form).encode()
            request.add_header("Content-Type", "application/x-www-form-urlencoded")
        elif body is not None:
            data = json.dumps(body).encode()
            request.add_header("Content-Type", "application/json")
        request.data = data
        if self.cookie is not None:
            request.add_header("Cookie", f"mqttq_session={self.cookie}")
        for key, value in (headers or {}).items():
            request.add_header(key, value)
        try:
            with _OPENER.open(request, timeout=10) as answer:
                result = Answer(answer.status, answer.headers, answer.read())
        except urllib.error.HTTPError as error:
            result = Answer(error.code, error.headers, error.read())
        set_cookie = result.headers.get("Set-Cookie")
        if set_cookie and set_cookie.startswith("mqttq_session="):
            value = set_cookie.split(";")[0].partition("=")[2].strip('"')
            self.cookie = value or None
        return result

    def log_in(self, username: str, password: str) -> Answer:
        return self.send("POST", "/login", form={"username": username, "password": password})


def add_user(broker: InProcessBroker, name: str, password: str, role: Role) -> None:
    async def add() -> None:
        store = admin_user_store(broker.settings())
        await store.open()
        try:
            await store.add_admin_user(new_admin_user(name, password, role, time.time()))
        finally:
            await store.close()

    asyncio.run(add())


@pytest.fixture
def served(broker_factory: BrokerFactory) -> tuple[InProcessBroker, str]:
    broker = broker_factory(config=CONFIG)
    assert isinstance(broker, InProcessBroker)
    discovery = wait_for(lambda: read_discovery(broker.data_dir), what="admin.json")
    return broker, str(discovery["url"])


def test_login_page_then_dashboard_then_logout(served: tuple[InProcessBroker, str]) -> None:
    broker, url = served
    add_user(broker, "alice", "right pw", Role.ADMIN)
    browser = Browser(url)
    page = browser.send("GET", "/")
    assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")
    assert '<form method="post" action="/login"' in page.text
    assert 'name="username"' in page.text and 'type="password"' in page.text
    assert 'id="login-error"' in page.text
    assert page.headers["X-Frame-Options"] == "DENY"
    assert page.headers["Cache-Control"] == "no-store"
    assert browser.send("GET", "/api/v1/me").status == 401  # no cookie, no token

    wrong = browser.log_in("alice", "wrong pw")
    assert wrong.status == 401 and "wrong user name or password" in wrong.text
    assert browser.cookie is None
    unknown = browser.log_in("nobody", "right pw")
    assert unknown.status == 401 and unknown.text == wrong.text

    done = browser.log_in("alice", "right pw")
    assert done.status == 303 and done.headers["Location"] == "/"
    cookie = done.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie  # the admin listener is plain HTTP
    index = browser.send("GET", "/")
    assert index.status == 200 and 'action="/login"' not in index.text

    me = browser.send("GET", "/api/v1/me").json()
    assert me["username"] == "alice" and me["role"] == "admin"
    csrf = me["csrf_token"]
    assert isinstance(csrf, str) and len(csrf) >= 32

    body = {"username": "made-by-alice", "password": "p"}
    refused = browser.send("POST", "/api/v1/credentials", body=body)
    assert refused.status == 403
    assert refused.json() == {"error": "CSRF token missing or wrong", "field": "X-CSRF-Token"}
    wrong_token = browser.send(
        "POST", "/api/v1/credentials", body=body, headers={"X-CSRF-Token": csrf + "x"}
    )
    assert wrong_token.status == 403
    made = browser.send("POST", "/api/v1/credentials", body=body, headers={"X-CSRF-Token": csrf})
    assert made.status == 201, made.text
    assert browser.send("GET", "/api/v1/credentials/made-by-alice").status == 200
    assert browser.send("GET", "/metrics").status == 200

    old = browser.cookie
    out = browser.send("POST", "/logout", headers={"X-CSRF-Token": csrf})
    assert out.status == 303 and out.headers["Location"] == "/"
    assert browser.cookie is None
    browser.cookie = old  # the old cookie replayed: the session is gone
    expired = browser.send("GET", "/api/v1/me")
    assert expired.status == 401
    assert expired.json() == {"error": "login expired", "field": "Cookie"}


def test_a_viewer_reads_but_changes_nothing(served: tuple[InProcessBroker, str]) -> None:
    broker, url = served
    add_user(broker, "vera", "pw", Role.VIEWER)
    browser = Browser(url)
    assert browser.send("POST", "/login", body={"username": "vera", "password": "pw"}).status == 303
    me = browser.send("GET", "/api/v1/me").json()
    assert me["role"] == "viewer"
    assert browser.send("GET", "/api/v1/credentials").status == 200
    refused = browser.send(
        "POST",
        "/api/v1/credentials",
        body={"username": "x", "password": "y"},
        headers={"X-CSRF-Token": me["csrf_token"]},
    )
    assert refused.status == 403
    assert refused.json() == {"error": "viewer role: read only", "field": "role"}
    status, _ = _bearer(url, "GET", "/api/v1/credentials/x")
    assert status == 404  # nothing was stored


def test_bearer_token_unchanged_and_me(served: tuple[InProcessBroker, str]) -> None:
    _, url = served
    status, me = _bearer(url, "GET", "/api/v1/me")
    assert status == 200
    assert me == {"username": "token", "role": "admin", "csrf_token": None}
    status, _ = _bearer(url, "GET", "/api/v1/me", token="wrong")
    assert status == 401


def test_failed_logins_are_limited(served: tuple[InProcessBroker, str]) -> None:
    broker, url = served
    add_user(broker, "bob", "right", Role.ADMIN)
    browser = Browser(url)
    for _ in range(5):
        assert browser.log_in("bob", "wrong").status == 401
    limited = browser.log_in("bob", "right")  # even the right password, for now
    assert limited.status == 429
    assert "too many failed logins; try again in" in limited.text
    assert int(limited.headers["Retry-After"]) >= 1
    assert browser.cookie is None


def test_cross_origin_login_is_refused(served: tuple[InProcessBroker, str]) -> None:
    broker, url = served
    add_user(broker, "carl", "pw", Role.ADMIN)
    browser = Browser(url)
    form = {"username": "carl", "password": "pw"}
    evil = browser.send("POST", "/login", form=form, headers={"Origin": "http://evil.example"})
    assert evil.status == 403 and "cross-origin login refused" in evil.text
    assert browser.cookie is None
    same = browser.send("POST", "/login", form=form, headers={"Origin": url})
    assert same.status == 303 and browser.cookie is not None


def test_static_files_and_history(served: tuple[InProcessBroker, str]) -> None:
    _, url = served
    browser = Browser(url)
    script = browser.send("GET", "/static/app.js")  # the page's own, served without login
    assert script.status == 200 and script.body
    assert script.headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert script.headers["Cache-Control"] == "no-cache"
    etag = script.headers["ETag"]
    again = browser.send("GET", "/static/app.js", headers={"If-None-Match": etag})
    assert again.status == 304 and again.body == b""
    style = browser.send("GET", "/static/app.css")
    assert style.headers["Content-Type"] == "text/css; charset=utf-8"
    missing = browser.send("GET", "/static/..%2Fsession.py")
    assert missing.status == 404
    assert browser.send("GET", "/static/no-such-file.js").status == 404
    status, history = _bearer(url, "GET", "/api/v1/history?seconds=60")
    assert status == 200
    assert history["interval_s"] == 1
    [node] = history["nodes"]
    columns = history["nodes"][node]
    assert len(columns["t"]) >= 1
    assert all(len(columns[key]) == len(columns["t"]) for key in ("connections", "inbox"))
    assert columns["kafka_lag"] is None  # embedded mode
    assert history["cluster"]["connections"] == columns["connections"]
    status, bad = _bearer(url, "GET", "/api/v1/history?seconds=0")
    assert status == 400 and bad["field"] == "seconds"


def _bearer(url: str, method: str, path: str, token: str = TOKEN) -> tuple[int, Any]:
    request = urllib.request.Request(url + path, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
