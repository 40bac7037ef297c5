"""The embedded SQLite adapters: store.py (`SqliteStorage`), with writer.py (the one writer
thread and its group commit), schema.py, runs.py (a queue as runs of entries, compiled),
queue_mirror.py (the queues' copy on the loop, compiled), bodies.py and inbox.py (the
publish inbox's rows); auth.py (`SqliteAuthStore`) and app_context.py
(`SqliteAppContextStore`) in the same data directory."""

from __future__ import annotations
