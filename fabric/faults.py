"""Fault injection on a packet-level :class:`podsim.fabric.network.Network`.

A :class:`FaultInjector` applies a schedule of faults at given simulated times and keeps a
record of what each one cost: packets and bytes lost on its links, frames corrupted and
replayed, the flows it hit, how long they stalled and when they recovered.

Faults (each ``at`` seconds, optionally ``until``; registered in :data:`FAULT_KINDS`):

``link_down``     a link fails in both directions: frames transmitted onto it from then on are
                  lost (counted in the sending port's ``drops`` and ``lost_pkts``); frames
                  already on the wire arrive. ``until`` brings it back.
``link_degrade``  the link runs at ``rate_bps`` (e.g. one of four 106.25G PAM4 lanes lost:
                  400G -> 300G). A switch cannot cut through from a link slower than its
                  other ports (it would underrun), so frames arriving over a degraded link into
                  a switch are stored and forwarded while the fault lasts.
``ber``           a pre-FEC bit error rate. Each frame transmitted on the link is corrupted
                  with the RS(544,514) frame-loss probability of the link's PHY
                  (:meth:`podsim.fabric.phy.PhyProfile.frame_loss_prob`, independent bit errors, or
                  bursts of ``burst_len`` symbols); without LLR a corrupted frame is lost. With
                  Ultra Ethernet link-level retry (``llr``) it is not lost: the receiver asks
                  for it again and the sender replays only that frame, ahead of its queue, so
                  the link is busy for the replay, and the frame arrives
                  ``llr_retry_cost_s`` = one link round trip + its serialisation later
                  (docs/physics.md, "400GbE over 112G PAM4" [S]) - more if the wire was busy or the
                  replay was corrupted too. The link stays in order: frames arriving behind a
                  frame that waits for its replay are held and released after it.
``switch_down``   every link of the switch goes down.
``nic_down``      a NIC port's link goes down.

Routing (``reconvergence_s``): static ECMP tables keep hashing into a dead link until the
reconvergence delay has elapsed; then :meth:`podsim.fabric.routing.Routing.set_link` removes it (and
puts it back the same delay after it is repaired). Multipath transports route around a dead
link on their own, by changing entropy values.

Accounting: losses on the wire are counted on the ports (``lost_pkts``/``lost_bytes``, part of
``drops``/``drop_bytes``), so ``Network.dropped_bytes`` stays the total; frames held for a
replay are registered with :meth:`podsim.fabric.network.Network.add_holder`, so they count as in
flight and bytes stay conserved. The flow watch (on by default) wraps the endpoints' downlinks
to time, per flow hit by a fault, the longest gap between two DATA arrivals after its first
loss (``stall_s``) and when that gap ended (``recovered_s``, relative to the fault).

Random choices (which frames are corrupted) come from ``random.Random`` objects seeded from
``seed`` and the link's name: same seed, same run.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from podsim.fabric.kernel import call_at, call_later
from podsim.fabric.packet import DATA, PAUSE, Packet
from podsim.fabric.phy import PhyProfile, get_phy
from podsim.fabric.registry import Registry

if TYPE_CHECKING:
    import pandas as pd
    from podsim.fabric.network import Network
    from podsim.fabric.port import Port

__all__ = [
    "FAULT_KINDS",
    "Fault",
    "FaultError",
    "FaultInjector",
    "FaultRecord",
    "LinkBer",
    "LinkDegrade",
    "LinkDown",
    "NicDown",
    "SwitchDown",
    "make_fault",
]


class FaultError(ValueError):
    """A fault that names no such link or node, or has impossible parameters."""


# --------------------------------------------------------------------------- fault specs


@dataclass(frozen=True, kw_only=True)
class Fault:
    """Base of every fault: active from ``at`` (s) until ``until`` (s, None: to the end)."""

    kind: ClassVar[str] = ""
    at: float = 0.0
    until: float | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.at, int | float) and math.isfinite(self.at) and self.at >= 0):
            raise FaultError(f"{self.kind} fault: at={self.at!r} must be a finite time >= 0 s")
        if self.until is not None and not (
            isinstance(self.until, int | float) and self.until > self.at
        ):
            raise FaultError(
                f"{self.kind} fault: until={self.until!r} must be a time after at={self.at!r} s"
            )

    @property
    def nodes(self) -> tuple[str, ...]:
        """The link's two node names, or the one node the fault acts on."""
        link = getattr(self, "link", None)
        return tuple(link) if link else (str(getattr(self, "node", "")),)

    def target(self) -> str:
        """The link ``u-v`` or node the fault acts on (for records)."""
        link = getattr(self, "link", None)
        return f"{link[0]}-{link[1]}" if link else str(getattr(self, "node", ""))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **asdict(self)}


