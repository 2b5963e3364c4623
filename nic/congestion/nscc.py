"""UEC NSCC: the Ultra Ethernet network-signal window algorithm (delay x ECN quadrants).

Each ACK carries an RTT sample and the ECN echo; queueing delay = RTT - base RTT is compared with
the target (docs/physics.md: target queueing delay = base RTT by default):

==================  ===============================  ======================================
                    no ECN                           ECN
==================  ===============================  ======================================
delay >= target     fair increase (W += FI x a/W)    multiplicative decrease
delay <  target     proportional increase            keep W, ask for a path change
                    (W += PI x (t - d)/t x a/W)      (the congestion is on one path)
==================  ===============================  ======================================

(a = bytes newly acknowledged, so over one RTT W grows by FI or PI x (t - d)/t bytes:
additive per flow, hence fair.) The multiplicative decrease is
``W *= max(1 - gamma (D - t) / D, floor)`` with gamma = 0.8 and floor 0.5, at most once per RTT
(no cut until the RTT sampled at the previous cut has passed: its effect must show first) and
only while the smoothed delay D > t; D is an EWMA of the
per-ACK queueing delay with weight 0.0125 (the htsim UEC model), while the quadrant uses the raw
per-ACK delay. W stays within [1 MTU, 1.5 x BDP] (docs/physics.md) and starts at one BDP [E].
The increase magnitudes PI = 0.1 BDP and FI = 0.01 BDP per RTT are estimates [E] (the spec's
constants are not public); the shape - proportional to the gap below target, constant above - is
the spec's. A NACK asks for a path change; a timeout halves W (floor) and asks for a path change.
"""

from __future__ import annotations

import math

from podsim.nic.congestion._check import in_range, positive
from podsim.nic.congestion.api import CCEvent, CongestionControl, FlowCC
from podsim.nic.congestion.registry import CC_ALGORITHMS

__all__ = ["NSCC"]


class _NsccState:
    __slots__ = ("avg_delay", "fi", "next_decrease", "pi", "target", "w_max", "w_min")

    def __init__(self, target: float, fi: float, pi: float, w_min: float, w_max: float) -> None:
        self.target = target
        self.fi = fi
        self.pi = pi
        self.w_min = w_min
        self.w_max = w_max
        self.avg_delay = 0.0
        self.next_decrease = -math.inf


@CC_ALGORITHMS.register(
    "nscc", "UEC NSCC: delay x ECN window control, path change on ECN below target"
)
class NSCC(CongestionControl):
    """UEC NSCC sender; needs RTT samples and the ECN echo on ACKs."""

    name = "nscc"
    requires_rtt = True

    def __init__(
        self,
        gamma: float = 0.8,
        md_floor: float = 0.5,
        target_qdelay_s: float | None = None,
        max_window_bdp: float = 1.5,
        init_window_bdp: float = 1.0,
        min_window_mtus: float = 1.0,
        prop_increase_bdp: float = 0.1,
        fair_increase_bdp: float = 0.01,
        delay_ewma: float = 0.0125,
        path_change_on_ecn: bool = True,
    ) -> None:
        a = self.name
        in_range(a, "gamma", gamma, 0.0, 1.0)
        in_range(a, "md_floor", md_floor, 0.0, 1.0)
        positive(a, "target_qdelay_s", target_qdelay_s, allow_none=True)
        positive(a, "max_window_bdp", max_window_bdp)
        positive(a, "init_window_bdp", init_window_bdp)
        positive(a, "min_window_mtus", min_window_mtus)
        in_range(a, "prop_increase_bdp", prop_increase_bdp, 0.0, 100.0)
        in_range(a, "fair_increase_bdp", fair_increase_bdp, 0.0, 100.0)
        in_range(a, "delay_ewma", delay_ewma, 1e-9, 1.0)
        self.gamma = float(gamma)
        self.md_floor = float(md_floor)
        self.target_qdelay_s = target_qdelay_s
        self.max_window_bdp = float(max_window_bdp)
        self.init_window_bdp = float(init_window_bdp)
        self.min_window_mtus = float(min_window_mtus)
        self.prop_increase_bdp = float(prop_increase_bdp)
        self.fair_increase_bdp = float(fair_increase_bdp)
        self.delay_ewma = float(delay_ewma)
        self.path_change_on_ecn = bool(path_change_on_ecn)

    def init_flow(self, flow: FlowCC, now: float) -> None:
        bdp = flow.bdp_bytes
        target = self.target_qdelay_s if self.target_qdelay_s is not None else flow.base_rtt_s
        w_min = self.min_window_mtus * flow.mtu
        w_max = max(w_min, self.max_window_bdp * bdp)
        flow.priv = _NsccState(
            target, self.fair_increase_bdp * bdp, self.prop_increase_bdp * bdp, w_min, w_max
        )
        flow.window_bytes = min(max(self.init_window_bdp * bdp, w_min), w_max)
        flow.rate_bps = None

    def on_ack(self, ev: CCEvent, flow: FlowCC) -> None:
        rtt = ev.rtt
        if rtt is None:
            if ev.ecn and self.path_change_on_ecn:
                flow.request_path_change(ev.path)
            return
        s: _NsccState = flow.priv
        delay = rtt - flow.base_rtt_s
        if delay < 0.0:
            delay = 0.0
        s.avg_delay += self.delay_ewma * (delay - s.avg_delay)
        target = s.target
        w = flow.window_bytes
        acked = ev.bytes if ev.bytes > 0 else flow.mtu
        if not ev.ecn:
            if delay >= target:
                w += s.fi * acked / w
            else:
                w += s.pi * (target - delay) / target * acked / w
        elif delay >= target:
            d = s.avg_delay
            if d > target and ev.now >= s.next_decrease:
                w *= max(1.0 - self.gamma * (d - target) / d, self.md_floor)
                s.next_decrease = ev.now + rtt
        elif self.path_change_on_ecn:
            flow.request_path_change(ev.path)
        # min(max(w, w_min), w_max) without the two builtin calls (this runs on every ACK)
        lo = s.w_min
        if lo > w:
            w = lo
        hi = s.w_max
        flow.window_bytes = hi if hi < w else w

    def on_nack(self, ev: CCEvent, flow: FlowCC) -> None:
        flow.request_path_change(ev.path)

    def on_timeout(self, ev: CCEvent, flow: FlowCC) -> None:
        s: _NsccState = flow.priv
        flow.window_bytes = max(s.w_min, flow.window_bytes * self.md_floor)
        s.next_decrease = ev.now + flow.base_rtt_s
        flow.request_path_change(ev.path)

    def average_delay(self, flow: FlowCC) -> float:
        """The flow's smoothed queueing delay D."""
        return flow.priv.avg_delay
