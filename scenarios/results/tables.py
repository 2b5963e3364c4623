"""Result tables, the summary, and how they are written and read back.

Every engine fills the same five tables (pandas DataFrames; times in seconds of simulated time
from the start of the run, sizes in bytes, rates in bit/s):

``messages`` - one row per trace message
    msg (int, row of the trace), step, layer, phase, src_rank, dst_rank, hop ("rdma",
    "scaleup", "local"), bytes, tokens, post_s (when the sender posted it; NaN if never), end_s
    (when its last byte was delivered; NaN if never), fct_s (end_s - post_s), status and reason:

    - ``complete``: delivered (reason empty);
    - ``failed``: the transport gave up on it or could not deliver it, with the engine's reason
      (``summary.engine_info.failed_messages``, from
      :func:`podsim.fabric.invariants.explain_unfinished`), e.g. "destination unreachable: no route
      from nic0.p0 to nic7.p0 after link down leaf1-nic7.p0", "retry limit exceeded: 7
      consecutive timeouts ...", "3 packet(s) lost to link_down leaf0-spine0; the endpoint
      does not retransmit";
    - ``unfinished``: the run ended first (summary ``status``): "time limit: ...",
      "interrupted: ...", or, in a ``stalled`` run, "stalled: ..." (the message was posted but
      nothing was left to simulate) / "never posted: ..." (its phase never started on the
      sender because an earlier phase waited on messages that did not arrive).
``phases`` - one row per (step, layer, phase, rank); phase is dispatch / compute / combine /
    other
    start_s, end_s, duration_s, bytes_out (bytes the rank sent in the phase, all hops),
    bytes_in (bytes it received).
``links`` - one row per direction of every link (``u -> v``)
    link ("u->v"), u, v, tier ("nic-leaf", "leaf-spine", "spine-core", "gpu-scaleup"), kind,
    rate_bps, tx_bytes (wire bytes incl. per-packet overhead), tx_packets, drops, ecn_marks,
    pauses (PFC pause frames that stopped this egress), max_queue_bytes, utilisation
    (8 x tx_bytes / (rate_bps x makespan_s), the mean over the whole run).
``qps`` - one row per queue pair (sender NIC port -> receiver NIC port)
    qp, src_rank, dst_rank, src_port, dst_port, messages, bytes, packets, retx_packets,
    timeouts, nacks, cnps, paths_used, mean_rate_bps. Engines without a transport leave the
    counters at zero. The packet engine's SmartNIC adds selector, mode, srtt_s and acked_s
    (when the sender saw the QP's last message acknowledged, s: one ACK's trip after the
    messages table's end_s, which is when the receiver held the last byte).
``queues`` - queue depth samples, long format
    time_s, port ("u->v"), depth_bytes. Sampled every ``sim.sample_interval``.
``links_by_phase`` - one row per (link direction, phase) (:mod:`scenarios.results.phase_links`)
    link, tier, phase (dispatch, compute, combine, ..., "a+b" where communication phases
    overlap, idle), seconds (the phase's total time: from each of its windows' first rank start
    to last rank end), bytes (wire bytes sent while it ran), utilisation (8 x bytes / (rate_bps
    x seconds): busy-time utilisation while the phase runs), max_queue_bytes (deepest sampled
    queue while it ran). Engines that record link byte series only (the packet engine, with
    ``outputs.queue_series``); empty otherwise. A link's bytes over its phases sum to its
    ``tx_bytes``.

Three more tables come from the straggler and bubble analysis (:mod:`scenarios.results.analysis`,
built
by the runner from the tables above; :data:`ANALYSIS_TABLES`, ``Results.analysis``):

``critical`` - one row per (step, layer, phase): start_s, end_s, duration_s, the
    critical_rank whose end set the completion time, its lag behind the median rank (lag_s),
    start_lag_s, own_s, median_own_s, cause ("started late" | "slow"), the critical message
    (critical_msg, critical_src, critical_dst, critical_bytes) and critical_link (the link on
    its paths with the deepest queue; empty without one).
``gpu_time`` - one row per rank: compute_s, comm_s, idle_s (run span minus compute), bubble_s
    (communication time beyond the fastest rank's in the same phase, summed), tail_s (idle at
    the end, waiting for the last rank), busy_fraction.
``stragglers`` - ranks that compute slowly for their load (the definition is
    ``summary.json``'s ``analysis.straggler_definition``): rank, compute_s, compute_vs_median,
    load_vs_median, slowness, critical_phases, phases, reason; worst first (empty when none).

A serving workload (``workload.serving``) writes instead of those three (:data:`WORKLOAD_TABLES`,
built by :mod:`podsim.workloads.serving.metrics` from the phases):

``requests`` - one row per request: request, arrival_s, prompt_tokens, output_tokens,
    prefill_instance, decode_instance, kv_bytes (its whole KV cache), prefill_start_s,
    prefill_end_s, queue_s (arrival -> prefill start), prefill_s, kv_start_s (first cache byte
    posted), kv_end_s (last byte delivered), kv_transfer_s (kv_end_s - kv_start_s),
    kv_exposed_s (prefill end -> last byte delivered, >= 0), kv_rate_Bps (kv_bytes /
    kv_transfer_s, over all its rank pairs), first_token_s (end of its first
    decode iteration), first_step_s (that iteration's time), last_token_s, ttft_s
    (first_token_s - arrival_s), tpot_s ((last_token_s - first_token_s) / (output_tokens - 1)),
    e2e_s (last_token_s - arrival_s), kv_share_of_ttft (kv_exposed_s / ttft_s), complete (every
    part ended). ``summary.json`` has their p50/p90/p99 and mean under ``serving``.

The summary (``summary.json`` and the printed table) defines its figures like this, per phase
kind (dispatch, combine, other), averaged over steps and layers:

- **all-to-all completion time** ``T``: last rank's phase end minus first rank's phase start.
- **algorithm bandwidth per GPU** (NCCL, nccl-tests PERFORMANCE.md): ``algbw = S / T`` with ``S``
  the mean over ranks of the bytes a rank sends in the phase (its whole send buffer, including
  the part it keeps: NCCL's all-to-all counts the full buffer).
- **bus bandwidth per GPU** (NCCL): ``busbw = algbw x (n-1)/n`` for all-to-all, ``n`` ranks, the
  fraction of the buffer that must cross the fabric with uniform traffic; a collective workload
  uses its own factor (phase column ``bus_factor``: all-reduce ``2(n-1)/n``, reduce-scatter and
  all-gather ``(n-1)/n``; there ``S`` is NCCL's buffer size, the span's ``bytes_out``).
- **RDMA / NVLink send bandwidth per GPU** (podsim's own): bytes a rank sends over RDMA (hop
  ``rdma``) divided by that rank's own phase time, averaged over ranks that send any; likewise
  ``nvl`` for the scale-up hop (``rdma_send_bw_per_gpu_Bps``, ``nvl_send_bw_per_gpu_Bps``).
- **DeepEP figures** (``deepep_*``), exactly as DeepEP's test scripts compute them
  (podsim.workloads.deepep_metrics: which bytes they count, which time they divide by): per rank,
  the bytes DeepEP counts (RDMA: (token, node) pairs including the rank's own node in normal
  mode, (token, expert) selections in low latency; NVL: rows the rank receives, its own
  included) divided by that rank's phase time (its kernel time); ``deepep_time_s`` is the mean
  rank phase time (DeepEP's "latency"), the bandwidths the mean over ranks of the per-rank
  figure (DeepEP prints one line per rank, or per node's first rank in normal mode). Only for
  MoE traces built by podsim (they carry the counts); None otherwise.
- **link utilisation by tier**: mean and max over the tier's link directions of ``utilisation``.
- **link utilisation by phase** (``link_utilisation_by_phase``, from ``links_by_phase``): per
  phase its time, per tier the mean and max utilisation while it ran, the ``busiest`` links
  (highest utilisation while it ran), ``contended_links`` (queue above 2 MTU while it ran, the
  queue-depth figure's rule; None without queues) and the ``hottest`` (the busiest contended).
- **messages**: ``count``, ``unfinished`` (messages not ``complete``: failed or unfinished),
  ``failed`` (status ``failed``), completion-time percentiles of the delivered ones.
- **drops, ECN marks, PFC pauses** (sums over links), **retransmitted packets, timeouts** (sums
  over QPs).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import yaml
from podsim.fabric.units import fmt_size, fmt_time
from podsim.scenarios.input.yamltext import read_yaml
from podsim.workloads.deepep_metrics import deepep_rank_bw

if TYPE_CHECKING:
    from rich.table import Table

__all__ = [
    "ANALYSIS_TABLES",
    "SCHEMAS",
    "TABLES",
    "WORKLOAD_TABLES",
    "Results",
    "empty_table",
    "flatten",
    "json_safe",
    "layer_time_s",
    "link_table",
    "message_table",
    "settle_messages",
    "summarise",
]

#: table -> column -> (dtype, description). The module docstring explains each.
SCHEMAS: dict[str, dict[str, tuple[str, str]]] = {
    "messages": {
        "msg": ("int64", "row of the trace"),
        "step": ("int64", "training/inference step"),
        "layer": ("int64", "MoE layer"),
        "phase": ("object", "dispatch | combine | other"),
        "src_rank": ("int64", "sending rank"),
        "dst_rank": ("int64", "receiving rank"),
        "hop": ("object", "rdma | scaleup | local"),
        "bytes": ("int64", "payload bytes"),
        "tokens": ("int64", "tokens carried"),
        "post_s": ("float64", "time the sender posted it (s)"),
        "end_s": ("float64", "time the last byte was delivered (s); NaN if never"),
        "fct_s": ("float64", "completion time end_s - post_s (s)"),
        "status": ("object", "complete | failed | unfinished"),
        "reason": ("object", "why it failed or did not finish; empty if complete"),
    },
    "phases": {
        "step": ("int64", "step"),
        "layer": ("int64", "layer"),
        "phase": (
            "object",
            "dispatch | compute | combine | other; a training step adds tp | pp | dp (and "
            "columns microbatch, pass F/B)",
        ),
        "rank": ("int64", "rank"),
        "start_s": ("float64", "phase start on this rank (s)"),
        "end_s": ("float64", "phase end on this rank (s)"),
        "duration_s": ("float64", "end_s - start_s (s)"),
        "bytes_out": ("int64", "bytes sent in the phase, all hops"),
        "bytes_in": ("int64", "bytes received in the phase, all hops"),
    },
    "links": {
        "link": ("object", "'u->v'"),
        "u": ("object", "transmitting node"),
        "v": ("object", "receiving node"),
        "tier": ("object", "nic-leaf | leaf-spine | spine-core | gpu-scaleup"),
        "kind": ("object", "scaleout | scaleup"),
        "rate_bps": ("float64", "MAC rate (bit/s)"),
        "tx_bytes": ("int64", "wire bytes sent, overhead included"),
        "tx_packets": ("int64", "packets sent"),
        "drops": ("int64", "packets dropped at this egress"),
        "ecn_marks": ("int64", "packets ECN-marked at this egress"),
        "pauses": ("int64", "PFC pause frames that stopped this egress"),
        "max_queue_bytes": ("int64", "deepest queue seen (bytes)"),
        "utilisation": ("float64", "8 tx_bytes / (rate_bps x makespan)"),
    },
    "qps": {
        "qp": ("int64", "queue pair id"),
        "src_rank": ("int64", "sending rank"),
        "dst_rank": ("int64", "receiving rank"),
        "src_port": ("object", "sending NIC port"),
        "dst_port": ("object", "receiving NIC port"),
        "messages": ("int64", "messages carried"),
        "bytes": ("int64", "payload bytes"),
        "packets": ("int64", "data packets sent, retransmissions included"),
        "retx_packets": ("int64", "retransmitted packets"),
        "timeouts": ("int64", "retransmission timeouts"),
        "nacks": ("int64", "NACKs received"),
        "cnps": ("int64", "congestion notifications received"),
        "paths_used": ("int64", "distinct entropy values used"),
        "mean_rate_bps": ("float64", "payload bits / active time (bit/s)"),
    },
    "queues": {
        "time_s": ("float64", "sample time (s)"),
        "port": ("object", "'u->v' egress"),
        "depth_bytes": ("int64", "queued bytes"),
    },
    "links_by_phase": {
        "link": ("object", "'u->v'"),
        "tier": ("object", "nic-leaf | leaf-spine | spine-core | gpu-scaleup"),
        "phase": ("object", "dispatch | compute | combine | ... | idle (a+b: overlapping)"),
        "seconds": ("float64", "the phase's total time in the run (s)"),
        "bytes": ("int64", "wire bytes sent while the phase ran"),
        "utilisation": ("float64", "8 bytes / (rate_bps x seconds)"),
        "max_queue_bytes": ("int64", "deepest sampled queue while the phase ran (bytes)"),
    },
}
TABLES = tuple(SCHEMAS)
#: the analysis tables a result folder also holds (see the module docstring)
ANALYSIS_TABLES = ("critical", "gpu_time", "stragglers")
#: tables of one workload kind, written when the run made them (``Results.analysis``)
WORKLOAD_TABLES = ("requests",)


def empty_table(name: str) -> pd.DataFrame:
    """An empty table with the documented columns and dtypes."""
    return pd.DataFrame(
        {c: pd.Series(dtype=dt) for c, (dt, _) in SCHEMAS[name].items()},
    )


def _text_objects(s: pd.Series) -> pd.Series:
    """``s.astype(object)`` with one shared Python object per distinct value: a message table
    of 10^7 rows holds a handful of distinct phases, hops and statuses, and ``astype`` would
    make a string object per row (about 0.5 GB a column at that size)."""
    if s.dtype == object:
        return s.copy()
    codes, uniques = pd.factorize(s, use_na_sentinel=True)
    missing = np.flatnonzero(codes < 0)
    values = np.empty(len(uniques) + 1, dtype=object)
    values[:-1] = list(uniques)
    # the last slot (code -1) is what astype gives a missing value (NaN, None, ...)
    values[-1] = s.iloc[missing[:1]].astype(object).iloc[0] if missing.size else None
    return pd.Series(values[codes], index=s.index, name=s.name, dtype=object)


def conform(name: str, df: pd.DataFrame | None) -> pd.DataFrame:
    """``df`` with every documented column (missing counters filled with 0, missing text with
    ""), documented columns first in order, extra engine columns kept after them."""
    if df is None or len(df.columns) == 0:
        return empty_table(name)
    df = df.copy(deep=False)  # copy-on-write (pandas >= 3): only replaced columns are new
    for col, (dt, _) in SCHEMAS[name].items():
        if col not in df.columns:
            df[col] = "" if dt == "object" else (np.nan if dt == "float64" else 0)
        if dt == "int64" and len(df):
            df[col] = df[col].fillna(0).astype("int64")
        elif dt == "float64":
            df[col] = df[col].astype("float64")
        else:  # text: the same dtype whether built in memory or read back from a file
            df[col] = _text_objects(df[col])
    cols = list(SCHEMAS[name]) + [c for c in df.columns if c not in SCHEMAS[name]]
    out = df[cols].reset_index(drop=True)
    out.attrs = {}  # trace metadata stays with the trace, not in every result file
    return out


def message_table(
    trace: pd.DataFrame,
    post_s: np.ndarray,
    end_s: np.ndarray,
    outcomes: Mapping[int, tuple[str, str]] | None = None,
) -> pd.DataFrame:
    """The ``messages`` table from the trace and the engine's posting/delivery times.

    ``outcomes`` maps trace rows the engine did not deliver to (status, reason) (see the module
    docstring); a delivered row is ``complete`` whatever it says. Undelivered rows without an
    outcome stay ``unfinished`` with an empty reason until :func:`settle_messages` explains
    them from the run's status."""
    df = pd.DataFrame(
        {
            "msg": np.arange(len(trace), dtype=np.int64),
            "step": trace["step"].to_numpy(np.int64),
            "layer": trace["layer"].to_numpy(np.int64),
            "phase": trace["phase"].astype(str).array,  # no Python object per row
            "src_rank": trace["src_rank"].to_numpy(np.int64),
            "dst_rank": trace["dst_rank"].to_numpy(np.int64),
            "hop": trace["hop"].astype(str).array,
            "bytes": trace["bytes"].to_numpy(np.int64),
            "tokens": (
                trace["tokens"].to_numpy(np.int64)
                if "tokens" in trace
                else np.zeros(len(trace), np.int64)
            ),
            "post_s": np.asarray(post_s, dtype=float),
            "end_s": np.asarray(end_s, dtype=float),
        }
    )
    df["fct_s"] = df["end_s"] - df["post_s"]
    done = np.isfinite(df["end_s"].to_numpy())
    status = np.where(done, "complete", "unfinished").astype(object)
    reason = np.full(len(df), "", dtype=object)
    for row, (st, why) in (outcomes or {}).items():
        if 0 <= row < len(df) and not done[row]:
            if st not in MESSAGE_STATUSES:
                raise ValueError(f"message {row}: status {st!r} is not one of {MESSAGE_STATUSES}")
            status[row], reason[row] = st, why
    df["status"] = status
    df["reason"] = reason
    return df


