"""Ports and links: goodput and latency against closed forms (docs/physics.md)."""

from __future__ import annotations

import itertools

import pytest
import simpy
from podsim.fabric.network import Network
from podsim.fabric.packet import ACK, DATA, Packet
from podsim.fabric.phy import get_phy
from podsim.fabric.switch import SwitchConfig
from podsim.fabric.topology import leaf_spine, star

from tests.fabric.fabric_testutil import NS_PER_M, OVERHEAD, build


def _edge(g, u, v):
    return g.edges[u, v]


@pytest.mark.parametrize("payload", [1024, 2048, 4096])
def test_idle_link_goodput(payload):
    """One flow on an idle 400G path: goodput = P / (P + 82) x 400 Gb/s (within 0.1 %)."""
    g = star(hosts=2)
    env, _net, hosts = build(g, mtu=payload)
    n = 200
    m = hosts["nic0.p0"].add_message("nic1.p0", n * payload)
    env.run()
    assert m.rx_bytes == n * payload
    rate = _edge(g, "nic0.p0", "leaf0")["rate_bps"]
    expected = payload / (payload + OVERHEAD) * rate  # bit/s
    measured = (n - 1) * payload * 8 / (m.t_last_rx - m.t_first_rx)
    assert measured == pytest.approx(expected, rel=1e-3)
    assert measured == pytest.approx(expected, rel=1e-9)  # in fact exact up to rounding
    # docs/physics.md's table: 1024 B -> 92.6 %, 2048 B -> 96.2 %, 4096 B -> 98.0 %
    assert round(100 * measured / rate, 1) == {1024: 92.6, 2048: 96.2, 4096: 98.0}[payload]


@pytest.mark.parametrize("store_and_forward", [False, True])
@pytest.mark.parametrize("payload", [64, 4096])
def test_single_packet_latency_star(store_and_forward, payload):
    """Serialisation + propagation + switch + FEC, exactly (cut-through: one serialisation;
    store-and-forward: one per hop)."""
    g = star(hosts=2, cable="7m")
    cfg = SwitchConfig(latency_s=750e-9, store_and_forward=store_and_forward)
    env, _net, hosts = build(g, cfg, mtu=payload)
    hosts["nic0.p0"].add_message("nic1.p0", payload)
    env.run()
    rx = hosts["nic1.p0"]
    links = [_edge(g, "nic0.p0", "leaf0"), _edge(g, "leaf0", "nic1.p0")]
    wire = max(payload + OVERHEAD, 84)
    ser = 8 * wire / links[0]["rate_bps"]
    prop = sum(e["length_m"] * NS_PER_M for e in links)
    fec = sum(get_phy(e["phy"]).fec_latency_s for e in links)
    n_ser = 2 if store_and_forward else 1
    expected = n_ser * ser + prop + 750e-9 + fec
    assert rx.rx_pkts == 1
    assert rx.lat_min == pytest.approx(expected, rel=1e-12, abs=0)
    assert rx.lat_min == rx.lat_max


@pytest.mark.parametrize("store_and_forward", [False, True])
def test_single_packet_latency_leaf_spine(store_and_forward):
    g = leaf_spine(hosts_per_leaf=2, leaves=2)
    cfg = SwitchConfig(store_and_forward=store_and_forward)
    env, net, hosts = build(g, cfg)
    src, dst = "nic0.p0", "nic3.p0"
    hosts[src].add_message(dst, 4096)
    env.run()
    path = net.route(src, dst, flow=hosts[src].messages[0].flow, ev=0)
    assert len(path) == 5  # nic, leaf, spine, leaf, nic
    links = [_edge(g, a, b) for a, b in itertools.pairwise(path)]
    ser = 8 * (4096 + OVERHEAD) / 400e9
    prop = sum(e["length_m"] * NS_PER_M for e in links)
    fec = sum(get_phy(e["phy"]).fec_latency_s for e in links)
    switches = 3 * cfg.latency_s
    expected = (4 if store_and_forward else 1) * ser + prop + switches + fec
    assert hosts[dst].lat_min == pytest.approx(expected, rel=1e-12, abs=0)
    # the network's own unloaded-latency helper agrees
    assert net.unloaded_latency(path, 4096 + OVERHEAD) == pytest.approx(expected, rel=1e-12)


