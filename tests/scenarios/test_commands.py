"""Every command: validate refuses what run refuses, one error guard, the same --seed option,
study-file errors with their keys, clear messages, result folders replaced cleanly and a
progress display for slow runs."""

from __future__ import annotations

import json
import time

import pytest
from podsim.scenarios.cli.app import app
from typer.testing import CliRunner


def _cli(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, list(args), env=env)


def _clean(r) -> None:
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output


REFUSED = [
    (["workload.moe.skew.exponent=1.5"], "kind 'uniform' has none"),
    (["workload.moe.skew.max_mean=2"], "kind 'uniform' has none"),
    (["workload.moe.max_nodes=3"], "routing_limit"),
    (["workload.moe.redundant_experts=4"], "placement 'redundant'"),
    (["workload.moe.skew.params.bogus=1"], "unknown parameter"),
    (["cluster.nic.cc.params.bogus=1"], "congestion control 'dcqcn'"),
    (["cluster.nic.multipath.params.bogus=1"], "path selector 'spray'"),
    (
        ["engine=flow", "faults=[{kind: ber, link: [nic0.p0, leaf0], pre_fec_ber: 1e-4}]"],
        "does not model ber",
    ),
    (
        ["engine=bound", "faults=[{kind: link_down, link: [nic0.p0, leaf0], at: 1us}]"],
        "does not model link_down",
    ),
    (["faults=[{kind: link_down, link: [nic0.p0, leaf9], at: 1us}]"], "no link"),
    (
        ["workload.moe.placement=redundant", "workload.moe.redundant_experts=3"],
        "key workload.moe.redundant_experts: model 'deepseek-v3' has 256 routed experts",
    ),
    (
        ["cluster.params.nodes=3", "workload.moe.ep_size=24"],
        "key workload.moe.ep_size: model 'deepseek-v3' has 256 routed experts",
    ),
]


def test_eplb_at_ep144_with_32_replicas_validates() -> None:
    sets = ["cluster.params.nodes=18", "workload.moe.ep_size=144",
            "workload.moe.placement=redundant", "workload.moe.redundant_experts=32"]  # fmt: skip
    r = _cli("validate", "quickstart", *[x for s in sets for x in ("--set", s)])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize(("sets", "words"), REFUSED)
def test_validate_refuses_what_run_refuses(tmp_path, sets: list[str], words: str) -> None:
    flags = [x for s in sets for x in ("--set", s)]
    v = _cli("validate", "quickstart", *flags)
    r = _cli("run", "quickstart", "-q", "-o", str(tmp_path / "out"), *flags)
    assert v.exit_code == 2, v.output
    assert r.exit_code == 2, r.output
    _clean(v)
    assert words in " ".join(v.output.split())
    assert v.output == r.output  # the same check, the same paragraph
    assert not (tmp_path / "out").exists()


def test_schema_names_the_skew_key() -> None:
    r = _cli("validate", "quickstart", "--no-build", "--set", "workload.moe.skew.exponent=2")
    assert r.exit_code == 2, r.output
    assert "key workload.moe.skew" in r.output and "exponent" in r.output


_STUDY = """\
name: qa-metric
base:
  include: quickstart
  workload:
    moe: {tokens_per_rank: 16}
  outputs: {plots: false}
grid:
  cluster.nic.cc.name: [dcqcn, hpcc]
metric: METRIC
"""


def test_misspelt_study_metric_is_exit_2_with_did_you_mean(tmp_path) -> None:
    study = tmp_path / "s.yaml"
    study.write_text(_STUDY.replace("METRIC", "layer_tim_s"))
    out = tmp_path / "o"
    r = _cli("sweep", str(study), "-q", "-j", "0", "--no-plots", "-o", str(out))
    assert r.exit_code == 2, r.output
    _clean(r)
    text = " ".join(r.output.split())
    assert "metric 'layer_tim_s'" in text and "Did you mean 'layer_time_s'" in text
    assert str(study) in text
    # it stopped after the first point, which is kept; a resumed sweep fails before running
    import pandas as pd

    assert len(pd.read_parquet(out / "results.parquet")) == 1
    r = _cli("sweep", str(study), "-q", "-j", "0", "--no-plots", "-o", str(out))
    assert r.exit_code == 2 and "(results in" in r.output, r.output


