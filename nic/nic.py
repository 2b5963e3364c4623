# cython: language_level=3, annotation_typing=False
"""The SmartNIC endpoint: RDMA transport + congestion control + packet pipeline on the fabric.

:class:`SmartNic` is one NIC *card*: one fabric endpoint per plane (graph nodes with role
``nic`` and the same ``nic`` attribute). It attaches to those endpoints of a
:class:`podsim.fabric.network.Network` and

* transmits through the ports' pull interface (``Port.source``): whenever a port is about to
  go idle it asks the NIC for a packet; the NIC takes the next queue pair round-robin from that
  plane's ready queue. QPs waiting for their pacing time sit in one heap per NIC, and only an
  idle port with paced work costs a wake-up event (docs/design.md "Making SimPy fast": no process,
  no Store, no per-packet dict);
* limits transmit and receive to ``pps`` packets/s and charges QP-context cache misses
  (:mod:`nic.transport.pipeline`); payload DMA is capped by :attr:`SmartNic.pcie_rate_cap_bps`
  when the PCIe model sets it;
* on receive, runs the responder (ACK/SACK/NACK, reorder buffer), the DCQCN notification point
  (CNPs) and the RCCC credit allocator when the algorithm asks for them, and feeds ACKs, NACKs,
  CNPs, credits and probe replies to the requester QPs and their CC handlers.

:class:`RdmaNetwork` builds one SmartNic per NIC card of a network and is the API the scenario
runner uses: post messages (one by one or from a workload trace), run, and collect per-message,
per-QP and per-NIC tables as pandas DataFrames.

Defaults (:class:`NicConfig`) cite docs/physics.md: 4096 B MTU, 400 Mpps (the design's SmartNIC),
RoCEv2 overhead 82 B (+16 B RETH, +4 B AETH on ACKs, +16 B on CNPs), DCQCN CNP interval 50 us;
the QP-context cache, reorder buffer and RTO figures are estimates [E].
"""

from __future__ import annotations

import itertools
import math
import random
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any

from podsim.fabric import params
from podsim.fabric.kernel import Callback, call_at, stop_after_event
from podsim.fabric.kernel import run as kernel_run
from podsim.fabric.network import Network
from podsim.fabric.packet import ACK as K_ACK
from podsim.fabric.packet import CNP as K_CNP
from podsim.fabric.packet import DATA as K_DATA
from podsim.fabric.packet import NACK as K_NACK
from podsim.fabric.packet import PROBE as K_PROBE
from podsim.fabric.packet import link_framing
from podsim.fabric.params import param
from podsim.fabric.plugins import is_plugin_spec
from podsim.fabric.registry import Registry
from podsim.nic.congestion import CnpGenerator, CongestionControl, ReceiverCredit, make_cc
from podsim.nic.congestion.api import CCEvent
from podsim.nic.congestion.dcqcn import CNP_INTERVAL_S
from podsim.nic.transport.classes import ClassedReady
from podsim.nic.transport.pipeline import DEFAULT_PPS, PacketPipeline, QpContextCache
from podsim.nic.transport.qp import (
    ACK_WIRE_EXTRA,
    CNP_WIRE_EXTRA,
    F_ACK_REQ,
    F_CREDIT_GRANT,
    F_CREDIT_REFRESH,
    F_CREDIT_REQ,
    F_DUP,
    F_LAST,
    F_PROBE_REPLY,
    F_SEQ_ERR,
    Message,
    QueuePair,
    RdmaPacket,
    RecvQp,
    qp_flow_key,
)
from podsim.nic.transport.reliability import (
    ACK,
    NONE,
    SEQ_NAK,
    ReorderBuffer,
    check_mode,
    check_sack_bits,
)
from podsim.nic.transport.segmentation import check_mtu, check_opcode
from podsim.nic.transport.selectors import make_selector, selector_class

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["NIC_MODELS", "NicConfig", "RdmaNetwork", "SmartNic", "nic_model"]

_INF = math.inf
_ACK_NOW = F_LAST | F_ACK_REQ  # DATA flags that make the receiver acknowledge at once


