"""MLCommons Chakra execution traces (``.et``, as ASTRA-sim reads them) -> an operation graph.

Format (read from the schema MLCommons publishes, ``schema/protobuf/et_def.proto`` of
github.com/mlcommons/chakra at commit 21585d8, Apache-2.0; and its stream framing in
``src/third_party/utils/protolib.py``): a file is a sequence of protobuf messages, each
preceded by its length as a varint; the first is ``GlobalMetadata`` (field 1 ``version``,
field 2 repeated ``attr``), every later one a ``Node``. The file may be gzip-compressed.
This module decodes and encodes the protobuf wire format itself (the encoding is Google's
public specification, protobuf.dev/programming-guides/encoding), so podsim needs no protobuf
package and no generated code. The fields it uses:

==========================  =====  =============================================================
``Node`` field              no.    use
==========================  =====  =============================================================
``id``                      1      the node's id (unique within its file)
``name``                    2      label
``type``                    3      ``NodeType``: METADATA 1, MEM_LOAD 2, MEM_STORE 3, COMP 4,
                                   COMM_SEND 5, COMM_RECV 6, COMM_COLL 7
``ctrl_deps``/``data_deps`` 4, 5   ids of nodes in the same file this node waits for (both kinds
                                   are dependencies alike)
``duration_micros``         7      compute time (COMP, MEM nodes)
``attr``                    10     ``AttributeProto`` (name 1; value in the oneof 3..32)
==========================  =====  =============================================================

Attributes read (names as Chakra's feeder, ``src/feeder/et_feeder_node.cpp``): ``comm_type``
(``CollectiveCommType``: ALL_REDUCE 0, REDUCE 1, ALL_GATHER 2, BROADCAST 5, ALL_TO_ALL 6,
REDUCE_SCATTER 7, REDUCE_SCATTER_BLOCK 8, BARRIER 9; GATHER and SCATTER are refused; the schema
records no root, so broadcast and reduce are assumed rooted at the group's first rank),
``comm_size`` (bytes), ``comm_src``/``comm_dst``/``comm_tag`` (point-to-point), ``pg_name``
(the process group), ``is_cpu_op``. Any integer-typed oneof member is accepted for an integer
attribute (producers differ: int32/int64/uint64).

Replay (:func:`chakra_graph`):

- COMP -> a ``compute`` node of ``duration_micros`` x ``compute_scale`` on the rank's
  ``compute`` stream (``cpu`` stream when ``is_cpu_op``). Assumption [E]: a GPU runs one compute
  node at a time, in the file's dependency order (ties by node id), as ASTRA-sim issues them;
  ``serialize_compute=False`` lets independent compute nodes overlap.
- MEM_LOAD / MEM_STORE -> compute of their ``duration_micros`` on the ``mem`` stream (no memory
  model); METADATA -> a join.
- COMM_COLL -> the collective's point-to-point messages
  (:func:`podsim.workloads.trace_import.expand_collective`) among the group's ranks with
  ``comm_size`` bytes. The group: ``comm_groups[pg_name]`` when given, else every rank of the
  trace. The k-th collective of a group on each of its ranks is one collective (ranks issue a
  communicator's collectives in one order, as NCCL requires); their type and size must agree.
- COMM_SEND on rank s with ``comm_dst`` d and ``comm_tag`` t is matched with the COMM_RECV on
  rank d with ``comm_src`` s and tag t, in order (FIFO per (s, d, t), as MPI's non-overtaking
  rule). The SEND becomes one ``send`` node; nodes depending on it wait for its delivery. The
  RECV becomes a join that waits for the message and for its own dependencies.

The files: :func:`podsim.workloads.trace_import.rank_files` (``<prefix>.<rank>.et``).
"""

from __future__ import annotations

import gzip
import heapq
import struct
from collections import defaultdict, deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from podsim.workloads.graph import GraphError, OpGraph
from podsim.workloads.trace_import import TraceImportError, expand_collective, rank_files

