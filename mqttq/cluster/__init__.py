"""Many nodes, one broker: the state and messages nodes share through Kafka (issue 15).

Nodes never talk to each other directly (ARCHITECTURE.md section 5). With
`storage.log = "kafka"` every node:

- replicates three compacted one-partition topics into memory (`compacted.py`):
  `<prefix>client.session` (client id -> where and how its session lives: `records.py`),
  `<prefix>client.subscriptions` (client id -> its whole subscription set) and
  `<prefix>msg.retained` (tenant + topic -> retained message). Its tries hold every
  client's subscriptions; a client whose session record names another node is remote;
- routes what it reads of `msg.all` with those tries and sends a message for a client
  connected to another node through that node's downlink topic (`downlink.py`):
  `<prefix>msg.downlink.basic.<node>` for non-persistent deliveries, and
  `<prefix>msg.downlink.persisted.<node>` for persistent DEVICE ones, which are enqueued
  in Redis first (so the record carries the queued entry's serial and packet id);
- reads every partition of `<prefix>client.session.event` (key = client id): a CONNECT
  writes a connect event and waits to read it back; the node holding an older connection
  of that client disconnects it (`events.py` decides, the same way on every node).

A node whose heartbeat keys expired is gone; the live node with the smallest id ends
its clients' sessions (`dead_nodes.py` decides which, the broker's lifecycle expires them).

Multi-node needs `storage.device = "redis"`: DEVICE queues must be shared.
The broker wires this package in `mqttq.broker.cluster_node`.
"""
