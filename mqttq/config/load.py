"""Builds the frozen settings tree (`schema.py`) once from broker.toml, MQTTQ_* env vars and
CLI flags.

Precedence (lowest first): defaults, the TOML file, environment variables
(`MQTTQ_<SECTION>__<KEY>`, e.g. `MQTTQ_MQTT__MAX_KEEP_ALIVE=300`), CLI flags.
Validation names the offending key: `ConfigError("mqtt.max_keep_alive", "must be ...")`.
"""

from __future__ import annotations

import difflib
import ipaddress
import math
import re
import tomllib
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any, Final, get_type_hints

from mqttq.auth.providers.chain import PROVIDER_NAMES
from mqttq.auth.rules import AclRule, parse_rule
from mqttq.config.schema import (
    AdminSettings,
    AuthSettings,
    BlockedSettings,
    ClusterSettings,
    EventsSettings,
    HttpAuthSettings,
    JwtAuthSettings,
    KafkaApplicationSettings,
    KafkaSettings,
    ListenerSettings,
    LogSettings,
    MqttLimitSettings,
    MqttSettings,
    PostgresSettings,
    RedisSettings,
    Settings,
    StorageSettings,
    SysSettings,
    TlsListenerSettings,
    WsListenerSettings,
    WssListenerSettings,
    X509AuthSettings,
)
from mqttq.errors import ConfigError
from mqttq.limits.quota import Quota
from mqttq.storage import registry

__all__ = [
    "ACK_STRATEGIES",
    "ANONYMOUS_MODES",
    "AUTH_STORES",
    "DEVICE_STORES",
    "ENV_PREFIX",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "MAX_PACKET_SIZE_LIMIT",
    "MESSAGE_LOGS",
    "OPTIONAL_LISTENERS",
    "QUEUE_FULL_POLICIES",
    "STORAGE_BACKENDS",
    "TLS_LISTENERS",
    "TLS_VERSIONS",
    "AdminSettings",
    "AuthSettings",
    "ClusterSettings",
    "ConfigFileError",
    "KafkaApplicationSettings",
    "KafkaSettings",
    "ListenerSettings",
    "LogSettings",
    "MqttLimitSettings",
    "MqttSettings",
    "PostgresSettings",
    "RedisSettings",
    "Settings",
    "StorageSettings",
    "TlsListenerSettings",
    "WsListenerSettings",
    "WssListenerSettings",
    "env_var_name",
    "iter_keys",
    "load_settings",
    "parse_settings",
]

# --- loading and validation -------------------------------------------------------------

ENV_PREFIX: Final = "MQTTQ_"
LOG_LEVELS: Final = ("debug", "info", "warning", "error", "critical")
LOG_FORMATS: Final = ("json", "text")
# The names of backends come from the one registry (and `auth.store`'s below).
STORAGE_BACKENDS: Final = registry.names("storage.backend")
DEVICE_STORES: Final = registry.names("storage.device")
MESSAGE_LOGS: Final = registry.names("storage.log")
ACK_STRATEGIES: Final = ("retry_all", "skip_all")
QUEUE_FULL_POLICIES: Final = ("drop_oldest", "reject_new")
ANONYMOUS_MODES: Final = ("always", "loopback", "never")
AUTH_STORES: Final = registry.names("auth.store")
MAX_PACKET_SIZE_LIMIT: Final = 268_435_460
"""Largest possible MQTT packet: 268,435,455 bytes of remaining length + 5 header bytes."""

TLS_VERSIONS: Final = ("1.2", "1.3")
TLS_LISTENERS: Final = ("listener.tls", "listener.wss")
OPTIONAL_LISTENERS: Final = ("listener.tls", "listener.ws", "listener.wss")
"""Listener sections that are off unless present."""

