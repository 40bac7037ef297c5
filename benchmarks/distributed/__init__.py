"""The distributed stack, each script starting its own servers: Redis queues, the Kafka
message log, APPLICATION clients, a cluster of nodes, the migration and the Spark reports."""
