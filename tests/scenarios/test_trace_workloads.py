"""workload.chakra and workload.kineto: imported traces run end to end through `podsim run`,
and bad input is an error naming the key (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from podsim.scenarios.cli.app import app
from podsim.workloads.chakra import COMP_NODE, EtNode, write_et
from podsim.workloads.example_traces import DEFAULT_DIR
from typer.testing import CliRunner

CLUSTER = """
seed: 1
engine: flow
cluster:
  topology:
    name: leaf-spine
    params: {hosts_per_leaf: 2, leaves: 2}
  nic: {mtu: 4KiB, cc: {name: dcqcn}}
"""


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["run", *args])
    return res.exit_code, res.output


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def test_chakra_library_scenario_runs_and_carries_every_byte(tmp_path: Path) -> None:
    code, text = _run(
        "chakra-4rank", "--out", str(tmp_path / "out"), "--set", "outputs.plots=false"
    )
    assert code == 0, text
    s = _summary(tmp_path / "out")
    assert s["status"] == "complete" and s["ranks"] == 4
    # 6 ring steps x 4 ranks of 256 KiB and 4 sends of 64 KiB (the trace's own sizes)
    assert s["messages"]["count"] == 28 and s["messages"]["unfinished"] == 0
    assert s["messages"]["bytes"] == 24 * (1 << 18) + 4 * (1 << 16)
    # the recorded compute on the slowest path (130 + 50 + 20 us) is a floor of the run time
    assert s["sim_time_s"] > 200e-6


def test_kineto_scenario_file_with_a_list_of_files_runs(tmp_path: Path) -> None:
    files = sorted(str(p) for p in (DEFAULT_DIR / "kineto-2rank").glob("*.json"))
    doc = tmp_path / "k.yaml"
    doc.write_text(
        "name: k\n"
        + CLUSTER
        + "workload:\n  kineto:\n    gaps: false\n    path:\n"
        + "".join(f"      - {f}\n" for f in files)
        + "outputs: {plots: false}\n"
    )
    code, text = _run(str(doc), "--out", str(tmp_path / "out"))
    assert code == 0, text
    s = _summary(tmp_path / "out")
    assert s["status"] == "complete" and s["ranks"] == 2
    assert s["messages"]["bytes"] == 4 * (1 << 19) + 2 * (1 << 18)


def test_a_straggler_fault_slows_an_imported_rank(tmp_path: Path) -> None:
    base = ["--set", "outputs.plots=false"]
    assert _run("chakra-4rank", "--out", str(tmp_path / "a"), *base)[0] == 0
    code, text = _run(
        "chakra-4rank", "--out", str(tmp_path / "b"), *base,
        "--set", "faults=[{kind: straggler, rank: 3, factor: 2}]",
    )  # fmt: skip
    assert code == 0, text
    slow, fast = _summary(tmp_path / "b")["sim_time_s"], _summary(tmp_path / "a")["sim_time_s"]
    # rank 3's forward, backward and optimizer (130 + 50 + 20 us) take twice as long; the
    # forward gates the all-reduce, so the run grows by at least the forward's 130 us
    assert slow - fast > 130e-6


@pytest.mark.parametrize(
    ("setting", "needle"),
    [
        ("workload.chakra.path=nowhere", "no trace files"),
        ("cluster.topology.params.leaves=1", "4 ranks do not fit the cluster"),
        ("workload.chakra.compute_scale=0", "compute_scale"),
    ],
)
def test_bad_chakra_settings_exit_2_naming_the_key(
    tmp_path: Path, setting: str, needle: str
) -> None:
    code, text = _run("chakra-4rank", "--out", str(tmp_path / "o"), "--set", setting)
    assert code == 2, text
    assert "workload.chakra" in text or "cluster" in setting
    assert needle in " ".join(text.split())
    assert "Traceback" not in text


def test_a_malformed_trace_exits_2_naming_key_file_and_node(tmp_path: Path) -> None:
    for r in range(2):
        write_et(tmp_path / f"t.{r}.et", [EtNode(1, "c", COMP_NODE), EtNode(2, "odd", 99)])
    doc = tmp_path / "c.yaml"
    doc.write_text("name: c\n" + CLUSTER + "workload:\n  chakra: {path: t}\n")
    code, text = _run(str(doc), "--out", str(tmp_path / "o"))
    flat = " ".join(text.split())
    assert code == 2, text
    assert "workload.chakra.path" in flat and "t.0.et" in flat and "node 2 (odd)" in flat
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "a.0.json").write_text("[1, 2]")
    doc.write_text("name: c\n" + CLUSTER + "workload:\n  kineto: {path: k}\n")
    code, text = _run(str(doc), "--out", str(tmp_path / "o2"))
    flat = " ".join(text.split())
    assert code == 2, text
    assert "workload.kineto.path" in flat and "a.0.json" in flat and "traceEvents" in flat


def test_podsim_trace_writes_an_imported_traces_messages(tmp_path: Path) -> None:
    from podsim.workloads.trace import read_trace

    res = CliRunner().invoke(app, ["trace", "chakra-4rank", "-o", str(tmp_path / "t.parquet")])
    assert res.exit_code == 0, res.output
    assert "operation graph" in res.output
    df = read_trace(tmp_path / "t.parquet")
    assert len(df) == 28 and int(df["bytes"].sum()) == 24 * (1 << 18) + 4 * (1 << 16)


def test_a_straggler_outside_the_ranks_of_a_graph_workload_is_refused(tmp_path) -> None:
    """As for the layer-timeline workloads (with_stragglers), every graph workload refuses a
    straggler rank the run does not have, at its key."""
    import podsim
    from podsim.scenarios.errors import ScenarioError

    sc = {
        "name": "c",
        "engine": "flow",
        "cluster": {"topology": {"name": "star", "params": {"hosts": 4}}},
        "workload": {"collective": {"op": "all-reduce", "size": 1 << 20, "compute_time": 1e-5}},
        "faults": [{"kind": "straggler", "rank": 9, "factor": 2.0}],
        "outputs": {"plots": False},
    }
    with pytest.raises(ScenarioError) as exc:
        podsim.run(sc)
    assert exc.value.path == "faults[0].rank" and "straggler rank 9" in str(exc.value)
