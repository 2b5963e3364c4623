"""UEC NSCC against the UEC reference simulator's rules (uet-htsim 40ccb05, htsim/sim/uec.cpp).

Each expected value below is the reference's formula worked by hand for the test's numbers; the
function it comes from is named next to it.
"""

from __future__ import annotations

import pytest
from podsim.nic.congestion import NSCC, REQ_PATH_CHANGE, CCEvent

LINE = 400e9
BASE = 4e-6
MSS = 4096
BDP = LINE * BASE / 8  # 200 000 B
REF_BDP = 100e9 * 12e-6 / 8  # 150 000 B: the reference network (initNsccParams)
A = BDP / REF_BDP  # scaling factor a
FI = 5 * MSS * A  # fair increase per RTT
PI = 4 * MSS * A * (BASE / 12e-6)  # proportional increase per RTT at zero delay
ETA = 0.15 * MSS * A


def _setup(**params):
    cc = NSCC(**params)
    f = cc.new_flow("f", LINE, BASE, MSS)
    return cc, f


def _ack(now, qdelay, ecn=False, path=3, nbytes=MSS, inflight=-1):
    return CCEvent(now, bytes=nbytes, rtt=BASE + qdelay, ecn=ecn, path=path, inflight=inflight)


def _batched(w, per_byte, n_pkts):
    """The reference's fulfill_adjustment: increases accumulate and W += acc / W once more than
    8 MSS were acknowledged (every 9th full packet); returns W after n_pkts ACKs."""
    acc = 0.0
    got = 0
    for _ in range(n_pkts):
        acc += per_byte * MSS
        got += MSS
        if got > 8 * MSS:
            w += acc / w
            acc = 0.0
            got = 0
    return w


def test_constants_scale_from_the_reference_network():
    cc, f = _setup()
    k = cc.constants(f)
    assert k["fi"] == pytest.approx(FI)
    assert k["fi"] / BDP == pytest.approx(5 * 4096 / 150_000)  # 0.137 BDP per RTT
    assert k["pi"] == pytest.approx(PI)
    assert k["pi"] < k["fi"]  # target 4 us < 15 us: PI below FI, as in the reference
    assert k["eta"] == pytest.approx(ETA)
    assert k["fi_scale"] == pytest.approx(0.25 * A)
    assert k["target"] == BASE and k["qa_threshold"] == 4 * BASE
    # the fair increase is the same fraction of the BDP at any rate and RTT
    f2 = cc.new_flow("g", 800e9, 10e-6, MSS)
    assert cc.constants(f2)["fi"] / f2.bdp_bytes == pytest.approx(k["fi"] / BDP)


def test_starts_at_max_window_and_stays_within_bounds():
    cc, f = _setup()
    assert f.window_bytes == pytest.approx(1.5 * BDP)  # initNscc: cwnd = maxwnd
    for k in range(1, 200):
        cc.handle_ack(_ack(k * 1e-8, 0.0, nbytes=10 * MSS), f)
    assert f.window_bytes == pytest.approx(1.5 * BDP)


def test_fair_increase_per_rtt_matches_the_reference():
    cc, f = _setup()
    w0 = f.window_bytes = 0.5 * BDP
    n = round(w0 / MSS)  # one window of ACKs, all within one RTT, delay above target
    for k in range(n):
        cc.handle_ack(_ack((k + 1) * BASE / (n + 1), 2 * BASE), f)
    assert f.window_bytes == pytest.approx(_batched(w0, FI, n), rel=1e-9)


def test_fair_increase_averages_fi_plus_eta_per_rtt_when_ack_clocked():
    cc, f = _setup()
    w0 = f.window_bytes = 0.2 * BDP
    rtts = 5
    acked = 0
    for r in range(rtts):  # each RTT acknowledges one window, above target, unmarked
        n = round(f.window_bytes / MSS)
        acked += n * MSS
        for k in range(n):
            cc.handle_ack(_ack((r + (k + 1) / (n + 1)) * BASE, 2 * BASE), f)
    # each acknowledged byte adds FI / W: d(W^2) = 2 FI dB, so over B bytes W^2 grows by 2 FI B
    # (plus eta once per RTT); FI is the increase per window of acknowledged bytes
    w1 = f.window_bytes - rtts * ETA
    assert (w1**2 - w0**2) / (2 * acked) == pytest.approx(FI, rel=0.05)
    assert (f.window_bytes - w0) / rtts / BDP > 0.1  # the old estimate was 0.01 BDP per RTT


