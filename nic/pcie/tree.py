"""The PCIe tree inside one node: devices, links, paths, nvidia-smi path classes, resources.

A :class:`PcieTree` wraps a small undirected ``networkx.Graph`` (a tree). Node attr ``role`` is
one of ``gpu``, ``nic``, ``ssd`` (leaves), ``switch``, ``root`` (one CPU root complex per socket);
``socket`` (int) and ``index`` (int, per role) are set for every node, ``spec`` holds the
:mod:`nic.pcie.devices` dataclass of switches, roots and SSDs, and a NIC's ``serves`` lists the
GPUs whose traffic it carries. Each edge is one full-duplex link: attr ``link`` (a
:class:`~podsim.nic.pcie.link.PcieLink`) or, between two roots, ``inter_socket`` (an
:class:`~podsim.nic.pcie.devices.InterSocket`).

Capacity resources (what :mod:`podsim.fabric.maxmin` shares, all bits/s):

- ``"u->v"``: one direction of a link (its effective payload rate);
- ``"<switch>"``: a switch's shared switching capacity (every stream through it counts once);
- ``"<root>.p2p[<port>]"``: the peer-to-peer limit of one root port, used by device-to-device
  streams that enter the root complex from that port (the neighbour ``<port>``, a device or
  switch) and leave by another; ``"<root>.p2p"``: the root complex's aggregate P2P capacity
  (only when its spec sets one). Host-memory streams that start or end at a root use neither;
- ``"<ssd>.read"`` / ``"<ssd>.write"``: the SSD's own media rates;
- ``"<nic>.reads"``: the NIC's outstanding read requests (Little's law: a read stream holds
  ``rate x round trip / MRRS`` tags, and the NIC has ``read_tags``). Capacity ``read_tags x
  MRRS / read_latency_s`` (what the tags sustain with no path delay), and a read stream loads
  it with ``(read_latency_s + path round trip) / read_latency_s`` per payload bit.

Streams are posted writes (coefficient 1 on their path's resources) or DMA reads requested by
the destination NIC (GPUDirect RDMA transmit; :meth:`PcieTree.read_loads`): completions load
the data path's link directions with :meth:`PcieLink.completion_load`, the Memory Read requests
load the reverse path's link directions with :meth:`PcieLink.request_load`, plus the NIC's
``.reads``. Switch capacities and root P2P limits count payload only (requests, a few % of it,
are not charged there), and requests crossing an inter-socket link are not charged to it [E].

Path classes follow ``nvidia-smi topo -m``: ``PIX`` at most one switch between the two devices,
``PXB`` several switches, ``PHB`` through one CPU root complex, ``SYS`` across the inter-socket
link; ``X`` is a device with itself. (nvidia-smi's ``NODE``, several host bridges inside one
socket, is not modelled: one root complex per socket.) GPUDirect RDMA wants ``PIX``
(docs/physics.md [S]).

Latency of a path: the sum of its links' ``latency_s``, each switch's hop latency, each root
complex crossed (its ``latency_s``) and the inter-socket link's latency. Device latencies (an
SSD's 60 us read) are the device's, not the path's.
"""

from __future__ import annotations

import difflib
import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import networkx as nx
import numpy as np
import pandas as pd
from podsim.fabric.maxmin import build_incidence
from podsim.nic.pcie.devices import InterSocket, NicDma, PcieSwitch, RootComplex, Ssd
from podsim.nic.pcie.link import PcieLink

if TYPE_CHECKING:  # SciPy is imported where it is used (a packet run may never need it)
    import scipy.sparse as sp

__all__ = [
    "DEVICE_ROLES",
    "PATH_CLASSES",
    "ROLES",
    "PciePath",
    "PcieTree",
]

ROLES = ("gpu", "nic", "ssd", "switch", "root")
#: Roles that are endpoints (leaves) of the tree.
DEVICE_ROLES = ("gpu", "nic", "ssd")
#: nvidia-smi path classes, best first.
PATH_CLASSES = ("X", "PIX", "PXB", "PHB", "SYS")

