"""The broker's side of distributed mode: log_router.py (routing what the message log gives
back), cluster_node.py (this node's side of the cluster), app_log.py, app_session.py and
app_consumer.py (APPLICATION clients on their Kafka topics)."""

from __future__ import annotations