def test_proportional_increase_per_rtt_matches_the_reference():
    cc, f = _setup()
    w0 = f.window_bytes = 0.5 * BDP
    d = 0.25 * BASE  # 1 us: below target and not below the 1 us fast-increase threshold
    n = round(w0 / MSS)
    for k in range(n):
        cc.handle_ack(_ack((k + 1) * BASE / (n + 1), d), f)
    per_byte = PI * (BASE - d) / BASE
    assert f.window_bytes == pytest.approx(_batched(w0, per_byte, n), rel=1e-9)


def test_fast_increase_after_a_window_of_near_zero_delay():
    cc, f = _setup()
    f.window_bytes = 0.3 * BDP
    t = 0.0
    steps = []
    for _ in range(40):
        t += 1e-8
        w = f.window_bytes
        cc.handle_ack(_ack(t, 0.0), f)
        steps.append(f.window_bytes - w)
    # until a whole window has been acknowledged only the batched PI applies; then every ACK adds
    # fi_scale x MSS at once (fast_increase)
    assert steps[0] == 0.0
    assert steps[-1] == pytest.approx(0.25 * A * MSS)
    t += 1e-8
    w = f.window_bytes
    cc.handle_ack(_ack(t, 2e-6), f)  # delay >= 1 us: fast increase stops
    assert f.window_bytes == w


def test_quick_adapt_sets_the_window_to_the_bytes_achieved():
    cc, f = _setup()
    period = BASE + BASE  # base RTT + target
    cc.handle_ack(_ack(1e-7, 0.0), f)  # opens the first measuring period (htsim: qa_endtime 0)
    for k in range(3):
        cc.handle_ack(_ack(2e-7 + k * 1e-7, 0.0), f)  # 3 MSS acknowledged in the period
    before = f.window_bytes
    cc.handle_ack(_ack(1e-7 + period + 1e-9, 4 * BASE + 1e-9, inflight=20 * MSS), f)
    assert f.window_bytes == 4 * MSS < before  # 3 + the triggering ACK's MSS
    # marked ACKs for the 20 MSS then in flight are ignored: no multiplicative decrease
    cc.handle_ack(_ack(1e-7 + period + 2e-6, 3 * BASE, ecn=True), f)
    assert f.window_bytes == 4 * MSS


def test_quick_adapt_needs_a_long_delay_and_a_low_rate():
    cc, f = _setup()
    cc.handle_ack(_ack(1e-7, 0.0), f)
    w = f.window_bytes
    cc.handle_ack(_ack(1e-7 + 2 * BASE + 1e-9, 4 * BASE), f)  # delay = threshold, not above it
    assert f.window_bytes >= w
    cc2, f2 = _setup()
    cc2.handle_ack(_ack(1e-7, 0.0), f2)
    big = int(1.5 * BDP / 8) + MSS  # at least W_max / 8 acknowledged in the period
    cc2.handle_ack(_ack(2e-7, 0.0, nbytes=big), f2)
    w2 = f2.window_bytes
    cc2.handle_ack(_ack(1e-7 + 2 * BASE + 1e-9, 5 * BASE), f2)
    assert f2.window_bytes >= w2 - 1e-6


