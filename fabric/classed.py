"""Ports and switches with traffic classes (the model is in :mod:`podsim.fabric.classes`).

A network built with two or more classes uses these in place of :class:`~podsim.fabric.port.Port`,
:class:`~podsim.fabric.switch.SwitchPort` and :class:`~podsim.fabric.switch.Switch`; with one
class (the default) the fabric is built from the plain classes, whose hand-inlined hot paths are
untouched, so single-class results do not change. These are written readably, not inlined: a
run with classes pays a few function calls per packet and hop.

What changes with classes:

* every egress port keeps one DATA queue per class (:class:`ClassQueues`) behind its control and
  PFC queues, and :class:`~podsim.fabric.classes.ClassScheduler` picks the class to send;
  a NIC's port asks its source (the NIC) only when no queued class is eligible, and the NIC
  schedules its own classes the same way (:mod:`podsim.nic.classes`);
* a PFC PAUSE names a class and stops only that class on the link (802.1Qbb); ``paused`` of the
  port stays False (it is the credit stall of InfiniBand links, which classes do not support);
* a switch counts, per ingress link and class, the DATA bytes it buffers, and pauses the class
  above ``pfc_xoff_bytes`` (classes with ``pfc``; the others are lossy and are dropped by the
  dynamic threshold, which applies to the class's own queue);
* ECN marks by the depth of the packet's class queue with the class's thresholds.

Counters per class live in ``port.tcq`` (:class:`ClassQueues`); the port's own counters stay
totals over classes (``paused_s`` is then the sum of the classes' paused times).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator
from heapq import heappush
from itertools import chain
from typing import Any

import simpy
from podsim.fabric.classes import ClassScheduler, TrafficClasses
from podsim.fabric.packet import PAUSE, PAUSE_FRAME_WIRE_BYTES, RESUME, Packet
from podsim.fabric.port import Port
from podsim.fabric.switch import Ingress, Switch, SwitchConfig, SwitchPort

__all__ = ["ClassIngress", "ClassQueues", "ClassedPort", "ClassedSwitch", "ClassedSwitchPort"]

_INF = math.inf


class ClassQueues:
    """One port's per-class DATA queues, pause state and counters (lists indexed by class).

    Counters: ``qbytes``/``max_qbytes`` (wire bytes queued), ``tx_bytes``/``tx_pkts`` (wire
    bytes and DATA packets sent), ``drops``/``drop_bytes`` (admission drops, payload bytes),
    ``ecn_marks``, ``pauses_rcvd``/``pauses_sent`` (PFC frames for the class), ``paused_s``.
    ``kmin``/``kmax``/``slope``: the class's ECN marking (switch ports; inf on NIC ports)."""

    __slots__ = (
        "_paused_at",
        "drop_bytes",
        "drops",
        "ecn_marks",
        "kmax",
        "kmin",
        "max_qbytes",
        "paused",
        "paused_s",
        "pauses_rcvd",
        "pauses_sent",
        "q",
        "qbytes",
        "sched",
        "slope",
        "tx_bytes",
        "tx_pkts",
    )

    def __init__(self, classes: TrafficClasses) -> None:
        n = len(classes)
        self.q: list[deque[Packet]] = [deque() for _ in range(n)]
        self.sched = ClassScheduler(classes)
        self.paused = [False] * n
        self._paused_at = [0.0] * n
        for name in (
            "qbytes",
            "max_qbytes",
            "tx_bytes",
            "tx_pkts",
            "drops",
            "drop_bytes",
            "ecn_marks",
            "pauses_rcvd",
            "pauses_sent",
        ):
            setattr(self, name, [0] * n)
        self.paused_s = [0.0] * n
        self.kmin = [_INF] * n
        self.kmax = [_INF] * n
        self.slope = [0.0] * n

    def push(self, pkt: Packet) -> None:
        c = pkt.tc
        self.q[c].append(pkt)
        b = self.qbytes[c] + pkt.wire
        self.qbytes[c] = b
        if b > self.max_qbytes[c]:
            self.max_qbytes[c] = b

    def pop(self) -> Packet | None:
        """The next DATA packet the scheduler picks among the unpaused classes, or None."""
        head = [
            q[0].wire if q and not p else None for q, p in zip(self.q, self.paused, strict=True)
        ]
        c = self.sched.pick(head)
        if c is None:
            return None
        pkt = self.q[c].popleft()
        self.qbytes[c] -= pkt.wire
        return pkt

    def eligible(self) -> bool:
        """Some class has a queued packet and is not paused."""
        return any(q and not p for q, p in zip(self.q, self.paused, strict=True))

    def queued(self) -> bool:
        return any(self.q)


