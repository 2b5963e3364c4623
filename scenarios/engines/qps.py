"""QPs of the RDMA engines: which QP a message goes on (:class:`QpNumbering`), and the ``qps``
table (schema in :mod:`scenarios.results.tables`) from an engine's per-message rows.

Both the packet and the flow engine keep one QP per (source rank, destination rank), or
``cluster.nic.qps_per_pair`` of them used round-robin: a rank is one GPU process, and NCCL and
NVSHMEM open QPs per process and peer, so two GPUs behind one NIC card do not share QPs. A QP
sends its messages in order: ``ibv_post_send`` adds each work request to the tail of the QP's
send queue, which the device processes in order (ibv_post_send(3), libibverbs; T. Shanley,
"InfiniBand Network Architecture", Addison-Wesley 2002, ch. 13 "WQE execution order").
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["QpNumbering", "qp_table"]


class QpNumbering:
    """QP index of each message between two NIC cards, in posting order.

    ``rank_nic[r]`` is rank ``r``'s NIC card; ``qps_per_pair`` the QPs per rank pair. The
    index of a message from rank ``a`` to ``b`` is ``(slot[a] x G + slot[b]) x Q + k``:
    ``slot`` a rank's position among its card's ranks, ``G`` the most ranks a card serves,
    ``Q = qps_per_pair`` and ``k`` the pair's message count mod ``Q``. With one rank per card
    this is the card pair's round-robin index (``podsim.nic.nic.RdmaNetwork.post``).
    """

    def __init__(self, rank_nic: np.ndarray, qps_per_pair: int) -> None:
        cards = np.asarray(rank_nic, dtype=np.int64)
        self.slot = np.zeros(cards.size, dtype=np.int64)
        seen: dict[int, int] = {}
        for r, c in enumerate(cards.tolist()):
            self.slot[r] = seen.get(c, 0)
            seen[c] = self.slot[r] + 1
        self.ranks_per_card = max(seen.values(), default=1)
        self.qps_per_pair = int(qps_per_pair)
        self.indices = self.ranks_per_card**2 * self.qps_per_pair  # QPs per card pair
        self._rr: dict[tuple[int, int], int] = {}

    def next(self, src_rank: int, dst_rank: int) -> int:
        """The QP index of the next message from ``src_rank`` to ``dst_rank``."""
        g, q = self.ranks_per_card, self.qps_per_pair
        base = (int(self.slot[src_rank]) * g + int(self.slot[dst_rank])) * q
        if q == 1:
            return base
        k = self._rr.get((src_rank, dst_rank), 0)
        self._rr[(src_rank, dst_rank)] = k + 1
        return base + k % q

    def next_many(self, src_rank: np.ndarray, dst_rank: np.ndarray) -> np.ndarray:
        """:meth:`next` of each message in order."""
        g, q = self.ranks_per_card, self.qps_per_pair
        base = (self.slot[src_rank] * g + self.slot[dst_rank]) * q
        if q == 1:
            return base
        nxt = self.next
        return np.fromiter(
            (nxt(a, b) for a, b in zip(src_rank.tolist(), dst_rank.tolist(), strict=True)),
            dtype=np.int64,
            count=base.size,
        )


def qp_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Aggregate per-message ``rows`` (columns ``src_port``, ``dst_port``, ``src_rank``,
    ``dst_rank``, ``bytes``, ``packets``, ``paths_used``, ``t0`` first transmission and ``t1``
    last delivery, seconds; optionally ``queue``, the QP's send-queue key, which separates the
    ``qps_per_pair`` QPs of one rank pair) into one row per QP, numbered ``qp`` in sorted key
    order. ``mean_rate_bps`` is payload bits over the QP's active time (NaN when it never was)."""
    keys = ["src_port", "dst_port", "src_rank", "dst_rank"]
    g = rows.groupby([*keys, "queue"] if "queue" in rows else keys, sort=True)
    out = g.agg(
        messages=("bytes", "size"),
        bytes=("bytes", "sum"),
        packets=("packets", "sum"),
        paths_used=("paths_used", "max"),
        t0=("t0", "min"),
        t1=("t1", "max"),
    ).reset_index()
    active = (out["t1"] - out["t0"]).where(lambda x: x > 0)
    out["mean_rate_bps"] = 8.0 * out["bytes"] / active
    out.insert(0, "qp", np.arange(len(out), dtype=np.int64))
    return out.drop(columns=["t0", "t1", "queue"], errors="ignore")
