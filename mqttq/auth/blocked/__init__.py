"""Blocked clients: entries by client id, user name, address or CIDR, or a regular
expression, each with an optional expiry and a reason (`entries`), matched fast
(`matcher`), kept by a store (`ports`; adapters under mqttq.storage), and asked first by
the authentication chain as the provider "blocked" (`service`)."""

from __future__ import annotations