class _Classed:
    """The transmit side shared by :class:`ClassedPort` and :class:`ClassedSwitchPort` (a slot-
    free mixin; the host class provides the :class:`Port` state and ``_leave``)."""

    __slots__ = ()
    tcq: ClassQueues

    def send(self: Any, pkt: Packet) -> None:
        """Queue ``pkt`` in its class (or its control queue), or start it now if the port is
        free and its class not paused."""
        if (
            not self._tx_pending
            and not self._pulling
            and (pkt.kind or not (self.paused or self.tcq.paused[pkt.tc]))
        ):
            now = self._env._now
            if now >= self._busy_until:
                self._start(pkt, now)
                return
            self._schedule_tx(self._busy_until)
        self._enqueue(pkt)

    def _enqueue(self: Any, pkt: Packet) -> None:
        if pkt.kind:
            self._hq.append(pkt)
        else:
            self.tcq.push(pkt)
        b = self.qbytes + pkt.wire
        self.qbytes = b
        if b > self.max_qbytes:
            self.max_qbytes = b

    def _schedule_tx(self: Any, t: float) -> None:
        self._tx_pending = True
        ev = self._txev
        ev.callbacks = self._txcb
        heappush(self._heap, (t, 1, next(self._eid), ev))

    def _start(self: Any, pkt: Packet, now: float) -> None:
        if not pkt.kind:
            c = pkt.tc
            self.tcq.tx_bytes[c] += pkt.wire
            self.tcq.tx_pkts[c] += 1
        more = bool(self._hq or self._macq or self.source is not None or self.tcq.queued())
        self._launch(pkt, now, more)

    def _tx_done(self: Any, _ev: object) -> None:
        if self._macq:
            self._tx_pending = False
            self._start_mac(self._macq.popleft())
            return
        now = self._env._now
        if self._hq:
            pkt = self._hq.popleft()
        else:
            pkt = None if self.paused else self.tcq.pop()
            if pkt is None:
                self._tx_pending = False
                src = self.source
                if src is None or self.paused:
                    return
                self._pulling = True  # as Port._tx_done: a send() from the source queues
                pkt = src()
                self._pulling = False
                if pkt is None:
                    if self._hq or (not self.paused and self.tcq.eligible()):
                        self._tx_done(None)  # the source pushed instead of returning
                    return
                if not pkt.kind and self.tcq.paused[pkt.tc]:
                    # a source that does not schedule classes (a line-rate Host): the packet
                    # waits in its class queue until the class resumes
                    self._enqueue(pkt)
                    return
                self._start(pkt, now)
                return
        self._tx_pending = False
        self._leave(pkt, now)
        self._start(pkt, now)

    def _start_mac(self: Any, frame: Packet) -> None:
        # Port._start_mac schedules the next transmission only for its own queues: the class
        # queues must be checked too, or a DATA packet queued behind a PFC frame would wait
        # for the next arrival (the differential test in tests/fabric/test_classes.py)
        super()._start_mac(frame)  # type: ignore[misc]
        if not self._tx_pending and self.tcq.queued():
            self._schedule_tx(self._busy_until)

    def _on_mac(self: Any, frame: Packet) -> None:
        if frame.kind == PAUSE:
            self.pause_class(frame.tc)
        else:
            self.resume_class(frame.tc)

    def pause_class(self: Any, c: int) -> None:
        """Stop starting DATA packets of class ``c`` (a PFC PAUSE for its priority)."""
        cq = self.tcq
        if not cq.paused[c]:
            cq.paused[c] = True
            cq.pauses_rcvd[c] += 1
            cq._paused_at[c] = self._env._now
            self.pauses_rcvd += 1

    def resume_class(self: Any, c: int) -> None:
        """Allow class ``c`` again and restart transmission if anything waits."""
        cq = self.tcq
        if cq.paused[c]:
            cq.paused[c] = False
            dt = self._env._now - cq._paused_at[c]
            cq.paused_s[c] += dt
            self.paused_s += dt
            self.kick()

    def queued(self: Any) -> Iterator[Packet]:
        return chain(self._hq, *self.tcq.q)

    @property
    def queued_packets(self: Any) -> int:
        return len(self._hq) + sum(len(q) for q in self.tcq.q)

    @property
    def idle(self: Any) -> bool:
        return (
            not self._tx_pending
            and not self._hq
            and not self.tcq.queued()
            and self._env._now >= self._busy_until
        )


