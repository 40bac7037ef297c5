"""The report of `compare.py`: the targets and the Markdown section (not a test).

`evaluate_targets` turns the run records into target rows (mqttq / mosquitto ratios, met or
NOT MET), `render` turns the whole report into the Markdown that `compare.py` writes
between the `compare.py` markers of docs/benchmarks.md (with `harness/page.py`), and
`summary` is the one-line progress of a run. It imports the scenarios from
`harness/scenarios.py`, never `compare.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.harness.scenarios import Scenario

DASH = "\u2013"
"""An en dash marks a value that does not apply or was not measured."""


# --- targets and Markdown -----------------------------------------------------------------


def _get(record: dict[str, Any] | None, *path: str) -> Any:
    value: Any = record.get("bench") if record else None
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _rate_out(record: dict[str, Any]) -> float | None:
    if record["scenario"] == "persistent-qos1":
        value: float | None = _get(record, "persistent", "drain_per_s")
        return value
    rate: float | None = _get(record, "rates", "received_per_s")
    return rate


def _num(value: float | None) -> str:
    return DASH if value is None else f"{value:,.0f}"


def _ms(value: float | None) -> str:
    if value is None:
        return DASH
    return f"{value:.2f}" if value < 10 else f"{value:,.1f}"


@dataclass(frozen=True, slots=True)
class Target:
    """A goal of the issue: mqttq's metric over mosquitto's, bounded by `limit`."""

    label: str
    scenario: str
    metric: tuple[str, ...]
    """Path of the metric in the bench result JSON."""
    at_most: bool
    """True: the ratio must stay <= limit (latency); False: >= limit (throughput)."""
    limit: float
    zero_lost: bool = False


TARGETS = (
    Target(
        "p2p QoS 1 full speed: delivered msg/s, zero lost",
        "p2p-qos1",
        ("rates", "received_per_s"),
        at_most=False,
        limit=0.5,
        zero_lost=True,
    ),
    Target(
        "p2p QoS 1 at 1,000 msg/s: e2e p99 (ms)",
        "p2p-qos1-1k",
        ("latency_ms", "e2e", "p99"),
        at_most=True,
        limit=2.0,
    ),
    Target(
        "fan-out QoS 0: delivered msg/s",
        "fan-out-qos0",
        ("rates", "received_per_s"),
        at_most=False,
        limit=0.5,
    ),
)


def evaluate_targets(
    records: list[dict[str, Any]], variant: str, scenarios: Sequence[Scenario]
) -> list[dict[str, Any]]:
    """Each target for one mqttq variant against mosquitto (met, NOT MET or not run), then
    the QoS 1 losses over `scenarios`: a target for the runs below saturation, a figure for
    the overload."""
    by = {(r["scenario"], r["broker"]): r for r in records}
    rows: list[dict[str, Any]] = []
    for t in TARGETS:
        mq, mo = by.get((t.scenario, variant)), by.get((t.scenario, "mosquitto"))
        a, b = _get(mq, *t.metric), _get(mo, *t.metric)
        ratio = a / b if a is not None and b else None
        status = "not run"
        if mq is not None and mq["error"]:
            status = "NOT MET (mqttq run failed)"
        elif ratio is not None:
            met = ratio <= t.limit if t.at_most else ratio >= t.limit
            if t.zero_lost and _get(mq, "messages", "lost") != 0:
                met = False
            status = "met" if met else "NOT MET"
        need = f"{'<=' if t.at_most else '>='} {t.limit:g}x" + (", 0 lost" if t.zero_lost else "")
        rows.append(
            {"variant": variant, "target": t.label, "mqttq": a, "mosquitto": b,
             "ratio": ratio, "need": need, "status": status}
        )  # fmt: skip
    for overload in (False, True):
        names = {s.name for s in scenarios if s.qos >= 1 and s.overload == overload}
        rows.append(_loss_row(records, variant, names, overload))
    return rows


def _loss_row(
    records: list[dict[str, Any]], variant: str, names: set[str], overload: bool
) -> dict[str, Any]:
    lost = {
        broker: sum(_get(r, "messages", "lost") or 0 for r in records
                    if r["broker"] == broker and r["scenario"] in names)
        for broker in (variant, "mosquitto")
    }  # fmt: skip
    mine = [r for r in records if r["broker"] == variant and r["scenario"] in names]
    if overload:
        label = "QoS 1 lost under overload (fan-in full speed; queue limit drops, see notes)"
        status = "info" if mine else "not run"
    else:
        label = "no QoS 1 message lost (every other QoS 1 run)"
        failed = any(r["error"] for r in mine)
        status = "not run" if not mine else "met" if not lost[variant] and not failed else "NOT MET"
    return {"variant": variant, "target": label, "mqttq": lost[variant],
            "mosquitto": lost["mosquitto"], "ratio": None,
            "need": "-" if overload else "0 lost", "status": status}  # fmt: skip


def render(report: dict[str, Any], scenarios: Sequence[Scenario], payload: int) -> str:
    """The Markdown section for docs/benchmarks.md; `scenarios` give the row titles,
    `payload` is the bench's --payload in bytes."""
    out: list[str] = []
    timing = report["timing"]
    kind = "quick smoke run" if report["quick"] else "full run"
    out.append(f"### Run of {report['date']} ({kind})\n")
    if report["preliminary"]:
        out.append(
            "> **Preliminary.** "
            + ("Short --quick runs; " if report["quick"] else "")
            + f"load average at start {report['load_start']} on {report['machine']['nproc']} "
            "cores: other work shared the machine, so these numbers are noisy and only show "
            "that the comparison runs end to end. Re-run on an idle machine before quoting "
            "them.\n"
        )
    out.append(f"Command: `{report['command']}`\n")
    out.append("| machine | |\n|---|---|")
    for key, value in report["machine"].items():
        out.append(f"| {key} | {value} |")
    out.append(f"| load average at start (1/5/15 min) | {report['load_start']} |")
    out.append(f"| load average at end | {report['load_end']} |")
    out.append(f"| pinning | {report['pinning']} |\n")
    out.append(
        f"Each scenario: {timing['duration']:g} s measured after {timing['warmup']:g} s warm-up "
        "(no warm-up for the full-speed fan-in and fan-out floods; `persistent`: 100 "
        f"messages per subscriber), payload {payload} B, MQTT 5, "
        f"`--inflight {timing['inflight']}` for both brokers, one bench worker process. "
        "A fresh broker (new temporary directory) per scenario.\n"
    )
    out.append(
        "| scenario | broker | msg/s in | msg/s out | e2e p50 | p95 | p99 | max | "
        "PUBACK p50 | p99 | lost | dup | ooo | broker CPU s | msg (in+out) / CPU s | "
        "tool CPU % |"
    )
    out.append("|---|---|" + "---:|" * 14)
    titles = {s.name: s.title for s in scenarios}
    for r in report["runs"]:
        title = titles[r["scenario"]]
        if r["error"]:
            out.append(f"| {title} | {r['broker']} | failed: {r['error']} |" + " |" * 13)
            continue
        msgs = r["bench"]["messages"]
        e2e, ack = r["bench"]["latency_ms"]["e2e"], r["bench"]["latency_ms"]["puback"]
        cpu = r["broker_cpu_s"]
        per_cpu = (msgs["published"] + msgs["received"]) / cpu if cpu > 0 else None
        tool = max((w["cpu_percent"] for w in r["bench"]["tool"]["workers"]), default=0)
        qos0 = r["bench"]["qos"] == 0
        out.append(
            f"| {title} | {r['broker']} | {_num(_get(r, 'rates', 'published_per_s'))} | "
            f"{_num(_rate_out(r))} | {_ms(e2e.get('p50'))} | {_ms(e2e.get('p95'))} | "
            f"{_ms(e2e.get('p99'))} | {_ms(e2e.get('max'))} | "
            f"{DASH if qos0 else _ms(ack.get('p50'))} | {DASH if qos0 else _ms(ack.get('p99'))} | "
            f"{msgs['lost']:,} | {msgs['duplicates']:,} | {msgs['out_of_order']:,} | "
            f"{cpu:.2f} | {_num(per_cpu)} | {tool:.0f}{' (sat.)' if tool > 90 else ''} |"
        )
    out.append(
        "\nLatencies in ms. *msg/s out* is deliveries per second (for `persistent`: the "
        "backlog drain rate, first reconnect to last message; its e2e latency includes the "
        "time spent queued). *ooo* = out of order. *msg (in+out) / CPU s* = (published + "
        "delivered) / broker CPU seconds over the whole bench process (setup and drain "
        "included), as TBMQ counts efficiency. *tool CPU %*: the bench worker's share of its "
        "core; above 90 % (*sat.*) the tool, not the broker, may have been the limit. QoS 0 "
        "may lose messages by design.\n"
    )
    persistent = [
        r for r in report["runs"] if r["scenario"] == "persistent-qos1" and not r["error"]
    ]
    if persistent:
        out.append(
            "| persistent backlog | broker | backlog | sessions present | drain s | drain msg/s "
            "| lost |"
        )
        out.append("|---|---|---:|---:|---:|---:|---:|")
        for r in persistent:
            p = r["bench"]["persistent"]
            out.append(
                f"| 100 sub x 100 msg | {r['broker']} | {p['backlog']:,} | "
                f"{p['sessions_present']} | {_ms(p['drain_s'])} | {_num(p['drain_per_s'])} | "
                f"{r['bench']['messages']['lost']:,} |"
            )
        out.append("")
    out.append("Targets (mqttq / mosquitto):\n")
    out.append("| mqttq variant | target | mqttq | mosquitto | ratio | required | status |")
    out.append("|---|---|---:|---:|---:|---|---|")
    for t in report["targets"]:
        ratio = DASH if t["ratio"] is None else f"{t['ratio']:.2f}x"
        fmt = _ms if "(ms)" in t["target"] else _num
        out.append(
            f"| {t['variant']} | {t['target']} | {fmt(t['mqttq'])} | {fmt(t['mosquitto'])} | "
            f"{ratio} | {t['need']} | **{t['status']}** |"
        )
    busy = "the machine was busy"
    notes = [
        f"{titles[r['scenario']]} / {r['broker']}: {w}"
        for r in report["runs"]
        for w in (_get(r, "warnings") or []) + (_get(r, "errors") or [])[:3]
        if not w.startswith(busy)
    ]
    crowded = [
        r for r in report["runs"] if any(w.startswith(busy) for w in _get(r, "warnings") or [])
    ]
    if crowded:
        notes.append(
            f"{len(crowded)} of {len(report['runs'])} runs saw a 1-minute load average above "
            "the core count (the bench's 'machine was busy' warning); the broker and the tool "
            "themselves make a load of about 2"
        )
    notes += report["notes"]
    if notes:
        out.append("\nWarnings from the runs:\n")
        out.extend(f"- {n}" for n in notes)
    out.append("\nCommands run (PORT is the broker's, TMP its temporary directory):\n")
    out.append("```sh")
    out.extend(report["commands"])
    out.append("```\n")
    out.append("mosquitto.conf (generated per run):\n")
    out.append("```\n" + report["mosquitto_conf"].rstrip() + "\n```")
    return "\n".join(out) + "\n"


def summary(record: dict[str, Any]) -> str:
    """One line on a completed run for the progress log: rates, p99, losses, broker CPU."""
    msgs = record["bench"]["messages"]
    return (
        f"in {_num(_get(record, 'rates', 'published_per_s'))}/s, out {_num(_rate_out(record))}/s, "
        f"p99 {_ms(_get(record, 'latency_ms', 'e2e', 'p99'))} ms, lost {msgs['lost']}, "
        f"broker CPU {record['broker_cpu_s']:.2f} s"
    )
