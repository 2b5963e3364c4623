"""Chakra execution traces: the wire format, the shipped example and its replay, bad input."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from podsim.workloads.chakra import (
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    EtNode,
    chakra_graph,
    read_et,
    write_et,
)
from podsim.workloads.example_traces import DEFAULT_DIR, write_chakra_example
from podsim.workloads.graph import OpGraph
from podsim.workloads.trace_import import TraceImportError, expand_collective

from tests.workloads.trace_testutil import msg_time, replay

EXAMPLE = DEFAULT_DIR / "chakra-4rank"


def test_the_shipped_example_is_what_the_script_writes(tmp_path: Path) -> None:
    files = write_chakra_example(tmp_path)
    assert [f.name for f in files] == sorted(p.name for p in EXAMPLE.glob("*.et"))
    for f in files:
        assert f.read_bytes() == (EXAMPLE / f.name).read_bytes()


def test_wire_format_round_trips_every_field_podsim_reads(tmp_path: Path) -> None:
    node = EtNode(
        300,
        "coll",
        COMM_COLL_NODE,
        ctrl_deps=[1, 2**40],
        data_deps=[7],
        start_time_micros=5,
        duration_micros=2**33,
        attrs={
            "comm_type": 7,
            "comm_size": ("uint64", 2**50),
            "comm_src": ("int32", -3),
            "pg_name": "tp0",
            "is_cpu_op": True,
            "x": ("sint64", -9),
            "d": 2.5,
            "f": ("fixed32", 11),
        },
    )
    write_et(tmp_path / "a.0.et", [node], version="0.0.4")
    version, nodes = read_et(tmp_path / "a.0.et")
    assert version == "0.0.4"
    assert nodes == [
        node.__class__(
            **{
                **node.__dict__,
                "attrs": {
                    "comm_type": 7,
                    "comm_size": 2**50,
                    "comm_src": -3,
                    "pg_name": "tp0",
                    "is_cpu_op": True,
                    "x": -9,
                    "d": 2.5,
                    "f": 11,
                },
            }
        )
    ]
    # gzip-compressed traces are read too (Chakra's protolib opens either)
    (tmp_path / "b.0.et").write_bytes(gzip.compress((tmp_path / "a.0.et").read_bytes()))
    assert read_et(tmp_path / "b.0.et")[1] == nodes


def test_example_replays_to_the_hand_computed_end_time() -> None:
    """Per rank: forward 100 + 10 r us, a 1 MiB ring all-reduce over 4 ranks (6 steps of
    256 KiB; a rank forwards a slice once it received it, so step k of rank i carries what rank
    i - k began with: ranks 0 and 1 finish 6 steps after rank 3 began at 130 us), backward
    50 us, a 64 KiB send to the next rank, optimizer 20 us."""
    g = chakra_graph(EXAMPLE)
    # per rank: 3 compute, all-reduce begin + end, send, receive join = 7, and the
    # collective builder's entry and exit joins = 2; ring sends 6 x 4
    assert len(g) == 4 * (7 + 2) + 6 * 4
    tr = g.messages(4)
    assert len(tr) == 6 * 4 + 4
    assert tr["bytes"].sum() == 6 * 4 * (1 << 18) + 4 * (1 << 16)
    res = replay(g, 4)
    assert res.status == "complete"
    step = msg_time(1 << 18)
    end = 130e-6 + 6 * step + 50e-6 + msg_time(1 << 16) + 20e-6
    assert res.sim_time_s == pytest.approx(end, rel=1e-12)
    # a prefix names the same trace as the directory
    assert len(chakra_graph(EXAMPLE / "trace")) == len(g)


def test_compute_scale_scales_only_compute() -> None:
    base = replay(chakra_graph(EXAMPLE), 4).sim_time_s
    half = replay(chakra_graph(EXAMPLE, compute_scale=0.5), 4).sim_time_s
    assert base - half == pytest.approx(0.5 * (130e-6 + 50e-6 + 20e-6), rel=1e-9)


def test_collectives_move_nccls_volume_and_a_barrier_waits_for_every_rank() -> None:
    """Bytes each rank sends: all-reduce 2 (p - 1) / p S, the others (p - 1) / p S (nccl-tests
    doc/PERFORMANCE.md), barrier none; a barrier's end waits for the last rank to begin."""
    p, size = 4, 4096
    for kind, factor in (
        ("all-reduce", 2 * (p - 1) / p),
        ("all-gather", (p - 1) / p),
        ("reduce-scatter", (p - 1) / p),
        ("all-to-all", (p - 1) / p),
        ("barrier", 0.0),
    ):
        g = OpGraph()
        begin = {r: g.compute(r, 1e-6 * r) for r in range(p)}
        end = {r: g.join((begin[r],), rank=r) for r in range(p)}
        expand_collective(g, kind, list(range(p)), size, begin, end, step=0)
        tr = g.messages(p)
        sent = tr.groupby("src_rank")["bytes"].sum().reindex(range(p), fill_value=0)
        assert (sent == factor * size).all(), kind
        assert [s[3]["bus_factor"] for s in g.spans()] == [factor] * p
        if kind == "barrier":
            res = replay(g, p)
            assert res.end_s[end[0]] == pytest.approx(3e-6)