class ClassedPort(_Classed, Port):
    """A NIC-side (or host-side) egress port with traffic classes."""

    __slots__ = ("tcq",)

    def set_classes(self, classes: TrafficClasses) -> None:
        self.tcq = ClassQueues(classes)

    def _leave(self, pkt: Packet, now: float) -> None:
        self.qbytes -= pkt.wire


class ClassedSwitchPort(_Classed, SwitchPort):
    """A switch egress port with traffic classes: leaving the queue releases the shared
    buffer and the per-class ingress count (a per-class PFC resume at xon), marks ECN by the
    class queue's depth, stamps INT and returns InfiniBand credits (never, with classes)."""

    __slots__ = ("tcq",)

    def set_classes(self, classes: TrafficClasses) -> None:
        self.tcq = ClassQueues(classes)

    def _leave(self, pkt: Packet, now: float) -> None:
        q, ing = self._release(pkt)
        if pkt.kind:
            return
        sw = self.switch
        c = pkt.tc
        r = ing.crx[c] - pkt.wire  # type: ignore[attr-defined]
        ing.crx[c] = r  # type: ignore[attr-defined]
        if ing.cxoff[c] and r <= sw._xon:  # type: ignore[attr-defined]
            sw._send_resume_class(ing, c)  # type: ignore[attr-defined]
        cq = self.tcq
        qc = cq.qbytes[c]  # pop already took the packet out of its class queue
        kmin = cq.kmin[c]
        if (
            qc > kmin
            and (qc > cq.kmax[c] or self._rand() < (qc - kmin) * cq.slope[c])
            and not pkt.ecn
        ):
            pkt.ecn = True
            self.ecn_marks += 1
            cq.ecn_marks[c] += 1
        if pkt.int_rec is not None:
            pkt.int_rec.append((q, self.tx_bytes, now, self.rate_bps))


class ClassIngress(Ingress):
    """An :class:`~podsim.fabric.switch.Ingress` that also counts DATA bytes per class
    (``crx``, peak ``max_crx``) and pauses classes one by one (``cxoff``)."""

    __slots__ = ("crx", "cxoff", "max_crx")

    def __init__(self, port: Port, n: int) -> None:
        super().__init__(port)
        self.crx = [0] * n
        self.max_crx = [0] * n
        self.cxoff = [False] * n