#: the values of the messages table's ``status`` column
MESSAGE_STATUSES = ("complete", "failed", "unfinished")

_STOPPED = {
    "time-limit": "time limit: the run stopped before it completed",
    "interrupted": "interrupted: the run stopped before it completed",
    "stalled": "stalled: posted, but nothing was left to simulate (it was never delivered)",
}


def settle_messages(messages: pd.DataFrame, run_status: str) -> pd.DataFrame:
    """Give every undelivered message without a reason one from the run's ``run_status``
    (``time-limit``, ``interrupted``, ``stalled``; see the module docstring). Returns a copy,
    or ``messages`` itself when it has nothing to settle (a 10^7-row table is not copied for
    nothing)."""
    if "reason" in messages.columns and messages["reason"].dtype == object:
        reason = messages["reason"]
        if (
            not reason.isna().any()
            and not ((messages["status"] != "complete") & (reason == "")).any()
        ):
            return messages
    df = messages.copy()
    if "reason" not in df.columns:
        df["reason"] = ""
    df["reason"] = df["reason"].fillna("").astype(object)
    open_ = (df["status"] != "complete") & (df["reason"] == "")
    if not open_.any():
        return df
    never = open_ & df["post_s"].isna()
    stopped = _STOPPED.get(run_status, f"the run ended with status {run_status!r} first")
    if run_status == "stalled":
        df.loc[never, "reason"] = (
            "never posted: its phase never started on the sender (an earlier phase waited "
            "on messages that did not arrive)"
        )
        df.loc[open_ & ~never, "reason"] = stopped
    else:
        df.loc[open_ & ~never, "reason"] = stopped
        df.loc[never, "reason"] = stopped.replace("before it completed", "before it was posted")
    return df


