"""QA regressions, third pass: a first-time user's trace files, outputs and studies."""

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


# ------------------------------------------------------------ 1: trace files with bad content


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


# ------------------------------------------------------------ 2: the BOM on an 80-column pipe


def test_bom_on_80_columns_keeps_every_figure_and_detail() -> None:
    from podsim.scenarios.cost.scenario import cost_of_scenario
    from podsim.scenarios.cost.tables import bom_table
    from rich.console import Console

    cost = cost_of_scenario("superpod-moe", [])
    console = Console(width=80, record=True, force_terminal=False)
    console.print(bom_table(cost))
    text = console.export_text()
    assert "…" not in text, text
    flat = " ".join(text.replace("│", " ").split())
    for ln in cost.lines:
        assert f"{ln.power_w:,.0f} W" in flat and f"${ln.capex_usd:,.0f}" in flat
    # the detail that explains a $0 line is shown, not squeezed to nothing
    assert "priced in the NIC" in flat


# ------------------------------------------------------------ 3: help text reads as prose


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (["run", "--help"], "Running again into the same result folder replaces"),
        (["--help"], "every input check that run makes before simulating"),
    ],
)
def test_help_is_not_broken_at_the_source_line_breaks(args: list[str], sentence: str) -> None:
    r = CliRunner().invoke(app, args, env={"COLUMNS": "250", "TERMINAL_WIDTH": "250"})
    assert r.exit_code == 0, r.output
    # on a wide terminal a sentence sits on one line, not cut where the docstring wraps
    assert any(sentence in line for line in r.output.splitlines()), r.output


# ------------------------------------------------------------ 4: skew errors name the keys


@pytest.mark.parametrize(
    ("sets", "word"),
    [
        (["workload.moe.skew.kind=zipf"], "neither"),
        (
            [
                "workload.moe.skew.kind=lognormal",
                "workload.moe.skew.max_mean=2",
                "workload.moe.skew.exponent=1",
            ],
            "both",
        ),
    ],
)
def test_skew_without_its_shape_names_the_scenario_keys(sets: list[str], word: str) -> None:
    r = _cli("validate", "quickstart", *[a for s in sets for a in ("--set", s)])
    assert r.exit_code == 2, r.output
    _clean(r)
    out = _flat(r)
    # the scenario's keys, not the kernel's argument names (target_max_mean, shape)
    assert "key workload.moe.skew" in out and "max_mean" in out and "exponent" in out
    assert "target_max_mean" not in out and word in out


def test_docs_say_both_skew_keys_serve_zipf_and_lognormal() -> None:
    r = _cli("docs", "--format", "md")
    lines = {ln.split("|")[1].strip(" `"): ln for ln in r.output.splitlines() if ln.count("|") > 4}
    for key in ("workload.moe.skew.max_mean", "workload.moe.skew.exponent"):
        assert "zipf" in lines[key] and "lognormal" in lines[key], lines[key]


# ------------------------------------------------------------ 5: outputs.dir placeholders


@pytest.mark.parametrize(
    ("folder", "words"),
    [("res/{nme}", "unknown placeholder(s) {nme}"), ("res/{name", "unbalanced braces")],
)
def test_outputs_dir_with_a_bad_placeholder_is_bad_input(folder: str, words: str) -> None:
    # was an internal error (KeyError, exit 1) after the whole simulation had run
    r = _cli("validate", "quickstart", "--set", f"outputs.dir={folder}")
    assert r.exit_code == 2, r.output
    _clean(r)
    out = _flat(r)
    assert "key outputs.dir" in out and words in out and "{variant}" in out
    # the placeholders and doubled (literal) braces stay valid
    r = _cli("validate", "quickstart", "--set", "outputs.dir=res/{{x}}-{name}-{variant}")
    assert r.exit_code == 0, r.output


# ------------------------------------------------------------ 6: fault entries


def test_link_degrade_above_the_link_rate_is_refused() -> None:
    fault = "faults=[{kind: link_degrade, link: [leaf0, spine0], rate: 800Gbps}]"
    for engine in ("packet", "flow"):
        r = _cli("validate", "link-failure", "--set", f"engine={engine}", "--set", fault)
        assert r.exit_code == 2, r.output
        _clean(r)
        out = _flat(r)
        assert "key faults[0].rate" in out and "800Gbps" in out and "400Gbps" in out


