"""DCQCN reaction point and CNP generator, driven by synthetic event sequences (the `paper`
profile's constants; the other profiles in test_dcqcn_profiles.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from podsim.nic.congestion import DCQCN, CCEvent, CnpGenerator, make_cc

LINE = 400e9
G = 1.0 / 256.0
TA = 50e-6  # alpha timer
TD = 50e-6  # rate-decrease interval
TI = 55e-6  # rate-increase timer


def _flow(cc, line=LINE):
    return cc.new_flow("qp", line, 5e-6, 4096)


def test_paper_profile_is_the_physics_md_profile():
    cc = DCQCN(profile="paper")
    assert cc.g == G
    assert (cc.alpha_interval_s, cc.decrease_interval_s, cc.increase_interval_s) == (TA, TD, TI)
    f = _flow(cc)
    # Additive 5 Mb/s x bw/25G, hyper 50 Mb/s x bw/25G.
    assert f.priv.rai == pytest.approx(5e6 * LINE / 25e9)
    assert f.priv.rhai == pytest.approx(50e6 * LINE / 25e9)
    assert f.rate_bps == LINE and f.window_bytes is None


def test_cnp_cuts_rate_by_alpha_over_two():
    cc = DCQCN(profile="paper")
    f = _flow(cc)
    cc.handle_cnp(CCEvent(1e-3), f)
    # First CNP: alpha = 1, RT = old RC, RC = RC (1 - 1/2).
    assert cc.alpha(f) == 1.0
    assert f.rate_bps == LINE / 2
    assert cc.target_rate(f) == LINE
    # No CNP for 3 alpha periods: alpha = (1-g)^3; the next cut uses it.
    t = 1e-3 + 3 * TA + 1e-6
    cc.handle_cnp(CCEvent(t), f)
    a3 = (1 - G) ** 3
    rc = LINE / 2
    # Timer stages raised RC before the cut: replay them from the rules (3 fast-recovery steps
    # at 55 us after the first cut, all before t).
    n_inc = int((t - 1e-3) // TI)
    for _ in range(n_inc):
        rc = 0.5 * (LINE + rc)
    assert cc.target_rate(f) == pytest.approx(rc, rel=1e-12)
    assert f.rate_bps == pytest.approx(rc * (1 - a3 / 2), rel=1e-12)


def test_rate_decrease_at_most_once_per_interval():
    cc = DCQCN(profile="paper", byte_counter_bytes=None)
    f = _flow(cc)
    cc.handle_cnp(CCEvent(0.0), f)
    assert f.rate_bps == LINE / 2
    for t in (10e-6, 20e-6, 30e-6):
        cc.handle_cnp(CCEvent(t), f)
        assert f.rate_bps == LINE / 2  # held: within 50 us of the last cut
    assert f.timer_due_s == pytest.approx(TD)
    # At 50 us the pending cut applies, after the alpha update of the same instant
    # (a CNP arrived in the period: alpha = (1-g) 1 + g = 1).
    cc.handle_tick(TD, f)
    assert cc.alpha(f) == pytest.approx(1.0)
    assert f.rate_bps == pytest.approx(LINE / 4)
    assert cc.target_rate(f) == pytest.approx(LINE / 2)


def test_alpha_decays_by_one_minus_g_per_period_without_cnp():
    cc = DCQCN(profile="paper")
    f = _flow(cc)
    cc.handle_cnp(CCEvent(0.0), f)
    for k in (1, 2, 7, 40, 400):
        cc.handle_tick(k * TA + 1e-9, f)
        assert cc.alpha(f, k * TA + 1e-9) == pytest.approx((1 - G) ** k, rel=1e-12)


def test_alpha_converges_to_one_under_persistent_marking():
    cc = DCQCN(profile="paper", initial_alpha=0.2)
    f = _flow(cc)
    cc.handle_cnp(CCEvent(0.0), f)  # alpha starts at 0.2
    a = 0.2
    for k in range(1, 2001):
        # one CNP inside every alpha period (what a marked queue and the 50 us NP limit give)
        cc.handle_cnp(CCEvent((k - 0.5) * TA), f)
        cc.handle_tick(k * TA + 1e-9, f)  # just past the deadline (float-safe)
        a = (1 - G) * a + G
        if k in (1, 10, 100):
            assert cc.alpha(f, k * TA + 1e-9) == pytest.approx(a, rel=1e-9)
    # Closed form 1 - (1-g)^k (1 - alpha0) -> 1.
    assert cc.alpha(f, 2000 * TA + 1e-9) == pytest.approx(1 - (1 - G) ** 2000 * 0.8, rel=1e-9)
    assert cc.alpha(f) > 0.999


def test_recovery_stages_climb_back_to_the_target_then_line_rate():
    cc = DCQCN(profile="paper", byte_counter_bytes=None)  # timer only: stages T<F, T=F, T>F
    f = _flow(cc)
    cc.handle_cnp(CCEvent(0.0), f)  # RC = L/2, RT = L
    # The first CNP only initialises alpha = 1; no CNP in [0, 50 us): alpha = 1 - g at 50 us,
    # which the second cut uses: RT = L/2, RC = L/2 (1 - (1-g)/2).
    cc.handle_cnp(CCEvent(TD), f)
    t0 = TD
    rt, rc = LINE / 2, LINE / 2 * (1 - (1 - G) / 2)
    assert (cc.target_rate(f), f.rate_bps) == pytest.approx((rt, rc))
    rai, rhai = 5e6 * LINE / 25e9, 50e6 * LINE / 25e9
    for stage in range(12):
        cc.handle_tick(t0 + (stage + 1) * TI + 1e-9, f)
        if stage < 5:  # fast recovery: halfway to the unchanged target
            pass
        elif stage == 5:  # additive increase
            rt += rai
        else:  # hyper increase
            rt += rhai
        rc = 0.5 * (rt + rc)
        assert cc.target_rate(f) == pytest.approx(rt, rel=1e-12), stage
        assert f.rate_bps == pytest.approx(rc, rel=1e-12), stage
    # After five fast-recovery steps RC is within 1/32 of the gap to the old target.
    # Long enough without CNPs, both climb back to line rate and the increase timer stops.
    cc.handle_tick(0.2, f)
    assert f.rate_bps == pytest.approx(LINE, rel=1e-9)
    assert cc.target_rate(f) == LINE
    assert f.priv.inc_due == math.inf


def test_byte_counter_drives_increases_and_both_counters_gate_hyper_increase():
    cc = DCQCN(profile="paper", byte_counter_bytes=1_000_000)
    f = _flow(cc)
    cc.handle_cnp(CCEvent(0.0), f)
    cc.handle_cnp(CCEvent(TD), f)  # alpha = 1 - g at 50 us, as above
    rt, rc = LINE / 2, LINE / 2 * (1 - (1 - G) / 2)
    rai = 5e6 * LINE / 25e9
    # 7 MB sent before any timer expiry: 7 byte-counter expiries, T = 0 -> max < F for 5,
    # then BC >= F but min(T, BC) = 0 <= F: additive.
    cc.handle_tx(CCEvent(TD + 1e-6, bytes=7_000_000), f)
    for bc in range(7):
        if bc >= 5:
            rt += rai
        rc = 0.5 * (rt + rc)
    assert cc.target_rate(f) == pytest.approx(rt, rel=1e-12)
    assert f.rate_bps == pytest.approx(rc, rel=1e-12)


def test_lazy_timers_match_eager_ticks():
    rng = np.random.default_rng(7)
    cnp_times = np.sort(rng.uniform(0, 5e-3, 60))
    tx_times = np.arange(0, 6e-3, 2e-6)
    results = []
    for eager in (False, True):
        cc = DCQCN(profile="paper", byte_counter_bytes=2_000_000)
        f = _flow(cc)
        events = [(t, "cnp") for t in cnp_times] + [(t, "tx") for t in tx_times]
        if eager:
            events += [(t, "tick") for t in np.arange(0, 6e-3, 1e-6)]
        events.sort(key=lambda e: e[0])
        for t, kind in events:
            if kind == "cnp":
                cc.handle_cnp(CCEvent(float(t)), f)
            elif kind == "tx":
                cc.handle_tx(CCEvent(float(t), bytes=int(f.rate_bps * 2e-6 / 8)), f)
            else:
                cc.handle_tick(float(t), f)
        cc.handle_tick(6e-3, f)
        results.append((f.rate_bps, cc.alpha(f), cc.target_rate(f)))
    assert results[0] == pytest.approx(results[1], rel=1e-9)


def test_min_rate_floor_and_parameter_errors():
    cc = DCQCN(profile="paper", min_rate_bps=1e9)
    f = _flow(cc)
    for k in range(40):
        cc.handle_cnp(CCEvent(k * TD), f)
    assert f.rate_bps == 1e9
    with pytest.raises(ValueError, match="g="):
        DCQCN(g=0.0)
    with pytest.raises(ValueError, match="increase_interval_s"):
        make_cc("dcqcn", {"increase_interval_s": -1})


def test_cnp_generator_one_per_interval_per_qp():
    gen = CnpGenerator()
    sent = {1: [], 2: []}
    # QP 1: every packet marked, one every 3 us for 300 us; QP 2: never marked.
    for k in range(100):
        t = k * 3e-6
        if gen.on_data(1, True, t):
            sent[1].append(t)
        assert not gen.on_data(2, False, t)
    # First-principles schedule: after a CNP at t, the next goes with the first marked packet
    # at least 50 us later.
    expected, last = [], -math.inf
    for k in range(100):
        t = k * 3e-6
        if t - last >= 50e-6:
            expected.append(t)
            last = t
    assert sent[1] == expected
    assert len(expected) == 6
    assert gen.cnps == 6
    # QPs are independent.
    assert gen.on_data(2, True, 10e-6)
