"""The Redis key layout of one DEVICE session (TBMQ 2.x), and how to reach a Redis.

Keys of client `c`, all carrying the hash tag `{c}` so that they share one cluster slot,
after an optional global prefix (TBMQ's `cache.cache-prefix`, empty by default):

- `{c}_messages`: ZSET; member = name of a message key, score = serial (only grows).
- `{c}_messages_<packet_id>`: STRING; the message as TBMQ's JSON (`codec_json`), with a TTL.
- `{c}_last_packet_id`: STRING; the last packet id assigned.
- `{c}_last_serial_number`: STRING; the last serial assigned. mqttq's own: TBMQ restarts
  the score from the last packet id when the set is empty (its 1.x PostgreSQL schema had
  `last_serial_number`); TBMQ ignores this key, and mqttq reads TBMQ's queues without it.
- `{c}_session_node`: STRING; set by the broker while the client is connected (which node),
  so that `mqttq session rm` does not pull a queue from under a live session.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit, urlunsplit

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from mqttq.codec.enums import MAX_PACKET_ID

MESSAGES_SUFFIX: Final = "}_messages"

RedisClient = Redis | RedisCluster
"""Standalone or cluster client: the scripts and commands used here run on either."""


class SessionKeys:
    """The key names of one client's session (built on use: a PUBACK needs only two)."""

    __slots__ = ("_tagged", "client_id", "messages")

    def __init__(self, prefix: str, client_id: str) -> None:
        self._tagged = f"{prefix}{{{client_id}}}"
        self.client_id = client_id
        self.messages = f"{self._tagged}_messages"

    @property
    def last_packet_id(self) -> str:
        return f"{self._tagged}_last_packet_id"

    @property
    def last_serial(self) -> str:
        return f"{self._tagged}_last_serial_number"

    @property
    def session_node(self) -> str:
        return f"{self._tagged}_session_node"

    def message(self, packet_id: int) -> str:
        """The key of the entry holding `packet_id` (the set's member name for it)."""
        return f"{self.messages}_{packet_id}"

    def queue_keys(self) -> tuple[str, str, str]:
        """KEYS of the save and clear scripts: the set and the two counters."""
        return (self.messages, self.last_packet_id, self.last_serial)


def client_id_of(messages_key: str, prefix: str) -> str | None:
    """The client id in `<prefix>{<client_id>}_messages`, or None for any other key."""
    head = prefix + "{"
    if (
        len(messages_key) < len(head) + len(MESSAGES_SUFFIX)
        or not messages_key.startswith(head)
        or not messages_key.endswith(MESSAGES_SUFFIX)
    ):
        return None
    return messages_key[len(head) : -len(MESSAGES_SUFFIX)]


def packet_id_of(message_key: str, messages_key: str) -> int | None:
    """The packet id in `<messages_key>_<packet_id>`, or None when the name is not one."""
    head = messages_key + "_"
    digits = message_key[len(head) :]
    if not message_key.startswith(head) or not digits.isdigit():
        return None
    packet_id = int(digits)
    return packet_id if 1 <= packet_id <= MAX_PACKET_ID else None


def glob_escape(text: str) -> str:
    """`text` as a literal inside a Redis MATCH pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def redacted(url: str) -> str:
    """`url` without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def node_url(url: str, host: str, port: int) -> str:
    """`url` (credentials, TLS scheme and options kept) pointed at one node, database 0."""
    parts = urlsplit(url)
    userinfo, _, _ = parts.netloc.rpartition("@")
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    netloc = f"{userinfo}@{address}" if userinfo else address
    return urlunsplit(parts._replace(netloc=netloc, path="/0"))


def connect(url: str, *, cluster: bool, connect_timeout: float = 2.0) -> RedisClient:
    """A client for `url` (`redis://HOST:PORT/DB`, `rediss://` for TLS); not yet connected.

    Bytes in, bytes out (hiredis parses replies when installed). One retry without backoff
    replaces a connection that a Redis restart broke; a Redis that is down fails the call at
    once instead of after a series of backoffs.
    """
    retry = Retry(NoBackoff(), 1)
    if cluster:
        return RedisCluster.from_url(url, socket_connect_timeout=connect_timeout, retry=retry)
    return Redis.from_url(url, socket_connect_timeout=connect_timeout, retry=retry)