@dataclass(frozen=True)
class NicConfig:
    """SmartNIC and transport parameters (SI units). Build from human strings with
    :meth:`from_mapping`.

    Every field is declared with :func:`podsim.fabric.params.param`: its scenario key under
    ``cluster.nic`` (e.g. ``ack_every`` is ``ack_coalesce``), unit, description and the source of
    its default. The scenario schema's NIC section and ``podsim docs`` are generated from these
    declarations, so this class is the one place a NIC parameter is defined.
    """

    link_layer: str = param(
        "ethernet",
        key="link_layer",
        kind="choice",
        choices={"ethernet": "ethernet", "infiniband": "infiniband"},
        doc="the NIC's link layer: ethernet (RoCEv2 / UEC: PFC or lossy with ECN) or "
        "infiniband (credit-based link flow control: needs cluster.switch.credit_buffer)",
        source="[S] IEEE 802.3 / IBTA vol. 1; sets the per-packet wire overhead: RoCEv2's 82 B "
        "(Ethernet, 84 B least frame) or InfiniBand's LRH+BTH+ICRC+VCRC 26 B (IBTA vol. 1 ch. 5, "
        "7.7, 7.8, 9.2; podsim.fabric.packet.LINK_FRAMING)",
    )
    mtu: int = param(
        4096,
        key="mtu",
        kind="size",
        minimum=256,
        doc="RoCE path MTU: 256, 512, 1024, 2048 or 4096 B",
        source="[S] InfiniBand/RoCEv2 path MTUs (IBTA); goodput per MTU in docs/physics.md",
    )
    reliability: str = param(
        "sr",
        key="reliability",
        kind="choice",
        choices={"selective-repeat": "sr", "go-back-n": "gbn"},
        doc="loss recovery: selective repeat (SACK) or go-back-N (classic RoCE NICs)",
        source="[S] go-back-N: IBTA RC transport; selective repeat: UEC 1.0 / IRN (SIGCOMM'18)",
    )
    ack_every: int = param(
        1,
        key="ack_coalesce",
        kind="int",
        minimum=1,
        doc="data packets acknowledged per ACK (plus the immediate cases: last packet, ECN, loss)",
        source="[E] no source gives a RoCE NIC's coalescing; 1 = an ACK per packet",
    )
    ack_gap_fill: bool = param(
        True,
        key="ack_on_gap_fill",
        kind="bool",
        doc="selective repeat: acknowledge at once a packet that fills a gap in the received "
        "PSNs (false: it counts towards ack_coalesce, and an ACK request that found a gap "
        "open is answered again when the gaps close)",
        source="[S] true: TCP, RFC 5681 section 4.2 (an immediate ACK for a segment that fills "
        "a gap); false: the UEC reference simulator, uet-htsim 40ccb05 uec.cpp "
        "UecSink::processData",
    )
    selector: str = param(
        "spray",
        key="multipath.selector",
        kind="name",
        registry="path selector",
        doc="path selector (podsim list selectors) or a module:Class plug-in",
        source="[S] multipath RDMA with packet spraying (the SmartNIC's design); UEC 1.0 EV",
    )
    selector_params: Mapping[str, Any] = param(
        key="multipath.params",
        kind="params",
        default_factory=dict,
        doc="parameters of the path selector",
        source="the selector's own defaults",
    )
    n_evs: int = param(
        256,
        key="multipath.paths",
        kind="int",
        minimum=1,
        doc="entropy values (UDP source ports) a QP spreads its packets over (at most 65536)",
        source="[E] the figure UEC simulations use",
    )
    cc: str = param(
        "dcqcn",
        key="cc.name",
        kind="name",
        registry="congestion control",
        doc="congestion-control algorithm (podsim list cc) or a module:Class plug-in",
        source="DCQCN: Zhu et al., SIGCOMM 2015",
    )
    cc_params: Mapping[str, Any] = param(
        key="cc.params",
        kind="params",
        default_factory=dict,
        doc="parameters that override the algorithm's published defaults",
        source="the algorithm's module (podsim.nic.congestion)",
    )
    allow_plugins: bool = param(
        False,
        key=None,
        kind="bool",
        doc="set by --allow-plugins (a scenario file alone never loads code)",
    )
    pps: float = param(
        DEFAULT_PPS,
        key="packet_rate",
        kind="packet_rate",
        minimum=0,
        exclusive=True,
        doc="packet-processing ceiling of the NIC per direction",
        source="[S] 400 Mpps, docs/physics.md 'The SmartNIC of the design'",
    )
    qpc_entries: int = param(
        4096,
        key="qp_cache",
        kind="count",
        minimum=0,
        doc="QP contexts the NIC caches on chip; 0 = unlimited",
        source="[E] ConnectX-class caches hold thousands of contexts; no public figure",
    )
    qpc_miss_penalty_s: float = param(
        1e-6,
        key="qp_miss_penalty",
        kind="time",
        minimum=0,
        doc="delay of a QP-context cache miss (a fetch over PCIe)",
        source="[E] about one PCIe round trip (docs/physics.md PCIe latency)",
    )
    qpc_parallel_fetches: int = param(
        16,
        key="qp_parallel_fetches",
        kind="int",
        minimum=1,
        doc="QP-context misses the NIC fetches at once",
        source="[E]",
    )
    reorder_buffer_bytes: int = param(
        16 << 20,
        key="reorder_buffer",
        kind="size",
        minimum=0,
        doc="out-of-order payload the NIC can hold, shared by its QPs (selective repeat)",
        source="[E] on-NIC SRAM of a few MiB to tens of MiB",
    )
    sack_bits: int | None = param(
        64,
        key="sack_bitmap",
        kind="int",
        minimum=0,
        optional=True,
        doc="selective repeat: bits of the SACK bitmap an ACK carries (the window ends at the "
        "PSN that triggered it); 0: cumulative ACKs only; null: unbounded (every held PSN). "
        "Unused with go-back-n",
        source="[S] UET 1.0 PDS ACK_CC (Table 3-36): 16-bit sack_psn_offset + 64-bit "
        "sack_bitmap; uet-htsim 40ccb05 uec.cpp UecSink::buildSackBitmap (64 bits); for a "
        "non-UEC NIC without a published figure (smartnic-400g) the same 64 bits are [E]",
    )
    seq_nak: bool = param(
        False,
        key="sequence_nak",
        kind="bool",
        doc="selective repeat: the responder places a packet that arrives above the expected "
        "PSN and answers it with one PSN sequence error NAK per sequence error, as an "
        "InfiniBand RC responder with out-of-order data placement; the requester goes back N "
        "from the NAK'd PSN, at once on a path that keeps the QP's packets in order, else once "
        "the PSN is overdue by the reordering window (RACK), so that reordering from "
        "spraying or switch adaptive routing is not taken for loss. go-back-n always NAKs",
        source="[S] IBTA vol. 1 ch. 9.7 'Reliable Service' (PSN sequence error NAK, AETH NAK "
        "code 0, once per sequence error; the requester resends from the NAK'd PSN); NVIDIA "
        "'Out-of-Order (OOO) Data Placement' (MLNX_OFED, DOCA: ConnectX-5 and later place "
        "out-of-order RC packets instead of dropping them); the RACK wait is [E] (RFC 8985 "
        "6.2): NVIDIA does not publish how its NICs tell reordering from loss",
    )
    reo_factor: float = param(
        1.0,
        key="reorder_window",
        kind="float",
        minimum=0,
        exclusive=True,
        doc="selective repeat: a gap older than this many smoothed RTTs is a loss",
        source="[E]",
    )
    reo_min_s: float = param(
        2e-6,
        key="reorder_window_min",
        kind="time",
        minimum=0,
        doc="floor of the reordering window",
        source="[E]",
    )
    rto_min_s: float = param(
        100e-6,
        key="rto",
        kind="time",
        minimum=0,
        exclusive=True,
        doc="minimum retransmission timeout",
        source="[E] a datacentre RTT of a few us; IB's local ACK timeout is 4.096 us x 2^n",
    )
    rto_max_s: float = param(
        10e-3,
        key="rto_max",
        kind="time",
        minimum=0,
        exclusive=True,
        doc="largest retransmission timeout after exponential back-off",
        source="[E] RDMA stacks use ms",
    )
    retry_limit: int | None = param(
        7,
        key="retry_limit",
        kind="int",
        minimum=0,
        optional=True,
        doc="consecutive timeouts a QP retries before its messages fail; null: retry forever",
        source="[S] InfiniBand retry_cnt, a 3-bit QP attribute, 7 usual (IBTA; ibv_modify_qp(3))",
    )
    cnp_interval_s: float | None = param(
        None,
        key="cnp_interval",
        kind="time",
        minimum=0,
        exclusive=True,
        optional=True,
        doc="DCQCN: at most one CNP per QP per interval; null: the DCQCN profile's (nvidia "
        "4 us, the others 50 us)",
        source="[S] NVIDIA min_time_between_cnps 4 us (ConnectX mlxconfig defaults); Zhu et al., "
        "SIGCOMM 2015 (50 us); docs/physics.md",
    )
    qps_per_pair: int = param(
        1,
        key="qps_per_pair",
        kind="int",
        minimum=1,
        doc="QPs per (source, destination) NIC pair; messages are spread round-robin",
        source="[E] one QP per peer, as DeepEP and NCCL open by default",
    )
    pcie_rate_cap_bps: float | None = param(
        None,
        key=None,
        kind="rate",
        optional=True,
        doc="payload DMA cap, set by the node's PCIe model as the traffic changes",
    )

    def __post_init__(self) -> None:
        check_mtu(self.mtu)
        check_mode(self.reliability)
        if self.allow_plugins or not is_plugin_spec(self.selector):
            selector_class(self.selector, self.allow_plugins)
        # else a plug-in named before the opt-in is known (schema validation): the scenario
        # layer refuses it unless --allow-plugins, and the NIC loads it then

        def bad(key: str, want: str) -> ValueError:
            return ValueError(f"NIC config {key}={getattr(self, key)!r}: expected {want}")

        if isinstance(self.ack_every, bool) or not int(self.ack_every) == self.ack_every >= 1:
            raise bad("ack_every", "an int >= 1")
        if not 1 <= self.n_evs <= 65536:
            raise bad("n_evs", "an int in 1..65536")
        if not self.pps > 0:
            raise bad("pps", "packets/s > 0")
        if isinstance(self.qpc_entries, bool) or not (
            self.qpc_entries is None or int(self.qpc_entries) == self.qpc_entries >= 0
        ):
            raise bad("qpc_entries", "an int >= 0 (0 or None: unlimited)")
        if not self.qpc_miss_penalty_s >= 0:
            raise bad("qpc_miss_penalty_s", "seconds >= 0")
        if not self.qpc_parallel_fetches >= 1:
            raise bad("qpc_parallel_fetches", "an int >= 1")
        if not self.reorder_buffer_bytes >= 0:
            raise bad("reorder_buffer_bytes", "bytes >= 0")
        try:
            check_sack_bits(self.sack_bits)
        except ValueError:
            raise bad("sack_bits", "an int >= 0 (bits) or None (unbounded)") from None
        if not self.reo_factor > 0:
            raise bad("reo_factor", "a factor > 0")
        if not self.reo_min_s >= 0:
            raise bad("reo_min_s", "seconds >= 0")
        if not 0 < self.rto_min_s <= self.rto_max_s:
            raise bad("rto_min_s", f"seconds in (0, rto_max_s={self.rto_max_s}]")
        if self.retry_limit is not None and (
            isinstance(self.retry_limit, bool)
            or not isinstance(self.retry_limit, int)
            or self.retry_limit < 0
        ):
            raise bad("retry_limit", "an int >= 0 (consecutive timeouts) or None (no limit)")
        if self.cnp_interval_s is not None and not self.cnp_interval_s > 0:
            raise bad("cnp_interval_s", "seconds > 0 or None (the DCQCN profile's)")
        if not self.qps_per_pair >= 1:
            raise bad("qps_per_pair", "an int >= 1")
        if self.pcie_rate_cap_bps is not None and not self.pcie_rate_cap_bps > 0:
            raise bad("pcie_rate_cap_bps", "bit/s > 0 or None")

    @property
    def framing(self) -> tuple[int, int]:
        """``(overhead, least wire bytes)`` per packet of :attr:`link_layer`
        (:func:`podsim.fabric.packet.link_framing`)."""
        return link_framing(self.link_layer)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> NicConfig:
        """Build from a mapping of field names whose quantities may be human strings
        ("150KB", "600ns", "400Mpps"), parsed by each field's declared kind."""
        return params.from_mapping(cls, values, "NIC config")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["selector_params"] = dict(self.selector_params)
        d["cc_params"] = dict(self.cc_params)
        return d


