"""benchmarks/validate_hardware.py poses each of DeepEP's published configurations as a valid
podsim scenario of the same size and reads DeepEP's figures from a run's summary."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "validate_hardware.py"


@pytest.fixture(scope="module")
def vhw():
    spec = importlib.util.spec_from_file_location("validate_hardware", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["validate_hardware"] = mod
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop("validate_hardware", None)


@pytest.mark.parametrize("fabric", ["ib", "roce"])
def test_every_published_configuration_is_a_valid_scenario_of_its_size(vhw, fabric) -> None:
    from podsim.scenarios.input.loader import load_scenario
    from podsim.scenarios.runner import preflight

    assert len(vhw.PUBLISHED) == 10  # 4 normal rows, 6 low-latency rows of the v1 tables
    # at most half of the figures may be fitted, overall and of the low-latency table
    n_fig = sum(len(p.figures) for p in vhw.PUBLISHED)
    fitted = [
        (p.kind, p.ep, ph)
        for p in vhw.PUBLISHED
        for ph, _m in p.figures
        if (p.kind, p.ep, ph) in vhw.FITTED
    ]
    assert n_fig == 32 and 0 < len(fitted) <= n_fig // 2
    ll = [p for p in vhw.PUBLISHED if p.kind == "low-latency"]
    n_ll = sum(len(p.figures) for p in ll)
    assert 0 < sum(k[0] == "low-latency" for k in fitted) <= n_ll // 2
    # every fitted key names a published row and phase
    rows = {(p.kind, p.ep, ph) for p in vhw.PUBLISHED for ph, _m in p.figures}
    assert rows >= vhw.FITTED
    for p in vhw.PUBLISHED:
        sc, _ = load_scenario("deepep-h800", overrides=vhw.overrides(p, fabric, "flow"))
        moe = sc.workload.moe
        assert moe.ep_size == p.ep
        assert moe.tokens_per_rank == (4096 if p.kind == "normal" else 128)
        assert sc.cluster.nic.link_layer == ("infiniband" if fabric == "ib" else "ethernet")
        if p.kind == "low-latency":
            assert moe.mode == "deepep-low-latency"
            # EP8-64 re-measured with NVLink for same-node peers (DeepEP de8cfca), EP128/256
            # unchanged since the pure-RDMA initial commit
            assert moe.nvlink_for_low_latency is (p.ep <= 64)
        # the library scenario carries the calibrated constants; the script sets none
        assert moe.deepep.copy_rate is not None and moe.deepep.ll_dispatch_fixed > 0
        assert not any("copy_rate" in o or "_fixed" in o for o in vhw.overrides(p, fabric, "flow"))
        fit = vhw.overrides(p, fabric, "flow", fit=True)
        if p.kind == "low-latency":  # --fit runs without the fixed times it fits
            sc, _ = load_scenario("deepep-h800", overrides=fit)
            assert sc.workload.moe.deepep.ll_dispatch_fixed == 0
            assert sc.workload.moe.deepep.ll_combine_fixed == 0
        if p.ep <= 16:
            preflight(sc, force=True)  # nothing refuses it before the engine starts


def test_figures_are_read_from_the_summary_keys_runs_write(vhw) -> None:
    """The keys the script reads are the ones a run's summary carries (a small real run)."""
    from podsim.scenarios.runner import run

    p = vhw.PUBLISHED[1]  # normal EP16
    o = [x for x in vhw.overrides(p, "ib", "flow") if "tokens_per_rank" not in x]
    res = run("deepep-h800", overrides=[*o, "workload.moe.tokens_per_rank=64"], force=True)
    for phase, metric in p.figures:
        v = vhw.podsim_figure(res.summary, phase, metric)
        assert v > 0, (phase, metric)
