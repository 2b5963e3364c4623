"""Fluid engines refuse what they do not model instead of silently ignoring it."""

from __future__ import annotations

import podsim
import pytest
from podsim.scenarios.errors import ScenarioError


def test_link_faults_refused_by_bound():
    with pytest.raises(ScenarioError) as e:
        podsim.run("link-failure", overrides=["engine=bound"])
    msg = str(e.value)
    # the engines that do model link failures are named (from their declarations)
    assert "faults" in msg and "link_down" in msg and "engine: flow or packet" in msg


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


def test_storage_reads_refused_by_the_bound():
    with pytest.raises(ScenarioError) as e:
        podsim.run("storage-contention", overrides=["engine=bound", "variant=reads"])
    msg = str(e.value)
    # the engines that model storage reads are named (the flow engine does since issue 16)
    assert "workload.storage" in msg and "flow" in msg and "packet" in msg


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


def test_every_fault_kind_is_modelled_by_some_engine_and_the_packet_engine_models_all():
    from podsim.scenarios.engines import ENGINES
    from podsim.scenarios.input.schema import SCENARIO_FAULT_KINDS

    assert {
        "link_down",
        "link_degrade",
        "ber",
        "switch_down",
        "nic_down",
        "straggler",
    } == SCENARIO_FAULT_KINDS
    assert ENGINES.get("packet").faults == SCENARIO_FAULT_KINDS
    for name in ENGINES.names():
        assert ENGINES.get(name).faults <= SCENARIO_FAULT_KINDS, name


def test_a_registered_engine_is_asked_what_it_models_never_named(tmp_path):
    """A new engine declares what it models; the runner's checks follow the declaration."""
    from podsim.scenarios.engines import ENGINES, register_engine

    calls = []
    flow = ENGINES.get("flow")

    @register_engine("flow-probe", "a probe", faults={"straggler"}, check_size=flow.check_size,
                     preflight=lambda sc, cluster, trace: calls.append(sc.engine))  # fmt: skip
    def run_probe(ctx):
        return flow.run(ctx)

    try:
        with pytest.raises(ScenarioError, match="flow-probe engine does not model link_down"):
            podsim.run("link-failure", overrides=["engine=flow-probe"])
        r = podsim.run(
            "link-failure",
            overrides=["engine=flow-probe", "faults=[]", "workload.synthetic.size=64KiB",
                       "outputs.plots=false"],
        )  # fmt: skip
        assert r.summary["status"] == "complete" and calls == ["flow-probe"]
    finally:
        ENGINES._entries.pop("flow-probe")
