"""The podsim command: run (quickstart by default), validate, show, list, trace, plot, report,
and how it fails (bad input, Ctrl-C, internal errors)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import podsim.scenarios.cli.app as cli
import pytest
import yaml
from podsim.scenarios.cli.app import app
from podsim.scenarios.report.plots import FIGURES
from podsim.scenarios.results.tables import TABLES
from typer.testing import CliRunner

from tests.scenarios.conftest import SMALL


def test_run_without_file_runs_quickstart_and_writes_everything(quickstart_dir: Path) -> None:
    for name in TABLES:
        assert (quickstart_dir / f"{name}.parquet").is_file()
        # Parquet only by default: outputs.formats adds CSV on request (issue 19)
        assert not (quickstart_dir / f"{name}.csv").exists()
    summary = json.loads((quickstart_dir / "summary.json").read_text())
    assert summary["scenario"] == "quickstart" and summary["status"] == "complete"
    # quickstart's kernels fit the default kernel_memory: every message read from their buffers
    assert summary["traffic"] == {"source": "kernels", "kernel_ranks": 16, "ranks": 16}
    resolved = yaml.safe_load((quickstart_dir / "resolved.yaml").read_text())
    assert resolved["workload"]["moe"]["tokens_per_rank"] == 16
    for fig in [*FIGURES, "topology"]:
        for ext in ("png", "svg"):
            p = quickstart_dir / "plots" / f"{fig}.{ext}"
            assert p.is_file() and p.stat().st_size > 1000, p
    msgs = pd.read_parquet(quickstart_dir / "messages.parquet")
    assert (msgs["status"] == "complete").all()
    assert set(msgs["hop"]) == {"rdma", "scaleup", "local"}


def test_resolved_yaml_reruns_identically(quickstart_dir: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(quickstart_dir / "resolved.yaml"),
            "--out",
            str(tmp_path),
            "-q",
            "--set",
            "outputs.plots=false",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.output == ""
    a = pd.read_parquet(quickstart_dir / "messages.parquet")
    b = pd.read_parquet(tmp_path / "messages.parquet")
    pd.testing.assert_frame_equal(a, b)


def test_plot_and_report_from_a_result_folder(quickstart_dir: Path) -> None:
    runner = CliRunner()
    for png in (quickstart_dir / "plots").glob("*.png"):
        png.unlink()
    r = runner.invoke(app, ["plot", str(quickstart_dir)])
    assert r.exit_code == 0, r.output
    pngs = sorted((quickstart_dir / "plots").glob("*.png"))
    assert len(pngs) == len(FIGURES) + 1
    r = runner.invoke(app, ["report", str(quickstart_dir)])
    assert r.exit_code == 0, r.output
    html = (quickstart_dir / "report.html").read_text()
    assert html.count("<img ") == len(pngs)
    assert html.count("data:image/png;base64,") == len(pngs)
    assert "all-to-all completion time" in html and "tokens_per_rank: 16" in html


def test_validate_show_list() -> None:
    runner = CliRunner()
    r = runner.invoke(app, ["validate", "deepep-h800", "--set", "variant=ep32"])
    assert r.exit_code == 0 and "valid" in r.output
    r = runner.invoke(app, ["show", "quickstart", "--seed", "5"])
    shown = yaml.safe_load(r.output)
    assert shown["seed"] == 5
    assert shown["cluster"]["switch"]["ecn"]["kmin"] == "150KB"  # a default, filled in
    r = runner.invoke(app, ["list"])
    assert r.exit_code == 0
    for word in ("scenarios", "quickstart", "congestion control", "dcqcn", "path selectors",
                 "spray", "h800-deepep", "deepseek-v3", "engines", "packet"):  # fmt: skip
        assert word in r.output, word
    r = runner.invoke(app, ["list", "cc"])
    assert "hpcc" in r.output and "quickstart" not in r.output
    assert runner.invoke(app, ["list", "nonsense"]).exit_code == 2


def test_trace_command_writes_the_workload(tmp_path: Path) -> None:
    from podsim.workloads import read_trace

    out = tmp_path / "t.parquet"
    r = CliRunner().invoke(app, ["trace", "quickstart", "-o", str(out), *SMALL])
    assert r.exit_code == 0, r.output
    df = read_trace(out)
    assert len(df) > 0 and set(df["phase"]) == {"dispatch", "combine"}
    assert f"wrote {len(df)} messages" in r.output


def test_kernel_buffers_over_kernel_memory_are_bad_input() -> None:
    r = CliRunner().invoke(
        app,
        [
            "run",
            "quickstart",
            *SMALL,
            "--set",
            "workload.moe.traffic_source=kernels",
            "--set",
            "workload.moe.kernel_memory=1MB",
        ],
    )
    assert r.exit_code == 2, r.output
    text = " ".join(r.output.split())
    assert "workload.moe.kernel_memory" in text and "kernel_memory = 1000000 B" in text


def test_kernel_buffers_that_disagree_with_the_counts_stop_the_run(monkeypatch) -> None:
    import podsim.workloads.moe as moe
    from podsim.workloads.kernel_traffic import KernelTraffic
    from podsim.workloads.layout import EPLayout

    real = moe.kernel_traffic

    def one_row_lost(*args, **kwargs):  # a kernel that drops one row of rank 0 -> rank 1
        kt = real(*args, **kwargs)
        lay = kt.layout
        tokens = lay.pair_tokens.copy()
        tokens[0, 1] -= 1
        bad = EPLayout(lay.layout, lay.token_offsets, tokens, lay.pair_copies, lay.node_tokens)
        return KernelTraffic(kt.ranks, bad, kt.dispatch_row, kt.combine_row)

    monkeypatch.setattr(moe, "kernel_traffic", one_row_lost)
    r = CliRunner().invoke(app, ["run", "quickstart", *SMALL, "--set", "outputs.plots=false"])
    assert r.exit_code == 2, r.output
    text = " ".join(r.output.split())
    assert "workload.moe" in text and "disagree with the counts: pair_tokens[src 0, dst 1]" in text


def test_unknown_scenario_is_bad_input() -> None:
    r = CliRunner().invoke(app, ["run", "quikstart"])
    assert r.exit_code == 2
    assert "Did you mean 'quickstart'" in r.output and "Traceback" not in r.output


def test_ctrl_c_stops_cleanly_and_keeps_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = {"raised": False}

    def interrupt_once(self: cli._ProgressBar, sim_t: float, events: int | None) -> None:
        if not state["raised"]:
            state["raised"] = True
            raise KeyboardInterrupt

    monkeypatch.setattr(cli._ProgressBar, "__call__", interrupt_once)
    r = CliRunner().invoke(app, ["run", "--out", str(tmp_path), *SMALL])
    assert r.exit_code == 130, r.output
    assert "partial results kept" in r.output and "Traceback" not in r.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert (tmp_path / "messages.parquet").is_file()


def test_internal_error_saves_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import podsim.scenarios.runner

    def boom(*a: object, **k: object) -> None:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(podsim.scenarios.runner, "run", boom)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    r = CliRunner().invoke(app, ["run", *SMALL])
    assert r.exit_code == 1
    assert "internal error: RuntimeError: kaboom" in r.output and "Traceback" not in r.output
    saved = list((tmp_path / "podsim-crashes").glob("crash-*.txt"))
    assert len(saved) == 1 and "kaboom" in saved[0].read_text()
    assert str(saved[0]) in r.output


def test_progress_bar_only_after_a_second() -> None:
    bar = cli._ProgressBar(True, "x")
    bar(1e-6, 10)
    assert bar.progress is None  # a fast run shows nothing
    bar.t0 -= 2.0
    bar(2e-6, 1000)
    assert bar.progress is not None
    bar.stop()
    quiet = cli._ProgressBar(False, "x")
    quiet.t0 -= 2.0
    quiet(1.0, 1)
    assert quiet.progress is None


def test_summary_title_names_the_variant_and_engine(tmp_path: Path) -> None:
    sets = ["variant=ecmp", "workload.synthetic.size=64KiB", "outputs.plots=false"]
    args = ["run", "spray-vs-ecmp", "--out", str(tmp_path / "o")]
    for s in sets:
        args += ["--set", s]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "spray-vs-ecmp (variant ecmp), packet engine: complete" in res.output
    assert "expert compute" not in res.output  # synthetic traffic has no expert compute
