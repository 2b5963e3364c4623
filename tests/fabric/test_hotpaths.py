"""Differential test of the hand-inlined hot paths: every scenario gives bit-identical result
tables with the readable twins (podsim.fabric.hotpaths) and with the inlined code."""

from __future__ import annotations

import podsim
import pytest
from podsim.fabric.hotpaths import INLINED, readable_paths

#: the twins are swapped in by patching classes: pure Python only (tests/conftest.py)
pytestmark = pytest.mark.pure_python

SMALL = ["outputs.plots=false"]
CASES = {
    "quickstart": ["workload.moe.tokens_per_rank=16"],
    "incast-cc": ["workload.synthetic.size=64KiB"],
    "incast-pfc": [
        "workload.synthetic.size=64KiB",
        "cluster.switch.pfc.enabled=true",
        "cluster.switch.pfc.xoff=200KB",
        "cluster.switch.pfc.xon=100KB",
        "cluster.switch.ecn.enabled=false",
    ],
    "incast-pfc-hold": [
        "workload.synthetic.size=64KiB",
        "cluster.switch.pfc.enabled=true",
        "cluster.switch.pfc.xoff=200KB",
        "cluster.switch.pfc.xon=100KB",
        "cluster.switch.pfc.hold_until_sent=true",
        "cluster.switch.ecn.enabled=false",
    ],
    "spray-vs-ecmp": ["workload.synthetic.size=64KiB"],
    "link-failure": ["workload.synthetic.size=128KiB"],
    "storage-contention": ["workload.moe.tokens_per_rank=16"],
    "hpcc-int": ["workload.synthetic.size=64KiB", "variant=hpcc"],
}


def _tables(name: str, sets: list[str]) -> dict:
    scenario = "incast-cc" if name in ("incast-pfc", "incast-pfc-hold", "hpcc-int") else name
    res = podsim.run(scenario, overrides=sets + SMALL)
    return {k: v for k, v in res.tables().items() if v is not None}


def test_the_twins_are_swapped_in_and_restored() -> None:
    before = [cls.__dict__[name] for cls, name, _ in INLINED]
    with readable_paths():
        assert all(cls.__dict__[name] is cls.__dict__[twin] for cls, name, twin in INLINED)
    assert [cls.__dict__[name] for cls, name, _ in INLINED] == before


@pytest.mark.parametrize("name", sorted(CASES))
def test_inlined_and_readable_paths_give_identical_results(name: str) -> None:
    fast = _tables(name, CASES[name])
    with readable_paths():
        slow = _tables(name, CASES[name])
    assert fast.keys() == slow.keys()
    for key in fast:
        assert fast[key].equals(slow[key]), key
