"""The MQTT bridge: mqttq's link to another MQTT 3.1.1 / 5.0 broker.

- `client.py`: an asyncio MQTT client on mqttq.codec (persistent session, QoS 1 with a
  bounded in-flight window re-sent with DUP after a reconnect, keep-alive, TLS);
- `loop.py`: the loop-prevention rule (the `mqttq-bridge` user property);
- `source.py`: `direction = "in"`, remote filters handed to a callback, each remote PUBLISH
  acknowledged only after the callback returned.

The `direction = "out"` sink is `mqttq.integrations.sinks.mqtt.MqttSink`.
"""

from __future__ import annotations
