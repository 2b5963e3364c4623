# cython: language_level=3, annotation_typing=False
"""Reliable delivery for one queue pair: PSN bookkeeping, ACK/SACK/NACK, loss recovery.

Two recovery modes, both pure logic (no SimPy; the queue pair owns timers and packets):

``gbn`` -- go-back-N, classic RoCE (IBTA reliable connection). The responder accepts only the
expected PSN; an out-of-order packet is dropped and answered with one "PSN sequence error" NAK
per episode (no further NAK until the expected PSN arrives), duplicates are re-acknowledged.
The requester rewinds to the NAK'd PSN and resends everything from there. Under per-packet
spraying every reordering looks like a loss, which is the retransmission storm that keeps
classic RoCE on one path per QP. [S: IBTA vol. 1 rel. 1.x, ch. 9.7 "Reliable Service": the
responder answers an out-of-sequence request with a "PSN sequence error" NAK (AETH syndrome
0x60, NAK code 0) carrying the expected PSN, once per sequence error; the requester takes it as
acknowledging every PSN below and resends from the NAK'd PSN, as the Linux ipath/qib
requesters' ``do_rc_ack`` do (NAK code 0 "PSN sequence error": back up to that PSN).]

``sr`` with ``seq_nak`` -- InfiniBand RC with out-of-order data placement (ConnectX-5 and later,
NVIDIA "Out-of-Order (OOO) Data Placement", MLNX_OFED/DOCA docs: packets a QP receives out of
order "are handled instead of being dropped, in order to avoid retransmission"): the responder
places an out-of-order packet as selective repeat does and still reports the sequence error as
ch. 9.7 says (one :data:`SEQ_NAK` per sequence error, carrying the expected PSN, none again
until that PSN arrives); its ACKs carry no SACK (``sack_bits`` 0: the AETH is a syndrome and an
MSN, 9.3.5). The requester goes back N from the NAK'd PSN (:meth:`SenderReliability.on_nack`
with ``seq``). When the QP's packets may be reordered on the way (switch adaptive routing,
spraying) the queue pair first waits until the NAK'd PSN is overdue by RACK's rule (RFC 8985
6.2: lost once ``now >= xmit_ts + rtt + reo_wnd``, :meth:`SenderReliability.nak_lost_at`), so
reordering alone never triggers a go-back-N; NVIDIA does not publish how an OOO-placing
ConnectX tells reordering from loss, so this wait is an assumption [E].

``sr`` -- selective repeat, as in UEC's reliable-unordered delivery, AWS SRD and MP-RDMA:
the receiver keeps out-of-order packets (bounded by a per-NIC :class:`ReorderBuffer`) and
reports them in a SACK bitmap next to the cumulative PSN; the sender retransmits only holes.
A hole is declared lost RACK-style (RFC 8985): when a packet sent at least ``reorder window``
later than the hole has been delivered. The window is ``reo_factor x srtt`` (at least
``reo_min_s``) and grows by one ``reo_factor`` step each time the receiver reports a duplicate
(a spurious retransmission, like TCP's DSACK-driven adaptation), so spraying over queues of
different depth does not trigger needless resends. A NACK from the receiver (its reorder buffer
was full) marks that one PSN lost at once.

The SACK bitmap may be bounded (``sack_bits``, the NIC's ``sack_bitmap``): UEC 1.0's ACK_CC
carries the cumulative PSN, a SACK base offset and a 64-bit bitmap (UET 1.0 PDS Table 3-36:
``sack_psn_offset`` 16 b, ``sack_bitmap`` 64 b). Each ACK then reports only the window
``[base, base + sack_bits)`` at ``base = max(cum + 1, psn - sack_bits + 1)`` for the data PSN
``psn`` that triggered it (:func:`sack_base`: the window ends at the arriving packet, the rule of
the UEC reference simulator's sink, uet-htsim 40ccb05 uec.cpp ``UecSink::sackBitmapBase``; its
ECN-marked and AR ACKs start the window at the arriving PSN instead, which podsim does not
model). The sender keeps what earlier ACKs SACKed (a receiver never reneges: it holds every
out-of-order packet until it is delivered in order), and RACK declares lost only PSNs an ACK
reported missing: the cumulative PSN, a zero bit inside the window at hand, or an original
(never resent) PSN a zero bit of an earlier window reported, within the latest run of touching
windows (so a hole that leaves the 64-PSN window before RACK's reordering window has passed is
still found). A PSN no window covered is unknown, not a hole, and never declared lost from
the missing bit. ``sack_bits=None`` reports every held PSN;
``0`` sends cumulative ACKs only (RACK never fires; NACKs, the tail probe and the RTO recover).

Both modes fall back on a retransmission timeout: the queue pair calls
:meth:`SenderReliability.on_timeout` when nothing was acknowledged for one RTO; ``gbn`` resends
from the oldest unacknowledged PSN, ``sr`` resends every unacknowledged, un-SACKed PSN. In
``sr`` mode the queue pair may first send a tail-loss probe (:meth:`probe_tail`, RFC 8985).

PSNs are plain unbounded ints (the 24-bit wrap of the BTH is irrelevant for correctness here as
long as fewer than 2**23 packets are outstanding, which the window guarantees).
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable

__all__ = [
    "ACK",
    "LOST",
    "MODE_GBN",
    "MODE_SR",
    "NACK",
    "NONE",
    "RELIABILITY_MODES",
    "RESENT",
    "SACKED",
    "SENT",
    "SEQ_NAK",
    "ReceiverReliability",
    "ReorderBuffer",
    "SenderReliability",
    "check_mode",
    "check_sack_bits",
    "sack_base",
]

MODE_GBN = 0
MODE_SR = 1
RELIABILITY_MODES = {
    "gbn": MODE_GBN,
    "go-back-n": MODE_GBN,
    "sr": MODE_SR,
    "selective-repeat": MODE_SR,
}

# Per-PSN sender states (one byte each in a bytearray, so a C-level find() locates holes).
SENT = 0  # original transmission in flight
SACKED = 1  # selectively acknowledged above the cumulative PSN
LOST = 2  # declared lost, waiting in the retransmission queue
RESENT = 3  # a retransmitted copy is in flight

# Receiver verdicts for one data packet.
NONE = 0  # nothing to send now (coalescing)
ACK = 1  # send an ACK (cumulative PSN + SACK bitmap)
NACK = 2  # send a NACK for ``ReceiverReliability.nack_psn`` (selective repeat: buffer full)
#: send a "PSN sequence error" NAK for ``ReceiverReliability.nack_psn`` (the expected PSN):
#: IBTA vol. 1 ch. 9.7, AETH syndrome NAK code 0; the requester goes back N from that PSN
SEQ_NAK = 3

_TRIM = 4096  # drop sender bookkeeping this many PSNs behind snd_una at a time


def check_mode(mode: str | int) -> int:
    """The int mode for ``"gbn"``/``"sr"`` (aliases ``go-back-n``, ``selective-repeat``)."""
    if isinstance(mode, str):
        try:
            return RELIABILITY_MODES[mode.lower()]
        except KeyError:
            raise ValueError(
                f"reliability mode {mode!r} is unknown; expected 'gbn' or 'sr'"
            ) from None
    if mode in (MODE_GBN, MODE_SR) and not isinstance(mode, bool):
        return int(mode)
    raise ValueError(f"reliability mode {mode!r} is unknown; expected 'gbn' or 'sr'")


def check_sack_bits(sack_bits: int | None) -> int | None:
    """``sack_bits`` as an int >= 0, or None (unbounded); ValueError otherwise."""
    if sack_bits is None:
        return None
    if isinstance(sack_bits, bool) or not isinstance(sack_bits, int) or sack_bits < 0:
        raise ValueError(f"SACK bitmap width {sack_bits!r}; expected an int >= 0 bits or None")
    return sack_bits


def sack_base(cum: int, psn: int, sack_bits: int) -> int:
    """First PSN a ``sack_bits``-wide SACK bitmap covers in an ACK of cumulative PSN ``cum``
    triggered by data PSN ``psn``: the window ends at ``psn`` and never starts below
    ``cum + 1`` (PSN ``cum`` is missing by definition). Both ends use it: the receiver to build
    the bitmap, the sender to know which PSNs the bitmap speaks for (UET carries the offset,
    ``sack_psn_offset``; here it follows from ``cum`` and the ACK's ``dpsn``)."""
    b = psn - sack_bits + 1
    return b if b > cum else cum + 1


class SenderReliability:
    """Requester-side PSN state of one QP.

    The queue pair posts PSNs with :meth:`post` (message by message), asks :meth:`pick` which
    PSN to transmit next, reports the transmission with :meth:`on_send`, and feeds back
    :meth:`on_ack` / :meth:`on_nack` / :meth:`on_timeout`. ``inflight_bytes`` is the payload
    in the network that is neither acknowledged nor declared lost (TCP's "pipe"), which is what
    a congestion window limits.
    """

    __slots__ = (
        "_base",
        "_cov_hi",
        "_cov_lo",
        "_ev",
        "_rtx",
        "_size",
        "_state",
        "_tx_time",
        "acked_bytes",
        "end_psn",
        "high_sent",
        "inflight_bytes",
        "loss_cb",
        "mode",
        "n_lost",
        "reo_factor",
        "reo_min_s",
        "reo_steps",
        "retransmits",
        "sack_bits",
        "sacked_rel",
        "snd_nxt",
        "snd_una",
        "srtt",
        "timeouts",
    )

    def __init__(
        self,
        mode: str | int = "sr",
        reo_factor: float = 0.25,
        reo_min_s: float = 1e-6,
        sack_bits: int | None = None,
    ):
        self.mode = check_mode(mode)
        #: width of the receiver's SACK bitmap (None: unbounded), see the module docstring
        self.sack_bits = check_sack_bits(sack_bits)
        if reo_factor <= 0 or reo_min_s < 0:
            raise ValueError(
                f"reorder window reo_factor={reo_factor!r}, reo_min_s={reo_min_s!r}; "
                "expected reo_factor > 0 and reo_min_s >= 0"
            )
        self.reo_factor = float(reo_factor)
        self.reo_min_s = float(reo_min_s)
        self.reo_steps = 1  # grows on reported duplicates (spurious retransmissions)
        self.snd_una = 0  # oldest unacknowledged PSN
        self.snd_nxt = 0  # next PSN to send in sequence (go-back-N rewinds it)
        self.high_sent = 0  # one past the highest PSN ever sent
        self.end_psn = 0  # one past the last posted PSN
        self.sacked_rel = 0  # bit i: PSN snd_una + i is SACKed
        self.inflight_bytes = 0
        self.acked_bytes = 0  # unique payload bytes acknowledged (cumulative or SACK)
        self.retransmits = 0  # packets sent more than once
        self.timeouts = 0
        self.n_lost = 0  # PSNs currently declared lost and not yet resent
        self.srtt = 0.0  # smoothed RTT, fed by the QP (0 = no sample yet)
        self._base = 0  # PSN of index 0 of the arrays below
        self._state = bytearray()
        self._tx_time = array("d")  # raw doubles: no float object kept alive per PSN
        self._size: list[int] = []
        self._ev: list[int] = []  # entropy value of each PSN's latest transmission
        self._rtx: deque[int] = deque()
        # bounded SACK: PSNs [_cov_lo, _cov_hi) were each reported (held or missing) by some ACK
        # after their original was sent (the latest run of touching windows)
        self._cov_lo = 0
        self._cov_hi = 0
        #: called as ``loss_cb(ev, now)`` for each PSN that loss detection (RACK or a NACK in
        #: selective-repeat mode) declares lost, so path selectors can penalise its path.
        self.loss_cb: Callable[[int, float], object] | None = None

    # -- posting and sending ---------------------------------------------------------------
    def post(self, npkts: int) -> int:
        """Reserve ``npkts`` PSNs for a new message; returns its first PSN."""
        first = self.end_psn
        self.end_psn = first + npkts
        return first

    def has_data(self) -> bool:
        """True if a retransmission or a new PSN is waiting to be sent."""
        return self.n_lost > 0 or self.snd_nxt < self.end_psn

    def pick(self) -> int:
        """The PSN to send next (retransmissions first), or -1 if there is none."""
        if self.n_lost:
            if self.mode == MODE_SR:
                rtx = self._rtx
                state = self._state
                base = self._base
                while rtx:
                    psn = rtx.popleft()
                    if psn >= self.snd_una and state[psn - base] == LOST:
                        rtx.appendleft(psn)  # stays queued until on_send
                        return psn
                self.n_lost = 0  # every queued entry turned out delivered
            else:
                return self.snd_nxt
        if self.snd_nxt < self.end_psn:
            return self.snd_nxt
        return -1

    def on_send(self, psn: int, size: int, now: float, ev: int = 0) -> bool:
        """Record the transmission of ``psn`` carrying ``size`` payload bytes on path ``ev``.

        Returns True if it is a retransmission.
        """
        self.inflight_bytes += size
        if psn >= self.high_sent:  # first transmission (PSNs go out in order the first time)
            self._state.append(SENT)
            self._tx_time.append(now)
            self._size.append(size)
            self._ev.append(ev)
            self.high_sent = psn + 1
            self.snd_nxt = psn + 1
            return False
        i = psn - self._base
        if self._state[i] == LOST:
            self.n_lost -= 1
        self._state[i] = RESENT
        self._tx_time[i] = now
        self._ev[i] = ev
        self.retransmits += 1
        if self.mode == MODE_SR:
            if self._rtx and self._rtx[0] == psn:
                self._rtx.popleft()
        elif psn == self.snd_nxt:
            self.snd_nxt = psn + 1
            if self.n_lost and psn + 1 >= self.high_sent:
                self.n_lost = 0
        return True

    # -- feedback ---------------------------------------------------------------------------
    def reorder_window(self) -> float:
        """Current RACK reordering window, seconds."""
        return max(self.reo_min_s, self.reo_steps * self.reo_factor * self.srtt)

    def on_duplicate_report(self) -> None:
        """The receiver saw a duplicate: a retransmission was spurious; widen the window."""
        if self.reo_steps < 16:
            self.reo_steps += 1

    def on_ack(self, cum: int, bits: int, now: float, psn: int = -1) -> int:
        """Cumulative PSN ``cum`` (all below received) and SACK ``bits`` (bit i = ``cum + i``)
        of an ACK triggered by data PSN ``psn`` (which places a bounded bitmap's window).

        Returns the payload bytes newly acknowledged by this ACK. Stale and duplicate ACKs
        are harmless.
        """
        una = self.snd_una
        if cum == una + 1 and not bits and not self.sacked_rel and cum <= self.high_sent:
            # The usual ACK, the general path below specialised: it covers the next PSN and
            # no SACK state exists (so that PSN is not SACKED, and RACK has nothing to do).
            base = self._base
            i = una - base
            n = self._size[i]
            if self._state[i] == LOST:
                self.n_lost -= 1
            else:
                self.inflight_bytes -= n
            self.snd_una = cum
            if self.snd_nxt < cum:
                self.snd_nxt = cum
            if cum >= self.high_sent:
                self.n_lost = 0
                self._rtx.clear()
            self.acked_bytes += n
            if cum - base > _TRIM:
                self._trim()
            return n
        newly = 0
        rack_ts = -1.0
        base = self._base
        state = self._state
        if cum > self.high_sent:
            raise ValueError(f"ACK for PSN {cum} beyond the highest sent {self.high_sent}")
        if cum > una:
            size = self._size
            tx = self._tx_time
            for i in range(una - base, cum - base):
                st = state[i]
                if st != SACKED:
                    newly += size[i]
                    if st == LOST:
                        self.n_lost -= 1
                    else:
                        self.inflight_bytes -= size[i]
                    if tx[i] > rack_ts:
                        rack_ts = tx[i]
            self.sacked_rel >>= cum - una
            self.snd_una = una = cum
            if self.snd_nxt < una:
                self.snd_nxt = una
            if una >= self.high_sent:
                self.n_lost = 0
                self._rtx.clear()
        if bits and self.mode == MODE_SR:
            if cum < una:
                bits >>= una - cum
            new = bits & ~self.sacked_rel
            if new:
                self.sacked_rel |= new
                size = self._size
                tx = self._tx_time
                off = una - base
                while new:
                    low = new & -new
                    i = off + low.bit_length() - 1
                    new ^= low
                    st = state[i]
                    newly += size[i]
                    if st == LOST:
                        self.n_lost -= 1
                    else:
                        self.inflight_bytes -= size[i]
                    state[i] = SACKED
                    if tx[i] > rack_ts:
                        rack_ts = tx[i]
        self.acked_bytes += newly
        if rack_ts >= 0.0 and self.mode == MODE_SR:
            w = self.sack_bits
            if w is None:
                if self.sacked_rel:
                    self._detect_losses(rack_ts - self.reorder_window(), now)
            elif self.sacked_rel or cum == una < self.high_sent:
                # a bounded bitmap may leave nothing SACKed while the cumulative PSN is a
                # reported hole: a retransmission sent after it and delivered exposes it
                self._detect_reported(rack_ts - self.reorder_window(), now, cum, bits, psn, w)
        if una - base > _TRIM:
            self._trim()
        return newly

    def _trim(self) -> None:
        """Drop the per-PSN records below ``snd_una``."""
        k = self.snd_una - self._base
        del self._state[:k]
        del self._tx_time[:k]
        del self._size[:k]
        del self._ev[:k]
        self._base = self.snd_una

    def _detect_losses(self, threshold: float, now: float) -> None:
        """Mark in-flight holes below the highest SACK that were sent before ``threshold``."""
        start = self.snd_una - self._base
        self._mark_holes(start, start + self.sacked_rel.bit_length(), threshold, now)

    def _detect_reported(
        self, threshold: float, now: float, cum: int, bits: int, psn: int, w: int
    ) -> None:
        """:meth:`_detect_losses` for a bounded bitmap: only PSNs an ACK reported missing may be
        declared lost, never one no window covered (it may have arrived unreported). Missing:
        ``cum`` itself, and the un-SACKed PSNs of a window ``[sack_base, + w)``; an original's
        report stays valid while it is not resent (the covered run of touching windows), a
        retransmitted copy's only in the ACK at hand."""
        base = self._base
        una = self.snd_una
        top = una + max(1, self.sacked_rel.bit_length())  # past the highest SACK (or cum)
        lo = sack_base(cum, psn, w)
        hi = lo + w
        # the window speaks only for PSNs sent before the receiver built the ACK: originals go
        # out in PSN order, so those up to the highest PSN this ACK shows received
        seen = max(psn + 1, cum + bits.bit_length())
        cap = hi if hi < seen else seen
        if lo < cap:
            if lo <= self._cov_hi and cap >= self._cov_lo:
                if lo < self._cov_lo:
                    self._cov_lo = lo
                if cap > self._cov_hi:
                    self._cov_hi = cap
            else:
                self._cov_lo, self._cov_hi = lo, cap
        if cum == una:
            self._mark_holes(cum - base, cum - base + 1, threshold, now)
        a = self._cov_lo if self._cov_lo > una else una
        b = self._cov_hi if self._cov_hi < top else top
        if a < b:
            self._mark_holes(a - base, b - base, threshold, now, resent=False)
        a = lo if lo > una else una
        b = hi if hi < top else top
        if a < b:
            self._mark_holes(a - base, b - base, threshold, now, sent=False)

    def _mark_holes(
        self,
        start: int,
        end: int,
        threshold: float,
        now: float,
        sent: bool = True,
        resent: bool = True,
    ) -> None:
        """Declare lost the in-flight PSNs at array indices ``[start, end)`` (not SACKed)
        last sent at or before ``threshold``: originals (``sent``), resent copies (``resent``)."""
        state = self._state
        tx = self._tx_time
        size = self._size
        base = self._base
        # Originals go out in PSN order, so their send times rise with the PSN: stop at the
        # first one that is too recent. Resent copies are checked one by one.
        cb = self.loss_cb
        i = state.find(SENT, start, end) if sent else -1
        while i >= 0 and tx[i] <= threshold:
            state[i] = LOST
            self.inflight_bytes -= size[i]
            self.n_lost += 1
            self._rtx.append(base + i)
            if cb is not None:
                cb(self._ev[i], now)
            i = state.find(SENT, i + 1, end)
        i = state.find(RESENT, start, end) if resent else -1
        while i >= 0:
            if tx[i] <= threshold:
                state[i] = LOST
                self.inflight_bytes -= size[i]
                self.n_lost += 1
                self._rtx.append(base + i)
                if cb is not None:
                    cb(self._ev[i], now)
            i = state.find(RESENT, i + 1, end)

    def on_nack(self, psn: int, now: float, seq: bool = False) -> None:
        """The receiver reports ``psn`` missing.

        go-back-N, or a PSN sequence error NAK (``seq``, IBTA vol. 1 ch. 9.7): everything below
        ``psn`` arrived; rewind and resend every unacknowledged PSN from ``psn`` on.
        selective repeat otherwise: the receiver dropped ``psn`` (reorder buffer full); resend
        it only.
        """
        if psn < self.snd_una or psn >= self.high_sent:
            return
        if self.mode == MODE_GBN:
            self.on_ack(psn, 0, now)
            self._mark_lost_from(psn)
            self.snd_nxt = psn
        elif seq:
            self.on_ack(psn, 0, now)
            self._rtx.clear()  # nothing below psn is missing; _mark_lost_from re-queues the rest
            self._mark_lost_from(psn)
        else:
            i = psn - self._base
            st = self._state[i]
            if st in (SENT, RESENT):
                self._state[i] = LOST
                self.inflight_bytes -= self._size[i]
                self.n_lost += 1
                self._rtx.appendleft(psn)

    def nak_lost_at(self, psn: int, rtt: float) -> float:
        """When a PSN sequence error NAK for ``psn`` proves it lost rather than late, on a path
        that may reorder: RACK's rule (RFC 8985 6.2), a packet is lost once
        ``now >= xmit_ts + rtt + reo_wnd`` after a packet sent later was delivered (the NAK
        shows one was). ``rtt``: the round trip to assume (the smoothed RTT)."""
        i = psn - self._base
        return self._tx_time[i] + rtt + self.reorder_window()

    def on_timeout(self, now: float) -> bool:
        """Retransmission timeout: declare every in-flight PSN lost. False if none was."""
        if self.snd_una >= self.high_sent:
            return False
        self.timeouts += 1
        if self.mode == MODE_GBN:
            self._mark_lost_from(self.snd_una)
            self.snd_nxt = self.snd_una
        else:
            self._rtx.clear()
            self.n_lost = 0
            self._mark_lost_from(self.snd_una)
        return True

    def inflight_evs(self) -> list[int]:
        """Distinct entropy values of the packets now in flight (oldest PSN first)."""
        state = self._state
        evs = self._ev
        seen: dict[int, None] = {}
        for i in range(self.snd_una - self._base, self.high_sent - self._base):
            st = state[i]
            if st in (SENT, RESENT):
                seen[evs[i]] = None
        return list(seen)

    def probe_tail(self) -> bool:
        """Tail-loss probe (RFC 8985 TLP, selective repeat only): resend the highest in-flight
        PSN so that its SACK exposes lost packets that no later ACK would reveal."""
        if self.mode != MODE_SR:
            return False
        state = self._state
        start = self.snd_una - self._base
        end = self.high_sent - self._base
        i = max(state.rfind(SENT, start, end), state.rfind(RESENT, start, end))
        if i < 0:
            return False
        state[i] = LOST
        self.inflight_bytes -= self._size[i]
        self.n_lost += 1
        self._rtx.appendleft(self._base + i)
        return True

    def _mark_lost_from(self, psn: int) -> None:
        state = self._state
        size = self._size
        base = self._base
        sr = self.mode == MODE_SR
        n = 0
        for i in range(psn - base, self.high_sent - base):
            st = state[i]
            if st in (SENT, RESENT):
                state[i] = LOST
                self.inflight_bytes -= size[i]
                n += 1
                if sr:
                    self._rtx.append(base + i)
            elif st == LOST:
                n += 1
                if sr:
                    self._rtx.append(base + i)
        # SR re-queues in PSN order; stale duplicates in the deque are skipped by pick()
        self.n_lost = n

    # -- inspection -------------------------------------------------------------------------
    def ev_of(self, psn: int) -> int:
        """Entropy value ``psn`` was last sent with (-1 if unknown or already trimmed)."""
        i = psn - self._base
        return self._ev[i] if 0 <= i < len(self._ev) else -1

    def is_acked(self, psn: int) -> bool:
        """True if ``psn`` is acknowledged: below the cumulative PSN, or SACKed."""
        if psn < self.snd_una:
            return True
        i = psn - self._base
        return i < len(self._state) and self._state[i] == SACKED

    def outstanding(self) -> int:
        """PSNs sent and not yet cumulatively acknowledged."""
        return self.high_sent - self.snd_una

    def done(self) -> bool:
        """Every posted PSN is acknowledged."""
        return self.snd_una >= self.end_psn


class ReorderBuffer:
    """A NIC's bounded out-of-order packet store, shared by its receiving QPs.

    Capacity is in payload bytes. ``used`` is the current occupancy, ``max_used`` its peak,
    ``drops`` the packets refused for lack of space (they are NACKed and resent).
    """

    __slots__ = ("capacity", "drops", "max_used", "used")

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"reorder buffer capacity {capacity!r}; expected bytes >= 0")
        self.capacity = int(capacity)
        self.used = 0
        self.max_used = 0
        self.drops = 0

    def take(self, nbytes: int) -> bool:
        used = self.used + nbytes
        if used > self.capacity:
            self.drops += 1
            return False
        self.used = used
        if used > self.max_used:
            self.max_used = used
        return True

    def release(self, nbytes: int) -> None:
        self.used -= nbytes


