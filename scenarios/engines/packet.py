"""The ``packet`` engine: every packet through every queue (fabric + NIC transport).

Adapter between the scenario layer and the packet-level substrate. It builds a
:class:`fabric.network.Network` from the cluster graph and the scenario's switch settings, puts
an endpoint on every NIC port that a rank uses, and offers
:func:`scenarios.execution.timeline.run_timeline`
a transport that turns each trace message into a transfer:

- ``rdma`` messages go from the source rank's NIC port to the destination rank's port on the
  same plane (planes are separate fabrics; a rank with several ports spreads its messages over
  them round-robin by message id);
- ``scaleup`` messages use :class:`podsim.fabric.scaleup.ScaleUpPipes` (the scale-out
  packet engine does not carry them); between GPUs without a scale-up fabric they go ``rdma``;
  with the SMs' copy path (``workload.moe.deepep.copy_rate``, as in the flow engine) the pipes
  also carry each GPU's ``local`` messages over its copy constraint;
- two ranks behind the same NIC card exchange data over the node's PCIe tree: a fluid GPU -> GPU
  copy at its max-min share of the tree, delivered one path latency after its last byte left
  (:mod:`podsim.nic.pcie.runtime`); without ``cluster.layout`` there is no tree to model and
  they are delivered at once (counted in ``engine_info.pcie_local_messages``).

PCIe (with ``cluster.layout``; :mod:`nic.pcie.cluster`, :mod:`nic.pcie.runtime`):
every RDMA message crosses its sender's GPU -> NIC path and its receiver's NIC -> GPU path.
It is posted to the NIC one GPU -> NIC path latency after the timeline posts it (the NIC reads
the payload from GPU memory through the tree: 115 ns per Gen5 switch hop, the root complex's
latency on the slow path), and counts as delivered one NIC -> GPU path latency after its last
byte reached the receiving NIC (``end_s``; the sender's phase bookkeeping waits for the later of
that and the ACK). While a message is in flight its GPU -> NIC and NIC -> GPU streams are
active on the two servers' trees; each time a server's active set changes (not per packet) its
tree is re-solved max-min and every NIC on it gets its transmit and receive DMA caps
(:meth:`podsim.nic.nic.SmartNic.set_pcie_rate_cap`). The cap is per NIC, not per QP or per GPU
(that is the hook the SmartNIC offers): when several GPUs share a NIC, the NIC's QP
round-robin, not the PCIe arbitration, splits the capped rate between them. With
``sim.endpoint: host`` the line-rate hosts have no DMA hook, so the caps are not applied there
(latency, P2P copies and storage reads are). ``workload.storage`` adds GPUDirect Storage reads
(SSD -> GPU) to the same trees; ``engine_info.pcie`` reports the reads, the solver counters and
every rank's network goodput (``gpu_network_goodput``).

Endpoints (``sim.endpoint``): ``nic`` (default) is the SmartNIC of :mod:`nic`
(:class:`nic.nic.RdmaNetwork`: QPs, congestion control, path selection, reliability, packet-rate
pipeline), configured from ``cluster.nic``; a message's phase bookkeeping completes when its
last byte is acknowledged, and its ``end_s`` in the messages table is when the receiver held
all its bytes. ``host`` is :class:`podsim.fabric.host.Host`, a line-rate sender with no congestion
control and no retransmission (``multipath.selector`` other than ``ecmp`` sprays per packet):
fast, for fabric-only studies; with it ``sim.cell`` above the MTU moves cells of that size
carrying the wire overhead of the MTU packets they stand for (fidelity knob, docs/design.md). The
summary's ``engine_info.transport`` says which endpoint ran.

Queue depths and transmitted-byte counters of every port are sampled every
``sim.sample_interval`` (with ``outputs.queue_series``; one scheduled read of the counters, no
per-packet work); the ``queues`` table keeps the ports that ever queued, deepest first (at most
4 x ``outputs.hottest_ports``, >= 16), and the byte counters give each link's utilisation per
phase (:mod:`podsim.scenarios.results.phase_links`); the scale-up links, fluid pipes here, give
each transfer's bytes over its sending time instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import simpy
from podsim.fabric.counters import Sampler
from podsim.fabric.host import Host
from podsim.fabric.kernel import call_at
from podsim.fabric.scaleup import ScaleUpPipes
from podsim.scenarios.build.classes import fabric_classes, message_classes
from podsim.scenarios.build.cluster import deepep_copy_rate
from podsim.scenarios.build.limits import check_packet
from podsim.scenarios.engines import EngineOutput, RunContext, register_engine
from podsim.scenarios.engines.qps import QpNumbering, qp_table
from podsim.scenarios.errors import ScenarioError
from podsim.scenarios.execution import faults
from podsim.scenarios.execution.faults import FaultSession
from podsim.scenarios.input.schema import SCENARIO_FAULT_KINDS

if TYPE_CHECKING:
    from podsim.scenarios.build.cluster import Cluster
    from podsim.scenarios.input.schema import Scenario
from podsim.scenarios.execution.timeline import run_timeline
from podsim.scenarios.results.classes import class_report
from podsim.scenarios.results.phase_links import JoinedLinkBytes, LinkSeries, SpreadLinkBytes
from podsim.scenarios.results.tables import link_table, message_table

__all__ = ["run_packet"]


class NotifyingHost(Host):
    """A :class:`podsim.fabric.host.Host` that reports each completed message once."""

    def __init__(self, *args: Any, on_complete: Callable[[Any], None], **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._on_complete = on_complete

    def receive(self, pkt: Any) -> None:
        m = pkt.meta
        before = m.rx_bytes
        super().receive(pkt)
        if before < m.size <= m.rx_bytes:
            self._on_complete(m)


class _Transport:
    """What both endpoints share: the network, scale-up pipes and the link counters."""

    name = ""

    def __init__(self, ctx: RunContext) -> None:
        from podsim.fabric.network import Network

        sc, cl = ctx.scenario, ctx.cluster
        self.env = simpy.Environment()
        self.cluster = cl
        self.classes = fabric_classes(sc)
        self.net = Network(self.env, cl.graph, cl.switch, seed=sc.seed, classes=self.classes)
        #: every trace row's traffic class (None: one class)
        self.msg_tc = message_classes(sc, ctx.trace)
        # the SMs' copy path (workload.moe.deepep.copy_rate): the pipes carry a GPU's copies
        # to itself too
        copy_rate = deepep_copy_rate(sc)
        self.scaleup = ScaleUpPipes(
            self.env, cl.graph, copy_rate, resolution_s=ctx.scenario.sim.scaleup_resolution
        )
        self.carries_local = copy_rate is not None
        self.pcie_local = 0
        self.pcie = None
        if getattr(cl, "pcie", None) is not None:
            from podsim.nic.pcie.runtime import PcieRuntime

            self.pcie = PcieRuntime(self.env, cl.pcie)
        #: trace rows that crossed the scale-out network
        self.net_msgs: list[int] = []
        #: the steady-state fast-forward (:mod:`podsim.nic.fastforward`; NIC endpoint only)
        self.ff: Any = None

    def clock(self) -> float:
        """The run's (virtual) time now: the event clock plus what fast-forward skipped."""
        return self.env._now if self.ff is None else self.ff.now()

    def virt(self, t: Any) -> Any:
        """Event-clock time(s) ``t`` on the run's virtual clock (the same without
        fast-forward)."""
        return t if self.ff is None else self.ff.virt(t)

    def event_time(self, t: float) -> float:
        """The event-clock time at which virtual time ``t`` (not before now) comes."""
        if self.ff is None:
            return t
        return max(self.env._now, t - self.ff.offset)

    def tx_latency(self, rank: int) -> float:
        """Idle latency of ``rank``'s transmit DMA: its NIC's PCIe read round trip to the GPU
        (:attr:`podsim.nic.pcie.cluster.ClusterPcie.tx_latency_s`; 0 without a node layout)."""
        return float(self.cluster.pcie.tx_latency_s[rank]) if self.pcie is not None else 0.0

    def rx_latency(self, rank: int) -> float:
        """NIC -> GPU PCIe path latency of ``rank`` (0 without a node layout)."""
        return float(self.cluster.pcie.rx_latency_s[rank]) if self.pcie is not None else 0.0

    def _side_path(self, msg: int, src_rank: int, dst_rank: int, nbytes: int, hop: str,
                   on_done: Callable[[int], None]) -> bool:  # fmt: skip
        """Scale-up and same-NIC messages; True if handled here."""
        cl = self.cluster
        ga, gb = int(cl.rank_gpu[src_rank]), int(cl.rank_gpu[dst_rank])
        if hop == "local" or src_rank == dst_rank:  # only with the SMs' copy path
            self.scaleup.copy_local(gb, nbytes, lambda _a: on_done(msg))
            return True
        if hop == "scaleup" and self.scaleup.reaches(ga, gb):
            self.scaleup.send(ga, gb, nbytes, lambda _a: on_done(msg))
            return True
        if cl.rank_nic[src_rank] == cl.rank_nic[dst_rank]:
            self.pcie_local += 1
            if self.pcie is not None:
                self.pcie.p2p(src_rank, dst_rank, nbytes, on_done, msg)
            else:
                on_done(msg)
            return True
        self.net_msgs.append(msg)
        return False

    def link_counters(self) -> pd.DataFrame:
        pt = self.net.port_table()
        if self.ff is not None:  # what the jumps carried, at each link's measured rate
            for col, extra in self.ff.link_extra.items():
                pt[col] = pt[col].to_numpy() + extra
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
    """The scenario's ``cluster.nic`` as a :class:`podsim.nic.nic.NicConfig`."""
    from podsim.nic.nic import NicConfig
    from podsim.scenarios.input.devices import device_config

    # every key of cluster.nic is a NicConfig parameter; PCIe DMA caps change with the traffic
    # (the node's PcieRuntime sets them per NIC)
    return device_config(NicConfig, ctx.scenario.cluster.nic, allow_plugins=ctx.allow_plugins)


