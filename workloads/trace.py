"""The traffic trace: the one table every engine replays.

Schema (a pandas DataFrame, one row per (src_rank, dst_rank) message of a phase):

===========  =======  ============================================================
column       dtype    meaning
===========  =======  ============================================================
step         int64    training/inference step (ring all-reduce: the ring step)
layer        int64    MoE layer index
phase        str      "dispatch" | "combine" | "other"
src_rank     int64    sending rank, 0 .. num_ranks-1
dst_rank     int64    receiving rank, 0 .. num_ranks-1
bytes        int64    payload bytes (>= 0; wire overhead is the fabric's business)
tokens       int64    token rows carried (>= 0; 0 for non-token traffic)
start_s      float64  earliest start in seconds, relative to the phase start (>= 0)
hop          str      "rdma" | "scaleup" | "local" (same node = scale-up domain)
stage        int64    OPTIONAL route stage, 0 or 1 (absent: every row is stage 0);
                      see "Route stages" below
chunk        int64    OPTIONAL chunk round, >= 0 (absent: every row is round 0);
                      see "Route stages" below
final        int64    OPTIONAL 1: a stage-0 row that ends at its dst_rank (no stage-1
                      row forwards it), 0 (absent: every row) otherwise; see "Route stages"
===========  =======  ============================================================

Route stages (the optional ``stage`` column). Stage 0: the message can start at the phase
start (plus its ``start_s``). Stage 1: the message is sent by a forwarder and waits for the
stage-0 messages of the same (step, layer, phase) that arrive at its ``src_rank``. In
``deepep-normal`` dispatch (podsim.workloads.traffic) stage 1 is the intra-node NVLink forward that
waits for the RDMA stage's arrival at that forwarder (the GPU with the same local index as the
source on the target node); in combine it is the mirror image: the forwarder's RDMA send back
waits for the intra-node partial sums arriving at it. ``start_s`` of a stage-1 row is still
relative to the phase start (a lower bound next to the dependency). Validation rejects a stage
other than 0 or 1 and a stage-1 row whose ``src_rank`` receives no stage-0 row in its (step,
layer, phase): it could never start. An engine that ignores the column treats all rows as
stage 0 (simultaneous), an optimistic bound.

Final deliveries (the optional ``final`` column). A stage-0 row with ``final`` 1 delivers to its
``dst_rank`` for good: the stage-1 rows of that rank do not wait for it. In ``deepep-normal``
these are the direct scale-up rows inside a node (a rank's tokens for its own node's GPUs in
dispatch; the partial sums for a rank's own tokens in combine): DeepEP's forwarder forwards each
source node's RDMA chunks as they arrive (module podsim.workloads.deepep_kernels), never waiting
for traffic it does not carry. Without the column a forward would wait for every stage-0
arrival at its rank, its own node's direct deliveries included.

Chunk rounds (the optional ``chunk`` column, DeepEP's pipelined kernels:
podsim.workloads.deepep_kernels). A stage-1 row of round ``k`` waits only for the stage-0 rows
of round ``k`` arriving at its ``src_rank``, and the rounds of one (src_rank, dst_rank, stage)
in a phase go in order: an ``rdma`` row of round ``k`` is posted no earlier than the latest
earlier round of its connection was (its queue pair sends them in posting order, as DeepEP's
non-blocking puts), any other row waits for the delivery of that earlier round
(podsim.scenarios.execution.timeline). Validation rejects a stage-1 row whose ``src_rank``
receives no stage-0 row of its round.

``df.attrs`` carries ``num_ranks`` (required) and free metadata (model, mode, gpus_per_node,
pattern, routing statistics, ...). Per-rank expert-compute durations for the
dispatch -> compute -> combine timeline ride in ``df.attrs["compute"]``: a dict of NumPy arrays
indexed [step, layer, rank] (``seconds``, ``flops``, ``token_copies``) plus ``steps``/``layers``
(the step and layer values of the first two axes); :func:`compute_table` returns them as a
long DataFrame. Arrays keep pandas' attrs copies cheap.

Files: Parquet (attrs as JSON in the schema metadata key ``podsim.attrs``) or CSV (attrs as
JSON on a first line ``# podsim-trace-attrs: {...}``); :func:`read_trace` validates.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from podsim.workloads.traffic import classify_hops

__all__ = [
    "COLUMNS",
    "HOPS",
    "PHASES",
    "TraceError",
    "TraceRankCountMissing",
    "compute_table",
    "concat_traces",
    "make_trace",
    "read_trace",
    "validate_trace",
    "write_trace",
]

PHASES = ("dispatch", "combine", "other")
HOPS = ("rdma", "scaleup", "local")
INT_COLUMNS = ("step", "layer", "src_rank", "dst_rank", "bytes", "tokens")
COLUMNS = ("step", "layer", "phase", "src_rank", "dst_rank", "bytes", "tokens", "start_s", "hop")
OPTIONAL = ("stage", "chunk", "final")
_ATTRS_KEY = b"podsim.attrs"
_CSV_PREFIX = "# podsim-trace-attrs: "


class TraceError(ValueError):
    """A trace that breaks the schema; the message names the column, row and value."""


class TraceRankCountMissing(TraceError):
    """A trace that records no rank count (``df.attrs['num_ranks']``) and was given none."""


def make_trace(
    *,
    src_rank: Any,
    dst_rank: Any,
    bytes: Any,
    num_ranks: int,
    tokens: Any = 0,
    step: Any = 0,
    layer: Any = 0,
    phase: Any = "other",
    start_s: Any = 0.0,
    hop: Any = None,
    stage: Any = None,
    chunk: Any = None,
    final: Any = None,
    gpus_per_node: int | None = None,
    **attrs: Any,
) -> pd.DataFrame:
    """A validated trace from columns (arrays or scalars, broadcast to one length).

    ``hop`` defaults to the locality of (src, dst) for ``gpus_per_node`` (None: each rank is
    its own node). Extra keyword arguments go to ``df.attrs``.
    """
    src = np.asarray(src_rank, dtype=np.int64).ravel()
    n = src.shape[0]

    def col(v: Any, dtype: Any) -> np.ndarray:
        a = np.asarray(v, dtype=dtype)
        return np.broadcast_to(a, (n,)).copy() if a.ndim == 0 else a.ravel()

    dst = col(dst_rank, np.int64)
    if dst.shape != src.shape:
        raise TraceError(f"trace columns have different lengths: src_rank {n}, dst_rank {len(dst)}")
    data = {
        "step": col(step, np.int64),
        "layer": col(layer, np.int64),
        "phase": col(phase, object),
        "src_rank": src,
        "dst_rank": dst,
        "bytes": col(bytes, np.int64),
        "tokens": col(tokens, np.int64),
        "start_s": col(start_s, np.float64),
        "hop": col(classify_hops(src, dst, gpus_per_node) if hop is None else hop, object),
    }
    if stage is not None:
        data["stage"] = col(stage, np.int64)
    if chunk is not None:
        data["chunk"] = col(chunk, np.int64)
    if final is not None:
        data["final"] = col(final, np.int64)
    lengths = {k: len(v) for k, v in data.items()}
    if len(set(lengths.values())) != 1:
        raise TraceError(f"trace columns have different lengths: {lengths}")
    df = pd.DataFrame(data)
    df.attrs.update({"num_ranks": int(num_ranks), **attrs})
    if gpus_per_node is not None:
        df.attrs["gpus_per_node"] = int(gpus_per_node)
    return validate_trace(df)


def concat_traces(traces: Iterable[pd.DataFrame], **attrs: Any) -> pd.DataFrame:
    """Rows of several traces of the same rank count; attrs from the first, updated by ``attrs``."""
    traces = list(traces)
    if not traces:
        raise TraceError("concat_traces needs at least one trace")
    ranks = {t.attrs.get("num_ranks") for t in traces}
    if len(ranks) != 1:
        raise TraceError(
            f"cannot concatenate traces with different num_ranks {sorted(map(str, ranks))}"
        )
    merged = dict(traces[0].attrs)
    merged.update(attrs)
    df = pd.concat(traces, ignore_index=True)
    for c in OPTIONAL:
        if c in df.columns:
            df[c] = df[c].fillna(0).astype(np.int64)
    df.attrs = merged
    return validate_trace(df)


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def validate_trace(df: pd.DataFrame, num_ranks: int | None = None) -> pd.DataFrame:
    """Check ``df`` against the schema and return it (integer columns as int64).

    ``num_ranks`` defaults to ``df.attrs['num_ranks']``. Raises :class:`TraceError` naming the
    first offending column, row and value.
    """
    if not isinstance(df, pd.DataFrame):
        raise TraceError(f"a trace is a pandas DataFrame; got {type(df).__name__}")
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise TraceError(
            f"trace is missing column(s) {', '.join(map(repr, missing))}; "
            f"required: {', '.join(COLUMNS)}"
        )
    if num_ranks is None:
        num_ranks = df.attrs.get("num_ranks")
    if num_ranks is None:
        raise TraceRankCountMissing(
            "trace has no num_ranks (df.attrs['num_ranks']); pass num_ranks="
        )
    num_ranks = int(num_ranks)
    if num_ranks <= 0:
        raise TraceError(f"num_ranks must be > 0; got {num_ranks}")
    for c in (*INT_COLUMNS, *(o for o in OPTIONAL if o in df.columns)):
        s = df[c]
        if pd.api.types.is_bool_dtype(s) or not pd.api.types.is_integer_dtype(s):
            bad = _first_non_integer(s)
            raise TraceError(
                f"column {c!r} has dtype {s.dtype}; expected integers"
                + (f" (row {bad[0]}: {bad[1]!r})" if bad else "")
            )
        v = s.to_numpy(dtype=np.int64)
        if (v < 0).any():
            i = _first_bad(v < 0)
            raise TraceError(f"column {c!r} has negative value {v[i]} at row {i}; expected >= 0")
        if c in ("src_rank", "dst_rank") and (v >= num_ranks).any():
            i = _first_bad(v >= num_ranks)
            raise TraceError(
                f"column {c!r} has rank {v[i]} at row {i}, outside 0..{num_ranks - 1} "
                f"(num_ranks={num_ranks})"
            )
    s = df["start_s"]
    if pd.api.types.is_bool_dtype(s) or not pd.api.types.is_numeric_dtype(s):
        raise TraceError(f"column 'start_s' has dtype {s.dtype}; expected float seconds")
    t = s.to_numpy(dtype=np.float64)
    if not np.isfinite(t).all():
        i = _first_bad(~np.isfinite(t))
        raise TraceError(f"column 'start_s' has {t[i]} at row {i}; expected a finite number")
    if (t < 0).any():
        i = _first_bad(t < 0)
        raise TraceError(f"column 'start_s' has negative value {t[i]} at row {i}; expected >= 0")
    # pandas' own isin and comparisons: no Python object per row (a 10,240-GPU training step
    # has about 10^7 messages)
    for c, allowed in (("phase", PHASES), ("hop", HOPS)):
        bad = ~df[c].isin(allowed).to_numpy(dtype=bool)
        if bad.any():
            i = _first_bad(bad)
            raise TraceError(
                f"column {c!r} has {df[c].iloc[i]!r} at row {i}; expected one of "
                f"{', '.join(allowed)}"
            )
    # a rank's message to itself never leaves the GPU: only "local" describes it
    self_net = (df["src_rank"].to_numpy() == df["dst_rank"].to_numpy()) & (
        df["hop"] != "local"
    ).to_numpy(dtype=bool)
    if self_net.any():
        i = _first_bad(self_net)
        raise TraceError(
            f"row {i} sends from rank {df['src_rank'].iloc[i]} to itself with hop "
            f"{df['hop'].iloc[i]!r}; a rank's message to itself is hop 'local'"
        )
    if "final" in df.columns and (df["final"].to_numpy() > 1).any():
        i = _first_bad(df["final"].to_numpy() > 1)
        raise TraceError(
            f"column 'final' has {df['final'].iloc[i]} at row {i}; expected 0 (a forwarder at "
            "dst_rank waits for it) or 1 (delivered for good)"
        )
    if "stage" in df.columns:
        _check_stages(df)
    casts = {
        c: np.int64
        for c in (*INT_COLUMNS, *OPTIONAL)
        if c in df.columns and df[c].dtype != np.int64
    }
    if df["start_s"].dtype != np.float64:
        casts["start_s"] = np.float64
    if casts:
        attrs = dict(df.attrs)
        df = df.astype(casts)
        df.attrs = attrs
    df.attrs["num_ranks"] = num_ranks
    return df


def _check_stages(df: pd.DataFrame) -> None:
    """Stage values are 0/1 and every stage-1 sender receives a stage-0 row in its phase (and
    round, with a ``chunk`` column)."""
    stage = df["stage"].to_numpy(dtype=np.int64)
    if (stage > 1).any():
        i = _first_bad(stage > 1)
        raise TraceError(
            f"column 'stage' has {stage[i]} at row {i}; expected 0 (starts at the phase start) "
            "or 1 (waits for the stage-0 rows arriving at its src_rank)"
        )
    second = stage == 1
    if not second.any():
        return
    keys = ["step", "layer", "phase", *(["chunk"] if "chunk" in df.columns else [])]
    feeding = ~second  # stage-0 rows a forwarder at their dst_rank waits for
    if "final" in df.columns:
        feeding &= df["final"].to_numpy() == 0
    arrivals = pd.MultiIndex.from_arrays(
        [df[c].to_numpy()[feeding] for c in keys] + [df["dst_rank"].to_numpy()[feeding]]
    )
    senders = pd.MultiIndex.from_arrays(
        [df[c].to_numpy()[second] for c in keys] + [df["src_rank"].to_numpy()[second]]
    )
    fed = senders.isin(arrivals)
    if not fed.all():
        i = int(np.flatnonzero(second)[np.flatnonzero(~fed)[0]])
        row = df.iloc[i]
        raise TraceError(
            f"column 'stage' is 1 at row {i} (step {row['step']}, layer {row['layer']}, "
            f"{row['phase']}, src_rank {row['src_rank']}"
            + (f", chunk {row['chunk']}" if "chunk" in df.columns else "")
            + f") but no stage-0 row of that phase{' and chunk' if 'chunk' in df.columns else ''} "
            f"arrives at rank {row['src_rank']} (rows with final 1 do not count); a stage-1 "
            "row forwards what stage 0 delivered"
        )


def _first_non_integer(s: pd.Series) -> tuple[int, Any] | None:
    """(row, value) of the first value that is not an integer (NaN, text, fraction, bool)."""
    for i, v in enumerate(s.tolist()):  # error path only: runs once, after the check failed
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            if isinstance(v, float) and v.is_integer():
                continue
            return i, v
    return None


# ------------------------------------------------------------------------ attrs <-> JSON


def _to_json(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": obj.tolist(), "dtype": str(obj.dtype)}
    if isinstance(obj, dict):
        return {str(k): _to_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_to_json(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def _from_json(obj: Any) -> Any:
    if isinstance(obj, dict):
        if set(obj) == {"__ndarray__", "dtype"}:
            return np.asarray(obj["__ndarray__"], dtype=obj["dtype"])
        return {k: _from_json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_from_json(v) for v in obj]
    return obj


def write_trace(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a validated trace as ``.parquet`` or ``.csv`` (by suffix), attrs included."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    df = validate_trace(df)
    path = Path(path)
    meta = json.dumps(_to_json(df.attrs))
    if path.suffix == ".parquet":
        bare = df.copy(deep=False)
        bare.attrs = {}  # pyarrow would try (and fail) to JSON the NumPy arrays itself
        table = pa.Table.from_pandas(bare, preserve_index=False)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), _ATTRS_KEY: meta})
        pq.write_table(table, path)
    elif path.suffix == ".csv":
        with path.open("w", newline="") as f:
            f.write(_CSV_PREFIX + meta + "\n")
            df.to_csv(f, index=False)
    else:
        raise TraceError(f"trace file {str(path)!r}: expected a .parquet or .csv suffix")
    return path


def read_trace(path: str | Path, num_ranks: int | None = None) -> pd.DataFrame:
    """Read and validate a trace written by :func:`write_trace` (or by hand, with num_ranks=)."""
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.exists():
        raise TraceError(f"trace file {str(path)!r} does not exist")
    attrs: dict[str, Any] = {}
    if path.suffix == ".parquet":
        table = pq.read_table(path)
        raw = (table.schema.metadata or {}).get(_ATTRS_KEY)
        if raw:
            attrs = _from_json(json.loads(raw))
        df = table.to_pandas()
    elif path.suffix == ".csv":
        with path.open() as f:
            first = f.readline()
        skip = 0
        if first.startswith(_CSV_PREFIX):
            attrs = _from_json(json.loads(first[len(_CSV_PREFIX) :]))
            skip = 1
        df = pd.read_csv(path, skiprows=skip)
        if df.empty:
            df = df.astype({c: np.int64 for c in (*INT_COLUMNS, *OPTIONAL) if c in df.columns})
            df = df.astype({"start_s": np.float64}) if "start_s" in df.columns else df
    else:
        raise TraceError(f"trace file {str(path)!r}: expected a .parquet or .csv suffix")
    df.attrs = attrs
    try:
        return validate_trace(df, num_ranks)
    except TraceError as e:
        raise type(e)(f"{path}: {e}") from None  # the same kind, naming the file


def compute_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per (step, layer, rank) expert compute: token_copies, flops, seconds (empty if none)."""
    comp = df.attrs.get("compute")
    cols = ["step", "layer", "rank", "token_copies", "flops", "seconds"]
    if not comp:
        return pd.DataFrame(
            {
                c: pd.Series(dtype=np.float64 if c in ("flops", "seconds") else np.int64)
                for c in cols
            }
        )
    sec = np.asarray(comp["seconds"], dtype=np.float64)
    ranks = sec.shape[2]
    st, ly, rk = np.meshgrid(
        np.asarray(comp["steps"], np.int64),
        np.asarray(comp["layers"], np.int64),
        np.arange(ranks),
        indexing="ij",
    )
    return pd.DataFrame(
        {
            "step": st.ravel(),
            "layer": ly.ravel(),
            "rank": rk.ravel(),
            "token_copies": np.asarray(comp["token_copies"], np.int64).ravel(),
            "flops": np.asarray(comp["flops"], np.float64).ravel(),
            "seconds": sec.ravel(),
        }
    )
