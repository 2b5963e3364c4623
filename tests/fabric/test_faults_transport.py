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
from podsim.fabric.faults import FaultInjector, LinkBer, LinkDown
from podsim.fabric.invariants import Checker, run_checked
from podsim.fabric.network import Network
from podsim.fabric.topology import build_topology
from podsim.nic.nic import NicConfig, RdmaNetwork
from podsim.scenarios.execution.faults import RdmaEndpoints

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
    # the paper's DCQCN constants: with the nvidia profile's faster recovery the queues run
    # deeper and REPS's loss detection (a reorder window of smoothed RTTs) takes ~17 us here
    cfg = NicConfig(cc="dcqcn", cc_params={"profile": "paper"}, selector=selector)
    rdma = RdmaNetwork(net, cfg, seed=seed)
    msgs = [rdma.post(i, 4 + i, SIZE) for i in range(4)]
    routes, acks = [], []
    for m in msgs:
        q = m.qp
        ev = q.sel.ev if selector == "ecmp" else 0
        routes.append(net.route(q.nic.endpoints[0], q.dst_nic.endpoints[0], q.flow_key, ev))
        acks.append(net.route(q.dst_nic.endpoints[0], q.nic.endpoints[0], q.flow_key, ev))
    spine = routes[0][2]
    rdma.dead = [spine in r for r in routes]  # which QPs' ECMP path crosses the cut
    rdma.acks_dead = [spine in r for r in acks]  # ... and whose ACKs cross it (both die)
    faults = [LinkDown(link=("leaf0", spine), at=T_CUT)] if cut else []
    inj = FaultInjector(net, faults, reconvergence_s=reconvergence_s)
    checker = Checker(net, endpoints=[RdmaEndpoints(rdma)])
    run_checked(env, checker=checker, check_every=5000, stop=lambda: rdma.pending == 0)
    checker.check_all(final=True)
    return net, rdma, inj


@pytest.mark.parametrize("selector", ["spray", "reps"])
def test_multipath_cut_mid_transfer_loses_no_byte(selector: str):
    _net, rdma, inj = cut_run(selector)
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
    _net, rdma, inj = cut_run("ecmp")
    _, base, _ = cut_run("ecmp", cut=False)
    rec = inj.records[0]
    rto = rdma.config.rto_min_s
    dead = rdma.dead
    assert any(dead) and not all(dead)
    # exactly the QPs hashed onto the cut link were hit
    assert sorted(rec.flows) == sorted(rdma.qp(i, 4 + i).flow_key for i in range(4) if dead[i])
    q, m, m0 = rdma.qp_table(), rdma.message_table(), base.message_table()
    assert (q.rx_delivered_bytes == SIZE).all()  # recovered: everything delivered
    for i in range(4):
        if not dead[i]:
            if rdma.acks_dead[i]:  # its data flows, its last ACKs die: one timeout resends
                assert q.timeouts[i] >= 1
            else:
                assert q.timeouts[i] == 0
                assert m.done_s[i] == pytest.approx(m0.done_s[i], rel=0.05)
            continue
        h = rec.flows[rdma.qp(i, 4 + i).flow_key]
        # nothing arrives until a retransmission timeout re-hashes the QP onto a live path
        # (a re-hash can land on the dead link again: k timeouts with doubling back-off wait
        # at most rto x (2^k - 1))
        k = int(q.timeouts[i])
        assert k >= 1 and q.retx_pkts[i] > 0
        assert rto <= h.stall_s <= rto * (2**k - 1) + 20e-6
        assert m.done_s[i] > h.stall_end_s >= T_CUT + rto  # finished only after recovering
    assert rto <= rec.recovery_s() <= rto * (2 ** int(q.timeouts.max()) - 1) + 20e-6
    assert rec.recovery_s() == pytest.approx(max(h.stall_end_s for h in rec.flows.values()) - T_CUT)
    row = inj.table().iloc[0]
    assert row.flows_hit == sum(dead) and row.max_stall_s == rec.max_stall_s()
    assert row.lost_pkts > 0