def test_study_grid_error_names_the_study_file_and_grid_key(tmp_path) -> None:
    study = tmp_path / "s.yaml"
    study.write_text(_STUDY.replace("METRIC", "layer_time_s").replace("hpcc", "dcqnc"))
    r = _cli("sweep", str(study), "-q", "-j", "0", "-o", str(tmp_path / "o"))
    assert r.exit_code == 2, r.output
    text = " ".join(r.output.split())
    assert f"study {study}, grid key cluster.nic.cc.name='dcqnc' (point 1)" in text
    assert "command line" not in text and "Did you mean 'dcqcn'" in text


def _boom(*_a, **_k):
    raise RuntimeError("kaboom")


@pytest.mark.parametrize("command", ["cost", "sweep"])
def test_cost_and_sweep_internal_errors_are_one_paragraph(monkeypatch, tmp_path, command) -> None:
    if command == "cost":
        monkeypatch.setattr("podsim.scenarios.cost.scenario.cost_of_scenario", _boom)
        args = ["cost", "quickstart"]
    else:
        monkeypatch.setattr("podsim.scenarios.study.sweep.run_study", _boom)
        study = tmp_path / "s.yaml"
        study.write_text(_STUDY.replace("METRIC", "layer_time_s"))
        args = ["sweep", str(study), "-q", "-o", str(tmp_path / "o")]
    r = _cli(*args)
    assert r.exit_code == 1, r.output
    assert "internal error: RuntimeError: kaboom" in r.output and "report" in r.output
    assert "Traceback" not in r.output
    r = _cli(*args, env={"PODSIM_DEBUG": "1"})
    assert r.exit_code == 1 and "Traceback" in r.output and "kaboom" in r.output
    r = _cli("--debug", *args)
    assert r.exit_code == 1 and "Traceback" in r.output


def test_a_value_error_in_cost_is_bad_input(monkeypatch) -> None:
    def bad(*_a, **_k):
        raise ValueError("no such thing")

    monkeypatch.setattr("podsim.scenarios.cost.scenario.cost_of_scenario", bad)
    r = _cli("cost", "quickstart")
    assert r.exit_code == 2 and "error: no such thing" in r.output, r.output


def test_unknown_price_item_names_the_key_and_the_choices() -> None:
    r = _cli("cost", "quickstart", "--set", "cost.prices.nic-cx7-40g.price_usd=5")
    assert r.exit_code == 2, r.output
    text = " ".join(r.output.split())
    assert "discriminator" not in text
    assert "cost.prices.nic-cx7-40g" in text and "Did you mean 'nic-cx7-400g'" in text
    assert "kinds: cable, gpu, nic" in text


def test_trace_into_an_unwritable_path_names_out(tmp_path) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    r = _cli("trace", "quickstart", "-o", str(blocker / "t.parquet"))
    assert r.exit_code == 2, r.output
    _clean(r)
    assert "--out" in r.output and "cannot write the trace" in r.output
    r = _cli("trace", "quickstart", "-o", str(tmp_path))
    assert r.exit_code == 2 and "--out" in r.output, r.output


