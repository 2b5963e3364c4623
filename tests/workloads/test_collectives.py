"""Collectives as graph builders: closed-form times on an idle fabric.

Over a transport where a message of ``b`` bytes takes ``t(b) = b / RATE + LAT`` and nothing
contends, each algorithm's time is its textbook closed form (Thakur et al., IJHPCA 2005; NCCL's
ring); on the simulated fabrics (flow and packet engines, one switch, so every ring neighbour is
one switch away) a collective takes its closed form in the engine's own single-message time
``t(b)``, and the two engines agree.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from podsim.scenarios.runner import run
from podsim.workloads.collectives import BUS_FACTORS, Collective, all_to_all_v, build_collective
from podsim.workloads.graph import GraphError, OpGraph

from tests.workloads.test_graph import LAT, RATE
from tests.workloads.test_graph import run as run_graph


def t(b: float) -> float:
    return b / RATE + LAT


def timed(c: Collective) -> tuple[float, OpGraph]:
    g = OpGraph()
    done = build_collective(g, c)
    res, _ = run_graph(g, num_ranks=max(c.ranks) + 1)
    assert res.status == "complete"
    assert sorted(done) == sorted(c.ranks)
    return max(res.end_s[v] for v in done.values()), g


@pytest.mark.parametrize("n", [2, 3, 8])
def test_ring_all_reduce_reduce_scatter_all_gather_closed_forms(n: int) -> None:
    s = 1 << 20
    ranks = list(range(n))
    ar, g = timed(Collective("all-reduce", ranks, s))
    assert ar == pytest.approx(2 * (n - 1) * t(-(-s // n)))
    # bytes: each rank sends its slice 2(n-1) times
    assert g.messages(n)["bytes"].sum() == n * 2 * (n - 1) * -(-s // n)
    rs, _ = timed(Collective("reduce-scatter", ranks, s))
    ag, _ = timed(Collective("all-gather", ranks, s))
    assert rs == pytest.approx((n - 1) * t(-(-s // n)))
    assert ag == pytest.approx(rs)


def test_chunks_pipeline_the_ring_and_channels_split_it() -> None:
    n, s, chunk = 4, 1 << 20, 1 << 16
    ranks = list(range(n))
    steps = 2 * (n - 1)
    slice_ = s // n
    c = slice_ // chunk
    piped, _ = timed(Collective("all-reduce", ranks, s, chunk_bytes=chunk))
    assert piped == pytest.approx((steps + c - 1) * t(chunk))
    two, _ = timed(Collective("all-reduce", ranks, s, channels=2))
    assert two == pytest.approx(steps * t(s // 2 // n))


def test_all_to_all_and_v_and_hierarchical_closed_forms() -> None:
    n, s = 8, 1 << 20
    ranks = list(range(n))
    a2a, g = timed(Collective("all-to-all", ranks, s, algorithm="direct"))
    assert a2a == pytest.approx(t(s // n))
    assert g.messages(n)["bytes"].sum() == n * (n - 1) * (s // n)
    m = np.arange(16).reshape(4, 4) * 1000
    gv = OpGraph()
    done = all_to_all_v(gv, Collective("all-to-all", [0, 1, 2, 3], 0), m)
    res, _ = run_graph(gv)
    assert max(res.end_s[v] for v in done.values()) == pytest.approx(
        t((m - np.diag(np.diag(m))).max())
    )
    assert gv.messages(4)["bytes"].sum() == m.sum() - np.trace(m)
    # hierarchical: reduce-scatter of S in groups of 4 (3 steps of S/4), ring all-reduce of the
    # S/4 shard over 2 rails (2 steps of S/8), all-gather in the groups (3 steps of S/4)
    h, _ = timed(Collective("all-reduce", ranks, s, algorithm="hierarchical", local_size=4))
    shard = s // 4
    assert h == pytest.approx(2 * 3 * t(shard) + 2 * 1 * t(shard // 2))


def test_bus_factors_are_nccls() -> None:
    assert BUS_FACTORS["all-reduce"](8) == pytest.approx(1.75)
    assert BUS_FACTORS["all-gather"](8) == pytest.approx(0.875)


def test_bad_collectives_are_refused_by_name() -> None:
    with pytest.raises(GraphError, match="appears twice"):
        build_collective(OpGraph(), Collective("all-reduce", [0, 0], 10))
    with pytest.raises(GraphError, match="local_size 3 must divide"):
        build_collective(
            OpGraph(), Collective("all-reduce", [0, 1, 2, 3], 10, "hierarchical", local_size=3)
        )


def _scenario(engine: str, ranks: int, op: str, size: int) -> dict:
    return {
        "name": f"{op}-{ranks}",
        "engine": engine,
        "cluster": {"topology": {"name": "star", "params": {"hosts": 8}}},
        "workload": {"collective": {"op": op, "size": size, "ranks": ranks}},
        "outputs": {"plots": False},
    }


def _time(engine: str, ranks: int, op: str, size: int) -> float:
    res = run(_scenario(engine, ranks, op, size), write=False)
    assert res.summary["status"] == "complete"
    return float(res.summary["phases"]["other"]["completion_time_s"])


#: one 400G link's payload rate with a 4 KiB MTU: P/(P+82) x 400 Gb/s (docs/physics.md)
B_EFF = 400e9 / 8 * 4096 / (4096 + 82)


@pytest.mark.parametrize("engine", ["flow", "packet"])
def test_ring_all_reduce_on_an_idle_fabric_takes_its_closed_form(engine: str) -> None:
    """T(all-reduce, n, S) = 2(n-1) (S / (n B) + L): linear in S with slope 2(n-1) / (n B) at
    the link's payload rate B, and a per-step latency L that is positive and no more than one
    message's own fixed latency (a lone 2-rank exchange, which also pays the start of the
    phase)."""
    n, s1, s2 = 8, 4 << 20, 8 << 20
    t1 = _time(engine, n, "all-reduce", s1)
    t2 = _time(engine, n, "all-reduce", s2)
    steps = 2 * (n - 1)
    assert (t2 - t1) / (s2 - s1) == pytest.approx(steps / (n * B_EFF), rel=0.02)
    step_latency = (t1 - steps * s1 / (n * B_EFF)) / steps
    b = s1 // n
    lone = _time(engine, 2, "reduce-scatter", 2 * b) - b / B_EFF
    assert 0 < step_latency <= lone


def test_flow_and_packet_engines_agree_on_a_ring_all_reduce() -> None:
    n, s = 8, 4 << 20
    assert _time("flow", n, "all-reduce", s) == pytest.approx(
        _time("packet", n, "all-reduce", s), rel=0.05
    )


def test_the_bound_engine_runs_a_ring_all_reduce_in_its_closed_form_on_an_idle_star() -> None:
    """Over the bound's ideal transport each ring step is one lone message, so the all-reduce
    takes 2(n - 1) times a lone message of S / n (within 1 %), a message's time grows at the
    link's payload rate B (slope 1 / B within 1 %) and its fixed latency L is positive and
    below 5 us on one switch. (The QP-context miss of a pair's first message is set to 0, so
    every message pays the same latency.)"""
    n, s1, s2 = 8, 8 << 20, 16 << 20
    steps = 2 * (n - 1)
    warm = {"qp_miss_penalty": 0.0}
    ar1, ar2 = (_time_of("bound", {"op": "all-reduce", "size": s}, nic=warm) for s in (s1, s2))
    lone = _time_of("bound", {"op": "send-recv", "size": s1 // n, "ranks": 2}, nic=warm)
    assert ar1 == pytest.approx(steps * lone, rel=0.01)
    assert (ar2 - ar1) / (s2 - s1) == pytest.approx(steps / (n * B_EFF), rel=0.01)
    assert 0 < lone - s1 / n / B_EFF < 5e-6


def _leaf_spine(engine: str, op: str, size: int) -> dict:
    res = run(
        {
            "name": f"{op}-leaf-spine",
            "engine": engine,
            "cluster": {
                "topology": {"name": "leaf-spine", "params": {"hosts_per_leaf": 4, "leaves": 4}}
            },
            "workload": {"collective": {"op": op, "size": size}},
            "outputs": {"plots": False},
        },
        write=False,
    )
    assert res.summary["status"] == "complete"
    return res.summary


@pytest.mark.parametrize("op", ["all-reduce", "all-to-all"])
def test_the_bound_is_below_the_flow_and_packet_engines_on_a_leaf_spine(op: str) -> None:
    """16 ranks on 4 leaves of 4: the bound engine's time (the graph over lone-message times)
    and the summary's bound (also the phase's load bound) are at most what either simulating
    engine measures, and at least half of it (the bound is not vacuous)."""
    size = 4 << 20
    b = _leaf_spine("bound", op, size)
    t_bound = b["phases"]["other"]["completion_time_s"]
    assert t_bound <= b["bound"]["makespan_bound_s"]
    for engine in ("flow", "packet"):
        s = _leaf_spine(engine, op, size)
        t = s["phases"]["other"]["completion_time_s"]
        assert t_bound <= t
        assert s["bound"]["makespan_bound_s"] == pytest.approx(b["bound"]["makespan_bound_s"])
        assert 0.5 * t <= s["bound"]["makespan_bound_s"] <= s["makespan_s"]


def test_cli_lists_collectives_and_refuses_an_unknown_algorithm(tmp_path) -> None:
    import yaml
    from podsim.scenarios.cli.app import app
    from typer.testing import CliRunner

    cli = CliRunner()
    r = cli.invoke(app, ["list", "collectives"])
    assert r.exit_code == 0 and "all-reduce/ring" in r.output
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump(_scenario("flow", 4, "all-gather", 1 << 20)))
    r = cli.invoke(app, ["run", str(f), "--set", "workload.collective.algorithm=tree"])
    assert r.exit_code == 2
    assert "workload.collective" in r.output and "'tree' does not run all-gather" in r.output


# -- the builders of NCCL's other algorithms ------------------------------------------------------


@pytest.mark.parametrize("n", [2, 5, 8, 13, 64])
def test_double_binary_tree_is_two_complementary_trees_of_depth_log2_n(n: int) -> None:
    from podsim.workloads.collectives import double_binary_tree

    trees = double_binary_tree(n)
    leaves = []
    for parent in trees:
        assert sum(1 for p in parent if p < 0) == 1
        depth = []
        for p in range(n):
            d = 0
            while parent[p] >= 0:
                p, d = parent[p], d + 1
                assert d < n  # no cycle
            depth.append(d)
        assert max(depth) == int(np.floor(np.log2(n)))
        assert all(sum(1 for q in parent if q == p) <= 2 for p in range(n))  # binary
        leaves.append({p for p in range(n) if p not in parent})
    # a leaf of one tree is an interior node of the other (all but one rank when n is odd)
    assert len(leaves[0] & leaves[1]) == n % 2


@pytest.mark.parametrize(("n", "chunk"), [(2, 0), (5, 1 << 15), (8, 0), (8, 1 << 16)])
def test_tree_all_reduce_closed_form(n: int, chunk: int) -> None:
    """(2 H + k - 1) t(c): H = floor(log2 n), k chunks of c bytes per tree (half the buffer)."""
    s = 1 << 20
    got, g = timed(Collective("all-reduce", list(range(n)), s, "tree", chunk_bytes=chunk))
    half = s // 2
    c = chunk or half
    k = -(-half // c)
    h = int(np.floor(np.log2(n)))
    assert got == pytest.approx((2 * h + k - 1) * t(c))
    # each non-root rank sends its half up and receives it down, in each tree
    assert g.messages(n)["bytes"].sum() == 2 * (n - 1) * s


@pytest.mark.parametrize("op", ["broadcast", "reduce"])
def test_broadcast_and_reduce_chains_closed_form(op: str) -> None:
    """(n - 2 + k) t(c) for k chunks of c along a chain of n ranks; (n - 1) S bytes; the root
    sends only (broadcast) or receives only (reduce)."""
    n, s, chunk = 6, 1 << 20, 1 << 16
    ranks = [3, 0, 5, 1, 4, 2]
    got, g = timed(Collective(op, ranks, s, chunk_bytes=chunk, root=5))
    assert got == pytest.approx((n - 2 + s // chunk) * t(chunk))
    m = g.messages(n)
    assert m["bytes"].sum() == (n - 1) * s
    if op == "broadcast":
        assert (m["dst_rank"] != 5).all() and set(m["src_rank"]) - set(m["dst_rank"]) == {5}
    else:
        assert (m["src_rank"] != 5).all() and set(m["dst_rank"]) - set(m["src_rank"]) == {5}
    two, _ = timed(Collective(op, ranks, s, channels=2, root=5))  # both halves at once
    assert two == pytest.approx((n - 1) * t(s // 2))
    with pytest.raises(GraphError, match="root 7 is not one of the ranks"):
        build_collective(OpGraph(), Collective(op, ranks, s, root=7))


def test_send_recv_by_shift_and_by_peers() -> None:
    n, s = 8, 1 << 20
    got, g = timed(Collective("send-recv", list(range(n)), s, "direct", shift=3))
    assert got == pytest.approx(t(s))
    m = g.messages(n)
    assert ((m["src_rank"] + 3) % n == m["dst_rank"]).all()
    assert m["bytes"].sum() == n * s
    got, g = timed(Collective("send-recv", list(range(4)), s, "direct", peers=[(0, 2), (3, 1)]))
    assert got == pytest.approx(t(s))
    assert sorted(zip(g.messages(4)["src_rank"], g.messages(4)["dst_rank"], strict=True)) == [
        (0, 2),
        (3, 1),
    ]
    with pytest.raises(GraphError, match=r"pair \(0, 9\)"):
        build_collective(OpGraph(), Collective("send-recv", [0, 1], s, "direct", peers=[(0, 9)]))


def test_hierarchical_all_to_all_all_gather_reduce_scatter_closed_forms() -> None:
    """n = 8 ranks in G = 2 groups of L = 4: all-to-all t(G S/n) + t(L S/n) moving (2n - G - L) S;
    reduce-scatter (L - 1) t(S / L) + (G - 1) t(S / n); all-gather the same in reverse order;
    the scale-out (rail) messages of all three carry only the shard bound across groups."""
    n, ls, s = 8, 4, 1 << 20
    ng = n // ls
    ranks = list(range(n))
    a2a, g = timed(Collective("all-to-all", ranks, s, "hierarchical", local_size=ls))
    assert a2a == pytest.approx(t(ng * s // n) + t(ls * s // n))
    assert g.messages(n)["bytes"].sum() == (2 * n - ng - ls) * s
    # pipelined: the same messages, the second hop forwarding as the first delivers
    piped, g_p = timed(Collective("all-to-all", ranks, s, "pipelined", local_size=ls))
    assert piped == pytest.approx(max(t(ng * s // n), t(ls * s // n)))
    cols = ["src_rank", "dst_rank", "bytes"]
    assert g_p.messages(n)[cols].equals(g.messages(n)[cols])
    rs, g_rs = timed(Collective("reduce-scatter", ranks, s, "hierarchical", local_size=ls))
    ag, g_ag = timed(Collective("all-gather", ranks, s, "hierarchical", local_size=ls))
    assert rs == pytest.approx((ls - 1) * t(s // ls) + (ng - 1) * t(s // n))
    assert ag == pytest.approx(rs)
    for gr in (g, g_rs, g_ag):
        m = gr.messages(n)
        across = m[m["src_rank"] // ls != m["dst_rank"] // ls]
        assert (across["src_rank"] % ls == across["dst_rank"] % ls).all()  # on its own rail
    # per rank over the rails: as much as a flat ring, (G - 1) S / n
    for gr in (g_rs, g_ag):
        m = gr.messages(n)
        across = m[m["src_rank"] // ls != m["dst_rank"] // ls]
        assert across["bytes"].sum() == n * (ng - 1) * s // n
        assert m["bytes"].sum() == n * ((ls - 1) * s // ls + (ng - 1) * s // n)
    with pytest.raises(GraphError, match="local_size 3 must divide"):
        build_collective(
            OpGraph(), Collective("all-to-all", ranks, s, "hierarchical", local_size=3)
        )


def test_bus_factors_of_rooted_and_point_to_point_ops_are_one() -> None:
    for op in ("broadcast", "reduce", "send-recv"):
        assert BUS_FACTORS[op](8) == 1.0


def _time_of(
    engine: str, collective: dict, cc: str | None = None, nic: dict | None = None
) -> float:
    cluster: dict = {"topology": {"name": "star", "params": {"hosts": 8}}, "nic": dict(nic or {})}
    if cc is not None:
        cluster["nic"]["cc"] = {"name": cc}
    sc = {
        "name": collective["op"],
        "engine": engine,
        "cluster": cluster,
        "workload": {"collective": {"ranks": 8, **collective}},
        "outputs": {"plots": False},
    }
    res = run(sc, write=False)
    assert res.summary["status"] == "complete"
    assert res.summary["messages"]["unfinished"] == 0
    return float(res.summary["phases"]["other"]["completion_time_s"])


NEW_OPS = [
    {"op": "broadcast", "size": 8 << 20, "chunk": "512KiB", "root": 3},
    {"op": "reduce", "size": 8 << 20, "chunk": "512KiB", "root": 5},
    {"op": "send-recv", "size": 8 << 20, "shift": 3},
    {"op": "all-to-all", "algorithm": "hierarchical", "size": 8 << 20, "local_size": 4},
    {"op": "all-gather", "algorithm": "hierarchical", "size": 8 << 20, "local_size": 4},
    {"op": "reduce-scatter", "algorithm": "hierarchical", "size": 8 << 20, "local_size": 4},
]


@pytest.mark.parametrize("collective", NEW_OPS, ids=lambda c: f"{c['op']}-{c.get('algorithm')}")
def test_flow_and_packet_engines_agree_on_each_new_collective(collective: dict) -> None:
    """On an idle star at 8 MiB (bandwidth dominates: the serialisation of a slice or chunk is
    >= 10x the per-message latency) the engines agree within 5 %."""
    flow = _time_of("flow", collective)
    assert flow == pytest.approx(_time_of("packet", collective), rel=0.05)


@pytest.mark.parametrize("cc", ["nscc", "swift", "none"])
def test_flow_and_packet_engines_agree_on_the_tree_under_window_cc(cc: str) -> None:
    """The tree's interior ranks take two children's chunks at once (a 2:1 incast). Under a
    window or delay based CC (UEC NSCC, Swift) or none the engines agree within 5 %; under the
    rate-based DCQCN and HPCC the packet engine is about 20 % slower (measured; README,
    workloads; the cause is not pinned down yet: a likely one is that a QP keeps the rate an
    incast cut it to into its next chunks, which the flow engine's shares do not model)."""
    c = {"op": "all-reduce", "algorithm": "tree", "size": 8 << 20, "chunk": "1MiB"}
    assert _time_of("flow", c, cc) == pytest.approx(_time_of("packet", c, cc), rel=0.05)


@pytest.mark.parametrize(
    ("sets", "key", "says"),
    [
        (["workload.collective.op=broadcast", "workload.collective.root=8"], "root", "root 8"),
        (["workload.collective.root=1"], "workload.collective", "root applies to broadcast"),
        (
            ["workload.collective.op=send-recv", "workload.collective.peers=[[0, 4]]"],
            "peers[0]",
            "pair [0, 4]",
        ),
        (["workload.collective.op=send-recv", "workload.collective.shift=4"], "shift", "shift 4"),
        (
            ["workload.collective.op=reduce", "workload.collective.algorithm=tree"],
            "workload.collective",
            "'tree' does not run reduce",
        ),
    ],
)
def test_bad_roots_and_peers_are_refused_at_their_key(tmp_path, sets, key, says) -> None:
    import yaml
    from podsim.scenarios.cli.app import app
    from typer.testing import CliRunner

    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump(_scenario("flow", 4, "all-reduce", 1 << 20)))
    args = ["run", str(f)]
    for s in sets:
        args += ["--set", s]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2, r.output
    out = " ".join(r.output.split())
    assert key in out and says in out
    assert "Traceback" not in r.output


