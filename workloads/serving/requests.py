"""Inference requests: when each arrives, how long its prompt is, how many tokens it generates.

Two sources:

- :func:`poisson_requests`: a Poisson process at ``rate`` requests per second (exponential
  inter-arrival times, the first request at the first draw, not at 0) with each request's class
  drawn from a weighted ``mix`` of length specs; a spec's length is a fixed count or a
  ``(low, high)`` range drawn log-uniformly (integers). All draws come from one
  ``numpy.random.Generator`` seeded by the scenario seed, in a fixed order (arrival gaps, then
  classes, then prompt lengths, then output lengths), so the same seed gives the same requests.
- :func:`read_requests_csv`: a CSV file with a header and the columns ``arrival_s``,
  ``prompt_tokens``, ``output_tokens`` (any order, other columns ignored); a bad cell raises
  :class:`RequestError` naming the file, the row (1-based, the header being row 1) and the column.

Every request must fit the context: ``prompt_tokens + output_tokens <= max_context``.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "CSV_COLUMNS",
    "LengthSpec",
    "RequestClass",
    "RequestError",
    "Requests",
    "poisson_requests",
    "read_requests_csv",
]

CSV_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")

LengthSpec = int | tuple[int, int]


class RequestError(ValueError):
    """A request that cannot be served, or a bad cell of a requests file. ``where`` names the
    file and row (or the mix entry), ``field`` the column or key."""

    def __init__(self, message: str, where: str = "", field: str = "") -> None:
        super().__init__(message)
        self.where = where
        self.field = field


@dataclass(frozen=True)
class RequestClass:
    """One entry of a request mix: relative ``weight`` and the two length specs."""

    prompt_tokens: LengthSpec
    output_tokens: LengthSpec
    weight: float = 1.0


@dataclass(frozen=True)
class Requests:
    """Requests as columns, sorted by arrival (ties keep their input order)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray

    def __len__(self) -> int:
        return int(self.arrival_s.size)

    @classmethod
    def of(
        cls, arrival_s: Sequence[float], prompt: Sequence[int], output: Sequence[int]
    ) -> Requests:
        a = np.asarray(arrival_s, dtype=float)
        order = np.argsort(a, kind="stable")
        return cls(
            a[order],
            np.asarray(prompt, dtype=np.int64)[order],
            np.asarray(output, dtype=np.int64)[order],
        )

    def check_context(self, max_context: int, where: str = "") -> None:
        """Refuse a request longer than the context (RequestError naming it)."""
        total = self.prompt_tokens + self.output_tokens
        bad = np.flatnonzero(total > max_context)
        if bad.size:
            i = int(bad[0])
            raise RequestError(
                f"request {i} needs {int(self.prompt_tokens[i])} prompt + "
                f"{int(self.output_tokens[i])} output tokens = {int(total[i])}, more than the "
                f"context of {max_context} tokens ({bad.size} request(s) too long)",
                where=where,
                field="prompt_tokens",
            )


def _draw_lengths(rng: np.random.Generator, specs: list[LengthSpec], cls: np.ndarray) -> np.ndarray:
    """One length per request from its class's spec (fixed, or log-uniform in a range)."""
    lo = np.array([s if isinstance(s, int) else s[0] for s in specs], dtype=float)[cls]
    hi = np.array([s if isinstance(s, int) else s[1] for s in specs], dtype=float)[cls]
    u = rng.random(cls.size)
    x = np.exp(np.log(lo) + u * (np.log(hi) - np.log(lo)))
    return np.clip(np.rint(x), lo, hi).astype(np.int64)


def _check_spec(spec: LengthSpec, what: str, i: int) -> None:
    lo, hi = (spec, spec) if isinstance(spec, int) else spec
    if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi):
        raise RequestError(
            f"{what} must be a token count >= 1 or [low, high] with 1 <= low <= high; got {spec}",
            where=f"mix[{i}]",
            field=what,
        )