_SECTIONS: Final[dict[str, type]] = {
    "listener": ListenerSettings,
    "listener.tls": TlsListenerSettings,
    "listener.ws": WsListenerSettings,
    "listener.wss": WssListenerSettings,
    "mqtt": MqttSettings,
    "storage": StorageSettings,
    "redis": RedisSettings,
    "kafka": KafkaSettings,
    "kafka.application": KafkaApplicationSettings,
    "cluster": ClusterSettings,
    "log": LogSettings,
    "auth": AuthSettings,
    "auth.jwt": JwtAuthSettings,
    "auth.http": HttpAuthSettings,
    "auth.x509": X509AuthSettings,
    "postgres": PostgresSettings,
    "admin": AdminSettings,
    "mqtt_limit": MqttLimitSettings,
    "mqtt_limit.cluster": Quota,
    "mqtt_limit.tenant": Quota,
    "sys": SysSettings,
    "events": EventsSettings,
    "blocked": BlockedSettings,
}
_SUBSECTIONS: Final = {
    "listener": ("tls", "ws", "wss"),
    "mqtt_limit": ("cluster", "tenant"),
    "kafka": ("application",),
    "auth": ("jwt", "http", "x509"),
}
"""Sections holding tables of their own (`[mqtt_limit.cluster]`)."""
_RULE_LISTS: Final = {"auth": ("anonymous_acl",)}
"""Keys holding arrays of ACL rule tables (`[[auth.anonymous_acl]]`): TOML only."""
_TYPES: Final[dict[str, dict[str, type]]] = {
    name: {
        f.name: get_type_hints(cls)[f.name]
        for f in fields(cls)
        if f.name not in _SUBSECTIONS.get(name, ()) and f.name not in _RULE_LISTS.get(name, ())
    }
    for name, cls in _SECTIONS.items()
}
_ALL_KEYS: Final = tuple(f"{s}.{k}" for s, keys in _TYPES.items() for k in keys)
_TYPE_WORDS: Final[dict[type, str]] = {
    int: "an integer",
    float: "a number",
    bool: "true or false",
    str: "a string",
    Path: "a path (string)",
}
_STRINGS: Final = tuple[str, ...]
"""The type of a list-of-strings key (`auth.providers`)."""
_TRUE_WORDS: Final = frozenset({"1", "true", "yes", "on"})
_FALSE_WORDS: Final = frozenset({"0", "false", "no", "off"})


class ConfigFileError(ConfigError):
    """The config file cannot be read or is not valid TOML; the message names the file."""

    def __init__(self, path: str | Path, problem: str) -> None:
        super().__init__("config", problem)
        self.path = str(path)
        self.args = (f"config file {self.path}: {problem}",)


def env_var_name(key: str) -> str:
    """The environment variable for a dotted key: `mqtt.max_keep_alive` ->
    `MQTTQ_MQTT__MAX_KEEP_ALIVE`."""
    section, _, name = key.rpartition(".")
    return f"{ENV_PREFIX}{section.upper().replace('.', '_')}__{name.upper()}"


def iter_keys() -> Iterator[tuple[str, type, object]]:
    """Every dotted key with its type and default, in section order (for docs and tests)."""
    defaults = Settings()
    for key in _ALL_KEYS:
        section, _, name = key.rpartition(".")
        owner: object = defaults
        for part in section.split("."):
            owner = getattr(owner, part)
        yield key, _TYPES[section][name], getattr(owner, name)


def load_settings(
    config_path: Path | None, env: Mapping[str, str], overrides: Mapping[str, object]
) -> Settings:
    """Build and validate the settings: defaults < TOML file < `env` < `overrides`.

    `env` is usually `os.environ`; only `MQTTQ_<SECTION>__<KEY>` names are read (names
    without `__`, such as `MQTTQ_CONFIG`, are left alone). `overrides` are keyed
    `"section.key"`; a None value means "not given". Raises `ConfigFileError` when the
    file cannot be read or parsed (naming the file, and the line for TOML syntax) and
    `ConfigError` naming the dotted key for an unknown key, a wrong type or a value out
    of range.
    """
    text: str | None = None
    if config_path is not None:
        text = _read_config(config_path)
    source = str(config_path) if config_path is not None else "<none>"
    return parse_settings(text, env, overrides, source=source)


