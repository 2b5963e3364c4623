# cython: language_level=3, annotation_typing=False
"""Egress ports: one direction of a full-duplex link, with its transmit queue.

Timing model (docs/physics.md, "400GbE over 112G PAM4"):

* serialisation of a packet of ``wire`` bytes (payload + 82 B RoCEv2 overhead, at least 84 B)
  takes ``8 * wire / rate_bps`` at the PHY's MAC rate;
* propagation is ``length_m * 5 ns/m`` (:data:`podsim.fabric.phy.PROPAGATION_S_PER_M`);
* each hop adds the PHY's FEC + PCS latency (``PhyProfile.fec_latency_s``);
* a switch adds its port-to-port latency. A cut-through switch starts forwarding when the head
  has arrived, so its ingress serialisation overlaps the egress one; a store-and-forward switch
  waits for the tail (one more serialisation per hop).

So a packet whose transmission starts at ``t`` reaches the next node at
``t + [ser] + prop + fec + rx_latency`` where ``[ser]`` is included when the receiver waits for
the whole frame (an endpoint or a store-and-forward switch). For one packet on an idle path
this gives exactly serialisation + propagation + switch latency + FEC per hop. Cut-through
assumes the egress link is not faster than the ingress one (otherwise a real switch would
underrun and fall back to store-and-forward).

Engine (docs/design.md, "Making SimPy fast"): a port is not a SimPy process. An idle port puts the
packet straight onto the event heap as its own arrival event (serialisation + propagation in
one event). Only when something is queued behind it does the port schedule one reusable
"transmit done" event at the end of the serialisation. Under load that is two events per
packet-hop, on an idle path one.

The wire: packets on a link arrive in the order they were sent (a frame starts only once the
previous one has left, and the delay after the start is the same for every frame), so the
port keeps the packets on its wire in a FIFO (``_wire``, heap entries ``(time, 1, id,
packet)``) and only the head is on the event heap; when the head arrives, its first callback
(:meth:`Port._wire_next`) puts the next one there with the time and tie-break id it was given
when it was sent. The order in which events run is exactly what it would be with every packet
on the heap (the same keys, and the heap's minimum is always a FIFO head), while the heap holds
one packet per busy link instead of every packet in flight: on a 128-host fat-tree with 1 us
links about 1,400 entries instead of 12,000, which halves the cost of each heap operation. A
frame that would arrive before the last one on the wire (a port whose delay was changed while
frames were in flight) bypasses the FIFO and goes onto the heap itself, so the order stays exact
whatever the delays.

Queues: strict priority, control (ACK/NACK/CNP/PROBE) before DATA; PFC pause stops DATA only.
PFC pause/resume MAC frames go before both. A host-side (NIC) port has an unbounded queue; the
NIC is expected to pace into it, ideally through :attr:`Port.source` (pull model, below).

Credit-based flow control (InfiniBand, IBTA vol. 1 section 7.9 "Flow control"; enabled per link
by :meth:`Port.enable_credits`): the receiver grants the sender its input buffer as credits;
the sender spends a DATA frame's wire bytes when it starts the frame and stops starting DATA
while fewer than :data:`~podsim.fabric.packet.MAX_DATA_WIRE_BYTES` remain (so it never sends
into a buffer that cannot take the frame: no drop, no overrun, no headroom); the receiver
returns a frame's credits when the frame leaves its buffer (or at once when it never entered
it, cut through to an idle egress), and they reach the sender one propagation later. Control
packets are not credited (like PFC, which never pauses them). Assumed: credit updates take no
link time (IB's flow-control packets are a few bytes) and are sent per frame rather than in
the periodic FCCL updates; a link that comes back up starts with its full credit again.

Pull model for NICs: set ``port.source = fn``; whenever the port is about to go idle (and is not
paused) it calls ``fn()``, which returns the next packet to transmit or ``None``. After
returning ``None`` the NIC calls :meth:`Port.kick` when it has something again (or simply
:meth:`Port.send`). So a NIC never needs a Store or a process to keep its port busy. Calling
``kick()`` or ``send()`` from inside the source is safe (the kick is ignored, the sent packet
queues behind the one being pulled).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from heapq import heappush
from itertools import chain
from typing import TYPE_CHECKING

import simpy
from podsim.fabric.packet import MAX_DATA_WIRE_BYTES, PAUSE, Packet

if TYPE_CHECKING:
    from podsim.fabric.switch import Switch

__all__ = ["Port", "packets_on_wires"]

_INF = float("inf")


def packets_on_wires(env: simpy.Environment, ports: Iterable[Port]) -> Iterator[Packet]:
    """Every packet on a wire now (PFC frames included): those on the ``ports``' wire FIFOs,
    and those on the event heap that are not a FIFO's head (frames that bypassed the FIFO, PFC
    frames). ``ports`` must be every port of the network. O(packets in flight + events)."""
    for p in ports:
        for e in p._wire:
            yield e[3]
    for e in env._queue:
        ev = e[3]
        if isinstance(ev, Packet) and ev.link is not None:
            w = ev.link._wire
            if not (w and w[0][3] is ev):
                yield ev


class _TxDone:
    """The port's reusable "serialisation finished" event (at most one is ever scheduled)."""

    __slots__ = ("callbacks",)
    _ok = True


