"""A node's PCIe tree coupled to the traffic of a running simulation, one active set at a time.

An engine keeps, per node, the set of DMA streams that are active right now and asks
:meth:`NodeCoupling.rates` for their shares whenever that *set* changes (a stream starts or
its last transfer ends), never per packet. Streams are keyed ``(src, dst, label)`` with device
names of the node's :class:`~podsim.nic.pcie.tree.PcieTree`; the labels the engines use:

- ``"tx"``: GPUDirect RDMA transmit, ``(gpu, nic, "tx")``: the NIC reads the payload it sends
  from GPU memory (a DMA read: completions along GPU -> NIC, read requests along NIC -> GPU);
- ``"rx"``: GPUDirect RDMA receive, ``(nic, gpu, "rx")``: the NIC writes what it receives into
  GPU memory;
- ``"gds"``: GPUDirect Storage, ``(ssd, gpu, "gds")``: an NVMe read into GPU memory (Gen5 SSD
  14 GB/s read, docs/physics.md [S]);
- ``"p2p"``: a GPU-to-GPU copy through the tree (GPUs without a scale-up fabric);
- anything else, e.g. ``(root0, gpu0, "host")``: host-memory traffic.

Each key carries a max-min weight (the engines give an RDMA stream weight 1 however many
messages feed it, and a fluid stream the number of transfers it aggregates, so that each
transfer gets an equal share). The shares come from :func:`podsim.nic.pcie.streams.solve_streams`
(:func:`fabric.maxmin.maxmin_rates` over the tree's links, switch capacities, root-complex P2P
limits and SSD media rates) with every stream greedy (infinite demand) and each NIC's streams
capped together by the NIC's network goodput in each direction: while a stream is active the
engine assumes it wants all it can get, so the NIC is a greedy PCIe client at its network rate
and a competing stream (an SSD read, a P2P copy) gets what is left.

Result: each stream's share, and per NIC and direction the DMA rate the NIC may use
(:meth:`NodeRates.nic_cap`): ``None`` when the PCIe tree does not limit the NIC below its
network goodput (its own port is the bottleneck), else the sum of its GPUDirect streams' shares
(issue 5: NIC throughput = min(network, PCIe path), with contention on shared links). Results
are memoised by the active set (the same sets recur every layer).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from podsim.nic.pcie.streams import Stream, solve_streams
from podsim.nic.pcie.tree import PcieTree

__all__ = ["GDR_LABELS", "READ_LABELS", "NodeCoupling", "NodeRates", "StreamKey"]

#: ``(src, dst, label)`` with device names of the node's tree.
StreamKey = tuple[str, str, str]
#: Labels of GPUDirect RDMA streams, which count against their NIC's network goodput.
GDR_LABELS = ("tx", "rx")
#: Labels of streams the destination NIC pulls with DMA reads (GPUDirect RDMA transmit).
READ_LABELS = ("tx",)


@dataclass(frozen=True)
class NodeRates:
    """The shares of one active set.

    ``rate_bps[key]`` is the total rate of the stream ``key`` (split it over the transfers it
    aggregates in proportion to their weights); ``bottleneck[key]`` names the resource that
    limits it (see :class:`podsim.nic.pcie.streams.StreamRates`: ``"u->v"``, a switch,
    ``"<root>.p2p[<port>]"``, ``"<ssd>.read"``, ``"<nic>.tx"``/``"<nic>.rx"`` for the NIC's own
    goodput, ``"none"``). ``nic_dma_bps[(nic, "tx"|"rx")]`` is the total of that NIC's
    GPUDirect streams in that direction (only NIC directions with an active stream appear).
    """

    rate_bps: Mapping[StreamKey, float]
    bottleneck: Mapping[StreamKey, str]
    nic_dma_bps: Mapping[tuple[str, str], float]
    nic_bound: Mapping[tuple[str, str], bool]

    def nic_cap(self, nic: str, direction: str) -> float | None:
        """The DMA cap to put on ``nic`` in ``direction`` (``"tx"``/``"rx"``): None when no
        stream is active that way or the NIC's own goodput binds first, else its PCIe share."""
        key = (nic, direction)
        if key not in self.nic_dma_bps or self.nic_bound[key]:
            return None
        return self.nic_dma_bps[key]


