"""RCCC receiver credits: the receiver's line rate caps an incast and is shared fairly."""

from __future__ import annotations

import numpy as np
import pytest
from podsim.fabric.packet import ROCE_OVERHEAD
from podsim.nic.congestion import RCCC, CCEvent, ReceiverCredit, make_cc

LINE = 400e9
MTU = 4096
PAYLOAD_BPS = LINE / 8 * MTU / (MTU + ROCE_OVERHEAD)  # bytes/s of payload at line rate


def test_incast_of_16_is_capped_at_line_rate_and_shared_equally():
    rc = ReceiverCredit(LINE, MTU)
    n, want = 16, 1 << 20
    for i in range(n):
        rc.request(i, want, 0.0)
    got = np.zeros(n)
    t, dt = 0.0, rc.interval_s
    horizon = 100e-6
    while t < horizon:
        t += dt
        for fid, g in rc.grant(t):
            got[fid] += g
    # Aggregate credit = payload line rate x time (to within a byte per sender per grant).
    grants = round(horizon / dt)
    assert got.sum() == pytest.approx(PAYLOAD_BPS * t, abs=n * grants)
    assert got.sum() <= PAYLOAD_BPS * t
    assert got.max() - got.min() <= grants  # equal shares up to rounding
    assert rc.active == n


def test_water_filling_gives_small_requests_all_they_ask():
    rc = ReceiverCredit(LINE, MTU)
    rc.request("small", 1000, 0.0)
    rc.request("a", 10**9, 0.0)
    rc.request("b", 10**9, 0.0)
    dt = 1e-6
    g = dict(rc.grant(dt))
    budget = PAYLOAD_BPS * dt
    assert g["small"] == 1000
    assert g["a"] == g["b"] == int((budget - 1000) / 2)
    assert rc.outstanding("small") == 0 and rc.active == 2
    # As senders finish, the remaining one gets the whole rate.
    rc.cancel("b")
    g2 = dict(rc.grant(2 * dt))
    assert g2["a"] == pytest.approx(budget, abs=2)


def test_refresh_raises_the_outstanding_request_and_never_adds():
    rc = ReceiverCredit(LINE, MTU)
    rc.refresh("lost", 5000, 0.0)  # the first request never arrived
    assert rc.outstanding("lost") == 5000
    rc.request("seen", 8000, 0.0)
    rc.refresh("seen", 6000, 0.0)  # 2000 granted in flight: not asked for again
    assert rc.outstanding("seen") == 8000
    rc.refresh("seen", 9000, 0.0)  # a lost grant of 1000 is asked for again
    assert rc.outstanding("seen") == 9000
    with pytest.raises(ValueError, match="non-negative integer"):
        rc.refresh("x", -1, 0.0)


def test_no_banking_while_idle_and_bad_inputs():
    rc = ReceiverCredit(LINE, MTU)
    rc.request("x", 100, 0.0)
    assert rc.grant(1e-6) == [("x", 100)]
    assert rc.grant(1e-3) == []  # nobody waiting
    rc.request("y", 10**9, 1e-3)
    # Only the time since the request counts, not the idle millisecond before it.
    ((fid, g),) = rc.grant(1e-3 + 1e-6)
    assert fid == "y" and g == pytest.approx(PAYLOAD_BPS * 1e-6, abs=1)
    with pytest.raises(ValueError, match="non-negative integer"):
        rc.request("z", -5, 2e-3)
    with pytest.raises(ValueError, match="backwards"):
        rc.grant(0.0)


def test_sender_sends_only_with_credit():
    cc = make_cc("rccc")
    assert isinstance(cc, RCCC) and cc.requires_credit
    f = cc.new_flow("s", LINE, 5e-6, MTU)
    assert f.credit_bytes == 0
    assert not f.may_send(MTU, 0)
    cc.handle_credit(CCEvent(1e-6, bytes=3 * MTU), f)
    assert f.credit_bytes == 3 * MTU
    sent = 0
    while f.may_send(MTU, inflight_bytes=sent):
        cc.handle_tx(CCEvent(2e-6, bytes=MTU), f)
        sent += MTU
    assert sent == 3 * MTU and f.credit_bytes == 0
    assert f.rate_bps is None and f.window_bytes is None
    g = make_cc("rccc", {"initial_credit_bytes": 2 * MTU}).new_flow("t", LINE, 5e-6, MTU)
    assert g.may_send(MTU, 0)
