"""DEVICE queues in Redis or Redis Cluster, in TBMQ 2.x's key layout: queue.py
(`RedisMessageQueue`), pipeline.py (many sessions' calls pipelined), keys.py (the key names),
inspect.py (what `mqttq session` shows). The Lua scripts are in `mqttq/lua/`."""

from __future__ import annotations
