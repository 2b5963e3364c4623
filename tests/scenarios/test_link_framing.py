"""Per-packet wire framing follows the NIC's link layer in every engine (issue 14).

Closed forms from the headers: RoCEv2 costs 20 B preamble+IFG + 18 B Ethernet+FCS + 20 B IPv4 +
8 B UDP + 12 B BTH + 4 B ICRC = 82 B per packet; InfiniBand LRH 8 + BTH 12 + ICRC 4 + VCRC 2 =
26 B (IBTA vol. 1 ch. 5, 7.7, 7.8, 9.2). One long flow on an idle link therefore moves payload at
P / (P + overhead) of the line rate.
"""

from __future__ import annotations

import pandas as pd
import pytest
import simpy
from podsim.fabric.network import Network
from podsim.fabric.packet import link_framing
from podsim.fabric.topology import build_topology
from podsim.nic.nic import NicConfig, RdmaNetwork
from podsim.scenarios.build.cluster import build_cluster
from podsim.scenarios.engines import ENGINES, RunContext
from podsim.scenarios.input.loader import load_scenario

HEADERS = {"ethernet": 20 + 18 + 20 + 8 + 12 + 4, "infiniband": 8 + 12 + 4 + 2}
MTU = 4096
RATE = 400e9
NO_COMPUTE = pd.DataFrame({"step": [], "layer": [], "rank": [], "compute_s": []})


@pytest.mark.parametrize("layer", sorted(HEADERS))
def test_link_framing_is_the_sum_of_its_headers(layer: str) -> None:
    overhead, least = link_framing(layer)
    assert overhead == HEADERS[layer]
    assert least == (64 + 20 if layer == "ethernet" else HEADERS[layer])
    assert NicConfig(link_layer=layer).framing == (overhead, least)


def test_unknown_link_layer_is_refused() -> None:
    with pytest.raises(ValueError, match="link_layer='fddi'"):
        link_framing("fddi")


def _fluid_fct(engine: str, layer: str, nbytes: int) -> float:
    switch = {"credit_buffer": "256KiB"} if layer == "infiniband" else {}
    sc, _ = load_scenario(
        {
            "name": "t",
            "seed": 0,
            "engine": engine,
            "sim": {"endpoint": "host"},
            "cluster": {
                "topology": {
                    "name": "leaf-spine",
                    "params": {"hosts_per_leaf": 2, "leaves": 1, "spines": 1},
                },
                "nic": {"link_layer": layer, "multipath": {"selector": "ecmp"}},
                "switch": switch,
            },
            "workload": {"synthetic": {"pattern": "uniform"}},
            "outputs": {"plots": False},
        }
    )
    tr = pd.DataFrame({"src_rank": [0], "dst_rank": [1], "bytes": [nbytes]})
    tr = tr.assign(step=0, layer=0, phase="dispatch", tokens=1, start_s=0.0, hop="rdma")
    out = ENGINES.get(engine)(RunContext(sc, build_cluster(sc, 2), tr, NO_COMPUTE))
    return float(out.messages["fct_s"].iloc[0])


@pytest.mark.parametrize("engine", ["flow", "bound"])
@pytest.mark.parametrize("layer", sorted(HEADERS))
def test_fluid_engines_goodput_follows_link_layer(engine: str, layer: str) -> None:
    """The extra time of 1 MiB more payload (latency cancels) is its wire bits at line rate."""
    extra = 1 << 20
    dt = _fluid_fct(engine, layer, 2 * extra) - _fluid_fct(engine, layer, extra)
    expect = MTU / (MTU + HEADERS[layer]) * RATE
    assert 8 * extra / dt == pytest.approx(expect, rel=1e-9)


@pytest.mark.parametrize("layer", sorted(HEADERS))
def test_packet_engine_goodput_follows_link_layer(layer: str) -> None:
    """SmartNIC on a star: a long WRITE's payload rate is P/(P+overhead) x 400 Gb/s (the first
    packet's RETH and the path latency cancel in the difference of two sizes)."""
    times = []
    for size in (4 << 20, 8 << 20):
        env = simpy.Environment()
        net = Network(env, build_topology("star", hosts=2), None, seed=1)
        cfg = NicConfig(cc="none", selector="ecmp", link_layer=layer)
        rdma = RdmaNetwork(net, cfg, seed=1)
        m = rdma.post(0, 1, size)
        rdma.run()
        times.append(m.t_delivered - m.start_s)
    expect = MTU / (MTU + HEADERS[layer]) * RATE
    assert 8 * (4 << 20) / (times[1] - times[0]) == pytest.approx(expect, rel=1e-9)
