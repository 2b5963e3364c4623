"""The node PCIe trees of a built cluster: which tree device every rank, GPU and NIC card is,
and what the engines ask of them.

:meth:`ClusterPcie.build` builds the scenario's node layout (``cluster.layout``, a
``podsim.nic.pcie.NODE_LAYOUTS`` preset, with ``cluster.layout_params``) for every server of the
topology, sized from the topology itself (GPUs per server, NIC cards per server and the GPUs
each card serves, from the NIC ports' ``gpu``/``gpu_count`` attrs), and checks that the tree
agrees with the topology: same GPU count, same NIC count, and card j of a server serving the
same GPUs as the tree's ``nic{j}``. Servers that look alike share one tree and one
:class:`nic.pcie.coupling.NodeCoupling` (and so its memo). A GPU's global id maps to the tree's
``gpu{i}`` by its position among the server's GPU ids, a card to ``nic{j}`` likewise.

What the engines use:

- per rank, the GPUDirect RDMA stream keys (``tx``: GPU -> its NIC on the rank's server;
  ``rx``: NIC -> GPU) and their idle latencies: a receive's path latency (switch hops 115 ns
  each, the root complex's extra latency; docs/physics.md "PCIe 5.0",
  :mod:`podsim.nic.pcie.devices`), a transmit's DMA read round trip (request path, the GPU's
  ``nic_dma.read_latency_s``, completion path);
- for two ranks behind one NIC card, the GPU -> GPU P2P path through the tree;
- for GPUDirect Storage, the SSD each GPU reads from (one of its nearest, GPUs that share
  their nearest SSDs spread over them: :attr:`PcieTree.storage_map`);
- :meth:`ClusterPcie.rates` (one server's active set -> shares and NIC DMA caps) for the packet
  engine's runtime (:mod:`podsim.nic.pcie.runtime`);
- for the flow engine and the bound, the tree resources as extra max-min constraints
  (:attr:`ClusterPcie.constraint_names` / :attr:`ClusterPcie.constraint_capacity_bps`, and per
  flow :meth:`ClusterPcie.flow_loads` or per rank :meth:`ClusterPcie.rank_loads`: indices and
  coefficients, a transmit being a DMA read by the NIC), which
  couple PCIe and network exactly in one solve (:mod:`podsim.scenarios.engines.flow`); and
  :meth:`ClusterPcie.flow_caps`, per-flow caps for a set of concurrent greedy flows (a
  closed-form check of that solve).

NIC network goodput, the NIC's cap in the couplings: the sum of its ports' MAC rates x MTU /
(MTU + overhead), the link layer's framing (RoCEv2 82 B, InfiniBand 26 B;
:func:`podsim.fabric.packet.link_framing`).
"""

from __future__ import annotations

import difflib
import inspect
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
from podsim.fabric.packet import ROCE_OVERHEAD
from podsim.fabric.registry import ParamError
from podsim.nic.pcie.coupling import READ_LABELS, NodeCoupling, NodeRates, StreamKey
from podsim.nic.pcie.tree import PcieTree

__all__ = ["ClusterPcie", "NodeMap", "nic_goodput_bps"]


def nic_goodput_bps(mac_bps: float, mtu: int, overhead: int = ROCE_OVERHEAD) -> float:
    """Payload rate of a port: MAC rate x MTU / (MTU + overhead) (RoCEv2: 82 B; the link
    layer's, :func:`podsim.fabric.packet.link_framing`)."""
    return mac_bps * mtu / (mtu + overhead)


@dataclass(frozen=True)
class NodeMap:
    """One server: its tree (via the coupling) and global ids -> tree device names."""

    server: int
    coupling: NodeCoupling
    gpu: Mapping[int, str]
    nic: Mapping[int, str]

    @property
    def tree(self) -> PcieTree:
        return self.coupling.tree


@dataclass(frozen=True)
class _ServerShape:
    gpus: list[int]  # global GPU ids, sorted
    cards: list[int]  # global NIC card ids, sorted
    serves: dict[int, list[int]]  # card -> global GPU ids it serves
    mac_bps: dict[int, float]  # card -> sum of its ports' MAC rates


