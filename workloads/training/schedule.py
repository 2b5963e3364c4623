"""Pipeline-parallel schedules: the order in which a stage runs its micro-batches' passes.

A schedule maps (stage ``s`` of ``p``, ``m`` micro-batches, ``v`` model chunks per stage) to the
stage's ordered list of passes ``("F", mb, chunk)`` / ``("B", mb, chunk)``: with ``v`` chunks
the model's layers form ``p x v`` virtual stages and stage ``s`` holds virtual stages
``s, s + p, ..., s + (v - 1) p`` (Megatron-LM's virtual pipeline). The executor enforces the
order through the stage's compute stream and the data dependencies (a forward waits for the
previous virtual stage's activations, a backward for the next one's gradients), so the bubble
comes out of the simulation, not from a formula.

- ``1f1b`` (PipeDream-Flush, Narayanan et al., "Memory-Efficient Pipeline-Parallel DNN
  Training", ICML 2021; Megatron-LM ``forward_backward_pipelining_without_interleaving``):
  ``min(p - s - 1, m)`` warm-up forwards, then alternating one forward and one backward, then
  the remaining backwards. With forward time ``f`` and backward ``b`` per micro-batch and free
  communication, the step takes ``(m + p - 1)(f + b)`` and the bubble fraction is
  ``(p - 1) / (m + p - 1)`` (Narayanan et al., SC 2021, section 2.2).
- ``gpipe`` (Huang et al., "GPipe", NeurIPS 2019): all forwards, then all backwards in reverse
  order; same bubble as 1F1B with more activations held.
- ``interleaved-1f1b`` (Narayanan et al., SC 2021, section 2.2.2; Megatron-LM
  ``forward_backward_pipelining_with_interleaving``): ``v >= 2`` chunks per stage, ``m`` a
  multiple of ``p``. The ``k``-th forward runs chunk ``(k // p) % v`` of micro-batch
  ``(k // (p v)) p + k % p``; the ``k``-th backward the same micro-batch of chunk
  ``v - 1 - (k // p) % v``. ``2 (p - s - 1) + (v - 1) p`` warm-up forwards (all of them when
  ``m = p``), then one forward one backward, then the remaining backwards. Each chunk takes
  ``1 / v`` of a stage's time, so the bubble shrinks by ``v``: ``(p - 1) / (v m + p - 1)`` of
  the step with free communication.
"""

from __future__ import annotations

from collections.abc import Callable

from podsim.fabric.registry import Registry

__all__ = ["SCHEDULES", "Pass", "schedule"]

Pass = tuple[str, int, int]
Schedule = Callable[[int, int, int, int], list[Pass]]

#: schedule name -> function(stage, stages, microbatches, chunks) -> ordered passes
SCHEDULES: Registry[Schedule] = Registry("pipeline schedule")


@SCHEDULES.register("1f1b", "one forward one backward (PipeDream-Flush, Megatron-LM default)")
def one_f_one_b(stage: int, stages: int, microbatches: int, chunks: int = 1) -> list[Pass]:
    _one_chunk("1f1b", chunks)
    warm = min(stages - stage - 1, microbatches)
    order: list[Pass] = [("F", i, 0) for i in range(warm)]
    f, b = warm, 0
    while f < microbatches:
        order.append(("F", f, 0))
        f += 1
        order.append(("B", b, 0))
        b += 1
    order.extend(("B", i, 0) for i in range(b, microbatches))
    return order


@SCHEDULES.register("gpipe", "all forwards, then all backwards (GPipe)")
def gpipe(stage: int, stages: int, microbatches: int, chunks: int = 1) -> list[Pass]:
    _one_chunk("gpipe", chunks)
    return [("F", i, 0) for i in range(microbatches)] + [
        ("B", i, 0) for i in reversed(range(microbatches))
    ]


@SCHEDULES.register(
    "interleaved-1f1b", "1F1B over v model chunks per stage (Megatron-LM virtual pipeline)"
)
def interleaved_1f1b(stage: int, stages: int, microbatches: int, chunks: int = 2) -> list[Pass]:
    if chunks < 2:
        raise ValueError(f"interleaved-1f1b needs >= 2 model chunks per stage, got {chunks}")
    if microbatches % stages:
        raise ValueError(
            f"interleaved-1f1b needs micro-batches ({microbatches}) to be a multiple of the "
            f"pipeline stages ({stages})"
        )
    total = microbatches * chunks

    def nth(k: int, forward: bool) -> Pass:
        group, within = divmod(k, stages * chunks)
        chunk = within // stages
        mb = group * stages + within % stages
        return ("F", mb, chunk) if forward else ("B", mb, chunks - 1 - chunk)

    if microbatches == stages:
        warm = total
    else:
        warm = min(2 * (stages - stage - 1) + (chunks - 1) * stages, total)
    order = [nth(k, True) for k in range(warm)]
    for k in range(total - warm):
        order += [nth(warm + k, True), nth(k, False)]
    order += [nth(k, False) for k in range(total - warm, total)]
    return order


def _one_chunk(name: str, chunks: int) -> None:
    if chunks != 1:
        raise ValueError(f"{name} runs one model chunk per stage, got {chunks}")


def schedule(name: str, stage: int, stages: int, microbatches: int, chunks: int = 1) -> list[Pass]:
    """The passes of ``stage`` under schedule ``name``; every (micro-batch, chunk) once forward
    and once backward, each backward after its forward."""
    order = SCHEDULES.get(name)(stage, stages, microbatches, chunks)
    seen: set[tuple[int, int]] = set()
    for kind, mb, chunk in order:
        if kind == "B" and (mb, chunk) not in seen:
            raise ValueError(
                f"schedule {name!r}: backward of micro-batch {mb} chunk {chunk} before its forward"
            )
        if kind == "F":
            seen.add((mb, chunk))
    return order
