"""A pytest plugin that runs mqttq's compiled modules from their `.py` sources.

`python -m pytest -p tests.pure_python ...` imports every module of
`mqttq.build.COMPILED_MODULES` from its source even where its mypyc extension sits next to
it, and refuses mypyc's shared library, so the tests run on pure Python whatever build is
installed. With MQTTQ_TEST_PURE_REPORT=PATH it writes a JSON report there at the end of the
session: the number of tests collected, their outcomes, and where each of those modules was
loaded from. `tests/integration/test_build.py` runs the pure layers' tests this way.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections import Counter
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

import pytest

from mqttq.build import COMPILED_MODULES, SHARED_LIBRARY, loaded_from_extension

REPORT_ENV = "MQTTQ_TEST_PURE_REPORT"


class _SourceFinder(MetaPathFinder):
    """Finds the compiled modules' `.py` files, ahead of the path finder's extensions."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname == SHARED_LIBRARY:
            raise ImportError(f"{fullname} is compiled code: refused in a pure-Python run")
        if fullname not in COMPILED_MODULES or not path:
            return None
        source = Path(path[0]) / f"{fullname.rpartition('.')[2]}.py"
        return importlib.util.spec_from_file_location(fullname, source)


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
    """Before any conftest (which imports mqttq) is loaded."""
    imported = sorted(name for name in COMPILED_MODULES if name in sys.modules)
    if imported:
        raise pytest.UsageError(f"tests.pure_python came after {imported} were imported")
    sys.meta_path.insert(0, _SourceFinder())


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get(REPORT_ENV)
    if path:
        config.pluginmanager.register(_Report(Path(path)), "mqttq-pure-python-report")
