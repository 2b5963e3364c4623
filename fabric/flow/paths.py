"""The flow engine's view of a topology: capacity constraints and vectorised routes.

A *constraint* is anything with a capacity that flows share: one direction of a link (``u->v``,
bit/s of wire bytes), a *bundle* of parallel equal links (below), a GPU's scale-up egress or
ingress, or an extra NIC-side limit that the caller adds (packet rate, PCIe). Constraint ids
``0 .. 2E-1`` are the directed links, two per graph edge in sorted edge order (``2k`` is
``u->v`` with ``u < v`` by name, ``2k+1`` the reverse).

Routes are computed for whole arrays of (source port, destination port) pairs at once from the
structure of the Clos families that :mod:`podsim.fabric.topology` builds (star, leaf-spine, rail,
fat-tree, SuperPoD): every NIC port hangs off one leaf; a leaf's uplinks go to a set of spines
(its *spine group*: all spines of the plane in a two-tier fabric, the pod's aggregation switches
in a fat-tree); spines of different groups meet at cores. So a shortest path is

* same leaf: ``port -> leaf -> port``;
* same spine group: ``port -> leaf -> spine j -> leaf -> port``, one path per spine;
* different groups: ``port -> leaf -> spine -> core -> spine' -> leaf' -> port``, one path per
  (spine, core of that spine), spine' being the core's neighbour in the destination group.

These are exactly the equal-cost shortest paths that :class:`podsim.fabric.routing.Routing` finds by
BFS on these graphs, found here by index arithmetic on per-leaf and per-spine tables (no
per-pair graph search). A graph that does not have this shape raises :class:`FlowRouteError`.

Path choice (``mode``):

* ``"hash"``: ``n_paths`` equal-cost paths picked by a hash of the flow key (ECMP: 1 path; a
  spraying NIC with a few entropy values: several), the flow split evenly over them;
* ``"spread"``: the flow is spread evenly over *all* equal-cost paths. Instead of one entry per
  path it loads the bundle constraints: ``up(leaf)`` (all uplinks of the source leaf),
  ``down(leaf)`` (all spine-to-leaf links into the destination leaf) and, across groups,
  ``up(group)``/``down(group)`` (all spine-core links of a group). Each bundle's capacity is the
  sum of its links'. Because every spread flow puts the same fraction on each link of a bundle,
  and the links of a bundle have equal rates, the bundle constraint holds exactly when each of its
  links' constraints does: it is the per-link model with 4-6 entries per flow instead of hundreds.
  Bundles assume equal link rates inside a bundle (true for every builder); under link faults
  :mod:`podsim.fabric.flow.faults` sets a bundle's capacity to its surviving members' even split.

Latency of a route (docs/physics.md: propagation 5 ns/m, FEC + PCS per hop from the PHY profile,
switch port-to-port latency; the packet engine's :meth:`fabric.port.Port.arrival_delay_s`): the
sum over its links of ``length x 5 ns/m + FEC latency + latency_s`` plus the switch latency of
every switch it enters. A ``"spread"`` flow gets the latency of its hashed representative path
(all equal-cost paths of these fabrics have the same cable lengths per tier).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

import networkx as nx
import numpy as np
from podsim.fabric.phy import PROPAGATION_S_PER_M, get_phy
from podsim.fabric.switch import ecmp_choice, switch_rng
from podsim.fabric.topology import SWITCH_ROLES

__all__ = ["FlowPaths", "FlowRouteError", "Route", "mix64"]

_NIC_NAME = re.compile(r"^(nic\d+)\.p\d+$")
_PLANE_PREFIX = re.compile(r"^p\d+\.")


class FlowRouteError(ValueError):
    """A route the flow engine cannot compute (unknown node, unreachable, unsupported shape)."""


def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser, vectorised: a well-mixed uint64 hash of each value."""
    z = np.asarray(x, dtype=np.uint64).copy()
    with np.errstate(over="ignore"):
        z += np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@dataclass(frozen=True)
