"""One config per device for the node layouts: every layout declares its parameters (a
dataclass of :mod:`podsim.nic.pcie.layouts`, its device specs those of
:mod:`podsim.nic.pcie.devices` / :mod:`podsim.nic.pcie.link`), ``cluster.layout_params`` is
generated from them, ``podsim docs`` lists each with its unit, default and source, and a wrong
key or value is refused at its key with a did-you-mean."""

from __future__ import annotations

import dataclasses

import pytest
from podsim.fabric.params import params_of
from podsim.nic.pcie import NODE_LAYOUTS
from podsim.scenarios.build.cluster import build_cluster
from podsim.scenarios.cli.app import app
from podsim.scenarios.input.devices import settable
from podsim.scenarios.input.docs import reference
from podsim.scenarios.input.loader import load_scenario
from typer.testing import CliRunner


def _leaves(cls: type, prefix: str = "") -> list[tuple[str, object]]:
    """(dotted key, declaration) of every scenario key of device config ``cls``."""
    out: list[tuple[str, object]] = []
    for p in settable(cls):
        if p.section is not None:
            out += _leaves(p.section, f"{prefix}{p.key}.")
        else:
            out.append((f"{prefix}{p.key}", p))
    return out


CASES = [(name, key, p) for name in NODE_LAYOUTS.names()
         for key, p in _leaves(NODE_LAYOUTS.get(name).params)]  # fmt: skip


def test_every_layout_declares_every_parameter_it_takes() -> None:
    for name in NODE_LAYOUTS.names():
        cls = NODE_LAYOUTS.get(name).params
        assert {p.field for p in params_of(cls)} == {f.name for f in dataclasses.fields(cls)}
        for key, p in _leaves(cls):
            assert p.doc and p.source, (name, key)  # type: ignore[attr-defined]
    # a device spec field a scenario does not set says who sets it
    for p in params_of(NODE_LAYOUTS.get("external-switch").params):
        for q in params_of(p.section) if p.section else ():
            assert q.key is not None or "set by" in q.doc, (p.key, q.field)


@pytest.mark.parametrize(("layout", "key", "spec"), CASES)
def test_podsim_docs_lists_every_layout_parameter(layout: str, key: str, spec) -> None:
    rows = [r for r in reference() if r.path.split(" (")[0] == f"cluster.layout_params.{key}"]
    # the layouts that take the key with this default (a row per distinct default)
    mine = [r for r in rows if " (" not in r.path or layout in r.path]
    assert len(mine) == 1, (layout, key, [r.path for r in rows])
    row = mine[0]
    assert f"(source: {spec.source})" in row.description
    unit = {"size": "bytes", "time": "s", "rate": "bit/s"}.get(spec.kind, "")
    assert row.unit == unit
    if spec.default is None:
        assert row.default == "null"
    elif spec.kind in ("count", "int", "size"):
        assert row.default == str(spec.default)


def test_layouts_that_differ_have_their_own_rows() -> None:
    rows = {r.path: r for r in reference()}
    assert rows["cluster.layout_params.uplink_lanes (external-switch)"].default == "16"
    assert rows["cluster.layout_params.uplink_lanes (on-card-switch)"].default == "32"
    assert "cluster.layout_params.switches (external-switch)" in rows
    assert rows["cluster.layout_params.nic_dma.read_tags"].default == "256"  # every layout


#: a valid value other than the default, as a file writes it, and what the device gets
OTHER = {
    "nic_dma.max_read_request_bytes": ("4KiB", 4096),
    "nic_dma.read_tags": ("32", 32),
    "nic_dma.completion_bytes": ("128", 128),
    "nic_dma.read_latency_s": ("2us", 2e-6),
    "switch.hop_latency_s": ("105ns", 105e-9),
    "ssd.read_latency_s": ("80us", 80e-6),
    "root.latency_s": ("400ns", 400e-9),
    "link.mps": ("512", 512),
    "uplink_lanes": ("8", 8),
}


@pytest.mark.parametrize("key", sorted(OTHER))
def test_layout_parameters_reach_the_built_tree(key: str) -> None:
    text, want = OTHER[key]
    sets = [f"cluster.layout_params.{key}={text}"]
    if key.startswith("ssd."):
        sets.append("cluster.layout_params.ssds=2")
    sc, _ = load_scenario("quickstart", sets)
    assert sc.cluster.layout == "external-switch"
    tree = build_cluster(sc).pcie.nodes[0].tree  # type: ignore[union-attr]
    section, _, leaf = key.rpartition(".")
    if section == "link":
        got = getattr(tree.graph.edges["sw0", "gpu0"]["link"], leaf)
    elif key == "uplink_lanes":
        got = tree.graph.edges["root0", "sw0"]["link"].lanes
    else:
        node = {"nic_dma": "nic0", "switch": "sw0", "ssd": "ssd0", "root": "root0"}[section]
        got = getattr(tree.spec(node), leaf)
    assert got == pytest.approx(want)


