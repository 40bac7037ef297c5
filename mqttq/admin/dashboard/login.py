"""The dashboard's front door on the admin HTTP server: the login page, login and logout,
the page's static files, `/api/v1/me`, and the check that lets a browser session (cookie)
use the admin API beside the bearer token. The contract these keep is CONTRACT.md here.

A login is refused with the same answer for an unknown user and a wrong password; failed
logins are limited per client address and per user name (`LoginLimiter`); a login POST
from another origin is refused. With the cookie, every change needs the session's CSRF
token in `X-CSRF-Token`, and a viewer may change nothing.
"""

from __future__ import annotations

import asyncio
import html
import json
import math
import mimetypes
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from aiohttp import web

from mqttq.admin.api_table import ADMIN, VIEWER
from mqttq.admin.call import Call
from mqttq.admin.call import Principal as ApiPrincipal
from mqttq.admin.dashboard.session import AdminSession, LoginLimiter, SessionTable
from mqttq.admin.validation import ApiError
from mqttq.auth.admin_users import AdminUserStore, Role, authenticate_admin

if TYPE_CHECKING:
    from mqttq.broker.sampler import Sampler

__all__ = [
    "COOKIE",
    "DASHBOARD_KEY",
    "STATIC_DIR",
    "Dashboard",
    "index",
    "login",
    "logout",
    "me",
    "static_file",
]

COOKIE: Final = "mqttq_session"
STATIC_DIR: Final = Path(__file__).parent / "static"
SESSION_KEY: Final = web.RequestKey("mqttq.dashboard_session", AdminSession)
"""Where `Dashboard.authenticate` leaves the request's AdminSession."""
SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
WRONG_LOGIN: Final = "wrong user name or password"
MAX_LOGIN_BODY: Final = 8_192
MAX_CONCURRENT_LOGINS: Final = 2
"""Password checks (scrypt, ~50 ms of CPU and 16 MiB each) run at once at most; more logins
wait, so a flood of logins cannot take every worker thread the broker's stores use."""

_CONTENT_TYPES: Final = {
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".svg": "image/svg+xml",
    ".map": "application/json",
    ".json": "application/json",
    ".txt": "text/plain; charset=utf-8",
    ".woff2": "font/woff2",
    ".png": "image/png",
    ".ico": "image/x-icon",
}
_PAGE_HEADERS: Final = {
    "Cache-Control": "no-store",
    # The pages are never framed by another site (clickjacking of the buttons).
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}
_LOGIN_PAGE: Final = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mqttq: log in</title></head>
<body><main>
<h1>mqttq</h1>
<form method="post" action="/login">
<p id="login-error" role="alert">{{error}}</p>
<label>User name <input name="username" autocomplete="username" required autofocus></label>
<label>Password <input name="password" type="password" autocomplete="current-password"
 required></label>
<button type="submit">Log in</button>
</form></main></body></html>
"""
_INDEX_PLACEHOLDER: Final = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>mqttq dashboard</title></head>
<body><main><h1>mqttq</h1><p>The dashboard's page is not built in this install.</p>
<form method="post" action="/logout"><button type="submit">Log out</button></form>
</main></body></html>
"""


