"""Opt-in steady-state fast-forward for the packet engine's NIC transport (issue 18).

In the spirit of Wormhole (NSDI'26: packet-level simulation skips the steady states of its
flows): when the set of active queue pairs and their sending rates have held for a configured
number of round trips, the run skips ahead to just before the next change and accounts what the
skipped stretch would have carried; then it resumes packet by packet. Off by default
(``sim.fast_forward``); with it off nothing here runs and results are bit-identical.

Design: the skipped stretch is *relabelled*, not re-simulated. Nothing inside the fabric or the
NICs moves: queues, packets on wires, pacing times, timers, RTT estimators and congestion
state stay exactly as they were (so every invariant of :mod:`podsim.fabric.invariants` keeps
holding by construction). Instead

- a *virtual clock* runs ahead of the event clock by :attr:`FastForward.offset`, the sum of
  the jumps. Everything the run reports (the executor's starts and ends, message and delivery
  times, queue samples, the run's length) is on the virtual clock: :meth:`FastForward.now`
  while running, :meth:`FastForward.virt` for event times recorded inside the transport;
- every active QP's current message loses the full-MTU packets its measured rate would have
  sent during the jump (``Message.skipped``; its PSNs not yet sent are renumbered, which only
  the sender's bookkeeping has seen), and the QP's, the NICs' and the links' counters get those
  packets and bytes: per QP at its rate, per link at its measured rate (kept apart in
  :attr:`FastForward.link_extra` so that the per-switch conservation check stays exact);
- events that belong to the world outside the steady flows keep their virtual time: executor
  timeouts (compute, delayed releases), message posts, fault starts and ends, the time limit
  and the events of fluid models registered as ``fluids`` (the scale-up pipes, which a jump
  advances in closed form: their rates are constant between their events) move earlier on
  the event clock by the jump. A jump *crosses* those that cannot change what the steady
  flows see: executor timeouts, fluid events and posts to a QP that is sending (the message
  queues behind the current one, which the jump does not finish) run one by one at their
  virtual time inside the jump (the event clock stands still; the fabric and NICs are held),
  and the jump ends right there if one of them scheduled anything else (an event of the
  fabric or NICs, a post to an idle QP, i.e. a new flow, an event of unknown kind) or changed
  a NIC's PCIe cap. A fault's start or end, the time limit and a pending post to an idle QP
  are never crossed: the jump ends one sampling tick before them. Events of other models
  with a clock of their own (the PCIe fluid copies, link-level retries) block jumps while
  they are pending.
- a message posted to a sending QP inside a jump has the jump's end as its NIC post time in
  the QP table (the executor's post time in the messages table is exact).

When a jump is taken (:meth:`FastForward.plan`): every round trip of the slowest active QP
(its base RTT) the controller samples; over the last ``stable_rtts`` round trips the same QPs
must have had unsent data throughout, with no congestion signal or loss since that set of QPs
formed (no ECN mark, CNP, NACK, retransmission, timeout, drop or PFC pause: the flows are then
in a congestion-control cycle, not at a fixed point, and a quiet window would extrapolate the
cycle's quiet phase and skip the time in which its next signals come), each QP's
sending rate (payload bytes between its transmissions, which are exact event times) may differ
by at most ``tolerance`` between the two halves of the window, and each port's mean queue by
at most one MTU frame or ``tolerance`` of what the port sent in the window. The
jump is the longest that keeps, for every QP, two windows' worth of packets of its current
message unsent (its completion stays packet-level) and ends one sampling tick before the next
outside event it may not cross and before the time limit. No jump while a congestion control
holds a QP below line rate with a timer pending (a CC event: DCQCN's rate recovery; a jump of
any length would delay it, since the NICs' timers stay on the event clock), while a CNP or
NACK is on a wire, in a queue or in a NIC's receive pipeline, or with credit-based congestion
control.

Approximated (documented fidelity knob): during a jump the rates, queues and congestion
state are held (their oscillation inside the window is averaged); time-integrated counters
(paused time) and per-packet congestion-control counters (DCQCN's byte counter) do not advance;
ACKs and control packets are counted on the links at their measured rates.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING, Any

import numpy as np
import simpy
from podsim.fabric.counters import Sampler
from podsim.fabric.faults import FaultInjector
from podsim.fabric.kernel import Callback, StopRun, _noop, call_at
from podsim.fabric.packet import CNP, NACK, ROCE_OVERHEAD, Packet
from podsim.fabric.port import Port, _TxDone
from podsim.fabric.switch import Switch
from simpy.events import Timeout

if TYPE_CHECKING:
    from podsim.nic.nic import RdmaNetwork
    from podsim.nic.transport.qp import QueuePair

__all__ = ["FastForward"]

_INF = math.inf
# event classes (FastForward.classify)
INTERNAL, NEUTRAL, SHIFT, BLOCK = 0, 1, 2, 3
#: port counters that are extrapolated over a jump (the link table's columns)
_RATED = ("tx_bytes", "tx_pkts")
#: port counters that must not have moved since the flow set formed: a congestion signal, a
#: loss or a pause means the flows are in a congestion-control cycle, not at a fixed point
#: (and a window that happened to miss the next signal would extrapolate the cycle's quiet
#: phase, and skip the time in which the next signals would come)
_STILL = ("drops", "pauses_rcvd", "ecn_marks")


def _stop_run(_arg: object) -> None:
    raise StopRun


class FastForward:
    """The fast-forward controller of one packet-engine run (see the module docstring).

    ``stable_rtts`` and ``tolerance`` are ``sim.fast_forward``'s; ``time_limit`` the run's
    (virtual) time limit. Call :meth:`wake` when a message is handed to the transport."""

    def __init__(
        self,
        env: simpy.Environment,
        rdma: RdmaNetwork,
        *,
        stable_rtts: int = 8,
        tolerance: float = 0.02,
        time_limit: float | None = None,
        fluids: Sequence[Any] = (),
    ) -> None:
        if int(stable_rtts) != stable_rtts or stable_rtts < 2:
            raise ValueError(f"stable_rtts={stable_rtts!r}: expected an int >= 2")
        if not 0 < tolerance <= 0.5:
            raise ValueError(f"tolerance={tolerance!r}: expected a fraction in (0, 0.5]")
        from podsim.nic.nic import RdmaNetwork, SmartNic

        self._internal = (SmartNic, Port, Switch)
        self._rdma_type = RdmaNetwork
        self.env = env
        self.rdma = rdma
        self.ports: list[Port] = list(rdma.network.ports)
        self.stable_rtts = int(stable_rtts)
        self.tolerance = float(tolerance)
        self.time_limit = time_limit
        #: fluid models with a clock of their own that a jump advances in closed form (their
        #: ``skip(dt)``; the scale-up pipes): their events belong to the outside world
        self.fluids = tuple(fluids)
        #: outside-world events run at their virtual time inside jumps so far
        self.crossed = 0
        #: why jumps ended before their planned length, by reason
        self.ends: dict[str, int] = {}
        #: virtual clock - event clock (seconds skipped so far)
        self.offset = 0.0
        self._jump_at: list[float] = []  # event time of each jump
        self._offset_after: list[float] = []
        self.jumps = 0
        #: (virtual start, seconds skipped) of every jump
        self.windows: list[tuple[float, float]] = []
        self.skipped_packets = 0
        self.skipped_bytes = 0
        #: per port (``ports`` order): counters accounted by jumps, one array per _RATED name
        self.link_extra = {k: np.zeros(len(self.ports), np.int64) for k in _RATED}
        #: why no jump was taken at a full window, by reason (tests and the summary read it)
        self.refusals: dict[str, int] = {}
        self._window: deque[tuple[Any, ...]] = deque(maxlen=self.stable_rtts + 1)
        self._flows: tuple[int, ...] = ()
        self._signals0 = 0  # _signals() when the current flow set formed
        # (messages, pending) when a window was refused for congestion: skip the sampling
        # until either changes (no jump can come before), ticking every _quiet_dt
        self._quiet_key: tuple[int, int] | None = None
        self._quiet_dt = 0.0
        self._tick_cb: Callback | None = None
        self._limit_cb: Callback | None = None
        self._carry: dict[int, float] = {}

    # ------------------------------------------------------------------ clocks
    def now(self) -> float:
        """The virtual time now (the event clock plus the time skipped so far)."""
        return self.env._now + self.offset

    def virt(self, t: Any) -> Any:
        """Virtual time of event-clock time(s) ``t`` (a float or an array; NaN stays NaN): an
        event at or after a jump's event time gets that jump's offset."""
        if not self._jump_at:
            return t
        offs = np.concatenate([[0.0], self._offset_after])
        idx = np.searchsorted(np.asarray(self._jump_at), t, side="right")
        out = np.asarray(t, dtype=float) + offs[idx]
        return float(out) if np.ndim(out) == 0 else out

    # ------------------------------------------------------------------ sampling
    def wake(self) -> None:
        """Start sampling (a message was handed to the transport); no-op while sampling."""
        if self._tick_cb is None:
            self._tick_cb = call_at(self.env, self.env._now, self._tick)

    def _active(self) -> list[QueuePair]:
        return [q for q in self.rdma._qp_list if q.msgs]

    def _tick(self, _arg: object = None) -> None:
        self._tick_cb = None
        rdma = self.rdma
        if not rdma.pending:
            self._window.clear()
            return  # nothing in flight: the next wake() restarts sampling
        key = (len(rdma.messages), rdma.pending)
        if key == self._quiet_key:
            # congestion since the flow set formed and no message posted or done since: no
            # jump is possible until one is (the flow set can change only then)
            self._tick_cb = call_at(self.env, self.env._now + self._quiet_dt, self._tick)
            return
        self._quiet_key = None
        qps = self._active()
        flows = tuple(q.id for q in qps)
        if flows != self._flows:
            self._window.clear()
            self._flows = flows
            self._signals0 = self._signals(qps)
        self._window.append(self._sample(qps))
        rtt = max((q.fcc.base_rtt_s for q in qps), default=0.0) or 1e-6
        if len(self._window) == self._window.maxlen:
            dt, reason, plan = self.plan(qps)
            if dt > 0:
                self._jump(dt, qps, plan)
            else:
                self.refusals[reason] = self.refusals.get(reason, 0) + 1
                if reason == "congestion":
                    self._quiet_key, self._quiet_dt = (len(rdma.messages), rdma.pending), rtt
        self._tick_cb = call_at(self.env, self.env._now + rtt, self._tick)

    def _sample(self, qps: list[QueuePair]) -> tuple[Any, ...]:
        ports = self.ports
        n = len(ports)

        def col(name: str) -> np.ndarray:
            return np.fromiter((getattr(p, name) for p in ports), np.int64, n)

        return (
            self.env._now,
            np.array([q.tx_bytes for q in qps], dtype=float),
            np.array([q._last_tx for q in qps], dtype=float),
            {k: col(k) for k in (*_RATED, "qbytes")},
        )

    def _signals(self, qps: list[QueuePair]) -> int:
        """Congestion signals and losses so far: ECN marks, drops and PFC pauses on every
        port, CNPs, NACKs, retransmissions and timeouts of ``qps``."""
        n = sum(getattr(p, k) for p in self.ports for k in _STILL)
        return n + sum(q.snd.retransmits + q.snd.timeouts + q.cnps_rcvd + q.nacks_rcvd for q in qps)

    # ------------------------------------------------------------------ the decision
    def classify(self, ev: Any) -> int:
        """INTERNAL (the fabric's and NICs' own events: they stay on the event clock), NEUTRAL
        (samplers, cancelled calls), SHIFT (the outside world's timers: executor timeouts,
        message posts, fault starts and ends, the time limit) or BLOCK (anything else)."""
        if isinstance(ev, Packet | _TxDone):
            return INTERNAL
        if isinstance(ev, Callback):
            fn = ev.fn
            if fn is _noop:
                return NEUTRAL
            if fn is _stop_run:
                return SHIFT
            owner = getattr(fn, "__self__", None)
            if owner is self or isinstance(owner, Sampler):
                return NEUTRAL
            if isinstance(owner, self._internal):
                return INTERNAL
            if owner is not None and any(owner is f for f in self.fluids):
                return SHIFT
            if isinstance(owner, self._rdma_type) or (
                isinstance(owner, FaultInjector) and fn.__name__ in ("_start", "_end")
            ):
                return SHIFT
            return BLOCK
        if isinstance(ev, Timeout):
            return SHIFT
        return BLOCK

    def crossable(self, ev: Any, active: set[int]) -> bool:
        """Whether an outside-world event (:meth:`classify` SHIFT) may run inside a jump, at its
        virtual time: an executor timeout, an event of a fluid model, a message posted to a
        QP of ``active`` (it queues behind the QP's current message, which the jump does not
        finish). Not a fault's start or end, the time limit, or a post to an idle QP (a new
        flow): a jump ends one sampling tick before those."""
        if isinstance(ev, Timeout):
            return True
        if not isinstance(ev, Callback):
            return False
        owner = getattr(ev.fn, "__self__", None)
        if owner is not None and any(owner is f for f in self.fluids):
            return True
        if isinstance(owner, self._rdma_type) and ev.fn.__name__ == "_post_now":
            return ev.arg.qp.id in active
        return False

    def plan(self, qps: list[QueuePair]) -> tuple[float, str, list[tuple[Any, ...]]]:
        """The jump the full window allows now: (seconds, "", per-QP plan) or (0, reason, [])."""
        w = self._window
        s0, s1 = w[0], w[-1]
        sm = w[len(w) // 2]
        now = self.env._now
        span = s1[0] - s0[0]
        if span <= 0:
            return 0.0, "window", []
        if self._signals(qps) != self._signals0:
            return 0.0, "congestion", []
        # rates from transmission times: (bytes sent after a sample) / (time between the last
        # transmissions before two samples)
        tx0, txm, tx1 = s0[1], sm[1], s1[1]
        lt0, ltm, lt1 = s0[2], sm[2], s1[2]
        with np.errstate(divide="ignore", invalid="ignore"):
            a = (txm - tx0) / (ltm - lt0)
            b = (tx1 - txm) / (lt1 - ltm)
            rate = (tx1 - tx0) / (lt1 - lt0)
        if not (np.isfinite(a).all() and np.isfinite(b).all()) or (a <= 0).any() or (b <= 0).any():
            return 0.0, "idle", []
        if (np.abs(a - b) > self.tolerance * np.maximum(a, b)).any():
            return 0.0, "rates", []
        # a queue that drifts holds back (or releases) bytes its flows' rates do not show:
        # allowed up to the rate tolerance of what the port sent in the window, or one frame
        half = len(w) // 2
        q = np.vstack([s[3]["qbytes"] for s in w]).astype(float)
        mtu = self.rdma.config.mtu
        drift = np.abs(q[half:].mean(axis=0) - q[:half].mean(axis=0))
        sent = (s1[3]["tx_bytes"] - s0[3]["tx_bytes"]).astype(float)
        if (drift > np.maximum(mtu + ROCE_OVERHEAD, self.tolerance * sent)).any():
            return 0.0, "queues", []
        dt = _INF
        plan: list[tuple[Any, ...]] = []
        for i, qp in enumerate(qps):
            m = qp.seg
            if m is None or qp.fcc.credit_bytes is not None:
                return 0.0, "tail" if m is None else "credit", []
            r = float(rate[i])
            # keep the message's last packet and two windows' worth unsent
            reserve = math.ceil(2.0 * r * span / mtu) + 1
            avail = m.end_psn - qp.snd.high_sent - 1 - reserve
            if avail <= 0:
                return 0.0, "completion", []
            dt = min(dt, avail * mtu / r)
            fcc = qp.fcc
            cc = fcc.rate_bps
            if cc is not None and cc < fcc.line_rate_bps and fcc.timer_due_s < _INF:
                # the CC holds this QP below line rate with a timer pending (DCQCN's rate
                # recovery): a jump of any length would delay that rate change (the NICs'
                # timers stay on the event clock), so there is none until it is done
                return 0.0, "cc", []
            plan.append((qp, m, r, avail))
        t_ext = _INF
        active = {q.id for q in qps}
        for e in self.env._queue:
            c = self.classify(e[3])
            if c == BLOCK:
                return 0.0, "pending", []
            if c == SHIFT and e[0] < t_ext and not self.crossable(e[3], active):
                t_ext = e[0]
        # the jump ends a sampling tick (one window / stable_rtts) before the next event of
        # the outside world that it may not cross, and is worth taking if it skips at least
        # one tick
        tick = span / (len(w) - 1)
        dt = min(dt, t_ext - now - tick)
        if self.time_limit is not None:
            dt = min(dt, self.time_limit - self.now() - tick)
        if dt < tick:
            return 0.0, "short", []
        if self._cc_feedback_in_flight():
            return 0.0, "cc", []
        return dt, "", plan

    def _cc_feedback_in_flight(self) -> bool:
        """A CNP or a NACK on a wire, in a queue or in a NIC's receive pipeline (its effect on
        a rate is pending)."""
        from podsim.fabric.port import packets_on_wires

        for pkt in packets_on_wires(self.env, self.ports):
            if pkt.kind == CNP or pkt.kind == NACK:
                return True
        for p in self.ports:
            for queue in (p._q, p._hq):
                for pkt in queue:
                    if pkt.kind == CNP or pkt.kind == NACK:
                        return True
        for e in self.env._queue:
            ev = e[3]
            arg = ev.arg if isinstance(ev, Callback) and ev.fn is not _noop else None
            if isinstance(arg, Packet) and (arg.kind == CNP or arg.kind == NACK):
                return True
        return False

    # ------------------------------------------------------------------ the jump
    def _jump(self, dt: float, qps: list[QueuePair], plan: list[tuple[Any, ...]]) -> None:
        """Skip up to ``dt`` seconds: the outside world's events leave the heap; those the
        jump may cross run one by one at their virtual time (the event clock stands still,
        the offset grows to each), and the jump ends early where one of them changes what the
        steady flows see (:meth:`_cross`). Then the skipped packets and link bytes are
        accounted and the outside world's events go back, moved earlier by what was skipped."""
        env = self.env
        now = env._now
        heap = env._queue
        base = self.offset
        outside: list[tuple[Any, ...]] = []
        inside: list[tuple[Any, ...]] = []
        for e in heap:
            (outside if self.classify(e[3]) == SHIFT else inside).append(e)
        if outside:
            heap[:] = inside  # the same list: the ports and switches hold it
            heapify(heap)
            heapify(outside)
        active = {q.id for q in qps}
        caps = self._caps()
        nmsg = len(self.rdma.messages)
        skipped = 0.0  # seconds skipped so far; ``outside`` is keyed by its event time then
        stopped = False
        while outside and outside[0][0] - now <= dt:
            ev = outside[0][3]
            if isinstance(ev, Callback) and ev.fn is _noop:  # cancelled while out of the heap
                heappop(outside)
                ev.callbacks = None
                continue
            if not self.crossable(ev, active):
                self.ends["not crossable"] = self.ends.get("not crossable", 0) + 1
                stopped = True
                break
            e = heappop(outside)
            step = e[0] - now - skipped
            if step > 0:
                for f in self.fluids:
                    f.skip(step)
                skipped += step
            self.offset = base + skipped
            stopped = self._cross(e[3], outside, skipped, active, caps, nmsg)
            nmsg = len(self.rdma.messages)
            if stopped:
                break
        if not stopped and dt > skipped:
            for f in self.fluids:
                f.skip(dt - skipped)
            skipped = dt
        self.offset = base
        if skipped > 0:
            self._account(skipped, qps, plan)
        for e in outside:  # the outside world keeps its virtual time
            heap.append((e[0] - skipped, e[1], e[2], e[3]))
        heapify(heap)
        self._window.clear()

    def _cross(
        self,
        ev: Any,
        outside: list[tuple[Any, ...]],
        skipped: float,
        active: set[int],
        caps: list[tuple[Any, Any]],
        nmsg: int,
    ) -> bool:
        """Run the outside-world event ``ev`` inside a jump (the virtual clock at its time);
        True if it changed what the steady flows see, so the jump must end here: it
        scheduled an event of the fabric or the NICs, of unknown kind or one a jump may not
        cross (a post to an idle QP: a new flow), posted a message to an idle QP, or changed
        a NIC's PCIe cap. The events it scheduled that a jump may cross join ``outside``."""
        env = self.env
        heap = env._queue
        n = len(heap)
        new: list[tuple[Any, ...]] = []
        env._queue = new  # what it schedules through the kernel's helpers lands here
        try:
            cbs = ev.callbacks
            ev.callbacks = None
            for cb in cbs:
                cb(ev)
        finally:
            env._queue = heap
        self.crossed += 1
        why = "fabric" if len(heap) != n else ""  # a port or switch scheduled onto its heap
        for e in new:
            if self.classify(e[3]) == SHIFT and self.crossable(e[3], active):
                heappush(outside, (e[0] + skipped, e[1], e[2], e[3]))
            else:
                heappush(heap, e)
                why = why or f"scheduled {self._kind_name(e[3])}"
        msgs = self.rdma.messages
        if any(msgs[i].qp.id not in active for i in range(nmsg, len(msgs))):
            why = why or "new flow"
        if not why and self._caps() != caps:
            why = "pcie cap"
        if why:
            self.ends[why] = self.ends.get(why, 0) + 1
        return bool(why)

    @staticmethod
    def _kind_name(ev: Any) -> str:
        fn = getattr(ev, "fn", None)
        if fn is None:
            return type(ev).__name__
        owner = getattr(fn, "__self__", None)
        return f"{type(owner).__name__}.{fn.__name__}" if owner is not None else fn.__name__

    def _caps(self) -> list[tuple[Any, Any]]:
        """Every NIC's PCIe DMA caps (the node's PCIe tree sets them as messages come and go)."""
        return [(n.pcie_rate_cap_bps, n.pcie_rx_cap_bps) for n in self.rdma.nics.values()]

    def _account(self, dt: float, qps: list[QueuePair], plan: list[tuple[Any, ...]]) -> None:
        """Book ``dt`` skipped seconds: each QP's packets at its rate, each port's counters at
        its rate over the window, the virtual clock and the jump's record."""
        env = self.env
        w = self._window
        span = w[-1][0] - w[0][0]
        mtu = self.rdma.config.mtu
        for qp, m, r, avail in plan:
            x = r * dt / mtu + self._carry.get(qp.id, 0.0)
            k = min(int(x), avail)
            self._carry[qp.id] = x - k
            if k > 0:
                self._skip(qp, m, k, mtu)
        # links: each port's counters at its rate over the window
        c0, c1 = w[0][3], w[-1][3]
        for k in _RATED:
            self.link_extra[k] += np.rint((c1[k] - c0[k]) * (dt / span)).astype(np.int64)
        self.windows.append((self.now(), dt))
        self.offset += dt
        self._jump_at.append(env._now)
        self._offset_after.append(self.offset)
        self.jumps += 1
        if self.time_limit is not None and self._limit_cb is None:
            # from now on the time limit is an event of the outside world (moved by jumps)
            self._limit_cb = call_at(env, self.time_limit - self.offset, _stop_run)

    def _skip(self, qp: QueuePair, m: Any, k: int, mtu: int) -> None:
        """Take ``k`` full-MTU packets out of ``m`` (the QP's current message) as sent,
        delivered and acknowledged: renumber the PSNs not yet sent and count them."""
        m.npkts -= k
        m.skipped += k
        m.end_psn -= k
        for later in qp.msgs:
            if later.first_psn > m.first_psn:
                later.first_psn -= k
                later.end_psn -= k
        snd = qp.snd
        snd.end_psn -= k
        qp._seg_end = m.end_psn
        qp._next_done = qp.msgs[0].end_psn if qp.msgs else _INF
        qp.rx._next_delivered = qp.undelivered[0].end_psn if qp.undelivered else _INF
        nbytes = k * mtu
        qp.tx_pkts += k
        qp.tx_bytes += nbytes
        snd.acked_bytes += nbytes
        rx = qp.rx
        rx.rx_pkts += k
        rx.rx_bytes += nbytes
        rx.delivered_bytes += nbytes
        qp.nic.tx_data_pkts += k
        qp.dst_nic.rx_data_pkts += k
        self.skipped_packets += k
        self.skipped_bytes += nbytes

    # ------------------------------------------------------------------ results
    def summary(self) -> dict[str, Any]:
        """What the fast-forward did (the run summary's ``engine_info.fast_forward``)."""
        return {
            "jumps": self.jumps,
            "skipped_time_s": self.offset,
            "skipped_packets": self.skipped_packets,
            "skipped_bytes": self.skipped_bytes,
            "stable_rtts": self.stable_rtts,
            "tolerance": self.tolerance,
            "refusals": dict(sorted(self.refusals.items())),
            "crossed_events": self.crossed,
            "ended_early": dict(sorted(self.ends.items())),
            "windows_s": [[t, t + dt] for t, dt in self.windows],
        }
