"""Scale-up (NVLink/UB-style) transfers for engines whose substrate models only the scale-out
fabric.

Model: every GPU has one egress and one ingress of rate R = the sum of its scale-up links'
``rate_bps`` (the pod's switches share the GPU's bandwidth, as NVLink links spread over NVSwitch
chips; fabric.superpod builds them that way). A message of B bytes from GPU a to GPU b waits
until both a's egress and b's ingress are free, holds both for ``8 B / min(R_a, R_b)`` seconds
and is delivered one path latency later; the path latency follows the packet engine's per-link
rule (propagation at 5 ns/m plus the edge's ``latency_s``) over GPU -> switch -> GPU.

It is a reservation (store-and-forward, FIFO per port) model: it never overlaps two messages on
one port, so it is exact for a lone transfer and conservative when transfers interleave. The
scale-up domain carries 3-4x the scale-out bandwidth per GPU (physics.md: NVLink 160 GB/s vs
IB 50 GB/s per GPU [S]), so it rarely sets a phase's completion time; when it does, this model
errs on the slow side.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import networkx as nx
import simpy

from fabric.kernel import call_at
from fabric.phy import PROPAGATION_S_PER_M

__all__ = ["ScaleUpPipes"]


class ScaleUpPipes:
    """Per-GPU scale-up egress/ingress reservations (see module docstring)."""

    def __init__(self, env: simpy.Environment, graph: nx.Graph) -> None:
        self.env = env
        self.rate: dict[int, float] = defaultdict(float)
        self.latency: dict[int, float] = {}
        self.links: dict[int, list[tuple[str, str]]] = defaultdict(list)
        for u, v, d in graph.edges(data=True):
            if d.get("kind") != "scaleup":
                continue
            gpu_node, sw = (u, v) if graph.nodes[u].get("role") == "gpu" else (v, u)
            gid = int(graph.nodes[gpu_node]["gpu"])
            self.rate[gid] += float(d["rate_bps"])
            hop = float(d.get("length_m", 0.0)) * PROPAGATION_S_PER_M + float(
                d.get("latency_s", 0.0)
            )
            self.latency[gid] = max(self.latency.get(gid, 0.0), hop)
            self.links[gid].append((gpu_node, sw))
        self._egress_free: dict[int, float] = defaultdict(float)
        self._ingress_free: dict[int, float] = defaultdict(float)
        #: payload bytes sent out of / into each GPU (for the links table)
        self.tx_bytes: dict[int, int] = defaultdict(int)
        self.rx_bytes: dict[int, int] = defaultdict(int)

    def reaches(self, gpu_a: int, gpu_b: int) -> bool:
        """Whether both GPUs have a scale-up port."""
        return self.rate.get(gpu_a, 0.0) > 0 and self.rate.get(gpu_b, 0.0) > 0

    def send(self, gpu_a: int, gpu_b: int, nbytes: int, done: Callable[[object], None],
             arg: object = None) -> float:  # fmt: skip
        """Reserve the ports and schedule ``done(arg)`` at delivery; returns delivery time."""
        now = self.env.now
        start = max(now, self._egress_free[gpu_a], self._ingress_free[gpu_b])
        dur = 8.0 * nbytes / min(self.rate[gpu_a], self.rate[gpu_b])
        self._egress_free[gpu_a] = start + dur
        self._ingress_free[gpu_b] = start + dur
        self.tx_bytes[gpu_a] += nbytes
        self.rx_bytes[gpu_b] += nbytes
        t = start + dur + self.latency[gpu_a] + self.latency[gpu_b]
        call_at(self.env, t, done, arg)
        return t

    def link_counters(self) -> list[dict[str, object]]:
        """tx_bytes per scale-up link direction (a GPU's bytes split evenly over its links)."""
        rows: list[dict[str, object]] = []
        for gid, links in self.links.items():
            n = len(links)
            for gpu_node, sw in links:
                rows.append({"link": f"{gpu_node}->{sw}", "tx_bytes": self.tx_bytes[gid] // n})
                rows.append({"link": f"{sw}->{gpu_node}", "tx_bytes": self.rx_bytes[gid] // n})
        return rows
