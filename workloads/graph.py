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

The graph is columnar because a training step on 10,000 GPUs has about 10^7 nodes: every column
is a typed :class:`array.array` (8 bytes a node, not a Python object each), frozen to NumPy
arrays without a copy by :meth:`OpGraph.arrays`; labels are stored once per run of consecutive
nodes that share them (a send's label names its ranks when shown), the message table's text
columns and the spans' tags as indices into tables of their distinct values. Message ids are the
send nodes' order of creation; the table of messages (:meth:`OpGraph.messages`) has the trace
schema of :mod:`podsim.workloads.trace` so that every result table keyed by message works unchanged.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
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
        self.kind = array("b")
        self.rank = array("q")
        self.peer = array("q")
        self.nbytes = array("q")
        self.duration_s = array("d")
        self.delay_s = array("d")
        self.anchor = array("q")
        self.msg = array("q")
        # labels as runs: node i has the label of the last run that starts at or before it
        self._label_start = array("q")
        self._label_text: list[str] = []
        self._dep_src = array("q")
        self._dep_dst = array("q")
        self._stream_tail: dict[tuple[int, str], int] = {}
        # per message (in creation order): its node and the trace columns besides src/dst/bytes;
        # text columns as codes into tables of distinct values
        self._m_node = array("q")
        self._m_step = array("q")
        self._m_layer = array("q")
        self._m_stage = array("q")
        self._m_phase = array("i")
        self._m_hop = array("i")
        self._codes: dict[str, dict[str | None, int]] = {"phase": {}, "hop": {}}
        # spans: rank, first, last and an index into the distinct tag dicts
        self._s_rank = array("q")
        self._s_first = array("q")
        self._s_last = array("q")
        self._s_tags = array("q")
        self._tag_ids: dict[tuple[tuple[str, Any], ...], int] = {}
        self._tags: list[dict[str, Any]] = []
        self._frozen: GraphArrays | None = None
        #: what the builder wants the results to know (e.g. ``training``: model FLOPs)
        self.meta: dict[str, Any] = {}

    def _code(self, column: str, value: str | None) -> int:
        table = self._codes[column]
        code = table.get(value)
        if code is None:
            code = table[value] = len(table)
        return code

    @property
    def num_messages(self) -> int:
        """Send nodes (messages) added so far."""
        return len(self._m_node)

    def label(self, i: int) -> str:
        """Node ``i``'s label (a send's names its ranks), or ``#i`` when it has none."""
        k = bisect_right(self._label_start, i) - 1
        text = self._label_text[k] if k >= 0 else ""
        if text and self.kind[i] == SEND:
            text = f"{text} {self.rank[i]}->{self.peer[i]}"
        return text or f"#{i}"

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
                f"node {label or f'#{i}'}: duration_s {duration_s} and delay_s {delay_s} must "
                "be >= 0"
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
        if label != (self._label_text[-1] if self._label_text else ""):
            self._label_start.append(i)
            self._label_text.append(label)
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
        self.msg[i] = len(self._m_node) if msg is None else int(msg)
        self._m_node.append(i)
        self._m_step.append(step)
        self._m_layer.append(layer)
        self._m_stage.append(stage)
        self._m_phase.append(self._code("phase", phase))
        self._m_hop.append(self._code("hop", hop))
        return i

    def sends(
        self,
        src: np.ndarray,
        dst: np.ndarray,
        nbytes: np.ndarray,
        after: np.ndarray,
        *,
        step: int = 0,
        layer: int = 0,
        phase: str = "other",
        hop: str | None = None,
        stage: int = 0,
        label: str = "",
    ) -> np.ndarray:
        """Many sends at once, as :meth:`send` would add them one by one in array order (same
        node and message ids): message ``i`` of ``nbytes[i]`` from ``src[i]`` to ``dst[i]``,
        depending on node ``after[i]`` (-1: none), on no stream, with the same table columns.
        Returns the new node ids. This is what a collective of thousands of ranks uses: a
        10,240-GPU training step adds about 10^7 sends."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        nb = np.asarray(nbytes, dtype=np.int64)
        after = np.asarray(after, dtype=np.int64)
        n = src.size
        if not (dst.size == nb.size == after.size == n):
            raise GraphError(f"sends {label!r}: src, dst, nbytes and after differ in length")
        i0 = len(self.kind)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        if (nb < 0).any():
            raise GraphError(f"node {label or f'#{i0}'}: nbytes must be >= 0")
        if (after >= i0).any() or (after < -1).any():
            raise GraphError(f"node {label or f'#{i0}'}: depends on a node that is not earlier")
        self._frozen = None
        ids = np.arange(i0, i0 + n, dtype=np.int64)
        self.kind.frombytes(np.full(n, SEND, dtype=np.int8).tobytes())
        self.rank.frombytes(src.tobytes())
        self.peer.frombytes(dst.tobytes())
        self.nbytes.frombytes(nb.tobytes())
        zeros = np.zeros(n).tobytes()
        self.duration_s.frombytes(zeros)
        self.delay_s.frombytes(zeros)
        self.anchor.frombytes(np.full(n, -1, dtype=np.int64).tobytes())
        m0 = len(self._m_node)
        self.msg.frombytes(np.arange(m0, m0 + n, dtype=np.int64).tobytes())
        if label != (self._label_text[-1] if self._label_text else ""):
            self._label_start.append(i0)
            self._label_text.append(label)
        dep = after >= 0
        self._dep_src.frombytes(after[dep].tobytes())
        self._dep_dst.frombytes(ids[dep].tobytes())
        self._m_node.frombytes(ids.tobytes())
        for column, value in ((self._m_step, step), (self._m_layer, layer), (self._m_stage, stage)):
            column.frombytes(np.full(n, value, dtype=np.int64).tobytes())
        self._m_phase.frombytes(np.full(n, self._code("phase", phase), dtype=np.int32).tobytes())
        self._m_hop.frombytes(np.full(n, self._code("hop", hop), dtype=np.int32).tobytes())
        return ids

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
        key = tuple(tags.items())
        t = self._tag_ids.get(key)
        if t is None:
            t = self._tag_ids[key] = len(self._tags)
            self._tags.append(tags)
        self._s_rank.append(rank)
        self._s_first.append(first)
        self._s_last.append(last)
        self._s_tags.append(t)

    def scale_compute(self, factors: dict[int, float]) -> None:
        """Multiply the duration of every compute node of rank ``r`` by ``factors[r]`` (a
        straggler)."""
        self._frozen = None
        if not factors:
            return
        kind = np.array(self.kind, dtype=np.int8)
        rank = np.array(self.rank, dtype=np.int64)
        for i in np.flatnonzero((kind == COMPUTE) & np.isin(rank, list(factors))).tolist():
            self.duration_s[i] *= factors[self.rank[i]]

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
        # np.array copies: a view would pin the array.array buffers, which then cannot grow
        src = np.array(self._dep_src, dtype=np.int64)
        dst = np.array(self._dep_dst, dtype=np.int64)
        order = np.argsort(src, kind="stable")
        succ = dst[order]
        succ_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=n), out=succ_ptr[1:])
        indegree = np.bincount(dst, minlength=n).astype(np.int64)
        msg = np.array(self.msg, dtype=np.int64)
        ids = np.sort(msg[msg >= 0])
        if not np.array_equal(ids, np.arange(len(ids))):
            raise GraphError(
                f"message ids must be 0 .. {len(ids) - 1}, each once; got "
                f"{ids[:8].tolist()}{' ...' if len(ids) > 8 else ''}"
            )
        self._check_acyclic(indegree, succ_ptr, succ)
        self._frozen = GraphArrays(
            kind=np.array(self.kind, dtype=np.int8),
            rank=np.array(self.rank, dtype=np.int64),
            peer=np.array(self.peer, dtype=np.int64),
            nbytes=np.array(self.nbytes, dtype=np.int64),
            duration_s=np.array(self.duration_s, dtype=float),
            delay_s=np.array(self.delay_s, dtype=float),
            anchor=np.array(self.anchor, dtype=np.int64),
            msg=msg,
            indegree=indegree,
            succ_ptr=succ_ptr,
            succ=succ,
        )
        return self._frozen

    def _check_acyclic(self, indegree: np.ndarray, ptr: np.ndarray, succ: np.ndarray) -> None:
        """Kahn's algorithm, one level of the graph at a time in NumPy (a 10,000-GPU training
        step has about 10^7 nodes and edges; its depth is what the Python loop costs here); a
        node never reached sits on (or behind) a cycle. :meth:`_unreached_readable` is the
        node-at-a-time twin (a test checks both leave the same nodes)."""
        left = self._unreached(indegree, ptr, succ)
        if left.any():
            bad = np.flatnonzero(left)
            raise GraphError(
                f"the operation graph has a cycle: node {self.label(int(bad[0]))} (and "
                f"{bad.size - 1} more) can never start because it depends, through "
                "other nodes, on itself"
            )

    @staticmethod
    def _unreached(indegree: np.ndarray, ptr: np.ndarray, succ: np.ndarray) -> np.ndarray:
        """Each node's dependencies that never end (0: the node starts) after Kahn's algorithm
        run level by level: every node whose dependencies have all ended leaves at once."""
        left = indegree.astype(np.int64, copy=True)
        front = np.flatnonzero(left == 0)
        while front.size:
            start, count = ptr[front], ptr[front + 1] - ptr[front]
            total = int(count.sum())
            if not total:
                break
            # the successors of the whole level: each node's range of succ, concatenated
            offset = np.repeat(start - np.cumsum(count) + count, count)
            nxt = succ[offset + np.arange(total)]
            np.subtract.at(left, nxt, 1)
            nxt = np.unique(nxt)
            front = nxt[left[nxt] == 0]
        return left

    @staticmethod
    def _unreached_readable(indegree: np.ndarray, ptr: np.ndarray, succ: np.ndarray) -> np.ndarray:
        """:meth:`_unreached` one node at a time."""
        left = indegree.astype(np.int64, copy=True)
        stack = np.flatnonzero(left == 0).tolist()
        while stack:
            i = stack.pop()
            for j in succ[ptr[i] : ptr[i + 1]].tolist():
                left[j] -= 1
                if left[j] == 0:
                    stack.append(j)
        return left

    # -- tables ------------------------------------------------------------------------------
    def messages(self, num_ranks: int, gpus_per_node: int | None = None) -> pd.DataFrame:
        """The send nodes as a trace (schema of :mod:`podsim.workloads.trace`; message id =
        row). ``start_s`` is the node's ``delay_s``; a message built with ``hop=None`` gets the
        locality of (src, dst) for ``gpus_per_node``."""
        from podsim.workloads.trace import make_trace
        from podsim.workloads.traffic import classify_hops

        order = np.argsort(np.array(self.msg, dtype=np.int64)[self._m_node], kind="stable")
        node = np.array(self._m_node, dtype=np.int64)[order]
        src = np.array(self.rank, dtype=np.int64)[node]
        dst = np.array(self.peer, dtype=np.int64)[node]
        nb = np.array(self.nbytes, dtype=np.int64)[node]
        delay = np.array(self.delay_s, dtype=float)[node]
        stage = np.array(self._m_stage, dtype=np.int64)[order]
        hop = self._decode("hop", order)
        unset = np.array([h is None for h in hop], dtype=bool)
        if unset.any():
            hop[unset] = classify_hops(src[unset], dst[unset], gpus_per_node)
        return make_trace(
            step=np.array(self._m_step, dtype=np.int64)[order],
            layer=np.array(self._m_layer, dtype=np.int64)[order],
            phase=self._decode("phase", order),
            src_rank=src,
            dst_rank=dst,
            bytes=nb,
            start_s=delay,
            hop=hop,
            stage=stage if stage.any() else None,
            num_ranks=num_ranks,
            gpus_per_node=gpus_per_node,
        )

    def _decode(self, column: str, order: np.ndarray) -> np.ndarray:
        """Message column ``column`` (``phase`` or ``hop``) as an object array, rows in
        ``order``; each distinct value is one shared object."""
        values = np.empty(len(self._codes[column]), dtype=object)
        for value, code in self._codes[column].items():
            values[code] = value
        codes = self._m_phase if column == "phase" else self._m_hop
        return values[np.array(codes, dtype=np.int64)[order]]

    def spans(self) -> list[tuple[int, int, int, dict[str, Any]]]:
        """(rank, first node, last node, tags) of every recorded span, in order."""
        tags = self._tags
        return [
            (r, f, la, tags[t])
            for r, f, la, t in zip(
                self._s_rank, self._s_first, self._s_last, self._s_tags, strict=True
            )
        ]

    def span_columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list]:
        """The spans as columns: rank, first node, last node, tag index, and the distinct tag
        dicts the index points into (what :meth:`spans` lists, without a tuple per span)."""
        return (
            np.array(self._s_rank, dtype=np.int64),
            np.array(self._s_first, dtype=np.int64),
            np.array(self._s_last, dtype=np.int64),
            np.array(self._s_tags, dtype=np.int64),
            list(self._tags),
        )
