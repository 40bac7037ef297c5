"""mqttq.build: which modules run compiled, and the stale-extension check.

`test_compiled_modules_are_imported` checks the install these tests run on. It is strict
when MQTTQ_TEST_EXPECT_COMPILED=1 (scripts/test.sh sets it when a C compiler is present and
MQTTQ_COMPILE is not 0): then every module of COMPILED_MODULES must be imported from its
mypyc extension. The others build a fake package directory and never touch the real one.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

from mqttq import build
from mqttq.build import COMPILED_MODULES, SHARED_LIBRARY

EXPECT_COMPILED = os.environ.get("MQTTQ_TEST_EXPECT_COMPILED") == "1"
SUFFIX = EXTENSION_SUFFIXES[0]


def test_compiled_modules_are_imported() -> None:
    for module in COMPILED_MODULES:
        importlib.import_module(module)
    loaded = build.loaded_from_extension()
    assert set(loaded) == set(COMPILED_MODULES)
    if not EXPECT_COMPILED and not any(loaded.values()):
        pytest.skip("a pure-Python install (MQTTQ_TEST_EXPECT_COMPILED is not 1)")
    # A compiled install (expected, or found) has every module compiled, none stale.
    from_source = [module for module, compiled in loaded.items() if not compiled]
    assert from_source == [], "not compiled (the mypyc build failed? `pip install -v -e .`)"
    assert build.describe() == "compiled"
    assert build.stale_modules() == []


def _package(tmp_path: Path, *, compiled: bool, library: bool = True) -> Path:
    """A package directory with every compiled module's source (and extension)."""
    for module in COMPILED_MODULES:
        source = build.source_path(module, tmp_path)
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text("")
        if compiled:
            source.with_name(f"{source.stem}{SUFFIX}").write_bytes(b"")
    if compiled and library:
        (tmp_path / f"{SHARED_LIBRARY.rpartition('.')[2]}{SUFFIX}").write_bytes(b"")
    return tmp_path


def _set_mtime(path: Path, mtime: float) -> None:
    os.utime(path, (mtime, mtime))


def test_pure_package(tmp_path: Path) -> None:
    package = _package(tmp_path, compiled=False)
    assert build.compiled_modules(package) == []
    assert build.stale_modules(package) == []
    assert build.describe(package) == "pure"


def test_fresh_compiled_package(tmp_path: Path) -> None:
    package = _package(tmp_path, compiled=True)
    assert build.compiled_modules(package) == list(COMPILED_MODULES)
    assert build.extension_path("mqttq.codec.reader", package) == (
        package / "codec" / f"reader{SUFFIX}"
    )
    assert build.stale_modules(package) == []
    assert build.describe(package) == "compiled"


def test_source_edited_after_the_build_is_stale(tmp_path: Path) -> None:
    package = _package(tmp_path, compiled=True)
    library = build.extension_path(SHARED_LIBRARY, package)
    assert library is not None
    built = library.stat().st_mtime
    _set_mtime(build.source_path("mqttq.codec.reader", package), built + 60)
    # Within STALE_AFTER of the build: files written by one install, not an edit.
    _set_mtime(build.source_path("mqttq.routing.trie", package), built + 1)
    assert build.stale_modules(package) == ["mqttq.codec.reader"]
    assert build.describe(package) == "compiled+stale"
    with pytest.warns(RuntimeWarning, match=r"mqttq\.codec\.reader.*pip install -e \."):
        build.check(package)


def test_missing_extension_is_partial(tmp_path: Path) -> None:
    package = _package(tmp_path, compiled=True)
    (package / "routing" / f"trie{SUFFIX}").unlink()
    assert "mqttq.routing.trie" not in build.compiled_modules(package)
    assert build.describe(package) == "partial"


def test_shims_without_the_shared_library_are_stale(tmp_path: Path) -> None:
    package = _package(tmp_path, compiled=True, library=False)
    assert build.stale_modules(package) == list(COMPILED_MODULES)
    assert build.describe(package) == "compiled+stale"


def test_check_is_silent_on_a_fresh_build(tmp_path: Path, recwarn: pytest.WarningsRecorder) -> None:
    build.check(_package(tmp_path, compiled=True))
    assert len(recwarn) == 0


def test_mqttq_pure_runs_every_compiled_module_from_its_source() -> None:
    script = (
        "import importlib, json, mqttq.build as b;"
        "[importlib.import_module(m) for m in b.COMPILED_MODULES];"
        "print(json.dumps([b.loaded_from_extension(), b.describe()]))"
    )
    env = {**os.environ, build.PURE_ENV: "1"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    loaded, described = json.loads(done.stdout)
    assert loaded == dict.fromkeys(COMPILED_MODULES, False)
    assert described in {"pure", "pure (MQTTQ_PURE=1)"}  # "pure": nothing is built
