"""Parameter checks shared by the built-in algorithms (bad values raise ValueError naming them)."""

from __future__ import annotations

import math

__all__ = ["in_range", "positive"]


def positive(algo: str, name: str, value: float | None, allow_none: bool = False) -> None:
    """``value`` must be a finite number > 0 (or None when ``allow_none``)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{algo}: parameter {name}={value!r} must be a number > 0")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{algo}: parameter {name}={value!r} must be a finite number > 0")


def in_range(algo: str, name: str, value: float, lo: float, hi: float) -> None:
    """``value`` must lie in the closed interval [lo, hi]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise ValueError(f"{algo}: parameter {name}={value!r} must be a number in [{lo}, {hi}]")
