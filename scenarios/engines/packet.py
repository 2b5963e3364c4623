"""The ``packet`` engine: every packet through every queue (fabric + NIC transport).

Adapter between the scenario layer and the packet-level substrate. It builds a
:class:`fabric.network.Network` from the cluster graph and the scenario's switch settings, puts
an endpoint on every NIC port that a rank uses, and offers :func:`scenarios.timeline.run_timeline`
a transport that turns each trace message into a transfer:

- ``rdma`` messages go from the source rank's NIC port to the destination rank's port on the
  same plane (planes are separate fabrics; a rank with several ports spreads its messages over
  them round-robin by message id);
- ``scaleup`` messages use :class:`scenarios.engines.scaleup.ScaleUpPipes` (the scale-out
  packet engine does not carry them); between GPUs without a scale-up fabric they go ``rdma``;
- two ranks behind the same NIC port exchange data over PCIe inside the node: delivered at once
  until the PCIe model of ``nic`` is wired in (recorded in the summary).

Endpoints (``sim.endpoint``): ``nic`` (default) is the SmartNIC of :mod:`nic`
(:class:`nic.nic.RdmaNetwork`: QPs, congestion control, path selection, reliability, packet-rate
pipeline), configured from ``cluster.nic``; a message's phase bookkeeping completes when its
last byte is acknowledged, and its ``end_s`` in the messages table is when the receiver held
all its bytes. ``host`` is :class:`fabric.host.Host`, a line-rate sender with no congestion
control and no retransmission (``multipath.selector`` other than ``ecmp`` sprays per packet):
fast, for fabric-only studies; with it ``sim.cell`` above the MTU moves cells of that size
carrying the wire overhead of the MTU packets they stand for (fidelity knob, DESIGN.md). The
summary's ``engine_info.transport`` says which endpoint ran.

Queue depths of every port are sampled every ``sim.sample_interval``; the ``queues`` table keeps
the ports that ever queued, deepest first (at most 4 x ``outputs.hottest_ports``, >= 16).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import simpy

from scenarios.engines import ENGINES, EngineOutput, EngineUnavailable, RunContext
from scenarios.engines.scaleup import ScaleUpPipes
from scenarios.errors import ScenarioError
from scenarios.results import link_table, message_table
from scenarios.timeline import run_timeline

__all__ = ["run_packet"]


def _host_class() -> type:
    try:
        from fabric.host import Host
    except ImportError as exc:  # pragma: no cover - fabric.host is part of the tree
        raise EngineUnavailable(f"the packet engine needs fabric.host: {exc}") from None

    class NotifyingHost(Host):
        """A :class:`fabric.host.Host` that reports each completed message once."""

        def __init__(self, *args: Any, on_complete: Callable[[Any], None], **kw: Any) -> None:
            super().__init__(*args, **kw)
            self._on_complete = on_complete

        def receive(self, pkt: Any) -> None:
            m = pkt.meta
            before = m.rx_bytes
            super().receive(pkt)
            if before < m.size <= m.rx_bytes:
                self._on_complete(m)

    return NotifyingHost


class _Transport:
    """What both endpoints share: the network, scale-up pipes and the link counters."""

    name = ""

    def __init__(self, ctx: RunContext) -> None:
        from fabric.network import Network

        sc, cl = ctx.scenario, ctx.cluster
        self.env = simpy.Environment()
        self.cluster = cl
        self.net = Network(self.env, cl.graph, cl.switch, seed=sc.seed)
        self.scaleup = ScaleUpPipes(self.env, cl.graph)
        self.pcie_local = 0

    def _side_path(self, msg: int, src_rank: int, dst_rank: int, nbytes: int, hop: str,
                   on_done: Callable[[int], None]) -> bool:  # fmt: skip
        """Scale-up and same-NIC messages; True if handled here."""
        cl = self.cluster
        ga, gb = int(cl.rank_gpu[src_rank]), int(cl.rank_gpu[dst_rank])
        if hop == "scaleup" and self.scaleup.reaches(ga, gb):
            self.scaleup.send(ga, gb, nbytes, lambda _a: on_done(msg))
            return True
        if cl.rank_nic[src_rank] == cl.rank_nic[dst_rank]:
            self.pcie_local += 1
            on_done(msg)
            return True
        return False

    def link_counters(self) -> pd.DataFrame:
        pt = self.net.port_table()
        out = pd.DataFrame(
            {
                "link": pt["port"],
                "tx_bytes": pt["tx_bytes"],
                "tx_packets": pt["tx_pkts"],
                "drops": pt["drops"],
                "ecn_marks": pt["ecn_marks"],
                "pauses": pt["pauses_rcvd"],
                "max_queue_bytes": pt["max_qbytes"],
                "paused_s": pt["paused_s"],
            }
        )
        su = pd.DataFrame(self.scaleup.link_counters())
        return pd.concat([out, su], ignore_index=True) if len(su) else out

    def end_times(self, end_s: np.ndarray) -> np.ndarray:
        return end_s


def nic_config(ctx: RunContext) -> Any:
    """The scenario's ``cluster.nic`` as a :class:`nic.nic.NicConfig`."""
    from nic.nic import NicConfig

    n = ctx.scenario.cluster.nic
    cap = ctx.cluster.extra.get("pcie", {}).get("nic_dma_cap_bps")
    return NicConfig(
        mtu=n.mtu,
        reliability="sr" if n.reliability == "selective-repeat" else "gbn",
        ack_every=n.ack_coalesce,
        selector=n.multipath.selector,
        selector_params=dict(n.multipath.params),
        n_evs=n.multipath.paths,
        cc=n.cc.name,
        cc_params=dict(n.cc.params),
        allow_plugins=ctx.allow_plugins,
        pps=n.packet_rate,
        qpc_entries=n.qp_cache or None,
        qpc_miss_penalty_s=n.qp_miss_penalty,
        rto_min_s=n.rto,
        pcie_rate_cap_bps=cap if isinstance(cap, float | int) and cap > 0 else None,
    )