class ClassedSwitch(Switch):
    """A :class:`~podsim.fabric.switch.Switch` whose egress ports are
    :class:`ClassedSwitchPort` (see the module docstring)."""

    def __init__(
        self,
        env: simpy.Environment,
        name: str,
        config: SwitchConfig,
        *,
        seed: int = 0,
        classes: TrafficClasses,
    ) -> None:
        if config.credit_buffer_bytes is not None:
            raise ValueError(
                f"switch {name}: traffic classes with InfiniBand credit flow control are not "
                "modelled (InfiniBand separates traffic with virtual lanes, each with its own "
                "credits); use Ethernet switches (no credit_buffer) or one class"
            )
        if config.pfc and config.pfc_hold_until_sent:
            raise ValueError(
                f"switch {name}: pfc.hold_until_sent is modelled for one traffic class only "
                "(the per-class PFC count releases a frame when it starts serialising)"
            )
        super().__init__(env, name, config, seed=seed)
        self.classes = classes
        #: per class: lossless (PFC) or lossy
        self._cpfc = [c.pfc for c in classes.classes]
        self._xoff = config.pfc_xoff_bytes

    def add_ingress(self, port: Port) -> None:
        super().add_ingress(port)
        self.ingresses[port] = ClassIngress(port, len(self.classes))

    def add_port(self, port: SwitchPort) -> None:
        super().add_port(port)
        cfg = self.config
        tcq = port.tcq  # type: ignore[attr-defined]
        for i, tc in enumerate(self.classes.classes):
            if not cfg.ecn:
                continue
            kmin = cfg.ecn_kmin_bytes if tc.ecn_kmin_bytes is None else tc.ecn_kmin_bytes
            kmax = cfg.ecn_kmax_bytes if tc.ecn_kmax_bytes is None else tc.ecn_kmax_bytes
            kmax = max(kmax, kmin)
            tcq.kmin[i], tcq.kmax[i] = kmin, kmax
            tcq.slope[i] = cfg.ecn_pmax / (kmax - kmin) if kmax > kmin else 0.0

    def receive(self, pkt: Packet) -> None:
        """Route; straight to the wire when the egress is free and the class not paused;
        else admit into the shared buffer and the class queue."""
        port = self._route(pkt)
        if port is None:
            return
        now = self.env._now
        if (
            not port._tx_pending
            and (pkt.kind or not port.tcq.paused[pkt.tc])  # type: ignore[attr-defined]
            and now >= port._busy_until
        ):
            if pkt.int_rec is not None and not pkt.kind:
                pkt.int_rec.append((port.qbytes, port.tx_bytes, now, port.rate_bps))
            port._start(pkt, now)
            return
        self._admit(port, pkt)

    def _admit(self, port: SwitchPort, pkt: Packet) -> None:
        """Shared-buffer admission (the dynamic threshold on the class queue, for lossy
        classes), queueing, the egress's transmit event and a per-class PFC pause."""
        kind, c, w = pkt.kind, pkt.tc, pkt.wire
        cq: ClassQueues = port.tcq  # type: ignore[attr-defined]
        used = self.used + w
        lossy = not kind and not self._cpfc[c]
        if used > self.buffer_bytes or (
            lossy and cq.qbytes[c] + w > self._alpha * (self.buffer_bytes - self.used)
        ):
            port.drops += 1
            port.drop_bytes += pkt.size
            port.drop_wire += w
            if not kind:
                cq.drops[c] += 1
                cq.drop_bytes[c] += pkt.size
            return
        self.used = used
        self.max_used = max(self.max_used, used)
        ing: ClassIngress = self.ingresses[pkt.link]  # type: ignore[assignment]
        ing.rx_bytes += w
        ing.max_rx_bytes = max(ing.max_rx_bytes, ing.rx_bytes)
        port._enqueue(pkt)  # type: ignore[attr-defined]
        if not port._tx_pending and (kind or not cq.paused[c]):
            port._schedule_tx(port._busy_until)  # type: ignore[attr-defined]
        if kind:
            return
        r = ing.crx[c] + w
        ing.crx[c] = r
        ing.max_crx[c] = max(ing.max_crx[c], r)
        if self._cpfc[c] and r > self._xoff and not ing.cxoff[c]:
            self._send_pause_class(ing, c)

    def _send_pause_class(self, ing: ClassIngress, c: int) -> None:
        ing.cxoff[c] = True
        self._mac_frame(ing, PAUSE, c)

    def _send_resume_class(self, ing: ClassIngress, c: int) -> None:
        ing.cxoff[c] = False
        self._mac_frame(ing, RESUME, c)

    def _mac_frame(self, ing: ClassIngress, kind: int, c: int) -> None:
        """A PFC frame for class ``c`` back up the link ``ing`` counts (802.1Qbb: the frame
        carries a per-priority enable vector; podsim sends one frame per class and event)."""
        inp = ing.port
        back = inp.reverse
        frame = Packet(0, -1, -1, kind=kind, overhead=PAUSE_FRAME_WIRE_BYTES)
        frame.tc = c
        if kind == PAUSE:
            back.pauses_sent += 1
            back.tcq.pauses_sent[c] += 1  # type: ignore[union-attr]
        back.send_mac(frame, inp)
