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
from itertools import count
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import simpy
from podsim.fabric.counters import Sampler
from podsim.fabric.faults import FaultInjector
from podsim.fabric.kernel import Callback, StopRun, _noop, call_at
from podsim.fabric.packet import CNP, NACK, ROCE_OVERHEAD, Packet
from podsim.fabric.port import Port, _TxDone
from podsim.fabric.switch import Switch
from podsim.nic.transport.qp import Message
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


#: message boundaries a jump crosses (the order of those at one time: a message starts, the
#: receiver holds it, the sender completes it)
_START, _DELIVERED, _DONE = 0, 1, 2
_seq = count()


def _stop_run(_arg: object) -> None:
    raise StopRun


class Plan(NamedTuple):
    """A jump on offer: every active QP with its measured payload rate (bytes/s), and the
    longest the outside world allows (seconds; a QP's queued data may allow less)."""

    lanes: list[tuple[QueuePair, float]]
    dt_ext: float


class _Lane:
    """One active QP inside a jump: its three fronts (the ACKed PSN ``a``, the receiver's
    in-order PSN ``d``, the next new PSN ``h``; PSNs as before the jump) all move on through
    its message stream at its payload rate, so each front passes a message's boundary at a
    time known in closed form (``carry``: payload bytes earlier jumps left over, less than a
    packet's)."""

    __slots__ = ("a", "carry", "d", "h", "kmin", "mtu", "qp", "rate", "stream")

    def __init__(self, qp: QueuePair, rate: float, carry: float, mtu: int) -> None:
        self.qp = qp
        self.rate = rate
        self.mtu = mtu
        self.carry = carry
        self.a = qp.snd.snd_una
        self.d = qp.rx.rcv_nxt
        self.h = qp.snd.high_sent
        #: the QP's messages not yet complete, and those posted inside the jump
        self.stream: list[Message] = list(qp.msgs)
        #: packets the jump must carry at least (the boundaries it ran)
        self.kmin = 0

    def payload(self, p0: int, p1: int) -> int:
        """Payload bytes of the stream's packets ``[p0, p1)``: full MTUs but each message's
        last packet."""
        n = (p1 - p0) * self.mtu
        for m in self.stream:
            if p0 < m.end_psn <= p1:
                n -= self.mtu * m.npkts - m.size
        return n

    def packets(self, x: float) -> int:
        """The most packets from the send front whose payload is at most ``x`` bytes."""
        k = int(x // self.mtu)
        while k > 0 and self.payload(self.h, self.h + k) > x:
            k -= 1
        while self.payload(self.h, self.h + k + 1) <= x:
            k += 1
        return k

    def boundaries(self, m: Message, i: int, now: float, out: list[tuple[Any, ...]]) -> None:
        """Push onto ``out`` the boundaries of ``m`` still ahead of the fronts, keyed by
        event-clock time as if the jump ran through them: (time, kind, seq, ``i``, ``m``,
        packets the stream must move on for the front to pass)."""
        ahead = []
        if m.first_psn >= self.h:  # its first packet has not left yet
            ahead.append((_START, self.h, m.first_psn + 1))
        if m.end_psn > self.d:
            ahead.append((_DELIVERED, self.d, m.end_psn))
        ahead.append((_DONE, self.a, m.end_psn))
        for kind, p0, p1 in ahead:
            t = now + (self.payload(p0, p1) - self.carry) / self.rate
            heappush(out, (t if t > now else now, kind, next(_seq), i, m, p1 - p0))


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
        outside: Sequence[Any] = (),
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
        #: objects whose methods' scheduled calls belong to the outside world and may be
        #: crossed (the engine's transport releasing a completion to its executor)
        self.outside = tuple(outside)
        #: whose methods' scheduled calls are the fluids' and the outside world's: a fluid
        #: that schedules through parts of its own lists them as ``event_owners`` (the
        #: scale-up pipes: themselves and each scale-up domain's fluid)
        self._owners = (
            *(o for f in self.fluids for o in getattr(f, "event_owners", (f,))),
            *self.outside,
        )
        #: per message time field, the ids of the messages whose time a jump set (virtual)
        self._exact: dict[str, set[int]] = {
            f: set() for f in ("post_s", "start_s", "t_delivered", "done_s")
        }
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
        #: a tick is running (a post inside its jump must not schedule another tick: that
        #: would be an event of the outside world the jump stops at)
        self._ticking = False
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
        if self._tick_cb is None and not self._ticking:  # a tick schedules the next itself
            self._tick_cb = call_at(self.env, self.env._now, self._tick)

    def _active(self) -> list[QueuePair]:
        return [q for q in self.rdma._qp_list if q.msgs]

    def _tick(self, _arg: object = None) -> None:
        self._tick_cb = None
        rdma = self.rdma
        if not rdma.pending or not self.env._queue:
            # nothing in flight, or nothing left that could move it (the run has stalled, as
            # it would without fast-forward: ticking on would never end): the next wake()
            # restarts sampling
            self._window.clear()
            return
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
                self._ticking = True
                try:
                    self._jump(dt, qps, plan)
                finally:
                    self._ticking = False
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
            if owner is not None and any(owner is f for f in self._owners):
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
        if owner is not None and any(owner is f for f in self._owners):
            return True
        if isinstance(owner, self._rdma_type) and ev.fn.__name__ == "_post_now":
            return ev.arg.qp.id in active
        return False

    def plan(self, qps: list[QueuePair]) -> tuple[float, str, Plan | None]:
        """The jump the full window allows now: (seconds, "", plan) or (0, reason, None)."""
        w = self._window
        s0, s1 = w[0], w[-1]
        sm = w[len(w) // 2]
        now = self.env._now
        span = s1[0] - s0[0]
        if span <= 0:
            return 0.0, "window", None
        if self._signals(qps) != self._signals0:
            return 0.0, "congestion", None
        # rates from transmission times: (bytes sent after a sample) / (time between the last
        # transmissions before two samples)
        tx0, txm, tx1 = s0[1], sm[1], s1[1]
        lt0, ltm, lt1 = s0[2], sm[2], s1[2]
        with np.errstate(divide="ignore", invalid="ignore"):
            a = (txm - tx0) / (ltm - lt0)
            b = (tx1 - txm) / (lt1 - ltm)
            rate = (tx1 - tx0) / (lt1 - lt0)
        if not (np.isfinite(a).all() and np.isfinite(b).all()) or (a <= 0).any() or (b <= 0).any():
            return 0.0, "idle", None
        if (np.abs(a - b) > self.tolerance * np.maximum(a, b)).any():
            return 0.0, "rates", None
        # a queue that drifts holds back (or releases) bytes its flows' rates do not show:
        # allowed up to the rate tolerance of what the port sent in the window, or one frame
        half = len(w) // 2
        q = np.vstack([s[3]["qbytes"] for s in w]).astype(float)
        mtu = self.rdma.config.mtu
        drift = np.abs(q[half:].mean(axis=0) - q[:half].mean(axis=0))
        sent = (s1[3]["tx_bytes"] - s0[3]["tx_bytes"]).astype(float)
        if (drift > np.maximum(mtu + ROCE_OVERHEAD, self.tolerance * sent)).any():
            return 0.0, "queues", None
        dt = _INF
        lanes: list[tuple[QueuePair, float]] = []
        for i, qp in enumerate(qps):
            if qp.seg is None or qp.fcc.credit_bytes is not None:
                return 0.0, "tail" if qp.seg is None else "credit", None
            r = float(rate[i])
            lim = self._limit(qp, r, mtu)
            if lim <= 0:
                return 0.0, "tail", None
            dt = min(dt, lim)
            fcc = qp.fcc
            cc = fcc.rate_bps
            if cc is not None and cc < fcc.line_rate_bps and fcc.timer_due_s < _INF:
                # the CC holds this QP below line rate with a timer pending (DCQCN's rate
                # recovery): a jump of any length would delay that rate change (the NICs'
                # timers stay on the event clock), so there is none until it is done
                return 0.0, "cc", None
            lanes.append((qp, r))
        t_ext = _INF
        active = {q.id for q in qps}
        for e in self.env._queue:
            c = self.classify(e[3])
            if c == BLOCK:
                return 0.0, "pending", None
            if c == SHIFT and e[0] < t_ext and not self.crossable(e[3], active):
                t_ext = e[0]
        # the jump ends a sampling tick (one window / stable_rtts) before the next event of
        # the outside world that it may not cross, and is worth taking if it skips at least
        # one tick
        tick = span / (len(w) - 1)
        dt_ext = t_ext - now - tick
        if self.time_limit is not None:
            dt_ext = min(dt_ext, self.time_limit - self.now() - tick)
        dt = min(dt, dt_ext)
        if dt < tick:
            return 0.0, "short", None
        if self._cc_feedback_in_flight():
            return 0.0, "cc", None
        return dt, "", Plan(lanes, dt_ext)

    def _limit(self, qp: QueuePair, rate: float, mtu: int) -> float:
        """The longest jump (seconds) after which ``qp`` still has a packet to send even if its
        rate were ``tolerance`` above ``rate`` (the steadiness test's own bound): a jump never
        reaches the end of the QP's queued data (its last packet, and the rate change when it
        runs dry, stay packet-level). The reserve is this tolerance, not a number of
        windows: the QP's messages before its last are crossed in closed form."""
        avail = qp.snd.end_psn - qp.snd.high_sent - 1
        return avail * mtu / (rate * (1.0 + self.tolerance))

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
    def _jump(self, dt: float, qps: list[QueuePair], plan: Plan) -> None:
        """Skip up to ``dt`` seconds. The outside world's events leave the heap; they and the
        active QPs' message boundaries (:class:`_Lane`) run one by one at their virtual time
        (the event clock stands still, the offset grows to each), and the jump ends early
        where one of them changes what the steady flows see (:meth:`_cross`). A message
        posted to an active QP inside the jump lengthens its queue, so the jump may then run
        longer (up to ``plan.dt_ext``). Then every QP's skipped packets and the links' bytes
        are accounted and the outside world's events go back, moved earlier by what was
        skipped."""
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
        mtu = self.rdma.config.mtu
        lanes = [_Lane(qp, r, self._carry.get(qp.id, 0.0), mtu) for qp, r in plan.lanes]
        active = {ln.qp.id: i for i, ln in enumerate(lanes)}
        bounds: list[tuple[Any, ...]] = []  # (event-clock key, kind, seq, lane, message, k)
        for i, ln in enumerate(lanes):
            for m in ln.stream:
                ln.boundaries(m, i, now, bounds)
        heapify(bounds)
        lim = np.array([self._limit(ln.qp, ln.rate, mtu) for ln in lanes])
        caps = self._caps()
        nmsg = len(self.rdma.messages)
        rdma = self.rdma
        skipped = 0.0  # seconds skipped so far; the heaps are keyed by event time then
        stopped = False
        while True:
            t_out = outside[0][0] if outside else _INF
            t_msg = bounds[0][0] if bounds else _INF
            t = t_out if t_out < t_msg else t_msg
            if t - now > dt:
                break
            if t_msg <= t_out:
                e = heappop(bounds)
                kind, i, m = e[1], e[3], e[4]
            else:
                ev = outside[0][3]
                if isinstance(ev, Callback) and ev.fn is _noop:  # cancelled while out
                    heappop(outside)
                    ev.callbacks = None
                    continue
                if not self.crossable(ev, active):
                    self.ends["not crossable"] = self.ends.get("not crossable", 0) + 1
                    stopped = True
                    break
                e = heappop(outside)
                kind = -1
            step = t - now - skipped
            if step > 0:
                for f in self.fluids:
                    f.skip(step)
                skipped += step
            self.offset = base + skipped
            tv = t + base  # the virtual time
            posted: list[Message] = []  # messages this event queued behind an active QP's
            if kind < 0:
                ev = e[3]
                fn = getattr(ev, "fn", None)
                post = ev.arg if getattr(fn, "__self__", None) is rdma else None
                stopped = self._cross(ev.callbacks, ev, outside, skipped, active, caps, nmsg)
                if isinstance(post, Message):  # a post scheduled for now (``at=``)
                    posted.append(post)
            else:
                ln = lanes[i]
                ln.kmin = max(ln.kmin, e[5])
                if self._boundary(kind, ln, m, tv):  # a completion: run it like an event
                    done = (ln.qp, m.end_psn, tv)
                    stopped = self._cross(None, done, outside, skipped, active, caps, nmsg)
            # and those posted at once by a callback it ran (an executor's next chunk)
            posted += rdma.messages[nmsg:]
            for post in posted:
                # joins its QP's lane even where the jump ends here: the lane's PSN shift
                # must move it with the QP's other messages (_advance)
                if post.first_psn >= 0 and post.qp.id in active:
                    self._exact["post_s"].add(post.id)
                    post.post_s = tv
                    j = active[post.qp.id]
                    ln = lanes[j]
                    ln.stream.append(post)
                    ln.boundaries(post, j, now, bounds)
                    lim[j] = self._limit(ln.qp, ln.rate, mtu)
                    dt = min(plan.dt_ext, float(lim.min()))
            nmsg = len(rdma.messages)
            if stopped:
                break
        if not stopped and dt > skipped:
            for f in self.fluids:
                f.skip(dt - skipped)
            skipped = dt
        self.offset = base
        if skipped > 0:
            self._account(skipped, lanes, bounds)
        for e in outside:  # the outside world keeps its virtual time
            heap.append((e[0] - skipped, e[1], e[2], e[3]))
        heapify(heap)
        self._window.clear()

    def _boundary(self, kind: int, ln: _Lane, m: Message, tv: float) -> bool:
        """A front of ``ln``'s QP passes a boundary of ``m`` at virtual time ``tv`` inside a
        jump: its first packet leaves (``start_s``), the receiver holds its last byte
        (``t_delivered``) or the sender sees the last ACK. True for the last: the caller
        completes the message through :meth:`_cross`, which runs its completion callbacks
        as it runs an outside event."""
        qp = ln.qp
        if kind == _START:
            m.start_s = tv
            self._exact["start_s"].add(m.id)
            return False
        if kind == _DELIVERED:
            qp.delivered(m.end_psn, tv)  # PSNs are those before the jump until it is booked
            self._exact["t_delivered"].add(m.id)
            return False
        self._exact["done_s"].add(m.id)
        return True

    def _cross(
        self,
        callbacks: Any,
        ev: Any,
        outside: list[tuple[Any, ...]],
        skipped: float,
        active: dict[int, int],
        caps: list[tuple[Any, Any]],
        nmsg: int,
    ) -> bool:
        """Run an outside-world event inside a jump (the virtual clock at its time): its
        ``callbacks``, or with ``callbacks`` None a message completion ``ev`` = (QP, end PSN,
        virtual time). True if it changed what the steady flows see, so the jump must end
        here: it scheduled an event of the fabric or the NICs, of unknown kind or one a jump
        may not cross (a post to an idle QP: a new flow), posted a message to an idle QP, or
        changed a NIC's PCIe cap. The events it scheduled that a jump may cross join
        ``outside``."""
        env = self.env
        heap = env._queue
        n = len(heap)
        new: list[tuple[Any, ...]] = []
        env._queue = new  # what it schedules through the kernel's helpers lands here
        try:
            if callbacks is None:
                qp, una, tv = ev
                qp._complete(una, tv)
            else:
                ev.callbacks = None
                for cb in callbacks:
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

    def _account(self, dt: float, lanes: list[_Lane], bounds: list[tuple[Any, ...]]) -> None:
        """Book ``dt`` skipped seconds: each QP's packets at its rate (consistent with the
        boundaries crossed: those passed are in, the completions not run are out), each
        port's counters at its rate over the window, the virtual clock and the jump's
        record."""
        env = self.env
        w = self._window
        span = w[-1][0] - w[0][0]
        left: dict[int, list[tuple[Any, ...]]] = {}
        for e in bounds:
            left.setdefault(e[3], []).append(e)
        for i, ln in enumerate(lanes):
            x = ln.rate * dt + ln.carry
            k = max(ln.packets(x), ln.kmin)
            rest = sorted(left.get(i, ()))
            for e in rest:
                if e[1] == _DONE:
                    k = min(k, e[5] - 1)  # a completion not run: its ACK has not come yet
                    break
            k = min(k, ln.qp.snd.end_psn - ln.h - 1)
            for e in rest:  # a start or delivery the rounding passed (no callbacks)
                if e[1] != _DONE and e[5] <= k:
                    self._boundary(e[1], ln, e[4], env._now + dt + self.offset)
            self._carry[ln.qp.id] = x - ln.payload(ln.h, ln.h + k)
            if k > 0:
                self._advance(ln, k)
        # links: each port's counters at its rate over the window
        c0, c1 = w[0][3], w[-1][3]
        for name in _RATED:
            self.link_extra[name] += np.rint((c1[name] - c0[name]) * (dt / span)).astype(np.int64)
        self.windows.append((self.now(), dt))
        self.offset += dt
        self._jump_at.append(env._now)
        self._offset_after.append(self.offset)
        self.jumps += 1
        if self.time_limit is not None and self._limit_cb is None:
            # from now on the time limit is an event of the outside world (moved by jumps)
            self._limit_cb = call_at(env, self.time_limit - self.offset, _stop_run)

    def _advance(self, ln: _Lane, k: int) -> None:
        """The QP's message stream moves ``k`` packets on, all of them sent, delivered and
        acknowledged: the packets from its send front on are taken out (every message's PSNs
        move ``k`` down, so the packets in flight keep their PSNs and now stand ``k``
        further on in the stream, as in the full run), the messages wholly sent leave the
        send queue, and the counters get the packets and their exact payload bytes."""
        qp, h = ln.qp, ln.h
        nbytes = ln.payload(h, h + k)
        for m in ln.stream:
            n = min(m.end_psn, h + k) - max(m.first_psn, h)
            if n > 0:
                m.skipped += n
        for m in ln.stream:  # those completed inside the jump too (one numbering)
            m.first_psn -= k
            m.end_psn -= k
        snd = qp.snd
        snd.end_psn -= k
        unsent = qp.unsent
        while unsent and unsent[0].end_psn <= h:
            unsent.popleft()
        qp._set_seg(unsent[0] if unsent else None)
        qp._next_done = qp.msgs[0].end_psn if qp.msgs else _INF
        qp.rx._next_delivered = qp.undelivered[0].end_psn if qp.undelivered else _INF
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
    def msg_time(self, m: Message, field: str) -> float:
        """Message ``m``'s ``field`` (``post_s``, ``start_s``, ``t_delivered``, ``done_s``) on
        the virtual clock: a time a jump set is virtual already, one the transport recorded is
        on the event clock."""
        t = getattr(m, field)
        return t if m.id in self._exact[field] else float(self.virt(t))

    def msg_times(self, msgs: Sequence[Message], field: str) -> np.ndarray:
        """:meth:`msg_time` of every message of ``msgs``."""
        t = np.array([getattr(m, field) for m in msgs], dtype=float)
        out = np.asarray(self.virt(t), dtype=float)
        exact = self._exact[field]
        if exact:
            for i, m in enumerate(msgs):
                if m.id in exact:
                    out[i] = t[i]
        return out

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
