"""The flow and bound engines behind ``engine:``: agreement with the packet engine on an idle
network, the bound below every engine, the result tables and the bound summary."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from podsim.fabric.flow import wire_bytes
from podsim.fabric.phy import get_phy
from podsim.scenarios.build.cluster import build_cluster
from podsim.scenarios.engines import ENGINES, RunContext
from podsim.scenarios.engines.bound import add_bound, bound_summary
from podsim.scenarios.input.loader import load_scenario
from podsim.scenarios.results.tables import SCHEMAS, conform

NO_COMPUTE = pd.DataFrame({"step": [], "layer": [], "rank": [], "compute_s": []})


def make_ctx(
    trace_rows,
    *,
    topology=None,
    preset=None,
    ranks=8,
    endpoint="host",
    selector="spray",
    compute=None,
    seed=0,
):
    cluster: dict = {"nic": {"multipath": {"selector": selector}}}
    if preset is not None:
        cluster.update(preset=preset[0], params=preset[1])
    else:
        cluster["topology"] = topology or {
            "name": "leaf-spine",
            "params": {"hosts_per_leaf": 4, "leaves": 2, "spines": 2},
        }
    sc, _ = load_scenario(
        {
            "name": "t",
            "seed": seed,
            "sim": {"endpoint": endpoint},
            "cluster": cluster,
            "workload": {"synthetic": {"pattern": "uniform"}},
            "outputs": {"plots": False},
        }
    )
    cl = build_cluster(sc, ranks)
    tr = pd.DataFrame(trace_rows, columns=["src_rank", "dst_rank", "bytes"])
    tr = tr.assign(step=0, layer=0, phase="dispatch", tokens=1, start_s=0.0, hop="rdma")
    if "hop" in trace_rows:
        tr["hop"] = trace_rows["hop"]
    return RunContext(sc, cl, tr, NO_COMPUTE if compute is None else compute)


def completion(out, n):
    return out.summary(n)


def idle_closed_form(ctx, src_port, dst_port, nbytes, first_extra):
    """Serialisation of every packet at the NIC's MAC rate + per-hop latency (cut-through)."""
    g = ctx.cluster.graph
    import networkx as nx

    path = nx.shortest_path(g, src_port, dst_port)
    rate = g.edges[path[0], path[1]]["rate_bps"]
    t = 8.0 * int(wire_bytes(nbytes, ctx.scenario.cluster.nic.mtu, first_extra=first_extra)) / rate
    for u, v in itertools.pairwise(path):
        d = g.edges[u, v]
        t += d["length_m"] * 5e-9 + get_phy(d["phy"]).fec_latency_s
    t += (len(path) - 2) * ctx.scenario.cluster.switch.latency
    nic = ctx.scenario.cluster.nic
    if first_extra and nic.qp_cache and nic.qp_miss_penalty:
        # a cold queue pair: the sender waits the QP-context miss before its first packet, the
        # receiver's miss hides behind the serialisation of the packets after the first
        mtu = nic.mtu
        rest = wire_bytes(nbytes, mtu, first_extra=first_extra) - wire_bytes(
            min(nbytes, mtu), mtu, first_extra=first_extra
        )
        p = nic.qp_miss_penalty
        t += p + max(0.0, p - 8.0 * int(rest) / rate)
    return t


@pytest.mark.parametrize("endpoint", ["host", "nic"])
@pytest.mark.parametrize("nbytes", [3000, 100_000])
def test_three_engines_agree_on_an_idle_single_flow(endpoint, nbytes):
    ctx = make_ctx({"src_rank": [0], "dst_rank": [5], "bytes": [nbytes]}, endpoint=endpoint)
    expect = idle_closed_form(ctx, "nic0.p0", "nic5.p0", nbytes, 16 if endpoint == "nic" else 0)
    for engine in ("packet", "flow", "bound"):
        out = ENGINES.get(engine)(ctx)
        end = float(out.messages["end_s"].iloc[0])
        assert end == pytest.approx(expect, rel=1e-9), engine


def all_to_all(n, size, dst_filter=None):
    pairs = [(a, b) for a in range(n) for b in range(n) if a != b]
    if dst_filter is not None:
        pairs = [p for p in pairs if dst_filter(*p)]
    return {
        "src_rank": [a for a, _ in pairs],
        "dst_rank": [b for _, b in pairs],
        "bytes": [size] * len(pairs),
    }


@pytest.mark.parametrize(
    "rows,selector",
    [
        (all_to_all(8, 65536), "spray"),
        (all_to_all(8, 65536), "ecmp"),
        (all_to_all(8, 100_000, lambda a, b: b == 0), "spray"),  # incast
    ],
)
def test_bound_is_never_above_any_engine(rows, selector):
    ctx = make_ctx(rows, endpoint="nic", selector=selector)
    bound = bound_summary(ctx)["phases"]["dispatch"]["bound_s"]
    assert bound > 0
    for engine in ("packet", "flow", "bound"):
        s = completion(ENGINES.get(engine)(ctx), 8)
        t = s["phases"]["dispatch"]["completion_time_s"]
        assert bound <= t * (1 + 1e-9), engine
    b_out = ENGINES.get("bound")(ctx)
    assert completion(b_out, 8)["phases"]["dispatch"]["completion_time_s"] == pytest.approx(
        bound, rel=1e-9
    )


