"""The bytes DeepEP's own test scripts count, so that podsim can report DeepEP's figures exactly.

DeepEP's README tables (docs/physics.md, "DeepEP's published figures") are printed by its test
scripts; each divides a *logical* byte count by one rank's kernel time. The counts are not the
bytes that cross a link (read from github:deepseek-ai/DeepEP at commit
2be0d4f8e9b555510139307bb3b0947834f34c37, tests/test_intranode.py, tests/test_internode.py,
tests/test_low_latency.py; the v1 tables' commits are listed in docs/physics.md):

- intranode normal (one node, ``test_intranode.py``): ``NVL bytes = recv_x.numel() x 2`` (BF16)
  times ``(1 + 4/128) / 2`` for FP8, i.e. the rows rank r *receives* (one per token that has an
  expert on r, its own tokens included) x bytes per token. Time: CUDA events around
  ``buffer.dispatch`` (``utils.bench``). Combine divides the same row count x BF16 bytes by the
  combine time.
- internode normal (``test_internode.py``): ``RDMA bytes = num_rdma_token_sent x hidden x 2``
  (x the FP8 factor), with ``num_rdma_token_sent`` the (token, node) pairs of rank r's tokens,
  r's *own node included* (``rdma_idx = topk_idx // (num_experts // num_nodes)``, deduplicated):
  the part bound for r's own node never touches a NIC. ``NVL bytes`` as intranode (rows received).
  Time: the ``dispatch`` kernel alone (``bench_kineto``; the ``notify`` kernel is printed
  apart). Combine: the same counts x BF16 bytes over the ``combine`` kernel time.
- low latency (``test_low_latency.py``): ``bytes = selections x (hidden + hidden/128 x 4 + 16)``
  for FP8 dispatch and ``selections x hidden x 2`` for BF16 combine, a selection being a
  non-masked (token, expert) slot of r's tokens: experts on r itself and on NVLink peers count
  too. Time: the ``dispatch`` / ``combine`` kernel (send and receive) alone.

Bytes per token are podsim's wire sizes (podsim.workloads.precision), which equal DeepEP's for
FP8 (``hidden + hidden/128 x 4``) and BF16 (``2 x hidden``); the low-latency dispatch adds the
mode's 16 B header, as DeepEP's count does.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from podsim.workloads.dispatch import DispatchMode, get_mode
from podsim.workloads.layout import EPLayout

__all__ = ["DEEPEP_KINDS", "deepep_bytes_table", "deepep_rank_bw", "deepep_rank_bytes"]

DEEPEP_KINDS = ("rdma", "nvl")
"""The two byte counts DeepEP's scripts report: "RDMA" and "NVL" (NVLink)."""


def _nan(r: int) -> np.ndarray:
    return np.full(r, np.nan)


def deepep_rank_bytes(
    lay: EPLayout, mode: str | DispatchMode, phase: str, bytes_per_token: int
) -> dict[str, np.ndarray]:
    """Per-rank bytes of ``phase`` as DeepEP's test scripts count them (module docstring).

    Returns ``{"rdma": [ranks], "nvl": [ranks]}``; NaN where the script reports no such figure
    (intranode has no RDMA figure, low latency no NVL figure, Megatron's dispatcher none).
    ``bytes_per_token`` is the payload per row; the mode's header is added to dispatch as in
    :func:`podsim.workloads.traffic.phase_messages`.
    """
    m = get_mode(mode)
    if phase not in ("dispatch", "combine"):
        raise ValueError(f"phase must be 'dispatch' or 'combine'; got {phase!r}")
    r = lay.num_ranks
    out = {"rdma": _nan(r), "nvl": _nan(r)}
    if m.name == "deepep-low-latency":
        row = bytes_per_token + (m.header_bytes if phase == "dispatch" else 0)
        out["rdma"] = lay.pair_copies.sum(axis=1).astype(float) * row
    elif m.name == "deepep-normal":
        out["nvl"] = lay.pair_tokens.sum(axis=0).astype(float) * bytes_per_token
        gpn = lay.gpus_per_node
        if lay.node_tokens is not None and gpn is not None and gpn < r:
            out["rdma"] = lay.node_tokens.sum(axis=1).astype(float) * bytes_per_token
    return out


def deepep_rank_bw(rank_bytes: np.ndarray, rank_time_s: np.ndarray) -> np.ndarray:
    """DeepEP's per-rank bandwidth: that rank's counted bytes / that rank's kernel time (B/s).

    NaN where the count is NaN or the time is not positive.
    """
    b = np.asarray(rank_bytes, dtype=float)
    t = np.asarray(rank_time_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(t > 0, b / t, np.nan)


def deepep_bytes_table(attrs: dict) -> pd.DataFrame:
    """The trace's ``deepep_bytes`` attrs (podsim.workloads.moe) as a long table.

    Columns step, layer, phase, rank, rdma_bytes, nvl_bytes (NaN: DeepEP counts no such bytes);
    empty when the trace carries no DeepEP counts (Megatron, trace files, synthetic traffic).
    """
    d = attrs.get("deepep_bytes") if attrs else None
    cols = ["step", "layer", "phase", "rank", "rdma_bytes", "nvl_bytes"]
    if not d:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "phase" else float) for c in cols})
    parts = []
    for phase in ("dispatch", "combine"):
        rdma = np.asarray(d[f"{phase}_rdma"], dtype=float)
        st, ly, rk = np.meshgrid(
            np.asarray(d["steps"], np.int64),
            np.asarray(d["layers"], np.int64),
            np.arange(rdma.shape[2]),
            indexing="ij",
        )
        parts.append(
            pd.DataFrame(
                {
                    "step": st.ravel(),
                    "layer": ly.ravel(),
                    "phase": phase,
                    "rank": rk.ravel(),
                    "rdma_bytes": rdma.ravel(),
                    "nvl_bytes": np.asarray(d[f"{phase}_nvl"], dtype=float).ravel(),
                }
            )
        )
    return pd.concat(parts, ignore_index=True)
