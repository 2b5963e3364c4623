"""GPUDirect RDMA and GPUDirect Storage as fluid streams on a node's PCIe tree.

Every byte a NIC sends it reads from GPU memory: Memory Read requests along NIC -> GPU, the
data coming back as completions along GPU -> NIC (a *read* stream, ``Stream.read``; its loads:
:meth:`nic.pcie.tree.PcieTree.read_loads`); every byte it receives it writes along NIC -> GPU
as posted writes (GPUDirect RDMA); an NVMe read for a checkpoint or KV
cache moves SSD -> GPU (GPUDirect Storage, Gen5 SSD 14 GB/s read, docs/physics.md [S]); host traffic
starts or ends at a root complex. Streams are fluids: each gets a rate, and together they share
the tree's resources (directed links, switch capacities, root-complex P2P limits, SSD media
rates; see :mod:`nic.pcie.tree`) max-min fairly, via :func:`fabric.maxmin.maxmin_rates`.

Assumption: PCIe arbitration between the ports that feed one egress port is round-robin-like,
so a saturated link divides max-min fairly between the streams crossing it (weights change the
ratio). Each stream is capped by its demand. A NIC also caps the sum of its streams by what its
network side can carry (``nic_tx_bps``: GPU -> NIC -> wire; ``nic_rx_bps``: wire -> NIC -> GPU),
so a NIC's DMA rate comes out as min(network goodput, PCIe share).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from podsim.fabric.maxmin import CAP, UNCONSTRAINED, maxmin_rates
from podsim.nic.pcie.tree import PcieTree

__all__ = [
    "Stream",
    "StreamRates",
    "gpudirect_streams",
    "nic_dma_caps",
    "solve_streams",
]


@dataclass(frozen=True)
class Stream:
    """A DMA stream from ``src`` to ``dst`` (device names of the tree), bits/s of payload.

    ``demand_bps`` caps it (inf = as fast as the tree allows); ``weight`` scales its max-min
    share; ``label`` is free text carried into the results (e.g. ``"tx"``, ``"gds"``);
    ``read``: the destination (a NIC) pulls the data with DMA reads instead of the source
    pushing it with posted writes.
    """

    src: str
    dst: str
    demand_bps: float = math.inf
    weight: float = 1.0
    label: str = ""
    read: bool = False

    def __post_init__(self) -> None:
        if self.src == self.dst:
            raise ValueError(f"stream {self.src!r} -> {self.dst!r} starts and ends at one device")
        if not self.demand_bps >= 0:
            raise ValueError(
                f"stream {self.src}->{self.dst} demand_bps must be >= 0 bits/s, got "
                f"{self.demand_bps!r}"
            )
        if not (self.weight > 0 and math.isfinite(self.weight)):
            raise ValueError(
                f"stream {self.src}->{self.dst} weight must be finite and > 0, got {self.weight!r}"
            )


@dataclass(frozen=True)
class StreamRates:
    """Rates of a set of streams and the state of the tree's resources.

    ``bottleneck[i]`` names the saturated resource that limits stream ``i`` (``"u->v"``, a
    switch, ``"<root>.p2p[<port>]"``, ``"<ssd>.read"``, ``"<nic>.tx"``/``"<nic>.rx"``), or
    ``"demand"`` when the stream gets all it asked for (``"none"`` for an unlimited stream on
    an unlimited path).
    """

    streams: tuple[Stream, ...]
    rate_bps: np.ndarray
    bottleneck: tuple[str, ...]
    latency_s: np.ndarray
    resource_names: tuple[str, ...]
    capacity_bps: np.ndarray
    load_bps: np.ndarray

    def rate(self, src: str, dst: str, label: str | None = None) -> float:
        """Total rate of the streams from ``src`` to ``dst`` (optionally of one label)."""
        hits = [
            i
            for i, s in enumerate(self.streams)
            if s.src == src and s.dst == dst and (label is None or s.label == label)
        ]
        if not hits:
            which = f" labelled {label!r}" if label else ""
            raise ValueError(f"no stream {src!r} -> {dst!r}{which}")
        return float(self.rate_bps[hits].sum())

    def load(self, resource: str) -> float:
        """Load on one resource, bits/s."""
        try:
            return float(self.load_bps[self.resource_names.index(resource)])
        except ValueError:
            raise ValueError(f"no resource {resource!r}; see resource_names") from None

    def to_frame(self) -> pd.DataFrame:
        """One row per stream: src, dst, label, demand, rate, bottleneck, latency."""
        return pd.DataFrame(
            {
                "src": [s.src for s in self.streams],
                "dst": [s.dst for s in self.streams],
                "label": [s.label for s in self.streams],
                "demand_bps": [s.demand_bps for s in self.streams],
                "rate_bps": self.rate_bps,
                "bottleneck": list(self.bottleneck),
                "latency_s": self.latency_s,
            }
        )

    def utilisation(self) -> pd.Series:
        """Load / capacity per resource."""
        return pd.Series(self.load_bps / self.capacity_bps, index=list(self.resource_names))


def _per_nic(
    value: float | Mapping[str, float] | None, nics: Sequence[str], what: str
) -> dict[str, float]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        unknown = set(value) - set(nics)
        if unknown:
            raise ValueError(
                f"{what} names unknown NIC(s) {sorted(unknown)}; NICs are {list(nics)}"
            )
        out = {k: float(v) for k, v in value.items()}
    else:
        out = dict.fromkeys(nics, float(value))
    for k, v in out.items():
        if not v >= 0:
            raise ValueError(f"{what} for {k!r} must be >= 0 bits/s, got {v!r}")
    return out


def solve_streams(
    tree: PcieTree,
    streams: Sequence[Stream],
    *,
    nic_tx_bps: float | Mapping[str, float] | None = None,
    nic_rx_bps: float | Mapping[str, float] | None = None,
) -> StreamRates:
    """Max-min fair rates of ``streams`` on ``tree`` (see the module doc).

    ``nic_tx_bps`` / ``nic_rx_bps``: one value for every NIC or ``{nic: bits/s}``; the sum of
    streams into (tx) or out of (rx) that NIC is capped at it, e.g. the NIC's RoCE goodput.
    """
    streams = tuple(streams)
    a, capacity, names = tree.stream_incidence(
        [(s.src, s.dst) for s in streams], [s.read for s in streams]
    )
    extra_rows: list[np.ndarray] = []
    extra_names: list[str] = []
    extra_caps: list[float] = []
    nics = tree.nics
    for direction, value, end in (("tx", nic_tx_bps, "dst"), ("rx", nic_rx_bps, "src")):
        for nic, cap in _per_nic(value, nics, f"nic_{direction}_bps").items():
            extra_rows.append(np.array([getattr(s, end) == nic for s in streams], dtype=float))
            extra_names.append(f"{nic}.{direction}")
            extra_caps.append(cap)
    if extra_rows:
        import scipy.sparse as sp  # imported when first used: a packet run may never need it

        a = sp.vstack([a, sp.csc_array(np.vstack(extra_rows))], format="csc")
        capacity = np.concatenate([capacity, extra_caps])
        names = names + tuple(extra_names)
    demand = np.fromiter((s.demand_bps for s in streams), dtype=float, count=len(streams))
    weight = np.fromiter((s.weight for s in streams), dtype=float, count=len(streams))
    res = maxmin_rates(a, capacity, caps=demand, weights=weight)
    labels = tuple(
        "demand" if b == CAP else "none" if b == UNCONSTRAINED else names[b] for b in res.bottleneck
    )
    latency = np.array([tree.latency(s.src, s.dst) for s in streams], dtype=float)
    return StreamRates(streams, res.rates, labels, latency, names, capacity, res.link_load)


def gpudirect_streams(
    tree: PcieTree,
    *,
    tx_bps: float | None = math.inf,
    rx_bps: float | None = math.inf,
) -> list[Stream]:
    """GPUDirect RDMA streams for every (GPU, NIC that serves it): ``gpu -> nic`` labelled
    ``"tx"`` (a DMA read by the NIC) with demand ``tx_bps`` and ``nic -> gpu`` labelled ``"rx"``
    (posted writes) with ``rx_bps``; ``None`` leaves that direction out."""
    out: list[Stream] = []
    for nic in tree.nics:
        for gpu in tree.gpus_of_nic(nic):
            if tx_bps is not None:
                out.append(Stream(gpu, nic, tx_bps, label="tx", read=True))
            if rx_bps is not None:
                out.append(Stream(nic, gpu, rx_bps, label="rx"))
    return out


def nic_dma_caps(
    tree: PcieTree,
    *,
    extra: Sequence[Stream] = (),
    nic_bps: float | Mapping[str, float] | None = None,
) -> dict[str, dict[str, float]]:
    """Per NIC, the payload DMA rate its PCIe tree gives it, ``{nic: {"tx": bps, "rx": bps}}``.

    Every GPU drives each of its NICs at full load in both directions at once (an all-to-all
    sends and receives together, and the transmit reads' requests share the receive
    direction's links with the receive writes), alongside the ``extra`` streams (GPUDirect
    Storage reads, host traffic) that compete for the same tree. ``nic_bps`` optionally caps
    each NIC's total per direction (e.g. its goodput); without it the result is the PCIe share
    alone, the value for ``SmartNic.set_pcie_rate_cap``.
    """
    out: dict[str, dict[str, float]] = {n: {"tx": 0.0, "rx": 0.0} for n in tree.nics}
    gdr = gpudirect_streams(tree)
    res = solve_streams(tree, [*gdr, *extra], nic_tx_bps=nic_bps, nic_rx_bps=nic_bps)
    for s, r in zip(res.streams[: len(gdr)], res.rate_bps[: len(gdr)], strict=True):
        nic = s.dst if s.label == "tx" else s.src
        out[nic][s.label] += float(r)
    return out
