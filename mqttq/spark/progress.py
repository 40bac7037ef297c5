"""A rich progress bar driven by Spark's own stage progress (`statusTracker`).

Spark's console bar is off (`mqttq.spark.session`); instead a thread polls the tracker
while a job runs and shows tasks done of tasks known, over every stage seen so far.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from rich.console import Console

POLL_SECONDS: Final = 0.25


@contextmanager
def stage_progress(
    spark: SparkSession, console: Console, description: str, *, enabled: bool = True
) -> Iterator[None]:
    """Show `description` and a bar of Spark tasks (done / total over all stages seen)
    while the body runs. Nothing is drawn when `enabled` is false (e.g. `--json`) or
    `console` is not a terminal."""
    if not enabled or not console.is_terminal:
        yield
        return
    tracker = spark.sparkContext.statusTracker()
    stages: dict[int, tuple[int, int]] = {}
    stop = threading.Event()
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("tasks"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(description, total=None)

        def poll() -> None:
            while not stop.wait(POLL_SECONDS):
                for stage_id in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(stage_id)
                    if info is not None:
                        stages[stage_id] = (info.numCompletedTasks, info.numTasks)
                if stages:
                    done = sum(done for done, _ in stages.values())
                    total = sum(total for _, total in stages.values())
                    progress.update(task, completed=done, total=total)

        thread = threading.Thread(target=poll, name="mqttq-spark-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
