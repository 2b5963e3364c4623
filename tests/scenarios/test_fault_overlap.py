"""Overlapping faults are counted once in the run's fault totals (issue 20, item 8): a packet
lost while two faults hold the same link down is one lost packet, though each fault's row
credits it."""

from __future__ import annotations

from podsim.scenarios.input.loader import load_scenario
from podsim.scenarios.runner import run

CUT = {"kind": "link_down", "link": ["leaf0", "spine0"], "at": "3us"}


def _faults(*faults: dict) -> dict:
    sc, _ = load_scenario(
        "link-failure", ["variant=ecmp", "outputs.plots=false", f"faults={list(faults)!r}"]
    )
    return run(sc).summary["engine_info"]["fault_summary"]


def test_two_faults_on_one_link_lose_each_packet_once() -> None:
    one = _faults(CUT)
    two = _faults(CUT, {**CUT, "at": "2us"})
    assert one["lost_pkts"] > 0
    # the second fault took the link down earlier, so its run differs; compare it with the
    # same outage given once
    earlier = _faults({**CUT, "at": "2us"})
    assert two["lost_pkts"] == earlier["lost_pkts"]
    assert two["lost_bytes"] == earlier["lost_bytes"]
    assert two["faults"] == 2