class NicTransport(_Transport):
    """The :class:`scenarios.timeline.Transport` over the SmartNICs of :mod:`nic`."""

    name = "nic.RdmaNetwork (SmartNIC: QPs, CC, multipath, reliability, packet-rate pipeline)"

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        try:
            from nic.nic import RdmaNetwork
        except ImportError as exc:
            raise EngineUnavailable(f"the SmartNIC transport is not installed: {exc}") from None
        from scenarios.build import at

        with at("cluster.nic", "NIC"):
            cfg = nic_config(ctx)
            cards = sorted({int(c) for c in ctx.cluster.rank_nic.tolist()})
            self.rdma = RdmaNetwork(self.net, cfg, seed=ctx.scenario.seed, cards=cards)
        self.rdma.on_done.append(self._complete)
        self._cb: dict[int, Callable[[int], None]] = {}

    def _complete(self, m: Any) -> None:
        self._cb.pop(m.id)(m.tag)

    def send(self, msg: int, src_rank: int, dst_rank: int, nbytes: int, hop: str,
             on_done: Callable[[int], None]) -> None:  # fmt: skip
        if self._side_path(msg, src_rank, dst_rank, nbytes, hop, on_done):
            return
        cl = self.cluster
        m = self.rdma.post(
            int(cl.rank_nic[src_rank]), int(cl.rank_nic[dst_rank]), int(nbytes), tag=msg
        )
        self._cb[m.id] = on_done

    def end_times(self, end_s: np.ndarray) -> np.ndarray:
        out = end_s.copy()
        for m in self.rdma.messages:
            if math.isfinite(m.t_delivered):
                out[int(m.tag)] = m.t_delivered
        return out

    def qp_table(self, trace: pd.DataFrame) -> pd.DataFrame:
        qt = self.rdma.qp_table()
        if qt.empty:
            return pd.DataFrame()
        mt = self.rdma.message_table()
        per = mt.groupby("qp").agg(
            messages=("msg", "size"),
            bytes=("bytes", "sum"),
            t0=("post_s", "min"),
            t1=("done_s", "max"),
        )
        card_rank: dict[int, int] = {}
        for r, c in enumerate(self.cluster.rank_nic.tolist()):
            card_rank.setdefault(int(c), r)
        out = pd.DataFrame(
            {
                "qp": qt["qp"],
                "src_rank": qt["src"].map(card_rank),
                "dst_rank": qt["dst"].map(card_rank),
                "src_port": "nic" + qt["src"].astype(str),
                "dst_port": "nic" + qt["dst"].astype(str),
                "packets": qt["tx_pkts"],
                "retx_packets": qt["retx_pkts"],
                "timeouts": qt["timeouts"],
                "nacks": qt["nacks_rcvd"],
                "cnps": qt["cnps_rcvd"],
                "ecn_acks": qt["ecn_acks"],
                "selector": qt["selector"],
                "mode": qt["mode"],
                "srtt_s": qt["srtt_s"],
            }
        )
        out = out.merge(per, left_on="qp", right_index=True, how="left")
        active = (out["t1"] - out["t0"]).where(lambda x: x > 0)
        out["mean_rate_bps"] = 8.0 * out["bytes"] / active
        return out.drop(columns=["t0", "t1"])


