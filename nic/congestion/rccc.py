"""RCCC-style receiver credits (UEC): the receiver hands out credits to cap incast.

Receiver side, :class:`ReceiverCredit` (one per receiving NIC port): senders request credit for
the bytes they want to send; the receiver accrues credit at its line rate (in payload bytes: the
wire rate x MTU / (MTU + 82 B RoCE overhead), docs/physics.md) while anyone is waiting, and splits
it max-min fairly (water-filling) among the senders with outstanding requests. Credit is not banked
while nobody waits and is never granted beyond what was requested, so the aggregate rate into the
receiver's port cannot exceed its line rate however many senders there are - which is what caps
incast at the last-hop switch. The NIC calls :meth:`ReceiverCredit.grant` periodically while
:attr:`ReceiverCredit.active` (``interval_s``, default four full packets' wire time, keeps it at
one event per four packets per receiving port) and sends each grant to its sender as a credit
control packet.

Sender side, :class:`RCCC`: the flow may send only with credit (``flow.credit_bytes``; the NIC
checks :meth:`FlowCC.may_send`, ``handle_tx`` debits it and ``handle_credit`` adds grants). It
starts with ``initial_credit_bytes`` (0 by default; UEC lets senders send a speculative first
window, model that by raising it) and otherwise paces at line rate with no window.

Loss: requests and grants are control packets and can be dropped (a link or NIC down). With no
credit nothing is in flight for the data RTO to catch, so a sender that has had no grant for one
RTO while it wants credit repeats its request with the whole amount it still wants
(:meth:`ReceiverCredit.refresh`, idempotent), backing off and counting retries like an RTO
(podsim.nic.transport.qp).
"""

from __future__ import annotations

from typing import Any

from podsim.fabric.packet import ROCE_OVERHEAD
from podsim.nic.congestion._check import in_range, positive
from podsim.nic.congestion.api import CongestionControl, FlowCC
from podsim.nic.congestion.registry import CC_ALGORITHMS

__all__ = ["RCCC", "ReceiverCredit"]


class ReceiverCredit:
    """Credit allocator of one receiving port (see the module docstring)."""

    def __init__(
        self,
        rate_bps: float,
        mtu: int,
        overhead_bytes: int = ROCE_OVERHEAD,
        share: float = 1.0,
        interval_s: float | None = None,
    ) -> None:
        positive("ReceiverCredit", "rate_bps", rate_bps)
        positive("ReceiverCredit", "mtu", mtu)
        in_range("ReceiverCredit", "overhead_bytes", overhead_bytes, 0, 10_000)
        in_range("ReceiverCredit", "share", share, 1e-9, 1.0)
        positive("ReceiverCredit", "interval_s", interval_s, allow_none=True)
        self.rate_bps = float(rate_bps)
        self.mtu = int(mtu)
        self.payload_rate_Bps = rate_bps / 8.0 * share * mtu / (mtu + overhead_bytes)
        wire = (mtu + overhead_bytes) * 8.0 / rate_bps
        self.interval_s = float(interval_s) if interval_s is not None else 4.0 * wire
        self._want: dict[Any, int] = {}
        self._budget = 0.0
        self._last = 0.0
        self.granted_total = 0

    @property
    def active(self) -> int:
        """Number of senders waiting for credit."""
        return len(self._want)

    def outstanding(self, flow_id: Any) -> int:
        """Bytes requested by ``flow_id`` and not granted yet."""
        return self._want.get(flow_id, 0)

    def request(self, flow_id: Any, nbytes: int, now: float) -> None:
        """Sender ``flow_id`` wants credit for ``nbytes`` more payload bytes."""
        if int(nbytes) != nbytes or nbytes < 0:
            raise ValueError(f"credit request of {nbytes!r} bytes must be a non-negative integer")
        self._accrue(now)
        if nbytes:
            self._want[flow_id] = self._want.get(flow_id, 0) + int(nbytes)

    def refresh(self, flow_id: Any, nbytes: int, now: float) -> None:
        """Sender ``flow_id`` still wants ``nbytes`` in all (it repeats its request after a
        timeout: the request or grants were lost). Its outstanding request is raised to
        ``nbytes``, never added to: a grant still in flight may then be granted twice, which
        over-grants by at most that grant (lost credit would stall the sender for good)."""
        if int(nbytes) != nbytes or nbytes < 0:
            raise ValueError(f"credit refresh of {nbytes!r} bytes must be a non-negative integer")
        self._accrue(now)
        if nbytes > self._want.get(flow_id, 0):
            self._want[flow_id] = int(nbytes)

    def cancel(self, flow_id: Any) -> int:
        """Withdraw a sender's outstanding request (flow finished or failed); returns it."""
        return self._want.pop(flow_id, 0)

    def grant(self, now: float) -> list[tuple[Any, int]]:
        """Credits accrued since the last call, split max-min fairly: ``[(flow_id, bytes)]``."""
        self._accrue(now)
        want = self._want
        if not want:
            return []
        budget = self._budget
        order = sorted(want.items(), key=lambda kv: kv[1])
        out: list[tuple[Any, int]] = []
        n = len(order)
        for i, (fid, need) in enumerate(order):
            share = budget / (n - i)
            g = need if need <= share else int(share)
            if g > 0:
                out.append((fid, g))
                budget -= g
                if g == need:
                    del want[fid]
                else:
                    want[fid] = need - g
        # Leftover above every request is not banked; a fractional remainder is kept so grants
        # add up to the accrued rate exactly.
        self._budget = budget if want else 0.0
        self.granted_total += sum(g for _, g in out)
        return out

    def _accrue(self, now: float) -> None:
        if now < self._last:
            raise ValueError(f"ReceiverCredit time went backwards: {now!r} < {self._last!r}")
        if self._want:
            self._budget += (now - self._last) * self.payload_rate_Bps
        else:
            self._budget = 0.0
        self._last = now


@CC_ALGORITHMS.register("rccc", "RCCC: receiver-granted credits cap incast (UEC-style)")
class RCCC(CongestionControl):
    """Sender side of receiver credits: send only with credit, otherwise line rate."""

    name = "rccc"
    requires_credit = True

    def __init__(self, initial_credit_bytes: int = 0) -> None:
        in_range(self.name, "initial_credit_bytes", initial_credit_bytes, 0, 2**62)
        self.initial_credit_bytes = int(initial_credit_bytes)

    def init_flow(self, flow: FlowCC, now: float) -> None:
        flow.credit_bytes = self.initial_credit_bytes
        flow.rate_bps = None
        flow.window_bytes = None
