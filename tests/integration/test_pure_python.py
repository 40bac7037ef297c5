"""The compiled modules' own tests, run a second time on pure Python.

The suite runs on whatever build is installed (mypyc-compiled when a C compiler is there).
This runs the codec, protocol and routing tests (unit and Hypothesis property tests), the
broker's unit tests and two files of broker integration tests (persistent sessions and
their backlogs, topic aliases: real brokers, started with MQTTQ_PURE=1) again in a
subprocess that imports those modules from their `.py` sources (tests/pure_python.py), and
checks that every test the installed build collects passed there too, so that both builds
are shown to behave the same. The start-line test shows that the brokers ran pure Python.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mqttq.build import COMPILED_MODULES
from tests.pure_python import REPORT_ENV

REPO = Path(__file__).resolve().parents[2]

PURE_LAYER_TESTS = (
    "tests/unit/test_codec_reader.py",
    "tests/unit/test_codec_writer.py",
    "tests/unit/test_protocol_connect.py",
    "tests/unit/test_protocol_connection.py",
    "tests/unit/test_protocol_inflight.py",
    "tests/unit/test_app_pack.py",
    "tests/unit/test_retained.py",
    "tests/unit/test_router.py",
    "tests/unit/test_topics.py",
    "tests/unit/test_trie.py",
    "tests/property/test_codec_roundtrip.py",
    "tests/property/test_hot_paths.py",
    "tests/property/test_routing_props.py",
    "tests/property/test_state_table.py",
    "tests/unit/test_broker_pending.py",
    "tests/unit/test_cluster_node.py",
    "tests/unit/test_plain_tcp.py",
    "tests/unit/test_sqlite_runs_index.py",
    "tests/property/test_sqlite_runs_props.py",
    "tests/contract/test_sqlite_runs.py",
    "tests/integration/test_session.py",
    "tests/integration/test_aliases.py",
    "tests/unit/test_bench_receive.py",
    # Its start line names the build: "pure (MQTTQ_PURE=1)" here, in the test and the broker.
    "tests/integration/test_cli_serve.py::test_json_logs_on_stderr_at_info",
)
"""The tests of the modules in COMPILED_MODULES (the integration tests' brokers run them)."""


def _pytest(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.timeout(420)  # two pytest runs on a loaded machine: a hang guard, not a speed bound
def test_pure_layer_tests_pass_on_pure_python(tmp_path: Path) -> None:
    collected = _pytest("--collect-only", *PURE_LAYER_TESTS)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    found = re.search(r"^(\d+) tests collected", collected.stdout, re.MULTILINE)
    assert found, collected.stdout
    expected = int(found.group(1))

    report_path = tmp_path / "report.json"
    pure = _pytest(
        "-p",
        "tests.pure_python",
        *PURE_LAYER_TESTS,
        env={**os.environ, REPORT_ENV: str(report_path)},
    )
    assert pure.returncode == 0, pure.stdout[-3000:] + pure.stderr[-3000:]
    report = json.loads(report_path.read_text())
    assert report["from_extension"] == []
    assert report["from_source"] == sorted(COMPILED_MODULES)
    assert report["collected"] == expected
    assert report["outcomes"] == {"passed": expected}
