"""Benchmark scripts (never tests), grouped by the question they answer; README.md is the index.

Each script runs from the repository root as `python benchmarks/<group>/<name>.py`; one that
imports from `benchmarks.*` or `tests.*` first puts the repository root on `sys.path`, so
`python -m benchmarks.<group>.<name>` runs it the same way.
"""