def parse_settings(
    toml_text: str | None,
    env: Mapping[str, str],
    overrides: Mapping[str, object],
    *,
    source: str = "<string>",
) -> Settings:
    """`load_settings` on TOML text already read; `source` names it in error messages."""
    values: dict[str, dict[str, Any]] = {name: {} for name in _SECTIONS}
    present: set[str] = set()
    """Tables present in the file: `[listener.tls]` there turns that listener on (from the
    environment, `MQTTQ_LISTENER_TLS__ENABLED=true` does)."""
    integrations: tuple[dict[str, Any], ...] = ()
    lake: dict[str, Any] = {}
    if toml_text is not None:
        try:
            document = tomllib.loads(toml_text)
        except tomllib.TOMLDecodeError as exc:
            # The message ends with "(at line L, column C)".
            raise ConfigFileError(source, f"invalid TOML: {exc}") from None
        integrations = _integration_tables(document.pop("integration", []), source)
        lake = _lake_table(document.pop("lake", {}), source)
        present.update(_apply_toml(document, values, source))
    for name in sorted(env):
        if name.startswith(ENV_PREFIX) and "__" in name:
            section, _, key = name[len(ENV_PREFIX) :].partition("__")
            dotted = f"{_ENV_SECTIONS.get(section.lower(), section.lower())}.{key.lower()}"
            _store(values, dotted, env[name], f"from environment variable {name}", text=True)
    for dotted, value in overrides.items():
        if value is not None:
            _store(values, dotted, value, "from the command line", text=isinstance(value, str))
    for name in OPTIONAL_LISTENERS:
        if name in present:
            values[name].setdefault("enabled", True)
    _check_together(values)
    return Settings(
        listener=ListenerSettings(
            **values["listener"],
            tls=TlsListenerSettings(**values["listener.tls"]),
            ws=WsListenerSettings(**values["listener.ws"]),
            wss=WssListenerSettings(**values["listener.wss"]),
        ),
        mqtt=MqttSettings(**values["mqtt"]),
        storage=StorageSettings(**values["storage"]),
        redis=RedisSettings(**values["redis"]),
        kafka=KafkaSettings(
            **values["kafka"], application=KafkaApplicationSettings(**values["kafka.application"])
        ),
        cluster=ClusterSettings(**values["cluster"]),
        log=LogSettings(**values["log"]),
        auth=AuthSettings(
            **values["auth"],
            jwt=JwtAuthSettings(**values["auth.jwt"]),
            http=HttpAuthSettings(**values["auth.http"]),
            x509=X509AuthSettings(**values["auth.x509"]),
        ),
        postgres=PostgresSettings(**values["postgres"]),
        admin=AdminSettings(**values["admin"]),
        mqtt_limit=MqttLimitSettings(
            **values["mqtt_limit"],
            cluster=Quota(**values["mqtt_limit.cluster"]),
            tenant=Quota(**values["mqtt_limit.tenant"]),
        ),
        sys=SysSettings(**values["sys"]),
        events=EventsSettings(**values["events"]),
        blocked=BlockedSettings(**values["blocked"]),
        integration=integrations,
        lake=lake,
    )


def _integration_tables(raw: object, source: str) -> tuple[dict[str, Any], ...]:
    """The `[[integration]]` tables, each checked to be a table (their keys are checked by
    the integrations package at start)."""
    if not isinstance(raw, list):
        raise ConfigError(
            "integration", f"must be an array of tables [[integration]] (in {source})"
        )
    for index, table in enumerate(raw):
        if not isinstance(table, dict):
            raise ConfigError(
                f"integration[{index}]", f"must be a table, got {_describe(table)} (in {source})"
            )
    return tuple(raw)


