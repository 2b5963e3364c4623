"""``podsim analyse``: pipeline bubbles, exposed communication and slow ranks, from a simulated
result folder or from a folder of recorded per-GPU PyTorch profiler (Kineto) traces.

Both become one table of spans per rank (``rank``, ``phase``, ``start_s``, ``end_s``): a result
folder's phase table, or a trace's GPU kernels (``compute``) and NCCL kernels (phase = the
collective, e.g. ``all-reduce``), at their recorded times. Then:

- **breakdown** (:func:`podsim.workloads.training.metrics.rank_breakdown`): each rank's time
  from the first span's start to the last span's end cut into compute, exposed communication per
  kind (not hidden by compute; shared between kinds that overlap) and idle;
- **bubbles**: each rank's idle gaps (no span running), the longest first, with the phase that
  ended the wait; for a training step also the mean wait of each pipeline stage before each
  micro-batch's forward and backward pass (a stage's ranks are ``tp x dp`` consecutive ranks);
- **slow ranks**: a rank whose compute time is at least :data:`SLOW_FACTOR` x the median rank's
  (the straggler factor of :mod:`podsim.scenarios.results.analysis`), or whose communication
  time (sum of its communication spans) is; ``delay_s`` is its excess over the median, what the
  step waits for it at most when every rank synchronises with it.

A Chakra trace records durations, not times: a folder of ``.et`` files is replayed here with
free communication (every message delivered the moment it is posted, the bound engine's
:class:`~podsim.scenarios.engines.bound.IdealTransport` with zero times), so its compute spans
get times from the recorded durations and dependencies alone: the breakdown, the bubbles
(waits on other ranks' compute through the trace's dependencies) and the ranks slow in compute
are the trace's, and its communication is absent (no exposed communication, no ranks slow in
it). For those, run the trace on a cluster (``workload.chakra``) and analyse the result folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from podsim.scenarios.errors import ScenarioError
from podsim.workloads.training.metrics import rank_breakdown

__all__ = [
    "SLOW_FACTOR",
    "Analysis",
    "analyse_dir",
    "analyse_phases",
    "phases_from_chakra",
    "phases_from_kineto",
]

#: compute or communication time vs the median rank that marks a rank slow (the straggler
#: factor of podsim.scenarios.results.analysis)
SLOW_FACTOR = 1.2
#: idle gaps listed per rank
GAPS_PER_RANK = 3


@dataclass
class Analysis:
    """What ``podsim analyse`` prints (module docstring)."""

    source: str
    breakdown: pd.DataFrame
    gaps: pd.DataFrame
    slow: pd.DataFrame
    stages: pd.DataFrame | None = None


def phases_from_kineto(path: Path) -> pd.DataFrame:
    """The recorded GPU timeline of a Kineto trace folder as spans: kernels and copies are
    ``compute``, NCCL kernels their collective (``nccl`` when podsim does not know it);
    times in seconds from the earliest event of any rank (profilers share a clock only
    approximately: ranks are compared by durations, gaps within a rank by its own clock)."""
    from podsim.workloads.kineto import collective_of, kineto_files
    from podsim.workloads.trace_import import TraceImportError

    try:
        traces = kineto_files(path)
        rows = [
            (
                r,
                (collective_of(t, k)[2] or "nccl") if k.nccl else "compute",
                k.ts * 1e-6,
                (k.ts + k.dur) * 1e-6,
            )
            for r, t in enumerate(traces)
            for k in t.kernels
        ]
    except TraceImportError as exc:
        raise ScenarioError(str(exc)) from None
    df = pd.DataFrame(rows, columns=["rank", "phase", "start_s", "end_s"])
    if len(df):
        t0 = df["start_s"].min()
        df["start_s"] -= t0
        df["end_s"] -= t0
    return df


def _gaps(phases: pd.DataFrame) -> pd.DataFrame:
    """Each rank's idle gaps between its first start and last end, longest first."""
    out = []
    for r, grp in phases.groupby("rank", sort=True):
        g = grp.sort_values("start_s", kind="stable")
        reach = np.maximum.accumulate(g["end_s"].to_numpy(float))
        starts = g["start_s"].to_numpy(float)
        phase = g["phase"].to_numpy()
        gap = starts[1:] - reach[:-1]
        out.extend(
            (int(r), float(reach[i]), float(gap[i]), str(phase[i + 1]))
            for i in np.flatnonzero(gap > 0)
        )
    df = pd.DataFrame(out, columns=["rank", "start_s", "duration_s", "ended_by"])
    df = df.sort_values(["rank", "duration_s"], ascending=[True, False], kind="stable")
    return df.groupby("rank").head(GAPS_PER_RANK).reset_index(drop=True)


