# cython: language_level=3, annotation_typing=False
"""Output-queued switches: shared buffer, dynamic thresholds, ECN, PFC, ECMP.

Model (what it assumes):

* **Output queued.** A packet arriving at a switch (after the link's propagation, FEC and the
  switch's port-to-port latency, see :mod:`podsim.fabric.port`) is routed and placed straight into
  its egress port's queue; there is no ingress queueing or fabric contention inside the chip.
* **Shared buffer with dynamic thresholds** (Choudhury & Hahne, "Dynamic queue length
  thresholds for shared-memory packet switches", IEEE/ACM ToN 1998): an egress queue may grow
  only while ``q + wire <= alpha * (B - used)``; a packet that does not fit is tail-dropped, as
  is any packet that would overflow the whole buffer ``B``. A packet occupies the buffer from
  its arrival until it starts serialising (the frame on the wire is in the MAC, as in the HPCC
  ns-3 switch model). A packet that finds its egress port idle goes straight to the wire and is
  never buffered. Buffer accounting uses wire bytes (payload + 82 B).
* **ECN** (RED on the instantaneous queue, by bytes): when a DATA packet starts serialising
  with ``q`` bytes still queued behind it on that port, it is marked with probability 0 for
  ``q <= kmin``, ``pmax * (q - kmin) / (kmax - kmin)`` up to ``kmax`` and 1 above (marking at
  dequeue, as the HPCC/DCQCN ns-3 switch does, so the mark is not delayed by the queue).
  Defaults 150 KB / 1500 KB are the NVIDIA RoCE defaults (docs/physics.md, "Switches" [S]); pmax
  0.2 follows HPCC's ns-3 scripts [E]. Each switch has its own ``random.Random`` seeded from
  the network seed and its name, so runs are reproducible.
* **PFC** (optional, 802.1Qbb, one lossless class): the switch counts, per ingress link, the
  bytes that arrived on it and are still buffered. Above ``pfc_xoff_bytes`` it sends a PAUSE
  frame upstream (84 B of link time, ahead of queued packets); at or below ``pfc_xon_bytes`` a
  RESUME. The upstream port stops starting DATA packets when the PAUSE arrives (the frame on the
  wire finishes). With PFC on, DATA is never dropped by the dynamic threshold, only if the whole
  buffer overflows, which means the headroom (per ingress: one round trip of the link at line
  rate plus two MTUs) was sized too small. Pause refresh quanta are not modelled: a PAUSE holds
  until the RESUME.
* **Priorities:** control packets (ACK/NACK/CNP/PROBE) use a strict-priority queue that PFC
  never pauses and the dynamic threshold never drops (only a full buffer does).
* **INT** (HPCC): a DATA packet whose ``int_rec`` is a list gets
  ``(qlen_bytes, tx_bytes, time_s, rate_bps)`` appended at each switch egress, taken when it
  starts serialising (qlen after its own dequeue, tx_bytes before it, as HPCC's ns-3 code).
* **ECMP:** the egress among ``n`` equal-cost next hops is
  ``(((hash((flow, ev)) ^ key) * C mod 2^64) >> 32) * n >> 32``: the tuple hash, XOR a
  per-switch random 64-bit key, one odd multiply (SplitMix64's constant) and the top 32 bits
  scaled to ``n``. Python's tuple hash alone (``% n``) is not enough: its low bits are strongly
  correlated between keys, which polarises successive tiers; with this mix the choices at
  different switches are independent (a test checks that all fat-tree cores are used evenly
  within a binomial bound). Python hashes of int tuples do not depend on PYTHONHASHSEED and the
  keys come from the seed, so this is deterministic.

Defaults (docs/physics.md, "Switches"): port-to-port latency 0.6-1 us [E] -> 600 ns, cut-through;
shared buffer 100-160 MB for a 51.2 Tb/s chip of 128 x 400G ports [E] -> 1.25 MB per port
(160 MB / 128) times the ports in use.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from heapq import heappush
from typing import Any

import simpy
from podsim.fabric import params
from podsim.fabric.kernel import call_at
from podsim.fabric.packet import (
    MAX_DATA_WIRE_BYTES,
    PAUSE,
    PAUSE_FRAME_WIRE_BYTES,
    RESUME,
    Packet,
)
from podsim.fabric.params import param
from podsim.fabric.port import Port

__all__ = ["Ingress", "Switch", "SwitchConfig", "SwitchPort", "ecmp_choice", "switch_rng"]

_INF = float("inf")
_M64 = (1 << 64) - 1
_MIX = 0xBF58476D1CE4E5B9  # SplitMix64's first multiplier (odd, well spread bits)


def switch_rng(seed: int, name: str) -> random.Random:
    """The random stream of switch ``name`` in a network of ``seed``; its first 64 bits are the
    switch's ECMP hash key (so the flow engine can replay a switch's choices without one)."""
    return random.Random(f"{seed}/switch/{name}")


def ecmp_choice(flow: int, ev: int, salt: int, n: int) -> int:
    """Which of ``n`` equal-cost next hops a switch with hash key ``salt`` gives packets of
    (``flow``, ``ev``) (the module docstring's ECMP hash; :meth:`Switch.select` and the flow
    engine's replay use it, the forwarding hot path inlines it)."""
    x = ((hash((flow, ev)) ^ salt) * _MIX) & _M64
    return ((x >> 32) * n) >> 32


@dataclass(frozen=True)
class SwitchConfig:
    """Switch parameters, SI units (bytes, seconds). Build from human strings with
    :meth:`from_mapping` (``{"latency_s": "600ns", "ecn_kmin_bytes": "150KB"}``).

    Every field is declared with :func:`podsim.fabric.params.param` (scenario key under
    ``cluster.switch``, unit, description, source); the scenario schema's switch section and
    ``podsim docs`` are generated from it, so these are the only switch defaults.
    """

    latency_s: float = param(
        600e-9,
        key="latency",
        kind="time",
        minimum=0,
        doc="port-to-port forwarding latency",
        source="[E] 0.6-1 us for 51.2 Tb/s ASICs, docs/physics.md 'Switches'",
    )
    store_and_forward: bool = param(
        False,
        key="store_and_forward",
        kind="bool",
        doc="wait for a whole frame before forwarding it (false: cut-through once the header is "
        "in, when the egress is not faster than the ingress)",
        source="[S] datacentre ASICs cut through by default",
    )
    buffer_bytes: int | None = param(
        64 * 2**20,
        key="buffer",
        kind="size",
        minimum=1,
        optional=True,
        doc="shared packet buffer of each switch; null: buffer_per_port x its ports",
        source="[E] a 25.6-51.2 Tb/s-class chip holds 64-160 MB (docs/physics.md 'Switches')",
    )
    buffer_per_port_bytes: int = param(
        1_250_000,
        key="buffer_per_port",
        kind="size",
        minimum=1,
        doc="buffer per port when buffer is null",
        source="[E] 160 MB / 128 x 400G ports (docs/physics.md 'Switches')",
    )
    dt_alpha: float | None = param(
        1.0,
        key="alpha",
        kind="float",
        minimum=0,
        exclusive=True,
        optional=True,
        doc="dynamic-threshold alpha: a queue may hold alpha x the free buffer (null: no "
        "dynamic threshold, a queue may fill the whole free buffer)",
        source="[E] Choudhury & Hahne, IEEE/ACM ToN 1998; vendors default to 1 or thereabouts",
    )
    ecn: bool = param(
        True,
        key="ecn.enabled",
        kind="bool",
        doc="mark ECN-capable packets by queue depth",
        source="[S] RoCE deployments run ECN (DCQCN); NVIDIA RoCE configuration",
    )
    ecn_kmin_bytes: int = param(
        150_000,
        key="ecn.kmin",
        kind="size",
        minimum=0,
        doc="queue depth where marking starts",
        source="[S] NVIDIA Onyx/Cumulus RoCE default 150 KB (docs/physics.md 'Switches')",
    )
    ecn_kmax_bytes: int = param(
        1_500_000,
        key="ecn.kmax",
        kind="size",
        minimum=0,
        doc="queue depth where the marking probability reaches pmax",
        source="[S] NVIDIA Onyx/Cumulus RoCE default 1500 KB (docs/physics.md 'Switches')",
    )
    ecn_pmax: float = param(
        0.2,
        key="ecn.pmax",
        kind="fraction",
        doc="marking probability at kmax",
        source="[E] the HPCC repository's ns-3 scripts",
    )
    pfc: bool = param(
        False,
        key="pfc.enabled",
        kind="bool",
        doc="lossless operation with PFC pause frames (off: lossy RoCE with ECN)",
        source="[S] lossy RoCE with ECN is the modern default (docs/physics.md)",
    )
    pfc_xoff_bytes: int = param(
        2_000_000,
        key="pfc.xoff",
        kind="size",
        minimum=1,
        doc="ingress bytes queued that pause the upstream port; above ecn.kmax so that ECN "
        "acts before PFC",
        source="[E] above the 1500 KB ECN kmax, as 'ECN must fire before PFC' (docs/physics.md)",
    )
    pfc_xon_bytes: int = param(
        1_000_000,
        key="pfc.xon",
        kind="size",
        minimum=0,
        doc="ingress bytes queued that resume the upstream port (below xoff)",
        source="[E]",
    )
    pfc_hold_until_sent: bool = param(
        False,
        key="pfc.hold_until_sent",
        kind="bool",
        doc="the PFC ingress count holds a frame's bytes until its last bit has left the "
        "egress, and counts frames that go straight to an idle egress for their "
        "serialisation too (false: a frame leaves the count when it starts serialising, and "
        "one that finds its egress idle is never counted). Holding pauses one frame earlier "
        "and resumes with one frame less queued, which matters when xon is below the round "
        "trip of a resume",
        source="[S] false: the HPCC ns-3 switch (switch-node.cc SwitchNotifyDequeue at "
        "transmit start); true: the UEC reference simulator's LosslessInputQueue, which "
        "releases a frame in completedService, at the end of its serialisation "
        "(uet-htsim 40ccb05 queue_lossless_input.cpp); a shared-buffer MMU frees a frame's "
        "cells as they are read out, between the two",
    )

    credit_buffer_bytes: int | None = param(
        None,
        key="credit_buffer",
        kind="size",
        minimum=1,
        optional=True,
        doc="InfiniBand credit-based link flow control: the input buffer each switch port "
        "grants its upstream sender as credits (null: none, as Ethernet); the fabric is then "
        "lossless without PFC, and a switch's buffer is these grants (buffer, "
        "buffer_per_port and alpha do not apply)",
        source="[S] IBTA vol. 1 section 7.9 (credit-based flow control); the size is [E]: "
        "enough to cover a link's round trip at line rate (2 us x 400 Gb/s = 100 kB for "
        "200 m) with room for bursts",
    )
    adaptive: bool = param(
        False,
        key="adaptive_routing",
        kind="bool",
        doc="adaptive routing: each DATA packet takes the least-loaded egress among its "
        "equal-cost next hops (false: ECMP hash of flow and entropy)",
        source="[S] per-packet AR of InfiniBand and Spectrum-X switches (NVIDIA, 'Adaptive "
        "Routing' in the Spectrum-X and Quantum docs); the UEC reference simulator's "
        "FatTreeSwitch::adaptive_route (uet-htsim 40ccb05) chooses the same way",
    )
    ar_quantum_bytes: int | None = param(
        None,
        key="adaptive_routing_quantum",
        kind="size",
        minimum=1,
        optional=True,
        doc="adaptive routing compares egress loads in whole units of this size (the load "
        "band), choosing uniformly at random among the egresses in the lowest band (null: "
        "exact bytes, ties at random). Hardware compares quantised load, so with a coarse "
        "band per-packet choices stay random instead of following the exact arrival order "
        "of the packets",
        source="[S] Juniper 'DLB port quality metric' (Broadcom-based switches map each ECMP "
        "member's port load and queue size to quality bands 0-7); the UEC reference "
        "simulator quantises queue size to 4 levels (< 5, 10, 20 % of the queue's capacity, "
        "uet-htsim 40ccb05 BaseQueue::quantized_queuesize); the band size is [E]",
    )

    def __post_init__(self) -> None:
        def bad(key: str, want: str) -> ValueError:
            return ValueError(f"switch config {key}={getattr(self, key)!r}: expected {want}")

        if not (self.latency_s >= 0 and math.isfinite(self.latency_s)):
            raise bad("latency_s", "a finite time >= 0 s")
        if self.buffer_bytes is not None and not self.buffer_bytes > 0:
            raise bad("buffer_bytes", "a size > 0 bytes or None")
        if not self.buffer_per_port_bytes > 0:
            raise bad("buffer_per_port_bytes", "a size > 0 bytes")
        if self.credit_buffer_bytes is not None:
            if not self.credit_buffer_bytes >= MAX_DATA_WIRE_BYTES:
                raise bad(
                    "credit_buffer_bytes",
                    f"a size >= {MAX_DATA_WIRE_BYTES} B (one largest DATA frame) or None",
                )
            if self.pfc:
                raise ValueError(
                    "switch config: credit_buffer_bytes (InfiniBand credit flow control) and "
                    "pfc (Ethernet PFC) exclude each other; credits are lossless already"
                )
        if self.dt_alpha is not None and not self.dt_alpha > 0:
            raise bad("dt_alpha", "a number > 0, or None (no dynamic threshold)")
        if not self.ecn_kmin_bytes >= 0:
            raise bad("ecn_kmin_bytes", "a size >= 0 bytes")
        if not self.ecn_kmax_bytes >= self.ecn_kmin_bytes:
            raise bad("ecn_kmax_bytes", f"a size >= ecn_kmin_bytes ({self.ecn_kmin_bytes})")
        if not 0.0 <= self.ecn_pmax <= 1.0:
            raise bad("ecn_pmax", "a probability in [0, 1]")
        if not self.pfc_xoff_bytes > 0:
            raise bad("pfc_xoff_bytes", "a size > 0 bytes")
        if not 0 <= self.pfc_xon_bytes <= self.pfc_xoff_bytes:
            raise bad("pfc_xon_bytes", f"a size in [0, pfc_xoff_bytes={self.pfc_xoff_bytes}]")
        if self.ar_quantum_bytes is not None:
            if not self.ar_quantum_bytes >= 1:
                raise bad("ar_quantum_bytes", "a size >= 1 byte or None")
            if not self.adaptive:
                raise ValueError(
                    "switch config: adaptive_routing_quantum applies only with "
                    "adaptive_routing: true"
                )

    def buffer_for(self, ports: int) -> int:
        """The shared buffer of a switch with ``ports`` ports: ``buffer_bytes``, or
        ``buffer_per_port_bytes`` per port when that is None."""
        if self.buffer_bytes is not None:
            return self.buffer_bytes
        return self.buffer_per_port_bytes * ports

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> SwitchConfig:
        """Build from a mapping of field names whose quantities may be human strings
        ("150KB", "600ns", "400Mpps"), parsed by each field's declared kind."""
        return params.from_mapping(cls, values, "switch config")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Ingress:
    """A switch's accounting of one incoming link: the bytes it has buffered from that link
    (``rx_bytes``, its peak ``max_rx_bytes``) and whether it has paused the link with PFC
    (``xoff``). Owned by the switch (:attr:`Switch.ingresses`); ``port`` is the far end's egress
    port, which a PAUSE stops (or whose credits this input grants)."""

    __slots__ = ("max_rx_bytes", "port", "rx_bytes", "xoff")

    def __init__(self, port: Port) -> None:
        self.port = port
        self.rx_bytes = 0
        self.max_rx_bytes = 0
        self.xoff = False


class SwitchPort(Port):
    """An egress port owned by a :class:`Switch`: dequeue releases the shared buffer, applies
    ECN marking, INT stamping and the PFC resume check."""

    __slots__ = ("_kmax", "_kmin", "_rand", "_slope")

    def _tx_done(self, _ev: object) -> None:
        if self._macq:
            self._tx_pending = False
            self._start_mac(self._macq.popleft())
            return
        if self._hq:
            pkt = self._hq.popleft()
        elif self._q and not self.paused:
            pkt = self._q.popleft()
        else:
            self._tx_pending = False
            return
        w = pkt.wire
        q = self.qbytes - w
        self.qbytes = q
        sw = self.switch
        sw.used -= w
        ing = sw.ingresses[pkt.link]
        now = self._env._now
        if sw._hold:  # the ingress count keeps the frame until its last bit has left
            sw.held_bytes += w
            call_at(self._env, now + w * self._spb, sw._sent, (ing, w))
        else:
            ing.rx_bytes -= w
            if ing.xoff and ing.rx_bytes <= sw._xon:
                sw._send_resume(ing)
        if not pkt.kind:
            if ing.port._cr is not None:  # the frame left the buffer: its credits go back
                sw._credit_back(ing.port, w)
            if (
                q > self._kmin
                and (q > self._kmax or self._rand() < (q - self._kmin) * self._slope)
                and not pkt.ecn
            ):
                pkt.ecn = True
                self.ecn_marks += 1
            if pkt.int_rec is not None:
                pkt.int_rec.append((q, self.tx_bytes, now, self.rate_bps))
        # inlined Port._launch(pkt, now, bool(q or self._macq)): see _tx_done_readable
        end = now + w * self._spb
        self._busy_until = end
        self.tx_bytes += w
        self.tx_pkts += 1
        pkt.link = self
        heap = self._heap
        t = (end if self._rx_ser else now) + self._after  # inlined _put_on_wire(pkt, t)
        e = (t, 1, next(self._eid), pkt)
        wire = self._wire
        if not wire:
            pkt.callbacks = self._deliver
            wire.append(e)
            heappush(heap, e)
        elif t >= wire[-1][0]:
            pkt.callbacks = self._deliver
            wire.append(e)
        else:
            pkt.callbacks = self._deliver[1:]
            heappush(heap, e)
        if self._cr is not None and not pkt.kind:
            self.spend_credit(w)
        if q or self._macq:  # anything still queued (a switch port has no source)
            self._tx_pending = True  # already True unless called from kick()
            ev = self._txev
            ev.callbacks = self._txcb
            heappush(heap, (end, 1, next(self._eid), ev))
        else:
            self._tx_pending = False

    def _dequeue(self, pkt: Packet, now: float) -> int:
        """What leaving the queue does to ``pkt`` (readable twin's part): release the shared
        buffer and the ingress count (a PFC resume when it falls to xon), ECN-mark by the queue
        left behind, stamp INT. Returns the bytes still queued."""
        w = pkt.wire
        q, ing = self._release(pkt)
        sw = self.switch
        if sw._hold:  # the ingress count keeps the frame until its last bit has left
            ing.rx_bytes += w
            sw.held_bytes += w
            call_at(self._env, now + w * self._spb, sw._sent, (ing, w))
        elif ing.xoff and ing.rx_bytes <= sw._xon:
            sw._send_resume(ing)
        if not pkt.kind:
            if ing.port._cr is not None:  # the frame left the buffer: its credits go back
                sw._credit_back(ing.port, w)
            if (
                q > self._kmin
                and (q > self._kmax or self._rand() < (q - self._kmin) * self._slope)
                and not pkt.ecn
            ):
                pkt.ecn = True
                self.ecn_marks += 1
            if pkt.int_rec is not None:
                pkt.int_rec.append((q, self.tx_bytes, now, self.rate_bps))
        return q

    def _release(self, pkt: Packet) -> tuple[int, Ingress]:
        """``pkt`` leaves this port's queue: its wire bytes leave the queue count, the shared
        buffer and its ingress link's count. Returns (bytes still queued, that ingress)."""
        w = pkt.wire
        q = self.qbytes - w
        self.qbytes = q
        self.switch.used -= w
        ing = self.switch.ingresses[pkt.link]
        ing.rx_bytes -= w
        return q, ing

    def _tx_done_readable(self, _ev: object) -> None:
        """:meth:`_tx_done` with its dequeue and transmit start not inlined."""
        if self._macq:
            self._tx_pending = False
            self._start_mac(self._macq.popleft())
            return
        if self._hq:
            pkt = self._hq.popleft()
        elif self._q and not self.paused:
            pkt = self._q.popleft()
        else:
            self._tx_pending = False
            return
        now = self._env._now
        q = self._dequeue(pkt, now)
        self._launch(pkt, now, bool(q or self._macq))  # a switch port has no source


class Switch:
    """One switch: routes arriving packets to an egress :class:`SwitchPort` and manages the
    shared buffer. Built by :class:`podsim.fabric.network.Network`; NICs never call it directly.

    Public state: ``name``, ``config``, ``ports`` (egress ports, by neighbour name order),
    ``buffer_bytes``, ``used`` (bytes buffered now), ``max_used``, ``noroute_drops`` /
    ``noroute_bytes`` / ``noroute_wire`` (packets, payload and wire bytes with no next hop,
    e.g. after a link failure).
    """

    def __init__(
        self, env: simpy.Environment, name: str, config: SwitchConfig, *, seed: int = 0
    ) -> None:
        self.env = env
        self.name = name
        self.config = config
        self.ports: list[SwitchPort] = []
        self.used = 0
        self.max_used = 0
        self.noroute_drops = 0
        self.noroute_bytes = 0
        self.noroute_wire = 0
        self.buffer_bytes = 0
        rng = switch_rng(seed, name)
        self._rng = rng
        self._salt = rng.getrandbits(64)  # this switch's ECMP hash key
        self._heap = env._queue
        self._eid = env._eid
        self._alpha = math.inf if config.dt_alpha is None else config.dt_alpha
        self._lossy = not (config.pfc or config.credit_buffer_bytes is not None)
        self._ar = config.adaptive
        self._ar_q = config.ar_quantum_bytes
        self._xoff = config.pfc_xoff_bytes if config.pfc else _INF
        self._xon = config.pfc_xon_bytes
        #: PFC counts a frame until it is sent (pfc_hold_until_sent), not until it starts
        self._hold = config.pfc and config.pfc_hold_until_sent
        #: bytes the ingress counts still hold for frames being sent (pfc_hold_until_sent)
        self.held_bytes = 0
        #: the switch's accounting of each incoming link (by the far end's egress port)
        self.ingresses: dict[Port, Ingress] = {}
        #: next hops by destination endpoint id: a tuple of egress ports (filled by Routing).
        self._nh: list[tuple[SwitchPort, ...]] = []

    def add_ingress(self, port: Port) -> None:
        """Account for the link whose far-end egress is ``port`` (the network calls this once
        per incoming link) and deliver its packets here."""
        self.ingresses[port] = Ingress(port)
        port.connect(self.receive)
        credit = self.config.credit_buffer_bytes
        if credit is not None:
            port.enable_credits(credit)
            # an InfiniBand switch buffers per input port: the grants are the whole buffer
            self.buffer_bytes = credit * len(self.ingresses)

    def add_port(self, port: SwitchPort) -> None:
        """Adopt an egress port (the network calls this once per link)."""
        cfg = self.config
        port.switch = self
        if cfg.ecn:
            port._kmin = cfg.ecn_kmin_bytes
            port._kmax = cfg.ecn_kmax_bytes
            span = cfg.ecn_kmax_bytes - cfg.ecn_kmin_bytes
            port._slope = cfg.ecn_pmax / span if span > 0 else 0.0
        else:
            port._kmin = port._kmax = _INF
            port._slope = 0.0
        port._rand = self._rng.random
        self.ports.append(port)
        if cfg.credit_buffer_bytes is None:
            self.buffer_bytes = cfg.buffer_for(len(self.ports))

    # ---- hot path -------------------------------------------------------------------------
    def receive(self, pkt: Packet) -> None:
        """A packet arrives (its head, for cut-through): route, admit, enqueue or transmit."""
        hops = self._nh[pkt.dst]
        n = len(hops)
        if n == 1:
            port = hops[0]
        elif n:
            if self._ar and not pkt.kind:
                port = self.least_loaded(hops)
            else:
                x = ((hash((pkt.flow, pkt.ev)) ^ self._salt) * _MIX) & _M64
                port = hops[((x >> 32) * n) >> 32]
        else:
            self.noroute_drops += 1
            self.noroute_bytes += pkt.size
            self.noroute_wire += pkt.wire
            if pkt.link._cr is not None and not pkt.kind:
                self._credit_back(pkt.link, pkt.wire)
            return
        kind = pkt.kind
        if not port._tx_pending and (kind or not port.paused):
            now = self.env._now
            if now >= port._busy_until:
                # idle egress: straight to the wire, never buffered
                # (inlined port._launch(pkt, now, False): see _receive_readable)
                if pkt.int_rec is not None and not kind:
                    pkt.int_rec.append((port.qbytes, port.tx_bytes, now, port.rate_bps))
                w = pkt.wire
                end = now + w * port._spb
                port._busy_until = end
                port.tx_bytes += w
                port.tx_pkts += 1
                inp = pkt.link
                pkt.link = port
                t = (end if port._rx_ser else now) + port._after  # inlined port._put_on_wire
                e = (t, 1, next(self._eid), pkt)
                wire = port._wire
                if not wire:
                    pkt.callbacks = port._deliver
                    wire.append(e)
                    heappush(self._heap, e)
                elif t >= wire[-1][0]:
                    pkt.callbacks = port._deliver
                    wire.append(e)
                else:
                    pkt.callbacks = port._deliver[1:]
                    heappush(self._heap, e)
                if not kind:  # credit flow control: never buffered here, so credit back now
                    if inp._cr is not None:
                        self._credit_back(inp, w)
                    if port._cr is not None:
                        port.spend_credit(w)
                if self._hold:
                    self._hold_sending(inp, w, end)
                # a switch port has no source, and queued DATA here is paused: resume kicks it
                return
        w = pkt.wire
        used = self.used + w
        q = port.qbytes + w
        if used > self.buffer_bytes or (
            not kind and self._lossy and q > self._alpha * (self.buffer_bytes - self.used)
        ):
            port.drops += 1
            port.drop_bytes += pkt.size
            port.drop_wire += w
            if pkt.link._cr is not None and not kind:
                self._credit_back(pkt.link, w)
            return
        self.used = used
        if used > self.max_used:
            self.max_used = used
        port.qbytes = q
        if q > port.max_qbytes:
            port.max_qbytes = q
        ing = self.ingresses[pkt.link]
        r = ing.rx_bytes + w
        ing.rx_bytes = r
        if r > ing.max_rx_bytes:
            ing.max_rx_bytes = r
        if kind:
            port._hq.append(pkt)
        else:
            port._q.append(pkt)
        if not port._tx_pending and (kind or not port.paused):
            port._tx_pending = True
            ev = port._txev
            ev.callbacks = port._txcb
            heappush(self._heap, (port._busy_until, 1, next(self._eid), ev))
        if r > self._xoff and not ing.xoff:
            self._send_pause(ing)

    def _receive_readable(self, pkt: Packet) -> None:
        """:meth:`receive` in readable steps (the differential twin): route, then straight to
        the wire when the egress is idle, else admit into the shared buffer and queue."""
        port = self._route(pkt)
        if port is None:
            return
        kind = pkt.kind
        now = self.env._now
        if not port._tx_pending and (kind or not port.paused) and now >= port._busy_until:
            if pkt.int_rec is not None and not kind:
                pkt.int_rec.append((port.qbytes, port.tx_bytes, now, port.rate_bps))
            inp = pkt.link
            port._launch(pkt, now, False)  # a switch port has no source
            if inp._cr is not None and not kind:  # never buffered here: credit back now
                self._credit_back(inp, pkt.wire)
            if self._hold:
                self._hold_sending(inp, pkt.wire, port._busy_until)
            return
        self._admit(port, pkt)

    def _route(self, pkt: Packet) -> SwitchPort | None:
        """The egress of ``pkt``: its one next hop, or among several the least-loaded one
        (adaptive routing, DATA only) or the ECMP hash of (flow, entropy value); None (counted
        as a no-route drop) without one."""
        hops = self._nh[pkt.dst]
        n = len(hops)
        if n == 1:
            return hops[0]
        if n and self._ar and not pkt.kind:
            return self.least_loaded(hops)
        if n:
            x = ((hash((pkt.flow, pkt.ev)) ^ self._salt) * _MIX) & _M64
            return hops[((x >> 32) * n) >> 32]
        self.noroute_drops += 1
        self.noroute_bytes += pkt.size
        self.noroute_wire += pkt.wire
        if pkt.link._cr is not None and not pkt.kind:
            self._credit_back(pkt.link, pkt.wire)
        return None

    def _admit(self, port: SwitchPort, pkt: Packet) -> None:
        """Buffer admission (shared buffer, dynamic threshold for lossy DATA), queueing, the
        egress's transmit event and a PFC pause when the ingress passes xoff."""
        kind = pkt.kind
        w = pkt.wire
        used = self.used + w
        q = port.qbytes + w
        if used > self.buffer_bytes or (
            not kind and self._lossy and q > self._alpha * (self.buffer_bytes - self.used)
        ):
            port.drops += 1
            port.drop_bytes += pkt.size
            port.drop_wire += w
            if pkt.link._cr is not None and not kind:
                self._credit_back(pkt.link, w)
            return
        self.used = used
        self.max_used = max(self.max_used, used)
        port.qbytes = q
        port.max_qbytes = max(port.max_qbytes, q)
        ing = self.ingresses[pkt.link]
        ing.rx_bytes += w
        ing.max_rx_bytes = max(ing.max_rx_bytes, ing.rx_bytes)
        (port._hq if kind else port._q).append(pkt)
        if not port._tx_pending and (kind or not port.paused):
            port._tx_pending = True
            ev = port._txev
            ev.callbacks = port._txcb
            heappush(self._heap, (port._busy_until, 1, next(self._eid), ev))
        if ing.rx_bytes > self._xoff and not ing.xoff:
            self._send_pause(ing)

    def least_loaded(self, hops: tuple[SwitchPort, ...]) -> SwitchPort:
        """Adaptive routing's choice: the egress with the fewest bytes still to send (queued
        plus the rest of the frame on the wire; with ``adaptive_routing_quantum`` the whole
        quanta of that, the load band), ties broken uniformly at random by this switch's
        seeded generator (as htsim's ``adaptive_route`` does among equal loads).

        An egress whose link is down is never chosen while another is up: the switch knows
        its own port state (an Ethernet PCS reports the link down once it loses block lock
        or alignment, IEEE 802.3 clause 119 for 200/400GBASE-R; an InfiniBand port whose
        physical link is down leaves the Active state, InfiniBand Architecture Specification
        Vol. 1 chapter 7, link layer), and a dead port drains its queue at once, so it
        would otherwise look the least loaded of all and draw every packet into the failure.
        The detection delay (microseconds of lost lock) is not modelled; the control plane's
        update of the routing tables (``reconvergence_s``) is separate and still applies to
        hashed (ECMP) routing and to the other switches."""
        now = self.env._now
        quantum = self._ar_q
        best, least, ties = hops[0], _INF, 0
        for p in hops:
            if not p.up:
                continue
            load = p.qbytes + (p._busy_until - now) / p._spb if p._busy_until > now else p.qbytes
            if quantum is not None:
                load = load // quantum
            if load < least:
                best, least, ties = p, load, 1
            elif load == least:
                ties += 1
                if self._rng.random() * ties < 1.0:  # reservoir sampling: each tie 1/ties
                    best = p
        return best  # all down: hops[0], lost like any other choice

    # ---- credit flow control --------------------------------------------------------------
    def _credit_back(self, upstream: Port, wire: int) -> None:
        """``wire`` bytes of the input buffer of the link from ``upstream`` are free again:
        the credit update reaches the sender one propagation (and FEC) later."""
        back = upstream.reverse
        delay = back._mac_after if back is not None else upstream._mac_after
        call_at(self.env, self.env._now + delay, upstream.return_credit, wire)

    # ---- PFC ------------------------------------------------------------------------------
    def _hold_sending(self, inp: Port, wire: int, end: float) -> None:
        """With ``pfc_hold_until_sent``: a frame from the link of ``inp`` went straight to an
        idle egress; the ingress count holds its ``wire`` bytes until it is sent at ``end``
        (and may pause the link, if xoff is below one frame plus what is already held)."""
        ing = self.ingresses[inp]
        r = ing.rx_bytes + wire
        ing.rx_bytes = r
        self.held_bytes += wire
        if r > ing.max_rx_bytes:
            ing.max_rx_bytes = r
        if r > self._xoff and not ing.xoff:
            self._send_pause(ing)
        call_at(self.env, end, self._sent, (ing, wire))

    def _sent(self, held: tuple[Ingress, int]) -> None:
        """With ``pfc_hold_until_sent``: a frame's last bit has left its egress; its ingress
        count releases its bytes (a RESUME when the count falls to xon)."""
        ing, wire = held
        ing.rx_bytes -= wire
        self.held_bytes -= wire
        if ing.xoff and ing.rx_bytes <= self._xon:
            self._send_resume(ing)

    def _send_pause(self, ing: Ingress) -> None:
        ing.xoff = True
        inp = ing.port
        back = inp.reverse
        back.pauses_sent += 1
        back.send_mac(Packet(0, -1, -1, kind=PAUSE, overhead=PAUSE_FRAME_WIRE_BYTES), inp)

    def _send_resume(self, ing: Ingress) -> None:
        ing.xoff = False
        inp = ing.port
        inp.reverse.send_mac(Packet(0, -1, -1, kind=RESUME, overhead=PAUSE_FRAME_WIRE_BYTES), inp)

    # ---- inspection -----------------------------------------------------------------------
    def select(self, dst: int, flow: int, ev: int) -> SwitchPort | None:
        """The egress port the ECMP hash picks for (dst, flow, ev); None if unreachable. With
        adaptive routing this is where control packets go; DATA packets take the
        least-loaded egress at the time they arrive (:meth:`least_loaded`)."""
        hops = self._nh[dst]
        n = len(hops)
        if n == 0:
            return None
        if n == 1:
            return hops[0]
        return hops[ecmp_choice(flow, ev, self._salt, n)]

    def __repr__(self) -> str:
        return f"Switch({self.name} ports={len(self.ports)} used={self.used}B)"