def _lake_table(raw: object, source: str) -> dict[str, Any]:
    """The `[lake]` table, checked to be a table (its keys are checked by `mqttq lake`)."""
    if not isinstance(raw, dict):
        raise ConfigError("lake", f"must be a table [lake], got {_describe(raw)} (in {source})")
    return raw


def _check_together(values: dict[str, dict[str, Any]]) -> None:
    """Checks that involve more than one key (each key alone is already valid)."""
    for name in TLS_LISTENERS:
        section = values[name]
        if not section.get("enabled"):
            continue
        for key in ("certfile", "keyfile"):
            if not section.get(key, "").strip():
                raise ConfigError(f"{name}.{key}", f"must be set when [{name}] is present")
        if section.get("identity_as_username") and not section.get("cafile", "").strip():
            raise ConfigError(
                f"{name}.identity_as_username",
                f"needs {name}.cafile (client certificates are only asked for with a CA)",
            )
    _check_auth(values)
    if (
        values["storage"].get("log", "none") == "kafka"
        and not values["kafka"].get("bootstrap_servers", "").strip()
    ):
        raise ConfigError(
            "kafka.bootstrap_servers",
            'must be set when storage.log = "kafka" (e.g. bootstrap_servers = "127.0.0.1:9092")',
        )
    app = values["kafka.application"]
    defaults = KafkaApplicationSettings()
    low = app.get("low_watermark", defaults.low_watermark)
    high = app.get("high_watermark", defaults.high_watermark)
    if low >= high:
        raise ConfigError(
            "kafka.application.low_watermark",
            f"must be below kafka.application.high_watermark ({high}), got {low}",
        )


def _check_auth(values: dict[str, dict[str, Any]]) -> None:
    """The providers named in `auth.providers` have what they need."""
    providers = values["auth"].get("providers", AuthSettings().providers)
    if "jwt" in providers:
        jwt = values["auth.jwt"]
        algorithms = jwt.get("algorithms", ())
        if not algorithms:
            raise ConfigError(
                "auth.jwt.algorithms", 'must be set when auth.providers has "jwt" (e.g. ["HS256"])'
            )
        if any(name.startswith("HS") for name in algorithms) and not jwt.get("secret_env"):
            raise ConfigError(
                "auth.jwt.secret_env", "must name the secret's environment variable for HS*"
            )
        asymmetric = [name for name in algorithms if not name.startswith("HS")]
        keys = [k for k in ("public_key_file", "jwks_file", "jwks_url") if jwt.get(k)]
        if asymmetric and not keys:
            raise ConfigError(
                "auth.jwt.public_key_file",
                f"one of public_key_file, jwks_file or jwks_url must be set for {asymmetric[0]}",
            )
    if "http" in providers and not values["auth.http"].get("url", "").strip():
        raise ConfigError("auth.http.url", 'must be set when auth.providers has "http"')


