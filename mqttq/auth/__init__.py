"""Client credentials, tenants and access control (issue 5)."""
