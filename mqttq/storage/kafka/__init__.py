"""Kafka: client.py (the one asyncio wrapper over confluent-kafka), message_log.py
(`KafkaMessageLog`, the `msg.all` log), app_topics.py and app_inspect.py (APPLICATION clients'
topics, and what an operator sees of them)."""

from __future__ import annotations
