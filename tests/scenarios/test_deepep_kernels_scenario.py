"""deepep-h800 with DeepEP's pipelined kernels (workload.moe.deepep) through the runner."""

from __future__ import annotations

import pytest
from podsim.scenarios.errors import ScenarioError
from podsim.scenarios.input.loader import load_scenario
from podsim.scenarios.runner import run

SMALL = ["engine=flow", "workload.moe.tokens_per_rank=256", "variant=ep32",
         "outputs.plots=false", "outputs.timeline=false"]  # fmt: skip


def test_odd_sm_count_is_refused_with_its_key() -> None:
    with pytest.raises(ScenarioError, match=r"workload\.moe\.deepep\.sms") as e:
        load_scenario("deepep-h800", ["workload.moe.deepep.sms=23"])
    assert "must be even" in str(e.value)


def test_pipelined_forwarding_is_faster_than_store_and_forward() -> None:
    """Forwarding each chunk as it arrives overlaps the RDMA and NVLink stages, so the
    internode dispatch and combine end sooner than when the whole RDMA stage must arrive
    first."""
    piped = run("deepep-h800", overrides=SMALL, force=True)
    whole = run("deepep-h800", overrides=[*SMALL, "workload.moe.deepep.pipelined=false"],
                force=True)  # fmt: skip
    for phase in ("dispatch", "combine"):
        a, b = piped.summary["phases"][phase], whole.summary["phases"][phase]
        assert a["deepep_time_s"] < 0.9 * b["deepep_time_s"], phase