def test_back_to_back_packets_are_one_serialisation_apart():
    g = star(hosts=2)
    env, _net, hosts = build(g, mtu=1000)
    m = hosts["nic0.p0"].add_message("nic1.p0", 3000)
    env.run()
    ser = 8 * 1082 / 400e9
    lat = hosts["nic1.p0"].lat_min
    assert m.t_first_rx == pytest.approx(lat, rel=1e-12)
    assert m.t_last_rx - m.t_first_rx == pytest.approx(2 * ser, rel=1e-12)


def _two_port_net():
    env = simpy.Environment()
    net = Network(env, star(hosts=2), SwitchConfig(), seed=0)
    got = []
    net.attach("nic1.p0", got.append)  # a bare callable works as receiver
    return env, net, got


def test_pull_source_and_kick():
    env, net, got = _two_port_net()
    port = net.uplink("nic0.p0")
    todo = [Packet(1000, 0, 1, psn=i) for i in range(3)]
    calls = []

    def source():
        calls.append(env.now)
        return todo.pop(0) if todo and env.now < 1e-6 else None

    port.source = source
    port.kick()  # t=0: starts the first packet, the port pulls again at each frame end
    env.run(until=1e-6)
    assert [p.psn for p in got] == [0, 1, 2]
    ser = 8 * 1082 / 400e9
    assert calls[:4] == pytest.approx([0.0, ser, 2 * ser, 3 * ser])
    assert port.idle
    todo.append(Packet(1000, 0, 1, psn=3))
    port.source = lambda: todo.pop(0) if todo else None
    port.kick()
    env.run()
    assert [p.psn for p in got] == [0, 1, 2, 3]


def test_control_packets_overtake_data_and_ignore_pause():
    env, net, got = _two_port_net()
    port = net.uplink("nic0.p0")
    for i in range(3):
        port.send(Packet(4000, 0, 1, psn=i))
    port.send(Packet(0, 0, 1, kind=ACK, psn=99))
    assert port.qbytes == 2 * 4082 + 84  # first data packet is on the wire, not queued
    port.pause()
    env.run(until=1e-6)
    # the ACK went next; DATA waits while paused
    assert [p.psn for p in got] == [0, 99]
    assert port.queued_packets == 2
    port.resume()
    env.run()
    assert [p.psn for p in got] == [0, 99, 1, 2]
    assert port.pauses_rcvd == 1 and port.paused_s == pytest.approx(1e-6 - 0.0, rel=0.2)
    assert all(p.kind in (DATA, ACK) for p in got)


def test_link_down_drops_and_counts():
    env, net, got = _two_port_net()
    port = net.uplink("nic0.p0")
    port.set_up(False)
    port.send(Packet(500, 0, 1))
    env.run()
    assert got == [] and port.drops == 1 and port.drop_bytes == 500
    port.set_up(True)
    port.send(Packet(500, 0, 1))
    env.run()
    assert len(got) == 1


def test_bad_port_parameters():
    from podsim.fabric.port import Port

    env = simpy.Environment()
    with pytest.raises(ValueError, match="rate_bps"):
        Port(env, "a", "b", 0.0)
    with pytest.raises(ValueError, match="prop_s"):
        Port(env, "a", "b", 1e9, prop_s=-1.0)


def test_unattached_endpoint_raises():
    env = simpy.Environment()
    net = Network(env, star(hosts=2), SwitchConfig())
    net.uplink("nic0.p0").send(Packet(100, 0, 1))
    with pytest.raises(RuntimeError, match=r"nic1\.p0"):
        env.run()


def test_source_may_push_or_kick_reentrantly():
    """A NIC source that calls send()/kick() on its own port while being pulled must not start
    two frames at once."""
    env, net, got = _two_port_net()
    port = net.uplink("nic0.p0")
    state = {"n": 0}

    def source():
        state["n"] += 1
        port.kick()  # re-entrant kick: must be a no-op
        if state["n"] == 1:
            port.send(Packet(1000, 0, 1, psn=100))  # push instead of returning
            return None
        if state["n"] <= 3:
            return Packet(1000, 0, 1, psn=state["n"])
        return None

    port.source = source
    port.kick()
    env.run()
    assert [p.psn for p in got] == [100, 2, 3]
    ser = 8 * 1082 / 400e9
    assert port.tx_pkts == 3 and port.busy_until == pytest.approx(3 * ser)


