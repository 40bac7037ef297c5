"""mqttq next to Mosquitto on the same machine: throughput, latency, loss, backlog drain
(`compare`) and memory (`memory`); the figures of README's benchmark table."""
