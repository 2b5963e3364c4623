"""What the trace importers share: their error, rank-file discovery and collectives as messages.

The importers (:mod:`podsim.workloads.chakra` for MLCommons Chakra execution traces,
:mod:`podsim.workloads.kineto` for PyTorch profiler / Kineto JSON) turn one trace file per rank
into one :class:`podsim.workloads.graph.OpGraph`: compute keeps its recorded duration,
communication becomes ``send`` nodes that the executor replays on the simulated fabric.

Collectives are expanded into point-to-point messages by :func:`collective_sends`, the textbook
algorithms NCCL uses on a ring (NCCL's documentation, "Collective Operations"; the ring
schedule and its 2 (p - 1) / p per-rank volume for all-reduce: Patarasuk & Yuan, "Bandwidth
optimal all-reduce algorithms for clusters of workstations", JPDC 69(2), 2009):

- ``all_reduce``: reduce-scatter then all-gather on a ring, 2 (p - 1) steps; in step k the
  rank at ring position i sends chunk (i - k) mod p to position i + 1, after it received the
  chunk of step k - 1 from position i - 1 and its own step k - 1 send was delivered;
- ``reduce_scatter`` / ``all_gather``: the first / second half of that, p - 1 steps;
- ``all_to_all``: every rank sends chunk j of its buffer straight to rank j, all at once;
- ``barrier``: no bytes; every rank's part ends when every rank of the group has begun.

``nbytes`` is the size of the whole buffer the collective works on (all-reduce: the reduced
tensor; all-gather: the gathered output; reduce-scatter: the input; all-to-all: one rank's send
buffer); it is split into p chunks of ``nbytes // p`` bytes, the first ``nbytes % p`` one byte
larger. Tree, NVLS and CollNet algorithms are not modelled (an assumption: NCCL picks the ring for
large messages on most topologies).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from podsim.workloads.graph import OpGraph

__all__ = [
    "COLLECTIVES",
    "TraceImportError",
    "chunk_sizes",
    "collective_sends",
    "expand_collective",
    "rank_files",
]

#: collectives :func:`collective_sends` expands
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "barrier")


class TraceImportError(ValueError):
    """A trace file that cannot be imported; the message names the file, the node (or event)
    and the field."""

    def __init__(
        self,
        file: str | Path,
        message: str,
        *,
        node: str | int | None = None,
        field: str | None = None,
    ) -> None:
        self.file = str(file)
        self.node = node
        self.field = field
        where = [f"trace file {self.file}"]
        if node is not None:
            where.append(f"node {node}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(f"{', '.join(where)}: {message}")


def rank_files(path: str | Path, suffix: str) -> list[Path]:
    """The per-rank files of a trace, rank 0 first.

    ``path`` is a directory (every ``*<suffix>`` file in it, which must be named
    ``<prefix>.<rank><suffix>`` with one prefix) or a prefix ``dir/<prefix>`` (the files
    ``dir/<prefix>.<rank><suffix>``). Ranks must be 0 .. n - 1, each once; a missing rank is an
    error naming it."""
    p = Path(path)
    if p.is_dir():
        files = sorted(p.glob(f"*{suffix}"))
        where = p
    else:
        files = sorted(p.parent.glob(f"{p.name}.*{suffix}"))
        where = Path(f"{p}.<rank>{suffix}")
    if not files:
        raise TraceImportError(where, f"no trace files (*{suffix}) found")
    pattern = re.compile(r"^(?P<prefix>.*)\.(?P<rank>\d+)" + re.escape(suffix) + "$")
    by_rank: dict[int, Path] = {}
    prefixes: set[str] = set()
    for f in files:
        m = pattern.match(f.name)
        if m is None:
            raise TraceImportError(
                f, f"the name is not <prefix>.<rank>{suffix}: the rank cannot be told"
            )
        prefixes.add(m["prefix"])
        r = int(m["rank"])
        if r in by_rank:
            raise TraceImportError(f, f"rank {r} also comes from {by_rank[r]}")
        by_rank[r] = f
    if len(prefixes) > 1:
        raise TraceImportError(
            where, f"files of more than one trace: prefixes {', '.join(sorted(prefixes))}"
        )
    missing = sorted(set(range(max(by_rank) + 1)) - set(by_rank))
    if missing:
        raise TraceImportError(
            where,
            f"rank {missing[0]} is missing (ranks must be 0 .. {max(by_rank)}; found "
            f"{len(by_rank)} files)",
        )
    return [by_rank[r] for r in range(len(by_rank))]


def chunk_sizes(nbytes: int, p: int) -> list[int]:
    """``nbytes`` split into ``p`` chunks: ``nbytes // p`` each, the first ``nbytes % p`` one
    byte larger (sums to ``nbytes``)."""
    q, rem = divmod(int(nbytes), p)
    return [q + (1 if j < rem else 0) for j in range(p)]


def collective_sends(
    g: OpGraph,
    kind: str,
    ranks: Sequence[int],
    nbytes: int,
    begin: Mapping[int, int],
    *,
    label: str = "",
) -> dict[int, list[int]]:
    """Add the messages of one collective among ``ranks`` (in ring order) to ``g``.

    ``begin[r]`` is the node after which rank ``r`` may take part. Returns, per rank, the nodes
    that must end before the rank's part of the collective has ended (its last sends and the
    messages it receives); the caller makes its end node depend on them. See the module
    docstring for the algorithms and what ``nbytes`` means. The messages carry ``step`` = the
    ring step."""
    if kind not in COLLECTIVES:
        raise ValueError(f"collective {kind!r} is not one of {', '.join(COLLECTIVES)}")
    p = len(ranks)
    done: dict[int, list[int]] = {r: [begin[r]] for r in ranks}
    if p <= 1 or kind == "barrier":
        if kind == "barrier":
            for r in ranks:
                done[r] = [begin[q] for q in ranks]
        return done
    chunks = chunk_sizes(nbytes, p)
    if kind == "all_to_all":
        for i, src in enumerate(ranks):
            for j, dst in enumerate(ranks):
                if i == j:
                    continue
                m = g.send(src, dst, chunks[j], (begin[src],), label=f"{label} {i}->{j}")
                done[src].append(m)
                done[dst].append(m)
        return done
    steps = {"all_reduce": 2 * (p - 1), "reduce_scatter": p - 1, "all_gather": p - 1}[kind]
    # all-gather's first step sends the rank's own chunk, as the all-gather half of all-reduce
    offset = 1 if kind == "all_gather" else 0
    prev: list[int] | None = None
    for k in range(steps):
        cur = []
        for i, src in enumerate(ranks):
            deps = [begin[src]] if prev is None else [prev[i], prev[(i - 1) % p]]
            chunk = chunks[(i + offset - k) % p]
            cur.append(
                g.send(src, ranks[(i + 1) % p], chunk, deps, step=k, label=f"{label} step {k} {i}")
            )
        prev = cur
    assert prev is not None
    for i, r in enumerate(ranks):
        done[r] = [prev[i], prev[(i - 1) % p]]
    return done


def expand_collective(
    g: OpGraph,
    kind: str,
    ranks: Sequence[int],
    nbytes: int,
    begin: Mapping[int, int],
    end: Mapping[int, int],
    *,
    step: int,
    label: str = "",
) -> None:
    """One collective of an imported trace: its messages (:func:`collective_sends`) after
    ``begin[r]``, ``end[r]`` (a node the importer made) waiting for rank ``r``'s part, and a
    span per rank from ``begin[r]`` to ``end[r]`` tagged ``step`` (the collective's number in
    the trace), ``layer`` 0, ``phase`` ``other``, ``collective`` (its kind), ``bytes_out`` =
    ``bytes_in`` = ``nbytes`` (NCCL's buffer size, as the ``collective`` workload's spans) and
    NCCL's bus-bandwidth factor (nccl-tests doc/PERFORMANCE.md: all-reduce 2 (p - 1) / p, the
    others (p - 1) / p)."""
    done = collective_sends(g, kind, ranks, nbytes, begin, label=label)
    p = len(ranks)
    factor = {"all_reduce": 2 * (p - 1) / p}.get(kind, (p - 1) / p) if kind != "barrier" else 0.0
    for r, nodes in done.items():
        for d in nodes:
            g.add_dep(d, end[r])
        g.span(
            r,
            begin[r],
            end[r],
            step=step,
            layer=0,
            phase="other",
            collective=kind,
            bytes_out=nbytes,
            bytes_in=nbytes,
            bus_factor=factor,
        )
