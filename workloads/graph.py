"""The operation graph: what a workload asks of the cluster, as nodes with dependencies.

Every workload (an MoE layer's dispatch -> compute -> combine, a collective, a training step, an
imported trace) compiles to one :class:`OpGraph`; one executor
(:func:`podsim.scenarios.execution.executor.execute`) runs it on any simulating engine and
records when every node started and ended. The model:

- a node is ``compute`` (occupies its rank's GPU for ``duration_s``: a GPU runs one compute
  node at a time, the others wait in the order they became ready, so two streams overlap
  communication with compute but never compute with compute), ``send`` (a message of
  ``nbytes`` from ``rank`` to ``peer``; it ends when its last byte was delivered) or ``join``
  (takes no time: a barrier, the start or end of a phase);
- a node becomes *ready* when every node it depends on has ended. It starts ``delay_s`` after it
  became ready or, when it has an ``anchor``, at ``max(ready, start of anchor + delay_s)`` (a
  message that may not leave before a fixed offset into its phase, yet also waits for data);
- streams are FIFO per (rank, stream name), as CUDA streams are: a node placed on a stream also
  depends on the previous node placed on the same stream. Two streams of one rank overlap
  (compute of one micro-batch beside the all-to-all of the other); nodes on no stream (``send``
  by default) run concurrently with everything their dependencies allow;
- a *span* names an interval on a rank from the start of one node to the end of another, with
  tags (step, layer, phase, micro-batch ...): the results' phase table is made of spans.

The graph is columnar (Python lists, frozen to NumPy arrays by :meth:`OpGraph.arrays`) because
a training step has millions of nodes. Message ids are the send nodes' order of creation; the
table of messages (:meth:`OpGraph.messages`) has the trace schema of
:mod:`podsim.workloads.trace` so that every result table keyed by message works unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["COMPUTE", "JOIN", "SEND", "GraphArrays", "GraphError", "OpGraph"]

JOIN, COMPUTE, SEND = 0, 1, 2
KIND_NAMES = ("join", "compute", "send")


class GraphError(ValueError):
    """An operation graph that cannot run (a cycle, a dependency on a node that does not exist,
    a negative duration). The message names the node by its label."""


@dataclass(frozen=True)
class GraphArrays:
    """An :class:`OpGraph` frozen for execution: per-node columns and successor lists in CSR
    form (``succ[succ_ptr[i]:succ_ptr[i + 1]]`` are the nodes that depend on node ``i``)."""

    kind: np.ndarray
    rank: np.ndarray
    peer: np.ndarray
    nbytes: np.ndarray
    duration_s: np.ndarray
    delay_s: np.ndarray
    anchor: np.ndarray
    msg: np.ndarray
    indegree: np.ndarray
    succ_ptr: np.ndarray
    succ: np.ndarray


class OpGraph:
    """A builder of operation graphs (see the module docstring).

    ``add_*`` return the new node's id (an int); ``deps`` are ids of nodes already added, so a
    graph built through this API has no cycle by construction (``add_dep`` can make one, and
    :meth:`arrays` refuses it).
    """

    def __init__(self) -> None:
        self.kind: list[int] = []
        self.rank: list[int] = []
        self.peer: list[int] = []
        self.nbytes: list[int] = []
        self.duration_s: list[float] = []
        self.delay_s: list[float] = []
        self.anchor: list[int] = []
        self.msg: list[int] = []
        self.label: list[str] = []
        self._dep_src: list[int] = []
        self._dep_dst: list[int] = []
        self._stream_tail: dict[tuple[int, str], int] = {}
        # per message: trace columns besides src/dst/bytes (hop, step, layer, phase, stage ...)
        self._msg_rows: list[tuple[int, int, int, str, str | None, int]] = []
        self._spans: list[tuple[int, int, int, dict[str, Any]]] = []
        self._frozen: GraphArrays | None = None
        #: what the builder wants the results to know (e.g. ``training``: model FLOPs)
        self.meta: dict[str, Any] = {}

    # -- building ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.kind)

    def _add(
        self,
        kind: int,
        rank: int,
        *,
        peer: int = -1,
        nbytes: int = 0,
        duration_s: float = 0.0,
        delay_s: float = 0.0,
        anchor: int = -1,
        deps: Iterable[int] = (),
        stream: str | None = None,
        label: str = "",
    ) -> int:
        i = len(self.kind)
        self._frozen = None
        if not (duration_s >= 0.0 and delay_s >= 0.0):  # also refuses NaN
            raise GraphError(
                f"node {label or i}: duration_s {duration_s} and delay_s {delay_s} must be >= 0"
            )
        if anchor >= i:
            raise GraphError(f"node {label or i}: anchor {anchor} is not an earlier node")
        self.kind.append(kind)
        self.rank.append(rank)
        self.peer.append(peer)
        self.nbytes.append(nbytes)
        self.duration_s.append(duration_s)
        self.delay_s.append(delay_s)
        self.anchor.append(anchor)
        self.msg.append(-1)
        self.label.append(label)
        for d in deps:
            if not 0 <= d < i:
                raise GraphError(f"node {label or i}: depends on {d}, which is not an earlier node")
            self._dep_src.append(d)
            self._dep_dst.append(i)
        if stream is not None:
            key = (rank, stream)
            prev = self._stream_tail.get(key)
            if prev is not None:
                self._dep_src.append(prev)
                self._dep_dst.append(i)
            self._stream_tail[key] = i
        return i

    def join(
        self,
        deps: Iterable[int] = (),
        *,
        rank: int = -1,
        stream: str | None = None,
        delay_s: float = 0.0,
        label: str = "",
    ) -> int:
        """A node that takes no time: ends when ``deps`` ended (plus ``delay_s``)."""
        return self._add(JOIN, rank, deps=deps, stream=stream, delay_s=delay_s, label=label)

    def compute(
        self,
        rank: int,
        duration_s: float,
        deps: Iterable[int] = (),
        *,
        stream: str | None = "compute",
        label: str = "",
    ) -> int:
        """``rank`` computes for ``duration_s`` (on its ``compute`` stream unless told)."""
        return self._add(
            COMPUTE, rank, duration_s=float(duration_s), deps=deps, stream=stream, label=label
        )

    def send(
        self,
        src: int,
        dst: int,
        nbytes: int,
        deps: Iterable[int] = (),
        *,
        hop: str | None = None,
        delay_s: float = 0.0,
        anchor: int = -1,
        stream: str | None = None,
        step: int = 0,
        layer: int = 0,
        phase: str = "other",
        stage: int = 0,
        msg: int | None = None,
        label: str = "",
    ) -> int:
        """A message of ``nbytes`` from ``src`` to ``dst`` over ``hop`` (``rdma``, ``scaleup``,
        ``local``; None: by locality, see :mod:`podsim.workloads.trace`). ``step``/``layer``/
        ``phase``/``stage`` go to the message table. ``msg`` fixes the message id (default:
        the next one); ids must end up 0 .. messages - 1, each once."""
        if nbytes < 0:
            raise GraphError(f"node {label or len(self)}: nbytes {nbytes} must be >= 0")
        i = self._add(
            SEND,
            src,
            peer=dst,
            nbytes=int(nbytes),
            delay_s=float(delay_s),
            anchor=anchor,
            deps=deps,
            stream=stream,
            label=label,
        )
        self.msg[i] = len(self._msg_rows) if msg is None else int(msg)
        self._msg_rows.append((i, step, layer, phase, hop, stage))
        return i

    def add_dep(self, before: int, after: int) -> None:
        """``after`` also waits for ``before`` (may close a cycle; :meth:`arrays` checks)."""
        n = len(self.kind)
        if not (0 <= before < n and 0 <= after < n):
            raise GraphError(f"dependency {before} -> {after} names a node that does not exist")
        self._frozen = None
        self._dep_src.append(before)
        self._dep_dst.append(after)

    def span(self, rank: int, first: int, last: int, **tags: Any) -> None:
        """Record the interval on ``rank`` from the start of node ``first`` to the end of node
        ``last``, tagged (e.g. ``step=0, layer=3, phase="dispatch"``)."""
        self._spans.append((rank, first, last, tags))

    def scale_compute(self, factors: dict[int, float]) -> None:
        """Multiply the duration of every compute node of rank ``r`` by ``factors[r]`` (a
        straggler)."""
        self._frozen = None
        for i, (k, r) in enumerate(zip(self.kind, self.rank, strict=True)):
            if k == COMPUTE and r in factors:
                self.duration_s[i] *= factors[r]

    def stream_tail(self, rank: int, stream: str) -> int | None:
        """The last node placed on (``rank``, ``stream``), or None."""
        return self._stream_tail.get((rank, stream))

    # -- freezing ----------------------------------------------------------------------------
    def arrays(self) -> GraphArrays:
        """Freeze for execution (cached until the graph changes); refuses a cycle
        (:class:`GraphError` naming a node on it)."""
        if self._frozen is not None:
            return self._frozen
        n = len(self.kind)
        src = np.asarray(self._dep_src, dtype=np.int64)
        dst = np.asarray(self._dep_dst, dtype=np.int64)
        order = np.argsort(src, kind="stable")
        succ = dst[order]
        succ_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=n), out=succ_ptr[1:])
        indegree = np.bincount(dst, minlength=n).astype(np.int64)
        msg = np.asarray(self.msg, dtype=np.int64)
        ids = np.sort(msg[msg >= 0])
        if not np.array_equal(ids, np.arange(len(ids))):
            raise GraphError(
                f"message ids must be 0 .. {len(ids) - 1}, each once; got "
                f"{ids[:8].tolist()}{' ...' if len(ids) > 8 else ''}"
            )
        self._check_acyclic(indegree, succ_ptr, succ)
        self._frozen = GraphArrays(
            kind=np.asarray(self.kind, dtype=np.int8),
            rank=np.asarray(self.rank, dtype=np.int64),
            peer=np.asarray(self.peer, dtype=np.int64),
            nbytes=np.asarray(self.nbytes, dtype=np.int64),
            duration_s=np.asarray(self.duration_s, dtype=float),
            delay_s=np.asarray(self.delay_s, dtype=float),
            anchor=np.asarray(self.anchor, dtype=np.int64),
            msg=msg,
            indegree=indegree,
            succ_ptr=succ_ptr,
            succ=succ,
        )
        return self._frozen

    def _check_acyclic(self, indegree: np.ndarray, ptr: np.ndarray, succ: np.ndarray) -> None:
        """Kahn's algorithm; a node never reached sits on (or behind) a cycle."""
        left = indegree.copy()
        stack = np.flatnonzero(left == 0).tolist()
        seen = 0
        while stack:
            i = stack.pop()
            seen += 1
            for j in succ[ptr[i] : ptr[i + 1]].tolist():
                left[j] -= 1
                if left[j] == 0:
                    stack.append(j)
        if seen < len(indegree):
            i = int(np.flatnonzero(left > 0)[0])
            name = self.label[i] or f"#{i}"
            raise GraphError(
                f"the operation graph has a cycle: node {name} (and {len(indegree) - seen - 1} "
                "more) can never start because it depends, through other nodes, on itself"
            )

    # -- tables ------------------------------------------------------------------------------
    def messages(self, num_ranks: int, gpus_per_node: int | None = None) -> pd.DataFrame:
        """The send nodes as a trace (schema of :mod:`podsim.workloads.trace`; message id =
        row). ``start_s`` is the node's ``delay_s``; a message built with ``hop=None`` gets the
        locality of (src, dst) for ``gpus_per_node``."""
        from podsim.workloads.trace import make_trace
        from podsim.workloads.traffic import classify_hops

        rows = sorted(self._msg_rows, key=lambda r: self.msg[r[0]])
        node = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        src = np.asarray(self.rank, dtype=np.int64)[node]
        dst = np.asarray(self.peer, dtype=np.int64)[node]
        nb = np.asarray(self.nbytes, dtype=np.int64)[node]
        delay = np.asarray(self.delay_s, dtype=float)[node]
        stage = [r[5] for r in rows]
        hop = np.array([r[4] for r in rows], dtype=object)
        unset = np.array([h is None for h in hop], dtype=bool)
        if unset.any():
            hop[unset] = classify_hops(src[unset], dst[unset], gpus_per_node)
        return make_trace(
            step=[r[1] for r in rows],
            layer=[r[2] for r in rows],
            phase=[r[3] for r in rows],
            src_rank=src,
            dst_rank=dst,
            bytes=nb,
            start_s=delay,
            hop=hop,
            stage=stage if any(stage) else None,
            num_ranks=num_ranks,
            gpus_per_node=gpus_per_node,
        )

    def spans(self) -> list[tuple[int, int, int, dict[str, Any]]]:
        """(rank, first node, last node, tags) of every recorded span, in order."""
        return list(self._spans)
