"""The flow-level engine core: wire framing, Clos routes, max-min events, batching, CC."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
import simpy
from podsim.fabric.flow import (
    FlowPaths,
    FlowRouteError,
    FlowSim,
    cc_efficiency,
    packets,
    wire_bytes,
)
from podsim.fabric.packet import MIN_WIRE_BYTES, ROCE_OVERHEAD
from podsim.fabric.topology import build_topology, endpoints


def run_flows(capacity, idx, coef, nbytes, *, at=None, rtol=0.0, eta=1.0, egress=None, lat=0.0):
    """Post flows (optionally at given times) and return their delivery times."""
    env = simpy.Environment()
    sim = FlowSim(env, np.asarray(capacity, float), rtol=rtol, eta=eta, switch_egress=egress)
    idx = np.asarray(idx)
    coef = np.asarray(coef, float)
    nbytes = np.asarray(nbytes, float)
    if at is None:
        sim.add(idx, coef, nbytes, latency_s=lat)
    else:
        for t in sorted(set(at)):
            sel = np.flatnonzero(np.asarray(at) == t)

            def post(_e, sel=sel):
                sim.add(idx[sel], coef[sel], nbytes[sel], latency_s=lat)

            env.timeout(t).callbacks.append(post)
    env.run()
    return sim, sim.t_deliver[: sim.n].copy()


# ------------------------------------------------------------------------- wire framing


@pytest.mark.parametrize("nbytes", [1, 4095, 4096, 4097, 100_000, 1 << 20])
def test_wire_bytes_is_payload_plus_overhead_per_packet(nbytes):
    mtu = 4096
    n = -(-nbytes // mtu)
    last = nbytes - (n - 1) * mtu
    expect = (n - 1) * (mtu + ROCE_OVERHEAD) + max(last + ROCE_OVERHEAD, MIN_WIRE_BYTES)
    assert int(packets(nbytes, mtu)) == n
    assert int(wire_bytes(nbytes, mtu)) == expect
    assert int(wire_bytes(nbytes, mtu, first_extra=16)) == expect + 16


# ------------------------------------------------------------------------- max-min events


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_single_bottleneck_gives_exact_fair_share(n):
    cap = 400e9
    env = simpy.Environment()
    sim = FlowSim(env, np.array([cap]))
    sim.add(np.zeros((n, 1), int), np.ones((n, 1)), np.full(n, 1e6))
    env.run(until=1e-9)
    assert np.allclose(sim.rate[:n], cap / n, rtol=1e-12)
    env.run()
    # equal flows share equally, so all finish together at n * bytes / capacity
    assert np.allclose(sim.t_deliver[:n], n * 8e6 / cap, rtol=1e-12)


def test_unequal_flows_finish_in_closed_form_order():
    cap = 100e9
    sizes = np.array([1e5, 3e5, 6e5, 1e6])
    _, t = run_flows([cap], np.zeros((4, 1), int), np.ones((4, 1)), sizes)
    # processor sharing: the k-th smallest ends after sum_j min(s_j, s_k) bytes have crossed
    expect = [8.0 * np.minimum(sizes, s).sum() / cap for s in sizes]
    assert np.allclose(t, expect, rtol=1e-12)


def test_two_links_max_min_classic():
    # A on links 0 and 1, B on link 0, C on link 1; link 1 half the capacity of link 0
    idx = np.array([[0, 1], [0, -1], [1, -1]])
    coef = np.ones((3, 2))
    env = simpy.Environment()
    sim = FlowSim(env, np.array([100e9, 50e9]))
    sim.add(idx, coef, np.full(3, 1e9))
    env.run(until=1e-9)
    assert np.allclose(sim.rate[:3], [25e9, 75e9, 25e9])


def test_late_flow_takes_its_share_then_returns_it():
    cap = 8e9  # 1 GB/s
    _, t = run_flows([cap], np.zeros((2, 1), int), np.ones((2, 1)), [1e6, 1e5], at=[0.0, 1e-4])
    # 1e5 B alone for 100 us, then two flows at 0.5 GB/s: the small one needs 200 us more
    assert t[1] == pytest.approx(3e-4, rel=1e-12)
    # the big one had 1e5 + 1e5 B after 300 us, the rest 8e5 B alone: 800 us
    assert t[0] == pytest.approx(1.1e-3, rel=1e-12)


def test_latency_delays_delivery_only():
    _, t = run_flows([8e9], [[0]], [[1.0]], [1e6], lat=2e-6)
    assert t[0] == pytest.approx(1e-3 + 2e-6, rel=1e-12)


def test_batching_error_is_small_and_never_early():
    rng = np.random.default_rng(3)
    n_links, n = 20, 200
    idx = np.stack([rng.choice(n_links, 3, replace=False) for _ in range(n)])
    sizes = rng.integers(10_000, 2_000_000, n).astype(float)
    at = rng.choice(np.linspace(0.0, 2e-4, 10), n)  # bursts, as phases post them
    cap = rng.choice([100e9, 200e9, 400e9], n_links)
    ref, exact = run_flows(cap, idx, np.ones(idx.shape), sizes, at=at)
    sim, approx = run_flows(cap, idx, np.ones(idx.shape), sizes, at=at, rtol=0.01)
    assert np.isfinite(exact).all() and np.isfinite(approx).all()
    assert approx.max() >= exact.max() * (1 - 1e-9)
    assert approx.max() <= exact.max() * 1.05
    assert sim.solves < 0.7 * ref.solves


def _capped_run(calls: list[tuple[float, float]]) -> FlowSim:
    """Two flows sharing a link, the first capped at 100 Gb/s; ``calls`` (time, cap) set
    the first flow's cap again at those times."""
    env = simpy.Environment()
    sim = FlowSim(env, np.array([400e9]))
    sim.add(np.array([[0], [0]]), np.ones((2, 1)), [1e6, 2e6], caps=np.array([100e9, np.inf]))
    for t, cap in calls:
        env.timeout(t).callbacks.append(lambda _e, cap=cap: sim.set_caps(np.array([0]), cap))
    env.run()
    return sim


