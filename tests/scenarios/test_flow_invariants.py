"""The flow engine runs invariant checks too (issue 20, item 8): bytes conserved per flow and
at every switch, every message of a complete run delivered; the summary lists what ran."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from podsim.fabric.flow.checks import check_flow_run
from podsim.fabric.invariants import InvariantViolation
from podsim.fabric.topology import SWITCH_ROLES
from podsim.scenarios.engines import flow as flow_engine
from podsim.scenarios.input.loader import load_scenario
from podsim.scenarios.runner import run

SMALL = ["engine=flow", "workload.moe.tokens_per_rank=64"]


def _capture(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    real = flow_engine.check_flow_run

    def spy(sim, injected, links, switches, end_s, status):  # type: ignore[no-untyped-def]
        seen.update(sim=sim, injected=injected, links=links.copy(), switches=list(switches))
        seen.update(end_s=end_s.copy(), status=status)
        return real(sim, injected, links, switches, end_s, status)

    monkeypatch.setattr(flow_engine, "check_flow_run", spy)
    return seen


def test_flow_runs_list_their_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _capture(monkeypatch)
    sc, _ = load_scenario("quickstart", SMALL)
    res = run(sc)
    assert res.summary["engine_info"]["invariant_checks"] == [
        "flow_bytes",
        "switch_bytes",
        "completion",
    ]
    assert seen["switches"] and seen["injected"] > 0
    off, _ = load_scenario("quickstart", [*SMALL, "sim.checks=false"])
    assert run(off).summary["engine_info"]["invariant_checks"] == "off"


@pytest.fixture()
def finished(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen = _capture(monkeypatch)
    sc, _ = load_scenario("quickstart", SMALL)
    run(sc)
    return seen


def _check(s: dict[str, Any], **kw: Any) -> list[str]:
    args = {k: s[k] for k in ("sim", "injected", "links", "switches", "end_s", "status")}
    args.update(kw)
    return check_flow_run(
        args["sim"],
        args["injected"],
        args["links"],
        args["switches"],
        args["end_s"],
        args["status"],
    )


def test_a_switch_that_creates_bytes_is_caught(finished: dict[str, Any]) -> None:
    links = finished["links"]
    sw = finished["switches"][0]
    row = np.flatnonzero((links["v"] == sw).to_numpy())[0]
    links.loc[links.index[row], "tx_bytes"] += 10_000
    with pytest.raises(InvariantViolation, match="switch_bytes") as info:
        _check(finished, links=links)
    assert sw in str(info.value)


def test_lost_flow_bytes_are_caught(finished: dict[str, Any]) -> None:
    with pytest.raises(InvariantViolation, match="flow_bytes"):
        _check(finished, injected=finished["injected"] + 4096)


def test_an_undelivered_message_in_a_complete_run_is_caught(finished: dict[str, Any]) -> None:
    end_s = finished["end_s"].copy()
    end_s[3] = np.nan
    with pytest.raises(InvariantViolation, match="completion"):
        _check(finished, end_s=end_s)
    # a run stopped by its time limit may leave messages undelivered
    assert "completion" not in _check(finished, end_s=end_s, status="time-limit")


def test_switch_roles_cover_the_graph() -> None:
    sc, _ = load_scenario("quickstart", SMALL)
    from podsim.scenarios.build.cluster import build_cluster

    g = build_cluster(sc).graph
    roles = {d.get("role") for _, d in g.nodes(data=True)}
    assert roles & set(SWITCH_ROLES)
