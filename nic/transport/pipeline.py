# cython: language_level=3, annotation_typing=False
"""The NIC's packet-processing pipeline: a packet-rate ceiling, a QP-context cache, a DMA cap.

Model:

* Packet rate. A pipeline (one for transmit, one for receive) starts at most one packet every
  ``1/pps`` seconds. The SmartNIC of the design brief processes 400 Mpps (docs/physics.md,
  "T-Head Panmai 920 ... 400 Mpps" [S, vendor claim]); at 400 Gb/s that is 125 B of wire per
  packet, so frames below about 105 B are packet-rate bound (line rate for 64 B frames would be
  595 Mpps) [D]. The ceiling is a reservation on a time line (no event per packet): a packet
  arriving while the pipeline is idle passes at once; only a backlog costs a scheduled event.
* QP-context cache. Each packet needs its QP's context (PSNs, rate, keys). The NIC caches
  ``entries`` contexts (shared by TX and RX; CLOCK replacement, the hardware approximation
  of LRU); a miss fetches the context from host memory
  over PCIe, which delays that packet by ``miss_penalty_s`` and occupies the pipeline for
  ``miss_penalty_s / parallel_fetches`` (the NIC overlaps a few fetches). Defaults are
  estimates [E]: 4096 entries, 1 us per miss (a PCIe read round trip), 16 fetches in flight.
  This is what makes thousands of QPs cost something (the "QP scalability" cliff of RDMA
  NICs); set ``entries=None`` for an unbounded cache.
* DMA cap. The payload of each packet crosses PCIe; with ``dma_bps`` set (the NIC's share of
  its PCIe tree, from :mod:`podsim.nic.pcie` via ``SmartNic.pcie_rate_cap_bps``), payload bytes are
  also reserved on a DMA time line at that rate.
"""

from __future__ import annotations

__all__ = ["DEFAULT_PPS", "PacketPipeline", "QpContextCache"]

#: Default packet-rate ceiling, packets/s (docs/physics.md: the brief's SmartNIC, 400 Mpps [S]).
DEFAULT_PPS = 400e6


class QpContextCache:
    """The NIC's QP-context cache; :meth:`touch` returns True on a hit.

    Replacement is CLOCK (second chance), the usual hardware approximation of LRU: a hit sets
    the entry's reference bit (one dict store, no reordering); a miss in a full cache sweeps the
    clock hand, clearing reference bits, and evicts the first entry found without one.
    ``entries=None`` is an unbounded cache (only cold misses).
    """

    __slots__ = ("_hand", "_ref", "_ring", "entries", "hits", "misses")

    def __init__(self, entries: int | None = 4096) -> None:
        if entries is not None and (isinstance(entries, bool) or entries < 1):
            raise ValueError(f"QP-context cache entries {entries!r}; expected an int >= 1 or None")
        self.entries = entries
        self._ref: dict[int, int] = {}  # cached QP -> reference bit
        self._ring: list[int] = []  # cached QPs in clock order
        self._hand = 0
        self.hits = 0
        self.misses = 0

    def touch(self, qp: int) -> bool:
        ref = self._ref
        if qp in ref:
            ref[qp] = 1
            self.hits += 1
            return True
        self.misses += 1
        ring = self._ring
        if self.entries is None or len(ring) < self.entries:
            ring.append(qp)
        else:
            h = self._hand
            n = len(ring)
            while ref[ring[h]]:
                ref[ring[h]] = 0
                h = h + 1 if h + 1 < n else 0
            del ref[ring[h]]
            ring[h] = qp
            self._hand = h + 1 if h + 1 < n else 0
        ref[qp] = 1
        return False


class PacketPipeline:
    """One direction (TX or RX) of a NIC's packet pipeline.

    :meth:`admit` reserves the pipeline for one packet of ``qp`` carrying ``nbytes`` payload
    and returns the time the packet leaves it (>= ``now``).
    """

    __slots__ = (
        "cache",
        "dma_bps",
        "dma_free",
        "interval",
        "miss_busy_s",
        "miss_penalty_s",
        "next_free",
        "packets",
        "pps",
    )

    def __init__(
        self,
        pps: float = DEFAULT_PPS,
        cache: QpContextCache | None = None,
        miss_penalty_s: float = 1e-6,
        parallel_fetches: int = 16,
        dma_bps: float | None = None,
    ) -> None:
        if not pps > 0:
            raise ValueError(f"packet rate pps={pps!r}; expected packets/s > 0")
        if miss_penalty_s < 0:
            raise ValueError(f"miss_penalty_s={miss_penalty_s!r}; expected seconds >= 0")
        if parallel_fetches < 1:
            raise ValueError(f"parallel_fetches={parallel_fetches!r}; expected an int >= 1")
        self.pps = float(pps)
        self.interval = 1.0 / self.pps
        self.cache = cache
        self.miss_penalty_s = float(miss_penalty_s)
        self.miss_busy_s = self.miss_penalty_s / parallel_fetches
        self.next_free = 0.0
        self.dma_free = 0.0
        self.dma_bps: float | None = None
        self.set_dma_cap(dma_bps)
        self.packets = 0

    def set_dma_cap(self, dma_bps: float | None) -> None:
        """Cap payload DMA at ``dma_bps`` bit/s (None: no cap)."""
        if dma_bps is not None and not dma_bps > 0:
            raise ValueError(f"DMA cap {dma_bps!r}; expected bit/s > 0 or None")
        self.dma_bps = None if dma_bps is None else float(dma_bps)

    def admit(self, now: float, qp: int, nbytes: int = 0) -> float:
        t = self.next_free
        if t < now:
            t = now
        busy = self.interval
        cache = self.cache
        out = t
        if cache is not None and not cache.touch(qp):
            busy += self.miss_busy_s
            out = t + self.miss_penalty_s
        self.next_free = t + busy
        if self.dma_bps is not None and nbytes:
            d = self.dma_free
            if d < now:
                d = now
            d += nbytes * 8.0 / self.dma_bps
            self.dma_free = d
            if d > out:
                out = d
        self.packets += 1
        return out
