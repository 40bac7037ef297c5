"""`MqttSinkSettings`: the keys of a `type = "mqtt"` integration (the bridge), checked.

Strings may hold `${NAME}` references (mqttq.integrations.secrets); the settings keep the
template, and `client_options()` expands them when the bridge connects.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Final

from mqttq.errors import ConfigError, ProtocolError
from mqttq.integrations.bridge.client import ClientOptions
from mqttq.integrations.secrets import expand_env, mentions_env
from mqttq.routing.topics import validate_topic_filter

DIRECTIONS: Final = ("out", "in")
SECRET: Final = "***"
_MAX_UINT32: Final = 4_294_967_295


@dataclass(frozen=True, slots=True)
class MqttSinkSettings:
    """Where the remote broker is, which way messages go and how topics are mapped."""

    KEYS: ClassVar[frozenset[str]] = frozenset(
        {
            "host",
            "port",
            "direction",
            "remote_filters",
            "topic_prefix",
            "topic_rewrite",
            "qos",
            "keep_alive",
            "client_id",
            "username",
            "password",
            "tls",
            "ca_file",
            "cert_file",
            "key_file",
            "tls_verify",
            "protocol_version",
            "session_expiry_interval",
            "max_inflight_messages",
        }
    )

    host: str
    port: int = 1883
    direction: str = "out"
    remote_filters: tuple[str, ...] = ()
    """in: the filters subscribed at the remote (default: the integration's `filters`)."""
    topic_prefix: str = ""
    """out: put before the remote topic; in: put before the local topic."""
    rewrite_from: str | None = None
    rewrite_to: str = ""
    qos: int = 1
    keep_alive: int = 60
    client_id: str = ""
    """"" means `mqttq-bridge-<integration name>`."""
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    tls_verify: bool = True
    protocol_version: int = 5
    session_expiry_interval: int = 86_400
    max_inflight_messages: int = 100

    @classmethod
    def from_table(cls, table: Mapping[str, Any], where: str) -> MqttSinkSettings:
        """Read and check the bridge's keys; `ConfigError` names `<where>.<key>`."""
        reader = _Reader(table, where)
        host = reader.string("host", required=True)
        direction = reader.string("direction") or "out"
        if direction not in DIRECTIONS:
            raise ConfigError(f"{where}.direction", f"must be 'out' or 'in', got {direction!r}")
        remote_filters: tuple[str, ...] = ()
        if "remote_filters" in table:
            if direction != "in":
                raise ConfigError(f"{where}.remote_filters", 'only for direction = "in"')
            remote_filters = reader.filters("remote_filters")
        elif direction == "in":
            remote_filters = reader.filters("filters")
        topic_prefix = reader.string("topic_prefix")
        if "+" in topic_prefix or "#" in topic_prefix:
            raise ConfigError(
                f"{where}.topic_prefix", f"must not hold '+' or '#', got {topic_prefix!r}"
            )
        rewrite_from, rewrite_to = reader.rewrite("topic_rewrite")
        tls = reader.boolean("tls", False)
        files = {key: reader.string(key) or None for key in ("ca_file", "cert_file", "key_file")}
        for key, path in files.items():
            if path is None:
                continue
            if not tls:
                raise ConfigError(f"{where}.{key}", "needs tls = true")
            if not mentions_env(path) and not Path(path).is_file():
                raise ConfigError(f"{where}.{key}", f"no such file: {path!r}")
        if files["key_file"] is not None and files["cert_file"] is None:
            raise ConfigError(f"{where}.key_file", "needs cert_file (the client certificate)")
        password = reader.string("password") or None
        username = reader.string("username") or None
        if password is not None and username is None:
            raise ConfigError(f"{where}.password", "needs username (MQTT sends no password alone)")
        return cls(
            host=host,
            port=reader.integer("port", 1883, 1, 65535),
            direction=direction,
            remote_filters=remote_filters,
            topic_prefix=topic_prefix,
            rewrite_from=rewrite_from,
            rewrite_to=rewrite_to,
            qos=reader.choice("qos", 1, (0, 1)),
            keep_alive=reader.integer("keep_alive", 60, 0, 65535),
            client_id=reader.string("client_id"),
            username=username,
            password=password,
            tls=tls,
            ca_file=files["ca_file"],
            cert_file=files["cert_file"],
            key_file=files["key_file"],
            tls_verify=reader.boolean("tls_verify", True),
            protocol_version=reader.choice("protocol_version", 5, (4, 5)),
            session_expiry_interval=reader.integer(
                "session_expiry_interval", 86_400, 1, _MAX_UINT32
            ),
            max_inflight_messages=reader.integer("max_inflight_messages", 100, 1, 65535),
        )

    def public(self) -> dict[str, Any]:
        """The settings as the admin API shows them: the password as "***"."""
        body: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "direction": self.direction,
            "topic_prefix": self.topic_prefix,
            "qos": self.qos,
            "keep_alive": self.keep_alive,
            "protocol_version": self.protocol_version,
            "session_expiry_interval": self.session_expiry_interval,
            "max_inflight_messages": self.max_inflight_messages,
            "tls": self.tls,
            "tls_verify": self.tls_verify,
        }
        if self.direction == "in":
            body["remote_filters"] = list(self.remote_filters)
        if self.rewrite_from is not None:
            body["topic_rewrite"] = {"from": self.rewrite_from, "to": self.rewrite_to}
        if self.client_id:
            body["client_id"] = self.client_id
        if self.username is not None:
            body["username"] = self.username
        if self.password is not None:
            body["password"] = SECRET
        for key in ("ca_file", "cert_file", "key_file"):
            if (value := getattr(self, key)) is not None:
                body[key] = value
        return body

    def map_topic(self, topic: str) -> str:
        """The topic on the other side: `topic_rewrite` (a leading `from` becomes `to`), then
        `topic_prefix` put before it."""
        if self.rewrite_from is not None and topic.startswith(self.rewrite_from):
            topic = self.rewrite_to + topic[len(self.rewrite_from) :]
        return self.topic_prefix + topic

    def default_client_id(self, name: str) -> str:
        """The client id at the remote, unexpanded: `client_id` or `mqttq-bridge-<name>`."""
        return self.client_id or f"mqttq-bridge-{name}"

    def client_options(self, name: str, where: str) -> ClientOptions:
        """The client's options with every `${NAME}` expanded (ConfigError naming
        `<where>.<key>` and the variable, never a value, when one is unset)."""

        def expanded(key: str, value: str) -> str:
            return expand_env(value, f"{where}.{key}")

        username = expanded("username", self.username) if self.username is not None else None
        password = expanded("password", self.password) if self.password is not None else None
        context = self._ssl_context(where) if self.tls else None
        return ClientOptions(
            host=expanded("host", self.host),
            port=self.port,
            client_id=expanded("client_id", self.default_client_id(name)),
            protocol_version=self.protocol_version,
            keep_alive=self.keep_alive,
            username=username,
            password=password,
            ssl_context=context,
            session_expiry_interval=self.session_expiry_interval,
            max_inflight=self.max_inflight_messages,
        )

    def _ssl_context(self, where: str) -> ssl.SSLContext:
        ca_file = expand_env(self.ca_file, f"{where}.ca_file") if self.ca_file else None
        try:
            context = ssl.create_default_context(cafile=ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"{where}.ca_file", f"cannot load CA certificates: {exc}") from None
        if not self.tls_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.cert_file is not None:
            cert_file = expand_env(self.cert_file, f"{where}.cert_file")
            key_file = expand_env(self.key_file, f"{where}.key_file") if self.key_file else None
            try:
                context.load_cert_chain(cert_file, key_file)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(
                    f"{where}.cert_file", f"cannot load the client certificate: {exc}"
                ) from None
        return context


