"""Shared helpers for the packet-engine tests (not collected: no test_ prefix)."""

from __future__ import annotations

import networkx as nx
import simpy
from podsim.fabric.host import Host, make_hosts
from podsim.fabric.network import Network
from podsim.fabric.switch import SwitchConfig

#: docs/physics.md, "Fibre propagation 5 ns/m" [S]; written out here so tests do not reuse the
#: engine's own constant.
NS_PER_M = 5e-9
OVERHEAD = 82  # docs/physics.md RoCEv2 per-packet overhead


def build(
    graph: nx.Graph, cfg: SwitchConfig | None = None, seed: int = 0, **host_kw
) -> tuple[simpy.Environment, Network, dict[str, Host]]:
    env = simpy.Environment()
    net = Network(env, graph, cfg or SwitchConfig(), seed=seed)
    hosts = make_hosts(net, **host_kw)
    return env, net, hosts


def fingerprint(net: Network, hosts: dict[str, Host]) -> tuple:
    """Everything observable about a finished run, for bit-identity checks."""
    ports = tuple(
        (
            p.name,
            p.tx_bytes,
            p.tx_pkts,
            p.drops,
            p.ecn_marks,
            p.max_qbytes,
            p.pauses_sent,
            p.paused_s,
        )
        for p in net.ports
    )
    msgs = tuple(
        (m.flow, m.rx_bytes, m.t_first_rx, m.t_last_rx, m.t_done)
        for h in hosts.values()
        for m in h.messages
    )
    lat = tuple((h.lat_min, h.lat_max, h.lat_sum, h.ecn_pkts) for h in hosts.values())
    return ports, msgs, lat
