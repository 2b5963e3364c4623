"""Swift (Kumar et al., SIGCOMM 2020): delay-target AIMD on a congestion window.

Per ACK with an RTT sample (docs/physics.md defaults: additive increase 1, beta 0.8, max decrease
factor 0.5, base target 20 us):

    target = base_target + hops x hop_scale + flow_scaling(cwnd)
    delay < target:  cwnd += ai x acked / cwnd    (cwnd >= 1 packet; else cwnd += ai x acked)
    delay >= target: cwnd *= max(1 - beta (delay - target) / delay, 1 - max_mdf),
                     at most once per RTT (since the last decrease)

cwnd is in packets (MTUs) and may fall below 1: the NIC then paces one packet per RTT / cwnd
(``rate_bps``), as the paper does. A retransmission timeout cuts by ``1 - max_mdf`` (at most once
per RTT); ``retx_reset_threshold`` consecutive timeouts reset cwnd to its minimum; a NACK (fast
retransmit) cuts like a timeout. Hop scaling uses ``ev.hops``, else the INT record count, else
the flow's ``hops``. The per-hop scale (1 us) is an [E]; flow scaling (the paper's
``alpha/sqrt(cwnd) + beta`` term, bounded by ``fs_range_s``) is off unless ``fs_range_s > 0``.
cwnd starts at one BDP and is capped at line rate x (base RTT + base target), the window that
fills the pipe and holds the target queue [D].
"""

from __future__ import annotations

import math

from podsim.nic.congestion._check import in_range, positive
from podsim.nic.congestion.api import CCEvent, CongestionControl, FlowCC
from podsim.nic.congestion.registry import CC_ALGORITHMS

__all__ = ["Swift"]


class _SwiftState:
    __slots__ = ("cwnd", "last_decrease", "last_rtt", "max_cwnd", "retx")

    def __init__(self, cwnd: float, max_cwnd: float, rtt: float) -> None:
        self.cwnd = cwnd
        self.max_cwnd = max_cwnd
        self.last_decrease = -math.inf
        self.last_rtt = rtt
        self.retx = 0


