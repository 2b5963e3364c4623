"""PyTorch profiler (Kineto) traces: the shipped example and its replay, bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from podsim.workloads.example_traces import DEFAULT_DIR, write_kineto_example
from podsim.workloads.kineto import kineto_graph
from podsim.workloads.trace_import import TraceImportError

from tests.workloads.trace_testutil import msg_time, replay

EXAMPLE = DEFAULT_DIR / "kineto-2rank"


def test_the_shipped_example_is_what_the_script_writes(tmp_path: Path) -> None:
    files = write_kineto_example(tmp_path)
    assert [f.name for f in files] == sorted(p.name for p in EXAMPLE.glob("*.json"))
    for f in files:
        assert f.read_text() == (EXAMPLE / f.name).read_text()


def test_example_replays_to_the_hand_computed_end_time() -> None:
    """Rank r's all-reduce (1 MiB, 2 ranks: 2 ring steps of 512 KiB) is launched after the
    recorded idle time on its stream (200 / 250 us); the second step waits for the slower
    rank. The all-gather (2 x 128 Ki BFloat16 = 512 KiB out: 1 step of 256 KiB) follows 50 us
    of recorded idle time after it; the compute streams end earlier (240 / 290 us)."""
    g = kineto_graph(EXAMPLE)
    tr = g.messages(2)
    assert len(tr) == 2 * 2 + 2
    assert tr["bytes"].sum() == 4 * (1 << 19) + 2 * (1 << 18)
    # per rank: 2 kernels, 3 idle gaps, begin + end of 2 collectives and the collective
    # builder's entry and exit joins of each
    assert len(g) == 2 * (2 + 3 + 4 + 4) + len(tr)
    res = replay(g, 2)
    assert res.status == "complete"
    all_reduce_end = 250e-6 + 2 * msg_time(1 << 19)
    assert res.sim_time_s == pytest.approx(all_reduce_end + 50e-6 + msg_time(1 << 18), rel=1e-12)


def test_without_gaps_streams_run_back_to_back_and_compute_scales() -> None:
    g = kineto_graph(EXAMPLE, gaps=False)
    res = replay(g, 2)
    # both collectives start at 0: 2 + 1 ring steps; rank 1's compute stream: 250 + 30 us
    comm = 2 * msg_time(1 << 19) + msg_time(1 << 18)
    assert res.sim_time_s == pytest.approx(max(comm, 280e-6), rel=1e-12)
    res = replay(kineto_graph(EXAMPLE, gaps=False, compute_scale=0.25), 2)
    assert res.sim_time_s == pytest.approx(max(comm, 0.25 * 280e-6), rel=1e-12)


def _doc(rank: int | None, events: list[dict[str, Any]], world: int | None = 2) -> dict:
    doc: dict[str, Any] = {"traceEvents": events}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": world}
    return doc


def _kernel(name: str = "gemm", ts: float = 0.0, dur: float = 10.0, **args: Any) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "args": args}


def _nccl(**args: Any) -> dict:
    base = {"stream": 3, "Collective name": "allreduce", "In msg nelems": 100, "dtype": "Float"}
    return _kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", **{**base, **args})


def _write(tmp_path: Path, docs: list[dict]) -> Path:
    for r, d in enumerate(docs):
        (tmp_path / f"k.{r}.json").write_text(json.dumps(d))
    return tmp_path


def test_rank_comes_from_distributed_info_else_the_file_name(tmp_path: Path) -> None:
    # named 0 and 1 but distributedInfo says the other way round: the rank 1 file is slower
    _write(
        tmp_path,
        [_doc(1, [_kernel(dur=30.0, stream=7)]), _doc(0, [_kernel(dur=10.0, stream=7)])],
    )
    g = kineto_graph(tmp_path)
    assert g.rank[0] == 0 and g.duration_s[0] == pytest.approx(10e-6)
    (tmp_path / "k.1.json").write_text(json.dumps(_doc(None, [_kernel(stream=7)])))
    (tmp_path / "k.0.json").write_text(json.dumps(_doc(None, [_kernel(stream=7)])))
    assert len(kineto_graph([tmp_path / "k.0.json", tmp_path / "k.1.json"])) == 2


@pytest.mark.parametrize(
    ("events", "match"),
    [
        ([_kernel()], r"k\.0\.json, node event 0 \(gemm\), field 'args.stream'"),
        ([_kernel(ts=-1, stream=1)], r"node event 0 \(gemm\), field 'ts'"),
        ([_nccl(dtype="Quux")], r"field 'args.dtype': unknown element type 'Quux'"),
        ([_nccl(**{"In msg nelems": None})], r"field 'args.In msg nelems'"),
        ([_nccl(**{"Collective name": "gather"})], r"'args.Collective name'.*'gather'"),
        ([_nccl(**{"Collective name": "send"})], r"field 'args.Dst Rank'.*got None"),
        ([_nccl(**{"Collective name": "recv", "Src Rank": 0})], r"'args.Src Rank'.*got 0"),
        ([_nccl(**{"Collective name": "broadcast", "Root rank": 7})], r"'args.Root rank'"),
        ([_nccl(**{"Group size": 4})], r"field 'args.Group size'"),
        ([_nccl(**{"Process Group Ranks": "[0, 5]"})], r"'args.Process Group Ranks'.*rank 5"),
        (
            [{**_nccl(), "args": {"stream": 3, "External id": 9}}],
            r"field 'args.Collective name'.*without the collective's arguments",
        ),
    ],
)
def test_bad_events_are_named(tmp_path: Path, events: list[dict], match: str) -> None:
    ok = [_nccl()] if any(e["name"].startswith("nccl") for e in events) else []
    _write(tmp_path, [_doc(0, events), _doc(1, ok)])
    with pytest.raises(TraceImportError, match=match):
        kineto_graph(tmp_path)


def test_files_that_are_not_kineto_or_missing_ranks_are_refused(tmp_path: Path) -> None:
    (tmp_path / "k.0.json").write_text("not json")
    with pytest.raises(TraceImportError, match=r"k\.0\.json: not a Kineto trace: not JSON"):
        kineto_graph(tmp_path)
    (tmp_path / "k.0.json").write_text(json.dumps({"events": []}))
    with pytest.raises(TraceImportError, match=r"field 'traceEvents'"):
        kineto_graph(tmp_path)
    _write(tmp_path, [_doc(0, []), _doc(2, [])])
    with pytest.raises(TraceImportError, match="rank 1 is missing"):
        kineto_graph(tmp_path)
    _write(tmp_path, [_doc(0, [], world=4), _doc(1, [], world=4)])
    (tmp_path / "k.2.json").unlink(missing_ok=True)
    with pytest.raises(TraceImportError, match=r"field 'distributedInfo.world_size'"):
        kineto_graph(tmp_path)
    with pytest.raises(TraceImportError, match="directory"):
        kineto_graph(tmp_path / "k.0.json")


def test_collectives_must_agree_across_ranks(tmp_path: Path) -> None:
    _write(tmp_path, [_doc(0, [_nccl()]), _doc(1, [_nccl(**{"In msg nelems": 50})])])
    with pytest.raises(TraceImportError, match=r"k\.1\.json.*of 200 bytes.*400 bytes"):
        kineto_graph(tmp_path)
    _write(tmp_path, [_doc(0, [_nccl()]), _doc(1, [_kernel(stream=3)])])
    with pytest.raises(TraceImportError, match=r"k\.1\.json.*lacks collective number 1"):
        kineto_graph(tmp_path)


def test_broadcast_starts_at_the_recorded_root(tmp_path: Path) -> None:
    bc = _nccl(**{"Collective name": "broadcast", "Root rank": 1, "In msg nelems": 2000})
    _write(tmp_path, [_doc(0, [bc]), _doc(1, [bc])])
    g = kineto_graph(tmp_path)
    tr = g.messages(2)
    assert tr[["src_rank", "dst_rank", "bytes"]].values.tolist() == [[1, 0, 8000]]
    assert replay(g, 2).sim_time_s == pytest.approx(msg_time(8000), rel=1e-12)


def _p2p(kind: str, peer: int, nelems: int = 1000, ts: float = 0.0) -> dict:
    key = "Dst Rank" if kind == "send" else "Src Rank"
    args = {"Collective name": kind, key: peer, "In msg nelems": nelems}
    return _nccl(ts=ts, **args) | {"name": "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage)"}


def test_send_recv_pair_replays_as_one_message_after_both_kernels_start(tmp_path: Path) -> None:
    # rank 0 sends 1000 floats to rank 1, whose recv follows a 40 us kernel: the message
    # leaves when both kernels run and ends both; then each rank idles as recorded (190 and
    # 150 us after its p2p kernel's recorded end) and rank 1 sends 500 floats back
    _write(tmp_path, [
        _doc(0, [_p2p("send", 1), _p2p("recv", 1, 500, ts=200.0)]),
        _doc(1, [_kernel(dur=40.0, stream=3), _p2p("recv", 0, ts=40.0),
                 _p2p("send", 0, 500, ts=200.0)]),
    ])  # fmt: skip
    g = kineto_graph(tmp_path)
    tr = g.messages(2)
    assert tr[["src_rank", "dst_rank", "bytes"]].values.tolist() == [[0, 1, 4000], [1, 0, 2000]]
    res = replay(g, 2)
    first = 40e-6 + msg_time(4000)
    assert res.end_s[g.msg.index(0)] == pytest.approx(first, rel=1e-12)
    back = first + max(190e-6, 150e-6) + msg_time(2000)
    assert res.sim_time_s == pytest.approx(back, rel=1e-12)
    assert len(kineto_graph(tmp_path, gaps=False).messages(2)) == 2


def test_unmatched_or_mismatched_p2p_is_refused(tmp_path: Path) -> None:
    _write(tmp_path, [_doc(0, [_p2p("send", 1), _p2p("send", 1, ts=50.0)]),
                      _doc(1, [_p2p("recv", 0)])])  # fmt: skip
    with pytest.raises(TraceImportError, match=r"k\.1\.json.*has 1 recv\(s\) for the 2 send"):
        kineto_graph(tmp_path)
    _write(tmp_path, [_doc(0, [_p2p("send", 1)]), _doc(1, [_p2p("recv", 0, 10)])])
    with pytest.raises(TraceImportError, match=r"k\.1\.json.*recv of 40 bytes.*4000 bytes"):
        kineto_graph(tmp_path)


def test_stream_wait_event_orders_kernels_across_streams(tmp_path: Path) -> None:
    # stream 8's kernel waits (cudaStreamWaitEvent) for stream 7's 100 us kernel, launched
    # before the event was recorded (correlation 1 < 2): at half the GPU time it starts when
    # that kernel ends (50 us), not after the recorded 100 us idle time
    a = _kernel("gemm", 0.0, 100.0, stream=7, correlation=1)
    b = _kernel("gemv", 100.0, 10.0, stream=8, correlation=3)
    wait = {
        "ph": "X",
        "cat": "cuda_sync",
        "name": "Stream Wait Event",
        "ts": 5.0,
        "dur": 1.0,
        "args": {"stream": 8, "wait_on_stream": 7, "wait_on_cuda_event_record_corr_id": 2},
    }
    _write(tmp_path, [_doc(0, [a, b, wait], world=1)])
    res = replay(kineto_graph(tmp_path, compute_scale=0.5), 1)
    assert res.sim_time_s == pytest.approx(55e-6, rel=1e-12)
    # without the wait the recorded idle time stands: 100 + 5 us
    _write(tmp_path, [_doc(0, [a, b], world=1)])
    assert replay(kineto_graph(tmp_path, compute_scale=0.5), 1).sim_time_s == pytest.approx(
        105e-6, rel=1e-12
    )
