"""The dashboard's front door on the admin HTTP server: the login page, login and logout,
the page's static files, `/api/v1/me`, and the check that lets a browser session (cookie)
use the admin API beside the bearer token. The contract these keep is CONTRACT.md here.

A login is refused with the same answer for an unknown user and a wrong password; failed
logins are limited per client address and per user name (`LoginLimiter`); a login POST
from another origin is refused. With the cookie, every change needs the session's CSRF
token in `X-CSRF-Token`, and a viewer may change nothing.
"""

from __future__ import annotations

import html
import json
import math
import mimetypes
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from aiohttp import web

from mqttq.admin.dashboard.history import history_routes
from mqttq.admin.dashboard.session import AdminSession, LoginLimiter, SessionTable
from mqttq.admin.validation import ApiError
from mqttq.auth.admin_users import AdminUserStore, Role, authenticate_admin

if TYPE_CHECKING:
    from mqttq.broker.sampler import Sampler

__all__ = [
    "COOKIE",
    "DASHBOARD_PUBLIC_PATHS",
    "PRINCIPAL",
    "STATIC_DIR",
    "Dashboard",
    "Principal",
]

COOKIE: Final = "mqttq_session"
STATIC_DIR: Final = Path(__file__).parent / "static"
PRINCIPAL: Final = "mqttq_principal"
"""The request key under which the admin server keeps the request's Principal."""
DASHBOARD_PUBLIC_PATHS: Final = frozenset({"/", "/login", "/logout", "/static/{path}"})
"""Route patterns served without the bearer token or a session (the login flow)."""
SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
WRONG_LOGIN: Final = "wrong user name or password"
MAX_LOGIN_BODY: Final = 8_192

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


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request acts as: the bearer token (`username` "token", role admin, no CSRF
    token) or a logged-in admin user with their session's CSRF token."""

    username: str
    role: Role
    csrf_token: str | None

    def me(self) -> dict[str, object]:
        """The `/api/v1/me` answer."""
        return {"username": self.username, "role": str(self.role), "csrf_token": self.csrf_token}


TOKEN_PRINCIPAL: Final = Principal("token", Role.ADMIN, None)


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

    def routes(self) -> list[web.RouteDef]:
        """GET /, POST /login, POST /logout, GET /static/{path}, GET /api/v1/me and
        GET /api/v1/history."""
        return [
            *history_routes(lambda: self.sampler),
            web.get("/", self._index, allow_head=False),
            web.post("/login", self._login),
            web.post("/logout", self._logout),
            web.get("/static/{path:.+}", self._static, allow_head=False),
            web.get("/api/v1/me", self._me, allow_head=False),
        ]

    # --- who is asking -------------------------------------------------------------------

    def session_of(self, request: web.Request) -> AdminSession | None:
        """The live session the request's cookie names (its idle time restarted)."""
        session_id = request.cookies.get(COOKIE)
        if not session_id:
            return None
        return self.sessions.touch(session_id, self.clock())

    def authorize(self, request: web.Request, bearer_ok: bool) -> Principal:
        """Who the request acts as, for every route that is not public: the bearer token
        when `bearer_ok`, else the session cookie. Raises ApiError: 401 with neither
        (`missing or wrong bearer token`), 401 `login expired` for an unknown or expired
        session, 403 for a change without the CSRF token or by a viewer."""
        if bearer_ok:
            return TOKEN_PRINCIPAL
        if COOKIE not in request.cookies:
            raise ApiError(
                401,
                "missing or wrong bearer token",
                "Authorization",
                {"WWW-Authenticate": "Bearer"},
            )
        session = self.session_of(request)
        if session is None:
            raise ApiError(401, "login expired", "Cookie")
        if request.method not in SAFE_METHODS:
            if not session.csrf_matches(request.headers.get("X-CSRF-Token")):
                raise ApiError(403, "CSRF token missing or wrong", "X-CSRF-Token")
            if session.role is not Role.ADMIN:
                raise ApiError(403, "viewer role: read only", "role")
        return Principal(session.username, session.role, session.csrf_token)

    # --- pages ---------------------------------------------------------------------------

    async def _index(self, request: web.Request) -> web.StreamResponse:
        if self.session_of(request) is None:
            return self._login_page("", 200)
        index = self.static_dir / "index.html"
        text = index.read_text(encoding="utf-8") if index.is_file() else _INDEX_PLACEHOLDER
        return web.Response(
            text=text,
            content_type="text/html",
            charset="utf-8",
            headers={"Cache-Control": "no-store"},
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
            headers={"Cache-Control": "no-store", **(headers or {})},
        )

    async def _static(self, request: web.Request) -> web.StreamResponse:
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
            path, headers={"Content-Type": content_type, "Cache-Control": "no-cache"}
        )

    async def _me(self, request: web.Request) -> web.Response:
        principal = request.get(PRINCIPAL)
        if not isinstance(principal, Principal):
            # Served without the admin server's authorize step (a bare app in a test).
            principal = self.authorize(request, bearer_ok=False)
        return web.json_response(principal.me())

    # --- login and logout ----------------------------------------------------------------

    def _same_origin(self, request: web.Request) -> bool:
        origin = request.headers.get("Origin")
        if origin is None:
            return True
        return origin == f"{request.scheme}://{request.host}"

    async def _login(self, request: web.Request) -> web.StreamResponse:
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
            secure=self.tls or None,
        )
        return response

    async def _logout(self, request: web.Request) -> web.StreamResponse:
        session = self.session_of(request)
        if session is not None:
            given = request.headers.get("X-CSRF-Token")
            if given is None and request.content_type == "application/x-www-form-urlencoded":
                given = str((await request.post()).get("csrf_token") or "")
            if not session.csrf_matches(given):
                raise ApiError(403, "CSRF token missing or wrong", "X-CSRF-Token")
            self.sessions.end(session.session_id)
        response = _see_other()
        response.del_cookie(COOKIE, path="/")
        return response


def _see_other() -> web.Response:
    return web.Response(status=303, headers={"Location": "/", "Cache-Control": "no-store"})


async def _credentials_of(request: web.Request) -> tuple[str, str]:
    """(username, password) from a form or a JSON body; empty strings when absent.
    ApiError 400 naming `body` when the body cannot be read."""
    if request.content_length is not None and request.content_length > MAX_LOGIN_BODY:
        raise ApiError(400, f"the login body is larger than {MAX_LOGIN_BODY} bytes", "body")
    if request.content_type == "application/json":
        try:
            body = json.loads(await request.read())
        except (ValueError, UnicodeDecodeError):
            raise ApiError(400, "the login body is not JSON", "body") from None
        if not isinstance(body, dict):
            raise ApiError(400, 'the login body must be {"username", "password"}', "body")
        username, password = body.get("username"), body.get("password")
    else:
        form = await request.post()
        username, password = form.get("username"), form.get("password")
    return (
        username if isinstance(username, str) else "",
        password if isinstance(password, str) else "",
    )
