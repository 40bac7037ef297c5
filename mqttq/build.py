"""Which of mqttq's modules are compiled with mypyc, and whether their compiled form is current.

`setup.py` compiles `COMPILED_MODULES` (the pure codec, protocol and routing layers) into C
extensions placed next to their sources, and Python imports an extension in preference to
the `.py` beside it. An editable install (`pip install -e .`) keeps the extensions in the
source tree, so an edited source would keep running its old extension: `check()` finds that
with a few `stat` calls (it imports none of those modules) and warns, naming the fix.

Stdlib only: `setup.py` and `scripts/run-local.sh` run this file by path, before mqttq is
installed. `python mqttq/build.py` prints one line saying which build the tree holds (run it
by path: `import mqttq` imports this module, so `-m` would run it a second time).
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from collections.abc import Sequence
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec
from pathlib import Path
from typing import Final

COMPILED_MODULES: Final = (
    # The load tool's receive path (`mqttq bench`): per delivered message its client reads
    # the packet and acknowledges it, its subscriber accounts the payload. Interpreted, the
    # tool was slower than the brokers it measures (its core busy through a backlog drain).
    "mqttq.bench.client",
    "mqttq.bench.payload",
    "mqttq.bench.subscriber",
    # The broker's per-message path: a connection's reads and writes, dispatch, routing into
    # sessions, delivery, the storage batchers (about a fifth of a message's CPU once the
    # layers below are compiled; benchmarks/broker_inproc.py).
    "mqttq.broker.connection.client",
    "mqttq.broker.connection.dispatch",
    "mqttq.broker.delivery.encoded",
    "mqttq.broker.delivery.fanout",
    "mqttq.broker.delivery.hub",
    "mqttq.broker.delivery.intake",
    "mqttq.broker.delivery.pending",
    "mqttq.broker.net.plain_tcp",
    # What the packet handlers, the intake and a session need of a connection, and what a
    # session needs of the hub: compiled base classes, so that the calls and reads through
    # them stay native.
    "mqttq.broker.connection.link",
    "mqttq.broker.delivery.publisher",
    "mqttq.broker.sessions.host",
    "mqttq.broker.sessions.outlet",
    "mqttq.broker.sessions.session",
    # Read for every message: the counters it bumps and the tenant space it routes in.
    "mqttq.broker.delivery.stats",
    "mqttq.broker.delivery.tenants",
    "mqttq.codec.enums",
    "mqttq.codec.packets",
    "mqttq.codec.primitives",
    "mqttq.codec.properties",
    "mqttq.codec.reader",
    "mqttq.codec.writer",
    # The per-PUBLISH rate check: two token buckets (node, tenant) for every message.
    "mqttq.limits.bucket",
    "mqttq.limits.limiter",
    # Message and Subscription: routing reads their fields for every message it routes.
    "mqttq.model",
    "mqttq.protocol.aliases",
    "mqttq.protocol.app_pack",
    "mqttq.protocol.connect",
    "mqttq.protocol.connection",
    "mqttq.protocol.inflight",
    "mqttq.protocol.outbound",
    "mqttq.protocol.state",
    # ReasonCode, which the codec and the hot path read (the ground floor under mqttq.errors).
    "mqttq.reasons",
    "mqttq.routing.retained",
    "mqttq.routing.router",
    "mqttq.routing.topics",
    "mqttq.routing.trie",
    # The SQLite store's copy of its queues on the loop: each removal, each reconnect's fetch.
    "mqttq.storage.sqlite.queue_mirror",
    # The SQLite writer's queue index: per queued entry, its packet id, its run, its JSON.
    "mqttq.storage.sqlite.runs",
    # An integration's log (embedded mode): per message routed to it, its record framed and
    # written; per message delivered, taken from memory or read back and decoded.
    "mqttq.integrations.append_log",
    "mqttq.integrations.log_backlog",
    "mqttq.integrations.log_records",
    # A delivery and its JSON envelope: per message a worker takes, per message an HTTP
    # integration sends.
    "mqttq.integrations.record",
    # Delivery in lanes: per delivery a worker keeping several sends in flight takes, its
    # publisher's lane.
    "mqttq.integrations.lanes",
    # A message's fields as one packed header: per record of the Kafka message log, of an
    # integration's log, of a cluster record.
    "mqttq.storage.formats.kafka_record",
)
"""Modules `setup.py` compiles with mypyc: the pure layers (no I/O, no asyncio) and the
broker's hot path, typed throughout. Their
classes must not be subclassed outside this list (a compiled method refuses an instance of
an interpreted subclass). Hence not mqttq.errors: modules that stay interpreted subclass its
exceptions (allowing that takes mypy_extensions at run time), and they are raised only on
error paths."""

SHARED_LIBRARY: Final = "mqttq.compiled__mypyc"
"""The extension holding the code of every compiled module (each module's own extension is
a shim that loads it); named by mypyc from the group name `mqttq.compiled`."""

STALE_AFTER: Final = 2.0
"""Seconds a source may be newer than its extension before it counts as edited since the
build: a wheel install writes the files of one build within moments of each other."""

PACKAGE_DIR: Final = Path(__file__).resolve().parent
"""The directory this mqttq is loaded from; the functions below take another for tests."""


def source_path(module: str, package_dir: Path = PACKAGE_DIR) -> Path:
    """The `.py` file of an mqttq module."""
    return package_dir.joinpath(*module.split(".")[1:]).with_suffix(".py")


def extension_path(module: str, package_dir: Path = PACKAGE_DIR) -> Path | None:
    """The extension Python would import for `module` instead of its source, if any."""
    directory = package_dir.joinpath(*module.split(".")[1:-1])
    name = module.rsplit(".", 1)[1]
    for suffix in EXTENSION_SUFFIXES:
        path = directory / f"{name}{suffix}"
        if path.exists():
            return path
    return None


def compiled_modules(package_dir: Path = PACKAGE_DIR) -> list[str]:
    """The modules of `COMPILED_MODULES` that have an extension next to their source."""
    return [m for m in COMPILED_MODULES if extension_path(m, package_dir) is not None]


def stale_modules(package_dir: Path = PACKAGE_DIR) -> list[str]:
    """Compiled modules whose source changed after their extension was built."""
    compiled = compiled_modules(package_dir)
    library = extension_path(SHARED_LIBRARY, package_dir)
    if library is None:
        return compiled  # shims without the code they load: none of them can work
    built = library.stat().st_mtime + STALE_AFTER
    stale = []
    for module in compiled:
        try:
            if source_path(module, package_dir).stat().st_mtime > built:
                stale.append(module)
        except FileNotFoundError:
            continue  # an installed extension without its source: nothing to compare
    return stale


def loaded_from_extension() -> dict[str, bool]:
    """For each module of `COMPILED_MODULES` imported so far: True when it was loaded from
    its compiled extension, False when from its `.py` source."""
    loaded = {}
    for module in COMPILED_MODULES:
        imported = sys.modules.get(module)
        if imported is not None:
            path = getattr(imported, "__file__", None) or ""
            loaded[module] = path.endswith(tuple(EXTENSION_SUFFIXES))
    return loaded


def describe(package_dir: Path = PACKAGE_DIR) -> str:
    """'compiled', 'pure' or 'partial' (some extensions missing), with '+stale' when a
    compiled module's source is newer than its extension: for `mqttq serve`'s start line."""
    compiled = compiled_modules(package_dir)
    if not compiled:
        return "pure"
    if any(isinstance(finder, _SourceFinder) for finder in sys.meta_path):
        return f"pure ({PURE_ENV}=1)"
    kind = "compiled" if len(compiled) == len(COMPILED_MODULES) else "partial"
    return f"{kind}+stale" if stale_modules(package_dir) else kind


def check(package_dir: Path = PACKAGE_DIR) -> None:
    """Warn (RuntimeWarning) when a compiled module is older than its source: the code that
    runs is not the code in the tree. Called when mqttq is imported."""
    stale = stale_modules(package_dir)
    if stale:
        warnings.warn(
            f"mqttq: compiled modules older than their source ({', '.join(stale)}): the old "
            "code runs. Rebuild with `pip install -e .`, or use pure Python with "
            "`MQTTQ_COMPILE=0 pip install -e .`",
            RuntimeWarning,
            stacklevel=2,
        )


PURE_ENV: Final = "MQTTQ_PURE"
"""`MQTTQ_PURE=1` in the environment: this process (and every mqttq process it starts, which
inherits the variable) runs the compiled modules from their sources, whatever is built."""


class _SourceFinder:
    """Finds the compiled modules' `.py` files ahead of the path finder, which would take the
    extensions next to them; refuses mypyc's shared library."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: object = None
    ) -> ModuleSpec | None:
        if fullname == SHARED_LIBRARY:
            raise ImportError(f"{fullname} is compiled code: refused with {PURE_ENV}=1")
        if fullname not in COMPILED_MODULES or not path:
            return None
        source = Path(path[0]) / f"{fullname.rpartition('.')[2]}.py"
        return importlib.util.spec_from_file_location(fullname, source)


def use_sources() -> None:
    """Import the compiled modules from their sources from now on (before any of them is
    imported: one already loaded stays as it is). Called when mqttq is imported with
    `MQTTQ_PURE=1`."""
    if not any(isinstance(finder, _SourceFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SourceFinder())


def _main(argv: list[str]) -> int:
    # --sources and --fresh are for scripts/run-local.sh.
    if argv == ["--sources"]:  # relative to the repository root
        for module in COMPILED_MODULES:
            print(source_path(module).relative_to(PACKAGE_DIR.parent))
        return 0
    if argv == ["--fresh"]:  # exit status 1 when a compiled module is stale
        return 1 if stale_modules() else 0
    compiled = compiled_modules()
    print(
        f"mqttq {describe()}: {len(compiled)} of {len(COMPILED_MODULES)} modules compiled "
        f"with mypyc, in {PACKAGE_DIR}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
