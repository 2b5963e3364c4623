"""The ``flow`` engine: SimPy events at flow starts and ends, max-min fair rates in between.

Adapter between the scenario layer and :mod:`podsim.fabric.flow`. It offers
:func:`scenarios.execution.timeline.run_timeline` a transport (the same layer timeline as the packet
engine: dispatch -> compute -> combine per rank) whose messages become fluid flows:

- ``rdma`` messages go from the source rank's NIC ports to the destination rank's ports. Path
  policy from ``cluster.nic.multipath`` (:func:`path_policy`): ``ecmp`` with the SmartNIC
  endpoint puts each message on the path and plane of its QP exactly as the packet engine's
  switches hash it (:meth:`FlowCluster._qp_keys`: the QP's flow label and entropy value;
  :meth:`podsim.fabric.flow.FlowPaths.route_replay`: every switch's next hops and ECMP hash),
  so both engines see the same collisions; with the host endpoint it hashes each message to
  one equal-cost path and one plane (``msg mod planes``) of its own; ``spray`` over ``paths``
  entropy values spreads the message evenly over all equal-cost paths when ``paths`` covers
  them (the bundle constraints of :mod:`podsim.fabric.flow.paths`), else over ``paths``
  hashed paths; ``adaptive``, ``bitmap`` and
  ``reps`` steer by load or by congestion feedback, modelled as the ideal load-aware split,
  which on these symmetric fabrics is the even spread. Non-ECMP policies also split a message
  evenly over the planes of a multi-plane NIC.
- send queues: an RDMA message goes on its rank pair's QP (or one of ``cluster.nic.qps_per_pair``,
  round-robin; :class:`podsim.scenarios.engines.qps.QpNumbering`, the packet engine's numbering),
  and a QP sends its messages in order: a message posted while the one before it on its QP is
  still sending waits, and starts when that one has sent its last byte (its flow leaves the
  solve). A line-rate host (``sim.endpoint: host``) sends all of a port's messages in order,
  as :class:`podsim.fabric.host.Host` does. ``engine_info.queued_messages`` counts the
  messages that waited;
- every RDMA flow also loads its NIC card's packet-rate limit (``cluster.nic.packet_rate``,
  transmit and receive separately);
- PCIe (with ``cluster.layout``): every resource of every server's PCIe tree (directed links,
  switch capacities, root-complex P2P limits, SSD read rates; the same
  :class:`podsim.nic.pcie.cluster.ClusterPcie` the packet engine solves) is a constraint of its
  own, and an RDMA flow loads its sender's GPU -> NIC path and its receiver's NIC -> GPU path
  with its payload rate (GPUDirect RDMA). So PCIe and network share one max-min solve: a NIC's
  DMA rate is what its tree leaves it, as the packet engine's per-NIC DMA caps are (there
  re-solved whenever a server's set of active streams changes). Two ranks behind one NIC card
  exchange data GPU -> GPU through the tree (a flow on the P2P path, delivered one path latency
  after its last byte, as in the packet engine); ``workload.storage`` GPUDirect Storage reads
  are background flows SSD -> GPU on the same trees, started at ``storage.start``
  (``engine_info.pcie.storage_reads``). PCIe switches arbitrate between ports, not flows, so a
  read shares a link with the NIC's GPUDirect stream as one stream with another, however many
  messages feed the NIC: each read runs at the share the packet engine's stream solve gives it
  (:class:`StorageShares`), re-solved whenever its server's set of active streams changes, and
  the RDMA flows share what is left. An RDMA message's latency adds its sender's GPU -> NIC and
  its receiver's NIC -> GPU path latencies. One difference: the packet engine gives each GPU's
  stream one max-min weight however many messages feed it; here each flow has weight 1 (the same
  shares when the ranks send alike, as in an all-to-all). Without ``cluster.layout`` there is no
  tree: PCIe does not limit, and same-card messages are delivered at once;
- wire bytes follow the NIC link layer's framing (RoCEv2 82 B, InfiniBand 26 B per packet:
  :func:`podsim.fabric.packet.link_framing`) at ``cluster.nic.mtu``
  (:mod:`podsim.fabric.flow.wire`; +16 B RETH per message with the SmartNIC endpoint, as an
  RDMA WRITE);
- ACKs (SmartNIC endpoint): one per ``cluster.nic.ack_coalesce`` data packets, the link
  layer's framing plus the 4 B AETH each, load the reverse of every link or bundle the message
  crosses in the same share (the bound engine leaves them out; a flow re-hashed around a dead
  link keeps only its data path);
- congestion control enters as the efficiency of shared fabric queues
  (:data:`podsim.fabric.flow.cc.CC_EFFICIENCY` for ``cluster.nic.cc.name``);
- ``scaleup`` messages between GPUs with a scale-up port are flows over the source GPU's
  scale-up egress and the destination's ingress (the model of
  :mod:`fabric.scaleup`);
- the SMs' copy path (``workload.moe.deepep.copy_rate`` C, deepep-normal only): DeepEP's
  normal kernels copy every row a GPU receives out of their buffers with the kernel's SMs, its
  rows to itself included (github:deepseek-ai/DeepEP dd758ca, csrc/kernels/legacy/intranode.cu
  and internode.cu: the receiving warps copy each token of every source rank, the GPU itself
  one of them). Each rank gets one constraint of capacity C, loaded by the payload of every
  ``scaleup`` or ``local`` message into it; ``local`` messages then become flows over that
  constraint alone (no latency, no wire bytes), where the executor otherwise delivers them at
  once. RDMA rows are not counted: they land in the RDMA buffer by the NIC's DMA, and their
  NVLink forward is a ``scaleup`` message of its own.

Faults (``link_down``, ``link_degrade``, ``switch_down``, ``nic_down``) are capacity changes
at the fault times (:mod:`podsim.fabric.flow.faults`): hashed flows on a dead link stall until
routing avoids it (``cluster.routing.reconvergence`` under static ECMP, at once under a
multipath selector) and are then re-hashed onto surviving paths; spread flows lose the dead
link's share of their bundles at once. Flows still at rate 0 on a dead constraint when the run
ends get that reason in the messages table. ``ber`` faults are refused (loss is per packet).

Latency of a message: its path's propagation, FEC and switch latency (plus a packet's
serialisation per store-and-forward switch). With the SmartNIC endpoint (``sim.endpoint:
nic``) the sender's phase bookkeeping waits for the ACK (one more path latency, as in the
packet engine) while the messages table records the delivery time.

Batching (``rtol``, :class:`podsim.fabric.flow.FlowSim`): exact (0) up to :data:`AUTO_EXACT_FLOWS`
messages, :data:`AUTO_RTOL` above; a ``sim.flow_rtol`` scenario field, when the schema has one,
or :data:`OPTIONS` override it.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import simpy
from podsim.fabric.flow import FlowPaths, FlowSim, cc_efficiency, packets, wire_bytes
from podsim.fabric.flow.checks import check_flow_run
from podsim.fabric.flow.faults import FLOW_FAULT_KINDS, FlowFaults
from podsim.fabric.kernel import call_at
from podsim.fabric.packet import RETH_BYTES, link_framing
from podsim.fabric.topology import SWITCH_ROLES
from podsim.nic.flow import QpCacheLatency, nic_constraints
from podsim.nic.transport.qp import ACK_WIRE_EXTRA
from podsim.scenarios.build.cluster import deepep_copy_rate
from podsim.scenarios.build.limits import check_fluid
from podsim.scenarios.engines import EngineOutput, RunContext, register_engine
from podsim.scenarios.engines.qps import QpNumbering, qp_table
from podsim.scenarios.execution import faults
from podsim.scenarios.execution.faults import fabric_faults
from podsim.scenarios.execution.timeline import run_timeline
from podsim.scenarios.results.phase_links import SpreadLinkBytes
from podsim.scenarios.results.tables import link_table, message_table

if TYPE_CHECKING:
    from podsim.scenarios.build.cluster import Cluster
    from podsim.scenarios.input.schema import Scenario

__all__ = [
    "AUTO_EXACT_FLOWS",
    "AUTO_RTOL",
    "OPTIONS",
    "FlowCluster",
    "FlowOptions",
    "MessageRoutes",
    "path_policy",
    "run_flow",
]

#: Up to this many messages the flow engine solves at every event (exact).
AUTO_EXACT_FLOWS = 5_000
#: Batching tolerance above AUTO_EXACT_FLOWS messages: on the 1,024-GPU DeepSeek-V3 layer of
#: benchmarks/bench_scale.py it puts dispatch and combine times 0.3 % and 0.4 % above the exact
#: model (5.608 vs 5.592 ms, 11.063 vs 11.021 ms) at 1/55 of its CPU time (8 s vs 436 s).
AUTO_RTOL = 0.003
#: Selectors that steer each packet by load or congestion feedback (modelled as an even split).
LOAD_AWARE = ("adaptive", "bitmap", "reps")


@dataclass
class FlowOptions:
    """Knobs of the flow engine that the scenario schema does not carry (Python API).

    ``rtol``: batching tolerance (None: automatic); ``efficiency``: CC efficiency override
    (None: :data:`podsim.fabric.flow.cc.CC_EFFICIENCY`); ``max_hashed_paths``: a spraying NIC with
    fewer entropy values than equal-cost paths gets that many hashed paths up to this number,
    above it the even spread.
    """

    rtol: float | None = None
    efficiency: float | None = None
    max_hashed_paths: int = 8
    extra: dict[str, Any] = field(default_factory=dict)


OPTIONS = FlowOptions()


def path_policy(
    selector: str, n_evs: int, paths: FlowPaths, max_hashed: int = 8
) -> tuple[str, int]:
    """(mode, n_paths) for :meth:`FlowPaths.route` from the NIC's path selector (module doc)."""
    if selector == "ecmp":
        return "hash", 1
    widest = int(paths.leaf_nup.max(initial=1)) * max(1, int(paths.spine_ncore.max(initial=1)))
    if selector == "spray" and n_evs < widest and n_evs <= max_hashed:
        return "hash", int(n_evs)
    return "spread", 0


