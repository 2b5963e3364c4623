"""TIMELY's rate rules from synthetic RTT sequences."""

from __future__ import annotations

import pytest
from podsim.nic.congestion import CCEvent, Timely

LINE = 100e9
BASE = 10e-6
ALPHA, BETA = 0.875, 0.8
DELTA = 10e6 * LINE / 10e9


def _setup(rate=50e9):
    cc = Timely()
    f = cc.new_flow("f", LINE, BASE, 4096)
    f.rate_bps = rate
    return cc, f


def _rtt(cc, f, now, rtt, psn=-1, snd_nxt=-1):
    cc.handle_ack(CCEvent(now, bytes=4096, rtt=rtt, psn=psn, snd_nxt=snd_nxt), f)


def test_first_sample_only_primes_then_low_rtt_adds_delta():
    cc, f = _setup()
    _rtt(cc, f, 1e-6, 20e-6)
    assert f.rate_bps == 50e9
    _rtt(cc, f, 2e-6, 30e-6)  # rtt < T_low = 50 us: additive increase whatever the gradient
    assert f.rate_bps == pytest.approx(50e9 + DELTA)


def test_rtt_above_t_high_cuts_by_the_excess():
    cc, f = _setup()
    _rtt(cc, f, 1e-6, 400e-6)
    _rtt(cc, f, 2e-6, 800e-6)
    assert f.rate_bps == pytest.approx(50e9 * (1 - BETA * (1 - 500e-6 / 800e-6)))


def test_positive_gradient_cuts_by_beta_times_normalised_gradient():
    cc, f = _setup()
    _rtt(cc, f, 1e-6, 100e-6)
    _rtt(cc, f, 2e-6, 102e-6)
    diff = ALPHA * 2e-6  # EWMA from 0
    grad = diff / BASE
    r1 = 50e9 * (1 - BETA * grad)
    assert f.rate_bps == pytest.approx(r1)
    _rtt(cc, f, 3e-6, 103e-6)
    diff = (1 - ALPHA) * diff + ALPHA * 1e-6
    assert f.rate_bps == pytest.approx(r1 * (1 - BETA * diff / BASE))


def test_negative_gradient_additive_then_hyper_increase_after_five():
    cc, f = _setup()
    rate = 50e9
    rtt = 300e-6
    _rtt(cc, f, 0.0, rtt)
    for k in range(1, 8):
        rtt -= 1e-6
        _rtt(cc, f, k * 1e-6, rtt)
        rate += (5 if k >= 5 else 1) * DELTA
        assert f.rate_bps == pytest.approx(rate), k


def test_once_per_rtt_with_psn_and_rate_bounds():
    cc, f = _setup()
    _rtt(cc, f, 0.0, 100e-6, psn=0, snd_nxt=10)
    _rtt(cc, f, 1e-6, 200e-6, psn=3, snd_nxt=11)  # sent before the last update: ignored
    assert f.rate_bps == 50e9
    _rtt(cc, f, 2e-6, 101e-6, psn=10, snd_nxt=20)
    assert f.rate_bps < 50e9
    cc2, g = _setup(rate=LINE)
    _rtt(cc2, g, 0.0, 20e-6)
    _rtt(cc2, g, 1e-6, 20e-6)
    assert g.rate_bps == LINE  # capped at line rate
    cc3, h = _setup(rate=200e6)
    _rtt(cc3, h, 0.0, 100e-6)
    _rtt(cc3, h, 1e-6, 200e-6)  # gradient 8.75: factor negative -> floor
    assert h.rate_bps == cc3.min_rate_bps
    with pytest.raises(ValueError, match="t_high_s"):
        Timely(t_low_s=1e-3, t_high_s=1e-4)
