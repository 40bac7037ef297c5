"""The one place a SparkSession is built, and Spark's failures turned into one line.

`build_session` gives the same job a laptop (`local[*]`) or a cluster (`spark://...`,
`yarn`, `k8s://...`) unchanged: on a non-local master the mqttq package itself is shipped
to the executors as a zip, so a job's functions import there as they do here. JVM jars
(the PostgreSQL JDBC driver) come from Maven Central through `spark.jars.packages`, cached
under `~/.cache/mqttq/ivy`. Logs stay quiet: the driver JVM's own output (Ivy's report,
JVM warnings) goes to `~/.cache/mqttq/spark/driver-<pid>.log`, Spark logs errors only, and
Spark's own console progress bar is off: `mqttq.spark.progress` draws a rich one instead.

pyspark is an optional extra: this module imports it only inside functions, and
`require_pyspark` says in one line how to install it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import unquote, urlsplit

from mqttq.errors import MqttqError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_MISSING: Final = (
    "pyspark is not installed: install the Spark extra with pip install -e '.[spark]' "
    "(or pip install 'mqttq[spark]'); Spark also needs Java 17"
)
POSTGRES_JDBC: Final = "org.postgresql:postgresql:42.7.14"
"""Maven coordinates of the PostgreSQL JDBC driver (for `SparkOptions.packages`)."""
IVY_CACHE: Final = Path("~/.cache/mqttq/ivy")
LOG_DIR: Final = Path("~/.cache/mqttq/spark")
LOG4J2_CONFIG: Final = Path(__file__).with_name("log4j2.properties")

_CONF_KEY = re.compile(r"^[A-Za-z0-9_.\-]+$")


class SparkError(MqttqError):
    """Spark cannot run the job: pyspark missing, a bad master or `--conf`, or the job
    failed. The message is one line for the operator (the CLI prints it, exit non-zero)."""


class SparkUsageError(SparkError):
    """A `--master` or `--conf` value that cannot be right (the CLI exits 2, not 1)."""


@dataclass(frozen=True)
class SparkOptions:
    """How to reach Spark: the master URL, extra `--conf` pairs (applied last, so they win),
    whether the web UI runs, the application name and Maven packages for the JVMs."""

    master: str = "local[*]"
    conf: tuple[tuple[str, str], ...] = ()
    ui: bool = False
    app_name: str = "mqttq"
    packages: tuple[str, ...] = ()


def require_pyspark() -> None:
    """Return when pyspark can be imported; else raise `SparkError(SPARK_MISSING)`."""
    if importlib.util.find_spec("pyspark") is None:
        raise SparkError(SPARK_MISSING)


def parse_conf(values: list[str]) -> tuple[tuple[str, str], ...]:
    """Repeated `--conf key=value` options as pairs, in order; a value without `=` or with
    a key that is not a Spark property name raises `SparkError` naming it."""
    pairs: list[tuple[str, str]] = []
    for value in values:
        key, sep, setting = value.partition("=")
        key = key.strip()
        if not sep or not _CONF_KEY.match(key):
            raise SparkUsageError(
                f"bad --conf {value!r}: expected key=value, e.g. spark.executor.memory=2g"
            )
        pairs.append((key, setting))
    return tuple(pairs)


_MASTER = re.compile(
    r"^(local|local\[(\*|\d+)(,\d+)?\]|local-cluster\[\d+,\d+,\d+\]"
    r"|spark://\S+|yarn|k8s://\S+)$"
)


def check_master(master: str) -> None:
    """Raise `SparkUsageError` unless `master` has the form of a Spark master URL."""
    if not _MASTER.match(master):
        raise SparkUsageError(
            f"bad --master {master!r}: expected local[*], local[N], spark://HOST:PORT, "
            "yarn or k8s://https://HOST:PORT"
        )


def is_local_master(master: str) -> bool:
    """True for masters whose executors run in this process (`local`, `local[N]`,
    `local[*]`, `local[N,F]`); `local-cluster[...]` starts separate executor JVMs."""
    return master == "local" or master.startswith("local[")


def is_same_host_master(master: str) -> bool:
    """True when every executor runs on this machine (local or local-cluster), so they
    can use this interpreter."""
    return is_local_master(master) or master.startswith("local-cluster[")


def build_session(options: SparkOptions) -> SparkSession:
    """A SparkSession on `options.master`, quiet, UI off unless asked, with `packages`
    resolved from Maven Central and the user's `conf` applied last.

    On a same-host master the Python workers run `sys.executable`; on any master but
    `local[...]` the mqttq package is shipped to the executors (`addPyFile`). A master or
    conf Spark refuses raises `SparkError` with one line. When this process already runs a
    SparkContext, that one is returned (Spark allows one per process).
    """
    require_pyspark()
    check_master(options.master)
    from pyspark import SparkContext  # noqa: PLC0415 (pyspark is optional)
    from pyspark.sql import SparkSession  # noqa: PLC0415

    running = SparkContext._active_spark_context is not None

    builder = SparkSession.builder.master(options.master).appName(options.app_name)
    log_option = f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()}"
    settings: list[tuple[str, str]] = [
        ("spark.ui.enabled", "true" if options.ui else "false"),
        ("spark.ui.showConsoleProgress", "false"),
        ("spark.jars.ivy", str(IVY_CACHE.expanduser())),
        ("spark.driver.extraJavaOptions", log_option),
        ("spark.executor.extraJavaOptions", log_option),
        # Small jobs on few cores: Spark's default of 200 shuffle partitions is mostly overhead.
        ("spark.sql.shuffle.partitions", "8"),
    ]
    if options.packages:
        settings.append(("spark.jars.packages", ",".join(options.packages)))
    if is_same_host_master(options.master):
        settings += [
            ("spark.pyspark.python", sys.executable),
            ("spark.pyspark.driver.python", sys.executable),
        ]
    for key, value in (*settings, *options.conf):
        builder = builder.config(key, value)
    try:
        with _jvm_output_to(jvm_log_path()):
            spark = builder.getOrCreate()
    except Exception as exc:
        raise SparkError(
            f"cannot start Spark on {options.master!r}: {spark_error_line(exc)}"
        ) from exc
    spark.sparkContext.setLogLevel("ERROR")
    if is_same_host_master(options.master):
        # PySpark starts Python workers with `sc.pythonExec` ($PYSPARK_PYTHON or python3),
        # not with spark.pyspark.python: make it this interpreter and its packages.
        spark.sparkContext.pythonExec = sys.executable
    if not running and not is_local_master(options.master):
        spark.sparkContext.addPyFile(str(package_zip()))
    return spark


def jvm_log_path() -> Path:
    """Where this process's Spark driver JVM writes its own output (Ivy's resolution
    report, JVM warnings): `~/.cache/mqttq/spark/driver-<pid>.log`."""
    return LOG_DIR.expanduser() / f"driver-{os.getpid()}.log"


@contextmanager
def _jvm_output_to(path: Path) -> Iterator[None]:
    """Point file descriptors 1 and 2 at `path` while the driver JVM is spawned (it keeps
    them; this process gets its own back), so the terminal shows only mqttq's output."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(log, 1)
        os.dup2(log, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, log):
            os.close(fd)


