"""Multipath transport on the packet fabric: spraying vs ECMP, go-back-N's retransmission storm,
and recovery from a link failure in the middle of a transfer."""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from podsim.fabric.kernel import call_at
from podsim.fabric.network import Network
from podsim.fabric.packet import ROCE_OVERHEAD
from podsim.fabric.topology import build_topology
from podsim.nic.nic import NicConfig, RdmaNetwork

MIB = 1 << 20


def permutation(selector: str, reliability: str = "sr", seed: int = 3, size: int = MIB):
    """16 hosts on a 2:1 oversubscribed leaf-spine (4 leaves x 4 hosts, 2 spines); host i sends
    ``size`` bytes to host i+4 (every flow crosses the spine layer)."""
    env = simpy.Environment()
    g = build_topology("leaf-spine", hosts_per_leaf=4, leaves=4, oversubscription=2)
    net = Network(env, g, seed=seed)
    rdma = RdmaNetwork(
        net, NicConfig(cc="dcqcn", selector=selector, reliability=reliability), seed=seed
    )
    for i in range(16):
        rdma.post(i, (i + 4) % 16, size)
    rdma.run()
    return net, rdma


@pytest.fixture(scope="module")
def perm_results():
    out = {}
    for sel, rel in (("ecmp", "sr"), ("spray", "sr"), ("reps", "sr"), ("spray", "gbn")):
        net, rdma = permutation(sel, rel)
        out[(sel, rel)] = (net, rdma.message_table(), rdma.qp_table())
    return out


def test_permutation_spraying_beats_ecmp(perm_results) -> None:
    """ECMP hashes 4 flows per leaf onto 2 uplinks, so some uplinks carry 3-4 flows; spraying
    and REPS spread every flow over both. Stated margin: spray/reps mean completion <= 0.9 x
    ECMP's and p99 <= 0.7 x ECMP's; and they come within 25 % of the ideal (each flow gets
    half of a 400G uplink: 200 Gb/s x 4096/4178 goodput)."""
    fct = {k: v[1].fct_s.to_numpy() for k, v in perm_results.items()}
    ideal = MIB * 8 / (200e9 * 4096 / (4096 + ROCE_OVERHEAD))
    e = fct[("ecmp", "sr")]
    for sel in ("spray", "reps"):
        f = fct[(sel, "sr")]
        assert f.mean() <= 0.9 * e.mean(), sel
        assert np.quantile(f, 0.99) <= 0.7 * np.quantile(e, 0.99), sel
        assert np.quantile(f, 0.99) <= 1.25 * ideal, sel
    assert e.min() >= 0.95 * ideal / 2  # nothing beats the 400G line rate


def test_go_back_n_under_spraying_storms_selective_repeat_does_not(perm_results) -> None:
    """With per-packet spraying, packets arrive out of order although none is lost. Go-back-N
    treats every reordering as a loss (drop + NAK + resend from the hole): more retransmitted
    packets than packets in the messages. Selective repeat buffers them: <= 1 % resent."""
    net_g, msgs_g, qps_g = perm_results[("spray", "gbn")]
    net_s, msgs_s, qps_s = perm_results[("spray", "sr")]
    pkts = int(msgs_g.packets.sum())
    assert net_g.dropped_packets() == 0 and net_s.dropped_packets() == 0
    assert int(qps_g.retx_pkts.sum()) > pkts
    assert int(qps_g.rx_ooo_drops.sum()) > pkts // 2
    assert int(qps_s.retx_pkts.sum()) <= 0.01 * pkts
    assert msgs_g.fct_s.mean() > 2 * msgs_s.fct_s.mean()
    # selective repeat held the early arrivals instead: the reorder buffer was used
    assert int(qps_s.rx_ooo_drops.sum()) == 0


def test_go_back_n_is_fine_on_one_path(perm_results) -> None:
    """Control: classic RoCE (go-back-N) on ECMP has no reordering, hence no retransmission."""
    _net, rdma = permutation("ecmp", "gbn")
    assert int(rdma.qp_table().retx_pkts.sum()) == 0
    np.testing.assert_allclose(
        rdma.message_table().fct_s, perm_results[("ecmp", "sr")][1].fct_s, rtol=1e-9
    )


# -------------------------------------------------------------------------- link failure

T_FAIL = 10e-6
SIZE = 2 * MIB


