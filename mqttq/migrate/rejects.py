"""Every rejected row, in a file the operator can open (--rejects PATH).

One record per problem: client id, serial number (empty for the session row or the client
id itself), reason and detail, in the order the clients were planned. The format follows
the suffix: `.parquet` (or `.pq`) writes Parquet through pyarrow (the `spark` extra),
anything else CSV with a header. The file is written as the run goes, so it holds every
problem however many (the report lists the first 1,000).
"""

from __future__ import annotations

import csv
import importlib.util
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any, Final

from mqttq.migrate.errors import MigrateError, one_line
from mqttq.migrate.validate import Problem, Reason

COLUMNS: Final = ("client_id", "serial_number", "reason", "detail")
PARQUET_SUFFIXES: Final = (".parquet", ".pq")
PARQUET_MISSING: Final = (
    "Parquet needs pyarrow: install the Spark extra with pip install -e '.[spark]' "
    "(or write CSV: any other suffix)"
)
_PARQUET_BATCH: Final = 10_000


def is_parquet(path: Path) -> bool:
    """True when `path`'s suffix asks for Parquet."""
    return path.suffix.lower() in PARQUET_SUFFIXES


class RejectsFile:
    """The rejects file at `path`, created (replaced) by `open()`; `add` as problems come,
    `close` at the end. `written` counts the records."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.written = 0
        self._csv_file: IO[str] | None = None
        self._csv: Any = None
        self._parquet: Any = None
        self._pending: list[Problem] = []

    def open(self) -> None:
        """Create the file (MigrateError: one line when it cannot be)."""
        try:
            if is_parquet(self.path):
                if importlib.util.find_spec("pyarrow") is None:
                    raise MigrateError(PARQUET_MISSING)
                import pyarrow.parquet as pq  # noqa: PLC0415 (optional)

                self._parquet = pq.ParquetWriter(str(self.path), _arrow_schema())
            else:
                self._csv_file = self.path.open("w", encoding="utf-8", newline="")
                self._csv = csv.writer(self._csv_file)
                self._csv.writerow(COLUMNS)
        except OSError as exc:
            raise MigrateError(
                f"cannot write the rejects file {self.path}: {one_line(exc)}"
            ) from exc

    def add(self, problems: Iterable[Problem]) -> None:
        """Append `problems`."""
        if self._csv is not None:
            for problem in problems:
                self._csv.writerow(
                    (
                        problem.client_id,
                        "" if problem.serial_number is None else problem.serial_number,
                        problem.reason.value,
                        problem.detail,
                    )
                )
                self.written += 1
        elif self._parquet is not None:
            self._pending.extend(problems)
            if len(self._pending) >= _PARQUET_BATCH:
                self._flush_parquet()

    def _flush_parquet(self) -> None:
        import pyarrow as pa  # noqa: PLC0415 (optional)

        rows, self._pending = self._pending, []
        if not rows:
            return
        table = pa.Table.from_pydict(
            {
                "client_id": [p.client_id for p in rows],
                "serial_number": [p.serial_number for p in rows],
                "reason": [p.reason.value for p in rows],
                "detail": [p.detail for p in rows],
            },
            schema=_arrow_schema(),
        )
        self._parquet.write_table(table)
        self.written += len(rows)

    def close(self) -> None:
        """Write what is pending and close the file."""
        if self._parquet is not None:
            self._flush_parquet()
            self._parquet.close()
            self._parquet = None
        if self._csv_file is not None:
            self._csv_file.close()
            self._csv_file, self._csv = None, None


def _arrow_schema() -> Any:
    import pyarrow as pa  # noqa: PLC0415 (optional)

    return pa.schema(
        [
            ("client_id", pa.string()),
            ("serial_number", pa.int64()),
            ("reason", pa.string()),
            ("detail", pa.string()),
        ]
    )


def read_rejects(path: Path) -> list[Problem]:
    """The problems in a rejects file (CSV or Parquet), in file order (tests, tools)."""
    if is_parquet(path):
        import pyarrow.parquet as pq  # noqa: PLC0415 (optional)

        records = pq.read_table(str(path)).to_pylist()
    else:
        with path.open(encoding="utf-8", newline="") as file:
            records = list(csv.DictReader(file))
    return [
        Problem(
            str(r["client_id"]),
            None if r["serial_number"] in (None, "") else int(r["serial_number"]),
            Reason(r["reason"]),
            str(r["detail"]),
        )
        for r in records
    ]
