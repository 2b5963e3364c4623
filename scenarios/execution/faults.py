"""Faults of a run, from the scenario's ``faults:`` list, and the packet engine's invariant
checks (``sim.checks``).

Where faults live: the fault descriptions and their packet-level models are
:mod:`podsim.fabric.faults`; the flow engine's fluid models of the same descriptions (capacity
changes) are :mod:`podsim.fabric.flow.faults`; this module is the one translation of a scenario's
``faults:`` entries into those descriptions (:func:`fabric_faults`, used by every engine) and the
packet engine's fault session. Which kinds an engine models is its declaration
(:class:`podsim.scenarios.engines.Engine`).

* :func:`build_injector` turns the validated ``faults:`` entries (``link_down``,
  ``link_degrade``, ``ber``, ``switch_down``, ``nic_down``; ``straggler`` acts on compute in
  :func:`scenarios.build.cluster.compute_table`) into a :class:`fabric.faults.FaultInjector` on the
  run's network, with ``cluster.routing.reconvergence`` as the static-ECMP reconvergence delay.
  A fault naming a link or node the packet network does not have is a
  :class:`podsim.scenarios.errors.ScenarioError` at ``faults[i].link`` / ``faults[i].node``.
* :class:`RdmaEndpoints` adapts the SmartNIC transport (:class:`podsim.nic.nic.RdmaNetwork`) to the
  invariant checker; :class:`podsim.fabric.invariants.HostEndpoints` adapts the line-rate hosts.
* :class:`FaultSession` is what the packet engine holds for one run: it applies the faults,
  runs the invariant checks at the timeline's progress points (at most every
  :data:`CHECK_EVERY_EVENTS` events) and at the end, and returns the fault record, the failed
  messages with their reasons and the check count for the summary (:meth:`FaultSession.finish`).
  A violated invariant raises :class:`fabric.invariants.InvariantViolation` and the run stops.
  :attr:`FaultSession.outcomes` then maps every trace row the transport did not complete to
  (``failed`` | ``unfinished``, reason) for the messages table's ``status`` and ``reason``.

The engine adapter needs three lines::

    session = FaultSession(ctx, transport)          # after building the transport
    progress = session.wrap_progress(ctx.progress)  # give this to run_timeline
    extra.update(session.finish(tl.status))         # after the timeline returned
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from podsim.fabric.faults import (
    Fault,
    FaultError,
    FaultInjector,
    LinkBer,
    LinkDegrade,
    LinkDown,
    NicDown,
    SwitchDown,
)
from podsim.fabric.invariants import Checker, HostEndpoints, explain_unfinished, is_failure
from podsim.fabric.topology import SCALEOUT_SWITCH_ROLES
from podsim.fabric.units import fmt_rate
from podsim.scenarios.errors import ScenarioError

if TYPE_CHECKING:
    import networkx as nx
    from podsim.fabric.network import Network
    from podsim.scenarios.engines import RunContext
    from podsim.scenarios.input.schema import Scenario

__all__ = [
    "CHECK_EVERY_EVENTS",
    "FaultSession",
    "RdmaEndpoints",
    "ScaleUpFaults",
    "build_injector",
    "check_scaleup_isolation",
    "check_targets",
    "check_termination",
    "fabric_faults",
    "scaleup_targets",
]

#: invariant checks run at progress points, at most once per this many simulated events
CHECK_EVERY_EVENTS = 200_000


def fabric_faults(
    sc: Scenario, graph: nx.Graph | None = None, *, scaleup_ok: bool = False
) -> list[tuple[int, Fault]]:
    """(index in ``faults:``, fabric fault) for every fault the packet network acts on.

    With the cluster's ``graph``, links and nodes are checked against it. Scale-up links and
    switches may be targeted by ``link_down``, ``link_degrade`` and ``switch_down`` on every
    engine (capacity changes of the scale-up domain: :func:`scaleup_targets`); ``ber`` on a
    scale-up link is refused. ``scaleup_ok`` is kept for callers that pass it."""
    out: list[tuple[int, Fault]] = []
    g = graph
    for i, f in enumerate(sc.faults):
        kind = f.kind
        if kind == "straggler":
            continue
        span = {"at": f.at, "until": f.until}
        try:
            if kind == "link_down":
                ff: Fault = LinkDown(link=tuple(f.link), **span)
            elif kind == "link_degrade":
                ff = LinkDegrade(link=tuple(f.link), rate_bps=f.rate, **span)
            elif kind == "ber":
                ff = LinkBer(
                    link=tuple(f.link),
                    pre_fec_ber=f.pre_fec_ber,
                    llr=f.llr,
                    burst_len=f.burst_len,
                    llr_max_replays=f.llr_max_replays,
                    **span,
                )
            elif kind == "switch_down":
                ff = SwitchDown(node=f.node, **span)
            elif kind == "nic_down":
                ff = NicDown(node=f.node, **span)
            else:  # pragma: no cover - the schema's discriminator lists every kind
                raise ScenarioError(f"unknown fault kind {kind!r}.", path=f"faults[{i}].kind")
        except FaultError as exc:
            raise ScenarioError(f"{exc}.", path=f"faults[{i}]") from None
        if g is not None:
            _check_target(i, ff, g, scaleup_ok)
        out.append((i, ff))
    return out


def check_targets(sc: Scenario, graph: nx.Graph, *, scaleup_ok: bool = False) -> None:
    """Raise a ScenarioError at ``faults[i]...`` for a fault naming a link or node the cluster
    does not have, or that cut a GPU off its scale-up domain for good (what ``podsim validate``
    checks without running)."""
    fabric_faults(sc, graph, scaleup_ok=scaleup_ok)
    check_scaleup_isolation(sc, graph)


def scaleup_targets(f: Fault, g: nx.Graph) -> list[tuple[str, str]]:
    """The scale-up links (gpu node, switch) fault ``f`` acts on in ``g``: its link if that is
    a scale-up link, every link of a scale-up switch it takes down; [] for scale-out faults."""
    link = getattr(f, "link", None)
    if link is not None:
        u, v = link
        if g.has_edge(u, v) and g.edges[u, v].get("kind") == "scaleup":
            return [(u, v) if g.nodes[u].get("role") == "gpu" else (v, u)]
        return []
    node = getattr(f, "node", None)
    if isinstance(f, SwitchDown) and node in g and g.nodes[node].get("role") == "scaleup":
        return [(gpu, node) for gpu in sorted(g.neighbors(node))]
    return []


def check_scaleup_isolation(sc: Scenario, graph: nx.Graph) -> None:
    """Refuse faults without ``until`` that leave a GPU with no scale-up link for good: its
    scale-up transfers would wait forever. The error names the last such fault and the GPU."""
    cut: dict[str, int] = {}
    for i, f in fabric_faults(sc, graph):
        if f.until is None and isinstance(f, LinkDown | SwitchDown):
            for gpu, sw in scaleup_targets(f, graph):
                cut.setdefault(f"{gpu}|{sw}", i)
    if not cut:
        return
    down: dict[str, list[int]] = {}
    for key, i in cut.items():
        gpu = key.split("|")[0]
        down.setdefault(gpu, []).append(i)
    for gpu, idx in down.items():
        if len(idx) >= graph.degree(gpu):
            raise ScenarioError(
                f"faults without 'until' take down every scale-up link of {gpu!r} for good; its "
                "scale-up transfers could never finish. Give the fault an 'until' or leave "
                "the GPU a link.",
                path=f"faults[{max(idx)}]",
            )


class ScaleUpFaults:
    """The scenario's scale-up faults acting on the packet engine's scale-up pipes
    (:class:`podsim.fabric.scaleup.ScaleUpPipes`): at ``at`` each targeted link runs at 0
    (``link_down``, ``switch_down`` of a scale-up switch) or at the degraded rate
    (``link_degrade``), at ``until`` it returns to its nominal rate. Overlapping faults on one
    link: the lowest active rate holds. ``records`` lists what was applied, for the summary."""

    def __init__(self, env: Any, pipes: Any, faults: list[tuple[int, Fault]], graph: nx.Graph):
        from podsim.fabric.kernel import call_at

        self.pipes = pipes
        self.records: list[dict[str, Any]] = []
        self._active: dict[tuple[str, str], dict[int, float]] = {}
        for i, f in faults:
            links = scaleup_targets(f, graph)
            if not links:
                continue
            rate = float(f.rate_bps) if isinstance(f, LinkDegrade) else 0.0
            for link in links:
                call_at(env, float(f.at), self._start, (i, link, rate))
                if f.until is not None:
                    call_at(env, float(f.until), self._end, (i, link))
            self.records.append({"fault": i, "kind": f.kind, "target": f.target(),
                                 "links": len(links), "rate_bps": rate, "at_s": f.at,
                                 "until_s": f.until})  # fmt: skip

    def _apply(self, link: tuple[str, str]) -> None:
        nominal = self.pipes.nominal[link]
        active = self._active.get(link, {})
        self.pipes.set_link_rate(*link, min([nominal, *active.values()]))

    def _start(self, arg: tuple[int, tuple[str, str], float]) -> None:
        i, link, rate = arg
        self._active.setdefault(link, {})[i] = rate
        self._apply(link)

    def _end(self, arg: tuple[int, tuple[str, str]]) -> None:
        i, link = arg
        self._active.get(link, {}).pop(i, None)
        self._apply(link)


def _check_target(i: int, f: Fault, g: nx.Graph, scaleup_ok: bool = False) -> None:
    link = getattr(f, "link", None)
    if link is not None:
        u, v = link
        if not g.has_edge(u, v):
            near = sorted(g.neighbors(u))[:6] if u in g else []
            hint = f"; {u!r} links to {near}" if near else f"; {u!r} is not a node"
            raise ScenarioError(f"no link {u!r}-{v!r} in the cluster{hint}.",
                                path=f"faults[{i}].link")  # fmt: skip
        if g.edges[u, v].get("kind") == "scaleup" and isinstance(f, LinkBer):
            raise ScenarioError(
                f"{u!r}-{v!r} is a scale-up link; bit errors are modelled on scale-out links "
                "only (the scale-up domain is a fluid pipe): use link_down or link_degrade.",
                path=f"faults[{i}].link",
            )
        nominal = float(g.edges[u, v].get("rate_bps", math.inf))
        if isinstance(f, LinkDegrade) and f.rate_bps > nominal:
            # a "degraded" link faster than its PHY would speed the fabric up unnoticed
            raise ScenarioError(
                f"link_degrade rate {fmt_rate(f.rate_bps)} is above the {fmt_rate(nominal)} of "
                f"link {u!r}-{v!r}; a degraded link runs slower (e.g. 300Gbps for a 400G link "
                "that lost a lane).",
                path=f"faults[{i}].rate",
            )
        return
    node = f.node  # type: ignore[attr-defined]
    role = g.nodes[node].get("role") if node in g else None
    if isinstance(f, NicDown) and role != "nic":
        eg = next((n for n, r in g.nodes(data="role") if r == "nic"), "nic0.p0")
        raise ScenarioError(f"{node!r} is not a NIC port of the cluster (e.g. {eg!r}).",
                            path=f"faults[{i}].node")  # fmt: skip
    if isinstance(f, SwitchDown) and role not in (*SCALEOUT_SWITCH_ROLES, "scaleup"):
        raise ScenarioError(f"{node!r} is not a switch of the cluster.", path=f"faults[{i}].node")


def build_injector(sc: Scenario, network: Network, *, watch_flows: bool = True) -> FaultInjector:
    """The run's :class:`FaultInjector` (reconvergence delay from ``cluster.routing``)."""
    inj = FaultInjector(
        network,
        reconvergence_s=sc.cluster.routing.reconvergence,
        seed=sc.seed,
        watch_flows=watch_flows,
    )
    for i, f in fabric_faults(sc, network.graph):
        if scaleup_targets(f, network.graph):
            continue  # the scale-up domain's faults act on its pipes (ScaleUpFaults)
        try:
            inj.add(f)
        except FaultError as exc:
            raise ScenarioError(f"{exc}.", path=f"faults[{i}]") from None
    return inj


