"""Invariant checks that keep a packet-level run honest.

A :class:`Checker` verifies, from the fabric's own counters and an independent scan of the
queues and the event heap (no per-packet bookkeeping on the hot path):

``time``          simulated time never goes backward: ``env.now`` never decreases between
                  checks and no pending event is scheduled before ``now``
                  (:func:`run_checked` also checks every single event);
``queues``        no negative queue: every port's ``qbytes`` is >= 0 and equals the wire bytes
                  of the packets in it; every switch's shared-buffer use is >= 0 and equals the
                  sum of its queues and of its per-ingress (PFC) accounting;
``links``         packets and wire bytes are conserved over every link and switch: what the
                  links into a switch delivered (transmitted, minus lost on the wire, minus
                  still on the wire or held for a link-level retry) equals what the switch
                  transmitted, holds in its queues, dropped, or could not route;
``delivery``      no packet is delivered twice to the application (endpoint adapters report
                  messages whose delivered bytes exceed their size or that completed twice);
``end_to_end``    payload bytes the endpoints sent = bytes they received + bytes dropped in
                  the fabric + bytes in flight (queues, wires, retry buffers, endpoint receive
                  pipelines);
``messages``      at the end of a run every message completed or is reported failed with a
                  reason (a time limit, an unreachable destination, packets lost on a failed
                  link by an endpoint that does not retransmit, ...).

A violation raises :class:`InvariantViolation` with a report naming the check, the time and
the offending ports/switches/messages; it is never only logged. The checks cost
O(ports + pending events + queued packets), so a runner calls :meth:`Checker.check_all` at its
sample or progress points and at the end (``final=True``), not per event. ``--no-checks``
simply does not build a checker.

Endpoints are seen through small adapters (:class:`Endpoints` protocol);
:class:`HostEndpoints` adapts :class:`podsim.fabric.host.Host`. Other packages (the NIC transport)
provide their own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from heapq import heappop
from itertools import pairwise
from typing import TYPE_CHECKING, Any, Protocol

import simpy
from podsim.fabric.kernel import Callback, StopRun, _crash, _noop
from podsim.fabric.packet import DATA, PAUSE, RESUME, Packet
from podsim.fabric.port import packets_on_wires

if TYPE_CHECKING:
    from podsim.fabric.faults import FaultInjector
    from podsim.fabric.host import Host
    from podsim.fabric.network import Network
    from podsim.fabric.port import Port

__all__ = [
    "CHECKS",
    "REASON_INTERRUPTED",
    "REASON_TIME_LIMIT",
    "Checker",
    "Endpoints",
    "HostEndpoints",
    "InvariantViolation",
    "explain_unfinished",
    "is_failure",
    "run_checked",
]

#: every check, in the order :meth:`Checker.check_all` runs them
CHECKS = ("time", "queues", "links", "delivery", "end_to_end", "messages")

_MAC = (PAUSE, RESUME)

#: reasons of a message left unfinished because the run stopped (not a failure of the message)
REASON_TIME_LIMIT = "time limit: the run stopped before it completed"
REASON_INTERRUPTED = "interrupted: the run stopped before it completed"
_FAILED_LINKS = ("link_down", "switch_down", "nic_down")
_MAX_LINES = 12


class InvariantViolation(RuntimeError):
    """A broken invariant: the run cannot be trusted and stops.

    ``check`` the invariant's name (:data:`CHECKS`), ``time_s`` simulated time, ``details``
    the offending items, one line each; ``str()`` is the whole report."""

    def __init__(self, check: str, time_s: float, summary: str, details: Sequence[str] = ()):
        self.check = check
        self.time_s = time_s
        self.summary = summary
        self.details = list(details)
        lines = [f"invariant {check!r} violated at t={time_s:.9g} s: {summary}"]
        shown = self.details[:_MAX_LINES]
        lines += [f"  - {d}" for d in shown]
        if len(self.details) > len(shown):
            lines.append(f"  ... and {len(self.details) - len(shown)} more")
        lines.append(
            "The simulation's results cannot be trusted; this is a model bug (or a fault-"
            "injected model), not bad input."
        )
        super().__init__("\n".join(lines))

    @property
    def report(self) -> str:
        return str(self)


class Endpoints(Protocol):
    """What the checker needs from the endpoints of a run (payload bytes of DATA packets).

    ``sent_bytes`` handed to the fabric (retransmissions included); ``received_bytes`` taken
    from the fabric (duplicates included); ``pending_bytes`` arrived but not yet counted by the
    endpoint; ``duplicates()`` one line per message delivered more than once to the
    application; ``unfinished(status)`` (message label, failure reason or None) for every
    message that did not complete. Adapters may also offer ``unfinished_items(status)``,
    the same as (message object, label, reason) triples, so that a caller can map reasons
    back to its own message ids."""

    name: str

    def sent_bytes(self) -> int: ...
    def received_bytes(self) -> int: ...
    def pending_bytes(self) -> int: ...
    def duplicates(self) -> list[str]: ...
    def unfinished(self, status: str) -> list[tuple[str, str | None]]: ...


# --------------------------------------------------------------------------- heap scan


def _scan(env: simpy.Environment, ports: Iterable[Port]) -> tuple[dict[int, list[int]], int]:
    """Per transmitting port (by id): [packets, wire bytes, DATA payload] on the wire now
    (``ports``: every port of the network); plus DATA payload bytes waiting in scheduled
    callbacks at an endpoint (a NIC's receive pipeline hands packets over later with a
    :class:`podsim.fabric.kernel.Callback`)."""
    wire: dict[int, list[int]] = {}
    at_endpoint = 0
    for pkt in packets_on_wires(env, ports):
        if pkt.kind in _MAC:
            continue
        w = wire.get(id(pkt.link))
        if w is None:
            w = wire[id(pkt.link)] = [0, 0, 0]
        w[0] += 1
        w[1] += pkt.wire
        if pkt.kind == DATA:
            w[2] += pkt.size
    for entry in env._queue:
        ev = entry[3]
        if isinstance(ev, Callback):
            arg = ev.arg
            if isinstance(arg, Packet) and arg.kind == DATA and ev.fn is not _noop:
                at_endpoint += arg.size
    return wire, at_endpoint


# --------------------------------------------------------------------------- checker


class Checker:
    """The invariants of one run (see the module docstring).

    ``network`` the packet fabric (None: only time and endpoint checks); ``env`` defaults to
    the network's; ``endpoints`` adapters (:class:`Endpoints`); ``skip`` names of checks not
    to run. ``checks_run`` counts calls of :meth:`check_all`.
    """

    def __init__(
        self,
        network: Network | None = None,
        *,
        env: simpy.Environment | None = None,
        endpoints: Iterable[Endpoints] = (),
        skip: Iterable[str] = (),
    ) -> None:
        if network is None and env is None:
            raise ValueError("Checker needs a network or an env")
        self.network = network
        self.env = env if env is not None else network.env  # type: ignore[union-attr]
        self.endpoints = list(endpoints)
        bad = sorted(set(skip) - set(CHECKS))
        if bad:
            raise ValueError(f"unknown invariant check(s) {bad}; checks are {list(CHECKS)}")
        self.skip = frozenset(skip)
        self._last_now = self.env.now
        self.checks_run = 0

    # ---- the checks -----------------------------------------------------------------------
    def check_all(self, *, final: bool = False, status: str = "complete") -> None:
        """Run every check (``messages`` only when ``final``); raise on the first violation.

        ``status`` is the run's end state (``complete``, ``time-limit``, ``stalled``,
        ``interrupted``), passed to the endpoints to explain unfinished messages."""
        self.checks_run += 1
        skip = self.skip
        if "time" not in skip:
            self.check_time()
        if self.network is not None:
            if "queues" not in skip:
                self.check_queues()
            wire, at_ep = _scan(self.env, self.network.ports)
            if "links" not in skip:
                self.check_links(wire)
        if "delivery" not in skip:
            self.check_delivery()
        if self.network is not None and "end_to_end" not in skip and self.endpoints:
            self.check_end_to_end(at_ep)
        if final and "messages" not in skip:
            self.check_messages(status)

    def _fail(self, check: str, summary: str, details: Sequence[str] = ()) -> None:
        raise InvariantViolation(check, self.env.now, summary, details)

    def check_time(self) -> None:
        """``now`` never decreases; nothing pending is scheduled in the past."""
        env = self.env
        now = env.now
        if now < self._last_now:
            self._fail("time", f"time went backward from {self._last_now!r} s to {now!r} s")
        q = env._queue
        if q and q[0][0] < now:
            ev = q[0][3]
            self._fail(
                "time",
                f"an event is scheduled at {q[0][0]!r} s, before now ({now!r} s)",
                [f"event {ev!r}"],
            )
        self._last_now = now

    def check_queues(self) -> None:
        """Queue and buffer accounting is exact and never negative."""
        net = self.network
        assert net is not None
        bad: list[str] = []
        for p in net.ports:
            queued = sum(pkt.wire for pkt in p.queued())
            if p.qbytes < 0 or p.qbytes != queued:
                bad.append(f"port {p.name}: qbytes={p.qbytes}, packets queued hold {queued} B")
        into: dict[str, int] = {}
        for name, sw in net.switches.items():
            for ing in sw.ingresses.values():
                if ing.rx_bytes < 0:
                    bad.append(
                        f"switch {name}: ingress accounting of {ing.port.name} "
                        f"rx_bytes={ing.rx_bytes} < 0"
                    )
                into[name] = into.get(name, 0) + ing.rx_bytes
        for name, sw in net.switches.items():
            qsum = sum(p.qbytes for p in sw.ports)
            # with pfc.hold_until_sent the ingress counts also hold the frames being sent
            if sw.used < 0 or sw.used != qsum or sw.used + sw.held_bytes != into.get(name, 0):
                bad.append(
                    f"switch {name}: buffer used={sw.used} B, its queues hold {qsum} B, "
                    f"frames being sent {sw.held_bytes} B, its ingress accounting "
                    f"{into.get(name, 0)} B"
                )
        if bad:
            self._fail("queues", "a queue or buffer count is negative or wrong", bad)

    def check_links(self, wire: dict[int, list[int]] | None = None) -> None:
        """Every switch forwards, holds or drops exactly what its links delivered to it."""
        net = self.network
        assert net is not None
        if wire is None:
            wire = _scan(self.env, net.ports)[0]
        held: dict[int, list[int]] = {}
        for pkt in net.held_packets():
            h = held.setdefault(id(pkt.link), [0, 0])
            h[0] += 1
            h[1] += pkt.wire
        zero = (0, 0, 0)
        in_p: dict[str, int] = {}
        in_w: dict[str, int] = {}
        bad: list[str] = []
        for p in net.ports:
            w = wire.get(id(p), zero)
            h = held.get(id(p), zero)
            arrived = p.tx_pkts - p.lost_pkts - w[0] - h[0]
            arrived_w = p.tx_bytes - p.mac_bytes - p.lost_wire - w[1] - h[1]
            if arrived < 0 or arrived_w < 0:
                bad.append(
                    f"link {p.name}: transmitted {p.tx_pkts} packets, lost {p.lost_pkts}, "
                    f"{w[0] + h[0]} still on it: {arrived} arrived"
                )
            d = p.dst_node
            in_p[d] = in_p.get(d, 0) + arrived
            in_w[d] = in_w.get(d, 0) + arrived_w
        for name, sw in net.switches.items():
            out_p = sw.noroute_drops
            out_w = sw.noroute_wire
            for q in sw.ports:
                out_p += q.tx_pkts + q.queued_packets + (q.drops - q.lost_pkts)
                out_w += q.tx_bytes - q.mac_bytes + q.qbytes + (q.drop_wire - q.lost_wire)
            if in_p.get(name, 0) != out_p or in_w.get(name, 0) != out_w:
                bad.append(
                    f"switch {name}: its links delivered {in_p.get(name, 0)} packets "
                    f"({in_w.get(name, 0)} wire B) but it sent, holds or dropped {out_p} "
                    f"({out_w} wire B)"
                )
        if bad:
            self._fail("links", "packets or bytes appeared or vanished on a link", bad)

    def check_end_to_end(self, at_endpoint: int | None = None) -> None:
        """sent = received + dropped + in flight (payload bytes of DATA packets)."""
        net = self.network
        assert net is not None
        if at_endpoint is None:
            at_endpoint = _scan(self.env, net.ports)[1]
        sent = sum(e.sent_bytes() for e in self.endpoints)
        rcvd = sum(e.received_bytes() for e in self.endpoints)
        pend = sum(e.pending_bytes() for e in self.endpoints) + at_endpoint
        dropped = net.dropped_bytes()
        flying = net.bytes_in_flight(DATA)
        if sent != rcvd + dropped + flying + pend:
            self._fail(
                "end_to_end",
                f"bytes not conserved: sent {sent} != received {rcvd} + dropped {dropped} + "
                f"in flight {flying} + awaiting the receiver {pend} "
                f"(difference {sent - rcvd - dropped - flying - pend:+d} B)",
                [f"{e.name}: sent {e.sent_bytes()}, received {e.received_bytes()}"
                 for e in self.endpoints],
            )  # fmt: skip

    def check_delivery(self) -> None:
        """No message got more bytes (or completions) than it has."""
        bad = [line for e in self.endpoints for line in e.duplicates()]
        if bad:
            self._fail("delivery", "data was delivered twice to the application", bad)

    def check_messages(self, status: str = "complete") -> None:
        """Every message completed, or failed with a reason."""
        bad = [
            f"{e.name} {label}"
            for e in self.endpoints
            for label, reason in e.unfinished(status)
            if not reason
        ]
        if bad:
            self._fail(
                "messages",
                f"{len(bad)} message(s) neither completed nor failed with a reason "
                f"(run status {status!r})",
                bad,
            )

    def failures(self, status: str = "complete") -> list[tuple[str, str, str]]:
        """(endpoint set, message, reason) of every message that failed with a reason."""
        return [
            (e.name, label, reason)
            for e in self.endpoints
            for label, reason in e.unfinished(status)
            if reason
        ]


# --------------------------------------------------------------------------- reasons


def explain_unfinished(
    network: Network,
    src: int,
    dst: int,
    *,
    missing_bytes: int,
    status: str,
    retransmits: bool,
    flow: int | None = None,
    injector: FaultInjector | None = None,
) -> str | None:
    """Why a message from endpoint ``src`` to ``dst`` (ids) did not complete, or None when
    nothing known explains it (which the ``messages`` check reports as a violation).

    Reasons, first match: no working route from src to dst now (every routed path crosses a
    link that is down, or routing has none; naming the link, switch and NIC faults in force
    when ``injector`` is given); the run stopped early (``status``
    ``time-limit``/``interrupted``: :data:`REASON_TIME_LIMIT`, :data:`REASON_INTERRUPTED`, which
    :func:`is_failure` tells apart from failures); the message's flow lost packets on a faulted
    link and the endpoint does not retransmit; the fabric dropped at least the missing bytes and
    the endpoint does not retransmit.
    """
    a, b = network.endpoints[src], network.endpoints[dst]
    paths = network.routing.paths(a, b)
    # a route is dead if a link on it is down, whether or not routing has reconverged yet
    live = [p for p in paths if all(network.port(u, v).up for u, v in pairwise(p))]
    if not live:
        down = []
        if injector is not None:
            down = [f"{r.fault.kind.replace('_', ' ')} {r.fault.target()}"
                    for r in injector.records
                    if r.fault.kind in _FAILED_LINKS and not math.isnan(r.started_s)
                    and math.isnan(r.ended_s)]  # fmt: skip
        why = f"after {', '.join(down)}" if down else "(failed links or switches)"
        return f"destination unreachable: no route from {a} to {b} {why}"
    if status == "time-limit":
        return REASON_TIME_LIMIT
    if status == "interrupted":
        return REASON_INTERRUPTED
    if not retransmits:
        if injector is not None and flow is not None:
            lost = [r for r in injector.records if flow in r.flows]
            if lost:
                where = ", ".join(f"{r.fault.kind} {r.fault.target()}" for r in lost)
                n = sum(r.flows[flow].lost_pkts for r in lost)
                return f"{n} packet(s) lost to {where}; the endpoint does not retransmit"
        if network.dropped_bytes() >= missing_bytes > 0:
            return (
                f"{missing_bytes} B lost in the fabric (drops: {network.dropped_packets()} "
                "packets); the endpoint does not retransmit"
            )
    return None


def is_failure(reason: str) -> bool:
    """True if ``reason`` (from :func:`explain_unfinished` or an endpoint) says the message
    failed, False if it only did not finish because the run stopped first."""
    return reason not in (REASON_TIME_LIMIT, REASON_INTERRUPTED)


class HostEndpoints:
    """:class:`Endpoints` adapter for :class:`fabric.host.Host` (line rate, no retransmission).

    ``injector`` (optional) lets unfinished messages be explained by the faults that hit them.
    """

    def __init__(
        self,
        network: Network,
        hosts: Iterable[Host],
        *,
        injector: FaultInjector | None = None,
        name: str = "hosts",
    ) -> None:
        self.network = network
        self.hosts = list(hosts)
        self.injector = injector
        self.name = name

    def sent_bytes(self) -> int:
        return sum(h.sent_bytes for h in self.hosts)

    def received_bytes(self) -> int:
        return sum(h.delivered_bytes for h in self.hosts)

    def pending_bytes(self) -> int:
        return 0

    def duplicates(self) -> list[str]:
        out = []
        for h in self.hosts:
            seen: set[int] = set()
            for m in h.received:
                if id(m) in seen:
                    out.append(f"message {m.id} of {m.src}->{m.dst} completed twice")
                seen.add(id(m))
            out.extend(
                f"message {m.id} {m.src}->{m.dst}: {m.rx_bytes} B delivered of {m.size}"
                for m in h.messages
                if m.rx_bytes > m.size
            )
        return out

    def unfinished(self, status: str) -> list[tuple[str, str | None]]:
        return [(label, reason) for _m, label, reason in self.unfinished_items(status)]

    def unfinished_items(self, status: str) -> list[tuple[Any, str, str | None]]:
        """(podsim.fabric.host message, label, reason) of every message that did not complete."""
        out: list[tuple[Any, str, str | None]] = []
        for h in self.hosts:
            for m in h.messages:
                if m.done:
                    continue
                if m.sent < m.size and status == "complete":
                    reason = None
                else:
                    reason = explain_unfinished(
                        self.network,
                        m.src,
                        m.dst,
                        missing_bytes=m.size - m.rx_bytes,
                        status=status,
                        retransmits=False,
                        flow=m.flow,
                        injector=self.injector,
                    )
                out.append((m, f"message {m.id} {m.src}->{m.dst} ({m.size} B)", reason))
        return out


# --------------------------------------------------------------------------- checked loop


def run_checked(
    env: simpy.Environment,
    until: float | None = None,
    checker: Checker | None = None,
    *,
    check_every: int = 200_000,
    stop: Callable[[], bool] | None = None,
) -> None:
    """:func:`podsim.fabric.kernel.run` with the ``time`` invariant checked on every event and
    ``checker.check_all()`` every ``check_every`` events (and once at the end).

    ``until`` as in :func:`fabric.kernel.run` (events at exactly ``until`` are left); ``stop``
    an optional predicate tested between events every ``check_every`` events. Costs one
    comparison per event over the plain loop. A :class:`podsim.fabric.kernel.StopRun` raised by
    a callback ends the run at once, as in :func:`fabric.kernel.run` (``env.now`` stays at
    that event's time).
    """
    limit = math.inf if until is None else float(until)
    if limit <= env._now:
        raise ValueError(f"until ({limit}) must be greater than the current simulation time")
    queue = env._queue
    pop = heappop
    n = 0
    now = env._now  # a local copy: callbacks never move the clock themselves
    try:  # a StopRun from a callback ends the run at once (as in fabric.kernel.run)
        while queue and queue[0][0] < limit:
            t, _, _, ev = pop(queue)
            if t < now:
                raise InvariantViolation(
                    "time",
                    now,
                    f"an event scheduled at {t!r} s ran after {now!r} s",
                    [f"event {ev!r}"],
                )
            env._now = now = t
            cbs = ev.callbacks
            ev.callbacks = None
            for cb in cbs:
                cb(ev)
            if not ev._ok and not hasattr(ev, "_defused"):
                _crash(ev)
            n += 1
            if n >= check_every:
                n = 0
                if checker is not None:
                    checker.check_all()
                if stop is not None and stop():
                    return
    except StopRun:
        if checker is not None:
            checker.check_all()
        return
    if limit < math.inf:
        env._now = limit
    if checker is not None:
        checker.check_all()


def port_report(ports: Iterable[Port]) -> list[dict[str, Any]]:
    """Counters of ``ports`` as dicts (for violation reports and debugging)."""
    return [
        {
            "port": p.name,
            "tx_pkts": p.tx_pkts,
            "tx_bytes": p.tx_bytes,
            "qbytes": p.qbytes,
            "drops": p.drops,
            "lost_pkts": p.lost_pkts,
        }
        for p in ports
    ]