@CC_ALGORITHMS.register(
    "swift", "Swift: delay-target AIMD window (ai 1, beta 0.8, max mdf 0.5, target 20 us + hops)"
)
class Swift(CongestionControl):
    """Swift sender; needs RTT samples on ACKs."""

    name = "swift"
    requires_rtt = True

    def __init__(
        self,
        ai: float = 1.0,
        beta: float = 0.8,
        max_mdf: float = 0.5,
        base_target_s: float = 20e-6,
        hop_scale_s: float = 1e-6,
        fs_range_s: float = 0.0,
        fs_min_cwnd: float = 0.1,
        fs_max_cwnd: float = 100.0,
        min_cwnd: float = 0.001,
        retx_reset_threshold: int = 5,
    ) -> None:
        a = self.name
        positive(a, "ai", ai)
        in_range(a, "beta", beta, 0.0, 1.0)
        in_range(a, "max_mdf", max_mdf, 0.0, 1.0)
        positive(a, "base_target_s", base_target_s)
        in_range(a, "hop_scale_s", hop_scale_s, 0.0, 1.0)
        in_range(a, "fs_range_s", fs_range_s, 0.0, 1.0)
        positive(a, "fs_min_cwnd", fs_min_cwnd)
        positive(a, "fs_max_cwnd", fs_max_cwnd)
        if fs_max_cwnd <= fs_min_cwnd:
            raise ValueError(f"{a}: fs_max_cwnd={fs_max_cwnd!r} must exceed fs_min_cwnd")
        positive(a, "min_cwnd", min_cwnd)
        in_range(a, "retx_reset_threshold", retx_reset_threshold, 1, 1_000_000)
        self.ai = float(ai)
        self.beta = float(beta)
        self.max_mdf = float(max_mdf)
        self.base_target_s = float(base_target_s)
        self.hop_scale_s = float(hop_scale_s)
        self.fs_range_s = float(fs_range_s)
        self.fs_min_cwnd = float(fs_min_cwnd)
        self.fs_max_cwnd = float(fs_max_cwnd)
        self.min_cwnd = float(min_cwnd)
        self.retx_reset_threshold = int(retx_reset_threshold)
        # Flow scaling: fs_range at fs_min_cwnd, 0 at fs_max_cwnd (paper Sec. 3.1).
        inv = 1.0 / math.sqrt(fs_min_cwnd) - 1.0 / math.sqrt(fs_max_cwnd)
        self._fs_alpha = self.fs_range_s / inv
        self._fs_beta = -self._fs_alpha / math.sqrt(fs_max_cwnd)

    def init_flow(self, flow: FlowCC, now: float) -> None:
        mtu = flow.mtu
        cwnd = max(self.min_cwnd, flow.bdp_bytes / mtu)
        max_cwnd = max(cwnd, flow.line_rate_bps * (flow.base_rtt_s + self.base_target_s) / 8 / mtu)
        flow.priv = _SwiftState(cwnd, max_cwnd, flow.base_rtt_s)
        self._apply(flow, flow.priv)

    def target_delay(self, flow: FlowCC, hops: int | None = None) -> float:
        """The delay target for the flow's current cwnd and ``hops`` switch hops."""
        n = hops if hops is not None else (flow.hops or 0)
        t = self.base_target_s + n * self.hop_scale_s
        if self.fs_range_s > 0.0:
            c = min(max(flow.priv.cwnd, self.fs_min_cwnd), self.fs_max_cwnd)
            fs = self._fs_alpha / math.sqrt(c) + self._fs_beta
            t += min(max(fs, 0.0), self.fs_range_s)
        return t

    def on_ack(self, ev: CCEvent, flow: FlowCC) -> None:
        rtt = ev.rtt
        if rtt is None:
            return
        s: _SwiftState = flow.priv
        s.retx = 0
        s.last_rtt = rtt
        hops = ev.hops
        if hops is None and ev.int_records is not None:
            hops = len(ev.int_records)
        target = self.target_delay(flow, hops)
        if rtt < target:
            acked = ev.bytes / flow.mtu if ev.bytes > 0 else 1.0
            if s.cwnd >= 1.0:
                s.cwnd += self.ai * acked / s.cwnd
            else:
                s.cwnd += self.ai * acked
        elif ev.now - s.last_decrease >= rtt:
            factor = max(1.0 - self.beta * (rtt - target) / rtt, 1.0 - self.max_mdf)
            s.cwnd *= factor
            s.last_decrease = ev.now
        self._apply(flow, s)

    def on_nack(self, ev: CCEvent, flow: FlowCC) -> None:
        s: _SwiftState = flow.priv
        if ev.now - s.last_decrease >= s.last_rtt:
            s.cwnd *= 1.0 - self.max_mdf
            s.last_decrease = ev.now
            self._apply(flow, s)

    def on_timeout(self, ev: CCEvent, flow: FlowCC) -> None:
        s: _SwiftState = flow.priv
        s.retx += 1
        if s.retx >= self.retx_reset_threshold:
            s.cwnd = self.min_cwnd
            s.last_decrease = ev.now
        elif ev.now - s.last_decrease >= s.last_rtt:
            s.cwnd *= 1.0 - self.max_mdf
            s.last_decrease = ev.now
        self._apply(flow, s)

    def _apply(self, flow: FlowCC, s: _SwiftState) -> None:
        cwnd = min(max(s.cwnd, self.min_cwnd), s.max_cwnd)
        s.cwnd = cwnd
        flow.window_bytes = cwnd * flow.mtu
        # Below one packet the window cannot space packets: pace one MTU per RTT / cwnd.
        flow.rate_bps = cwnd * flow.mtu * 8.0 / s.last_rtt if cwnd < 1.0 else None

    def cwnd_packets(self, flow: FlowCC) -> float:
        """The flow's congestion window in packets."""
        return flow.priv.cwnd
