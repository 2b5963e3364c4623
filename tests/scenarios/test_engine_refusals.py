"""Fluid engines refuse what they do not model instead of silently ignoring it."""

from __future__ import annotations

import pytest

import scenarios
from scenarios.errors import ScenarioError


@pytest.mark.parametrize("engine", ["flow", "bound"])
def test_link_faults_refused_by_fluid_engines(engine):
    with pytest.raises(ScenarioError) as e:
        scenarios.run("link-failure", overrides=[f"engine={engine}"])
    msg = str(e.value)
    assert "faults" in msg and "link_down" in msg and "engine: packet" in msg


@pytest.mark.parametrize("engine", ["flow", "bound"])
def test_storage_reads_refused_by_fluid_engines(engine):
    with pytest.raises(ScenarioError) as e:
        scenarios.run("storage-contention", overrides=[f"engine={engine}", "variant=reads"])
    assert "workload.storage" in str(e.value)


def test_straggler_still_runs_on_flow():
    r = scenarios.run(
        "quickstart",
        overrides=[
            "engine=flow",
            "workload.moe.tokens_per_rank=32",
            "faults=[{kind: straggler, rank: 3, factor: 2.0}]",
            "outputs.plots=false",
        ],
    )
    assert r.summary["status"] == "complete"
