"""The SmartNIC schedules traffic classes: each class has its own QPs, the port's ready QPs
are picked by class (strict priority, DWRR), and a class paused by PFC is not sent."""

from __future__ import annotations

import pytest
import simpy
from podsim.fabric.classes import TrafficClass, TrafficClasses
from podsim.fabric.network import Network
from podsim.fabric.switch import SwitchConfig
from podsim.fabric.topology import star
from podsim.nic.nic import NicConfig, RdmaNetwork

SER = 8 * (4096 + 82) / 400e9
TWO = TrafficClasses((TrafficClass("bulk"), TrafficClass("urgent", priority=1)))


def probes(classes, *, bulk=True, cfg=None):
    """nic0..2 send 8 MiB each to nic3 (class 0); nic2 also sends five 64 KiB probes to nic3
    on another QP, in class 1 when there are classes. Returns the probes' completion times."""
    env = simpy.Environment()
    net = Network(env, star(hosts=4), cfg or SwitchConfig(), seed=1, classes=classes)
    rdma = RdmaNetwork(net, NicConfig(cc="dcqcn"), seed=1)
    if bulk:
        for s in (0, 1, 2):
            rdma.post(s, 3, 8 << 20)
    tc = 1 if classes is not None else 0
    ms = [rdma.post(2, 3, 64 << 10, at=50e-6 + i * 20e-6, qp=1, tc=tc) for i in range(5)]
    rdma.run()
    return [m.fct_s for m in ms], net, rdma


def test_high_class_completion_is_unaffected_by_saturating_bulk_through_the_nic():
    idle, _, _ = probes(TWO, bulk=False)
    prio, _, rdma = probes(TWO)
    shared, _, _ = probes(None)
    for a, b in zip(idle, prio, strict=True):
        # per hop at most one bulk frame in the way (NIC egress, switch egress)
        assert a <= b <= a + 2 * SER + 1e-12
    assert min(shared) > 5 * max(idle)  # DCQCN keeps the shared queue at tens of us
    mt = rdma.message_table()
    assert set(mt.loc[mt.bytes == 64 << 10, "tc"]) == {1}


def test_nic_does_not_send_a_paused_class():
    classes = TrafficClasses(
        (TrafficClass("bulk", pfc=True), TrafficClass("urgent", priority=1, pfc=True))
    )
    cfg = SwitchConfig(ecn=False, pfc=True, pfc_xoff_bytes=150_000, pfc_xon_bytes=75_000)
    env = simpy.Environment()
    net = Network(env, star(hosts=4), cfg, seed=1, classes=classes)
    rdma = RdmaNetwork(net, NicConfig(cc="dcqcn"), seed=1)
    for s in (0, 1, 2):
        rdma.post(s, 3, 4 << 20)
    urgent = rdma.post(2, 3, 64 << 10, at=30e-6, tc=1)
    rdma.run()
    assert net.dropped_packets() == 0
    t = net.class_table()
    assert t.loc[t["class"] == "bulk", "pauses_rcvd"].sum() > 0
    assert t.loc[t["class"] == "urgent", "pauses_rcvd"].sum() == 0
    assert urgent.fct_s < 20e-6


def test_unknown_class_is_refused():
    env = simpy.Environment()
    net = Network(env, star(hosts=2), classes=TWO)
    rdma = RdmaNetwork(net, NicConfig(), seed=1)
    with pytest.raises(ValueError, match="traffic class 2"):
        rdma.post(0, 1, 4096, tc=2)