class NicTransport(_Transport):
    """The :class:`scenarios.execution.timeline.Transport` over the SmartNICs of :mod:`nic`."""

    name = "nic.RdmaNetwork (SmartNIC: QPs, CC, multipath, reliability, packet-rate pipeline)"

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        from podsim.nic.nic import RdmaNetwork
        from podsim.scenarios.build.cluster import at

        with at("cluster.nic", "NIC"):
            cfg = nic_config(ctx)
            cards = sorted({int(c) for c in ctx.cluster.rank_nic.tolist()})
            self.rdma = RdmaNetwork(self.net, cfg, seed=ctx.scenario.seed, cards=cards)
        self.rdma.on_done.append(self._complete)
        ff = ctx.scenario.sim.fast_forward
        if ff.enabled:
            from podsim.nic.fastforward import FastForward

            self.ff = FastForward(
                self.env,
                self.rdma,
                stable_rtts=ff.stable_rtts,
                tolerance=ff.tolerance,
                time_limit=ctx.scenario.sim.time_limit,
                fluids=(self.scaleup,),
                outside=(self,),
            )
        self._cb: dict[int, tuple[Callable[[int], None], int, int]] = {}
        self._msg_dst: dict[int, int] = {}
        # a QP per (source rank, destination rank) (scenarios.engines.qps)
        self.qp_numbers = QpNumbering(ctx.cluster.rank_nic, cfg.qps_per_pair)
        self._qp_ranks: dict[tuple[int, int, int], tuple[int, int]] = {}
        if self.pcie is not None:
            self.pcie.set_nic_cap = self._set_nic_cap

    def _set_nic_cap(self, card: int, tx_bps: float | None, rx_bps: float | None) -> None:
        nic = self.rdma.nics.get(card)
        if nic is not None:
            nic.set_pcie_rate_cap(tx_bps, rx_bps)

    def _complete(self, m: Any) -> None:
        on_done, src_rank, dst_rank = self._cb.pop(m.id)
        if self.pcie is None:
            on_done(m.tag)
            return
        self.pcie.rdma_end(src_rank, dst_rank)
        # the receiver's GPU holds the data one NIC -> GPU path latency after its NIC did
        t = self.delivered_at(m) + self.rx_latency(dst_rank)
        if math.isfinite(t) and t > self.clock():
            call_at(self.env, self.event_time(t), self._release, (on_done, m.tag))
        else:
            on_done(m.tag)

    def _release(self, done_tag: tuple[Callable[[int], None], int]) -> None:
        """Hand a completed message to the executor (a method of the transport, so that the
        fast-forward knows whose event it is)."""
        done, tag = done_tag
        done(tag)

    def delivered_at(self, m: Any) -> float:
        """When NIC message ``m``'s receiver held all its bytes, on the run's virtual clock."""
        return m.t_delivered if self.ff is None else self.ff.msg_time(m, "t_delivered")

    def send(self, msg: int, src_rank: int, dst_rank: int, nbytes: int, hop: str,
             on_done: Callable[[int], None]) -> None:  # fmt: skip
        if self._side_path(msg, src_rank, dst_rank, nbytes, hop, on_done):
            return
        cl = self.cluster
        if self.pcie is not None:
            self.pcie.rdma_start(src_rank, dst_rank)
        a, b = int(cl.rank_nic[src_rank]), int(cl.rank_nic[dst_rank])
        qp = self.qp_numbers.next(src_rank, dst_rank)
        self._qp_ranks[(a, b, qp)] = (src_rank, dst_rank)
        m = self.rdma.post(
            a,
            b,
            int(nbytes),
            tag=msg,
            at=self.env.now + self.tx_latency(src_rank),
            qp=qp,
            tc=0 if self.msg_tc is None else int(self.msg_tc[msg]),
        )
        self._cb[m.id] = (on_done, src_rank, dst_rank)
        self._msg_dst[msg] = dst_rank
        if self.ff is not None:
            self.ff.wake()

    def end_times(self, end_s: np.ndarray) -> np.ndarray:
        out = end_s.copy()
        for m in self.rdma.messages:
            if math.isfinite(m.t_delivered):
                tag = int(m.tag)
                out[tag] = self.delivered_at(m) + self.rx_latency(self._msg_dst.get(tag, 0))
        return out

    def qp_table(self, trace: pd.DataFrame) -> pd.DataFrame:
        qt = self.rdma.qp_table()
        if qt.empty:
            return pd.DataFrame()
        mt = self.rdma.message_table()
        if self.ff is not None:
            for col in ("post_s", "done_s"):
                mt[col] = self.ff.msg_times(self.rdma.messages, col)
        per = mt.groupby("qp").agg(
            messages=("msg", "size"),
            bytes=("bytes", "sum"),
            t0=("post_s", "min"),
            t1=("done_s", "max"),
        )
        keys = zip(qt["src"].tolist(), qt["dst"].tolist(), qt["index"].tolist(), strict=True)
        ranks = [self._qp_ranks.get(k, (-1, -1)) for k in keys]
        out = pd.DataFrame(
            {
                "qp": qt["qp"],
                "src_rank": [a for a, _b in ranks],
                "dst_rank": [b for _a, b in ranks],
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
                "paths_used": qt["paths_used"],
            }
        )
        out = out.merge(per, left_on="qp", right_index=True, how="left")
        active = (out["t1"] - out["t0"]).where(lambda x: x > 0)
        out["mean_rate_bps"] = 8.0 * out["bytes"] / active
        # when the sender saw the QP's last message acknowledged (messages.end_s is when the
        # receiver held it): what a sender-side completion time such as htsim's is compared with
        return out.drop(columns=["t0"]).rename(columns={"t1": "acked_s"})


