"""The tables of broker.toml that are not sections of keys: `[[integration]]` and `[lake]`
(kept as given, checked to be tables; their own packages check their keys) and the ACL
rules of `[[auth.anonymous_acl]]` (each parsed by `mqttq.auth.rules`).
"""

from __future__ import annotations

from typing import Any

from mqttq.auth.rules import AclRule, parse_rule
from mqttq.config.value_types import describe
from mqttq.errors import ConfigError

__all__ = ["integration_tables", "lake_table", "rule_list"]


def integration_tables(raw: object, source: str) -> tuple[dict[str, Any], ...]:
    """The `[[integration]]` tables, each checked to be a table (their keys are checked by
    the integrations package at start)."""
    if not isinstance(raw, list):
        raise ConfigError(
            "integration", f"must be an array of tables [[integration]] (in {source})"
        )
    for index, table in enumerate(raw):
        if not isinstance(table, dict):
            raise ConfigError(
                f"integration[{index}]", f"must be a table, got {describe(table)} (in {source})"
            )
    return tuple(raw)


def lake_table(raw: object, source: str) -> dict[str, Any]:
    """The `[lake]` table, checked to be a table (its keys are checked by `mqttq lake`)."""
    if not isinstance(raw, dict):
        raise ConfigError("lake", f"must be a table [lake], got {describe(raw)} (in {source})")
    return raw


def rule_list(dotted: str, raw: object, origin: str) -> tuple[AclRule, ...]:
    """The ACL rules of `[[dotted]]`, each table parsed; `origin` says where they were read."""
    if not isinstance(raw, list):
        raise ConfigError(dotted, f"must be an array of tables [[{dotted}]] ({origin})")
    rules = []
    for number, table in enumerate(raw, start=1):
        if not isinstance(table, dict):
            raise ConfigError(dotted, f"rule {number} must be a table, got {describe(table)}")
        try:
            rules.append(parse_rule(table))
        except ValueError as exc:
            raise ConfigError(dotted, f"rule {number}: {exc} ({origin})") from None
    return tuple(rules)
