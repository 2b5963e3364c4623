"""Import an all-to-all split matrix, the form in which training frameworks log all-to-all sizes.

A split matrix is [ranks, ranks]: row = source rank, column = destination rank, each entry the
amount sent (e.g. Megatron's ``input_splits`` of every rank stacked, or NCCL all-to-allv sizes).
Files: NumPy ``.npy`` or CSV (comma-separated numbers, one row per source rank; lines starting
with ``#`` are comments). ``unit`` says what the numbers count: ``bytes``, or ``tokens`` (then
``bytes_per_token`` converts; the trace's tokens column keeps the counts). Zero entries produce
no message; the diagonal becomes ``local`` rows.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from podsim.workloads.trace import make_trace

__all__ = ["load_splits", "splits_trace"]

UNITS = ("bytes", "tokens")


def load_splits(source: str | Path | np.ndarray) -> np.ndarray:
    """The split matrix from a .npy/.csv path or an array, checked: square, finite, whole, >= 0."""
    name = "split matrix"
    if isinstance(source, (str, Path)):
        path = Path(source)
        name = f"split matrix {str(path)!r}"
        if not path.exists():
            raise ValueError(f"{name} does not exist")
        if path.suffix == ".npy":
            m = np.load(path, allow_pickle=False)
        elif path.suffix == ".csv":
            try:
                m = np.loadtxt(path, delimiter=",", comments="#", ndmin=2, dtype=np.float64)
            except ValueError as e:
                raise ValueError(f"{name}: not a numeric CSV matrix ({e})") from None
        else:
            raise ValueError(f"{name}: expected a .npy or .csv file")
    else:
        m = np.asarray(source)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] == 0:
        raise ValueError(f"{name} must be square [ranks, ranks]; got shape {m.shape}")
    if not np.issubdtype(m.dtype, np.number) or np.issubdtype(m.dtype, np.complexfloating):
        raise ValueError(f"{name} must hold real numbers; got dtype {m.dtype}")
    f = m.astype(np.float64)
    for bad, what in (
        (~np.isfinite(f), "is not finite"),
        (f < 0, "is negative"),
        (f != np.round(f), "is not a whole number"),
    ):
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise ValueError(f"{name}: entry [src {i}, dst {j}] = {m[i, j].item()!r} {what}")
    return f.astype(np.int64)


def splits_trace(
    source: str | Path | np.ndarray,
    *,
    unit: str = "bytes",
    bytes_per_token: int | None = None,
    gpus_per_node: int | None = None,
    phase: str = "dispatch",
    step: int = 0,
    layer: int = 0,
) -> pd.DataFrame:
    """A one-phase trace from a split matrix (module docstring)."""
    m = load_splits(source)
    if unit not in UNITS:
        raise ValueError(f"unit {unit!r}: expected one of {', '.join(UNITS)}")
    if (unit == "tokens") != (bytes_per_token is not None):
        raise ValueError("bytes_per_token is required with unit='tokens' and only then")
    src, dst = np.nonzero(m)
    vals = m[src, dst]
    if unit == "tokens":
        if bytes_per_token <= 0:
            raise ValueError(f"bytes_per_token must be > 0; got {bytes_per_token}")
        nbytes, tokens = vals * bytes_per_token, vals
    else:
        nbytes, tokens = vals, 0
    return make_trace(
        src_rank=src,
        dst_rank=dst,
        bytes=nbytes,
        tokens=tokens,
        phase=phase,
        step=step,
        layer=layer,
        num_ranks=m.shape[0],
        gpus_per_node=gpus_per_node,
        workload="splits",
        unit=unit,
    )
