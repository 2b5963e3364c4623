"""benchmarks/validate_htsim.py states both simulators' scenarios like for like: its derived
settings equal what htsim prints for the same flags, both sides carry the same flows, and every
row's podsim scenario is valid."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "validate_htsim.py"


@pytest.fixture(scope="module")
def vh():
    spec = importlib.util.spec_from_file_location("validate_htsim", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["validate_htsim"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop("validate_htsim", None)


def test_derived_settings_equal_what_htsim_prints(vh) -> None:
    """htsim_uec (uet-htsim 40ccb05) with this script's flags printed, for the 128-host k=8
    fat-tree: ``_network_rtt=12506880`` ps, ``Tier 0 QueueSize Down 3140800 bytes``, ``Setting
    min RTO to 391.896`` us and ``Setting ECN to parameters low 128960 high 503360``. The script
    derives them from the formulas of main_uec.cpp; they must agree."""
    assert vh.network_rtt_s() == pytest.approx(12_506_880e-12, rel=1e-9)
    assert vh.queue_bytes() == 3_140_800
    assert vh.uec_min_rto_s() == pytest.approx(391.896e-6, rel=1e-6)
    ecn = vh.uec_switch()["ecn"]
    assert (ecn["kmin"], ecn["kmax"]) == ("128960B", "503360B")


@pytest.mark.parametrize("pattern", ["permutation", "all-to-all"])
def test_connection_matrix_carries_the_trace(vh, pattern: str) -> None:
    """The matrix htsim reads lists exactly the trace's flows (host numbers = podsim's nicN)."""
    import numpy as np

    tr = vh.traffic(pattern, seed=3)
    hosts = np.arange(vh.HOSTS)
    text = vh.connection_matrix(tr, hosts)
    lines = text.splitlines()
    assert lines[0] == f"Nodes {vh.HOSTS}" and lines[1] == f"Connections {len(lines) - 2}"
    got = sorted(
        tuple(int(x) for x in re.fullmatch(r"(\d+)->(\d+) id \d+ start 0 size (\d+)", ln).groups())
        for ln in lines[2:]
    )
    t = tr[tr["bytes"] > 0]
    want = sorted(zip(t.src_rank.tolist(), t.dst_rank.tolist(), t.bytes.tolist(), strict=True))
    assert got == want
    assert sum(b for *_, b in got) == int(t["bytes"].sum())


def test_every_row_builds_a_valid_podsim_scenario_with_hosts_in_htsim_order(vh) -> None:
    from podsim.scenarios.build.cluster import build_cluster

    for row in vh.ROWS:
        sc = vh.podsim_scenario(row, seed=1)
        assert sc.cluster.switch.adaptive_routing is row.adaptive
        # htsim models no QP-context cache: podsim's first-use fetch (1 us) is off
        assert sc.cluster.nic.qp_miss_penalty == 0, row.name
        assert sc.cluster.switch.store_and_forward, row.name  # as htsim's queues
        if not row.roce:
            assert sc.cluster.nic.ack_coalesce == vh.UEC_ACK_EVERY
            # loss by timeout only, as htsim without SLEEK: no tail-loss probe before the RTO
            assert sc.cluster.nic.reorder_window_min >= sc.cluster.nic.rto, row.name
            # one entropy value in htsim: NSCC must not move the flow to another path
            moves = sc.cluster.nic.cc.params.get("path_change_on_ecn", True)
            assert moves is not row.one_ev, row.name
        # htsim's AR compares queue levels whose first step is 5 % of the queue (157 kB here)
        want = 157_040 if row.adaptive else None
        assert sc.cluster.switch.adaptive_routing_quantum == want, row.name
    cluster = build_cluster(vh.podsim_scenario(vh.ROWS[0], seed=1), vh.HOSTS)
    idx = vh.host_index(cluster)
    assert sorted(idx.tolist()) == list(range(vh.HOSTS))
    # htsim numbers hosts leaf by leaf (4 per leaf at k=8): podsim's leaves hold the same sets
    g = cluster.graph
    for h in range(0, vh.HOSTS, 4):
        leaf = next(iter(g.neighbors(f"nic{h}.p0")))
        under = {n for n in g.neighbors(leaf) if n.startswith("nic")}
        assert under == {f"nic{h + i}.p0" for i in range(4)}


def _fake_htsim(tmp_path: Path, name: str, text: str, rc: int) -> Path:
    """A stand-in for an htsim binary: prints ``text`` and exits with ``rc``."""
    b = tmp_path / name
    b.write_text(f"#!/bin/sh\ncat <<'EOF'\n{text}\nEOF\nexit {rc}\n")
    b.chmod(0o755)
    return tmp_path


def test_a_reps_exit_is_a_seed_without_a_time_not_a_crash(vh, tmp_path: Path) -> None:
    """htsim's REPS ends the run on a retransmission timeout when trimming is off (uec_mp.cpp
    UecMpReps::processEv, printed as below): that seed has no completion time and is counted as
    exited; the row's mean is over the other seeds. Any other failure still stops the script."""
    row = next(r for r in vh.ROWS if r.name == "perm-single")
    log = (
        "Flow Uec_1_2 flowId 1 uecSrc 0 finished at 374.688 total messages 1\n"
        "413.836REPS currently requires trimming in this implementation."
    )
    side = vh.run_htsim(row, _fake_htsim(tmp_path, "htsim_uec", log, 1), "cm", 13, None)
    assert "exited" in side.extra and side.flows == 1
    assert side.makespan_s != side.makespan_s  # NaN: no time for the row's mean
    m, se = vh.mean_se([400e-6, side.makespan_s, 380e-6])
    assert m == pytest.approx(390e-6) and se == pytest.approx(10e-6)
    with pytest.raises(SystemExit, match="exit 1"):
        vh.run_htsim(row, _fake_htsim(tmp_path, "htsim_uec", "Segmentation fault", 1), "c", 1, None)