def check_termination(sc: Scenario, graph: nx.Graph, trace: Any, rank_ports: Any) -> None:
    """Refuse a run that could never end: with the NIC transport retransmitting forever
    (``cluster.nic.retry_limit: null``) and no ``sim.time_limit``, faults without ``until``
    must not cut a pair of NIC ports that the trace's ``rdma`` messages connect. The error
    names the first such fault and pair and suggests ``until``, ``sim.time_limit`` or a
    retry limit. With a retry limit (the default, 7) the transport gives up on an unreachable
    destination and its messages fail with "retry limit exceeded": such runs are allowed."""
    if sc.sim.endpoint != "nic" or sc.sim.time_limit is not None:
        return
    if sc.cluster.nic.retry_limit is not None:
        return
    permanent = [(i, f) for i, f in fabric_faults(sc, graph) if f.until is None
                 and isinstance(f, LinkDown | SwitchDown | NicDown)]  # fmt: skip
    if not permanent:
        return
    import networkx as nx

    rows = trace[trace["hop"] == "rdma"][["src_rank", "dst_rank"]].drop_duplicates()
    pairs = [(int(a), int(b)) for a, b in rows.itertuples(index=False) if a != b]
    live = graph.edge_subgraph(
        [(u, v) for u, v, d in graph.edges(data=True) if d.get("kind", "scaleout") != "scaleup"]
    ).copy()
    for i, f in permanent:
        if isinstance(f, LinkDown):
            if live.has_edge(*f.link):
                live.remove_edge(*f.link)
        elif f.node in live:  # type: ignore[attr-defined]
            live.remove_node(f.node)  # type: ignore[attr-defined]
        comp = {n: k for k, c in enumerate(nx.connected_components(live)) for n in c}
        for a, b in pairs:
            pa, pb = rank_ports[a], rank_ports[b]
            if set(pa) & set(pb):
                continue  # the same NIC port: no network transfer
            ok = any(
                x in comp and y in comp and comp[x] == comp[y] for x, y in zip(pa, pb, strict=False)
            )
            if not ok:
                raise ScenarioError(
                    f"{f.kind} {f.target()} (no 'until') cuts rank {a} ({pa[0]}) off from rank "
                    f"{b} ({pb[0]}) for good; the NIC transport would retransmit forever "
                    "(cluster.nic.retry_limit is null). Give the fault an 'until', set "
                    "sim.time_limit, or set a retry limit.",
                    path=f"faults[{i}]",
                )


