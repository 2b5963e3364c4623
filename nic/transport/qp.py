# cython: language_level=3, annotation_typing=False
"""Queue pairs: RDMA WRITE/SEND messages turned into paced, windowed, multipath packets.

One :class:`QueuePair` is the requester side of a reliable connection from one NIC to another
(one direction; traffic the other way uses the peer's own QP). It owns

* the posted :class:`Message` records (segmented lazily into MTU packets, see
  :mod:`podsim.nic.transport.segmentation`; one PSN space per QP);
* a :class:`~nic.transport.reliability.SenderReliability` (PSNs, SACK state, retransmissions);
* a path selector (:mod:`podsim.nic.transport.selectors`) choosing each packet's entropy value;
* the congestion-control flow state (:class:`nic.congestion.FlowCC`): the NIC paces packets to
  ``flow.send_rate_bps`` and holds them to ``flow.window_bytes``/``credit_bytes``;
* the timers, one lazily re-armed event per QP (never one per packet): the retransmission
  timeout RTO = max(``rto_min_s``, srtt + 4 rttvar) (RFC 6298 shape), doubled on each
  consecutive timeout up to ``rto_max_s``, which declares every in-flight packet lost and tells
  the path selector about each EV they used (UEC keeps a timer per packet). After
  ``retry_limit`` consecutive timeouts without cumulative progress, the next one fails the QP
  (InfiniBand's ``retry_cnt``: the QP goes to the error state): every message not yet complete
  fails with :attr:`QueuePair.failed` as its ``error`` ("retry limit exceeded: ..."), later
  posts to the QP fail at once, and late ACKs are ignored; and, in
  selective-repeat mode, a tail-loss probe (RFC 8985 TLP): once the last new PSN has left,
  2 x srtt without a delivery resends the highest in-flight PSN, whose SACK lets RACK find
  the lost tail without waiting for the RTO. Classic RoCE (go-back-N) has only the RTO
  beside its NAKs. A PSN sequence error NAK at a selective-repeat QP (InfiniBand RC with
  out-of-order placement, ``cx7-ib``) goes back N at once on an in-order path; if the QP's
  packets may be reordered (``reorders``: spraying, switch adaptive routing) only once RACK's
  reordering window has passed (``nak_deadline``, the same timer).

The responder side (:class:`RecvQp`) lives on the destination NIC and is (a subclass of) the
:class:`~podsim.nic.transport.reliability.ReceiverReliability`. Packets carry their QP object in
``meta`` and data packets their RecvQp in ``rq`` (the simulator is omniscient: no lookup table
is needed at the receiver).

A message completes when its last PSN is cumulatively acknowledged; the record keeps when it was
posted, when its first packet left, when the receiver held all its bytes, when it completed,
and how many of its packets were retransmitted.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from podsim.fabric.packet import DATA as K_DATA
from podsim.fabric.packet import Packet
from podsim.nic.congestion.api import REQ_PATH_CHANGE, REQ_PROBE, CCEvent, CongestionControl, FlowCC
from podsim.nic.transport.reliability import (
    MODE_GBN,
    MODE_SR,
    SENT,
    ReceiverReliability,
    ReorderBuffer,
    SenderReliability,
)
from podsim.nic.transport.segmentation import OP_WRITE, RETH_BYTES, packet_count
from podsim.nic.transport.selectors import PathSelector

if TYPE_CHECKING:
    from podsim.nic.nic import SmartNic

__all__ = [
    "ACK_WIRE_EXTRA",
    "CNP_WIRE_EXTRA",
    "F_ACK_REQ",
    "F_CREDIT_GRANT",
    "F_CREDIT_REFRESH",
    "F_CREDIT_REQ",
    "F_DUP",
    "F_LAST",
    "F_PROBE_REPLY",
    "F_SEQ_ERR",
    "Message",
    "QueuePair",
    "RdmaPacket",
    "RecvQp",
    "qp_flow_key",
]

#: AETH (4 B) on ACK/NACK packets, beyond the link layer's overhead [S: IBTA vol. 1 9.3.5].
ACK_WIRE_EXTRA = 4
#: A RoCEv2 CNP carries 16 reserved bytes after the BTH [S: IBTA RoCEv2 annex].
CNP_WIRE_EXTRA = 16

# Packet flag bits (RdmaPacket.flags).
F_LAST = 1  # DATA: last packet of its message
F_DUP = 2  # ACK: the receiver saw a duplicate since the last ACK (DSACK-like)
F_CREDIT_REQ = 4  # PROBE: a credit request (aux = bytes)
F_CREDIT_GRANT = 8  # PROBE: a credit grant (aux = bytes)
F_PROBE_REPLY = 16  # PROBE: the echo of an RTT probe
F_CREDIT_REFRESH = 32  # PROBE with F_CREDIT_REQ: aux is the sender's whole outstanding want
#: DATA: ACK request (UEC's AR bit): the receiver acknowledges at once instead of coalescing. Set
#: on a packet after which the congestion window has no room for another full packet, and on
#: every retransmission, so that ACK
#: coalescing never leaves a window-limited sender waiting for its timeout (the UEC reference
#: simulator's UecSrc sets it in the same cases: uet-htsim 40ccb05, uec.cpp sendNewPacket /
#: sendRtxPacket).
F_ACK_REQ = 64
#: NACK: a "PSN sequence error" NAK (AETH syndrome NAK code 0, IBTA vol. 1 ch. 9.7): the PSN is
#: the responder's expected one and the requester goes back N from it; without the flag a
#: selective-repeat NACK names one PSN the receiver dropped (its reorder buffer was full)
F_SEQ_ERR = 128

_INF = math.inf


def qp_flow_key(src_card: int, dst_card: int, index: int, tc: int = 0) -> int:
    """The flow label of QP ``index`` of class ``tc`` from NIC card ``src_card`` to
    ``dst_card``: the fields packed into one int (cards below 2^32, index below 2^16, class
    below 2^8), unique per QP and independent of when the QP was created."""
    if not (0 <= index < 1 << 16 and 0 <= tc < 1 << 8 and 0 <= dst_card < 1 << 32):
        raise ValueError(f"QP index {index}, class {tc} or card {dst_card} out of range")
    return (((src_card << 32) | dst_card) << 24) | (index << 8) | tc


class RdmaPacket(Packet):
    """A :class:`podsim.fabric.packet.Packet` with the transport's extra header fields.

    ``aux``: ACK: SACK bitmap (bit i = PSN ``psn + i`` held out of order; a bounded bitmap
    covers only the window :func:`~podsim.nic.transport.reliability.sack_base` places from
    ``psn`` and ``dpsn``); credit packets: bytes.
    ``dpsn``: ACK/NACK/CNP: PSN of the data packet that triggered it. ``flags``: F_* bits.
    ``meta`` is the sender's :class:`QueuePair`; ``rq`` on data packets its :class:`RecvQp`
    (the receiver's state, reached without touching the sender's QP object).
    """

    __slots__ = ("aux", "dpsn", "flags", "rq")

    def __init__(
        self,
        kind: int,
        size: int,
        wire: int,
        src: int,
        dst: int,
        flow: int,
        psn: int,
        ev: int,
        ts: float,
        meta: Any,
        flags: int = 0,
        rq: RecvQp | None = None,
    ) -> None:
        self.kind = kind
        self.size = size
        self.wire = wire  # the sender applies its link layer's least packet
        self.src = src
        self.dst = dst
        self.flow = flow
        self.psn = psn
        self.ev = ev
        self.ts = ts
        self.meta = meta
        self.flags = flags
        self.ecn = False
        self.tc = 0
        self.ts_echo = 0.0
        self.int_rec = None
        self.aux = 0
        self.dpsn = -1
        self.rq = rq
        self.link = None
        self.callbacks = None


class Message:
    """One posted RDMA operation and its life times (seconds; NaN until reached)."""

    __slots__ = (
        "done_s",
        "end_psn",
        "error",
        "first_psn",
        "id",
        "npkts",
        "opcode",
        "post_s",
        "qp",
        "retx_pkts",
        "size",
        "skipped",
        "start_s",
        "t_delivered",
        "tag",
    )

    def __init__(
        self, mid: int, qp: QueuePair, size: int, opcode: int, now: float, tag: Any
    ) -> None:
        self.id = mid
        self.qp = qp
        self.size = size
        self.opcode = opcode
        self.npkts = packet_count(size, qp.mtu)
        self.first_psn = -1
        self.end_psn = -1
        self.post_s = now
        self.start_s = math.nan
        self.t_delivered = math.nan
        self.done_s = math.nan
        self.retx_pkts = 0
        self.tag = tag
        #: packets of it the steady-state fast-forward accounted instead of sending
        #: (:mod:`podsim.nic.fastforward`; ``npkts`` counts them too: a jump moves the PSNs of
        #: a QP's messages, not their lengths)
        self.skipped = 0
        #: why the message failed (the QP's retry limit); None while it has not
        self.error: str | None = None

    @property
    def done(self) -> bool:
        return not math.isnan(self.done_s)

    @property
    def fct_s(self) -> float:
        """Completion time from posting to the last byte acknowledged."""
        return self.done_s - self.post_s

    def __repr__(self) -> str:
        return (
            f"Message({self.id} qp={self.qp.id} {self.size}B psn=[{self.first_psn},"
            f"{self.end_psn}) post={self.post_s:.9g} done={self.done_s:.9g})"
        )


class RecvQp(ReceiverReliability):
    """Responder side of a QP on the destination NIC: its PSN state and counters.

    It *is* the QP's :class:`~podsim.nic.transport.reliability.ReceiverReliability` (``rel`` returns
    the object itself): one object instead of two keeps what every arriving data packet
    touches in fewer cache lines, which matters with thousands of QPs.
    """

    __slots__ = ("_next_delivered", "ack_pkts", "cnps", "nacks", "rx_bytes", "rx_hold", "rx_pkts")

    def __init__(
        self,
        mode: int,
        rob: ReorderBuffer,
        ack_every: int,
        sack_bits: int | None = None,
        seq_nak: bool = False,
        ack_gap_fill: bool = True,
    ) -> None:
        super().__init__(mode, rob, ack_every, sack_bits, seq_nak, ack_gap_fill)
        self.rx_hold = 0.0  # RX pipeline: this QP's packets wait at least until then
        self.rx_pkts = 0
        self.rx_bytes = 0
        self.ack_pkts = 0
        self.nacks = 0
        self.cnps = 0
        # end PSN of the sender's oldest message not yet fully received (inf: none), kept by
        # the QueuePair, so that a data packet completing nothing leaves the QP alone
        self._next_delivered = _INF

    @property
    def rel(self) -> RecvQp:
        """The receiver's reliability state (this object)."""
        return self


