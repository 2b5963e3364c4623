"""Traffic classes in the packet fabric: strict priority, DWRR shares, per-class PFC and ECN,
the scheduler itself, and the invariants with per-class queues."""

from __future__ import annotations

import pytest
import simpy
from podsim.fabric.classes import MAX_CLASSES, ClassScheduler, TrafficClass, TrafficClasses
from podsim.fabric.host import make_hosts
from podsim.fabric.invariants import Checker, HostEndpoints
from podsim.fabric.network import Network
from podsim.fabric.switch import SwitchConfig
from podsim.fabric.topology import star

from tests.fabric.fabric_testutil import OVERHEAD

P = 4096
W = P + OVERHEAD
RATE = 400e9
SER = 8 * W / RATE  # one MTU frame on a 400G link

TWO = TrafficClasses((TrafficClass("bulk", priority=0), TrafficClass("urgent", priority=1)))


def incast_with_probe(classes, *, bulk_senders=3, probe_tc=1, cfg=None, checked=False):
    """``bulk_senders`` hosts saturate the last host with class-0 bulk; one more host sends a
    4-packet probe message to it at 20 us in class ``probe_tc``. Returns the probe's latency
    (start to last byte delivered) and the network."""
    env = simpy.Environment()
    cfg = cfg or SwitchConfig(ecn=False)
    net = Network(env, star(hosts=bulk_senders + 2), cfg, classes=classes)
    hosts = make_hosts(net, mtu=P)
    eps = net.endpoints
    for s in eps[:bulk_senders]:
        hosts[s].add_message(eps[-1], 400 * P, tc=0)
    probe = hosts[eps[bulk_senders]].add_message(eps[-1], 4 * P, start_s=20e-6, tc=probe_tc)
    checker = Checker(net, endpoints=[HostEndpoints(net, hosts.values())]) if checked else None
    if checker:
        for t in (10e-6, 20.5e-6, 30e-6):
            env.run(until=t)
            checker.check_all()
    env.run()
    if checker:
        checker.check_all(final=True)
    return probe.t_done - probe.start_s, net


def test_strict_priority_high_class_latency_is_unaffected_by_a_saturating_low_class():
    idle, _ = incast_with_probe(None, bulk_senders=0, probe_tc=0)
    shared, _ = incast_with_probe(None, probe_tc=0)
    prio, net = incast_with_probe(TWO)
    # two hops; at the bottleneck the probe waits at most for the bulk frame being serialised
    assert idle <= prio <= idle + 2 * SER
    # in one class it waits behind the bulk backlog (about 3 x 20 us of incast, 2/3 queued)
    assert shared > 20 * idle
    t = net.class_table().set_index(["port", "class"])
    assert t.loc[("leaf0->nic4.p0", "urgent"), "tx_pkts"] == 4
    assert t.loc[("leaf0->nic4.p0", "bulk"), "tx_pkts"] == 3 * 400


@pytest.mark.parametrize("weights", [(3.0, 1.0), (1.0, 1.0), (1.0, 4.0)])
def test_dwrr_shares_a_bottleneck_in_the_weight_ratio(weights):
    classes = TrafficClasses(
        (TrafficClass("a", weight=weights[0]), TrafficClass("b", weight=weights[1]))
    )
    env = simpy.Environment()
    net = Network(env, star(hosts=3), SwitchConfig(ecn=False), classes=classes)
    hosts = make_hosts(net, mtu=P)
    eps = net.endpoints
    a = hosts[eps[0]].add_message(eps[2], 4000 * P, tc=0)
    b = hosts[eps[1]].add_message(eps[2], 4000 * P, tc=1)
    env.run(until=100e-6)  # both backlogged all along (each could send 1,200 frames)
    assert a.rx_bytes / b.rx_bytes == pytest.approx(weights[0] / weights[1], rel=0.03)
    # the bottleneck stays busy: the classes share the whole link
    got = (a.rx_bytes + b.rx_bytes) * 8 / (100e-6 - 2e-6)
    assert got == pytest.approx(RATE * P / W, rel=0.03)


def test_per_class_pfc_pauses_only_the_congested_class():
    classes = TrafficClasses(
        (TrafficClass("bulk", pfc=True), TrafficClass("urgent", priority=1, pfc=True))
    )
    cfg = SwitchConfig(ecn=False, pfc=True, pfc_xoff_bytes=200_000, pfc_xon_bytes=100_000)
    prio, net = incast_with_probe(classes, cfg=cfg, checked=True)
    assert net.dropped_packets() == 0
    t = net.class_table()
    paused = t[t.pauses_rcvd > 0]
    assert set(paused["class"]) == {"bulk"}
    assert set(paused["port"]) == {"nic0.p0->leaf0", "nic1.p0->leaf0", "nic2.p0->leaf0"}
    assert (paused.paused_s > 0).all()
    assert t[t["class"] == "urgent"].pauses_sent.sum() == 0
    idle, _ = incast_with_probe(None, bulk_senders=0, probe_tc=0)
    assert prio <= idle + 2 * SER  # the urgent class kept flowing past the paused one