__all__ = [
    "COLL_TYPES",
    "NODE_TYPES",
    "EtNode",
    "chakra_graph",
    "read_et",
    "write_et",
]

# NodeType (et_def.proto)
INVALID_NODE, METADATA_NODE, MEM_LOAD_NODE, MEM_STORE_NODE = 0, 1, 2, 3
COMP_NODE, COMM_SEND_NODE, COMM_RECV_NODE, COMM_COLL_NODE = 4, 5, 6, 7
NODE_TYPES = {
    METADATA_NODE: "METADATA_NODE",
    MEM_LOAD_NODE: "MEM_LOAD_NODE",
    MEM_STORE_NODE: "MEM_STORE_NODE",
    COMP_NODE: "COMP_NODE",
    COMM_SEND_NODE: "COMM_SEND_NODE",
    COMM_RECV_NODE: "COMM_RECV_NODE",
    COMM_COLL_NODE: "COMM_COLL_NODE",
}
#: CollectiveCommType (et_def.proto) -> the collective of trace_import, or None: not replayed
COLL_TYPES: dict[int, tuple[str, str | None]] = {
    0: ("ALL_REDUCE", "all-reduce"),
    1: ("REDUCE", "reduce"),
    2: ("ALL_GATHER", "all-gather"),
    3: ("GATHER", None),
    4: ("SCATTER", None),
    5: ("BROADCAST", "broadcast"),
    6: ("ALL_TO_ALL", "all-to-all"),
    7: ("REDUCE_SCATTER", "reduce-scatter"),
    8: ("REDUCE_SCATTER_BLOCK", "reduce-scatter"),
    9: ("BARRIER", "barrier"),
}

# AttributeProto oneof members: field number -> (name, wire type); lists are 4, 6, ... 32
_SCALAR = {
    3: "double",
    5: "float",
    7: "int32",
    9: "int64",
    11: "uint32",
    13: "uint64",
    15: "sint32",
    17: "sint64",
    19: "fixed32",
    21: "fixed64",
    23: "sfixed32",
    25: "sfixed64",
    27: "bool",
    29: "string",
    31: "bytes",
}
_FIELD_OF = {v: k for k, v in _SCALAR.items()}
_VARINT_KINDS = ("int32", "int64", "uint32", "uint64", "sint32", "sint64", "bool")


@dataclass
class EtNode:
    """One Chakra ``Node`` (the fields podsim reads). ``attrs`` maps an attribute's name to its
    value; when writing, a value may be ``(kind, value)`` with kind one of the AttributeProto
    scalar members (``int64``, ``int32``, ``uint64``, ``bool``, ``string``, ``double`` ...);
    a bare int is written as ``int64``, bool as ``bool``, str as ``string``, float as
    ``double``."""

    id: int
    name: str
    type: int
    ctrl_deps: list[int] = field(default_factory=list)
    data_deps: list[int] = field(default_factory=list)
    start_time_micros: int = 0
    duration_micros: int = 0
    attrs: dict[str, Any] = field(default_factory=dict)


# -- the wire format ------------------------------------------------------------------------


class _WireError(ValueError):
    pass


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise _WireError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise _WireError("varint longer than 10 bytes")


