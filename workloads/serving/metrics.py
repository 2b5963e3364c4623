"""Per-request serving figures from a run's spans, and their percentiles.

:func:`requests_table` reads the phase table the executor made of the serving graph's spans
(:mod:`podsim.workloads.serving.builder`) and gives one row per request:

- ``request``, ``arrival_s``, ``prompt_tokens``, ``output_tokens``, ``prefill_instance``,
  ``decode_instance``, ``kv_bytes`` (the request's whole cache);
- ``prefill_start_s``, ``prefill_end_s``, ``queue_s`` (arrival -> prefill start), ``prefill_s``;
- ``kv_start_s`` (first cache byte posted), ``kv_end_s`` (last byte delivered),
  ``kv_transfer_s`` (their difference: with layer-wise streaming it overlaps the prefill),
  ``kv_exposed_s`` (prefill end -> last byte delivered, at least 0: the transfer time the
  request waits for), ``kv_rate_Bps`` (kv_bytes / kv_transfer_s: the fabric rate the cache
  moved at, over all the request's rank pairs);
- ``first_token_s`` (end of its first decode iteration), ``first_step_s`` (that iteration's
  duration), ``last_token_s`` (end of its last iteration);
- ``ttft_s`` = first_token_s - arrival_s; ``tpot_s`` = (last_token_s - first_token_s) /
  (output_tokens - 1) (NaN for one output token); ``e2e_s`` = last_token_s - arrival_s;
- ``kv_share_of_ttft`` = kv_exposed_s / ttft_s;
- ``complete``: every part ended (a run stopped early leaves NaN times and False).

:func:`serving_summary` gives the percentiles (p50, p90, p99, numpy's linear interpolation) of
TTFT, TPOT, end-to-end latency, KV-transfer time, its share of TTFT and its rate over the completed
requests, plus output tokens per second per GPU over the run.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["PERCENTILES", "REQUEST_COLUMNS", "requests_table", "serving_summary"]

PERCENTILES = (50, 90, 99)

_TAGS = [
    "request",
    "arrival_s",
    "prompt_tokens",
    "output_tokens",
    "prefill_instance",
    "decode_instance",
    "kv_bytes",
]
REQUEST_COLUMNS = [
    *_TAGS,
    "prefill_start_s",
    "prefill_end_s",
    "queue_s",
    "prefill_s",
    "kv_start_s",
    "kv_end_s",
    "kv_transfer_s",
    "kv_exposed_s",
    "kv_rate_Bps",
    "first_token_s",
    "first_step_s",
    "last_token_s",
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "kv_share_of_ttft",
    "complete",
]


def requests_table(phases: pd.DataFrame, num_requests: int | None = None) -> pd.DataFrame:
    """One row per request (module docstring) from a serving run's phase table; requests
    whose parts never ended have NaN times (``num_requests``: how many there were)."""
    if "part" not in phases.columns or "request" not in phases.columns:
        return pd.DataFrame(columns=REQUEST_COLUMNS)
    ph = phases[phases["part"].notna()]
    info = ph.drop_duplicates("request").set_index("request")[_TAGS[1:]]
    if num_requests is None:
        num_requests = int(info.index.max()) + 1 if len(info) else 0
    n = num_requests
    out = pd.DataFrame({"request": np.arange(n)}).set_index("request")
    out = out.join(info)

    def part(name: str, col: str) -> pd.Series:
        sel = ph[ph["part"] == name].set_index("request")[col]
        return sel.reindex(out.index).astype(float)

    out["prefill_start_s"] = part("prefill", "start_s")
    out["prefill_end_s"] = part("prefill", "end_s")
    out["queue_s"] = out["prefill_start_s"] - out["arrival_s"]
    out["prefill_s"] = out["prefill_end_s"] - out["prefill_start_s"]
    out["kv_start_s"] = part("kv", "start_s")
    out["kv_end_s"] = part("kv", "end_s")
    out["kv_transfer_s"] = out["kv_end_s"] - out["kv_start_s"]
    out["kv_exposed_s"] = (out["kv_end_s"] - out["prefill_end_s"]).clip(lower=0.0)
    xfer = out["kv_transfer_s"].where(out["kv_transfer_s"] > 0)
    out["kv_rate_Bps"] = out["kv_bytes"].astype(float) / xfer
    out["first_token_s"] = part("first_token", "end_s")
    out["first_step_s"] = out["first_token_s"] - part("first_token", "start_s")
    out["last_token_s"] = part("decode", "end_s")
    out["ttft_s"] = out["first_token_s"] - out["arrival_s"]
    steps = out["output_tokens"].astype(float) - 1.0
    out["tpot_s"] = np.where(
        steps > 0, (out["last_token_s"] - out["first_token_s"]) / steps.where(steps > 0), np.nan
    )
    out["e2e_s"] = out["last_token_s"] - out["arrival_s"]
    out["kv_share_of_ttft"] = out["kv_exposed_s"] / out["ttft_s"]
    times = ["prefill_end_s", "kv_end_s", "first_token_s", "last_token_s"]
    out["complete"] = out[times].notna().all(axis=1)
    out = out.reset_index()
    for c in ("prompt_tokens", "output_tokens", "prefill_instance", "decode_instance"):
        out[c] = out[c].astype("Int64")
    return out[REQUEST_COLUMNS]


def _pct(x: pd.Series) -> dict[str, float | None]:
    v = x.dropna().to_numpy(dtype=float)
    if not v.size:
        return {f"p{p}": None for p in PERCENTILES} | {"mean": None}
    q = np.percentile(v, PERCENTILES)
    return {f"p{p}": float(val) for p, val in zip(PERCENTILES, q, strict=True)} | {
        "mean": float(v.mean())
    }


def serving_summary(table: pd.DataFrame, gpus: int, makespan_s: float) -> dict[str, Any]:
    """Percentiles over completed requests and throughput (module docstring)."""
    done = table[table["complete"]]
    out_tokens = float(done["output_tokens"].sum()) if len(done) else 0.0
    return {
        "requests": len(table),
        "completed": len(done),
        "ttft_s": _pct(done["ttft_s"]),
        "tpot_s": _pct(done["tpot_s"]),
        "e2e_s": _pct(done["e2e_s"]),
        "kv_transfer_s": _pct(done["kv_transfer_s"]),
        "kv_exposed_s": _pct(done["kv_exposed_s"]),
        "kv_share_of_ttft": _pct(done["kv_share_of_ttft"]),
        "kv_rate_Bps": _pct(done["kv_rate_Bps"]),
        "queue_s": _pct(done["queue_s"]),
        "output_tokens": int(out_tokens),
        "output_tokens_per_s_per_gpu": (
            out_tokens / makespan_s / gpus if makespan_s > 0 and gpus > 0 else None
        ),
    }