def _slow(phases: pd.DataFrame) -> pd.DataFrame:
    """Ranks at least SLOW_FACTOR x the median in compute or in communication time."""
    dur = phases.assign(d=phases["end_s"] - phases["start_s"])
    comp = dur[dur["phase"] == "compute"].groupby("rank")["d"].sum()
    comm = dur[dur["phase"] != "compute"].groupby("rank")["d"].sum()
    ranks = sorted(set(phases["rank"].astype(int)))
    comp = comp.reindex(ranks, fill_value=0.0)
    comm = comm.reindex(ranks, fill_value=0.0)
    rows = []
    for what, s in (("compute", comp), ("communication", comm)):
        med = float(s.median())
        if med <= 0:
            continue
        for r, v in s.items():
            if v >= SLOW_FACTOR * med:
                rows.append((int(r), what, float(v), med, float(v / med), float(v - med)))
    cols = ["rank", "slow_in", "time_s", "median_s", "vs_median", "delay_s"]
    return (
        pd.DataFrame(rows, columns=cols)
        .sort_values("delay_s", ascending=False)
        .reset_index(drop=True)
    )


def _stages(phases: pd.DataFrame, ranks_per_stage: int) -> pd.DataFrame:
    """Mean wait of each pipeline stage before each micro-batch's pass: the time from the
    rank's previous compute end to the pass's first compute start."""
    comp = phases[(phases["phase"] == "compute") & (phases["microbatch"] >= 0)]
    comp = comp.sort_values(["rank", "start_s"], kind="stable")
    first = comp.groupby(["rank", "microbatch", "pass"], sort=False)["start_s"].min()
    rows = []
    for r, grp in comp.groupby("rank", sort=True):
        ends = grp["end_s"].to_numpy(float)
        starts = grp["start_s"].to_numpy(float)
        for (mb, ps), t in first.loc[int(r)].items():
            before = ends[starts < t]
            wait = t - (before.max() if len(before) else 0.0)
            rows.append((int(r) // ranks_per_stage, int(mb), str(ps), max(0.0, float(wait))))
    df = pd.DataFrame(rows, columns=["stage", "microbatch", "pass", "wait_s"])
    return df.groupby(["stage", "microbatch", "pass"], as_index=False)["wait_s"].mean()


def phases_from_chakra(path: Path) -> pd.DataFrame:
    """The compute spans of a Chakra trace folder replayed with free communication (module
    docstring), times in seconds from the replay's start."""
    from podsim.scenarios.engines.bound import IdealTransport
    from podsim.scenarios.execution.executor import execute
    from podsim.workloads.chakra import chakra_graph
    from podsim.workloads.graph import COMPUTE
    from podsim.workloads.trace_import import TraceImportError

    try:
        g = chakra_graph(path)
    except TraceImportError as exc:
        raise ScenarioError(str(exc)) from None
    a = g.arrays()
    sends = int((a.msg >= 0).sum())
    t = IdealTransport(np.zeros(sends))
    run = execute(t.env, t, g, np.full(sends, "rdma", dtype=object))
    comp = a.kind == COMPUTE
    return pd.DataFrame(
        {
            "rank": a.rank[comp],
            "phase": "compute",
            "start_s": run.start_s[comp],
            "end_s": run.end_s[comp],
        }
    )


def analyse_phases(
    phases: pd.DataFrame, source: str, ranks_per_stage: int | None = None
) -> Analysis:
    """The analysis of a span table (module docstring)."""
    if phases.empty:
        raise ScenarioError(f"{source}: nothing to analyse (no phases or kernels)")
    ph = phases[["rank", "phase", "start_s", "end_s"]].dropna()
    extra = None
    if ranks_per_stage and {"microbatch", "pass"} <= set(phases.columns):
        extra = _stages(phases.dropna(subset=["end_s"]), ranks_per_stage)
    return Analysis(source, rank_breakdown(ph), _gaps(ph), _slow(ph), extra)


def analyse_dir(path: Path) -> Analysis:
    """A result folder (``summary.json``) or a folder of Kineto traces (``*.json``)."""
    path = Path(path)
    if not path.is_dir():
        raise ScenarioError(f"{str(path)!r} is not a folder (a result folder or a trace folder)")
    if (path / "summary.json").is_file():
        from podsim.scenarios.results.tables import Results

        res = Results.read(path)
        t = res.summary.get("training") or {}
        per_stage = None
        if t.get("pp"):
            per_stage = int(res.summary.get("gpus") or 0) // int(t["pp"]) or None
        return analyse_phases(res.phases, f"result folder {path}", per_stage)
    if any(path.glob("*.json")) or any(path.glob("*.json.gz")):
        return analyse_phases(phases_from_kineto(path), f"Kineto traces in {path}")
    if any(path.glob("*.et")):
        return analyse_phases(
            phases_from_chakra(path),
            f"Chakra traces in {path}, replayed with free communication (run them with "
            "workload.chakra for their communication)",
        )
    raise ScenarioError(
        f"{path} is neither a result folder (no summary.json) nor a folder of Kineto traces "
        "(no *.json)"
    )