class _Reader:
    """Typed reads of one table's keys; errors name `<where>.<key>`."""

    def __init__(self, table: Mapping[str, Any], where: str) -> None:
        self.table = table
        self.where = where

    def _fail(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.where}.{key}", problem)

    def string(self, key: str, *, required: bool = False) -> str:
        value = self.table.get(key)
        if value is None:
            if required:
                raise self._fail(key, "is required")
            return ""
        if not isinstance(value, str):
            raise self._fail(key, f"must be a string, got {type(value).__name__}")
        if required and not value:
            raise self._fail(key, "must not be empty")
        return value

    def integer(self, key: str, default: int, low: int, high: int) -> int:
        value = self.table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(key, f"must be an integer, got {value!r}")
        if not low <= value <= high:
            raise self._fail(key, f"must be between {low} and {high}, got {value}")
        return value

    def choice(self, key: str, default: int, allowed: tuple[int, ...]) -> int:
        value = self.table.get(key, default)
        if isinstance(value, bool) or value not in allowed:
            listed = " or ".join(str(item) for item in allowed)
            raise self._fail(key, f"must be {listed}, got {value!r}")
        return int(value)

    def boolean(self, key: str, default: bool) -> bool:
        value = self.table.get(key, default)
        if not isinstance(value, bool):
            raise self._fail(key, f"must be true or false, got {value!r}")
        return value

    def filters(self, key: str) -> tuple[str, ...]:
        raw = self.table.get(key)
        if isinstance(raw, str) or not isinstance(raw, list) or not raw:
            raise self._fail(key, 'must be a non-empty array of topic filters, e.g. ["a/#"]')
        for topic_filter in raw:
            if not isinstance(topic_filter, str):
                raise self._fail(key, f"{topic_filter!r} is not a string")
            try:
                validate_topic_filter(topic_filter)
            except ProtocolError as exc:
                raise self._fail(
                    key, f"{topic_filter!r} is not a valid topic filter: {exc.message}"
                ) from None
        return tuple(raw)

    def rewrite(self, key: str) -> tuple[str | None, str]:
        raw = self.table.get(key)
        if raw is None:
            return None, ""
        if not isinstance(raw, Mapping) or set(raw) != {"from", "to"}:
            raise self._fail(key, 'must be a table {from = "a/", to = "b/"}')
        source, target = raw["from"], raw["to"]
        if not isinstance(source, str) or not source or not isinstance(target, str):
            raise self._fail(key, "from must be a non-empty string and to a string")
        if "+" in source + target or "#" in source + target:
            raise self._fail(key, "from and to must not hold '+' or '#'")
        return source, target
