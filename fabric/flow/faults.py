"""Link, switch and NIC faults in the flow engine: capacity changes at the fault times.

The fluid counterpart of :mod:`podsim.fabric.faults` (the packet engine's injector). Each fault is a
pair of SimPy events (``at`` and, when given, ``until``) that change constraint capacities of a
:class:`podsim.fabric.flow.FlowSim`; loss is not modelled (a fluid flow loses no bytes, it slows or
stops), so pre-FEC BER faults, which act through frame loss and retries, stay packet-level.

- degrade: both directions of the link run at the new rate;
- down (a link, every link of a switch, or the link of a NIC port): capacity 0. A *hashed*
  flow (``FlowPaths.route`` mode ``"hash"``) whose path crosses the dead link stalls (rate 0)
  until routing avoids it: after ``reconvergence_s`` for static ECMP (the packet engine's
  :class:`podsim.fabric.routing.Routing` keeps hashing into a dead link for the same delay,
  ``cluster.routing.reconvergence``), at once for a multipath transport (``reroute_delay_s``
  0); it is then re-hashed over the equal-cost shortest paths of the surviving graph. A
  *spread* flow loads bundle constraints; a bundle's capacity becomes ``n_alive x min(alive
  member rates)`` (the even split over the surviving members), i.e. the dead link's share
  leaves the split at once. A flow with no surviving path stays stalled until a repair.

Assumptions: bytes a flow carried before a re-route are charged to its final route in the link
counters; repaired links are used again by new routes (routing learns of a repair after the
same delay) but flows that were moved do not move back.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import networkx as nx
import numpy as np
import simpy
from podsim.fabric.faults import Fault
from podsim.fabric.flow.paths import FlowPaths
from podsim.fabric.flow.sim import FlowSim
from podsim.fabric.kernel import call_at

__all__ = ["FLOW_FAULT_KINDS", "FlowFaults"]

#: the fault kinds the flow engine models, as capacity changes
FLOW_FAULT_KINDS = ("link_down", "link_degrade", "switch_down", "nic_down")


@dataclass
class _Hit:
    t_hit: float
    t_resume: float | None = None
    link: str = ""


@dataclass
class FlowFaults:
    """Apply ``faults`` to ``sim`` (whose constraints are ``paths``') as events of ``env``.

    ``flow_ports(fids) -> (src port, dst port, n_paths, hash key)`` (node indices of
    ``paths``; src -1 for a flow that is not hashed, e.g. spread over bundles) gives what a
    re-route needs; ``reroute_delay_s`` is
    how long after a change routing takes to act on it (static ECMP: the reconvergence delay;
    multipath transports: 0).
    """

    env: simpy.Environment
    sim: FlowSim
    paths: FlowPaths
    faults: Sequence[Fault]
    reroute_delay_s: float = 0.0
    flow_ports: Callable[[np.ndarray], tuple[np.ndarray, ...]] | None = None
    hits: dict[tuple[int, int], _Hit] = field(default_factory=dict)

    def __post_init__(self) -> None:
        p = self.paths
        if not (math.isfinite(self.reroute_delay_s) and self.reroute_delay_s >= 0):
            raise ValueError(f"reroute_delay_s={self.reroute_delay_s!r} must be a time >= 0")
        self.base = p.capacity.copy()
        self.down: dict[int, int] = {}  # undirected edge id -> faults holding it down
        self.degraded: dict[int, list[float]] = {}
        self.routing_dead: set[int] = set()  # edges routing currently avoids
        self._sp_cache: dict[tuple[int, int], list[list[int]]] = {}
        self._edge_of: dict[frozenset[str], int] = {}
        for k in range(p.n_links // 2):
            u, v = p.node_names[p.link_u_idx[2 * k]], p.node_names[p.link_v_idx[2 * k]]
            self._edge_of[frozenset((u, v))] = k
        for i, f in enumerate(self.faults):
            edges = self._edges(f)
            call_at(self.env, f.at, self._start, (i, f, edges))
            if f.until is not None:
                call_at(self.env, f.until, self._end, (i, f, edges))

    # ------------------------------------------------------------------ targets

    def _edges(self, f: Fault) -> list[int]:
        g = self.paths.graph
        if f.kind in ("link_down", "link_degrade"):
            u, v = f.nodes
            k = self._edge_of.get(frozenset((u, v)))
            if k is None:
                raise ValueError(f"fault {f.kind}: link {[u, v]!r} is not a link of the topology")
            return [k]
        if f.kind in ("switch_down", "nic_down"):
            (node,) = f.nodes
            if node not in g:
                raise ValueError(f"fault {f.kind}: node {node!r} is not in the topology")
            return sorted(self._edge_of[frozenset((node, x))] for x in g.neighbors(node))
        raise ValueError(
            f"fault kind {f.kind!r}: the flow engine models link_down, "
            "link_degrade, switch_down and nic_down"
        )

    # ------------------------------------------------------------------ events

    def _start(self, arg: tuple[int, Fault, list[int]]) -> None:
        fi, f, edges = arg
        for k in edges:
            if f.kind == "link_degrade":
                self.degraded.setdefault(k, []).append(float(getattr(f, "rate_bps", 0.0)))
            else:
                self.down[k] = self.down.get(k, 0) + 1
        self._apply()
        if f.kind != "link_degrade":
            dead = [k for k in edges if self.down.get(k, 0) > 0]
            self._mark_hits(dead, fi)
            call_at(self.env, self.env.now + self.reroute_delay_s, self._reconverge, None)

    def _end(self, arg: tuple[int, Fault, list[int]]) -> None:
        _fi, f, edges = arg
        for k in edges:
            if f.kind == "link_degrade":
                self.degraded[k].remove(float(getattr(f, "rate_bps", 0.0)))
            else:
                self.down[k] -= 1
        self._apply()
        now = self.env.now
        for h in self.hits.values():
            if h.t_resume is None and not self._on_dead(h):
                h.t_resume = now
        call_at(self.env, now + self.reroute_delay_s, self._reconverge, None)

    def _on_dead(self, h: _Hit) -> bool:
        return any(self.down.get(k, 0) > 0 for k in self._link_edges(h.link))

    def _link_edges(self, names: str) -> list[int]:
        return [int(x) for x in names.split(",") if x]

    def _apply(self) -> None:
        """Capacities from the fault state: links, then every bundle from its members."""
        p = self.paths
        cap = self.base.copy()
        for k, rates in self.degraded.items():
            if rates:
                cap[2 * k : 2 * k + 2] = np.minimum(cap[2 * k : 2 * k + 2], min(rates))
        for k, n in self.down.items():
            if n > 0:
                cap[2 * k : 2 * k + 2] = 0.0
        for cid, members in p.members.items():
            if members.size:
                m = cap[members]
                alive = m[m > 0]
                cap[cid] = float(alive.size * alive.min()) if alive.size else 0.0
        changed = np.flatnonzero(cap != self.sim.capacity[: cap.size])
        if changed.size:
            self.sim.set_capacity(changed, cap[changed])

    def _dead_edges(self) -> set[int]:
        return {k for k, n in self.down.items() if n > 0}

    def _mark_hits(self, edges: list[int], fi: int) -> None:
        """Record the active hashed flows that cross a newly dead link (they stall)."""
        if not edges:
            return
        sim = self.sim
        act = sim.active
        if not act.size:
            return
        hashed = self._hashed(act)
        act = act[hashed]
        idx = sim.idx[act]
        links = np.asarray(sorted({2 * k for k in edges} | {2 * k + 1 for k in edges}))
        on = np.isin(idx, links)
        hit = on.any(axis=1)
        now = self.env.now
        for fid, row in zip(act[hit].tolist(), idx[hit].tolist(), strict=True):
            ks = sorted({int(c) // 2 for c in row if 0 <= c < self.paths.n_links} & set(edges))
            if (fi, fid) not in self.hits:
                self.hits[(fi, fid)] = _Hit(now, None, ",".join(map(str, ks)))

    def _hashed(self, fids: np.ndarray) -> np.ndarray:
        if self.flow_ports is None:
            return np.zeros(fids.size, dtype=bool)
        src, _dst, _n, _key = self.flow_ports(fids)
        return src >= 0

    def _reconverge(self, _arg: object) -> None:
        """Routing now avoids the links that are dead: re-route hashed flows that cross one."""
        self.routing_dead = self._dead_edges()
        self._sp_cache.clear()
        sim = self.sim
        act = sim.active
        if not act.size or not self.routing_dead:
            return
        act = act[self._hashed(act)]
        dead_links = np.asarray(
            sorted({2 * k for k in self.routing_dead} | {2 * k + 1 for k in self.routing_dead})
        )
        # a flow is re-hashed when its data crosses a dead link (its ACK entries do not count)
        hit = np.isin(np.where(sim.ctrl[act], -1, sim.idx[act]), dead_links).any(axis=1)
        fids = act[hit]
        if not fids.size:
            return
        assert self.flow_ports is not None
        src, dst, n_paths, keys = self.flow_ports(fids)
        idx, coef, frac, ok = self.fix_routes(
            src, dst, n_paths, keys, sim.idx[fids], sim.coef[fids], sim.frac[fids]
        )
        now = self.env.now
        if ok.any():
            sim.reroute(fids[ok], idx[ok], coef[ok], frac[ok])
        moved = set(fids[ok].tolist())
        for (_fi, fid), h in self.hits.items():
            if fid in moved and h.t_resume is None:
                h.t_resume = now

    # ------------------------------------------------------------------ routes

    def _shortest(self, s: int, d: int) -> list[list[int]]:
        key = (s, d)
        got = self._sp_cache.get(key)
        if got is None:
            p = self.paths
            g = p.graph
            dead = [
                (p.node_names[p.link_u_idx[2 * k]], p.node_names[p.link_v_idx[2 * k]])
                for k in self.routing_dead
            ]
            view = nx.restricted_view(g, [], dead)
            try:
                got = [
                    [p.node_index[n] for n in path]
                    for path in sorted(
                        nx.all_shortest_paths(view, p.node_names[s], p.node_names[d])
                    )
                ]
            except nx.NetworkXNoPath:
                got = []
            self._sp_cache[key] = got
        return got

    def fix_routes(
        self,
        src: np.ndarray,
        dst: np.ndarray,
        n_paths: np.ndarray,
        keys: np.ndarray,
        idx: np.ndarray,
        coef: np.ndarray,
        frac: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Re-hash flows (ports ``src``/``dst`` as node indices, ``n_paths`` paths each,
        hash ``keys``; rows ``idx``/``coef``/``frac`` as in :meth:`FlowSim.add`) onto the
        equal-cost shortest paths of the graph without the links routing avoids, keeping their
        NIC-side entries. Returns new (idx, coef, frac) and a mask of the flows that have a
        surviving path (the others keep their rows and stall)."""
        p = self.paths
        nl = p.n_links
        n_f = int(np.asarray(src).size)
        rows_i, rows_c, rows_f = [], [], []
        ok = np.zeros(n_f, dtype=bool)
        for i in range(n_f):
            paths = self._shortest(int(src[i]), int(dst[i])) if src[i] >= 0 else []
            is_link = (idx[i] >= 0) & (idx[i] < nl)
            if not paths or not is_link.any():
                rows_i.append(idx[i])
                rows_c.append(coef[i])
                rows_f.append(frac[i])
                continue
            ok[i] = True
            j = int(np.flatnonzero(is_link)[0])
            wf = coef[i, j] / frac[i, j] if frac[i, j] > 0 else 1.0
            n = max(1, min(int(n_paths[i]), len(paths)))
            h = int(keys[i])
            links: list[int] = []
            for m in range(n):
                path = paths[(h + m) % len(paths)]
                links += p._lookup(np.asarray(path[:-1]), np.asarray(path[1:])).tolist()
            uniq, cnt = np.unique(np.asarray(links, dtype=np.int64), return_counts=True)
            keep = idx[i] >= nl
            new_i = np.concatenate([uniq, idx[i][keep]])
            new_f = np.concatenate([cnt / n, frac[i][keep]])
            new_c = np.concatenate([wf * cnt / n, coef[i][keep]])
            rows_i.append(new_i)
            rows_c.append(new_c)
            rows_f.append(new_f)
        k = max((r.size for r in rows_i), default=1)
        out_i = np.full((n_f, k), -1, dtype=np.int64)
        out_c = np.zeros((n_f, k))
        out_f = np.zeros((n_f, k))
        for i, (a, b, c) in enumerate(zip(rows_i, rows_c, rows_f, strict=True)):
            out_i[i, : a.size], out_c[i, : a.size], out_f[i, : a.size] = a, b, c
        return out_i, out_c, out_f, ok

    # ------------------------------------------------------------------ results

    def summary(self) -> list[dict[str, object]]:
        """Per fault: the hashed flows it stalled, how many were moved or resumed, the longest
        stall (to the end of the run when never resumed) and the packets lost (0: a fluid flow
        loses nothing, it waits)."""
        now = self.env.now
        out: list[dict[str, object]] = []
        for i, f in enumerate(self.faults):
            hs = [h for (fi, _fid), h in self.hits.items() if fi == i]
            stalls = [(h.t_resume if h.t_resume is not None else now) - h.t_hit for h in hs]
            out.append(
                {
                    "kind": f.kind,
                    "target": f.target(),
                    "at_s": f.at,
                    "until_s": f.until,
                    "flows_hit": len(hs),
                    "flows_resumed": sum(h.t_resume is not None for h in hs),
                    "max_stall_s": max(stalls, default=0.0),
                    "lost_pkts": 0,
                    "reroute_delay_s": self.reroute_delay_s,
                }
            )
        return out
