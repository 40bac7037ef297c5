"""Browser sessions of the dashboard and the login rate limit, in this node's memory.

Sans-I/O: every method takes `now` (seconds, any monotonic clock) instead of reading one.
A session is an opaque random id (the cookie) mapped to the user, their role and a CSRF
token; it ends after `idle_timeout` seconds without a request, at logout, or when the
process stops (a restart logs everyone out; in a cluster a session is valid only on the
node that issued it).
"""

from __future__ import annotations

import hmac
import secrets
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

from mqttq.auth.admin_users import Role

__all__ = [
    "LOGIN_FAILURES",
    "LOGIN_WINDOW",
    "MAX_SESSIONS",
    "AdminSession",
    "LoginLimiter",
    "SessionTable",
]

MAX_SESSIONS: Final = 10_000
"""Sessions kept at most; past it, the least recently used one is ended."""
LOGIN_FAILURES: Final = 5
"""Failed logins allowed per address and per user name within LOGIN_WINDOW."""
LOGIN_WINDOW: Final = 60.0
MAX_LOCKOUT: Final = 900.0
"""The longest a locked address or user name waits (the lockout doubles up to it)."""
MAX_LIMITED_KEYS: Final = 10_000
_TOKEN_BYTES: Final = 32


@dataclass(slots=True)
class AdminSession:
    """One logged-in browser."""

    session_id: str
    username: str
    role: Role
    csrf_token: str
    last_seen: float

    def csrf_matches(self, given: str | None) -> bool:
        """True when `given` is this session's CSRF token (compared in constant time)."""
        if not given:
            return False
        return hmac.compare_digest(
            given.encode("utf-8", "surrogateescape"), self.csrf_token.encode("ascii")
        )


class SessionTable:
    """Sessions by id, each ending `idle_timeout` seconds after its last use."""

    def __init__(self, idle_timeout: float, max_sessions: int = MAX_SESSIONS) -> None:
        if not idle_timeout > 0:
            raise ValueError(f"idle_timeout must be > 0, got {idle_timeout!r}")
        self.idle_timeout = idle_timeout
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, AdminSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, username: str, role: Role, now: float) -> AdminSession:
        """A new session (fresh random id and CSRF token), the least recently used one
        ended when the table is full."""
        self._expire(now)
        while len(self._sessions) >= self.max_sessions:
            self._sessions.popitem(last=False)
        session = AdminSession(
            secrets.token_urlsafe(_TOKEN_BYTES),
            username,
            role,
            secrets.token_urlsafe(_TOKEN_BYTES),
            now,
        )
        self._sessions[session.session_id] = session
        return session

    def touch(self, session_id: str, now: float) -> AdminSession | None:
        """The live session with this id, its idle time restarted; None when unknown or
        expired (an expired one is forgotten)."""
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if now - session.last_seen > self.idle_timeout:
            del self._sessions[session_id]
            return None
        session.last_seen = now
        self._sessions.move_to_end(session_id)
        return session

    def end(self, session_id: str) -> bool:
        """Forget the session; True when there was one."""
        return self._sessions.pop(session_id, None) is not None

    def end_user(self, username: str) -> int:
        """End every session of `username`; how many there were."""
        ids = [sid for sid, s in self._sessions.items() if s.username == username]
        for sid in ids:
            del self._sessions[sid]
        return len(ids)

    def _expire(self, now: float) -> None:
        # Least recently used first: stop at the first one still alive.
        while self._sessions:
            sid, session = next(iter(self._sessions.items()))
            if now - session.last_seen <= self.idle_timeout:
                return
            del self._sessions[sid]


@dataclass(slots=True)
class _Failures:
    window_start: float
    count: int
    locked_until: float
    lockout: float


class LoginLimiter:
    """Failed logins per key (a client address, a user name): LOGIN_FAILURES within
    LOGIN_WINDOW seconds lock the key for the rest of the window; each further lockout of
    the same key doubles, up to MAX_LOCKOUT. A successful login clears its user name."""

    def __init__(
        self,
        failures: int = LOGIN_FAILURES,
        window: float = LOGIN_WINDOW,
        max_lockout: float = MAX_LOCKOUT,
    ) -> None:
        self.failures = failures
        self.window = window
        self.max_lockout = max_lockout
        self._keys: dict[str, _Failures] = {}

    def retry_after(self, keys: tuple[str, ...], now: float) -> float:
        """Seconds until a login for these keys may be tried (0: now)."""
        wait = 0.0
        for key in keys:
            entry = self._keys.get(key)
            if entry is not None and entry.locked_until > now:
                wait = max(wait, entry.locked_until - now)
        return wait

    def failed(self, keys: tuple[str, ...], now: float) -> None:
        """Count one failed login against each key."""
        if len(self._keys) >= MAX_LIMITED_KEYS:
            self._forget_idle(now)
        for key in keys:
            entry = self._keys.get(key)
            if entry is None:
                entry = self._keys[key] = _Failures(now, 0, 0.0, 0.0)
            if now - entry.window_start > self.window:
                entry.window_start, entry.count = now, 0
            if entry.lockout and now - entry.locked_until > self.max_lockout:
                entry.lockout = 0.0  # quiet for a long while: back to the first lockout
            entry.count += 1
            if entry.count >= self.failures:
                entry.lockout = (
                    self.window - (now - entry.window_start)
                    if entry.lockout == 0.0
                    else min(self.max_lockout, entry.lockout * 2)
                )
                entry.lockout = max(entry.lockout, 1.0)
                entry.locked_until = now + entry.lockout
                entry.window_start, entry.count = entry.locked_until, 0

    def succeeded(self, key: str) -> None:
        """Forget the failures of `key` (the user name that just logged in)."""
        self._keys.pop(key, None)

    def _forget_idle(self, now: float) -> None:
        idle = [
            key
            for key, entry in self._keys.items()
            if entry.locked_until <= now and now - entry.window_start > self.max_lockout
        ]
        for key in idle:
            del self._keys[key]
