"""`mqttq serve` settles the heap once started (cli/serve.py `_settle_heap`)."""

from __future__ import annotations

import gc

from mqttq.cli.serve import GC_YOUNG_THRESHOLD, _settle_heap


def test_settling_freezes_what_was_loaded_and_collects_the_young_less_often() -> None:
    threshold = gc.get_threshold()
    gc.unfreeze()
    try:
        loaded: list[list[int]] = [[1], [2]]  # stands for what start() loaded
        assert any(o is loaded for o in gc.get_objects())
        _settle_heap()
        # Frozen: in no generation the collector walks.
        assert not any(o is loaded for o in gc.get_objects())
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *threshold[1:])
        # What comes after stays collectable: a cycle made now is found.
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
