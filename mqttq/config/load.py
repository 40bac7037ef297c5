"""Builds the frozen settings tree (`schema.py`) once from broker.toml, MQTTQ_* env vars and
CLI flags.

Precedence (lowest first): defaults, the TOML file, environment variables
(`MQTTQ_<SECTION>__<KEY>`, e.g. `MQTTQ_MQTT__MAX_KEEP_ALIVE=300`), CLI flags.
Validation names the offending key: `ConfigError("mqtt.max_keep_alive", "must be ...")`.

This module reads the file, the environment and the flags and builds the tree; each value
is read in its type (`value_types`), checked alone (`validators`), then with the others
(`cross_checks`). `keys` says which keys exist; `tables` reads the tables that are not
sections of keys (`[[integration]]`, `[lake]`, `[[auth.anonymous_acl]]`).
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mqttq.config.cross_checks import check_together
from mqttq.config.keys import (
    ENV_PREFIX,
    ENV_SECTIONS,
    OPTIONAL_LISTENERS,
    RULE_LISTS,
    SECTIONS,
    SUBSECTIONS,
    TYPES,
    env_var_name,
    suggest,
)
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
from mqttq.config.tables import integration_tables, lake_table, rule_list
from mqttq.config.validators import CHECKS, NORMALIZE
from mqttq.config.value_types import check_type, describe, parse_text
from mqttq.errors import ConfigError
from mqttq.limits.quota import Quota

__all__ = ["ConfigFileError", "load_settings", "parse_settings"]


class ConfigFileError(ConfigError):
    """The config file cannot be read or is not valid TOML; the message names the file."""

    def __init__(self, path: str | Path, problem: str) -> None:
        super().__init__("config", problem)
        self.path = str(path)
        self.args = (f"config file {self.path}: {problem}",)


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
    values: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
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
        integrations = integration_tables(document.pop("integration", []), source)
        lake = lake_table(document.pop("lake", {}), source)
        present.update(_apply_toml(document, values, source))
    for name in sorted(env):
        if name.startswith(ENV_PREFIX) and "__" in name:
            section, _, key = name[len(ENV_PREFIX) :].partition("__")
            dotted = f"{ENV_SECTIONS.get(section.lower(), section.lower())}.{key.lower()}"
            _store(values, dotted, env[name], f"from environment variable {name}", text=True)
    for dotted, value in overrides.items():
        if value is not None:
            _store(values, dotted, value, "from the command line", text=isinstance(value, str))
    for name in OPTIONAL_LISTENERS:
        if name in present:
            values[name].setdefault("enabled", True)
    check_together(values)
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
        if section not in SECTIONS:
            if not isinstance(table, dict):
                raise ConfigError(
                    section,
                    f"settings belong in a section such as [listener] ({origin})"
                    + suggest(section, by_name=True),
                )
            close = difflib.get_close_matches(section, list(SECTIONS), n=1)
            hint = f"; did you mean [{close[0]}]?" if close else ""
            raise ConfigError(
                section,
                f"unknown section [{section}] ({origin}){hint}; known sections: "
                + ", ".join(f"[{s}]" for s in SECTIONS),
            )
        if not isinstance(table, dict):
            raise ConfigError(section, f"must be a table [{section}], got {describe(table)}")
        subsections = SUBSECTIONS.get(section, ())
        for key, raw in table.items():
            if key in RULE_LISTS.get(section, ()):
                values[section][key] = rule_list(f"{section}.{key}", raw, origin)
            elif key in subsections:
                inner = f"{section}.{key}"
                if not isinstance(raw, dict):
                    raise ConfigError(inner, f"must be a table [{inner}], got {describe(raw)}")
                present.add(inner)
                for name, value in raw.items():
                    _store(values, f"{inner}.{name}", value, origin, text=False)
            else:
                _store(values, f"{section}.{key}", raw, origin, text=False)
        present.add(section)
    return present


def _store(
    values: dict[str, dict[str, Any]], dotted: str, raw: object, origin: str, *, text: bool
) -> None:
    section, _, name = dotted.rpartition(".")
    kind = TYPES.get(section, {}).get(name)
    if kind is None:
        spell = env_var_name if origin.startswith("from environment") else None
        raise ConfigError(dotted, f"unknown key ({origin})" + suggest(dotted, spell=spell))
    try:
        value = parse_text(kind, raw) if text and isinstance(raw, str) else check_type(kind, raw)
    except ValueError as exc:
        raise ConfigError(dotted, f"{exc} ({origin})") from None
    if dotted in NORMALIZE:
        value = NORMALIZE[dotted](value)
    check = CHECKS.get(dotted)
    problem = check(value) if check is not None else None
    if problem is not None:
        raise ConfigError(dotted, f"{problem} ({origin})")
    values[section][name] = value
