"""PostgreSQL: auth.py (`PostgresConnection` and `PostgresAuthStore`: credentials and tenants
shared by every node) and app_context.py (`PostgresAppContextStore`, on the same database)."""

from __future__ import annotations
