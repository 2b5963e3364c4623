"""CPython's cyclic garbage collector during a run: long-lived objects are frozen.

A run builds objects that live until it ends (the imported modules, the cluster, the network,
the queue pairs) and then allocates many small ones while its event loop runs. CPython's
collector walks every tracked object of the oldest generation in each full collection, so the
full collections of a run walked the modules and the whole network again and again and found
nothing to free in them; after the loop, one full collection walked and freed the dead network.
Measured on bench_engine.py's 128-host fat-tree all-to-all (CPython 3.11, 2026-12-04): the
collector took 2.3 s of the run's 17.9 s of CPU, 1.7 s of it in 11 full collections, one of
them 0.66 s freeing the 356,000 objects of the dead network.

Inside :func:`run_scope` (:func:`podsim.scenarios.runner.run` opens it):

- everything alive is moved to the collector's permanent generation (``gc.freeze``) when the
  scope starts and at each :func:`checkpoint` (the executor calls it when its event loop starts
  and when it ends), and after each full collection that found no garbage (what it walked was
  all alive: the queue pairs a 128-host all-to-all creates when it posts its messages), so that
  later collections walk only what was allocated since;
- the youngest generation is collected every :data:`YOUNG_THRESHOLD` net allocations instead
  of CPython's 700: a packet run allocates and frees heap entries and packets by the million,
  and most die before a pass would walk them;
- when the scope ends, the threshold is restored and the frozen objects go back to the collector
  (``gc.unfreeze``), which frees the dead ones in a later collection as usual, unless the
  process declared with :func:`process_ends_with_run` that it exits after the run (the
  ``podsim run`` command): then everything stays frozen, and the exit, which frees the
  process's memory anyway, walks none of it either.

What is frozen stays allocated until then if it becomes garbage in a reference cycle (objects
that are not in a cycle are freed by reference counting, frozen or not): a run's dead network
is freed at the end of the run instead of after its event loop (a few percent more peak
memory). A collector switched off (``gc.disable``) or objects frozen by the caller before the
run (``gc.get_freeze_count()``) leave the collector untouched. Same measurement after: the
collector took 0.5 s. Nothing here changes what a run computes: the simulation never looks
at object addresses or at the collector.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["YOUNG_THRESHOLD", "checkpoint", "process_ends_with_run", "run_scope"]

#: net allocations of container objects between two collections of the youngest generation
#: inside a run (CPython's default: 700) [E]: 20,000 took the collector's time on the 128-host
#: all-to-all from 0.92 s (700) to 0.47 s; 7,000 0.54 s, 30,000 0.42 s (2026-12-04)
YOUNG_THRESHOLD = 20_000

_state: dict[str, Any] = {"depth": 0, "ends_with_run": False, "threshold": None}


def process_ends_with_run() -> None:
    """Declare that this process exits when its run ends: :func:`run_scope` then leaves
    everything frozen (the exit frees the memory without the collector walking it)."""
    _state["ends_with_run"] = True


@contextmanager
def run_scope() -> Iterator[None]:
    """The collector policy of a run (module docstring); nested scopes join the outermost."""
    if _state["depth"] == 0 and (not gc.isenabled() or gc.get_freeze_count()):
        yield  # the caller manages the collector: leave it alone
        return
    if _state["depth"] == 0:
        _state["threshold"] = gc.get_threshold()
        gc.set_threshold(YOUNG_THRESHOLD, *_state["threshold"][1:])
        gc.callbacks.append(_after_collection)
    _state["depth"] += 1
    gc.freeze()
    try:
        yield
    finally:
        _state["depth"] -= 1
        if _state["depth"] == 0:
            gc.callbacks.remove(_after_collection)
            gc.set_threshold(*_state["threshold"])
            if _state["ends_with_run"]:
                gc.freeze()
            else:
                gc.unfreeze()


def checkpoint() -> None:
    """Inside a :func:`run_scope`, freeze everything alive now (a no-op outside one)."""
    if _state["depth"] > 0:
        gc.freeze()


def _after_collection(phase: str, info: dict[str, int]) -> None:
    """A full collection that found no garbage walked only live objects: freeze them."""
    if phase == "stop" and info["generation"] == 2 and not info["collected"]:
        gc.freeze()
