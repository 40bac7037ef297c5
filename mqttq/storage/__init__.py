"""Storage ports (`typing.Protocol`s) and their adapters, one sub-package per backend.

- ports.py: every port (`Storage` and its capabilities, `MessageLog`, `AppContextStore`);
  `AuthStore` stays in `mqttq.auth.ports`, on the floor below.
- registry.py: every backend's name, once, read by config validation, `mqttq serve --help`
  and the composition root.
- memory.py (the reference adapter), composite.py (queues in one store, the rest in
  another).
- sqlite/, redis/, kafka/, postgres/: the adapters; formats/: the stored forms they share.

`mqttq.cli.serve` chooses which adapters the broker gets.
"""

from __future__ import annotations