def _link(link: Any, kind: str) -> tuple[str, str]:
    if not (isinstance(link, list | tuple) and len(link) == 2 and all(isinstance(x, str)
                                                                      for x in link)):  # fmt: skip
        raise FaultError(f"{kind} fault: link={link!r} must be two node names [u, v]")
    return (link[0], link[1])


@dataclass(frozen=True, kw_only=True)
class LinkDown(Fault):
    """A link fails (both directions)."""

    kind: ClassVar[str] = "link_down"
    link: tuple[str, str]

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "link", _link(self.link, self.kind))


@dataclass(frozen=True, kw_only=True)
class LinkDegrade(Fault):
    """A link runs at a lower MAC rate ``rate_bps`` (e.g. a PAM4 lane lost: 400G -> 300G)."""

    kind: ClassVar[str] = "link_degrade"
    link: tuple[str, str]
    rate_bps: float

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "link", _link(self.link, self.kind))
        r = self.rate_bps
        if not (isinstance(r, int | float) and math.isfinite(r) and r > 0):
            raise FaultError(f"link_degrade fault: rate_bps={r!r} must be a finite rate > 0")


@dataclass(frozen=True, kw_only=True)
class LinkBer(Fault):
    """A pre-FEC bit error rate on a link: frame loss, or link-level retries with ``llr``.

    ``burst_len`` > 1 groups symbol errors into bursts of that many symbols (see
    :meth:`podsim.fabric.phy.PhyProfile.codeword_loss_prob`); ``phy`` overrides the link's PHY
    profile (default: the edge's ``phy`` attribute, else the profile of its rate)."""

    kind: ClassVar[str] = "ber"
    link: tuple[str, str]
    pre_fec_ber: float
    llr: bool = False
    burst_len: int = 1
    #: replays of one frame before LLR gives up and the frame is lost (the transport's own
    #: retransmission, with its retry limit, takes over): a bound, so that a link too noisy to
    #: ever pass a frame cannot replay forever [E: no public figure for a replay limit]
    llr_max_replays: int = 16
    phy: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "link", _link(self.link, self.kind))
        b = self.pre_fec_ber
        if not (isinstance(b, int | float) and 0.0 < b < 0.5):
            raise FaultError(f"ber fault: pre_fec_ber={b!r} must be in (0, 0.5)")
        if isinstance(self.burst_len, bool) or not (
            isinstance(self.burst_len, int) and self.burst_len >= 1
        ):
            raise FaultError(f"ber fault: burst_len={self.burst_len!r} must be an int >= 1")
        if isinstance(self.llr_max_replays, bool) or not (
            isinstance(self.llr_max_replays, int) and self.llr_max_replays >= 1
        ):
            raise FaultError(
                f"ber fault: llr_max_replays={self.llr_max_replays!r} must be an int >= 1"
            )


@dataclass(frozen=True, kw_only=True)
class SwitchDown(Fault):
    """A switch fails: all its links go down."""

    kind: ClassVar[str] = "switch_down"
    node: str


@dataclass(frozen=True, kw_only=True)
class NicDown(Fault):
    """A NIC port fails: its link goes down."""

    kind: ClassVar[str] = "nic_down"
    node: str


FAULT_KINDS: Registry[type[Fault]] = Registry("fault")
for _cls in (LinkDown, LinkDegrade, LinkBer, SwitchDown, NicDown):
    FAULT_KINDS.add(_cls.kind, _cls, (_cls.__doc__ or "").strip().splitlines()[0])


def make_fault(kind: str, **params: Any) -> Fault:
    """Build a fault by registry name: ``make_fault("link_down", link=("a", "b"), at=1e-5)``."""
    cls = FAULT_KINDS.get(kind)
    try:
        return cls(**params)
    except TypeError as exc:
        raise FaultError(f"{kind} fault: {exc}") from None


