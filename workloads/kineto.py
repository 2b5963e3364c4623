"""PyTorch profiler (Kineto) traces, one JSON file per rank -> an operation graph.

A Kineto trace is Chrome trace-event JSON (``{"traceEvents": [...]}``; the format: Google's
"Trace Event Format" document; what PyTorch writes: ``torch.profiler`` with Kineto,
``export_chrome_trace``). Fields read:

=================================  ===========================================================
field                              use
=================================  ===========================================================
``distributedInfo.rank``           the file's rank (else the ``<prefix>.<rank>.json`` name)
``distributedInfo.world_size``     checked against the number of files when present
event ``ph`` = ``"X"``             complete events only (others are ignored)
event ``cat``                      ``kernel`` -> a kernel; ``gpu_memcpy`` / ``gpu_memset`` ->
                                   a copy that occupies its stream like a kernel
event ``ts``, ``dur``              start and duration in microseconds (the format's unit)
``args.stream``                    the CUDA stream: nodes go on stream ``cuda<stream>``
kernel ``name``                    ``ncclKernel*`` / ``ncclDevKernel*`` is a collective
``args."Collective name"``         allreduce, allgather, reduce_scatter, all_to_all, broadcast,
                                   reduce, barrier; send, recv (point-to-point)
``args."Dst Rank"``                a send's peer (global rank), ``"Src Rank"`` a recv's: what
                                   PyTorch's profiler records for p2p (torch/csrc/profiler/
                                   util.cpp, saveNcclMeta: the group's rank list at the peer)
``args."Root rank"``               broadcast's / reduce's root (absent: the group's first rank)
``args."In msg nelems"``           elements in (``"Out msg nelems"`` for all-gather's output)
``args.dtype``                     element type (PyTorch ScalarType names: Float, BFloat16 ...)
``args."Process Group Ranks"``     the group's global ranks (a JSON list or its text)
``args."Group size"``              the group's size when its ranks are not recorded
``args."Process Group Name"``      tells two groups with the same ranks apart
``args."External id"``             when an NCCL kernel lacks the collective's args, they are
                                   taken from the ``cpu_op`` with the same external id
                                   (PyTorch's ``record_param_comms``)
=================================  ===========================================================

Assumptions for what a trace does not record:

- Dependencies between streams: kernels on a stream run in their recorded order (FIFO). A
  ``cuda_sync`` event named ``Stream Wait Event`` (Kineto writes them when PyTorch profiles
  with ``enable_cuda_sync_events=True``; args ``stream``, ``wait_on_stream`` and
  ``wait_on_cuda_event_record_corr_id``, libkineto's CudaSyncActivity) makes the first
  kernel on ``stream`` at or after the wait's ``ts`` wait for the last kernel on
  ``wait_on_stream`` launched before the event was recorded (the largest ``args.correlation``
  below the record's), as Holistic Trace Analysis reads them. Waits without a producer stream
  (``-1``) or record correlation, or on kernels without ``correlation``, are left out: those
  streams are independent except through the collectives. With ``gaps=True`` (default) the
  idle time the trace shows before each kernel on its stream (since the previous kernel on
  that stream ended, or its producer on the other stream if it ended later; for the first,
  since the rank's first GPU event) is kept as a fixed delay: it stands for host time
  (launches, waits podsim does not see) that podsim does not model. ``gaps=False``
  packs each stream's kernels back to back (a lower bound).
- Each rank's clock starts at its own first GPU event (ranks' clocks are not synchronised).
- A group recorded only by ``Group size`` must be the whole trace (every rank); otherwise its
  ranks must be recorded.
- An NCCL kernel's recorded duration (which includes waiting for peers) is replaced by its
  messages replayed on the fabric (:func:`podsim.workloads.trace_import.expand_collective`);
  the k-th collective of a group on each of its ranks is one collective.
- Point-to-point: the k-th ``send`` from rank ``s`` to ``d`` in a process group is the k-th
  ``recv`` on ``d`` from ``s`` in that group (NCCL keeps p2p operations between two ranks in
  order). It is one message of the send's bytes that leaves once both kernels started (an NCCL
  send/recv is a rendezvous: the receiver's kernel provides the buffer) and ends both kernels
  when delivered; a send or recv without its partner, or partners of different sizes, is
  refused naming the file and the field. Coalesced p2p groups (``batch_isend_irecv``: one
  kernel for many operations), gather and scatter are refused with an error naming the event.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from podsim.workloads.graph import GraphError, OpGraph
from podsim.workloads.trace_import import TraceImportError, expand_collective

__all__ = ["DTYPE_BYTES", "kineto_files", "kineto_graph", "kineto_paths", "read_kineto"]

#: bytes per element of PyTorch's ScalarType names (c10/core/ScalarType.h), as
#: record_param_comms writes them in ``dtype``
DTYPE_BYTES = {
    "Double": 8,
    "Float": 4,
    "Half": 2,
    "BFloat16": 2,
    "Long": 8,
    "Int": 4,
    "Short": 2,
    "Char": 1,
    "Byte": 1,
    "Bool": 1,
    "ComplexFloat": 8,
    "ComplexDouble": 16,
    "Float8_e4m3fn": 1,
    "Float8_e5m2": 1,
    "Float8_e4m3fnuz": 1,
    "Float8_e5m2fnuz": 1,
}

_COPY_CATS = ("gpu_memcpy", "gpu_memset")
_NCCL_PREFIXES = ("ncclKernel", "ncclDevKernel")


def _collective_kind(name: str) -> str | None:
    s = name.lower().replace("_", "").replace(" ", "")
    s = s.removeprefix("nccl:")
    for prefix, kind in (
        ("allreduce", "all-reduce"),
        ("allgather", "all-gather"),
        ("reducescatter", "reduce-scatter"),
        ("alltoall", "all-to-all"),
        ("barrier", "barrier"),
        ("broadcast", "broadcast"),
        ("reduce", "reduce"),
        ("send", "send"),
        ("recv", "recv"),
    ):
        if s.startswith(prefix):
            return kind
    return None


@dataclass
class _Kernel:
    index: int  # position in traceEvents
    name: str
    ts: float
    dur: float
    stream: int | str
    args: dict[str, Any]
    nccl: bool


@dataclass
class _RankTrace:
    path: Path
    rank: int | None
    world: int | None
    kernels: list[_Kernel]
    cpu_args: dict[Any, dict[str, Any]]  # External id -> args of cpu_op with collective args
    #: Stream Wait Events: (ts, waiting stream, producer stream, event record correlation)
    waits: list[tuple[float, Any, Any, int]] = field(default_factory=list)


def _num(path: Path, i: int, ev: dict[str, Any], key: str) -> float:
    v = ev.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
        raise TraceImportError(
            path,
            f"must be a number >= 0 (microseconds); got {v!r}",
            node=f"event {i} ({ev.get('name', '?')})",
            field=key,
        )
    return float(v)


def read_kineto(path: str | Path) -> _RankTrace:
    """The GPU events of one Kineto JSON file (``.json`` or ``.json.gz``), checked."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        doc = json.loads(raw)
    except OSError as e:
        raise TraceImportError(path, f"cannot be read ({e.strerror or e})") from None
    except (ValueError, EOFError) as e:  # JSONDecodeError, UnicodeDecodeError, bad gzip
        raise TraceImportError(path, f"not a Kineto trace: not JSON ({e})") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        raise TraceImportError(
            path,
            "not a Kineto/Chrome trace: the top level must be an object with a list 'traceEvents'",
            field="traceEvents",
        )
    info = doc.get("distributedInfo") or {}
    rank = info.get("rank") if isinstance(info, dict) else None
    world = info.get("world_size") if isinstance(info, dict) else None
    for key, v in (("rank", rank), ("world_size", world)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise TraceImportError(
                path, f"must be an integer >= 0; got {v!r}", field=f"distributedInfo.{key}"
            )
    kernels: list[_Kernel] = []
    cpu_args: dict[Any, dict[str, Any]] = {}
    waits: list[tuple[float, Any, Any, int]] = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat = str(ev.get("cat", "")).lower()
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        if cat == "cuda_sync" and ev.get("name") == "Stream Wait Event":
            src, corr = args.get("wait_on_stream"), args.get("wait_on_cuda_event_record_corr_id")
            if isinstance(corr, int) and corr >= 0 and src not in (None, -1) and "stream" in args:
                waits.append((_num(path, i, ev, "ts"), args["stream"], src, corr))
            continue
        if cat == "cpu_op" and "Collective name" in args and "External id" in args:
            cpu_args[args["External id"]] = args
            continue
        if cat != "kernel" and cat not in _COPY_CATS:
            continue
        name = str(ev.get("name", ""))
        if "stream" not in args:
            raise TraceImportError(
                path,
                "a GPU event needs its CUDA stream",
                node=f"event {i} ({name})",
                field="args.stream",
            )
        kernels.append(
            _Kernel(
                index=i,
                name=name,
                ts=_num(path, i, ev, "ts"),
                dur=_num(path, i, ev, "dur"),
                stream=args["stream"],
                args=args,
                nccl=cat == "kernel" and name.startswith(_NCCL_PREFIXES),
            )
        )
    kernels.sort(key=lambda k: k.ts)  # stable: equal ts keep the file's order
    return _RankTrace(path, rank, world, kernels, cpu_args, waits)


def kineto_paths(path: str | Path | Sequence[str | Path]) -> list[Path]:
    """The files of a Kineto trace (not read): every ``*.json`` / ``*.json.gz`` of a directory,
    sorted, or the given list."""
    if isinstance(path, (str, Path)):
        p = Path(path)
        if not p.is_dir():
            raise TraceImportError(p, "a Kineto trace is a directory of per-rank JSON files")
        files = sorted([*p.glob("*.json"), *p.glob("*.json.gz")])
        if not files:
            raise TraceImportError(p, "no trace files (*.json, *.json.gz) in the directory")
        return files
    files = [Path(f) for f in path]
    if not files:
        raise TraceImportError("(no files)", "a Kineto trace needs at least one file")
    return files


def kineto_files(path: str | Path | Sequence[str | Path]) -> list[_RankTrace]:
    """The ranks' traces, rank 0 first: from a directory (every ``*.json`` / ``*.json.gz``)
    or a list of files. A file's rank is its ``distributedInfo.rank``, else the number in a
    ``<prefix>.<rank>.json`` name; ranks must be 0 .. n - 1, each once."""
    files = kineto_paths(path)
    where = files[0].parent
    traces = [read_kineto(f) for f in files]
    by_rank: dict[int, _RankTrace] = {}
    for t in traces:
        r = t.rank
        if r is None:
            m = re.search(r"\.(\d+)\.json(\.gz)?$", t.path.name)
            if m is None:
                raise TraceImportError(
                    t.path,
                    "the rank cannot be told: no distributedInfo.rank and the name is not "
                    "<prefix>.<rank>.json",
                    field="distributedInfo.rank",
                )
            r = t.rank = int(m[1])
        if r in by_rank:
            raise TraceImportError(
                t.path, f"rank {r} is also {by_rank[r].path}", field="distributedInfo.rank"
            )
        by_rank[r] = t
    n = len(by_rank)
    missing = sorted(set(range(max(by_rank) + 1)) - set(by_rank))
    if missing:
        raise TraceImportError(
            where, f"rank {missing[0]} is missing (ranks found: {sorted(by_rank)})"
        )
    for t in traces:
        if t.world is not None and t.world != n:
            raise TraceImportError(
                t.path,
                f"world_size {t.world}, but the trace has {n} rank files",
                field="distributedInfo.world_size",
            )
    return [by_rank[r] for r in range(n)]


@dataclass
class _Part:
    trace: _RankTrace
    kernel: _Kernel
    rank: int
    kind: str
    nbytes: int
    begin: int
    end: int
    root: int | None = None


#: a p2p operation's recorded peer field, by kind
_PEER_FIELD = {"send": "Dst Rank", "recv": "Src Rank"}


def _peer(t: _RankTrace, k: _Kernel, a: dict[str, Any], kind: str, n: int) -> int:
    """The global rank a send goes to or a recv comes from (``Dst Rank`` / ``Src Rank``)."""
    key = _PEER_FIELD[kind]
    v = a.get(key)
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < n or v == t.rank:
        raise TraceImportError(
            t.path,
            f"must be another rank of the trace's 0 .. {n - 1} (PyTorch >= 2.4 records it "
            f"for {kind}); got {v!r}",
            node=f"event {k.index} ({k.name})",
            field=f"args.{key}",
        )
    return v


def _stream_waits(t: _RankTrace) -> dict[int, _Kernel]:
    """Consumer kernel (by position in ``t.kernels``) -> the producer kernel it waits for, from
    the rank's Stream Wait Events (module docstring)."""
    if not t.waits:
        return {}
    by_stream: dict[Any, list[int]] = defaultdict(list)
    for i, k in enumerate(t.kernels):
        by_stream[k.stream].append(i)
    out: dict[int, _Kernel] = {}
    for ts, stream, src, corr in t.waits:
        launched = [
            t.kernels[i]
            for i in by_stream.get(src, [])
            if isinstance(t.kernels[i].args.get("correlation"), int)
            and t.kernels[i].args["correlation"] < corr
        ]
        after = [i for i in by_stream.get(stream, []) if t.kernels[i].ts >= ts]
        if launched and after:
            producer = max(launched, key=lambda k: k.args["correlation"])
            prev = out.get(after[0])
            if prev is None or prev.ts + prev.dur < producer.ts + producer.dur:
                out[after[0]] = producer  # the later-ending one, if it waits on two
    return out


def _coll_args(t: _RankTrace, k: _Kernel) -> dict[str, Any]:
    if "Collective name" in k.args:
        return k.args
    ext = k.args.get("External id")
    if ext is not None and ext in t.cpu_args:
        return t.cpu_args[ext]
    raise TraceImportError(
        t.path,
        "an NCCL kernel without the collective's arguments (neither on the kernel nor on a "
        "cpu_op with its External id): profile with record_shapes=True on PyTorch >= 2.1",
        node=f"event {k.index} ({k.name})",
        field="args.Collective name",
    )


def collective_of(t: _RankTrace, k: _Kernel) -> tuple[dict[str, Any], str, str | None]:
    """An NCCL kernel's collective: its recorded arguments (on the kernel or its cpu_op), the
    recorded collective name and podsim's kind for it (None: not one podsim replays)."""
    a = _coll_args(t, k)
    cname = str(a.get("Collective name"))
    return a, cname, _collective_kind(cname)


def _group(t: _RankTrace, k: _Kernel, a: dict[str, Any], n: int) -> tuple[int, ...]:
    node = f"event {k.index} ({k.name})"
    ranks = a.get("Process Group Ranks")
    if ranks is not None:
        try:
            group = json.loads(ranks) if isinstance(ranks, str) else ranks
            group = tuple(int(r) for r in group)
        except (ValueError, TypeError):
            raise TraceImportError(
                t.path,
                f"must be a list of ranks; got {ranks!r}",
                node=node,
                field="args.Process Group Ranks",
            ) from None
        bad = [r for r in group if not 0 <= r < n]
        if bad or t.rank not in group:
            raise TraceImportError(
                t.path,
                f"{list(group)} "
                + (
                    f"names rank {bad[0]}, not in the trace's 0 .. {n - 1}"
                    if bad
                    else f"does not contain this file's rank {t.rank}"
                ),
                node=node,
                field="args.Process Group Ranks",
            )
        return group
    size = a.get("Group size")
    if size is None or size == n:
        return tuple(range(n))
    raise TraceImportError(
        t.path,
        f"group size {size} is not the whole trace ({n} ranks) and the group's ranks are not "
        "recorded ('Process Group Ranks')",
        node=node,
        field="args.Group size",
    )


def _nbytes(t: _RankTrace, k: _Kernel, a: dict[str, Any], kind: str, p: int) -> int:
    node = f"event {k.index} ({k.name})"
    if kind == "barrier":
        return 0
    dtype = a.get("dtype")
    if dtype not in DTYPE_BYTES:
        raise TraceImportError(
            t.path,
            f"unknown element type {dtype!r} (known: {', '.join(DTYPE_BYTES)})",
            node=node,
            field="args.dtype",
        )
    key = "Out msg nelems" if kind == "all-gather" and "Out msg nelems" in a else "In msg nelems"
    v = a.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise TraceImportError(
            t.path, f"must be an integer >= 0; got {v!r}", node=node, field=f"args.{key}"
        )
    if kind == "all-gather" and key == "In msg nelems":
        v *= p
    return v * DTYPE_BYTES[dtype]


def kineto_graph(
    path: str | Path | Sequence[str | Path],
    *,
    compute_scale: float = 1.0,
    gaps: bool = True,
) -> OpGraph:
    """The operation graph of a Kineto trace (a directory of per-rank JSON files or their
    list; see the module docstring for the fields read and the assumptions). ``compute_scale``
    multiplies every recorded kernel and copy duration (0.5: a GPU twice as fast);
    a straggler is ``OpGraph.scale_compute`` on the result. Problems are
    :class:`TraceImportError` naming the file, the event and the field."""
    if not compute_scale >= 0:
        raise ValueError(f"compute_scale must be >= 0; got {compute_scale}")
    traces = kineto_files(path)
    n = len(traces)
    g = OpGraph()
    colls: dict[tuple[str, tuple[int, ...]], list[list[_Part]]] = {}
    # (group name, src, dst) -> the sends (recvs) between them in issue order
    p2p: dict[str, dict[tuple[str, int, int], list[_Part]]] = {"send": {}, "recv": {}}
    for rank, t in enumerate(traces):
        t0 = min((k.ts for k in t.kernels), default=0.0)
        last_end: dict[Any, float] = {}
        seq: dict[tuple[str, tuple[int, ...]], int] = defaultdict(int)
        waits = _stream_waits(t)
        ends: dict[int, int] = {}  # kernel index in the file -> the node where it ends
        for pos, k in enumerate(t.kernels):
            stream = f"cuda{k.stream}"
            producer = waits.get(pos)
            if producer is not None and producer.index not in ends:
                producer = None  # recorded as starting after its consumer: not a real wait
            since = last_end.get(k.stream, t0)
            if producer is not None:
                since = max(since, producer.ts + producer.dur)
            gap = k.ts - since
            last_end[k.stream] = k.ts + k.dur
            label = f"rank {rank} event {k.index} {k.name}"
            if gaps and gap > 0:
                g.join(rank=rank, stream=stream, delay_s=gap * 1e-6, label=f"{label} gap")
            if producer is not None:  # the stream waits for the other stream's kernel
                g.join((ends[producer.index],), rank=rank, stream=stream, label=f"{label} wait")
            if not k.nccl:
                node = g.compute(rank, k.dur * 1e-6 * compute_scale, stream=stream, label=label)
                ends[k.index] = node
                continue
            a, cname, kind = collective_of(t, k)
            if kind is None:
                raise TraceImportError(
                    t.path,
                    f"collective {cname!r} is not replayed (podsim replays all-reduce, "
                    "all-gather, reduce-scatter, all-to-all, broadcast, reduce, barrier, send "
                    "and recv)",
                    node=f"event {k.index} ({k.name})",
                    field="args.Collective name",
                )
            if kind in _PEER_FIELD:
                peer = _peer(t, k, a, kind, n)
                nbytes = _nbytes(t, k, a, kind, 2)
                begin = g.join(rank=rank, stream=stream, label=f"{label} begin")
                end = ends[k.index] = g.join(rank=rank, stream=stream, label=f"{label} end")
                pair = (rank, peer) if kind == "send" else (peer, rank)
                key3 = (str(a.get("Process Group Name", "")), *pair)
                p2p[kind].setdefault(key3, []).append(_Part(t, k, rank, kind, nbytes, begin, end))
                continue
            group = _group(t, k, a, n)
            nbytes = _nbytes(t, k, a, kind, len(group))
            root = a.get("Root rank")
            if root is not None and (isinstance(root, bool) or root not in group):
                raise TraceImportError(
                    t.path,
                    f"must be one of the group's ranks {list(group)}; got {root!r}",
                    node=f"event {k.index} ({k.name})",
                    field="args.Root rank",
                )
            pg = str(a.get("Process Group Name", ""))
            key = (pg, group)
            i = seq[key]
            seq[key] += 1
            begin = g.join(rank=rank, stream=stream, label=f"{label} begin")
            # on the stream too: it waits for begin, and later kernels on the stream wait for it
            end = ends[k.index] = g.join(rank=rank, stream=stream, label=f"{label} end")
            inst = colls.setdefault(key, [])
            while len(inst) <= i:
                inst.append([])
            inst[i].append(_Part(t, k, rank, kind, nbytes, begin, end, root))
    step = 0
    for (pg, group), instances in colls.items():
        for i, parts in enumerate(instances):
            _expand(g, pg, group, i, parts, traces, step)
            step += 1
    step = _match_p2p(g, p2p, traces, step)
    try:
        g.arrays()
    except GraphError as e:
        raise TraceImportError(
            traces[0].path.parent,
            f"the ranks' traces cannot run together ({e}): their collectives are issued in "
            "orders that wait on each other",
        ) from None
    return g


def _match_p2p(
    g: OpGraph,
    p2p: dict[str, dict[tuple[str, int, int], list[_Part]]],
    traces: list[_RankTrace],
    step: int,
) -> int:
    """Pair the k-th send of (group, src, dst) with the k-th recv (module docstring): one
    message after both kernels started, ending both. Returns the next step number."""
    sends, recvs = p2p["send"], p2p["recv"]
    for key in sorted(set(sends) | set(recvs)):
        pg, src, dst = key
        ss, rr = sends.get(key, []), recvs.get(key, [])
        if len(ss) != len(rr):
            more, rank, kind = (ss, dst, "recv") if len(ss) > len(rr) else (rr, src, "send")
            extra = more[min(len(ss), len(rr))]
            raise TraceImportError(
                traces[rank].path,
                f"has {min(len(ss), len(rr))} {kind}(s) for the {len(more)} {extra.kind}(s) "
                f"{src} -> {dst} of rank {extra.rank} (the unmatched one: event "
                f"{extra.kernel.index}, {extra.kernel.name})",
                field="args.Src Rank" if kind == "recv" else "args.Dst Rank",
            )
        for i, (s, r) in enumerate(zip(ss, rr, strict=True)):
            if s.nbytes != r.nbytes:
                raise TraceImportError(
                    r.trace.path,
                    f"recv of {r.nbytes} bytes, but its send on rank {src} (event "
                    f"{s.kernel.index}) is {s.nbytes} bytes",
                    node=f"event {r.kernel.index} ({r.kernel.name})",
                    field="args.In msg nelems",
                )
            m = g.send(src, dst, s.nbytes, (s.begin, r.begin), step=step,
                       label=f"p2p {pg or 'world'}#{i} {src}->{dst}")  # fmt: skip
            g.add_dep(m, s.end)
            g.add_dep(m, r.end)
            step += 1
    return step


def _expand(
    g: OpGraph,
    pg: str,
    group: tuple[int, ...],
    i: int,
    parts: list[_Part],
    traces: list[_RankTrace],
    step: int,
) -> None:
    have = {p.rank: p for p in parts}
    missing = [r for r in group if r not in have]
    if missing:
        p = parts[0]
        raise TraceImportError(
            traces[missing[0]].path,
            f"lacks collective number {i + 1} of group {list(group)}, which rank {p.rank} "
            f"issues ({p.kind}, event {p.kernel.index})",
            field="args.Collective name",
        )
    first = parts[0]
    for p in parts[1:]:
        if (p.kind, p.nbytes, p.root) != (first.kind, first.nbytes, first.root):
            raise TraceImportError(
                p.trace.path,
                f"{p.kind} of {p.nbytes} bytes (root {p.root}), but the same collective on "
                f"rank {first.rank} (event {first.kernel.index}) is {first.kind} of "
                f"{first.nbytes} bytes (root {first.root})",
                node=f"event {p.kernel.index} ({p.kernel.name})",
                field="args.In msg nelems",
            )
    label = f"coll {pg or 'world'}#{i} {first.kind}"
    expand_collective(
        g,
        first.kind,
        group,
        first.nbytes,
        {p.rank: p.begin for p in parts},
        {p.rank: p.end for p in parts},
        step=step,
        label=label,
        root=first.root,
    )