def link_table(graph: Any, counters: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per direction of every link of ``graph``, counters merged in by ``link``.

    ``counters`` may hold any of the counter columns keyed by ``link`` ('u->v'); links the
    engine did not report get zeros (an idle link is a fact, not missing data).
    """
    rows = []
    for u, v, d in graph.edges(data=True):
        for a, b in ((u, v), (v, u)):
            rows.append(
                {
                    "link": f"{a}->{b}",
                    "u": a,
                    "v": b,
                    "tier": d.get("tier", ""),
                    "kind": d.get("kind", ""),
                    "rate_bps": float(d.get("rate_bps", float("nan"))),
                }
            )
    base = pd.DataFrame(rows, columns=["link", "u", "v", "tier", "kind", "rate_bps"])
    if counters is not None and len(counters):
        extra = counters.drop(
            columns=[c for c in ("u", "v", "tier", "kind", "rate_bps") if c in counters.columns]
        )
        base = base.merge(extra, on="link", how="left")
    return conform("links", base)


# --------------------------------------------------------------------------- summary


_PER_PHASE_COLUMNS = [
    "step",
    "layer",
    "phase",
    "time_s",
    "algbw_Bps",
    "busbw_Bps",
    "rdma_send_Bps",
    "nvl_send_Bps",
    "deepep_time_s",
    "deepep_rdma_Bps",
    "deepep_nvl_Bps",
]


def _deepep_figures(
    comm: pd.DataFrame, deepep: pd.DataFrame | None, keys: list[str], out: pd.DataFrame
) -> None:
    """DeepEP's per-rank figures (bytes it counts / the rank's phase time), mean over ranks,
    into ``out`` (indexed by ``keys``); NaN without counts."""
    cols = ["deepep_time_s", "deepep_rdma_Bps", "deepep_nvl_Bps"]
    if deepep is None or deepep.empty:
        for c in cols:
            out[c] = np.nan
        return
    j = comm[[*keys, "rank", "duration_s"]].merge(deepep, on=[*keys, "rank"], how="inner")
    j["deepep_rdma_Bps"] = deepep_rank_bw(j["rdma_bytes"], j["duration_s"])
    j["deepep_nvl_Bps"] = deepep_rank_bw(j["nvl_bytes"], j["duration_s"])
    j["deepep_time_s"] = j["duration_s"]
    fig = j.groupby(keys)[cols].mean()
    for c in cols:
        out[c] = fig[c].reindex(out.index)


def _per_phase(
    phases: pd.DataFrame,
    messages: pd.DataFrame,
    num_ranks: int,
    deepep: pd.DataFrame | None = None,
) -> pd.DataFrame:
    comm = phases[phases["phase"] != "compute"]
    if comm.empty:
        return pd.DataFrame(columns=_PER_PHASE_COLUMNS)
    # a training step's spans also carry the micro-batch and the pass (forward / backward)
    keys = ["step", "layer", "phase"] + [c for c in ("microbatch", "pass") if c in comm.columns]
    g = comm.groupby(keys, sort=True)
    out = g.agg(t0=("start_s", "min"), t1=("end_s", "max"), s_mean=("bytes_out", "mean"))
    n_ranks = max(1, num_ranks)
    out["time_s"] = out["t1"] - out["t0"]
    # the mean over all ranks (ranks that send nothing still count in the buffer mean)
    s_mean = g["bytes_out"].sum() / n_ranks
    with np.errstate(divide="ignore", invalid="ignore"):
        out["algbw_Bps"] = np.where(out["time_s"] > 0, s_mean / out["time_s"], np.nan)
    if "bus_factor" in comm.columns:
        # a collective's own factor (nccl-tests PERFORMANCE.md: all-reduce 2(n-1)/n, ...)
        factor = g["bus_factor"].mean().fillna((n_ranks - 1) / n_ranks)
    else:
        factor = (n_ranks - 1) / n_ranks
    out["busbw_Bps"] = out["algbw_Bps"] * factor
    # podsim's own: per-rank bytes sent over the hop / that rank's own phase time, mean over senders
    dur = comm.set_index([*keys, "rank"])["duration_s"]
    for hop, col in (("rdma", "rdma_send_Bps"), ("scaleup", "nvl_send_Bps")):
        m = messages[messages["hop"] == hop]
        if m.empty or len(keys) > 3:  # messages do not carry a training step's extra keys
            out[col] = np.nan
            continue
        per = m.groupby([*keys, "src_rank"])["bytes"].sum()
        per.index = per.index.set_names([*keys, "rank"])
        d = dur.reindex(per.index)
        bw = (per / d.where(d > 0)).groupby(level=keys).mean()
        out[col] = bw.reindex(out.index)
    _deepep_figures(comm, deepep, keys, out)
    return out.reset_index()[_PER_PHASE_COLUMNS]


def all_to_all_workload(scenario: Mapping[str, Any] | None) -> bool:
    """The resolved scenario's traffic is an all-to-all (an MoE layer or the uniform synthetic
    pattern): where the summaries say "all-to-all completion time" and NCCL's all-to-all bus
    factor applies."""
    wl = (scenario or {}).get("workload") or {}
    syn = wl.get("synthetic") or {}
    return bool(wl.get("moe")) or (bool(syn) and syn.get("pattern", "uniform") == "uniform")


def json_safe(x: Any) -> Any:
    """JSON-safe scalars: NaN/inf -> None, NumPy -> Python."""
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [json_safe(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def summarise(
    *,
    messages: pd.DataFrame,
    phases: pd.DataFrame,
    links: pd.DataFrame,
    qps: pd.DataFrame,
    num_ranks: int,
    makespan_s: float,
    deepep: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """The run's figures (definitions in the module docstring). ``deepep``: the bytes DeepEP's
    scripts count per (step, layer, phase, rank)
    (:func:`podsim.workloads.deepep_metrics.deepep_bytes_table`); without it the DeepEP figures
    are None."""
    per = _per_phase(phases, messages, num_ranks, deepep)
    by_phase: dict[str, Any] = {}
    order = {p: i for i, p in enumerate(("dispatch", "combine", "other"))}
    for ph, grp in sorted(per.groupby("phase"), key=lambda kv: order.get(str(kv[0]), 9)):
        by_phase[str(ph)] = {
            "layers": len(grp),
            "completion_time_s": float(grp["time_s"].mean()),
            "completion_time_max_s": float(grp["time_s"].max()),
            "algbw_per_gpu_Bps": float(grp["algbw_Bps"].mean()),
            "busbw_per_gpu_Bps": float(grp["busbw_Bps"].mean()),
            "rdma_send_bw_per_gpu_Bps": float(grp["rdma_send_Bps"].mean()),
            "nvl_send_bw_per_gpu_Bps": float(grp["nvl_send_Bps"].mean()),
            "deepep_time_s": float(grp["deepep_time_s"].mean()),
            "deepep_rdma_bw_per_gpu_Bps": float(grp["deepep_rdma_Bps"].mean()),
            "deepep_nvl_bw_per_gpu_Bps": float(grp["deepep_nvl_Bps"].mean()),
        }
    comp = phases[phases["phase"] == "compute"]
    if len(comp):
        by_phase["compute"] = {
            "layers": int(comp.groupby(["step", "layer"]).ngroups),
            "mean_rank_time_s": float(comp["duration_s"].mean()),
            "max_rank_time_s": float(comp["duration_s"].max()),
        }
    tiers: dict[str, Any] = {}
    if len(links):
        for tier, grp in links.groupby("tier", sort=True):
            tiers[str(tier)] = {
                "links": len(grp),
                "mean_utilisation": float(grp["utilisation"].mean()),
                "max_utilisation": float(grp["utilisation"].max()),
                "tx_bytes": int(grp["tx_bytes"].sum()),
            }
    fct = messages["fct_s"].to_numpy(float)
    fct = fct[np.isfinite(fct)]
    return json_safe(
        {
            "makespan_s": makespan_s,
            "ranks": num_ranks,
            "messages": {
                "count": len(messages),
                "unfinished": int((messages["status"] != "complete").sum()),
                "failed": int((messages["status"] == "failed").sum()),
                "bytes": int(messages["bytes"].sum()),
                "fct_p50_s": float(np.percentile(fct, 50)) if len(fct) else None,
                "fct_p99_s": float(np.percentile(fct, 99)) if len(fct) else None,
                "fct_max_s": float(fct.max()) if len(fct) else None,
            },
            "phases": by_phase,
            "link_utilisation": tiers,
            "counters": {
                "drops": int(links["drops"].sum()) if len(links) else 0,
                "ecn_marks": int(links["ecn_marks"].sum()) if len(links) else 0,
                "pfc_pauses": int(links["pauses"].sum()) if len(links) else 0,
                "retransmitted_packets": int(qps["retx_packets"].sum()) if len(qps) else 0,
                "timeouts": int(qps["timeouts"].sum()) if len(qps) else 0,
            },
        }
    )


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts -> ``{"a.b.c": value}``; lists and other containers are dropped."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        elif v is None or isinstance(v, bool | int | float | str):
            out[key] = v
    return out


def layer_time_s(phases: pd.DataFrame) -> float:
    """Mean over (step, layer) of max(end_s) - min(start_s) across ranks and phases: the
    simulated MoE layer time (dispatch, compute and combine of the whole layer)."""
    if phases.empty:
        return float("nan")
    g = phases.groupby(["step", "layer"])
    span = g["end_s"].max() - g["start_s"].min()
    return float(span.mean())


#: summary keys that measure the host running the simulation, not the simulated system
_VOLATILE = ("wall_s", "events_per_s", "engine_info")


# --------------------------------------------------------------------------- results object


@dataclass
class Results:
    """A run's tables, summary and scenario; what ``podsim.run`` returns."""

    messages: pd.DataFrame
    phases: pd.DataFrame
    links: pd.DataFrame
    qps: pd.DataFrame
    queues: pd.DataFrame
    summary: dict[str, Any]
    scenario: dict[str, Any] = field(default_factory=dict)
    out_dir: Path | None = None
    #: the cost of the simulated cluster (``cost.json``: ``summary``, ``tco``,
    #: ``capex_by_category``, ``power_by_category``, ``efficiency``; or ``{"error": why}``
    #: when the cluster could not be priced), see :mod:`podsim.scenarios.cost.scenario`
    cost: dict[str, Any] | None = None
    #: the bill of materials (``bom.csv``), one row per BOM line
    bom: pd.DataFrame | None = None
    #: straggler and bubble analysis: ``critical``, ``gpu_time``, ``stragglers`` (module
    #: docstring; :meth:`scenarios.results.analysis.Analysis.tables`), empty when not analysed
    analysis: dict[str, pd.DataFrame] = field(default_factory=dict)
    #: bytes and utilisation of every link direction per phase (module docstring); empty when
    #: the engine recorded no link byte series
    links_by_phase: pd.DataFrame = field(default_factory=lambda: empty_table("links_by_phase"))

    @property
    def status(self) -> str:
        return str(self.summary.get("status", "complete"))

    def tables(self) -> dict[str, pd.DataFrame]:
        return {name: getattr(self, name) for name in TABLES}

    def per_phase(self) -> pd.DataFrame:
        """Per (step, layer, phase): completion time and the bandwidth figures."""
        return _per_phase(self.phases, self.messages, int(self.summary.get("ranks", 0)))

    def performance(self) -> dict[str, Any]:
        """The run's figures as one flat row (what a study stores per point):

        - the summary flattened to dotted keys (``phases.dispatch.completion_time_s``), numbers
          and short strings only; host figures (``wall_s``, ``events_per_s``) left out so that
          the row depends on the scenario alone;
        - ``layer_time_s``: the simulated MoE layer time (:func:`layer_time_s`);
        - ``a2a_algbw_per_gpu_Bps``: mean of the dispatch and combine (or ``other``) algorithm
          bandwidth per GPU (NCCL definition, module docstring);
        - ``tokens_per_s``: for an MoE workload, ranks x tokens per rank / layer time.
        """
        row = flatten({k: v for k, v in self.summary.items() if k not in _VOLATILE})
        row["layer_time_s"] = layer_time_s(self.phases)
        bws = [
            row.get(f"phases.{ph}.algbw_per_gpu_Bps")
            for ph in ("dispatch", "combine", "other")
            if isinstance(row.get(f"phases.{ph}.algbw_per_gpu_Bps"), int | float)
        ]
        row["a2a_algbw_per_gpu_Bps"] = float(sum(bws) / len(bws)) if bws else float("nan")
        moe = (self.scenario.get("workload") or {}).get("moe")
        t = row["layer_time_s"]
        if moe and isinstance(t, float) and math.isfinite(t) and t > 0:
            row["tokens_per_s"] = moe["ep_size"] * moe["tokens_per_rank"] / t
        return row

    def cost_table(self) -> pd.DataFrame:
        """Capex (USD) and power (W) per cost category, with each one's share of the total;
        empty when the run was not priced."""
        cols = ["category", "capex_usd", "capex_share", "power_w", "power_share"]
        if not self.cost or "capex_by_category" not in self.cost:
            return pd.DataFrame(columns=cols)
        capex = self.cost["capex_by_category"]
        power = self.cost.get("power_by_category") or {}
        df = pd.DataFrame(
            {
                "category": list(capex),
                "capex_usd": [float(capex[c] or 0.0) for c in capex],
                "power_w": [float(power.get(c) or 0.0) for c in capex],
            }
        )
        df = df[(df["capex_usd"] != 0) | (df["power_w"] != 0)].reset_index(drop=True)
        for col, share in (("capex_usd", "capex_share"), ("power_w", "power_share")):
            total = df[col].sum()
            df[share] = df[col] / total if total > 0 else np.nan
        return df[cols]

    def gpu_bandwidth(self) -> pd.DataFrame:
        """Per rank and communication phase: mean over layers of bytes_out / duration (B/s)."""
        comm = self.phases[self.phases["phase"] != "compute"]
        dur = comm["duration_s"].where(comm["duration_s"] > 0)
        bw = (comm["bytes_out"] / dur).rename("bw_Bps")
        out = comm.assign(bw_Bps=bw).groupby(["phase", "rank"], as_index=False)["bw_Bps"].mean()
        return out

    # ----------------------------------------------------------------- files

    def write(
        self, out_dir: str | Path, formats: tuple[str, ...] | list[str] = ("parquet", "csv")
    ) -> list[Path]:
        """Write every table and analysis table (Parquet and/or CSV), summary.json and
        resolved.yaml."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written: list[Path] = []
        extra = {
            k: self.analysis[k] for k in (*ANALYSIS_TABLES, *WORKLOAD_TABLES) if k in self.analysis
        }
        for name, df in {**self.tables(), **extra}.items():
            if "parquet" in formats:
                p = out / f"{name}.parquet"
                df.to_parquet(p, index=False)
                written.append(p)
            if "csv" in formats:
                p = out / f"{name}.csv"
                df.to_csv(p, index=False)
                written.append(p)
        p = out / "summary.json"
        p.write_text(json.dumps(json_safe(self.summary), indent=2, sort_keys=False) + "\n")
        written.append(p)
        if self.scenario:
            p = out / "resolved.yaml"
            p.write_text(yaml.safe_dump(self.scenario, sort_keys=False))
            written.append(p)
        if self.cost is not None:
            from podsim.scenarios.cost.scenario import write_cost_files

            written += write_cost_files(out, self.cost, self.bom)
        self.out_dir = out
        return written

    @classmethod
    def read(cls, out_dir: str | Path) -> Results:
        """Read a result folder written by :meth:`write` (Parquet preferred, else CSV)."""
        out = Path(out_dir)
        if not (out / "summary.json").is_file():
            raise FileNotFoundError(
                f"{out} is not a podsim result folder (no summary.json); run `podsim run` first"
            )
        tables = {}
        for name in TABLES:
            df = _read_saved(out, name)
            tables[name] = conform(name, empty_table(name) if df is None else df)
        # folders written before the status column said complete/failed/unfinished
        msgs = tables["messages"]
        msgs["status"] = msgs["status"].replace("ok", "complete")
        msgs["reason"] = msgs["reason"].fillna("")  # CSV reads an empty reason as missing
        analysis = {}
        for name in (*ANALYSIS_TABLES, *WORKLOAD_TABLES):
            df = _read_saved(out, name)
            if df is not None:
                analysis[name] = df
        summary = json.loads((out / "summary.json").read_text())
        scen_path = out / "resolved.yaml"
        scenario = read_yaml(scen_path) if scen_path.is_file() else {}
        cost_path, bom_path = out / "cost.json", out / "bom.csv"
        cost = json.loads(cost_path.read_text()) if cost_path.is_file() else None
        bom = pd.read_csv(bom_path) if bom_path.is_file() else None
        return cls(
            **tables,
            summary=summary,
            scenario=scenario or {},
            out_dir=out,
            cost=cost,
            bom=bom,
            analysis=analysis,
        )

    # ----------------------------------------------------------------- printing

    def summary_tables(self) -> list[Table]:
        """The printed summary: phases, link utilisation by tier, loss/congestion counters."""
        from rich.table import Table

        s = self.summary
        phases = {k: v for k, v in s.get("phases", {}).items() if k != "compute"}
        name = s.get("scenario", "run")
        if s.get("variant"):
            name += f" (variant {s['variant']})"
        title = f"{name}, {s.get('engine', '?')} engine: {s.get('status', '')}"
        head = Table(title=title, title_justify="left")
        head.add_column("per phase (mean over layers)")
        for ph in phases:
            head.add_column(ph, justify="right")
        wl = (self.scenario or {}).get("workload") or {}
        a2a = all_to_all_workload(self.scenario)
        nccl = a2a or bool(wl.get("collective"))
        rows = (
            ("all-to-all completion time" if a2a else "completion time", "completion_time_s", _t),
            ("algbw per GPU (NCCL)", "algbw_per_gpu_Bps", _gbs),
            ("busbw per GPU (NCCL)", "busbw_per_gpu_Bps", _gbs),
            ("RDMA send bw per GPU", "rdma_send_bw_per_gpu_Bps", _gbs),
            ("NVLink send bw per GPU", "nvl_send_bw_per_gpu_Bps", _gbs),
            ("kernel time per rank (DeepEP)", "deepep_time_s", _t),
            ("RDMA bw per GPU (DeepEP)", "deepep_rdma_bw_per_gpu_Bps", _gbs),
            ("NVLink bw per GPU (DeepEP)", "deepep_nvl_bw_per_gpu_Bps", _gbs),
            ("physical lower bound", "bound_s", _t),
            ("fraction of the bound", "fraction_of_bound", _pct),
        )
        for label, key, fmt in rows:
            if key in ("bound_s", "fraction_of_bound") and not any(
                key in m for m in phases.values()
            ):
                continue  # runs without the bound engine's module
            if key.startswith("deepep") and all(m.get(key) is None for m in phases.values()):
                continue  # traffic DeepEP's scripts do not measure
            if key == "busbw_per_gpu_Bps" and not nccl:
                continue  # NCCL's bus-bandwidth factor is defined for its collectives
            if key in ("rdma_send_bw_per_gpu_Bps", "nvl_send_bw_per_gpu_Bps") and not any(
                m.get(key) for m in phases.values()
            ):
                continue  # no traffic of that kind (e.g. no NVLink in a scale-out-only run)
            head.add_row(label, *(fmt(m.get(key)) for m in phases.values()))
        comp = s.get("phases", {}).get("compute")
        if comp and comp.get("max_rank_time_s"):  # no caption for traffic with no compute
            head.caption = (
                f"expert compute per rank: mean {_t(comp.get('mean_rank_time_s'))}, "
                f"max {_t(comp.get('max_rank_time_s'))}"
            )
            head.caption_justify = "left"
        util = Table(title="link utilisation by tier (mean over the run)", title_justify="left")
        for col in ("tier", "links", "mean", "max"):
            util.add_column(col, justify="left" if col == "tier" else "right")
        for tier, m in s.get("link_utilisation", {}).items():
            util.add_row(
                tier, str(m["links"]), _pct(m["mean_utilisation"]), _pct(m["max_utilisation"])
            )
        by_phase = self._phase_link_table()
        cnt = Table(title="loss and congestion", title_justify="left")
        c = s.get("counters", {})
        for col in ("drops", "ECN marks", "PFC pauses", "retransmits", "timeouts", "makespan"):
            cnt.add_column(col, justify="right")
        cnt.add_row(
            str(c.get("drops", 0)),
            str(c.get("ecn_marks", 0)),
            str(c.get("pfc_pauses", 0)),
            str(c.get("retransmitted_packets", 0)),
            str(c.get("timeouts", 0)),
            _t(s.get("makespan_s")),
        )
        tables = [head, util, *([by_phase] if by_phase is not None else []), cnt]
        per_class = (s.get("engine_info") or {}).get("traffic_classes") or {}
        if len(per_class) > 1:
            tables.append(_classes_table(per_class))
        if s.get("serving"):
            tables.insert(0, self._serving_table())
        if self.cost is not None:
            tables.append(self._cost_summary_table())
        return tables

    def _phase_link_table(self) -> Table | None:
        """The busiest and the hottest (contended) link while each phase runs
        (:mod:`podsim.scenarios.results.phase_links`); None when the run has no such figures."""
        from podsim.scenarios.results.phase_links import phase_link_caption, phase_link_rows
        from rich.table import Table

        rows = phase_link_rows(self.summary)
        if not rows:
            return None
        t = Table(title="links while each phase runs", title_justify="left")
        for col in ("phase", "time", "busiest link", "contended", "hottest"):
            right = col in ("time", "contended")
            # link names fold onto a second line rather than lose their end on 80 columns
            t.add_column(col, justify="right" if right else "left", overflow="fold")
        for r in rows:
            busy = f"{_pct(r['busiest_utilisation'])} {r['busiest'] or ''}".strip()
            hot = "-" if r["contended_links"] is None else "none"
            if r["hottest"] == r["busiest"] and r["hottest"]:
                hot = "the busiest"
            elif r["hottest"]:
                hot = f"{_pct(r['hottest_utilisation'])} {r['hottest']}"
            t.add_row(
                r["phase"],
                _t(r["seconds"]),
                busy,
                "-" if r["contended_links"] is None else str(r["contended_links"]),
                hot,
            )
        t.caption = phase_link_caption(self.summary)
        t.caption_justify = "left"
        return t

    def _serving_table(self) -> Table:
        """Percentiles of the serving figures over completed requests (``summary.serving``)."""
        from rich.table import Table

        sv = self.summary.get("serving") or {}
        t = Table(
            title=f"serving: {sv.get('completed', 0)} of {sv.get('requests', 0)} requests "
            "completed",
            title_justify="left",
        )
        t.add_column("per request")
        for col in ("p50", "p90", "p99", "mean"):
            t.add_column(col, justify="right")
        rows = (
            ("TTFT", "ttft_s", _t),
            ("TPOT", "tpot_s", _t),
            ("end-to-end latency", "e2e_s", _t),
            ("queue before prefill", "queue_s", _t),
            ("KV transfer", "kv_transfer_s", _t),
            ("KV transfer exposed", "kv_exposed_s", _t),
            ("KV share of TTFT", "kv_share_of_ttft", _pct),
            ("KV transfer rate", "kv_rate_Bps", _gbs),
        )
        for label, key, fmt in rows:
            m = sv.get(key) or {}
            t.add_row(label, *(fmt(m.get(c)) for c in ("p50", "p90", "p99", "mean")))
        tput = sv.get("output_tokens_per_s_per_gpu")
        if tput is not None:
            t.caption = f"output tokens per second per GPU: {tput:.3g}"
            t.caption_justify = "left"
        return t

    def _cost_summary_table(self) -> Table:
        """Capex, power, TCO and the cost per unit of all-to-all bandwidth (``podsim cost``
        prints the whole BOM)."""
        from podsim.scenarios.cost.tables import usd
        from rich.table import Table

        t = Table(title="cost of the cluster (podsim cost: full BOM)", title_justify="left")
        cost = self.cost or {}
        if "error" in cost:
            t.add_column("not priced")
            t.add_row(str(cost["error"]))
            return t
        head = cost.get("summary") or {}
        tco = cost.get("tco") or {}
        eff = cost.get("efficiency") or {}
        cells = {
            "capex": usd(head.get("capex_usd")),
            "per GPU": usd(eff.get("usd_per_gpu")),
            "power": _kw(head.get("power_w")),
            f"TCO {tco.get('years', 0):g} y": usd(tco.get("tco_usd")),
            "interconnect": _pct(head.get("interconnect_fraction")),
            "$ per GB/s/GPU": usd(eff.get("usd_per_GBps_per_gpu")),
        }
        for col in cells:
            t.add_column(col, justify="right")
        t.add_row(*cells.values())
        none = _share(head, "capex_conf.none")
        if none is not None:
            # a caption, not a column: a seventh column broke the headers on 80 columns
            t.caption = (
                f"{_pct(none)} of capex on NONE prices (no source, a documented guess); "
                "podsim cost marks every price by confidence"
            )
        t.caption_justify = "left"
        return t


def _share(head: dict[str, Any], key: str) -> float | None:
    """``head[key]`` over the capex, or None when either is missing (a run priced by an
    older podsim has no confidence totals)."""
    total, part = head.get("capex_usd"), head.get(key)
    if not isinstance(total, int | float) or not isinstance(part, int | float) or total <= 0:
        return None
    return float(part) / float(total)


def _classes_table(per_class: dict[str, dict[str, Any]]) -> Table:
    """One row per traffic class (``engine_info.traffic_classes``, :mod:`.classes`)."""
    from rich.table import Table

    t = Table(title="traffic classes", title_justify="left")
    # two-line headers: eight columns fit an 80-column terminal
    cols = (
        "class",
        "sched",
        "msgs",
        "bytes",
        "FCT p50",
        "FCT p99",
        "drop/\nECN/PFC",
        "resent/\nTO/dup",
    )
    for col in cols:
        t.add_column(col, justify="left" if col in ("class", "sched") else "right")
    for name, c in per_class.items():
        sched = f"P{c['priority']} w{c['weight']:g}{' PFC' if c['pfc'] else ''}"
        t.add_row(
            name,
            sched,
            str(c["messages"]),
            fmt_size(c["bytes"]),
            _t(c["fct_p50_s"]),
            _t(c["fct_p99_s"]),
            f"{c['drops']}/{c['ecn_marks']}/{c['pauses']}",
            f"{c.get('retx_packets', 0)}/{c.get('timeouts', 0)}/{c.get('duplicate_packets', 0)}",
        )
    t.caption = (
        "P priority, w DWRR weight; drops, ECN marks, PFC pauses over all ports; packets "
        "retransmitted, timeouts, duplicates received (retransmissions without drops are spurious)"
    )
    t.caption_justify = "left"
    return t


def _t(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else fmt_time(x)


def _gbs(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x / 1e9:.2f} GB/s"


def _pct(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:.1f} %"


def _kw(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x / 1000:,.1f} kW"


def _read_saved(out: Path, name: str) -> pd.DataFrame | None:
    """Table ``name`` of result folder ``out``: its Parquet file, else its CSV, else None."""
    pq, csv = out / f"{name}.parquet", out / f"{name}.csv"
    if pq.is_file():
        return pd.read_parquet(pq)
    if csv.is_file():
        return pd.read_csv(csv)
    return None