def _write(tmp_path: Path, per_rank: list[list[EtNode]]) -> Path:
    for r, nodes in enumerate(per_rank):
        write_et(tmp_path / f"t.{r}.et", nodes)
    return tmp_path / "t"


def test_point_to_point_is_matched_by_source_destination_and_tag(tmp_path: Path) -> None:
    """Rank 0 sends two messages with different tags; rank 1 receives them in the other
    order: each receive waits for the send with its own tag."""
    send = lambda i, tag, size, deps=(): EtNode(  # noqa: E731
        i,
        "s",
        COMM_SEND_NODE,
        data_deps=list(deps),
        attrs={"comm_dst": 1, "comm_tag": tag, "comm_size": size},
    )
    recv = lambda i, tag, deps=(): EtNode(  # noqa: E731
        i, "r", COMM_RECV_NODE, data_deps=list(deps), attrs={"comm_src": 0, "comm_tag": tag}
    )
    prefix = _write(
        tmp_path,
        [
            [
                send(1, 1, 8000),
                EtNode(2, "c", COMP_NODE, data_deps=[1], duration_micros=3),
                send(3, 2, 80000, (2,)),
            ],
            [
                recv(1, 2),
                EtNode(2, "c", COMP_NODE, data_deps=[1], duration_micros=4),
                recv(3, 1, (2,)),
            ],
        ],
    )
    g = chakra_graph(prefix)
    res = replay(g, 2)
    # the tag-2 message leaves after the tag-1 message was delivered and 3 us of compute;
    # rank 1's first receive waits for it (matching in order, ignoring tags, would end at
    # the tag-2 message's arrival instead)
    t2 = msg_time(8000) + 3e-6 + msg_time(80000)
    assert res.sim_time_s == pytest.approx(t2 + 4e-6, rel=1e-12)


def test_unknown_node_type_names_the_file_node_and_field(tmp_path: Path) -> None:
    prefix = _write(tmp_path, [[EtNode(1, "c", COMP_NODE), EtNode(9, "weird", 42)]])
    with pytest.raises(TraceImportError, match=r"t\.0\.et, node 9 \(weird\), field 'type'"):
        chakra_graph(prefix)


@pytest.mark.parametrize(
    ("nodes", "match"),
    [
        ([EtNode(1, "c", COMP_NODE, data_deps=[5])], r"node 1, field 'data_deps': .*node 5"),
        ([EtNode(1, "x", COMM_COLL_NODE, attrs={"comm_size": 8})], r"node 1, field 'comm_type'"),
        (
            [EtNode(1, "x", COMM_COLL_NODE, attrs={"comm_type": 3, "comm_size": 8})],
            r"node 1, field 'attr comm_type': collective GATHER",
        ),
        (
            [EtNode(1, "x", COMM_SEND_NODE, attrs={"comm_dst": 4, "comm_size": 8})],
            r"node 1, field 'attr comm_dst': rank 4 is not in the trace",
        ),
        (
            [EtNode(1, "a", COMP_NODE, data_deps=[2]), EtNode(2, "b", COMP_NODE, ctrl_deps=[1])],
            "cycle",
        ),
    ],
)
def test_bad_nodes_are_named(tmp_path: Path, nodes: list[EtNode], match: str) -> None:
    with pytest.raises(TraceImportError, match=match):
        chakra_graph(_write(tmp_path, [nodes]))


def test_unmatched_send_and_disagreeing_collectives_are_named(tmp_path: Path) -> None:
    send = EtNode(1, "s", COMM_SEND_NODE, attrs={"comm_dst": 1, "comm_size": 8})
    with pytest.raises(TraceImportError, match=r"t\.0\.et, node 1.*no matching receive"):
        chakra_graph(_write(tmp_path, [[send], [EtNode(1, "c", COMP_NODE)]]))
    coll = lambda size: EtNode(  # noqa: E731
        1, "ar", COMM_COLL_NODE, attrs={"comm_type": 0, "comm_size": size}
    )
    with pytest.raises(TraceImportError, match=r"t\.1\.et, node 1.*of 16 bytes.*8 bytes"):
        chakra_graph(_write(tmp_path, [[coll(8)], [coll(16)]]))
    with pytest.raises(TraceImportError, match=r"t\.1\.et.*collective number 1"):
        chakra_graph(_write(tmp_path, [[coll(8)], [EtNode(1, "c", COMP_NODE)]]))


