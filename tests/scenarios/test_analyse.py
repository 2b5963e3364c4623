"""podsim analyse: bubbles, exposed communication and slow ranks of traces and runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from podsim.scenarios.cli.app import app
from podsim.scenarios.errors import ScenarioError
from podsim.scenarios.report.analyse import SLOW_FACTOR, analyse_dir
from typer.testing import CliRunner

TRACES = Path(__file__).resolve().parents[2] / "scenarios" / "library" / "traces"


def _slow_copy(tmp_path: Path, rank: int, factor: float) -> Path:
    """The shipped Kineto example with one rank's GEMM ``factor`` x longer (later events on its
    streams shifted by the extra time)."""
    out = tmp_path / "kineto"
    shutil.copytree(TRACES / "kineto-2rank", out)
    f = out / f"kineto.{rank}.json"
    doc = json.loads(f.read_text())
    extra = 0.0
    for ev in doc["traceEvents"]:
        if ev.get("cat") != "kernel":
            continue
        ev["ts"] += extra
        if "gemm" in ev["name"]:
            extra = ev["dur"] * (factor - 1)
            ev["dur"] *= factor
    f.write_text(json.dumps(doc))
    return out


def test_the_shipped_traces_split_into_compute_communication_and_idle() -> None:
    a = analyse_dir(TRACES / "kineto-2rank")
    b = a.breakdown
    parts = b.drop(columns=["rank", "span_s"]).sum(axis=1)
    assert (parts - b["span_s"]).abs().max() < 1e-12
    # rank 0: 200 us GEMM + 30 us elementwise; rank 1: 250 + 30 (workloads/example_traces.py)
    assert b.set_index("rank")["compute"].round(9).to_dict() == {0: 230e-6, 1: 280e-6}
    assert {"all-reduce", "all-gather"} <= set(b.columns)
    assert a.slow.empty  # 280 / 255 (the median of two) is under the factor


def test_an_injected_slow_rank_is_flagged_with_its_delay(tmp_path: Path) -> None:
    a = analyse_dir(_slow_copy(tmp_path, rank=1, factor=3.0))
    slow = a.slow[a.slow["slow_in"] == "compute"]
    assert slow["rank"].tolist() == [1]
    row = slow.iloc[0]
    assert row["time_s"] == pytest.approx(780e-6)
    assert row["vs_median"] >= SLOW_FACTOR
    assert row["delay_s"] == pytest.approx(780e-6 - (230e-6 + 780e-6) / 2)


def test_a_training_run_reports_the_bubble_per_stage(tmp_path: Path) -> None:
    import podsim

    sc = {
        "name": "t",
        "engine": "flow",
        "cluster": {"preset": "h800-deepep", "params": {"nodes": 1}},
        "workload": {"training": {"pp": 4, "layers": 4, "microbatches": 4, "seq_len": 512}},
        "outputs": {"plots": False},
    }
    podsim.run(sc, out=tmp_path / "run")
    a = analyse_dir(tmp_path / "run")
    assert a.stages is not None
    st = a.stages.groupby("stage")["wait_s"].sum()
    assert sorted(st.index) == [0, 1, 2, 3]
    # the last stage starts last: it waits longest before its first forward
    first_f = a.stages[(a.stages["microbatch"] == 0) & (a.stages["pass"] == "F")]
    assert first_f.set_index("stage")["wait_s"].is_monotonic_increasing
    assert a.breakdown["idle"].mean() > 0


def test_cli_prints_the_tables_and_refuses_what_it_cannot_analyse(tmp_path: Path) -> None:
    cli = CliRunner()
    r = cli.invoke(
        app, ["analyse", str(_slow_copy(tmp_path, 1, 3.0)), "--out", str(tmp_path / "o")]
    )
    assert r.exit_code == 0, r.output
    assert "slow ranks" in r.output and "exposed all-reduce" in r.output
    assert (tmp_path / "o" / "analysis_slow.parquet").is_file()
    r = cli.invoke(app, ["analyse", str(tmp_path / "nothing")])
    assert r.exit_code == 2 and "not a folder" in r.output
    with pytest.raises(ScenarioError, match="neither a result folder"):
        analyse_dir(tmp_path / "o")


def test_an_nccl_kernel_without_its_arguments_is_an_error_naming_the_file(tmp_path: Path) -> None:
    out = tmp_path / "kineto"
    shutil.copytree(TRACES / "kineto-2rank", out)
    f = out / "kineto.0.json"
    doc = json.loads(f.read_text())
    for ev in doc["traceEvents"]:
        if ev.get("cat") == "kernel" and ev["name"].startswith("ncclDevKernel_AllReduce"):
            ev["args"] = {"stream": ev["args"]["stream"]}
    f.write_text(json.dumps(doc))
    r = CliRunner().invoke(app, ["analyse", str(out)])
    assert r.exit_code == 2, r.output
    assert "kineto.0.json" in r.output and "Collective name" in r.output


def test_chakra_traces_are_replayed_with_free_communication(tmp_path: Path) -> None:
    from podsim.workloads.chakra import chakra_graph
    from podsim.workloads.graph import COMPUTE

    a = analyse_dir(TRACES / "chakra-4rank")
    assert "free communication" in a.source
    # each rank's compute is what the trace records; its communication is free, so the rank's
    # span ends where the replay's last compute on it ends
    g = chakra_graph(TRACES / "chakra-4rank")
    arr = g.arrays()
    comp = arr.kind == COMPUTE
    for rank, row in a.breakdown.set_index("rank").iterrows():
        mine = comp & (arr.rank == rank)
        assert row["compute"] == pytest.approx(arr.duration_s[mine].sum(), rel=1e-9)
    assert not any(c.startswith("exposed") and a.breakdown[c].sum() > 0
                   for c in a.breakdown.columns)  # fmt: skip
    r = CliRunner().invoke(app, ["analyse", str(TRACES / "chakra-4rank")])
    assert r.exit_code == 0 and "free communication" in r.output