class HostTransport(_Transport):
    """The :class:`scenarios.timeline.Transport` over fabric.host endpoints."""

    name = "fabric.host (line rate, no CC, no retransmission)"

    def __init__(self, ctx: RunContext) -> None:
        from fabric.packet import ROCE_OVERHEAD

        super().__init__(ctx)
        sc, cl = ctx.scenario, ctx.cluster
        mtu = sc.cluster.nic.mtu
        cell = sc.sim.cell if sc.sim.cell and sc.sim.cell > mtu else mtu
        frames = math.ceil(cell / mtu)
        spray = sc.cluster.nic.multipath.selector != "ecmp"
        host_cls = _host_class()
        self.hosts: dict[str, Any] = {}
        for ports in cl.rank_ports:
            for p in ports:
                if p not in self.hosts:
                    self.hosts[p] = host_cls(
                        self.net,
                        p,
                        mtu=cell,
                        overhead=ROCE_OVERHEAD * frames,
                        spray=spray,
                        on_complete=self._complete,
                    )
        self._pending: dict[Any, tuple[int, Callable[[int], None]]] = {}
        self.records: list[tuple[int, str, str, Any]] = []

    def _complete(self, m: Any) -> None:
        msg, cb = self._pending.pop(m)
        cb(msg)

    def send(self, msg: int, src_rank: int, dst_rank: int, nbytes: int, hop: str,
             on_done: Callable[[int], None]) -> None:  # fmt: skip
        if self._side_path(msg, src_rank, dst_rank, nbytes, hop, on_done):
            return
        cl = self.cluster
        sp, dp = cl.rank_ports[src_rank], cl.rank_ports[dst_rank]
        plane = msg % min(len(sp), len(dp))
        a, b = sp[plane], dp[plane]
        m = self.hosts[a].add_message(b, int(nbytes), self.env.now)
        self._pending[m] = (msg, on_done)
        self.records.append((msg, a, b, m))

    # ----------------------------------------------------------------- tables

    def qp_table(self, trace: pd.DataFrame) -> pd.DataFrame:
        if not self.records:
            return pd.DataFrame()
        src_rank = trace["src_rank"].to_numpy()
        dst_rank = trace["dst_rank"].to_numpy()
        rows = [
            (a, b, int(src_rank[i]), int(dst_rank[i]), m.size, m.pkts, m.t_first_tx, m.t_done)
            for i, a, b, m in self.records
        ]
        df = pd.DataFrame(
            rows,
            columns=[
                "src_port",
                "dst_port",
                "src_rank",
                "dst_rank",
                "bytes",
                "packets",
                "t0",
                "t1",
            ],
        )
        g = df.groupby(["src_port", "dst_port", "src_rank", "dst_rank"], sort=True)
        out = g.agg(
            messages=("bytes", "size"),
            bytes=("bytes", "sum"),
            packets=("packets", "sum"),
            t0=("t0", "min"),
            t1=("t1", "max"),
        ).reset_index()
        active = (out["t1"] - out["t0"]).where(lambda x: x > 0)
        out["mean_rate_bps"] = 8.0 * out["bytes"] / active
        out["paths_used"] = 1
        out.insert(0, "qp", np.arange(len(out), dtype=np.int64))
        return out.drop(columns=["t0", "t1"])


