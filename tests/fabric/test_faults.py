"""Fault injection on the packet fabric: link down/up, reconvergence delay, degradation,
switch and NIC-port failures, records, validation (bit errors: test_faults_ber.py)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from podsim.fabric.faults import (
    FAULT_KINDS,
    FaultError,
    FaultInjector,
    LinkBer,
    LinkDegrade,
    LinkDown,
    NicDown,
    SwitchDown,
    make_fault,
)
from podsim.fabric.host import conservation
from podsim.fabric.kernel import run
from podsim.fabric.topology import leaf_spine, star

from tests.fabric.fabric_testutil import NS_PER_M, OVERHEAD, build

MTU = 4096


def ecmp_setup(reconvergence_s: float, seed: int = 4):
    """nic0 (leaf0) sends 2 MiB to nic2 (leaf1) on one ECMP path (EV 0); the leaf0 uplink that
    path uses fails at 5 us."""
    env, net, hosts = build(leaf_spine(hosts_per_leaf=2, leaves=2), seed=seed, mtu=MTU)
    m = hosts["nic0.p0"].add_message("nic2.p0", 512 * MTU)
    path = net.route("nic0.p0", "nic2.p0", m.flow, 0)
    spine = path[2]
    inj = FaultInjector(
        net, [LinkDown(link=("leaf0", spine), at=5e-6)], reconvergence_s=reconvergence_s
    )
    return env, net, hosts, m, spine, inj


def test_link_down_loses_until_reconvergence_then_reroutes():
    """Static ECMP keeps hashing into the dead link until the reconvergence delay: every packet
    sent into it in that window is lost and counted; afterwards the flow goes around and its
    delivery resumes. The record says how many, and the stall (no arrival) lasts about the
    delay."""
    delay = 20e-6
    env, net, hosts, m, spine, inj = ecmp_setup(delay)
    t_check = []

    def probe(_):
        t_check.append(net.routing.next_hops("leaf0", net.endpoint_id("nic2.p0")))

    from podsim.fabric.kernel import call_at

    call_at(env, 5e-6 + delay / 2, probe)
    call_at(env, 5e-6 + delay * 1.01, probe)
    run(env)
    assert spine in t_check[0] and spine not in t_check[1]  # tables changed only after delay
    rec = inj.records[0]
    port = net.port("leaf0", spine)
    assert rec.lost_pkts == port.lost_pkts > 0 and port.drops == port.lost_pkts
    assert rec.lost_bytes == port.lost_bytes == net.dropped_bytes()
    assert rec.rerouted_s == pytest.approx(5e-6 + delay)
    # lost: what leaf0 forwarded into the link between the failure and the reroute, at most
    # the window at line rate (+1 frame in serialisation)
    ser = 8 * (MTU + OVERHEAD) / 400e9
    assert rec.lost_pkts <= delay / ser + 2
    assert rec.lost_pkts >= (delay / ser) * 0.9
    hit = rec.flows[m.flow]
    assert hit.lost_pkts == rec.lost_pkts
    assert delay * 0.95 <= hit.stall_s <= delay + 5e-6
    assert rec.recovery_s() == pytest.approx(hit.stall_end_s - 5e-6)
    # the host does not retransmit: the message misses exactly what was lost
    assert m.size - m.rx_bytes == rec.lost_bytes
    sent, delivered, dropped, inflight = conservation(net, hosts.values())
    assert sent == delivered + dropped + inflight and inflight == 0


def test_zero_reconvergence_reroutes_at_once():
    env, _net, _hosts, m, _spine, inj = ecmp_setup(0.0)
    run(env)
    rec = inj.records[0]
    assert rec.rerouted_s == 5e-6
    # only frames already inside leaf0's egress toward the dead link (at most one in
    # serialisation when the tables changed) can be lost
    assert rec.lost_pkts <= 1
    assert m.rx_bytes + rec.lost_bytes == m.size


def test_link_comes_back_up_and_routes_return_after_delay():
    env, net, _hosts = build(leaf_spine(hosts_per_leaf=2, leaves=2), mtu=MTU)
    inj = FaultInjector(
        net, [LinkDown(link=("leaf0", "spine0"), at=1e-6, until=4e-6)], reconvergence_s=2e-6
    )
    run(env)
    rec = inj.records[0]
    assert (rec.started_s, rec.ended_s) == (1e-6, 4e-6)
    assert rec.rerouted_s == pytest.approx(3e-6) and rec.restored_route_s == pytest.approx(6e-6)
    assert net.port("leaf0", "spine0").up and net.routing.link_is_up("leaf0", "spine0")
    dst = net.endpoint_id("nic2.p0")
    assert "spine0" in net.routing.next_hops("leaf0", dst)
    assert [a for _, _, a in inj.log] == ["start", "route-down", "end", "route-up"]


def test_overlapping_faults_on_one_link_are_counted():
    """Two faults on the same link: it comes back only when both have ended."""
    env, net, _ = build(leaf_spine(hosts_per_leaf=2, leaves=2), mtu=MTU)
    FaultInjector(
        net,
        [
            LinkDown(link=("leaf0", "spine0"), at=1e-6, until=5e-6),
            SwitchDown(node="spine0", at=2e-6, until=8e-6),
        ],
    )
    states = []
    from podsim.fabric.kernel import call_at

    for t in (3e-6, 6e-6, 9e-6):
        call_at(env, t, lambda _: states.append(net.port("leaf0", "spine0").up))
    run(env)
    assert states == [False, False, True]


def test_switch_down_takes_all_its_links():
    env, net, hosts = build(leaf_spine(hosts_per_leaf=2, leaves=2), mtu=MTU, spray="paths")
    m = hosts["nic0.p0"].add_message("nic2.p0", 64 * MTU)
    inj = FaultInjector(net, [SwitchDown(node="spine1", at=0.0)])
    run(env)
    assert sorted(inj.records[0].links) == [("leaf0", "spine1"), ("leaf1", "spine1")]
    assert all(not p.up for p in net.ports if "spine1" in (p.src_node, p.dst_node))
    # with routing told at once, everything goes through spine0 and arrives
    assert m.done and net.dropped_packets() == 0
    assert net.port("leaf0", "spine0").tx_pkts == 64


def test_nic_down_makes_the_destination_unreachable():
    env, net, hosts = build(leaf_spine(hosts_per_leaf=2, leaves=2), mtu=MTU)
    m = hosts["nic0.p0"].add_message("nic2.p0", 16 * MTU)
    inj = FaultInjector(net, [NicDown(node="nic2.p0", at=0.0)])
    run(env)
    assert inj.records[0].links == [("leaf1", "nic2.p0")]
    assert m.rx_bytes == 0 and net.paths("nic0.p0", "nic2.p0") == []
    # the cabling is still there: base RTTs are measured on it
    assert net.static_path("nic0.p0", "nic2.p0")[-2:] == ["leaf1", "nic2.p0"]
    assert net.base_rtt("nic0.p0", "nic2.p0", 4178) > 0
    # leaf0 has no route: everything is a no-route drop there, none reaches the dead link
    assert net.switches["leaf0"].noroute_drops == 16
    assert net.dropped_bytes() == m.size


def test_degraded_link_runs_at_the_lower_rate():
    """A PAM4 lane lost: 400G -> 300G. One flow over the degraded NIC link gets
    P/(P+82) x 300 Gb/s, and the rate comes back when the fault ends."""
    env, net, hosts = build(star(hosts=2), mtu=MTU)
    n = 200
    m = hosts["nic0.p0"].add_message("nic1.p0", n * MTU, start_s=1e-6)
    inj = FaultInjector(net, [LinkDegrade(link=("nic0.p0", "leaf0"), rate_bps=300e9, at=0.0)])
    run(env)
    ser300 = 8 * (MTU + OVERHEAD) / 300e9
    assert m.t_last_rx - m.t_first_rx == pytest.approx((n - 1) * ser300, rel=1e-9)
    assert net.port("nic0.p0", "leaf0").rate_bps == 300e9
    assert net.port("leaf0", "nic0.p0").rate_bps == 300e9
    assert inj.records[0].lost_pkts == 0


def test_degraded_link_into_a_switch_is_stored_and_forwarded():
    """A cut-through switch cannot forward a 300G ingress onto a 400G egress before the tail
    is in; one packet's latency is then the closed form with both serialisations."""
    env, net, hosts = build(star(hosts=2), mtu=MTU)
    FaultInjector(net, [LinkDegrade(link=("nic0.p0", "leaf0"), rate_bps=300e9, at=0.0, until=1e-3)])
    m = hosts["nic0.p0"].add_message("nic1.p0", MTU)
    run(env)
    w = MTU + OVERHEAD
    edge = net.graph.edges["nic0.p0", "leaf0"]
    from podsim.fabric.phy import get_phy

    fec = get_phy(edge["phy"]).fec_latency_s
    prop = edge["length_m"] * NS_PER_M
    sw = net.switches["leaf0"].config.latency_s
    expect = 8 * w / 300e9 + prop + fec + sw + 8 * w / 400e9 + prop + fec
    assert m.t_done == pytest.approx(expect, rel=1e-12)
    # restored at 1 ms: rate and cut-through come back
    p = net.port("nic0.p0", "leaf0")
    assert p.rate_bps == 400e9 and p.arrival_delay_s(w) == pytest.approx(prop + fec + sw)