# --------------------------------------------------------------------------- NIC adapter


class RdmaEndpoints:
    """:class:`podsim.fabric.invariants.Endpoints` adapter for :class:`podsim.nic.nic.RdmaNetwork`.

    Counts payload bytes of DATA packets per QP (``tx_bytes`` sent with retransmissions,
    ``rx.rx_bytes`` received with duplicates), and every message's completions (through
    ``rdma.on_done``) to catch a message completed twice. The transport retransmits, so an
    unfinished message is explained by its QP exceeding the retry limit (the message's
    ``error``, with the unreachable destination behind it when that is the cause), the run
    stopping early, or an unreachable destination (``injector`` names the faults that cut it
    off)."""

    def __init__(
        self, rdma: Any, *, injector: FaultInjector | None = None, name: str = "nic transport"
    ) -> None:
        self.rdma = rdma
        self.network = rdma.network
        self.injector = injector
        self.name = name
        self._done: dict[int, int] = {}
        self._repeats = 0  # completions after a message's first
        # bytes posted per QP, over rdma.messages[: self._counted] (the list only grows):
        # each check adds the messages posted since the last one
        self._posted: dict[int, int] = {}
        self._counted = 0
        rdma.on_done.append(self._count)

    def _count(self, msg: Any) -> None:
        n = self._done.get(msg.id, 0) + 1
        self._done[msg.id] = n
        if n > 1:
            self._repeats += 1

    def sent_bytes(self) -> int:
        return sum(q.tx_bytes for q in self.rdma._qp_list)

    def received_bytes(self) -> int:
        return sum(q.rx.rx_bytes for q in self.rdma._qp_list)

    def pending_bytes(self) -> int:
        return 0  # the receive pipeline's deferred packets are found on the event heap

    def duplicates(self) -> list[str]:
        out = (
            [f"message {mid} completed {n} times" for mid, n in self._done.items() if n > 1]
            if self._repeats
            else []
        )
        posted = self._posted
        messages = self.rdma.messages
        for m in messages[self._counted :]:
            posted[m.qp.id] = posted.get(m.qp.id, 0) + m.size
        self._counted = len(messages)
        for q in self.rdma._qp_list:
            got = q.rx.rel.delivered_bytes
            if got > posted.get(q.id, 0):
                out.append(f"QP {q.id}: {got} B delivered in order of {posted.get(q.id, 0)} posted")
        return out

    def unfinished(self, status: str) -> list[tuple[str, str | None]]:
        return [(label, reason) for _m, label, reason in self.unfinished_items(status)]

    def unfinished_items(self, status: str) -> list[tuple[Any, str, str | None]]:
        """(nic message, label, reason) of every message that did not complete."""
        out: list[tuple[Any, str, str | None]] = []
        for m in self.rdma.messages:
            if not math.isnan(m.done_s):
                continue
            q = m.qp
            reason = explain_unfinished(
                self.network,
                q.nic.eids[0],
                q.dst_nic.eids[0],
                missing_bytes=m.size,
                status=status,
                retransmits=True,
                injector=self.injector,
            )
            error = getattr(m, "error", None)
            if error:  # the transport gave up; say why it could not get through, if known
                reason = error + (f"; {reason}" if reason and is_failure(reason) else "")
            label = f"message {m.id} nic{q.nic.card}->nic{q.dst_nic.card} ({m.size} B)"
            out.append((m, label, reason))
        return out


