"""Integration benchmarks (issue 33): sinks, the bridge, their cost to the broker."""
