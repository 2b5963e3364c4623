"""Accelerators are priced by the cluster preset or by ``cost.accelerator`` (issue 16 item 4),
and an unknown accelerator name is refused with the key, a suggestion and exit status 2."""

from __future__ import annotations

import pytest
from podsim.fabric.superpod import PRESET_ACCELERATORS
from podsim.fabric.topology import build_topology
from podsim.scenarios.cli.app import app
from podsim.scenarios.cost import BomError, build_bom, load_catalog
from podsim.scenarios.cost.scenario import cost_of_scenario
from typer.testing import CliRunner

PRESETS = {"h800-deepep": {"nodes": 2}, "superpod-128": {"pods": 1}, "superpod-384": {"pods": 1},
           "nvl72": {"pods": 1}, "m890": {"pods": 1}, "atlas-a3": {"pods": 1},
           "atlas-950": {"gpus_per_pod": 64}}  # fmt: skip


def _gpu_line(lines):
    (line,) = [ln for ln in lines if ln.category == "gpu"]
    return line


@pytest.mark.parametrize("preset", sorted(PRESET_ACCELERATORS))
def test_accelerator_follows_the_preset(preset: str) -> None:
    cat = load_catalog()
    g = build_topology(preset, **PRESETS[preset])
    line = _gpu_line(build_bom(g))
    item = cat.get(line.item, "gpu")
    assert item.accelerator == PRESET_ACCELERATORS[preset]
    assert line.unit_price_usd == item.price_usd and line.unit_power_w == item.power_w
    assert f"preset {preset}" in line.detail


def test_presets_differ_where_their_accelerators_do() -> None:
    h800 = _gpu_line(build_bom(build_topology("h800-deepep", nodes=2)))
    npu = _gpu_line(build_bom(build_topology("superpod-384", pods=1)))
    assert (h800.item, npu.item) == ("gpu-h800-sxm", "gpu-ascend-910c")
    # the M890 and Atlas 950 classes have items of their own (specs sourced, prices estimated)
    ppu = _gpu_line(build_bom(build_topology("m890", pods=1)))
    a950 = _gpu_line(build_bom(build_topology("atlas-950", gpus_per_pod=64)))
    assert (ppu.item, a950.item) == ("gpu-t-head-ppu", "gpu-ascend-950dt")
    assert ppu.confidence == a950.confidence == "none"
    # a plain fabric builder names no accelerator: the stated default
    assert _gpu_line(build_bom(build_topology("rail", servers=2))).item == "gpu-h100-sxm"


@pytest.mark.parametrize(
    ("name", "item"),
    [("h100", "gpu-h100-sxm"), ("H200", "gpu-h200-sxm"), ("b200", "gpu-b200"),
     ("GB200", "gpu-gb200"), ("ascend-910c", "gpu-ascend-910c"), ("gpu-b200", "gpu-b200")],
)  # fmt: skip
def test_cost_accelerator_choice_overrides_the_preset(name: str, item: str) -> None:
    cat = load_catalog()
    cost = cost_of_scenario("quickstart", [f"cost.accelerator={name}"])
    line = _gpu_line(cost.lines)
    assert line.item == item and line.unit_price_usd == cat.get(item).price_usd
    assert "cost.accelerator" in line.detail
    assert line.confidence == cat.get(item).price_confidence


def test_every_accelerator_has_source_and_confidence() -> None:
    gpus = load_catalog().of_kind("gpu")
    assert {it.accelerator for it in gpus.values()} >= {
        "h100", "h800", "h200", "b200", "gb200", "ascend-910c", "t-head-ppu", "ascend-950dt"
    }  # fmt: skip
    for name, it in gpus.items():
        assert it.source and it.confidence and it.price_confidence, name
        if it.price_confidence == "none":
            assert it.estimate and "ESTIMATE" in it.source, name


def test_accelerator_and_gpu_must_agree() -> None:
    g = build_topology("rail", servers=2)
    with pytest.raises(BomError, match="name different accelerators"):
        build_bom(g, {"accelerator": "b200", "gpu": "gpu-h100-sxm"})


def test_unknown_accelerator_refused_with_key_and_suggestion() -> None:
    r = CliRunner().invoke(app, ["cost", "quickstart", "--set", "cost.accelerator=H1000"])
    assert r.exit_code == 2, r.output
    assert "cost.accelerator: unknown accelerator 'H1000'" in r.output
    assert "Did you mean 'h100'" in r.output and "Traceback" not in r.output
    # podsim run refuses it before simulating
    r = CliRunner().invoke(app, ["run", "quickstart", "--set", "cost.accelerator=b2000"])
    assert r.exit_code == 2, r.output
    assert "Did you mean 'b200'" in r.output