class HostTransport(_Transport):
    """The :class:`scenarios.execution.timeline.Transport` over fabric.host endpoints."""

    name = "podsim.fabric.host (line rate, no CC, no retransmission)"

    def __init__(self, ctx: RunContext) -> None:
        from podsim.fabric.packet import link_framing

        super().__init__(ctx)
        sc, cl = ctx.scenario, ctx.cluster
        mtu = sc.cluster.nic.mtu
        cell = sc.sim.cell if sc.sim.cell and sc.sim.cell > mtu else mtu
        frames = math.ceil(cell / mtu)
        overhead = link_framing(str(sc.cluster.nic.link_layer))[0]
        spray = sc.cluster.nic.multipath.selector != "ecmp"
        self.hosts: dict[str, Any] = {}
        for ports in cl.rank_ports:
            for p in ports:
                if p not in self.hosts:
                    self.hosts[p] = NotifyingHost(
                        self.net,
                        p,
                        mtu=cell,
                        overhead=overhead * frames,
                        spray=spray,
                        on_complete=self._complete,
                    )
        self._pending: dict[Any, tuple[int, Callable[[int], None], int, int]] = {}
        self.records: list[tuple[int, str, str, Any]] = []

    def _complete(self, m: Any) -> None:
        msg, cb, src_rank, dst_rank = self._pending.pop(m)
        if self.pcie is None:
            cb(msg)
            return
        self.pcie.rdma_end(src_rank, dst_rank)
        # the receiver's GPU holds the data one NIC -> GPU path latency after its NIC did
        call_at(self.env, self.env.now + self.rx_latency(dst_rank), cb, msg)

    def send(self, msg: int, src_rank: int, dst_rank: int, nbytes: int, hop: str,
             on_done: Callable[[int], None]) -> None:  # fmt: skip
        if self._side_path(msg, src_rank, dst_rank, nbytes, hop, on_done):
            return
        cl = self.cluster
        sp, dp = cl.rank_ports[src_rank], cl.rank_ports[dst_rank]
        plane = msg % min(len(sp), len(dp))
        a, b = sp[plane], dp[plane]
        if self.pcie is not None:
            self.pcie.rdma_start(src_rank, dst_rank)
        m = self.hosts[a].add_message(b, int(nbytes), self.env.now + self.tx_latency(src_rank))
        self._pending[m] = (msg, on_done, src_rank, dst_rank)
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
        return qp_table(df.assign(paths_used=1))  # a host sends every message on one path


