"""SuperPoD presets as data (issue 16 item 2): every row of
podsim.fabric.superpod_presets builds, its graph carries the table's figures, every figure is
overridable from a scenario, a bad figure is refused with its key and value (exit 2), `podsim
list` shows the presets and docs/physics.md holds the table with its sources."""

from __future__ import annotations

from pathlib import Path

import podsim
import pytest
import yaml
from podsim.fabric.superpod import PRESET_ACCELERATORS, superpod
from podsim.fabric.superpod_presets import SUPERPOD_PRESETS, figure_mark
from podsim.fabric.topology import (
    TOPOLOGIES,
    build_topology,
    builder_parameters,
    endpoints,
    gpu_nics,
    gpus,
    mac_rate,
    switches,
    validate_graph,
)
from podsim.fabric.units import parse_rate, parse_time
from podsim.scenarios.cli.app import app
from podsim.scenarios.input.docs import preset_figures_markdown
from typer.testing import CliRunner

NEW = ["nvl72", "m890", "atlas-a3", "atlas-950"]
PRESETS = sorted(SUPERPOD_PRESETS)
PHYSICS = Path(__file__).resolve().parents[2] / "docs" / "physics.md"


def _fig(preset: str, key: str):
    return SUPERPOD_PRESETS[preset].figures[key].value


def test_the_new_presets_are_rows_of_the_table() -> None:
    assert set(NEW) <= set(SUPERPOD_PRESETS)
    assert set(PRESET_ACCELERATORS) == set(SUPERPOD_PRESETS)


@pytest.mark.parametrize("preset", PRESETS)
def test_every_figure_names_its_source(preset: str) -> None:
    spec = SUPERPOD_PRESETS[preset]
    for fig in [spec.size, spec.accelerator, *spec.figures.values(), *spec.reference.values()]:
        assert figure_mark(fig) in ("[S]", "[D]", "[announced]", "[E]")
        assert len(fig.source) > len(figure_mark(fig)) + 5, fig  # more than the mark
    for key in ("gpus_per_pod", "gpus_per_server", "scaleup_rate", "scaleup_latency",
                "scaleup_switches", "gpus_per_nic", "planes", "nic_phy", "scaleout"):  # fmt: skip
        assert key in spec.figures, (preset, key)


def test_a_figure_without_a_mark_is_refused() -> None:
    from podsim.fabric.superpod_presets import Figure

    with pytest.raises(ValueError, match="starts with none of"):
        figure_mark(Figure(1, "somebody said so"))


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_builds_with_the_tables_figures(preset: str) -> None:
    """Default build: the scale-up domain size, per-accelerator scale-up bandwidth, switch
    planes, latency, servers, NIC cards and their rate equal the table."""
    spec = SUPERPOD_PRESETS[preset]
    g = build_topology(preset)
    validate_graph(g)
    gpp, gps = _fig(preset, "gpus_per_pod"), _fig(preset, "gpus_per_server")
    n_su, gpn = _fig(preset, "scaleup_switches"), _fig(preset, "gpus_per_nic")
    pods = spec.size.value
    assert g.graph["builder"] == preset and g.graph["params"][spec.size_key] == pods
    assert g.graph["accelerator"] == spec.accelerator.value
    assert len(gpus(g)) == pods * gpp
    # scale-up domain: every pod holds exactly gpus_per_pod GPUs behind n_su switches
    for pod in range(pods):
        members = [n for n, d in g.nodes(data=True) if d["role"] == "gpu" and d["pod"] == pod]
        assert len(members) == gpp
    assert len(switches(g, "scaleup")) == pods * n_su
    rate, lat = (
        parse_rate(_fig(preset, "scaleup_rate")),
        parse_time(_fig(preset, "scaleup_latency")),
    )
    for gid in (0, pods * gpp - 1):
        links = list(g.edges(f"gpu{gid}", data=True))
        assert len(links) == n_su
        assert sum(d["rate_bps"] for _, _, d in links) == pytest.approx(rate)
        assert all(d["latency_s"] == pytest.approx(lat / 2) for _, _, d in links)
    # servers and scale-out: one NIC card per gpus_per_nic accelerators, planes ports of nic_phy
    servers = {d["server"] for _, d in g.nodes(data=True) if d["role"] == "gpu"}
    assert len(servers) == pods * gpp // gps
    planes = _fig(preset, "planes")
    assert len(endpoints(g)) == pods * gpp // gpn * planes
    port = gpu_nics(g)[0][0]
    (leaf,) = g.neighbors(port)
    card_bps = planes * g.edges[port, leaf]["rate_bps"]
    assert card_bps == pytest.approx(planes * mac_rate(_fig(preset, "nic_phy")))
    assert g.graph["params"]["scaleout"] == _fig(preset, "scaleout")


