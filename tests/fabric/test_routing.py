"""Routing: shortest-path next-hop sets, ECMP hashing (balance, stickiness, spraying), paths,
link failure and recovery."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter

import networkx as nx
import numpy as np
import pytest
from podsim.fabric.routing import RoutingError
from podsim.fabric.topology import fat_tree, leaf_spine

from tests.fabric.fabric_testutil import build


def _balance_bound(n: int, bins: int, z: float = 5.0) -> float:
    """Per-bin deviation allowed for n items hashed uniformly into ``bins`` bins: each count is
    Binomial(n, 1/bins); a deviation beyond z standard deviations has normal-tail probability
    about exp(-z^2/2)/(z sqrt(2 pi)) (3e-7 for z = 5), so with a union bound over the bins a
    fair hash fails this with probability below ~1e-6 x bins."""
    p = 1.0 / bins
    return z * math.sqrt(n * p * (1 - p))


def test_next_hops_leaf_spine():
    g = leaf_spine(hosts_per_leaf=2, leaves=3, spines=4)
    _env, net, _ = build(g)
    r = net.routing
    far = net.endpoint_id("nic5.p0")  # on leaf2
    assert r.next_hops("leaf0", far) == ["spine0", "spine1", "spine2", "spine3"]
    assert r.next_hops("spine2", far) == ["leaf2"]
    assert r.next_hops("leaf2", far) == ["nic5.p0"]
    near = net.endpoint_id("nic1.p0")  # on leaf0
    assert r.next_hops("leaf0", near) == ["nic1.p0"]
    paths = net.paths("nic0.p0", "nic5.p0")
    assert paths == [["nic0.p0", "leaf0", f"spine{j}", "leaf2", "nic5.p0"] for j in range(4)]
    assert net.paths("nic0.p0", "nic1.p0") == [["nic0.p0", "leaf0", "nic1.p0"]]
    assert net.paths("nic0.p0", "nic0.p0") == []


@pytest.mark.parametrize("k", [4, 6])
def test_paths_match_networkx_on_fat_tree(k):
    g = fat_tree(k=k)
    _env, net, _ = build(g)
    eps = net.endpoints
    for a, b in [(eps[0], eps[1]), (eps[0], eps[k // 2]), (eps[0], eps[-1])]:
        ours = net.paths(a, b)
        ref = sorted(nx.all_shortest_paths(g, a, b))
        assert ours == ref
    h = k // 2
    assert len(net.paths(eps[0], eps[-1])) == h * h  # inter-pod: one path per core
    assert len(net.paths(eps[0], eps[h])) == h  # same pod, other edge: one per aggregation


def _spread(net, hosts, srcs, dsts, flows_per_src, spray=False):
    for i, s in enumerate(srcs):
        for f in range(flows_per_src):
            hosts[s].add_message(dsts[(i + f) % len(dsts)], 64)
    net.env.run()


def test_ecmp_spreads_flows_within_binomial_bound():
    g = leaf_spine(hosts_per_leaf=4, leaves=2, spines=4)
    _env, net, hosts = build(g)
    eps = net.endpoints
    flows_per_src = 500
    _spread(net, hosts, eps[:4], eps[4:], flows_per_src)
    n = 4 * flows_per_src
    counts = [net.port("leaf0", f"spine{j}").tx_pkts for j in range(4)]
    assert sum(counts) == n
    dev = _balance_bound(n, 4)
    assert max(abs(c - n / 4) for c in counts) <= dev, counts
    assert dev / (n / 4) < 0.2  # the bound is meaningful: within 20 % of the mean


def test_fixed_ev_sticks_and_route_predicts_it():
    g = leaf_spine(hosts_per_leaf=2, leaves=2, spines=4)
    env, net, hosts = build(g)
    m = hosts["nic0.p0"].add_message("nic3.p0", 200 * 4096)
    env.run()
    counts = {j: net.port("leaf0", f"spine{j}").tx_pkts for j in range(4)}
    used = [j for j, c in counts.items() if c]
    assert len(used) == 1 and counts[used[0]] == 200
    assert net.route("nic0.p0", "nic3.p0", m.flow, 0)[2] == f"spine{used[0]}"


def test_spraying_spreads_one_flow():
    g = leaf_spine(hosts_per_leaf=2, leaves=2, spines=4)
    env, net, hosts = build(g, spray=True)
    n = 2000
    hosts["nic0.p0"].add_message("nic3.p0", n * 4096)
    env.run()
    counts = [net.port("leaf0", f"spine{j}").tx_pkts for j in range(4)]
    assert sum(counts) == n
    assert max(abs(c - n / 4) for c in counts) <= _balance_bound(n, 4)


def test_no_hash_polarisation_across_tiers():
    """Edge and aggregation switches hash with different salts, so inter-pod flows reach all
    (k/2)^2 cores evenly; with one shared hash only k/2 cores would carry traffic."""
    g = fat_tree(k=4)
    _env, net, hosts = build(g)
    eps = net.endpoints
    flows_per_src = 300
    _spread(net, hosts, eps[:4], eps[12:], flows_per_src)  # pod 0 -> pod 3
    n = 4 * flows_per_src
    cores = sorted(s for s in net.switches if s.startswith("core"))
    per_core = [sum(p.tx_pkts for p in net.switches[c].ports) for c in cores]
    assert sum(per_core) == n
    assert max(abs(c - n / 4) for c in per_core) <= _balance_bound(n, 4), per_core


def test_link_failure_recomputes_affected_destinations():
    g = leaf_spine(hosts_per_leaf=2, leaves=3, spines=2)
    _env, net, _ = build(g)
    r = net.routing
    before = {(s, d): r.next_hops(s, d) for s in net.switches for d in range(6)}
    affected = net.set_link_state("leaf0", "spine0", up=False)
    after = {(s, d): r.next_hops(s, d) for s in net.switches for d in range(6)}
    changed = sorted({d for (s, d) in before if before[s, d] != after[s, d]})
    assert changed and set(changed) <= set(affected)
    assert all("spine0" not in p for p in [x[2] for x in net.paths("nic0.p0", "nic4.p0")])
    assert r.next_hops("spine0", net.endpoint_id("nic0.p0")) == ["leaf2", "leaf1"] or set(
        r.next_hops("spine0", net.endpoint_id("nic0.p0"))
    ) <= {"leaf1", "leaf2"}
    assert not r.link_is_up("leaf0", "spine0")
    net.set_link_state("leaf0", "spine0", up=True)
    assert {(s, d): r.next_hops(s, d) for s in net.switches for d in range(6)} == before
    assert net.set_link_state("leaf0", "spine0", up=True) == []
    with pytest.raises(RoutingError):
        r.set_link("leaf0", "leaf1", up=False)


def test_failure_in_flight_loses_packets_then_reroutes():
    g = leaf_spine(hosts_per_leaf=1, leaves=2, spines=2)
    env, net, hosts = build(g, spray=True)
    m = hosts["nic0.p0"].add_message("nic1.p0", 400 * 4096)
    env.run(until=20e-6)
    net.set_link_state("leaf0", "spine0", up=False, reroute=False)  # blackhole first
    env.run(until=25e-6)
    net.routing.set_link("leaf0", "spine0", up=False)  # reconverged 5 us later
    env.run()
    lost = net.dropped_bytes()
    assert lost > 0 and net.port("leaf0", "spine0").drops > 0
    assert m.rx_bytes + lost == m.size


def test_partition_counts_no_route_drops():
    g = leaf_spine(hosts_per_leaf=1, leaves=2, spines=1)
    env, net, hosts = build(g)
    net.set_link_state("leaf0", "spine0", up=False)
    hosts["nic0.p0"].add_message("nic1.p0", 3 * 4096)
    env.run()
    assert net.switches["leaf0"].noroute_drops == 3
    assert net.dropped_bytes() == 3 * 4096
    assert net.paths("nic0.p0", "nic1.p0") == [] and net.route("nic0.p0", "nic1.p0", 0, 0) == []


def test_unknown_endpoint():
    _env, net, _ = build(leaf_spine(hosts_per_leaf=1, leaves=2))
    with pytest.raises(RoutingError, match="not an endpoint"):
        net.paths("leaf0", "nic1.p0")


@pytest.mark.parametrize(
    "graph",
    [fat_tree(k=4), leaf_spine(hosts_per_leaf=2, leaves=3, spines=4)],
    ids=["fat-tree-k4", "leaf-spine"],
)
def test_first_path_is_the_first_of_paths_for_every_pair_also_after_a_failure(graph):
    """first_path (a depth-first search stopping at the first path) returns paths()[0] for
    every ordered pair of endpoints, [] where paths() is empty (a pair with itself, a
    partition), before a link failure, during it (the tables and caches are recomputed) and
    after."""
    _env, net, _ = build(graph)
    eps = sorted(net.routing.endpoints)

    def check() -> None:
        for a in eps:
            for b in eps:
                paths = net.paths(a, b)
                assert net.first_path(a, b) == (paths[0] if paths else []), (a, b)

    check()
    u = sorted(net.switches)[0]
    v = net.routing.next_hops(u, net.endpoint_id(eps[-1]))[0]
    net.set_link_state(u, v, up=False)
    check()
    net.set_link_state(u, v, up=True)
    check()


def test_first_path_is_empty_across_a_partition():
    _env, net, _ = build(leaf_spine(hosts_per_leaf=1, leaves=2, spines=1))
    path = ["nic0.p0", "leaf0", "spine0", "leaf1", "nic1.p0"]
    assert net.first_path("nic0.p0", "nic1.p0") == path
    net.set_link_state("leaf0", "spine0", up=False)
    assert net.first_path("nic0.p0", "nic1.p0") == [] == net.paths("nic0.p0", "nic1.p0")


def _permutation_link_loads(net, routes_of, trials: int, seed: int) -> tuple[np.ndarray, ...]:
    """Per random permutation of the hosts: the most flows on one switch-to-switch link and how
    many such links carry 3 or more flows, each flow routed by ``routes_of(src, dst, flow)``."""
    rng = random.Random(seed)
    eps = net.endpoints
    worst, crowded = [], []
    flow = 1
    for _ in range(trials):
        dst = list(range(len(eps)))
        rng.shuffle(dst)
        links: Counter = Counter()
        for s, d in enumerate(dst):
            if s != d:
                p = routes_of(eps[s], eps[d], flow)
                flow += 1
                links.update(itertools.pairwise(p[1:-1]))  # between switches only
        worst.append(max(links.values()))
        crowded.append(sum(n >= 3 for n in links.values()))
    return np.asarray(worst, float), np.asarray(crowded, float)


def _differ(a: np.ndarray, b: np.ndarray, z: float = 5.0) -> bool:
    """Whether two samples' means differ by more than z standard errors of the difference."""
    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    return abs(a.mean() - b.mean()) > z * se


