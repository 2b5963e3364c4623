"""A user's trace files with bad content: every error names the file and what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
from podsim.scenarios.cli.app import app
from typer.testing import CliRunner


def _cli(*args: str):
    return CliRunner().invoke(app, list(args))


def _clean(r) -> None:
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output


def _flat(r) -> str:
    return " ".join(r.output.split())


def _trace_with_header(path: Path, header: str, rows: list[str]) -> Path:
    cols = "step,layer,phase,src_rank,dst_rank,bytes,tokens,start_s,hop"
    path.write_text("\n".join([header, cols, *rows]) + "\n")
    return path


def test_trace_rank_beyond_its_recorded_count_names_the_file(scenario_dir: Path) -> None:
    # the file records 4 ranks; rank 9 was not silently taken as a 10-rank trace (which then
    # blamed cluster.rank_map for not fitting)
    header = '# podsim-trace-attrs: {"num_ranks": 4}'
    _trace_with_header(scenario_dir / "trace.csv", header, ["0,0,dispatch,9,0,4096,1,0.0,rdma"])
    r = _cli("validate", str(scenario_dir / "base.yaml"))
    assert r.exit_code == 2, r.output
    _clean(r)
    out = _flat(r)
    assert "key workload.trace.path" in out and "trace.csv" in out
    assert "rank 9" in out and "num_ranks=4" in out and "rank_map" not in out


def test_trace_with_a_broken_header_or_no_content_names_the_file(scenario_dir: Path) -> None:
    _trace_with_header(
        scenario_dir / "trace.csv", "# podsim-trace-attrs: {{", ["0,0,dispatch,1,0,4096,1,0,rdma"]
    )
    r = _cli("validate", str(scenario_dir / "base.yaml"))
    assert r.exit_code == 2 and "trace.csv" in _flat(r), r.output
    (scenario_dir / "trace.csv").write_text("")
    r = _cli("validate", str(scenario_dir / "base.yaml"))
    assert r.exit_code == 2 and "trace.csv" in _flat(r), r.output
    _clean(r)


def test_trace_with_columns_but_no_rows_is_refused(scenario_dir: Path) -> None:
    # ran as "complete" with an empty per-phase table
    _trace_with_header(scenario_dir / "trace.csv", '# podsim-trace-attrs: {"num_ranks": 4}', [])
    r = _cli("validate", str(scenario_dir / "base.yaml"))
    assert r.exit_code == 2, r.output
    _clean(r)
    out = _flat(r)
    assert "key workload.trace.path" in out and "has no messages" in out


def test_trace_header_that_is_not_a_mapping_is_bad_input(scenario_dir: Path) -> None:
    # was an internal error (TypeError, exit 1)
    _trace_with_header(
        scenario_dir / "trace.csv",
        "# podsim-trace-attrs: [1, 2]",
        ["0,0,dispatch,1,0,4096,1,0,rdma"],
    )
    r = _cli("validate", str(scenario_dir / "base.yaml"))
    assert r.exit_code == 2, r.output
    _clean(r)
    out = _flat(r)
    assert "key workload.trace.path" in out and "trace.csv" in out and "JSON object" in out


def test_a_zero_byte_row_of_a_trace_file_is_refused_not_dropped(tmp_path) -> None:
    from podsim.scenarios.errors import ScenarioError
    from podsim.scenarios.input.loader import load_scenario
    from podsim.scenarios.runner import preflight

    rows = ["step,layer,phase,src_rank,dst_rank,bytes,tokens,start_s,hop"]
    rows += ["0,0,dispatch,0,1,4096,8,0.0,rdma", "0,0,dispatch,1,2,0,0,0.0,rdma"]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    doc = {
        "name": "zero",
        "cluster": {"topology": {"name": "star", "params": {"hosts": 4}}},
        "workload": {"trace": {"path": str(tmp_path / "t.csv"), "compute_time": "1us"}},
    }
    sc, _ = load_scenario(doc)
    with pytest.raises(ScenarioError, match=r"1 row\(s\) have bytes = 0 \(data rows 2\)") as info:
        preflight(sc)
    assert info.value.path == "workload.trace.path"