def test_flow_engine_validate_checks_fault_targets() -> None:
    # validate said "valid"; the run failed later with no key path
    fault = "faults=[{kind: link_down, link: [leaf0, spine9], at: 3us}]"
    r = _cli("validate", "link-failure", "--set", "engine=flow", "--set", fault)
    assert r.exit_code == 2, r.output
    assert "key faults[0].link" in _flat(r) and "spine9" in _flat(r)
    # the flow engine models scale-up faults: those stay valid there
    ok = "faults=[{kind: switch_down, node: su0.0, at: 1us}]"
    r = _cli("validate", "quickstart", "--set", "engine=flow", "--set", ok)
    assert r.exit_code == 0, r.output


def test_fault_window_error_prints_times_with_units() -> None:
    fault = "faults=[{kind: link_down, link: [leaf0, spine0], at: 5us, until: 2us}]"
    r = _cli("validate", "link-failure", "--set", fault)
    assert r.exit_code == 2, r.output
    assert "until (2us) must be after at (5us)" in _flat(r)


def test_misspelt_fault_kind_gets_a_did_you_mean_at_the_kind_key(tmp_path: Path) -> None:
    f = tmp_path / "fk.yaml"
    f.write_text("include: link-failure\nfaults:\n  - {kind: straggle, rank: 1}\n")
    r = _cli("validate", str(f))
    assert r.exit_code == 2, r.output
    _clean(r)
    out = _flat(r)
    assert "key faults[0].kind" in out and "line 3" in out
    assert "Did you mean 'straggler'?" in out and "Input tag" not in out


def test_fault_without_a_kind_names_the_missing_key() -> None:
    r = _cli("validate", "link-failure", "--set", "faults=[{link: [leaf0, spine0]}]")
    assert r.exit_code == 2, r.output
    out = _flat(r)
    assert "key faults[0].kind" in out and "missing" in out and "discriminator" not in out


# ------------------------------------------------------------ 7: topology parameters


@pytest.mark.parametrize(
    ("scenario", "override", "key", "suggestion"),
    [
        ("quickstart", "cluster.params.nodse=2", "cluster.params.nodse", "'nodes'"),
        (
            "incast-cc",
            "cluster.topology.params.leaf_spine_cable_m=30m",
            "cluster.topology.params.leaf_spine_cable_m",
            "'leaf_spine_cable'",
        ),
    ],
)
def test_misspelt_topology_parameter_gets_its_key_and_a_did_you_mean(
    scenario: str, override: str, key: str, suggestion: str
) -> None:
    r = _cli("validate", scenario, "--set", override)
    assert r.exit_code == 2, r.output
    _clean(r)
    out = _flat(r)
    assert f"key {key}" in out and f"Did you mean {suggestion}" in out
    # one prefix, no Python call syntax
    assert "got an unexpected keyword argument" not in out and out.count("topology '") == 1


def test_misspelt_layout_parameter_gets_its_key_and_a_did_you_mean() -> None:
    r = _cli("validate", "quickstart", "--set", "cluster.layout_params.ssdz=2")
    assert r.exit_code == 2, r.output
    _clean(r)
    out = _flat(r)
    assert "key cluster.layout_params.ssdz" in out and "Did you mean 'ssd' or 'ssds'?" in out
    assert "got an unexpected keyword argument" not in out


# ------------------------------------------------------------ 8: study plots


def test_pareto_capex_ticks_are_distinct_and_labels_stay_inside() -> None:
    import pandas as pd
    from podsim.scenarios.study.plots import fig_pareto

    # fabric-what-if: two layouts $4,400 apart on a $1.58M cluster, three swept keys
    df = pd.DataFrame(
        {
            "point": range(4),
            "param:cluster.layout": ["external-switch", "on-card-switch"] * 2,
            "param:cluster.nic.cc.name": ["dcqcn", "dcqcn", "nscc", "nscc"],
            "param:cluster.nic.multipath.paths": [1, 1, 4, 4],
            "capex_usd": [1_581_600.0, 1_577_200.0, 1_581_600.0, 1_577_200.0],
            "layer_time_s": [1.68e-3, 1.68e-3, 0.80e-3, 0.80e-3],
        }
    )
    fig = fig_pareto(df, "layer_time_s", "capex_usd")
    ax = fig.axes[0]
    ticks = [1_577_500.0, 1_578_000.0, 1_578_500.0, 1_579_000.0, 1_579_500.0]
    ax.set_xticks(ticks)  # the spacing matplotlib chose for the 12-point study
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert len(set(labels)) == len(ticks), labels  # was $1.578M, $1.578M, $1.579M, ...
    # every point label lies inside the figure (the right-hand ones were cut off)
    box = fig.get_window_extent()
    for text in ax.texts:
        ext = text.get_window_extent()
        assert ext.x0 >= box.x0 - 1 and ext.x1 <= box.x1 + 1, text.get_text()


