"""Faults, invariant checks, straggler analysis and resource limits through the scenario
layer (``faults:``, ``sim.checks``, ``--no-checks``, ``--force``)."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import podsim
import pytest
import yaml
from podsim.scenarios.build.limits import Budget, estimate
from podsim.scenarios.cli.app import app
from podsim.scenarios.engines import ENGINES
from podsim.scenarios.errors import ScenarioError
from podsim.scenarios.execution.faults import fabric_faults
from podsim.scenarios.input.loader import load_scenario
from podsim.scenarios.runner import prepare
from typer.testing import CliRunner

KIB = 1024


def cross_leaf_trace(path: Path, size: int = 256 * KIB) -> Path:
    """Ranks 0-3 (leaf0) each send ``size`` bytes to every rank 4-7 (leaf1): 16 flows that
    all cross the spine layer."""
    rows = [
        {"step": 0, "layer": 0, "phase": "dispatch", "src_rank": s, "dst_rank": d,
         "bytes": size, "tokens": 1, "start_s": 0.0, "hop": "rdma"}
        for s in range(4) for d in range(4, 8)
    ]  # fmt: skip
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def fault_doc(selector: str = "spray", faults: list | None = None) -> dict:
    return {
        "name": "faults",
        "seed": 3,
        "engine": "packet",
        "cluster": {
            "topology": {"name": "leaf-spine", "params": {"hosts_per_leaf": 4, "leaves": 2}},
            "nic": {"multipath": {"selector": selector, "paths": 64 if selector != "ecmp" else 1}},
            "routing": {"reconvergence": "1s"},
        },
        "workload": {"trace": {"path": "trace.csv", "ranks": 8}},
        "outputs": {"formats": ["parquet"], "plots": False},
        "faults": faults
        if faults is not None
        else [{"kind": "link_down", "link": ["leaf0", "spine0"], "at": "5us"}],
    }


@pytest.fixture
def fdir(tmp_path: Path) -> Path:
    cross_leaf_trace(tmp_path / "trace.csv")
    return tmp_path


def run_doc(fdir: Path, doc: dict, **kw):
    path = fdir / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return podsim.run(path, **kw)


def test_multipath_scenario_with_a_cut_spine_link_completes_with_nothing_lost(fdir: Path):
    res = run_doc(fdir, fault_doc("spray"))
    s = res.summary
    assert s["status"] == "complete" and s["messages"]["unfinished"] == 0
    info = s["engine_info"]
    rec = info["faults"][0]
    assert rec["kind"] == "link_down" and rec["target"] == "leaf0-spine0"
    assert rec["lost_pkts"] > 0 and rec["flows_hit"] > 0  # the cut did bite
    assert "failed_messages" not in info
    assert info["invariant_checks"] >= 1  # and every invariant held
    assert int(res.messages["bytes"].sum()) == 16 * 256 * KIB
    assert (res.qps["retx_packets"] > 0).any()


def test_single_path_ecmp_scenario_reports_stall_and_recovery(fdir: Path):
    res = run_doc(fdir, fault_doc("ecmp"))
    s = res.summary
    assert s["status"] == "complete"
    rec = s["engine_info"]["faults"][0]
    assert rec["flows_hit"] > 0
    rto = 100e-6  # the scenario's default NIC RTO
    assert rec["max_stall_s"] >= rto and rec["recovery_s"] >= rto
    assert s["engine_info"]["fault_summary"]["max_stall_s"] == rec["max_stall_s"]


def test_every_fault_kind_runs_and_is_recorded(fdir: Path):
    faults = [
        {"kind": "link_down", "link": ["leaf0", "spine1"], "at": "2us", "until": "30us"},
        {"kind": "link_degrade", "link": ["nic0.p0", "leaf0"], "rate": "300Gbps"},
        {"kind": "ber", "link": ["leaf1", "spine2"], "pre_fec_ber": 2e-3, "llr": True},
        {"kind": "switch_down", "node": "spine3", "at": "1us", "until": "40us"},
        {"kind": "nic_down", "node": "nic7.p0", "at": "1us", "until": "20us"},
        {"kind": "straggler", "rank": 2, "factor": 2.0},
    ]
    doc = fault_doc("spray", faults)
    doc["cluster"]["routing"]["reconvergence"] = "10us"
    res = run_doc(fdir, doc)
    s = res.summary
    assert s["status"] == "complete" and s["messages"]["unfinished"] == 0
    recs = s["engine_info"]["faults"]
    assert [r["kind"] for r in recs] == [
        "link_down", "link_degrade", "ber", "switch_down", "nic_down"
    ]  # fmt: skip
    ber = recs[2]
    assert ber["corrupted_frames"] > 0 and ber["llr_replays"] == ber["corrupted_frames"]
    assert ber["lost_pkts"] == 0
    assert recs[3]["links"] == 2 and recs[3]["rerouted_s"] == pytest.approx(11e-6)


@pytest.mark.parametrize(
    ("fault", "key", "text"),
    [
        ({"kind": "link_down", "link": ["leaf0", "leaf1"]}, "faults[0].link", "no link"),
        ({"kind": "switch_down", "node": "nic0.p0"}, "faults[0].node", "not a switch"),
        ({"kind": "nic_down", "node": "spine0"}, "faults[0].node", "not a NIC port"),
        ({"kind": "ber", "link": ["nic0.p0", "leaf0"], "pre_fec_ber": 0.7}, "faults.0", ""),
    ],
)
def test_bad_fault_targets_are_clean_errors(fdir: Path, fault: dict, key: str, text: str):
    (fdir / "s.yaml").write_text(yaml.safe_dump(fault_doc("spray", [fault])))
    r = CliRunner().invoke(app, ["run", str(fdir / "s.yaml"), "--out", str(fdir / "o")])
    assert r.exit_code == 2, r.output
    assert key.split(".")[0] in r.output and text in r.output
    assert "Traceback" not in r.output


def test_fault_translation_checks_without_a_network():
    sc, _ = load_scenario(
        {**fault_doc(), "workload": {"synthetic": {"pattern": "uniform", "size": "4KiB"}},
         "faults": [{"kind": "link_degrade", "link": ["a", "b"], "rate": "300G"}]}
    )  # fmt: skip
    [(i, f)] = fabric_faults(sc)
    assert i == 0 and f.kind == "link_degrade" and f.rate_bps == 300e9


def test_no_checks_flag_and_key(fdir: Path):
    (fdir / "s.yaml").write_text(yaml.safe_dump(fault_doc("spray", [])))
    out = fdir / "o"
    r = CliRunner().invoke(app, ["run", str(fdir / "s.yaml"), "--out", str(out), "--no-checks",
                                 "-q"])  # fmt: skip
    assert r.exit_code == 0, r.output
    import json

    info = json.loads((out / "summary.json").read_text())["engine_info"]
    assert info["invariant_checks"] == "off"


@pytest.mark.pure_python  # patches Switch.receive
def test_a_broken_model_stops_the_scenario_run_with_a_report(fdir: Path, monkeypatch):
    """A switch that silently loses one packet: the run stops, the CLI prints the invariant
    report and exits 1 (a model bug, not bad input)."""
    from podsim.fabric.switch import Switch

    real = Switch.receive
    count = [0]

    def lossy(self, pkt):
        count[0] += 1
        if count[0] == 40 and not pkt.kind:
            return  # vanished: no counter knows
        real(self, pkt)

    monkeypatch.setattr(Switch, "receive", lossy)
    (fdir / "s.yaml").write_text(yaml.safe_dump(fault_doc("spray", [])))
    r = CliRunner().invoke(app, ["run", str(fdir / "s.yaml"), "--out", str(fdir / "o")])
    assert r.exit_code == 1, r.output
    assert "invariant 'links' violated" in r.output and "the run stopped" in r.output
    assert "Traceback" not in r.output
    # with the checks off the same broken model runs to the end (the user asked for it)
    r = CliRunner().invoke(
        app, ["run", str(fdir / "s.yaml"), "--out", str(fdir / "o2"), "--no-checks", "-q"]
    )
    assert "invariant" not in r.output


def test_straggler_is_found_by_the_analysis(fdir: Path):
    doc = fault_doc("spray", [{"kind": "straggler", "rank": 5, "factor": 4.0}])
    doc["workload"]["trace"]["compute_time"] = "5us"
    doc["workload"]["trace"]["path"] = "trace2.csv"
    rows = pd.read_csv(cross_leaf_trace(fdir / "t.csv", size=16 * KIB))
    comb = rows.assign(phase="combine", src_rank=rows.dst_rank, dst_rank=rows.src_rank)
    pd.concat([rows, comb]).to_csv(fdir / "trace2.csv", index=False)
    res = run_doc(fdir, doc)
    a = res.summary["analysis"]
    assert a["stragglers"][0]["rank"] == 5 and "4.00x" in a["stragglers"][0]["reason"]
    assert 5 in a["critical_ranks"]  # it set the compute phase's completion
    from podsim.scenarios.results.analysis import analyse

    an = analyse(res)
    comp = an.critical[an.critical.phase == "compute"].iloc[0]
    assert comp.critical_rank == 5 and comp.own_s == pytest.approx(20e-6)
    # everyone else idles waiting for rank 5's combine data: bubbles of about 15 us
    g = an.gpus.set_index("rank")
    assert g.loc[5, "compute_s"] == pytest.approx(20e-6)
    others = g.drop(index=5)
    assert (others.idle_s > g.loc[5, "idle_s"]).all()


# --------------------------------------------------------------------------- limits


def test_estimate_is_close_to_the_measured_event_count():
    sc, _ = load_scenario("quickstart", ["workload.moe.tokens_per_rank=32", "outputs.plots=false"])
    prep = prepare(sc)
    est = estimate(sc, prep.cluster, prep.trace, prep.compute)
    res = podsim.run(sc)
    measured = res.summary["events"]
    assert measured and 0.6 * measured <= est.events <= 1.6 * measured
    assert est.packet_hops == pytest.approx(res.summary["engine_info"]["packet_hops"], rel=0.2)


def check_limits(sc, *args, **kwargs):
    """The size check the scenario's engine declares (what the runner calls)."""
    return ENGINES.get(sc.engine).check_size(sc, *args, **kwargs)