class QueueSampler:
    """Every ``interval`` seconds, the queued bytes of every port (while anything else is
    scheduled: an idle simulation is not kept alive by its own sampler)."""

    def __init__(self, env: simpy.Environment, ports: list[Any], interval: float) -> None:
        from fabric.kernel import call_later

        self.env = env
        self.ports = ports
        self.interval = interval
        self.times: list[float] = []
        self.samples: list[np.ndarray] = []
        self._call_later = call_later
        call_later(env, 0.0, self._sample)

    def _sample(self, _arg: object) -> None:
        self.times.append(self.env.now)
        self.samples.append(np.fromiter((p.qbytes for p in self.ports), np.int64, len(self.ports)))
        # inside env.run(until=...) the queue always holds the run's stop event: more than
        # that means the simulation still has work, so keep sampling
        if len(self.env._queue) > 1:
            self._call_later(self.env, self.interval, self._sample)

    def table(self, keep: int) -> pd.DataFrame:
        if not self.samples:
            return pd.DataFrame()
        depth = np.vstack(self.samples)
        peak = depth.max(axis=0)
        order = [i for i in np.argsort(-peak, kind="stable") if peak[i] > 0][:keep]
        t = np.asarray(self.times)
        frames = [
            pd.DataFrame({"time_s": t, "port": self.ports[i].name, "depth_bytes": depth[:, i]})
            for i in order
        ]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def schedule_faults(ctx: RunContext, transport: _Transport) -> list[dict[str, Any]]:
    """Put the scenario's link/switch/NIC-port failures on the event heap.

    A failed link stops delivering at once (its packets count as drops); the switches' ECMP
    tables learn of it only ``cluster.routing.reconvergence`` later (static routing keeps
    hashing into the dead link until then), while the NIC's multipath selectors react to the
    losses themselves. ``until`` restores the link the same way. Stragglers act on compute
    (:func:`scenarios.build.compute_table`). Link degradation and pre-FEC BER are not modelled
    by this engine yet: a scenario that asks for them is refused rather than run without them.
    Returns the fault log rows (what failed, when) for the summary.
    """
    from fabric.kernel import call_at

    sc, g, net = ctx.scenario, ctx.cluster.graph, transport.net
    delay = sc.cluster.routing.reconvergence
    log: list[dict[str, Any]] = []

    def set_state(u: str, v: str, up: bool) -> None:
        net.set_link_state(u, v, up, reroute=False)
        call_at(transport.env, transport.env.now + delay, lambda _a: net.routing.set_link(u, v, up))

    for i, f in enumerate(sc.faults):
        kind = f.kind
        if kind == "straggler":
            continue
        if kind not in ("link_down", "switch_down", "nic_down"):
            raise ScenarioError(
                f"fault kind {kind!r} is not modelled by the packet engine yet; remove it or "
                "use link_down / switch_down / nic_down / straggler.",
                path=f"faults[{i}].kind",
            )
        if kind == "link_down":
            u, v = f.link
            if not g.has_edge(u, v):
                raise ScenarioError(
                    f"no link {u!r}-{v!r} in the cluster.", path=f"faults[{i}].link"
                )
            links = [(u, v)]
        else:
            node = f.node
            want = "nic" if kind == "nic_down" else None
            role = g.nodes[node].get("role") if node in g else None
            if role is None or (want and role != want) or (not want and role in ("nic", "gpu")):
                raise ScenarioError(
                    f"{node!r} is not a {'NIC port' if want else 'switch'} of the cluster.",
                    path=f"faults[{i}].node",
                )
            links = [(node, nb) for nb in sorted(g.neighbors(node))]
        for u, v in links:
            if g.edges[u, v].get("kind") == "scaleup":
                continue  # the scale-up domain is not part of the packet network
            call_at(transport.env, f.at, lambda _a, u=u, v=v: set_state(u, v, False))
            if f.until is not None:
                call_at(transport.env, f.until, lambda _a, u=u, v=v: set_state(u, v, True))
        log.append({"fault": i, "kind": kind, "links": len(links), "at_s": f.at,
                    "until_s": f.until})  # fmt: skip
    return log


@ENGINES.register("packet", "packet-level SimPy simulation: every packet through every queue")
def run_packet(ctx: RunContext) -> EngineOutput:
    """Run ``ctx`` on the packet engine (see the module docstring)."""
    sc = ctx.scenario
    transport = HostTransport(ctx) if sc.sim.endpoint == "host" else NicTransport(ctx)
    fault_log = schedule_faults(ctx, transport)
    sampler = None
    if sc.outputs.queue_series:
        sampler = QueueSampler(transport.env, transport.net.ports, sc.sim.sample_interval)
    tl = run_timeline(
        transport.env,
        transport,
        ctx.trace,
        ctx.compute,
        num_ranks=ctx.cluster.num_ranks,
        time_limit=sc.sim.time_limit,
        progress=ctx.progress,
    )
    links = link_table(ctx.cluster.graph, transport.link_counters())
    keep = max(16, 4 * sc.outputs.hottest_ports)
    return EngineOutput(
        messages=message_table(ctx.trace, tl.post_s, transport.end_times(tl.end_s)),
        phases=tl.phases,
        links=links,
        qps=transport.qp_table(ctx.trace),
        queues=sampler.table(keep) if sampler else pd.DataFrame(),
        sim_time_s=tl.sim_time_s,
        events=None,
        status=tl.status,
        extra={
            "transport": transport.name,
            "pcie_local_messages": transport.pcie_local,
            "packet_hops": transport.net.packet_hops(),
            "faults": fault_log,
            "dropped_bytes": transport.net.dropped_bytes(),
        },
    )
