"""`podsim cost`, `podsim sweep`, the study plots and the built-in savings study (cost side)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
import yaml
from podsim.fabric.units import fmt_time
from podsim.scenarios.cli.study import register_commands
from podsim.scenarios.cost import load_catalog
from podsim.scenarios.cost.compare import scope_savings
from podsim.scenarios.cost.scenario import cost_of_scenario
from podsim.scenarios.cost.sensitivity import compares_first_two
from podsim.scenarios.study import sweep as sweep_mod
from podsim.scenarios.study.plots import fmt_metric, pareto_front, save_study_figures, tornado_data
from podsim.scenarios.study.spec import Study, load_study, study_names
from podsim.scenarios.study.sweep import resolve_points
from typer.testing import CliRunner

SCENARIO = {
    "name": "costcli",
    "cluster": {"topology": {"name": "rail", "params": {"servers": 2, "gpus_per_server": 8}}},
    "workload": {"synthetic": {"pattern": "uniform", "size": "64KiB"}},
    "outputs": {"plots": False},
}


def priced_point(resolved: dict) -> dict:
    """Real resolution and cost; a closed-form stand-in for the simulated time."""
    from podsim.scenarios.cost import efficiency

    cost = cost_of_scenario(resolved)
    paths = resolved["cluster"]["nic"]["multipath"]["paths"]
    row = {"layer_time_s": 1e-3 / paths, "a2a_algbw_per_gpu_Bps": 40e9 * paths}
    row.update(cost.summary())
    row.update(efficiency(cost, row))
    return row


@pytest.fixture()
def app() -> typer.Typer:
    a = typer.Typer()
    register_commands(a)
    return a


def test_cost_command_prints_bom_without_simulating(tmp_path: Path, app: typer.Typer) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(SCENARIO))
    res = CliRunner().invoke(
        app,
        [
            "cost",
            str(f),
            "--set",
            "cluster.layout=external-switch",
            "--csv",
            str(tmp_path / "b.csv"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "Bill of materials" in res.output and "interconnect fraction" in res.output
    bom = pd.read_csv(tmp_path / "b.csv")
    assert bom.loc[bom["category"] == "pcie", "count"].sum() == 2 * 8  # 4 chips + 4 boards / server
    bad = CliRunner().invoke(
        app, ["cost", str(f), "--set", "cost.prices.nic-cx7-400g.price_usd=-1"]
    )
    assert bad.exit_code == 2 and "price_usd" in bad.output and "Traceback" not in bad.output


def test_cost_compare_layouts(tmp_path: Path, app: typer.Typer) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(SCENARIO))
    res = CliRunner().invoke(
        app, ["cost", str(f), "--compare-layouts", "external-switch,on-card-switch"]
    )
    assert res.exit_code == 0, res.output
    assert "saving by scope" in res.output and "node I/O" in res.output


def test_sweep_command_end_to_end(
    tmp_path: Path, app: typer.Typer, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump(SCENARIO))
    study = tmp_path / "study.yaml"
    study.write_text(
        yaml.safe_dump(
            {
                "name": "paths-layout",
                "base": "base.yaml",
                "grid": {
                    "cluster.layout": ["external-switch", "on-card-switch"],
                    "cluster.nic.multipath.paths": [1, 4],
                },
                "metric": "layer_time_s",
            }
        )
    )
    monkeypatch.setattr(sweep_mod, "_default_run_point", lambda: priced_point)
    out = tmp_path / "out"
    args = ["sweep", str(study), "--workers", "0", "--out", str(out), "--quiet"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    df = pd.read_parquet(out / "results.parquet")
    assert len(df) == 4 and (out / "results.csv").is_file()
    for stem in ("pareto", "cost_breakdown", "tornado"):
        assert (out / "plots" / f"{stem}.png").is_file() and (
            out / "plots" / f"{stem}.svg"
        ).is_file()
    # layout changes cost, paths change (stand-in) performance; on-card is cheaper here
    on = df[df["param:cluster.layout"] == "on-card-switch"]["capex_usd"].unique()
    ext = df[df["param:cluster.layout"] == "external-switch"]["capex_usd"].unique()
    assert len(on) == len(ext) == 1 and on[0] < ext[0]
    again = CliRunner().invoke(app, [*args, "--no-plots"])  # resume: nothing left to run
    assert again.exit_code == 0 and "ran 0, already done 4" in again.output
    # the summary table prints each metric in the unit its name carries
    assert fmt_time(float(df["layer_time_s"].iloc[0])) in again.output
    assert f"${float(df['capex_usd'].iloc[0]):,.0f}" in again.output


def test_fmt_metric_units() -> None:
    assert fmt_metric("layer_time_s", 1.5e-3) == "1.5ms"
    assert fmt_metric("capex_usd", 1580800.4) == "$1,580,800"
    assert fmt_metric("layer_cost_usd", 1.59e-06) == "$0.00000159"  # was "$0"
    assert fmt_metric("algbw_Bps", 2.5e10) == "25 GB/s"
    assert fmt_metric("rate_bps", 4e11) == "400Gbps"
    assert fmt_metric("power_w", 24000.0) == "24,000 W"
    assert fmt_metric("fraction", 0.51234) == "0.5123"
    assert fmt_metric("layer_time_s", None) == "None"


def test_pareto_front_closed_form() -> None:
    cost = [1, 2, 3, 4, 2.5]
    perf = [5, 3, 4, 1, 2]  # lower is better: (3, 4) dominated by (2, 3) and (2.5, 2)
    assert pareto_front(cost, perf).tolist() == [True, True, False, True, True]
    assert pareto_front(cost, perf, maximize=True).tolist() == [True, False, False, False, False]
    assert not pareto_front([1, np.nan], [1, 0])[1]


def test_tornado_ranks_parameters_by_span(tmp_path: Path) -> None:
    df = pd.DataFrame(
        {
            "key": list("abcd"),
            "study": "s",
            "point": range(4),
            "param:a": [1, 1, 2, 2],
            "param:b": [1, 2, 1, 2],
            "m": [10.0, 11.0, 20.0, 21.0],
            "capex_usd": [4.0, 3.0, 2.0, 1.0],
            "capex.gpu": [2.0, 2.0, 1.0, 1.0],
            "capex.nic": [2.0, 1.0, 1.0, 0.0],
        }
    )
    t = tornado_data(df, "m")
    assert list(t["param"]) == ["b", "a"]  # widest last (drawn on top)
    assert t.set_index("param").loc["a", "span"] == pytest.approx(10.0)
    paths = save_study_figures(df, tmp_path, "m", name="toy")
    assert {p.name for p in paths} == {
        f"{s}.{e}" for s in ("pareto", "cost_breakdown", "tornado") for e in ("png", "svg")
    }


def test_builtin_savings_study_cost_side() -> None:
    """The on-card-switch-savings study's two points, priced: the saving per scope equals the
    closed form from catalog prices (external boards removed, SmartNIC premium added)."""
    assert "on-card-switch-savings" in study_names()
    study = load_study("on-card-switch-savings")
    ext, onc = resolve_points(study)[:2]  # the cost question's baseline and claimed design
    assert ext.params["cluster.layout"] == "external-switch"
    assert onc.params == {**ext.params, "cluster.layout": "on-card-switch"}
    assert study.savings_threshold == 0.30
    a, b = cost_of_scenario(ext.resolved), cost_of_scenario(onc.resolved)
    cat = load_catalog()
    cards = a.capex_by_category()["nic"] / cat.get("nic-cx7-400g").price_usd
    boards = a.capex_by_category()["pcie"] / (
        cat.get("pcie-gen5-switch-chip").price_usd + cat.get("pcie-switch-board").price_usd
    )
    assert cards == b.capex_by_category()["nic"] / cat.get("nic-panmai-920").price_usd
    saving = a.capex_usd - b.capex_usd
    closed = boards * 1800.0 - cards * (2600.0 - 1800.0)
    assert saving == pytest.approx(closed)
    s = scope_savings(a.capex_by_category(), b.capex_by_category()).set_index("scope")
    io = a.capex_by_category()["nic"] + a.capex_by_category()["pcie"]
    assert s.loc["node I/O (NICs + PCIe switching)", "saving_fraction"] == pytest.approx(
        saving / io
    )
    assert s.loc["cluster (all capex)", "saving_fraction"] == pytest.approx(saving / a.capex_usd)
    # the claim's 30 % is out of reach for the whole cluster: boards are a sliver of capex
    assert s.loc["cluster (all capex)", "saving_fraction"] < 0.05


@pytest.mark.parametrize("name", study_names())
def test_builtin_studies_resolve(name: str) -> None:
    study = load_study(name)
    points = resolve_points(study)  # validates every point against the scenario schema
    assert points and len({p.key for p in points}) == len(points)


def small_savings_study() -> Study:
    """The built-in savings study on two pods of 16 accelerators at EP 32 (the same cases,
    layouts and order; about 1/8 of the messages per point)."""
    spec = load_study("on-card-switch-savings").model_dump(by_alias=True)
    spec["base"]["cluster"]["params"]["gpus_per_pod"] = 16
    spec["base"]["workload"]["moe"].update(ep_size=32, tokens_per_rank=64)
    return load_study(spec)


@pytest.mark.slow
def test_savings_study_runs_end_to_end(tmp_path: Path) -> None:
    """A small variant of the built-in study, simulated: layouts that put GPU and NIC under one
    PCIe switch tie in every case (nothing they differ in, the host link, carries traffic),
    the root complex is slower wherever it carries the NIC's DMA, and GDS reads slow the
    switched layouts only when a GPU has a whole NIC to itself."""
    from podsim.scenarios.study.sweep import run_study

    rep = run_study(small_savings_study(), tmp_path, workers=0, progress=False)
    assert not rep.failures and len(rep.table) == 12
    t = rep.table.assign(reads=rep.table["param:workload.storage"].notna())
    t = t.set_index(["param:cluster.layout", "param:cluster.params.gpus_per_nic", "reads"])
    assert np.isfinite(t["layer_time_s"]).all() and np.isfinite(t["usd_per_moe_layer"]).all()
    disp = t["phases.dispatch.completion_time_s"]
    for gpn, reads in itertools.product((2, 1), (False, True)):
        ext, onc = (t.loc[(x, gpn, reads)] for x in ("external-switch", "on-card-switch"))
        assert onc["capex_usd"] < ext["capex_usd"]
        assert onc["layer_time_s"] == ext["layer_time_s"]
        assert disp[("root-complex", gpn, reads)] > 1.1 * disp[("external-switch", gpn, reads)]
    for layout in ("external-switch", "on-card-switch"):
        assert disp[(layout, 2, True)] == pytest.approx(disp[(layout, 2, False)], rel=1e-9)
        assert disp[(layout, 1, True)] > 1.02 * disp[(layout, 1, False)]


def test_study_can_sweep_catalog_prices() -> None:
    study = load_study(
        {
            "name": "board-price",
            "base": SCENARIO,
            "set": {"cluster.layout": "external-switch"},
            "grid": {"cost.prices.pcie-switch-board.price_usd": [0, 1000, 3000]},
        }
    )
    pts = resolve_points(study)
    capex = [cost_of_scenario(p.resolved).capex_by_category()["pcie"] for p in pts]
    boards = 2 * 4  # 2 servers x one board per two GPUs
    chip = load_catalog().get("pcie-gen5-switch-chip").price_usd
    assert capex == [boards * (chip + b) for b in (0, 1000, 3000)]
    bad = load_study({"name": "bad", "base": SCENARIO, "grid": {"cost.yeers": [1]}})
    with pytest.raises(ValueError, match=r"grid key cost\.yeers=1 \(point 0\).*'years'"):
        resolve_points(bad)


@pytest.mark.parametrize(
    ("grid", "table"),
    [({"cluster.nic.multipath.paths": [1, 4]}, False),  # same hardware: no saving to show
     ({"cluster.layout": ["external-switch", "on-card-switch"]}, True)],
)  # fmt: skip
def test_two_point_study_prints_savings_only_between_designs_that_differ_in_cost(
    tmp_path: Path, app: typer.Typer, monkeypatch: pytest.MonkeyPatch, grid: dict, table: bool
) -> None:
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(SCENARIO))
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump({"name": "two", "base": "base.yaml", "grid": grid,
                                     "metric": "layer_time_s"}))  # fmt: skip
    monkeypatch.setattr(sweep_mod, "_default_run_point", lambda: priced_point)
    args = ["sweep", str(study), "--workers", "0", "--out", str(tmp_path / "o"), "--no-plots"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert ("saving by scope" in res.output) is table


@pytest.mark.parametrize("threshold", [None, 0.3])
def test_larger_study_compares_its_first_two_points_when_it_tests_a_saving(
    tmp_path: Path,
    app: typer.Typer,
    monkeypatch: pytest.MonkeyPatch,
    threshold: float | None,
) -> None:
    """A study of more than two points prints the savings by scope, first point as baseline and
    second as variant, only when it sets savings_threshold (the claim under test)."""
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(SCENARIO))
    spec = {"name": "three", "base": "base.yaml", "metric": "layer_time_s",
            "list": [{"cluster.layout": x}
                     for x in ("external-switch", "on-card-switch", "root-complex")]}  # fmt: skip
    if threshold is not None:
        spec["savings_threshold"] = threshold
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump(spec))
    monkeypatch.setattr(sweep_mod, "_default_run_point", lambda: priced_point)
    args = ["sweep", str(study), "--workers", "0", "--out", str(tmp_path / "o"), "--no-plots"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    title = "on-card-switch vs layout=external-switch: capex saving by scope"
    assert (title in " ".join(res.output.split())) is (threshold is not None)
    assert "root-complex vs" not in res.output
    assert compares_first_two(3, threshold) is (threshold is not None)
    assert compares_first_two(2, None) and not compares_first_two(1, 0.3)


@pytest.mark.slow
def test_train_network_design_study_ranks_the_designs(tmp_path: Path) -> None:
    """The built-in training network study, shrunk (4 micro-batches, 4 layers): a NIC shared by
    two GPUs halves each GPU's scale-out bandwidth and slows the step; a fat-tree carries the
    same traffic as rails (non-blocking both) at a higher capex; the PCIe layout does not bind
    (same step time) and the on-card switch is the cheaper card."""
    from podsim.scenarios.study.sweep import run_study

    spec = load_study("train-network-design").model_dump(by_alias=True)
    spec["base"]["workload"]["training"].update(microbatches=4, layers=4)
    rep = run_study(load_study(spec), tmp_path, workers=0, progress=False)
    assert not rep.failures and len(rep.table) == 8
    t = rep.table.set_index(
        [
            "param:cluster.params.scaleout",
            "param:cluster.params.gpus_per_nic",
            "param:cluster.layout",
        ]
    )
    step, capex = t["training.step_time_s"], t["capex_usd"]
    for net in ("rail", "fat-tree"):
        for layout in ("external-switch", "on-card-switch"):
            assert step[(net, 2, layout)] > 1.2 * step[(net, 1, layout)]
        for gpn in (1, 2):
            ext, onc = (net, gpn, "external-switch"), (net, gpn, "on-card-switch")
            assert step[onc] == step[ext] and capex[onc] < capex[ext]
    for gpn in (1, 2):
        rail, tree = ("rail", gpn, "on-card-switch"), ("fat-tree", gpn, "on-card-switch")
        assert step[tree] == pytest.approx(step[rail], rel=0.02) and capex[tree] > capex[rail]
