"""Markdown tables of result frames, for READMEs and design-review notes (benchmarks print them
with ``--markdown``). Pandas' own ``to_markdown`` needs the optional ``tabulate`` package."""

from __future__ import annotations

import math
from numbers import Integral, Real

import pandas as pd
from podsim.scenarios.input.docs import md_cell

__all__ = ["frame_to_markdown"]


def _cell(value: object, digits: int) -> str:
    if isinstance(value, bool) or value is None:
        text = "-" if value is None else str(value)
    elif isinstance(value, Integral):
        text = f"{int(value):,}"
    elif isinstance(value, Real):
        x = float(value)
        text = "-" if math.isnan(x) else f"{x:,.{digits}f}"
    else:
        text = str(value)
    return md_cell(text)


def frame_to_markdown(df: pd.DataFrame, digits: int = 1) -> str:
    """``df`` as a GitHub-flavoured Markdown table: numbers right-aligned, floats with
    ``digits`` decimals and thousands separators, NaN and None as ``-``, ``|`` escaped."""
    cols = [str(c) for c in df.columns]
    numeric = [pd.api.types.is_numeric_dtype(df[c]) for c in df.columns]
    lines = [
        "| " + " | ".join(_cell(c, digits) for c in cols) + " |",
        "| " + " | ".join("---:" if n else "---" for n in numeric) + " |",
    ]
    lines.extend(
        "| " + " | ".join(_cell(v, digits) for v in row) + " |"
        for row in df.itertuples(index=False)
    )
    return "\n".join(lines)