# --------------------------------------------------------------------------- records


@dataclass
class FaultRecord:
    """What one fault did. Times in seconds of simulated time (NaN: never happened).

    ``links`` the links it acts on; ``started_s``/``ended_s`` when it was applied/removed;
    ``rerouted_s`` when the routing tables stopped using its links (``restored_route_s``
    when they used them again); ``lost_pkts``/``lost_bytes`` packets and payload bytes lost on
    its links while it was active; ``corrupted`` frames hit by bit errors, ``llr_replays``
    link-level replays, ``llr_delay_s`` extra delay the replays added in total (queueing
    behind a replay included); ``flows`` flow id -> :class:`FlowHit`.
    """

    index: int
    fault: Fault
    links: list[tuple[str, str]]
    started_s: float = math.nan
    ended_s: float = math.nan
    rerouted_s: float = math.nan
    restored_route_s: float = math.nan
    lost_pkts: int = 0
    lost_bytes: int = 0
    corrupted: int = 0
    llr_replays: int = 0
    llr_delay_s: float = 0.0
    #: frames LLR gave up on after ``llr_max_replays`` replays (then lost)
    llr_given_up: int = 0
    flows: dict[int, FlowHit] = field(default_factory=dict)

    def max_stall_s(self) -> float:
        return max((h.stall_s for h in self.flows.values()), default=0.0)

    def recovery_s(self) -> float:
        """Time from the fault to the end of the last affected flow's longest stall (NaN if
        a hit flow never received anything again)."""
        if not self.flows:
            return 0.0
        ends = [h.stall_end_s for h in self.flows.values()]
        if any(math.isnan(e) for e in ends):
            return math.nan
        return max(ends) - self.fault.at


@dataclass
class FlowHit:
    """One flow's losses on a fault's links and its delivery gap after them.

    ``stall_s`` is the longest time without a DATA arrival at the flow's destination, among
    the gaps that end after its first loss; ``stall_end_s`` when that gap ended (NaN: the flow
    has not received anything since its first loss)."""

    first_loss_s: float
    last_loss_s: float
    lost_pkts: int = 0
    lost_bytes: int = 0
    stall_s: float = 0.0
    stall_end_s: float = math.nan


# --------------------------------------------------------------------------- flow watch


class _FlowWatch:
    """DATA arrival times per flow at the endpoints (only while faults are being recorded)."""

    def __init__(self, network: Network) -> None:
        self.env = network.env
        self.network = network
        self.last: dict[int, float] = {}
        #: flow -> the FlowHits (one per fault) waiting for arrivals
        self.hits: dict[int, list[FlowHit]] = {}
        self._wrappers: list[Callable[[Packet], object]] = []

    def install(self, mine: set[int]) -> None:
        """Wrap every endpoint downlink's receiver, unless a wrapper of this injector is
        already there (``mine``: ids of the injector's wrappers); again after a re-attach."""
        for ep in self.network.endpoints:
            port = self.network.downlink(ep)
            if id(port.receiver) in mine:
                continue
            fn = self._make(port.receiver)
            self._wrappers.append(fn)
            mine.add(id(fn))
            port.set_receiver(fn)

    def _make(self, inner: Callable[[Packet], object]) -> Callable[[Packet], object]:
        env, last, hits = self.env, self.last, self.hits
        nan = math.isnan

        def receive(pkt: Packet) -> None:
            if not pkt.kind:
                f = pkt.flow
                now = env._now
                hs = hits.get(f)
                if hs is not None:
                    prev = last.get(f)
                    for h in hs:
                        if now < h.first_loss_s:
                            continue
                        gap = now - (h.first_loss_s if prev is None else prev)
                        if gap > h.stall_s or nan(h.stall_end_s):
                            h.stall_s = max(gap, h.stall_s)
                            h.stall_end_s = now
                last[f] = now
            inner(pkt)

        return receive

    def hit(self, h: FlowHit, flow: int) -> None:
        self.hits.setdefault(flow, []).append(h)


# --------------------------------------------------------------------------- bit errors


