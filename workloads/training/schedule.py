"""Pipeline-parallel schedules: the order in which a stage runs its micro-batches' passes.

A schedule maps (stage ``s`` of ``p``, ``m`` micro-batches) to the stage's ordered list of
``("F", mb)`` / ``("B", mb)``. The executor enforces the order through the stage's compute
stream and the data dependencies (a forward waits for the previous stage's activations, a
backward for the next stage's gradients), so the bubble comes out of the simulation, not from a
formula.

- ``1f1b`` (PipeDream-Flush, Narayanan et al., "Memory-Efficient Pipeline-Parallel DNN
  Training", ICML 2021; Megatron-LM ``forward_backward_pipelining_without_interleaving``):
  ``min(p - s - 1, m)`` warm-up forwards, then alternating one forward and one backward, then
  the remaining backwards. With forward time ``f`` and backward ``b`` per micro-batch and free
  communication, the step takes ``(m + p - 1)(f + b)`` and the bubble fraction is
  ``(p - 1) / (m + p - 1)`` (Narayanan et al., SC 2021, section 2.2).
- ``gpipe`` (Huang et al., "GPipe", NeurIPS 2019): all forwards, then all backwards in reverse
  order; same bubble as 1F1B with more activations held.
"""

from __future__ import annotations

from collections.abc import Callable

from podsim.fabric.registry import Registry

__all__ = ["SCHEDULES", "Pass", "schedule"]

Pass = tuple[str, int]
Schedule = Callable[[int, int, int], list[Pass]]

#: schedule name -> function(stage, stages, microbatches) -> ordered passes
SCHEDULES: Registry[Schedule] = Registry("pipeline schedule")


@SCHEDULES.register("1f1b", "one forward one backward (PipeDream-Flush, Megatron-LM default)")
def one_f_one_b(stage: int, stages: int, microbatches: int) -> list[Pass]:
    warm = min(stages - stage - 1, microbatches)
    order: list[Pass] = [("F", i) for i in range(warm)]
    f, b = warm, 0
    while f < microbatches:
        order.append(("F", f))
        f += 1
        order.append(("B", b))
        b += 1
    order.extend(("B", i) for i in range(b, microbatches))
    return order


@SCHEDULES.register("gpipe", "all forwards, then all backwards (GPipe)")
def gpipe(stage: int, stages: int, microbatches: int) -> list[Pass]:
    return [("F", i) for i in range(microbatches)] + [
        ("B", i) for i in reversed(range(microbatches))
    ]


def schedule(name: str, stage: int, stages: int, microbatches: int) -> list[Pass]:
    """The passes of ``stage`` under schedule ``name``; every micro-batch once forward and once
    backward, each backward after its forward."""
    order = SCHEDULES.get(name)(stage, stages, microbatches)
    seen: set[int] = set()
    for kind, mb in order:
        if kind == "B" and mb not in seen:
            raise ValueError(f"schedule {name!r}: backward of micro-batch {mb} before its forward")
        if kind == "F":
            seen.add(mb)
    return order