def preflight(sc: Scenario, cluster: Cluster, trace: pd.DataFrame) -> None:
    """The packet engine's own input checks: a ``sim.cell`` is a burst of whole MTU frames, and
    fault targets must exist and leave every message a way to finish
    (:mod:`podsim.scenarios.execution.faults`)."""
    cell, mtu = sc.sim.cell, sc.cluster.nic.mtu
    if cell is not None and cell < mtu:
        # the engine moved whole MTU frames then, silently: the knob only coarsens
        raise ScenarioError(
            f"cell {cell} B is below the MTU ({mtu} B): a cell is a burst of whole MTU frames "
            "(a fidelity knob for speed); use a size above the MTU or leave sim.cell unset.",
            path="sim.cell",
        )
    if fabric_classes(sc) is not None:
        if sc.sim.endpoint == "host":
            raise ScenarioError(
                "traffic classes need the SmartNIC endpoint (sim.endpoint: nic): the line-rate "
                "host sends its messages in order and has no per-class scheduler",
                path="cluster.traffic_classes",
            )
        if sc.cluster.switch.credit_buffer is not None:
            raise ScenarioError(
                "traffic classes with InfiniBand credit flow control (cluster.switch."
                "credit_buffer) are not modelled: InfiniBand separates traffic with virtual "
                "lanes, each with its own credits",
                path="cluster.traffic_classes",
            )
    faults.check_targets(sc, cluster.graph)
    faults.check_termination(sc, cluster.graph, trace, cluster.rank_ports)