def qp_rng(seed: int, src_card: int, dst_card: int, index: int) -> random.Random:
    """The random stream of QP ``index`` from card ``src_card`` to ``dst_card`` in a network of
    ``seed``: its path selector draws its entropy values from it (an ECMP QP's one EV is the
    first draw), so the flow engine can replay which path the QP takes."""
    return random.Random(f"{seed}/qp/{src_card}/{dst_card}/{index}")


#: Named NIC configurations (transport presets); scenarios refer to them by name and may
#: override any field. Each entry is a function returning a :class:`NicConfig`.
NIC_MODELS: Registry[Callable[[], NicConfig]] = Registry("NIC model")


@NIC_MODELS.register(
    "smartnic-400g",
    "the SmartNIC of the design (T-Head Panmai 920 class, 400G): 400 Mpps, packet spraying "
    "+ selective repeat, DCQCN",
)
def _smartnic_400g() -> NicConfig:
    # SACK bitmap: the NicConfig default, UEC's 64 bits [E]: no public figure for this card
    return NicConfig(selector="spray", reliability="sr", cc="dcqcn")


@NIC_MODELS.register("roce", "classic RoCEv2 NIC: one ECMP path per QP, go-back-N, DCQCN")
def _roce() -> NicConfig:
    # go-back-N has no SACK: the responder drops out-of-order packets (sack_bits unused)
    return NicConfig(selector="ecmp", reliability="gbn", cc="dcqcn", sack_bits=None)


@NIC_MODELS.register("uec", "Ultra Ethernet-style: REPS spraying, selective repeat, NSCC")
def _uec() -> NicConfig:
    # 64-bit SACK bitmap [S: UET 1.0 PDS ACK_CC, Table 3-36; uet-htsim 40ccb05 uec.cpp]
    # ACKs as the reference simulator's UecSink::processData (uet-htsim 40ccb05 uec.cpp): a
    # packet filling a gap is not acknowledged at once (NicConfig.ack_gap_fill)
    return NicConfig(selector="reps", reliability="sr", cc="nscc", sack_bits=64, ack_gap_fill=False)


@NIC_MODELS.register(
    "cx7-ib",
    "ConnectX-7-class InfiniBand NIC (NDR 400G): RC transport placing out-of-order packets "
    "(switch adaptive routing), no end-to-end congestion control, credit flow control",
)
def _cx7_ib() -> NicConfig:
    # IB clusters run without end-to-end CC by default; RC over AR needs the NIC to place
    # packets that arrive out of order (NVIDIA: ConnectX-6 Dx and later with AR), which
    # selective repeat models; one path per QP, the switches spread packets (adaptive routing).
    # Packet rate and QP cache keep the NicConfig defaults [E]: no ConnectX-7 figure is sourced.
    # IB's ACK carries no SACK (AETH: syndrome + MSN, IBTA vol. 1 9.3.5): sack_bits 0,
    # cumulative ACKs only. A loss is reported by the RC responder's PSN sequence error NAK
    # (IBTA vol. 1 ch. 9.7; seq_nak), then the tail probe and the timeout.
    return NicConfig(
        link_layer="infiniband",
        selector="ecmp",
        reliability="sr",
        cc="none",
        sack_bits=0,
        seq_nak=True,
    )


def nic_model(name: str, **overrides: Any) -> NicConfig:
    """The :data:`NIC_MODELS` preset ``name`` with ``overrides`` (human strings allowed)."""
    base = NIC_MODELS.get(name)().to_dict()
    base.update(overrides)
    return NicConfig.from_mapping(base)


