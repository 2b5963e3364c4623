"""Fluid engines refuse what they do not model instead of silently ignoring it."""

from __future__ import annotations

import podsim
import pytest
from podsim.scenarios.errors import ScenarioError


def test_link_faults_refused_by_bound():
    with pytest.raises(ScenarioError) as e:
        podsim.run("link-failure", overrides=["engine=bound"])
    msg = str(e.value)
    assert "faults" in msg and "link_down" in msg and "engine: packet" in msg


def test_ber_refused_by_flow_with_the_reason():
    with pytest.raises(ScenarioError) as e:
        podsim.run(
            "link-failure",
            overrides=[
                "engine=flow",
                "faults=[{kind: ber, link: [leaf0, spine0], pre_fec_ber: 1.0e-4}]",
            ],
        )
    msg = str(e.value)
    assert "ber" in msg and "per-packet" in msg and "engine: packet" in msg


def test_link_faults_run_on_flow():
    r = podsim.run(
        "link-failure",
        overrides=["engine=flow", "workload.synthetic.size=64KiB", "outputs.plots=false"],
    )
    assert r.summary["status"] == "complete"


@pytest.mark.parametrize("engine", ["flow", "bound"])
def test_storage_reads_refused_by_fluid_engines(engine):
    with pytest.raises(ScenarioError) as e:
        podsim.run("storage-contention", overrides=[f"engine={engine}", "variant=reads"])
    assert "workload.storage" in str(e.value)


def test_straggler_still_runs_on_flow():
    r = podsim.run(
        "quickstart",
        overrides=[
            "engine=flow",
            "workload.moe.tokens_per_rank=32",
            "faults=[{kind: straggler, rank: 3, factor: 2.0}]",
            "outputs.plots=false",
        ],
    )
    assert r.summary["status"] == "complete"
