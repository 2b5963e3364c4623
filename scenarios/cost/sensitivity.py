"""Which unsourced prices decide a study's answer, and at what price the answer flips.

A study's answer is read from its results table (one row per point):

- ``best cost per performance``: the point with the lowest cost per unit of performance,
  ``cost x metric`` when a lower metric is better (a time: cost x time = cost per unit of
  throughput) or ``cost / metric`` when a higher one is (``study.maximize``);
- ``saving >= T at <scope>`` (studies with ``savings_threshold: T``, or any two-point study
  asked it): whether the second point's capex saving over the first (study order:
  :func:`compares_first_two`) reaches ``T`` at each scope of
  :data:`podsim.scenarios.cost.compare.SCOPES` ("does the on-card switch cut system cost by
  30 %?").

Capex is linear in every catalog price: the BOM counts ``units`` of each item (count times the
line's price scale), so a price ``p`` instead of the catalog's ``p0`` changes a point's capex by
``units x (p - p0)`` in the categories the item sits in (columns ``units.<category>.<item>``,
``price.<item>`` and ``conf.<item>`` of a study row, :meth:`CostBreakdown.items_row`). Each
answer above is then a comparison of linear (or linear-fractional) functions of ``p``, and the
price at which it flips is solved in closed form. The performance metric does not depend on a
price. Assumption: the BOM keeps its choice of parts (which switch box, which optic) at the
flip price; a price far enough from the catalog's to make another part the cheapest is not
followed (re-price with ``cost.prices`` to check: tests/scenarios/test_cost_sensitivity.py
does).

Only cost metrics that are linear in capex are supported: ``capex_usd``, ``tco_usd`` (capex +
energy, energy does not depend on prices) and ``capex.<category>``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from podsim.scenarios.cost.bom import CATEGORIES
from podsim.scenarios.cost.compare import SCOPES

__all__ = [
    "DECIDING_LEVELS",
    "Answer",
    "answer_of",
    "best_per_performance",
    "compares_first_two",
    "price_sensitivity",
    "sensitivity_items",
    "study_answers",
]

#: Price confidence levels whose prices are tested: no source, or a weak one.
DECIDING_LEVELS = ("none", "low")

BEST = "best cost per performance"


@dataclass(frozen=True)
class Answer:
    """One question a study answers and its answer at catalog prices."""

    question: str
    answer: str


def compares_first_two(points: int, threshold: float | None) -> bool:
    """Whether a study's results compare the capex of its first two points (the savings by
    scope and the ``saving >= T`` questions): a two-point study always does (a comparison of
    two designs), a larger one when it sets ``savings_threshold`` (its first point is the
    baseline design and its second the claimed one; the other points add performance cases)."""
    return points == 2 or (threshold is not None and points > 2)


def _cost_categories(cost_metric: str) -> tuple[str, ...] | None:
    """The BOM categories a cost metric adds up, or None when it is not linear in capex."""
    if cost_metric in ("capex_usd", "tco_usd"):
        return CATEGORIES
    if cost_metric.startswith("capex.") and cost_metric[len("capex.") :] in CATEGORIES:
        return (cost_metric[len("capex.") :],)
    return None


def _units(row: Mapping[str, Any], item: str, categories: Iterable[str]) -> float:
    total = 0.0
    for c in categories:
        v = row.get(f"units.{c}.{item}")
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            total += float(v)
    return total


def _labels(df: pd.DataFrame) -> list[str]:
    from podsim.scenarios.study.plots import variant_labels

    return variant_labels(df)


def best_per_performance(
    costs: Sequence[float], metrics: Sequence[float], maximize: bool
) -> int | None:
    """Index of the point with the lowest cost per unit of performance (see module
    docstring), or None when no point has both figures."""
    best, value = None, math.inf
    for i, (c, m) in enumerate(zip(costs, metrics, strict=True)):
        if not (math.isfinite(c) and math.isfinite(m)) or m <= 0:
            continue
        v = c / m if maximize else c * m
        if v < value:
            best, value = i, v
    return best


def _scope_capex(row: Mapping[str, Any], cats: Iterable[str]) -> float:
    return math.fsum(float(row.get(f"capex.{c}", 0.0) or 0.0) for c in cats)


def answer_of(question: str, rows: Sequence[Mapping[str, Any]], labels: Sequence[str],
              metric: str, cost_metric: str, maximize: bool,
              threshold: float | None) -> str:  # fmt: skip
    """The answer to ``question`` from ``rows`` (dicts of study figures, one per point):
    the winning point's label, or ``yes``/``no`` for a saving threshold."""
    if question == BEST:
        i = best_per_performance(
            [float(r.get(cost_metric, math.nan)) for r in rows],
            [float(r.get(metric, math.nan)) for r in rows],
            maximize,
        )
        return "-" if i is None else labels[i]
    scope = question.split(" at ", 1)[1]
    a, b = (_scope_capex(r, SCOPES[scope]) for r in rows[:2])
    return "yes" if a > 0 and (a - b) / a >= float(threshold or 0.0) else "no"