class SmartNic:
    """One NIC card on the fabric (see the module docstring). Built by :class:`RdmaNetwork`."""

    def __init__(
        self,
        rdma: RdmaNetwork,
        card: int,
        endpoints: Sequence[str],
        config: NicConfig,
        cc: CongestionControl,
    ) -> None:
        net = rdma.network
        self.rdma = rdma
        self.env = net.env
        self.card = card
        self.config = config
        self.cc = cc
        self.endpoints = list(endpoints)
        self.eids = [net.endpoint_id(e) for e in self.endpoints]
        self.planes = len(self.endpoints)
        self.ports = [net.attach(e, self) for e in self.endpoints]
        for plane, port in enumerate(self.ports):
            port.source = self._pull if plane == 0 else self._puller(plane)
        self.line_rate_bps = sum(p.rate_bps for p in self.ports)
        self.mode = check_mode(config.reliability)
        self.cache = QpContextCache(config.qpc_entries or None)  # 0: unlimited
        self.tx_pipe = PacketPipeline(
            config.pps, self.cache, config.qpc_miss_penalty_s, config.qpc_parallel_fetches
        )
        self.rx_pipe = PacketPipeline(
            config.pps, self.cache, config.qpc_miss_penalty_s, config.qpc_parallel_fetches
        )
        self.rob = ReorderBuffer(config.reorder_buffer_bytes)
        #: the CCEvent every QP of this NIC fills for its congestion-control handler calls
        self.cc_event = CCEvent(0.0)
        self.cnp = (
            CnpGenerator(
                config.cnp_interval_s
                if config.cnp_interval_s is not None
                else getattr(cc, "cnp_interval_s", CNP_INTERVAL_S)
            )
            if cc.requires_cnp
            else None
        )
        #: the link layer's per-packet wire bytes beyond the payload, and its least packet
        self.overhead, self.min_wire = config.framing
        self.ack_wire = max(self.overhead + ACK_WIRE_EXTRA, self.min_wire)
        self.cnp_wire = max(self.overhead + CNP_WIRE_EXTRA, self.min_wire)
        self.credit = (
            ReceiverCredit(self.line_rate_bps, config.mtu, self.overhead)
            if cc.requires_credit
            else None
        )
        self._credit_cb: Callback | None = None
        self._timers: list[tuple[float, int, QueuePair]] = []  # QP timers (TLP/RTO) by time
        self._timer_cb: Callback | None = None
        self._timer_cb_at = _INF
        self._ready: list[deque[QueuePair]] | list[ClassedReady] = (
            [deque() for _ in self.ports]
            if net.classes is None
            else [ClassedReady(net.classes, p.tcq.paused) for p in self.ports]  # type: ignore[attr-defined]
        )
        self._heap: list[tuple[float, int, QueuePair]] = []
        self._seq = itertools.count()
        self._wake_t = _INF
        self._in_pull = False
        self._rx_later = self._rx_deferred
        self.qps: dict[tuple[int, int], QueuePair] = {}
        self.pcie_rate_cap_bps: float | None = None
        self.pcie_rx_cap_bps: float | None = None
        self.set_pcie_rate_cap(config.pcie_rate_cap_bps)
        # counters
        self.tx_data_pkts = 0
        self.rx_data_pkts = 0
        self.acks_sent = 0
        self.nacks_sent = 0
        self.cnps_sent = 0
        self.rx_deferred = 0  # packets that waited for the RX pipeline

    # ------------------------------------------------------------------ hooks
    def set_pcie_rate_cap(self, tx_bps: float | None, rx_bps: float | str | None = "same") -> None:
        """Cap the NIC's payload DMA at its share of the PCIe tree (bit/s; from
        :func:`podsim.nic.pcie.nic_dma_caps`): ``tx_bps`` host-to-NIC reads for transmit, ``rx_bps``
        NIC-to-host writes for receive (default: the same as ``tx_bps``). None removes a cap."""
        if rx_bps == "same":
            rx_bps = tx_bps
        self.tx_pipe.set_dma_cap(tx_bps)
        self.rx_pipe.set_dma_cap(rx_bps)  # type: ignore[arg-type]
        self.pcie_rate_cap_bps = tx_bps
        self.pcie_rx_cap_bps = rx_bps

    def arm_timer(self, qp: QueuePair, t: float) -> None:
        """Call ``qp._on_rto()`` at ``t`` unless ``qp`` re-arms earlier meanwhile (then this
        entry is stale and dropped). One event-heap entry per NIC, whatever the QP count."""
        heappush(self._timers, (t, next(self._seq), qp))
        if t < self._timer_cb_at:
            self._schedule_timers(t)

    def _schedule_timers(self, t: float) -> None:
        if self._timer_cb is not None:
            self._timer_cb.cancel()  # exactly one live wake-up for the NIC's timers
        self._timer_cb_at = t
        self._timer_cb = call_at(self.env, t, self._on_timers)

    def _on_timers(self, _arg: object = None) -> None:
        self._timer_cb = None
        # While the due QPs run, their re-arms only queue (-inf: no arm is "earlier"): one
        # wake-up is scheduled at the end, for the earliest timer then. Scheduling one per
        # re-arm would leave a cancelled far-future entry on the event heap almost every time
        # (re-arms go out one RTO, the next QP's timer is due much sooner).
        self._timer_cb_at = -_INF
        now = self.env._now
        timers = self._timers
        while timers:
            t, _, qp = timers[0]
            if qp._timer_at != t:  # superseded by an earlier arm: drop it
                heappop(timers)
                continue
            if t > now:
                break
            heappop(timers)
            qp._timer_at = _INF
            qp._on_rto()
        self._timer_cb_at = _INF
        if timers:
            self._schedule_timers(timers[0][0])

    # ------------------------------------------------------------------ QPs
    def qp_to(self, dst: SmartNic, index: int = 0, tc: int = 0) -> QueuePair:
        """The QP number ``index`` of traffic class ``tc`` from this NIC to ``dst`` (created
        on first use)."""
        key = (dst.card, index) if not tc else (dst.card, index, tc)
        qp = self.qps.get(key)
        if qp is None:
            qp = self.rdma._new_qp(self, dst, index, tc)
            self.qps[key] = qp
        return qp

    # ------------------------------------------------------------------ transmit
    def activate(self, qp: QueuePair) -> None:
        """``qp`` may have something to send: queue it (ready now, or paced to later)."""
        if qp.queued:
            return
        snd = qp.snd
        if not snd.has_data():
            return
        fcc = qp.fcc
        w = fcc.window_bytes
        if w is not None and snd.inflight_bytes > 0 and snd.inflight_bytes >= w:
            return
        c = fcc.credit_bytes
        if c is not None and not qp.sendable():
            return
        now = self.env._now
        if self.planes > 1 and qp.next_ev < 0:
            ev = qp.sel.next_ev(now)
            qp.next_ev = ev
            qp.next_plane = qp.sel.plane_of(ev)
        t = qp.next_time
        qp.queued = True
        port = self.ports[qp.next_plane]
        if t <= now:
            self._ready[qp.next_plane].append(qp)
            if not port._tx_pending:
                port.kick()
        else:
            due = fcc.timer_due_s
            heappush(self._heap, (t if t < due else due, next(self._seq), qp))
            if not port._tx_pending:
                self._wake(t if t < due else due)

    def _wake(self, t: float) -> None:
        if t < self._wake_t:
            self._wake_t = t
            call_at(self.env, t, self._on_wake)

    def _on_wake(self, _arg: object = None) -> None:
        now = self.env._now
        if self._wake_t <= now:
            self._wake_t = _INF
        if self._heap and self._heap[0][0] <= now:
            self._release(now)
        for port in self.ports:
            if not port._tx_pending:
                port.kick()
        if self._heap and self._wake_t == _INF and any(not p._tx_pending for p in self.ports):
            self._wake(self._heap[0][0])  # work remains paced for later: wake up for it

    def _release(self, now: float) -> None:
        """Move QPs whose pacing time has come from the heap to their ready queues."""
        heap = self._heap
        ready = self._ready
        while heap and heap[0][0] <= now:
            qp = heappop(heap)[2]
            fcc = qp.fcc
            if fcc.timer_due_s <= now:
                self.cc.handle_tick(now, fcc)
                qp.repace(now)
            t = qp.next_time
            if t > now:
                due = fcc.timer_due_s
                heappush(heap, (t if t < due else due, next(self._seq), qp))
                continue
            ready[qp.next_plane].append(qp)

    def _puller(self, plane: int) -> Callable[[], RdmaPacket | None]:
        def pull() -> RdmaPacket | None:
            return self._pull(plane)

        return pull

    def _pull(self, plane: int = 0) -> RdmaPacket | None:
        """``Port.source`` of the port of ``plane``: the next data packet to send now."""
        now = self.env._now
        pipe = self.tx_pipe
        nf = pipe.next_free
        # Like the RX side, the pipeline may start a packet up to one slot early (no event for
        # a sub-slot wait); the reservation keeps the long-run rate at ``pps``.
        if nf > now + pipe.interval:
            self._wake(nf)
            return None
        start = nf if nf > now else now
        heap = self._heap
        if heap and heap[0][0] <= now:
            self._release(now)
        ready = self._ready[plane]
        cache = self.cache
        ref = cache._ref
        self._in_pull = True  # control packets sent from here wait for an event (re-entry)
        while ready:
            qp = ready.popleft()
            qp.queued = False
            if qp._fetched:
                qp._fetched = False
            elif qp.flow_key in ref:  # QpContextCache.touch's hit path, inlined
                ref[qp.flow_key] = 1
                cache.hits += 1
            elif not cache.touch(qp.flow_key) and pipe.miss_penalty_s > 0:
                # QP context miss: fetch it over PCIe; the QP waits, others go on
                qp._fetched = True
                start += pipe.miss_busy_s
                pipe.next_free = start
                qp.queued = True
                t = now + pipe.miss_penalty_s
                heappush(heap, (t, next(self._seq), qp))
                self._wake(t)
                if start > now + pipe.interval:
                    self._in_pull = False
                    self._wake(start)
                    return None
                continue
            pkt = qp.build(now)
            if pkt is None:
                continue
            pipe.packets += 1
            busy = start + pipe.interval
            if pipe.dma_bps is not None:
                d = pipe.dma_free
                d = (d if d > now else now) + pkt.size * 8.0 / pipe.dma_bps
                pipe.dma_free = d
                if d > busy:
                    busy = d
            pipe.next_free = busy
            self.tx_data_pkts += 1
            # Queue the QP again if it can send more (has data, window and credit allow):
            # ready now if its pacing time comes before this packet leaves the wire.
            snd = qp.snd
            if snd.n_lost or snd.snd_nxt < snd.end_psn:  # SenderReliability.has_data
                fcc = qp.fcc
                w = fcc.window_bytes
                c = fcc.credit_bytes
                if (w is None or snd.inflight_bytes < w) and (c is None or c > 0):
                    port_free = now + pkt.wire * 8.0 / self.ports[plane].rate_bps
                    if self.planes > 1:
                        ev = qp.sel.next_ev(now)
                        qp.next_ev = ev
                        qp.next_plane = qp.sel.plane_of(ev)
                    qp.queued = True
                    t = qp.next_time
                    if t <= port_free:
                        p = qp.next_plane
                        self._ready[p].append(qp)
                        if p != 0 or self.planes > 1:
                            port = self.ports[p]
                            if not port._tx_pending and port._busy_until <= now:
                                self._wake(now)  # another plane's idle port: kick it from an event
                    else:
                        due = fcc.timer_due_s
                        heappush(heap, (t if t < due else due, next(self._seq), qp))
            self._in_pull = False
            return pkt
        self._in_pull = False
        if heap:
            self._wake(heap[0][0])
        return None

    # ------------------------------------------------------------------ control packets
    def _send_ctrl(self, pkt: RdmaPacket, plane: int) -> None:
        pipe = self.tx_pipe
        now = self.env._now
        nf = pipe.next_free
        pipe.next_free = (nf if nf > now else now) + pipe.interval
        if self._in_pull:
            call_at(self.env, now, self._send_deferred, (pkt, plane))
        else:
            self.ports[plane].send(pkt)

    def _send_deferred(self, arg: tuple[RdmaPacket, int]) -> None:
        self.ports[arg[1]].send(arg[0])

    def request_credit(self, qp: QueuePair, nbytes: int, refresh: bool = False) -> None:
        """Ask ``qp``'s receiver for ``nbytes`` of credit (RCCC) with a control packet;
        ``refresh``: ``nbytes`` is everything ``qp`` still wants (a repeat after a timeout),
        not more."""
        now = self.env._now
        pkt = RdmaPacket(
            K_PROBE,
            0,
            self.ack_wire,
            self.eids[0],
            qp.dst_nic.eids[0],
            qp.flow_key,
            0,
            0,
            now,
            qp,
            (F_CREDIT_REQ | F_CREDIT_REFRESH) if refresh else F_CREDIT_REQ,
        )
        pkt.aux = nbytes
        self._send_ctrl(pkt, 0)

    def send_probe(self, qp: QueuePair, now: float) -> None:
        """An RTT probe for ``qp`` (the CC asked for one); the receiver echoes it."""
        pkt = RdmaPacket(
            K_PROBE,
            0,
            self.ack_wire,
            self.eids[0],
            qp.dst_nic.eids[0],
            qp.flow_key,
            0,
            qp.sel.next_ev(now),
            now,
            qp,
        )
        self._send_ctrl(pkt, 0)

    # ------------------------------------------------------------------ receive
    def receive(self, pkt: RdmaPacket) -> None:
        """Fabric delivery of any packet addressed to one of this NIC's endpoints."""
        now = self.env._now
        # The RX pipeline (PacketPipeline.admit, inlined): packet rate, QP context, DMA.
        pipe = self.rx_pipe
        t = pipe.next_free
        if t < now:
            t = now
        out = t
        busy = pipe.interval
        cache = self.cache
        flow = pkt.flow
        ref = cache._ref
        if flow in ref:  # QpContextCache.touch's hit path, inlined
            ref[flow] = 1
            cache.hits += 1
        elif not cache.touch(flow):
            busy += pipe.miss_busy_s
            out = t + pipe.miss_penalty_s
        pipe.next_free = t + busy
        pipe.packets += 1
        if pipe.dma_bps is not None and pkt.size:
            d = pipe.dma_free
            d = (d if d > now else now) + pkt.size * 8.0 / pipe.dma_bps
            pipe.dma_free = d
            if d > out:
                out = d
        # One QP's packets leave the pipeline in arrival order: a context miss on one packet
        # holds the QP's later packets too (they need the same context). A wait of at most one
        # pipeline slot is not simulated as an event (an ACK 1.7 ns behind a data packet on the
        # wire would otherwise cost one): the reservation above still advanced, so the rate
        # limit holds over any longer span and a real backlog is deferred.
        kind = pkt.kind
        if kind == K_DATA:
            side = pkt.rq  # data arrives at the responder: its side, not the sender's QP
        else:
            qp = pkt.meta
            side = qp if kind == K_ACK or qp.nic is self else qp.rx
        hold = side.rx_hold
        if hold > now or out > now + pipe.interval:
            if hold > out:
                out = hold
            side.rx_hold = out
            self.rx_deferred += 1
            call_at(self.env, out, self._rx_later, pkt)
            return
        if kind == K_DATA:
            self._rx_data(pkt, side, now)
        elif kind == K_ACK:
            qp.on_ack(pkt, now)
            if not qp.queued:
                self.activate(qp)
        else:
            self._rx(pkt, now)

    def _rx_deferred(self, pkt: RdmaPacket) -> None:
        self._rx(pkt, self.env._now)

    def _rx(self, pkt: RdmaPacket, now: float) -> None:
        kind = pkt.kind
        qp: QueuePair = pkt.meta
        if kind == K_DATA:
            self._rx_data(pkt, pkt.rq, now)
        elif kind == K_ACK:
            qp.on_ack(pkt, now)
            if not qp.queued:
                self.activate(qp)
        elif kind == K_NACK:
            qp.on_nack(pkt, now)
            if not qp.queued:
                self.activate(qp)
        elif kind == K_CNP:
            qp.on_cnp(pkt, now)
        elif kind == K_PROBE:
            self._rx_probe(pkt, qp, now)

    def _rx_data(self, pkt: RdmaPacket, rq: RecvQp, now: float) -> None:
        """A data packet at the responder (``rq``, also its ReceiverReliability)."""
        self.rx_data_pkts += 1
        rq.rx_pkts += 1
        psn = pkt.psn
        size = pkt.size
        rq.rx_bytes += size
        nxt = rq.rcv_nxt
        if psn == nxt and not rq.ooo_bits:
            # ReceiverReliability.on_data for the next PSN with no hole to fill, inlined
            rq.delivered_bytes += size
            rq.rcv_nxt = nxt = nxt + 1
            rq.nak_sent = False
            pending = rq.pending + 1
            if pkt.flags & _ACK_NOW or pkt.ecn or pending >= rq.ack_every:
                rq.pending = 0
                v = ACK
            else:
                rq.pending = pending
                v = NONE
            if nxt >= rq._next_delivered:
                pkt.meta.delivered(nxt, now)
        else:
            v = rq.on_data(psn, size, bool(pkt.flags & _ACK_NOW), pkt.ecn)
            if rq.rcv_nxt != nxt and rq.rcv_nxt >= rq._next_delivered:
                pkt.meta.delivered(rq.rcv_nxt, now)
        cnp = self.cnp
        if cnp is not None and pkt.ecn and cnp.on_data(pkt.meta, True, now):
            qp = pkt.meta
            c = RdmaPacket(
                K_CNP, 0, self.cnp_wire, pkt.dst, pkt.src, pkt.flow, pkt.psn, pkt.ev, now, qp
            )
            c.dpsn = pkt.psn
            rq.cnps += 1
            self.cnps_sent += 1
            self._send_ctrl(c, self._plane_of_link(pkt))
        if v:
            # The data packet is consumed here: turn the object itself into the ACK/NACK (the
            # fabric keeps no reference to a delivered packet), saving an allocation per ACK.
            plane = self._plane_of_link(pkt) if self.planes > 1 else 0
            pkt.dpsn = pkt.psn
            pkt.ts_echo = pkt.ts
            pkt.ts = now
            src = pkt.src
            pkt.src = pkt.dst
            pkt.dst = src
            pkt.size = 0
            pkt.wire = self.ack_wire  # ECN echo (pkt.ecn), INT echo (pkt.int_rec), EV kept as is
            if v == ACK:
                pkt.kind = K_ACK
                pkt.psn = rq.rcv_nxt
                pkt.aux = rq.sack_report(pkt.dpsn) if rq.sack_bits is not None else rq.ooo_bits
                if rq.dup_pending:
                    rq.dup_pending = False
                    pkt.flags = F_DUP
                else:
                    pkt.flags = 0
                rq.ack_pkts += 1
                self.acks_sent += 1
            else:
                pkt.kind = K_NACK
                pkt.psn = rq.nack_psn
                pkt.aux = 0
                pkt.flags = F_SEQ_ERR if v == SEQ_NAK else 0
                rq.nacks += 1
                self.nacks_sent += 1
            # _send_ctrl, inlined (never inside a pull: deliveries are events)
            tx = self.tx_pipe
            nf = tx.next_free
            tx.next_free = (nf if nf > now else now) + tx.interval
            self.ports[plane].send(pkt)

    def _plane_of_link(self, pkt: RdmaPacket) -> int:
        if self.planes == 1:
            return 0
        return self.eids.index(pkt.dst)

    def _rx_probe(self, pkt: RdmaPacket, qp: QueuePair, now: float) -> None:
        flags = pkt.flags
        if flags & F_CREDIT_REQ:  # at the receiver
            credit = self.credit
            if credit is None:
                return
            if flags & F_CREDIT_REFRESH:
                credit.refresh(qp, pkt.aux, now)
            else:
                credit.request(qp, pkt.aux, now)
            if self._credit_cb is None:
                self._credit_cb = call_at(self.env, now + credit.interval_s, self._grant)
        elif flags & F_CREDIT_GRANT:  # at the sender
            qp.on_credit(pkt.aux, now)
            self.activate(qp)
        elif flags & F_PROBE_REPLY:  # at the sender
            qp.on_probe_reply(pkt, now)
            self.activate(qp)
        else:  # a probe at the receiver: echo it
            r = RdmaPacket(
                K_PROBE,
                0,
                self.ack_wire,
                pkt.dst,
                pkt.src,
                pkt.flow,
                0,
                pkt.ev,
                now,
                qp,
                F_PROBE_REPLY,
            )
            r.ts_echo = pkt.ts
            self._send_ctrl(r, self._plane_of_link(pkt))

    def _grant(self, _arg: object = None) -> None:
        self._credit_cb = None
        credit = self.credit
        now = self.env._now
        for qp, nbytes in credit.grant(now):
            g = RdmaPacket(
                K_PROBE,
                0,
                self.ack_wire,
                self.eids[0],
                qp.nic.eids[0],
                qp.flow_key,
                0,
                0,
                now,
                qp,
                F_CREDIT_GRANT,
            )
            g.aux = nbytes
            self._send_ctrl(g, 0)
        if credit.active:
            self._credit_cb = call_at(self.env, now + credit.interval_s, self._grant)

    # ------------------------------------------------------------------ completion
    def message_done(self, msg: Message) -> None:
        self.rdma._message_done(msg)

    def message_failed(self, msg: Message) -> None:
        self.rdma._message_failed(msg)

    def __repr__(self) -> str:
        return f"SmartNic(nic{self.card} planes={self.planes} qps={len(self.qps)})"


