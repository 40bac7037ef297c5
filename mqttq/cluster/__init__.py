"""Distributed mode: what the nodes of one cluster share through Kafka and Redis."""
