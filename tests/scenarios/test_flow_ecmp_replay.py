"""The flow engine's ECMP replay (issue 14): an ECMP QP's fluid flow takes exactly the path the
packet engine's switches hash its packets onto, on a three-tier fat-tree."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import simpy
from podsim.fabric.network import Network
from podsim.nic.nic import RdmaNetwork
from podsim.scenarios.build.cluster import build_cluster
from podsim.scenarios.engines import RunContext
from podsim.scenarios.engines.flow import FlowCluster
from podsim.scenarios.engines.packet import nic_config
from podsim.scenarios.input.loader import load_scenario

FAT_TREE = [
    "variant=ecmp",
    "engine=flow",
    "cluster.topology.name=fat-tree",
    "cluster.topology.params={k: 4}",
    "seed=7",
]


def _ctx() -> RunContext:
    sc, _ = load_scenario("spray-vs-ecmp", overrides=FAT_TREE)
    cl = build_cluster(sc, 16)
    empty = pd.DataFrame({"step": [], "layer": [], "rank": [], "compute_s": []})
    return RunContext(sc, cl, pd.DataFrame(), empty)


def test_flow_engine_ecmp_path_is_the_packet_engines_path() -> None:
    c = _ctx()
    fc = FlowCluster(c)
    assert fc.replay
    n = c.cluster.num_ranks
    src = np.repeat(np.arange(n), n - 1)
    dst = np.array([d for s in range(n) for d in range(n) if d != s])
    r = fc.route(
        np.arange(src.size), src, dst, np.full(src.size, 1 << 20), np.full(src.size, "rdma")
    )
    p = fc.paths
    # the packet engine's network and QPs of the same scenario and seed
    net = Network(simpy.Environment(), c.cluster.graph, c.cluster.switch, seed=c.scenario.seed)
    rdma = RdmaNetwork(net, nic_config(c), seed=c.scenario.seed)
    cores: set[str] = set()
    differ = 0
    for i, (a, b) in enumerate(zip(src.tolist(), dst.tolist(), strict=True)):
        ca, cb = int(c.cluster.rank_nic[a]), int(c.cluster.rank_nic[b])
        qp = rdma.qp(ca, cb)
        ev = qp.sel.next_ev(0.0)
        plane = qp.sel.plane_of(ev)
        hops = net.route(
            rdma.nic(ca).endpoints[plane], rdma.nic(cb).endpoints[plane], qp.flow_key, ev
        )
        want = [f"{u}->{v}" for u, v in itertools.pairwise(hops)]
        data = r.idx[i][:6]  # the data path's columns come first, the ACKs' last
        links = data[(data >= 0) & (data < p.n_links)]
        assert [p.names[k] for k in links] == want
        cores.update(h for h in hops if "core" in h)
        # the flow engine's own hash of the message (what it did before the replay)
        own = p.route(r.src_port[i : i + 1], r.dst_port[i : i + 1], np.array([i]))
        differ += [p.names[k] for k in own.idx[0] if k >= 0] != want
    # not vacuous: the paths cross all four cores, and a hash of its own would differ
    assert len(cores) == 4 and differ > 0


def test_the_flow_label_does_not_depend_on_creation_order() -> None:
    c = _ctx()
    a = RdmaNetwork(
        Network(simpy.Environment(), c.cluster.graph, c.cluster.switch, seed=1), nic_config(c)
    )
    b = RdmaNetwork(
        Network(simpy.Environment(), c.cluster.graph, c.cluster.switch, seed=1), nic_config(c)
    )
    qa = [a.qp(0, 5), a.qp(3, 9)]
    qb = [b.qp(3, 9), b.qp(0, 5)][::-1]
    assert [q.id for q in qa] != [q.id for q in qb]  # created in another order
    assert [q.flow_key for q in qa] == [q.flow_key for q in qb]


def test_reverse_links_carry_the_acks() -> None:
    """Each data link's reverse carries one ACK (RoCEv2 82 B + AETH 4 B) per data packet
    (cluster.nic.ack_coalesce 1): 256 ACKs of 86 B for a 1 MiB message at a 4 KiB MTU, so
    86 x 256 / 2^20 wire bytes per payload byte; the data links 4096 + 82 B per packet."""
    c = _ctx()
    fc = FlowCluster(c)
    r = fc.route(
        np.array([0]), np.array([0]), np.array([9]), np.array([1 << 20]), np.array(["rdma"])
    )
    p = fc.paths
    idx, coef = r.idx[0], r.coef[0]
    data = [int(k) for k in idx[:6] if 0 <= k < p.n_links]
    assert len(data) == 6  # two pods apart: six links
    by_id = dict(zip(idx.tolist(), coef.tolist(), strict=True))
    for k in data:
        assert by_id[k] == pytest.approx((256 * (4096 + 82) + 16) / (1 << 20))  # + RETH
        assert by_id[k ^ 1] == pytest.approx(86 * 256 / (1 << 20))
    # the bound leaves ACKs out: its routes load the forward path only
    b = FlowCluster(c, spread_all=True).route(
        np.array([0]), np.array([0]), np.array([9]), np.array([1 << 20]), np.array(["rdma"])
    )
    assert not set(b.idx[0].tolist()) & {k ^ 1 for k in data}