def _read_config(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ConfigFileError(path, "no such file; check the --config path") from None
    except IsADirectoryError:
        raise ConfigFileError(path, "is a directory; give the path of a TOML file") from None
    except PermissionError:
        raise ConfigFileError(path, "permission denied; make it readable") from None
    except UnicodeDecodeError as exc:
        raise ConfigFileError(path, f"not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigFileError(path, exc.strerror or str(exc)) from None


def _apply_toml(
    document: dict[str, Any], values: dict[str, dict[str, Any]], source: str
) -> set[str]:
    """Store every value of `document`; returns the names of the sections it holds."""
    origin = f"in {source}"
    present: set[str] = set()
    for section, table in document.items():
        if section not in _SECTIONS:
            if not isinstance(table, dict):
                raise ConfigError(
                    section,
                    f"settings belong in a section such as [listener] ({origin})"
                    + _suggest(section, by_name=True),
                )
            close = difflib.get_close_matches(section, list(_SECTIONS), n=1)
            hint = f"; did you mean [{close[0]}]?" if close else ""
            raise ConfigError(
                section,
                f"unknown section [{section}] ({origin}){hint}; known sections: "
                + ", ".join(f"[{s}]" for s in _SECTIONS),
            )
        if not isinstance(table, dict):
            raise ConfigError(section, f"must be a table [{section}], got {_describe(table)}")
        subsections = _SUBSECTIONS.get(section, ())
        for key, raw in table.items():
            if key in _RULE_LISTS.get(section, ()):
                values[section][key] = _rule_list(f"{section}.{key}", raw, origin)
            elif key in subsections:
                inner = f"{section}.{key}"
                if not isinstance(raw, dict):
                    raise ConfigError(inner, f"must be a table [{inner}], got {_describe(raw)}")
                present.add(inner)
                for name, value in raw.items():
                    _store(values, f"{inner}.{name}", value, origin, text=False)
            else:
                _store(values, f"{section}.{key}", raw, origin, text=False)
        present.add(section)
    return present


def _rule_list(dotted: str, raw: object, origin: str) -> tuple[AclRule, ...]:
    if not isinstance(raw, list):
        raise ConfigError(dotted, f"must be an array of tables [[{dotted}]] ({origin})")
    rules = []
    for number, table in enumerate(raw, start=1):
        if not isinstance(table, dict):
            raise ConfigError(dotted, f"rule {number} must be a table, got {_describe(table)}")
        try:
            rules.append(parse_rule(table))
        except ValueError as exc:
            raise ConfigError(dotted, f"rule {number}: {exc} ({origin})") from None
    return tuple(rules)


def _store(
    values: dict[str, dict[str, Any]], dotted: str, raw: object, origin: str, *, text: bool
) -> None:
    section, _, name = dotted.rpartition(".")
    kind = _TYPES.get(section, {}).get(name)
    if kind is None:
        spell = env_var_name if origin.startswith("from environment") else None
        raise ConfigError(dotted, f"unknown key ({origin})" + _suggest(dotted, spell=spell))
    try:
        value = _parse_text(kind, raw) if text and isinstance(raw, str) else _check_type(kind, raw)
    except ValueError as exc:
        raise ConfigError(dotted, f"{exc} ({origin})") from None
    if dotted in _NORMALIZE:
        value = _NORMALIZE[dotted](value)
    check = _CHECKS.get(dotted)
    problem = check(value) if check is not None else None
    if problem is not None:
        raise ConfigError(dotted, f"{problem} ({origin})")
    values[section][name] = value


def _check_type(kind: type, raw: object) -> object:
    """A value from TOML or a typed override: the type must already be right."""
    if kind == _STRINGS:
        if isinstance(raw, list | tuple) and all(isinstance(item, str) for item in raw):
            return tuple(raw)
        raise ValueError(f"expected an array of strings, got {_describe(raw)}")
    expected = f"expected {_TYPE_WORDS[kind]}, got {_describe(raw)}"
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        raise ValueError(expected)
    if kind is int:
        # bool is an int subclass in Python; `port = true` is still a mistake.
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        raise ValueError(expected)
    if kind is float:
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            if not math.isfinite(raw):
                raise ValueError(f"must be a finite number, got {raw}")
            return float(raw)
        raise ValueError(expected)
    if kind is Path:
        if isinstance(raw, Path):
            return raw
        if isinstance(raw, str):
            return _parse_text(Path, raw)
        raise ValueError(expected)
    if isinstance(raw, str):
        return raw
    raise ValueError(expected)


def _parse_text(kind: type, raw: str) -> object:
    """A value from an environment variable or a string override."""
    stripped = raw.strip()
    if kind is str:
        return raw
    if kind == _STRINGS:
        # "jwt,credentials"; also a TOML or Python spelling: ["jwt", "credentials"].
        items = (item.strip().strip("'\"").strip() for item in stripped.strip("[]()").split(","))
        return tuple(item for item in items if item)
    if kind is Path:
        if not stripped:
            raise ValueError("must not be empty")
        return Path(raw).expanduser()
    if kind is bool:
        if stripped.lower() in _TRUE_WORDS:
            return True
        if stripped.lower() in _FALSE_WORDS:
            return False
        raise ValueError(f"expected true or false, got {raw!r}")
    if kind is int:
        try:
            return int(stripped, 0) if stripped.lower().startswith("0x") else int(stripped)
        except ValueError:
            raise ValueError(f"expected an integer, got {raw!r}") from None
    try:
        number = float(stripped)
    except ValueError:
        raise ValueError(f"expected a number, got {raw!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"must be a finite number, got {raw!r}")
    return number


def _describe(raw: object) -> str:
    if isinstance(raw, bool):
        return f"boolean {str(raw).lower()}"
    if isinstance(raw, int):
        return f"integer {raw}"
    if isinstance(raw, float):
        return f"float {raw}"
    if isinstance(raw, str):
        return f"string {raw!r}"
    if isinstance(raw, list):
        return "an array"
    if isinstance(raw, dict):
        return "a table"
    return type(raw).__name__


def _suggest(
    dotted: str, *, by_name: bool = False, spell: Callable[[str], str] | None = None
) -> str:
    """A hint for an unknown key: the closest known key, else the section's keys.

    `by_name`: `dotted` is a bare name found outside any section (`port = 1`).
    """
    if by_name:
        section, name = "", dotted
    else:
        section, _, name = dotted.rpartition(".")
    close = [key for key in _ALL_KEYS if key.rpartition(".")[2] == name]
    if not close:
        close = difflib.get_close_matches(dotted, _ALL_KEYS, n=1, cutoff=0.6)
    if not close and section in _TYPES:
        matches = difflib.get_close_matches(name, list(_TYPES[section]), n=1, cutoff=0.5)
        close = [f"{section}.{key}" for key in matches]
    if close:
        return f"; did you mean {(spell or str)(close[0])!r}?"
    if section in _TYPES:
        return f"; known keys in [{section}]: " + ", ".join(_TYPES[section])
    return "; known sections: " + ", ".join(_SECTIONS)


def _in_range(low: float, high: float) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if low <= value <= high:
            return None
        return f"must be between {low} and {high}, got {value}"

    return check


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if value in choices:
            return None
        close = difflib.get_close_matches(value, choices, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"must be one of {', '.join(choices)}, got {value!r}{hint}"

    return check


def _positive(value: Any) -> str | None:
    return None if value > 0 else f"must be greater than 0, got {value}"


def _not_negative(value: Any) -> str | None:
    return None if value >= 0 else f"must be 0 or more, got {value}"


def _not_empty(value: Any) -> str | None:
    return None if str(value).strip() else "must not be empty"


def _url_path(value: Any) -> str | None:
    text = str(value)
    if text.startswith("/") and not any(c.isspace() or c in "?#" for c in text):
        return None
    return f"must be a URL path starting with '/' (no spaces, '?' or '#'), got {value!r}"


def _redis_url(value: Any) -> str | None:
    text = str(value)
    if not text.startswith(("redis://", "rediss://", "unix://")):
        return f"must start with redis://, rediss:// or unix://, got {value!r}"
    try:
        _ = urllib.parse.urlsplit(text).port  # raises as redis-py's URL parser would
    except ValueError:
        return f"must give a port 0..65535 as redis://HOST:PORT/DB, got {value!r}"
    return None


_ENV_SECTIONS: Final = {name.replace(".", "_"): name for name in _SECTIONS}
"""Environment spelling of a section (`MQTTQ_MQTT_LIMIT_CLUSTER__...`) -> its name."""


def _postgres_url(value: Any) -> str | None:
    if not value or str(value).startswith(("postgresql://", "postgres://")):
        return None
    return f"must start with postgresql:// or postgres://, got {value!r}"


_KAFKA_TOPIC_CHARS: Final = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
)


def _kafka_topic_prefix(value: Any) -> str | None:
    # Kafka topic names: [a-zA-Z0-9._-], at most 249 characters; leave room for the rest.
    bad = sorted(set(str(value)) - _KAFKA_TOPIC_CHARS)
    if bad:
        return f"may hold only letters, digits, '.', '_' and '-', got {value!r}"
    if len(str(value)) > 100:
        return f"must be at most 100 characters, got {len(str(value))}"
    return None


def _node_id(value: Any) -> str | None:
    # It names Kafka topics (`<prefix>msg.downlink.basic.<node_id>`): the same characters.
    bad = sorted(set(str(value)) - _KAFKA_TOPIC_CHARS)
    if bad:
        return f"may hold only letters, digits, '.', '_' and '-', got {value!r}"
    if len(str(value)) > 64:
        return f"must be at most 64 characters, got {len(str(value))}"
    return None


def _kafka_retention(value: Any) -> str | None:
    return None if value == -1 or value > 0 else f"must be -1 (forever) or > 0, got {value}"


JWT_ALGORITHMS: Final = (
    *(f"{family}{bits}" for family in ("HS", "RS", "ES", "PS") for bits in (256, 384, 512)),
    "EdDSA",
)
"""What `auth.jwt.algorithms` may list (never `none`)."""


def _providers(value: Any) -> str | None:
    if not value:
        return "must name at least one provider"
    for name in value:
        if name not in PROVIDER_NAMES:
            return _one_of(*PROVIDER_NAMES)(name)
    if len(set(value)) != len(value):
        return f"names a provider twice: {list(value)}"
    return None


def _jwt_algorithms(value: Any) -> str | None:
    for name in value:
        if name not in JWT_ALGORITHMS:
            if name.lower() == "none":
                return "must not list 'none' (unsigned tokens are never accepted)"
            return _one_of(*JWT_ALGORITHMS)(name)
    return None


def _http_url(value: Any) -> str | None:
    if not value or str(value).startswith(("http://", "https://")):
        return None
    return f"must start with http:// or https://, got {value!r}"


def _http_headers(value: Any) -> str | None:
    for header in value:
        name, colon, _ = str(header).partition(":")
        if not colon or not name.strip() or any(c.isspace() for c in name.strip()):
            return f'each header must read "Name: value", got {header!r}'
    return None


def _cn_regex(value: Any) -> str | None:
    if not value:
        return None
    try:
        pattern = re.compile(value)
    except re.error as exc:
        return f"is not a regular expression: {exc}"
    if "cn" not in pattern.groupindex:
        return "needs a named group (?P<cn>...) for the part matched to credentials"
    return None


def _cidrs(value: Any) -> str | None:
    for cidr in value:
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            return f"each entry must be an address or network (CIDR), got {cidr!r}"
    return None


def _event_topic(value: Any) -> str | None:
    text = str(value)
    if "{kind}" not in text or "{client_id}" not in text:
        return f"must hold {{kind}} and {{client_id}}, got {value!r}"
    if any(c in text for c in "+#\0"):
        return f"must not hold '+', '#' or NUL, got {value!r}"
    return None


_NORMALIZE: Final[dict[str, Callable[[Any], Any]]] = {
    "storage.log": str.lower,
    "kafka.application.ack_strategy": str.lower,
    "log.level": str.lower,
    "log.format": str.lower,
    "auth.anonymous": str.lower,
    "auth.store": str.lower,
}
_CHECKS: Final[dict[str, Callable[[Any], str | None]]] = {
    "listener.host": _not_empty,
    "listener.port": _in_range(0, 65535),
    **{f"{name}.port": _in_range(0, 65535) for name in OPTIONAL_LISTENERS},
    **{f"{name}.min_version": _one_of(*TLS_VERSIONS) for name in TLS_LISTENERS},
    "listener.ws.path": _url_path,
    "listener.proxy_trusted": _cidrs,
    "listener.proxy_header_timeout": _positive,
    "sys.interval": _not_negative,
    "blocked.failed_connections": _in_range(0, 1_000_000),
    "blocked.purge_interval": _positive,
    "events.topic": _event_topic,
    "listener.wss.path": _url_path,
    "mqtt.max_keep_alive": _in_range(1, 65535),
    "mqtt.receive_maximum": _in_range(1, 65535),
    "mqtt.max_packet_size": _in_range(1, MAX_PACKET_SIZE_LIMIT),
    "mqtt.topic_alias_maximum": _in_range(0, 65535),
    "mqtt.maximum_qos": _in_range(0, 2),
    "mqtt.max_queued_messages": _in_range(1, 65535),
    "mqtt.queue_full_policy": _one_of(*QUEUE_FULL_POLICIES),
    "mqtt.connect_timeout": _positive,
    "mqtt.max_session_expiry_interval": _in_range(0, 0xFFFFFFFF),
    # A server must accept client ids of 1..23 bytes [MQTT-3.1.3-5]; the field is 2 bytes.
    "mqtt.max_client_id_length": _in_range(23, 65535),
    "storage.data_dir": _not_empty,
    "storage.backend": _one_of(*STORAGE_BACKENDS),
    "storage.commit_interval_ms": _not_negative,
    "storage.device": _one_of(*DEVICE_STORES),
    "redis.url": _redis_url,
    "redis.default_ttl": _positive,
    "redis.flush_commands": _positive,
    "redis.flush_interval_ms": _not_negative,
    "storage.log": _one_of(*MESSAGE_LOGS),
    "kafka.topic_prefix": _kafka_topic_prefix,
    "kafka.produce_timeout_ms": _positive,
    "kafka.msg_all_partitions": _in_range(1, 10_000),
    "kafka.application.max_poll_records": _in_range(1, 100_000),
    "kafka.application.pack_timeout_ms": _positive,
    "kafka.application.ack_strategy": _one_of(*ACK_STRATEGIES),
    "kafka.application.retries": _not_negative,
    "kafka.application.topic_retention_ms": _kafka_retention,
    "kafka.application.topic_segment_bytes": _in_range(14, 2**31 - 1),
    "kafka.application.shared_topic_partitions": _in_range(1, 10_000),
    "kafka.application.high_watermark": _positive,
    "kafka.application.low_watermark": _not_negative,
    "kafka.application.flush_every": _in_range(1, 100_000),
    "cluster.node_id": _node_id,
    "cluster.heartbeat_interval_ms": _in_range(100, 600_000),
    "log.level": _one_of(*LOG_LEVELS),
    "log.format": _one_of(*LOG_FORMATS),
    "auth.anonymous": _one_of(*ANONYMOUS_MODES),
    "auth.store": _one_of(*AUTH_STORES),
    "auth.providers": _providers,
    "auth.cache_ttl": _not_negative,
    "auth.jwt.algorithms": _jwt_algorithms,
    "auth.jwt.token_field": _one_of("password", "username"),
    "auth.jwt.jwks_url": _http_url,
    "auth.jwt.jwks_refresh": _positive,
    "auth.jwt.leeway": _not_negative,
    "auth.http.url": _http_url,
    "auth.http.timeout": _positive,
    "auth.http.headers": _http_headers,
    "auth.http.on_error": _one_of("deny", "skip"),
    "auth.http.error_log_interval": _positive,
    "auth.x509.cn_regex": _cn_regex,
    "postgres.url": _postgres_url,
    "admin.host": _not_empty,
    "admin.port": _in_range(0, 65535),
    "admin.max_request_rate": _positive,
    "admin.session_idle_timeout": _in_range(60, 30 * 86_400),
    "admin.sample_interval": _in_range(1, 60),
    "mqtt_limit.rate_wait_ms": _not_negative,
    "mqtt_limit.burst_seconds": _positive,
    "mqtt_limit.max_tcp_connection_rate": _not_negative,
    **{
        f"mqtt_limit.{layer}.{name}": _not_negative
        for layer in _SUBSECTIONS["mqtt_limit"]
        for name in _TYPES[f"mqtt_limit.{layer}"]
    },
}
