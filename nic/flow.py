"""The SmartNIC as the flow engine sees it: its packet-rate and PCIe limits as fluid
constraints, and its QP-context cache as latency.

The packet engine models these per packet (:mod:`podsim.nic.transport.pipeline`: the
packet-rate pipeline and the QP-context cache). A fluid model has no packets to delay, so:

- The packet-rate ceiling of a card (``cluster.nic.packet_rate``, 400 Mpps for the design's
  SmartNIC, docs/physics.md [S]) is one constraint per card and direction, loaded by each flow in
  packets per payload bit: small-message traffic is bound by it before the wire.
- PCIe is not a per-card cap here: the flow engine adds every node tree's resources as
  constraints of their own (:meth:`podsim.nic.pcie.cluster.ClusterPcie.rank_loads`, see
  :mod:`podsim.scenarios.engines.flow`).
- A message on a queue pair whose context is not cached waits ``qp_miss_penalty`` at the sender
  before its first packet and at the receiver before delivering it; the receiver's wait is hidden
  behind the rest of the message's serialisation (:class:`QpCacheLatency`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from podsim.fabric.flow import FlowPaths, wire_bytes
from podsim.fabric.packet import MIN_WIRE_BYTES, ROCE_OVERHEAD

__all__ = ["NicConstraints", "QpCacheLatency", "nic_constraints"]


@dataclass
class NicConstraints:
    """Constraint indices (into :class:`podsim.fabric.flow.FlowPaths`) per card position:
    packet rate out and in."""

    pps_tx: np.ndarray
    pps_rx: np.ndarray

    def of(self, cs: np.ndarray, cd: np.ndarray) -> list[np.ndarray]:
        """The NIC constraints a flow from card position ``cs`` to ``cd`` loads."""
        return [self.pps_tx[cs], self.pps_rx[cd]]


def nic_constraints(paths: FlowPaths, cards: np.ndarray, pps: float) -> NicConstraints:
    """Add every card's packet-rate constraints (tier ``nic-pps``), transmit and receive."""
    names = [f"nic{int(c)}" for c in cards]
    full = np.full(cards.size, float(pps))
    return NicConstraints(
        pps_tx=paths.add_constraints([f"{m}:tx-pps" for m in names], full, "nic-pps"),
        pps_rx=paths.add_constraints([f"{m}:rx-pps" for m in names], full, "nic-pps"),
    )


class QpCacheLatency:
    """Extra latency of QP-context misses on the cards of a fluid model.

    The first message of each (card, card) queue pair misses at both ends (cold), and every
    message of a card that talks to more peers than its cache holds (``capacity`` contexts)
    misses (LRU capacity misses). A miss costs ``penalty_s`` (a context fetch over PCIe) before
    the first packet; the receiver's miss is hidden behind the rest of the message's
    serialisation. Stateful: the queue pairs seen so far stay cached-or-counted.
    """

    def __init__(
        self,
        capacity: int,
        penalty_s: float,
        mtu: int,
        first_extra: int,
        framing: tuple[int, int] = (ROCE_OVERHEAD, MIN_WIRE_BYTES),
    ) -> None:
        self.capacity = int(capacity)
        self.penalty_s = float(penalty_s)
        self.mtu = int(mtu)
        self.first_extra = int(first_extra)
        self.overhead, self.min_wire = framing  # the link layer's (fabric.packet.link_framing)
        self._seen: set[int] = set()
        self._held = np.zeros(0, dtype=np.int64)

    def delay(
        self, cs: np.ndarray, cd: np.ndarray, nbytes: np.ndarray, rate: np.ndarray
    ) -> np.ndarray:
        """Seconds added to each message from card ``cs`` to ``cd`` of ``nbytes`` payload
        bytes whose first link runs at ``rate`` bit/s."""
        code = cs * (1 << 31) + cd
        uniq, first_pos = np.unique(code, return_index=True)
        fresh = np.fromiter((int(u) not in self._seen for u in uniq.tolist()), bool, uniq.size)
        self._seen.update(uniq[fresh].tolist())
        cold = np.zeros(code.size, dtype=bool)
        cold[first_pos[fresh]] = True
        # QP contexts a card holds: the pairs it sends on plus those it receives on
        top = int(max(cs.max(initial=0), cd.max(initial=0))) + 1
        if top > self._held.size:
            self._held = np.concatenate(
                [self._held, np.zeros(top - self._held.size, dtype=np.int64)]
            )
        np.add.at(self._held, uniq[fresh] // (1 << 31), 1)
        np.add.at(self._held, uniq[fresh] % (1 << 31), 1)
        held = self._held
        miss = cold | (held[cs] > self.capacity) | (held[cd] > self.capacity)
        frame = (self.overhead, self.first_extra, self.min_wire)
        wire = wire_bytes(nbytes, self.mtu, *frame)
        first_wire = wire_bytes(np.minimum(nbytes, self.mtu), self.mtu, *frame)
        hidden = 8.0 * (wire - first_wire) / rate
        p = self.penalty_s
        return np.where(miss, p + np.maximum(0.0, p - hidden), 0.0)