def test_run_into_an_earlier_result_folder_leaves_no_stale_file(tmp_path) -> None:
    out = tmp_path / "res"
    base = ["run", "quickstart", "-q", "-o", str(out), "--set", "outputs.plots=false"]
    base += ["--set", "workload.moe.tokens_per_rank=16"]
    r = _cli(*base, "--set", "outputs.formats=[parquet, csv]")
    assert r.exit_code == 0, r.output
    assert (out / "messages.csv").is_file() and (out / ".podsim-files").is_file()
    (out / "notes.txt").write_text("mine")
    r = _cli(*base, "--set", "outputs.formats=[parquet]", "--seed", "2")
    assert r.exit_code == 0, r.output
    listed = set((out / ".podsim-files").read_text().split())
    on_disk = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert on_disk == listed | {".podsim-files", "notes.txt"}  # nothing stale
    assert not list(out.glob("*.csv")) or all(p.name in listed for p in out.glob("*.csv"))
    assert json.loads((out / "summary.json").read_text())["seed"] == 2


def test_a_result_folder_from_before_the_manifest_is_replaced(tmp_path) -> None:
    out = tmp_path / "old"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    (out / "stale_table.csv").write_text("a\n1\n")
    (out / "plots").mkdir()
    (out / "plots" / "old.png").write_bytes(b"png")
    (out / "keep.txt").write_text("mine")
    (out / "my-scenario.yaml").write_text("name: mine")
    r = _cli("run", "quickstart", "-q", "-o", str(out), "--set", "outputs.plots=false")
    assert r.exit_code == 0, r.output
    assert not (out / "stale_table.csv").exists() and not (out / "plots").exists()
    assert (out / "keep.txt").read_text() == "mine"
    assert (out / "my-scenario.yaml").read_text() == "name: mine"


def test_a_foreign_non_empty_folder_is_refused(tmp_path) -> None:
    (tmp_path / "thesis.tex").write_text("x")
    r = _cli("run", "quickstart", "-q", "-o", str(tmp_path))
    assert r.exit_code == 2, r.output
    assert "--out" in r.output and "not a podsim result" not in r.output
    assert "neither empty nor a podsim result folder" in " ".join(r.output.split())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thesis.tex"]


def test_run_help_documents_the_folder_rule() -> None:
    r = _cli("run", "--help")
    text = " ".join(r.output.split())
    assert "earlier result folder" in text and "replaced" in text


@pytest.mark.parametrize("command", ["validate", "cost", "run", "trace", "show"])
def test_every_scenario_command_takes_the_same_seed_option(command: str) -> None:
    r = _cli(command, "--help")
    assert "Random seed, 0 to 4294967295" in " ".join(r.output.split()), r.output


@pytest.mark.parametrize("command", ["validate", "cost"])
def test_seed_out_of_range_is_the_same_clean_error(command: str) -> None:
    r = _cli(command, "quickstart", "--seed", "4294967296")
    assert r.exit_code == 2, r.output
    assert "key seed" in r.output and "4294967295" in r.output


def test_validate_and_cost_use_the_seed() -> None:
    from podsim.scenarios.cost.scenario import cost_of_scenario

    assert _cli("validate", "quickstart", "--seed", "7").exit_code == 0
    assert cost_of_scenario("quickstart", seed=7).summary()["capex_usd"] > 0


def test_progress_display_appears_on_time_without_engine_reports(monkeypatch) -> None:
    import io

    import podsim.scenarios.cli.app as cli
    from rich.console import Console

    monkeypatch.setattr(cli, "err_console", Console(file=io.StringIO(), force_terminal=True))
    bar = cli._ProgressBar(True, "slow (packet)")
    bar.DELAY_S = 0.05
    bar(0.0, 0)  # the engine's first report; the next may be minutes away
    assert bar.progress is None
    deadline = time.perf_counter() + 2.0
    while bar.progress is None and time.perf_counter() < deadline:
        time.sleep(0.01)
    assert bar.progress is not None, "the display waited for the engine's next report"
    bar.stop()
    done = cli._ProgressBar(True, "fast")
    done.DELAY_S = 0.05
    done(0.0, 0)
    done.stop()  # a run over before the delay never shows the display
    time.sleep(0.15)
    assert done.progress is None
