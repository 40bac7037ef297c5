"""Options several commands share, declared once: where the Redis holding the sessions is,
and `--json`.

`mqttq session`, `mqttq cluster status`, `mqttq migrate pg-to-redis` and `mqttq report` take
`--redis URL` (`--cluster` when it names a Redis Cluster node), `--key-prefix` and
`--config`; `resolve_target` completes them from `MQTTQ_REDIS__*` variables and the
`[redis]` section of the config file, checked as `mqttq serve` checks them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Final

import typer

from mqttq.cli.errors import EXIT_CONFIG, print_error
from mqttq.config import load_settings
from mqttq.errors import ConfigError
from mqttq.storage.redis.inspect import RedisTarget

__all__ = [
    "DEFAULT_URL",
    "ClusterOption",
    "ConfigOption",
    "JsonOption",
    "PrefixOption",
    "RedisOption",
    "ReportJsonOption",
    "resolve_target",
]

DEFAULT_URL: Final = "redis://127.0.0.1:6379/0"

RedisOption = Annotated[
    str | None,
    typer.Option(
        "--redis",
        metavar="URL",
        help=f"redis://HOST:PORT/DB of the Redis holding the sessions (else MQTTQ_REDIS__URL, "
        f"else the url of --config's [redis] section, else {DEFAULT_URL}).",
    ),
]
ClusterOption = Annotated[
    bool | None,
    typer.Option(
        "--cluster/--no-cluster",
        help="The URL names a node of a Redis Cluster (else MQTTQ_REDIS__CLUSTER, else the "
        "cluster key of --config).",
    ),
]
PrefixOption = Annotated[
    str | None,
    typer.Option(
        "--key-prefix",
        metavar="PREFIX",
        help="The prefix before every key (else MQTTQ_REDIS__KEY_PREFIX, else the key_prefix "
        "of --config, else none).",
    ),
]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        metavar="PATH",
        help="A broker.toml whose redis section (url, cluster, key_prefix) says where.",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
ReportJsonOption = Annotated[
    bool, typer.Option("--json", help="Print the report as JSON (and no progress bar).")
]


def resolve_target(
    redis: str | None, cluster: bool | None, key_prefix: str | None, config: Path | None
) -> RedisTarget:
    """The flags, completed from the [redis] section of `config`, then from the defaults.

    Read and checked as `mqttq serve` reads them (`load_settings`): a bad URL, value or
    file is one line on stderr and exit 2, before any connection is tried.
    """
    overrides = {"redis.url": redis, "redis.cluster": cluster, "redis.key_prefix": key_prefix}
    try:
        settings = load_settings(config, os.environ, overrides)
    except ConfigError as exc:
        print_error(str(exc))
        raise typer.Exit(EXIT_CONFIG) from None
    section = settings.redis
    return RedisTarget(section.url, section.cluster, section.key_prefix)
