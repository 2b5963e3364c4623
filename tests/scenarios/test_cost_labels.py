"""What ``podsim cost`` prints: every price's confidence, no rule of thumb in a power column,
and whole switch boxes with few ports used said as such (issues 16 and 19)."""

from __future__ import annotations

import re

from podsim.scenarios.cli.app import app
from podsim.scenarios.cost.catalog import price_level
from podsim.scenarios.cost.scenario import cost_of_scenario
from typer.testing import CliRunner


def _cost_output(*args: str) -> str:
    import podsim.scenarios.cli.study as study_cli
    from rich.console import Console

    wide, study_cli.console = study_cli.console, Console(width=200)
    try:
        r = CliRunner().invoke(app, ["cost", "quickstart", *args])
    finally:
        study_cli.console = wide
    assert r.exit_code == 0, r.output
    return r.output


def test_price_level_reads_the_price_part() -> None:
    assert price_level("medium(power)/low(price)") == "low"
    assert price_level("medium(price)/none(power)") == "medium"
    assert price_level("medium-low") == "low"
    assert price_level("none") == "none"
    assert price_level("medium(power)") == "none"  # says nothing of a price


def test_cli_marks_every_price_by_confidence() -> None:
    cost = cost_of_scenario("quickstart")
    out = _cost_output()
    marks = {"high": "high", "medium": "med", "low": "low", "none": "NONE"}
    # every BOM row's unit price is followed by its confidence mark (the line under it)
    for ln in cost.lines:
        assert marks[ln.confidence] in out
    assert "NONE = no source" in out
    table = re.search(r"Capex by price confidence.*", out, re.S).group(0)
    by = cost.capex_by_confidence()
    assert f"${by['none']:,.0f}" in table and "pcie-switch-board" in table


def test_rule_of_thumb_not_in_the_power_column_and_idle_ports_said() -> None:
    out = _cost_output()
    breakdown = out[out.index("Cost breakdown") :]
    rows = [ln for ln in breakdown.splitlines() if "rule of thumb" in ln]
    # the 19 % appears only in the caption sentence, a share of capex
    assert rows and all("│" not in ln for ln in rows)
    assert "of cluster capex" in breakdown
    cost = cost_of_scenario("quickstart")
    leaf = next(ln for ln in cost.lines if ln.detail.startswith("leaf"))
    assert leaf.ports_bought == 8 * 64 and leaf.ports_used == 32
    assert "ports used/bought 32/512" in out
    assert "Whole switch boxes are bought" in out and "32 of 512 ports (6%)" in out
    # per-port pricing has nothing idle to warn about
    assert "Whole switch boxes" not in _cost_output("--set", "cost.switch_pricing=port")