class _ErrorModel:
    """Bit errors on one direction of a link: wraps the port's receiver (see module doc)."""

    def __init__(
        self,
        inj: FaultInjector,
        port: Port,
        phy: PhyProfile,
        fault: LinkBer,
        rec: FaultRecord,
    ) -> None:
        self.inj = inj
        self.port = port
        self.phy = phy
        self.ber = fault.pre_fec_ber
        self.burst = fault.burst_len
        self.llr = fault.llr
        self.max_replays = fault.llr_max_replays
        self.rec = rec
        self.active = True
        self.rng = random.Random(f"{inj.seed}/ber/{port.name}/{rec.index}")
        self._p: dict[int, float] = {}
        self.inner = port.receiver
        #: in-order frames behind a replay: [packet, corrupted, first arrival time, replays]
        self.pending: deque[list[Any]] = deque()
        self.replaying = False
        back = port.reverse
        self.nack_s = (back.prop_s + back.fec_s) if back is not None else 0.0
        self.fn = self.receive  # one bound method object, to recognise it on the port
        inj._mine.add(id(self.fn))
        port.set_receiver(self.fn)

    def loss_prob(self, wire: int) -> float:
        p = self._p.get(wire)
        if p is None:
            frame = max(1, wire - self.phy.preamble_ifg_bytes)
            p = self.phy.frame_loss_prob(frame, self.ber, self.burst)
            self._p[wire] = p
        return p

    def _bad(self, pkt: Packet) -> bool:
        if not self.active:
            return False
        bad = self.rng.random() < self.loss_prob(pkt.wire)
        if bad:
            self.rec.corrupted += 1
        return bad

    def receive(self, pkt: Packet) -> None:
        bad = self._bad(pkt)
        if not self.llr:
            if bad:
                self.inj._lose(self.port, pkt, self.rec)
            else:
                self.inner(pkt)
            return
        if not bad and not self.pending:
            self.inner(pkt)
            return
        self.pending.append([pkt, bad, self.inj.env._now, 0])
        if not self.replaying:
            self._drain()

    def _drain(self) -> None:
        pending = self.pending
        now = self.inj.env._now
        while pending:
            pkt, bad, t0, replays = pending[0]
            if bad and replays >= self.max_replays:
                # LLR gives up on this frame: lost, as without LLR
                pending.popleft()
                self.rec.llr_given_up += 1
                self.inj._lose(self.port, pkt, self.rec)
                continue
            if bad:
                self.replaying = True
                call_later(self.inj.env, self.nack_s, self._replay, pkt.wire)
                return
            pending.popleft()
            self.rec.llr_delay_s += now - t0
            self.inner(pkt)
        self.replaying = False

    def _replay(self, wire: int) -> None:
        # the replay occupies the link like any frame, ahead of the port's queues; the frame
        # itself stays in ``pending`` (counted in flight through the network's holder)
        carrier = Packet(0, -1, -1, kind=PAUSE, overhead=wire)
        self.port.send_mac(carrier, self)  # type: ignore[arg-type]

    def _on_mac(self, _carrier: Packet) -> None:
        """The replayed frame arrived (called by the port, as for a PFC frame)."""
        self.rec.llr_replays += 1
        if not self.port.up:  # the link died during the replay: everything held is lost
            while self.pending:
                pkt = self.pending.popleft()[0]
                self.inj._lose(self.port, pkt, self.rec)
            self.replaying = False
            return
        head = self.pending[0]
        head[3] += 1
        head[1] = self._bad(head[0])
        self._drain()

    def held(self) -> list[Packet]:
        return [e[0] for e in self.pending]

    def remove(self) -> None:
        """Stop corrupting; frames already held are still delivered in order."""
        self.active = False
        if self.port.receiver is self.fn:
            self.port.set_receiver(self.inner)


# --------------------------------------------------------------------------- injector


