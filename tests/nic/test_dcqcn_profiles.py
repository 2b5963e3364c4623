"""DCQCN's named parameter sets (issue 14): each profile's constants are the ones its source
sets, explicit parameters override a profile, and an unknown profile is refused with a
suggestion."""

from __future__ import annotations

import pytest
from podsim.nic.congestion.dcqcn import DCQCN, PROFILES
from podsim.nic.congestion.registry import make_cc
from podsim.scenarios.cli.app import app
from typer.testing import CliRunner

# HPCC simulation/run.py (commit 9f4be2a): t_alpha/t_dec/t_inc in us, g, FAST_RECOVERY_TIMES and
# MIN_RATE from its config template; RdmaHw counts timer stages only (no byte counter)
HPCC = {
    "hpcc-ns3-paper": (50, 50, 55, 1, 1000e6),
    "hpcc-ns3-mlx": (1, 4, 300, 1, 1000e6),
}


@pytest.mark.parametrize("name", sorted(HPCC))
def test_hpcc_profiles_match_the_run_script(name: str) -> None:
    t_alpha, t_dec, t_inc, f, floor = HPCC[name]
    cc = DCQCN(profile=name)
    assert cc.alpha_interval_s == pytest.approx(t_alpha * 1e-6)
    assert cc.decrease_interval_s == pytest.approx(t_dec * 1e-6)
    assert cc.increase_interval_s == pytest.approx(t_inc * 1e-6)
    assert cc.fast_recovery_stages == f and cc.byte_counter_bytes is None
    assert cc.min_rate_bps == floor and cc.g == 0.00390625


def test_default_profile_keeps_the_earlier_defaults_and_says_what_it_is() -> None:
    cc = DCQCN()
    assert (cc.fast_recovery_stages, cc.byte_counter_bytes) == (5, 10_000_000)
    assert "podsim default" in PROFILES["default"]["source"]
    assert all("source" in p for p in PROFILES.values())


def test_explicit_parameters_override_a_profile() -> None:
    cc = make_cc("dcqcn", {"profile": "hpcc-ns3-mlx", "increase_interval_s": 55e-6})
    assert cc.increase_interval_s == 55e-6 and cc.alpha_interval_s == 1e-6


def test_unknown_profile_is_refused_with_a_suggestion() -> None:
    with pytest.raises(ValueError, match="Did you mean 'hpcc-ns3-paper'"):
        DCQCN(profile="hpcc-paper")
    r = CliRunner().invoke(
        app, ["validate", "quickstart", "--set", "cluster.nic.cc.params.profile=hpcc-papr"]
    )
    assert r.exit_code == 2 and "cluster.nic.cc.params" in r.output and "Did you mean" in r.output
