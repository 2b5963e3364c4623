"""The congestion-control plug-in API, after NVIDIA DOCA PCC's event set.

A real programmable-CC interface (DOCA PCC on BlueField-3, docs/physics.md "Congestion control")
calls one user handler per event - TX, ACK, NACK, CNP, RTT probe - with per-flow state in the
handler's context; the handler returns a new rate and may ask for an RTT probe. podsim keeps that
shape:

* :class:`CongestionControl` is one algorithm instance (parameters only, shared by all flows of a
  NIC). Subclasses override the ``on_*`` handlers.
* :class:`FlowCC` is one flow's (QP's) state: the knobs the NIC obeys (``rate_bps``,
  ``window_bytes``, ``credit_bytes``), the constants it was created with (line rate, base RTT,
  MTU) and ``priv``, the algorithm's private state.
* :class:`CCEvent` carries one event's fields.

The NIC never calls ``on_*`` directly: it calls the ``handle_*`` methods, which first run the
algorithm's periodic timers lazily (see below) and then the handler.

Units: seconds, bytes, bits/s. ``window_bytes`` and ``credit_bytes`` count payload bytes (what the
transport keeps in flight); ``rate_bps`` is the pacing rate on the wire (the NIC spaces packets by
``8 * wire_bytes / rate_bps``). ``None`` means "no limit" for all three.

Lazy timers
-----------
DCQCN needs timers every 50-55 us per flow; one SimPy event per flow per period would cost more than
the packets themselves. Instead an algorithm keeps ``flow.timer_due_s`` = the simulated time of its
next timer deadline (``inf`` when none is pending). Every ``handle_*`` call first checks
``ev.now >= flow.timer_due_s`` and, if so, calls ``on_timer(now, flow)`` once; the algorithm then
processes every period that elapsed up to ``now`` in time order (in closed form where it can) and
sets the next deadline. Processing is exact: it gives the same state as eager per-period events,
because every deadline before an event is handled before that event. The only thing lazy timers
cannot do by themselves is wake a flow that has nothing to send yet; so a NIC that holds a paced
flow until ``t_next`` and finds ``flow.timer_due_s < t_next`` schedules one wake-up at
``timer_due_s`` and calls :meth:`CongestionControl.handle_tick` (then re-reads the rate).

NIC contract
------------
* ``cc = make_cc(name, params, allow_plugins=...)`` once per NIC (or per config);
  ``flow = cc.new_flow(qp_id, line_rate_bps, base_rtt_s, mtu, hops, now)`` per QP.
* Before each data packet: ``flow.may_send(payload, inflight)`` (window and credit) and pace to
  ``flow.send_rate_bps``. After it leaves: ``cc.handle_tx(ev)`` with ``bytes, psn, snd_nxt,
  path`` - required when ``cc.uses_tx`` or ``flow.credit_bytes is not None`` (it debits credit),
  optional otherwise.
* Per ACK: ``cc.handle_ack(ev)`` with ``bytes`` (newly acknowledged; 0 for a pure SACK), ``psn``
  (the data packet that triggered it), ``snd_nxt``, ``rtt`` (from the echoed timestamp),
  ``ecn`` (echo of that packet's CE), ``int_records`` (echo of its INT when
  ``cc.requires_int``; switch egress ports append ``(qlen_bytes, tx_bytes, time_s, rate_bps)``)
  and ``path``. ``handle_nack`` for NACKs, ``handle_timeout`` when the RTO fires (``bytes`` lost),
  ``handle_rtt`` for probe replies, ``handle_cnp`` for CNPs, ``handle_credit`` for grants.
* Receiver side: when ``cc.requires_cnp``, run a :class:`~nic.congestion.dcqcn.CnpGenerator` and
  send a CNP whenever ``on_data(qp, ecn, now)`` is True; when ``cc.requires_credit``, run a
  :class:`~podsim.nic.congestion.rccc.ReceiverCredit`: ``request()`` on credit requests, ``grant()``
  every ``interval_s`` while ``active``, each grant sent back as a credit packet.
* After any handler, if ``flow.requests``: ``flow.take_requests()`` and act on REQ_PROBE (send a
  probe) and REQ_PATH_CHANGE (move off ``flow.avoid_path``).
* Timers: see above (``timer_due_s``, ``handle_tick``).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, NamedTuple

__all__ = [
    "REQ_PATH_CHANGE",
    "REQ_PROBE",
    "CCEvent",
    "CongestionControl",
    "CongestionControlError",
    "FlowCC",
    "IntHop",
]

#: ``flow.requests`` bit: the algorithm asks the NIC to send an RTT probe on this flow.
REQ_PROBE = 1
#: ``flow.requests`` bit: the algorithm asks the NIC to move the flow off ``flow.avoid_path``.
REQ_PATH_CHANGE = 2

_INF = math.inf


class CongestionControlError(ValueError):
    """A congestion-control algorithm misbehaved (raised, or set an invalid rate/window/credit).

    The message names the algorithm, the flow, the handler and the simulated time.
    """


class IntHop(NamedTuple):
    """One INT record, stamped by a switch egress port (HPCC, docs/physics.md: 8 B per hop, <= 5
    hops).

    The fabric may pass plain 4-tuples in this order; algorithms index them positionally.
    """

    qlen_bytes: int
    tx_bytes: int
    timestamp_s: float
    link_rate_bps: float


class CCEvent:
    """The fields of one congestion-control event.

    ``now``          simulated time of the event (s).
    ``bytes``        TX: payload bytes just sent; ACK: payload bytes newly acknowledged;
                     NACK/timeout: payload bytes reported lost; credit: payload bytes granted.
    ``psn``          TX: PSN sent; ACK/NACK: PSN of the data packet this feedback is about
                     (the packet whose arrival generated it, so its INT and ECN belong to it).
    ``snd_nxt``      the sender's next new PSN when the feedback is handled (-1 if unknown);
                     with ``psn`` it tells "one RTT of feedback has elapsed" (HPCC, TIMELY).
    ``rtt``          RTT sample in seconds (ACK timestamp or probe), or None.
    ``ecn``          ACK: the acknowledged packet arrived CE-marked (ECN echo).
    ``int_records``  sequence of per-hop INT records (:class:`IntHop` order), or None.
    ``path``         entropy value / path id the data packet took, or None.
    ``hops``         switch hops on that path, or None (Swift's hop scaling).
    ``inflight``     ACK/NACK: payload bytes still in flight after this feedback was applied
                     (-1 if unknown; NSCC's quick adapt ignores marks for that many bytes).

    The NIC may reuse one event object; handlers must not keep references to it.
    """

    __slots__ = (
        "bytes",
        "ecn",
        "hops",
        "inflight",
        "int_records",
        "now",
        "path",
        "psn",
        "rtt",
        "snd_nxt",
    )

    def __init__(
        self,
        now: float,
        bytes: int = 0,
        psn: int = -1,
        rtt: float | None = None,
        ecn: bool = False,
        int_records: Any = None,
        path: int | None = None,
        hops: int | None = None,
        snd_nxt: int = -1,
        inflight: int = -1,
    ) -> None:
        self.now = now
        self.bytes = bytes
        self.psn = psn
        self.rtt = rtt
        self.ecn = ecn
        self.int_records = int_records
        self.path = path
        self.hops = hops
        self.snd_nxt = snd_nxt
        self.inflight = inflight

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"CCEvent({fields})"


class FlowCC:
    """Per-flow congestion state: what the NIC obeys and what the algorithm keeps.

    Set by the algorithm: ``rate_bps`` (pacing rate on the wire, None = line rate),
    ``window_bytes`` (payload bytes in flight, None = unlimited), ``credit_bytes`` (payload bytes
    the flow may still send, None = not credit-limited), ``timer_due_s`` (next timer deadline),
    ``requests`` (REQ_* bits, read and cleared by the NIC via :meth:`take_requests`),
    ``avoid_path`` (the path a REQ_PATH_CHANGE asks to leave) and ``priv`` (private state).
    Fixed at creation: ``flow_id``, ``line_rate_bps``, ``base_rtt_s``, ``mtu``, ``hops``.

    ``tx_events`` (default True) is a hint for the NIC's per-packet cost: an algorithm whose
    ``on_tx`` has nothing to do for the flow in its present state (DCQCN before the first CNP)
    may set it False; the NIC then skips ``on_tx`` but still runs the flow's due timers on
    transmit (and debits credit), exactly as ``handle_tx`` would. Set it True again as soon as
    ``on_tx`` matters.
    """

    __slots__ = (
        "avoid_path",
        "base_rtt_s",
        "credit_bytes",
        "flow_id",
        "hops",
        "line_rate_bps",
        "mtu",
        "priv",
        "rate_bps",
        "requests",
        "timer_due_s",
        "tx_events",
        "window_bytes",
    )

    def __init__(
        self,
        flow_id: Any,
        line_rate_bps: float,
        base_rtt_s: float,
        mtu: int,
        hops: int | None = None,
    ) -> None:
        self.flow_id = flow_id
        self.line_rate_bps = line_rate_bps
        self.base_rtt_s = base_rtt_s
        self.mtu = mtu
        self.hops = hops
        self.rate_bps: float | None = None
        self.window_bytes: float | None = None
        self.credit_bytes: float | None = None
        self.timer_due_s = _INF
        self.requests = 0
        self.avoid_path: Any = None
        self.priv: Any = None
        self.tx_events = True

    @property
    def bdp_bytes(self) -> float:
        """Bandwidth-delay product at line rate and base RTT."""
        return self.line_rate_bps * self.base_rtt_s / 8.0

    @property
    def send_rate_bps(self) -> float:
        """The rate the NIC paces to: the CC rate capped by the line rate (a CC cannot send
        faster than the wire)."""
        r = self.rate_bps
        return self.line_rate_bps if r is None or r > self.line_rate_bps else r

    def may_send(self, payload_bytes: int, inflight_bytes: int) -> bool:
        """True if a packet of ``payload_bytes`` may leave now as far as window and credit go
        (pacing is separate: see :attr:`send_rate_bps`).

        With nothing in flight one packet may always go, so a window below one MTU (Swift's
        fractional windows) cannot deadlock the flow; credits have no such exception.
        """
        w = self.window_bytes
        if w is not None and inflight_bytes > 0 and inflight_bytes + payload_bytes > w:
            return False
        c = self.credit_bytes
        return c is None or c >= payload_bytes

    def request_probe(self) -> None:
        """Ask the NIC to send an RTT probe on this flow (DOCA PCC's probe request)."""
        self.requests |= REQ_PROBE

    def request_path_change(self, path: Any = None) -> None:
        """Ask the NIC to move this flow off ``path`` (NSCC: ECN while below target)."""
        self.requests |= REQ_PATH_CHANGE
        self.avoid_path = path

    def take_requests(self) -> int:
        """The pending REQ_* bits, cleared (the NIC calls this after a handler)."""
        r = self.requests
        self.requests = 0
        return r

    def __repr__(self) -> str:
        return (
            f"FlowCC(flow_id={self.flow_id!r}, rate_bps={self.rate_bps!r}, "
            f"window_bytes={self.window_bytes!r}, credit_bytes={self.credit_bytes!r})"
        )


class CongestionControl:
    """Base class of congestion-control algorithms (built-in and user plug-ins).

    Override :meth:`init_flow` (initial rate/window and private state) and any of the handlers
    ``on_tx``, ``on_ack``, ``on_nack``, ``on_cnp``, ``on_rtt``, ``on_timeout``, ``on_credit``,
    ``on_timer``; each reads the event and ``flow`` and sets ``flow.rate_bps`` and/or
    ``flow.window_bytes`` (and may call ``flow.request_probe()`` / ``flow.request_path_change()``).
    Unhandled events are ignored. Constructor keyword arguments are the algorithm's parameters.

    Class attributes tell the NIC what the algorithm needs:
    ``requires_rtt`` (RTT samples on ACKs), ``requires_int`` (switches stamp INT; ACKs echo it),
    ``requires_cnp`` (the receiver runs a CNP generator), ``requires_credit`` (the receiver runs a
    credit allocator), ``timer_interval_s`` (period of the algorithm's timers, informational).
    """

    name: ClassVar[str] = "custom"
    timer_interval_s: ClassVar[float | None] = None
    requires_rtt: ClassVar[bool] = False
    requires_int: ClassVar[bool] = False
    requires_cnp: ClassVar[bool] = False
    requires_credit: ClassVar[bool] = False

    # ------------------------------------------------------------------ algorithm side
    def init_flow(self, flow: FlowCC, now: float) -> None:
        """Set the initial knobs and ``flow.priv``. Default: line rate, no window."""

    def on_tx(self, ev: CCEvent, flow: FlowCC) -> None:
        """Data left the NIC (``ev.bytes`` payload; may cover a burst of packets)."""

    def on_ack(self, ev: CCEvent, flow: FlowCC) -> None:
        """An ACK arrived (``ev.rtt``, ``ev.ecn``, ``ev.int_records`` when present)."""

    def on_nack(self, ev: CCEvent, flow: FlowCC) -> None:
        """A NACK (loss or out-of-sequence report) arrived."""

    def on_cnp(self, ev: CCEvent, flow: FlowCC) -> None:
        """A congestion notification packet arrived (DCQCN)."""

    def on_rtt(self, ev: CCEvent, flow: FlowCC) -> None:
        """An RTT probe response arrived (``ev.rtt``)."""

    def on_timeout(self, ev: CCEvent, flow: FlowCC) -> None:
        """The retransmission timer fired."""

    def on_credit(self, ev: CCEvent, flow: FlowCC) -> None:
        """The receiver granted ``ev.bytes`` of credit (already added to ``flow.credit_bytes``)."""

    def on_timer(self, now: float, flow: FlowCC) -> None:
        """``flow.timer_due_s`` has passed: process every deadline up to ``now`` and set the next
        one (``inf`` for none). Called lazily; see the module docstring."""
        flow.timer_due_s = _INF

    # ------------------------------------------------------------------ NIC side
    @property
    def uses_tx(self) -> bool:
        """Whether TX events matter to this algorithm (the NIC may skip ``handle_tx`` otherwise,
        except for credit-limited flows, whose credit ``handle_tx`` debits)."""
        return type(self).on_tx is not CongestionControl.on_tx

    def new_flow(
        self,
        flow_id: Any,
        line_rate_bps: float,
        base_rtt_s: float,
        mtu: int,
        hops: int | None = None,
        now: float = 0.0,
    ) -> FlowCC:
        """Create and initialise the state of one flow (QP)."""
        if not (line_rate_bps > 0 and math.isfinite(line_rate_bps)):
            raise ValueError(f"line_rate_bps must be a positive finite rate, got {line_rate_bps!r}")
        if not (base_rtt_s > 0 and math.isfinite(base_rtt_s)):
            raise ValueError(f"base_rtt_s must be a positive finite time, got {base_rtt_s!r}")
        if int(mtu) != mtu or mtu <= 0:
            raise ValueError(f"mtu must be a positive integer number of bytes, got {mtu!r}")
        flow = FlowCC(flow_id, float(line_rate_bps), float(base_rtt_s), int(mtu), hops)
        self.init_flow(flow, now)
        return flow

    def handle_tx(self, ev: CCEvent, flow: FlowCC) -> None:
        if ev.now >= flow.timer_due_s:
            self.on_timer(ev.now, flow)
        if flow.credit_bytes is not None:
            flow.credit_bytes -= ev.bytes
        self.on_tx(ev, flow)

    def handle_ack(self, ev: CCEvent, flow: FlowCC) -> None:
        if ev.now >= flow.timer_due_s:
            self.on_timer(ev.now, flow)
        self.on_ack(ev, flow)

    def handle_nack(self, ev: CCEvent, flow: FlowCC) -> None:
        if ev.now >= flow.timer_due_s:
            self.on_timer(ev.now, flow)
        self.on_nack(ev, flow)

    def handle_cnp(self, ev: CCEvent, flow: FlowCC) -> None:
        if ev.now >= flow.timer_due_s:
            self.on_timer(ev.now, flow)
        self.on_cnp(ev, flow)

    def handle_rtt(self, ev: CCEvent, flow: FlowCC) -> None:
        if ev.now >= flow.timer_due_s:
            self.on_timer(ev.now, flow)
        self.on_rtt(ev, flow)

    def handle_timeout(self, ev: CCEvent, flow: FlowCC) -> None:
        if ev.now >= flow.timer_due_s:
            self.on_timer(ev.now, flow)
        self.on_timeout(ev, flow)

    def handle_credit(self, ev: CCEvent, flow: FlowCC) -> None:
        if ev.now >= flow.timer_due_s:
            self.on_timer(ev.now, flow)
        flow.credit_bytes = (flow.credit_bytes or 0) + ev.bytes
        self.on_credit(ev, flow)

    def handle_tick(self, now: float, flow: FlowCC) -> None:
        """Run due timers (the NIC's wake-up for a flow held past ``flow.timer_due_s``)."""
        if now >= flow.timer_due_s:
            self.on_timer(now, flow)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