def test_all_to_all_and_send_recv_run_direct_without_an_algorithm() -> None:
    from podsim.scenarios.input.schema import CollectiveWorkload

    assert CollectiveWorkload(op="all-to-all").algorithm == "direct"
    assert CollectiveWorkload(op="send-recv").algorithm == "direct"
    assert CollectiveWorkload(op="broadcast").algorithm == "ring"


def test_library_collectives_ranks_hierarchical_over_ring_over_tree() -> None:
    """The `collectives` library scenario at 64 MiB (README, workloads): on 4 x 8 GPUs with
    NVLink inside a node the hierarchical all-reduce beats the flat ring, which beats the flat
    tree (busbw); every run is at or above its lower bound, the hierarchical one within 2 % of
    it, and the two-channel ring's busbw is between one and two NICs' payload rate."""
    import podsim

    busbw = {}
    for v in ("ring", "tree", "hierarchical"):
        res = podsim.run(
            "collectives",
            overrides=[f"variant={v}", "workload.collective.size=64MiB", "outputs.plots=false"],
        )
        s = res.summary
        t = s["phases"]["other"]["completion_time_s"]
        assert s["bound"]["makespan_bound_s"] <= t
        busbw[v] = s["phases"]["other"]["busbw_per_gpu_Bps"]
        if v == "hierarchical":
            assert t == pytest.approx(s["bound"]["makespan_bound_s"], rel=0.02)
    assert busbw["hierarchical"] > busbw["ring"] > busbw["tree"]
    assert B_EFF < busbw["ring"] < 2 * B_EFF


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    n=st.integers(2, 6),
    channels=st.integers(1, 3),
    chunk=st.sampled_from([0, 1, 5, 64]),
    seed=st.integers(0, 2**16),
)
def test_bulk_all_to_all_sends_equal_the_one_by_one_version(n, channels, chunk, seed) -> None:
    """The hot path (OpGraph.sends) builds the same graph as one send at a time."""
    from podsim.workloads.collectives import _a2a_sends, _a2a_sends_readable, _entry

    rng = np.random.default_rng(seed)
    m = rng.integers(0, 4, (n, n)) * rng.integers(1, 100, (n, n))
    ranks = [int(x) for x in rng.permutation(10)[:n]]
    c = Collective("all-to-all", ranks, 0, channels=channels, chunk_bytes=chunk, phase="dispatch",
                   layer=2, label="a2a")  # fmt: skip
    graphs, touches = [], []
    for build in (_a2a_sends, _a2a_sends_readable):
        g = OpGraph()
        g.compute(ranks[0], 1e-6)
        entry = _entry(g, ranks, {ranks[0]: 0})
        touches.append(build(g, c, ranks, m, entry))
        graphs.append(g)
    fast, slow = graphs
    assert touches[0] == touches[1]
    for col in ("kind", "rank", "peer", "nbytes", "duration_s", "delay_s", "anchor", "msg"):
        assert getattr(fast, col) == getattr(slow, col), col
    a, b = fast.arrays(), slow.arrays()
    assert np.array_equal(a.succ, b.succ) and np.array_equal(a.succ_ptr, b.succ_ptr)
    assert fast.messages(10).equals(slow.messages(10))
    assert [fast.label(i) for i in range(len(fast))] == [slow.label(i) for i in range(len(slow))]