def test_unchanged_caps_ask_for_no_solve():
    # an engine that re-states a flow's cap (the flow engine's storage shares, once per
    # posted message before) must not cost a solve per call: nothing changed
    ref = _capped_run([])
    same = _capped_run([(t, 100e9) for t in np.linspace(1e-6, 5e-5, 40)])
    assert same.solves == ref.solves
    assert np.array_equal(same.t_deliver[:2], ref.t_deliver[:2])
    changed = _capped_run([(1e-5, 50e9)])  # a real change is solved at once
    assert changed.solves == ref.solves + 1
    assert changed.t_deliver[0] > ref.t_deliver[0]


def _with_background(background: bool | None) -> FlowSim:
    """Bursts of flows on links 0-9 under batching; with ``background`` not None, one long
    flow on link 10 alone, posted first (a storage read running through every phase)."""
    rng = np.random.default_rng(5)
    n = 120
    idx = np.stack([rng.choice(10, 2, replace=False) for _ in range(n)])
    sizes = rng.integers(10_000, 1_000_000, n).astype(float)
    at = rng.choice(np.linspace(1e-4, 1e-3, 6), n)
    env = simpy.Environment()
    sim = FlowSim(env, np.full(11, 100e9), rtol=0.01)
    if background is not None:
        sim.add(np.array([[10]]), np.ones((1, 1)), [1e9], background=background)
    for t in sorted(set(at)):
        sel = np.flatnonzero(at == t)

        def post(_e, sel=sel):
            sim.add(idx[sel], np.ones(idx[sel].shape), sizes[sel])

        env.timeout(t).callbacks.append(post)
    env.run()
    return sim


