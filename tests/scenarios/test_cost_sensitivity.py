"""The price sensitivity of a study's answer (issue 16 item 4): for every low-confidence price
that an answer depends on, the price at which the answer flips; substituting that price minus
and plus a small epsilon, re-pricing both points from scratch (full BOM, ``cost.prices``),
must give the original answer on one side and the new one on the other."""

from __future__ import annotations

import math

import pytest
from podsim.scenarios.cost.scenario import cost_of_scenario
from podsim.scenarios.cost.sensitivity import (
    BEST,
    answer_of,
    price_sensitivity,
    study_answers,
)
from podsim.scenarios.study.plots import variant_labels
from podsim.scenarios.study.spec import load_study
from podsim.scenarios.study.sweep import resolve_points, run_study

THRESHOLD = 0.30


@pytest.fixture(scope="module")
def study_run(tmp_path_factory):
    spec = load_study(
        {
            "name": "sens",
            "base": "quickstart",
            "set": {"workload.moe.layers": 1, "outputs.plots": False},
            "list": [{"cluster.layout": "external-switch"}, {"cluster.layout": "on-card-switch"}],
            "metric": "layer_time_s",
            "cost_metric": "capex_usd",
            "savings_threshold": THRESHOLD,
        }
    )
    out = tmp_path_factory.mktemp("sens")
    report = run_study(spec, out, workers=0, progress=False)
    assert not report.failures
    return spec, report.table, resolve_points(spec), out


def _repriced(spec, table, points, item: str, price: float) -> list[dict]:
    rows = []
    for (_, row), p in zip(table.iterrows(), points, strict=True):
        cost = cost_of_scenario(p.resolved, cost={"prices": {item: {"price_usd": price}}})
        fresh = dict(row)
        fresh.update(cost.summary())
        rows.append(fresh)
    return rows


def test_study_rows_carry_units_prices_and_confidence(study_run) -> None:
    _spec, table, points, _out = study_run
    cost = cost_of_scenario(points[0].resolved)
    row = table.iloc[0]
    for item, cats in cost.item_units().items():
        assert row[f"price.{item}"] == cost.item_prices()[item]
        assert row[f"conf.{item}"] == cost.item_confidence()[item]
        for c, u in cats.items():
            assert row[f"units.{c}.{item}"] == pytest.approx(u)
    # capex is units x price, summed over the items (the linear model the flips rest on)
    total = sum(
        row[f"units.{c}.{it}"] * row[f"price.{it}"]
        for it, cats in cost.item_units().items()
        for c in cats
    )
    assert total == pytest.approx(row["capex_usd"])


def test_flip_prices_flip_the_answer_when_substituted(study_run) -> None:
    spec, table, points, _out = study_run
    sens = price_sensitivity(table, spec.metric, spec.cost_metric, spec.maximize, THRESHOLD)
    assert len(sens), "some unsourced price decides an answer"
    # the two prices with no source that the 30 % question rests on are in the table
    node_io = sens[sens.question.str.endswith("node I/O (NICs + PCIe switching)")]
    assert {"pcie-switch-board", "nic-panmai-920"} <= set(node_io.item)
    assert set(sens.confidence) <= {"none", "low"}
    labels = variant_labels(table)
    checked = 0
    for r in sens.itertuples():
        for flip, after in ((r.flip_below_usd, r.answer_below), (r.flip_above_usd, r.answer_above)):
            if not math.isfinite(flip):
                continue
            eps = 1e-4 * r.price_usd + 0.01
            near, far = (flip + eps, flip - eps) if flip < r.price_usd else (flip - eps, flip + eps)
            got = [
                answer_of(r.question, _repriced(spec, table, points, r.item, p), labels,
                          spec.metric, spec.cost_metric, spec.maximize, THRESHOLD)
                for p in (near, far)
            ]  # fmt: skip
            assert got == [r.answer, after], (r.question, r.item, flip)
            checked += 1
    assert checked >= 2


def test_answers_at_catalog_prices(study_run) -> None:
    spec, table, _points, _out = study_run
    answers = {a.question: a.answer for a in study_answers(
        table, spec.metric, spec.cost_metric, spec.maximize, THRESHOLD)}  # fmt: skip
    assert BEST in answers and answers[BEST] in variant_labels(table)
    a, b = (
        sum(table.iloc[i][[c for c in table.columns if c.startswith("capex.")]]) for i in (0, 1)
    )
    saving = (a - b) / a
    assert answers["saving >= 30% at cluster (all capex)"] == ("yes" if saving >= 0.30 else "no")


def test_study_report_and_sweep_show_the_deciding_prices(study_run, tmp_path) -> None:
    from podsim.scenarios.cost.tables import usd
    from podsim.scenarios.report.html import render_report

    spec, table, _points, out = study_run
    html = render_report(out)
    sens = price_sensitivity(table, spec.metric, spec.cost_metric, spec.maximize, THRESHOLD)
    part = html[html.index("Answers and the prices that decide them") :]
    assert "Capex saving by scope" in html
    for r in sens.itertuples():
        assert f"{r.item} ({'NONE' if r.confidence == 'none' else r.confidence})" in part
        for flip in (r.flip_below_usd, r.flip_above_usd):
            if math.isfinite(flip):
                assert usd(flip) in part


def test_a_third_point_keeps_the_saving_answers_of_the_first_two(study_run) -> None:
    """With savings_threshold, a study of more points asks the saving questions of its first
    two (baseline, claimed design); a third point (here a dearer copy of the first) changes
    neither those answers nor their flip prices."""
    import pandas as pd

    spec, table, _points, _out = study_run
    third = table.iloc[[0]].copy()
    for c in [c for c in table.columns if c.startswith("capex.")] + ["capex_usd"]:
        third[c] = third[c] * 2
    big = pd.concat([table, third], ignore_index=True)
    args = (spec.metric, spec.cost_metric, spec.maximize, THRESHOLD)

    def savings(df: pd.DataFrame) -> list[tuple[str, str]]:
        return [(a.question, a.answer) for a in study_answers(df, *args) if a.question != BEST]

    assert savings(big) == savings(table) and len(savings(table)) == 4
    cols = ["question", "answer", "item", "flip_below_usd", "flip_above_usd"]
    s2, s3 = (price_sensitivity(df, *args) for df in (table, big))
    s2, s3 = (s[s.question != BEST][cols].reset_index(drop=True) for s in (s2, s3))
    pd.testing.assert_frame_equal(s2, s3)
    # without a threshold only the cost-per-performance question is asked
    assert [a.question for a in study_answers(big, *args[:3], None)] == [BEST]