def _fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, raw value) of every field of one message."""
    pos = 0
    n = len(buf)
    while pos < n:
        key, pos = _varint(buf, pos)
        num, wt = key >> 3, key & 7
        if num == 0:
            raise _WireError("field number 0")
        if wt == 0:
            val, pos = _varint(buf, pos)
        elif wt == 1:
            if pos + 8 > n:
                raise _WireError("truncated 64-bit field")
            val, pos = buf[pos : pos + 8], pos + 8
        elif wt == 2:
            ln, pos = _varint(buf, pos)
            if pos + ln > n:
                raise _WireError(f"field {num}: length {ln} runs past the end of its message")
            val, pos = buf[pos : pos + ln], pos + ln
        elif wt == 5:
            if pos + 4 > n:
                raise _WireError("truncated 32-bit field")
            val, pos = buf[pos : pos + 4], pos + 4
        else:
            raise _WireError(f"field {num}: wire type {wt} is not one protobuf 3 writes")
        yield num, wt, val


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _unzigzag(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


def _uint_list(wt: int, val: Any) -> list[int]:
    """A repeated varint field: packed (wire type 2) or one element (wire type 0)."""
    if wt == 0:
        return [val]
    if wt != 2:
        raise _WireError(f"wire type {wt} for a repeated integer")
    out = []
    pos = 0
    while pos < len(val):
        v, pos = _varint(val, pos)
        out.append(v)
    return out


def _scalar(kind: str, wt: int, val: Any) -> Any:
    if kind in _VARINT_KINDS:
        if wt != 0:
            raise _WireError(f"{kind} value with wire type {wt}")
        if kind in ("int32", "int64"):
            return _signed64(val)
        if kind in ("sint32", "sint64"):
            return _unzigzag(val)
        if kind == "bool":
            return bool(val)
        return val
    if kind in ("string", "bytes"):
        if wt != 2:
            raise _WireError(f"{kind} value with wire type {wt}")
        return bytes(val).decode("utf-8", errors="replace") if kind == "string" else bytes(val)
    fmt = {
        "double": "<d",
        "float": "<f",
        "fixed32": "<I",
        "fixed64": "<Q",
        "sfixed32": "<i",
        "sfixed64": "<q",
    }[kind]
    if wt != (1 if fmt[1] in "dQq" else 5):
        raise _WireError(f"{kind} value with wire type {wt}")
    return struct.unpack(fmt, val)[0]


def _attr(buf: bytes) -> tuple[str, Any]:
    name = ""
    value: Any = None
    for num, wt, val in _fields(buf):
        if num == 1:
            name = bytes(val).decode("utf-8", errors="replace")
        elif num in _SCALAR:
            value = _scalar(_SCALAR[num], wt, val)
        elif 4 <= num <= 32 and num % 2 == 0:
            kind = _SCALAR[num - 1]
            items: list[Any] = []
            for inum, iwt, ival in _fields(val):  # XxxList: field 1 repeated
                if inum != 1:
                    continue
                if kind in _VARINT_KINDS:
                    items.extend(_scalar(kind, 0, v) for v in _uint_list(iwt, ival))
                elif kind in ("string", "bytes"):
                    items.append(_scalar(kind, iwt, ival))
                else:
                    size = 8 if kind in ("double", "fixed64", "sfixed64") else 4
                    raw = bytes(ival)
                    items.extend(
                        _scalar(kind, 1 if size == 8 else 5, raw[k : k + size])
                        for k in range(0, len(raw), size)
                    )
            value = items
    return name, value


def _node(buf: bytes) -> EtNode:
    nd = EtNode(id=0, name="", type=INVALID_NODE)
    for num, wt, val in _fields(buf):
        if num == 1:
            nd.id = _scalar("uint64", wt, val)
        elif num == 2:
            nd.name = _scalar("string", wt, val)
        elif num == 3:
            nd.type = _scalar("uint64", wt, val)
        elif num == 4:
            nd.ctrl_deps.extend(_uint_list(wt, val))
        elif num == 5:
            nd.data_deps.extend(_uint_list(wt, val))
        elif num == 6:
            nd.start_time_micros = _scalar("uint64", wt, val)
        elif num == 7:
            nd.duration_micros = _scalar("uint64", wt, val)
        elif num == 10:
            if wt != 2:
                raise _WireError(f"attr with wire type {wt}")
            k, v = _attr(val)
            nd.attrs[k] = v
        # 8, 9 (inputs/outputs) and unknown fields are skipped, as protobuf does
    return nd


def _frames(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(byte offset, message) of each length-delimited message of a file."""
    pos = 0
    while pos < len(data):
        start = pos
        ln, pos = _varint(data, pos)
        if pos + ln > len(data):
            raise _WireError(
                f"the message at byte {start} says it has {ln} bytes; only {len(data) - pos} "
                "are left (truncated file?)"
            )
        yield start, data[pos : pos + ln]
        pos += ln


