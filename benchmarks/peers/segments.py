"""One record out of several `mqttq bench` results against the same broker (not a test).

`compare.py --interleave K` measures each broker in K segments, taking turns with the other
brokers of the run, so that every broker samples the same stretch of the host's noise.
`merge` adds the segments up as if they were one run: message counts and measured seconds
are summed, the latency histograms (`histograms_us`) are merged bucket by bucket, so the
percentiles are those of every sample, not an average of per-segment percentiles.
"""

from __future__ import annotations

from typing import Any

from mqttq.bench.stats import LatencyHistogram


def merge(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The bench result of all `results` (same scenario and options) as one run."""
    if not results:
        raise ValueError("no segments to merge")
    merged = dict(results[0])
    merged["messages"] = {
        key: sum(r["messages"][key] for r in results) for key in results[0]["messages"]
    }
    measured = sum(r["measured_s"] for r in results)
    merged["measured_s"] = round(measured, 3)
    histograms: dict[str, LatencyHistogram] = {}
    for name in results[0]["histograms_us"]:
        histogram = LatencyHistogram()
        for r in results:
            histogram.merge(LatencyHistogram.from_json(r["histograms_us"][name]))
        histograms[name] = histogram
    merged["histograms_us"] = {name: h.to_json() for name, h in histograms.items()}
    merged["latency_ms"] = {name: h.summary_ms() for name, h in histograms.items()}
    merged["rates"] = {key: _weighted(results, key, measured) for key in results[0]["rates"]}
    workers = [w for r in results for w in r["tool"]["workers"]]
    merged["tool"] = {"workers": workers, "saturated": any(r["tool"]["saturated"] for r in results)}
    merged["disconnects"] = sum(r["disconnects"] for r in results)
    merged["warnings"] = [w for r in results for w in r["warnings"]]
    merged["errors"] = [e for r in results for e in r["errors"]]
    merged["segments"] = len(results)
    return merged


def _weighted(results: list[dict[str, Any]], key: str, measured: float) -> float | None:
    """A per-second rate over all segments: each segment's rate weighted by its length."""
    rates: list[tuple[float | None, float]] = [(r["rates"][key], r["measured_s"]) for r in results]
    if measured <= 0:
        return None
    total = 0.0
    for rate, seconds in rates:
        if rate is None:
            return None
        total += rate * seconds
    return round(total / measured, 1)
