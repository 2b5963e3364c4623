"""Command-line input: each bad value, option or output path is a clean error (exit 2, one
paragraph naming the key and value, no traceback) instead of a crash or a silent no-op."""

from __future__ import annotations

import pytest
from podsim.fabric.units import UnitError, parse_length, parse_rate, parse_size, parse_time
from podsim.scenarios.cli.app import app
from typer.testing import CliRunner


def _validate(*args: str):
    return CliRunner().invoke(app, ["validate", *args])


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (parse_size, "1e400"),
        (parse_size, "1e400KiB"),
        (parse_rate, "1e400Gbps"),
        (parse_time, "1e400s"),
        (parse_length, "1e400km"),
    ],
)
def test_overflowing_quantity_is_a_unit_error(parse, text: str) -> None:
    with pytest.raises(UnitError, match="too large"):
        parse(text)


def test_overflowing_mtu_on_the_command_line_is_exit_2() -> None:
    r = _validate("quickstart", "--set", "cluster.nic.mtu=1e400")
    assert r.exit_code == 2, r.output
    assert "cluster.nic.mtu" in r.output and "1e400" in r.output
    assert "Traceback" not in r.output and "internal error" not in r.output


def test_variant_on_a_scenario_without_variants_is_not_silently_ignored() -> None:
    r = _validate("quickstart", "--set", "variant=nope")
    assert r.exit_code == 2, r.output
    assert "nope" in r.output and "variant" in r.output


def test_variant_label_of_a_resolved_scenario_still_loads(tmp_path) -> None:
    # resolved.yaml keeps its variant's name as a label with no variants: that stays valid
    f = tmp_path / "resolved.yaml"
    show = CliRunner().invoke(app, ["show", "deepep-h800", "--set", "variant=ep32"])
    assert show.exit_code == 0, show.output
    f.write_text(show.stdout)
    r = _validate(str(f))
    assert r.exit_code == 0, r.output


def test_run_out_onto_an_existing_file_is_exit_2_before_simulating(tmp_path) -> None:
    f = tmp_path / "afile"
    f.write_text("keep")
    r = CliRunner().invoke(app, ["run", "quickstart", "-q", "-o", str(f)])
    assert r.exit_code == 2, r.output
    assert "--out" in r.output and "afile" in r.output
    assert "internal error" not in r.output
    assert f.read_text() == "keep"


def test_list_presets_shows_the_cluster_presets() -> None:
    r = CliRunner().invoke(app, ["list", "presets"])
    assert r.exit_code == 0, r.output
    assert "topologies and cluster presets" in r.output and "superpod-128" in r.output
    assert "NIC models" not in r.output


def test_list_section_accepts_hyphenated_names() -> None:
    r = CliRunner().invoke(app, ["list", "congestion-control"])
    assert r.exit_code == 0, r.output
    assert "dcqcn" in r.output


def test_cost_csv_into_a_folder_is_exit_2(tmp_path) -> None:
    r = CliRunner().invoke(app, ["cost", "quickstart", "--csv", str(tmp_path)])
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
    assert "--csv" in r.output


def test_cost_years_infinite_is_refused() -> None:
    r = CliRunner().invoke(app, ["cost", "quickstart", "--set", "cost.years=1e400"])
    assert r.exit_code == 2, r.output
    assert "cost.years" in r.output


_STUDY = """\
name: qa-small
base:
  include: quickstart
  workload:
    moe: {tokens_per_rank: 16}
  outputs: {plots: false}
grid:
  cluster.nic.cc.name: [dcqcn]
metric: layer_time_s
"""


def test_sweep_out_onto_an_existing_file_is_exit_2(tmp_path) -> None:
    study = tmp_path / "s.yaml"
    study.write_text(_STUDY)
    f = tmp_path / "afile"
    f.write_text("keep")
    r = CliRunner().invoke(app, ["sweep", str(study), "-q", "-o", str(f), "--no-plots"])
    assert r.exit_code == 2, r.output
    assert "--out" in r.output and f.read_text() == "keep"


def test_sweep_negative_workers_is_exit_2(tmp_path) -> None:
    study = tmp_path / "s.yaml"
    study.write_text(_STUDY)
    r = CliRunner().invoke(
        app, ["sweep", str(study), "--quiet", "--out", str(tmp_path / "o"), "-j", "-1"]
    )
    assert r.exit_code == 2, r.output
    assert "--workers" in r.output


@pytest.mark.parametrize(
    "override",
    ["cluster.params.nodes=0", "engine.x=1"],
)
def test_error_at_a_parent_key_names_the_set_below_it(override: str) -> None:
    # the error is raised at a parent key the library file wrote (cluster.params, engine);
    # the culprit is the --set below it, not the file
    r = _validate("quickstart", "--set", override)
    assert r.exit_code == 2, r.output
    assert f"command line (--set {override})" in r.output
    assert "quickstart.yaml" not in r.output


def test_a_folder_given_as_scenario_says_it_is_a_folder(tmp_path) -> None:
    r = _validate(str(tmp_path))
    assert r.exit_code == 2, r.output
    assert "is a folder" in r.output and "no scenario file" not in r.output


def test_seed_beyond_32_bits_is_a_clean_error() -> None:
    # a 26-digit seed used to crash the engines' 64-bit flow hashing (OverflowError)
    r = _validate("quickstart", "--set", "seed=99999999999999999999999999")
    assert r.exit_code == 2, r.output
    assert "key seed" in r.output and "4294967295" in r.output


@pytest.mark.parametrize("name", ["..", "."])
def test_run_name_dot_dot_is_refused(name: str) -> None:
    # outputs.dir is results/{name}: '..' would write the results into the working folder
    r = _validate("quickstart", "--set", f"name={name}")
    assert r.exit_code == 2, r.output
    assert "key name" in r.output


def test_emoji_run_name_plots_without_glyph_warnings(tmp_path, recwarn) -> None:
    # `podsim run -q` promises nothing but errors; the missing-glyph warning broke that
    sets = ["engine=bound", "name=run 🚀", "workload.moe.tokens_per_rank=8"]
    args = ["run", "quickstart", "-q", "-o", str(tmp_path / "o")]
    r = CliRunner().invoke(app, [*args, *(a for s in sets for a in ("--set", s))])
    assert r.exit_code == 0, r.output
    assert not [w for w in recwarn if "Glyph" in str(w.message)]


@pytest.mark.parametrize(
    ("overrides", "key", "value"),
    [
        (["workload.training.routing=skewed"], "workload.training.routing", "skewed"),
        (["workload.training.skew.kind=zipf", "workload.training.skew.exponent=1"],
         "workload.training", "routing 'sampled'"),
        (["workload.training.routing=sampled", "workload.training.skew.kind=lognormal",
          "workload.training.skew.max_mean=40"], "workload.training.skew.max_mean", "40.0"),
    ],
)  # fmt: skip
def test_bad_training_routing_names_its_key(overrides: list[str], key: str, value: str) -> None:
    args = [a for o in overrides for a in ("--set", o)]
    r = _validate("train-1t-moe", "--set", "workload.training.layers=1",
                  "--set", "workload.training.pp=1", *args)  # fmt: skip
    assert r.exit_code == 2, r.output
    assert f"key {key}" in r.output and value in r.output
    assert "Traceback" not in r.output