def test_files_that_are_not_chakra_or_missing_ranks_are_refused(tmp_path: Path) -> None:
    (tmp_path / "t.0.et").write_text('{"traceEvents": []}')
    with pytest.raises(TraceImportError, match=r"t\.0\.et: not a Chakra execution trace"):
        chakra_graph(tmp_path)
    write_et(tmp_path / "t.0.et", [EtNode(1, "c", COMP_NODE)])
    data = (tmp_path / "t.0.et").read_bytes()
    (tmp_path / "t.0.et").write_bytes(data[:-2])
    with pytest.raises(TraceImportError, match="truncated"):
        chakra_graph(tmp_path)
    write_et(tmp_path / "t.0.et", [EtNode(1, "c", COMP_NODE)])
    write_et(tmp_path / "t.2.et", [EtNode(1, "c", COMP_NODE)])
    with pytest.raises(TraceImportError, match="rank 1 is missing"):
        chakra_graph(tmp_path)
    with pytest.raises(TraceImportError, match="no trace files"):
        chakra_graph(tmp_path / "nothing")


def test_process_groups_restrict_a_collective_to_their_ranks(tmp_path: Path) -> None:
    """Two pairs all-reduce in their own group at once; with comm_groups each pair's messages
    stay inside it, and an unknown group is refused."""
    coll = lambda pg: EtNode(  # noqa: E731
        1, "ar", COMM_COLL_NODE, attrs={"comm_type": 0, "comm_size": 800, "pg_name": pg}
    )
    prefix = _write(tmp_path, [[coll("a")], [coll("a")], [coll("b")], [coll("b")]])
    g = chakra_graph(prefix, comm_groups={"a": [0, 1], "b": [2, 3]})
    tr = g.messages(4)
    assert set(zip(tr["src_rank"], tr["dst_rank"], strict=True)) == {(0, 1), (1, 0), (2, 3), (3, 2)}
    assert replay(g, 4).sim_time_s == pytest.approx(2 * msg_time(400))
    with pytest.raises(TraceImportError, match=r"pg_name.*'b' is not in comm_groups"):
        chakra_graph(prefix, comm_groups={"a": [0, 1]})


def test_a_straggler_rank_scales_its_compute_and_collectives_get_spans() -> None:
    """scale_compute {3: 2}: rank 3's forward takes 260 us, so it begins the all-reduce last.
    Step k of rank i carries what rank i - k began with, so of the messages rank 3 sends or
    receives the last to wait for its own start is its step-4 send (5 steps after 260 us);
    then its backward (100 us), the send to rank 0 and its optimizer (40 us) end the run."""
    g = chakra_graph(EXAMPLE)
    g.scale_compute({3: 2.0})
    res = replay(g, 4)
    end = 260e-6 + 5 * msg_time(1 << 18) + 100e-6 + msg_time(1 << 16) + 40e-6
    assert res.sim_time_s == pytest.approx(end, rel=1e-12)
    spans = g.spans()
    assert [s[0] for s in spans] == [0, 1, 2, 3]
    tags = spans[0][3]
    assert tags["phase"] == "other" and tags["collective"] == "all-reduce"
    assert tags["bytes_out"] == 1 << 20 and tags["bus_factor"] == pytest.approx(1.5)


def test_broadcast_is_a_chain_from_the_groups_first_rank(tmp_path: Path) -> None:
    """Chakra records no root: rank 0 is assumed; NCCL's ring broadcast of one chunk is the
    chain 0 -> 1 -> 2 -> 3, three whole-buffer messages one after another."""
    bc = EtNode(1, "bc", COMM_COLL_NODE, attrs={"comm_type": 5, "comm_size": 8000})
    g = chakra_graph(_write(tmp_path, [[bc]] * 4))
    tr = g.messages(4)
    assert list(zip(tr["src_rank"], tr["dst_rank"], strict=True)) == [(0, 1), (1, 2), (2, 3)]
    assert (tr["bytes"] == 8000).all()
    assert replay(g, 4).sim_time_s == pytest.approx(3 * msg_time(8000), rel=1e-12)
