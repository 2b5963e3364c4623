"""Link utilisation per phase (scenarios.results.phase_links): the partition of the run's time
into phases, bytes per phase from sampled counters, and a packet-engine run with an idle
compute phase against its closed form."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import podsim
import pytest
import yaml
from podsim.fabric.packet import ROCE_OVERHEAD
from podsim.scenarios.results.phase_links import (
    IDLE,
    LinkSeries,
    links_by_phase,
    phase_segments,
)

from tests.scenarios.conftest import base_doc, write_trace_csv


def _phases(rows: list[tuple[int, int, str, int, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["step", "layer", "phase", "rank", "start_s", "end_s"])


def test_segments_partition_time_with_communication_over_compute() -> None:
    # rank 1 still dispatches while rank 0 computes; combine of layer 0 meets dispatch of layer 1
    ph = _phases([
        (0, 0, "dispatch", 0, 0.0, 2.0), (0, 0, "dispatch", 1, 0.0, 3.0),
        (0, 0, "compute", 0, 2.0, 6.0), (0, 0, "compute", 1, 3.0, 6.5),
        (0, 0, "combine", 0, 6.0, 8.0), (0, 0, "combine", 1, 6.5, 9.0),
        (0, 1, "dispatch", 0, 8.5, 10.0), (0, 1, "dispatch", 1, 9.0, 10.5),
    ])  # fmt: skip
    seg = phase_segments(ph, 12.0)
    assert seg["phase"].tolist() == [
        "dispatch", "compute", "combine", "dispatch+combine", "dispatch", IDLE,
    ]  # fmt: skip
    assert seg["start_s"].tolist() == [0.0, 3.0, 6.0, 8.5, 9.0, 10.5]
    assert seg["end_s"].tolist() == [3.0, 6.0, 8.5, 9.0, 10.5, 12.0]


def test_bytes_per_phase_from_a_sampled_counter() -> None:
    # one link at 100 % for 10 s, idle 20 s, 50 % for 10 s (rate 8 bit/s = 1 B/s)
    t = np.arange(0.0, 41.0)
    rate = np.r_[np.ones(10), np.zeros(20), 0.5 * np.ones(10)]
    cum = np.r_[0.0, np.cumsum(rate)][:, None]
    series = LinkSeries(times=t, links=["a->b"], tx_bytes=cum, interval_s=1.0)
    seg = pd.DataFrame({"start_s": [0.0, 10.0, 30.0], "end_s": [10.0, 30.0, 40.0],
                        "phase": ["dispatch", "compute", "combine"]})  # fmt: skip
    links = pd.DataFrame({"link": ["a->b"], "tier": ["nic-leaf"], "rate_bps": [8.0]})
    df = links_by_phase(links, series, seg).set_index("phase")
    assert df.loc["dispatch", "utilisation"] == pytest.approx(1.0)
    assert df.loc["compute", "utilisation"] == pytest.approx(0.0)
    assert df.loc["combine", "utilisation"] == pytest.approx(0.5)
    assert df["bytes"].sum() == 15 and df["seconds"].sum() == pytest.approx(40.0)
    # a boundary between samples is interpolated
    mid = pd.DataFrame({"start_s": [0.0, 5.5], "end_s": [5.5, 40.0], "phase": ["x", "y"]})
    assert links_by_phase(links, series, mid).set_index("phase").loc["x", "bytes"] == 6  # 5.5


def _two_phase(d: Path, interval: str) -> podsim.Results:
    """4 NICs on one switch: an all-to-all dispatch, 50 us of compute on every rank, combine;
    counters sampled every ``interval``."""
    write_trace_csv(d / "trace.csv", ranks=4, size=256 * 1024)
    doc = base_doc()
    doc["workload"]["trace"]["compute_time"] = "50us"
    doc["sim"]["sample_interval"] = interval
    (d / "s.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return podsim.run(d / "s.yaml")


@pytest.fixture(scope="module")
def two_phase(tmp_path_factory: pytest.TempPathFactory) -> podsim.Results:
    """The two-phase run sampled every 100 ns (a phase boundary placed to 100 ns)."""
    return _two_phase(tmp_path_factory.mktemp("twophase"), "100ns")


def _closed_form_dispatch(res: podsim.Results, rank: int) -> float:
    """Wire bytes rank's NIC sends in dispatch (payload + RoCEv2 framing per MTU packet) over
    its rate x the dispatch phase's time."""
    m = res.messages
    sent = m[(m["phase"] == "dispatch") & (m["src_rank"] == rank) & (m["hop"] == "rdma")]
    mtu = 4096
    wire = float(sum(b + -(-b // mtu) * ROCE_OVERHEAD for b in sent["bytes"]))
    t = res.summary["phases"]["dispatch"]["completion_time_s"]
    return 8.0 * wire / (400e9 * t)


def test_nic_link_busy_in_dispatch_idle_in_compute(two_phase: podsim.Results) -> None:
    res = two_phase
    lbp = res.links_by_phase
    assert {"dispatch", "compute", "combine"} <= set(lbp["phase"])
    up = lbp[lbp["link"].str.startswith("nic0") & (lbp["tier"] == "nic-leaf")].set_index("phase")
    assert len(up) >= 3
    expect = _closed_form_dispatch(res, 0)
    # ACKs of the received messages ride the same uplink: a few percent above the payload
    assert up.loc["dispatch", "utilisation"] == pytest.approx(expect, rel=0.05)
    assert up.loc["compute", "utilisation"] < 1e-3
    whole = float(res.links.set_index("link").loc[up["link"].iloc[0], "utilisation"])
    assert up.loc["compute", "utilisation"] < whole < up.loc["dispatch", "utilisation"]
    # the phases' time is the run's time, and dispatch's is its completion time
    assert up["seconds"].sum() == pytest.approx(res.summary["makespan_s"], rel=1e-9)
    assert up.loc["dispatch", "seconds"] == pytest.approx(
        res.summary["phases"]["dispatch"]["completion_time_s"], rel=1e-9
    )


def test_boundary_error_within_one_sample_interval(tmp_path: Path) -> None:
    """At the default 1 us sampling the idle compute phase gets at most the bytes a link sends
    in one interval at each of its two boundaries (phase_links' stated resolution)."""
    res = _two_phase(tmp_path, "1us")
    lbp = res.links_by_phase
    comp = lbp[(lbp["phase"] == "compute") & (lbp["tier"] == "nic-leaf")]
    assert len(comp) == 8
    assert (comp["bytes"] <= 2 * 400e9 / 8 * 1e-6).all()
    assert comp["utilisation"].max() < 0.02


def test_bytes_per_phase_sum_to_the_run(two_phase: podsim.Results) -> None:
    res = two_phase
    per = res.links_by_phase.groupby("link")["bytes"].sum()
    whole = res.links.set_index("link")["tx_bytes"].reindex(per.index)
    assert len(per) > 0 and (per == whole).all()
    s = res.summary["link_utilisation_by_phase"]
    assert s["queues_modelled"] and s["contention_threshold_bytes"] == 2 * 4096
    disp = s["phases"]["dispatch"]
    assert disp["busiest"] and disp["busiest"][0]["utilisation"] == pytest.approx(
        res.links_by_phase.query("phase == 'dispatch'")["utilisation"].max()
    )
    # hottest are the contended ones only
    assert all(h["max_queue_bytes"] > 8192 for h in disp["hottest"])
    assert disp["contended_links"] == len(
        res.links_by_phase.query("phase == 'dispatch' and max_queue_bytes > 8192 and bytes > 0")
    )


def test_phase_table_is_deterministic_and_written(
    two_phase: podsim.Results, tmp_path: Path
) -> None:
    res = two_phase
    again = podsim.run(res.scenario)
    pd.testing.assert_frame_equal(again.links_by_phase, res.links_by_phase)
    res.write(tmp_path, ("parquet",))
    back = podsim.Results.read(tmp_path)
    pd.testing.assert_frame_equal(back.links_by_phase, res.links_by_phase, check_dtype=False)


def test_engines_without_series_leave_the_table_empty(tmp_path: Path) -> None:
    write_trace_csv(tmp_path / "trace.csv")
    doc = base_doc()
    doc["engine"] = "bound"
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    res = podsim.run(tmp_path / "s.yaml")
    assert res.links_by_phase.empty and "link_utilisation_by_phase" not in res.summary


def test_flow_engine_spreads_each_flow_over_its_sending_time(tmp_path: Path) -> None:
    """The flow engine keeps no rate history: each flow's bytes go to the phase that holds it,
    so the idle compute phase gets none and every link's bytes add up to its total."""
    write_trace_csv(tmp_path / "trace.csv", ranks=4, size=256 * 1024)
    doc = base_doc()
    doc["engine"] = "flow"
    doc["workload"]["trace"]["compute_time"] = "50us"
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    res = podsim.run(tmp_path / "s.yaml")
    lbp = res.links_by_phase
    assert {"dispatch", "compute", "combine"} <= set(lbp["phase"])
    assert (lbp.loc[lbp["phase"] == "compute", "bytes"] == 0).all()
    per = lbp.groupby("link")["bytes"].sum()
    whole = res.links.set_index("link")["tx_bytes"].reindex(per.index)
    assert (per - whole).abs().max() <= 3  # each phase's bytes rounded once
    up = lbp[lbp["link"].str.startswith("nic0") & (lbp["tier"] == "nic-leaf")]
    up = up.set_index("phase")
    assert up.loc["dispatch", "utilisation"] == pytest.approx(_closed_form_dispatch(res, 0),
                                                              rel=0.05)  # fmt: skip
    s = res.summary["link_utilisation_by_phase"]
    assert s["queues_modelled"] is False
    assert s["phases"]["dispatch"]["contended_links"] is None
    assert s["phases"]["dispatch"]["hottest"] == []


def test_packet_engine_scaleup_links_are_measured_per_phase() -> None:
    """quickstart's NVLink pipes are fluid on the packet engine: each transfer's bytes over its
    sending time, so the scale-up tier is busy in dispatch and combine, idle in compute, and
    its bytes add up to the links table's."""
    res = podsim.run("quickstart", overrides=["workload.moe.tokens_per_rank=16"])
    lbp = res.links_by_phase
    su = lbp[lbp["tier"] == "gpu-scaleup"]
    assert su["link"].nunique() == 32
    by = su.groupby("phase")["utilisation"].max()
    assert by["dispatch"] > 0.05 and by["combine"] > 0.05 and by["compute"] == 0.0
    per = lbp.groupby("link")["bytes"].sum()
    whole = res.links.set_index("link")["tx_bytes"].reindex(per.index)
    assert len(per) == len(res.links) and (per - whole).abs().max() <= 3


def test_printed_summary_names_the_busiest_link_per_phase_on_80_columns(
    two_phase: podsim.Results,
) -> None:
    from rich.console import Console

    console = Console(width=80, record=True, force_terminal=False)
    for t in two_phase.summary_tables():
        console.print(t)
    text = console.export_text()
    assert "links while each phase runs" in text and "…" not in text
    busy = two_phase.summary["link_utilisation_by_phase"]["phases"]["dispatch"]["busiest"][0]
    flat = "".join(text.replace("│", "").split())  # link names may fold onto a second line
    assert busy["link"] in flat
    assert "Contended = its queue held more than 2 MTU (8 KiB)" in " ".join(text.split())


def test_spread_bytes_are_the_same_whatever_the_chunk_of_times(monkeypatch) -> None:
    """SpreadLinkBytes.at bounds its memory by evaluating a few times at once on large runs;
    each link's sum runs over the transfers in one order, so the figures are bit-identical."""
    import scipy.sparse as sps
    from podsim.scenarios.results import phase_links
    from podsim.scenarios.results.phase_links import SpreadLinkBytes

    rng = np.random.default_rng(5)
    n, links = 3000, 40
    t0 = np.sort(rng.uniform(0, 1e-3, n))
    t1 = t0 + rng.uniform(0, 2e-4, n)
    t1[::17] = np.nan  # never finished
    t1[::23] = t0[::23]  # zero-length
    mat = sps.random_array((n, links), density=0.1, rng=rng, format="csr") * 1e6
    spread = SpreadLinkBytes([f"l{i}" for i in range(links)], t0, t1, mat)
    times = np.sort(rng.uniform(0, 1.3e-3, 150))
    whole = spread.at(times)
    monkeypatch.setattr(phase_links, "SPREAD_CHUNK", 2 * n)  # two times per product
    assert np.array_equal(spread.at(times), whole)
    monkeypatch.setattr(phase_links, "SPREAD_CHUNK", 1)  # one time per product
    assert np.array_equal(spread.at(times), whole)


@pytest.mark.parametrize(
    ("scenario", "sets"),
    [
        (
            "train-1t-moe",
            [
                "workload.training.microbatches=2",
                "cluster.params.nodes=4",
                "workload.training.pp=2",
                "workload.training.ep=8",
                "workload.training.layers=2",
            ],
        ),
        ("collectives", ["variant=hierarchical"]),
        ("collectives", ["variant=ring", "cluster.nic.multipath.selector=ecmp"]),
    ],
)
def test_flow_link_bytes_share_bundle_columns_with_the_figures_of_one_per_link(
    monkeypatch, scenario: str, sets: list[str]
) -> None:
    """The flow engine's link bytes keep one column per bundle whose members nothing else
    reaches; every link's cumulative bytes are those of the readable record (each flow on
    every member link), bit for bit, at every time."""
    from podsim.scenarios.engines.flow import FlowTransport

    seen = []
    compact = FlowTransport.link_bytes

    def both(self):
        fast, slow = compact(self), self._link_bytes_readable()
        seen.append((fast, slow))
        return fast

    monkeypatch.setattr(FlowTransport, "link_bytes", both)
    podsim.run(scenario, overrides=["engine=flow", "outputs.plots=false", *sets])
    ((fast, slow),) = seen
    assert fast.links == slow.links
    assert fast.bytes.nnz <= slow.bytes.nnz
    end = np.nanmax(slow.t1)
    times = np.r_[np.linspace(0.0, end * 1.01, 97), slow.t0[::7], slow.t1[::5]]
    assert np.array_equal(fast.at(times), slow.at(times))
