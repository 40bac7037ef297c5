"""Dashboard sessions and the login limit, on a clock the test moves (no I/O)."""

from __future__ import annotations

from mqttq.admin.dashboard.session import LoginLimiter, SessionTable
from mqttq.auth.admin_users import Role


def test_a_session_lives_while_used_and_ends_after_the_idle_timeout() -> None:
    table = SessionTable(idle_timeout=100.0)
    session = table.create("alice", Role.ADMIN, now=0.0)
    assert len(session.session_id) >= 40 and len(session.csrf_token) >= 40
    assert session.session_id != session.csrf_token
    assert table.touch(session.session_id, 90.0) is session
    assert table.touch(session.session_id, 180.0) is session  # 90 s after the last use
    assert table.touch(session.session_id, 281.0) is None  # 101 s idle
    assert table.touch(session.session_id, 282.0) is None
    assert len(table) == 0


def test_unknown_ids_ending_and_the_cap() -> None:
    table = SessionTable(idle_timeout=100.0, max_sessions=2)
    one = table.create("a", Role.VIEWER, 0.0)
    two = table.create("b", Role.VIEWER, 1.0)
    assert table.touch("nope", 2.0) is None
    table.touch(one.session_id, 3.0)  # one is now the most recently used
    three = table.create("c", Role.ADMIN, 4.0)
    assert table.touch(two.session_id, 5.0) is None  # the least recently used went
    assert table.touch(one.session_id, 5.0) is one
    assert table.end(three.session_id) and not table.end(three.session_id)
    table.create("a", Role.VIEWER, 6.0)
    assert table.end_user("a") == 2 and len(table) == 0


def test_csrf_token_compare() -> None:
    session = SessionTable(10.0).create("a", Role.ADMIN, 0.0)
    assert session.csrf_matches(session.csrf_token)
    assert not session.csrf_matches(None)
    assert not session.csrf_matches("")
    assert not session.csrf_matches(session.csrf_token[:-1])
    assert not session.csrf_matches("\udcff")


def test_five_failures_a_minute_lock_the_key_then_the_lockout_doubles() -> None:
    limiter = LoginLimiter(failures=5, window=60.0, max_lockout=900.0)
    keys = ("address:1.2.3.4", "user:alice")
    for second in range(4):
        limiter.failed(keys, float(second))
        assert limiter.retry_after(keys, float(second)) == 0.0
    limiter.failed(keys, 10.0)  # the fifth within the minute that began at 0
    assert limiter.retry_after(keys, 10.0) == 50.0
    assert limiter.retry_after(("address:5.6.7.8", "user:alice"), 10.0) == 50.0  # per user
    assert limiter.retry_after(("address:1.2.3.4", "user:bob"), 10.0) == 50.0  # per address
    assert limiter.retry_after(("address:5.6.7.8", "user:bob"), 10.0) == 0.0
    assert limiter.retry_after(keys, 60.0) == 0.0
    for second in range(5):
        limiter.failed(keys, 61.0 + second)
    assert limiter.retry_after(keys, 65.0) == 100.0  # doubled
    limiter.succeeded("user:alice")
    assert limiter.retry_after(("address:9.9.9.9", "user:alice"), 65.0) == 0.0
    assert limiter.retry_after(keys, 65.0) == 100.0  # the address stays locked


def test_failures_spread_over_minutes_never_lock() -> None:
    limiter = LoginLimiter(failures=5, window=60.0)
    keys = ("address:a", "user:u")
    for minute in range(10):
        for second in (0.0, 20.0):
            limiter.failed(keys, minute * 61.0 + second)
    assert limiter.retry_after(keys, 1000.0) == 0.0
