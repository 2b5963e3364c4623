"""Catalog validation, capex/power/TCO arithmetic and efficiency figures."""

from __future__ import annotations

import math

import pytest
import yaml
from podsim.fabric.topology import build_topology
from podsim.scenarios.cost import (
    CATEGORIES,
    INTERCONNECT_CATEGORIES,
    CatalogError,
    CostSpecError,
    cost_cluster,
    efficiency,
    load_catalog,
    parse_cost_spec,
)
from podsim.scenarios.cost.catalog import DEFAULT_CATALOG_PATH
from podsim.scenarios.cost.model import HOURS_PER_YEAR


def test_catalog_items_carry_provenance() -> None:
    cat = load_catalog()
    for name, it in cat.items.items():
        assert it.source and it.date and it.confidence, name
    pan = cat.get("nic-panmai-920")
    assert pan.estimate and pan.confidence == "none" and pan.pcie_switch_on_card
    # the Panmai estimate is defined as CX-7 + one Gen5 PCIe switch chip (price and power)
    cx7, chip = cat.get("nic-cx7-400g"), cat.get("pcie-gen5-switch-chip")
    assert pan.price_usd == cx7.price_usd + chip.price_usd
    assert pan.power_w == cx7.power_w + chip.power_w
    assert cat.get("ref-interconnect-fraction").value == 0.19


def test_catalog_errors_name_item_and_field(tmp_path) -> None:
    with pytest.raises(CatalogError, match=r"nic-cx7-400g\.price_usd"):
        load_catalog(overrides={"nic-cx7-400g": {"price_usd": -5}})
    with pytest.raises(CatalogError, match="Did you mean 'nic-panmai-920'"):
        load_catalog().get("nic-panmai920")
    raw = yaml.safe_load(DEFAULT_CATALOG_PATH.read_text())
    raw["items"]["optic-400g-sr4"]["reach"] = "fifty metres"
    bad = tmp_path / "cat.yaml"
    bad.write_text(yaml.safe_dump(raw))
    with pytest.raises(CatalogError, match=r"optic-400g-sr4\.reach"):
        load_catalog(bad)
    with pytest.raises(CostSpecError, match=r"cost\.pue"):
        parse_cost_spec({"pue": 0.5})
    with pytest.raises(CostSpecError, match=r"cost\.yeers"):
        parse_cost_spec({"yeers": 3})


def test_capex_power_and_tco_from_first_principles() -> None:
    g = build_topology("rail", servers=2)
    spec = {"years": 4, "usd_per_kwh": 0.2, "pue": 1.5}
    cost = cost_cluster(g, spec, layout="external-switch")
    bom = cost.bom
    assert cost.capex_usd == pytest.approx((bom["count"] * bom["unit_price_usd"]).sum())
    assert cost.power_w == pytest.approx((bom["count"] * bom["unit_power_w"]).sum())
    by_cat = cost.capex_by_category()
    assert set(CATEGORIES) <= set(by_cat)
    assert math.fsum(by_cat.values()) == pytest.approx(cost.capex_usd)
    tco = cost.tco()
    energy = cost.power_w / 1000 * 1.5 * HOURS_PER_YEAR * 4 * 0.2
    assert tco["tco_usd"] == pytest.approx(cost.capex_usd + energy)
    ic = math.fsum(by_cat[c] for c in INTERCONNECT_CATEGORIES)
    assert cost.interconnect_fraction == pytest.approx(ic / cost.capex_usd)
    s = cost.summary()
    assert s["interconnect_rule_of_thumb"] == 0.19
    assert s["cluster_gpus"] == 16 and s["cluster_servers"] == 2


def test_gpus_optional() -> None:
    g = build_topology("rail", servers=2)
    with_gpu = cost_cluster(g)
    without = cost_cluster(g, {"include_gpus": False})
    gpu = load_catalog().get("gpu-h100-sxm")
    assert with_gpu.capex_usd - without.capex_usd == pytest.approx(16 * gpu.price_usd)


def test_efficiency_figures() -> None:
    g = build_topology("rail", servers=2)
    cost = cost_cluster(g)
    summary = {"algbw_per_gpu_Bps": 40e9, "layer_time_s": 2e-3, "tokens": 16 * 4096}
    eff = efficiency(cost, summary)
    per_gpu = cost.capex_usd / 16
    assert eff["usd_per_GBps_per_gpu"] == pytest.approx(per_gpu / 40)
    life_s = 5 * HOURS_PER_YEAR * 3600
    assert eff["usd_per_moe_layer"] == pytest.approx(cost.tco()["tco_usd"] / life_s * 2e-3)
    tps = 16 * 4096 / 2e-3
    assert eff["tokens_per_s_per_musd"] == pytest.approx(tps / (cost.capex_usd / 1e6))
    empty = efficiency(cost, {})
    assert math.isnan(empty["usd_per_GBps_per_gpu"]) and math.isnan(empty["usd_per_moe_layer"])


def test_efficiency_reads_a_nested_run_summary() -> None:
    g = build_topology("rail", servers=2)
    cost = cost_cluster(g)
    nested = {"phases": {"dispatch": {"algbw_per_gpu_Bps": 20e9}}}
    eff = efficiency(cost, nested)
    assert eff["usd_per_GBps_per_gpu"] == pytest.approx(cost.capex_usd / 16 / 20)


def test_write_cost_files(tmp_path) -> None:
    from podsim.scenarios.cost.scenario import write_cost

    sc = {
        "name": "wc",
        "cluster": {"topology": {"name": "rail", "params": {"servers": 2}}},
        "workload": {"synthetic": {"pattern": "uniform"}},
    }
    paths = write_cost(sc, tmp_path, summary={"layer_time_s": 1e-3})
    assert [p.name for p in paths] == ["bom.csv", "cost.json"]
    import json

    doc = json.loads((tmp_path / "cost.json").read_text())
    assert doc["summary"]["cluster_gpus"] == 16 and doc["efficiency"]["usd_per_moe_layer"] > 0
    assert doc["efficiency"]["usd_per_GBps_per_gpu"] is None  # no bandwidth given: not guessed
