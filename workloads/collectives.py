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
  NVIDIA blog 2019); ``reduce-scatter/hierarchical`` (scale-up, then rails),
  ``all-gather/hierarchical`` (rails, then scale-up) and ``all-to-all/hierarchical`` (scale-up
  exchange, then rails, as NCCL's PXN) split the same way; ``all-to-all/pipelined`` runs the
  same two hops with the second forwarding as the first delivers (DeepEP's normal kernels);
- ``tree`` all-reduce: NCCL's double binary tree (src/graph/trees.cc; Jeaugey, same blog): two
  complementary binary trees each carry half the buffer, reduce up then broadcast down, chunk
  pipelined; ``(2 H + k - 1) t(c)`` with ``H = floor(log2 n)`` on an idle transport
  (:func:`_tree_all_reduce`);
- ``broadcast/ring`` and ``reduce/ring``: a pipelined chain from (to) ``root`` along the ring
  (NCCL src/device/broadcast.h, reduce.h): ``(n - 2 + k) t(c)`` with ``k`` chunks of ``c``;
- ``send-recv/direct``: ``peers`` (src, dst) pairs, or every rank to the one ``shift`` places on
  in ``ranks`` (nccl-tests sendrecv), each sending ``nbytes`` at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from podsim.fabric.registry import Registry
from podsim.workloads.graph import GraphError, OpGraph

__all__ = [
    "BUS_FACTORS",
    "COLLECTIVES",
    "DEFAULT_ALGORITHMS",
    "Collective",
    "all_to_all_v",
    "binary_tree",
    "build_collective",
    "double_binary_tree",
    "in_groups",
    "ring_steps",
    "two_hop_matrices",
]

#: NCCL's bus-bandwidth factor per op for n ranks (nccl-tests doc/PERFORMANCE.md): busbw =
#: algbw x factor, the share of the buffer each rank's link must carry
BUS_FACTORS: dict[str, Callable[[int], float]] = {
    "all-reduce": lambda n: 2 * (n - 1) / n,
    "reduce-scatter": lambda n: (n - 1) / n,
    "all-gather": lambda n: (n - 1) / n,
    "all-to-all": lambda n: (n - 1) / n,
    # PERFORMANCE.md: broadcast and reduce move the whole buffer over each link once
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    # nccl-tests src/sendrecv.cu (SendRecvGetBw): busbw = algbw
    "send-recv": lambda n: 1.0,
}

#: the algorithm an op runs when none is named: NCCL's ring where it has one, else direct
DEFAULT_ALGORITHMS: dict[str, str] = {
    "all-reduce": "ring",
    "reduce-scatter": "ring",
    "all-gather": "ring",
    "broadcast": "ring",
    "reduce": "ring",
    "all-to-all": "direct",
    "send-recv": "direct",
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
    #: broadcast / reduce: the root rank (None: ``ranks[0]``)
    root: int | None = None
    #: send-recv: (src, dst) pairs, each sending ``nbytes``; empty: every ``ranks[i]`` sends to
    #: ``ranks[(i + shift) % n]`` (nccl-tests sendrecv's pattern with shift 1)
    peers: Sequence[tuple[int, int]] = ()
    shift: int = 1
    #: all-to-all: ``matrix[i, j]`` bytes from ``ranks[i]`` to ``ranks[j]`` instead of
    #: ``nbytes / n`` to every peer (all-to-all-v; ``direct``, ``hierarchical``, ``pipelined``);
    #: None: uniform
    matrix: np.ndarray | None = field(default=None, compare=False)


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
    if c.matrix is not None and c.op != "all-to-all":
        raise GraphError(f"collective {c.op}: a bytes matrix applies to all-to-all only")
    builder = COLLECTIVES.get(f"{c.op}/{c.algorithm}")
    return builder(g, c, dict(start or {}))


def in_groups(
    g: OpGraph,
    c: Collective,
    groups: Sequence[Sequence[int]],
    cur: MutableMapping[int, int],
    *,
    span: str | None = None,
    span_bytes: int | None = None,
    matrices: Sequence[np.ndarray] | None = None,
    **tags: Any,
) -> None:
    """Run ``c`` (its ``ranks`` ignored) once in each group of ``groups``, every rank entering
    after ``cur[r]``; ``cur[r]`` becomes the node at which the collective is done on ``r``.
    Groups of one rank and empty buffers are skipped. ``span``: record on every rank a span of
    that phase from entry to done, with ``bytes_out = bytes_in = span_bytes`` (default
    ``c.nbytes``) and ``tags``. ``matrices`` (all-to-all): one bytes matrix per group (the
    collective's ``matrix``); a span then records what the rank sends and receives, its own
    share (the diagonal) left out. The per-layer TP and EP traffic of the training step and of
    the serving instances are built with it (one way to lay collectives over parallel
    groups)."""
    if c.nbytes <= 0 and matrices is None:
        return
    moved = c.nbytes if span_bytes is None else span_bytes
    for i, grp in enumerate(groups):
        if len(grp) < 2:
            continue
        before = {r: cur[r] for r in grp}
        sub = replace(c, ranks=list(grp))
        out = inn = [moved] * len(grp)
        if matrices is not None:
            m = np.asarray(matrices[i])
            sub = replace(sub, matrix=m)
            own = np.diagonal(m)
            out = (m.sum(axis=1) - own).tolist()
            inn = (m.sum(axis=0) - own).tolist()
        done = build_collective(g, sub, before)
        for j, r in enumerate(grp):
            if span is not None:
                g.span(r, before[r], done[r], phase=span, bytes_out=out[j], bytes_in=inn[j],
                       **tags)  # fmt: skip
            cur[r] = done[r]


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
                    label=f"{c.label or c.op} step {k} chunk {j}",
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
    return _finish(g, entry, _a2a_sends(g, c, ranks, m, entry))


def _a2a_sends(
    g: OpGraph, c: Collective, ranks: list[int], m: np.ndarray, entry: Mapping[int, int]
) -> dict[int, list[int]]:
    """The sends of :func:`all_to_all_v`, added at once (:meth:`OpGraph.sends`): every
    (sender, receiver, channel part, chunk) in that nesting order, each after its sender's
    entry. Returns the nodes each rank touches. :func:`_a2a_sends_readable` is the same, one
    send at a time (a differential test runs both)."""
    r = np.asarray(ranks, dtype=np.int64)
    i, j = np.nonzero((m > 0) & ~np.eye(len(ranks), dtype=bool))
    q, rem = np.divmod(m[i, j].astype(np.int64), c.channels)
    nb = (q[:, None] + (np.arange(c.channels)[None, :] < rem[:, None])).ravel()  # _split
    i, j = np.repeat(i, c.channels), np.repeat(j, c.channels)
    if c.chunk_bytes > 0 and (nb > c.chunk_bytes).any():
        pieces = [_chunks(int(b), c.chunk_bytes) for b in nb.tolist()]
        per = np.array([len(p) for p in pieces], dtype=np.int64)
        i, j = np.repeat(i, per), np.repeat(j, per)
        nb = np.fromiter((b for p in pieces for b in p), dtype=np.int64, count=int(per.sum()))
    src, dst = r[i], r[j]
    after = np.array([entry[a] for a in ranks], dtype=np.int64)[i]
    nodes = g.sends(src, dst, nb, after, step=c.step, layer=c.layer, phase=c.phase,
                    label=c.label or c.op)  # fmt: skip
    return {a: nodes[(src == a) | (dst == a)].tolist() for a in ranks}


def _a2a_sends_readable(
    g: OpGraph, c: Collective, ranks: list[int], m: np.ndarray, entry: Mapping[int, int]
) -> dict[int, list[int]]:
    """:func:`_a2a_sends`, one :meth:`OpGraph.send` at a time."""
    touch: dict[int, list[int]] = {r: [] for r in ranks}
    for i, a in enumerate(ranks):
        for j, b in enumerate(ranks):
            if i == j or m[i, j] == 0:
                continue
            for part in _split(int(m[i, j]), c.channels):
                for chunk in _chunks(part, c.chunk_bytes):
                    node = g.send(a, b, chunk, (entry[a],), step=c.step, layer=c.layer,
                                  phase=c.phase, label=c.label or c.op)  # fmt: skip
                    touch[a].append(node)
                    touch[b].append(node)
    return touch


@COLLECTIVES.register("all-to-all/direct", "all-to-all: every pair at once (NCCL send/recv)")
def _all_to_all(g: OpGraph, c: Collective, start: Mapping[int, int]) -> dict[int, int]:
    if c.matrix is not None:
        return all_to_all_v(g, c, c.matrix, start)
    n = len(c.ranks)
    m = np.full((n, n), c.nbytes // max(n, 1), dtype=np.int64)
    return all_to_all_v(g, c, m, start)


@COLLECTIVES.register("all-reduce/hierarchical", "all-reduce: scale-up, rails, scale-up")
def _hierarchical(g: OpGraph, c: Collective, start: Mapping[int, int]) -> dict[int, int]:
    groups, rails = _groups(c)
    shard = -(-c.nbytes // c.local_size)
    here = dict(start)
    for grp in groups:  # reduce-scatter inside each scale-up group
        here.update(build_collective(g, _sub(c, "reduce-scatter", grp, c.nbytes), here))
    for rail in rails:  # all-reduce of each shard across the groups
        here.update(build_collective(g, _sub(c, "all-reduce", rail, shard), here))
    for grp in groups:  # all-gather inside each group
        here.update(build_collective(g, _sub(c, "all-gather", grp, c.nbytes), here))
    return {r: here[r] for r in c.ranks}


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


# -- trees ----------------------------------------------------------------------------------


def binary_tree(n: int) -> list[int]:
    """Parent of each position ``0 .. n - 1`` (-1: the root) in the in-order binary tree NCCL's
    tree algorithm uses (src/graph/trees.cc, ncclGetBtree): with 1-based positions, the root of
    an interval is the position whose lowest set bit is highest, recursively on each side.
    Every odd 1-based (even 0-based) position is a leaf and the tree is ``floor(log2 n)`` edges
    deep."""
    parent = [-1] * n
    todo = [(1, n, -1)]  # (lo, hi, parent position), 1-based inclusive; no recursion
    while todo:
        lo, hi, up = todo.pop()
        if lo > hi:
            continue
        b = 1 << (hi.bit_length() - 1)
        while (hi // b) * b < lo:
            b >>= 1
        r = (hi // b) * b
        parent[r - 1] = up
        todo.append((lo, r - 1, r - 1))
        todo.append((r + 1, hi, r - 1))
    return parent


def double_binary_tree(n: int) -> tuple[list[int], list[int]]:
    """The two complementary trees of NCCL's double binary tree (src/graph/trees.cc,
    ncclGetDtree; Sanders, Speck and Traeff, "Two-tree algorithms for full bandwidth broadcast,
    reduction and scan", Parallel Computing 2009): the second is the first mirrored when ``n``
    is even and shifted by one when ``n`` is odd, so a leaf of one is (nearly always) an
    interior node of the other. Returned as parent arrays over positions ``0 .. n - 1``."""
    first = binary_tree(n)
    move = (lambda p: n - 1 - p) if n % 2 == 0 else (lambda p: (p + 1) % n)
    second = [-1] * n
    for p, up in enumerate(first):
        second[move(p)] = -1 if up < 0 else move(up)
    return first, second


def _tree_reduce_bcast(
    g: OpGraph,
    c: Collective,
    ranks: Sequence[int],
    parent: Sequence[int],
    nbytes: int,
    entry: Mapping[int, int],
    touch: dict[int, list[int]],
) -> None:
    """Reduce ``nbytes`` up the tree ``parent`` (positions into ``ranks``) and broadcast the
    result down, in chunks. Each tree edge and direction is one FIFO connection: chunk ``j``
    leaves a node once chunk ``j`` arrived from each of its children (up) or from its parent
    (down) and the node's chunk ``j - 1`` left on the same edge (NCCL's tree all-reduce, reduce
    up then broadcast down, src/device/all_reduce.h runTreeUpDown)."""
    n = len(ranks)
    if n < 2:
        return
    chunks = _chunks(nbytes, c.chunk_bytes)
    children: list[list[int]] = [[] for _ in range(n)]
    root = -1
    for p, up in enumerate(parent):
        if up < 0:
            root = p
        else:
            children[up].append(p)
    order = [root]  # pre-order (parents before children)
    for p in order:
        order.extend(children[p])
    name = c.label or c.op
    up_sent: dict[int, list[int]] = {}
    for p in reversed(order):  # children before parents
        if p == root:
            continue
        r, dst = ranks[p], ranks[parent[p]]
        last, sent = entry[r], []
        for j, b in enumerate(chunks):
            deps = [last, *(up_sent[ch][j] for ch in children[p])]
            last = g.send(r, dst, b, deps, step=c.step, layer=c.layer, phase=c.phase,
                          label=f"{name} up chunk {j}")  # fmt: skip
            sent.append(last)
            touch[r].append(last)
            touch[dst].append(last)
        up_sent[p] = sent
    got: dict[int, list[int]] = {}  # chunks that reached a position, reduced (root) or down
    got[root] = [g.join([up_sent[ch][j] for ch in children[root]], rank=ranks[root])
                 for j in range(len(chunks))]  # fmt: skip
    for p in order:
        r = ranks[p]
        for ch in children[p]:
            dst, last, sent = ranks[ch], entry[r], []
            for j, b in enumerate(chunks):
                last = g.send(r, dst, b, (last, got[p][j]), step=c.step, layer=c.layer,
                              phase=c.phase, label=f"{name} down chunk {j}")  # fmt: skip
                sent.append(last)
                touch[r].append(last)
                touch[dst].append(last)
            got[ch] = sent


@COLLECTIVES.register("all-reduce/tree", "all-reduce: NCCL's double binary tree")
def _tree_all_reduce(g: OpGraph, c: Collective, start: Mapping[int, int]) -> dict[int, int]:
    """Each channel's share of the buffer is halved over the two trees of
    :func:`double_binary_tree` (positions in ``c.ranks``' order), both reduce-then-broadcast at
    once. On an idle transport with per-message time ``t(b)`` and no contention, chunk ``j``
    leaves a node of height ``h`` at ``(h + j) t(c)`` on the way up (induction: its children are
    lower and its own chunk ``j - 1`` left at ``(h + j - 1) t(c)``), reaches the root at
    ``(H + j) t(c)`` and depth ``d`` at ``(H + j + d) t(c)``, so with ``k`` chunks of ``c`` bytes
    per tree the all-reduce takes ``(2 H + k - 1) t(c)``, ``H = floor(log2 n)``."""
    ranks = list(c.ranks)
    entry = _entry(g, ranks, start)
    touch: dict[int, list[int]] = {r: [] for r in ranks}
    trees = double_binary_tree(len(ranks))
    for part in _split(c.nbytes, c.channels):
        for tree, half in zip(trees, _split(part, 2), strict=True):
            _tree_reduce_bcast(g, c, ranks, tree, half, entry, touch)
    return _finish(g, entry, touch)


# -- chains from or to a root ------------------------------------------------------------------


def _root_order(c: Collective, reverse: bool) -> list[int]:
    """``c.ranks`` in ring order starting at the root (reversed after the root if asked)."""
    ranks = list(c.ranks)
    root = ranks[0] if c.root is None else c.root
    if root not in ranks:
        raise GraphError(f"collective {c.op}: root {root} is not one of the ranks {ranks}")
    i = ranks.index(root)
    order = ranks[i:] + ranks[:i]
    return [order[0], *reversed(order[1:])] if reverse else order


def _chain(
    g: OpGraph, c: Collective, order: Sequence[int], nbytes: int,
    entry: Mapping[int, int], touch: dict[int, list[int]],
) -> None:  # fmt: skip
    """Pipeline ``nbytes`` along ``order[0] -> order[1] -> ...``: chunk ``j`` leaves
    ``order[i]`` once it arrived from ``order[i - 1]`` and the previous chunk left (one FIFO
    connection per link of the chain)."""
    chunks = _chunks(nbytes, c.chunk_bytes)
    arrived: list[int] = []
    for i in range(len(order) - 1):
        r, dst = order[i], order[i + 1]
        last, sent = entry[r], []
        for j, b in enumerate(chunks):
            deps = [last, arrived[j]] if arrived else [last]
            last = g.send(r, dst, b, deps, step=c.step, layer=c.layer, phase=c.phase,
                          label=f"{c.label or c.op} chunk {j}")  # fmt: skip
            sent.append(last)
            touch[r].append(last)
            touch[dst].append(last)
        arrived = sent


def _rooted(op: str) -> Builder:
    def build(g: OpGraph, c: Collective, start: Mapping[int, int]) -> dict[int, int]:
        ranks = list(c.ranks)
        entry = _entry(g, ranks, start)
        touch: dict[int, list[int]] = {r: [] for r in ranks}
        for ch, part in enumerate(_split(c.nbytes, c.channels)):
            order = _root_order(c, reverse=ch % 2 == 1)
            if op == "reduce":  # toward the root: it is the chain's last rank
                order = [*order[1:], order[0]]
            _chain(g, c, order, part, entry, touch)
        return _finish(g, entry, touch)

    return build


COLLECTIVES.add(
    "broadcast/ring",
    _rooted("broadcast"),
    "broadcast: pipelined chain from the root along the ring (NCCL src/device/broadcast.h)",
)
COLLECTIVES.add(
    "reduce/ring",
    _rooted("reduce"),
    "reduce: pipelined chain along the ring ending at the root (NCCL src/device/reduce.h)",
)


@COLLECTIVES.register("send-recv/direct", "send-recv: (src, dst) pairs or a shift, all at once")
def _send_recv(g: OpGraph, c: Collective, start: Mapping[int, int]) -> dict[int, int]:
    ranks = list(c.ranks)
    n = len(ranks)
    pos = {r: i for i, r in enumerate(ranks)}
    pairs = list(c.peers) or [(r, ranks[(i + c.shift) % n]) for i, r in enumerate(ranks)]
    m = np.zeros((n, n), dtype=np.int64)
    for a, b in pairs:
        if a not in pos or b not in pos:
            raise GraphError(f"send-recv: pair ({a}, {b}) names a rank not in ranks {ranks}")
        m[pos[a], pos[b]] += c.nbytes
    return all_to_all_v(g, c, m, start)


# -- hierarchical: scale-up groups, then rails -------------------------------------------------


def _groups(c: Collective) -> tuple[list[list[int]], list[list[int]]]:
    """(scale-up groups of ``local_size`` consecutive ranks, rails: the ranks with the same
    local index); refuses a ``local_size`` that does not divide the ranks."""
    ranks = list(c.ranks)
    ls = c.local_size
    if ls < 1 or len(ranks) % ls:
        raise GraphError(f"hierarchical {c.op}: local_size {ls} must divide the {len(ranks)} ranks")
    groups = [ranks[i : i + ls] for i in range(0, len(ranks), ls)]
    return groups, [[grp[k] for grp in groups] for k in range(ls)]


@COLLECTIVES.register("reduce-scatter/hierarchical", "reduce-scatter: scale-up, then rails")
def _hier_reduce_scatter(g: OpGraph, c: Collective, start: Mapping[int, int]) -> dict[int, int]:
    """Ring reduce-scatter of the buffer inside each group (each rank keeps ``S / L``), then
    ring reduce-scatter of that shard along each rail (each keeps ``S / n``): the scale-out
    rails carry ``(G - 1) S / n`` per rank, as in a flat ring, and the scale-up links the rest."""
    groups, rails = _groups(c)
    here = dict(start)
    for grp in groups:
        here.update(build_collective(g, _sub(c, "reduce-scatter", grp, c.nbytes), here))
    shard = -(-c.nbytes // c.local_size)
    for rail in rails:
        here.update(build_collective(g, _sub(c, "reduce-scatter", rail, shard), here))
    return {r: here[r] for r in c.ranks}


@COLLECTIVES.register("all-gather/hierarchical", "all-gather: rails, then scale-up")
def _hier_all_gather(g: OpGraph, c: Collective, start: Mapping[int, int]) -> dict[int, int]:
    """The mirror of the hierarchical reduce-scatter: ring all-gather along each rail (each
    rank goes from ``S / n`` to ``S / L``), then ring all-gather inside each group (to ``S``)."""
    groups, rails = _groups(c)
    here = dict(start)
    shard = -(-c.nbytes // c.local_size)
    for rail in rails:
        here.update(build_collective(g, _sub(c, "all-gather", rail, shard), here))
    for grp in groups:
        here.update(build_collective(g, _sub(c, "all-gather", grp, c.nbytes), here))
    return {r: here[r] for r in c.ranks}


@COLLECTIVES.register("all-to-all/hierarchical", "all-to-all: scale-up exchange, then rails")
def _hier_all_to_all(g: OpGraph, c: Collective, start: Mapping[int, int]) -> dict[int, int]:
    """Two hops, as NCCL's PXN (PCI x NVLink, NCCL 2.12; "Doubling all2all performance with
    NCCL 2.12", NVIDIA blog 2022) and DeepEP's normal mode route scale-out traffic: rank
    ``(g, l)`` first sends its group peer ``(g, l')`` everything bound for local index ``l'``
    (``G`` slices of ``S / n``), then, once its own group's data for its rail has arrived, sends
    rail peer ``(g', l)`` the ``L`` slices bound there. On an idle transport:
    ``t(G S / n) + t(L S / n)``; bytes moved ``(2 n - G - L) S``, against ``(n - 1) S`` direct,
    but every byte crosses at most one scale-out link, on its own rail."""
    return _two_hop_all_to_all(g, c, start, pipelined=False)


@COLLECTIVES.register(
    "all-to-all/pipelined", "all-to-all: scale-up and rail hops, forwarding as data arrives"
)
def _pipelined_all_to_all(g: OpGraph, c: Collective, start: Mapping[int, int]) -> dict[int, int]:
    """The hierarchical all-to-all's two hops with the second forwarding as the first
    delivers, as DeepEP's normal kernels forward each RDMA chunk over NVLink as it arrives
    (:mod:`podsim.workloads.deepep_kernels`): in the limit of many small chunks both hops run
    side by side, so here both start at entry and a rank is done when both are. Same messages
    and bytes as ``hierarchical``; on an idle transport ``max(t(G S / n), t(L S / n))``. Left
    out: the pipeline's fill, one chunk's time on the first hop (DeepEP: a few to 20 tokens
    per channel and node), and the causality of a forward that outruns its supply (the links
    carry the same bytes either way)."""
    return _two_hop_all_to_all(g, c, start, pipelined=True)


def two_hop_matrices(matrix: np.ndarray, local_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The two hops of a bytes matrix over ranks ``(g, l)`` (``g`` the scale-up group of
    ``local_size`` consecutive ranks, ``l`` the local index): ``first[g][l, l']``, what
    ``(g, l)`` sends its group peer ``(g, l')``: the sum of what it has for every ``(g', l')``;
    ``second[l'][g, g']``, what ``(g, l')`` sends its rail peer ``(g', l')``: the sum of what
    its group has for ``(g', l')``. A rank's own share (the diagonals) stays where it is. No
    per-node dedup: a token bound for several ranks of one node crosses the rail once per rank
    (DeepEP sends it once per node and forwards it over NVLink)."""
    m = np.asarray(matrix)
    n = m.shape[0]
    if m.shape != (n, n) or local_size < 1 or n % local_size or (m < 0).any():
        raise GraphError(
            f"two-hop all-to-all: the bytes matrix must be square, >= 0 and split into groups "
            f"of local_size {local_size}; got shape {m.shape}"
        )
    ng = n // local_size
    m4 = m.reshape(ng, local_size, ng, local_size)  # [g, l, g', l']
    return m4.sum(axis=2), m4.sum(axis=1).transpose(2, 0, 1)


def _two_hop_all_to_all(
    g: OpGraph, c: Collective, start: Mapping[int, int], *, pipelined: bool
) -> dict[int, int]:
    groups, rails = _groups(c)
    n, ls = len(c.ranks), c.local_size
    ng = n // ls
    if c.matrix is None:  # uniform: nbytes / n to every rank
        slice_ = c.nbytes // max(n, 1)
        first = np.full((ng, ls, ls), ng * slice_, dtype=np.int64)
        hop2 = np.full((ls, ng, ng), ls * slice_, dtype=np.int64)
    else:
        if np.shape(c.matrix) != (n, n):
            raise GraphError(
                f"all-to-all-v: the bytes matrix must be {n} x {n}, got {np.shape(c.matrix)}"
            )
        first, hop2 = two_hop_matrices(c.matrix, ls)
    entry = _entry(g, c.ranks, start)
    touch: dict[int, list[int]] = {r: [] for r in c.ranks}
    for gi, grp in enumerate(groups):
        sub = _sub(c, "all-to-all", grp, 0)
        done = all_to_all_v(g, sub, first[gi], entry)
        for r in grp:
            touch[r].append(done[r])
    second = entry if pipelined else _finish(g, entry, touch)
    for li, rail in enumerate(rails):
        sub = _sub(c, "all-to-all", rail, 0)
        done = all_to_all_v(g, sub, hop2[li], second)
        for r in rail:
            touch[r].append(done[r])
    return _finish(g, entry, touch)