class RdmaNetwork:
    """SmartNICs on every NIC card of ``network``, and the runner-facing API.

    ``config`` applies to every NIC (``nic_configs`` may override it per card). One congestion
    control instance (parameters only) serves all NICs; per-flow state lives in each QP.
    ``seed`` drives every random choice of the transport (path selectors), so the same seed
    gives bit-identical results.

    Typical use::

        env = simpy.Environment()
        net = Network(env, build_topology("leaf-spine", hosts_per_leaf=4, leaves=2), seed=1)
        rdma = RdmaNetwork(net, NicConfig(cc="dcqcn", selector="spray"), seed=1)
        rdma.post(0, 5, 1 << 20)               # NIC card 0 -> card 5, 1 MiB RDMA WRITE
        rdma.post_trace(trace_df, rank_map.nic)  # rows with hop == "rdma"
        rdma.run()                              # until every posted message completed
        df = rdma.message_table()              # one row per message
    """

    def __init__(
        self,
        network: Network,
        config: NicConfig | None = None,
        *,
        seed: int = 0,
        nic_configs: Mapping[int, NicConfig] | None = None,
        cards: Iterable[int] | None = None,
    ) -> None:
        self.network = network
        self.env = network.env
        self.config = config or NicConfig()
        self.seed = int(seed)
        self.cc = make_cc(
            self.config.cc, self.config.cc_params, allow_plugins=self.config.allow_plugins
        )
        g = network.graph
        by_card: dict[int, list[tuple[int, str]]] = {}
        for name in network.endpoints:
            d = g.nodes[name]
            if d.get("role") != "nic":
                continue
            by_card.setdefault(int(d["nic"]), []).append((int(d.get("plane", 0)), name))
        wanted = sorted(by_card) if cards is None else sorted(set(cards))
        overrides = dict(nic_configs or {})
        self.nics: dict[int, SmartNic] = {}
        self._ccs: dict[int, CongestionControl] = {}
        for card in wanted:
            if card not in by_card:
                raise ValueError(
                    f"NIC card {card!r} is not in the network; cards: {sorted(by_card)[:8]}..."
                )
            cfg = overrides.get(card, self.config)
            cc = (
                self.cc
                if cfg is self.config
                else make_cc(cfg.cc, cfg.cc_params, allow_plugins=cfg.allow_plugins)
            )
            eps = [n for _, n in sorted(by_card[card])]
            self.nics[card] = SmartNic(self, card, eps, cfg, cc)
        self.messages: list[Message] = []
        self._qp_ids = itertools.count()
        self._qp_list: list[QueuePair] = []
        self._pending = 0
        self._running = False  # inside run(until=None): the last completion ends the run
        self._rtt_cache: dict[tuple[int, int, bool], tuple[float, int]] = {}
        #: a switch routes DATA packets adaptively: any QP's packets may arrive out of order
        self._switch_ar = any(sw.config.adaptive for sw in network.switches.values())
        self._rr: dict[tuple[int, int], int] = {}
        self.on_done: list[Callable[[Message], object]] = []
        #: called with each message that failed (its QP exceeded the retry limit)
        self.on_failed: list[Callable[[Message], object]] = []

    # ------------------------------------------------------------------ lookup
    def nic(self, card: int) -> SmartNic:
        try:
            return self.nics[card]
        except KeyError:
            raise ValueError(
                f"no SmartNic for NIC card {card!r}; cards are {sorted(self.nics)[:8]}..."
            ) from None

    def qp(self, src: int, dst: int, index: int = 0) -> QueuePair:
        """QP ``index`` from NIC card ``src`` to card ``dst`` (created on first use)."""
        return self.nic(src).qp_to(self.nic(dst), index)

    def _new_qp(self, src: SmartNic, dst: SmartNic, index: int, tc: int = 0) -> QueuePair:
        if src is dst:
            raise ValueError(f"a QP needs two different NICs; got nic{src.card} to itself")
        if src.planes != dst.planes:
            raise ValueError(
                f"nic{src.card} has {src.planes} planes, nic{dst.card} {dst.planes}: a QP "
                "spreads over planes both ends share"
            )
        cfg = src.config
        qid = next(self._qp_ids)
        classes = self.network.classes
        if tc and (classes is None or not 0 <= tc < len(classes)):
            n = 1 if classes is None else len(classes)
            raise ValueError(f"traffic class {tc!r}: the network has {n} class(es), 0 .. {n - 1}")
        # the seed does not depend on the class: a message's paths do not change when only its
        # class does (QP n of two classes between the same NICs draws the same entropy values)
        rng = qp_rng(self.seed, src.card, dst.card, index)
        sel = make_selector(
            cfg.selector,
            cfg.n_evs,
            rng,
            src.planes,
            dict(cfg.selector_params),
            allow_plugins=cfg.allow_plugins,
        )
        line = (
            src.ports[0].rate_bps if (sel.single_path or src.planes == 1) else (src.line_rate_bps)
        )
        base_rtt, hops = self._base_rtt(src, dst, cfg.mtu)
        fcc = src.cc.new_flow(qid, line, base_rtt, cfg.mtu, hops, self.env.now)
        dc = dst.config
        rq = RecvQp(dst.mode, dst.rob, dc.ack_every, dc.sack_bits, dc.seq_nak, dc.ack_gap_fill)
        qp = QueuePair(
            qid,
            src,
            dst,
            index,
            mtu=cfg.mtu,
            mode=src.mode,
            selector=sel,
            cc=src.cc,
            fcc=fcc,
            rx=rq,
            reo_factor=cfg.reo_factor,
            reo_min_s=cfg.reo_min_s,
            rto_min_s=cfg.rto_min_s,
            rto_max_s=cfg.rto_max_s,
            retry_limit=cfg.retry_limit,
            sack_bits=dst.config.sack_bits,
        )
        qp.tc = tc
        qp.reorders = qp.reorders or self._switch_ar
        qp.flow_key = qp_flow_key(src.card, dst.card, index, tc)
        self._qp_list.append(qp)
        return qp

    def _base_rtt(self, src: SmartNic, dst: SmartNic, mtu: int) -> tuple[float, int]:
        key = (src.card, dst.card, False)
        hit = self._rtt_cache.get(key)
        if hit is None:
            net = self.network
            a, b = src.endpoints[0], dst.endpoints[0]
            path = net.first_path(a, b) or net.static_path(a, b)  # set up during an outage
            if not path:
                raise ValueError(f"no path from {a!r} to {b!r} in the network")
            rtt = net.base_rtt(a, b, mtu + src.overhead, src.ack_wire)
            hit = (rtt, len(path) - 2)
            self._rtt_cache[key] = hit
        return hit

    # ------------------------------------------------------------------ posting
    def post(
        self,
        src: int,
        dst: int,
        size: int,
        *,
        op: str | int = "write",
        at: float | None = None,
        qp: int | None = None,
        tag: Any = None,
        tc: int = 0,
    ) -> Message:
        """Post an RDMA ``op`` of ``size`` bytes from NIC card ``src`` to ``dst``.

        ``at`` absolute simulated time to post (default now); ``qp`` the QP index (default:
        round-robin over ``qps_per_pair``); ``tag`` any user value kept in the results; ``tc``
        the traffic class (an index into the network's classes; each class has its own QPs).
        """
        if isinstance(size, bool) or not isinstance(size, int | float) or int(size) != size:
            raise ValueError(f"message size {size!r}; expected an int number of bytes >= 0")
        size = int(size)
        if size < 0:
            raise ValueError(f"message size {size!r}; expected bytes >= 0")
        opcode = check_opcode(op)
        s, d = self.nic(src), self.nic(dst)
        now = self.env.now
        when = now if at is None else float(at)
        if when < now:
            raise ValueError(f"post at={at!r} is before now={now!r}")
        if qp is None:
            n = s.config.qps_per_pair
            index = 0
            if n > 1:
                k = self._rr.get((src, dst), 0)
                self._rr[(src, dst)] = k + 1
                index = k % n
        else:
            index = int(qp)
        q = s.qp_to(d, index, tc)
        msg = Message(len(self.messages), q, size, opcode, when, tag)
        self.messages.append(msg)
        self._pending += 1
        if when > now:
            call_at(self.env, when, self._post_now, msg)
        else:
            self._post_now(msg)
        return msg

    def _post_now(self, msg: Message) -> None:
        msg.post_s = self.env._now
        qp = msg.qp
        qp.post(msg)
        qp.nic.activate(qp)

    def post_trace(
        self,
        trace: pd.DataFrame,
        rank_nic: Sequence[int] | Mapping[int, int] | Any,
        *,
        t0: float | None = None,
        hops: Sequence[str] = ("rdma",),
        op: str = "write",
    ) -> list[Message]:
        """Post every row of a workload trace (team contract: ``src_rank``, ``dst_rank``,
        ``bytes``, ``start_s``, ``hop`` ...) whose ``hop`` is in ``hops``.

        ``rank_nic`` maps a rank to its NIC card: a sequence/array indexed by rank, a mapping,
        or a :class:`podsim.fabric.rankmap.RankMap` (its ``nic`` array). Rows are posted at
        ``t0 + start_s`` (``t0`` default now); ranks on the same NIC are skipped (no network
        transfer). Each message's ``tag`` is the trace row's index label.
        """
        need = {"src_rank", "dst_rank", "bytes", "start_s", "hop"}
        missing = sorted(need - set(trace.columns))
        if missing:
            raise ValueError(f"trace lacks column(s) {missing}; expected the trace contract")
        nic_of = getattr(rank_nic, "nic", rank_nic)
        base = self.env.now if t0 is None else float(t0)
        rows = trace[trace["hop"].isin(list(hops))]
        out: list[Message] = []
        for idx, s, d, nb, st in zip(
            rows.index,
            rows["src_rank"].to_numpy(),
            rows["dst_rank"].to_numpy(),
            rows["bytes"].to_numpy(),
            rows["start_s"].to_numpy(),
            strict=True,
        ):
            try:
                a, b = int(nic_of[int(s)]), int(nic_of[int(d)])
            except (KeyError, IndexError):
                raise ValueError(
                    f"trace row {idx!r}: rank {int(s)} or {int(d)} has no NIC in rank_nic"
                ) from None
            if a == b:
                continue
            out.append(self.post(a, b, int(nb), op=op, at=base + float(st), tag=idx))
        return out

    # ------------------------------------------------------------------ running
    @property
    def pending(self) -> int:
        """Messages posted (or scheduled) and not yet complete or failed."""
        return self._pending

    def _message_done(self, msg: Message) -> None:
        self._pending -= 1
        if not self._pending and self._running:
            stop_after_event(self.env, self._stop_now)
        for fn in self.on_done:
            fn(msg)

    def _message_failed(self, msg: Message) -> None:
        """``msg`` failed (``msg.error`` says why): it no longer counts as pending."""
        self._pending -= 1
        if not self._pending and self._running:
            stop_after_event(self.env, self._stop_now)
        for fn in self.on_failed:
            fn(msg)

    def _stop_now(self) -> bool:
        # run(until=None) ends after the event in which the last pending message finished,
        # unless that event posted more (an on_done callback) or the run is over already
        return self._running and not self._pending

    def run(self, until: float | None = None) -> float:
        """Run the simulation and return the simulated time reached.

        ``until=None``: until every posted message has completed (the time of the last
        completion); raises RuntimeError if no event is left while messages are pending (e.g.
        a destination became unreachable and nothing retries). ``until=T``: to time T exactly,
        like ``env.run(until=T)``, whether or not messages remain."""
        env = self.env
        if until is not None:
            if until > env._now:
                kernel_run(env, until)
            return env._now
        if self._pending:
            # no stop predicate per event: the last completion schedules the stop
            self._running = True
            try:
                kernel_run(env)
            finally:
                self._running = False
        if self._pending:
            raise RuntimeError(
                f"simulation ran dry at t={env._now:.9g}s with {self._pending} message(s) pending"
            )
        return env._now

    # ------------------------------------------------------------------ results
    def message_table(self) -> pd.DataFrame:
        """One row per posted message: ids, endpoints, bytes, times, retransmitted packets."""
        import pandas as pd

        ms = self.messages
        return pd.DataFrame(
            {
                "msg": [m.id for m in ms],
                "qp": [m.qp.id for m in ms],
                "src": [m.qp.nic.card for m in ms],
                "dst": [m.qp.dst_nic.card for m in ms],
                "op": ["write" if m.opcode == 0 else "send" for m in ms],
                "bytes": [m.size for m in ms],
                "packets": [m.npkts for m in ms],
                "post_s": [m.post_s for m in ms],
                "start_s": [m.start_s for m in ms],
                "delivered_s": [m.t_delivered for m in ms],
                "done_s": [m.done_s for m in ms],
                "fct_s": [m.done_s - m.post_s for m in ms],
                "retx_pkts": [m.retx_pkts for m in ms],
                "tag": [m.tag for m in ms],
                "tc": [m.qp.tc for m in ms],
                "error": [m.error or "" for m in ms],
            }
        )

    def qp_table(self) -> pd.DataFrame:
        """One row per QP: sender and receiver counters, reliability and path state."""
        import pandas as pd

        qs = self._qp_list
        return pd.DataFrame(
            {
                "qp": [q.id for q in qs],
                "src": [q.nic.card for q in qs],
                "dst": [q.dst_nic.card for q in qs],
                "index": [q.index for q in qs],
                "tc": [q.tc for q in qs],
                "selector": [type(q.sel).__name__ for q in qs],
                "mode": ["sr" if q.mode else "gbn" for q in qs],
                "tx_pkts": [q.tx_pkts for q in qs],
                "tx_bytes": [q.tx_bytes for q in qs],
                "acked_bytes": [q.snd.acked_bytes for q in qs],
                "retx_pkts": [q.snd.retransmits for q in qs],
                "timeouts": [q.snd.timeouts for q in qs],
                "failed": [q.failed or "" for q in qs],
                "nacks_rcvd": [q.nacks_rcvd for q in qs],
                "ecn_acks": [q.ecn_acks for q in qs],
                "cnps_rcvd": [q.cnps_rcvd for q in qs],
                "srtt_s": [q.snd.srtt for q in qs],
                "rate_bps": [q.fcc.send_rate_bps for q in qs],
                "window_bytes": [q.fcc.window_bytes for q in qs],
                "rx_pkts": [q.rx.rx_pkts for q in qs],
                "rx_delivered_bytes": [q.rx.rel.delivered_bytes for q in qs],
                "rx_dup_pkts": [q.rx.rel.dup_pkts for q in qs],
                "rx_ooo_drops": [q.rx.rel.ooo_drops for q in qs],
                "acks_sent": [q.rx.ack_pkts for q in qs],
                "nacks_sent": [q.rx.nacks for q in qs],
                "cnps_sent": [q.rx.cnps for q in qs],
                "paths_used": [len(q.evs_used) for q in qs],
            }
        )

    def nic_table(self) -> pd.DataFrame:
        """One row per NIC card: packet counters, pipeline, cache and reorder buffer."""
        import pandas as pd

        ns = list(self.nics.values())
        return pd.DataFrame(
            {
                "nic": [n.card for n in ns],
                "planes": [n.planes for n in ns],
                "qps": [len(n.qps) for n in ns],
                "tx_data_pkts": [n.tx_data_pkts for n in ns],
                "rx_data_pkts": [n.rx_data_pkts for n in ns],
                "acks_sent": [n.acks_sent for n in ns],
                "nacks_sent": [n.nacks_sent for n in ns],
                "cnps_sent": [n.cnps_sent for n in ns],
                "tx_pipe_pkts": [n.tx_pipe.packets for n in ns],
                "rx_pipe_pkts": [n.rx_pipe.packets for n in ns],
                "rx_deferred": [n.rx_deferred for n in ns],
                "qpc_hits": [n.cache.hits for n in ns],
                "qpc_misses": [n.cache.misses for n in ns],
                "rob_max_bytes": [n.rob.max_used for n in ns],
                "rob_drops": [n.rob.drops for n in ns],
            }
        )

    def __repr__(self) -> str:
        return (
            f"RdmaNetwork({len(self.nics)} NICs, {len(self._qp_list)} QPs, "
            f"{len(self.messages)} messages, {self._pending} pending)"
        )
