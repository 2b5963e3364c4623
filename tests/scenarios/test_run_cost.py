"""Every run prices its cluster: bom.csv and cost.json next to the results, a cost block in the
printed summary, the breakdown on Results; a cluster that cannot be priced still runs, and a bad
catalog is bad input found before simulating."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import podsim
import pytest
from podsim.scenarios.cli.app import app
from podsim.scenarios.cost.tables import usd
from podsim.scenarios.results.tables import Results
from typer.testing import CliRunner


def test_every_run_writes_its_cost(quickstart_dir: Path) -> None:
    doc = json.loads((quickstart_dir / "cost.json").read_text())
    bom = pd.read_csv(quickstart_dir / "bom.csv")
    capex = doc["summary"]["capex_usd"]
    # the totals are the BOM's: sum of count x unit price, and per category
    assert capex == pytest.approx((bom["count"] * bom["unit_price_usd"]).sum())
    assert capex == pytest.approx(sum(doc["capex_by_category"].values()))
    for cat, v in doc["capex_by_category"].items():
        assert v == pytest.approx(bom.loc[bom["category"] == cat, "capex_usd"].sum())
    # $ per GB/s per GPU from its definition: capex per GPU / mean a2a algbw per GPU in GB/s
    summary = json.loads((quickstart_dir / "summary.json").read_text())
    bws = [summary["phases"][ph]["algbw_per_gpu_Bps"] for ph in ("dispatch", "combine")]
    gpus = doc["summary"]["cluster_gpus"]
    assert gpus == 16
    expect = capex / gpus / (sum(bws) / len(bws) / 1e9)
    assert doc["efficiency"]["usd_per_GBps_per_gpu"] == pytest.approx(expect)
    # the MoE layer's cost: TCO per second of service life x the simulated layer time
    res = Results.read(quickstart_dir)
    t_layer = res.performance()["layer_time_s"]
    service_s = doc["tco"]["years"] * 8766 * 3600
    assert doc["efficiency"]["usd_per_moe_layer"] == pytest.approx(
        doc["tco"]["tco_usd"] / service_s * t_layer
    )
    # Results read back exposes the same breakdown
    assert res.cost == doc and res.bom is not None and len(res.bom) == len(bom)
    table = res.cost_table()
    assert table["capex_usd"].sum() == pytest.approx(capex)
    assert table["capex_share"].sum() == pytest.approx(1.0)


def test_python_api_exposes_the_cost(scenario_dir: Path) -> None:
    res = podsim.run(scenario_dir / "base.yaml")
    assert res.cost is not None and res.cost["summary"]["capex_usd"] > 0
    assert res.bom is not None and {"category", "item", "count"} <= set(res.bom.columns)
    assert res.cost["summary"]["capex_usd"] == pytest.approx(res.bom["capex_usd"].sum())
    assert math.isfinite(res.cost["efficiency"]["usd_per_GBps_per_gpu"])


def test_printed_summary_has_a_cost_block(scenario_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["run", str(scenario_dir / "base.yaml"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "cost.json").read_text())
    assert "cost of the cluster" in r.output and "$ per GB/s/GPU" in r.output
    assert usd(doc["summary"]["capex_usd"]) in r.output
    assert usd(doc["efficiency"]["usd_per_GBps_per_gpu"]) in r.output
    quiet = CliRunner().invoke(app, ["run", str(scenario_dir / "base.yaml"), "-o", str(out), "-q"])
    assert quiet.exit_code == 0 and quiet.output == ""


def test_a_cluster_that_cannot_be_priced_still_runs(scenario_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["run", str(scenario_dir / "base.yaml"), "-o", str(out), "--set", "cost.switches=[]"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "cost.json").read_text())
    assert "scaleout switch in the cost catalog" in doc["error"]
    assert not (out / "bom.csv").exists()
    assert "not priced" in r.output and (out / "messages.parquet").is_file()


def test_bad_catalog_is_bad_input_before_simulating(scenario_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["run", str(scenario_dir / "base.yaml"), "-o", str(out)]
    r = CliRunner().invoke(app, [*args, "--set", "cost.catalog=missing.yaml"])
    assert r.exit_code == 2 and "key cost" in r.output and "missing.yaml" in r.output
    assert "Traceback" not in r.output and not (out / "summary.json").exists()
    # the cost section is typed: a bad value names its key
    r = CliRunner().invoke(app, [*args, "--set", "cost.years=-1"])
    assert r.exit_code == 2 and "cost.years" in r.output