def test_incast_bound_is_the_receivers_link():
    size = 100_000
    rows = all_to_all(8, size, lambda a, b: b == 0)
    ctx = make_ctx(rows)
    b = bound_summary(ctx)["phases"]["dispatch"]
    rate = 400e9
    expect = 7 * 8.0 * int(wire_bytes(size, 4096)) / rate
    assert b["bound_s"] == pytest.approx(expect, rel=1e-12)
    assert b["limit"] == "leaf0->nic0.p0" and b["limit_kind"] == "link"


def test_flow_engine_incast_is_fair_share_of_the_last_link():
    size = 200_000
    rows = all_to_all(8, size, lambda a, b: b == 0)
    ctx = make_ctx(rows, selector="spray")
    out = ENGINES.get("flow")(ctx)
    eta = out.extra["cc_efficiency"]
    end = out.messages["end_s"].to_numpy()
    src = out.messages["src_rank"].to_numpy()
    ser = 8 * int(wire_bytes(size, 4096)) / 400e9
    # every sender gets eta x C / 7 of the receiver's link: all finish sending together, and
    # each message arrives one path latency later
    for s_rank, t in zip(src, end, strict=True):
        lat = idle_closed_form(ctx, f"nic{s_rank}.p0", "nic0.p0", size, 0) - ser
        assert t == pytest.approx(7 * ser / eta + lat, rel=1e-9)


def test_flow_tables_follow_the_schemas_and_are_deterministic():
    rows = all_to_all(8, 50_000)
    comp = pd.DataFrame({"step": 0, "layer": 0, "rank": np.arange(8), "compute_s": 1e-6})
    ctx = make_ctx(rows, compute=comp)
    ctx.trace.loc[ctx.trace.index % 2 == 0, "phase"] = "combine"
    a = ENGINES.get("flow")(ctx)
    b = ENGINES.get("flow")(ctx)
    for name in ("messages", "phases", "links", "qps"):
        ta = conform(name, getattr(a, name))
        tb = conform(name, getattr(b, name))
        assert list(ta.columns[: len(SCHEMAS[name])]) == list(SCHEMAS[name])
        pd.testing.assert_frame_equal(ta, tb)
    msgs = conform("messages", a.messages)
    assert (msgs["status"] == "complete").all()
    links = conform("links", a.links)
    # every payload byte crosses the sender's NIC link once, with its RoCE framing
    up = links[links["u"].str.startswith("nic")]
    assert up["tx_bytes"].sum() == int(wire_bytes(np.array(rows["bytes"]), 4096).sum())
    # compute sits between dispatch and combine on every rank
    ph = conform("phases", a.phases)
    d = ph[ph.phase == "dispatch"].set_index("rank")["end_s"]
    c = ph[ph.phase == "compute"].set_index("rank")
    assert np.allclose(c["start_s"], d.loc[c.index]) and np.allclose(c["duration_s"], 1e-6)


def test_add_bound_reports_fraction_of_bound():
    ctx = make_ctx(all_to_all(8, 65536), endpoint="nic")
    out = ENGINES.get("flow")(ctx)
    s = add_bound(completion(out, 8), bound_summary(ctx))
    f = s["phases"]["dispatch"]["fraction_of_bound"]
    assert 0.5 < f <= 1.0
    assert 0 < s["makespan_fraction_of_bound"] <= 1.0
    assert s["bound"]["phases"]["dispatch"]["limit"]


def test_multiplane_superpod_with_scaleup_and_shared_nics():
    rows = {
        "src_rank": [0, 0, 1, 3, 130],
        "dst_rank": [1, 5, 200, 129, 7],
        "bytes": [100_000] * 5,
        "hop": ["scaleup", "scaleup", "rdma", "rdma", "rdma"],
    }
    ctx = make_ctx(rows, preset=("superpod-128", {"pods": 2}), ranks=256, endpoint="host")
    for engine in ("flow", "bound"):
        out = ENGINES.get(engine)(ctx)
        msgs = conform("messages", out.messages)
        assert (msgs["status"] == "complete").all(), engine
        assert (msgs["fct_s"] > 0).all()
    out = ENGINES.get("flow")(ctx)
    links = conform("links", out.links)
    # the two RDMA messages between different cards are split over both planes
    for plane in (0, 1):
        assert links[links["link"].str.startswith(f"nic0.p{plane}->")]["tx_bytes"].sum() > 0
    su = links[links["tier"] == "gpu-scaleup"]
    assert su["tx_bytes"].sum() == 4 * 100_000  # two transfers, out of one GPU and into another
    assert out.extra["pcie_local_messages"] == 0