class Route:
    """Routes of ``n`` flows as padded tables.

    ``idx[i, :]`` constraint ids of flow ``i`` (``-1`` = padding), ``frac[i, :]`` the fraction of
    the flow on each; ``latency_s[i]`` its unloaded one-way latency (no serialisation);
    ``switches[i]`` switches entered on the path (for store-and-forward serialisation).
    """

    idx: np.ndarray
    frac: np.ndarray
    latency_s: np.ndarray
    switches: np.ndarray

    def __len__(self) -> int:
        return int(self.idx.shape[0])


def canonical_name(name: str) -> str:
    """A node name with its plane removed (``p1.leaf3`` -> ``leaf3``, ``nic4.p1`` -> ``nic4``):
    the planes of a multi-plane fabric are copies, so these name one position in all of them."""
    m = _NIC_NAME.match(name)
    if m:
        return m.group(1)
    return _PLANE_PREFIX.sub("", name)


class FlowPaths:
    """Constraints and routes of ``graph`` (a :mod:`podsim.fabric.topology` graph).

    ``switch_latency_s`` is the port-to-port latency of every switch (``SwitchConfig.latency_s``,
    docs/physics.md 0.6-1 us [E]); ``store_and_forward`` switches wait for a whole packet per hop;
    ``seed`` salts the ECMP hash.

    Attributes: ``names`` (constraint names), ``capacity`` (bit/s), ``tier`` (label per
    constraint), ``switch_egress`` (bool: the constraint is a queue inside the fabric: a switch
    egress or a bundle of them; False for NIC uplinks, scale-up ports and NIC-side limits),
    ``n_links`` (directed links come first), ``link_u``/``link_v`` (node names of each
    directed link), ``members`` (bundle id -> its link ids).
    """

    def __init__(
        self,
        graph: nx.Graph,
        *,
        switch_latency_s: float = 600e-9,
        store_and_forward: bool = False,
        propagation_s_per_m: float = PROPAGATION_S_PER_M,
        seed: int = 0,
    ) -> None:
        self.graph = graph
        self.seed = int(seed)
        self.store_and_forward = bool(store_and_forward)
        nodes = sorted(graph.nodes)
        self.node_names = nodes
        self.node_index = {n: i for i, n in enumerate(nodes)}
        nn = len(nodes)
        role_of = nx.get_node_attributes(graph, "role")
        self.roles = np.array([role_of.get(n, "") for n in nodes], dtype=object)
        is_switch = np.isin(self.roles, SWITCH_ROLES)
        self.is_switch = is_switch
        # route_replay's lazily built tables: neighbours, BFS distances per leaf, hash keys
        self._adj: list[list[int]] | None = None
        self._dist: dict[int, np.ndarray] = {}
        self._salts: dict[int, int] = {}

        # ---- directed links
        edges = sorted((min(u, v), max(u, v), d) for u, v, d in graph.edges(data=True))
        ne = len(edges)
        u_idx = np.empty(2 * ne, dtype=np.int64)
        v_idx = np.empty(2 * ne, dtype=np.int64)
        rate = np.empty(2 * ne)
        hop_lat = np.empty(2 * ne)
        tiers: list[str] = []
        kinds: list[str] = []
        for k, (u, v, d) in enumerate(edges):
            r = d.get("rate_bps")
            if not isinstance(r, int | float) or not r > 0:
                raise FlowRouteError(f"link {u!r}-{v!r}: rate_bps={r!r} must be > 0 bit/s")
            phy = d.get("phy", "")
            fec = get_phy(phy).fec_latency_s if phy else 0.0
            base = float(d.get("length_m", 0.0)) * propagation_s_per_m + fec
            base += float(d.get("latency_s", 0.0))
            iu, iv = self.node_index[u], self.node_index[v]
            for j, (a, b) in enumerate(((iu, iv), (iv, iu))):
                u_idx[2 * k + j], v_idx[2 * k + j] = a, b
                rate[2 * k + j] = float(r)
                hop_lat[2 * k + j] = base
                tiers.append(str(d.get("tier", "")))
                kinds.append(str(d.get("kind", "")))
        # entering a scale-out switch costs its port-to-port latency (the packet engine's
        # rx_latency_s); scale-up links carry their whole latency in latency_s
        into_switch = is_switch[v_idx] & (self.roles[v_idx] != "scaleup")
        hop_lat = hop_lat + np.where(into_switch, switch_latency_s, 0.0)
        self.n_links = 2 * ne
        self.link_u_idx, self.link_v_idx = u_idx, v_idx
        self.link_rate = rate
        self.link_latency_s = hop_lat
        self.link_into_switch = into_switch
        self._codes = u_idx * nn + v_idx
        self._code_order = np.argsort(self._codes, kind="stable")
        self._codes_sorted = self._codes[self._code_order]
        self._nn = nn

        names = [f"{nodes[a]}->{nodes[b]}" for a, b in zip(u_idx, v_idx, strict=True)]
        capacity = list(rate)
        tier = tiers
        egress = list(is_switch[u_idx] & (np.asarray(kinds) != "scaleup"))
        self.link_kind = np.asarray(kinds, dtype=object)

        # ---- leaves, spine groups, cores
        port_nodes = np.flatnonzero(self.roles == "nic")
        self.leaf_of = np.full(nn, -1, dtype=np.int64)
        for p in port_nodes:
            nbs = [self.node_index[x] for x in graph.neighbors(nodes[p])]
            leaves = [x for x in nbs if self.roles[x] == "leaf"]
            if len(leaves) != 1:
                raise FlowRouteError(
                    f"NIC port {nodes[p]!r} must hang off exactly one leaf switch; it has "
                    f"{len(leaves)} (the flow engine routes Clos fabrics of podsim.fabric.topology)"
                )
            self.leaf_of[p] = leaves[0]
        leaf_nodes = np.flatnonzero(self.roles == "leaf")
        spine_nodes = np.flatnonzero(self.roles == "spine")
        core_nodes = np.flatnonzero(self.roles == "core")
        self.leaf_pos = np.full(nn, -1, dtype=np.int64)
        self.leaf_pos[leaf_nodes] = np.arange(leaf_nodes.size)
        self.spine_pos = np.full(nn, -1, dtype=np.int64)
        self.spine_pos[spine_nodes] = np.arange(spine_nodes.size)
        self.core_pos = np.full(nn, -1, dtype=np.int64)
        self.core_pos[core_nodes] = np.arange(core_nodes.size)

        def nbrs(i: int, role: str) -> list[int]:
            return sorted(
                self.node_index[x] for x in graph.neighbors(nodes[i]) if role_of.get(x) == role
            )

        group_key: dict[tuple[int, ...], int] = {}
        leaf_group = np.full(leaf_nodes.size, -1, dtype=np.int64)
        ups = [nbrs(int(lf), "spine") for lf in leaf_nodes]
        for i, up in enumerate(ups):
            if up:
                leaf_group[i] = group_key.setdefault(tuple(up), len(group_key))
        width = max((len(u) for u in ups), default=0)
        self.leaf_up = np.full((leaf_nodes.size, max(width, 1)), -1, dtype=np.int64)
        self.leaf_nup = np.zeros(leaf_nodes.size, dtype=np.int64)
        for i, up in enumerate(ups):
            self.leaf_up[i, : len(up)] = up
            self.leaf_nup[i] = len(up)
        self.leaf_group = leaf_group
        n_groups = len(group_key)
        spine_group = np.full(spine_nodes.size, -1, dtype=np.int64)
        for key, g in group_key.items():
            for s in key:
                if spine_group[self.spine_pos[s]] not in (-1, g):
                    raise FlowRouteError(
                        f"spine {nodes[s]!r} serves leaves with different spine sets; the flow "
                        "engine needs every leaf of a group to see the same spines"
                    )
                spine_group[self.spine_pos[s]] = g
        self.spine_group = spine_group
        cores = [nbrs(int(s), "core") for s in spine_nodes]
        cw = max((len(c) for c in cores), default=0)
        self.spine_core = np.full((spine_nodes.size, max(cw, 1)), -1, dtype=np.int64)
        self.spine_ncore = np.zeros(spine_nodes.size, dtype=np.int64)
        for i, cs in enumerate(cores):
            self.spine_core[i, : len(cs)] = cs
            self.spine_ncore[i] = len(cs)
        self.core_down = np.full((core_nodes.size, max(n_groups, 1)), -1, dtype=np.int64)
        for i, c in enumerate(core_nodes):
            for s in nbrs(int(c), "spine"):
                g = spine_group[self.spine_pos[s]]
                if g >= 0:
                    self.core_down[i, g] = s

        # ---- bundles: up(leaf), down(leaf), up(group), down(group)
        self.members: dict[int, np.ndarray] = {}

        def add(name: str, links: list[int], label: str) -> int:
            cid = len(capacity)
            arr = np.asarray(links, dtype=np.int64)
            names.append(name)
            capacity.append(float(rate[arr].sum()) if arr.size else 0.0)
            tier.append(label)
            egress.append(True)
            self.members[cid] = arr
            return cid

        self.up_bundle = np.full(leaf_nodes.size, -1, dtype=np.int64)
        self.down_bundle = np.full(leaf_nodes.size, -1, dtype=np.int64)
        for i, lf in enumerate(leaf_nodes):
            up = ups[i]
            if not up:
                continue
            lf_arr = np.full(len(up), lf)
            sp_arr = np.asarray(up)
            self.up_bundle[i] = add(
                f"up({nodes[lf]})", list(self._lookup(lf_arr, sp_arr)), "leaf-spine"
            )
            self.down_bundle[i] = add(
                f"down({nodes[lf]})", list(self._lookup(sp_arr, lf_arr)), "leaf-spine"
            )
        self.group_up = np.full(max(n_groups, 1), -1, dtype=np.int64)
        self.group_down = np.full(max(n_groups, 1), -1, dtype=np.int64)
        if core_nodes.size:
            for key, g in group_key.items():
                s_list, c_list = [], []
                for s in key:
                    cs = cores[self.spine_pos[s]]
                    s_list += [s] * len(cs)
                    c_list += cs
                if not s_list:
                    continue
                sa, ca = np.asarray(s_list), np.asarray(c_list)
                label = f"spines{{{nodes[key[0]]}..}}"
                self.group_up[g] = add(f"up({label})", list(self._lookup(sa, ca)), "spine-core")
                self.group_down[g] = add(f"down({label})", list(self._lookup(ca, sa)), "spine-core")

        # ---- scale-up ports: one egress and one ingress constraint per GPU
        self.gpu_egress = np.full(nn, -1, dtype=np.int64)
        self.gpu_ingress = np.full(nn, -1, dtype=np.int64)
        self.gpu_latency_s = np.zeros(nn)
        su = np.flatnonzero((self.link_kind == "scaleup") & (self.roles[u_idx] == "gpu"))
        for gnode in np.unique(u_idx[su]):
            out_links = su[u_idx[su] == gnode]
            in_links = self._lookup(v_idx[out_links], u_idx[out_links])
            name = nodes[gnode]
            self.gpu_egress[gnode] = len(capacity)
            names.append(f"{name}=>scaleup")
            capacity.append(float(rate[out_links].sum()))
            tier.append("gpu-scaleup")
            egress.append(False)
            self.members[self.gpu_egress[gnode]] = out_links
            self.gpu_ingress[gnode] = len(capacity)
            names.append(f"scaleup=>{name}")
            capacity.append(float(rate[in_links].sum()))
            tier.append("gpu-scaleup")
            egress.append(False)
            self.members[self.gpu_ingress[gnode]] = in_links
            # the packet engine's scale-up pipes charge a GPU its slowest link's latency
            self.gpu_latency_s[gnode] = float(hop_lat[out_links].max())

        self.names = names
        self.capacity = np.asarray(capacity, dtype=float)
        self.tier = np.asarray(tier, dtype=object)
        self.switch_egress = np.asarray(egress, dtype=bool)
        self.card_of = np.full(nn, -1, dtype=np.int64)
        for p in port_nodes:
            self.card_of[p] = int(graph.nodes[nodes[p]].get("nic", -1))
        self.plane_of = np.full(nn, -1, dtype=np.int64)
        for p in port_nodes:
            self.plane_of[p] = int(graph.nodes[nodes[p]].get("plane", 0))

    # ------------------------------------------------------------------ lookups

    @property
    def n_constraints(self) -> int:
        return int(self.capacity.size)

    def add_constraints(
        self, names: list[str], capacity: np.ndarray, tier: str, switch_egress: bool = False
    ) -> np.ndarray:
        """Append caller-defined constraints (NIC packet rate, PCIe, ...); returns their ids."""
        cap = np.asarray(capacity, dtype=float)
        if cap.shape != (len(names),):
            raise ValueError(f"capacity must have shape ({len(names)},), got {cap.shape}")
        if np.isnan(cap).any() or (cap < 0).any():
            raise ValueError(f"constraint capacities for {tier!r} must be >= 0 (got {cap})")
        start = self.capacity.size
        self.names = [*self.names, *names]
        self.capacity = np.concatenate([self.capacity, cap])
        self.tier = np.concatenate([self.tier, np.full(len(names), tier, dtype=object)])
        self.switch_egress = np.concatenate(
            [self.switch_egress, np.full(len(names), switch_egress, dtype=bool)]
        )
        return np.arange(start, start + len(names), dtype=np.int64)

    def nodes(self, names: list[str] | np.ndarray) -> np.ndarray:
        """Node indices of node names (a clear error for an unknown one)."""
        try:
            return np.fromiter((self.node_index[n] for n in names), np.int64, len(names))
        except KeyError as exc:
            raise FlowRouteError(f"{exc.args[0]!r} is not a node of this topology") from None

    def _lookup(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Directed link ids of node-index pairs (raises if a pair is not a link)."""
        codes = np.asarray(u, dtype=np.int64) * self._nn + np.asarray(v, dtype=np.int64)
        pos = np.searchsorted(self._codes_sorted, codes)
        pos = np.minimum(pos, max(self._codes_sorted.size - 1, 0))
        ok = self._codes_sorted[pos] == codes if self._codes_sorted.size else np.zeros(0, bool)
        if not np.all(ok):
            bad = int(np.flatnonzero(~ok)[0])
            a, b = divmod(int(codes[bad]), self._nn)
            raise FlowRouteError(
                f"no link {self.node_names[a]!r} -> {self.node_names[b]!r}: the flow engine's "
                "Clos routing does not fit this topology"
            )
        return self._code_order[pos]

    # ------------------------------------------------------------------ routes

    def _ecmp(self, s: np.ndarray, d: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, ...]:
        """One hashed shortest path per pair: (links (n, 6), leaf group case, leaves)."""
        n = s.size
        ls, ld = self.leaf_of[s], self.leaf_of[d]
        if np.any(ls < 0) or np.any(ld < 0):
            bad = int(np.flatnonzero((ls < 0) | (ld < 0))[0])
            raise FlowRouteError(
                f"{self.node_names[s[bad]]!r} -> {self.node_names[d[bad]]!r}: both ends must be "
                "NIC ports (role 'nic')"
            )
        if np.any(s == d):
            bad = int(np.flatnonzero(s == d)[0])
            raise FlowRouteError(f"flow from {self.node_names[s[bad]]!r} to itself")
        pls, pld = self.leaf_pos[ls], self.leaf_pos[ld]
        gs, gd = self.leaf_group[pls], self.leaf_group[pld]
        same = ls == ld
        two = ~same & (gs == gd) & (gs >= 0)
        three = ~same & ~two
        links = np.full((n, 6), -1, dtype=np.int64)
        links[:, 0] = self._lookup(s, ls)
        links[same, 1] = self._lookup(ls[same], d[same])
        far = ~same
        if far.any():
            if np.any(self.leaf_nup[pls[far]] == 0):
                raise FlowRouteError("a leaf without spines cannot reach another leaf")
            j1 = (h[far] % self.leaf_nup[pls[far]].astype(np.uint64)).astype(np.int64)
            sp = self.leaf_up[pls[far], j1]
            links[far, 1] = self._lookup(ls[far], sp)
            sp_full = np.full(n, -1, dtype=np.int64)
            sp_full[far] = sp
        if two.any():
            links[two, 2] = self._lookup(sp_full[two], ld[two])
            links[two, 3] = self._lookup(ld[two], d[two])
        if three.any():
            spos = self.spine_pos[sp_full[three]]
            nc = self.spine_ncore[spos]
            if np.any(nc == 0) or np.any(gd[three] < 0):
                raise FlowRouteError(
                    "leaves in different spine groups with no core tier between them: the "
                    "flow engine cannot route this topology"
                )
            j2 = ((h[three] >> np.uint64(24)) % nc.astype(np.uint64)).astype(np.int64)
            core = self.spine_core[spos, j2]
            sp2 = self.core_down[self.core_pos[core], gd[three]]
            if np.any(sp2 < 0):
                raise FlowRouteError("a core switch does not reach the destination's spine group")
            links[three, 2] = self._lookup(sp_full[three], core)
            links[three, 3] = self._lookup(core, sp2)
            links[three, 4] = self._lookup(sp2, ld[three])
            links[three, 5] = self._lookup(ld[three], d[three])
        return links, same, two, three, pls, pld, gs, gd

    def _latency(self, links: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        valid = links >= 0
        safe = np.where(valid, links, 0)
        lat = np.where(valid, self.link_latency_s[safe], 0.0).sum(axis=1)
        sw = np.where(valid, self.link_into_switch[safe], False).sum(axis=1)
        return lat, sw.astype(np.int64)

    def flow_hash(self, key: np.ndarray, salt: int = 0) -> np.ndarray:
        """The ECMP hash of each flow key (deterministic given the seed)."""
        k = np.asarray(key, dtype=np.int64).astype(np.uint64)
        with np.errstate(over="ignore"):
            return mix64(k ^ mix64(np.uint64(self.seed * 1_000_003 + salt)))

    def route(
        self,
        src: np.ndarray,
        dst: np.ndarray,
        key: np.ndarray,
        *,
        mode: str = "hash",
        n_paths: int = 1,
    ) -> Route:
        """Routes from NIC port nodes ``src`` to ``dst`` (node indices, same plane).

        ``mode`` ``"hash"``: ``n_paths`` hashed equal-cost paths (1 = ECMP), even split;
        ``"spread"``: evenly over all equal-cost paths through the bundle constraints.
        ``key`` (one int per flow) seeds the hash, so equal keys take equal paths.
        """
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        if mode not in ("hash", "spread"):
            raise ValueError(f"mode={mode!r}; expected 'hash' or 'spread'")
        if n_paths < 1:
            raise ValueError(f"n_paths={n_paths!r} must be >= 1")
        h = self.flow_hash(key)
        links, same, two, three, pls, pld, gs, gd = self._ecmp(src, dst, h)
        lat, sw = self._latency(links)
        n = src.size
        if mode == "spread":
            idx = np.full((n, 6), -1, dtype=np.int64)
            idx[:, 0] = links[:, 0]
            idx[same, 1] = links[same, 1]
            idx[two, 1] = self.up_bundle[pls[two]]
            idx[two, 2] = self.down_bundle[pld[two]]
            idx[two, 3] = links[two, 3]
            idx[three, 1] = self.up_bundle[pls[three]]
            idx[three, 2] = self.group_up[gs[three]]
            idx[three, 3] = self.group_down[gd[three]]
            idx[three, 4] = self.down_bundle[pld[three]]
            idx[three, 5] = links[three, 5]
            frac = (idx >= 0).astype(float)
            return Route(idx, frac, lat, sw)
        if n_paths == 1:
            return Route(links, (links >= 0).astype(float), lat, sw)
        parts = [links]
        for e in range(1, n_paths):
            he = mix64(h ^ np.uint64(e * 0x5851F42D4C957F2D))
            parts.append(self._ecmp(src, dst, he)[0])
        idx = np.concatenate(parts, axis=1)
        frac = (idx >= 0) / float(n_paths)
        return Route(idx, frac, lat, sw)

    def route_replay(
        self, src: np.ndarray, dst: np.ndarray, flow: list[int], ev: list[int]
    ) -> Route:
        """One path per flow from NIC port nodes ``src`` to ``dst``: the path the packet
        engine's switches give packets of (``flow``, ``ev``), replayed hop by hop. Each switch
        keeps as next hops toward a destination its neighbour switches one hop closer to the
        destination's leaf, in name order (:class:`podsim.fabric.routing.Routing` on the
        links that are up: here all), and picks one with its ECMP hash
        (:func:`podsim.fabric.switch.ecmp_choice`, keyed by :func:`switch_rng` of ``seed``)."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        n = src.size
        links = np.full((n, 6), -1, dtype=np.int64)
        for i in range(n):
            hops = self._replay_nodes(int(src[i]), int(dst[i]), int(flow[i]), int(ev[i]))
            if len(hops) - 1 > links.shape[1]:
                raise FlowRouteError(f"a path of {len(hops) - 1} links; at most 6 expected")
            u = np.asarray(hops[:-1], dtype=np.int64)
            v = np.asarray(hops[1:], dtype=np.int64)
            links[i, : u.size] = self._lookup(u, v)
        lat, sw = self._latency(links)
        return Route(links, (links >= 0).astype(float), lat, sw)

    def _replay_nodes(self, s: int, d: int, flow: int, ev: int) -> list[int]:
        """Node path of :meth:`route_replay` for one flow (node indices)."""
        if self._adj is None:
            g, idx = self.graph, self.node_index
            self._adj = [sorted(idx[x] for x in g.neighbors(name)) for name in self.node_names]
        leaf, root = int(self.leaf_of[s]), int(self.leaf_of[d])
        dist = self._dist.get(root)
        if dist is None:
            dist = np.full(len(self.node_names), -1, dtype=np.int64)
            dist[root] = 0
            frontier = deque([root])
            while frontier:
                u = frontier.popleft()
                for v in self._adj[u]:
                    if dist[v] < 0 and self.is_switch[v]:
                        dist[v] = dist[u] + 1
                        frontier.append(v)
            self._dist[root] = dist
        path = [s, leaf]
        u = leaf
        while u != root:
            du = dist[u]
            if du < 0:
                raise FlowRouteError(
                    f"{self.node_names[s]!r} -> {self.node_names[d]!r}: no route from "
                    f"{self.node_names[u]!r}"
                )
            nxt = [v for v in self._adj[u] if self.is_switch[v] and dist[v] == du - 1]
            if len(nxt) > 1:
                salt = self._salts.get(u)
                if salt is None:
                    salt = switch_rng(self.seed, self.node_names[u]).getrandbits(64)
                    self._salts[u] = salt
                u = nxt[ecmp_choice(flow, ev, salt, len(nxt))]
            else:
                u = nxt[0]
            path.append(u)
        path.append(d)
        return path

    def route_scaleup(self, gpu_a: np.ndarray, gpu_b: np.ndarray) -> Route:
        """Scale-up routes between GPU nodes (indices): the source GPU's egress and the
        destination's ingress (the pod's switches spread a GPU's bandwidth, so they are not a
        separate constraint; see :mod:`podsim.fabric.scaleup` for the same model)."""
        a = np.asarray(gpu_a, dtype=np.int64)
        b = np.asarray(gpu_b, dtype=np.int64)
        ea, ib = self.gpu_egress[a], self.gpu_ingress[b]
        if np.any(ea < 0) or np.any(ib < 0):
            bad = int(np.flatnonzero((ea < 0) | (ib < 0))[0])
            raise FlowRouteError(
                f"{self.node_names[a[bad]]!r} -> {self.node_names[b[bad]]!r}: not both GPUs "
                "with a scale-up port"
            )
        idx = np.stack([ea, ib], axis=1)
        lat = self.gpu_latency_s[a] + self.gpu_latency_s[b]
        return Route(idx, np.ones(idx.shape), lat, np.zeros(a.size, dtype=np.int64))

    # ------------------------------------------------------------------ planes

    def plane_groups(self) -> np.ndarray:
        """Constraint -> group id, merging the copies of one constraint in every plane (same
        name once the plane is removed, see :func:`canonical_name`). Used by the bound, which
        may split traffic over planes freely."""
        keys: dict[str, int] = {}
        out = np.empty(self.capacity.size, dtype=np.int64)
        for i, name in enumerate(self.names):
            if "->" in name and i < self.n_links:
                u, v = name.split("->", 1)
                canon = f"{canonical_name(u)}->{canonical_name(v)}"
            else:
                canon = re.sub(r"(?<=\()p\d+\.", "", re.sub(r"(?<=\{)p\d+\.", "", name))
                canon = re.sub(r"(nic\d+)\.p\d+", r"\1", canon)
            out[i] = keys.setdefault(canon, len(keys))
        return out
