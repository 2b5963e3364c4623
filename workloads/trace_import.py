"""What the trace importers share: their error, rank-file discovery and collectives as messages.

The importers (:mod:`podsim.workloads.chakra` for MLCommons Chakra execution traces,
:mod:`podsim.workloads.kineto` for PyTorch profiler / Kineto JSON) turn one trace file per rank
into one :class:`podsim.workloads.graph.OpGraph`: compute keeps its recorded duration,
communication becomes ``send`` nodes that the executor replays on the simulated fabric.

Collectives are expanded into point-to-point messages by NCCL's algorithms as
:mod:`podsim.workloads.collectives` builds them: ring all-reduce, reduce-scatter and all-gather,
direct all-to-all, ring (chain) broadcast and reduce from / to a root (one channel, whole
slices); a ``barrier`` moves no bytes and ends on every
rank of its group when every rank has begun. ``nbytes`` follows NCCL's convention there (the
per-rank buffer of all-reduce, the input of reduce-scatter, the output of all-gather, the
per-rank send buffer of all-to-all). Tree, NVLS and CollNet algorithms are not modelled (an
assumption: NCCL picks the ring for large messages on most topologies).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from podsim.workloads.collectives import BUS_FACTORS, Collective, build_collective
from podsim.workloads.graph import OpGraph

__all__ = [
    "COLLECTIVES",
    "TraceImportError",
    "expand_collective",
    "rank_files",
]

#: collectives an imported trace may hold (names as podsim.workloads.collectives)
COLLECTIVES = (
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "broadcast",
    "reduce",
    "barrier",
)


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
    root: int | None = None,
) -> None:
    """One collective of an imported trace: its messages (module docstring) after
    ``begin[r]``, ``end[r]`` (a node the importer made) waiting for rank ``r``'s part, and a
    span per rank from ``begin[r]`` to ``end[r]`` tagged ``step`` (the collective's number in
    the trace), ``layer`` 0, ``phase`` ``other``, ``collective`` (its kind), ``bytes_out`` =
    ``bytes_in`` = ``nbytes`` (NCCL's buffer size, as the ``collective`` workload's spans) and
    NCCL's bus-bandwidth factor (:data:`podsim.workloads.collectives.BUS_FACTORS`). ``root``:
    broadcast's source and reduce's destination (None: the first of ``ranks``)."""
    if kind not in COLLECTIVES:
        raise ValueError(f"collective {kind!r} is not one of {', '.join(COLLECTIVES)}")
    p = len(ranks)
    if kind == "barrier":
        factor = 0.0
        for r in ranks:
            for q in ranks:
                g.add_dep(begin[q], end[r])
    else:
        factor = BUS_FACTORS[kind](p)
        algorithm = "direct" if kind == "all-to-all" else "ring"
        spec = Collective(
            kind, list(ranks), int(nbytes), algorithm, step=step, label=label, root=root
        )
        for r, d in build_collective(g, spec, begin).items():
            g.add_dep(d, end[r])
    for r in ranks:
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
