"""The page the side-by-side benchmarks write into, and the machine they ran on (not a test).

`compare.py` and `memory.py` (benchmarks/peers/) rewrite their own marked section of
docs/benchmarks.md with `write_section`, and describe the machine of the run with
`machine_info` and `load_average`.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
from pathlib import Path

from benchmarks.harness.brokers import MOSQUITTO, REPO

DOCS = REPO / "docs" / "benchmarks.md"
"""The page whose marked sections `compare.py` and `memory.py` rewrite."""


def machine_info() -> dict[str, str]:
    """What the numbers depend on: cores, CPU, memory, kernel, Python, mosquitto, mqttq."""
    model = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem_kib = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    try:
        mosq = subprocess.run(
            [MOSQUITTO, "-h"], check=False, capture_output=True, text=True, timeout=10
        )
        mosquitto = (mosq.stdout or mosq.stderr).splitlines()[0].strip()
    except (OSError, IndexError, subprocess.TimeoutExpired):
        mosquitto = "not found"
    from mqttq import __version__  # noqa: PLC0415

    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
        check=False,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return {
        "nproc": str(os.cpu_count()),
        "cpu": model,
        "memory": f"{mem_kib / 1024 / 1024:.1f} GiB",
        "kernel": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "mosquitto": mosquitto,
        "mqttq": f"{__version__} (git {commit or 'unknown'}, working tree as run)",
    }


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages, as `uptime` prints them."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def write_section(path: Path, name: str, body: str) -> None:
    """Replace the text between the `<!-- name:begin -->` / `<!-- name:end -->` markers of
    `path` with `body`, or append a marked section when the markers are not there yet."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    block = f"{begin}\n{body.strip()}\n{end}"
    text = path.read_text() if path.exists() else ""
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text, count=1)
    else:
        text = (text.rstrip() + "\n\n" if text.strip() else "") + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
