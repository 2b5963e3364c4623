"""The CC API contract the NIC relies on: flows, send gating, requests and lazy timers."""

from __future__ import annotations

import math

import pytest
from podsim.nic.congestion import (
    REQ_PATH_CHANGE,
    REQ_PROBE,
    CCEvent,
    CongestionControl,
    FlowCC,
    cc_parameters,
    check_flow,
    make_cc,
)


class Periodic(CongestionControl):
    """Counts 10 us periods lazily: the pattern built-ins use for timers."""

    timer_interval_s = 10e-6

    def init_flow(self, flow, now):
        flow.priv = {"periods": 0, "due": now + 10e-6, "calls": 0}
        flow.timer_due_s = flow.priv["due"]

    def on_timer(self, now, flow):
        p = flow.priv
        k = int((now - p["due"]) // 10e-6) + 1
        p["periods"] += k
        p["calls"] += 1
        p["due"] += k * 10e-6
        flow.timer_due_s = p["due"]


def test_new_flow_validates_and_defaults_to_unlimited():
    cc = make_cc("none")
    f = cc.new_flow("a", 400e9, 5e-6, 4096, hops=3)
    assert (f.rate_bps, f.window_bytes, f.credit_bytes) == (None, None, None)
    assert f.send_rate_bps == 400e9
    assert f.bdp_bytes == pytest.approx(400e9 * 5e-6 / 8)
    assert f.timer_due_s == math.inf and f.hops == 3
    for bad in ({"line_rate_bps": 0}, {"base_rtt_s": -1.0}, {"mtu": 4096.5}):
        kw = {"line_rate_bps": 400e9, "base_rtt_s": 5e-6, "mtu": 4096} | bad
        with pytest.raises(ValueError, match=next(iter(bad))):
            cc.new_flow("b", **kw)


def test_may_send_window_credit_and_one_packet_rule():
    f = FlowCC("f", 100e9, 5e-6, 4096)
    assert f.may_send(4096, 10**9)
    f.window_bytes = 2000.0  # below one MTU
    assert f.may_send(4096, 0)  # nothing in flight: one packet may go
    assert not f.may_send(4096, 1)
    f.window_bytes = 3 * 4096
    assert f.may_send(4096, 2 * 4096) and not f.may_send(4096, 2 * 4096 + 1)
    f.credit_bytes = 4095
    assert not f.may_send(4096, 0)  # credit has no one-packet exception
    f.rate_bps = 1e12
    assert f.send_rate_bps == 100e9  # capped at line rate


def test_requests_are_bits_taken_once():
    f = FlowCC("f", 100e9, 5e-6, 4096)
    f.request_probe()
    f.request_path_change(5)
    assert f.take_requests() == REQ_PROBE | REQ_PATH_CHANGE
    assert f.avoid_path == 5 and f.take_requests() == 0


def test_lazy_timer_runs_once_per_event_and_counts_every_period():
    cc = Periodic()
    f = cc.new_flow("f", 100e9, 5e-6, 4096)
    cc.handle_ack(CCEvent(5e-6), f)
    assert f.priv["calls"] == 0
    cc.handle_ack(CCEvent(95e-6), f)  # deadlines at 10, 20, ..., 90 us elapsed
    assert (f.priv["periods"], f.priv["calls"]) == (9, 1)
    assert f.timer_due_s == pytest.approx(100e-6)
    cc.handle_tick(99e-6, f)
    assert f.priv["calls"] == 1
    cc.handle_tick(100e-6 + 1e-12, f)
    assert f.priv["periods"] == 10


def test_uses_tx_credit_accounting_and_check_flow():
    assert not make_cc("none").uses_tx
    assert make_cc("dcqcn").uses_tx
    cc = make_cc("none")
    f = cc.new_flow("f", 100e9, 5e-6, 4096)
    cc.handle_tx(CCEvent(0.0, bytes=100), f)  # not credit-limited: nothing to debit
    assert f.credit_bytes is None
    assert check_flow(f) is None
    f.timer_due_s = float("nan")
    assert "timer_due_s" in check_flow(f)
    assert cc_parameters(type(make_cc("hpcc")))["eta"] == 0.95
    assert "rtt=" in repr(CCEvent(1.0, rtt=2e-6))


@pytest.mark.parametrize("name", ["none", "dcqcn", "hpcc", "timely", "swift", "nscc", "rccc"])
def test_every_builtin_survives_a_mixed_event_stream_guarded(name):
    cc = make_cc(name, guard=True)
    f = cc.new_flow(1, 400e9, 5e-6, 4096, hops=3)
    recs = [(0, 0, 0.0, 400e9)] * 3
    for k in range(200):
        t = k * 1e-6
        ev = CCEvent(
            t,
            bytes=4096,
            psn=k,
            snd_nxt=k + 5,
            rtt=5e-6 + (k % 7) * 2e-6,
            ecn=k % 5 == 0,
            int_records=[(k * 100, k * 50_000, t, 400e9)] * 3 or recs,
            path=k % 4,
        )
        if f.may_send(4096, 0):
            cc.handle_tx(ev, f)
        cc.handle_ack(ev, f)
        if k % 50 == 0:
            cc.handle_cnp(ev, f)
            cc.handle_nack(ev, f)
            cc.handle_rtt(ev, f)
            cc.handle_credit(ev, f)
        if k == 150:
            cc.handle_timeout(ev, f)
    assert check_flow(f) is None
