"""Stored forms shared by adapters: a queued message as TBMQ's JSON (tbmq_json.py), a
session record as JSON (session_json.py), a message as a Kafka record (kafka_record.py), and
the credential and tenant rows of both AuthStore adapters (auth_rows.py)."""

from __future__ import annotations