def test_single_path_ecmp_recovers_sooner_when_routing_reconverges_first():
    """With routing reconverging in 20 us (before the 100 us RTO), the tables move the hit QPs
    off the dead link at 30 us: they finish earlier and stall less than with static routes."""
    delay = 20e-6
    _, fast, inj = cut_run("ecmp", reconvergence_s=delay)
    _, slow, inj_slow = cut_run("ecmp")
    rec, rec_slow = inj.records[0], inj_slow.records[0]
    done, done_slow = fast.message_table().done_s, slow.message_table().done_s
    assert rec.rerouted_s == pytest.approx(T_CUT + delay)
    assert rec_slow.rerouted_s > done_slow.max()  # static: not within the transfer
    assert sorted(rec.flows) == sorted(rec_slow.flows)
    for f, h in rec.flows.items():
        assert h.stall_s < rec_slow.flows[f].stall_s
    assert done.max() < done_slow.max()
    assert (fast.qp_table().rx_delivered_bytes == SIZE).all()


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
    from podsim.fabric.phy import get_phy

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


def test_a_qp_set_up_during_an_outage_completes_after_it():
    """Found by the property-based scenario tests: a message posted while its NIC's link is
    down (routing already told) must still get a QP (base RTT from the cabling) and complete
    once the link is back."""
    env = simpy.Environment()
    net = Network(env, build_topology("star", hosts=2), seed=1)
    FaultInjector(net, [LinkDown(link=("nic0.p0", "leaf0"), at=0.0, until=20e-6)])
    rdma = RdmaNetwork(net, NicConfig(cc="dcqcn", selector="ecmp"), seed=1)
    from podsim.fabric.kernel import call_at

    msgs = []
    call_at(env, 1e-6, lambda _: msgs.append(rdma.post(0, 1, 64 * 1024)))
    checker = Checker(net, endpoints=[RdmaEndpoints(rdma)])
    run_checked(env, checker=checker, check_every=500)
    checker.check_all(final=True)
    assert net.paths("nic0.p0", "nic1.p0") and msgs[0].done
    assert net.static_path("nic0.p0", "nic1.p0") == ["nic0.p0", "leaf0", "nic1.p0"]
    assert msgs[0].done_s > 20e-6


def _duplicates_from_scratch(ep: RdmaEndpoints) -> list[str]:
    """RdmaEndpoints.duplicates recomputed over every message and completion (its readable
    twin: the method itself counts the posted bytes incrementally)."""
    out = [f"message {mid} completed {n} times" for mid, n in ep._done.items() if n > 1]
    posted: dict[int, int] = {}
    for m in ep.rdma.messages:
        posted[m.qp.id] = posted.get(m.qp.id, 0) + m.size
    for q in ep.rdma._qp_list:
        got = q.rx.rel.delivered_bytes
        if got > posted.get(q.id, 0):
            out.append(f"QP {q.id}: {got} B delivered in order of {posted.get(q.id, 0)} posted")
    return out


def test_duplicate_check_counts_posted_bytes_incrementally_and_agrees_with_a_recount():
    """Messages posted between two checks are counted once; a message completed twice and a QP
    that delivered more than was posted are reported as a recount reports them."""
    env = simpy.Environment()
    net = Network(env, build_topology("leaf-spine", hosts_per_leaf=2, leaves=2), seed=1)
    rdma = RdmaNetwork(net, NicConfig(), seed=1)
    ep = RdmaEndpoints(rdma)
    first = [rdma.post(0, 2, 64 << 10), rdma.post(1, 3, 32 << 10)]
    env.run(until=2e-6)
    assert ep.duplicates() == _duplicates_from_scratch(ep) == []
    rdma.post(0, 2, 16 << 10)  # after the first check, on an existing QP
    rdma.post(2, 0, 8 << 10)  # and on a new one
    env.run()
    assert ep.duplicates() == _duplicates_from_scratch(ep) == []
    assert ep._counted == len(rdma.messages) == 4
    ep._count(first[1])  # a second completion
    first[0].qp.rx.rel.delivered_bytes += 1  # one byte more than was posted
    want = _duplicates_from_scratch(ep)
    assert ep.duplicates() == want and len(want) == 2
