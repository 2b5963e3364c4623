"""Straggler and bubble analysis of a run's per-rank timeline.

What trace analysers of real clusters do with kernel timelines (find the slow node, measure the
pipeline bubbles), done on the simulated ``phases`` table (one row per step, layer, phase,
rank; see :mod:`podsim.scenarios.results.tables`) and the ``messages`` and ``links`` tables:

* :func:`critical_path` - for every (step, layer, phase): when it started (first rank) and
  ended (last rank), the **critical rank** whose end set the phase's completion time, how far
  it lagged the median rank, and why: it *started late* (its previous phase ended late) or was
  *slow* in this phase. For communication phases also the **critical message** (the last one
  delivered that the critical rank sends or receives) and, with the cluster, the **critical
  link**: the link on that message's shortest paths with the deepest queue (then the highest
  utilisation) - the link that most plausibly held it back.
* :func:`gpu_idle` - per rank over the run: compute time, communication time, **idle time**
  (the span of the run minus compute: the GPU's expert kernels were not running), the
  **bubble** (communication time beyond the fastest rank's in the same phase, summed: time
  lost waiting for others) and the **tail** (idle at the end, waiting for the last rank).
* :func:`stragglers` - ranks that compute slowly. Defined (:data:`STRAGGLER_DEFINITION`): with
  the modelled compute of every rank known (the ``expected`` table: the workload's compute
  model, which includes the configured expert skew), a straggler's compute is at least
  ``factor`` (1.2) x what its load predicts, relative to the median rank's ratio; a rank that
  computes longer only because it holds more tokens is load skew, reported as
  ``load_vs_median`` and not as a straggler. Without that table (a recorded trace with a fixed
  compute time), compute at least ``factor`` x the median rank's, or setting the completion
  time of most phases.

:func:`analyse` runs all three on a :class:`scenarios.results.tables.Results` and gives a compact
summary (:meth:`Analysis.summary`) for ``summary.json``; every run also writes the three tables
(:meth:`Analysis.tables`: ``critical``, ``gpu_time``, ``stragglers`` .parquet/.csv) and the
per-GPU idle/bubble figure (:func:`podsim.scenarios.report.plots.fig_gpu_idle`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import networkx as nx
import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from podsim.scenarios.build.cluster import Cluster
    from podsim.scenarios.results.tables import Results

__all__ = [
    "STRAGGLER_DEFINITION",
    "Analysis",
    "analyse",
    "critical_path",
    "gpu_idle",
    "stragglers",
]

#: what the run reports call a straggler (printed with them)
STRAGGLER_DEFINITION = (
    "a rank whose compute takes at least {factor:g}x what its load predicts (the workload's "
    "compute model, expert skew included), relative to the median rank; more tokens alone is "
    "load skew, not a straggler"
)

_KEYS = ["step", "layer", "phase"]
_MAX_PATHS = 64


def _check_phases(phases: pd.DataFrame) -> None:
    need = {"step", "layer", "phase", "rank", "start_s", "end_s"}
    missing = sorted(need - set(phases.columns))
    if missing:
        raise ValueError(f"phases table lacks column(s) {missing}; expected the results schema")


def critical_path(
    phases: pd.DataFrame,
    messages: pd.DataFrame | None = None,
    links: pd.DataFrame | None = None,
    cluster: Cluster | None = None,
) -> pd.DataFrame:
    """One row per (step, layer, phase), in timeline order (see the module docstring).

    Columns: step, layer, phase, start_s, end_s, duration_s, critical_rank, critical_end_s,
    median_end_s, lag_s (critical end - median end), start_lag_s (critical rank's start - the
    earliest start), own_s (critical rank's duration), median_own_s, cause ("started late" |
    "slow"), critical_msg, critical_src, critical_dst, critical_bytes, critical_link.
    """
    _check_phases(phases)
    rows = []
    ph = phases.dropna(subset=["end_s"])
    order = {"dispatch": 0, "compute": 1, "combine": 2, "other": 3}
    groups = sorted(
        ph.groupby(_KEYS, sort=False),
        key=lambda kv: (kv[0][0], kv[0][1], order.get(kv[0][2], 9)),
    )
    # row positions per phase, not a copy of every group (a training step has 10^7 messages)
    msg_rows = messages.groupby(_KEYS, sort=False).indices if messages is not None else {}
    for (step, layer, phase), g in groups:
        ends = g["end_s"].to_numpy(float)
        starts = g["start_s"].to_numpy(float)
        own = ends - starts
        i = int(np.argmax(ends))  # first rank among ties: deterministic
        crit = g.iloc[i]
        start_lag = float(starts[i] - starts.min())
        median_own = float(np.median(own))
        excess = float(own[i] - median_own)
        row: dict[str, Any] = {
            "step": int(step),
            "layer": int(layer),
            "phase": phase,
            "start_s": float(starts.min()),
            "end_s": float(ends.max()),
            "duration_s": float(ends.max() - starts.min()),
            "critical_rank": int(crit["rank"]),
            "critical_end_s": float(ends[i]),
            "median_end_s": float(np.median(ends)),
            "lag_s": float(ends[i] - np.median(ends)),
            "start_lag_s": start_lag,
            "own_s": float(own[i]),
            "median_own_s": median_own,
            "cause": "started late" if start_lag > excess else "slow",
            "critical_msg": -1,
            "critical_src": -1,
            "critical_dst": -1,
            "critical_bytes": 0,
            "critical_link": None,
        }
        rows_of = msg_rows.get((step, layer, phase))
        mg = messages.iloc[rows_of] if rows_of is not None else None
        if mg is not None and len(mg):
            r = row["critical_rank"]
            mine = mg[(mg["src_rank"] == r) | (mg["dst_rank"] == r)].dropna(subset=["end_s"])
            if len(mine):
                m = mine.iloc[int(np.argmax(mine["end_s"].to_numpy(float)))]
                row.update(
                    critical_msg=int(m["msg"]),
                    critical_src=int(m["src_rank"]),
                    critical_dst=int(m["dst_rank"]),
                    critical_bytes=int(m["bytes"]),
                )
                if cluster is not None and links is not None and m.get("hop") == "rdma":
                    row["critical_link"] = _hottest_link(
                        cluster, links, int(m["src_rank"]), int(m["dst_rank"])
                    )
        rows.append(row)
    return pd.DataFrame(rows)


def _hottest_link(cluster: Cluster, links: pd.DataFrame, src: int, dst: int) -> str | None:
    """The directed link on the shortest paths between two ranks' NIC ports with the deepest
    queue (then the highest utilisation)."""
    a, b = cluster.rank_ports[src][0], cluster.rank_ports[dst][0]
    if a == b or not len(links):
        return None
    g = cluster.graph
    try:
        paths = list(itertools.islice(nx.all_shortest_paths(g, a, b), _MAX_PATHS))
    except (nx.NetworkXNoPath, nx.NodeNotFound):
        return None
    names = {f"{u}->{v}" for p in paths for u, v in itertools.pairwise(p)}
    cand = links[links["link"].isin(names)]
    if not len(cand):
        return None
    q = cand["max_queue_bytes"].fillna(0) if "max_queue_bytes" in cand else 0
    u = cand["utilisation"].fillna(0) if "utilisation" in cand else 0
    ranked = cand.assign(_q=q, _u=u).sort_values(
        ["_q", "_u", "link"], ascending=[False, False, True]
    )
    return str(ranked["link"].iloc[0])


def gpu_idle(phases: pd.DataFrame, makespan_s: float | None = None) -> pd.DataFrame:
    """Per rank: compute_s, comm_s, idle_s, bubble_s, tail_s, busy_fraction (see the module
    docstring). ``makespan_s`` defaults to the last phase end of any rank; the run starts at
    the earliest phase start."""
    _check_phases(phases)
    ph = phases.dropna(subset=["end_s"]).copy()
    ph["own"] = ph["end_s"] - ph["start_s"]
    t0 = float(ph["start_s"].min()) if len(ph) else 0.0
    end = float(makespan_s) if makespan_s is not None else float(ph["end_s"].max() or 0.0)
    span = max(end - t0, 0.0)
    comm = ph[ph["phase"] != "compute"].copy()
    comm["excess"] = comm["own"] - comm.groupby(_KEYS)["own"].transform("min")
    ranks = np.sort(phases["rank"].unique())
    compute = ph[ph["phase"] == "compute"].groupby("rank")["own"].sum()
    comm_s = comm.groupby("rank")["own"].sum()
    bubble = comm.groupby("rank")["excess"].sum()
    last = ph.groupby("rank")["end_s"].max()
    out = pd.DataFrame({"rank": ranks})
    out["compute_s"] = out["rank"].map(compute).fillna(0.0)
    out["comm_s"] = out["rank"].map(comm_s).fillna(0.0)
    out["idle_s"] = span - out["compute_s"]
    out["bubble_s"] = out["rank"].map(bubble).fillna(0.0)
    out["tail_s"] = end - out["rank"].map(last).fillna(t0)
    out["busy_fraction"] = out["compute_s"] / span if span > 0 else 0.0
    return out


def _modelled(ranks: pd.Series, expected: pd.DataFrame | None) -> np.ndarray | None:
    """Each of ``ranks``' modelled compute (``expected`` summed per rank), or None when there
    is no model or it gives some rank no positive time (then load cannot be told apart)."""
    if expected is None or not len(expected) or not len(ranks):
        return None
    model = ranks.map(expected.groupby("rank")["compute_s"].sum()).to_numpy(float)
    return model if bool((np.isfinite(model) & (model > 0)).all()) else None


def stragglers(
    phases: pd.DataFrame,
    crit: pd.DataFrame | None = None,
    *,
    factor: float = 1.2,
    expected: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Ranks that slow the run (module docstring, :data:`STRAGGLER_DEFINITION`). ``expected``:
    the modelled compute (columns rank, compute_s; summed per rank), or None. Columns: rank,
    compute_s, compute_vs_median, load_vs_median (NaN without ``expected``), slowness (compute
    over modelled compute, relative to the median rank; NaN without), critical_phases, phases,
    reason; sorted worst first."""
    if not factor >= 1.0:
        raise ValueError(f"straggler factor={factor!r} must be >= 1")
    crit = critical_path(phases) if crit is None else crit
    idle = gpu_idle(phases)
    n_ranks = len(idle)
    med = float(idle["compute_s"].median()) if n_ranks else 0.0
    counts = crit["critical_rank"].value_counts() if len(crit) else pd.Series(dtype=int)
    load = slow = None
    model = _modelled(idle["rank"], expected)
    if model is not None:
        ratio = idle["compute_s"].to_numpy(float) / model
        load = model / float(np.median(model))
        slow = ratio / float(np.median(ratio))
    rows = []
    for i, (r, c) in enumerate(zip(idle["rank"], idle["compute_s"], strict=True)):
        ratio = c / med if med > 0 else (np.inf if c > 0 else 1.0)
        k = int(counts.get(r, 0))
        reasons = []
        if slow is not None:
            if n_ranks >= 2 and slow[i] >= factor:
                reasons.append(
                    f"compute {slow[i]:.2f}x what its load predicts (load {load[i]:.2f}x the "
                    "median rank's)"
                )
        else:
            if n_ranks >= 2 and ratio >= factor:
                reasons.append(f"compute {ratio:.2f}x the median rank's")
            if n_ranks >= 2 and len(crit) and k > len(crit) / 2:
                reasons.append(f"set the completion time of {k} of {len(crit)} phases")
        if reasons:
            rows.append((
                int(r), float(c), float(ratio),
                float(load[i]) if load is not None else np.nan,
                float(slow[i]) if slow is not None else np.nan,
                k, len(crit), "; ".join(reasons),
            ))  # fmt: skip
    cols = ["rank", "compute_s", "compute_vs_median", "load_vs_median", "slowness",
            "critical_phases", "phases", "reason"]  # fmt: skip
    df = pd.DataFrame(rows, columns=cols)
    return df.sort_values(["compute_vs_median", "critical_phases", "rank"],
                          ascending=[False, False, True]).reset_index(drop=True)  # fmt: skip


