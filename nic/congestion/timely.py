"""TIMELY (Mittal et al., SIGCOMM 2015): rate control from the RTT gradient.

Per RTT sample (ACK timestamp or probe), with the paper's defaults (docs/physics.md: alpha 0.875,
beta 0.8, T_low 50 us, T_high 500 us):

    rtt_diff = (1 - alpha) rtt_diff + alpha (rtt - prev_rtt)
    gradient = rtt_diff / min_rtt                       (min_rtt = the flow's base RTT)
    rtt < T_low:    rate += delta
    rtt > T_high:   rate *= 1 - beta (1 - T_high / rtt)
    gradient <= 0:  rate += N delta   (N = 5 after 5 consecutive non-positive gradients: HAI)
    else:           rate *= 1 - beta gradient

delta is the paper's 10 Mb/s on 10G NICs scaled to the line rate (an [E] scaling so a 400G NIC
recovers in the same number of steps). The rate stays in [min_rate_bps, line rate]. As in the
HPCC ns-3 TIMELY model, the rate is updated once per RTT: on the first sample for a packet sent
after the previous update (``ev.psn`` vs ``ev.snd_nxt``); samples in between are ignored. With
``snd_nxt`` unknown (-1) every sample updates, which the paper's per-completion-event update
approximates for 16-64 KB segments.
"""

from __future__ import annotations

from podsim.nic.congestion._check import in_range, positive
from podsim.nic.congestion.api import CCEvent, CongestionControl, FlowCC
from podsim.nic.congestion.registry import CC_ALGORITHMS

__all__ = ["Timely"]


class _TimelyState:
    __slots__ = ("delta", "last_update_psn", "neg_count", "prev_rtt", "rtt_diff")

    def __init__(self, delta: float) -> None:
        self.delta = delta
        self.prev_rtt: float | None = None
        self.rtt_diff = 0.0
        self.neg_count = 0
        self.last_update_psn = -1


@CC_ALGORITHMS.register(
    "timely", "TIMELY: RTT-gradient rate control (alpha 0.875, beta 0.8, 50/500 us thresholds)"
)
class Timely(CongestionControl):
    """TIMELY sender; needs RTT samples on ACKs (``ev.rtt``) or probes."""

    name = "timely"
    requires_rtt = True

    def __init__(
        self,
        alpha: float = 0.875,
        beta: float = 0.8,
        t_low_s: float = 50e-6,
        t_high_s: float = 500e-6,
        delta_bps: float | None = None,
        hai_threshold: int = 5,
        min_rtt_s: float | None = None,
        min_rate_bps: float = 100e6,
    ) -> None:
        a = self.name
        in_range(a, "alpha", alpha, 0.0, 1.0)
        in_range(a, "beta", beta, 0.0, 1.0)
        positive(a, "t_low_s", t_low_s)
        positive(a, "t_high_s", t_high_s)
        if t_high_s <= t_low_s:
            raise ValueError(f"{a}: t_high_s={t_high_s!r} must exceed t_low_s={t_low_s!r}")
        positive(a, "delta_bps", delta_bps, allow_none=True)
        in_range(a, "hai_threshold", hai_threshold, 1, 1_000_000)
        positive(a, "min_rtt_s", min_rtt_s, allow_none=True)
        positive(a, "min_rate_bps", min_rate_bps)
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.t_low_s = float(t_low_s)
        self.t_high_s = float(t_high_s)
        self.delta_bps = delta_bps
        self.hai_threshold = int(hai_threshold)
        self.min_rtt_s = min_rtt_s
        self.min_rate_bps = float(min_rate_bps)

    def init_flow(self, flow: FlowCC, now: float) -> None:
        delta = self.delta_bps if self.delta_bps is not None else 10e6 * flow.line_rate_bps / 10e9
        flow.priv = _TimelyState(delta)
        flow.rate_bps = flow.line_rate_bps

    def on_ack(self, ev: CCEvent, flow: FlowCC) -> None:
        if ev.rtt is not None:
            self._sample(ev, flow)

    def on_rtt(self, ev: CCEvent, flow: FlowCC) -> None:
        if ev.rtt is not None:
            self._sample(ev, flow)

    def _sample(self, ev: CCEvent, flow: FlowCC) -> None:
        s: _TimelyState = flow.priv
        if ev.snd_nxt >= 0:
            if ev.psn < s.last_update_psn:
                return
            s.last_update_psn = ev.snd_nxt
        rtt = ev.rtt
        prev = s.prev_rtt
        s.prev_rtt = rtt
        if prev is None:
            return
        s.rtt_diff = (1.0 - self.alpha) * s.rtt_diff + self.alpha * (rtt - prev)
        gradient = s.rtt_diff / (self.min_rtt_s or flow.base_rtt_s)
        rate = flow.rate_bps
        if rtt < self.t_low_s:
            rate += s.delta
        elif rtt > self.t_high_s:
            rate *= 1.0 - self.beta * (1.0 - self.t_high_s / rtt)
            s.neg_count = 0
        elif gradient <= 0.0:
            s.neg_count += 1
            rate += (5.0 if s.neg_count >= self.hai_threshold else 1.0) * s.delta
        else:
            rate *= 1.0 - self.beta * gradient
            s.neg_count = 0
        flow.rate_bps = min(flow.line_rate_bps, max(self.min_rate_bps, rate))
