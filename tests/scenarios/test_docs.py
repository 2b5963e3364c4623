"""Every scenario key is documented (description, default, unit) and `podsim docs` prints the
reference generated from the models, with the defaults a scenario really gets."""

from __future__ import annotations

import re

import pytest
from podsim.scenarios.cli.app import app
from podsim.scenarios.input.docs import (
    _LIST_SECTION,
    _shown,
    missing_descriptions,
    models,
    reference,
    render,
)
from podsim.scenarios.input.loader import load_scenario
from podsim.scenarios.results.tables import flatten
from typer.testing import CliRunner

#: keys with no sensible default: the file must give them
REQUIRED_BY_DESIGN = {
    "Scenario.cluster",
    "Scenario.workload",
    "TopologyConfig.name",
    "TraceWorkload.path",
    "ChakraWorkload.path",
    "KinetoWorkload.path",
    "StorageReads.reads_per_gpu",
    "LinkDown.kind",
    "LinkDown.link",
    "LinkDegrade.kind",
    "LinkDegrade.link",
    "LinkDegrade.rate",
    "LinkBer.kind",
    "LinkBer.link",
    "LinkBer.pre_fec_ber",
    "NodeDown.kind",
    "NodeDown.node",
    "Straggler.kind",
    "Straggler.rank",
    "TrafficClassesConfig.classes",
    "TrafficClassConfig.name",
}


def test_every_field_has_a_description() -> None:
    assert missing_descriptions() == []


def test_every_field_has_a_default_unless_required_by_design() -> None:
    required = {
        f"{m.__name__}.{name}"
        for m in models()
        for name, info in m.model_fields.items()
        if info.is_required()
    }
    assert required == REQUIRED_BY_DESIGN


def test_reference_defaults_are_what_a_scenario_gets() -> None:
    """The documented default of every key equals its value in a minimal scenario resolved
    (NIC keys included: they come from the default NIC model's preset)."""
    doc = {"cluster": {"preset": "h800-deepep"}, "workload": {"synthetic": {}}, "cost": {}}
    sc, _ = load_scenario(doc)
    resolved = flatten(sc.resolved())
    rows = {r.path: r for r in reference()}
    compared = 0
    for path, value in resolved.items():
        if path == "cluster.preset" or path not in rows:
            continue
        assert rows[path].default == _shown(value), path
        compared += 1
    assert compared >= 69  # every defaulted key of a minimal scenario


def test_quantities_carry_units_and_types() -> None:
    rows = {r.path: r for r in reference()}
    assert rows["cluster.nic.mtu"].unit == "bytes" and rows["cluster.nic.mtu"].default == "4KiB"
    assert rows["cluster.switch.latency"].unit == "s"
    assert rows["cluster.nic.rate"].unit == "bit/s"
    assert rows["cluster.nic.rate"].type.startswith("rate (e.g. 400Gbps)")
    assert "module:Class" in rows["cluster.nic.cc.name"].type
    assert rows["cluster.rank_map"].type.startswith("rank mapping name")
    assert "list of integer" in rows["cluster.rank_map"].type
    assert rows["faults[].rate (link_degrade)"].unit == "bit/s"
    assert rows["cluster"].default == "required" and rows["cluster"].section


def test_podsim_docs_prints_every_key() -> None:
    r = CliRunner().invoke(app, ["docs"])
    assert r.exit_code == 0, r.output
    for row in reference():
        assert f"`{row.path}`" in r.output, row.path
    assert "| key | type | default | unit | description |" in r.output
    assert "`include`" in r.output and "`variants`" in r.output
    text = CliRunner().invoke(app, ["docs", "--format", "text"])
    assert text.exit_code == 0 and "cluster.nic.mtu  [bytes]" in text.output
    bad = CliRunner().invoke(app, ["docs", "--format", "html"])
    assert bad.exit_code == 2 and "use md or text" in bad.output


@pytest.mark.parametrize("section", sorted(set(_LIST_SECTION.values())))
def test_list_hints_in_the_reference_resolve(section: str) -> None:
    r = CliRunner().invoke(app, ["list", section])
    assert r.exit_code == 0, r.output
    assert "(none installed yet)" not in r.output


def test_markdown_table_is_well_formed() -> None:
    lines = [ln for ln in render().splitlines() if ln.startswith("|")]
    cells = {len(re.split(r"(?<!\\)\|", ln)) for ln in lines}
    assert cells == {7}  # five columns, no stray pipes from descriptions