def test_background_flow_leaves_the_batching_window_alone():
    # the window scales with the age of the oldest active flow of the phase; a background
    # flow on a link of its own must change neither that window nor any foreground time
    ref = _with_background(None)
    bg = _with_background(True)
    off = 1  # the background flow is flow 0
    fg = bg.t_deliver[off : bg.n]
    assert np.allclose(fg, ref.t_deliver[: ref.n], rtol=1e-12, atol=0.0)
    assert bg.solves <= ref.solves + 2  # its own start and end
    # counted as foreground, its age (from t = 0) widens every later window: fewer solves,
    # later deliveries
    fg_wide = _with_background(False)
    assert fg_wide.solves < ref.solves
    assert not np.allclose(fg_wide.t_deliver[off : fg_wide.n], ref.t_deliver[: ref.n], rtol=1e-9)


def test_cc_efficiency_only_on_shared_switch_queues():
    eff = cc_efficiency("dcqcn")
    assert 0 < eff < 1
    cap = np.array([400e9])
    egress = np.array([True])
    _, alone = run_flows(cap, [[0]], [[1.0]], [1e6], eta=eff, egress=egress)
    assert alone[0] == pytest.approx(8e6 / 400e9, rel=1e-12)
    _, two = run_flows(cap, [[0], [0]], [[1.0], [1.0]], [1e6, 1e6], eta=eff, egress=egress)
    assert np.allclose(two, 2 * 8e6 / (eff * 400e9), rtol=1e-12)
    with pytest.raises(ValueError, match="CC efficiency"):
        cc_efficiency("x", 1.5)


def test_flowsim_rejects_bad_input():
    env = simpy.Environment()
    with pytest.raises(ValueError, match="capacity"):
        FlowSim(env, np.array([-1.0]))
    sim = FlowSim(env, np.array([1.0]))
    with pytest.raises(ValueError, match="constraint ids"):
        sim.add(np.array([[3]]), np.array([[1.0]]), [1.0])
    with pytest.raises(ValueError, match="nbytes"):
        sim.add(np.array([[0]]), np.array([[1.0]]), [-1.0])


# ------------------------------------------------------------------------- routes


@pytest.mark.parametrize(
    "name,kw",
    [
        ("star", {"hosts": 6}),
        ("leaf-spine", {"hosts_per_leaf": 3, "leaves": 3, "spines": 2}),
        ("fat-tree", {"k": 4}),
        ("superpod", {"pods": 2, "gpus_per_pod": 16, "scaleout": "fat-tree"}),
        ("superpod-128", {"pods": 1}),
    ],
)
def test_hashed_routes_are_equal_cost_shortest_paths(name, kw):
    g = build_topology(name, **kw)
    fp = FlowPaths(g, seed=1)
    eps = [e for e in endpoints(g) if g.nodes[e]["plane"] == 0][:24]
    pairs = [(a, b) for a, b in itertools.product(eps, eps) if a != b]
    s = fp.nodes([a for a, _ in pairs])
    d = fp.nodes([b for _, b in pairs])
    r = fp.route(s, d, np.arange(len(pairs)))
    sub = g.subgraph(n for n, role in g.nodes(data="role") if role not in ("gpu", "scaleup"))
    for i, (a, b) in enumerate(pairs):
        links = [fp.names[x] for x in r.idx[i] if x >= 0]
        path = [a] + [x.split("->")[1] for x in links]
        assert path[-1] == b
        assert len(path) - 1 == nx.shortest_path_length(sub, a, b)
        assert all(sub.has_edge(u, v) for u, v in itertools.pairwise(path))


def test_spread_bundles_hold_every_equal_cost_link():
    g = build_topology("fat-tree", k=4)
    fp = FlowPaths(g)
    a, b = "nic0.p0", "nic15.p0"  # different fat-tree pods
    r = fp.route(fp.nodes([a]), fp.nodes([b]), np.array([0]), mode="spread")
    ids = [x for x in r.idx[0] if x >= 0]
    names = [fp.names[x] for x in ids]
    assert names[0] == f"{a}->leaf0" and names[-1].endswith(f"->{b}")
    # the bundles hold all links of every shortest path, at their summed rate
    paths = list(nx.all_shortest_paths(g, a, b))
    used = {f"{u}->{v}" for p in paths for u, v in itertools.pairwise(p)}
    members = {fp.names[m] for x in ids[1:-1] for m in fp.members[x]}
    inner = {x for x in used if not x.startswith(a) and not x.endswith(b)}
    assert inner == {x for x in members if x in inner} and inner <= members
    for x in ids[1:-1]:
        assert fp.capacity[x] == pytest.approx(fp.link_rate[fp.members[x]].sum())