def _server_shapes(graph: nx.Graph) -> dict[int, _ServerShape]:
    from podsim.fabric.topology import gpu_table

    gpus: dict[int, list[int]] = defaultdict(list)
    for gid, (server, _pod) in gpu_table(graph).items():
        gpus[int(server)].append(int(gid))
    cards: dict[int, set[int]] = defaultdict(set)
    serves: dict[int, list[int]] = {}
    mac: dict[int, float] = defaultdict(float)
    for n, d in graph.nodes(data=True):
        if d.get("role") != "nic":
            continue
        card = int(d["nic"])
        cards[int(d["server"])].add(card)
        first, count = int(d.get("gpu", -1)), int(d.get("gpu_count", 1))
        serves[card] = list(range(first, first + count)) if first >= 0 else []
        mac[card] += sum(float(graph.edges[n, nb].get("rate_bps", 0.0)) for nb in graph[n]
                         if graph.edges[n, nb].get("kind", "scaleout") == "scaleout")  # fmt: skip
    out = {}
    for s in sorted(set(gpus) | set(cards)):
        cs = sorted(cards.get(s, ()))
        out[s] = _ServerShape(
            sorted(gpus.get(s, [])), cs, {c: serves[c] for c in cs}, {c: mac[c] for c in cs}
        )
    return out