@contextmanager
def spark_session(options: SparkOptions) -> Iterator[SparkSession]:
    """`build_session(options)`, stopped at the end unless this process already had a
    running SparkContext (then that one is used as it is, and left running)."""
    require_pyspark()
    from pyspark import SparkContext  # noqa: PLC0415 (pyspark is optional)

    running = SparkContext._active_spark_context is not None
    spark = build_session(options)
    try:
        yield spark
    finally:
        if not running:
            spark.stop()


def package_zip() -> Path:
    """The mqttq package (code and Lua scripts) as a zip for the executors' Python path."""
    root = Path(__file__).resolve().parents[1]
    target = Path(tempfile.mkdtemp(prefix="mqttq-spark-")) / "mqttq.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                archive.write(path, Path("mqttq") / path.relative_to(root))
    return target


def jdbc_options(postgres_url: str) -> dict[str, str]:
    """`postgresql://user:pw@host:port/db?k=v` as Spark JDBC options (url, user, password,
    driver); the query string is kept on the JDBC URL. Raises `SparkError` for another form."""
    parts = urlsplit(postgres_url)
    if parts.scheme not in ("postgresql", "postgres") or not parts.hostname:
        raise SparkError(
            f"bad PostgreSQL URL for Spark: expected postgresql://USER:PASSWORD@HOST:PORT/DB, "
            f"got {redact(postgres_url)!r}"
        )
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    port = f":{parts.port}" if parts.port else ""
    url = f"jdbc:postgresql://{host}{port}{parts.path or '/'}"
    if parts.query:
        url += f"?{parts.query}"
    options = {"url": url, "driver": "org.postgresql.Driver"}
    if parts.username:
        options["user"] = unquote(parts.username)
    if parts.password:
        options["password"] = unquote(parts.password)
    return options


def redact(url: str) -> str:
    """`url` with its password replaced by `***`."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


_JAVA_EXCEPTION = re.compile(r"^(?:[a-z_$][\w$]*\.)+([A-Z][\w$]*(?:Exception|Error)):\s*")
_PYTHON_RAISED = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit):\s")
_NOISE = ("Traceback", "at ", "\tat ", "JVM stacktrace", "Caused by", "...")


def spark_error_line(exc: BaseException) -> str:
    """One line for an error out of Spark: the root cause's message (a Java exception's,
    not its stack trace; PySpark's error class prefix dropped), else `exc`'s own."""
    message = _java_root_message(exc) or str(exc)
    lines = [line.strip() for line in message.splitlines()]
    raised = [line for line in lines if _PYTHON_RAISED.match(line)]
    if "Traceback (most recent call last):" in lines and raised:
        lines = raised[-1:]  # a Python worker's traceback: its last exception line
    wanted = [line for line in lines if line and not line.startswith(_NOISE)]
    text = wanted[0] if wanted else type(exc).__name__
    text = re.sub(r"^\[[A-Z_.]+\]\s*", "", text)
    text = _JAVA_EXCEPTION.sub("", text)
    return " ".join(text.split())[:500] or type(exc).__name__


def _java_root_message(exc: BaseException) -> str | None:
    """The innermost Java cause's message when `exc` carries a Java throwable (Py4J or
    a PySpark captured exception), else None."""
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    if java is None:
        return None
    try:
        cause = java
        while cause.getCause() is not None and cause.getCause() != cause:
            cause = cause.getCause()
        message = cause.getMessage()
        return str(message) if message else str(cause.toString())
    except Exception:  # the gateway may be gone already: fall back on the Python text
        return None