def failure_run(selector: str, fail: bool):
    """4 hosts on leaf0 each send 2 MiB to a host on leaf1 (4 spines, non-blocking). At 10 us
    the link from leaf0 to the spine that QP 0's ECMP hash uses dies; routing does not
    reconverge (the ECMP tables still list it), so packets hashed onto it are lost."""
    env = simpy.Environment()
    g = build_topology("leaf-spine", hosts_per_leaf=4, leaves=2)
    net = Network(env, g, seed=2)
    # the paper's DCQCN constants (the timings below were stated for them; with the nvidia
    # profile's faster recovery the surviving paths' queues run deeper)
    cfg = NicConfig(cc="dcqcn", cc_params={"profile": "paper"}, selector=selector)
    rdma = RdmaNetwork(net, cfg, seed=2)
    msgs = [rdma.post(i, 4 + i, SIZE) for i in range(4)]
    ecmp_paths, ack_paths = [], []
    for m in msgs:
        q = m.qp
        ev = q.sel.ev if selector == "ecmp" else 0
        a, b = q.nic.endpoints[0], q.dst_nic.endpoints[0]
        ecmp_paths.append(net.route(a, b, q.flow_key, ev))
        ack_paths.append(net.route(b, a, q.flow_key, ev))  # the ACKs hash the other way
    spine = ecmp_paths[0][2]
    if fail:
        call_at(env, T_FAIL, lambda _: net.set_link_state("leaf0", spine, False, reroute=False))
    rdma.run()
    # a QP is hit when its data or its ACKs cross the dead link (both directions die)
    dead = [spine in p or spine in k for p, k in zip(ecmp_paths, ack_paths, strict=True)]
    return net, rdma, dead


@pytest.mark.parametrize("selector", ["spray", "reps", "bitmap", "adaptive"])
def test_link_failure_multipath_finishes_with_bounded_extra_time(selector: str) -> None:
    """Every message completes; the extra time over the failure-free run is below 3.5 RTO
    (a lost tail packet or tail ACK costs a timeout, and the resend, sprayed again, may hit
    the dead link once more: 1 + 2 RTO with back-off) - for REPS, which recycles only EVs that
    came back, below 0.5 RTO. No byte is lost or counted twice."""
    _, base, _ = failure_run(selector, fail=False)
    net, rdma, _ = failure_run(selector, fail=True)
    assert net.dropped_packets() > 0
    rto = rdma.config.rto_min_s
    extra = rdma.message_table().done_s.max() - base.message_table().done_s.max()
    assert extra < (0.5 if selector == "reps" else 3.5) * rto
    q = rdma.qp_table()
    assert (q.rx_delivered_bytes == SIZE).all() and (q.acked_bytes == SIZE).all()
    assert (q.retx_pkts > 0).all()


def test_link_failure_ecmp_recovers_only_after_timeout_and_rehash() -> None:
    net, rdma, dead = failure_run("ecmp", fail=True)
    _, base, _ = failure_run("ecmp", fail=False)
    assert any(dead) and not all(dead)
    q, m, m0 = rdma.qp_table(), rdma.message_table(), base.message_table()
    rto = rdma.config.rto_min_s
    for i, on_dead in enumerate(dead):
        if on_dead:
            assert q.timeouts[i] >= 1
            assert m.done_s[i] >= T_FAIL + rto
            assert rdma.qp(i, 4 + i).sel.ev != rdma.qp(i, 4 + i).snd.ev_of(0)  # re-hashed
        else:
            assert q.timeouts[i] == 0
            assert m.done_s[i] == pytest.approx(m0.done_s[i], rel=0.05)
    assert (q.rx_delivered_bytes == SIZE).all() and (q.acked_bytes == SIZE).all()
    assert net.dropped_packets() > 0


@pytest.mark.slow
@pytest.mark.parametrize("cc", ["dcqcn", "nscc"])
def test_all_to_all_completes_near_the_line_rate_bound(cc: str) -> None:
    """32 hosts, non-blocking leaf-spine, all-to-all of 256 KiB WRITEs with spraying: every
    host must push 31 x 256 KiB through its 400G port, so no message can finish before
    31 x 256 KiB / goodput; all finish within 10 % of that bound, with no drop."""
    env = simpy.Environment()
    net = Network(env, build_topology("leaf-spine", hosts_per_leaf=8, leaves=4), seed=1)
    rdma = RdmaNetwork(net, NicConfig(cc=cc, selector="spray"), seed=1)
    size = 256 << 10
    for i in range(32):
        for j in range(32):
            if i != j:
                rdma.post(i, j, size)
    rdma.run()
    bound = 31 * size * 8 / (400e9 * 4096 / (4096 + ROCE_OVERHEAD))
    m = rdma.message_table()
    assert net.dropped_packets() == 0
    assert bound <= m.done_s.max() <= 1.1 * bound