def read_et(path: str | Path) -> tuple[str, list[EtNode]]:
    """The schema version (GlobalMetadata) and the nodes of one ``.et`` file (gzip or not).

    Raises :class:`TraceImportError` naming the file and the byte offset of a message that is
    not valid protobuf, or a node whose type is unknown."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise TraceImportError(path, f"cannot be read ({e.strerror or e})") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise TraceImportError(path, f"gzip data cannot be read ({e})") from None
    version = None
    nodes: list[EtNode] = []
    where = "the file"
    try:
        for k, (offset, msg) in enumerate(_frames(data)):
            where = f"the message at byte {offset}"
            if k == 0:
                version = ""
                for num, wt, val in _fields(msg):
                    if num == 1:
                        version = _scalar("string", wt, val)
                continue
            nodes.append(_node(msg))
    except _WireError as e:
        raise TraceImportError(
            path,
            f"not a Chakra execution trace: {where} is not valid length-delimited protobuf ({e})",
        ) from None
    if version is None:
        raise TraceImportError(path, "empty: no GlobalMetadata message, so not a Chakra trace")
    seen: set[int] = set()
    for nd in nodes:
        if nd.type not in NODE_TYPES:
            raise TraceImportError(
                path,
                f"type {nd.type} is not a node type podsim replays (known: "
                + ", ".join(f"{k} {v}" for k, v in NODE_TYPES.items())
                + ")",
                node=f"{nd.id} ({nd.name})" if nd.name else nd.id,
                field="type",
            )
        if nd.id in seen:
            raise TraceImportError(path, "the id is used twice", node=nd.id, field="id")
        seen.add(nd.id)
    return version, nodes


def _enc_varint(v: int) -> bytes:
    if v < 0:
        v += 1 << 64
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _enc_field(num: int, wt: int, payload: bytes | int) -> bytes:
    key = _enc_varint(num << 3 | wt)
    if wt == 0:
        assert isinstance(payload, int)
        return key + _enc_varint(payload)
    assert isinstance(payload, bytes)
    if wt == 2:
        return key + _enc_varint(len(payload)) + payload
    return key + payload


def _enc_attr(name: str, value: Any) -> bytes:
    if isinstance(value, tuple):
        kind, v = value
    elif isinstance(value, bool):
        kind, v = "bool", value
    elif isinstance(value, int):
        kind, v = "int64", value
    elif isinstance(value, float):
        kind, v = "double", value
    elif isinstance(value, str):
        kind, v = "string", value
    else:
        raise TypeError(f"attribute {name}: give (kind, value) for {type(value).__name__}")
    num = _FIELD_OF[kind]
    out = _enc_field(1, 2, name.encode())
    if kind in _VARINT_KINDS:
        iv = int(v)
        if kind in ("sint32", "sint64"):
            iv = (iv << 1) ^ (iv >> 63)
        return out + _enc_field(num, 0, iv)
    if kind in ("string", "bytes"):
        return out + _enc_field(num, 2, v.encode() if kind == "string" else bytes(v))
    fmt = {"double": "<d", "float": "<f", "fixed32": "<I", "fixed64": "<Q"}
    fmt |= {"sfixed32": "<i", "sfixed64": "<q"}
    return out + _enc_field(num, 1 if fmt[kind][1] in "dQq" else 5, struct.pack(fmt[kind], v))


def _packed(values: Iterable[int]) -> bytes:
    return b"".join(_enc_varint(int(v)) for v in values)


def _enc_node(nd: EtNode) -> bytes:
    out = bytearray()
    # proto3 leaves fields at their default value out of the encoding
    if nd.id:
        out += _enc_field(1, 0, nd.id)
    if nd.name:
        out += _enc_field(2, 2, nd.name.encode())
    if nd.type:
        out += _enc_field(3, 0, nd.type)
    if nd.ctrl_deps:
        out += _enc_field(4, 2, _packed(nd.ctrl_deps))
    if nd.data_deps:
        out += _enc_field(5, 2, _packed(nd.data_deps))
    if nd.start_time_micros:
        out += _enc_field(6, 0, nd.start_time_micros)
    if nd.duration_micros:
        out += _enc_field(7, 0, nd.duration_micros)
    for name, value in nd.attrs.items():
        out += _enc_field(10, 2, _enc_attr(name, value))
    return bytes(out)


def write_et(path: str | Path, nodes: Sequence[EtNode], version: str = "0.0.4") -> None:
    """Write ``nodes`` as a Chakra ``.et`` file (GlobalMetadata with ``version`` first, then
    each node; every message preceded by its varint length), uncompressed."""
    frames = [_enc_field(1, 2, version.encode())] + [_enc_node(nd) for nd in nodes]
    Path(path).write_bytes(b"".join(_enc_varint(len(f)) + f for f in frames))


# -- the graph ------------------------------------------------------------------------------


def _int_attr(path: Path, nd: EtNode, name: str, *, default: int | None = None) -> int:
    v = nd.attrs.get(name, default)
    if v is None:
        raise TraceImportError(
            path,
            f"{NODE_TYPES[nd.type]} needs the attribute {name!r}",
            node=nd.id,
            field=name,
        )
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise TraceImportError(
            path, f"must be an integer >= 0; got {v!r}", node=nd.id, field=f"attr {name}"
        )
    return v


def _topo_order(path: Path, nodes: list[EtNode]) -> list[EtNode]:
    """Nodes in dependency order, ties by id (Kahn's algorithm); refuses a dependency on an id
    not in the file and a cycle."""
    by_id = {nd.id: nd for nd in nodes}
    indeg = {nd.id: 0 for nd in nodes}
    succ: dict[int, list[int]] = defaultdict(list)
    for nd in nodes:
        for fld, deps in (("data_deps", nd.data_deps), ("ctrl_deps", nd.ctrl_deps)):
            for d in dict.fromkeys(deps):
                if d not in by_id:
                    raise TraceImportError(
                        path,
                        f"depends on node {d}, which is not in the file",
                        node=nd.id,
                        field=fld,
                    )
                if nd.id in succ[d]:
                    continue  # listed as both data and control dependency
                succ[d].append(nd.id)
                indeg[nd.id] += 1
    heap = [i for i, k in indeg.items() if k == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        i = heapq.heappop(heap)
        out.append(by_id[i])
        for j in succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(heap, j)
    if len(out) < len(nodes):
        stuck = min(i for i, k in indeg.items() if k > 0)
        raise TraceImportError(
            path, "the dependencies form a cycle through this node", node=stuck, field="deps"
        )
    return out


@dataclass
class _Coll:
    path: Path
    node: EtNode
    rank: int
    kind: str
    nbytes: int
    begin: int
    end: int


def chakra_graph(
    path: str | Path | Sequence[str | Path],
    *,
    compute_scale: float = 1.0,
    comm_groups: Mapping[str, Sequence[int]] | None = None,
    serialize_compute: bool = True,
) -> OpGraph:
    """The operation graph of a Chakra trace: one ``.et`` file per rank (a directory, a
    ``dir/<prefix>`` whose files are ``<prefix>.<rank>.et``, or the list of files, rank 0
    first). See the module docstring for how each node is replayed.

    ``compute_scale`` multiplies every recorded compute duration (0.5: a GPU twice as fast as
    the traced one); a straggler is ``OpGraph.scale_compute`` on the result.
    ``comm_groups`` maps a ``pg_name`` to its ranks. Every problem is a
    :class:`TraceImportError` naming the file, the node and the field."""
    if isinstance(path, (str, Path)):
        files = rank_files(path, ".et")
    else:
        files = [Path(p) for p in path]
        if not files:
            raise TraceImportError("(no files)", "a Chakra trace needs at least one file")
    if not compute_scale >= 0:
        raise ValueError(f"compute_scale must be >= 0; got {compute_scale}")
    n = len(files)
    g = OpGraph()
    colls: dict[tuple[str, tuple[int, ...]], list[list[_Coll]]] = {}
    sends: dict[tuple[int, int, int], deque[tuple[Path, EtNode, int]]] = defaultdict(deque)
    recvs: dict[tuple[int, int, int], deque[tuple[Path, EtNode, int]]] = defaultdict(deque)
    all_ranks = tuple(range(n))
    for rank, f in enumerate(files):
        _version, nodes = read_et(f)
        end_of: dict[int, int] = {}
        seq: dict[tuple[str, tuple[int, ...]], int] = defaultdict(int)
        for nd in _topo_order(f, nodes):
            deps = [end_of[d] for d in dict.fromkeys(nd.data_deps + nd.ctrl_deps)]
            label = f"rank {rank} node {nd.id} {nd.name}".rstrip()
            t = nd.type
            if t == COMP_NODE or t in (MEM_LOAD_NODE, MEM_STORE_NODE):
                if t == COMP_NODE:
                    stream = "cpu" if nd.attrs.get("is_cpu_op") is True else "compute"
                else:
                    stream = "mem"
                end_of[nd.id] = g.compute(
                    rank,
                    nd.duration_micros * 1e-6 * compute_scale,
                    deps,
                    stream=stream if serialize_compute else None,
                    label=label,
                )
            elif t == METADATA_NODE:
                end_of[nd.id] = g.join(deps, rank=rank, label=label)
            elif t == COMM_COLL_NODE:
                ctype = _int_attr(f, nd, "comm_type")
                name, kind = COLL_TYPES.get(ctype, (str(ctype), None))
                if kind is None:
                    raise TraceImportError(
                        f,
                        f"collective {name} is not replayed (podsim replays "
                        + ", ".join(k for k, v in COLL_TYPES.values() if v)
                        + ")",
                        node=nd.id,
                        field="attr comm_type",
                    )
                nbytes = _int_attr(f, nd, "comm_size", default=0 if kind == "barrier" else None)
                pg = nd.attrs.get("pg_name")
                if comm_groups is not None and pg is not None:
                    if pg not in comm_groups:
                        raise TraceImportError(
                            f,
                            f"process group {pg!r} is not in comm_groups (known: "
                            f"{', '.join(map(str, comm_groups)) or 'none'})",
                            node=nd.id,
                            field="attr pg_name",
                        )
                    group = tuple(int(r) for r in comm_groups[pg])
                    bad = [r for r in group if not 0 <= r < n]
                    if bad or rank not in group:
                        raise TraceImportError(
                            f,
                            f"process group {pg!r} = {list(group)} "
                            + (
                                f"names rank {bad[0]}, not in the trace's 0 .. {n - 1}"
                                if bad
                                else f"does not contain this file's rank {rank}"
                            ),
                            node=nd.id,
                            field="attr pg_name",
                        )
                else:
                    group = all_ranks
                key = (str(pg or ""), group)
                k = seq[key]
                seq[key] += 1
                begin = g.join(deps, rank=rank, label=f"{label} begin")
                end = g.join(rank=rank, label=f"{label} end")
                g.add_dep(begin, end)
                inst = colls.setdefault(key, [])
                while len(inst) <= k:
                    inst.append([])
                inst[k].append(_Coll(f, nd, rank, kind, nbytes, begin, end))
                end_of[nd.id] = end
            elif t == COMM_SEND_NODE:
                dst = _int_attr(f, nd, "comm_dst")
                tag = _int_attr(f, nd, "comm_tag", default=0)
                size = _int_attr(f, nd, "comm_size")
                if dst >= n:
                    raise TraceImportError(
                        f,
                        f"rank {dst} is not in the trace (0 .. {n - 1})",
                        node=nd.id,
                        field="attr comm_dst",
                    )
                m = g.send(rank, dst, size, deps, label=label)
                sends[(rank, dst, tag)].append((f, nd, m))
                end_of[nd.id] = m
            else:  # COMM_RECV_NODE
                src = _int_attr(f, nd, "comm_src")
                tag = _int_attr(f, nd, "comm_tag", default=0)
                if src >= n:
                    raise TraceImportError(
                        f,
                        f"rank {src} is not in the trace (0 .. {n - 1})",
                        node=nd.id,
                        field="attr comm_src",
                    )
                j = g.join(deps, rank=rank, label=label)
                recvs[(src, rank, tag)].append((f, nd, j))
                end_of[nd.id] = j
    _match_p2p(g, sends, recvs)
    step = 0
    for (pg, group), instances in colls.items():
        for k, parts in enumerate(instances):
            _expand(g, pg, group, k, parts, files, step)
            step += 1
    try:
        g.arrays()
    except GraphError as e:
        raise TraceImportError(
            files[0] if n == 1 else files[0].parent,
            f"the ranks' traces cannot run together ({e}): the collectives or sends and "
            "receives of the ranks are issued in orders that wait on each other",
        ) from None
    return g


def _match_p2p(
    g: OpGraph,
    sends: Mapping[tuple[int, int, int], deque[tuple[Path, EtNode, int]]],
    recvs: Mapping[tuple[int, int, int], deque[tuple[Path, EtNode, int]]],
) -> None:
    for key in sorted(set(sends) | set(recvs)):
        s, r = sends.get(key, deque()), recvs.get(key, deque())
        for (_sf, _snd, m), (_rf, _rnd, j) in zip(s, r, strict=False):
            g.add_dep(m, j)
        if len(s) != len(r):
            src, dst, tag = key
            f, nd, _ = (s if len(s) > len(r) else r)[min(len(s), len(r))]
            what = "send" if len(s) > len(r) else "receive"
            other = "receive on rank" if what == "send" else "send on rank"
            raise TraceImportError(
                f,
                f"this {what} ({src} -> {dst}, tag {tag}) has no matching "
                f"{other} {dst if what == 'send' else src} ({len(s)} sends, {len(r)} receives)",
                node=nd.id,
                field="attr comm_dst" if what == "send" else "attr comm_src",
            )


def _expand(
    g: OpGraph,
    pg: str,
    group: tuple[int, ...],
    k: int,
    parts: list[_Coll],
    files: list[Path],
    step: int,
) -> None:
    have = {c.rank: c for c in parts}
    missing = [r for r in group if r not in have]
    if missing:
        c = parts[0]
        raise TraceImportError(
            files[missing[0]],
            f"has {k} collectives of group {pg or 'all ranks'} but rank {c.rank}'s node "
            f"{c.node.id} is collective number {k + 1} of that group",
            node=f"(collective {k + 1} of the group)",
            field="type",
        )
    first = parts[0]
    for c in parts[1:]:
        if (c.kind, c.nbytes) != (first.kind, first.nbytes):
            raise TraceImportError(
                c.path,
                f"collective {c.kind} of {c.nbytes} bytes, but its counterpart on rank "
                f"{first.rank} (node {first.node.id}) is {first.kind} of {first.nbytes} bytes",
                node=c.node.id,
                field="attr comm_type/comm_size",
            )
    label = f"coll {pg or 'world'}#{k} {first.kind}"
    expand_collective(
        g,
        first.kind,
        group,
        first.nbytes,
        {c.rank: c.begin for c in parts},
        {c.rank: c.end for c in parts},
        step=step,
        label=label,
    )
