"""The blocked list without I/O: each kind of entry, CIDR v4 and v6 at several prefix
lengths, IPv4-mapped IPv6 addresses, regexes over the whole client id or user name,
expiry and purge; durations and bad input naming the field; the bounded failed log."""

from __future__ import annotations

import pytest

from mqttq.auth.blocked.entries import (
    BlockedClient,
    BlockedInputError,
    decode_entry,
    encode_entry,
    entry_from_body,
    parse_duration,
    parse_entry,
)
from mqttq.auth.blocked.failed import FailedConnections
from mqttq.auth.blocked.matcher import BlockList, host_of

NOW = 1_800_000_000.0


def entry(kind: str, value: str, match_on: str | None = None) -> BlockedClient:
    return parse_entry(kind, value, match_on=match_on, now=NOW)


def test_client_id_and_username_match_exactly() -> None:
    blocks = BlockList([entry("client_id", "dev-1"), entry("username", "mallory")])
    assert blocks.match("dev-1", None, None, NOW) is not None
    assert blocks.match("dev-10", None, None, NOW) is None
    assert blocks.match("x", "mallory", None, NOW) is not None
    assert blocks.match("x", "mallory2", None, NOW) is None
    assert blocks.match("mallory", None, None, NOW) is None  # a user name is not a client id


@pytest.mark.parametrize(
    ("network", "inside", "outside"),
    [
        ("10.0.0.0/8", ["10.0.0.1", "10.255.255.255"], ["11.0.0.1", "9.255.255.255"]),
        ("192.168.1.7", ["192.168.1.7"], ["192.168.1.8"]),
        ("172.16.0.0/12", ["172.31.0.1"], ["172.32.0.1"]),
        ("0.0.0.0/0", ["1.2.3.4"], ["::1"]),
        ("2001:db8::/32", ["2001:db8::1", "2001:db8:ffff::9"], ["2001:db9::1", "10.0.0.1"]),
        ("::1", ["::1", "[::1]:1883"], ["::2"]),
        ("fe80::/10", ["fe80::1%eth0"], ["fec0::1"]),
    ],
)
def test_cidr_v4_and_v6(network: str, inside: list[str], outside: list[str]) -> None:
    blocks = BlockList([entry("address", network)])
    for address in inside:
        assert blocks.match_address(address, NOW) is not None, address
    for address in outside:
        assert blocks.match_address(address, NOW) is None, address


def test_several_prefix_lengths_and_mapped_addresses() -> None:
    blocks = BlockList(
        [entry("address", "10.1.0.0/16"), entry("address", "10.2.3.4"), entry("address", "::/0")]
    )
    assert blocks.match_address("10.1.200.3", NOW) is not None
    assert blocks.match_address("10.2.3.4:51000", NOW) is not None
    assert blocks.match_address("10.2.3.5", NOW) is None
    assert blocks.match_address("::ffff:10.1.0.9", NOW) is not None  # IPv4-mapped: as IPv4
    assert blocks.match_address("not an address", NOW) is None
    assert host_of("::ffff:10.1.0.9") == host_of("10.1.0.9")


def test_removing_one_network_keeps_the_others() -> None:
    first, second = entry("address", "10.0.0.0/8"), entry("address", "10.0.0.0/16")
    blocks = BlockList([first, second])
    blocks.remove(second.id)
    assert blocks.match_address("10.0.0.1", NOW) is first
    blocks.remove(first.id)
    assert blocks.match_address("10.0.0.1", NOW) is None


def test_regex_matches_the_whole_subject() -> None:
    blocks = BlockList(
        [entry("regex", "bad-[0-9]+"), entry("regex", "temp.*", match_on="username")]
    )
    assert blocks.match("bad-12", None, None, NOW) is not None
    assert blocks.match("bad-12x", None, None, NOW) is None
    assert blocks.match("xbad-12", None, None, NOW) is None
    assert blocks.match("ok", "temp7", None, NOW) is not None
    assert blocks.match("temp7", None, None, NOW) is None  # that one is over user names


def test_expired_entries_match_nothing_and_are_purged() -> None:
    old = parse_entry("client_id", "dev-1", expires_in=60, now=NOW - 120)
    live = parse_entry("client_id", "dev-2", expires_in=60, now=NOW)
    blocks = BlockList([old, live])
    assert blocks.match("dev-1", None, None, NOW) is None
    assert blocks.match("dev-2", None, None, NOW) is live
    assert blocks.match("dev-2", None, None, NOW + 61) is None
    assert blocks.purge(NOW) == [old]
    assert blocks.entries() == [live]


def test_same_selector_same_id_replaces() -> None:
    first = parse_entry("address", "10.0.0.1/32", reason="a", now=NOW)
    second = parse_entry("address", "10.0.0.1", reason="b", now=NOW + 1)
    assert first.id == second.id and first.value == second.value == "10.0.0.1/32"
    blocks = BlockList([first, second])
    assert blocks.entries() == [second]
    assert decode_entry(encode_entry(second)) == second


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90), ("30s", 30), ("15m", 900), ("1h", 3600), ("7d", 604_800), ("1h30m", 5400)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "1x", "h1", "0", "-5", "1h 30m", "inf"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(BlockedInputError) as raised:
        parse_duration(text)
    assert raised.value.field == "expires_in"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"address": "300.0.0.1"}, "address"),
        ({"regex": "("}, "regex"),
        ({"regex": "x", "match_on": "topic"}, "match_on"),
        ({"client_id": "x", "match_on": "username"}, "match_on"),
        ({"client_id": ""}, "client_id"),
        ({"client_id": "x", "expires_in": True}, "expires_in"),
        ({"client_id": "x", "reason": 5}, "reason"),
    ],
)
def test_bad_bodies_name_the_field(body: dict[str, object], field: str) -> None:
    with pytest.raises(BlockedInputError) as raised:
        entry_from_body(body, now=NOW)
    assert raised.value.field == field


def test_failed_log_is_bounded_and_keeps_each_clients_latest() -> None:
    clock = iter(range(100, 10_000))
    log = FailedConnections(3, clock=lambda: float(next(clock)))

    def refuse(client_id: str) -> None:
        log.record(
            client_id=client_id,
            address="127.0.0.1",
            username=None,
            listener="tcp",
            protocol_level=5,
            reason="bad_credentials",
            reason_code=0x86,
            message="bad user name or password",
        )

    refuse("quiet")
    for _ in range(5):
        refuse("noisy")
    assert len(log) == 3
    assert [f.client_id for f in log.recent()] == ["noisy"] * 3
    # The ring let "quiet" go; its latest refusal is still there.
    (quiet,) = log.recent(client_id="quiet")
    assert (quiet.client_id, quiet.at) == ("quiet", 100.0)
    assert log.statistics() == {"total": 6, "held": 3, "clients": 2}
    assert log.by_reason == {"bad_credentials": 6}
    assert log.recent(limit=1)[0].at == 105.0
