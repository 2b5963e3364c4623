"""InfiniBand credit-based link flow control (IBTA vol. 1 section 7.9): lossless without PFC, a
sender never overruns the buffer it was granted, and a link limited by its credits runs at
credits per credit round trip."""

from __future__ import annotations

import pytest
from podsim.fabric.packet import MAX_DATA_WIRE_BYTES
from podsim.fabric.switch import SwitchConfig
from podsim.fabric.topology import fat_tree, star

from tests.fabric.fabric_testutil import NS_PER_M, OVERHEAD, build

P = 4096
W = P + OVERHEAD
RATE = 400e9


def _incast(cfg: SwitchConfig, n: int = 16, pkts: int = 200, cable: str = "2m"):
    g = star(hosts=n + 1, cable=cable)
    env, net, hosts = build(g, cfg, seed=1, mtu=P)
    dst = net.endpoints[-1]
    msgs = [hosts[s].add_message(dst, pkts * P) for s in net.endpoints[:-1]]
    env.run()
    return net, hosts, msgs, dst


@pytest.mark.parametrize("credit", [MAX_DATA_WIRE_BYTES, 64_000, 256_000])
def test_credits_never_drop_and_never_overrun_the_granted_buffer(credit: int) -> None:
    """A 16:1 incast without congestion control into a switch whose buffer is far smaller than
    the senders' offered load (16 x 800 KiB into 1 MiB with the dynamic threshold on): with
    credit flow control nothing is dropped, every byte arrives, and no input ever holds more
    than the credits it granted; the same incast without credits drops."""
    small = dict(ecn=False, buffer_bytes=1 << 20)
    net, hosts, msgs, dst = _incast(SwitchConfig(**small, credit_buffer_bytes=credit))
    assert net.dropped_packets() == 0
    assert hosts[dst].delivered_bytes == sum(m.size for m in msgs)
    sw = next(iter(net.switches.values()))
    peaks = [ing.max_rx_bytes for ing in sw.ingresses.values()]
    assert max(peaks) <= credit
    assert sum(p.credit_stalls for p in net.ports) > 0  # the credits did bind
    lossy, *_ = _incast(SwitchConfig(**small))
    assert lossy.dropped_packets() > 0  # the control: the same buffer overflows without them


def test_incast_through_credits_keeps_the_bottleneck_at_line_rate() -> None:
    """Credits do not cost throughput where the buffer covers the credit round trip: the
    incast's bottleneck delivers at the line-rate goodput P/(P+82) x 400 Gb/s (within 0.5 %)."""
    _, hosts, msgs, dst = _incast(SwitchConfig(ecn=False, credit_buffer_bytes=256_000))
    t0 = min(m.t_first_rx for m in msgs)
    t1 = max(m.t_last_rx for m in msgs)
    goodput = (hosts[dst].delivered_bytes - P) * 8 / (t1 - t0)
    assert goodput == pytest.approx(P / W * RATE, rel=5e-3)


def test_a_link_short_of_credits_runs_at_credits_per_credit_round_trip() -> None:
    """One sender over a 400 m cable into a switch granting room for n = 4 frames: the sender
    keeps n frames in flight per credit round trip, so it delivers n frames per
    T = 2 x (propagation + FEC) + switch latency (credits return as a frame cuts through the
    idle switch, and travel back one propagation): closed form within 1 %, well below line
    rate."""
    cable_m = 400.0
    n = 4
    credit = MAX_DATA_WIRE_BYTES + (n - 1) * W  # exactly n frames of W before the stall
    cfg = SwitchConfig(ecn=False, credit_buffer_bytes=credit, latency_s=600e-9)
    g = star(hosts=2, cable=f"{cable_m:g}m")
    env, net, hosts = build(g, cfg, seed=1, mtu=P)
    a, b = net.endpoints
    m = hosts[a].add_message(b, 2000 * P)
    env.run()
    up = net.uplink(a)
    t_cycle = 2 * (cable_m * NS_PER_M + up.fec_s) + cfg.latency_s
    expected = n * P * 8 / t_cycle
    assert expected < 0.5 * RATE  # the credits bind
    rate = (m.size - P) * 8 / (m.t_last_rx - m.t_first_rx)
    assert rate == pytest.approx(expected, rel=0.01)
    assert net.dropped_packets() == 0


@pytest.mark.pure_python  # swaps in the readable hot paths
def test_fat_tree_permutation_with_credits_is_lossless_and_deterministic() -> None:
    """Credits on every switch input of a k=4 fat-tree, hashed single paths colliding: no drop
    anywhere, every input within its grant, and the same seed gives the same result, on the
    inlined hot paths and on their readable twins alike."""
    from podsim.fabric.hotpaths import readable_paths

    from tests.fabric.fabric_testutil import fingerprint

    def run():
        cfg = SwitchConfig(ecn=False, buffer_bytes=2 << 20, credit_buffer_bytes=128_000)
        env, net, hosts = build(fat_tree(k=4), cfg, seed=3, spray="none")
        eps = net.endpoints
        for i, s in enumerate(eps):
            hosts[s].add_message(eps[(i + 5) % len(eps)], 300 * P)
        env.run()
        return net, hosts

    net, hosts = run()
    assert net.dropped_packets() == 0
    assert sum(h.delivered_bytes for h in hosts.values()) == 16 * 300 * P
    for sw in net.switches.values():
        assert all(ing.max_rx_bytes <= 128_000 for ing in sw.ingresses.values())
    net2, hosts2 = run()
    assert fingerprint(net, hosts) == fingerprint(net2, hosts2)
    with readable_paths():
        net3, hosts3 = run()
    assert fingerprint(net, hosts) == fingerprint(net3, hosts3)
    assert sum(p.credit_stalls for p in net.ports) == sum(p.credit_stalls for p in net3.ports)


def test_credits_and_pfc_exclude_each_other_and_a_grant_holds_a_frame() -> None:
    with pytest.raises(ValueError, match="exclude each other"):
        SwitchConfig(pfc=True, credit_buffer_bytes=100_000)
    with pytest.raises(ValueError, match="credit_buffer_bytes"):
        SwitchConfig(credit_buffer_bytes=1000)
