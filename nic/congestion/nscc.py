"""UEC NSCC: the Ultra Ethernet network-signal window algorithm, as the UEC reference simulator.

Source: the UEC consortium's reference simulator, github.com/ultraethernet/uet-htsim at commit
40ccb0526bb6297eeb22ab33f9934fb35278dbaf (2025-08-13, after "Fixed issue with NSCC not matching
specs", #129), file ``htsim/sim/uec.cpp`` (``[R: fn]`` below names the ``UecSrc`` member function a
rule or constant comes from). The model was read there and re-stated here; no code was copied.

Constants, derived per flow from the network as ``UecSrc::initNsccParams`` does::

    ref BDP  = 100 Gb/s x 12 us / 8 = 150 kB              (reference network)
    a        = network BDP / ref BDP                       (network BDP = line rate x network RTT)
    b        = target / 12 us
    FI       = 5 x MSS x a          bytes per RTT          fair increase
    PI       = 4 x MSS x a x b      bytes per RTT at zero delay (alpha = PI / target)
    eta      = 0.15 x MSS x a       bytes once per network RTT
    fi_scale = 0.25 x a             fast increase: W += fi_scale x acked bytes
    target   = network RTT          (0.75 x with packet trimming; podsim's switches do not trim)
    QA gate  = 2^3, QA threshold = 4 x target, gamma = 0.8, MD floor 0.5, delay EWMA 0.0125

At a 4 KiB MSS the fair increase is 5 x 4096 / 150 000 = 0.137 BDP per RTT at any rate and RTT, and
the proportional increase at zero delay 0.109 x target / 12 us BDP per RTT (below FI for targets
under 15 us). "Network RTT" is htsim's unloaded RTT across the topology's diameter
(``main_uec.cpp`` ``calculate_rtt``); podsim uses the flow's own base RTT unless ``network_rtt_s``
is given (the same for flows that cross the diameter, e.g. a fat-tree permutation through the core).

Per ACK (``updateCwndOnAck_NSCC``, ``processAck``, ``update_delay``, ``update_base_rtt``):

1. Count the newly acknowledged bytes (``achieved``, ``received``). The base RTT is the minimum RTT
   seen (it starts at the flow's unloaded RTT; BDP and W_max = 1.5 BDP follow it). The delay is
   RTT - base RTT (the smoothed delay D when the ACK carries no RTT). D is an EWMA (0.0125) of the
   delay, except that an unmarked ACK with delay above target enters as base RTT / 4 (a long delay
   without ECN is not this flow's congestion).
2. Quick adapt (``quick_adapt``): once per base RTT + target, if a NACK arrived, or the delay
   exceeds 4 x target, and fewer than W_max / 8 bytes were acknowledged in that period, the window
   becomes the bytes acknowledged (at least one MTU); for the bytes then in flight, ECN-marked ACKs
   are ignored (they report the queue QA just removed).
3. The delay x ECN quadrant:

   ==================  ===============================  ======================================
                       no ECN                           ECN
   ==================  ===============================  ======================================
   delay >= target     fair increase: FI x acked        multiplicative decrease (below)
   delay <  target     fast increase, or proportional   none (REPS moves paths; podsim also
                       increase: PI x (t - d)/t x acked asks the selector, path_change_on_ecn)
   ==================  ===============================  ======================================

   Fair and proportional increases accumulate; every 8 MTUs acknowledged (or one network RTT)
   ``fulfill_adjustment`` adds accumulated / W to W, so over one window W grows by FI or
   PI x (t - d)/t bytes (additive, hence fair), plus eta once per network RTT. Fast increase:
   after a whole window was acknowledged with delay < 1 us, every further such ACK adds
   fi_scale x acked at once (and skips PI). Multiplicative decrease: ``W *= max(1 - gamma (D - t)
   / D, 0.5)`` when D > t, at most once per base RTT.
4. W is kept in [1 MTU, W_max]; it starts at W_max (``initNscc`` with no ``-cwnd``).

A NACK (``updateCwndOnNack_NSCC``) enters one network RTT of delay into D, arms quick adapt and,
unless quick adapt fires (or ignores it), cuts W by the NACKed bytes. A timeout
(``rtxTimerExpired`` -> ``mark_packet_for_retransmission``) cuts W by each timed-out packet's bytes;
podsim's RTO declares all of the flight lost at once, so W drops by those bytes together. Both ask
the NIC for a path change (htsim feeds NACK and timeout to its path selector).

Windows count payload bytes; htsim counts 64 B headers too (a 1.6 % difference at a 4 KiB MSS).
"""

from __future__ import annotations

