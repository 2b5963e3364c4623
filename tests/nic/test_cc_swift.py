"""Swift: delay target with hop scaling, at most one decrease per RTT, bounded by max_mdf."""

from __future__ import annotations

import pytest
from podsim.nic.congestion import CCEvent, Swift

LINE = 100e9
BASE = 5e-6
MTU = 4096


def _setup(cwnd=50.0, **params):
    cc = Swift(**params)
    f = cc.new_flow("f", LINE, BASE, MTU)
    f.priv.cwnd = cwnd
    return cc, f


def _ack(now, rtt, hops=0, nbytes=MTU):
    return CCEvent(now, bytes=nbytes, rtt=rtt, hops=hops)


def test_defaults_and_initial_window():
    cc = Swift()
    assert (cc.ai, cc.beta, cc.max_mdf, cc.base_target_s) == (1.0, 0.8, 0.5, 20e-6)
    f = cc.new_flow("f", LINE, BASE, MTU)
    assert cc.cwnd_packets(f) == pytest.approx(LINE * BASE / 8 / MTU)
    assert f.window_bytes == pytest.approx(LINE * BASE / 8)


def test_additive_increase_below_target():
    cc, f = _setup(cwnd=50.0)
    cc.handle_ack(_ack(1e-6, 10e-6, nbytes=2 * MTU), f)
    assert cc.cwnd_packets(f) == pytest.approx(50.0 + 1.0 * 2 / 50.0)
    assert f.window_bytes == pytest.approx(cc.cwnd_packets(f) * MTU)


def test_decrease_proportional_to_excess_delay_at_most_once_per_rtt():
    cc, f = _setup(cwnd=50.0)
    target = 20e-6
    rtt = 2 * target
    cc.handle_ack(_ack(100e-6, rtt), f)
    w1 = 50.0 * (1 - 0.8 * (rtt - target) / rtt)  # = 0.6 x 50
    assert cc.cwnd_packets(f) == pytest.approx(w1)
    # More high-delay ACKs within one RTT of the decrease: no further decrease.
    for dt in (1e-6, 10e-6, 39e-6):
        cc.handle_ack(_ack(100e-6 + dt, rtt), f)
        assert cc.cwnd_packets(f) == pytest.approx(w1)
    cc.handle_ack(_ack(100e-6 + rtt, rtt), f)
    assert cc.cwnd_packets(f) == pytest.approx(w1 * 0.6)


def test_decrease_never_exceeds_max_mdf():
    cc, f = _setup(cwnd=50.0)
    cc.handle_ack(_ack(1e-3, 10e-3), f)  # delay 500x target: 1 - beta*(~1) = 0.2 < 0.5
    assert cc.cwnd_packets(f) == pytest.approx(50.0 * (1 - 0.5))


def test_hop_scaling_moves_the_target():
    cc, f = _setup(cwnd=50.0)
    assert cc.target_delay(f, 3) == pytest.approx(20e-6 + 3 * 1e-6)
    cc.handle_ack(_ack(1e-4, 22.5e-6, hops=3), f)  # below 23 us: increase
    assert cc.cwnd_packets(f) > 50.0
    cc2, g = _setup(cwnd=50.0)
    cc2.handle_ack(_ack(1e-4, 22.5e-6, hops=2), g)  # above 22 us: decrease
    assert cc2.cwnd_packets(g) < 50.0
    # INT record count stands in for hops when the ACK does not say.
    cc3, h = _setup(cwnd=50.0)
    cc3.handle_ack(CCEvent(1e-4, bytes=MTU, rtt=22.5e-6, int_records=[(0, 0, 0.0, LINE)] * 3), h)
    assert cc3.cwnd_packets(h) > 50.0


def test_flow_scaling_raises_the_target_for_small_windows():
    cc, f = _setup(cwnd=0.1, fs_range_s=100e-6)
    assert cc.target_delay(f) == pytest.approx(20e-6 + 100e-6)
    f.priv.cwnd = 100.0
    assert cc.target_delay(f) == pytest.approx(20e-6)


def test_fractional_window_paces_and_timeouts_back_off():
    cc, f = _setup(cwnd=0.5)
    cc.handle_ack(_ack(1e-3, 10e-6, nbytes=0), f)  # below target, cwnd < 1: += ai per ACK
    assert cc.cwnd_packets(f) == pytest.approx(1.5)
    assert f.rate_bps is None
    f.priv.cwnd = 0.25
    cc.handle_ack(_ack(2e-3, 1.0e-3), f)  # far above target: halve once
    assert cc.cwnd_packets(f) == pytest.approx(0.125)
    assert f.rate_bps == pytest.approx(0.125 * MTU * 8 / 1.0e-3)
    cc2, g = _setup(cwnd=40.0)
    rtt = g.priv.last_rtt
    for k in range(4):
        cc2.handle_timeout(CCEvent(1.0 + k * 2 * rtt), g)
    assert cc2.cwnd_packets(g) == pytest.approx(40.0 * 0.5**4)
    cc2.handle_timeout(CCEvent(2.0), g)  # fifth consecutive timeout: reset to the minimum
    assert cc2.cwnd_packets(g) == pytest.approx(cc2.min_cwnd)