class Dashboard:
    """Login, sessions, static files and history for one admin server. `users` is the
    admin user store (None: nobody can log in; the bearer token still works); sessions
    end after `idle_timeout` seconds idle; `tls` marks the cookie Secure; `sampler` feeds
    /api/v1/history (None: 503); `clock` is monotonic. `configure` sets these after the
    server is built (the routes exist from the start)."""

    def __init__(
        self,
        users: AdminUserStore | None,
        *,
        idle_timeout: float,
        tls: bool = False,
        static_dir: Path = STATIC_DIR,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.users = users
        self.sessions = SessionTable(idle_timeout)
        self.limiter = LoginLimiter()
        self.tls = tls
        self.static_dir = static_dir
        self.clock = clock
        self._hashing = asyncio.Semaphore(MAX_CONCURRENT_LOGINS)
        self.sampler: Sampler | None = None

    def configure(
        self,
        *,
        users: AdminUserStore | None,
        idle_timeout: float,
        sampler: Sampler | None,
        tls: bool = False,
    ) -> None:
        """Where users are, how long sessions last, where history comes from."""
        self.users = users
        self.sessions.idle_timeout = idle_timeout
        self.sampler = sampler
        self.tls = tls

    # --- who is asking -------------------------------------------------------------------

    def session_of(self, request: web.Request) -> AdminSession | None:
        """The live session the request's cookie names (its idle time restarted)."""
        session_id = request.cookies.get(COOKIE)
        if not session_id:
            return None
        return self.sessions.touch(session_id, self.clock())

    async def authenticate(self, request: web.Request) -> ApiPrincipal | None:
        """The admin server's authenticator for the session cookie (after the bearer
        token): None without the cookie; ApiError 401 `login expired` for an unknown or
        expired session; 403 for a change without the session's CSRF token in
        `X-CSRF-Token`, or by a viewer."""
        if COOKIE not in request.cookies:
            return None
        session = self.session_of(request)
        if session is None:
            raise ApiError(401, "login expired", "Cookie")
        if request.method not in SAFE_METHODS:
            if not session.csrf_matches(request.headers.get("X-CSRF-Token")):
                raise ApiError(403, "CSRF token missing or wrong", "X-CSRF-Token")
            if session.role is not Role.ADMIN:
                raise ApiError(403, "viewer role: read only", "role")
        request[SESSION_KEY] = session
        role = ADMIN if session.role is Role.ADMIN else VIEWER
        return ApiPrincipal(session.username, role, "cookie")

    # --- pages ---------------------------------------------------------------------------

    async def index(self, request: web.Request) -> web.StreamResponse:
        if self.session_of(request) is None:
            return self._login_page("", 200)
        index = self.static_dir / "index.html"
        text = index.read_text(encoding="utf-8") if index.is_file() else _INDEX_PLACEHOLDER
        return web.Response(
            text=text,
            content_type="text/html",
            charset="utf-8",
            headers=_PAGE_HEADERS,
        )

    def _login_page(
        self, error: str, status: int, headers: dict[str, str] | None = None
    ) -> web.Response:
        template = self.static_dir / "login.html"
        page = template.read_text(encoding="utf-8") if template.is_file() else _LOGIN_PAGE
        return web.Response(
            text=page.replace("{{error}}", html.escape(error)),
            status=status,
            content_type="text/html",
            charset="utf-8",
            headers={**_PAGE_HEADERS, **(headers or {})},
        )

    async def static_file(self, request: web.Request) -> web.StreamResponse:
        relative = request.match_info["path"]
        root = self.static_dir.resolve()
        try:
            path = (root / relative).resolve()
        except (OSError, ValueError):
            raise web.HTTPNotFound() from None
        if not path.is_relative_to(root) or not path.is_file():
            raise web.HTTPNotFound()
        content_type = _CONTENT_TYPES.get(path.suffix.lower())
        if content_type is None:
            content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        return web.FileResponse(
            path,
            headers={
                "Content-Type": content_type,
                "Cache-Control": "no-cache",
                "X-Content-Type-Options": "nosniff",
            },
        )

    # --- login and logout ----------------------------------------------------------------

    def _same_origin(self, request: web.Request) -> bool:
        origin = request.headers.get("Origin")
        if origin is None:
            return True
        return origin == f"{request.scheme}://{request.host}"

    async def login(self, request: web.Request) -> web.StreamResponse:
        if not self._same_origin(request):
            return self._login_page("cross-origin login refused", 403)
        username, password = await _credentials_of(request)
        address = request.remote or ""
        keys = (f"address:{address}", f"user:{username}")
        now = self.clock()
        wait = self.limiter.retry_after(keys, now)
        if wait > 0:
            seconds = max(1, math.ceil(wait))
            return self._login_page(
                f"too many failed logins; try again in {seconds} s",
                429,
                {"Retry-After": str(seconds)},
            )
        user = None
        if self.users is not None and username and password:
            async with self._hashing:
                user = await authenticate_admin(self.users, username, password)
        if user is None:
            self.limiter.failed(keys, self.clock())
            return self._login_page(WRONG_LOGIN, 401)
        self.limiter.succeeded(keys[1])
        old = request.cookies.get(COOKIE)
        if old:
            self.sessions.end(old)  # a new id at each login: no session fixation
        session = self.sessions.create(user.username, user.role, self.clock())
        response = _see_other()
        response.set_cookie(
            COOKIE,
            session.session_id,
            httponly=True,
            samesite="Strict",
            path="/",
            secure=self.tls or request.secure or None,
        )
        return response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        session = self.session_of(request)
        if session is not None:
            given = request.headers.get("X-CSRF-Token")
            if given is None:
                given = await _field_of(request, "csrf_token")
            if not session.csrf_matches(given):
                raise ApiError(403, "CSRF token missing or wrong", "X-CSRF-Token")
            self.sessions.end(session.session_id)
        response = _see_other()
        response.del_cookie(COOKIE, path="/")
        return response


DASHBOARD_KEY: Final = web.AppKey("mqttq.dashboard", Dashboard)
"""Where the admin server keeps its Dashboard (the handlers below find it there)."""


async def index(call: Call) -> web.StreamResponse:
    """GET /: the dashboard when logged in, else the login page."""
    return await call.request.app[DASHBOARD_KEY].index(call.request)


async def login(call: Call) -> web.StreamResponse:
    """POST /login."""
    return await call.request.app[DASHBOARD_KEY].login(call.request)


async def logout(call: Call) -> web.StreamResponse:
    """POST /logout."""
    return await call.request.app[DASHBOARD_KEY].logout(call.request)


async def static_file(call: Call) -> web.StreamResponse:
    """GET /static/{path}."""
    return await call.request.app[DASHBOARD_KEY].static_file(call.request)


async def me(call: Call) -> web.Response:
    """GET /api/v1/me: who is logged in, their role and the CSRF token changes need
    (null with the bearer token)."""
    session = call.request.get(SESSION_KEY)
    csrf = None if session is None else session.csrf_token
    principal = call.principal
    return web.json_response(
        {"username": principal.name, "role": principal.role, "csrf_token": csrf}
    )


def _see_other() -> web.Response:
    return web.Response(status=303, headers={"Location": "/", "Cache-Control": "no-store"})


async def _form_of(request: web.Request) -> dict[str, object]:
    """The request's body as fields: a JSON object, or a form (any other content type).
    ApiError 400 naming `body` when it is too large or not a JSON object."""
    if request.content_length is not None and request.content_length > MAX_LOGIN_BODY:
        raise ApiError(400, f"the body is larger than {MAX_LOGIN_BODY} bytes", "body")
    if request.content_type == "application/json":
        try:
            body = json.loads(await request.read())
        except (ValueError, UnicodeDecodeError):
            raise ApiError(400, "the body is not JSON", "body") from None
        if not isinstance(body, dict):
            raise ApiError(400, "the body must be a JSON object", "body")
        return body
    return dict(await request.post())


async def _field_of(request: web.Request, name: str) -> str:
    value = (await _form_of(request)).get(name)
    return value if isinstance(value, str) else ""


async def _credentials_of(request: web.Request) -> tuple[str, str]:
    """(username, password) from a form or a JSON body; empty strings when absent."""
    form = await _form_of(request)
    username, password = form.get("username"), form.get("password")
    return (
        username if isinstance(username, str) else "",
        password if isinstance(password, str) else "",
    )