# --------------------------------------------------------------------------- session


class FaultSession:
    """Faults and invariant checks of one packet-engine run (see the module docstring).

    ``transport`` is the engine's transport: it has ``net`` (the Network) and either ``rdma``
    (SmartNICs) or ``hosts`` (name -> podsim.fabric.host.Host)."""

    def __init__(self, ctx: RunContext, transport: Any, *, check_every: int = CHECK_EVERY_EVENTS):
        sc = ctx.scenario
        net = transport.net
        self.network = net
        has_faults = any(f.kind != "straggler" for f in sc.faults)
        if has_faults:
            cl = ctx.cluster
            check_termination(sc, cl.graph, ctx.trace, cl.rank_ports)
        self.injector = build_injector(sc, net) if has_faults else None
        pipes = getattr(transport, "scaleup", None)
        self.scaleup_faults = (
            ScaleUpFaults(net.env, pipes, fabric_faults(sc), ctx.cluster.graph)
            if has_faults and pipes is not None
            else None
        )
        rdma = getattr(transport, "rdma", None)
        if rdma is not None:
            self.endpoints: Any = RdmaEndpoints(rdma, injector=self.injector)
        else:
            hosts = list(getattr(transport, "hosts", {}).values())
            self.endpoints = HostEndpoints(net, hosts, injector=self.injector)
        self._transport = transport
        #: trace row -> (status "failed" | "unfinished", reason), filled by :meth:`finish`
        self.outcomes: dict[int, tuple[str, str]] = {}
        self.checker = Checker(net, endpoints=[self.endpoints]) if sc.sim.checks else None
        self.check_every = check_every
        self._last_check = 0

    def wrap_progress(
        self, progress: Callable[[float, int | None], None]
    ) -> Callable[[float, int | None], None]:
        """A progress callback that also runs the checks (at most every ``check_every``
        events)."""
        if self.checker is None:
            return progress
        checker = self.checker

        def tick(t: float, events: int | None) -> None:
            if events is None or events - self._last_check >= self.check_every:
                self._last_check = events or 0
                checker.check_all()
            progress(t, events)

        return tick

    def finish(self, status: str) -> dict[str, Any]:
        """The final checks (raise on a violation) and the summary entries of the run."""
        extra: dict[str, Any] = {}
        if self.checker is not None:
            self.checker.check_all(final=True, status=status)
            extra["invariant_checks"] = self.checker.checks_run
        else:
            extra["invariant_checks"] = "off"
        # host messages -> trace rows (NIC messages carry their trace row as ``tag``)
        rows = {id(m): msg for msg, _a, _b, m in getattr(self._transport, "records", ())}
        failed = []
        for m, label, reason in self.endpoints.unfinished_items(status):
            if not reason:
                continue  # only possible with the checks off (else check_messages raised)
            state = "failed" if is_failure(reason) else "unfinished"
            failed.append({"message": label, "status": state, "reason": reason})
            row = getattr(m, "tag", None)
            row = rows.get(id(m)) if row is None else row
            if row is not None:
                self.outcomes[int(row)] = (state, reason)
        if failed:
            extra["failed_messages"] = failed
        if self.injector is not None:
            inj = self.injector
            extra["faults"] = _records(inj)
            extra["fault_summary"] = inj.summary()
        if self.scaleup_faults is not None and self.scaleup_faults.records:
            extra["scaleup_faults"] = self.scaleup_faults.records
        return extra


def _records(inj: FaultInjector) -> list[dict[str, Any]]:
    """The fault table as JSON-friendly rows (NaN -> None)."""

    def plain(v: Any) -> Any:
        v = v.item() if hasattr(v, "item") else v  # numpy scalars -> Python
        return None if isinstance(v, float) and math.isnan(v) else v

    return [{k: plain(v) for k, v in r.items()} for r in inj.table().to_dict(orient="records")]