def test_route_latency_matches_closed_form():
    g = build_topology("leaf-spine", hosts_per_leaf=2, leaves=2, spines=1)
    fp = FlowPaths(g, switch_latency_s=600e-9)
    r = fp.route(fp.nodes(["nic0.p0"]), fp.nodes(["nic3.p0"]), np.array([0]))
    path = ["nic0.p0", "leaf0", "spine0", "leaf1", "nic3.p0"]
    from podsim.fabric.phy import get_phy

    expect = (
        sum(
            g.edges[u, v]["length_m"] * 5e-9 + get_phy(g.edges[u, v]["phy"]).fec_latency_s
            for u, v in itertools.pairwise(path)
        )
        + 3 * 600e-9
    )
    assert r.latency_s[0] == pytest.approx(expect, rel=1e-12)
    assert r.switches[0] == 3


def test_routes_are_deterministic_and_seeded():
    g = build_topology("leaf-spine", hosts_per_leaf=4, leaves=4, spines=4)
    s = FlowPaths(g, seed=0).nodes(["nic0.p0"] * 64)
    d = FlowPaths(g, seed=0).nodes(["nic15.p0"] * 64)
    key = np.arange(64)
    r1 = FlowPaths(g, seed=0).route(s, d, key)
    r2 = FlowPaths(g, seed=0).route(s, d, key)
    r3 = FlowPaths(g, seed=9).route(s, d, key)
    assert np.array_equal(r1.idx, r2.idx)
    assert not np.array_equal(r1.idx, r3.idx)
    assert len({tuple(x) for x in r1.idx}) == 4  # all four spines used


def test_route_errors_name_the_problem():
    g = build_topology("star", hosts=3)
    fp = FlowPaths(g)
    with pytest.raises(FlowRouteError, match="itself"):
        fp.route(fp.nodes(["nic0.p0"]), fp.nodes(["nic0.p0"]), np.array([0]))
    with pytest.raises(FlowRouteError, match="not a node"):
        fp.nodes(["nic9.p0"])


# ------------------------------------------------------------------------- sent notifications


@pytest.mark.parametrize("when", ["before", "after"])
def test_watch_sent_reports_when_the_last_byte_left(when):
    """A watched flow is reported at its last byte's departure, not its delivery: 1 Mbit over a
    1 Mb/s link leaves at 1 s and is delivered 0.25 s later; watching it after a batched solve
    has fixed its end (``after``: a second flow at 0.1 s opens a window to 1.1 s) or before
    (``before``) gives the same time."""
    env = simpy.Environment()
    seen: list[tuple[int, float]] = []
    sim = FlowSim(env, np.array([1e6, 1e6]), rtol=10.0, on_sent=lambda f: seen.append((f, env.now)))
    (fid,) = sim.add(np.array([[0]]), np.array([[1.0]]), np.array([125_000.0]), latency_s=0.25)
    if when == "before":
        sim.watch_sent(int(fid))
    else:
        env.timeout(0.1).callbacks.append(
            lambda _e: sim.add(np.array([[1]]), np.array([[1.0]]), np.array([1.0]))
        )
        env.run(until=0.5)
        assert sim.committed[fid]
        sim.watch_sent(int(fid))
    env.run()
    assert seen == [(int(fid), pytest.approx(1.0))]
    assert sim.t_deliver[fid] == pytest.approx(1.25)


def test_unwatched_flows_are_not_reported_and_watching_needs_a_callback():
    env = simpy.Environment()
    seen: list[int] = []
    sim = FlowSim(env, np.array([1e6]), on_sent=seen.append)
    sim.add(np.array([[0], [0]]), np.ones((2, 1)), np.array([1000.0, 1000.0]))
    sim.watch_sent(1)
    env.run()
    assert seen == [1]
    with pytest.raises(ValueError, match="on_sent"):
        FlowSim(simpy.Environment(), np.array([1e6])).watch_sent(0)
