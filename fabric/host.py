"""A minimal line-rate host endpoint, to test and benchmark the fabric without a transport.

:class:`Host` sends its messages one after another (FIFO by start time), each cut into packets
of at most ``mtu`` payload bytes, as fast as its uplink serialises them: no congestion control,
no ACKs, no retransmission (the RDMA transport is :mod:`nic`). The receiving host counts bytes
per message and records when the last byte arrived. A lost packet leaves its message
incomplete (``t_done`` stays NaN) and shows up in the network's drop counters.

Entropy (``spray``): ``"none"`` (or False): every packet of a message has EV 0, so a message
follows one ECMP path; ``"random"`` (or True): the EV is a per-host packet counter, so each
packet hashes to an independent random path (oblivious spraying); ``"paths"``: the host learns
one EV per equal-cost path (:meth:`Network.path_evs`) and cycles through them, so a message is
spread exactly evenly over all its paths (round-robin spraying).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

from podsim.fabric.kernel import call_at
from podsim.fabric.packet import DATA, ROCE_OVERHEAD, Packet

if TYPE_CHECKING:
    from podsim.fabric.network import Network

__all__ = ["SPRAY_MODES", "Host", "Message", "conservation", "make_hosts", "message_table"]

SPRAY_MODES = ("none", "random", "paths")


class Message:
    """One message from ``src`` to ``dst`` (endpoint ids): ``size`` payload bytes, earliest
    start ``start_s``, traffic class ``tc``; filled in as it runs: ``sent``, ``rx_bytes``,
    ``pkts``, ``t_first_tx``, ``t_first_rx``, ``t_last_rx``, ``t_done`` (NaN until complete)."""

    __slots__ = (
        "dst",
        "flow",
        "id",
        "pkts",
        "rx_bytes",
        "sent",
        "size",
        "src",
        "start_s",
        "t_done",
        "t_first_rx",
        "t_first_tx",
        "t_last_rx",
        "tc",
    )

    def __init__(
        self, mid: int, src: int, dst: int, size: int, start_s: float, flow: int, tc: int = 0
    ) -> None:
        self.id = mid
        self.tc = tc
        self.src = src
        self.dst = dst
        self.size = size
        self.start_s = start_s
        self.flow = flow
        self.sent = 0
        self.rx_bytes = 0
        self.pkts = 0
        nan = math.nan
        self.t_first_tx = nan
        self.t_first_rx = nan
        self.t_last_rx = nan
        self.t_done = nan

    @property
    def done(self) -> bool:
        return self.rx_bytes >= self.size

    def __repr__(self) -> str:
        return (
            f"Message({self.id}: {self.src}->{self.dst} {self.size}B rx={self.rx_bytes}B "
            f"done={self.t_done:.9g})"
        )


class Host:
    """Attach a line-rate sender/receiver to ``endpoint`` of ``network``.

    ``mtu`` payload bytes per packet (RoCE MTU 4096 by default; a larger ``cell`` trades
    fidelity for speed, then pass ``overhead`` = 82 x frames per cell); ``spray`` per-packet
    mode (see module docstring). Counters: ``sent_bytes``, ``delivered_bytes`` (payload
    received here), ``rx_pkts``,
    ``ecn_pkts`` (received with CE), ``lat_min``/``lat_max``/``lat_sum`` one-way packet
    latency (from the sender's pull to delivery). ``telemetry=True`` asks every packet sent for
    INT records; ``trace=True`` keeps one ``(t_rx, flow, psn, ecn, int_rec)`` tuple per packet
    received in ``trace`` (tests and debugging; it costs memory).
    """

    def __init__(
        self,
        network: Network,
        endpoint: str,
        *,
        mtu: int = 4096,
        overhead: int = ROCE_OVERHEAD,
        spray: bool | str = "none",
        telemetry: bool = False,
        trace: bool = False,
    ) -> None:
        if not mtu > 0:
            raise ValueError(f"host {endpoint}: mtu={mtu!r} must be > 0 bytes")
        self.network = network
        self.env = network.env
        self.name = endpoint
        self.id = network.endpoint_id(endpoint)
        self.mtu = int(mtu)
        self.overhead = int(overhead)
        mode = {False: "none", True: "random"}.get(spray, spray)  # type: ignore[arg-type]
        if mode not in SPRAY_MODES:
            raise ValueError(f"host {endpoint}: spray={spray!r}; expected one of {SPRAY_MODES}")
        self.spray = mode
        self._evs: tuple[int, ...] = (0,)
        self.port = network.attach(endpoint, self)
        self.port.source = self._pull
        self.messages: list[Message] = []  # in send order
        self._next = 0
        self._cur: Message | None = None
        self._ev = 0
        self.sent_bytes = 0
        self.sent_pkts = 0
        self.delivered_bytes = 0
        self.rx_pkts = 0
        self.ecn_pkts = 0
        self.lat_min = math.inf
        self.lat_max = 0.0
        self.lat_sum = 0.0
        self.received: list[Message] = []  # completed messages addressed to this host
        self.telemetry = bool(telemetry)
        self.trace: list[tuple] | None = [] if trace else None

    def add_message(
        self, dst: str | int, size: int, start_s: float = 0.0, *, tc: int = 0
    ) -> Message:
        """Queue a message to endpoint ``dst`` (name or id) of ``size`` bytes at ``start_s``,
        in traffic class ``tc``. A host sends its messages one after the other in start
        order, whatever their class (it has no per-class scheduler: the SmartNIC has)."""
        d = dst if isinstance(dst, int) else self.network.endpoint_id(dst)
        if not 0 <= d < len(self.network.endpoints):
            raise ValueError(f"host {self.name}: dst={dst!r} is not an endpoint id")
        if not (isinstance(size, int) and size > 0):
            raise ValueError(f"host {self.name}: message size={size!r} must be an int > 0 bytes")
        if not start_s >= 0:
            raise ValueError(f"host {self.name}: start_s={start_s!r} must be >= 0")
        seq = len(self.messages)
        m = Message(seq, self.id, d, size, float(start_s), (self.id << 32) | seq, int(tc))
        # keep not-yet-started messages sorted by start time (stable for equal starts)
        i = len(self.messages)
        while i > self._next and self.messages[i - 1].start_s > m.start_s:
            i -= 1
        self.messages.insert(i, m)
        call_at(self.env, max(m.start_s, self.env.now), self._wake)
        return m

    def _wake(self, _arg: object) -> None:
        self.port.kick()

    def _pull(self) -> Packet | None:
        m = self._cur
        now = self.env._now
        if m is None:
            if self._next >= len(self.messages):
                return None
            m = self.messages[self._next]
            if m.start_s > now:
                return None  # its _wake is scheduled
            self._next += 1
            self._cur = m
            m.t_first_tx = now
            if self.spray == "paths":
                net = self.network
                evs = net.path_evs(self.name, net.endpoints[m.dst], m.flow)
                self._evs = tuple(evs[i] for i in sorted(evs)) or (0,)
        size = m.size - m.sent
        if size > self.mtu:
            size = self.mtu
        if self.spray == "none":
            ev = 0
        elif self.spray == "random":
            ev = self._ev
            self._ev = ev + 1
        else:
            ev = self._evs[m.pkts % len(self._evs)]
        pkt = Packet(size, self.id, m.dst, m.flow, m.pkts, ev, DATA, self.overhead, now, m)
        pkt.tc = m.tc
        if self.telemetry:
            pkt.int_rec = []
        m.pkts += 1
        m.sent += size
        if m.sent >= m.size:
            self._cur = None
        self.sent_bytes += size
        self.sent_pkts += 1
        return pkt

    def receive(self, pkt: Packet) -> None:
        now = self.env._now
        n = pkt.size
        self.delivered_bytes += n
        self.rx_pkts += 1
        lat = now - pkt.ts
        self.lat_sum += lat
        if lat > self.lat_max:
            self.lat_max = lat
        if lat < self.lat_min:
            self.lat_min = lat
        if pkt.ecn:
            self.ecn_pkts += 1
        if self.trace is not None:
            self.trace.append((now, pkt.flow, pkt.psn, pkt.ecn, pkt.int_rec))
        m = pkt.meta
        if m.rx_bytes == 0:
            m.t_first_rx = now
        m.rx_bytes += n
        m.t_last_rx = now
        if m.rx_bytes >= m.size:
            m.t_done = now
            self.received.append(m)

    @property
    def sent_all(self) -> bool:
        return self._cur is None and self._next >= len(self.messages)

    def __repr__(self) -> str:
        return f"Host({self.name} sent={self.sent_bytes}B delivered={self.delivered_bytes}B)"


def make_hosts(network: Network, endpoints: Iterable[str] | None = None, **kw) -> dict[str, Host]:
    """A :class:`Host` on every endpoint (or the given ones); keyword args go to Host."""
    names = network.endpoints if endpoints is None else list(endpoints)
    return {n: Host(network, n, **kw) for n in names}


def conservation(network: Network, hosts: Iterable[Host]) -> tuple[int, int, int, int]:
    """(sent, delivered, dropped, in flight) payload bytes; in flight is counted from the
    queues and event heap, so sent == delivered + dropped + in flight is a real check."""
    hs = list(hosts)
    return (
        sum(h.sent_bytes for h in hs),
        sum(h.delivered_bytes for h in hs),
        network.dropped_bytes(),
        network.bytes_in_flight(),
    )


def message_table(hosts: Iterable[Host]):  # -> pandas.DataFrame
    """One row per message sent by ``hosts``: ids, size, times, bytes received."""
    import pandas as pd

    rows = [
        (
            m.id,
            m.flow,
            m.src,
            m.dst,
            m.size,
            m.start_s,
            m.t_first_tx,
            m.t_first_rx,
            m.t_last_rx,
            m.t_done,
            m.rx_bytes,
        )
        for h in hosts
        for m in h.messages
    ]
    cols = [
        "msg",
        "flow",
        "src",
        "dst",
        "bytes",
        "start_s",
        "t_first_tx",
        "t_first_rx",
        "t_last_rx",
        "t_done",
        "rx_bytes",
    ]
    return pd.DataFrame(rows, columns=cols)