@register_engine(
    "packet",
    "packet-level SimPy simulation: every packet through every queue",
    faults=SCENARIO_FAULT_KINDS,
    storage=True,
    graphs=True,
    per_packet=True,
    preflight=preflight,
    check_size=check_packet,
    classes=True,
    sm_copy=True,
)
def run_packet(ctx: RunContext) -> EngineOutput:
    """Run ``ctx`` on the packet engine (see the module docstring)."""
    sc = ctx.scenario
    transport = HostTransport(ctx) if sc.sim.endpoint == "host" else NicTransport(ctx)
    # faults (fabric.faults) and invariant checks (fabric.invariants): scenarios/faults.py
    session = FaultSession(ctx, transport)
    sampler = None
    if sc.outputs.queue_series:
        sampler = Sampler(
            transport.env,
            ports=transport.net.ports,
            interval_s=sc.sim.sample_interval,
            skip_idle=True,
        )
    if transport.pcie is not None and sc.workload.storage is not None:
        transport.pcie.schedule_storage(sc.workload.storage)
    tl = run_timeline(
        transport.env,
        transport,
        ctx.trace,
        ctx.compute,
        num_ranks=ctx.cluster.num_ranks,
        time_limit=sc.sim.time_limit,
        progress=session.wrap_progress(ctx.progress),
        graph=ctx.graph,
        clock=transport.clock if transport.ff is not None else None,
    )
    checked = session.finish(tl.status)
    info: dict[str, Any] = {}
    for rec in checked.get("faults", ()):  # fault times on the run's (virtual) clock
        for key in ("started_s", "ended_s"):
            if rec.get(key) is not None:
                rec[key] = float(transport.virt(rec[key]))
    series = None
    jumped = transport.ff is not None and transport.ff.jumps > 0
    if jumped:
        # a jump carries bytes no port counted while it skipped (ff.link_extra)
        info["links_by_phase"] = (
            "not measured: fast-forward jumps carried bytes that no port counter sampled"
        )
    if sampler is not None and not jumped:
        sampler.finish()  # the last row holds the run's totals
        series = LinkSeries(
            times=np.asarray(transport.virt(sampler.times), dtype=float),
            links=sampler.port_names,
            tx_bytes=sampler.tx_bytes,
            queue_bytes=sampler.queue_bytes,
            interval_s=sampler.interval_s,
        )
        if any(transport.scaleup.links.values()):  # (a cluster without scale-up links skips
            # link_transfers and the SciPy import it needs)
            names, t0, t1, per_link = transport.scaleup.link_transfers()
            # the fluid scale-up pipes: each transfer over its sending time
            series = JoinedLinkBytes(series, SpreadLinkBytes(names, t0, t1, per_link))
    links = link_table(ctx.cluster.graph, transport.link_counters())
    keep = max(16, 4 * sc.outputs.hottest_ports)
    messages = message_table(ctx.trace, tl.post_s, transport.end_times(tl.end_s), session.outcomes)
    if transport.msg_tc is not None and transport.classes is not None:
        info["traffic_classes"] = class_report(
            transport.classes,
            transport.msg_tc,
            messages,
            transport.net.class_table(),
            transport.rdma.qp_table(),
        )
    if transport.pcie is not None:
        info["pcie"] = transport.pcie.report(messages, transport.net_msgs)
    return EngineOutput(
        messages=messages,
        phases=tl.phases,
        links=links,
        qps=transport.qp_table(ctx.trace),
        queues=_virtual_times(sampler.table(keep), transport) if sampler else pd.DataFrame(),
        sim_time_s=tl.sim_time_s,
        events=None,
        status=tl.status,
        link_series=series,
        extra={
            "transport": transport.name,
            "pcie_local_messages": transport.pcie_local,
            "packet_hops": transport.net.packet_hops(),
            "dropped_bytes": transport.net.dropped_bytes(),
            **info,
            **checked,
            **({"fast_forward": transport.ff.summary()} if transport.ff is not None else {}),
        },
    )


def _virtual_times(queues: pd.DataFrame, transport: _Transport) -> pd.DataFrame:
    """The queue samples on the run's virtual clock (unchanged without fast-forward)."""
    if transport.ff is not None and len(queues):
        queues["time_s"] = transport.virt(queues["time_s"].to_numpy())
    return queues
