"""UEC NSCC: the four delay x ECN cases, the decrease limits and the window bounds."""

from __future__ import annotations

import pytest
from podsim.nic.congestion import NSCC, REQ_PATH_CHANGE, CCEvent

LINE = 400e9
BASE = 4e-6
MTU = 4096
BDP = LINE * BASE / 8


def _setup(**params):
    cc = NSCC(**params)
    f = cc.new_flow("f", LINE, BASE, MTU)
    return cc, f


def _ack(now, qdelay, ecn, path=3, nbytes=MTU):
    return CCEvent(now, bytes=nbytes, rtt=BASE + qdelay, ecn=ecn, path=path)


def test_defaults_target_and_window_bounds():
    cc, f = _setup()
    assert f.window_bytes == pytest.approx(BDP)
    assert f.priv.target == BASE  # target queueing delay = base RTT
    assert f.priv.w_max == pytest.approx(1.5 * BDP)
    f.window_bytes = 1.49 * BDP
    for k in range(200):
        cc.handle_ack(_ack(k * 1e-7, 0.0, False, nbytes=10 * MTU), f)
    assert f.window_bytes == pytest.approx(1.5 * BDP)  # capped at 1.5 x BDP


def test_no_ecn_below_target_proportional_increase():
    cc, f = _setup()
    w = f.window_bytes
    d = 0.25 * BASE
    cc.handle_ack(_ack(1e-6, d, False), f)
    expected = w + 0.1 * BDP * (BASE - d) / BASE * MTU / w
    assert f.window_bytes == pytest.approx(expected, rel=1e-12)
    assert f.take_requests() == 0


def test_no_ecn_above_target_fair_increase():
    cc, f = _setup()
    w = f.window_bytes
    cc.handle_ack(_ack(1e-6, 3 * BASE, False), f)
    assert f.window_bytes == pytest.approx(w + 0.01 * BDP * MTU / w, rel=1e-12)
    assert f.take_requests() == 0


def test_ecn_below_target_keeps_window_and_changes_path():
    cc, f = _setup()
    w = f.window_bytes
    cc.handle_ack(_ack(1e-6, 0.5 * BASE, True, path=7), f)
    assert f.window_bytes == w
    assert f.take_requests() == REQ_PATH_CHANGE
    assert f.avoid_path == 7
    assert f.take_requests() == 0  # cleared once taken


def test_ecn_above_target_multiplicative_decrease_once_per_rtt():
    cc, f = _setup(delay_ewma=1.0)  # smoothed delay = the sample, to isolate the rule
    w = f.window_bytes
    d = 2 * BASE
    cc.handle_ack(_ack(1e-3, d, True), f)
    w1 = w * max(1 - 0.8 * (d - BASE) / d, 0.5)  # = 0.6 w
    assert f.window_bytes == pytest.approx(w1, rel=1e-12)
    rtt = BASE + d
    cc.handle_ack(_ack(1e-3 + 0.5 * rtt, d, True), f)  # within one RTT: no second cut
    assert f.window_bytes == pytest.approx(w1, rel=1e-12)
    cc.handle_ack(_ack(1e-3 + rtt, 100 * BASE, True), f)  # next RTT, huge delay: floor 0.5
    assert f.window_bytes == pytest.approx(0.5 * w1, rel=1e-12)
    assert f.take_requests() == 0


def test_decrease_magnitude_uses_the_smoothed_delay():
    cc, f = _setup()
    w = f.window_bytes
    d = 3 * BASE
    # 20 unmarked high-delay ACKs warm the EWMA (each also adds a fair increase).
    for k in range(20):
        cc.handle_ack(_ack(k * 1e-8, d, False), f)
        w += 0.01 * BDP * MTU / w
    avg = d * (1 - (1 - 0.0125) ** 21)  # closed form of the EWMA from 0 after 21 samples
    assert avg < BASE  # still below target: a marked ACK does not cut yet
    cc.handle_ack(_ack(1e-6, d, True), f)
    assert f.window_bytes == pytest.approx(w, rel=1e-12)
    assert cc.average_delay(f) == pytest.approx(avg, rel=1e-12)


def test_timeout_halves_and_moves_path_and_window_floor():
    cc, f = _setup()
    w = f.window_bytes
    cc.handle_timeout(CCEvent(1e-3, path=2), f)
    assert f.window_bytes == pytest.approx(0.5 * w)
    assert f.take_requests() == REQ_PATH_CHANGE and f.avoid_path == 2
    for k in range(40):
        cc.handle_timeout(CCEvent(2e-3 + k * 1e-3), f)
    assert f.window_bytes == MTU  # never below one MTU
