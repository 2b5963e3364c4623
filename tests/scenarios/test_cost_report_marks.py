"""The run report marks every BOM price by its confidence and says what whole switch boxes
cost with few ports used (issue 16 item 4, issue 19)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from podsim.scenarios.cost.tables import CONFIDENCE_MARK, usd
from podsim.scenarios.report.html import render_report


def test_report_bom_marks_every_price_by_confidence(quickstart_dir: Path) -> None:
    html = render_report(quickstart_dir)
    bom = pd.read_csv(quickstart_dir / "bom.csv")
    part = html[html.index("<h3>Bill of materials</h3>") : html.index("<h2>Hottest links</h2>")]
    rows = part.split("<tr>")[2 : 2 + len(bom)]
    assert len(rows) == len(bom)
    for row, r in zip(rows, bom.itertuples(), strict=True):
        assert r.item in row and f"<td>{CONFIDENCE_MARK[r.confidence]}</td>" in row
        if r.ports_bought:
            assert f"{r.ports_used:,}/{r.ports_bought:,}" in row
    doc = json.loads((quickstart_dir / "cost.json").read_text())
    conf = part[part.index("Capex by price confidence") :]
    for level, v in doc["capex_by_confidence"].items():
        if v:
            assert usd(v) in conf and CONFIDENCE_MARK[level] in conf
    assert "NONE = no source" in part
    assert "rule of thumb (share of capex)" in html


def test_run_summary_and_report_state_the_share_on_unsourced_prices(quickstart_dir: Path) -> None:
    from podsim.scenarios.results.tables import Results
    from rich.console import Console

    doc = json.loads((quickstart_dir / "cost.json").read_text())
    head = doc["summary"]
    share = head["capex_conf.none"] / head["capex_usd"]
    assert 0 < share < 1
    res = Results.read(quickstart_dir)
    console = Console(width=200, record=True)
    console.print(res._cost_summary_table())
    text = console.export_text()
    assert "on NONE prices" in text and f"{100 * share:.1f} %" in text
    html = render_report(quickstart_dir)
    assert "capex on NONE prices" in html and f"{100 * share:.1f} %" in html
