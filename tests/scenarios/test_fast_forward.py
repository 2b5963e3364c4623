"""sim.fast_forward: the packet engine's steady-state fast-forward agrees with the full run,
really skips, never jumps over a pending fault or release, is off by default, and refuses
bad values (podsim.nic.fastforward)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import podsim
import pytest
import yaml
from podsim.scenarios.cli.app import app
from typer.testing import CliRunner

US = 1e-6


def doc(ff: bool | dict, **workload) -> dict:
    """A 2-leaf, 8-host leaf-spine with the default SmartNIC (spray, DCQCN) and a uniform
    all-to-all of 2 MiB messages: each NIC round-robins 7 QPs, a steady state of ~300 us."""
    ff = {"enabled": ff} if isinstance(ff, bool) else ff
    return {
        "name": "ff",
        "seed": 3,
        "engine": "packet",
        "cluster": {
            "topology": {"name": "leaf-spine", "params": {"hosts_per_leaf": 4, "leaves": 2}}
        },
        "workload": {"synthetic": {"pattern": "uniform", "size": "2MiB", **workload}},
        "outputs": {"formats": ["parquet"], "plots": False},
        "sim": {"fast_forward": ff},
    }


def close(a: float, b: float, tol: float = 0.02) -> bool:
    return abs(a - b) <= tol * abs(b)


def agree(fast, full) -> None:
    """Completion time, every message's delivery and the bytes on the links within 2 %."""
    assert fast.summary["status"] == full.summary["status"] == "complete"
    assert close(fast.summary["sim_time_s"], full.summary["sim_time_s"])
    a, b = fast.messages.sort_values("msg"), full.messages.sort_values("msg")
    assert (a["bytes"].to_numpy() == b["bytes"].to_numpy()).all()
    ea, eb = a["end_s"].to_numpy(), b["end_s"].to_numpy()
    assert np.all(np.abs(ea - eb) <= 0.02 * full.summary["sim_time_s"])
    for col in ("tx_bytes", "tx_packets"):
        assert close(fast.links[col].sum(), full.links[col].sum()), col
    qa, qb = fast.qps.sort_values("qp"), full.qps.sort_values("qp")
    assert (qa["bytes"].to_numpy() == qb["bytes"].to_numpy()).all()
    assert close(qa["packets"].sum(), qb["packets"].sum())


def test_fast_forward_agrees_with_the_full_run_and_skips():
    full = podsim.run(doc(False))
    fast = podsim.run(doc(True))
    info = fast.summary["engine_info"]["fast_forward"]
    # it really jumped: a large share of the run and of its packets was accounted, not sent
    assert info["jumps"] >= 1
    assert info["skipped_time_s"] > 0.3 * full.summary["sim_time_s"]
    assert info["skipped_packets"] > 0.3 * full.qps["packets"].sum()
    assert fast.summary["events"] < 0.7 * full.summary["events"]
    agree(fast, full)
    # the skipped bytes are the difference between what was accounted and what was sent
    sent = fast.summary["engine_info"]["packet_hops"]
    assert sent < full.summary["engine_info"]["packet_hops"]
    assert "fast_forward" not in full.summary["engine_info"]


def test_never_jumps_over_a_pending_release_and_still_agrees():
    """Two steps with compute between them: the second step's messages are released while
    other ranks may still send; no jump window contains a message's release."""
    kw = {"steps": 2, "compute_time": "40us"}
    full = podsim.run(doc(False, **kw))
    fast = podsim.run(doc(True, **kw))
    info = fast.summary["engine_info"]["fast_forward"]
    assert info["jumps"] >= 2  # one per step
    posts = fast.messages["post_s"].to_numpy()
    for t0, t1 in info["windows_s"]:
        assert not ((posts > t0) & (posts < t1)).any(), (t0, t1)
    agree(fast, full)


def test_never_jumps_over_a_pending_fault_and_still_agrees(tmp_path: Path):
    faults = [{"kind": "link_degrade", "link": ["leaf0", "spine0"], "rate": "200G",
               "at": "120us", "until": "200us"}]  # fmt: skip
    d_full, d_fast = doc(False), doc(True)
    d_full["faults"] = d_fast["faults"] = faults
    full = podsim.run(d_full)
    fast = podsim.run(d_fast)
    info = fast.summary["engine_info"]["fast_forward"]
    assert info["jumps"] >= 1
    for t0, t1 in info["windows_s"]:
        for t in (120 * US, 200 * US):
            assert not t0 < t < t1, (t0, t1, t)
    rec = fast.summary["engine_info"]["faults"][0]
    assert rec["started_s"] == pytest.approx(120 * US) and rec["ended_s"] == pytest.approx(200 * US)
    agree(fast, full)


def test_off_by_default_and_its_knobs_change_nothing_when_off():
    from podsim.scenarios.input.schema import SimConfig

    assert SimConfig().fast_forward.enabled is False
    base = podsim.run(doc(False, size="256KiB"))
    knobs = podsim.run(doc({"enabled": False, "stable_rtts": 3, "tolerance": 0.3}, size="256KiB"))
    assert base.summary["sim_time_s"] == knobs.summary["sim_time_s"]
    assert base.summary["events"] == knobs.summary["events"]
    assert base.messages["end_s"].equals(knobs.messages["end_s"])
    assert base.links["tx_bytes"].equals(knobs.links["tx_bytes"])


@pytest.mark.parametrize(
    ("ff", "key"),
    [
        ({"enabled": True, "stable_rtts": 1}, "stable_rtts"),
        ({"enabled": True, "tolerance": 0}, "tolerance"),
        ({"enabled": True, "tolerance": 0.9}, "tolerance"),
        ({"enabled": "maybe"}, "enabled"),
        ({"enabled": True, "window": 3}, "window"),
    ],
)
def test_bad_values_exit_2_naming_the_key(tmp_path: Path, ff: dict, key: str):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc(ff)))
    r = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "o"), "-q"])
    assert r.exit_code == 2, r.output
    assert f"fast_forward.{key}" in r.output or f"fast_forward: {key}" in r.output, r.output
    assert "Traceback" not in r.output


def test_needs_the_nic_endpoint(tmp_path: Path):
    d = doc(True)
    d["sim"]["endpoint"] = "host"
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(d))
    r = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "o"), "-q"])
    assert r.exit_code == 2, r.output
    assert "fast_forward" in r.output and "endpoint: nic" in r.output


def test_a_fast_forwarded_run_measures_no_link_per_phase():
    """A jump carries bytes no port counter sampled: per-phase link figures would miss them,
    so the run says it did not measure them rather than report them short."""
    fast = podsim.run(doc(True))
    assert fast.summary["engine_info"]["fast_forward"]["jumps"] >= 1
    assert fast.links_by_phase.empty
    assert "link_utilisation_by_phase" not in fast.summary
    assert "not measured" in fast.summary["engine_info"]["links_by_phase"]
    assert not podsim.run(doc(False)).links_by_phase.empty


def test_stops_at_the_time_limit_on_the_virtual_clock():
    """A time limit inside the steady stretch: the run jumps, then stops exactly at the limit
    of the run's (virtual) clock, with the unfinished messages reported as such."""
    d = doc(True)
    d["sim"]["time_limit"] = "200us"
    res = podsim.run(d)
    s = res.summary
    info = s["engine_info"]["fast_forward"]
    assert info["jumps"] >= 1 and info["windows_s"][-1][1] <= 200 * US
    assert s["status"] == "time-limit"
    assert s["sim_time_s"] == pytest.approx(200 * US, rel=1e-9)
    assert (res.messages["status"] != "complete").all()