@pytest.mark.parametrize("preset", NEW)
def test_new_presets_default_to_the_400g_smartnic(preset: str) -> None:
    """The SuperPoD presets' scale-out NIC is the design's 400 Gb/s SmartNIC card."""
    planes, phy = _fig(preset, "planes"), _fig(preset, "nic_phy")
    assert planes * mac_rate(phy) == pytest.approx(400e9)


def test_nvl72_is_one_nvlink_domain_of_72_at_900_gbytes_each_way() -> None:
    g = build_topology("nvl72", pods=1)
    assert len(gpus(g)) == 72 and len(switches(g, "scaleup")) == 18
    assert sum(d["rate_bps"] for _, _, d in g.edges("gpu5", data=True)) == pytest.approx(
        900e9 * 8
    )  # 1.8 TB/s bidirectional = 900 GB/s per direction
    assert len({g.nodes[p]["server"] for p in endpoints(g)}) == 18  # 18 trays of 4


def test_atlas_presets_follow_their_sources() -> None:
    a3 = build_topology("atlas-a3", pods=1)
    assert len(gpus(a3)) == 384 and len(switches(a3, "scaleup")) == 7
    assert sum(d["rate_bps"] for _, _, d in a3.edges("gpu0", data=True)) == pytest.approx(392e9 * 8)
    a950 = build_topology("atlas-950")
    assert len(gpus(a950)) == 8192
    assert sum(d["rate_bps"] for _, _, d in a950.edges("gpu0", data=True)) == pytest.approx(
        1e12 * 8
    )


@pytest.mark.parametrize("preset", ["superpod-128", "superpod-384", "h800-deepep"])
def test_converted_presets_are_the_generic_builder_with_the_tables_figures(preset: str) -> None:
    spec = SUPERPOD_PRESETS[preset]
    g = build_topology(preset, **{spec.size_key: 1})
    args = {k: f.value for k, f in spec.figures.items()}
    args.setdefault("fabric_phy", args["nic_phy"])
    ref = superpod(pods=1, name=g.graph["name"], **args)
    assert sorted(g.edges(data=True)) == sorted(ref.edges(data=True))
    assert dict(g.nodes(data=True)) == dict(ref.nodes(data=True))
    params = dict(g.graph["params"])
    if spec.size_key != "pods":
        assert params.pop(spec.size_key) == 1
    assert params == ref.graph["params"]


# values valid with small pods; the test takes the first that differs from the preset's default
OVERRIDES = {
    "gpus_per_pod": [32],
    "gpus_per_server": [2],
    "scaleup_rate": ["123GB/s"],
    "scaleup_latency": ["700ns"],
    "scaleup_switches": [3],
    "gpus_per_nic": [2, 1],
    "planes": [2, 1],
    "nic_phy": ["800GbE"],
    "fabric_phy": ["800GbE"],
    "scaleout": ["fat-tree"],
}
#: figures the graph stores in SI units under another name
STORED = {"scaleup_rate": ("scaleup_rate_bps", parse_rate),
          "scaleup_latency": ("scaleup_latency_s", parse_time)}  # fmt: skip


