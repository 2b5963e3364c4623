"""Per-traffic-class results (``engine_info.traffic_classes`` of the summary).

For each class, in the order the scenario lists them: its scheduling (``priority``, ``weight``,
``pfc``), the messages of its kinds (``messages``, of which ``rdma_messages`` crossed the
scale-out fabric; ``bytes``; completion-time percentiles ``fct_p50_s``/``fct_p99_s``/
``fct_max_s`` over completed messages, from posting to the last byte at the receiving GPU) and
what the fabric did to it on every egress port: wire bytes sent (``tx_bytes``; every hop
counts), ``drops``, ``ecn_marks``, PFC ``pauses`` received and the time spent paused
(``paused_s``, summed over ports); and what its queue pairs did: packets sent again
(``retx_packets``), retransmission ``timeouts``, and ``duplicate_packets``, copies the
receivers already held. Retransmissions without drops are spurious, and the duplicates show
it: a class held back by a higher-priority one (or by a small DWRR share) for longer than its
RTO or its tail-loss probe timeout resends packets that were queued, not lost.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from podsim.fabric.classes import TrafficClasses

__all__ = ["class_report"]


def class_report(
    classes: TrafficClasses,
    msg_tc: np.ndarray,
    messages: pd.DataFrame,
    ports: pd.DataFrame,
    qps: pd.DataFrame,
) -> dict[str, dict[str, Any]]:
    """Per class name, the figures of the module docstring. ``msg_tc``: every message's class
    index (rows of ``messages``); ``ports``: :meth:`podsim.fabric.network.Network.class_table`;
    ``qps``: :meth:`podsim.nic.nic.RdmaNetwork.qp_table` (its ``tc`` column is each queue
    pair's class index)."""
    out: dict[str, dict[str, Any]] = {}
    fct = (messages["end_s"] - messages["post_s"]).to_numpy(float)
    rdma = (messages["hop"] == "rdma").to_numpy()
    size = messages["bytes"].to_numpy(np.int64)
    for i, tc in enumerate(classes.classes):
        mine = msg_tc == i
        f = fct[mine & np.isfinite(fct)]
        p = ports[ports["class"] == tc.name]
        q = qps[qps["tc"] == i] if len(qps) else qps
        out[tc.name] = {
            "priority": tc.priority,
            "weight": tc.weight,
            "pfc": tc.pfc,
            "messages": int(mine.sum()),
            "rdma_messages": int((mine & rdma).sum()),
            "bytes": int(size[mine].sum()),
            "fct_p50_s": float(np.percentile(f, 50)) if len(f) else None,
            "fct_p99_s": float(np.percentile(f, 99)) if len(f) else None,
            "fct_max_s": float(f.max()) if len(f) else None,
            "tx_bytes": int(p["tx_bytes"].sum()),
            "drops": int(p["drops"].sum()),
            "ecn_marks": int(p["ecn_marks"].sum()),
            "pauses": int(p["pauses_rcvd"].sum()),
            "paused_s": float(p["paused_s"].sum()),
            "retx_packets": int(q["retx_pkts"].sum()) if len(q) else 0,
            "timeouts": int(q["timeouts"].sum()) if len(q) else 0,
            "duplicate_packets": int(q["rx_dup_pkts"].sum()) if len(q) else 0,
        }
    return out
