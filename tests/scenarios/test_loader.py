"""Schema, units, includes, variants and overrides."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from podsim.fabric.units import parse_rate, parse_size, parse_time
from podsim.scenarios.errors import ScenarioError
from podsim.scenarios.input.loader import library_names, load_scenario, parse_override
from podsim.scenarios.input.schema import Scenario

from tests.scenarios.conftest import base_doc


def test_units_parse_to_si(scenario_dir: Path) -> None:
    sc, _ = load_scenario(scenario_dir / "base.yaml")
    assert sc.cluster.nic.rate == 400e9
    assert sc.cluster.nic.mtu == 4096
    assert sc.cluster.switch.buffer == 16 * 2**20
    assert sc.cluster.switch.latency == pytest.approx(600e-9)
    assert sc.cluster.switch.ecn.kmin == 150_000
    assert sc.workload.trace.compute_time == pytest.approx(1e-6)
    assert sc.workload.trace.path == (scenario_dir / "trace.csv").resolve()


def test_resolved_round_trips_exactly(scenario_dir: Path, tmp_path: Path) -> None:
    sc, _ = load_scenario(scenario_dir / "base.yaml", ["cluster.nic.rto=37us"])
    dumped = sc.resolved()
    assert dumped["cluster"]["nic"]["rate"] == "400Gbps"
    assert dumped["cluster"]["nic"]["mtu"] == "4KiB"
    assert dumped["cluster"]["nic"]["rto"] == "37us"
    again = Scenario.model_validate(yaml.safe_load(yaml.safe_dump(dumped)))
    assert again == sc


def test_defaults_are_the_documented_ones() -> None:
    sc = Scenario.model_validate(
        {"cluster": {"preset": "star"}, "workload": {"synthetic": {"pattern": "uniform"}}}
    )
    nic = sc.cluster.nic
    assert (nic.mtu, nic.packet_rate, nic.phy, nic.rate) == (4096, 400e6, None, None)
    assert (sc.cluster.switch.ecn.kmin, sc.cluster.switch.ecn.kmax) == (150_000, 1_500_000)
    assert sc.engine == "packet" and sc.faults == []


def test_include_deep_merges_with_relative_paths(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "trace.csv").write_text("x")
    base = base_doc()
    (tmp_path / "sub" / "base.yaml").write_text(yaml.safe_dump(base))
    (tmp_path / "child.yaml").write_text(
        "include: sub/base.yaml\nname: child\ncluster:\n  nic:\n    cc: {name: hpcc}\n"
    )
    sc, doc = load_scenario(tmp_path / "child.yaml")
    assert sc.name == "child"
    assert sc.cluster.nic.cc.name == "hpcc"
    assert sc.cluster.nic.multipath.selector == "spray"  # kept from the base
    assert sc.cluster.nic.mtu == 4096
    assert sorted(p.name for p in doc.files) == ["base.yaml", "child.yaml"]
    # a relative path is relative to the file that wrote it (sub/base.yaml)
    assert sc.workload.trace.path == (tmp_path / "sub" / "trace.csv").resolve()
    assert doc.origins[("cluster", "nic", "cc", "name")][0].endswith("child.yaml")
    assert doc.origins[("cluster", "nic", "mtu")][0].endswith("base.yaml")


def test_include_of_builtin_by_name(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text("include: quickstart\nname: mine\nseed: 7\n")
    sc, _ = load_scenario(tmp_path / "mine.yaml")
    assert (sc.name, sc.seed, sc.workload.moe.model) == ("mine", 7, "deepseek-v3")


def test_include_cycle_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("include: b.yaml\n")
    (tmp_path / "b.yaml").write_text("include: a.yaml\n")
    with pytest.raises(ScenarioError, match="include cycle"):
        load_scenario(tmp_path / "a.yaml")


def test_null_unsets_an_inherited_key(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        "include: quickstart\ncluster:\n  preset: null\n  params: null\n"
        "  topology: {name: star, params: {hosts: 16}}\n"
    )
    sc, _ = load_scenario(tmp_path / "c.yaml")
    assert sc.cluster.preset is None and sc.cluster.topology.name == "star"


def test_set_overrides_are_yaml_typed(scenario_dir: Path) -> None:
    sc, doc = load_scenario(
        scenario_dir / "base.yaml",
        ["cluster.nic.mtu=2048", "seed=9", "outputs.formats=[csv]", "sim.time_limit=1ms"],
    )
    assert sc.cluster.nic.mtu == 2048 and sc.seed == 9
    assert sc.outputs.formats == ["csv"] and sc.sim.time_limit == pytest.approx(1e-3)
    assert doc.origins[("seed",)][0].startswith("command line")


def test_set_into_list_and_error_names_the_command_line(scenario_dir: Path) -> None:
    sc, _ = load_scenario(
        scenario_dir / "base.yaml",
        ["faults=[{kind: straggler, rank: 1}]", "faults[0].factor=3"],
    )
    assert sc.faults[0].factor == 3
    with pytest.raises(ScenarioError, match=r"command line \(--set cluster.nic.mtu=3000\)"):
        load_scenario(scenario_dir / "base.yaml", ["cluster.nic.mtu=3000"])


@pytest.mark.parametrize("bad", ["cluster.nic.mtu", "=3", "a..b=1", "a.b=[1,"])
def test_bad_set_syntax(bad: str) -> None:
    with pytest.raises(ScenarioError, match="--set"):
        parse_override(bad)


def test_parse_override_paths() -> None:
    assert parse_override("faults[2].at=5us") == (("faults", 2, "at"), "5us")
    assert parse_override("a.0.b=true") == (("a", 0, "b"), True)


def test_variants_select_and_set_wins_over_variant() -> None:
    sc, _ = load_scenario("deepep-h800", ["variant=ep64"])
    assert (sc.variant, sc.workload.moe.ep_size, sc.cluster.params["nodes"]) == ("ep64", 64, 8)
    sc, _ = load_scenario("deepep-h800", ["variant=ep32", "workload.moe.ep_size=24"])
    assert sc.workload.moe.ep_size == 24 and sc.cluster.params["nodes"] == 4


def test_seed_flag_overrides_file() -> None:
    sc, _ = load_scenario("quickstart", seed=42)
    assert sc.seed == 42


def test_unknown_builtin_suggests() -> None:
    with pytest.raises(ScenarioError, match="Did you mean 'quickstart'"):
        load_scenario("quikstart")


def test_dict_and_scenario_inputs() -> None:
    d = {"cluster": {"preset": "star"}, "workload": {"synthetic": {"pattern": "incast"}}}
    sc, _ = load_scenario(d)
    sc2, _ = load_scenario(sc, ["seed=3"])
    assert sc2.seed == 3 and sc2.workload.synthetic.pattern == "incast"


def test_quantities_reject_garbage_with_the_expected_form() -> None:
    for parse, bad in ((parse_rate, "fast"), (parse_size, "big"), (parse_time, "soon")):
        with pytest.raises(ValueError, match="expected"):
            parse(bad)


def test_plugins_need_opt_in() -> None:
    from podsim.scenarios.runner import check_plugins

    sc, _ = load_scenario("quickstart", ["cluster.nic.cc.name=my_pkg.cc:FixedWindow"])
    assert sc.plugins() == ["my_pkg.cc:FixedWindow"]
    with pytest.raises(ScenarioError, match="--allow-plugins"):
        check_plugins(sc, allow_plugins=False)
    check_plugins(sc, allow_plugins=True)


def test_every_library_file_is_documented() -> None:
    names = library_names()
    assert {"quickstart", "deepep-h800", "superpod-moe", "incast-cc", "spray-vs-ecmp"} <= set(names)
    from podsim.scenarios.input.loader import LIBRARY

    for n in names:
        text = (LIBRARY / f"{n}.yaml").read_text()
        assert text.startswith("#"), f"{n}.yaml has no header comment"
        assert yaml.safe_load(text)["description"]
