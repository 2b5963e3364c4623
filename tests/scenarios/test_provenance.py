"""Every run records where it came from: podsim version, commit, date and the scenario's hash."""

from __future__ import annotations

import json
from datetime import datetime

import podsim
from podsim.scenarios.report.html import render_report
from podsim.scenarios.results.provenance import scenario_hash, source_commit

SMALL = ["workload.moe.tokens_per_rank=8", "outputs.plots=false"]


def test_summary_and_report_carry_the_provenance(tmp_path) -> None:
    res = podsim.run("quickstart", overrides=SMALL, out=tmp_path / "a")
    prov = json.loads((tmp_path / "a" / "summary.json").read_text())["provenance"]
    assert prov["podsim_version"] == podsim.__version__
    assert prov["scenario_sha256"] == scenario_hash(res.scenario)
    assert datetime.fromisoformat(prov["created_utc"]).tzinfo is not None
    src = source_commit()
    assert prov["commit"] == (src["commit"] if src else None)
    page = render_report(tmp_path / "a")
    assert f"podsim {podsim.__version__}" in page and prov["scenario_sha256"][:16] in page


def test_the_scenario_hash_follows_the_resolved_scenario_not_the_run() -> None:
    a = podsim.run("quickstart", overrides=SMALL)
    b = podsim.run("quickstart", overrides=[*SMALL, "seed=1"])  # quickstart's seed, written out
    c = podsim.run("quickstart", overrides=[*SMALL, "seed=2"])
    pa, pb, pc = (r.summary["provenance"]["scenario_sha256"] for r in (a, b, c))
    assert a.scenario["seed"] == 1
    assert pa == pb != pc
    # key order does not matter
    assert scenario_hash({"x": 1, "y": {"b": 2, "a": 3}}) == scenario_hash(
        {"y": {"a": 3, "b": 2}, "x": 1}
    )
