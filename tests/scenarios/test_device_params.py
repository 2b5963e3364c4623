"""One config per device: every NIC and switch parameter a model reads is declared once (its
device config), documented in `podsim docs`, and settable from a scenario."""

from __future__ import annotations

import dataclasses

import pytest
from podsim.fabric.params import params_of
from podsim.fabric.switch import SwitchConfig
from podsim.nic.nic import NicConfig
from podsim.scenarios.build.cluster import switch_config
from podsim.scenarios.engines import RunContext
from podsim.scenarios.engines.packet import nic_config
from podsim.scenarios.input.devices import settable
from podsim.scenarios.input.docs import render
from podsim.scenarios.input.loader import load_scenario

DEVICES = {"cluster.nic": NicConfig, "cluster.switch": SwitchConfig}

#: a valid value other than the default, as a file writes it, and the value the model gets
EXPLICIT = {
    "mtu": ("2048", 2048),
    "reliability": ("go-back-n", "gbn"),
    "multipath.selector": ("ecmp", "ecmp"),
    "multipath.params": ("{pen_ecn: 2}", {"pen_ecn": 2}),
    "cc.name": ("hpcc", "hpcc"),
    "cc.params": ("{g: 0.01}", {"g": 0.01}),
    "qp_cache": ("0", 0),
    "retry_limit": ("null", None),
    "buffer": ("null", None),
    "pfc.xon": ("500KB", 500_000),
    "store_and_forward": ("true", True),
    "adaptive_routing": ("true", True),
    "adaptive_routing_quantum": ("64KiB", 65_536),
    "credit_buffer": ("256KiB", 262_144),
    "link_layer": ("infiniband", "infiniband"),
    "sequence_nak": ("true", True),
    "ack_on_gap_fill": ("false", False),
    "ecn.enabled": ("false", False),
    "pfc.enabled": ("true", True),
    "pfc.hold_until_sent": ("true", True),
    "ecn.pmax": ("0.5", 0.5),
    "cnp_interval": ("0.0001", 0.0001),  # default null: the DCQCN profile's
}


def _other(spec) -> tuple[str, object]:
    """A file value different from the default and what the device receives for it."""
    if spec.key in EXPLICIT:
        return EXPLICIT[spec.key]
    d = spec.default
    if spec.kind in ("size", "int", "count"):
        return str(2 * d + 1) if spec.kind != "size" else str(2 * d), (
            2 * d + 1 if spec.kind != "size" else 2 * d
        )
    if spec.kind in ("time", "rate", "packet_rate", "float"):
        return repr(2 * d), 2 * d
    raise AssertionError(f"no test value for {spec.key} ({spec.kind})")


def test_every_field_is_declared_and_nothing_is_restated() -> None:
    for cls in DEVICES.values():
        declared = {p.field for p in params_of(cls)}
        assert declared == {f.name for f in dataclasses.fields(cls)}
        # a field without a scenario key says who sets it
        for p in params_of(cls):
            if p.key is None:
                assert "set by" in p.doc, p.field


def test_every_settable_parameter_is_documented_with_its_source() -> None:
    text = render(fmt="md")
    for prefix, cls in DEVICES.items():
        for p in settable(cls):
            row = next((r for r in text.splitlines() if f"`{prefix}.{p.key}`" in r), None)
            assert row is not None, f"{prefix}.{p.key} missing from podsim docs"
            assert p.source and f"source: {p.source}" in row, row


@pytest.mark.parametrize(("prefix", "key"), [(pre, p.key) for pre, cls in DEVICES.items()
                                             for p in settable(cls)])  # fmt: skip
def test_every_parameter_is_settable_from_a_scenario(prefix: str, key: str) -> None:
    cls = DEVICES[prefix]
    spec = next(p for p in settable(cls) if p.key == key)
    text, want = _other(spec)
    sets = [f"{prefix}.{key}={text}"]
    if key == "cc.params":  # parameters belong to a named algorithm
        sets.insert(0, f"{prefix}.cc.name=dcqcn")
    if key == "multipath.params":
        sets.insert(0, f"{prefix}.multipath.selector=bitmap")
    if key == "adaptive_routing_quantum":  # a band of adaptive routing's load comparison
        sets.insert(0, f"{prefix}.adaptive_routing=true")
    sc, _ = load_scenario("quickstart", sets)
    if cls is NicConfig:
        ctx = RunContext(scenario=sc, cluster=None, trace=None, compute=None)  # type: ignore[arg-type]
        device = nic_config(ctx)
    else:
        device = switch_config(sc)
    got = getattr(device, spec.field)
    assert (got == want and got != spec.default) or key in ("multipath.params",), (key, got)


def test_phy_parameters_are_documented_and_settable_per_profile() -> None:
    from podsim.fabric.phy import PhyProfile, base_phy, get_phy
    from podsim.scenarios.build.cluster import build_graph

    specs = settable(PhyProfile)
    assert [p.key for p in specs] == ["fec_latency"]
    # what the profile's name fixes says so
    assert all("set by" in p.doc for p in params_of(PhyProfile) if p.key is None)
    text = render(fmt="md")
    assert "`cluster.phys.<name>.fec_latency`" in text
    sc, _ = load_scenario("quickstart", ["cluster.phys={400GbE: {fec_latency: 250ns}}"])
    g = build_graph(sc)
    phys = {d["phy"] for _u, _v, d in g.edges(data=True) if d.get("phy") not in (None, "scaleup")}
    assert phys and all(base_phy(p) == "400GbE" for p in phys)
    assert {get_phy(p).fec_latency_s for p in phys} == {250e-9}
    assert get_phy("400GbE").fec_latency_s != 250e-9  # the registered profile is untouched
