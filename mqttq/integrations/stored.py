"""What an integration store keeps (`StoredIntegration`), the `IntegrationStore` port the
manager uses, and `RESYNC`, the change feed's "reload them all". Here, below both the
manager and the adapters in `stores/`, so that neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Protocol

__all__ = ["RESYNC", "IntegrationStore", "StoredIntegration"]

RESYNC: Final = "*"
"""What a feed yields for "reload them all" (never a name: names are [a-z0-9-]+)."""


@dataclass(slots=True)
class StoredIntegration:
    """One integration as the store keeps it: the table as given (secrets as `${NAME}`
    templates or as typed), whether it is paused, and where it came from."""

    name: str
    table: dict[str, Any]
    paused: bool = False
    origin: str = "api"
    """"config" (a [[integration]] table of the config file) or "api"."""
    updated_at: float = 0.0


class IntegrationStore(Protocol):
    """Where integrations are kept between starts (and shared by a cluster's nodes)."""

    async def load(self) -> list[StoredIntegration]: ...

    async def save(self, stored: StoredIntegration) -> None:
        """Insert or replace by name."""
        ...

    async def delete(self, name: str) -> bool:
        """Remove; False when there was none."""
        ...
