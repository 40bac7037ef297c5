"""Many nodes, one broker: the state and messages nodes share through Kafka and Redis (issue 15).

Nodes never talk to each other directly (ARCHITECTURE.md section 5). With
`storage.log = "kafka"` every node:

- replicates three compacted one-partition topics into memory:
  `<prefix>client.session` (client id -> where and how its session lives),
  `<prefix>client.subscriptions` (client id -> its whole subscription set) and
  `<prefix>msg.retained` (tenant + topic -> retained message). Its tries hold every
  client's subscriptions; a client whose session record names another node is remote;
- routes what it reads of `msg.all` with those tries and sends a message for a client
  connected to another node through that node's downlink topics:
  `<prefix>msg.downlink.basic.<node>` for non-persistent deliveries, and
  `<prefix>msg.downlink.persisted.<node>` for persistent DEVICE ones, which are enqueued
  in Redis first (so the record carries the queued entry's serial and packet id);
- reads every partition of `<prefix>client.session.event` (key = client id): a CONNECT
  writes a connect event and waits to read it back; the node holding an older connection
  of that client disconnects it, decided the same way on every node;
- writes a heartbeat to Redis; a node whose heartbeat keys expired is gone, and the live
  node with the smallest id ends its clients' sessions (the broker's lifecycle expires them).

The modules, by role:

- Kafka I/O: `link.py` (`ClusterLink`: the one producer, the replicated topics, this node's
  downlinks and the session events, handed decoded to the broker's `ClusterHandlers`),
  `compacted.py` (one compacted topic replicated into memory), `reading.py` (a node's own
  topics read from their end).
- Pure decisions and formats: `records.py` (every record as bytes: `SessionInfo`,
  subscriptions, retained, downlinks), `replica.py` (which compacted records a process
  applies), `takeover.py` (which of racing CONNECTs survives), `dead_nodes.py` (which nodes
  are gone, who cleans up, which sessions that concerns), `nodes.py` (a node's record and
  the per-tenant counts of the others).
- Redis node registry: `keys.py` (its keys), `heartbeat.py` (`NodeHeartbeat`: write this
  node's record, read the others'), `status.py` (the cluster as `mqttq cluster status` and
  `/api/v1/cluster` show it).

Multi-node needs `storage.device = "redis"`: DEVICE queues must be shared.
The broker wires this package in `mqttq.broker.distributed.cluster_node` (what the records mean for
sessions and routing is decided there, never here).
"""

from __future__ import annotations
