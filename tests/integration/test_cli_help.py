"""`mqttq ... --help` as a user reads it (issue 31, item 8).

A flag shows no value type (typer's rich panel printed `<bool>` after `--json` and `--help`),
a description wrapped in the source reads as one sentence, and brackets are text.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.integration.test_cli_errors import run_mqttq

HELP_PAGES = [
    (),
    ("serve",),
    ("session",),
    ("session", "ls"),
    ("session", "rm"),
    ("cluster", "status"),
    ("bench", "p2p"),
    ("credentials", "ls"),
    ("tenant", "ls"),
    ("report",),
]


@pytest.mark.parametrize("command", HELP_PAGES, ids=lambda c: " ".join(c) or "mqttq")
def test_help_shows_no_bool_type_after_flags(command: tuple[str, ...], tmp_path: Path) -> None:
    result = run_mqttq(*command, "--help", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    assert "--help" in result.stdout
    assert "<bool>" not in result.stdout


def _text(help_page: str) -> str:
    """The words of a help page, without the panels' borders and the wrapping."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", help_page).split())


@pytest.mark.parametrize(
    ("command", "sentence"),
    [
        # A docstring's first paragraph, wrapped in the source, in a group's command list.
        (
            ("cluster",),
            "Every node seen: alive, stale (missed a heartbeat) or gone (its keys expired: "
            "killed or cut off; listed for 10 minutes), with its clients, sessions and "
            "consumer lag.",
        ),
        (
            ("bench",),
            "S subscribers with persistent sessions subscribe and go offline; publishers send "
            "--messages each; the subscribers reconnect and the time to drain the backlog is "
            "measured.",
        ),
        # A later paragraph of a command's own page.
        (
            ("session", "ls"),
            "Per session: pending count, last packet id, the age of its oldest and newest "
            "message, the TTL of the newest,",
        ),
        # Brackets are text, not rich markup (which dropped "[kafka]").
        (("session", "ls"), "read through the [kafka] and storage sections of --config."),
        (("report",), "pip install -e '.[spark]'"),
    ],
)
def test_descriptions_read_as_sentences(
    command: tuple[str, ...], sentence: str, tmp_path: Path
) -> None:
    result = run_mqttq(*command, "--help", cwd=tmp_path)
    assert result.returncode == 0
    assert sentence in _text(result.stdout)
    # No line of the page ends inside a sentence where the source's line ended.
    assert not re.search(r"(killed|publishers send|each message must)\s*│?\n", result.stdout)
