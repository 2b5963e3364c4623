"""Link faults in the flow engine (podsim.fabric.flow.faults) against closed forms.

Each closed form is built from a fault-free run of the same flow (its end time ``T0 = 8 W / R +
L``: wire bits over the line rate plus the path latency) and the fault's inputs: a stalled
ECMP flow ends exactly the reconvergence delay later; a flow whose capacity drops from ``R`` to
``R'`` at ``t`` ends at ``t + (8 W - R t) / R' + L``.
"""

from __future__ import annotations

import pandas as pd
import podsim
import pytest
from podsim.fabric.flow import wire_bytes
from podsim.fabric.units import parse_time
from podsim.scenarios.build.cluster import build_cluster
from podsim.scenarios.engines import ENGINES, RunContext
from podsim.scenarios.errors import ScenarioError
from podsim.scenarios.input.loader import load_scenario

NO_COMPUTE = pd.DataFrame({"step": [], "layer": [], "rank": [], "compute_s": []})
NBYTES = 1 << 20
T_CUT = 5e-6


def run_one(
    *,
    selector: str,
    faults=(),
    fabric_phy: str = "400GbE",
    reconvergence: str = "20us",
    start_s: float = 0.0,
    links: list | None = None,
) -> tuple[pd.DataFrame, dict, RunContext]:
    """One RDMA message rank 0 (leaf0) -> rank 1 (leaf1) on a 2-leaf, 2-spine fabric."""
    sc, _ = load_scenario(
        {
            "name": "t",
            "seed": 0,
            "engine": "flow",
            "sim": {"endpoint": "host"},
            "cluster": {
                "topology": {
                    "name": "leaf-spine",
                    "params": {
                        "hosts_per_leaf": 1,
                        "leaves": 2,
                        "spines": 2,
                        "fabric_phy": fabric_phy,
                    },
                },
                "nic": {"multipath": {"selector": selector, "paths": 256}},
                "routing": {"reconvergence": reconvergence},
            },
            "workload": {"synthetic": {"pattern": "uniform"}},
            "faults": list(faults),
            "outputs": {"plots": False},
        }
    )
    cl = build_cluster(sc, 2)
    tr = pd.DataFrame({"src_rank": [0], "dst_rank": [1], "bytes": [NBYTES]})
    tr = tr.assign(step=0, layer=0, phase="dispatch", tokens=1, start_s=start_s, hop="rdma")
    ctx = RunContext(sc, cl, tr, NO_COMPUTE)
    out = ENGINES.get("flow")(ctx)
    if links is not None:
        links.append(out.links)
    return out.messages, out.extra, ctx


def wire_bits(ctx: RunContext) -> float:
    return 8.0 * float(wire_bytes(NBYTES, ctx.scenario.cluster.nic.mtu))


def used_uplink(ctx: RunContext) -> str:
    """The spine the fault-free ECMP flow hashes onto (from the link table)."""
    out = ENGINES.get("flow")(ctx)
    up = out.links[(out.links["u"] == "leaf0") & out.links["v"].str.startswith("spine")]
    used = up[up["tx_bytes"] > 0]
    assert len(used) == 1  # ECMP: one path
    return str(used["v"].iloc[0])


def test_ecmp_flow_stalls_for_the_reconvergence_delay():
    m0, _, ctx = run_one(selector="ecmp")
    spine = used_uplink(ctx)
    delay = parse_time("20us")
    fault = {"kind": "link_down", "link": ["leaf0", spine], "at": T_CUT}
    m1, extra, _ = run_one(selector="ecmp", faults=[fault])
    assert m1["status"].iloc[0] == "complete"
    assert m1["end_s"].iloc[0] == pytest.approx(m0["end_s"].iloc[0] + delay, rel=1e-9)
    rec = extra["faults"][0]
    assert rec["flows_hit"] == 1 and rec["max_stall_s"] == pytest.approx(delay)
    assert rec["lost_pkts"] == 0


def test_spread_flow_over_two_spines_drops_to_half_bandwidth():
    # 200G spine links: the 2-link uplink bundle (400G) is the flow's bottleneck with the NIC
    m0, _, ctx = run_one(selector="spray", fabric_phy="200GbE")
    rate = 2 * ctx.cluster.graph.edges["leaf0", "spine0"]["rate_bps"]
    w = wire_bits(ctx)
    lat = m0["end_s"].iloc[0] - w / rate
    assert lat > 0
    fault = {"kind": "link_down", "link": ["leaf0", "spine0"], "at": T_CUT}
    m1, extra, _ = run_one(selector="spray", fabric_phy="200GbE", faults=[fault])
    expect = T_CUT + (w - rate * T_CUT) / (rate / 2) + lat
    assert m1["end_s"].iloc[0] == pytest.approx(expect, rel=1e-9)
    assert extra["faults"][0]["max_stall_s"] == 0.0  # multipath: no stall, only less bandwidth