def test_validation_names_the_bad_link_or_node():
    _, net, _ = build(leaf_spine(hosts_per_leaf=2, leaves=2))
    with pytest.raises(FaultError, match="no link 'leaf0'-'leaf1'"):
        FaultInjector(net, [LinkDown(link=("leaf0", "leaf1"), at=0.0)])
    with pytest.raises(FaultError, match=r"'nic0\.p0' is not a switch"):
        FaultInjector(net, [SwitchDown(node="nic0.p0", at=0.0)])
    with pytest.raises(FaultError, match="'spine0' is not a NIC port"):
        FaultInjector(net, [NicDown(node="spine0", at=0.0)])
    with pytest.raises(FaultError, match="until"):
        LinkDown(link=("leaf0", "spine0"), at=2e-6, until=1e-6)
    with pytest.raises(FaultError, match="at="):
        LinkDown(link=("leaf0", "spine0"), at=-1.0)
    with pytest.raises(FaultError, match="rate_bps"):
        LinkDegrade(link=("leaf0", "spine0"), rate_bps=0.0)
    with pytest.raises(FaultError, match="pre_fec_ber"):
        LinkBer(link=("leaf0", "spine0"), pre_fec_ber=0.7)
    with pytest.raises(FaultError, match="burst_len"):
        LinkBer(link=("leaf0", "spine0"), pre_fec_ber=1e-4, burst_len=0)
    with pytest.raises(FaultError, match="link="):
        LinkDown(link=("leaf0",), at=0.0)
    with pytest.raises(FaultError, match="reconvergence_s"):
        FaultInjector(net, reconvergence_s=-1.0)