@pytest.mark.parametrize("preset", PRESETS)
def test_every_figure_is_overridable(preset: str) -> None:
    spec = SUPERPOD_PRESETS[preset]
    accepted = builder_parameters(preset)
    base = {spec.size_key: 1, "gpus_per_pod": 16}
    for key, fig in spec.figures.items():
        assert key in accepted, key
        value = next(v for v in OVERRIDES[key] if v != fig.value)
        g = build_topology(preset, **{**base, key: value})
        stored, conv = STORED.get(key, (key, lambda v: v))
        assert g.graph["params"][stored] == conv(value), key
    g = build_topology(preset, **{spec.size_key: 3, "gpus_per_pod": 8, "gpus_per_server": 4})
    assert len(gpus(g)) == 24


def _cli(args: list[str]):
    return CliRunner().invoke(app, args, terminal_width=200)


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [("scaleup_rate", "0GB/s", "scaleup_rate='0GB/s' must be > 0"),
     ("gpus_per_pod", "0", "gpus_per_pod=0 must be >= 1"),
     ("scaleup_latency", "-1ns", "scaleup_latency: duration '-1ns' is negative"),
     ("scaleup_switches", "1.5", "scaleup_switches=1.5 must be an integer"),
     ("scaleout", "torus", "scaleout='torus'; expected one of")],
)  # fmt: skip
def test_out_of_range_figure_in_a_scenario_file_is_exit_2(tmp_path, key, value, says) -> None:
    doc = {
        "name": "bad-preset",
        "engine": "flow",
        "cluster": {"preset": "nvl72", "params": {"pods": 1, key: yaml.safe_load(value)}},
        "workload": {"moe": {"model": "deepseek-v3", "ep_size": 8, "tokens_per_rank": 8}},
    }
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    r = _cli(["run", str(path), "--out", str(tmp_path / "out")])
    assert r.exit_code == 2, r.output
    assert f"cluster.params.{key}" in r.output and says in r.output, r.output
    assert "Traceback" not in r.output


def test_out_of_range_figure_on_the_command_line_is_exit_2() -> None:
    r = _cli(["run", "quickstart", "--set", "cluster.preset=atlas-a3", "--set",
              "cluster.params={pods: 1, gpus_per_nic: 3}"])  # fmt: skip
    assert r.exit_code == 2, r.output
    assert "gpus_per_nic=3 must divide gpus_per_server=8" in r.output
    r = _cli(["run", "quickstart", "--set", "cluster.params.scaleup_rate=-5GB/s"])
    assert r.exit_code == 2, r.output
    assert "cluster.params.scaleup_rate" in r.output and "-5GB/s" in r.output


def test_podsim_list_shows_every_preset_with_its_description() -> None:
    r = _cli(["list", "topologies"])
    assert r.exit_code == 0, r.output
    described = dict(TOPOLOGIES.describe())
    flat = " ".join(r.output.split())
    for preset in PRESETS:
        assert described[preset] == SUPERPOD_PRESETS[preset].description
        assert described[preset].startswith("preset:")
        assert preset in r.output and " ".join(described[preset].split())[:40] in flat, preset


def test_physics_md_holds_the_preset_table() -> None:
    text = PHYSICS.read_text()
    assert "## SuperPoD presets" in text
    assert preset_figures_markdown() in text  # regenerate the table when the data change


@pytest.mark.parametrize("preset", NEW)
def test_new_preset_runs_a_small_moe_layer_on_the_flow_engine(preset: str) -> None:
    """Two reduced pods (8 accelerators each) and a tiny DeepSeek-V3 layer: the run completes
    and every message arrives, with traffic on the scale-up and on the scale-out fabric."""
    res = podsim.run(
        "quickstart",
        overrides=[f"cluster.preset={preset}", "cluster.params={pods: 2, gpus_per_pod: 8}",
                   "engine=flow", "workload.moe.ep_size=16", "workload.moe.tokens_per_rank=8",
                   "outputs.plots=false"],
    )  # fmt: skip
    s = res.summary
    assert s["status"] == "complete", s
    assert s["messages"]["unfinished"] == 0
    assert s["sim_time_s"] > 0
