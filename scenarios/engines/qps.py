"""The ``qps`` table (schema in :mod:`scenarios.results.tables`) from an engine's per-message rows.

Both the packet and the flow engine keep one QP per (source port, destination port, source
rank, destination rank): messages between the same pair of ports and ranks share it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["qp_table"]


def qp_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Aggregate per-message ``rows`` (columns ``src_port``, ``dst_port``, ``src_rank``,
    ``dst_rank``, ``bytes``, ``packets``, ``paths_used``, ``t0`` first transmission and ``t1``
    last delivery, seconds) into one row per QP, numbered ``qp`` in sorted key order.
    ``mean_rate_bps`` is payload bits over the QP's active time (NaN when it never was)."""
    g = rows.groupby(["src_port", "dst_port", "src_rank", "dst_rank"], sort=True)
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
    return out.drop(columns=["t0", "t1"])