def test_too_large_is_refused_with_the_estimate_and_force_overrides(monkeypatch):
    sc, _ = load_scenario("quickstart", ["workload.moe.tokens_per_rank=16", "outputs.plots=false"])
    prep = prepare(sc)
    with pytest.raises(ScenarioError, match="flow engine") as info:
        check_limits(sc, prep.cluster, prep.trace, prep.compute, budget=Budget(1e-3, 2**40))
    msg = str(info.value)
    assert "events" in msg and "--force" in msg and "key engine" in msg
    with pytest.raises(ScenarioError, match="memory"):
        check_limits(sc, prep.cluster, prep.trace, prep.compute, budget=Budget(1e9, 1000))
    assert check_limits(sc, prep.cluster, prep.trace, budget=Budget(1e-3, 1), force=True) is None
    flow = copy.copy(sc)
    object.__setattr__(flow, "engine", "flow")
    # the flow engine is priced by memory only (its route tables), not by events
    need = check_limits(flow, prep.cluster, prep.trace, budget=Budget(1e-3, 2**40))
    assert need > 0
    with pytest.raises(ScenarioError, match="flow engine holds the routes"):
        check_limits(flow, prep.cluster, prep.trace, budget=Budget(1e-3, 1))
    assert check_limits(flow, prep.cluster, prep.trace, budget=Budget(1e-3, 1), force=True) == need
    # through the command: exit 2, then --force runs it
    monkeypatch.setenv("PODSIM_MAX_WALL_S", "1us")
    args = ["run", "quickstart", "--set", "workload.moe.tokens_per_rank=16", "--set",
            "outputs.plots=false", "-q"]  # fmt: skip
    r = CliRunner().invoke(app, [*args, "--out", "/tmp/_podsim_lim"])
    assert r.exit_code == 2 and "too large for the packet engine" in r.output
    r = CliRunner().invoke(app, [*args, "--out", "/tmp/_podsim_lim", "--force"])
    assert r.exit_code == 0, r.output


def test_bad_budget_environment_is_a_clean_error(monkeypatch):
    monkeypatch.setenv("PODSIM_MAX_MEMORY", "lots")
    with pytest.raises(ScenarioError, match="PODSIM_MAX_MEMORY"):
        Budget.default()
