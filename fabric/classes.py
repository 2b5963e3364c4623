"""Traffic classes: what they are and how an egress port chooses among them.

A fabric with traffic classes keeps, at every egress port (switch ports and NIC ports), one
DATA queue per class. Control packets (ACK/NACK/CNP/PROBE) and PFC frames keep their own
strict-priority queues ahead of every class (:mod:`podsim.fabric.port`). Among the classes:

* **strict priority** between priority levels: a class is served only while no class of a
  higher ``priority`` has an eligible packet (IEEE 802.1Q-2018 clause 8.6.8.1, "Strict
  priority algorithm");
* **deficit weighted round robin** among the classes of one level, in proportion to their
  ``weight`` (IEEE 802.1Q-2018 clause 37, "Enhanced Transmission Selection", from
  802.1Qaz-2011: a bandwidth share per traffic class; the algorithm is DRR, Shreedhar and
  Varghese, "Efficient fair queuing using deficit round robin", SIGCOMM 1995). Each visit gives
  a class a quantum of ``weight / min weight`` largest DATA frames, so every visit can send at
  least one frame (the paper's condition for O(1) work per packet) and the long-run byte shares
  of backlogged classes follow the weights;
* **per-class PFC** (IEEE 802.1Qbb-2011, now 802.1Q-2018 clause 36): a PAUSE names one priority
  and stops only that class on the link; classes without PFC are lossy (dynamic-threshold
  drops) and never pause;
* **per-class ECN**: marking looks at the depth of the packet's own class queue, with the
  class's thresholds (switches mark per egress queue; NVIDIA's RoCE configuration sets ECN per
  traffic class).

802.1Q carries a 3-bit priority (8 values), and 802.1Qaz/802.1Qbb act on at most 8 traffic
classes: :data:`MAX_CLASSES`.

A packet's class is its ``tc`` (:class:`podsim.fabric.packet.Packet`), an index into the
:class:`TrafficClasses` the network was built with. Class 0 is the default class.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from podsim.fabric.packet import MAX_DATA_WIRE_BYTES

__all__ = [
    "MAX_CLASSES",
    "ClassScheduler",
    "TrafficClass",
    "TrafficClasses",
    "check_class_names",
]

#: IEEE 802.1Q priority code point: 3 bits, so at most 8 traffic classes (802.1Qbb pauses
#: each of the 8 priorities separately).
MAX_CLASSES = 8


@dataclass(frozen=True)
class TrafficClass:
    """One class. ``priority``: strict-priority level (higher is served first); ``weight``:
    its DWRR share among classes of the same priority (> 0); ``pfc``: lossless with per-class
    PFC pauses (False: lossy, dropped by the dynamic threshold); ``ecn_kmin_bytes`` /
    ``ecn_kmax_bytes``: its queue's marking thresholds (None: the switch's)."""

    name: str
    priority: int = 0
    weight: float = 1.0
    pfc: bool = False
    ecn_kmin_bytes: int | None = None
    ecn_kmax_bytes: int | None = None

    def __post_init__(self) -> None:
        if not (self.weight > 0 and math.isfinite(self.weight)):
            raise ValueError(f"traffic class {self.name!r}: weight={self.weight!r} must be > 0")
        if not 0 <= self.priority < MAX_CLASSES:
            raise ValueError(
                f"traffic class {self.name!r}: priority={self.priority!r} must be 0 .. "
                f"{MAX_CLASSES - 1} (802.1Q priorities)"
            )
        lo, hi = self.ecn_kmin_bytes, self.ecn_kmax_bytes
        if (lo is not None and lo < 0) or (hi is not None and hi < 0):
            raise ValueError(f"traffic class {self.name!r}: ECN thresholds must be >= 0 bytes")
        if lo is not None and hi is not None and hi < lo:
            raise ValueError(
                f"traffic class {self.name!r}: ecn_kmax_bytes={hi} must be >= ecn_kmin_bytes={lo}"
            )


@dataclass(frozen=True)
class TrafficClasses:
    """The classes of a fabric, in index order (a packet's ``tc`` indexes this tuple)."""

    classes: tuple[TrafficClass, ...]

    def __post_init__(self) -> None:
        check_class_names([c.name for c in self.classes])

    def __len__(self) -> int:
        return len(self.classes)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.classes]

    def index(self, name: str) -> int:
        """The index (packet ``tc``) of the class called ``name``."""
        for i, c in enumerate(self.classes):
            if c.name == name:
                return i
        raise KeyError(f"no traffic class {name!r}; classes: {', '.join(self.names)}")


def check_class_names(names: Sequence[str]) -> None:
    """ValueError unless there are 1 to :data:`MAX_CLASSES` names, each given once."""
    if not 1 <= len(names) <= MAX_CLASSES:
        raise ValueError(
            f"{len(names)} traffic classes; give 1 to {MAX_CLASSES} (IEEE 802.1Q has 8 "
            "priorities, and 802.1Qbb pauses each separately)"
        )
    dup = sorted({n for n in names if list(names).count(n) > 1})
    if dup:
        raise ValueError(f"traffic class name(s) {', '.join(map(repr, dup))} given twice")


class ClassScheduler:
    """Strict priority across levels, DWRR within a level (module docstring).

    :meth:`pick` is given, per class, the wire bytes of the packet it would send next, or None
    when the class has nothing eligible (empty or paused), and returns the class to serve. The
    scheduler keeps each level's round-robin position and the deficits between calls.
    """

    __slots__ = ("_deficit", "_fresh", "_levels", "_ptr", "_quantum")

    def __init__(self, classes: TrafficClasses) -> None:
        cs = classes.classes
        prios = sorted({c.priority for c in cs}, reverse=True)
        self._levels: list[list[int]] = [
            [i for i, c in enumerate(cs) if c.priority == p] for p in prios
        ]
        least = min(c.weight for c in cs)
        self._quantum = [MAX_DATA_WIRE_BYTES * c.weight / least for c in cs]
        self._deficit = [0.0] * len(cs)
        self._ptr = [0] * len(self._levels)
        #: whether the class under the level's pointer already got this visit's quantum
        self._fresh = [False] * len(self._levels)

    def pick(self, head: Sequence[int | None]) -> int | None:
        """The class to serve now, given ``head[c]`` (see the class docstring); charges the
        served class its head's bytes."""
        for li, level in enumerate(self._levels):
            if len(level) == 1:
                c = level[0]
                if head[c] is not None:
                    return c
                continue
            if all(head[c] is None for c in level):
                continue
            return self._round(li, level, head)
        return None

    def _round(self, li: int, level: list[int], head: Sequence[int | None]) -> int:
        deficit, ptr, n = self._deficit, self._ptr[li], len(level)
        while True:
            c = level[ptr]
            h = head[c]
            if h is None:
                deficit[c] = 0.0  # DRR: a class with nothing to send keeps no credit
            else:
                if not self._fresh[li]:
                    deficit[c] += self._quantum[c]
                    self._fresh[li] = True
                if deficit[c] >= h:
                    deficit[c] -= h
                    self._ptr[li] = ptr
                    return c
            ptr = (ptr + 1) % n
            self._fresh[li] = False
            self._ptr[li] = ptr