def test_degraded_nic_link_closed_form():
    m0, _, ctx = run_one(selector="ecmp")
    port = ctx.cluster.rank_ports[0][0]
    rate = ctx.cluster.graph.edges[port, "leaf0"]["rate_bps"]
    w = wire_bits(ctx)
    lat = m0["end_s"].iloc[0] - w / rate
    fault = {"kind": "link_degrade", "link": [port, "leaf0"], "rate": "300Gbps", "at": T_CUT}
    m1, _, _ = run_one(selector="ecmp", faults=[fault])
    expect = T_CUT + (w - rate * T_CUT) / 300e9 + lat
    assert m1["end_s"].iloc[0] == pytest.approx(expect, rel=1e-9)


def test_repair_resumes_a_flow_with_no_surviving_path():
    _, _, ctx = run_one(selector="spray")
    port = ctx.cluster.rank_ports[1][0]
    fault = {"kind": "nic_down", "node": port, "at": T_CUT, "until": 3 * T_CUT}
    m1, _, _ = run_one(selector="spray", faults=[fault])
    m0, _, _ = run_one(selector="spray")
    assert m1["end_s"].iloc[0] == pytest.approx(m0["end_s"].iloc[0] + 2 * T_CUT, rel=1e-9)


def test_dead_nic_stalls_the_run_with_a_reason():
    _, _, ctx = run_one(selector="spray")
    port = ctx.cluster.rank_ports[1][0]
    m1, _, _ = run_one(selector="spray", faults=[{"kind": "nic_down", "node": port, "at": T_CUT}])
    assert m1["status"].iloc[0] == "unfinished"
    assert "stalled" in m1["reason"].iloc[0] and port in m1["reason"].iloc[0]


def test_library_link_failure_ecmp_stalls_longer_than_spray():
    over = ["engine=flow", "workload.synthetic.size=128KiB", "outputs.plots=false"]
    res = {
        v: podsim.run("link-failure", overrides=[f"variant={v}", *over]) for v in ("spray", "ecmp")
    }
    for r in res.values():
        assert r.summary["status"] == "complete"
        assert (r.messages["status"] == "complete").all()
    ecmp = res["ecmp"].summary["engine_info"]["faults"][0]
    spray = res["spray"].summary["engine_info"]["faults"][0]
    assert ecmp["flows_hit"] > 0
    assert ecmp["max_stall_s"] == pytest.approx(parse_time("50ms"))
    assert spray["max_stall_s"] < ecmp["max_stall_s"]
    assert res["spray"].summary["makespan_s"] < res["ecmp"].summary["makespan_s"]


def test_ber_stays_refused_on_flow_with_the_reason():
    fault = {"kind": "ber", "link": ["leaf0", "spine0"], "pre_fec_ber": 1e-4}
    with pytest.raises(ScenarioError, match="per-packet"):
        run_one(selector="spray", faults=[fault])


def test_ecmp_spine_switch_down_stalls_for_the_reconvergence_delay():
    m0, _, ctx = run_one(selector="ecmp")
    spine = used_uplink(ctx)
    fault = {"kind": "switch_down", "node": spine, "at": T_CUT}
    m1, extra, _ = run_one(selector="ecmp", faults=[fault])
    delay = parse_time("20us")
    assert m1["end_s"].iloc[0] == pytest.approx(m0["end_s"].iloc[0] + delay, rel=1e-9)
    assert extra["faults"][0]["flows_hit"] == 1


def test_ecmp_flow_posted_after_reconvergence_avoids_the_dead_link():
    late = 50e-6  # after the fault at 0 and the 20 us reconvergence
    m0, _, ctx = run_one(selector="ecmp", start_s=late)
    spine = used_uplink(ctx)
    fault = {"kind": "link_down", "link": ["leaf0", spine], "at": 0.0}
    links: list = []
    m1, extra, _ = run_one(selector="ecmp", faults=[fault], start_s=late, links=links)
    assert m1["end_s"].iloc[0] == pytest.approx(m0["end_s"].iloc[0], rel=1e-9)
    lt = links[0].set_index("link")
    assert lt.loc[f"leaf0->{spine}", "tx_bytes"] == 0
    assert extra["faults"][0]["flows_hit"] == 0
