"""Storage ports (`typing.Protocol`s) and their adapters.

- Ports: ports.py (`Storage`: sessions, retained messages, queues, and its capabilities),
  log_ports.py (`MessageLog`), app_context.py (`AppContextStore`, with its SQLite adapter).
- Embedded: memory.py (the reference adapter), sqlite.py with sqlite_schema.py,
  sqlite_writer.py, sqlite_runs.py, sqlite_bodies.py, sqlite_inbox.py and queue_mirror.py.
- Redis (DEVICE queues, TBMQ 2.x's layout): redis_queue.py, redis_pipeline.py,
  redis_keys.py, redis_sessions.py (operator views); composite.py puts queues in one store
  and the rest in another.
- Kafka: kafka_client.py (the one confluent-kafka wrapper), kafka_log.py (the message log),
  kafka_records.py (a message as a record), app_topics.py and app_inspect.py (APPLICATION
  clients' topics and what an operator sees of them).
- PostgreSQL: app_context_pg.py.
- Stored forms: codec_json.py (a queued message as TBMQ's JSON), session_json.py.

`mqttq.cli.serve` chooses which `Storage` adapter the broker gets.
"""

from __future__ import annotations
