"""Shortest-path ECMP routing tables, precomputed once, O(1) on the hot path.

For every destination endpoint the routing runs a breadth-first search (hop count, as ECMP on a
Clos does) over the links that are up, never passing *through* another endpoint; endpoints on
the same switch share one search from that switch. A switch's next hops toward a destination
are its neighbours one hop closer; the switch keeps them as a tuple of egress ports in a list
indexed by destination id, so forwarding is ``table[dst]`` plus, with several next hops, one
hash (see :mod:`podsim.fabric.switch`). Identical tuples are shared, so a 1k-endpoint fat-tree costs
little memory.

Link failures (:meth:`Routing.set_link`) recompute only the destinations whose shortest-path
DAG used the failed link (a link coming back up recomputes all, since it can shorten any path).
Tables are updated in place: switches keep the same list object. The reconvergence delay is the
caller's business (apply :meth:`set_link` after it).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from podsim.fabric.port import Port
    from podsim.fabric.switch import Switch

__all__ = ["Routing", "RoutingError"]


class RoutingError(ValueError):
    """A routing request that names unknown nodes or links."""


class Routing:
    """Next-hop sets of every switch toward every endpoint.

    ``nodes``: all node names; ``endpoints``: endpoint names in id order; ``switches``: name ->
    :class:`Switch`; ``ports``: (u, v) -> egress :class:`Port` for every directed link.
    """

    def __init__(
        self,
        nodes: Sequence[str],
        endpoints: Sequence[str],
        switches: dict[str, Switch],
        ports: dict[tuple[str, str], Port],
    ) -> None:
        self._names = list(nodes)
        self._idx = {n: i for i, n in enumerate(self._names)}
        self.endpoints = list(endpoints)
        self._ep_id = {n: i for i, n in enumerate(self.endpoints)}
        self.switches = switches
        self.ports = ports
        n = len(self._names)
        adj: list[list[int]] = [[] for _ in range(n)]
        for u, v in ports:
            adj[self._idx[u]].append(self._idx[v])
        for lst in adj:
            lst.sort(key=lambda i: self._names[i])
        self._adj = adj
        self._is_ep = [False] * n
        for e in self.endpoints:
            self._is_ep[self._idx[e]] = True
        self._ep_node = [self._idx[e] for e in self.endpoints]
        for e, i in zip(self.endpoints, self._ep_node, strict=True):
            if len(adj[i]) != 1:
                raise RoutingError(f"endpoint {e!r} has {len(adj[i])} links; expected exactly one")
        #: the node each endpoint hangs off (its leaf switch, normally)
        self._attach = [adj[i][0] for i in self._ep_node]
        self._down: set[frozenset[int]] = set()
        self._tuples: dict[tuple[int, ...], tuple[Port, ...]] = {}
        self._port_ids = {id(p): k for k, p in enumerate(ports.values())}
        self._paths_cache: dict[tuple[int, int], list[list[str]]] = {}
        self._first_cache: dict[tuple[int, int], list[str]] = {}
        e_count = len(self.endpoints)
        for sw in switches.values():
            sw._nh[:] = [()] * e_count
        self.recompute()

    # ---- computation ----------------------------------------------------------------------
    def _bfs(self, root: int) -> list[int]:
        """Hop distance of every switch to switch node ``root`` over links that are up,
        through switches only (-1: unreachable; endpoints are never expanded)."""
        dist = [-1] * len(self._names)
        dist[root] = 0
        frontier = deque([root])
        adj, is_ep, down = self._adj, self._is_ep, self._down
        while frontier:
            u = frontier.popleft()
            du = dist[u] + 1
            for v in adj[u]:
                if dist[v] < 0 and not is_ep[v] and (not down or frozenset((u, v)) not in down):
                    dist[v] = du
                    frontier.append(v)
        return dist

    def _shared(self, chosen: list[Port]) -> tuple[Port, ...]:
        key = tuple(self._port_ids[id(p)] for p in chosen)
        hops = self._tuples.get(key)
        if hops is None:
            hops = tuple(chosen)
            self._tuples[key] = hops
        return hops

    def _install_group(self, root: int, dsts: list[int]) -> None:
        """Tables toward the endpoints ``dsts``, all attached to node ``root``.

        An endpoint has one link and never forwards, so every shortest path to it ends with its
        attachment switch: one BFS from that switch serves all its endpoints (E/leaf-size BFS
        runs instead of E)."""
        names, adj, ports, down = self._names, self._adj, self.ports, self._down
        live = [d for d in dsts if not down or frozenset((root, self._ep_node[d])) not in down]
        for d in dsts:
            if d not in live or self._is_ep[root]:
                for sw in self.switches.values():
                    sw._nh[d] = ()
        if not live or self._is_ep[root]:
            return  # unreachable, or two endpoints wired directly: no switch routes to them
        dist = self._bfs(root)
        for name, sw in self.switches.items():
            u = self._idx[name]
            du = dist[u]
            if u == root:
                for d in live:
                    sw._nh[d] = self._shared([ports[(name, self.endpoints[d])]])
                continue
            hops: tuple[Port, ...] = ()
            if du > 0:
                hops = self._shared(
                    [
                        ports[(name, names[v])]
                        for v in adj[u]
                        if dist[v] == du - 1
                        and not self._is_ep[v]
                        and (not down or frozenset((u, v)) not in down)
                    ]
                )
            for d in live:
                sw._nh[d] = hops

    def recompute(self, dsts: Iterable[int] | None = None) -> None:
        """Rebuild the tables for ``dsts`` (endpoint ids; all when None)."""
        want = range(len(self.endpoints)) if dsts is None else dsts
        groups: dict[int, list[int]] = {}
        for d in want:
            groups.setdefault(self._attach[d], []).append(d)
        for root in sorted(groups):
            self._install_group(root, groups[root])
        self._paths_cache.clear()
        self._first_cache.clear()

    def set_link(self, u: str, v: str, up: bool) -> list[int]:
        """Mark link u-v up or down for routing and recompute the affected destinations.

        Returns the endpoint ids whose tables were recomputed. Does not touch the ports'
        delivery (use ``Network.set_link_state`` for the whole failure)."""
        if (u, v) not in self.ports:
            raise RoutingError(f"no link {u!r}-{v!r} in this network")
        key = frozenset((self._idx[u], self._idx[v]))
        if up:
            if key not in self._down:
                return []
            self._down.discard(key)
            affected = list(range(len(self.endpoints)))
        else:
            if key in self._down:
                return []
            self._down.add(key)
            p_uv, p_vu = self.ports[(u, v)], self.ports[(v, u)]
            affected = []
            for d in range(len(self.endpoints)):
                su, sv = self.switches.get(u), self.switches.get(v)
                if (
                    (su is not None and p_uv in su._nh[d])
                    or (sv is not None and p_vu in sv._nh[d])
                    or self.endpoints[d] in (u, v)
                ):
                    affected.append(d)
        self.recompute(affected)
        return affected

    def link_is_up(self, u: str, v: str) -> bool:
        return frozenset((self._idx[u], self._idx[v])) not in self._down

    # ---- queries --------------------------------------------------------------------------
    def next_hops(self, switch: str, dst: int) -> list[str]:
        """Neighbour names the switch may forward to toward endpoint id ``dst``."""
        return [p.dst_node for p in self.switches[switch]._nh[dst]]

    def paths(self, src: str, dst: str) -> list[list[str]]:
        """All equal-cost node paths from endpoint ``src`` to endpoint ``dst`` (cached)."""
        s, d = self._ep(src), self._ep(dst)
        key = (s, d)
        hit = self._paths_cache.get(key)
        if hit is not None:
            return [list(p) for p in hit]
        out: list[list[str]] = []
        if s != d:
            first = self._uplink_neighbours(src)
            stack = [[src, nb] for nb in first]
            while stack:
                path = stack.pop()
                last = path[-1]
                if last == dst:
                    out.append(path)
                    continue
                sw = self.switches.get(last)
                if sw is None:
                    continue  # another endpoint: not a transit node
                stack.extend([*path, p.dst_node] for p in sw._nh[d])
        out.sort()
        self._paths_cache[key] = out
        return [list(p) for p in out]

    def first_path(self, src: str, dst: str) -> list[str]:
        """``paths(src, dst)[0]``, the smallest equal-cost path in list order, or ``[]`` when
        there is none (cached). Found without enumerating the others: a depth-first search that
        tries next hops in name order meets the paths in list order (no path to ``dst`` is a
        prefix of another), so the first one it completes is the smallest. A transport's base
        RTT needs only this path, once per pair of endpoints (an all-to-all sets up every
        pair)."""
        s, d = self._ep(src), self._ep(dst)
        key = (s, d)
        hit = self._first_cache.get(key)
        if hit is not None:
            return list(hit)
        found: list[str] = []
        if s != d:
            stack = [[src, nb] for nb in sorted(self._uplink_neighbours(src), reverse=True)]
            while stack:
                path = stack.pop()
                last = path[-1]
                if last == dst:
                    found = path
                    break
                sw = self.switches.get(last)
                if sw is None:
                    continue  # another endpoint: not a transit node
                nxt = sorted((p.dst_node for p in sw._nh[d]), reverse=True)
                stack.extend([*path, n] for n in nxt)
        self._first_cache[key] = found
        return list(found)

    def route(self, src: str, dst: str, flow: int, ev: int) -> list[str]:
        """The one path that packets of (flow, ev) take from ``src`` to ``dst`` (hash
        choices replayed); empty if unreachable."""
        d = self._ep(dst)
        nbs = self._uplink_neighbours(src)
        if not nbs:
            return []
        path = [src, nbs[0]]
        while path[-1] != dst:
            sw = self.switches.get(path[-1])
            if sw is None:
                return []
            port = sw.select(d, flow, ev)
            if port is None:
                return []
            path.append(port.dst_node)
        return path

    def path_evs(self, src: str, dst: str, flow: int, max_tries: int = 4096) -> dict[int, int]:
        """For each equal-cost path from ``src`` to ``dst`` (index into :meth:`paths`), the
        smallest entropy value that steers packets of ``flow`` onto it (found by replaying the
        switches' hashes for EV = 0, 1, 2, ...). Paths not hit within ``max_tries`` EVs are
        missing from the result. A transport sprays evenly by cycling through the values."""
        paths = self.paths(src, dst)
        index = {tuple(p): i for i, p in enumerate(paths)}
        out: dict[int, int] = {}
        for ev in range(max_tries):
            if len(out) == len(paths):
                break
            i = index.get(tuple(self.route(src, dst, flow, ev)))
            if i is not None and i not in out:
                out[i] = ev
        return out

    def static_path(self, src: str, dst: str) -> list[str]:
        """A shortest node path from endpoint ``src`` to ``dst`` over every link, failed or
        not (the cabling, not the current tables): what unloaded latencies and base RTTs are
        measured on. Empty if the topology does not connect them."""
        s, d = self._idx[self._endpoint_name(src)], self._idx[self._endpoint_name(dst)]
        if s == d:
            return []
        prev = {s: s}
        frontier = deque([s])
        while frontier:
            u = frontier.popleft()
            if u != s and self._is_ep[u]:
                continue  # endpoints do not forward
            for v in self._adj[u]:
                if v not in prev:
                    prev[v] = u
                    if v == d:
                        path = [d]
                        while path[-1] != s:
                            path.append(prev[path[-1]])
                        return [self._names[i] for i in reversed(path)]
                    frontier.append(v)
        return []

    def _endpoint_name(self, name: str) -> str:
        self._ep(name)
        return name

    def _uplink_neighbours(self, ep: str) -> list[str]:
        i = self._idx[ep]
        return [
            self._names[v]
            for v in self._adj[i]
            if not self._down or frozenset((i, v)) not in self._down
        ]

    def _ep(self, name: str) -> int:
        try:
            return self._ep_id[name]
        except KeyError:
            raise RoutingError(
                f"{name!r} is not an endpoint; endpoints are e.g. {self.endpoints[:4]}"
            ) from None
