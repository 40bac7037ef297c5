"""`python -m mqttq` runs the CLI."""

from __future__ import annotations

from mqttq.cli import main

main()