def test_registry_builds_faults_by_name():
    assert set(FAULT_KINDS.names()) == {
        "link_down",
        "link_degrade",
        "ber",
        "switch_down",
        "nic_down",
    }
    f = make_fault("link_down", link=["leaf0", "spine0"], at=1e-6)
    assert (
        isinstance(f, LinkDown) and f.link == ("leaf0", "spine0") and f.target() == ("leaf0-spine0")
    )
    with pytest.raises(FaultError, match="link_down fault"):
        make_fault("link_down", node="x")
    with pytest.raises(ValueError, match="Did you mean 'link_down'"):
        make_fault("link_dwn", link=["a", "b"])


def test_tables_and_summary():
    env, net, _hosts, m, spine, inj = ecmp_setup(10e-6)
    run(env)
    t = inj.table()
    assert list(t.kind) == ["link_down"] and t.target[0] == f"leaf0-{spine}"
    assert t.lost_pkts[0] == inj.records[0].lost_pkts and t.flows_hit[0] == 1
    ft = inj.flow_table()
    assert list(ft.flow) == [m.flow] and ft.stall_s[0] == pytest.approx(t.max_stall_s[0])
    s = inj.summary()
    assert s["lost_bytes"] == net.dropped_bytes() and s["flows_hit"] == 1
    assert not math.isnan(t.recovery_s[0])


def test_same_seed_same_record():
    def once():
        env, _net, _h, _m, _s, inj = ecmp_setup(10e-6, seed=7)
        run(env)
        return inj.table(), inj.flow_table()

    (a, fa), (b, fb) = once(), once()
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(fa, fb)


def test_adaptive_routing_never_picks_a_dead_egress():
    """A dead uplink drains at once and would look the least loaded: adaptive routing skips
    it while another is up (the switch knows its own port state) and, with every candidate
    down, still returns one (lost like any other choice)."""
    from podsim.fabric.switch import SwitchConfig

    _env, net, _ = build(leaf_spine(hosts_per_leaf=2, leaves=2), SwitchConfig(adaptive=True))
    sw = net.switches["leaf0"]
    hops = sw._nh[net.endpoint_id("nic2.p0")]
    assert len(hops) == 2
    hops[1].qbytes = 10 * MTU  # the live one is busier
    hops[0].set_up(False)
    assert {sw.least_loaded(hops) for _ in range(50)} == {hops[1]}
    hops[1].set_up(False)
    assert sw.least_loaded(hops) in hops


def test_link_down_under_adaptive_routing_loses_only_what_was_on_the_dead_port():
    """Under per-packet adaptive routing a spine uplink that fails mid-flow costs at most what
    its egress held at that moment: the leaf sends the rest over the live uplink at once,
    long before the (20 us) reconvergence of the tables; nothing is drawn into the dead link."""
    from podsim.fabric.switch import SwitchConfig

    env, net, hosts = build(
        leaf_spine(hosts_per_leaf=2, leaves=2), SwitchConfig(adaptive=True), mtu=MTU
    )
    m = hosts["nic0.p0"].add_message("nic2.p0", 512 * MTU)
    inj = FaultInjector(net, [LinkDown(link=("leaf0", "spine0"), at=5e-6)], reconvergence_s=20e-6)
    run(env)
    rec = inj.records[0]
    assert rec.lost_pkts <= 2  # the frame in serialisation and at most one queued behind it
    assert m.rx_bytes + rec.lost_bytes == m.size
    assert net.port("leaf0", "spine1").tx_pkts >= 512 - rec.lost_pkts - 40