def test_lossy_class_drops_while_the_lossless_class_pauses():
    """A class without PFC is dropped by the dynamic threshold; the PFC class is not."""
    classes = TrafficClasses((TrafficClass("lossy"), TrafficClass("lossless", pfc=True)))
    cfg = SwitchConfig(
        ecn=False, pfc=True, buffer_bytes=600_000, pfc_xoff_bytes=100_000, pfc_xon_bytes=50_000
    )
    env = simpy.Environment()
    net = Network(env, star(hosts=5), cfg, classes=classes)
    hosts = make_hosts(net, mtu=P)
    eps = net.endpoints
    for s, tc in zip(eps[:4], (0, 0, 1, 1), strict=True):
        hosts[s].add_message(eps[4], 300 * P, tc=tc)
    env.run(until=200e-6)
    t = net.class_table().groupby("class")[["drops", "pauses_rcvd"]].sum()
    assert t.loc["lossy", "drops"] > 0 and t.loc["lossy", "pauses_rcvd"] == 0
    assert t.loc["lossless", "drops"] == 0 and t.loc["lossless", "pauses_rcvd"] > 0


def test_ecn_marks_by_the_class_queue_with_the_class_thresholds():
    """Step marking at 100 kB for class a only: its packets are marked once its own queue is
    past that; class b (marking threshold above any queue) is never marked."""
    classes = TrafficClasses(
        (
            TrafficClass("a", ecn_kmin_bytes=100_000, ecn_kmax_bytes=100_000),
            TrafficClass("b", ecn_kmin_bytes=50_000_000, ecn_kmax_bytes=50_000_000),
        )
    )
    env = simpy.Environment()
    net = Network(env, star(hosts=5), SwitchConfig(ecn_pmax=1.0), classes=classes)
    hosts = make_hosts(net, mtu=P)
    eps = net.endpoints
    for s, tc in zip(eps[:4], (0, 0, 1, 1), strict=True):
        hosts[s].add_message(eps[4], 200 * P, tc=tc)
    env.run()
    t = net.class_table().set_index(["port", "class"])
    bn = "leaf0->nic4.p0"
    assert t.loc[(bn, "a"), "ecn_marks"] > 0
    assert t.loc[(bn, "b"), "ecn_marks"] == 0
    assert t.loc[(bn, "b"), "max_qbytes"] > 100_000  # b's queue was deep, yet unmarked


def test_one_class_builds_the_plain_fabric():
    env = simpy.Environment()
    one = TrafficClasses((TrafficClass("only"),))
    net = Network(env, star(hosts=2), classes=one)
    assert net.classes is None
    assert type(net.ports[0]).__name__ in ("Port", "SwitchPort")
    assert net.class_table().empty


def test_scheduler_strict_priority_then_dwrr():
    cs = TrafficClasses(
        (
            TrafficClass("lo", priority=0),
            TrafficClass("hi", priority=2),
            TrafficClass("x", priority=1, weight=2),
            TrafficClass("y", priority=1, weight=1),
        )
    )
    s = ClassScheduler(cs)
    assert s.pick([W, W, W, W]) == 1  # the highest level wins
    assert s.pick([W, None, None, None]) == 0
    assert s.pick([None] * 4) is None
    picks = [s.pick([W, None, W, W]) for _ in range(300)]
    assert set(picks) == {2, 3}
    assert picks.count(2) / picks.count(3) == pytest.approx(2.0, rel=0.02)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: TrafficClass("a", weight=0), "weight"),
        (lambda: TrafficClass("a", weight=-1.0), "weight"),
        (lambda: TrafficClass("a", priority=8), "priority"),
        (lambda: TrafficClass("a", ecn_kmin_bytes=10, ecn_kmax_bytes=5), "ecn_kmax"),
        (lambda: TrafficClasses(()), "1 to 8"),
        (
            lambda: TrafficClasses(tuple(TrafficClass(f"c{i}") for i in range(MAX_CLASSES + 1))),
            "1 to 8",
        ),
        (lambda: TrafficClasses((TrafficClass("a"), TrafficClass("a"))), "twice"),
    ],
)
def test_bad_classes_are_refused(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_classes_with_infiniband_credits_are_refused():
    env = simpy.Environment()
    with pytest.raises(ValueError, match="virtual lanes"):
        Network(env, star(hosts=2), SwitchConfig(credit_buffer_bytes=200_000), classes=TWO)


def test_classed_fabric_with_one_class_in_use_is_the_plain_fabric():
    """Differential: every packet in class 0 of a two-class fabric gives bit-identical results
    to the plain single-queue fabric (the classed ports and switches are a faithful superset)."""
    from podsim.nic.nic import NicConfig, RdmaNetwork

    def run(classes):
        env = simpy.Environment()
        cfg = SwitchConfig(pfc=True, pfc_xoff_bytes=300_000, pfc_xon_bytes=150_000)
        net = Network(env, star(hosts=5), cfg, seed=3, classes=classes)
        rdma = RdmaNetwork(net, NicConfig(cc="dcqcn"), seed=3)
        for s in range(4):
            rdma.post(s, 4, 2 << 20)
            rdma.post(s, (s + 1) % 4, 1 << 20, at=5e-6)
        rdma.run()
        mt = rdma.message_table().drop(columns=["tc"])
        pt = net.port_table()
        return mt, pt

    lossless = TrafficClasses((TrafficClass("a", pfc=True), TrafficClass("b", pfc=True)))
    mt0, pt0 = run(None)
    mt1, pt1 = run(lossless)
    assert pt0["pauses_sent"].sum() > 0  # PFC and queues were exercised
    assert mt0.equals(mt1)
    assert pt0.equals(pt1)
