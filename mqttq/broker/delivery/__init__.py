"""Routing and delivery: hub.py (route once, deliver or store, complete), tenants.py (one
tenant's topic space), inbox.py (the publish inbox), pending.py (ordered completions, the
storage barrier, enqueue batching), encoded.py (PUBLISH bytes shared by a fan-out),
stats.py and latency.py (counters and storage latency histograms)."""

from __future__ import annotations