def _unattached(port: Port) -> Callable[[Packet], None]:
    def fail(pkt: Packet) -> None:
        raise RuntimeError(
            f"packet {pkt!r} reached endpoint {port.dst_node!r}, but nothing is attached "
            "there; call Network.attach(endpoint, receiver) first"
        )

    return fail


class Port:
    """An egress port from ``src_node`` to ``dst_node`` (one direction of a link).

    Public state (plain attributes, read them freely; counters only ever grow):

    ``name`` ``"u->v"``; ``rate_bps``; ``length_m``; ``prop_s``; ``fec_s``; ``rx_latency_s``;
    ``qbytes`` bytes waiting (not counting the frame being serialised); ``max_qbytes``;
    ``tx_bytes``/``tx_pkts`` wire bytes and packets transmitted (PFC frames count in
    ``tx_bytes``, ``mac_frames`` and ``mac_bytes``); ``drops``/``drop_bytes`` packets and
    payload bytes lost at this port (buffer admission, link down, frame errors; ``drop_wire``
    their wire bytes), of which ``lost_pkts``/``lost_bytes``/``lost_wire`` were lost on the
    wire after transmission (link down, frame errors: see :mod:`podsim.fabric.faults`);
    ``ecn_marks``; ``pauses_sent`` (PFC pause frames
    this port transmitted), ``pauses_rcvd`` (times this port was paused), ``paused`` (now),
    ``paused_s`` (total time paused); ``up``; ``reverse`` the port of the opposite direction;
    ``source`` the NIC's pull callback (see module docstring).
    """

    __slots__ = (
        "_after",
        "_busy_until",
        "_cr",
        "_cr0",
        "_deliver",
        "_eid",
        "_env",
        "_heap",
        "_hq",
        "_mac_after",
        "_macq",
        "_paused_at",
        "_pulling",
        "_q",
        "_rx_ser",
        "_saved",
        "_spb",
        "_tx_pending",
        "_txcb",
        "_txev",
        "_wire",
        "_wire_next",
        "credit_stalls",
        "drop_bytes",
        "drop_wire",
        "drops",
        "dst_node",
        "ecn_marks",
        "fec_s",
        "length_m",
        "lost_bytes",
        "lost_pkts",
        "lost_wire",
        "mac_bytes",
        "mac_frames",
        "max_qbytes",
        "name",
        "on_lost",
        "paused",
        "paused_s",
        "pauses_rcvd",
        "pauses_sent",
        "prop_s",
        "qbytes",
        "rate_bps",
        "reverse",
        "rx_latency_s",
        "source",
        "src_node",
        "switch",
        "tier",
        "tx_bytes",
        "tx_pkts",
        "up",
    )

    def __init__(
        self,
        env: simpy.Environment,
        src_node: str,
        dst_node: str,
        rate_bps: float,
        *,
        prop_s: float = 0.0,
        fec_s: float = 0.0,
        rx_latency_s: float = 0.0,
        rx_store_forward: bool = True,
        length_m: float = 0.0,
        tier: str = "",
    ) -> None:
        if not rate_bps > 0:
            raise ValueError(f"port {src_node}->{dst_node}: rate_bps={rate_bps!r} must be > 0")
        for key, val in (("prop_s", prop_s), ("fec_s", fec_s), ("rx_latency_s", rx_latency_s)):
            if not val >= 0:
                raise ValueError(f"port {src_node}->{dst_node}: {key}={val!r} must be >= 0")
        self._env = env
        self._heap = env._queue
        self._eid = env._eid
        self.src_node = src_node
        self.dst_node = dst_node
        self.name = f"{src_node}->{dst_node}"
        self.tier = tier
        self.rate_bps = float(rate_bps)
        self.length_m = float(length_m)
        self.prop_s = float(prop_s)
        self.fec_s = float(fec_s)
        self.rx_latency_s = float(rx_latency_s)
        self._spb = 8.0 / self.rate_bps
        self._rx_ser = bool(rx_store_forward)
        self._after = self.prop_s + self.fec_s + self.rx_latency_s
        self._mac_after = self.prop_s + self.fec_s
        self._q: deque[Packet] = deque()
        self._hq: deque[Packet] = deque()
        self._macq: deque[Packet] = deque()
        self._busy_until = 0.0
        self._tx_pending = False
        self._pulling = False
        self._txev = _TxDone()
        self._txcb = (self._tx_done,)
        #: packets on the wire, in arrival order; only the head is on the event heap
        self._wire: deque[tuple[float, int, int, Packet]] = deque()
        self._wire_next = self._make_wire_next()
        #: a sent packet's callbacks: advance the wire, then the receiver
        self._deliver: tuple[Callable[[Packet], object], ...] = (
            self._wire_next,
            _unattached(self),
        )
        self._saved = self._deliver
        self._paused_at = 0.0
        self.qbytes = 0
        self.max_qbytes = 0
        self.tx_bytes = 0
        self.tx_pkts = 0
        self.mac_frames = 0
        self.mac_bytes = 0
        self.drops = 0
        self.drop_wire = 0
        self.lost_pkts = 0
        self.lost_bytes = 0
        self.lost_wire = 0
        #: called as ``on_lost(port, pkt)`` for every packet lost on this wire (fault records)
        self.on_lost: Callable[[Port, Packet], object] | None = None
        self.drop_bytes = 0
        self.ecn_marks = 0
        self.pauses_sent = 0
        self.pauses_rcvd = 0
        self.paused = False
        self.paused_s = 0.0
        #: credit-based flow control (module docstring): credits left, as granted; None = off
        self._cr: float | None = None
        self._cr0 = 0.0
        self.credit_stalls = 0
        self.up = True
        self.reverse: Port | None = None
        self.source: Callable[[], Packet | None] | None = None
        # PFC ingress accounting at the *receiving* switch: bytes of packets this port sent
        # that are still buffered there, and whether that switch has paused us.
        self.switch: Switch | None = None  # the switch owning this port (None on a NIC)

    # ---- wiring ---------------------------------------------------------------------------
    def connect(self, receive: Callable[[Packet], object]) -> None:
        """Deliver arriving packets to ``receive(pkt)`` (a switch, or a NIC/host endpoint)."""
        if self.up:
            self._deliver = (self._wire_next, receive)
        else:
            self._saved = (self._wire_next, receive)

    def set_up(self, up: bool) -> None:
        """Take the link direction down (packets transmitted from now on are lost and counted
        in ``drops``) or bring it back up. Packets already on the wire are delivered."""
        if up == self.up:
            return
        self.up = up
        if up:
            self._deliver = self._saved
            if self._cr is not None:  # the link re-initialises its flow control
                self._cr = self._cr0
                self.resume()
        else:
            self._saved = self._deliver
            self._deliver = (self._wire_next, self._lost)

    def count_lost(self, pkt: Packet) -> None:
        """Count ``pkt`` as lost on this link (a drop too), whatever lost it."""
        self.drops += 1
        self.drop_bytes += pkt.size
        self.drop_wire += pkt.wire
        self.lost_pkts += 1
        self.lost_bytes += pkt.size
        self.lost_wire += pkt.wire

    def _lost(self, pkt: Packet) -> None:
        self.count_lost(pkt)
        if self._cr is not None and not pkt.kind:  # never reached the receiver's buffer
            self.return_credit(pkt.wire)
        if self.on_lost is not None:
            self.on_lost(self, pkt)

    @property
    def receiver(self) -> Callable[[Packet], object]:
        """What arriving packets are handed to while the link is up (even when it is down
        now): the far end's ``receive``, or a fault model wrapping it."""
        return (self._deliver if self.up else self._saved)[1]

    def set_receiver(self, receive: Callable[[Packet], object]) -> None:
        """Replace :attr:`receiver` (fault models wrap it); packets already on the wire keep
        the receiver they were sent to. Unlike :meth:`connect` this is meant to be undone by
        setting the previous receiver back."""
        self.connect(receive)

    def set_rate(self, rate_bps: float) -> None:
        """Change the MAC rate (link degradation, e.g. a lost PAM4 lane: 400G -> 300G). The
        frame being serialised finishes at the old rate; later frames use the new one."""
        if not rate_bps > 0 or rate_bps == _INF:
            raise ValueError(f"port {self.name}: rate_bps={rate_bps!r} must be a finite rate > 0")
        self.rate_bps = float(rate_bps)
        self._spb = 8.0 / self.rate_bps

    def set_store_forward(self, store_forward: bool) -> bool:
        """Make the receiver wait for the whole frame (True) or cut through (False); returns
        the previous setting. A switch cannot cut through from a link slower than its egress
        (it would underrun), so a degraded link into a switch is stored and forwarded."""
        old = self._rx_ser
        self._rx_ser = bool(store_forward)
        return old

    # ---- state for NICs -------------------------------------------------------------------
    @property
    def busy_until(self) -> float:
        """Time the frame now being serialised ends (<= now when the wire is free)."""
        return self._busy_until

    @property
    def idle(self) -> bool:
        """True when a packet sent now would start serialising immediately."""
        return (
            not self._tx_pending
            and not self._q
            and not self._hq
            and self._env._now >= self._busy_until
        )

    @property
    def queued_packets(self) -> int:
        return len(self._q) + len(self._hq)

    def queued(self) -> Iterator[Packet]:
        """Every packet waiting in this port's queues (control and DATA; not PFC frames)."""
        return chain(self._q, self._hq)

    def serialisation_s(self, wire_bytes: int) -> float:
        """Time to serialise ``wire_bytes`` at this port's MAC rate."""
        return wire_bytes * self._spb

    def arrival_delay_s(self, wire_bytes: int) -> float:
        """Idle-link delay from the start of transmission to delivery at the next node."""
        return (wire_bytes * self._spb if self._rx_ser else 0.0) + self._after

    # ---- transmit -------------------------------------------------------------------------
    def send(self, pkt: Packet) -> None:
        """Queue ``pkt`` for transmission (or start it now if the port is free).

        NIC-side ports never drop; switch ports get packets through :meth:`Switch.receive`,
        which applies buffer admission first.
        """
        kind = pkt.kind
        if not self._tx_pending and (kind or not self.paused) and not self._pulling:
            now = self._env._now
            if now >= self._busy_until:
                # idle: nothing is queued (a queue implies a pending tx event or a pause);
                # inlined _launch(pkt, now, self.source is not None): see _send_readable
                w = pkt.wire
                end = now + w * self._spb
                self._busy_until = end
                self.tx_bytes += w
                self.tx_pkts += 1
                pkt.link = self
                # inlined _put_on_wire(pkt, arrival)
                t = (end if self._rx_ser else now) + self._after
                e = (t, 1, next(self._eid), pkt)
                wire = self._wire
                if not wire:
                    pkt.callbacks = self._deliver
                    wire.append(e)
                    heappush(self._heap, e)
                elif t >= wire[-1][0]:
                    pkt.callbacks = self._deliver
                    wire.append(e)
                else:
                    pkt.callbacks = self._deliver[1:]
                    heappush(self._heap, e)
                if self._cr is not None and not kind:
                    self.spend_credit(w)
                if self.source is not None:  # queued DATA (if any) is paused: resume kicks
                    self._tx_pending = True
                    ev = self._txev
                    ev.callbacks = self._txcb
                    heappush(self._heap, (end, 1, next(self._eid), ev))
                return
            self._tx_pending = True
            ev = self._txev
            ev.callbacks = self._txcb
            heappush(self._heap, (self._busy_until, 1, next(self._eid), ev))
        if kind:
            self._hq.append(pkt)
        else:
            self._q.append(pkt)
        b = self.qbytes + pkt.wire
        self.qbytes = b
        if b > self.max_qbytes:
            self.max_qbytes = b

    def _send_readable(self, pkt: Packet) -> None:
        """:meth:`send` with its transmit start not inlined (the differential twin)."""
        kind = pkt.kind
        if not self._tx_pending and (kind or not self.paused) and not self._pulling:
            now = self._env._now
            if now >= self._busy_until:
                # queued DATA (if any) is paused: a source's port checks back when free
                self._launch(pkt, now, self.source is not None)
                return
            self._tx_pending = True
            ev = self._txev
            ev.callbacks = self._txcb
            heappush(self._heap, (self._busy_until, 1, next(self._eid), ev))
        if kind:
            self._hq.append(pkt)
        else:
            self._q.append(pkt)
        b = self.qbytes + pkt.wire
        self.qbytes = b
        if b > self.max_qbytes:
            self.max_qbytes = b

    def kick(self) -> None:
        """Tell the port its :attr:`source` may have a packet again (cheap if busy)."""
        if self._tx_pending or self._pulling:
            return
        if self._env._now >= self._busy_until:
            self._tx_done(None)
        else:
            self._tx_pending = True
            ev = self._txev
            ev.callbacks = self._txcb
            heappush(self._heap, (self._busy_until, 1, next(self._eid), ev))

    def _launch(self, pkt: Packet, now: float, more: bool) -> None:
        """Put ``pkt`` on the wire at ``now``: the port is busy for its serialisation, the
        counters count it, its delivery is scheduled one serialisation (store-and-forward
        receivers) plus propagation, FEC and the next node's latency later; with ``more`` the
        port's transmit-done event is scheduled for when the wire frees. The one readable
        transmit start: :meth:`send`, :meth:`SwitchPort._tx_done` and
        :meth:`podsim.fabric.switch.Switch.receive` inline it on their hot paths, beside their
        readable twins (:mod:`podsim.fabric.hotpaths` runs both)."""
        end = now + pkt.wire * self._spb
        self._busy_until = end
        self.tx_bytes += pkt.wire
        self.tx_pkts += 1
        pkt.link = self
        self._put_on_wire(pkt, (end if self._rx_ser else now) + self._after)
        if self._cr is not None and not pkt.kind:
            self.spend_credit(pkt.wire)
        self._tx_pending = more
        if more:
            ev = self._txev
            ev.callbacks = self._txcb
            heappush(self._heap, (end, 1, next(self._eid), ev))

    def _put_on_wire(self, pkt: Packet, t: float) -> None:
        """Schedule ``pkt``'s arrival at the far end at ``t`` (module docstring, "The wire"):
        behind the packets already on the wire, or straight onto the event heap when the wire
        is empty (it becomes the head) or when it would overtake the last one."""
        e = (t, 1, next(self._eid), pkt)
        wire = self._wire
        if wire and t < wire[-1][0]:  # would overtake: not in order, so not on the FIFO
            pkt.callbacks = self._deliver[1:]
            heappush(self._heap, e)
            return
        pkt.callbacks = self._deliver
        wire.append(e)
        if len(wire) == 1:
            heappush(self._heap, e)

    def _make_wire_next(self) -> Callable[[Packet], None]:
        """The first callback of every packet on this port's wire FIFO: the arriving packet
        (the head) leaves the FIFO and the next one goes onto the event heap. A closure over
        the FIFO and the heap (cheaper per call than a method reading them from ``self``)."""
        wire = self._wire
        heap = self._heap
        popleft = wire.popleft

        def wire_next(_pkt: Packet) -> None:
            popleft()
            if wire:
                heappush(heap, wire[0])

        return wire_next

    def _start(self, pkt: Packet, now: float) -> None:
        self._launch(pkt, now, bool(self._q or self._hq or self._macq or self.source is not None))

    def _tx_done(self, _ev: object) -> None:
        """The frame on the wire has left: start the next one (MAC frame, control, DATA, or
        what the NIC's source gives). Runs once per NIC transmission: the transmit start is
        inlined (see :meth:`_tx_done_readable`)."""
        if self._macq:
            self._tx_pending = False
            self._start_mac(self._macq.popleft())
            return
        if self._hq:
            pkt = self._hq.popleft()
            self.qbytes -= pkt.wire
        elif self._q and not self.paused:
            pkt = self._q.popleft()
            self.qbytes -= pkt.wire
        else:
            src = self.source
            if src is None or self.paused:
                self._tx_pending = False
                return
            # while the NIC's source runs, a kick() from inside it is a no-op and a send()
            # queues, so no second frame can start at the same instant
            self._tx_pending = False
            self._pulling = True
            pkt = src()
            self._pulling = False
            if pkt is None:
                if self._hq or (self._q and not self.paused):
                    self._tx_done(None)  # the source pushed instead of returning
                return
        # inlined self._start(pkt, now), i.e. _launch(pkt, now, more) and _put_on_wire
        more = bool(self._q or self._hq or self._macq or self.source is not None)
        now = self._env._now
        w = pkt.wire
        end = now + w * self._spb
        self._busy_until = end
        self.tx_bytes += w
        self.tx_pkts += 1
        pkt.link = self
        heap = self._heap
        t = (end if self._rx_ser else now) + self._after
        e = (t, 1, next(self._eid), pkt)
        wire = self._wire
        if not wire:
            pkt.callbacks = self._deliver
            wire.append(e)
            heappush(heap, e)
        elif t >= wire[-1][0]:
            pkt.callbacks = self._deliver
            wire.append(e)
        else:
            pkt.callbacks = self._deliver[1:]
            heappush(heap, e)
        if self._cr is not None and not pkt.kind:
            self.spend_credit(w)
        self._tx_pending = more
        if more:
            ev = self._txev
            ev.callbacks = self._txcb
            heappush(heap, (end, 1, next(self._eid), ev))

    def _tx_done_readable(self, _ev: object) -> None:
        """:meth:`_tx_done` with its transmit start not inlined (the differential twin)."""
        if self._macq:
            self._tx_pending = False
            self._start_mac(self._macq.popleft())
            return
        if self._hq:
            pkt = self._hq.popleft()
        elif self._q and not self.paused:
            pkt = self._q.popleft()
        else:
            src = self.source
            if src is None or self.paused:
                self._tx_pending = False
                return
            self._tx_pending = False
            self._pulling = True
            pkt = src()
            self._pulling = False
            if pkt is None:
                if self._hq or (self._q and not self.paused):
                    self._tx_done(None)  # the source pushed instead of returning
                return
            self._start(pkt, self._env._now)
            return
        self._tx_pending = False
        self.qbytes -= pkt.wire
        self._start(pkt, self._env._now)

    # ---- credit-based flow control -----------------------------------------------------------
    def enable_credits(self, credit_bytes: int) -> None:
        """Credit-based flow control on this link (module docstring): the receiver grants
        ``credit_bytes`` of input buffer, at least one largest DATA frame."""
        if not credit_bytes >= MAX_DATA_WIRE_BYTES:
            raise ValueError(
                f"port {self.name}: credit_bytes={credit_bytes!r} must hold at least one "
                f"largest DATA frame ({MAX_DATA_WIRE_BYTES} B)"
            )
        self._cr = self._cr0 = float(credit_bytes)

    def spend_credit(self, wire: int) -> None:
        """A DATA frame of ``wire`` bytes started: spend its credits; stop starting DATA when
        fewer than one largest frame's worth remain."""
        c = self._cr - wire
        self._cr = c
        if c < MAX_DATA_WIRE_BYTES and not self.paused:
            self.paused = True
            self.credit_stalls += 1
            self._paused_at = self._env._now

    def return_credit(self, wire: int) -> None:
        """``wire`` bytes of credit came back from the receiver; resume when a largest frame
        fits again."""
        c = self._cr + wire
        self._cr = c
        if c >= MAX_DATA_WIRE_BYTES:
            self.resume()

    # ---- PFC ------------------------------------------------------------------------------
    def send_mac(self, frame: Packet, target: Port) -> None:
        """Transmit a link-local MAC control frame (PFC PAUSE/RESUME) ahead of all queued
        packets; on arrival it acts on ``target`` (the opposite port of this link)."""
        frame.meta = target
        if not self._tx_pending:
            now = self._env._now
            if now >= self._busy_until:
                self._start_mac(frame)
                return
            self._tx_pending = True
            ev = self._txev
            ev.callbacks = self._txcb
            heappush(self._heap, (self._busy_until, 1, next(self._eid), ev))
        self._macq.append(frame)

    def _start_mac(self, frame: Packet) -> None:
        now = self._env._now
        end = now + frame.wire * self._spb
        self._busy_until = end
        self.tx_bytes += frame.wire
        self.mac_frames += 1
        self.mac_bytes += frame.wire
        frame.link = self
        frame.callbacks = (frame.meta._on_mac,)
        # MAC control frames are consumed by the receiving MAC: no switch pipeline latency.
        heappush(self._heap, (end + self._mac_after, 1, next(self._eid), frame))
        if self._q or self._hq or self._macq or self.source is not None:
            self._tx_pending = True
            ev = self._txev
            ev.callbacks = self._txcb
            heappush(self._heap, (end, 1, next(self._eid), ev))

    def _on_mac(self, frame: Packet) -> None:
        if frame.kind == PAUSE:
            self.pause()
        else:
            self.resume()

    def pause(self) -> None:
        """Stop starting DATA packets (PFC XOFF); the frame on the wire finishes."""
        if not self.paused:
            self.paused = True
            self.pauses_rcvd += 1
            self._paused_at = self._env._now

    def resume(self) -> None:
        """Allow DATA again (PFC XON) and restart transmission if anything waits."""
        if self.paused:
            self.paused = False
            self.paused_s += self._env._now - self._paused_at
            self.kick()

    def __repr__(self) -> str:
        return (
            f"Port({self.name} {self.rate_bps / 1e9:g}G q={self.qbytes}B "
            f"tx={self.tx_pkts}pkts{' PAUSED' if self.paused else ''})"
        )
