"""Collectives as operation-graph builders, the way NCCL runs them.

A builder adds one collective over ``ranks`` to an :class:`podsim.workloads.graph.OpGraph` and
returns, per rank, the node at which the collective is done on that rank (the rank may go on
from there). ``start[r]`` (optional) is the node after which rank ``r`` enters the collective.
``nbytes`` follows NCCL's convention (nccl-tests doc/PERFORMANCE.md, "count" x type size): the
per-rank buffer of all-reduce and broadcast, the *input* of reduce-scatter (each rank ends with
``nbytes / n``), the *output* of all-gather (each rank starts with ``nbytes / n``) and the per-rank
send buffer of all-to-all (``nbytes / n`` to each peer).

Algorithms (NCCL, src/device/all_reduce.h, prims; Thakur, Rabenseifner and Gropp, "Optimization
of collective communication operations in MPICH", IJHPCA 2005):

- ``ring``: ranks in the given order form a ring; reduce-scatter and all-gather take ``n - 1``
  steps and all-reduce ``2(n - 1)``; at each step every rank sends one ``nbytes / n`` slice to its
  successor, and it may send step ``k`` once it has received step ``k - 1`` from its predecessor
  (reduction and copy cost no time here: compute nodes can be added by the caller). On an idle
  fabric with per-message time ``t(b) = b / B + a`` all-reduce takes ``2(n - 1) t(nbytes / n)``;
- ``chunk_bytes`` pipelines each step's slice in chunks (NCCL's chunk / slice steps): chunk ``j``
  of step ``k`` waits for chunk ``j`` of step ``k - 1`` from the predecessor and for the rank's own
  chunk ``j - 1`` of step ``k`` (one connection is FIFO);
- ``channels`` splits the buffer over that many parallel rings with the same order (NCCL's
  channels: each rides its own QP, so multipath NICs can spread them);
- ``direct`` all-to-all: every rank sends its ``nbytes / n`` slices to every other rank at once
  (NCCL's all-to-all is grouped send/recv); ``alltoallv`` takes a bytes matrix;
- ``hierarchical`` all-reduce: reduce-scatter inside each group of ``local_size`` consecutive
  ranks (the scale-up domain), ring all-reduce of the ``nbytes / local_size`` shard among the
  ranks with the same local index (the rails), all-gather inside the group again (NCCL's
  hierarchical split; Jeaugey, "Massively scale your deep learning training with NCCL 2.4",
  NVIDIA blog 2019).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from podsim.fabric.registry import Registry
from podsim.workloads.graph import GraphError, OpGraph

__all__ = [
    "BUS_FACTORS",
    "COLLECTIVES",
    "Collective",
    "all_to_all_v",
    "build_collective",
    "ring_steps",
]

#: NCCL's bus-bandwidth factor per op for n ranks (nccl-tests doc/PERFORMANCE.md): busbw =
#: algbw x factor, the share of the buffer each rank's link must carry
BUS_FACTORS: dict[str, Callable[[int], float]] = {
    "all-reduce": lambda n: 2 * (n - 1) / n,
    "reduce-scatter": lambda n: (n - 1) / n,
    "all-gather": lambda n: (n - 1) / n,
    "all-to-all": lambda n: (n - 1) / n,
}


@dataclass(frozen=True)
class Collective:
    """One collective: ``op`` over ``ranks`` (in ring order) of ``nbytes`` (NCCL convention, see
    the module docstring) with ``algorithm``, ``channels`` parallel rings or trees, chunks of
    ``chunk_bytes`` (0: one chunk per step) and, for ``hierarchical``, groups of ``local_size``
    consecutive ranks. ``step``/``layer``/``phase``/``label`` tag its messages."""

    op: str
    ranks: Sequence[int]
    nbytes: int
    algorithm: str = "ring"
    channels: int = 1
    chunk_bytes: int = 0
    local_size: int = 1
    step: int = 0
    layer: int = 0
    phase: str = "other"
    label: str = ""
    tags: Mapping[str, object] = field(default_factory=dict)


Builder = Callable[[OpGraph, Collective, Mapping[int, int]], dict[int, int]]

#: (op/algorithm) -> builder; ``podsim list collectives`` shows them
COLLECTIVES: Registry[Builder] = Registry("collective")


def build_collective(
    g: OpGraph, c: Collective, start: Mapping[int, int] | None = None
) -> dict[int, int]:
    """Add collective ``c`` to ``g`` after ``start[r]`` on each rank; returns rank -> the node
    at which ``c`` is done on that rank."""
    ranks = list(c.ranks)
    if len(set(ranks)) != len(ranks):
        raise GraphError(f"collective {c.op}: a rank appears twice in ranks {ranks}")
    if c.nbytes < 0 or c.channels < 1 or c.chunk_bytes < 0:
        raise GraphError(
            f"collective {c.op}: nbytes {c.nbytes}, channels {c.channels} and chunk_bytes "
            f"{c.chunk_bytes} must be >= 0, >= 1 and >= 0"
        )
    builder = COLLECTIVES.get(f"{c.op}/{c.algorithm}")
    return builder(g, c, dict(start or {}))


def _split(total: int, parts: int) -> list[int]:
    """``total`` bytes in ``parts`` near-equal integer parts (the first ones one byte larger)."""
    q, r = divmod(int(total), parts)
    return [q + (1 if i < r else 0) for i in range(parts)]


def _chunks(nbytes: int, chunk_bytes: int) -> list[int]:
    if chunk_bytes <= 0 or nbytes <= chunk_bytes:
        return [nbytes]
    return _split(nbytes, math.ceil(nbytes / chunk_bytes))


def _entry(g: OpGraph, ranks: Sequence[int], start: Mapping[int, int]) -> dict[int, int]:
    """A zero-time join per rank after its ``start`` node: where the collective begins."""
    return {r: g.join((start[r],) if r in start else (), rank=r) for r in ranks}


def _finish(g: OpGraph, entry: Mapping[int, int], touch: Mapping[int, list[int]]) -> dict[int, int]:
    return {r: g.join((entry[r], *touch.get(r, ())), rank=r) for r in entry}


def ring_steps(
    g: OpGraph,
    c: Collective,
    ranks: Sequence[int],
    slice_bytes: int,
    steps: int,
    entry: Mapping[int, int],
    touch: dict[int, list[int]],
    *,
    reverse: bool = False,
) -> None:
    """``steps`` ring steps over ``ranks``: each rank sends ``slice_bytes`` to its successor per
    step, chunked and pipelined (module docstring). Messages are added to ``touch`` under both
    their ends."""
    n = len(ranks)
    if n < 2 or steps < 1:
        return
    order = list(reversed(ranks)) if reverse else list(ranks)
    chunks = _chunks(slice_bytes, c.chunk_bytes)
    # prev_recv[r][j]: node of chunk j that r received at the previous step
    prev_recv: dict[int, list[int]] = {r: [] for r in order}
    for k in range(steps):
        recv: dict[int, list[int]] = {r: [] for r in order}
        for i, r in enumerate(order):
            nxt = order[(i + 1) % n]
            last_own = entry[r]
            for j, b in enumerate(chunks):
                deps = [last_own]
                if k > 0:
                    deps.append(prev_recv[r][j])
                node = g.send(
                    r,
                    nxt,
                    b,
                    deps,
                    step=c.step,
                    layer=c.layer,
                    phase=c.phase,
                    label=f"{c.label or c.op} step {k} chunk {j} {r}->{nxt}",
                )
                last_own = node
                recv[nxt].append(node)
                touch[r].append(node)
                touch[nxt].append(node)
        prev_recv = recv


def _ring(op: str) -> Builder:
    def build(g: OpGraph, c: Collective, start: Mapping[int, int]) -> dict[int, int]:
        ranks = list(c.ranks)
        n = len(ranks)
        entry = _entry(g, ranks, start)
        touch: dict[int, list[int]] = {r: [] for r in ranks}
        steps = {"all-reduce": 2 * (n - 1), "reduce-scatter": n - 1, "all-gather": n - 1}[op]
        for ch, part in enumerate(_split(c.nbytes, c.channels)):
            ring_steps(g, c, ranks, -(-part // n), steps, entry, touch, reverse=ch % 2 == 1)
        return _finish(g, entry, touch)

    return build


for _op in ("all-reduce", "reduce-scatter", "all-gather"):
    COLLECTIVES.add(f"{_op}/ring", _ring(_op), f"{_op}: ring (NCCL ring algorithm)")


def all_to_all_v(
    g: OpGraph,
    c: Collective,
    matrix: np.ndarray,
    start: Mapping[int, int] | None = None,
) -> dict[int, int]:
    """All-to-all-v: ``matrix[i, j]`` bytes from ``c.ranks[i]`` to ``c.ranks[j]``, all sent at
    once after each sender's start, each in ``c.channels`` parts (one per QP)."""
    ranks = list(c.ranks)
    m = np.asarray(matrix)
    if m.shape != (len(ranks), len(ranks)) or (m < 0).any():
        raise GraphError(
            f"all-to-all-v: the bytes matrix must be {len(ranks)} x {len(ranks)} and >= 0, "
            f"got shape {m.shape}"
        )
    entry = _entry(g, ranks, dict(start or {}))
    touch: dict[int, list[int]] = {r: [] for r in ranks}
    for i, a in enumerate(ranks):
        for j, b in enumerate(ranks):
            if i == j or m[i, j] == 0:
                continue
            for part in _split(int(m[i, j]), c.channels):
                for chunk in _chunks(part, c.chunk_bytes):
                    node = g.send(
                        a,
                        b,
                        chunk,
                        (entry[a],),
                        step=c.step,
                        layer=c.layer,
                        phase=c.phase,
                        label=f"{c.label or c.op} {a}->{b}",
                    )
                    touch[a].append(node)
                    touch[b].append(node)
    return _finish(g, entry, touch)


