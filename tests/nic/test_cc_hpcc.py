"""HPCC window control from synthetic INT sequences (expected values from the paper's rules)."""

from __future__ import annotations

import pytest
from podsim.nic.congestion import HPCC, CCEvent, CongestionControlError, IntHop, make_cc

B = 100e9
T = 10e-6
BDP = B * T / 8
ETA = 0.95
W_AI = 5e-4 * BDP


def _ack(now, q, tx, ts, psn=0, snd_nxt=100, path=0, hops=1):
    rec = IntHop(int(q), int(tx), ts, B)
    return CCEvent(now, bytes=4096, psn=psn, snd_nxt=snd_nxt, int_records=[rec] * hops, path=path)


def _flow(cc):
    return cc.new_flow("f", B, T, 4096)


def test_initial_window_is_bdp_at_line_rate():
    cc = HPCC()
    f = _flow(cc)
    assert f.window_bytes == pytest.approx(BDP)
    assert f.rate_bps == B
    assert cc.requires_int


def test_queue_above_target_shrinks_window_by_u_over_eta():
    cc = HPCC()
    f = _flow(cc)
    q = 2 * BDP  # a standing queue of two BDPs at the bottleneck
    cc.handle_ack(_ack(0.0, q, 0, 0.0), f)  # first record on this path: just stored
    assert f.window_bytes == pytest.approx(BDP)
    # One RTT later the hop sent B*T bytes (link saturated) and the queue is still 2 BDP.
    cc.handle_ack(_ack(T, q, B * T / 8, T), f)
    u = min(q, q) * 8 / (B * T) + (B * T / 8) * 8 / T / B  # = 3
    assert u == pytest.approx(3.0)
    # tau = T, so the EWMA takes U = u; W = Wc / (U/eta) + W_AI.
    assert cc.utilisation(f) == pytest.approx(u)
    expected = BDP / (u / ETA) + W_AI
    assert f.window_bytes == pytest.approx(expected, rel=1e-12)
    assert f.rate_bps == pytest.approx(expected * 8 / T, rel=1e-12)
    assert cc.reference_window(f) == pytest.approx(expected, rel=1e-12)


def test_underload_additive_stages_then_multiplicative_increase():
    cc = HPCC()
    f = _flow(cc)
    cc.handle_ack(_ack(0.0, BDP, 0, 0.0), f)
    cc.handle_ack(_ack(T, BDP, B * T / 8, T, psn=0, snd_nxt=10), f)  # U = 2: shrink
    wc = cc.reference_window(f)
    u = cc.utilisation(f)
    tx = B * T / 8
    stage = 0
    for k in range(2, 10):
        # Link half loaded, no queue: u' = 0.5; tau = T each time, so U = 0.5.
        tx += 0.5 * B * T / 8
        cc.handle_ack(_ack(k * T, 0, tx, k * T, psn=10 * k, snd_nxt=10 * (k + 1)), f)
        u = 0.5
        if u >= ETA or stage >= 5:
            wc = wc / (u / ETA) + W_AI
            stage = 0
        else:
            wc = wc + W_AI
            stage += 1
        wc = min(wc, BDP)
        assert cc.reference_window(f) == pytest.approx(wc, rel=1e-12), k
        assert f.window_bytes == pytest.approx(wc, rel=1e-12), k
    assert stage == 2  # five additive steps, one multiplicative, two additive


def test_ewma_weight_is_tau_over_t_and_fast_reaction_keeps_wc():
    cc = HPCC()
    f = _flow(cc)
    cc.handle_ack(_ack(0.0, 0, 0, 0.0), f)
    cc.handle_ack(_ack(T, 0, B * T / 8, T, psn=0, snd_nxt=10), f)  # U = 1, Wc updated
    wc = cc.reference_window(f)
    # An ACK 2 us later for a packet sent before the last update (psn < 10): fast reaction.
    tau = 2e-6
    q = BDP / 2
    cc.handle_ack(_ack(T + tau, q, B * T / 8 + B * tau / 8, T + tau, psn=5, snd_nxt=12), f)
    u_new = min(q, 0) * 8 / (B * T) + 1.0  # min(qlen, previous qlen) = 0
    u = (1 - tau / T) * 1.0 + (tau / T) * u_new
    assert cc.utilisation(f) == pytest.approx(u, rel=1e-12)
    assert cc.reference_window(f) == wc  # Wc only moves once per RTT
    assert f.window_bytes == pytest.approx(min(BDP, wc / (u / ETA) + W_AI), rel=1e-12)


def test_int_records_are_matched_per_path_and_hop_count_is_bounded():
    cc = HPCC()
    f = _flow(cc)
    cc.handle_ack(_ack(0.0, 0, 0, 0.0, path=1), f)
    # A first record on another path must not be compared with path 1's record.
    cc.handle_ack(_ack(T, 5 * BDP, 10**9, T, path=2), f)
    assert f.window_bytes == pytest.approx(BDP)
    with pytest.raises(CongestionControlError, match=r"6 INT records.*max_hops=5"):
        cc.handle_ack(_ack(2 * T, 0, 0, 2 * T, hops=6), f)
    cc6 = make_cc("hpcc", {"max_hops": 6})
    cc6.handle_ack(_ack(2 * T, 0, 0, 2 * T, hops=6), cc6.new_flow("g", B, T, 4096))


def test_most_loaded_hop_sets_the_window():
    cc = HPCC()
    f = _flow(cc)
    idle = IntHop(0, 0, 0.0, 400e9)
    busy = IntHop(0, 0, 0.0, B)
    cc.handle_ack(CCEvent(0.0, int_records=[idle, busy], path=0, psn=0, snd_nxt=1), f)
    idle2 = IntHop(0, int(0.1 * 400e9 * T / 8), T, 400e9)  # 10 % loaded 400G hop
    busy2 = IntHop(int(BDP), int(B * T / 8), T, B)  # saturated 100G hop with a BDP queue
    cc.handle_ack(CCEvent(T, int_records=[idle2, busy2], path=0, psn=1, snd_nxt=2), f)
    assert cc.utilisation(f) == pytest.approx(0 + 1.0)  # min(qlen, prev qlen) = 0
    assert isinstance(cc, HPCC)
