"""Routing and delivery: hub.py (route once, deliver or store, complete), intake.py (where an
accepted PUBLISH goes, and what it needs of the hub), publisher.py (what the intake needs
of the client that published), cluster_routes.py (what the hub needs of the cluster),
fanout.py (the deliveries of one message still to settle), tenants.py (one tenant's topic
space), inbox.py (the publish inbox), pending.py (ordered completions, the storage barrier,
enqueue batching), encoded.py (PUBLISH bytes shared by a fan-out), stats.py and latency.py
(counters and storage latency histograms)."""

from __future__ import annotations