@COLLECTIVES.register("all-to-all/direct", "all-to-all: every pair at once (NCCL send/recv)")
def _all_to_all(g: OpGraph, c: Collective, start: Mapping[int, int]) -> dict[int, int]:
    n = len(c.ranks)
    m = np.full((n, n), c.nbytes // max(n, 1), dtype=np.int64)
    return all_to_all_v(g, c, m, start)


@COLLECTIVES.register("all-reduce/hierarchical", "all-reduce: scale-up, rails, scale-up")
def _hierarchical(g: OpGraph, c: Collective, start: Mapping[int, int]) -> dict[int, int]:
    ranks = list(c.ranks)
    ls = c.local_size
    if ls < 1 or len(ranks) % ls:
        raise GraphError(
            f"hierarchical all-reduce: local_size {ls} must divide the {len(ranks)} ranks"
        )
    groups = [ranks[i : i + ls] for i in range(0, len(ranks), ls)]
    rails = [[grp[k] for grp in groups] for k in range(ls)]
    shard = -(-c.nbytes // ls)
    here = dict(start)
    for grp in groups:  # reduce-scatter inside each scale-up group
        here.update(build_collective(g, _sub(c, "reduce-scatter", grp, c.nbytes), here))
    for rail in rails:  # all-reduce of each shard across the groups
        here.update(build_collective(g, _sub(c, "all-reduce", rail, shard), here))
    for grp in groups:  # all-gather inside each group
        here.update(build_collective(g, _sub(c, "all-gather", grp, c.nbytes), here))
    return {r: here[r] for r in ranks}


def _sub(c: Collective, op: str, ranks: Sequence[int], nbytes: int) -> Collective:
    return Collective(
        op=op,
        ranks=ranks,
        nbytes=nbytes,
        algorithm="ring",
        channels=c.channels,
        chunk_bytes=c.chunk_bytes,
        step=c.step,
        layer=c.layer,
        phase=c.phase,
        label=f"{c.label or c.op} {op}",
    )
