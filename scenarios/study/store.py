"""The study results table: one Parquet file, keyed by a stable hash of each resolved scenario.

Layout of a study output folder::

    results.parquet       every finished point, one row each (the table)
    parts/<key>.parquet   points finished since the last compaction, one file per point

A finished point is written at once as its own part file (written to a temporary name, then
renamed: atomic on POSIX), so an interrupted sweep never loses a finished point. Compaction
merges parts into ``results.parquet`` (again write-then-rename) and only then deletes them; a
crash between the two leaves duplicates that the next compaction drops. Rows are ordered by
(``study``, ``point``, ``key``) and columns canonically, so a sweep that was interrupted and
resumed produces the same table as one that was not.

The key is the first 16 hex digits of SHA-256 over the canonical JSON of the resolved scenario
(sorted keys, no whitespace) and the podsim version: two override sets that resolve to the same
scenario share a key and run once. Code changes within one version are not seen by the key:
use a fresh ``--out`` folder after changing the simulator.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["META_COLUMNS", "PARAM_PREFIX", "ResultStore", "point_key"]

#: Columns every row has, first in the table.
META_COLUMNS = ("key", "study", "point")
#: Swept parameters appear as columns ``param:<key path>``.
PARAM_PREFIX = "param:"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("podsim")
    except Exception:  # not installed (a source checkout): no version salt
        return "source"


_VERSION = _version()


def point_key(resolved: Any) -> str:
    """Stable 16-hex-digit key of a resolved scenario (any JSON-able structure), salted with
    the podsim version so that a new release does not reuse an old release's rows."""
    doc = {"podsim": _VERSION, "scenario": resolved}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _cell(v: Any) -> Any:
    """A value Parquet stores in one cell: scalars as they are, containers as JSON text."""
    if isinstance(v, dict | list | tuple):
        return json.dumps(v, sort_keys=True, default=str)
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if hasattr(v, "item"):  # NumPy scalar
        return v.item()
    return str(v)


def _canonical(df: pd.DataFrame) -> pd.DataFrame:
    """Sort rows and columns canonically; make mixed-type columns text so Parquet takes them."""
    if df.empty:
        return df
    for col in df.columns:
        if df[col].dtype == object:
            kinds = {type(v) for v in df[col] if v is not None and not _isnan(v)}
            if len(kinds) > 1 and not kinds <= {int, float}:
                df[col] = df[col].map(lambda v: None if v is None or _isnan(v) else str(v))
    meta = [c for c in META_COLUMNS if c in df.columns]
    params = sorted(c for c in df.columns if c.startswith(PARAM_PREFIX))
    rest = sorted(c for c in df.columns if c not in meta and c not in params)
    df = df[meta + params + rest]
    return df.sort_values(["study", "point", "key"], kind="mergesort").reset_index(drop=True)


def _isnan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _atomic_parquet(df: pd.DataFrame, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    df.to_parquet(tmp, index=False)
    os.replace(tmp, path)


class ResultStore:
    """The results table of one output folder (see the module docstring)."""

    def __init__(self, out_dir: str | Path) -> None:
        self.dir = Path(out_dir)
        self.parts = self.dir / "parts"
        self.table = self.dir / "results.parquet"

    def _part_files(self) -> list[Path]:
        return sorted(self.parts.glob("*.parquet")) if self.parts.is_dir() else []

    def done_keys(self) -> set[str]:
        """Keys of every finished point (compacted table and pending parts)."""
        keys = {p.stem for p in self._part_files()}
        if self.table.is_file():
            keys |= set(pd.read_parquet(self.table, columns=["key"])["key"])
        return keys

    def write_point(self, row: dict[str, Any]) -> Path:
        """Write one finished point's row atomically as ``parts/<key>.parquet``."""
        if not row.get("key"):
            raise ValueError("a result row needs its 'key'")
        self.parts.mkdir(parents=True, exist_ok=True)
        df = pd.DataFrame([{k: _cell(v) for k, v in row.items()}])
        path = self.parts / f"{row['key']}.parquet"
        _atomic_parquet(df, path)
        return path

    def compact(self) -> pd.DataFrame:
        """Merge the part files into ``results.parquet`` and return the whole table."""
        parts = self._part_files()
        frames = []
        if self.table.is_file():
            frames.append(pd.read_parquet(self.table))
        frames += [pd.read_parquet(p) for p in parts]
        frames = [f for f in frames if not f.empty]
        if not frames:
            return pd.DataFrame(columns=list(META_COLUMNS))
        with _quiet_concat():
            df = pd.concat(frames, ignore_index=True, sort=False)
        df = df.drop_duplicates(subset="key", keep="first")
        df = _canonical(df)
        self.dir.mkdir(parents=True, exist_ok=True)
        _atomic_parquet(df, self.table)
        for p in parts:
            p.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.parts.rmdir()
        return df

    def read(self) -> pd.DataFrame:
        """The table as it stands (compacted rows plus pending parts), without writing."""
        frames = [pd.read_parquet(self.table)] if self.table.is_file() else []
        frames += [pd.read_parquet(p) for p in self._part_files()]
        frames = [f for f in frames if not f.empty]
        if not frames:
            return pd.DataFrame(columns=list(META_COLUMNS))
        with _quiet_concat():
            df = pd.concat(frames, ignore_index=True, sort=False)
        return _canonical(df.drop_duplicates(subset="key", keep="first"))


@contextlib.contextmanager
def _quiet_concat():
    # pandas warns when concatenating frames with all-NA columns; rows are kept as they are.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield
