"""mqttq.admin.token: the generated admin token (created once, owner-only, reused) and the
admin.json discovery file (written atomically, read back, removed)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from mqttq.admin.token import (
    DISCOVERY_FILE,
    TOKEN_FILE,
    load_or_create_token,
    read_discovery,
    remove_discovery,
    write_discovery,
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_token_is_created_once_owner_only_and_reused(tmp_path: Path) -> None:
    data_dir = tmp_path / "data" / "nested"  # created when missing
    token = load_or_create_token(data_dir, "")
    path = data_dir / TOKEN_FILE
    assert len(token) >= 43  # token_urlsafe(32): 32 random bytes
    assert path.read_text(encoding="utf-8").strip() == token
    assert mode(path) == 0o600
    assert load_or_create_token(data_dir, "") == token
    assert sorted(p.name for p in data_dir.iterdir()) == [TOKEN_FILE]  # no temporary left


def test_two_data_dirs_get_different_tokens(tmp_path: Path) -> None:
    assert load_or_create_token(tmp_path / "a", "") != load_or_create_token(tmp_path / "b", "")


def test_configured_token_wins_and_writes_nothing(tmp_path: Path) -> None:
    assert load_or_create_token(tmp_path, "from-config") == "from-config"
    assert not (tmp_path / TOKEN_FILE).exists()
    generated = load_or_create_token(tmp_path, "")
    assert load_or_create_token(tmp_path, "from-config") == "from-config"
    assert (tmp_path / TOKEN_FILE).read_text(encoding="utf-8").strip() == generated


def test_existing_token_file_is_used_and_made_owner_only(tmp_path: Path) -> None:
    path = tmp_path / TOKEN_FILE
    path.write_text("  operator-chosen\n", encoding="utf-8")
    path.chmod(0o644)
    assert load_or_create_token(tmp_path, "") == "operator-chosen"
    assert mode(path) == 0o600


def test_empty_token_file_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / TOKEN_FILE
    path.write_text("\n", encoding="utf-8")
    token = load_or_create_token(tmp_path, "")
    assert token
    assert path.read_text(encoding="utf-8").strip() == token
    assert mode(path) == 0o600


def test_discovery_round_trip_and_removal(tmp_path: Path) -> None:
    assert read_discovery(tmp_path) is None
    write_discovery(tmp_path, "http://127.0.0.1:18083", 4242)
    assert read_discovery(tmp_path) == {"url": "http://127.0.0.1:18083", "pid": 4242}
    raw = json.loads((tmp_path / DISCOVERY_FILE).read_text(encoding="utf-8"))
    assert raw == {"url": "http://127.0.0.1:18083", "pid": 4242}
    write_discovery(tmp_path, "http://127.0.0.1:5000", 7)  # replaces
    assert read_discovery(tmp_path) == {"url": "http://127.0.0.1:5000", "pid": 7}
    assert sorted(p.name for p in tmp_path.iterdir()) == [DISCOVERY_FILE]
    remove_discovery(tmp_path)
    assert not (tmp_path / DISCOVERY_FILE).exists()
    assert read_discovery(tmp_path) is None
    remove_discovery(tmp_path)  # already gone: nothing happens


def test_unreadable_discovery_is_none(tmp_path: Path) -> None:
    path = tmp_path / DISCOVERY_FILE
    for text in ("not json", "[1, 2]", '"url"', ""):
        path.write_text(text, encoding="utf-8")
        assert read_discovery(tmp_path) is None
