"""Messages and docs a first-time user meets: help as prose, skew and topology/layout
parameter errors at their keys with a did-you-mean, outputs.dir placeholders, engine knobs,
Ctrl-C keeping partial results, and docs for every study key."""

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


def test_cell_below_the_mtu_is_refused_not_silently_raised_to_it() -> None:
    r = _cli("validate", "quickstart", "--set", "sim.endpoint=host", "--set", "sim.cell=100B")
    assert r.exit_code == 2, r.output
    _clean(r)
    out = _flat(r)
    assert "key sim.cell" in out and "100 B" in out and "4096 B" in out


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
    # the engine defers Ctrl-C only under Python's own handler: make sure that is the one in
    # place (in a shared test process an earlier test's library may have left another)
    handler = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    out = tmp_path / "out"
    try:
        r = _cli("run", "quickstart", "--out", str(out), "--set", "workload.moe.tokens_per_rank=16")
    finally:
        signal.signal(signal.SIGINT, handler)
    _clean(r)
    assert r.exit_code == 130, (r.output, f"SIGINT handler before the test: {handler!r}", calls)
    assert "interrupted: partial results kept" in _flat(r)
    assert (out / "summary.json").is_file() and "violated" not in r.output


def test_compare_layouts_typo_names_the_option_not_a_set() -> None:
    r = _cli("cost", "quickstart", "--compare-layouts", "external-swich,on-card-switch")
    assert r.exit_code == 2, r.output
    _clean(r)
    out = _flat(r)
    assert "--compare-layouts" in out and "Did you mean 'external-switch'" in out
    assert "--set" not in out


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
