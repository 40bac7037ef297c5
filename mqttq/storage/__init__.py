"""Storage ports (ports.py) and their adapters (sqlite, memory; redis, kafka, postgres later)."""

from __future__ import annotations