@dataclass
class MessageRoutes:
    """Routes of a batch of messages: ``kind`` 0 = flow, 1 = delivered at once (same NIC
    card); ``idx``/``coef``/``frac`` (n, K) constraint tables; ``latency_s`` delivery
    latency; ``ack_s`` extra wait of the sender; ``packets``; ``wire`` wire bytes."""

    kind: np.ndarray
    idx: np.ndarray
    coef: np.ndarray
    frac: np.ndarray
    latency_s: np.ndarray
    ack_s: np.ndarray
    packets: np.ndarray
    wire: np.ndarray
    n_paths: np.ndarray
    src_port: np.ndarray
    dst_port: np.ndarray
    same_card: np.ndarray
    ctrl: np.ndarray | None = None  # (n, K): ACK entries (control traffic)
    queue: np.ndarray | None = None  # the send queue each message waits in (-1: none)

    def take(self, rows: np.ndarray) -> MessageRoutes:
        """The routes of messages ``rows`` of this batch."""
        return MessageRoutes(
            *(None if v is None else v[rows] for v in (getattr(self, f) for f in _ROUTE_FIELDS))
        )


_ROUTE_FIELDS = tuple(MessageRoutes.__dataclass_fields__)


class FlowCluster:
    """The cluster as the flow engine (and the bound) see it: constraints, ports and policy.

    ``spread_all`` routes every RDMA message over all equal-cost paths (what the bound needs).
    ``sm_copy``: add the SMs' copy path of ``workload.moe.deepep.copy_rate`` (module docstring);
    ``local`` messages may then be routed (over their rank's copy constraint alone).
    """

    def __init__(
        self,
        ctx: RunContext,
        *,
        spread_all: bool = False,
        options: FlowOptions | None = None,
        sm_copy: bool = False,
    ) -> None:
        opts = options or OPTIONS
        sc, cl = ctx.scenario, ctx.cluster
        sw = cl.switch
        self.paths = FlowPaths(
            cl.graph,
            switch_latency_s=float(getattr(sw, "latency_s", 600e-9)),
            store_and_forward=bool(getattr(sw, "store_and_forward", False)),
            seed=sc.seed,
        )
        p = self.paths
        nic = sc.cluster.nic
        self.mtu = int(nic.mtu)
        self.endpoint = str(getattr(sc.sim, "endpoint", "host"))
        self.first_extra = RETH_BYTES if self.endpoint == "nic" else 0
        # per-packet framing of the NIC's link layer (RoCEv2 82 B / InfiniBand 26 B)
        self.overhead, self.min_wire = link_framing(str(nic.link_layer))
        self.ack_wire = max(self.overhead + ACK_WIRE_EXTRA, self.min_wire)  # + AETH
        self.selector = str(nic.multipath.selector)
        self.mode, self.n_paths = path_policy(
            self.selector, int(nic.multipath.paths), p, opts.max_hashed_paths
        )
        # adaptive-routing switches place each packet on the least-loaded equal-cost hop: in
        # the fluid limit a message is spread over all its equal-cost paths, whatever the NIC
        if spread_all or bool(getattr(sw, "adaptive", False)):
            self.mode, self.n_paths = "spread", 0
        self.ecmp_planes = self.selector == "ecmp" and not spread_all  # the NIC picks the plane
        # the SmartNIC's ECMP QPs take the path the packet engine's switches hash them onto
        # (route_replay): same QP label, same entropy value, same per-switch hash
        self.replay = (
            self.ecmp_planes and self.endpoint == "nic" and (self.mode, self.n_paths) == ("hash", 1)
        )
        self.seed = int(sc.seed)
        self.qps_per_pair = int(getattr(nic, "qps_per_pair", 1) or 1)
        self.n_evs = int(nic.multipath.paths)
        self.selector_params = dict(getattr(nic.multipath, "params", None) or {})
        self._qp_path: dict[tuple[int, int, int], tuple[int, int]] = {}
        # ACKs (NIC endpoint): one per ``ack_coalesce`` data packets, ack_wire bytes each, on
        # the reverse of every link (or bundle) the data crosses; the bound leaves them out
        self.ack_every = int(getattr(nic, "ack_coalesce", 1) or 1)
        self.acks = self.endpoint == "nic" and not spread_all
        rev = np.full(p.n_constraints, -1, dtype=np.int64)
        rev[: p.n_links] = np.arange(p.n_links, dtype=np.int64) ^ 1  # 2k <-> 2k+1
        pairs = (
            *zip(p.up_bundle, p.down_bundle, strict=True),
            *zip(p.group_up, p.group_down, strict=True),
        )
        for a, b in pairs:
            if a >= 0 and b >= 0:
                rev[a], rev[b] = b, a
        self.reverse = rev
        self.cc_name = str(nic.cc.name)
        self.efficiency = cc_efficiency(self.cc_name, opts.efficiency)
        # ranks -> port nodes (padded by repeating the first port), cards, GPU nodes
        n = cl.num_ranks
        planes = max(1, max((len(x) for x in cl.rank_ports), default=1))
        self.rank_nports = np.array([len(x) for x in cl.rank_ports], dtype=np.int64)
        self.rank_port = np.empty((n, planes), dtype=np.int64)
        for r, ports in enumerate(cl.rank_ports):
            idx = p.nodes(list(ports))
            self.rank_port[r, : idx.size] = idx
            self.rank_port[r, idx.size :] = idx[0]
        rank_nic = getattr(cl, "rank_nic", None)
        self.rank_card = (
            np.asarray(rank_nic, dtype=np.int64)
            if rank_nic is not None
            else p.card_of[self.rank_port[:, 0]]
        )
        gpu_nodes = np.array(
            [p.node_index.get(f"gpu{int(g)}", -1) for g in cl.rank_gpu], dtype=np.int64
        )
        self.rank_gpu_node = gpu_nodes
        self.rank_has_su = np.where(
            gpu_nodes >= 0, p.gpu_egress[np.maximum(gpu_nodes, 0)] >= 0, False
        )
        # NIC-side constraints per card: packet rate (tx, rx) and the PCIe path (tx, rx)
        cards = np.unique(self.rank_card)
        self.card_pos = np.full(int(cards.max(initial=0)) + 1, -1, dtype=np.int64)
        self.card_pos[cards] = np.arange(cards.size)
        # send-queue keys (MessageRoutes.queue): a QP (cards, index), or a host port after them
        self.n_cards = self.card_pos.size
        self.qp_numbers = QpNumbering(self.rank_card, self.qps_per_pair)
        self.host_queue_base = self.n_cards * self.n_cards * self.qp_numbers.indices
        # the SmartNIC's limits as constraints and its QP-context cache as latency
        # (podsim.nic.flow)
        self.nic = nic_constraints(p, cards, float(nic.packet_rate))
        # the node PCIe trees (module docstring): every tree resource is a constraint
        self.pcie = getattr(cl, "pcie", None)
        self.pcie_base = p.n_constraints
        if self.pcie is not None:
            pc = self.pcie
            ids = p.add_constraints(
                [f"pcie:{x}" for x in pc.constraint_names], pc.constraint_capacity_bps, "pcie"
            )
            self.pcie_base = int(ids[0]) if ids.size else p.n_constraints
            tx, tx_coef, rx, rx_coef = pc.rank_loads()
            self.pcie_tx = self._pcie_ids(tx)
            self.pcie_rx = self._pcie_ids(rx)
            # a transmit is the NIC reading GPU memory: completions, requests, tags
            self.pcie_tx_coef = tx_coef
            self.pcie_rx_coef = rx_coef
            self.pcie_tx_lat = np.asarray(pc.tx_latency_s, dtype=float)
            self.pcie_rx_lat = np.asarray(pc.rx_latency_s, dtype=float)
        # the SMs' copy path (workload.moe.deepep.copy_rate): one constraint per rank that
        # every scale-up or local message into the rank loads with its payload
        self.copy_ids: np.ndarray | None = None
        copy_rate = deepep_copy_rate(sc) if sm_copy else None
        if copy_rate is not None:
            self.copy_ids = p.add_constraints(
                [f"copy:rank{r}" for r in range(n)], np.full(n, float(copy_rate)), "gpu-copy"
            )
        qp_cache = int(getattr(nic, "qp_cache", 0) or 0)
        penalty = float(getattr(nic, "qp_miss_penalty", 0.0) or 0.0)
        self.qp_cache = (
            QpCacheLatency(
                qp_cache, penalty, self.mtu, self.first_extra, (self.overhead, self.min_wire)
            )
            if self.endpoint == "nic" and qp_cache > 0 and penalty > 0
            else None
        )

    def _qp_keys(
        self, src_card: np.ndarray, dst_card: np.ndarray, planes: np.ndarray, index: np.ndarray
    ) -> tuple[list[int], list[int]]:
        """(flow label, entropy value) of the packet engine's QP ``index`` for each message
        between these cards: the label is :func:`podsim.nic.transport.qp.qp_flow_key`, the EV
        the ECMP selector's draw from :func:`podsim.nic.nic.qp_rng`."""
        from podsim.nic.nic import qp_rng
        from podsim.nic.transport.qp import qp_flow_key
        from podsim.nic.transport.selectors import make_selector

        flows: list[int] = []
        evs: list[int] = []
        rows = zip(
            src_card.tolist(), dst_card.tolist(), planes.tolist(), index.tolist(), strict=True
        )
        for a, b, pl, i in rows:
            hit = self._qp_path.get((a, b, i))
            if hit is None:
                rng = qp_rng(self.seed, a, b, i)
                sel = make_selector(self.selector, self.n_evs, rng, int(pl), self.selector_params)
                hit = (qp_flow_key(a, b, i), int(sel.next_ev(0.0)))
                self._qp_path[(a, b, i)] = hit
            flows.append(hit[0])
            evs.append(hit[1])
        return flows, evs

    def _pcie_ids(self, res: np.ndarray) -> np.ndarray:
        """Indices into ``ClusterPcie.constraint_names`` (-1 padded) -> constraint ids."""
        return np.where(res >= 0, res + self.pcie_base, -1)

    def storage_routes(self, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(constraint ids, delivery latency) of a GPUDirect Storage read into each rank's GPU
        from its nearest SSD (needs ``cluster.layout``)."""
        assert self.pcie is not None
        ranks = np.asarray(ranks, dtype=np.int64)
        idx = self._pcie_ids(self.pcie.flow_loads([], [], storage_ranks=ranks)[0])
        lat = np.array([self.pcie.gds_latency(int(r)) for r in ranks.tolist()], dtype=float)
        return idx, lat

    # ------------------------------------------------------------------ routes

    def route(
        self, msg: np.ndarray, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, hop: np.ndarray
    ) -> MessageRoutes:
        """Routes of messages (arrays; ``hop`` strings); local messages (a rank to itself) only
        with the SMs' copy path (``copy_ids``), which they cross alone."""
        p = self.paths
        msg = np.asarray(msg, dtype=np.int64)
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        b = np.asarray(nbytes, dtype=np.int64)
        hop = np.asarray(hop).astype(str)
        n = msg.size
        lo = (hop == "local") | (src == dst)
        if lo.any() and self.copy_ids is None:
            raise ValueError("local messages are routed only over the SMs' copy path")
        su = ~lo & (hop == "scaleup") & self.rank_has_su[src] & self.rank_has_su[dst]
        same_card = ~lo & ~su & (self.rank_card[src] == self.rank_card[dst])
        rd = ~lo & ~su & ~same_card
        pc = self.pcie
        pk = packets(b, self.mtu)
        wire = wire_bytes(b, self.mtu, self.overhead, self.first_extra, self.min_wire)
        wf = np.where(b > 0, wire / np.maximum(b, 1), 1.0)
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (rows, idx, frac)
        ack_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        rev_max = self.reverse.size - 1
        lat = np.zeros(n)
        ack = np.zeros(n)
        n_paths = np.ones(n, dtype=np.int64)
        src_port = np.full(n, -1, dtype=np.int64)
        dst_port = np.full(n, -1, dtype=np.int64)
        queue = np.full(n, -1, dtype=np.int64)
        if su.any():
            rows = np.flatnonzero(su)
            r = p.route_scaleup(self.rank_gpu_node[src[rows]], self.rank_gpu_node[dst[rows]])
            parts.append((rows, r.idx, r.frac))
            lat[rows] = r.latency_s
        if pc is not None and same_card.any():
            # GPU -> GPU through the node's PCIe tree
            rows = np.flatnonzero(same_card)
            idx, coef = pc.flow_loads(src[rows], dst[rows])
            parts.append((rows, self._pcie_ids(idx), coef))
            pairs = zip(src[rows].tolist(), dst[rows].tolist(), strict=True)
            lat[rows] = [pc.p2p_latency(a, b) for a, b in pairs]
        if rd.any():
            rows = np.flatnonzero(rd)
            s, d = src[rows], dst[rows]
            n_pl = np.minimum(self.rank_nports[s], self.rank_nports[d])
            key = self.rank_card[s] * 1_000_003 + self.rank_card[d]
            ca, cb = self.rank_card[s], self.rank_card[d]
            if self.endpoint == "nic":
                # a QP sends its messages in order (module docstring: send queues)
                qpi = self.qp_numbers.next_many(s, d)
                queue[rows] = (ca * self.n_cards + cb) * self.qp_numbers.indices + qpi
            else:
                # a line-rate host sends all its messages in order, per port
                queue[rows] = self.host_queue_base + self.rank_port[s, msg[rows] % n_pl]
            if self.ecmp_planes or n_pl.max() == 1:
                if self.replay:
                    flow, ev = self._qp_keys(ca, cb, n_pl, qpi)
                    plane = np.asarray(ev, dtype=np.int64) % n_pl  # the QP's EV picks it
                    sp, dp = self.rank_port[s, plane], self.rank_port[d, plane]
                    r = p.route_replay(sp, dp, flow, ev)
                else:
                    plane = msg[rows] % n_pl
                    sp, dp = self.rank_port[s, plane], self.rank_port[d, plane]
                    r = p.route(
                        sp,
                        dp,
                        key * 7919 + msg[rows],
                        mode=self.mode,
                        n_paths=max(1, self.n_paths),
                    )
                idx, frac, r_lat, r_sw = r.idx, r.frac, r.latency_s, r.switches
                src_port[rows], dst_port[rows] = sp, dp
            else:
                # an even split over the planes both ranks have
                top = int(n_pl.max())
                idx_l, frac_l = [], []
                r_lat = np.zeros(rows.size)
                r_sw = np.zeros(rows.size, dtype=np.int64)
                for pl in range(top):
                    use = pl < n_pl
                    plane = np.where(use, pl, 0)
                    r = p.route(
                        self.rank_port[s, plane],
                        self.rank_port[d, plane],
                        key + pl,
                        mode=self.mode,
                        n_paths=max(1, self.n_paths),
                    )
                    idx_l.append(np.where(use[:, None], r.idx, -1))
                    frac_l.append(np.where(use[:, None], r.frac / n_pl[:, None], 0.0))
                    r_lat = np.maximum(r_lat, np.where(use, r.latency_s, 0.0))
                    r_sw = np.maximum(r_sw, np.where(use, r.switches, 0))
                idx, frac = np.concatenate(idx_l, axis=1), np.concatenate(frac_l, axis=1)
                src_port[rows], dst_port[rows] = self.rank_port[s, 0], self.rank_port[d, 0]
            if self.acks:
                # the ACKs cross the reverse of each link the data crosses, in the same share
                back = np.where(idx >= 0, self.reverse[np.clip(idx, 0, rev_max)], -1)
                back = np.where(idx <= rev_max, back, -1)
                acks = -(-pk[rows] // self.ack_every)
                ack_parts.append((rows, back, np.where(back >= 0, frac, 0.0), acks))
            # paths_used 0 = all equal-cost paths
            n_paths[rows] = max(1, self.n_paths) if self.mode == "hash" else 0
            cs = self.card_pos[self.rank_card[s]]
            cd = self.card_pos[self.rank_card[d]]
            nic_idx = self.nic.of(cs, cd)
            idx = np.concatenate([idx, np.stack(nic_idx, axis=1)], axis=1)
            frac = np.concatenate([frac, np.ones((rows.size, len(nic_idx)))], axis=1)
            if pc is not None:
                # GPUDirect RDMA: the sender's GPU -> NIC and the receiver's NIC -> GPU paths
                gdr = np.concatenate([self.pcie_tx[s], self.pcie_rx[d]], axis=1)
                coef = np.concatenate([self.pcie_tx_coef[s], self.pcie_rx_coef[d]], axis=1)
                idx = np.concatenate([idx, gdr], axis=1)
                frac = np.concatenate([frac, coef], axis=1)
            first = p.link_rate[self.paths._lookup(src_port[rows], p.leaf_of[src_port[rows]])]
            sf = r_sw * 8.0 * (np.minimum(b[rows], self.mtu) + self.overhead) / first
            lat[rows] = r_lat + (sf if p.store_and_forward else 0.0)
            if self.qp_cache is not None:
                lat[rows] += self.qp_cache.delay(
                    self.rank_card[s], self.rank_card[d], b[rows], first
                )
            net = lat[rows].copy()
            rx_lat = 0.0
            if pc is not None:
                # the NIC reads the payload from GPU memory (a read round trip) and writes it
                # into the receiver's
                rx_lat = self.pcie_rx_lat[d]
                lat[rows] += self.pcie_tx_lat[s] + rx_lat
            if self.endpoint == "nic":
                # the sender waits for the ACK, which may come after the receiver's GPU has
                # the data (one more network path latency than the NIC -> GPU path)
                ack[rows] = np.maximum(0.0, net + 8.0 * self.ack_wire / first - rx_lat)
            parts.append((rows, idx, frac))
        if self.copy_ids is not None:
            # the receiver's SMs copy every scale-up or local row (module docstring)
            rows = np.flatnonzero(lo | (hop == "scaleup"))
            parts.append((rows, self.copy_ids[dst[rows]][:, None], np.ones((rows.size, 1))))
        # ACK columns go last; their coefficient is ACK wire bytes per payload byte
        n_data = len(parts)
        parts += [(rows, idx, frac) for rows, idx, frac, _acks in ack_parts]
        k = max((x[1].shape[1] for x in parts), default=1)
        idx_all = np.full((n, k), -1, dtype=np.int64)
        frac_all = np.zeros((n, k))
        is_ack = np.zeros((n, k), dtype=bool)
        ack_coef = np.zeros(n)
        ack_pk = np.ones(n)
        for rows, _idx, _frac, acks in ack_parts:
            ack_coef[rows] = acks * self.ack_wire / np.maximum(b[rows], 1)
            ack_pk[rows] = acks / np.maximum(pk[rows], 1)
        used = np.zeros(n, dtype=np.int64)  # columns filled so far (a row may be in two parts)
        for j, (rows, idx, frac) in enumerate(parts):
            w = idx.shape[1]
            cols = used[rows][:, None] + np.arange(w)[None, :]
            if cols.size and int(cols.max()) >= k:
                pad = int(cols.max()) + 1 - k
                idx_all = np.pad(idx_all, ((0, 0), (0, pad)), constant_values=-1)
                frac_all = np.pad(frac_all, ((0, 0), (0, pad)))
                k += pad
            idx_all[rows[:, None], cols] = idx
            frac_all[rows[:, None], cols] = frac
            if j >= n_data:
                is_ack = np.pad(is_ack, ((0, 0), (0, k - is_ack.shape[1])))
                is_ack[rows[:, None], cols] = True
            used[rows] += w
        # coefficients per payload bit: wire factor on links/bundles, packets on the packet-rate
        # limits, the fraction on PCIe and scale-up
        coef = frac_all.copy()
        valid = idx_all >= 0
        tier = self.paths.tier[np.where(valid, idx_all, 0)]
        is_pps = valid & (tier == "nic-pps")
        is_wire = valid & ~is_pps & ~np.isin(tier, ("pcie", "gpu-scaleup", "gpu-copy"))
        coef = np.where(is_wire, frac_all * wf[:, None], coef)
        if ack_parts:
            is_ack = np.pad(is_ack, ((0, 0), (0, k - is_ack.shape[1])))
            coef = np.where(is_ack, frac_all * ack_coef[:, None], coef)
            # link packet counters: ACK packets, not data packets, on the reverse links
            frac_all = np.where(is_ack, frac_all * ack_pk[:, None], frac_all)
        with np.errstate(divide="ignore", invalid="ignore"):
            per_bit = np.where(b > 0, pk / (8.0 * np.maximum(b, 1)), 0.0)
        coef = np.where(is_pps, per_bit[:, None], coef)
        kind = np.where(same_card & (pc is None), 1, 0)
        pk = np.where(lo, 0, pk)  # a copy inside the GPU sends no packet
        wire = np.where(lo, 0, wire)
        if is_ack.shape != idx_all.shape:
            is_ack = np.pad(is_ack, ((0, 0), (0, k - is_ack.shape[1])))
        return MessageRoutes(
            kind, idx_all, coef, frac_all, lat, ack, pk, wire, n_paths, src_port, dst_port,
            same_card, is_ack, queue,
        )  # fmt: skip

    # ------------------------------------------------------------------ tables

    def link_counters(self, carried_bits: np.ndarray, packets_on: np.ndarray) -> pd.DataFrame:
        """Per directed link: wire bytes and packets, bundles spread evenly over members."""
        p = self.paths
        nl = p.n_links
        tx = carried_bits[:nl].copy()
        pk = packets_on[:nl].copy()
        for cid, members in p.members.items():
            if members.size and carried_bits[cid] > 0:
                np.add.at(tx, members, carried_bits[cid] / members.size)
                np.add.at(pk, members, packets_on[cid] / members.size)
        names = p.names[:nl]
        return pd.DataFrame(
            {
                "link": names,
                "tx_bytes": np.rint(tx / 8.0).astype(np.int64),
                "tx_packets": np.rint(pk).astype(np.int64),
            }
        )


#: Max-min weight of a storage read: large enough that the read reaches its rate cap (its
#: stream share, :class:`StorageShares`) before the RDMA flows it shares links with take the
#: rest. A modelling device (priority by weight), not a hardware figure.
STORAGE_WEIGHT = 1e6


class StorageShares:
    """GPUDirect Storage reads at their PCIe stream shares on the flow engine.

    Keeps, per rank, how many RDMA flows it sends and receives right now (its GPUDirect
    ``tx``/``rx`` streams are active while that count is > 0) and the storage reads running,
    and whenever a server with reads sees its set of active streams or reads change (once per
    simulated instant) solves that server as the packet engine's
    :class:`podsim.nic.pcie.runtime.PcieRuntime` does
    (:meth:`podsim.nic.pcie.cluster.ClusterPcie.rates`: one weight per GPUDirect stream, NICs
    greedy up to their goodput, a read key weighted by its reads) and caps each read at its
    key's rate over its reads.

    A flow posted or delivered while its rank's streams stay active changes no share, so it
    touches nothing: the caps are a function of each server's stream set and reads alone, and
    re-solving an unchanged server would only ask the fluid solver for a re-solve at once, out
    of its batching window (one solve per posted message on a pipelined DeepEP layer).
    ``updates`` counts the server solves.
    """

    def __init__(self, env: simpy.Environment, sim: FlowSim, pcie: Any) -> None:
        self.env = env
        self.sim = sim
        self.pcie = pcie
        n = int(pcie.num_ranks)
        self.tx = np.zeros(n, dtype=np.int64)
        self.rx = np.zeros(n, dtype=np.int64)
        self.flows: dict[int, tuple[int, int]] = {}  # RDMA flow -> (src rank, dst rank)
        self.reads: dict[int, dict[int, int]] = defaultdict(dict)  # server -> {flow: rank}
        self.server_ranks: dict[int, np.ndarray] = {
            int(s): np.flatnonzero(pcie.rank_server == s) for s in np.unique(pcie.rank_server)
        }
        self._server = np.asarray(pcie.rank_server, dtype=np.int64)
        self._dirty: set[int] = set()  # servers whose streams or reads may have changed
        self._state: dict[int, tuple[bytes, bytes, tuple[int, ...]]] = {}  # as last solved
        self._due = False
        self.updates = 0

    def add_rdma(self, ids: np.ndarray, src: np.ndarray, dst: np.ndarray) -> None:
        """RDMA flows ``ids`` from ranks ``src`` to ``dst`` were posted."""
        for f, a, b in zip(ids.tolist(), src.tolist(), dst.tolist(), strict=True):
            self.flows[f] = (a, b)
        # servers where a stream starts: a rank that sent (received) nothing until now
        started = np.concatenate([src[self.tx[src] == 0], dst[self.rx[dst] == 0]])
        np.add.at(self.tx, src, 1)
        np.add.at(self.rx, dst, 1)
        if started.size:
            self._touch(np.unique(self._server[started]).tolist())

    def add_reads(self, ids: np.ndarray, ranks: np.ndarray) -> None:
        """Storage reads ``ids`` into ranks ``ranks`` started."""
        for f, r in zip(ids.tolist(), ranks.tolist(), strict=True):
            self.reads[int(self._server[r])][f] = r
        self._touch(np.unique(self._server[ranks]).tolist())

    def done(self, fid: int) -> None:
        """Flow ``fid`` was delivered (an RDMA flow or a read)."""
        ab = self.flows.pop(fid, None)
        if ab is not None:
            a, b = ab
            self.tx[a] -= 1
            self.rx[b] -= 1
            if self.tx[a] == 0:  # the rank's stream ends
                self._touch((int(self._server[a]),))
            if self.rx[b] == 0:
                self._touch((int(self._server[b]),))
            return
        for server, reads in self.reads.items():
            if reads.pop(fid, None) is not None:
                self._touch((server,))
                return

    def _touch(self, servers: Iterable[int]) -> None:
        for s in servers:
            if self.reads.get(s):
                self._dirty.add(s)
            elif s in self._state:  # its last read left: nothing to cap any more
                del self._state[s]
        if not self._due and self._dirty:
            self._due = True
            call_at(self.env, self.env.now, self._update)

    def _update(self, _arg: object) -> None:
        self._due = False
        pc = self.pcie
        dirty, self._dirty = sorted(self._dirty), set()
        for server in dirty:
            reads = self.reads.get(server)
            if not reads:
                continue
            ranks = self.server_ranks[server]
            state = (
                (self.tx[ranks] > 0).tobytes(),
                (self.rx[ranks] > 0).tobytes(),
                tuple(reads),
            )
            if self._state.get(server) == state:
                continue  # streams stopped and started again within the instant
            self._state[server] = state
            active: dict[Any, float] = {}
            for r in ranks.tolist():
                if self.tx[r] > 0:
                    active[pc.tx_key(r)[1]] = 1.0
                if self.rx[r] > 0:
                    active[pc.rx_key(r)[1]] = 1.0
            keys = {f: pc.gds_key(r)[1] for f, r in reads.items()}
            count: dict[Any, int] = defaultdict(int)
            for k in keys.values():
                count[k] += 1
            for k, c in count.items():
                active[k] = float(c)
            res = pc.rates(server, active)
            ids = np.fromiter(keys, dtype=np.int64, count=len(keys))
            caps = np.array([res.rate_bps[k] / count[k] for k in keys.values()])
            self.sim.set_caps(ids, caps)
            self.updates += 1


class FlowTransport:
    """The :class:`podsim.scenarios.execution.timeline.Transport` of the flow engine."""

    name = "podsim.fabric.flow (max-min fluid flows)"

    def __init__(self, ctx: RunContext, options: FlowOptions | None = None) -> None:
        opts = options or OPTIONS
        self.ctx = ctx
        self.env = simpy.Environment()
        self.fc = FlowCluster(ctx, options=opts, sm_copy=True)
        #: local messages go through the SMs' copy path when it is modelled
        self.carries_local = self.fc.copy_ids is not None
        rtol = opts.rtol
        sim_rtol = getattr(ctx.scenario.sim, "flow_rtol", None)
        if rtol is None:
            rtol = sim_rtol
        if rtol is None:
            rtol = 0.0 if len(ctx.trace) <= AUTO_EXACT_FLOWS else AUTO_RTOL
        p = self.fc.paths
        self.sim = FlowSim(
            self.env,
            p.capacity,
            switch_egress=p.switch_egress,
            eta=self.fc.efficiency,
            rtol=float(rtol),
            on_deliver=self._delivered,
            on_sent=self._sent,
            expect_flows=max(1024, len(ctx.trace)),  # at most one flow per message
        )
        n = len(ctx.trace)
        self.end_s = np.full(n, np.nan)
        room = max(1024, n)
        self.flow_msg = np.zeros(room, dtype=np.int64)
        self.flow_ack = np.zeros(room)
        self._buf: list[tuple[int, int, int, int, str]] = []
        self._cb: Callable[[int], None] | None = None
        self._flush_scheduled = False
        self.pcie_local = 0
        self.injected_bytes = 0.0  # payload bytes handed to the fluid model as flows
        self.qp_rows: list[tuple[np.ndarray, ...]] = []
        self.flow_src = np.full(room, -1, dtype=np.int64)
        self.flow_dst = np.full(room, -1, dtype=np.int64)
        self.flow_key = np.zeros(room, dtype=np.int64)
        # send queues (MessageRoutes.queue): the flow each queue last started (-2 claimed by
        # the batch being admitted, -1 a message being started), the messages waiting in it
        self.flow_queue = np.full(room, -1, dtype=np.int64)
        self._heads: dict[int, int] = {}
        self._waiting: dict[int, deque[tuple[tuple[Any, ...], int]]] = {}
        self._starting: list[tuple[tuple[Any, ...], int]] = []
        self._start_scheduled = False
        self.queued_messages = 0  # messages that waited behind another on their send queue
        self.faults = self._faults(ctx)
        self.storage: list[tuple[np.ndarray, np.ndarray]] = []  # (flow ids, ranks) of reads
        self.shares: StorageShares | None = None
        self.p2p_messages = 0  # same-card messages through the PCIe tree, and their bytes
        self.p2p_bytes = 0

    def _faults(self, ctx: RunContext) -> FlowFaults | None:
        """Link, switch and NIC faults as capacity changes (:mod:`podsim.fabric.flow.faults`);
        hashed flows re-route after ``cluster.routing.reconvergence`` under static ECMP, at
        once under a multipath selector."""
        sc = ctx.scenario
        # one translation of the scenario's faults for every engine (scenarios.execution.faults)
        todo = [f for _i, f in fabric_faults(sc, scaleup_ok=True) if f.kind in FLOW_FAULT_KINDS]
        if not todo:
            return None
        delay = float(sc.cluster.routing.reconvergence) if self.fc.selector == "ecmp" else 0.0
        return FlowFaults(
            self.env,
            self.sim,
            self.fc.paths,
            todo,
            reroute_delay_s=delay,
            flow_ports=self._flow_ports,
        )

    def _flow_ports(self, fids: np.ndarray) -> tuple[np.ndarray, ...]:
        """(src port, dst port, paths, hash key) of flows; src -1 for flows that are not
        hashed onto single paths (spread over bundles, or scale-up)."""
        n = np.full(fids.size, max(1, self.fc.n_paths), dtype=np.int64)
        return self.flow_src[fids], self.flow_dst[fids], n, self.flow_key[fids]

    def send(
        self,
        msg: int,
        src_rank: int,
        dst_rank: int,
        nbytes: int,
        hop: str,
        on_done: Callable[[int], None],
    ) -> None:
        self._cb = on_done
        self._buf.append((msg, src_rank, dst_rank, nbytes, hop))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            call_at(self.env, self.env.now, self._flush)

    def _flush(self, _arg: object) -> None:
        self._flush_scheduled = False
        buf, self._buf = self._buf, []
        if not buf:
            return
        msg, src, dst, nbytes, hop = (np.array(c) for c in zip(*buf, strict=True))
        r = self.fc.route(msg, src, dst, nbytes, hop)
        now = self.env.now
        cb = self._cb
        assert cb is not None
        local = r.kind == 1
        self.pcie_local += int(r.same_card.sum())
        if self.fc.pcie is not None:
            self.p2p_messages += int(r.same_card.sum())
            self.p2p_bytes += int(nbytes[r.same_card].sum())
        if local.any():
            for m in msg[local].tolist():
                self.end_s[m] = now
                cb(m)
        go = ~local
        if r.queue is not None:
            go &= self._admit(r.queue, (r, msg, src, dst, nbytes))
        if go.all():
            self._post(r, msg, src, dst, nbytes)
        elif go.any():
            rows = np.flatnonzero(go)
            self._post(r.take(rows), msg[rows], src[rows], dst[rows], nbytes[rows])

    # ------------------------------------------------------------ send queues

    def _admit(self, queue: np.ndarray, batch: tuple[Any, ...]) -> np.ndarray:
        """Which messages of a routed batch start now: a message whose send queue (an RDMA QP,
        or a line-rate host's port: ``MessageRoutes.queue``) is sending waits behind it, in
        order (:meth:`_post` and :meth:`_sent` start it when the one before sent its last
        byte)."""
        ok = np.ones(queue.size, dtype=bool)
        heads, waiting, sim = self._heads, self._waiting, self.sim
        now = self.env.now
        for i in np.flatnonzero(queue >= 0).tolist():
            k = int(queue[i])
            q = waiting.get(k)
            if q is None:
                f = heads.get(k)
                # free: nothing ever posted, or the last message has sent its last byte
                if f is None or (f >= 0 and sim.committed[f] and sim.t_sent[f] <= now):
                    heads[k] = -2  # claimed by this batch (set to the flow id in _post)
                    continue
                q = waiting[k] = deque()
                if f >= 0:
                    sim.watch_sent(f)
            q.append((batch, i))
            self.queued_messages += 1
            ok[i] = False
        return ok

    def _sent(self, fid: int) -> None:
        """Flow ``fid`` sent its last byte: start the next message of its send queue."""
        k = int(self.flow_queue[fid])
        q = self._waiting[k]
        self._heads[k] = -1  # a message is being started (set to its flow id in _post)
        self._starting.append(q.popleft())
        if not q:
            del self._waiting[k]
        if not self._start_scheduled:
            self._start_scheduled = True
            call_at(self.env, self.env.now, self._start_waiting)

    def _start_waiting(self, _arg: object) -> None:
        """Post the messages whose turn came at this instant, one batch per routed batch."""
        self._start_scheduled = False
        todo, self._starting = self._starting, []
        groups: dict[int, tuple[tuple[Any, ...], list[int]]] = {}
        for batch, i in todo:
            groups.setdefault(id(batch), (batch, []))[1].append(i)
        for (r, msg, src, dst, nbytes), rows in groups.values():
            ix = np.asarray(rows, dtype=np.int64)
            self._post(r.take(ix), msg[ix], src[ix], dst[ix], nbytes[ix])

    def _post(
        self,
        r: MessageRoutes,
        msg: np.ndarray,
        src: np.ndarray,
        dst: np.ndarray,
        nbytes: np.ndarray,
    ) -> None:
        """Start routed messages as flows now."""
        queue = r.queue if r.queue is not None else np.full(msg.size, -1, dtype=np.int64)
        r_idx, r_coef, r_frac = r.idx, r.coef, r.frac
        r_ctrl = np.zeros(r_idx.shape, dtype=bool) if r.ctrl is None else r.ctrl
        # a flow hashed onto one port pair (multi-plane splits are left to their bundles)
        one_plane = self.fc.ecmp_planes or int(self.fc.rank_nports.max()) == 1
        hashed = (r.src_port >= 0) & (self.fc.mode == "hash") & one_plane
        src_p = np.where(hashed, r.src_port, -1)
        key = np.abs(msg * 7919 + src * 131 + dst)
        fl = self.faults
        if fl is not None and fl.routing_dead and hashed.any():
            # routing already avoids these dead links: new flows hash onto surviving paths
            dead = np.asarray(sorted({2 * k + j for k in fl.routing_dead for j in (0, 1)}))
            bad = hashed & np.isin(r_idx, dead).any(axis=1)
            if bad.any():
                rows = np.flatnonzero(bad)
                nn = np.full(rows.size, max(1, self.fc.n_paths), dtype=np.int64)
                i2, c2, f2, ok = fl.fix_routes(
                    src_p[rows],
                    r.dst_port[rows],
                    nn,
                    key[rows],
                    r_idx[rows],
                    r_coef[rows],
                    r_frac[rows],
                )
                k2 = max(i2.shape[1], r_idx.shape[1])
                r_idx = np.pad(r_idx, ((0, 0), (0, k2 - r_idx.shape[1])), constant_values=-1)
                r_coef = np.pad(r_coef, ((0, 0), (0, k2 - r_coef.shape[1])))
                r_frac = np.pad(r_frac, ((0, 0), (0, k2 - r_frac.shape[1])))
                r_ctrl = np.pad(r_ctrl, ((0, 0), (0, k2 - r_ctrl.shape[1])))
                w = i2.shape[1]
                r_idx[rows[ok], :w], r_idx[rows[ok], w:] = i2[ok], -1
                r_coef[rows[ok], :w], r_coef[rows[ok], w:] = c2[ok], 0.0
                r_frac[rows[ok], :w], r_frac[rows[ok], w:] = f2[ok], 0.0
                r_ctrl[rows[ok]] = False  # re-hashed: the data path only
        self.injected_bytes += float(nbytes.sum())
        ids = self.sim.add(
            r_idx,
            r_coef,
            nbytes,
            latency_s=r.latency_s,
            frac=r_frac,
            packets=r.packets,
            ctrl=r_ctrl,
        )
        self._grow(int(ids.max()) + 1)
        self.flow_msg[ids] = msg
        self.flow_ack[ids] = r.ack_s
        self.flow_src[ids] = src_p
        self.flow_dst[ids] = r.dst_port
        self.flow_key[ids] = key
        qp = r.src_port >= 0  # RDMA flows (scale-up transfers have no QP)
        if self.shares is not None:
            self.shares.add_rdma(ids[qp], src[qp], dst[qp])
        self.qp_rows.append(
            (
                ids[qp],
                src[qp],
                dst[qp],
                r.src_port[qp],
                r.dst_port[qp],
                nbytes[qp],
                r.packets[qp],
                r.n_paths[qp],
                queue[qp],
            )
        )
        on = queue >= 0
        if on.any():
            self.flow_queue[ids] = queue
            heads, waiting = self._heads, self._waiting
            for f, k in zip(ids[on].tolist(), queue[on].tolist(), strict=True):
                heads[k] = f
                if k in waiting:
                    self.sim.watch_sent(f)

    def schedule_storage(self, storage: Any) -> None:
        """Start the scenario's ``workload.storage`` GPUDirect Storage reads (``reads_per_gpu``
        bytes into each of ``ranks``, default every rank, at ``start``) as background flows
        SSD -> GPU on the node trees."""
        pc = self.fc.pcie
        assert pc is not None  # the scenario build refuses storage without cluster.layout
        ranks = np.arange(pc.num_ranks) if storage.ranks is None else np.asarray(storage.ranks)
        ranks = ranks.astype(np.int64)
        t0 = max(self.env.now, float(storage.start))
        self.shares = StorageShares(self.env, self.sim, pc)
        call_at(self.env, t0, self._start_storage, (ranks, int(storage.reads_per_gpu)))

    def _start_storage(self, arg: tuple[np.ndarray, int]) -> None:
        ranks, nbytes = arg
        if not ranks.size:
            return
        idx, lat = self.fc.storage_routes(ranks)
        frac = (idx >= 0).astype(float)
        b = np.full(ranks.size, nbytes, dtype=np.int64)
        self.injected_bytes += float(b.sum())
        # background: a read outlives the communication phases, so it does not set the
        # origin of the solver's batching window
        ids = self.sim.add(
            idx, frac, b, latency_s=lat, frac=frac, weights=STORAGE_WEIGHT, background=True
        )
        self._grow(int(ids.max()) + 1)
        self.flow_msg[ids] = -1  # not a trace message
        self.flow_src[ids] = -1
        self.storage.append((ids, ranks))
        if self.shares is not None:
            self.shares.add_reads(ids, ranks)

    def storage_reads(self) -> list[dict[str, Any]]:
        """The storage reads as the packet engine reports them (``engine_info.pcie``): rank,
        SSD, bytes, bytes moved by the end of the run, start, delivery (None if not yet) and
        mean rate."""
        sim, pc, now = self.sim, self.fc.pcie, self.env.now
        out: list[dict[str, Any]] = []
        for ids, ranks in self.storage:
            for fid, r in zip(ids.tolist(), ranks.tolist(), strict=True):
                size = float(sim.size[fid])
                if sim.committed[fid]:  # finishing at t_sent at its last rate
                    left = sim.rate[fid] * max(float(sim.t_sent[fid]) - now, 0.0) / 8.0
                else:
                    left = sim.rem[fid] - sim.rate[fid] * max(now - sim._t_last, 0.0) / 8.0
                done = size - min(max(float(left), 0.0), size)
                t0 = float(sim.t_start[fid]) if np.isfinite(sim.t_start[fid]) else now
                end = float(sim.t_deliver[fid])
                fin = np.isfinite(end) and end <= now
                dur = (end if fin else now) - t0
                out.append(
                    {
                        "rank": int(r),
                        "ssd": pc.ssd_of(int(r)) if pc is not None else "",
                        "bytes": int(size),
                        "bytes_done": round(done),
                        "start_s": t0,
                        "end_s": end if fin else None,
                        "rate_bps": 8.0 * done / dur if dur > 0 else None,
                    }
                )
        return out

    def _grow(self, need: int) -> None:
        if need > self.flow_msg.size:
            grow = max(need, 2 * self.flow_msg.size)
            self.flow_msg = np.resize(self.flow_msg, grow)
            self.flow_ack = np.resize(self.flow_ack, grow)
            self.flow_src = np.resize(self.flow_src, grow)
            self.flow_dst = np.resize(self.flow_dst, grow)
            self.flow_key = np.resize(self.flow_key, grow)
            self.flow_queue = np.resize(self.flow_queue, grow)

    def _delivered(self, fid: int) -> None:
        if self.shares is not None:
            self.shares.done(fid)
        m = int(self.flow_msg[fid])
        if m < 0:
            return  # a background storage read
        self.end_s[m] = self.env.now
        ack = float(self.flow_ack[fid])
        assert self._cb is not None
        if ack > 0:
            call_at(self.env, self.env.now + ack, self._cb, m)
        else:
            self._cb(m)

    def stalled_outcomes(self, end_s: np.ndarray) -> dict[int, tuple[str, str]]:
        """Undelivered messages whose flow sits on a constraint of capacity 0 (a dead link with
        no surviving path, or not re-routed yet) and the messages waiting behind them on their
        QP: message -> (unfinished, reason)."""
        sim = self.sim
        act = sim.active
        if not act.size:
            return {}
        p = self.fc.paths
        idx = sim.idx[act]
        zero = (idx >= 0) & (sim.capacity[np.maximum(idx, 0)] <= 0)
        out: dict[int, tuple[str, str]] = {}
        for fid, row, z in zip(act.tolist(), idx.tolist(), zero.tolist(), strict=True):
            m = int(self.flow_msg[fid])
            if m < 0 or not any(z) or np.isfinite(end_s[m]):
                continue
            dead = ", ".join(p.names[c] for c, zz in zip(row, z, strict=True) if zz)
            out[m] = (
                "unfinished",
                f"stalled at rate 0 on failed {dead} (no surviving path, or routing had not "
                "re-converged) when the run ended",
            )
        for q in self._waiting.values():
            for (_r, msg, *_rest), i in q:
                m = int(msg[i])
                if not np.isfinite(end_s[m]):
                    out[m] = (
                        "unfinished",
                        "waiting on its QP behind a message that never finished sending",
                    )
        return out

    # ----------------------------------------------------------------- tables

    def link_counters(self) -> pd.DataFrame:
        return self.fc.link_counters(self.sim.carried, self.sim.packets_on)

    def link_bytes(self) -> SpreadLinkBytes:
        """Every finished flow's wire bytes per directed link (a bundle's spread evenly over its
        member links, as :meth:`FlowCluster.link_counters` does), each over its sending time
        (start to last byte sent): the flow engine's record for link utilisation per phase.

        A link that only one bundle reaches carries exactly that bundle's flows with its bytes
        / members each, so the bundle's members share one column (a bundle of 64 spine links
        would otherwise repeat each flow 64 times: 55 entries a flow at 1,024 GPUs, growing
        with the spines); a link reached directly and through a bundle, or through two, gets
        its own column. :meth:`_link_bytes_readable` repeats every flow on every member; a
        differential test checks both give the same figures bit for bit."""
        import scipy.sparse as sps

        sim, p = self.sim, self.fc.paths
        nl = p.n_links
        ids, rows, cols, vals = self._link_entries()
        bundles = {
            int(c): p.members[int(c)]
            for c in np.unique(cols[cols >= nl]).tolist()
            if p.members.get(int(c)) is not None and p.members[int(c)].size
        }
        sources = np.zeros(nl, dtype=np.int64)  # how many ways (direct, bundles) reach a link
        sources[np.unique(cols[cols < nl])] += 1
        for members in bundles.values():
            np.add.at(sources, members, 1)
        mixed = sources > 1
        columns = np.arange(nl)
        keep = cols < nl
        r_parts, c_parts, v_parts = [rows[keep]], [cols[keep]], [vals[keep]]
        bundled = np.flatnonzero(~keep)
        if bundled.size:
            order = bundled[np.argsort(cols[bundled], kind="stable")]
            cids, starts = np.unique(cols[order], return_index=True)
            for cid, sel in zip(cids.tolist(), np.split(order, starts[1:]), strict=True):
                members = bundles.get(int(cid))
                if members is None:
                    continue  # a NIC, PCIe or other non-link constraint
                share = vals[sel] / members.size
                own = members[mixed[members]]  # members summed link by link
                if own.size:
                    r_parts.append(np.repeat(rows[sel], own.size))
                    c_parts.append(np.tile(own, sel.size))
                    v_parts.append(np.repeat(share, own.size))
                shared = members[~mixed[members]]
                if shared.size:
                    col = nl + len(r_parts)  # a column of its own, past the links
                    columns[shared] = col
                    r_parts.append(rows[sel])
                    c_parts.append(np.full(sel.size, col, dtype=np.int64))
                    v_parts.append(share)
        used, columns = np.unique(columns, return_inverse=True)
        cmap = np.full(nl + len(r_parts) + 1, -1, dtype=np.int64)
        cmap[used] = np.arange(used.size)
        c_all = cmap[np.concatenate(c_parts)]
        mat = sps.csr_array(
            (np.concatenate(v_parts), (np.concatenate(r_parts), c_all)),
            shape=(ids.size, used.size),
        )
        return SpreadLinkBytes(
            links=[str(x) for x in p.names[:nl]],
            t0=sim.t_start[ids].copy(),
            t1=sim.t_sent[ids].copy(),
            bytes=mat,
            columns=columns,
        )

    def _link_entries(self) -> tuple[np.ndarray, ...]:
        """(finished flow ids, and per constraint entry: flow position, constraint, wire
        bytes) of the flows that finished."""
        sim = self.sim
        ids = np.flatnonzero(sim.committed[: sim.n])
        idx = sim.idx[ids]
        valid = idx >= 0
        rows = np.broadcast_to(np.arange(ids.size)[:, None], idx.shape)[valid]
        cols = idx[valid].astype(np.int64)
        vals = (sim.coef[ids] * sim.size[ids][:, None])[valid]  # wire bytes per constraint
        return ids, rows, cols, vals

    def _link_bytes_readable(self) -> SpreadLinkBytes:
        """:meth:`link_bytes` with every bundle flow repeated on each member link."""
        import scipy.sparse as sps

        sim, p = self.sim, self.fc.paths
        nl = p.n_links
        ids, rows, cols, vals = self._link_entries()
        keep = cols < nl
        r_parts, c_parts, v_parts = [rows[keep]], [cols[keep]], [vals[keep]]
        bundled = np.flatnonzero(~keep)
        if bundled.size:
            order = bundled[np.argsort(cols[bundled], kind="stable")]
            cids, starts = np.unique(cols[order], return_index=True)
            for cid, sel in zip(cids.tolist(), np.split(order, starts[1:]), strict=True):
                members = p.members.get(int(cid))
                if members is None or not members.size:
                    continue  # a NIC, PCIe or other non-link constraint
                r_parts.append(np.repeat(rows[sel], members.size))
                c_parts.append(np.tile(members, sel.size))
                v_parts.append(np.repeat(vals[sel] / members.size, members.size))
        mat = sps.csr_array(
            (np.concatenate(v_parts), (np.concatenate(r_parts), np.concatenate(c_parts))),
            shape=(ids.size, nl),
        )
        return SpreadLinkBytes(
            links=[str(x) for x in p.names[:nl]],
            t0=sim.t_start[ids].copy(),
            t1=sim.t_sent[ids].copy(),
            bytes=mat,
        )

    def qp_table(self) -> pd.DataFrame:
        if not self.qp_rows:
            return pd.DataFrame()
        cols = [
            "flow",
            "src_rank",
            "dst_rank",
            "src_port",
            "dst_port",
            "bytes",
            "packets",
            "paths_used",
            "queue",
        ]
        df = pd.DataFrame(
            {c: np.concatenate([row[i] for row in self.qp_rows]) for i, c in enumerate(cols)}
        )
        sim = self.sim
        fid = df["flow"].to_numpy()
        df["t0"] = sim.t_start[fid]
        df["t1"] = sim.t_sent[fid]
        names = np.asarray(self.fc.paths.node_names, dtype=object)
        df["src_port"] = names[df["src_port"].to_numpy()]
        df["dst_port"] = names[df["dst_port"].to_numpy()]
        return qp_table(df)


def preflight(sc: Scenario, cluster: Cluster, trace: pd.DataFrame) -> None:
    """The flow engine's own input check: fault targets exist (scale-up links may be targeted:
    the flow engine models the scale-up domain's links as capacities too)."""
    faults.check_targets(sc, cluster.graph, scaleup_ok=True)


@register_engine(
    "flow",
    "flow-level: max-min fair rates between flow starts and ends",
    # failures and degradation are capacity changes (podsim.fabric.flow.faults); bit errors act
    # through per-packet frame loss and retries, which a fluid model does not have
    faults={"straggler", *FLOW_FAULT_KINDS},
    storage=True,
    graphs=True,
    preflight=preflight,
    check_size=check_fluid,
    sm_copy=True,
)
def run_flow(ctx: RunContext) -> EngineOutput:
    """Run ``ctx`` on the flow engine (see the module docstring)."""
    sc = ctx.scenario
    transport = FlowTransport(ctx)
    if transport.fc.pcie is not None and sc.workload.storage is not None:
        transport.schedule_storage(sc.workload.storage)
    tl = run_timeline(
        transport.env,
        transport,
        ctx.trace,
        ctx.compute,
        num_ranks=ctx.cluster.num_ranks,
        time_limit=sc.sim.time_limit,
        progress=ctx.progress,
        graph=ctx.graph,
    )
    end_s = np.where(np.isfinite(transport.end_s), transport.end_s, tl.end_s)
    links = link_table(ctx.cluster.graph, transport.link_counters())
    fc = transport.fc
    extra: dict[str, Any] = {
        "transport": transport.name,
        "pcie_local_messages": transport.pcie_local,
        "path_policy": fc.mode if fc.mode == "spread" else f"hash x{max(1, fc.n_paths)}",
        "cc": fc.cc_name,
        "cc_efficiency": fc.efficiency,
        "endpoint_model": fc.endpoint,
        "queued_messages": transport.queued_messages,
        **transport.sim.stats(),
    }
    if fc.pcie is not None:
        extra["pcie"] = {
            "model": "tree resources as flow constraints",
            "storage_share_updates": transport.shares.updates if transport.shares else 0,
            "p2p_messages": transport.p2p_messages,
            "p2p_bytes": transport.p2p_bytes,
            "storage_reads": transport.storage_reads(),
        }
    outcomes: dict[int, tuple[str, str]] = {}
    if transport.faults is not None:
        extra["faults"] = transport.faults.summary()
        outcomes = transport.stalled_outcomes(end_s)
    if sc.sim.checks:
        g = ctx.cluster.graph
        switches = [n for n, d in g.nodes(data=True) if d.get("role") in SWITCH_ROLES]
        extra["invariant_checks"] = check_flow_run(
            transport.sim, transport.injected_bytes, links, switches, end_s, tl.status
        )
    else:
        extra["invariant_checks"] = "off"
    return EngineOutput(
        messages=message_table(ctx.trace, tl.post_s, end_s, outcomes),
        phases=tl.phases,
        links=links,
        qps=transport.qp_table(),
        queues=pd.DataFrame(),
        sim_time_s=tl.sim_time_s,
        events=transport.sim.solves,
        link_series=transport.link_bytes(),
        status=tl.status,
        extra=extra,
    )