@dataclass
class Analysis:
    """The three tables of :func:`analyse`."""

    critical: pd.DataFrame
    gpus: pd.DataFrame
    stragglers: pd.DataFrame
    #: the straggler definition these tables used (:data:`STRAGGLER_DEFINITION` or the
    #: fallback without a compute model)
    definition: str = ""
    #: the largest per-rank load over the median (the configured skew), NaN if unknown
    load_skew: float = float("nan")

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables under the names a result folder stores them (``critical``,
        ``gpu_time``, ``stragglers``; :data:`podsim.scenarios.results.tables.ANALYSIS_TABLES`)."""
        return {"critical": self.critical, "gpu_time": self.gpus, "stragglers": self.stragglers}

    def summary(self, top: int = 5) -> dict[str, Any]:
        """Compact, JSON-friendly: stragglers, how often each rank was critical, the critical
        links, and idle/bubble statistics over the GPUs."""
        c, g = self.critical, self.gpus
        crit_ranks = c["critical_rank"].value_counts().head(top) if len(c) else pd.Series()
        links = c["critical_link"].dropna().value_counts().head(top) if len(c) else pd.Series()
        return {
            "straggler_definition": self.definition,
            "load_skew_max_vs_median": (
                float(self.load_skew) if np.isfinite(self.load_skew) else None
            ),
            "stragglers": [
                {"rank": int(r.rank), "reason": r.reason}
                for r in self.stragglers.head(top).itertuples()
            ],
            "critical_ranks": {int(k): int(v) for k, v in crit_ranks.items()},
            "critical_links": {str(k): int(v) for k, v in links.items()},
            "idle_s": {
                "mean": float(g["idle_s"].mean()) if len(g) else 0.0,
                "max": float(g["idle_s"].max()) if len(g) else 0.0,
            },
            "bubble_s": {
                "mean": float(g["bubble_s"].mean()) if len(g) else 0.0,
                "max": float(g["bubble_s"].max()) if len(g) else 0.0,
                "worst_rank": int(g.loc[g["bubble_s"].idxmax(), "rank"]) if len(g) else -1,
            },
        }


def analyse(
    results: Results,
    cluster: Cluster | None = None,
    *,
    factor: float = 1.2,
    expected: pd.DataFrame | None = None,
) -> Analysis:
    """Critical path, GPU idle time and stragglers of a run (see the module docstring);
    ``expected`` is the workload's modelled compute per (step, layer, rank)."""
    makespan = results.summary.get("makespan_s")
    crit = critical_path(results.phases, results.messages, results.links, cluster)
    gpus = gpu_idle(results.phases, makespan if isinstance(makespan, int | float) else None)
    slow = stragglers(results.phases, crit, factor=factor, expected=expected)
    model = _modelled(gpus["rank"], expected)
    if model is not None:
        skew = float(model.max() / np.median(model))
        definition = STRAGGLER_DEFINITION.format(factor=factor)
    else:
        skew = float("nan")
        definition = (
            f"a rank whose compute takes at least {factor:g}x the median rank's, or that set "
            "the completion time of most phases (no compute model to separate load skew)"
        )
    return Analysis(crit, gpus, slow, definition, skew)