class FaultInjector:
    """Apply ``faults`` to ``network`` at their times and record what they did.

    ``reconvergence_s``: how long static ECMP routing keeps using a failed (or repaired) link
    before the tables are updated (0: at once). ``seed``: bit errors. ``watch_flows``: time
    the stalls of the flows that lost packets (wraps the endpoints' downlinks; create the
    injector after attaching NICs/hosts, or it re-wraps them when the first fault starts).

    Use: ``inj = FaultInjector(net, [LinkDown(link=("leaf0", "spine1"), at=10e-6)],
    reconvergence_s=50e-6)``, run the simulation, then ``inj.table()`` / ``inj.summary()``.
    """

    def __init__(
        self,
        network: Network,
        faults: Iterable[Fault] = (),
        *,
        reconvergence_s: float = 0.0,
        seed: int = 0,
        watch_flows: bool = True,
    ) -> None:
        if not (math.isfinite(reconvergence_s) and reconvergence_s >= 0):
            raise FaultError(f"reconvergence_s={reconvergence_s!r} must be a finite time >= 0")
        self.network = network
        self.env = network.env
        self.reconvergence_s = float(reconvergence_s)
        self.seed = seed
        self.records: list[FaultRecord] = []
        # each lost packet once, however many faults were in effect on its link (the
        # per-fault records credit every one of them: overlapping faults share a loss)
        self.lost_pkts = 0
        self.lost_bytes = 0
        #: (time, fault index, action) in the order things happened
        self.log: list[tuple[float, int, str]] = []
        self._down: dict[frozenset[str], int] = {}
        self._route_down: dict[frozenset[str], int] = {}
        self._degrade: dict[frozenset[str], list[tuple[int, float]]] = {}
        self._orig: dict[frozenset[str], tuple[float, bool, bool]] = {}
        self._active: dict[frozenset[str], list[FaultRecord]] = {}
        self._errors: dict[int, list[_ErrorModel]] = {}
        self._all_errors: list[_ErrorModel] = []
        self._mine: set[int] = set()  # ids of the receiver wrappers this injector installed
        self.watch = _FlowWatch(network) if watch_flows else None
        if self.watch is not None:
            self.watch.install(self._mine)
        for port in network.ports:
            port.on_lost = self._on_lost
        network.add_holder(self._held)
        for f in faults:
            self.add(f)

    # ---- scheduling -----------------------------------------------------------------------
    def add(self, fault: Fault) -> FaultRecord:
        """Validate ``fault`` against the network and schedule it; returns its record."""
        if not isinstance(fault, Fault):
            raise FaultError(f"{fault!r} is not a podsim.fabric.faults.Fault")
        links = self._links_of(fault)
        rec = FaultRecord(len(self.records), fault, links)
        if isinstance(fault, LinkBer):
            self._phy_of(fault, links[0])  # fail now, not at run time
        self.records.append(rec)
        now = self.env._now
        call_at(self.env, max(fault.at, now), self._start, rec)
        if fault.until is not None:
            call_at(self.env, max(fault.until, now), self._end, rec)
        return rec

    def _links_of(self, f: Fault) -> list[tuple[str, str]]:
        net = self.network
        g = net.graph
        if isinstance(f, LinkDown | LinkDegrade | LinkBer):
            u, v = f.link
            if (u, v) not in net._ports:
                raise FaultError(
                    f"{f.kind} fault: no link {u!r}-{v!r} in the packet network "
                    f"(e.g. {net.ports[0].src_node!r}-{net.ports[0].dst_node!r})"
                )
            return [(u, v)]
        node = f.node  # type: ignore[attr-defined]
        if isinstance(f, SwitchDown):
            if node not in net.switches:
                raise FaultError(
                    f"switch_down fault: {node!r} is not a switch of the packet network; "
                    f"switches are e.g. {sorted(net.switches)[:4]}"
                )
        elif node not in net._ep_id or g.nodes[node].get("role") != "nic":
            raise FaultError(
                f"nic_down fault: {node!r} is not a NIC port of the packet network; "
                f"NIC ports are e.g. {net.endpoints[:4]}"
            )
        return sorted({tuple(sorted((a, b))) for (a, b) in net._ports if node in (a, b)})

    def _phy_of(self, f: LinkBer, link: tuple[str, str]) -> PhyProfile:
        if f.phy is not None:
            return get_phy(f.phy)
        d = self.network.graph.edges[link]
        name = d.get("phy")
        if name:
            phy = get_phy(name)
            if phy.fec != "none":
                return phy
        from podsim.fabric.phy import phy_for_rate

        try:
            return phy_for_rate(float(d.get("rate_bps", 0.0)))
        except ValueError:
            raise FaultError(
                f"ber fault on {link[0]!r}-{link[1]!r}: the link has no Ethernet PHY with a "
                "frame-error model; name one with phy"
            ) from None

    # ---- applying -------------------------------------------------------------------------
    def _start(self, rec: FaultRecord) -> None:
        now = self.env._now
        rec.started_s = now
        self.log.append((now, rec.index, "start"))
        if self.watch is not None:
            self.watch.install(self._mine)
        f = rec.fault
        for u, v in rec.links:
            self._active.setdefault(frozenset((u, v)), []).append(rec)
        if isinstance(f, LinkDegrade):
            self._set_degrade(rec, add=True)
        elif isinstance(f, LinkBer):
            phy = self._phy_of(f, rec.links[0])
            u, v = rec.links[0]
            net = self.network
            ems = [_ErrorModel(self, net.port(a, b), phy, f, rec) for a, b in ((u, v), (v, u))]
            self._errors[rec.index] = ems
            self._all_errors.extend(ems)
        else:
            for u, v in rec.links:
                self._link_down(u, v, rec)

    def _end(self, rec: FaultRecord) -> None:
        now = self.env._now
        rec.ended_s = now
        self.log.append((now, rec.index, "end"))
        f = rec.fault
        for u, v in rec.links:
            lst = self._active.get(frozenset((u, v)), [])
            if rec in lst:
                lst.remove(rec)
        if isinstance(f, LinkDegrade):
            self._set_degrade(rec, add=False)
        elif isinstance(f, LinkBer):
            for em in self._errors.pop(rec.index, []):
                em.remove()
        else:
            for u, v in rec.links:
                self._link_up(u, v, rec)

    def _link_down(self, u: str, v: str, rec: FaultRecord) -> None:
        key = frozenset((u, v))
        n = self._down.get(key, 0)
        self._down[key] = n + 1
        if n == 0:
            self.network.port(u, v).set_up(False)
            self.network.port(v, u).set_up(False)
        self._route_later(u, v, False, rec)

    def _link_up(self, u: str, v: str, rec: FaultRecord) -> None:
        key = frozenset((u, v))
        n = self._down.get(key, 0) - 1
        self._down[key] = n
        if n == 0:
            self.network.port(u, v).set_up(True)
            self.network.port(v, u).set_up(True)
        self._route_later(u, v, True, rec)

    def _route_later(self, u: str, v: str, up: bool, rec: FaultRecord) -> None:
        if self.reconvergence_s > 0:
            call_later(self.env, self.reconvergence_s, self._route, (u, v, up, rec))
        else:
            self._route((u, v, up, rec))

    def _route(self, arg: tuple[str, str, bool, FaultRecord]) -> None:
        u, v, up, rec = arg
        key = frozenset((u, v))
        n = self._route_down.get(key, 0)
        n = n - 1 if up else n + 1
        self._route_down[key] = n
        if n == (0 if up else 1):
            self.network.routing.set_link(u, v, up)
        now = self.env._now
        if up:
            rec.restored_route_s = now
        elif math.isnan(rec.rerouted_s):
            rec.rerouted_s = now
        self.log.append((now, rec.index, "route-up" if up else "route-down"))

    def _set_degrade(self, rec: FaultRecord, add: bool) -> None:
        f = rec.fault
        assert isinstance(f, LinkDegrade)
        u, v = f.link
        key = frozenset((u, v))
        net = self.network
        pu, pv = net.port(u, v), net.port(v, u)
        if key not in self._orig:
            self._orig[key] = (pu.rate_bps, pu._rx_ser, pv._rx_ser)
        lst = self._degrade.setdefault(key, [])
        if add:
            lst.append((rec.index, f.rate_bps))
        else:
            lst[:] = [e for e in lst if e[0] != rec.index]
        rate0, ser_u, ser_v = self._orig[key]
        if lst:
            rate = min(r for _, r in lst)
            for port, ser0 in ((pu, ser_u), (pv, ser_v)):
                port.set_rate(rate)
                top = net._max_rate.get(port.dst_node, 0.0)
                port.set_store_forward(ser0 or (port.dst_node in net.switches and rate < top))
        else:
            for port, ser0 in ((pu, ser_u), (pv, ser_v)):
                port.set_rate(rate0)
                port.set_store_forward(ser0)
            del self._orig[key]

    # ---- accounting -----------------------------------------------------------------------
    def _on_lost(self, port: Port, pkt: Packet) -> None:
        """A port lost a packet on its wire (link down): credit the faults on that link."""
        active = self._active.get(frozenset((port.src_node, port.dst_node)), ())
        if active:
            self.lost_pkts += 1
            self.lost_bytes += pkt.size
        for rec in active:
            self._credit(rec, pkt)

    def _lose(self, port: Port, pkt: Packet, rec: FaultRecord) -> None:
        """A frame lost to bit errors: counted on the port like a link-down loss."""
        port.count_lost(pkt)
        self.lost_pkts += 1
        self.lost_bytes += pkt.size
        self._credit(rec, pkt)

    def _credit(self, rec: FaultRecord, pkt: Packet) -> None:
        rec.lost_pkts += 1
        rec.lost_bytes += pkt.size
        if pkt.kind != DATA:
            return
        now = self.env._now
        h = rec.flows.get(pkt.flow)
        if h is None:
            h = FlowHit(now, now)
            rec.flows[pkt.flow] = h
            if self.watch is not None:
                self.watch.hit(h, pkt.flow)
        h.last_loss_s = now
        h.lost_pkts += 1
        h.lost_bytes += pkt.size

    def _held(self) -> list[Packet]:
        return [pkt for em in self._all_errors for pkt in em.held()]

    # ---- results --------------------------------------------------------------------------
    def table(self) -> pd.DataFrame:
        """One row per fault: what, where, when, what it cost (see :class:`FaultRecord`)."""
        import pandas as pd

        rows = []
        for r in self.records:
            f = r.fault
            rows.append(
                {
                    "fault": r.index,
                    "kind": f.kind,
                    "target": f.target(),
                    "links": len(r.links),
                    "at_s": f.at,
                    "until_s": math.nan if f.until is None else f.until,
                    "started_s": r.started_s,
                    "ended_s": r.ended_s,
                    "rerouted_s": r.rerouted_s,
                    "restored_route_s": r.restored_route_s,
                    "lost_pkts": r.lost_pkts,
                    "lost_bytes": r.lost_bytes,
                    "corrupted_frames": r.corrupted,
                    "llr_replays": r.llr_replays,
                    "llr_given_up": r.llr_given_up,
                    "llr_delay_s": r.llr_delay_s,
                    "flows_hit": len(r.flows),
                    "max_stall_s": r.max_stall_s(),
                    "recovery_s": r.recovery_s(),
                }
            )
        return pd.DataFrame(rows)

    def flow_table(self) -> pd.DataFrame:
        """One row per (fault, flow) that lost packets on the fault's links."""
        import pandas as pd

        rows = [
            {
                "fault": r.index,
                "flow": flow,
                "lost_pkts": h.lost_pkts,
                "lost_bytes": h.lost_bytes,
                "first_loss_s": h.first_loss_s,
                "last_loss_s": h.last_loss_s,
                "stall_s": h.stall_s,
                "stall_end_s": h.stall_end_s,
            }
            for r in self.records
            for flow, h in sorted(r.flows.items())
        ]
        cols = ["fault", "flow", "lost_pkts", "lost_bytes", "first_loss_s", "last_loss_s",
                "stall_s", "stall_end_s"]  # fmt: skip
        return pd.DataFrame(rows, columns=cols)

    def summary(self) -> dict[str, Any]:
        """Totals over all faults (JSON-friendly); a packet lost while several faults were in
        effect on its link counts once here (each fault's row in :meth:`table` counts it)."""
        return {
            "faults": len(self.records),
            "lost_pkts": self.lost_pkts,
            "lost_bytes": self.lost_bytes,
            "corrupted_frames": sum(r.corrupted for r in self.records),
            "llr_replays": sum(r.llr_replays for r in self.records),
            "llr_given_up": sum(r.llr_given_up for r in self.records),
            "flows_hit": len({f for r in self.records for f in r.flows}),
            "max_stall_s": max((r.max_stall_s() for r in self.records), default=0.0),
            "reconvergence_s": self.reconvergence_s,
        }