_EMPTY = NodeRates({}, {}, {}, {})


class NodeCoupling:
    """One node's tree with its NICs' network goodput; solves active sets (memoised).

    ``nic_goodput_bps``: one value for every NIC or ``{nic: bits/s}`` (the payload rate of the
    NIC's ports, e.g. MAC rate x MTU / (MTU + 82 B) for RoCEv2); None leaves the NICs
    uncapped, so the shares are PCIe alone. ``cache_size`` bounds the memo (it is cleared when
    full; the sets an engine meets are few).
    """

    def __init__(
        self,
        tree: PcieTree,
        nic_goodput_bps: float | Mapping[str, float] | None = None,
        *,
        cache_size: int = 4096,
    ) -> None:
        self.tree = tree
        nics = tree.nics
        if nic_goodput_bps is None:
            self.goodput: dict[str, float] | None = None
        elif isinstance(nic_goodput_bps, Mapping):
            unknown = sorted(set(nic_goodput_bps) - set(nics))
            if unknown:
                raise ValueError(
                    f"nic_goodput_bps names NIC(s) {unknown} that layout {tree.name!r} lacks; "
                    f"its NICs are {nics}"
                )
            self.goodput = {k: float(v) for k, v in nic_goodput_bps.items()}
        else:
            self.goodput = dict.fromkeys(nics, float(nic_goodput_bps))
        for k, v in (self.goodput or {}).items():
            if not v > 0:
                raise ValueError(f"nic_goodput_bps for {k!r} must be > 0 bits/s, got {v!r}")
        self.cache_size = int(cache_size)
        self._memo: dict[frozenset[tuple[StreamKey, float]], NodeRates] = {}
        #: how many active sets were solved (memo misses) and answered from the memo
        self.solves = 0
        self.hits = 0

    def check_key(self, key: StreamKey) -> None:
        """Raise a ValueError naming the problem if ``key`` is not a stream of this tree."""
        src, dst, label = key
        for end in (src, dst):
            self.tree.role(end)  # names the unknown device with a did-you-mean
        if label in GDR_LABELS:
            nic, gpu = (dst, src) if label == "tx" else (src, dst)
            if self.tree.role(nic) != "nic" or self.tree.role(gpu) != "gpu":
                raise ValueError(
                    f"a GPUDirect {label!r} stream runs "
                    + ("gpu -> nic" if label == "tx" else "nic -> gpu")
                    + f"; got {src!r} -> {dst!r}"
                )

    def rates(self, active: Mapping[StreamKey, float]) -> NodeRates:
        """The shares of the ``active`` streams (``{key: weight}``, weights > 0)."""
        if not active:
            return _EMPTY
        memo_key = frozenset(active.items())
        hit = self._memo.get(memo_key)
        if hit is not None:
            self.hits += 1
            return hit
        keys = sorted(active)
        streams = [
            Stream(s, d, math.inf, float(active[(s, d, lab)]), lab, read=lab in READ_LABELS)
            for s, d, lab in keys
        ]
        kw = {}
        if self.goodput is not None:
            kw = {"nic_tx_bps": self.goodput, "nic_rx_bps": self.goodput}
        res = solve_streams(self.tree, streams, **kw)
        rate = dict(zip(keys, res.rate_bps.tolist(), strict=True))
        neck = dict(zip(keys, res.bottleneck, strict=True))
        dma: dict[tuple[str, str], float] = {}
        bound: dict[tuple[str, str], bool] = {}
        for (src, dst, lab), r in rate.items():
            if lab not in GDR_LABELS:
                continue
            nic = dst if lab == "tx" else src
            k = (nic, lab)
            dma[k] = dma.get(k, 0.0) + r
            # any stream held by the NIC's own goodput means the NIC is saturated by network
            bound[k] = bound.get(k, False) or neck[(src, dst, lab)] == f"{nic}.{lab}"
        out = NodeRates(rate, neck, dma, bound)
        if len(self._memo) >= self.cache_size:
            self._memo.clear()
        self._memo[memo_key] = out
        self.solves += 1
        return out