class ClusterPcie:
    """The cluster's node trees bound to its ranks (see the module docstring)."""

    def __init__(
        self,
        layout: str,
        nodes: Mapping[int, NodeMap],
        rank_gpu: np.ndarray,
        rank_server: np.ndarray,
        rank_nic: np.ndarray,
        card_goodput_bps: Mapping[int, float],
    ) -> None:
        self.layout = layout
        self.nodes = dict(nodes)
        self.rank_gpu = np.asarray(rank_gpu, dtype=np.int64)
        self.rank_server = np.asarray(rank_server, dtype=np.int64)
        self.rank_nic = np.asarray(rank_nic, dtype=np.int64)
        self.card_goodput_bps = dict(card_goodput_bps)
        n = self.rank_gpu.size
        self.rank_gpu_dev: list[str] = []
        self.rank_nic_dev: list[str] = []
        for r in range(n):
            node = self.node(int(self.rank_server[r]))
            self.rank_gpu_dev.append(node.gpu[int(self.rank_gpu[r])])
            self.rank_nic_dev.append(node.nic[int(self.rank_nic[r])])
        #: idle latency of every rank's transmit DMA and receive DMA, s. A transmit is the NIC
        #: reading the payload from GPU memory: a Memory Read is a non-posted request, answered
        #: by Completions with Data (PCIe Base Specification, Transaction Layer: non-posted
        #: requests and completions), so the payload reaches the NIC one read round trip after
        #: the message is posted: request NIC -> GPU, the GPU's read latency, completion GPU ->
        #: NIC (:meth:`PcieTree.read_round_trip`). A receive is a posted write (one way).
        self.tx_latency_s = np.array([self._tx_latency(r) for r in range(n)])
        self.rx_latency_s = np.array(
            [self._tree(r).latency(self.rank_nic_dev[r], self.rank_gpu_dev[r]) for r in range(n)]
        )
        self._constraints: tuple[list[str], np.ndarray, dict[int, int]] | None = None

    def _tx_latency(self, rank: int) -> float:
        tree, gpu, nic = self._tree(rank), self.rank_gpu_dev[rank], self.rank_nic_dev[rank]
        if "tx" in READ_LABELS:
            return tree.read_round_trip(gpu, nic)
        return tree.latency(gpu, nic)

    # ------------------------------------------------------------------ building

    @classmethod
    def build(
        cls,
        graph: nx.Graph,
        layout: str,
        builder: Callable[..., PcieTree],
        params: Mapping[str, Any],
        *,
        mtu: int,
        rank_gpu: np.ndarray,
        overhead: int = ROCE_OVERHEAD,
        rank_server: np.ndarray,
        rank_nic: np.ndarray,
    ) -> ClusterPcie:
        """Build ``layout`` for every server of ``graph`` (see the module docstring); errors are
        :class:`~podsim.fabric.registry.ParamError` naming the layout parameter that disagrees."""
        shapes = _server_shapes(graph)
        couplings: dict[tuple[Any, ...], NodeCoupling] = {}
        nodes: dict[int, NodeMap] = {}
        goodput: dict[int, float] = {}
        topo = graph.graph.get("name", "?")
        for server, shape in shapes.items():
            if not shape.gpus or not shape.cards:
                continue  # a server without GPUs or NICs has no GPUDirect traffic to model
            g_local = {gid: i for i, gid in enumerate(shape.gpus)}
            serves = tuple(tuple(g_local.get(x, -1) for x in shape.serves[c]) for c in shape.cards)
            sig = (len(shape.gpus), len(shape.cards), serves)
            for c in shape.cards:
                goodput[c] = nic_goodput_bps(shape.mac_bps[c], mtu, overhead)
            coupling = couplings.get(sig)
            if coupling is None:
                tree = _build_tree(layout, builder, params, shape, server, topo)
                gp = {tree.nics[j]: goodput[c] for j, c in enumerate(shape.cards)}
                coupling = NodeCoupling(tree, gp)
                couplings[sig] = coupling
            tree = coupling.tree
            nodes[server] = NodeMap(
                server,
                coupling,
                {gid: tree.gpus[i] for gid, i in g_local.items()},
                {c: tree.nics[j] for j, c in enumerate(shape.cards)},
            )
        return cls(layout, nodes, rank_gpu, rank_server, rank_nic, goodput)

    # ------------------------------------------------------------------ lookup

    def node(self, server: int) -> NodeMap:
        try:
            return self.nodes[server]
        except KeyError:
            raise ValueError(f"server {server} has no PCIe tree (no GPUs or no NICs)") from None

    def _tree(self, rank: int) -> PcieTree:
        return self.nodes[int(self.rank_server[rank])].tree

    @property
    def num_ranks(self) -> int:
        return int(self.rank_gpu.size)

    def same_card(self, a: int, b: int) -> bool:
        """Whether ranks ``a`` and ``b`` sit behind one NIC card (their traffic stays in the
        node's PCIe tree)."""
        return bool(self.rank_nic[a] == self.rank_nic[b])

    def tx_key(self, rank: int) -> tuple[int, StreamKey]:
        """(server, key) of the rank's GPUDirect transmit stream: its GPU -> its NIC."""
        return int(self.rank_server[rank]), (self.rank_gpu_dev[rank], self.rank_nic_dev[rank], "tx")

    def rx_key(self, rank: int) -> tuple[int, StreamKey]:
        """(server, key) of the rank's GPUDirect receive stream: its NIC -> its GPU."""
        return int(self.rank_server[rank]), (self.rank_nic_dev[rank], self.rank_gpu_dev[rank], "rx")

    def p2p_key(self, a: int, b: int) -> tuple[int, StreamKey]:
        """(server, key) of a GPU -> GPU copy from rank ``a`` to rank ``b`` (same server)."""
        sa, sb = int(self.rank_server[a]), int(self.rank_server[b])
        if sa != sb:
            raise ValueError(f"ranks {a} and {b} are on servers {sa} and {sb}: no PCIe P2P path")
        return sa, (self.rank_gpu_dev[a], self.rank_gpu_dev[b], "p2p")

    def p2p_latency(self, a: int, b: int) -> float:
        _, (ga, gb, _l) = self.p2p_key(a, b)
        return self._tree(a).latency(ga, gb)

    def ssd_of(self, rank: int) -> str:
        """The SSD the rank's GPU reads from (:attr:`PcieTree.storage_map`: one of its nearest
        SSDs, spread over the GPUs that share them)."""
        tree = self._tree(rank)
        if not tree.ssds:
            raise ValueError(f"node layout {self.layout!r} has no SSDs")
        return tree.storage_map[self.rank_gpu_dev[rank]]

    def gds_key(self, rank: int) -> tuple[int, StreamKey]:
        """(server, key) of a GPUDirect Storage read into the rank's GPU."""
        return int(self.rank_server[rank]), (self.ssd_of(rank), self.rank_gpu_dev[rank], "gds")

    def gds_latency(self, rank: int) -> float:
        """Path latency SSD -> GPU plus the SSD's read latency (60 us Gen5 class [S])."""
        _, (ssd, gpu, _l) = self.gds_key(rank)
        tree = self._tree(rank)
        return tree.latency(ssd, gpu) + float(tree.spec(ssd).read_latency_s)

    def rates(self, server: int, active: Mapping[StreamKey, float]) -> NodeRates:
        """Shares of ``active`` (``{key: weight}``) on ``server``'s tree (memoised)."""
        return self.node(server).coupling.rates(active)

    # ------------------------------------------------------------------ flow engine API

    def flow_caps(
        self,
        src_rank: Sequence[int] | np.ndarray,
        dst_rank: Sequence[int] | np.ndarray,
        storage_ranks: Sequence[int] | np.ndarray = (),
    ) -> tuple[np.ndarray, np.ndarray]:
        """PCIe caps (payload bits/s) of flows that are active together.

        Flow ``i`` goes from ``src_rank[i]`` to ``dst_rank[i]``: over the network (its
        sender's GPU -> NIC stream and its receiver's NIC -> GPU stream) or, when both ranks
        sit behind one NIC card, GPU -> GPU through the tree. ``storage_ranks`` lists the
        GPUDirect Storage reads running at the same time (one entry per read). Every server's
        active set is solved once (:meth:`rates`); a GPUDirect stream's share is split evenly
        over the flows that use it, so flow ``i`` gets min(its sender's share, its receiver's
        share). Assumes every flow is greedy: a flow slowed elsewhere leaves part of its share
        unused, which only the joint solve (:meth:`flow_loads`) gives to others.
        Returns ``(flow_caps, storage_caps)``.
        """
        src = np.asarray(src_rank, dtype=np.int64)
        dst = np.asarray(dst_rank, dtype=np.int64)
        if src.shape != dst.shape or src.ndim != 1:
            raise ValueError(f"src_rank and dst_rank must be 1-D of one length, got "
                             f"{src.shape} and {dst.shape}")  # fmt: skip
        stor = np.asarray(storage_ranks, dtype=np.int64).reshape(-1)
        uses: list[list[tuple[int, StreamKey]]] = []
        count: dict[tuple[int, StreamKey], int] = defaultdict(int)
        for a, b in zip(src.tolist(), dst.tolist(), strict=True):
            keys = (
                [self.p2p_key(a, b)] if self.same_card(a, b) else [self.tx_key(a), self.rx_key(b)]
            )
            for k in keys:
                count[k] += 1
            uses.append(keys)
        for r in stor.tolist():
            k = self.gds_key(r)
            count[k] += 1
            uses.append([k])
        active: dict[int, dict[StreamKey, float]] = defaultdict(dict)
        for (server, key), c in count.items():
            # one weight per RDMA stream (the NIC serves its GPUs evenly); fluid keys by count
            active[server][key] = 1.0 if key[2] in ("tx", "rx") else float(c)
        solved = {s: self.rates(s, a) for s, a in active.items()}
        caps = np.array(
            [min(solved[s].rate_bps[k] / count[(s, k)] for s, k in keys) for keys in uses]
        )
        n = src.size
        return caps[:n], caps[n:]

    def _build_constraints(self) -> tuple[list[str], np.ndarray, dict[int, int]]:
        if self._constraints is None:
            names: list[str] = []
            caps: list[np.ndarray] = []
            offset: dict[int, int] = {}
            for s in sorted(self.nodes):
                tree = self.nodes[s].tree
                offset[s] = len(names)
                names += [f"s{s}:{r}" for r in tree.resource_names]
                caps.append(tree.resource_capacity_bps)
            cap = np.concatenate(caps) if caps else np.zeros(0)
            self._constraints = (names, cap, offset)
        return self._constraints

    @property
    def constraint_names(self) -> list[str]:
        """Every tree resource of every server, ``"s<server>:<resource>"`` (resource names of
        :class:`podsim.nic.pcie.tree.PcieTree`: link directions, switches, root P2P ports, SSDs)."""
        return list(self._build_constraints()[0])

    @property
    def constraint_capacity_bps(self) -> np.ndarray:
        """Capacities of :attr:`constraint_names`, bits/s of payload (a copy)."""
        return self._build_constraints()[1].copy()

    def _loads(self, server: int, key: StreamKey) -> tuple[list[int], list[float]]:
        """Indices into :attr:`constraint_names` and coefficients of the stream ``key``: a
        transmit stream is a DMA read by its NIC (:meth:`PcieTree.read_loads`), any other
        loads its path's resources with coefficient 1."""
        tree = self.nodes[server].tree
        off = self._build_constraints()[2][server]
        src, dst, label = key
        if label in READ_LABELS:
            idx, coef = tree.read_loads(src, dst)
            return (idx + off).tolist(), coef.tolist()
        res = [off + tree.resource_index(r) for r in tree.path(src, dst).resources]
        return res, [1.0] * len(res)

    @staticmethod
    def _table(rows: list[tuple[list[int], list[float]]]) -> tuple[np.ndarray, np.ndarray]:
        """Ragged (indices, coefficients) rows -> two ``(len(rows), K)`` arrays, -1 / 0 padded."""
        k = max((len(x) for x, _c in rows), default=0)
        idx = np.full((len(rows), k), -1, dtype=np.int64)
        coef = np.zeros((len(rows), k))
        for i, (x, c) in enumerate(rows):
            idx[i, : len(x)] = x
            coef[i, : len(c)] = c
        return idx, coef

    def rank_loads(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per rank, the tree resources (indices into :attr:`constraint_names`, -1 padded) and
        coefficients (0 padded) of its GPUDirect transmit (the NIC reading the GPU: completions
        GPU -> NIC, requests NIC -> GPU, the NIC's tags) and of its receive (posted writes
        NIC -> GPU): ``(tx_idx, tx_coef, rx_idx, rx_coef)``, each ``(ranks, K)``. An RDMA flow
        from a to b loads ``tx[a]`` and ``rx[b]`` (what :meth:`flow_loads` returns for it)."""
        tx = self._table([self._loads(*self.tx_key(r)) for r in range(self.num_ranks)])
        rx = self._table([self._loads(*self.rx_key(r)) for r in range(self.num_ranks)])
        return tx[0], tx[1], rx[0], rx[1]

    def flow_loads(
        self,
        src_rank: Sequence[int] | np.ndarray,
        dst_rank: Sequence[int] | np.ndarray,
        storage_ranks: Sequence[int] | np.ndarray = (),
    ) -> tuple[np.ndarray, np.ndarray]:
        """For each flow (then each storage read), the indices into :attr:`constraint_names`
        of the tree resources it loads (-1 padded) and the load per payload bit (0 padded):
        two ``(F, K)`` arrays. An RDMA flow loads its sender's transmit (a DMA read by the
        sender's NIC) and its receiver's NIC -> GPU writes, a same-card flow the GPU -> GPU
        path, a storage read the SSD -> GPU path (and the SSD's read rate), the last two with
        coefficient 1. Stacked under a flow engine's own constraints this couples PCIe and
        network exactly in one max-min solve.
        """
        src = np.asarray(src_rank, dtype=np.int64)
        dst = np.asarray(dst_rank, dtype=np.int64)
        rows: list[tuple[list[int], list[float]]] = []
        memo: dict[tuple[int, int], tuple[list[int], list[float]]] = {}
        for a, b in zip(src.tolist(), dst.tolist(), strict=True):
            hit = memo.get((a, b))
            if hit is None:
                if self.same_card(a, b):
                    hit = self._loads(*self.p2p_key(a, b))
                else:
                    (ti, tc), (ri, rc) = self._loads(*self.tx_key(a)), self._loads(*self.rx_key(b))
                    hit = (ti + ri, tc + rc)
                memo[(a, b)] = hit
            rows.append(hit)
        stor = np.asarray(storage_ranks, dtype=np.int64).reshape(-1).tolist()
        rows.extend(self._loads(*self.gds_key(r)) for r in stor)
        return self._table(rows)

    # ------------------------------------------------------------------ description

    def describe(self) -> dict[str, Any]:
        """JSON-friendly facts for the run summary: layout, sizes, the GPU-NIC path classes,
        ``nic_dma_cap_bps`` (the PCIe share of the worst NIC and direction with every GPU
        driving its NIC at once, before the NIC's own goodput: :func:`nic.pcie.nic_dma_caps`),
        the NIC goodput, the largest transmit DMA latency (the read round trip) and the largest
        NIC -> GPU path latency."""
        from podsim.nic.pcie.streams import nic_dma_caps

        trees = {id(n.tree): n.tree for n in self.nodes.values()}
        classes: set[str] = set()
        dma: list[float] = []
        for tree in trees.values():
            for nic in tree.nics:
                for gpu in tree.gpus_of_nic(nic):
                    classes.add(tree.path_class(gpu, nic))
            dma += [v for caps in nic_dma_caps(tree).values() for v in caps.values()]
        first = next(iter(trees.values()), None)
        good = list(self.card_goodput_bps.values())
        return {
            "layout": self.layout,
            "gpus_per_server": len(first.gpus) if first else 0,
            "nics_per_server": len(first.nics) if first else 0,
            "ssds_per_server": len(first.ssds) if first else 0,
            "trees": len(trees),
            "gpu_nic_path_classes": sorted(classes),
            "nic_dma_cap_bps": min(dma) if dma else None,
            "nic_goodput_bps": min(good) if good else None,
            "tx_latency_s": float(self.tx_latency_s.max()) if self.num_ranks else None,
            "rx_latency_s": float(self.rx_latency_s.max()) if self.num_ranks else None,
        }

    def __repr__(self) -> str:
        return f"ClusterPcie({self.layout!r}: {len(self.nodes)} servers, {self.num_ranks} ranks)"


def _parameters(builder: Callable[..., PcieTree]) -> list[str]:
    """The keyword parameters of a layout builder: a registered
    :class:`~podsim.nic.pcie.layouts.NodeLayout` declares them; a plain function's signature."""
    declared = getattr(builder, "parameters", None)
    if declared is not None:
        return list(declared)
    return list(inspect.signature(builder).parameters)


def _build_tree(
    layout: str,
    builder: Callable[..., PcieTree],
    params: Mapping[str, Any],
    shape: _ServerShape,
    server: int,
    topo: str,
) -> PcieTree:
    """``builder`` sized for ``shape``; a ParamError naming the disagreeing parameter otherwise."""
    user = dict(params)
    kw = dict(user)
    kw.setdefault("gpus", len(shape.gpus))
    if "nics" not in kw and "gpus_per_nic" not in kw:
        kw["nics"] = len(shape.cards)
    where = f"server {server} of topology {topo!r}"
    try:
        tree = builder(**kw)
    except TypeError as exc:
        # name the key and what the layout takes, not Python's "f() got an unexpected ..."
        sig = _parameters(builder)
        bad = [k for k in user if k not in sig]
        if bad:
            close = difflib.get_close_matches(bad[0], list(sig), n=2, cutoff=0.6)
            hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
            raise ParamError(
                f"node layout {layout!r} has no parameter {bad[0]!r}.{hint} "
                f"Parameters: {', '.join(sig)}.",
                bad[0],
            ) from None
        raise ParamError(f"node layout {layout!r}: {exc}.") from None
    except ValueError as exc:
        raise ParamError(
            f"node layout {layout!r} for {where} ({len(shape.gpus)} GPUs, "
            f"{len(shape.cards)} NIC cards): {str(exc).rstrip('.')}."
        ) from None
    if len(tree.gpus) != len(shape.gpus):
        raise ParamError(
            f"node layout {layout!r} has {len(tree.gpus)} GPUs per server but {where} has "
            f"{len(shape.gpus)}; drop 'gpus' from the layout parameters (the topology sets it).",
            "gpus",
        )
    if len(tree.nics) != len(shape.cards):
        key = next((k for k in ("nics", "gpus_per_nic") if k in user), None)
        raise ParamError(
            f"node layout {layout!r} has {len(tree.nics)} NICs per server but {where} has "
            f"{len(shape.cards)} NIC cards ({len(shape.gpus)} GPUs); the topology's "
            "gpus_per_nic decides it, so drop the layout's nics/gpus_per_nic or make them agree.",
            key,
        )
    g_local = {gid: i for i, gid in enumerate(shape.gpus)}
    for j, card in enumerate(shape.cards):
        want = sorted(f"gpu{g_local[g]}" for g in shape.serves[card] if g in g_local)
        have = sorted(tree.gpus_of_nic(tree.nics[j]))
        if want != have:
            raise ParamError(
                f"node layout {layout!r} gives {tree.nics[j]} the GPUs {have}, but NIC card "
                f"{card} on {where} serves {want} (its ports' gpu/gpu_count attributes); make "
                "the layout's gpus_per_nic match the topology's.",
                "gpus_per_nic" if "gpus_per_nic" in user else None,
            )
    return tree
