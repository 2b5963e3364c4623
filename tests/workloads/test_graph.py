"""The operation graph and its executor, over a transport with known delays."""

from __future__ import annotations

import math

import numpy as np
import pytest
import simpy
from podsim.scenarios.execution.executor import execute
from podsim.workloads.graph import GraphError, OpGraph

RATE = 8e9  # bytes/s of the fake transport
LAT = 1e-6


class FixedTransport:
    """Delivers a message nbytes / RATE + LAT after it is posted (no contention)."""

    def __init__(self) -> None:
        self.env = simpy.Environment()
        self.posted: list[tuple[int, float]] = []

    def send(self, msg, src_rank, dst_rank, nbytes, hop, on_done):
        self.posted.append((msg, self.env.now))
        self.env.timeout(nbytes / RATE + LAT).callbacks.append(lambda _e: on_done(msg))


def run(g: OpGraph, num_ranks: int = 4, **kw):
    t = FixedTransport()
    hops = g.messages(num_ranks)["hop"].to_numpy()
    return execute(t.env, t, g, hops, **kw), t


def test_chain_of_compute_and_send_adds_up() -> None:
    g = OpGraph()
    a = g.compute(0, 3e-6)
    m = g.send(0, 1, 8000, (a,))
    b = g.compute(1, 2e-6, (m,))
    res, _ = run(g)
    assert res.status == "complete"
    assert res.end_s[a] == pytest.approx(3e-6)
    assert res.end_s[m] == pytest.approx(3e-6 + 8000 / RATE + LAT)
    assert res.end_s[b] == pytest.approx(res.end_s[m] + 2e-6)
    assert res.sim_time_s == pytest.approx(res.end_s[b])


def test_one_stream_is_fifo_and_a_gpu_runs_one_compute_at_a_time() -> None:
    g = OpGraph()
    x = g.compute(0, 5e-6)
    y = g.compute(0, 5e-6)  # same stream: after x although it has no dependency
    z = g.compute(0, 5e-6, stream="other")  # another stream, ready at 0: waits for the GPU
    w = g.compute(1, 5e-6, stream="other")  # another GPU: runs at once
    res, _ = run(g)
    assert res.start_s[y] >= res.end_s[x]
    assert res.start_s[z] == pytest.approx(res.end_s[x])  # ready before y, so first in line
    assert res.start_s[y] == pytest.approx(res.end_s[z])
    assert res.start_s[w] == 0.0
    assert res.sim_time_s == pytest.approx(15e-6)


def test_overlap_hides_communication_up_to_the_compute_time_and_not_beyond() -> None:
    """Compute of one micro-batch beside the all-to-all of the other: the step takes
    max(compute, comm) per pair, never their sum, and never less than either."""
    for nbytes in (8_000, 80_000, 160_000):
        comm = nbytes / RATE + LAT
        g = OpGraph()
        c = g.compute(0, 10e-6)
        m = g.send(0, 1, nbytes)
        done = g.join((c, m))
        res, _ = run(g)
        assert res.end_s[done] == pytest.approx(max(10e-6, comm))


def test_anchor_posts_at_the_later_of_data_and_offset() -> None:
    g = OpGraph()
    begin = g.join(rank=0)
    data = g.send(1, 0, 8000)  # arrives at LAT + 1 us
    early = g.send(0, 2, 8, (begin, data), delay_s=0.5e-6, anchor=begin)
    late = g.send(0, 3, 8, (begin, data), delay_s=5e-6, anchor=begin)
    plain = g.send(0, 3, 8, (data,), delay_s=5e-6)  # no anchor: delay counts from ready
    res, _ = run(g)
    arrive = 8000 / RATE + LAT
    assert res.start_s[early] == pytest.approx(arrive)
    assert res.start_s[late] == pytest.approx(5e-6)
    assert res.start_s[plain] == pytest.approx(arrive + 5e-6)


def test_local_messages_and_joins_take_no_time_and_deep_chains_do_not_recurse() -> None:
    g = OpGraph()
    prev = g.send(0, 0, 100)  # to itself: delivered at once
    for _ in range(50_000):
        prev = g.join((prev,))
    res, t = run(g)
    assert res.status == "complete" and res.sim_time_s == 0.0
    assert not t.posted
    assert np.isfinite(res.end_s).all()