def test_per_hop_ecmp_collides_flows_as_uniform_path_choice_does():
    """The switches hash (flow, EV) with their own key at every hop, as htsim's FatTreeSwitch
    does (getNextHop: freeBSDHash(flow, path id, per-switch random salt) mod n). On a fat-tree
    independent uniform choices at each upward hop pick each minimal path with equal chance, so
    a permutation's collisions (flows sharing a link) are those of a uniform random path per
    connection: validate_htsim's one-path rows compare like with like. 200 permutations of a
    k = 8 fat-tree (128 hosts): the worst link's flows and the links with >= 3 flows agree with
    uniform path choice within 5 standard errors, and one key shared by every switch (tiers
    polarised: a flow takes the same uplink index at leaf and spine, 4 of 16 cores) does not."""
    _env, net, _ = build(fat_tree(k=8), seed=3)
    rng = random.Random(11)
    paths: dict[tuple[str, str], list[list[str]]] = {}

    def uniform(a: str, b: str, _flow: int) -> list[str]:
        if (a, b) not in paths:
            paths[a, b] = net.paths(a, b)
        return rng.choice(paths[a, b])

    def hashed(a: str, b: str, flow: int) -> list[str]:
        return net.route(a, b, flow, 0)

    hw, hc = _permutation_link_loads(net, hashed, 200, seed=5)
    uw, uc = _permutation_link_loads(net, uniform, 200, seed=5)
    assert not _differ(hw, uw), (hw.mean(), uw.mean())
    assert not _differ(hc, uc), (hc.mean(), uc.mean())
    assert 4 < hw.mean() < 5 and 20 < hc.mean() < 30  # the statistic is not degenerate
    for sw in net.switches.values():  # the negative control
        sw._salt = 12345
    pw, pc = _permutation_link_loads(net, hashed, 200, seed=5)
    assert _differ(pw, uw) and _differ(pc, uc), (pw.mean(), pc.mean())
