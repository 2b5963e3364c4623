"""The SmartNIC's transmit scheduler across traffic classes.

With traffic classes (:mod:`podsim.fabric.classes`) every QP belongs to one class (RoCE sets
the class per QP: the GRH traffic class / DSCP of its packets, IBTA vol. 1 annex A16), and the
NIC keeps, per port, one ready queue of QPs per class instead of one. When the port asks for a
packet (``Port.source``) the NIC takes the next QP of the class that the same scheduler as the
switches picks (:class:`~podsim.fabric.classes.ClassScheduler`: strict priority across levels,
deficit round robin by weight within one), skipping classes the switch has paused with PFC.
Within a class, QPs take turns as without classes.

Assumed: the scheduler charges a class one full MTU frame per packet (the NIC chooses the QP
before it builds the packet, so the shorter last packet of a message is charged as a full one);
the packet-rate pipeline and the PCIe DMA cap are shared by all classes, first come first
served.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from podsim.fabric.classes import ClassScheduler, TrafficClasses
from podsim.fabric.packet import ROCE_OVERHEAD

if TYPE_CHECKING:
    from podsim.nic.transport.qp import QueuePair

__all__ = ["ClassedReady"]


class ClassedReady:
    """A port's ready QPs, one FIFO per class; the deque interface the NIC's pull loop uses
    (``append``, ``popleft``, truth value = some unpaused class has a ready QP). ``paused`` is
    the port's per-class PFC state (the same list object, so a PAUSE is seen at once)."""

    __slots__ = ("_sched", "paused", "q")

    def __init__(self, classes: TrafficClasses, paused: list[bool]) -> None:
        self.q: list[deque[QueuePair]] = [deque() for _ in range(len(classes))]
        self.paused = paused
        self._sched = ClassScheduler(classes)

    def append(self, qp: QueuePair) -> None:
        self.q[qp.tc].append(qp)

    def __bool__(self) -> bool:
        return any(q and not p for q, p in zip(self.q, self.paused, strict=True))

    def __len__(self) -> int:
        return sum(len(q) for q in self.q)

    def popleft(self) -> QueuePair:
        """The next QP of the class the scheduler picks (IndexError when none is eligible)."""
        head = [
            q[0].mtu + ROCE_OVERHEAD if q and not p else None
            for q, p in zip(self.q, self.paused, strict=True)
        ]
        c = self._sched.pick(head)
        if c is None:
            raise IndexError("no traffic class has a ready QP")
        return self.q[c].popleft()
