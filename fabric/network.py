"""Assemble the packet-level fabric from a topology graph.

``Network(env, graph, switch_config, seed)`` creates one :class:`~podsim.fabric.port.Port` per
direction of every link and one :class:`~podsim.fabric.switch.Switch` per switch node, wires them,
and builds the ECMP tables (:class:`~fabric.routing.Routing`). Endpoints (graph role ``"nic"``,
plus ``"gpu"`` nodes with ``include_scaleup=True``) get dense integer ids in
:func:`podsim.fabric.topology.endpoints` order; packets carry those ids in ``src``/``dst``.

Per link (graph edge attributes, team brief "Topology graph"): rate = ``rate_bps`` (the MAC
rate), propagation = ``length_m`` x 5 ns/m (docs/physics.md), FEC + PCS latency from the edge's
``phy`` profile (:func:`podsim.fabric.phy.get_phy`), plus the edge's ``latency_s`` if it has one
(scale-up links); the receiving switch's port-to-port latency is added on links into a switch.
Cut-through needs an egress no faster than the ingress, so a cut-through switch with ports of
several rates stores-and-forwards the packets that arrive on its slower links (e.g. 200G NIC
ports on a leaf with 400G uplinks).

A NIC (or the minimal :class:`podsim.fabric.host.Host`) uses an endpoint like this::

    net = Network(env, graph, SwitchConfig(), seed=1)
    port = net.attach("nic0.p0", nic)     # nic.receive(pkt) gets every packet for nic0.p0
    port.source = nic.next_packet         # pull model: called whenever the port goes idle
    port.send(pkt)                        # or push (unbounded queue, NIC paces itself)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

import networkx as nx
import simpy
from podsim.fabric.classed import ClassedPort, ClassedSwitch, ClassedSwitchPort
from podsim.fabric.classes import TrafficClasses
from podsim.fabric.packet import DATA, Packet
from podsim.fabric.phy import PROPAGATION_S_PER_M, get_phy
from podsim.fabric.port import Port, packets_on_wires
from podsim.fabric.routing import Routing
from podsim.fabric.switch import Switch, SwitchConfig, SwitchPort
from podsim.fabric.topology import SCALEOUT_SWITCH_ROLES, SWITCH_ROLES, endpoints

__all__ = ["Network", "NetworkError", "Receiver"]


class NetworkError(ValueError):
    """A graph or request the packet engine cannot use; the message says which node/link."""


class Receiver(Protocol):
    def receive(self, pkt: Packet) -> object: ...


def _endpoint_order(g: nx.Graph, include_scaleup: bool) -> list[str]:
    eps = endpoints(g)
    if include_scaleup:
        gpus = sorted((d["gpu"], n) for n, d in g.nodes(data=True) if d.get("role") == "gpu")
        eps += [n for _, n in gpus]
    return eps


class Network:
    """The packet-level fabric built from ``graph``.

    Parameters: ``env`` the SimPy environment; ``graph`` a topology graph (brief contract);
    ``switch_config`` default :class:`SwitchConfig` for every switch; ``seed`` for every random
    choice in the fabric (ECN, ECMP salts); ``switch_configs`` optional per-switch-name or
    per-role (``"leaf"``, ``"spine"``, ...) overrides; ``include_scaleup`` also build the
    scale-up fabric (GPU nodes become endpoints, after the NIC ports; each GPU must then have a
    single scale-up link); ``propagation_s_per_m`` (default 5 ns/m, docs/physics.md);
    ``classes`` the traffic classes (:mod:`podsim.fabric.classes`): with two or more, every
    port keeps a queue per class (:mod:`podsim.fabric.classed`); None or one class builds the
    plain single-queue fabric.

    Every endpoint must have exactly one link (the contract's one node per NIC port).

    Attributes: ``env``, ``graph``, ``endpoints`` (names by id), ``switches`` (name ->
    Switch), ``ports`` (list of every Port, deterministic order), ``routing``.
    """

    def __init__(
        self,
        env: simpy.Environment,
        graph: nx.Graph,
        switch_config: SwitchConfig | None = None,
        seed: int = 0,
        *,
        switch_configs: Mapping[str, SwitchConfig] | None = None,
        include_scaleup: bool = False,
        propagation_s_per_m: float = PROPAGATION_S_PER_M,
        classes: TrafficClasses | None = None,
    ) -> None:
        self.env = env
        #: the traffic classes (None: one class, the plain ports and switches)
        self.classes = classes if classes is not None and len(classes) > 1 else None
        self.graph = graph
        self.seed = seed
        self.switch_config = switch_config or SwitchConfig()
        overrides = dict(switch_configs or {})
        roles = nx.get_node_attributes(graph, "role")
        switch_roles = SWITCH_ROLES if include_scaleup else SCALEOUT_SWITCH_ROLES
        self.endpoints: list[str] = _endpoint_order(graph, include_scaleup)
        self._ep_id = {n: i for i, n in enumerate(self.endpoints)}
        ep_set = set(self.endpoints)
        sw_names = sorted(n for n, r in roles.items() if r in switch_roles)
        keep = ep_set | set(sw_names)
        for key in overrides:
            if key not in keep and key not in switch_roles:
                raise NetworkError(
                    f"switch_configs key {key!r} is neither a switch name nor a switch role "
                    f"({', '.join(switch_roles)})"
                )

        self.switches: dict[str, Switch] = {}
        for name in sw_names:
            cfg = overrides.get(name) or overrides.get(roles[name]) or self.switch_config
            if self.classes is None:
                self.switches[name] = Switch(env, name, cfg, seed=seed)
            else:
                self.switches[name] = ClassedSwitch(env, name, cfg, seed=seed, classes=self.classes)

        self._ports: dict[tuple[str, str], Port] = {}
        self._uplink: dict[str, Port] = {}
        edges = sorted(
            (tuple(sorted((u, v))), d)
            for u, v, d in graph.edges(data=True)
            if u in keep and v in keep
        )
        # cut-through needs the egress no faster than the ingress; a switch whose ports run at
        # several rates stores-and-forwards what arrives on its slower links
        self._max_rate: dict[str, float] = {}
        for (u, v), d in edges:
            for n in (u, v):
                r = d.get("rate_bps")
                if isinstance(r, int | float) and r > self._max_rate.get(n, 0.0):
                    self._max_rate[n] = float(r)
        for (u, v), d in edges:
            rate, length = d.get("rate_bps"), d.get("length_m", 0.0)
            phy_name = d.get("phy", "")
            if not isinstance(rate, int | float) or not rate > 0:
                raise NetworkError(f"link {u!r}-{v!r}: rate_bps={rate!r} must be > 0 bit/s")
            if not isinstance(length, int | float) or not length >= 0:
                raise NetworkError(f"link {u!r}-{v!r}: length_m={length!r} must be >= 0 m")
            fec = get_phy(phy_name).fec_latency_s if phy_name else 0.0
            fec += float(d.get("latency_s", 0.0))
            prop = float(length) * propagation_s_per_m
            for a, b in ((u, v), (v, u)):
                self._ports[(a, b)] = self._make_port(
                    a, b, float(rate), prop, fec, float(length), str(d.get("tier", ""))
                )
            self._ports[(u, v)].reverse = self._ports[(v, u)]
            self._ports[(v, u)].reverse = self._ports[(u, v)]

        for ep in self.endpoints:
            ups = [p for (a, _), p in self._ports.items() if a == ep]
            if len(ups) != 1:
                raise NetworkError(
                    f"endpoint {ep!r} has {len(ups)} links; the packet engine needs exactly one "
                    "(one node per NIC port; with include_scaleup, GPUs on several scale-up "
                    "planes are not supported: model the scale-up fabric with the flow engine)"
                )
            self._uplink[ep] = ups[0]
        self.ports: list[Port] = list(self._ports.values())
        for (a, b), port in self._ports.items():
            if a in self.switches:
                self.switches[a].add_port(port)  # type: ignore[arg-type]
            if b in self.switches:
                self.switches[b].add_ingress(port)
        self.routing = Routing(sorted(keep), self.endpoints, self.switches, self._ports)
        #: callables returning packets held outside queues and the event heap (a fault
        #: model's link-level retry buffer, say); see :meth:`add_holder`
        self._holders: list[Callable[[], Iterable[Packet]]] = []

    def _make_port(
        self, a: str, b: str, rate: float, prop: float, fec: float, length: float, tier: str
    ) -> Port:
        rx_sw = self.switches.get(b)
        if self.classes is None:
            cls: type[Port] = SwitchPort if a in self.switches else Port
        else:
            cls = ClassedSwitchPort if a in self.switches else ClassedPort
        saf = rx_sw is None or rx_sw.config.store_and_forward or rate < self._max_rate[b]
        port = cls(
            self.env,
            a,
            b,
            rate,
            prop_s=prop,
            fec_s=fec,
            rx_latency_s=rx_sw.config.latency_s if rx_sw else 0.0,
            rx_store_forward=saf,
            length_m=length,
            tier=tier,
        )
        if self.classes is not None:
            port.set_classes(self.classes)  # type: ignore[attr-defined]
        return port

    # ---- endpoints ------------------------------------------------------------------------
    def endpoint_id(self, name: str) -> int:
        """Dense integer id of endpoint ``name`` (what Packet.src/dst carry)."""
        try:
            return self._ep_id[name]
        except KeyError:
            raise NetworkError(
                f"{name!r} is not an endpoint of this network; e.g. {self.endpoints[:4]}"
            ) from None

    def endpoint_name(self, eid: int) -> str:
        return self.endpoints[eid]

    def attach(self, endpoint: str, receiver: Receiver | Callable[[Packet], object]) -> Port:
        """Deliver packets addressed to ``endpoint`` to ``receiver.receive(pkt)`` (or to the
        callable itself); returns the endpoint's uplink :class:`Port` to transmit into."""
        eid = self.endpoint_id(endpoint)
        up = self._uplink[self.endpoints[eid]]
        fn = getattr(receiver, "receive", None) or receiver
        up.reverse.connect(fn)  # type: ignore[union-attr, arg-type]
        return up

    def uplink(self, endpoint: str) -> Port:
        """The egress port from ``endpoint`` into the fabric."""
        self.endpoint_id(endpoint)
        return self._uplink[endpoint]

    def downlink(self, endpoint: str) -> Port:
        """The egress port from the fabric into ``endpoint``."""
        return self.uplink(endpoint).reverse  # type: ignore[return-value]

    def port(self, u: str, v: str) -> Port:
        """The egress port of link u -> v."""
        try:
            return self._ports[(u, v)]
        except KeyError:
            raise NetworkError(f"no link {u!r} -> {v!r} in this network") from None

    # ---- paths ----------------------------------------------------------------------------
    def paths(self, src: str, dst: str) -> list[list[str]]:
        """All equal-cost node paths between two endpoints (see :meth:`Routing.paths`)."""
        return self.routing.paths(src, dst)

    def first_path(self, src: str, dst: str) -> list[str]:
        """The first of :meth:`paths` (``[]`` if none), without listing the others (see
        :meth:`Routing.first_path`)."""
        return self.routing.first_path(src, dst)

    def route(self, src: str, dst: str, flow: int, ev: int) -> list[str]:
        """The path packets of (flow, ev) take now (ECMP hashes replayed)."""
        return self.routing.route(src, dst, flow, ev)

    def path_evs(self, src: str, dst: str, flow: int, max_tries: int = 4096) -> dict[int, int]:
        """Path index -> an entropy value that steers ``flow`` onto it (see
        :meth:`Routing.path_evs`)."""
        return self.routing.path_evs(src, dst, flow, max_tries)

    def path_ports(self, path: Iterable[str]) -> list[Port]:
        nodes = list(path)
        return [self.port(a, b) for a, b in itertools.pairwise(nodes)]

    def unloaded_latency(self, path: Iterable[str], wire_bytes: int) -> float:
        """One-way delay of one packet of ``wire_bytes`` along ``path`` on an idle network,
        from the start of its transmission to its delivery (what the engine produces)."""
        t = 0.0
        for p in self.path_ports(path):
            t += p.arrival_delay_s(wire_bytes)
        return t

    def static_path(self, src: str, dst: str) -> list[str]:
        """A shortest path between two endpoints over every link, failed or not (see
        :meth:`Routing.static_path`)."""
        return self.routing.static_path(src, dst)

    def base_rtt(self, src: str, dst: str, data_wire: int, ack_wire: int = 84) -> float:
        """Unloaded round trip: a data packet src->dst plus an ACK back, on the first path
        (on the cabling's shortest path while failures leave no routed path: the base RTT is
        a property of the topology, and a transport may set up a connection during an
        outage)."""
        fwd = self.first_path(src, dst) or self.static_path(src, dst)
        back = self.first_path(dst, src) or self.static_path(dst, src)
        if not fwd or not back:
            raise NetworkError(f"no path between {src!r} and {dst!r}")
        return self.unloaded_latency(fwd, data_wire) + self.unloaded_latency(back, ack_wire)

    # ---- failures -------------------------------------------------------------------------
    def set_link_state(self, u: str, v: str, up: bool, *, reroute: bool = True) -> list[int]:
        """Fail or restore link u-v: both directions stop delivering (packets are counted as
        drops on the ports) and, with ``reroute``, the ECMP tables are recomputed now. For a
        reconvergence delay, call with ``reroute=False`` and call
        ``network.routing.set_link(u, v, up)`` later. Returns the recomputed destinations."""
        self.port(u, v).set_up(up)
        self.port(v, u).set_up(up)
        return self.routing.set_link(u, v, up) if reroute else []

    # ---- accounting -----------------------------------------------------------------------
    def add_holder(self, held: Callable[[], Iterable[Packet]]) -> None:
        """Register ``held()``: packets that a model keeps outside the ports' queues and the
        event heap while they are still on their way (e.g. frames waiting for a link-level
        retry, :mod:`podsim.fabric.faults`). :meth:`bytes_in_flight` and the invariant checks count
        them as in flight."""
        self._holders.append(held)

    def held_packets(self) -> list[Packet]:
        """Every packet the registered holders keep now (see :meth:`add_holder`)."""
        return [pkt for held in self._holders for pkt in held()]

    def dropped_bytes(self) -> int:
        """Payload bytes lost anywhere in the fabric (buffer drops, dead links, no route)."""
        return sum(p.drop_bytes for p in self.ports) + sum(
            s.noroute_bytes for s in self.switches.values()
        )

    def dropped_packets(self) -> int:
        return sum(p.drops for p in self.ports) + sum(
            s.noroute_drops for s in self.switches.values()
        )

    def bytes_in_flight(self, kind: int = DATA) -> int:
        """Payload bytes of ``kind`` packets inside the fabric now: queued in any port or
        scheduled to arrive somewhere (on a wire or in a switch pipeline).

        Counted independently of the senders' and receivers' counters (it scans the queues and
        the event heap), so ``sent == delivered + dropped + in flight`` is a real check. Costs
        O(events + queued packets); for tests and samplers, not the hot path."""
        total = 0
        for p in self.ports:
            for pkt in p.queued():
                if pkt.kind == kind:
                    total += pkt.size
        for pkt in packets_on_wires(self.env, self.ports):
            if pkt.kind == kind:
                total += pkt.size
        for pkt in self.held_packets():
            if pkt.kind == kind:
                total += pkt.size
        return total

    def packet_hops(self) -> int:
        """Packets transmitted over all links so far (the benchmark's unit of work)."""
        return sum(p.tx_pkts for p in self.ports)

    def port_table(self):  # -> pandas.DataFrame (imported lazily: pandas is slow to import)
        """One row per egress port with its counters (see :class:`Port`)."""
        import pandas as pd

        return pd.DataFrame(
            {
                "port": [p.name for p in self.ports],
                "src": [p.src_node for p in self.ports],
                "dst": [p.dst_node for p in self.ports],
                "tier": [p.tier for p in self.ports],
                "rate_bps": [p.rate_bps for p in self.ports],
                "tx_bytes": [p.tx_bytes for p in self.ports],
                "tx_pkts": [p.tx_pkts for p in self.ports],
                "drops": [p.drops for p in self.ports],
                "drop_bytes": [p.drop_bytes for p in self.ports],
                "lost_pkts": [p.lost_pkts for p in self.ports],
                "lost_bytes": [p.lost_bytes for p in self.ports],
                "ecn_marks": [p.ecn_marks for p in self.ports],
                "pauses_sent": [p.pauses_sent for p in self.ports],
                "pauses_rcvd": [p.pauses_rcvd for p in self.ports],
                "paused_s": [p.paused_s for p in self.ports],
                "max_qbytes": [p.max_qbytes for p in self.ports],
            }
        )

    def class_table(self):  # -> pandas.DataFrame
        """With traffic classes, one row per (egress port, class) with the class's counters
        (:class:`podsim.fabric.classed.ClassQueues`); empty with one class."""
        import pandas as pd

        cols = ("tx_bytes", "tx_pkts", "drops", "drop_bytes", "ecn_marks", "pauses_rcvd",
                "pauses_sent", "paused_s", "max_qbytes")  # fmt: skip
        if self.classes is None:
            return pd.DataFrame(columns=["port", "class", *cols])
        names = self.classes.names
        rows = []
        for p in self.ports:
            cq = p.tcq  # type: ignore[attr-defined]
            for i, name in enumerate(names):
                rows.append((p.name, name, *(getattr(cq, c)[i] for c in cols)))
        return pd.DataFrame(rows, columns=["port", "class", *cols])

    def __repr__(self) -> str:
        return (
            f"Network({self.graph.graph.get('name', '?')}: {len(self.endpoints)} endpoints, "
            f"{len(self.switches)} switches, {len(self.ports)} ports)"
        )