def test_mixed_rates_fall_back_to_store_and_forward():
    """200G NICs on a leaf with 400G uplinks: a cut-through leaf cannot start a 400G egress
    before the 200G ingress tail has arrived, so that hop stores and forwards."""
    g = leaf_spine(hosts_per_leaf=2, leaves=2, host_phy="200GbE", spines=1)
    env, net, hosts = build(g)
    hosts["nic0.p0"].add_message("nic3.p0", 4096)
    env.run()
    path = net.paths("nic0.p0", "nic3.p0")[0]
    links = [_edge(g, a, b) for a, b in itertools.pairwise(path)]
    wire = 4096 + OVERHEAD
    ser200 = 8 * wire / 200e9
    prop = sum(e["length_m"] * NS_PER_M for e in links)
    fec = sum(get_phy(e["phy"]).fec_latency_s for e in links)
    # nic->leaf0 at 200G is stored at leaf0 (slower than its 400G uplink); the spine and
    # leaf1 cut through; the last hop at 200G is serialised into the NIC
    expected = ser200 + ser200 + prop + 3 * SwitchConfig().latency_s + fec
    assert hosts["nic3.p0"].lat_min == pytest.approx(expected, rel=1e-12)
    # the uplink hop itself still cuts through: its delay does not include serialisation
    up = net.port("leaf0", "spine0")
    assert up.arrival_delay_s(wire) == pytest.approx(up.prop_s + up.fec_s + up.rx_latency_s)


def _in_flight_net(after_s: float):
    """Two NICs on one switch; nic0's uplink delays every frame by ``after_s`` after it starts
    (a long link), and nic1 records (psn, arrival time)."""
    env = simpy.Environment()
    net = Network(env, star(hosts=2), SwitchConfig(latency_s=0.0), seed=0)
    got: list[tuple[int, float]] = []
    net.attach("nic1.p0", lambda p: got.append((p.psn, env.now)))
    port = net.uplink("nic0.p0")
    port._after = after_s
    port.set_store_forward(False)
    return env, net, port, got


def _heap_packets_of(env: simpy.Environment, port) -> list[Packet]:
    return [e[3] for e in env._queue if isinstance(e[3], Packet) and e[3].link is port]


def test_a_wire_keeps_one_packet_on_the_event_heap_and_delivers_in_send_order():
    """Ten frames in flight on one link: the event heap holds only the first (the wire's FIFO
    holds all ten, podsim.fabric.port "The wire"), every one is counted once as in flight, and
    they arrive one serialisation apart, at start + the link's delay."""
    from podsim.fabric.invariants import Checker
    from podsim.fabric.port import packets_on_wires

    env, net, port, got = _in_flight_net(after_s=1e-6)
    for i in range(10):
        port.send(Packet(4000, 0, 1, psn=i))
    ser = 8 * 4082 / 400e9
    env.run(until=9.5 * ser)  # all ten have started, none has arrived
    assert got == []
    assert [p.psn for p in _heap_packets_of(env, port)] == [0]
    on_wire = [p for p in packets_on_wires(env, net.ports) if p.link is port]
    assert [p.psn for p in on_wire] == list(range(10))
    assert net.bytes_in_flight() == 10 * 4000
    Checker(net).check_all()  # the links check sees them on the wire, once each
    env.run()
    assert [psn for psn, _ in got] == list(range(10))
    first = got[0][1]
    for i, (_psn, t) in enumerate(got):
        assert t - first == pytest.approx(i * ser, rel=1e-9)


def test_a_frame_that_would_overtake_the_wire_goes_on_the_heap_itself():
    """When a link's delay shrinks while frames are in flight, a new frame that would arrive
    before the last one on the wire is scheduled on the event heap directly (not behind it on
    the FIFO), so it arrives at its own time, ahead of the older frames, and is still counted
    once in flight."""
    from podsim.fabric.invariants import Checker
    from podsim.fabric.port import packets_on_wires

    env, net, port, got = _in_flight_net(after_s=5e-6)
    for i in range(3):
        port.send(Packet(4000, 0, 1, psn=i))
    ser = 8 * 4082 / 400e9
    env.run(until=3.5 * ser)
    port._after = 1e-6  # the link got shorter (a test-only change of an internal delay)
    port.send(Packet(4000, 0, 1, psn=3))
    assert [p.psn for p in _heap_packets_of(env, port)] == [0, 3]
    assert sorted(p.psn for p in packets_on_wires(env, net.ports) if p.link is port) == [
        0,
        1,
        2,
        3,
    ]
    Checker(net).check_all()
    env.run()
    assert [psn for psn, _ in got] == [3, 0, 1, 2]
    # the same path after the link: packet 3 left 3.5 frames later over a 4 us shorter link
    assert got[0][1] - got[1][1] == pytest.approx(3.5 * ser - 4e-6, rel=1e-9)
