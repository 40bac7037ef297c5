"""A pytest plugin that runs mqttq's compiled modules from their `.py` sources.

`python -m pytest -p tests.pure_python ...` imports every module of
`mqttq.build.COMPILED_MODULES` from its source even where its mypyc extension sits next to
it, and refuses mypyc's shared library (`mqttq.build.use_sources`, as `MQTTQ_PURE=1` does),
so the tests, and the brokers they start, run on pure Python whatever build is installed.
With MQTTQ_TEST_PURE_REPORT=PATH it writes a JSON report there at the end of the session:
the number of tests collected, their outcomes, and where each of those modules was loaded
from. `tests/integration/test_pure_python.py` runs tests this way.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from mqttq.build import COMPILED_MODULES, PURE_ENV, loaded_from_extension, use_sources

REPORT_ENV = "MQTTQ_TEST_PURE_REPORT"


class _Report:
    """Counts the session's outcomes and writes them, with the modules' origins, as JSON."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.collected = 0
        self.outcomes: Counter[str] = Counter()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = len(session.items)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # A pass counts once (its call); anything else in whichever phase it happened.
        if report.when == "call" or not report.passed:
            self.outcomes[report.outcome] += 1

    def pytest_sessionfinish(self) -> None:
        loaded = loaded_from_extension()
        report = {
            "collected": self.collected,
            "outcomes": dict(self.outcomes),
            "from_source": sorted(name for name, compiled in loaded.items() if not compiled),
            "from_extension": sorted(name for name, compiled in loaded.items() if compiled),
        }
        self.path.write_text(json.dumps(report))


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests() -> None:
    """Before any conftest (which imports mqttq) is loaded. The brokers the tests start
    inherit MQTTQ_PURE=1 and run pure Python too."""
    imported = sorted(name for name in COMPILED_MODULES if name in sys.modules)
    if imported:
        raise pytest.UsageError(f"tests.pure_python came after {imported} were imported")
    os.environ[PURE_ENV] = "1"
    use_sources()


def pytest_sessionstart() -> None:
    """Every compiled module from its source now, also those that only the brokers the
    tests start would use: the report then covers all of them."""
    for module in COMPILED_MODULES:
        importlib.import_module(module)


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get(REPORT_ENV)
    if path:
        config.pluginmanager.register(_Report(Path(path)), "mqttq-pure-python-report")