class QueuePair:
    """Requester side of one RDMA reliable connection (see the module docstring)."""

    __slots__ = (
        "_cc_ack",
        "_cc_tx",
        "_ccev",
        "_deliver_cb",
        "_fetched",
        "_last_tx",
        "_last_wire",
        "_next_done",
        "_plain_fcc",
        "_seg_end",
        "_seg_first",
        "_sel_ack",
        "_std_ack",
        "_timer_at",
        "_tlp_ok",
        "cc",
        "cnps_rcvd",
        "credit_deadline",
        "credit_wanted",
        "dst_eids",
        "dst_nic",
        "ecn_acks",
        "evs_used",
        "failed",
        "fcc",
        "flow_key",
        "id",
        "index",
        "min_wire",
        "mode",
        "msgs",
        "mtu",
        "nacks_rcvd",
        "nak_deadline",
        "nak_psn",
        "next_ev",
        "next_plane",
        "next_time",
        "nic",
        "overhead",
        "planes",
        "queued",
        "reorders",
        "retries",
        "retry_limit",
        "rto",
        "rto_deadline",
        "rto_max_s",
        "rto_min_s",
        "rttvar",
        "rx",
        "rx_hold",
        "seg",
        "sel",
        "snd",
        "src_eids",
        "tc",
        "tlp_deadline",
        "tlp_probes",
        "tx_bytes",
        "tx_pkts",
        "undelivered",
        "unsent",
        "want_int",
    )

    def __init__(
        self,
        qp_id: int,
        nic: SmartNic,
        dst_nic: SmartNic,
        index: int,
        *,
        mtu: int,
        mode: int,
        selector: PathSelector,
        cc: CongestionControl,
        fcc: FlowCC,
        rx: RecvQp,
        reo_factor: float,
        reo_min_s: float,
        rto_min_s: float,
        rto_max_s: float,
        retry_limit: int | None = None,
        sack_bits: int | None = None,
    ) -> None:
        self.id = qp_id
        #: the flow label its packets carry, which the switches' ECMP hash reads: a function of
        #: (source card, destination card, index, class) alone, not of the order QPs were
        #: created in, so the flow engine can replay the switches' choices (set by RdmaNetwork)
        self.flow_key = qp_id
        self.nic = nic
        self.dst_nic = dst_nic
        self.index = index
        #: traffic class (index into the network's classes; set by RdmaNetwork)
        self.tc = 0
        self.mtu = mtu
        self.overhead = nic.overhead  # the link layer's per-packet framing (fabric.packet)
        self.min_wire = nic.min_wire
        self.mode = mode
        self.planes = selector.planes
        self.src_eids = nic.eids
        self.dst_eids = dst_nic.eids
        self.sel = selector
        self._sel_ack = type(selector).on_ack is not PathSelector.on_ack  # skip no-op calls
        self.cc = cc
        self.fcc = fcc
        self._plain_fcc = type(fcc).may_send is FlowCC.may_send  # build() inlines may_send
        self.rx = rx
        self.rx_hold = 0.0  # RX pipeline ordering of the feedback arriving at this side
        # sack_bits: the receiving NIC's SACK bitmap width (both ends agree on it at setup)
        self.snd = SenderReliability(
            mode, reo_factor=reo_factor, reo_min_s=reo_min_s, sack_bits=sack_bits
        )
        self.snd.loss_cb = selector.on_loss
        self.msgs: deque[Message] = deque()  # posted, not yet complete (PSN order)
        self.undelivered: deque[Message] = deque()  # not yet fully held by the receiver
        # end PSN of msgs[0] (inf: none; rx._next_delivered is undelivered[0]'s), so that an
        # ACK or a data packet completing nothing leaves the deques and messages alone
        self._next_done = _INF
        self.unsent: deque[Message] = deque()  # PSNs not all sent once yet
        self.seg: Message | None = None  # unsent[0]: the message holding the next new PSN
        # seg's PSN range [first, end) (empty without seg): build() checks a PSN against the
        # QP's own fields and reads the message only at its first and last packet
        self._seg_first = 0
        self._seg_end = 0
        self.queued = False  # in one of the NIC's ready queues or its pacing heap
        self.next_time = 0.0  # pacing: earliest time of the next packet
        self._last_tx = 0.0
        self._last_wire = 0
        self.next_ev = -1
        #: the distinct entropy values (paths) the QP's data packets used
        self.evs_used: set[int] = set()
        self.next_plane = 0
        self._fetched = False  # QP context fetched after a cache miss (skip one lookup)
        self.rto_min_s = rto_min_s
        self.rto_max_s = rto_max_s
        self.retry_limit = retry_limit  # None: retransmit forever
        self.retries = 0  # consecutive timeouts since the last cumulative progress
        self.failed: str | None = None  # the error that failed the QP
        self.rto = max(rto_min_s, 3 * fcc.base_rtt_s)
        self.rttvar = 0.0
        self.rto_deadline = _INF
        self.tlp_deadline = _INF
        self._tlp_ok = mode == 1  # tail-loss probes in selective-repeat mode only
        self.tlp_probes = 0
        #: the QP's packets may arrive out of order (spraying, switch adaptive routing; set by
        #: RdmaNetwork): a PSN sequence error NAK then proves a loss only once RACK's
        #: reordering window has passed (nak_deadline, for PSN nak_psn)
        self.reorders = not selector.single_path
        self.nak_deadline = _INF
        self.nak_psn = -1
        self._timer_at = _INF  # when the NIC's timer wheel calls _on_rto next (inf: never)
        # one event object per NIC, refilled for every handler call (CCEvent's contract): a
        # per-QP one would be a cold cache line on every ACK
        self._ccev = nic.cc_event
        self._cc_tx = cc.uses_tx
        # An algorithm without an ACK handler (DCQCN reacts to CNPs) only needs its due
        # timers run on an ACK, which on_ack does inline instead of filling a CCEvent.
        cls = type(cc)
        self._cc_ack = (
            cls.on_ack is not CongestionControl.on_ack
            or cls.handle_ack is not CongestionControl.handle_ack
        )
        # the base handle_ack (due timers, then on_ack) is inlined on the ACK path
        self._std_ack = cls.handle_ack is CongestionControl.handle_ack
        self.want_int = cc.requires_int
        self.credit_wanted = 0  # bytes of credit requested from the receiver, not granted yet
        # a credit request or grant can be lost like any packet, and with no credit nothing
        # is in flight to time out: without a grant for one RTO the request is refreshed
        self.credit_deadline = _INF
        self._deliver_cb: Callable[[Message], object] | None = None
        self.tx_pkts = 0
        self.tx_bytes = 0  # payload bytes sent, retransmissions included
        self.ecn_acks = 0
        self.nacks_rcvd = 0
        self.cnps_rcvd = 0

    # ------------------------------------------------------------------ posting
    def post(self, msg: Message) -> None:
        """Append ``msg`` to the send queue (the NIC assigns ids and wakes the scheduler); on a
        failed QP the message fails at once."""
        if self.failed is not None:
            msg.error = self.failed
            self.nic.message_failed(msg)
            return
        msg.first_psn = self.snd.post(msg.npkts)
        msg.end_psn = msg.first_psn + msg.npkts
        if not self.msgs:
            self._next_done = msg.end_psn
        self.msgs.append(msg)
        if not self.undelivered:
            self.rx._next_delivered = msg.end_psn
        self.undelivered.append(msg)
        self.unsent.append(msg)
        if self.seg is None:
            self._set_seg(msg)
        if self.fcc.credit_bytes is not None:
            self._ask_credit(msg.size)

    # ------------------------------------------------------------------ transmit side
    def _msg_of(self, psn: int) -> Message:
        seg = self.seg
        if seg is not None and seg.first_psn <= psn < seg.end_psn:
            return seg
        for m in self.msgs:
            if psn < m.end_psn:
                return m
        raise RuntimeError(f"QP {self.id}: PSN {psn} belongs to no posted message")

    def _set_seg(self, m: Message | None) -> None:
        self.seg = m
        if m is None:
            self._seg_first = self._seg_end = 0
        else:
            self._seg_first = m.first_psn
            self._seg_end = m.end_psn

    def sendable(self) -> bool:
        """True if a packet may go as far as data, window and credit are concerned."""
        if self.failed is not None:
            return False
        snd = self.snd
        psn = snd.pick()
        if psn < 0:
            return False
        m = self._msg_of(psn)
        idx = psn - m.first_psn
        payload = self.mtu if idx < m.npkts - 1 else m.size - self.mtu * (m.npkts - 1)
        fcc = self.fcc
        if fcc.window_bytes is None and fcc.credit_bytes is None:
            return True
        if fcc.may_send(payload, snd.inflight_bytes):
            return True
        if fcc.credit_bytes is not None and fcc.credit_bytes < payload and not self.credit_wanted:
            # credit for retransmissions: ask for what the next packet needs
            self._ask_credit(payload)
        return False

    def _ask_credit(self, nbytes: int) -> None:
        self.credit_wanted += nbytes
        self.nic.request_credit(self, nbytes)
        if self.credit_deadline == _INF:
            self.credit_deadline = self.nic.env._now + self.rto
            self._arm(self.credit_deadline)

    def build(self, now: float) -> RdmaPacket | None:
        """The next packet to transmit now (pacing already checked), or None."""
        if self.failed is not None:
            return None
        snd = self.snd
        if snd.n_lost:
            psn = snd.pick()
            if psn < 0:
                return None
        else:  # SenderReliability.pick without retransmissions, inlined
            psn = snd.snd_nxt
            if psn >= snd.end_psn:
                return None
        m = self.seg
        if self._seg_first <= psn < self._seg_end:
            idx = psn - self._seg_first
            last = psn == self._seg_end - 1
        else:  # a retransmission from an older message
            m = self._msg_of(psn)
            idx = psn - m.first_psn
            last = idx == m.npkts - 1
        mtu = self.mtu
        payload = m.size - mtu * idx if last else mtu
        fcc = self.fcc
        w = fcc.window_bytes
        c = fcc.credit_bytes
        if w is not None or c is not None:
            if self._plain_fcc:  # FlowCC.may_send, inlined
                infl = snd.inflight_bytes
                if (w is not None and infl > 0 and infl + payload > w) or (
                    c is not None and c < payload
                ):
                    return None
            elif not fcc.may_send(payload, snd.inflight_bytes):
                return None
        wire = payload + self.overhead
        if idx == 0 and m.opcode == OP_WRITE:
            wire += RETH_BYTES
        if wire < self.min_wire:
            wire = self.min_wire
        flags = F_LAST if last else 0
        if (w is not None and snd.inflight_bytes + payload + mtu > w) or psn < snd.high_sent:
            flags |= F_ACK_REQ  # the window has no room for another packet, or a resend
        ev = self.next_ev
        if ev < 0:
            ev = self.sel.next_ev(now)
        else:
            self.next_ev = -1
        self.evs_used.add(ev)
        plane = self.next_plane
        pkt = RdmaPacket(
            K_DATA,
            payload,
            wire,
            self.src_eids[plane],
            self.dst_eids[plane],
            self.flow_key,
            psn,
            ev,
            now,
            self,
            flags,
            self.rx,
        )
        if self.tc:
            pkt.tc = self.tc
        if self.want_int:
            pkt.int_rec = []
        if psn >= snd.high_sent:
            # SenderReliability.on_send's first-transmission path, inlined (one call less per
            # packet): PSNs go out in order the first time, so the arrays just grow.
            snd.inflight_bytes += payload
            snd._state.append(SENT)
            snd._tx_time.append(now)
            snd._size.append(payload)
            snd._ev.append(ev)
            snd.high_sent = snd.snd_nxt = psn + 1
            if idx == 0:
                m.start_s = now
        elif snd.on_send(psn, payload, now, ev):
            m.retx_pkts += 1
        if m is self.seg and snd.high_sent >= self._seg_end:
            unsent = self.unsent
            unsent.popleft()
            self._set_seg(unsent[0] if unsent else None)
        self.tx_pkts += 1
        self.tx_bytes += payload
        if self._cc_tx or c is not None:
            if fcc.tx_events or c is not None:
                e = self._ccev
                e.now = now
                e.bytes = payload
                e.psn = psn
                e.rtt = None
                e.ecn = False
                e.int_records = None
                e.path = ev
                e.snd_nxt = snd.snd_nxt
                self.cc.handle_tx(e, fcc)
            elif now >= fcc.timer_due_s:  # on_tx has nothing to do now: only due timers run
                self.cc.handle_tick(now, fcc)
        # pacing: the next packet may start one wire time at the CC rate later
        self._last_tx = now
        wire = pkt.wire
        self._last_wire = wire
        r = fcc.rate_bps
        if r is None or r >= fcc.line_rate_bps:
            self.next_time = now
        else:
            self.next_time = now + wire * 8.0 / r
        if self.rto_deadline == _INF:  # the timer was disarmed: nothing was outstanding
            self.rto_deadline = now + self.rto
            self._arm(self.rto_deadline)
        if self._tlp_ok and snd.snd_nxt >= snd.end_psn:
            # the tail has left: arm the tail-loss probe (no later packet would expose a loss)
            self.tlp_deadline = now + self._pto()
            self._arm(self.tlp_deadline)
        return pkt

    def _pto(self) -> float:
        """Tail-loss probe timeout: two smoothed RTTs (RFC 8985), at least the reordering
        window's floor; without an RTT sample yet, the RTO (no early probe)."""
        snd = self.snd
        if snd.srtt == 0.0:
            return self.rto
        pto = 2.0 * snd.srtt
        return pto if pto > snd.reo_min_s else snd.reo_min_s

    def _arm(self, t: float) -> None:
        """Make sure the timer fires no later than ``t`` (one live timer per QP, kept by the
        NIC's timer heap so that thousands of QPs add one event-heap entry per NIC)."""
        if self._timer_at <= t:
            return
        self._timer_at = t
        self.nic.arm_timer(self, t)

    def repace(self, now: float) -> None:
        """Re-read the CC rate after a timer tick: recompute the next departure time."""
        r = self.fcc.rate_bps
        if r is None or r >= self.fcc.line_rate_bps:
            self.next_time = self._last_tx
        else:
            self.next_time = self._last_tx + self._last_wire * 8.0 / r

    # ------------------------------------------------------------------ feedback
    def on_ack(self, pkt: RdmaPacket, now: float) -> None:
        if self.failed is not None:
            return  # an ACK arriving after the QP failed (IB drops it in the error state)
        snd = self.snd
        una0 = snd.snd_una
        newly = snd.on_ack(pkt.psn, pkt.aux, now, pkt.dpsn)
        if pkt.flags & F_DUP:
            snd.on_duplicate_report()
        rtt = now - pkt.ts_echo
        srtt = snd.srtt
        if srtt == 0.0:
            snd.srtt = srtt = rtt
            self.rttvar = rtt / 2
        else:
            err = rtt - srtt
            snd.srtt = srtt = srtt + err / 8
            self.rttvar += ((err if err > 0 else -err) - self.rttvar) / 4
        ecn = pkt.ecn
        if ecn:
            self.ecn_acks += 1
        if self._sel_ack:
            self.sel.on_ack(pkt.ev, ecn, now)
        fcc = self.fcc
        if self._cc_ack:
            e = self._ccev
            e.now = now
            e.bytes = newly
            e.psn = pkt.dpsn
            e.rtt = rtt
            e.ecn = ecn
            e.int_records = pkt.int_rec
            e.path = pkt.ev
            e.snd_nxt = snd.snd_nxt
            e.inflight = snd.inflight_bytes
            if self._std_ack:  # CongestionControl.handle_ack, inlined
                if now >= fcc.timer_due_s:
                    self.cc.on_timer(now, fcc)
                self.cc.on_ack(e, fcc)
            else:
                self.cc.handle_ack(e, fcc)
        elif now >= fcc.timer_due_s:  # CongestionControl.handle_ack with a no-op on_ack
            self.cc.on_timer(now, fcc)
        if fcc.requests:
            self._requests(now)
        una = snd.snd_una
        if newly and self.mode == 1 and snd.snd_nxt >= snd.end_psn and snd.high_sent > una:
            # in the tail, each delivery re-arms the tail-loss probe (and re-enables it)
            pto = 2.0 * srtt
            self.tlp_deadline = now + (pto if pto > snd.reo_min_s else snd.reo_min_s)
            if not self._tlp_ok:
                self._tlp_ok = True
                self._arm(self.tlp_deadline)
        if una > una0:
            # cumulative progress: complete messages, reset the RTO, its backoff and retries
            self.retries = 0
            if una >= self._next_done:
                self._complete(una, now)
            rto = srtt + 4 * self.rttvar
            rto = rto if rto > self.rto_min_s else self.rto_min_s
            self.rto = rto = rto if rto < self.rto_max_s else self.rto_max_s
            self.rto_deadline = now + rto if snd.high_sent > una else _INF

    def on_nack(self, pkt: RdmaPacket, now: float) -> None:
        if self.failed is not None:
            return
        self.nacks_rcvd += 1
        psn = pkt.psn
        if pkt.flags & F_SEQ_ERR and self.mode == MODE_SR:
            self._seq_nak(psn, now)
        else:
            self._nack(psn, now, self.mode == MODE_GBN)

    def _nack(self, psn: int, now: float, seq: bool) -> None:
        """Act on a NACK for ``psn``: go back N from it (``seq``: go-back-N, or a sequence
        error NAK found to mean a loss) or resend it alone (a reorder-buffer NACK)."""
        snd = self.snd
        una0 = snd.snd_una
        ev = snd.ev_of(psn)
        before = snd.inflight_bytes
        snd.on_nack(psn, now, seq)
        if ev >= 0:
            self.sel.on_nack(ev, now)
        # selective repeat: the payload the NACK declared lost; go-back-N's rewind also
        # acknowledges, so its count is left to the algorithm (0 = unknown)
        lost = before - snd.inflight_bytes if self.mode == MODE_SR else 0
        self.cc.handle_nack(self._event(now, lost, psn, path=ev), self.fcc)
        if self.fcc.requests:
            self._requests(now)
        if snd.snd_una > una0:
            self._progress(now)

    def _seq_nak(self, psn: int, now: float) -> None:
        """A PSN sequence error NAK at a selective-repeat (out-of-order placing) requester.

        Everything below ``psn`` arrived (IBTA vol. 1 ch. 9.7). On a path that keeps the QP's
        packets in order the NAK proves ``psn`` lost: go back N from it at once. If the path
        may reorder (``reorders``), ``psn`` may only be late: go back only once it is overdue
        by RACK's rule (:meth:`SenderReliability.nak_lost_at`), checked again by the timer if
        that is later than now; if ``psn`` arrives meanwhile nothing is resent."""
        snd = self.snd
        if psn < snd.snd_una or psn >= snd.high_sent:
            return  # stale: already acknowledged
        if self.reorders:
            una0 = snd.snd_una
            snd.on_ack(psn, 0, now)  # the NAK's cumulative part
            if snd.snd_una > una0:
                self._progress(now)
            due = snd.nak_lost_at(psn, snd.srtt if snd.srtt > 0.0 else self.fcc.base_rtt_s)
            if now < due:
                self.nak_psn = psn
                self.nak_deadline = due
                self._arm(due)
                return
        self._nack(psn, now, True)

    def on_cnp(self, pkt: RdmaPacket, now: float) -> None:
        self.cnps_rcvd += 1
        self.cc.handle_cnp(self._event(now, 0, pkt.dpsn, ecn=True, path=pkt.ev), self.fcc)
        if self.fcc.requests:
            self._requests(now)

    def on_probe_reply(self, pkt: RdmaPacket, now: float) -> None:
        e = self._event(now, 0, -1, rtt=now - pkt.ts_echo, int_records=pkt.int_rec, path=pkt.ev)
        self.cc.handle_rtt(e, self.fcc)
        if self.fcc.requests:
            self._requests(now)

    def on_credit(self, nbytes: int, now: float) -> None:
        self.credit_wanted -= nbytes
        if self.credit_wanted <= 0:
            self.credit_wanted = 0
            self.credit_deadline = _INF
        else:  # the receiver is granting: wait another RTO (the timer re-arms lazily)
            self.credit_deadline = now + self.rto
        self.retries = 0
        self.cc.handle_credit(self._event(now, nbytes, -1), self.fcc)

    def _event(
        self,
        now: float,
        nbytes: int,
        psn: int,
        *,
        rtt: float | None = None,
        ecn: bool = False,
        int_records: list | None = None,
        path: int | None = None,
    ) -> CCEvent:
        """The NIC's shared CC event, filled for one of the rare handlers (NACK, CNP, probe
        reply, credit, timeout); the per-packet TX and ACK paths fill it inline."""
        e = self._ccev
        e.now = now
        e.bytes = nbytes
        e.psn = psn
        e.rtt = rtt
        e.ecn = ecn
        e.int_records = int_records
        e.path = path
        e.snd_nxt = self.snd.snd_nxt
        e.inflight = self.snd.inflight_bytes
        return e

    def _requests(self, now: float) -> None:
        req = self.fcc.take_requests()
        if req & REQ_PATH_CHANGE:
            path = self.fcc.avoid_path
            self.sel.on_path_change(-1 if path is None else path, now)
        if req & REQ_PROBE:
            self.nic.send_probe(self, now)

    def _progress(self, now: float) -> None:
        """The cumulative ACK advanced: complete messages, reset the RTO backoff."""
        self.retries = 0
        una = self.snd.snd_una
        if una >= self._next_done:
            self._complete(una, now)
        snd = self.snd
        self.rto = min(self.rto_max_s, max(self.rto_min_s, snd.srtt + 4 * self.rttvar))
        self.rto_deadline = now + self.rto if snd.high_sent > una else _INF

    def _complete(self, una: int, now: float) -> None:
        """Messages whose last PSN is below ``una`` are complete."""
        msgs = self.msgs
        while msgs and msgs[0].end_psn <= una:
            m = msgs.popleft()
            m.done_s = now
            self._next_done = msgs[0].end_psn if msgs else _INF
            self.nic.message_done(m)

    def delivered(self, rcv_nxt: int, now: float) -> None:
        """The receiver's cumulative PSN reached ``rcv_nxt``: stamp fully received messages."""
        und = self.undelivered
        while und and und[0].end_psn <= rcv_nxt:
            und.popleft().t_delivered = now
        self.rx._next_delivered = und[0].end_psn if und else _INF

    def _on_rto(self) -> None:
        """The timer fired (the NIC has cleared ``_timer_at``): a credit refresh if due, then
        TLP, then RTO if due."""
        if self.failed is not None:
            return
        credit_due = self.credit_deadline
        if credit_due < _INF:
            if self.nic.env._now >= credit_due:
                self._credit_timeout()
                if self.failed is not None:
                    return
            self._on_data_timer()
            if self.failed is None and self.credit_deadline < _INF:
                self._arm(self.credit_deadline)
            return
        self._on_data_timer()

    def _credit_timeout(self) -> None:
        """No grant for one RTO while credit is wanted: the request or the grants were lost
        (or the receiver is unreachable). Refresh the request with the whole outstanding
        amount, back off like an RTO, and count it against the retry limit."""
        self.retries += 1
        if self.retry_limit is not None and self.retries > self.retry_limit:
            self._fail()
            return
        self.nic.request_credit(self, self.credit_wanted, refresh=True)
        self.rto = min(self.rto_max_s, 2 * self.rto)
        self.credit_deadline = self.nic.env._now + self.rto

    def _on_data_timer(self) -> None:
        snd = self.snd
        if snd.high_sent <= snd.snd_una:
            self.rto_deadline = _INF
            return  # nothing outstanding: disarm until the next send
        now = self.nic.env._now
        if now >= self.nak_deadline:
            self.nak_deadline = _INF
            if snd.snd_una == self.nak_psn:  # still missing: the NAK meant a loss
                self._nack(self.nak_psn, now, True)
                if self.failed is not None:
                    return
                self.nic.activate(self)
        if self._tlp_ok and now >= self.tlp_deadline and snd.snd_nxt >= snd.end_psn:
            self._tlp_ok = False  # one probe per quiet period; an ACK re-enables it
            if snd.probe_tail():
                self.tlp_probes += 1
                self.nic.activate(self)
        if now < self.rto_deadline:
            tlp = self.tlp_deadline
            self._arm(tlp if self._tlp_ok and now < tlp < self.rto_deadline else self.rto_deadline)
            if self.nak_deadline < _INF:
                self._arm(self.nak_deadline)
            return
        self.retries += 1
        if self.retry_limit is not None and self.retries > self.retry_limit:
            self._fail()
            return
        evs = snd.inflight_evs()
        lost = snd.inflight_bytes
        snd.on_timeout(now)
        self.nak_deadline = _INF  # everything in flight is being resent anyway
        sel = self.sel
        for ev in evs or [snd.ev_of(snd.snd_una)]:
            sel.on_timeout(ev, now)
        e = self._event(now, lost, snd.snd_una, path=evs[0] if evs else None)
        self.cc.handle_timeout(e, self.fcc)
        if self.fcc.requests:
            self._requests(now)
        self.rto = min(self.rto_max_s, 2 * self.rto)
        self.rto_deadline = now + self.rto
        self._arm(self.rto_deadline)
        self.nic.activate(self)

    def _fail(self) -> None:
        """Retry limit exceeded: the QP stops, every message not complete fails."""
        self.failed = (
            f"retry limit exceeded: {self.retries} consecutive timeouts without progress "
            f"(retry_limit {self.retry_limit}) on QP {self.id} nic{self.nic.card}->"
            f"nic{self.dst_nic.card}"
        )
        self.rto_deadline = self.tlp_deadline = self.credit_deadline = self.nak_deadline = _INF
        msgs = list(self.msgs)
        self.msgs.clear()
        self._next_done = _INF
        self.unsent.clear()
        self._set_seg(None)
        for m in msgs:
            m.error = self.failed
            self.nic.message_failed(m)

    def __repr__(self) -> str:
        return (
            f"QueuePair({self.id}: nic{self.nic.card}->nic{self.dst_nic.card}#{self.index} "
            f"una={self.snd.snd_una} nxt={self.snd.snd_nxt} end={self.snd.end_psn})"
        )
