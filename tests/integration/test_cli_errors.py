"""Bad input to any `mqttq` command: one `mqttq: error:` line on stderr, exit 2, no traceback.

Real runs of `python -m mqttq` in a scratch directory. None of these reach a broker or a
Redis: the input is refused before any connection is tried (issue 31, items 2 and 7).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqttq import build


def run_mqttq(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m mqttq ARGS` without the MQTTQ_* settings a developer may have exported."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("MQTTQ_")}
    if build.PURE_ENV in os.environ:  # which build runs, not a setting
        env[build.PURE_ENV] = os.environ[build.PURE_ENV]
    env["COLUMNS"] = "80"
    return subprocess.run(
        [sys.executable, "-m", "mqttq", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def assert_one_error_line(result: subprocess.CompletedProcess[str], code: int) -> str:
    """The run exited `code` with exactly one `mqttq: error:` line; returns that line."""
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("mqttq: error: "), result.stderr
    return lines[0]


# --- item 2: a bad Redis URL ---------------------------------------------------------------

REDIS_COMMANDS = [
    ("session", "ls"),
    ("session", "inspect", "dev-1"),
    ("session", "dump", "dev-1"),
    ("session", "trim", "dev-1", "--keep", "1"),
    ("session", "rm", "dev-1"),
    ("cluster", "status"),
]


@pytest.mark.parametrize("command", REDIS_COMMANDS, ids=" ".join)
def test_a_url_without_a_redis_scheme_is_exit_2(command: tuple[str, ...], tmp_path: Path) -> None:
    line = assert_one_error_line(run_mqttq(*command, "--redis", "notaurl", cwd=tmp_path), 2)
    assert line == (
        "mqttq: error: config key 'redis.url': must start with redis://, rediss:// or "
        "unix://, got 'notaurl' (from the command line)"
    )


@pytest.mark.parametrize(
    ("command", "url"),
    [
        (("session", "ls"), "http://x"),
        (("session", "ls"), "redis://127.0.0.1:notaport/0"),
        (("cluster", "status"), "redis://127.0.0.1:notaport/0"),
        (("session", "inspect", "dev-1"), "redis://127.0.0.1:99999/0"),
    ],
)
def test_a_bad_redis_url_is_exit_2(command: tuple[str, ...], url: str, tmp_path: Path) -> None:
    line = assert_one_error_line(run_mqttq(*command, "--redis", url, cwd=tmp_path), 2)
    assert line.startswith("mqttq: error: config key 'redis.url': ")
    assert repr(url) in line


def test_a_bad_redis_url_in_the_config_file_is_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text('[redis]\nurl = "http://x"\n')
    line = assert_one_error_line(
        run_mqttq("session", "ls", "--config", str(config), cwd=tmp_path), 2
    )
    assert line == (
        "mqttq: error: config key 'redis.url': must start with redis://, rediss:// or "
        f"unix://, got 'http://x' (in {config})"
    )


# --- item 7: usage errors in one style -----------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("serve", "--port", "abc"),
            "mqttq: error: invalid value for '--port': Input should be a valid integer, "
            "unable to parse string as an integer; see 'mqttq serve --help'",
        ),
        (
            ("serve", "--workers", "0"),
            "mqttq: error: invalid value for '--workers': Input should be greater than or "
            "equal to 1; see 'mqttq serve --help'",
        ),
        (("--bogus",), "mqttq: error: no such option: --bogus; see 'mqttq --help'"),
        # No "(Possible options: --host)": the two names share only their dashes.
        (("serve", "--bogus"), "mqttq: error: no such option: --bogus; see 'mqttq serve --help'"),
        (
            ("serve", "--prot", "1"),
            "mqttq: error: no such option: --prot (did you mean --port?); see 'mqttq serve --help'",
        ),
        (
            ("credentials", "add", "alice", "--client-type", "foo"),
            "mqttq: error: invalid value for '--client-type': 'foo' is not one of 'device', "
            "'application'; see 'mqttq credentials add --help'",
        ),
        (
            ("bench", "p2p", "--qos", "3"),
            "mqttq: error: invalid value for '--qos': Input should be less than or equal to 2; "
            "see 'mqttq bench p2p --help'",
        ),
        (
            ("session", "trim", "dev-1"),
            "mqttq: error: missing option '--keep'; see 'mqttq session trim --help'",
        ),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, tuple) else "",
)
def test_a_usage_error_is_one_line_and_exit_2(
    args: tuple[str, ...], expected: str, tmp_path: Path
) -> None:
    result = run_mqttq(*args, cwd=tmp_path)
    assert assert_one_error_line(result, 2) == expected
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == []  # refused before anything was created


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # 4 is 3.1.1's protocol level, not an MQTT version: refused, not taken as 3.1.1.
        (
            ("--protocol", "4"),
            "mqttq: error: --protocol must be 311 (or 3.1.1) or 5 (or 5.0), got '4'",
        ),
        (("--pairs", "0"), "mqttq: error: --pairs must be at least 1, got 0"),
        (("--payload", "10"), "mqttq: error: --payload must be at least 19 bytes, got 10"),
        (("--node-ports", "a,b"), "mqttq: error: --node-ports: expected P1,P2,..., got 'a,b'"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, tuple) else "",
)
def test_a_bad_bench_option_is_exit_2(
    args: tuple[str, ...], expected: str, closed_port: int, tmp_path: Path
) -> None:
    result = run_mqttq("bench", "p2p", "--port", str(closed_port), *args, cwd=tmp_path)
    assert assert_one_error_line(result, 2) == expected


@pytest.mark.parametrize("protocol", ["311", "3.1.1", "5", "5.0"])
def test_bench_takes_the_mqtt_versions(protocol: str, closed_port: int, tmp_path: Path) -> None:
    # The options are accepted: the run starts and fails on the port (a failure of the work).
    args = ("bench", "p2p", "--port", str(closed_port), "--count", "1", "--protocol", protocol)
    line = assert_one_error_line(run_mqttq(*args, cwd=tmp_path), 1)
    assert line == f"mqttq: error: cannot connect to 127.0.0.1:{closed_port}: is a broker running?"


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port bound without listening for as long as the test runs: a connection is refused."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield bound.getsockname()[1]


def test_help_and_version_still_exit_0(tmp_path: Path) -> None:
    assert run_mqttq("--version", cwd=tmp_path).returncode == 0
    for args in (("--help",), ("session", "ls", "--help"), ("bench", "p2p", "--help")):
        result = run_mqttq(*args, cwd=tmp_path)
        assert (result.returncode, result.stderr) == (0, ""), args
        assert "Usage: mqttq" in result.stdout


def test_a_group_without_a_command_prints_its_help_and_exits_2(tmp_path: Path) -> None:
    result = run_mqttq("session", cwd=tmp_path)
    assert result.returncode == 2
    assert "Usage: mqttq session" in result.stdout
    assert "Traceback" not in result.stderr
