"""HPCC (Li et al., SIGCOMM 2019): window control from in-band network telemetry.

Every switch egress on the path stamps an INT record (queue length, cumulative tx bytes,
timestamp, link rate; 8 B per hop, at most 5 hops - docs/physics.md) into the data packet; the ACK
echoes the records. Per ACK the sender estimates the normalised in-flight load of the most
loaded hop,

    u_j = min(qlen_j, qlen_j') / (B_j T) + txRate_j / B_j,   txRate_j = dtx_j / dts_j

(primed values from the previous ACK on the same path, T = base RTT), takes the maximum U' over
hops and smooths ``U = (1 - tau/T) U + (tau/T) U'`` with tau = that hop's dts (capped at T).
The window follows the paper's ComputeWind with eta = 0.95 and maxStage = 5:

    if U >= eta or incStage >= maxStage:  W = Wc / (U/eta) + W_AI   (multiplicative step)
    else:                                 W = Wc + W_AI             (additive step)

The reference window Wc (and incStage) is updated only once per RTT, when the ACK is for a packet
sent after the previous update (``ev.psn >= PSN at the last update``; needs ``ev.snd_nxt``);
other ACKs compute W from the same Wc ("fast reaction"). W is capped to [W_min, B x T] and the
flow is paced at R = W / T. W_AI defaults to the ns-3 setting of 50 Mb/s at 100 Gb/s scaled to the
line rate, i.e. W_AI = 5e-4 x B x T, which is the paper's W_init (1 - eta) / N with N = 100.
INT records are matched per path (``ev.path``) so per-packet spraying compares like with like.
W is computed in the INT's units (wire bytes) and used as the payload window: the header share
(2-8 % at 1-4 KiB MTUs) is the approximation.
"""

from __future__ import annotations

from podsim.fabric.units import fmt_time
from podsim.nic.congestion._check import in_range, positive
from podsim.nic.congestion.api import CCEvent, CongestionControl, CongestionControlError, FlowCC
from podsim.nic.congestion.registry import CC_ALGORITHMS

__all__ = ["HPCC"]


class _HpccState:
    __slots__ = ("inc_stage", "last_update_psn", "prev", "u", "w_ai", "w_max", "w_min", "wc")

    def __init__(self, wc: float, w_ai: float, w_min: float, w_max: float) -> None:
        self.wc = wc
        self.inc_stage = 0
        self.u = 1.0
        self.last_update_psn = -1
        self.prev: dict = {}
        self.w_ai = w_ai
        self.w_min = w_min
        self.w_max = w_max


@CC_ALGORITHMS.register(
    "hpcc", "HPCC: INT-based window control (eta=0.95, maxStage=5, W = Wc/(U/eta) + W_AI)"
)
class HPCC(CongestionControl):
    """HPCC sender; switches must stamp INT and ACKs echo it with ``psn``/``snd_nxt``."""

    name = "hpcc"
    requires_int = True

    def __init__(
        self,
        eta: float = 0.95,
        max_stage: int = 5,
        w_ai_bytes: float | None = None,
        ai_fraction: float = 5e-4,
        min_rate_bps: float = 100e6,
        max_hops: int = 5,
    ) -> None:
        a = self.name
        in_range(a, "eta", eta, 1e-3, 1.0)
        in_range(a, "max_stage", max_stage, 0, 1_000_000)
        positive(a, "w_ai_bytes", w_ai_bytes, allow_none=True)
        in_range(a, "ai_fraction", ai_fraction, 0.0, 1.0)
        positive(a, "min_rate_bps", min_rate_bps)
        in_range(a, "max_hops", max_hops, 1, 64)
        self.eta = float(eta)
        self.max_stage = int(max_stage)
        self.w_ai_bytes = w_ai_bytes
        self.ai_fraction = float(ai_fraction)
        self.min_rate_bps = float(min_rate_bps)
        self.max_hops = int(max_hops)

    def init_flow(self, flow: FlowCC, now: float) -> None:
        bdp = flow.bdp_bytes
        w_ai = self.w_ai_bytes if self.w_ai_bytes is not None else self.ai_fraction * bdp
        w_min = self.min_rate_bps * flow.base_rtt_s / 8.0
        flow.priv = _HpccState(bdp, w_ai, w_min, bdp)
        flow.window_bytes = bdp
        flow.rate_bps = flow.line_rate_bps

    def on_ack(self, ev: CCEvent, flow: FlowCC) -> None:
        recs = ev.int_records
        if not recs:
            return
        s: _HpccState = flow.priv
        if len(recs) > self.max_hops:
            raise CongestionControlError(
                f"congestion control 'hpcc': ACK for flow {flow.flow_id!r} at "
                f"t={fmt_time(ev.now)} carries {len(recs)} INT records, more than "
                f"max_hops={self.max_hops} (HPCC's INT header holds at most 5 hops; raise "
                "max_hops to model a larger header)"
            )
        prev = s.prev.get(ev.path)
        s.prev[ev.path] = tuple(recs)
        if prev is None or len(prev) != len(recs):
            return
        t_base = flow.base_rtt_s
        u_max = 0.0
        tau = 0.0
        for (q, tx, ts, rate), (oq, otx, ots, _) in zip(recs, prev, strict=True):
            dts = ts - ots
            if dts <= 0.0:
                continue
            u = ((q if q < oq else oq) * 8.0 / t_base + (tx - otx) * 8.0 / dts) / rate
            if u > u_max:
                u_max = u
                tau = dts
        if tau <= 0.0:
            return  # no hop advanced its clock: nothing new measured
        if tau > t_base:
            tau = t_base
        s.u = (1.0 - tau / t_base) * s.u + (tau / t_base) * u_max
        update = ev.snd_nxt < 0 or ev.psn >= s.last_update_psn
        w = self._window(s, update)
        if update:
            s.last_update_psn = ev.snd_nxt
        flow.window_bytes = w
        flow.rate_bps = w * 8.0 / t_base

    def _window(self, s: _HpccState, update: bool) -> float:
        eta = self.eta
        u = s.u
        if u >= eta or s.inc_stage >= self.max_stage:
            w = s.wc * eta / u + s.w_ai if u > 0.0 else s.w_max
            stage = 0
        else:
            w = s.wc + s.w_ai
            stage = s.inc_stage + 1
        w = min(max(w, s.w_min), s.w_max)
        if update:
            s.wc = w
            s.inc_stage = stage
        return w

    def utilisation(self, flow: FlowCC) -> float:
        """The flow's smoothed U estimate (for tests and traces)."""
        return flow.priv.u

    def reference_window(self, flow: FlowCC) -> float:
        """The flow's reference window Wc."""
        return flow.priv.wc