_SPEC_TYPES: dict[str, type] = {
    "switch": PcieSwitch,
    "root": RootComplex,
    "ssd": Ssd,
    "nic": NicDma,
}
#: Roles whose spec may be omitted (the tree fills in the default).
_OPTIONAL_SPEC = ("nic",)


@dataclass(frozen=True)
class PciePath:
    """The route between two nodes of a tree and what it costs when idle.

    ``links`` are the directed hops; ``resources`` the capacity resources a stream along it
    uses; ``rate_bps`` the smallest of their capacities (the idle path's payload rate);
    ``latency_s`` the one-way latency (see the module doc).
    """

    src: str
    dst: str
    nodes: tuple[str, ...]
    links: tuple[tuple[str, str], ...]
    resources: tuple[str, ...]
    rate_bps: float
    latency_s: float
    path_class: str


def _trailing_int(name: str) -> int | None:
    m = re.search(r"(\d+)$", name)
    return int(m.group(1)) if m else None


class PcieTree:
    """A validated PCIe tree with cached routes; see the module doc for the graph contract."""

    def __init__(self, graph: nx.Graph, name: str | None = None) -> None:
        self.graph = graph
        self.name = name or graph.graph.get("name", "custom")
        graph.graph.setdefault("name", self.name)
        self._validate()
        self._fill_defaults()
        self._routes: dict[tuple[str, str], PciePath] = {}
        self._res_idx: dict[tuple[str, str], np.ndarray] = {}
        self._read_idx: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}

    # ------------------------------------------------------------------ validation

    def _validate(self) -> None:
        g = self.graph
        if g.number_of_nodes() == 0:
            raise ValueError("PCIe tree has no devices")
        for n, d in g.nodes(data=True):
            role = d.get("role")
            if role not in ROLES:
                raise ValueError(f"PCIe node {n!r} has role {role!r}; expected one of {ROLES}")
            if role in DEVICE_ROLES and g.degree(n) != 1:
                raise ValueError(
                    f"PCIe {role} {n!r} has {g.degree(n)} links; an endpoint has exactly one"
                )
            spec_t = _SPEC_TYPES.get(role)
            if role in _OPTIONAL_SPEC and d.get("spec") is None:
                continue
            if spec_t is not None and not isinstance(d.get("spec"), spec_t):
                raise ValueError(f"PCIe {role} {n!r} needs attr 'spec' of type {spec_t.__name__}")
        if not nx.is_tree(g):
            raise ValueError(
                f"PCIe layout {self.name!r} must be a tree (connected, no loops); it has "
                f"{nx.number_connected_components(g)} component(s) and {g.number_of_edges()} "
                f"links for {g.number_of_nodes()} devices"
            )
        for u, v, d in g.edges(data=True):
            roots = g.nodes[u]["role"] == "root" and g.nodes[v]["role"] == "root"
            if roots:
                if not isinstance(d.get("inter_socket"), InterSocket):
                    raise ValueError(f"link {u!r}-{v!r} between two roots needs 'inter_socket'")
            elif not isinstance(d.get("link"), PcieLink):
                raise ValueError(f"link {u!r}-{v!r} needs attr 'link' (a PcieLink)")
        for n, d in g.nodes(data=True):
            for gpu in d.get("serves", ()) if d["role"] == "nic" else ():
                if gpu not in g or g.nodes[gpu]["role"] != "gpu":
                    raise ValueError(f"NIC {n!r} serves {gpu!r}, which is not a GPU of the layout")

    def _fill_defaults(self) -> None:
        g = self.graph
        counters: dict[str, int] = {}
        for n in g.nodes:
            d = g.nodes[n]
            d.setdefault("socket", 0)
            if "index" not in d:
                idx = _trailing_int(n)
                d["index"] = idx if idx is not None else counters.get(d["role"], 0)
            counters[d["role"]] = counters.get(d["role"], 0) + 1
            if d["role"] == "nic":
                d.setdefault("serves", [])
                if d.get("spec") is None:
                    d["spec"] = NicDma()
            if d["role"] == "switch":  # read by the cost model's hardware count
                d["on_card"] = bool(d["spec"].on_card)

    # ------------------------------------------------------------------ devices

    def devices(self, role: str | None = None) -> list[str]:
        """Node names, optionally of one role, ordered by (role, index, name)."""
        if role is not None and role not in ROLES:
            raise ValueError(f"unknown PCIe role {role!r}; expected one of {ROLES}")
        g = self.graph
        names = [n for n, d in g.nodes(data=True) if role is None or d["role"] == role]
        return sorted(names, key=self._sort_key)

    @property
    def gpus(self) -> list[str]:
        return self.devices("gpu")

    @property
    def nics(self) -> list[str]:
        return self.devices("nic")

    @property
    def ssds(self) -> list[str]:
        return self.devices("ssd")

    def _sort_key(self, n: str) -> tuple[int, int, str]:
        d = self.graph.nodes[n]
        return ROLES.index(d["role"]), d["index"], n

    def edges(self) -> list[tuple[str, str]]:
        """Every link once, oriented parent -> child from the first root (or first node),
        in a canonical breadth-first order (stable across :meth:`to_dict` round trips)."""
        g = self.graph
        roots = self.devices("root")
        start = roots[0] if roots else self.devices()[0]
        out: list[tuple[str, str]] = []
        seen = {start}
        frontier = [start]
        while frontier:
            nxt = []
            for u in frontier:
                for v in sorted(g.neighbors(u), key=self._sort_key):
                    if v not in seen:
                        seen.add(v)
                        out.append((u, v))
                        nxt.append(v)
            frontier = nxt
        return out

    def role(self, node: str) -> str:
        self._check_node(node)
        return self.graph.nodes[node]["role"]

    def spec(self, node: str) -> Any:
        """The device dataclass of a switch, root or SSD."""
        self._check_node(node)
        return self.graph.nodes[node].get("spec")

    def nics_of_gpu(self, gpu: str) -> list[str]:
        """The NICs that carry ``gpu``'s network traffic (its ``serves`` entries)."""
        self._check_node(gpu)
        return [n for n in self.nics if gpu in self.graph.nodes[n]["serves"]]

    def gpus_of_nic(self, nic: str) -> list[str]:
        self._check_node(nic)
        return list(self.graph.nodes[nic]["serves"])

    @cached_property
    def storage_map(self) -> dict[str, str]:
        """GPU -> the SSD its GPUDirect Storage reads come from: one of the SSDs nearest the
        GPU (fewest hops), the GPUs that share the same nearest SSDs spread over them in index
        order (GPU k of the group reads SSD k mod n), as a file set striped per GPU would be.
        Empty without SSDs. Assumption: a GPU reads from one SSD, the nearest (a layout with
        one SSD per GPU gives each GPU its own)."""
        ssds = self.ssds
        if not ssds:
            return {}
        groups: dict[tuple[str, ...], list[str]] = {}
        for gpu in self.gpus:
            hops = {s: len(self.path(s, gpu).nodes) for s in ssds}
            near = min(hops.values())
            groups.setdefault(tuple(s for s in ssds if hops[s] == near), []).append(gpu)
        return {g: near[k % len(near)] for near, gs in groups.items() for k, g in enumerate(gs)}

    def root_of(self, node: str) -> str:
        """The root complex (socket) above ``node``."""
        self._check_node(node)
        sock = self.graph.nodes[node]["socket"]
        for r in self.devices("root"):
            if self.graph.nodes[r]["socket"] == sock:
                return r
        raise ValueError(f"no root complex for socket {sock} of {node!r}")

    def _check_node(self, node: str) -> None:
        if node not in self.graph:
            close = difflib.get_close_matches(str(node), [str(n) for n in self.graph], n=3)
            hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
            raise ValueError(f"no device {node!r} in PCIe layout {self.name!r}.{hint}")

    # ------------------------------------------------------------------ resources

    def _edge_rate(self, u: str, v: str) -> float:
        d = self.graph.edges[u, v]
        if "inter_socket" in d:
            return d["inter_socket"].rate_bps
        return d["link"].effective_bps

    def _edge_latency(self, u: str, v: str) -> float:
        d = self.graph.edges[u, v]
        return d["inter_socket"].latency_s if "inter_socket" in d else d["link"].latency_s

    @cached_property
    def _resources(self) -> tuple[tuple[str, ...], np.ndarray, dict[str, int]]:
        g = self.graph
        names: list[str] = []
        caps: list[float] = []
        for u, v in self.edges():
            rate = self._edge_rate(u, v)
            names += [f"{u}->{v}", f"{v}->{u}"]
            caps += [rate, rate]
        for s in self.devices("switch"):
            spec: PcieSwitch = g.nodes[s]["spec"]
            cap = spec.capacity_bps
            if cap is None:  # non-blocking: all ports at full rate at once
                cap = sum(self._edge_rate(s, nb) for nb in g.neighbors(s))
            names.append(s)
            caps.append(cap)
        for r in self.devices("root"):
            spec_r: RootComplex = g.nodes[r]["spec"]
            for port in sorted(g.neighbors(r), key=self._sort_key):
                if g.nodes[port]["role"] != "root":  # the inter-socket link is not a root port
                    names.append(f"{r}.p2p[{port}]")
                    caps.append(spec_r.p2p_limit_bps)
            if spec_r.p2p_capacity_bps is not None:
                names.append(f"{r}.p2p")
                caps.append(spec_r.p2p_capacity_bps)
        for s in self.devices("ssd"):
            spec_s: Ssd = g.nodes[s]["spec"]
            names += [f"{s}.read", f"{s}.write"]
            caps += [spec_s.read_bps, spec_s.write_bps]
        for n in self.devices("nic"):
            dma: NicDma = g.nodes[n]["spec"]
            names.append(f"{n}.reads")
            caps.append(dma.tag_window_bits / dma.read_latency_s)
        return tuple(names), np.asarray(caps, dtype=float), {n: i for i, n in enumerate(names)}

    @property
    def resource_names(self) -> tuple[str, ...]:
        return self._resources[0]

    @property
    def resource_capacity_bps(self) -> np.ndarray:
        """Capacities of :attr:`resource_names`, bits/s (a copy)."""
        return self._resources[1].copy()

    def resource_index(self, name: str) -> int:
        try:
            return self._resources[2][name]
        except KeyError:
            raise ValueError(
                f"no PCIe resource {name!r} in layout {self.name!r}; resources are link "
                "directions 'u->v', switch names, '<root>.p2p[<port>]', '<root>.p2p', "
                "'<ssd>.read'/'<ssd>.write', '<nic>.reads'"
            ) from None

    # ------------------------------------------------------------------ paths

    def path(self, src: str, dst: str) -> PciePath:
        """The route from ``src`` to ``dst`` (cached): hops, resources, idle rate, latency."""
        key = (src, dst)
        hit = self._routes.get(key)
        if hit is not None:
            return hit
        self._check_node(src)
        self._check_node(dst)
        g = self.graph
        nodes = tuple(nx.shortest_path(g, src, dst))
        links = tuple(itertools.pairwise(nodes))
        inner = nodes[1:-1]
        roles = [g.nodes[n]["role"] for n in nodes]
        p2p = roles[0] != "root" and roles[-1] != "root"
        res = [f"{u}->{v}" for u, v in links]
        latency = sum(self._edge_latency(u, v) for u, v in links)
        _, caps, index = self._resources
        for k, n in enumerate(inner, start=1):
            role = g.nodes[n]["role"]
            if role == "switch":
                res.append(n)
                latency += g.nodes[n]["spec"].hop_latency_s
            elif role == "root":
                latency += g.nodes[n]["spec"].latency_s
                if p2p:
                    port = nodes[k - 1]
                    if g.nodes[port]["role"] != "root":
                        res.append(f"{n}.p2p[{port}]")
                    if f"{n}.p2p" in index:
                        res.append(f"{n}.p2p")
        if roles[0] == "ssd" and src != dst:
            res.append(f"{src}.read")
        if roles[-1] == "ssd" and src != dst:
            res.append(f"{dst}.write")
        idx = np.fromiter((index[r] for r in res), dtype=np.intp, count=len(res))
        rate = float(caps[idx].min()) if idx.size else math.inf
        path = PciePath(
            src, dst, nodes, links, tuple(res), rate, latency, self._classify(nodes, roles)
        )
        self._routes[key] = path
        self._res_idx[key] = idx
        return path

    @staticmethod
    def _classify(nodes: Sequence[str], roles: Sequence[str]) -> str:
        if len(nodes) == 1:
            return "X"
        n_roots = sum(r == "root" for r in roles)
        if n_roots >= 2:
            return "SYS"
        if n_roots == 1:
            return "PHB"
        n_switches = sum(r == "switch" for r in roles[1:-1])
        return "PXB" if n_switches >= 2 else "PIX"

    def path_class(self, a: str, b: str) -> str:
        """nvidia-smi path class between two nodes (``X``, ``PIX``, ``PXB``, ``PHB``, ``SYS``)."""
        return self.path(a, b).path_class

    def latency(self, a: str, b: str) -> float:
        """One-way latency of the path from ``a`` to ``b``, seconds."""
        return self.path(a, b).latency_s

    def topo_matrix(self) -> pd.DataFrame:
        """GPU x NIC path classes, like ``nvidia-smi topo -m`` (rows GPUs, columns NICs)."""
        gpus, nics = self.gpus, self.nics
        data = [[self.path_class(gp, n) for n in nics] for gp in gpus]
        return pd.DataFrame(
            data, index=pd.Index(gpus, name="gpu"), columns=pd.Index(nics, name="nic")
        )

    def path_classes(self) -> dict[tuple[str, str], str]:
        """``{(gpu, nic): class}`` for every GPU and NIC."""
        return {(gp, n): self.path_class(gp, n) for gp in self.gpus for n in self.nics}

    def read_round_trip(self, src: str, nic: str) -> float:
        """Seconds one read request of ``nic`` holds its tag: request path ``nic -> src``, the
        completer's ``read_latency_s`` (the NIC's :class:`NicDma`), data path ``src -> nic``."""
        dma = self._nic_dma(nic)
        return self.latency(nic, src) + dma.read_latency_s + self.latency(src, nic)

    def _nic_dma(self, nic: str) -> NicDma:
        if self.role(nic) != "nic":
            raise ValueError(
                f"a DMA read is requested by a NIC; {nic!r} is a {self.role(nic)} "
                f"(layout {self.name!r})"
            )
        return self.graph.nodes[nic]["spec"]

    def read_completion_bytes(self, src: str, nic: str) -> int:
        """Payload of each completion of a read by ``nic`` from ``src``: the NIC's
        ``completion_bytes`` (default the MPS), never above the smallest MPS on the path nor
        the Max_Read_Request_Size."""
        dma = self._nic_dma(nic)
        mps = min(
            (self.graph.edges[u, v]["link"].mps for u, v in self.path(src, nic).links
             if "link" in self.graph.edges[u, v]),
            default=4096,
        )  # fmt: skip
        want = dma.completion_bytes if dma.completion_bytes is not None else mps
        return min(want, mps, dma.max_read_request_bytes)

    def read_loads(self, src: str, nic: str) -> tuple[np.ndarray, np.ndarray]:
        """``(resource indices, coefficients)`` of a DMA read by ``nic`` of ``src``'s memory,
        per payload bit (see the module doc): completions on the path ``src -> nic``, read
        requests on ``nic -> src``, the NIC's tags (``"<nic>.reads"``). Cached."""
        key = (src, nic)
        hit = self._read_idx.get(key)
        if hit is not None:
            return hit
        dma = self._nic_dma(nic)
        cpl = self.read_completion_bytes(src, nic)
        data, back = self.path(src, nic), self.path(nic, src)
        _, _, index = self._resources
        g = self.graph
        coef = dict.fromkeys(data.resources, 1.0)
        for u, v in data.links:
            if "link" in g.edges[u, v]:
                coef[f"{u}->{v}"] = g.edges[u, v]["link"].completion_load(cpl)
        for u, v in back.links:
            if "link" in g.edges[u, v]:
                coef[f"{u}->{v}"] = g.edges[u, v]["link"].request_load(dma.max_read_request_bytes)
        coef[f"{nic}.reads"] = self.read_round_trip(src, nic) / dma.read_latency_s
        idx = np.fromiter((index[r] for r in coef), dtype=np.intp, count=len(coef))
        out = (idx, np.fromiter(coef.values(), dtype=float, count=len(coef)))
        self._read_idx[key] = out
        return out

    # ------------------------------------------------------------------ incidence

    def stream_incidence(
        self, pairs: Iterable[tuple[str, str]], reads: Sequence[bool] | None = None
    ) -> tuple[sp.csc_array, np.ndarray, tuple[str, ...]]:
        """``(A, capacity_bps, resource_names)`` for streams along ``pairs`` (src, dst).

        ``A`` is resources x streams: 1 where a write stream uses a resource, the
        :meth:`read_loads` coefficients for a stream flagged in ``reads`` (a DMA read the
        destination NIC requests). Ready for :func:`podsim.fabric.maxmin.maxmin_rates`, or to
        stack under a cluster-wide flow problem.
        """
        pairs = list(pairs)
        if reads is None:
            reads = [False] * len(pairs)
        if len(reads) != len(pairs):
            raise ValueError(f"reads has {len(reads)} flags for {len(pairs)} streams")
        rows: list[np.ndarray] = []
        fracs: list[np.ndarray] = []
        for (s, d), is_read in zip(pairs, reads, strict=True):
            if is_read:
                idx, coef = self.read_loads(s, d)
            else:
                self.path(s, d)
                idx = self._res_idx[(s, d)]
                coef = np.ones(idx.size)
            rows.append(idx)
            fracs.append(coef)
        counts = np.fromiter((r.size for r in rows), dtype=np.intp, count=len(rows))
        link_idx = np.concatenate(rows) if rows else np.zeros(0, dtype=np.intp)
        frac = np.concatenate(fracs) if fracs else np.zeros(0)
        flow_idx = np.repeat(np.arange(len(pairs)), counts)
        names, caps, _ = self._resources
        a = build_incidence(link_idx, flow_idx, len(names), len(pairs), frac)
        return a, caps.copy(), names

    # ------------------------------------------------------------------ description

    def summary(self) -> pd.DataFrame:
        """One row per link: endpoints, width, generation, effective rate per direction."""
        rows = []
        for u, v in self.edges():
            d = self.graph.edges[u, v]
            if "inter_socket" in d:
                rows.append(
                    {
                        "a": u,
                        "b": v,
                        "kind": "inter-socket",
                        "lanes": None,
                        "gen": None,
                        "rate_bps": d["inter_socket"].rate_bps,
                    }
                )
            else:
                ln: PcieLink = d["link"]
                rows.append(
                    {
                        "a": u,
                        "b": v,
                        "kind": "pcie",
                        "lanes": ln.lanes,
                        "gen": ln.gen,
                        "rate_bps": ln.effective_bps,
                    }
                )
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        """A YAML-friendly description (SI numbers) that :meth:`from_dict` reads back."""
        g = self.graph
        devices: dict[str, dict[str, Any]] = {}
        for n in self.devices():
            d = g.nodes[n]
            entry: dict[str, Any] = {"role": d["role"], "socket": int(d["socket"])}
            if d.get("spec") is not None:
                entry.update(d["spec"].to_dict())
            if d["role"] == "nic":
                entry["serves"] = list(d["serves"])
            devices[n] = entry
        links = []
        for u, v in self.edges():
            d = g.edges[u, v]
            if "inter_socket" in d:
                links.append({"a": u, "b": v, "inter_socket": d["inter_socket"].to_dict()})
            else:
                links.append({"a": u, "b": v, **d["link"].to_dict()})
        return {"name": self.name, "devices": devices, "links": links}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PcieTree:
        """Build from ``{"name", "devices": {name: {role, socket, <spec keys>}}, "links": [...]}``.

        Spec keys are the fields of :mod:`nic.pcie.devices` dataclasses (rates and times may be
        strings such as ``"32GB/s"`` or ``"115ns"``); a link is ``{a, b, <PcieLink fields>}`` or
        ``{a, b, inter_socket: {rate_bps, latency_s}}`` between two roots.
        """
        extra = set(d) - {"name", "devices", "links"}
        if extra:
            raise ValueError(
                f"unknown PCIe layout key(s) {sorted(extra)}; expected name, devices, links"
            )
        devices = d.get("devices")
        links = d.get("links")
        if not isinstance(devices, Mapping) or not isinstance(links, Sequence):
            raise ValueError("a PCIe layout needs 'devices' (a mapping) and 'links' (a list)")
        g = nx.Graph(name=d.get("name", "custom"))
        for name, attrs in devices.items():
            attrs = dict(attrs or {})
            role = attrs.pop("role", None)
            if role not in ROLES:
                raise ValueError(f"device {name!r} has role {role!r}; expected one of {ROLES}")
            node: dict[str, Any] = {"role": role, "socket": int(attrs.pop("socket", 0))}
            if "index" in attrs:
                node["index"] = int(attrs.pop("index"))
            if role == "nic":
                node["serves"] = list(attrs.pop("serves", []))
            spec_t = _SPEC_TYPES.get(role)
            if spec_t is not None:
                node["spec"] = spec_t.from_dict(attrs)
            elif attrs:
                raise ValueError(f"unknown key(s) {sorted(attrs)} for {role} {name!r}")
            g.add_node(str(name), **node)
        for i, link in enumerate(links):
            link = dict(link)
            try:
                a, b = str(link.pop("a")), str(link.pop("b"))
            except KeyError:
                raise ValueError(f"link #{i} needs endpoints 'a' and 'b', got {link!r}") from None
            for end in (a, b):
                if end not in g:
                    raise ValueError(f"link #{i} ({a!r}-{b!r}) names unknown device {end!r}")
            if g.has_edge(a, b):
                raise ValueError(f"link {a!r}-{b!r} is listed twice; one link per device pair")
            if "inter_socket" in link:
                g.add_edge(a, b, inter_socket=InterSocket.from_dict(link.pop("inter_socket") or {}))
                if link:
                    raise ValueError(f"unknown key(s) {sorted(link)} on inter-socket link {a}-{b}")
            else:
                g.add_edge(a, b, link=PcieLink.from_dict(link))
        return cls(g)

    def __repr__(self) -> str:
        return (
            f"PcieTree({self.name!r}: {len(self.gpus)} GPUs, {len(self.nics)} NICs, "
            f"{len(self.ssds)} SSDs, {len(self.devices('switch'))} switches)"
        )