class ReceiverReliability:
    """Responder-side PSN state of one QP.

    :meth:`on_data` classifies each arriving data packet and returns :data:`NONE`,
    :data:`ACK` or :data:`NACK`; the ACK carries ``rcv_nxt`` (cumulative) and
    :meth:`sack_report` (bit i: PSN ``rcv_nxt + i`` is held out of order, within the
    ``sack_bits`` window of the triggering PSN; ``ooo_bits`` holds every such PSN). ACKs are
    coalesced: one per ``ack_every`` packets, but at once for the last packet of a message (or
    the sender's ACK request), an ECN-marked packet (so congestion and path feedback are
    exact), a duplicate, or -- with ``ack_gap_fill`` -- a packet that fills a hole.

    ``ack_gap_fill`` True is TCP's rule: an immediate ACK when a segment fills all or part of a
    gap (RFC 5681 section 4.2). False is the UEC reference simulator's (uet-htsim 40ccb05
    ``uec.cpp`` ``UecSink::processData``): a packet that fills a gap counts towards the
    coalescing like any other, and an ACK request that found a gap open is remembered and
    answered when the last gap closes (``ack_req``), so the sender still learns that its
    window's last packet arrived. Under packet spraying the packet that fills a gap is the one
    that took a slow path; an immediate ACK for it feeds that path back as an uncongested one
    (REPS recycles the entropy of every unmarked ACK).
    ``delivered_bytes`` counts each PSN's payload exactly once.
    """

    __slots__ = (
        "_sizes",
        "ack_every",
        "ack_gap_fill",
        "ack_req",
        "delivered_bytes",
        "dup_pending",
        "dup_pkts",
        "mode",
        "nack_psn",
        "nak_sent",
        "ooo_bits",
        "ooo_drops",
        "ooo_pkts",
        "pending",
        "rcv_nxt",
        "rob",
        "sack_bits",
        "seq_nak",
    )

    def __init__(
        self,
        mode: str | int = "sr",
        rob: ReorderBuffer | None = None,
        ack_every: int = 1,
        sack_bits: int | None = None,
        seq_nak: bool = False,
        ack_gap_fill: bool = True,
    ) -> None:
        self.mode = check_mode(mode)
        self.sack_bits = check_sack_bits(sack_bits)  # None: the bitmap reports every held PSN
        #: selective repeat: also NAK each sequence error (IB RC with out-of-order placement,
        #: see the module docstring); go-back-N always does
        self.seq_nak = bool(seq_nak)
        if ack_every < 1:
            raise ValueError(f"ack_every {ack_every!r}; expected an int >= 1")
        self.ack_every = int(ack_every)
        self.ack_gap_fill = bool(ack_gap_fill)
        self.ack_req = False  # without ack_gap_fill: an ACK request waits for the gaps to close
        self.rob = rob if rob is not None else ReorderBuffer(1 << 62)
        self.rcv_nxt = 0
        self.ooo_bits = 0
        self.ooo_pkts = 0
        self._sizes: dict[int, int] = {}  # payload of each buffered out-of-order PSN
        self.nak_sent = False
        self.nack_psn = -1
        self.pending = 0
        self.delivered_bytes = 0
        self.dup_pkts = 0
        self.dup_pending = False  # report a duplicate in the next ACK (DSACK-like)
        self.ooo_drops = 0  # packets discarded for arriving out of order (gbn) or no space

    def on_data(self, psn: int, payload: int, last: bool, ecn: bool) -> int:
        """A data packet: its reliability verdict (ACK, NACK or NONE = coalesce). ``last``: the
        sender asks for an ACK now (the last packet of a message, or the ACK-request flag)."""
        nxt = self.rcv_nxt
        if psn == nxt:
            self.delivered_bytes += payload
            bits = self.ooo_bits
            if bits:
                b = bits | 1
                k = ((b ^ (b + 1)).bit_length()) - 1  # trailing ones: packets now in order
                sizes = self._sizes
                freed = 0
                for p in range(nxt + 1, nxt + k):
                    freed += sizes.pop(p)
                self.rob.release(freed)
                self.ooo_pkts -= k - 1
                self.ooo_bits = b >> k
                self.rcv_nxt = nxt + k
                self.nak_sent = False  # the expected PSN arrived: the sequence error is over
                if self.ack_gap_fill:
                    self.pending = 0
                    return ACK  # a hole was filled: tell the sender now
                # uec.cpp UecSink::processData: an ACK request is answered now and, if gaps
                # remain, again when the last one closes; a filled gap is otherwise no reason
                if last:
                    self.ack_req = True
                if self.ack_req and not self.ooo_bits:
                    self.ack_req = False
                    last = True
            else:
                self.rcv_nxt = nxt + 1
                self.nak_sent = False
            self.pending += 1
            if last or ecn or self.pending >= self.ack_every:
                self.pending = 0
                return ACK
            return NONE
        if psn < nxt:
            self.dup_pkts += 1
            # an IB AETH (seq_nak) has no duplicate report, and go-back-N makes duplicates
            # that say nothing about reordering
            self.dup_pending = not self.seq_nak
            self.pending = 0
            return ACK
        # psn > rcv_nxt: out of order
        if self.mode == MODE_GBN:
            self.ooo_drops += 1
            if self.nak_sent:
                return NONE
            self.nak_sent = True
            self.nack_psn = nxt
            self.pending = 0
            return SEQ_NAK
        off = psn - nxt
        if (self.ooo_bits >> off) & 1:
            self.dup_pkts += 1
            self.dup_pending = not self.seq_nak
            self.pending = 0
            return ACK
        if not self.rob.take(payload):
            self.ooo_drops += 1
            self.nack_psn = psn
            self.pending = 0
            return NACK
        self.ooo_bits |= 1 << off
        if last and not self.ack_gap_fill:
            self.ack_req = True  # answered now, and again when the gaps close
        self._sizes[psn] = payload
        self.ooo_pkts += 1
        self.delivered_bytes += payload
        if self.seq_nak and not self.nak_sent:
            # placed, and the sequence error reported once (IBTA vol. 1 ch. 9.7)
            self.nak_sent = True
            self.nack_psn = nxt
            self.pending = 0
            return SEQ_NAK
        self.pending += 1
        if last or ecn or self.pending >= self.ack_every:
            self.pending = 0
            return ACK
        return NONE

    def sack_report(self, psn: int) -> int:
        """The SACK bitmap of an ACK triggered by data PSN ``psn`` (bit i: PSN ``rcv_nxt + i``
        held): every held PSN, or with ``sack_bits`` only those in the window at
        :func:`sack_base`."""
        bits = self.ooo_bits
        w = self.sack_bits
        if w is None or not bits:
            return bits
        nxt = self.rcv_nxt
        return bits & (((1 << w) - 1) << (sack_base(nxt, psn, w) - nxt))
