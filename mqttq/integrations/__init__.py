"""Integrations: durable consumers of the broker's messages that deliver them to a sink
(an HTTP webhook, Kafka, PostgreSQL, another MQTT broker) instead of a socket.

The pieces, bottom up:
- `record.py`: `Delivery`, one message as an integration hands it to a sink, and the JSON
  envelope every sink that writes JSON uses;
- `sink.py`: the `Sink` port every sink implements, and the two ways a sink says no
  (`SinkUnavailable`: try again later; `SinkRejected`: never, dead-letter it);
- `sinks/`: one module per sink type.
"""

from __future__ import annotations