import math

from podsim.nic.congestion._check import in_range, positive
from podsim.nic.congestion.api import CCEvent, CongestionControl, FlowCC
from podsim.nic.congestion.registry import CC_ALGORITHMS

__all__ = ["NSCC"]

#: Reference network the constants are scaled from: 100 Gb/s and a 12 us RTT
#: [R: initNsccParams, _reference_network_linkspeed / _reference_network_rtt].
REF_RATE_BPS = 100e9
REF_RTT_S = 12e-6


class _NsccState:
    __slots__ = (
        "achieved",
        "avg_delay",
        "base_rtt",
        "bytes_ignored",
        "bytes_to_ignore",
        "eta",
        "fast",
        "fi",
        "fi_count",
        "fi_scale",
        "inc_bytes",
        "last_adjust",
        "last_dec",
        "network_rtt",
        "pi",
        "qa_end",
        "qa_threshold",
        "received",
        "target",
        "trigger_qa",
        "w_max",
        "w_min",
    )


@CC_ALGORITHMS.register(
    "nscc", "UEC NSCC: delay x ECN window control, as the UEC reference simulator (uet-htsim)"
)
class NSCC(CongestionControl):
    """UEC NSCC sender; needs RTT samples and the ECN echo on ACKs.

    Every default is the reference simulator's (module docstring: uet-htsim 40ccb05,
    ``htsim/sim/uec.cpp``); each may be overridden.
    """

    name = "nscc"
    requires_rtt = True

    def __init__(
        self,
        gamma: float = 0.8,  # [R: initNsccParams, _gamma]
        md_floor: float = 0.5,  # [R: multiplicative_decrease, max(..., 0.5)]
        target_qdelay_s: float | None = None,  # [R: initNsccParams: network RTT, no trimming]
        network_rtt_s: float | None = None,  # [R: main_uec.cpp calculate_rtt]; None: flow's
        max_window_bdp: float = 1.5,  # [R: initNscc, setMaxWnd(1.5 * _bdp)]
        init_window_bdp: float = 1.5,  # [R: initNscc, cwnd 0 -> _maxwnd]
        min_window_mtus: float = 1.0,  # [R: initNsccParams, _min_cwnd = _mtu]
        fair_increase_mss: float = 5.0,  # [R: initNsccParams, _fi = 5 * _mss * a]
        prop_increase_mss: float = 4.0,  # [R: initNsccParams, _alpha = 4.0 * _mss * a * b / t]
        eta_mss: float = 0.15,  # [R: initNsccParams, _eta = 0.15 * _mss * a]
        fast_increase_scale: float = 0.25,  # [R: initNsccParams, _fi_scale = 0.25 * a]
        fast_increase_delay_s: float = 1e-6,  # [R: fast_increase, delay < timeFromUs(1)]
        quick_adapt: bool = True,  # [R: _disable_quick_adapt = false]
        qa_gate: int = 3,  # [R: initNsccParams, qa_gate < 0 -> 3: achieved < W_max >> 3]
        qa_threshold_target: float = 4.0,  # [R: initNsccParams, _qa_threshold = 4 * target]
        adjust_packets: float = 8.0,  # [R: initNsccParams, _adjust_bytes_threshold = 8 * _mtu]
        delay_ewma: float = 0.0125,  # [R: initNsccParams, _delay_alpha]
        reference_rate_bps: float = REF_RATE_BPS,
        reference_rtt_s: float = REF_RTT_S,
        path_change_on_ecn: bool = True,
    ) -> None:
        a = self.name
        in_range(a, "gamma", gamma, 0.0, 1.0)
        in_range(a, "md_floor", md_floor, 0.0, 1.0)
        positive(a, "target_qdelay_s", target_qdelay_s, allow_none=True)
        positive(a, "network_rtt_s", network_rtt_s, allow_none=True)
        positive(a, "max_window_bdp", max_window_bdp)
        positive(a, "init_window_bdp", init_window_bdp)
        positive(a, "min_window_mtus", min_window_mtus)
        in_range(a, "fair_increase_mss", fair_increase_mss, 0.0, 1e4)
        in_range(a, "prop_increase_mss", prop_increase_mss, 0.0, 1e4)
        in_range(a, "eta_mss", eta_mss, 0.0, 1e4)
        in_range(a, "fast_increase_scale", fast_increase_scale, 0.0, 100.0)
        in_range(a, "fast_increase_delay_s", fast_increase_delay_s, 0.0, 1.0)
        if isinstance(qa_gate, bool) or not isinstance(qa_gate, int) or not 0 <= qa_gate <= 30:
            raise ValueError(f"{a}: parameter qa_gate={qa_gate!r} must be an integer in [0, 30]")
        positive(a, "qa_threshold_target", qa_threshold_target)
        positive(a, "adjust_packets", adjust_packets)
        in_range(a, "delay_ewma", delay_ewma, 1e-9, 1.0)
        positive(a, "reference_rate_bps", reference_rate_bps)
        positive(a, "reference_rtt_s", reference_rtt_s)
        self.gamma = float(gamma)
        self.md_floor = float(md_floor)
        self.target_qdelay_s = target_qdelay_s
        self.network_rtt_s = network_rtt_s
        self.max_window_bdp = float(max_window_bdp)
        self.init_window_bdp = float(init_window_bdp)
        self.min_window_mtus = float(min_window_mtus)
        self.fair_increase_mss = float(fair_increase_mss)
        self.prop_increase_mss = float(prop_increase_mss)
        self.eta_mss = float(eta_mss)
        self.fast_increase_scale = float(fast_increase_scale)
        self.fast_increase_delay_s = float(fast_increase_delay_s)
        self.quick_adapt = bool(quick_adapt)
        self.qa_gate = int(qa_gate)
        self.qa_threshold_target = float(qa_threshold_target)
        self.adjust_packets = float(adjust_packets)
        self.delay_ewma = float(delay_ewma)
        self.reference_rate_bps = float(reference_rate_bps)
        self.reference_rtt_s = float(reference_rtt_s)
        self.path_change_on_ecn = bool(path_change_on_ecn)

    # ------------------------------------------------------------------ setup
    def init_flow(self, flow: FlowCC, now: float) -> None:
        net_rtt = self.network_rtt_s if self.network_rtt_s is not None else flow.base_rtt_s
        target = self.target_qdelay_s if self.target_qdelay_s is not None else net_rtt
        ref_bdp = self.reference_rate_bps * self.reference_rtt_s / 8.0
        sa = flow.line_rate_bps * net_rtt / 8.0 / ref_bdp  # scaling factor a
        sb = target / self.reference_rtt_s  # scaling factor b
        mss = flow.mtu
        s = _NsccState()
        s.network_rtt = net_rtt
        s.target = target
        s.fi = self.fair_increase_mss * mss * sa
        s.pi = self.prop_increase_mss * mss * sa * sb
        s.eta = self.eta_mss * mss * sa
        s.fi_scale = self.fast_increase_scale * sa
        s.qa_threshold = self.qa_threshold_target * target
        s.base_rtt = flow.base_rtt_s
        s.w_min = self.min_window_mtus * mss
        s.w_max = max(s.w_min, self.max_window_bdp * flow.bdp_bytes)
        s.avg_delay = 0.0
        s.inc_bytes = 0.0
        s.received = 0.0
        s.achieved = 0.0
        s.bytes_ignored = 0.0
        s.bytes_to_ignore = 0.0
        s.trigger_qa = False
        s.qa_end = -math.inf  # htsim's 0: the first check only opens the first period
        s.fi_count = 0.0
        s.fast = False
        # htsim's timers start at 0 = the start of a run whose flows start at 0; podsim's flows
        # start at any time, so they start at the flow's creation.
        s.last_dec = now
        s.last_adjust = now
        flow.priv = s
        flow.window_bytes = min(max(self.init_window_bdp * flow.bdp_bytes, s.w_min), s.w_max)
        flow.rate_bps = None

    # ------------------------------------------------------------------ pieces
    def _quick_adapt(
        self,
        s: _NsccState,
        flow: FlowCC,
        now: float,
        loss: bool,
        ecn: bool,
        delay: float,
        inflight: float,
    ) -> bool:
        """[R: quick_adapt]. True when QA cut the window or this signal is ignored."""
        if not self.quick_adapt:
            return False
        done = False
        if ecn and s.bytes_ignored < s.bytes_to_ignore:
            done = True
        elif now > s.qa_end:
            if (
                s.qa_end != -math.inf
                and (s.trigger_qa or loss or delay > s.qa_threshold)
                and s.achieved < s.w_max / (1 << self.qa_gate)
            ):
                flow.window_bytes = max(s.achieved, s.w_min)
                s.bytes_to_ignore = inflight if inflight >= 0 else flow.window_bytes
                s.bytes_ignored = 0.0
                s.trigger_qa = False
                done = True
            s.achieved = 0.0
            s.qa_end = now + s.base_rtt + s.target
        if done:
            s.inc_bytes = 0.0
            s.received = 0.0
        return done

    def _bound(self, s: _NsccState, flow: FlowCC) -> None:
        w = flow.window_bytes
        if w < s.w_min:
            w = s.w_min
        if w > s.w_max:
            w = s.w_max
        flow.window_bytes = w

    # ------------------------------------------------------------------ events
    def on_ack(self, ev: CCEvent, flow: FlowCC) -> None:
        s: _NsccState = flow.priv
        now = ev.now
        acked = ev.bytes if ev.bytes > 0 else 0
        s.achieved += acked
        s.received += acked
        s.bytes_ignored += acked
        ecn = ev.ecn
        rtt = ev.rtt
        if rtt is not None:
            if rtt < s.base_rtt:  # [R: update_base_rtt]
                s.base_rtt = rtt
                s.w_max = max(s.w_min, self.max_window_bdp * flow.line_rate_bps * rtt / 8.0)
            delay = rtt - s.base_rtt
            # [R: update_delay]: an unmarked ACK above target counts as base RTT / 4
            sample = 0.25 * s.base_rtt if (not ecn and delay > s.target) else delay
            s.avg_delay += self.delay_ewma * (sample - s.avg_delay)
        else:
            delay = s.avg_delay  # [R: processAck, no send record]
        if self._quick_adapt(s, flow, now, False, ecn, delay, ev.inflight):
            return
        target = s.target
        if not ecn:
            if delay >= target:  # [R: fair_increase]
                s.inc_bytes += s.fi * acked
            else:  # [R: proportional_increase, fast_increase]
                if delay < self.fast_increase_delay_s:
                    s.fi_count += acked
                    if s.fi_count > flow.window_bytes or s.fast:
                        flow.window_bytes += acked * s.fi_scale
                        s.fast = True
                    else:
                        s.fast = False
                else:
                    s.fi_count = 0.0
                    s.fast = False
                if not s.fast:
                    s.inc_bytes += s.pi * acked * (target - delay) / target
        elif delay >= target:  # [R: multiplicative_decrease]
            s.fast = False
            s.fi_count = 0.0
            d = s.avg_delay
            if d > target and now - s.last_dec > s.base_rtt:
                w = flow.window_bytes * max(1.0 - self.gamma * (d - target) / d, self.md_floor)
                flow.window_bytes = w if w > s.w_min else s.w_min
                s.last_dec = now
        elif self.path_change_on_ecn:
            flow.request_path_change(ev.path)
        self._bound(s, flow)
        if (
            s.received > self.adjust_packets * flow.mtu or now - s.last_adjust > s.network_rtt
        ):  # [R: updateCwndOnAck_NSCC -> fulfill_adjustment]
            flow.window_bytes += s.inc_bytes / flow.window_bytes
            if now - s.last_adjust >= s.network_rtt:
                flow.window_bytes += s.eta
                s.last_adjust = now
            s.inc_bytes = 0.0
            s.received = 0.0
            self._bound(s, flow)

    def on_nack(self, ev: CCEvent, flow: FlowCC) -> None:
        """[R: updateCwndOnNack_NSCC]."""
        s: _NsccState = flow.priv
        nacked = ev.bytes if ev.bytes > 0 else flow.mtu
        s.bytes_ignored += nacked
        s.avg_delay += self.delay_ewma * (s.network_rtt - s.avg_delay)
        s.trigger_qa = True
        if not self._quick_adapt(s, flow, ev.now, True, True, 0.0, ev.inflight):
            flow.window_bytes -= nacked
            self._bound(s, flow)
        flow.request_path_change(ev.path)

    def on_timeout(self, ev: CCEvent, flow: FlowCC) -> None:
        """[R: rtxTimerExpired -> mark_packet_for_retransmission]: W -= lost bytes, >= 1 MTU."""
        s: _NsccState = flow.priv
        lost = ev.bytes if ev.bytes > 0 else flow.mtu
        flow.window_bytes = max(s.w_min, flow.window_bytes - lost)
        flow.request_path_change(ev.path)

    def average_delay(self, flow: FlowCC) -> float:
        """The flow's smoothed queueing delay D."""
        return flow.priv.avg_delay

    def constants(self, flow: FlowCC) -> dict[str, float]:
        """The flow's derived constants in bytes / seconds: fi, pi (per RTT at zero delay), eta,
        fi_scale, target, qa_threshold, network_rtt."""
        s: _NsccState = flow.priv
        return {
            "fi": s.fi,
            "pi": s.pi,
            "eta": s.eta,
            "fi_scale": s.fi_scale,
            "target": s.target,
            "qa_threshold": s.qa_threshold,
            "network_rtt": s.network_rtt,
        }
