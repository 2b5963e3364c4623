"""Faults under the SmartNIC transport (issue 9, "Must show").

* A multipath run with one spine link cut mid-transfer completes with zero bytes lost to the
  application; the same run on single-path ECMP reports the stall and the recovery time.
* LLR hides bit errors from the transport: no retransmission, at the cost the PHY predicts.

The invariant checker runs alongside every run here (bytes conserved, nothing delivered twice,
every message completed).
"""

from __future__ import annotations

import pytest
import simpy

from fabric.faults import FaultInjector, LinkBer, LinkDown
from fabric.invariants import Checker, run_checked
from fabric.network import Network
from fabric.topology import build_topology
from nic.nic import NicConfig, RdmaNetwork
from scenarios.faults import RdmaEndpoints

MIB = 1 << 20
SIZE = 2 * MIB
T_CUT = 10e-6


def cut_run(selector: str, *, cut: bool = True, reconvergence_s: float = 1.0, seed: int = 2):
    """4 NICs on leaf0 each send 2 MiB to one on leaf1 (4 spines, non-blocking). At 10 us the
    link from leaf0 to the spine of QP 0's ECMP path is cut; static routing takes
    ``reconvergence_s`` to notice (1 s: not within the run)."""
    env = simpy.Environment()
    g = build_topology("leaf-spine", hosts_per_leaf=4, leaves=2)
    net = Network(env, g, seed=seed)
    rdma = RdmaNetwork(net, NicConfig(cc="dcqcn", selector=selector), seed=seed)
    msgs = [rdma.post(i, 4 + i, SIZE) for i in range(4)]
    q0 = msgs[0].qp
    ev = q0.sel.ev if selector == "ecmp" else 0
    spine = net.route(q0.nic.endpoints[0], q0.dst_nic.endpoints[0], q0.id, ev)[2]
    faults = [LinkDown(link=("leaf0", spine), at=T_CUT)] if cut else []
    inj = FaultInjector(net, faults, reconvergence_s=reconvergence_s)
    checker = Checker(net, endpoints=[RdmaEndpoints(rdma)])
    run_checked(env, checker=checker, check_every=5000, stop=lambda: rdma.pending == 0)
    checker.check_all(final=True)
    return net, rdma, inj


@pytest.mark.parametrize("selector", ["spray", "reps"])
def test_multipath_cut_mid_transfer_loses_no_byte(selector: str):
    net, rdma, inj = cut_run(selector)
    rec = inj.records[0]
    assert rec.lost_pkts > 0  # packets did die on the cut link...
    q = rdma.qp_table()
    assert (q.rx_delivered_bytes == SIZE).all() and (q.acked_bytes == SIZE).all()  # ...no byte
    assert rdma.message_table().done_s.notna().all()
    data_lost = sum(h.lost_pkts for h in rec.flows.values())  # (ACKs died there too)
    assert 0 < data_lost <= int(q.retx_pkts.sum())  # every lost data packet was resent
    # REPS stops using the dead path's EVs and never stalls; oblivious spraying keeps hitting
    # it, so a lost tail packet can cost one retransmission timeout, never more
    rto = rdma.config.rto_min_s
    assert rec.max_stall_s() < (0.1 if selector == "reps" else 1.5) * rto


def test_single_path_ecmp_reports_stall_and_recovery():
    net, rdma, inj = cut_run("ecmp")
    _, base, _ = cut_run("ecmp", cut=False)
    rec = inj.records[0]
    rto = rdma.config.rto_min_s
    hit = rec.flows
    assert list(hit) == [rdma.qp(0, 4).id]  # only QP 0 hashed onto the cut link
    h = hit[rdma.qp(0, 4).id]
    # nothing arrives until the retransmission timeout re-hashes the QP onto a live path
    assert rto <= h.stall_s <= 2 * rto
    assert rec.recovery_s() == pytest.approx(h.stall_end_s - T_CUT)
    assert rto <= rec.recovery_s() <= 2 * rto + 20e-6
    # recovered: everything delivered, the hit message late by about the stall
    q, m, m0 = rdma.qp_table(), rdma.message_table(), base.message_table()
    assert (q.rx_delivered_bytes == SIZE).all()
    assert q.timeouts[0] >= 1 and q.retx_pkts[0] > 0
    assert m.done_s[0] - m0.done_s[0] >= 0.8 * h.stall_s
    row = inj.table().iloc[0]
    assert row.flows_hit == 1 and row.max_stall_s == h.stall_s and row.lost_pkts > 0


def test_single_path_ecmp_recovers_at_reconvergence_when_it_is_faster():
    """With routing reconverging in 20 us (before the 100 us RTO), the stall ends when the
    tables change."""
    delay = 20e-6
    _, rdma, inj = cut_run("ecmp", reconvergence_s=delay)
    rec = inj.records[0]
    h = rec.flows[rdma.qp(0, 4).id]
    assert delay <= h.stall_s <= delay + 10e-6
    assert rec.rerouted_s == pytest.approx(T_CUT + delay)


def ber_run(llr: bool):
    """nic0 -> nic1 over one switch, 1 MiB, with bursty bit errors on nic0's uplink."""
    env = simpy.Environment()
    net = Network(env, build_topology("star", hosts=2), seed=1)
    rdma = RdmaNetwork(net, NicConfig(cc="dcqcn", selector="ecmp"), seed=1)
    rdma.post(0, 1, MIB)
    inj = FaultInjector(
        net, [LinkBer(link=("nic0.p0", "leaf0"), pre_fec_ber=1e-4, burst_len=8, llr=llr)]
    )
    checker = Checker(net, endpoints=[RdmaEndpoints(rdma)])
    run_checked(env, checker=checker, check_every=2000, stop=lambda: rdma.pending == 0)
    checker.check_all(final=True)
    return net, rdma, inj.records[0]


def test_llr_hides_bit_errors_from_the_transport_at_its_cost():
    net, rdma, rec = ber_run(llr=False)
    q = rdma.qp_table()
    assert rec.lost_pkts > 0 and int(q.retx_pkts.sum()) >= rec.lost_pkts  # seen: resent

    net, rdma, rec = ber_run(llr=True)
    q = rdma.qp_table()
    assert rec.corrupted > 0 and rec.lost_pkts == 0 and net.dropped_packets() == 0
    assert int(q.retx_pkts.sum()) == 0 and int(q.timeouts.sum()) == 0  # hidden
    assert int(q.nacks_rcvd.sum()) == 0
    # cost: every replay takes the link for one frame, and adds one link round trip plus a
    # serialisation to the frame's delivery (queueing behind the replay included)
    up = net.port("nic0.p0", "leaf0")
    edge = net.graph.edges["nic0.p0", "leaf0"]
    from fabric.phy import get_phy

    cost = get_phy(edge["phy"]).llr_retry_cost_s(4096 + 82 - 20, edge["length_m"])
    assert up.mac_bytes >= rec.llr_replays * 4096
    base = ber_run_time(llr_off=True)
    extra = rdma.message_table().done_s[0] - base
    assert 0 < extra <= rec.llr_replays * (cost + 8 * 4178 / 400e9) + 1e-6


def ber_run_time(llr_off: bool) -> float:
    env = simpy.Environment()
    net = Network(env, build_topology("star", hosts=2), seed=1)
    rdma = RdmaNetwork(net, NicConfig(cc="dcqcn", selector="ecmp"), seed=1)
    rdma.post(0, 1, MIB)
    rdma.run()
    return float(rdma.message_table().done_s[0])