def study_answers(
    df: pd.DataFrame, metric: str, cost_metric: str, maximize: bool, threshold: float | None
) -> list[Answer]:
    """The study's questions (see module docstring) and their answers at catalog prices."""
    rows = df.to_dict("records")
    labels = _labels(df)
    questions = []
    if metric in df.columns and cost_metric in df.columns:
        questions.append(BEST)
    if threshold is not None and compares_first_two(len(df), threshold):
        questions += [f"saving >= {threshold:.0%} at {s}" for s in SCOPES]
    return [
        Answer(q, answer_of(q, rows, labels, metric, cost_metric, maximize, threshold))
        for q in questions
    ]


def sensitivity_items(df: pd.DataFrame, levels: Sequence[str] = DECIDING_LEVELS) -> list[str]:
    """Items priced in any point whose price confidence is one of ``levels``, sorted."""
    out = set()
    for col in df.columns:
        if col.startswith("conf.") and df[col].isin(levels).any():
            out.add(col[len("conf.") :])
    return sorted(out)


def _shifted(row: Mapping[str, Any], item: str, delta: float) -> dict[str, Any]:
    """A row with ``item``'s price moved by ``delta`` (capex columns recomputed linearly)."""
    out = dict(row)
    total = 0.0
    for c in CATEGORIES:
        u = _units(row, item, (c,))
        if u:
            out[f"capex.{c}"] = float(row.get(f"capex.{c}", 0.0) or 0.0) + u * delta
            total += u * delta
    for key in ("capex_usd", "tco_usd"):
        if key in out and out[key] is not None:
            out[key] = float(out[key]) + total
    return out


def _crossings(question: str, rows: list[dict[str, Any]], item: str, metric: str,
               cost_metric: str, maximize: bool,
               threshold: float | None) -> list[float]:  # fmt: skip
    """Price changes ``d`` at which the answer to ``question`` may change (closed form)."""
    if question == BEST:
        cats = _cost_categories(cost_metric)
        if cats is None:
            return []
        coef = []
        for r in rows:
            m = float(r.get(metric, math.nan))
            c = float(r.get(cost_metric, math.nan))
            if not (math.isfinite(m) and math.isfinite(c)) or m <= 0:
                coef.append(None)
                continue
            a = 1.0 / m if maximize else m
            coef.append((a * c, a * _units(r, item, cats)))
        out = []
        for i, ci in enumerate(coef):
            for cj in coef[i + 1 :]:
                if ci is None or cj is None or ci[1] == cj[1]:
                    continue
                out.append((cj[0] - ci[0]) / (ci[1] - cj[1]))
        return out
    scope = question.split(" at ", 1)[1]
    cats = SCOPES[scope]
    t = float(threshold or 0.0)
    base, var = rows[0], rows[1]
    a, b = _scope_capex(base, cats), _scope_capex(var, cats)
    ua, ub = _units(base, item, cats), _units(var, item, cats)
    den = (ua - ub) - t * ua
    return [] if den == 0 else [(t * a - (a - b)) / den]


