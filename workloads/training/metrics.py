"""Step time, MFU, exposed communication and the pipeline bubble, from the executed spans.

Per rank, the step ``[0, T]`` (``T`` the step time: the last span's end) is cut at every span
boundary; each piece is ``compute`` when a compute span covers it (a GPU runs one compute node at
a time), else *exposed communication*, shared equally by the communication kinds whose spans
cover it (``tp``, ``pp``, ``dispatch``, ``combine``, ``dp``), else *idle*. Idle time is the
pipeline bubble plus waiting that no exchange of the rank explains. The figures are means over
ranks, as fractions of ``T`` and in seconds.

MFU (model FLOPs utilisation, Chowdhery et al., "PaLM", 2022, appendix B): the step's model FLOPs
(forward + backward = 3x forward, no recomputation) / (T x GPUs x peak FLOP/s).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["COMM_KINDS", "rank_breakdown", "training_summary"]

COMM_KINDS = ("tp", "pp", "dispatch", "combine", "dp")


def _cover(cuts: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For each piece between consecutive ``cuts``: is it inside some [start, end]?"""
    delta = np.zeros(len(cuts), dtype=np.int64)
    np.add.at(delta, np.searchsorted(cuts, starts), 1)
    np.add.at(delta, np.searchsorted(cuts, ends), -1)
    return np.cumsum(delta)[:-1] > 0


def _rank_split(
    spans: pd.DataFrame, t_end: float, comm_kinds: tuple[str, ...] = COMM_KINDS
) -> dict[str, float]:
    """Seconds of compute, idle and exposed communication per kind on one rank."""
    starts = spans["start_s"].to_numpy(float)
    ends = spans["end_s"].to_numpy(float)
    kinds = spans["phase"].to_numpy()
    cuts = np.unique(np.concatenate([[0.0, t_end], starts, ends]))
    width = np.diff(cuts)
    comp = kinds == "compute"
    busy = _cover(cuts, starts[comp], ends[comp])
    share = np.array(
        [_cover(cuts, starts[kinds == k], ends[kinds == k]) for k in comm_kinds], dtype=float
    )
    active = share.sum(axis=0)
    free = ~busy & (active > 0)
    out = {"compute": float(width[busy].sum()), "idle": float(width[~busy & (active == 0)].sum())}
    for k, kind in enumerate(comm_kinds):
        out[kind] = float((width[free] * share[k][free] / active[free]).sum())
    return out


def rank_breakdown(phases: pd.DataFrame, t0: float | None = None) -> pd.DataFrame:
    """Per rank, seconds of ``compute``, ``idle`` and exposed communication per kind (every
    non-compute phase present) over ``[t0, last end]`` (``t0`` default: the first start), as the
    module docstring cuts a rank's time. Columns: rank, span_s, compute, idle, one per kind."""
    if phases.empty:
        return pd.DataFrame(columns=["rank", "span_s", "compute", "idle"])
    start = float(phases["start_s"].min()) if t0 is None else t0
    ph = phases.assign(start_s=phases["start_s"] - start, end_s=phases["end_s"] - start)
    t_end = float(ph["end_s"].max())
    kinds = tuple(sorted(k for k in ph["phase"].astype(str).unique() if k != "compute"))
    rows = [
        {"rank": int(r), "span_s": t_end, **_rank_split(grp, t_end, kinds)}
        for r, grp in ph.groupby("rank", sort=True)
    ]
    return pd.DataFrame(rows)


def training_summary(phases: pd.DataFrame, meta: dict[str, Any]) -> dict[str, Any]:
    """The ``training`` block of summary.json (module docstring)."""
    if phases.empty:
        return {"step_time_s": None}
    t_end = float(phases["end_s"].max())
    per_rank = [_rank_split(grp, t_end) for _, grp in phases.groupby("rank", sort=True)]
    mean = {k: float(np.mean([r[k] for r in per_rank])) for k in per_rank[0]}
    gpus = int(meta["gpus"])
    mfu = meta["model_flops"] / (t_end * gpus * meta["peak_flops_per_gpu"]) if t_end > 0 else None
    return {
        "step_time_s": t_end,
        "mfu": mfu,
        "tokens_per_s": meta["tokens_per_step"] / t_end if t_end > 0 else None,
        "compute_fraction": mean["compute"] / t_end if t_end > 0 else None,
        "bubble_fraction": mean["idle"] / t_end if t_end > 0 else None,
        "exposed_comm_s": {k: mean[k] for k in COMM_KINDS},
        "exposed_comm_fraction": {k: mean[k] / t_end for k in COMM_KINDS} if t_end > 0 else {},
        **{k: meta[k] for k in ("tp", "pp", "dp", "ep", "microbatches", "schedule", "layers")},
        "model_flops": meta["model_flops"],
    }