def test_time_limit_and_stall_are_reported() -> None:
    g = OpGraph()
    g.compute(0, 1.0)
    res, _ = run(g, time_limit=0.5)
    assert res.status == "time-limit" and math.isnan(res.end_s[0])

    class Black(FixedTransport):
        def send(self, msg, src_rank, dst_rank, nbytes, hop, on_done):
            pass  # never delivers

    g = OpGraph()
    g.send(0, 1, 10)
    t = Black()
    res = execute(t.env, t, g, g.messages(2)["hop"].to_numpy())
    assert res.status == "stalled"


def test_cycles_bad_ids_and_bad_values_are_refused_with_the_node_named() -> None:
    g = OpGraph()
    a = g.join(label="first")
    b = g.join((a,), label="second")
    g.add_dep(b, a)
    with pytest.raises(GraphError, match="cycle: node first"):
        g.arrays()
    with pytest.raises(GraphError, match="not an earlier node"):
        OpGraph().join((3,))
    with pytest.raises(GraphError, match="must be >= 0"):
        OpGraph().compute(0, -1.0, label="bad")
    g = OpGraph()
    g.send(0, 1, 10, msg=3)
    with pytest.raises(GraphError, match="message ids"):
        g.arrays()


def test_labels_are_kept_per_run_and_a_send_label_names_its_ranks() -> None:
    g = OpGraph()
    a = g.join(label="start")
    s1 = g.send(2, 3, 10, (a,), label="a2a")
    s2 = g.send(3, 2, 10, (a,), label="a2a")
    j = g.join((s1, s2))  # no label
    assert [g.label(i) for i in (a, s1, s2, j)] == ["start", "a2a 2->3", "a2a 3->2", f"#{j}"]
    assert len(g._label_text) == 3  # "start", "a2a" once for both sends, "" for the join
    assert g.num_messages == 2
    g.add_dep(s2, s1)
    g.add_dep(s1, s2)
    with pytest.raises(GraphError, match=r"cycle: node a2a \d->\d"):
        g.arrays()


def test_columns_are_typed_arrays_and_spans_share_their_tags() -> None:
    from array import array

    g = OpGraph()
    for r in range(4):
        c = g.compute(r, 1e-6)
        g.span(r, c, c, step=0, phase="compute")
    g.span(0, 0, 0, step=1, phase="compute")
    for col in (g.kind, g.rank, g.peer, g.nbytes, g.duration_s, g.delay_s, g.anchor, g.msg):
        assert isinstance(col, array) and len(col) == 4
    assert g.rank.itemsize == 8 and g.kind.itemsize == 1
    rank, first, last, tag, tags = g.span_columns()
    assert tags == [{"step": 0, "phase": "compute"}, {"step": 1, "phase": "compute"}]
    assert tag.tolist() == [0, 0, 0, 0, 1] and rank.tolist() == [0, 1, 2, 3, 0]
    assert first.tolist() == last.tolist() == [0, 1, 2, 3, 0]
    assert g.spans()[4] == (0, 0, 0, {"step": 1, "phase": "compute"})
    # the graph can grow after it was frozen (no NumPy view pins its buffers)
    g.arrays()
    g.compute(0, 1e-6)
    assert len(g.arrays().kind) == 5


def test_messages_table_follows_message_ids_and_locality() -> None:
    g = OpGraph()
    g.send(0, 5, 10, msg=1)
    g.send(0, 1, 20, msg=0, phase="dispatch")
    tr = g.messages(8, gpus_per_node=4)
    assert tr["bytes"].tolist() == [20, 10]
    assert tr["hop"].tolist() == ["scaleup", "rdma"]
    assert tr["phase"].tolist() == ["dispatch", "other"]


@pytest.mark.parametrize("seed", range(8))
def test_the_level_at_a_time_cycle_check_leaves_the_readable_one_s_nodes(seed: int) -> None:
    """Random graphs with repeated edges, and with cycles in half of them: the NumPy Kahn
    leaves every node's count of dependencies that never end as the node-at-a-time one."""
    rng = np.random.default_rng(seed)
    n = 300
    a = rng.integers(0, n, 900)
    b = rng.integers(0, n, 900)
    keep = a < b if seed % 2 == 0 else a != b  # a DAG, or edges both ways (cycles)
    a, b = a[keep], b[keep]
    order = np.argsort(a, kind="stable")
    a, b = a[order], b[order]
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(a, minlength=n), out=ptr[1:])
    indeg = np.bincount(b, minlength=n)
    fast = OpGraph._unreached(indeg, ptr, b)
    slow = OpGraph._unreached_readable(indeg, ptr, b)
    assert np.array_equal(fast, slow)
    assert (fast > 0).any() == (seed % 2 == 1)