# ------------------------------------------------------------ 9: run figures


def test_legends_do_not_cover_the_bars_and_phases_run_in_order(quickstart_dir: Path) -> None:
    from podsim.scenarios.report.plots import fig_gpu_bandwidth, fig_layer_timeline
    from podsim.scenarios.results.tables import Results

    res = Results.read(quickstart_dir)
    for make in (fig_gpu_bandwidth, fig_layer_timeline):
        fig = make(res)
        fig.canvas.draw()
        ax = fig.axes[0]
        legend = ax.get_legend().get_window_extent()
        # the legend sat in a corner of the axes, over the last ranks' bars
        assert legend.x0 >= ax.get_window_extent().x1, make.__name__
        assert legend.x1 <= fig.get_window_extent().x1 + 1, make.__name__
    texts = [t.get_text() for t in fig_gpu_bandwidth(res).axes[0].get_legend().get_texts()]
    assert texts == ["dispatch", "combine"]


# ------------------------------------------------------------ 10: engine knobs


def test_cell_below_the_mtu_is_refused_not_silently_raised_to_it() -> None:
    r = _cli("validate", "quickstart", "--set", "sim.endpoint=host", "--set", "sim.cell=100B")
    assert r.exit_code == 2, r.output
    _clean(r)
    out = _flat(r)
    assert "key sim.cell" in out and "100 B" in out and "4096 B" in out


# ------------------------------------------------------------ 11: Ctrl-C during a run


def test_ctrl_c_inside_an_event_keeps_the_partial_results(monkeypatch, tmp_path: Path) -> None:
    import os
    import signal

    from podsim.scenarios.engines import packet
    from podsim.scenarios.execution import timeline

    # progress points (where a deferred Ctrl-C stops the run) every 200 events, not 20,000
    monkeypatch.setitem(timeline.run_timeline.__kwdefaults__, "progress_every", 200)
    calls = []
    send = packet.NicTransport.send

    def send_and_press_ctrl_c(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 40:  # Python runs the handler here, inside a SimPy process
            os.kill(os.getpid(), signal.SIGINT)
        return send(self, *args, **kwargs)

    monkeypatch.setattr(packet.NicTransport, "send", send_and_press_ctrl_c)
    out = tmp_path / "out"
    r = _cli("run", "quickstart", "--out", str(out), "--set", "workload.moe.tokens_per_rank=16")
    _clean(r)
    assert r.exit_code == 130, r.output
    assert "interrupted: partial results kept" in _flat(r)
    assert (out / "summary.json").is_file() and "violated" not in r.output


def test_compare_layouts_typo_names_the_option_not_a_set() -> None:
    r = _cli("cost", "quickstart", "--compare-layouts", "external-swich,on-card-switch")
    assert r.exit_code == 2, r.output
    _clean(r)
    out = _flat(r)
    assert "--compare-layouts" in out and "Did you mean 'external-switch'" in out
    assert "--set" not in out


# ------------------------------------------------------------ 12: docs cover study files


def test_docs_describe_every_study_key() -> None:
    from podsim.scenarios.study.spec import Study

    r = _cli("docs")
    assert r.exit_code == 0, r.output
    assert "# Study keys" in r.output
    study = r.output.split("# Study keys", 1)[1]
    for name, info in Study.model_fields.items():
        if name == "base_dir":
            continue
        key = info.alias or name
        heads = (f"| `{key}` |", f"| **`{key}`** |")  # a section's row is bold
        row = next((ln for ln in study.splitlines() if ln.startswith(heads)), None)
        assert row is not None and row.rstrip(" |").split("|")[-1].strip(), key
    assert "| `random.params` |" in study and "randint" in study