def test_relative_error_se_combines_both_means(vh) -> None:
    """(a - b) / b with independent means: SE = (a / b) sqrt((sa / a)^2 + (sb / b)^2)."""
    assert vh.rel_se(110.0, 0.0, 100.0, 0.0) == 0.0
    assert vh.rel_se(100.0, 3.0, 100.0, 4.0) == pytest.approx(0.05)
    m1, se1 = vh.mean_se([1.0])
    assert m1 == 1.0 and se1 != se1  # one value: no standard error


def test_every_link_takes_htsims_hop_latency(vh) -> None:
    """htsim's -hop_latency (1 us) is all of a link's delay; podsim's link is fibre at 5 ns/m
    plus its PHY's FEC latency, so each link's fibre is shortened by that: the two add up to
    1 us on every link of every row (with 200 m of fibre each hop was 101 ns longer, 1.2 us on
    a cross-pod flow's data and ACK)."""
    from podsim.fabric.phy import PROPAGATION_S_PER_M, get_phy
    from podsim.scenarios.build.cluster import build_cluster

    for row in (vh.ROWS[0], next(r for r in vh.ROWS if r.roce)):
        g = build_cluster(vh.podsim_scenario(row, seed=1), vh.HOSTS).graph
        for _u, _v, d in g.edges(data=True):
            delay = d["length_m"] * PROPAGATION_S_PER_M + get_phy(d["phy"]).fec_latency_s
            assert delay == pytest.approx(1e-6, rel=1e-6), d


def test_one_path_row_gives_both_sides_the_same_larger_queues(vh) -> None:
    """perm-single runs htsim with -q (packets) and podsim with the same per-port buffer and
    the RTO htsim derives from it; the other UEC rows keep htsim's default 5 x BDP (no -q)."""
    bdp = vh.bdp_packets()
    for row in vh.ROWS:
        if row.roce:
            continue
        cmd = vh.htsim_command(row, Path("htsim_uec"), Path("m.cm"), 1)
        sc = vh.podsim_scenario(row, seed=1)
        q = row.queue_bdp * bdp * (vh.MSS + vh.UEC_HDR)
        assert sc.cluster.switch.buffer_per_port == q
        rto = 15e-6 + q * vh.DIAMETER_HOPS * 8 / vh.LINK_BPS  # main_uec.cpp _min_rto
        assert sc.cluster.nic.rto == pytest.approx(rto, abs=1e-9)
        if row.name == "perm-single":
            assert row.queue_bdp == 10 and cmd[cmd.index("-q") + 1] == str(10 * bdp)
        else:
            assert row.queue_bdp == 5 and "-q" not in cmd
