"""Every run writes its straggler/bubble analysis as tables (critical, gpu_time, stragglers;
Parquet and CSV) and a per-GPU idle/bubble figure that the HTML report shows."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import podsim
import pytest
import yaml
from podsim.scenarios.report.plots import fig_gpu_idle
from podsim.scenarios.results.analysis import analyse
from podsim.scenarios.results.tables import ANALYSIS_TABLES, Results

KIB = 1024


@pytest.fixture(scope="module")
def straggler_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[podsim.Results, Path]:
    """8 ranks on a leaf-spine, dispatch + 5 us compute + combine; rank 5 computes 4x slower."""
    d = tmp_path_factory.mktemp("an")
    rows = [
        {"step": 0, "layer": 0, "phase": ph, "src_rank": s, "dst_rank": t, "bytes": 16 * KIB,
         "tokens": 1, "start_s": 0.0, "hop": "rdma"}
        for ph in ("dispatch", "combine") for s in range(8) for t in range(8) if s != t
    ]  # fmt: skip
    pd.DataFrame(rows).to_csv(d / "trace.csv", index=False)
    doc = {
        "name": "analysis",
        "seed": 2,
        "cluster": {"topology": {"name": "leaf-spine",
                                 "params": {"hosts_per_leaf": 4, "leaves": 2}}},
        "workload": {"trace": {"path": "trace.csv", "ranks": 8, "compute_time": "5us"}},
        "faults": [{"kind": "straggler", "rank": 5, "factor": 4.0}],
        "outputs": {"formats": ["parquet", "csv"], "plot_formats": ["png", "svg"], "report": True},
    }  # fmt: skip
    (d / "s.yaml").write_text(yaml.safe_dump(doc))
    out = d / "out"
    return podsim.run(d / "s.yaml", out=out), out


def test_analysis_tables_are_written_in_every_format(straggler_run) -> None:
    res, out = straggler_run
    for name in ANALYSIS_TABLES:
        for ext in ("parquet", "csv"):
            assert (out / f"{name}.{ext}").is_file(), (name, ext)
    crit = pd.read_parquet(out / "critical.parquet")
    # one row per (step, layer, phase) of the timeline; rank 5 set the compute phase's end
    assert list(crit["phase"]) == ["dispatch", "compute", "combine"]
    comp = crit[crit["phase"] == "compute"].iloc[0]
    assert comp["critical_rank"] == 5 and comp["own_s"] == pytest.approx(20e-6)
    gpu = pd.read_csv(out / "gpu_time.csv").set_index("rank")
    assert list(gpu.index) == list(range(8))
    makespan = res.summary["makespan_s"]
    # idle = the run's span minus compute, for every GPU (compute starts after t=0 dispatch)
    span = makespan - float(res.phases["start_s"].min())
    assert (gpu["idle_s"] + gpu["compute_s"]).to_numpy() == pytest.approx([span] * 8)
    assert gpu.loc[5, "compute_s"] == pytest.approx(20e-6)
    slow = pd.read_parquet(out / "stragglers.parquet")
    assert slow["rank"].iloc[0] == 5 and "4.00x" in slow["reason"].iloc[0]


def test_analysis_tables_read_back_equal_the_in_memory_ones(straggler_run) -> None:
    res, out = straggler_run
    back = Results.read(out)
    for name in ANALYSIS_TABLES:
        pd.testing.assert_frame_equal(back.analysis[name], res.analysis[name], check_dtype=False)
    # and equal to analysing the run again
    again = analyse(res).tables()
    pd.testing.assert_frame_equal(again["gpu_time"], res.analysis["gpu_time"])


def test_gpu_idle_figure_is_drawn_titled_and_in_the_report(straggler_run) -> None:
    res, out = straggler_run
    for ext in ("png", "svg"):
        assert (out / "plots" / f"gpu_idle.{ext}").stat().st_size > 0
    fig = fig_gpu_idle(res)
    ax = fig.axes[0]
    assert "idle and bubble" in ax.get_title()
    assert "(us)" in ax.get_ylabel() and "rank" in ax.get_xlabel()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "straggler" in labels and any("bubble" in t for t in labels)
    # bars are the gpu_time table in microseconds
    idle_bars = ax.containers[0]
    heights = [b.get_height() for b in idle_bars]
    assert heights == pytest.approx((res.analysis["gpu_time"]["idle_s"] * 1e6).tolist())
    html = (out / "report.html").read_text()
    assert "Per-GPU idle, bubble and tail time" in html


def test_gpu_idle_figure_without_analysis_computes_it_and_empty_run_has_none() -> None:
    phases = pd.DataFrame(
        {"step": 0, "layer": 0, "phase": ["dispatch", "dispatch"], "rank": [0, 1],
         "start_s": [0.0, 0.0], "end_s": [1e-6, 3e-6]}
    )  # fmt: skip
    empty = pd.DataFrame(columns=list(phases.columns))
    mk = lambda ph: Results(ph, ph, ph, ph, ph, {"scenario": "x"})  # noqa: E731
    fig = fig_gpu_idle(mk(phases))
    heights = [b.get_height() for b in fig.axes[0].containers[1]]  # bubbles
    assert heights == pytest.approx([0.0, 2.0])
    assert fig_gpu_idle(mk(empty)) is None


@pytest.mark.parametrize("slow_rank", [None, 3])
def test_expert_skew_is_load_not_a_straggler_but_a_slow_gpu_is(tmp_path, slow_rank) -> None:
    """quickstart with a strong expert skew (log-normal, max/mean 2.5) on the flow engine: the
    loaded ranks compute longer, which the analysis reports as load skew (> 1.5x the median)
    with no straggler; a straggler fault (2x) on one rank of the same run makes exactly that
    rank a straggler. The definition is written in the summary."""
    sets = ["engine=flow", "outputs.plots=false", "workload.moe.tokens_per_rank=64",
            "workload.moe.skew.kind=lognormal", "workload.moe.skew.max_mean=2.5"]  # fmt: skip
    doc_faults = (
        []
        if slow_rank is None
        else [f"faults=[{{kind: straggler, rank: {slow_rank}, factor: 2.0}}]"]
    )
    res = podsim.run("quickstart", overrides=[*sets, *doc_faults])
    a = res.summary["analysis"]
    assert "what its load predicts" in a["straggler_definition"]
    assert a["load_skew_max_vs_median"] > 1.5
    ranks = [s["rank"] for s in a["stragglers"]]
    assert ranks == ([] if slow_rank is None else [slow_rank])