def price_sensitivity(
    df: pd.DataFrame,
    metric: str,
    cost_metric: str,
    maximize: bool,
    threshold: float | None = None,
    levels: Sequence[str] = DECIDING_LEVELS,
) -> pd.DataFrame:
    """Per question and per low-confidence price: the catalog price, the nearest price below
    and above it at which the answer flips (NaN: it holds at every price on that side, down to
    $0), and the answer past each flip.

    Columns: ``question``, ``answer``, ``item``, ``confidence``, ``price_usd``,
    ``flip_below_usd``, ``answer_below``, ``flip_above_usd``, ``answer_above``, ``decides``
    (a flip exists within a factor of 2 of the catalog price). Rows only for items a question
    depends on; sorted with the deciding prices first."""
    cols = ["question", "answer", "item", "confidence", "price_usd", "flip_below_usd",
            "answer_below", "flip_above_usd", "answer_above", "decides"]  # fmt: skip
    if df.empty:
        return pd.DataFrame(columns=cols)
    rows = df.to_dict("records")
    labels = _labels(df)
    out = []
    for ans in study_answers(df, metric, cost_metric, maximize, threshold):
        for item in sensitivity_items(df, levels):
            prices = {float(r[f"price.{item}"]) for r in rows if _has(r, f"price.{item}")}
            if len(prices) != 1:
                continue  # the points price it differently (a swept price): not one price
            p0 = prices.pop()
            conf = next(str(r[f"conf.{item}"]) for r in rows if _has(r, f"conf.{item}"))
            ds = _crossings(ans.question, rows, item, metric, cost_metric, maximize, threshold)
            below = [d for d in ds if d < 0 and p0 + d >= 0]
            above = [d for d in ds if d > 0]
            if not ds:
                continue  # the answer does not depend on this price
            rec: dict[str, Any] = {"question": ans.question, "answer": ans.answer,
                                   "item": item, "confidence": conf, "price_usd": p0}  # fmt: skip
            for side, cands in (("below", below), ("above", above)):
                rec[f"flip_{side}_usd"] = math.nan
                rec[f"answer_{side}"] = ""
                for d in sorted(cands, key=abs):
                    # a crossing flips the answer only if the winner really changes there
                    step = abs(d) * 1e-6 + 1e-6
                    past = [_shifted(r, item, d + math.copysign(step, d)) for r in rows]
                    new = answer_of(ans.question, past, labels, metric, cost_metric,
                                    maximize, threshold)  # fmt: skip
                    if new != ans.answer:
                        rec[f"flip_{side}_usd"] = p0 + d
                        rec[f"answer_{side}"] = new
                        break
            lo, hi = rec["flip_below_usd"], rec["flip_above_usd"]
            rec["decides"] = bool(
                (math.isfinite(lo) and lo >= p0 / 2) or (math.isfinite(hi) and hi <= 2 * p0)
            )
            if math.isfinite(lo) or math.isfinite(hi):
                out.append(rec)
    res = pd.DataFrame(out, columns=cols)
    if len(res):
        res["_gap"] = [
            min(abs(r.price_usd - x) / max(r.price_usd, 1e-9)
                for x in (r.flip_below_usd, r.flip_above_usd) if math.isfinite(x))
            for r in res.itertuples()
        ]  # fmt: skip
        res = res.sort_values(["question", "_gap"], kind="stable").drop(columns="_gap")
    return res.reset_index(drop=True)


def _has(row: Mapping[str, Any], key: str) -> bool:
    v = row.get(key)
    return v is not None and not (isinstance(v, float) and math.isnan(v))
