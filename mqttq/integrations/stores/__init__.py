"""Where integrations are kept: the `IntegrationStore` adapters, and their change feed.

- `sqlite.py`: embedded mode, a table `integrations` in `<data_dir>/auth.db` (beside the
  credentials), one node;
- `postgres.py`: distributed mode, a table `mqttq_integration` in the `[postgres] url`
  database, shared by every node, with a LISTEN/NOTIFY change feed.

Both keep the table exactly as given (a `${NAME}` secret stays a template; nothing is masked
here: that is `IntegrationSpec.public()`'s job), with its paused flag, its origin ("config"
or "api") and when it last changed.

The change feed (`watch()`) yields the name of every integration changed by any node (this
one included: `IntegrationManager.sync` of an unchanged integration does nothing), and
`RESYNC` when the feed starts watching and whenever it may have missed changes (after a
reconnection): then every integration may have changed.
"""

from __future__ import annotations

import json
from typing import Any

from mqttq.errors import StorageError
from mqttq.integrations.stored import RESYNC

__all__ = ["RESYNC", "IntegrationStoreError", "decode_table", "encode_table"]


class IntegrationStoreError(StorageError):
    """The store cannot be reached or used; one line naming the store and the reason."""


def encode_table(table: dict[str, Any], where: str) -> str:
    """`table` as JSON text (keys in the order given); IntegrationStoreError when a value
    has no JSON form."""
    try:
        return json.dumps(table, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise IntegrationStoreError(f"{where}: the table has no JSON form: {exc}") from None


def decode_table(value: object, name: str, where: str) -> dict[str, Any]:
    """The stored table of integration `name` (JSON text, or already decoded by the driver);
    IntegrationStoreError when it is not a JSON object."""
    try:
        table = json.loads(value) if isinstance(value, (str, bytes)) else value
    except ValueError as exc:
        raise IntegrationStoreError(
            f"{where}: integration {name!r} is not valid JSON: {exc}"
        ) from None
    if not isinstance(table, dict):
        raise IntegrationStoreError(f"{where}: integration {name!r} is not a JSON object")
    return table