def _cli(*sets: str) -> tuple[int, str]:
    args = ["validate", "quickstart"]
    for s in sets:
        args += ["--set", s]
    r = CliRunner().invoke(app, args)
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    return r.exit_code, " ".join(r.output.split())


@pytest.mark.parametrize(
    ("sets", "key", "words"),
    [
        (["cluster.layout_params.nic_dma.read_tag=32"], "cluster.layout_params.nic_dma.read_tag",
         "Did you mean 'read_tags'"),
        (["cluster.layout_params.nic_dma.read_latency=2us"],
         "cluster.layout_params.nic_dma.read_latency", "Did you mean 'read_latency_s'"),
        (["cluster.layout=on-card-switch", "cluster.layout_params.switches=2"],
         "cluster.layout_params.switches", "in cluster.layout_params (on-card-switch)"),
        (["cluster.layout_params.link.lanes=8"], "cluster.layout_params.link.lanes",
         "Did you mean 'latency_s'"),
        (["cluster.layout_params.nic_dma.max_read_request_bytes=300"],
         "cluster.layout_params.nic_dma.max_read_request_bytes", "(128, 256, 512, 1024"),
        (["cluster.layout_params.nic_dma.read_tags=0"], "cluster.layout_params.nic_dma.read_tags",
         "got 0"),
        (["cluster.layout_params.switch.hop_latency_s=-1ns"],
         "cluster.layout_params.switch.hop_latency_s", "got '-1ns'"),
        (["cluster.layout_params.link.gen=7"], "cluster.layout_params.link.gen", "[3, 4, 5]"),
        (["cluster.layout_params.gpu_lanes=12"], "cluster.layout_params.gpu_lanes",
         "(1, 2, 4, 8, 16, 32)"),
        (["cluster.layout=null", "cluster.layout_params.ssds=2"], "cluster.layout_params",
         "set cluster.layout"),
    ],
)  # fmt: skip
def test_a_wrong_layout_key_or_value_is_refused_at_its_key(
    sets: list[str], key: str, words: str
) -> None:
    code, out = _cli(*sets)
    assert code == 2, out
    assert f"key {key}:" in out and words in out, out


def test_the_file_keeps_only_the_keys_it_gives() -> None:
    """The validated section holds what the file wrote (quantities in the file's form), so the
    build still knows that gpus and nics come from the topology."""
    sc, _ = load_scenario(
        "quickstart", ["cluster.layout_params={ssds: 2, nic_dma: {read_latency_s: 2us}}"]
    )
    assert sc.cluster.layout_params == {"ssds": 2, "nic_dma": {"read_latency_s": "2us"}}


def test_a_layout_registered_after_the_schema_is_checked_the_same_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A plug-in layout registered after ``podsim.scenarios.input.schema`` was imported gets
    its parameters model on first use: a wrong key is refused at its key, a right one kept."""
    from podsim.nic.pcie.layouts import NodeLayout, RootComplexParams, root_complex
    from podsim.scenarios import errors
    from podsim.scenarios.input import schema

    @dataclasses.dataclass(frozen=True)
    class PlugParams(RootComplexParams):
        pass

    assert "plug-rc" not in schema.LAYOUT_PARAMS
    NODE_LAYOUTS.add("plug-rc", NodeLayout(PlugParams, root_complex.build), "a plug-in")
    monkeypatch.setattr(schema, "LAYOUT_PARAMS", dict(schema.LAYOUT_PARAMS))
    monkeypatch.setattr(errors, "LATE_TAGGED", {})
    monkeypatch.setattr(schema, "LATE_TAGGED", errors.LATE_TAGGED)
    try:
        code, out = _cli("cluster.layout=plug-rc", "cluster.layout_params.ssdz=2")
        assert code == 2, out
        assert "key cluster.layout_params.ssdz:" in out and "or 'ssds'?" in out, out
        assert "in cluster.layout_params (plug-rc)" in out, out
        sets = ["cluster.layout=plug-rc", "cluster.layout_params.ssds=2"]
        sc, _ = load_scenario("quickstart", sets)
        assert sc.cluster.layout_params == {"ssds": 2}
        assert "plug-rc" in schema.LAYOUT_PARAMS
    finally:
        NODE_LAYOUTS._entries.pop("plug-rc", None)