def poisson_requests(
    n: int, rate: float, mix: Sequence[RequestClass], rng: np.random.Generator
) -> Requests:
    """``n`` requests arriving as a Poisson process at ``rate`` per second (module doc)."""
    if n <= 0:
        raise RequestError(f"the number of requests must be > 0; got {n}", field="requests")
    if not (rate > 0 and math.isfinite(rate)):
        raise RequestError(f"the arrival rate must be > 0 per second; got {rate}", field="rate")
    if not mix:
        raise RequestError("the request mix is empty", field="mix")
    for i, c in enumerate(mix):
        _check_spec(c.prompt_tokens, "prompt_tokens", i)
        _check_spec(c.output_tokens, "output_tokens", i)
        if not (c.weight > 0 and math.isfinite(c.weight)):
            raise RequestError(f"weight must be > 0; got {c.weight}", f"mix[{i}]", "weight")
    arrival = np.cumsum(rng.exponential(1.0 / rate, n))
    w = np.array([c.weight for c in mix], dtype=float)
    cls = rng.choice(len(mix), size=n, p=w / w.sum())
    prompt = _draw_lengths(rng, [c.prompt_tokens for c in mix], cls)
    output = _draw_lengths(rng, [c.output_tokens for c in mix], cls)
    return Requests.of(arrival, prompt, output)


def read_requests_csv(path: str | Path, max_context: int | None = None) -> Requests:
    """Requests from a CSV file (module docstring); RequestError names file, row and column
    (also for a request longer than ``max_context`` tokens)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RequestError(f"cannot read requests file {p}: {exc}", where=str(p)) from None
    rows = list(csv.reader(text.splitlines()))
    if not rows:
        raise RequestError(f"requests file {p} is empty", where=str(p))
    header = [h.strip() for h in rows[0]]
    missing = [c for c in CSV_COLUMNS if c not in header]
    if missing:
        raise RequestError(
            f"requests file {p} has no column {', '.join(missing)} (row 1 is the header; "
            f"needed: {', '.join(CSV_COLUMNS)}; found: {', '.join(header) or 'nothing'})",
            where=f"{p}, row 1",
            field=missing[0],
        )
    col = {c: header.index(c) for c in CSV_COLUMNS}
    arrival: list[float] = []
    prompt: list[int] = []
    output: list[int] = []
    for k, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue  # blank line
        vals: dict[str, float] = {}
        for c, j in col.items():
            cell = row[j].strip() if j < len(row) else ""
            where = f"{p}, row {k}"
            try:
                v = float(cell)
            except ValueError:
                raise RequestError(
                    f"requests file {p}, row {k}, column {c}: {cell!r} is not a number",
                    where=where,
                    field=c,
                ) from None
            ok = math.isfinite(v) and (v >= 0 if c == "arrival_s" else (v >= 1 and v == int(v)))
            if not ok:
                need = "a time >= 0 in seconds" if c == "arrival_s" else "a whole number >= 1"
                raise RequestError(
                    f"requests file {p}, row {k}, column {c}: {cell!r} must be {need}",
                    where=where,
                    field=c,
                )
            vals[c] = v
        if max_context is not None and vals["prompt_tokens"] + vals["output_tokens"] > max_context:
            raise RequestError(
                f"requests file {p}, row {k}, column prompt_tokens: {int(vals['prompt_tokens'])} "
                f"prompt + {int(vals['output_tokens'])} output tokens exceed the model's context "
                f"of {max_context} tokens",
                where=f"{p}, row {k}",
                field="prompt_tokens",
            )
        arrival.append(vals["arrival_s"])
        prompt.append(int(vals["prompt_tokens"]))
        output.append(int(vals["output_tokens"]))
    if not arrival:
        raise RequestError(f"requests file {p} has a header but no request", where=str(p))
    return Requests.of(arrival, prompt, output)