def test_nack_cuts_the_nacked_bytes_and_arms_quick_adapt():
    cc, f = _setup()
    w = f.window_bytes
    cc.handle_nack(CCEvent(1e-7, bytes=MSS, path=5), f)  # opens the first QA period: no QA yet
    assert f.window_bytes == pytest.approx(w - MSS)  # the NACKed bytes are cut
    assert cc.average_delay(f) == pytest.approx(0.0125 * BASE)  # one network RTT entered
    assert f.take_requests() == REQ_PATH_CHANGE and f.avoid_path == 5
    # the NACK armed quick adapt: the first ACK after the period (base RTT + target) finds one
    # MSS acknowledged in it (< W_max / 8) and sets the window to that, at zero delay
    cc.handle_ack(_ack(2 * BASE + 2e-7, 0.0), f)
    assert f.window_bytes == MSS


def test_nack_after_a_starved_period_quick_adapts_instead_of_cutting():
    cc, f = _setup()
    cc.handle_ack(_ack(1e-7, 0.0, nbytes=2 * MSS), f)  # opens the period; counts nothing yet
    cc.handle_ack(_ack(2e-7, 0.0, nbytes=2 * MSS), f)  # 2 MSS achieved in the period
    cc.handle_nack(CCEvent(2 * BASE + 2e-7, bytes=MSS), f)
    assert f.window_bytes == 2 * MSS  # W = achieved, not W - MSS


def test_ecn_below_target_keeps_window_and_changes_path():
    cc, f = _setup()
    w = f.window_bytes
    cc.handle_ack(_ack(1e-6, 0.5 * BASE, ecn=True, path=7), f)
    assert f.window_bytes == w
    assert f.take_requests() == REQ_PATH_CHANGE
    assert f.avoid_path == 7
    assert f.take_requests() == 0


def test_multiplicative_decrease_once_per_base_rtt():
    cc, f = _setup(delay_ewma=1.0, quick_adapt=False)  # D = the sample, to isolate the rule
    w = f.window_bytes
    d = 2 * BASE
    t0 = 2 * BASE  # the reference allows no cut within one base RTT of the start
    cc.handle_ack(_ack(t0, d, ecn=True), f)
    # 0.6 w, then eta: more than one network RTT since the flow started (fulfill_adjustment)
    w1 = w * max(1 - 0.8 * (d - BASE) / d, 0.5) + ETA
    assert f.window_bytes == pytest.approx(w1, rel=1e-12)
    cc.handle_ack(_ack(t0 + 0.9 * BASE, d, ecn=True), f)  # within one base RTT: no cut
    assert f.window_bytes == pytest.approx(w1, rel=1e-12)
    cc.handle_ack(_ack(t0 + BASE + 1e-9, 100 * BASE, ecn=True), f)  # huge delay: floor 0.5
    assert f.window_bytes == pytest.approx(0.5 * w1 + ETA, rel=1e-12)


def test_unmarked_delay_above_target_enters_the_average_as_a_quarter_base_rtt():
    cc, f = _setup(quick_adapt=False)
    for k in range(20):
        cc.handle_ack(_ack((k + 1) * 1e-8, 3 * BASE), f)  # no ECN, above target
    avg = 0.25 * BASE * (1 - (1 - 0.0125) ** 20)
    assert cc.average_delay(f) == pytest.approx(avg, rel=1e-12)
    w = f.window_bytes
    cc.handle_ack(_ack(3e-6, 3 * BASE, ecn=True), f)  # marked, but D < target: no cut
    assert f.window_bytes == w
    assert cc.average_delay(f) == pytest.approx(avg + 0.0125 * (3 * BASE - avg), rel=1e-12)


def test_timeout_cuts_the_lost_bytes_and_moves_path():
    cc, f = _setup()
    w = f.window_bytes
    cc.handle_timeout(CCEvent(1e-3, bytes=5 * MSS, path=2), f)
    assert f.window_bytes == pytest.approx(w - 5 * MSS)
    assert f.take_requests() == REQ_PATH_CHANGE and f.avoid_path == 2
    cc.handle_timeout(CCEvent(2e-3, bytes=10**9), f)
    assert f.window_bytes == MSS  # never below one MTU


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="qa_gate"):
        NSCC(qa_gate=2.5)
    with pytest.raises(ValueError, match="fair_increase_mss"):
        NSCC(fair_increase_mss=-1)
