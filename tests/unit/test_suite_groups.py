"""The suite's `--dist loadgroup` holds: tests of one `xdist_group` run on one worker, the
group given by a mark in the module or added by a conftest (tests/conftest.py's folder
groups). When it does not, every JVM the suite shares (Kafka, Spark) starts on each worker
and the lake scenario runs twice: nothing fails, the suite just takes minutes longer.
pytest 9.2 with pytest-xdist 3.8 is such a pair (pytest-dev/pytest-xdist#1386), hence the
pin in pyproject.toml; this test is what notices the next one."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

CONFTEST = """
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name == "test_added.py":
            item.add_marker(pytest.mark.xdist_group("added"))
"""

MARKED = """
import pytest

pytestmark = pytest.mark.xdist_group("marked")

@pytest.mark.parametrize("i", range(8))
def test_marked(i):
    pass
"""

ADDED = """
import pytest

@pytest.mark.parametrize("i", range(8))
def test_added(i):
    pass
"""


def test_each_group_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST, "utf-8")
    (tmp_path / "test_marked.py").write_text(MARKED, "utf-8")
    (tmp_path / "test_added.py").write_text(ADDED, "utf-8")
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "-n", "2"),
            *("--dist", "loadgroup", "-o", "addopts=", "--rootdir", str(tmp_path), str(tmp_path)),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, module in re.findall(r"\[(gw\d)\] \[ *\d+%\] PASSED (test_\w+)\.py::", done.stdout):
        workers[module].add(worker)
    assert set(workers) == {"test_marked", "test_added"}, done.stdout
    assert all(len(found) == 1 for found in workers.values()), dict(workers)
