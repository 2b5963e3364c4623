"""DCQCN's named parameter sets (issue 14): each profile's constants are the ones its source
sets, explicit parameters override a profile, and an unknown profile is refused with a
suggestion."""

from __future__ import annotations

import pytest
from podsim.nic.congestion.api import CCEvent
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


# NVIDIA's DCQCN parameters (DOCA "DCQCN CC Parameters") and the firmware defaults mlxconfig
# prints, in their own units: dce_tcp_g, dce_tcp_rtt us, rate_reduce_monitor_period us,
# rpg_time_reset us, rpg_byte_reset B, rpg_threshold, rpg_min_rate Mb/s, rpg_ai_rate Mb/s,
# rpg_hai_rate Mb/s, initial_alpha_value
NVIDIA = (1019, 1, 4, 300, 32767, 1, 1, 5, 50, 1023)


def test_nvidia_profile_is_the_firmware_defaults_and_the_default() -> None:
    g, rtt, monitor, time_reset, byte_reset, threshold, min_rate, ai, hai, alpha0 = NVIDIA
    cc = DCQCN()
    assert cc.profile == "nvidia"
    assert cc.g == (1024 - g) / 1024 and cc.alpha_interval_s == rtt * 1e-6
    assert cc.decrease_interval_s == monitor * 1e-6
    assert cc.increase_interval_s == time_reset * 1e-6
    assert cc.byte_counter_bytes == byte_reset and cc.fast_recovery_stages == threshold
    assert cc.min_rate_bps == min_rate * 1e6 and cc.initial_alpha == alpha0 / 1024
    f = cc.new_flow("qp", 400e9, 5e-6, 4096)
    # absolute rates: not scaled with the line rate as HPCC scales its 5/50 Mb/s per 25G
    assert (f.priv.rai, f.priv.rhai) == (ai * 1e6, hai * 1e6)
    assert cc.clamp_target == "after-increase"
    assert "dcqcn-cc-parameters" in PROFILES["nvidia"]["source"]
    assert all("source" in p for p in PROFILES.values())


def test_old_names_are_aliases() -> None:
    old = DCQCN(profile="default")
    assert old.profile == "paper"
    assert (old.fast_recovery_stages, old.byte_counter_bytes) == (5, 10_000_000)
    assert DCQCN(profile="ns3-hpcc").profile == "hpcc-ns3-mlx"


def _cuts_with_increase_between(cc: DCQCN, increase: str) -> tuple[float, float, float, float]:
    """Two cuts (none, a byte-counter or a timer increase between them), then a third 10 us
    later: (RC just before the second cut, RT after it, RC just before the third, RT after)."""
    f = cc.new_flow("qp", 400e9, 5e-6, 4096)
    cc.handle_cnp(CCEvent(0.0), f)
    if increase == "byte-counter":
        cc.handle_tx(CCEvent(1e-6, bytes=cc.byte_counter_bytes), f)
    elif increase == "timer":
        cc.handle_tick(cc.increase_interval_s + 1e-9, f)
    t = 10e-6 if increase != "timer" else cc.increase_interval_s + 2e-6
    rc = f.rate_bps
    cc.handle_cnp(CCEvent(t), f)
    rt = cc.target_rate(f)
    rc3 = f.rate_bps
    cc.handle_cnp(CCEvent(t + 10e-6), f)  # no increase since the second cut
    return rc, rt, rc3, cc.target_rate(f)


@pytest.mark.parametrize(
    ("clamp", "increase", "clamps"),
    [
        ("after-increase", "none", False),
        ("after-increase", "byte-counter", True),
        ("after-increase", "timer", True),
        ("after-byte-counter", "byte-counter", True),
        ("after-byte-counter", "timer", False),
        ("always", "none", True),
    ],
)
def test_a_cut_sets_the_target_as_the_clamp_rule_says(
    clamp: str, increase: str, clamps: bool
) -> None:
    """Mellanox's clamp_tgt_rate / clamp_tgt_rate_after_time_inc: with clamp_tgt_rate 0 a CNP
    sets RT = RC only if a rate increase came since the previous cut (any increase with
    ..._after_time_inc 1, a byte-counter one with 0); consecutive cuts keep the target. With
    clamp_tgt_rate 1 (the paper) every cut sets RT = RC."""
    cc = DCQCN(clamp_target=clamp)
    rc, rt, rc3, rt3 = _cuts_with_increase_between(cc, increase)
    assert rc3 < rc < 400e9  # the cuts took effect
    assert rt == (rc if clamps else 400e9)
    # the third cut came with no increase since the second
    assert rt3 == (rc3 if clamp == "always" else rt)


def test_nvidia_default_clamps_after_any_increase() -> None:
    rc, rt, _rc3, rt3 = _cuts_with_increase_between(DCQCN(), "byte-counter")
    assert rt == rc and rt3 == rt


def test_explicit_parameters_override_a_profile() -> None:
    cc = make_cc("dcqcn", {"profile": "hpcc-ns3-mlx", "increase_interval_s": 55e-6})
    assert cc.increase_interval_s == 55e-6 and cc.alpha_interval_s == 1e-6


def test_unknown_profile_is_refused_with_a_suggestion() -> None:
    with pytest.raises(ValueError, match="Did you mean 'hpcc-ns3-paper'"):
        DCQCN(profile="hpcc-paper")
    with pytest.raises(ValueError, match=r"unknown profile 'nvida'\. Did you mean 'nvidia'"):
        DCQCN(profile="nvida")
    with pytest.raises(ValueError, match=r"'after-incr'.*Did you mean 'after-increase'"):
        DCQCN(clamp_target="after-incr")
    r = CliRunner().invoke(
        app, ["validate", "quickstart", "--set", "cluster.nic.cc.params.profile=hpcc-papr"]
    )
    assert r.exit_code == 2 and "cluster.nic.cc.params" in r.output and "Did you mean" in r.output


@pytest.mark.parametrize(
    ("profile", "set_s", "want_s"),
    [("nvidia", None, 4e-6), ("paper", None, 50e-6), ("nvidia", 20e-6, 20e-6)],
)
def test_receiver_cnp_interval_is_the_profiles_unless_the_nic_sets_one(
    profile: str, set_s: float | None, want_s: float
) -> None:
    """The notification point's CNP interval: NVIDIA's min_time_between_cnps (4 us, the
    firmware default `mlxconfig` prints) under `nvidia`, the paper's 50 us under the others,
    and cluster.nic.cnp_interval when a scenario sets it. Checked through the NIC: a CE-marked
    packet 1 us after a CNP gets none, one `want_s` after gets one."""
    import simpy
    from podsim.fabric.network import Network
    from podsim.fabric.switch import SwitchConfig
    from podsim.fabric.topology import build_topology
    from podsim.nic.nic import NicConfig, RdmaNetwork

    net = Network(simpy.Environment(), build_topology("star", hosts=2), SwitchConfig(), seed=1)
    cfg = NicConfig(cc="dcqcn", cc_params={"profile": profile}, cnp_interval_s=set_s)
    rdma = RdmaNetwork(net, cfg, seed=1)
    gen = rdma.nics[0].cnp
    assert gen.interval_s == pytest.approx(want_s)
    assert gen.on_data("qp", True, 0.0) and not gen.on_data("qp", True, want_s * 0.99)
    assert gen.on_data("qp", True, want_s)
