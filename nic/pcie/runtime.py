"""The node PCIe trees during a SimPy run: GPUDirect RDMA caps, P2P copies, storage reads.

:class:`PcieRuntime` keeps, per server, the set of active PCIe streams (keys of
:mod:`podsim.nic.pcie.coupling`) and re-solves that server's shares only when the set changes; all
changes at one simulated instant are solved once (a phase posts many messages at once). Per
server:

- GPUDirect RDMA: an RDMA message from rank a to rank b holds a's ``tx`` stream (GPU -> NIC)
  and b's ``rx`` stream (NIC -> GPU) active from its posting until it completes (last byte
  acknowledged; the receive stream thus stays active one ACK flight longer than its data, an
  approximation of a few microseconds). A stream's weight is 1 however many messages feed it.
  After each solve every NIC of the server gets its DMA caps through ``set_nic_cap(card, tx,
  rx)`` (None = the tree does not limit it below its network goodput); the packet engine hands
  that to :meth:`podsim.nic.nic.SmartNic.set_pcie_rate_cap`.
- Fluid transfers (``p2p`` GPU -> GPU copies between ranks behind one NIC card, ``gds``
  GPUDirect Storage reads SSD -> GPU): each runs at its share of the tree (a key's rate split
  evenly over its transfers) between solves, and is delivered one idle path latency (plus the
  SSD's read latency for storage) after its last byte left.

The rates come from :meth:`nic.pcie.cluster.ClusterPcie.rates` (max-min over the tree with
the NICs as greedy clients capped at their goodput; see :mod:`podsim.nic.pcie.coupling`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import simpy
from podsim.fabric.kernel import Callback, call_at, call_later
from podsim.nic.pcie.cluster import ClusterPcie
from podsim.nic.pcie.coupling import StreamKey

__all__ = ["PcieRuntime", "network_goodput"]

_EPS_BYTES = 1e-6


class _Fluid:
    __slots__ = ("arg", "done", "key", "latency", "rate", "remaining", "row")

    def __init__(self, key: StreamKey, nbytes: int, latency: float,
                 done: Callable[[Any], object] | None, arg: Any, row: int) -> None:  # fmt: skip
        self.key = key
        self.remaining = float(nbytes)
        self.latency = latency
        self.done = done
        self.arg = arg
        self.rate = 0.0
        self.row = row


@dataclass
class _Node:
    gdr: dict[StreamKey, int] = field(default_factory=lambda: defaultdict(int))
    fluids: list[_Fluid] = field(default_factory=list)
    fluid_count: dict[StreamKey, int] = field(default_factory=lambda: defaultdict(int))
    last: float = 0.0
    timer: Callback | None = None
    dirty: bool = False


class PcieRuntime:
    """The cluster's PCIe trees in simulated time (see the module docstring)."""

    def __init__(
        self,
        env: simpy.Environment,
        pcie: ClusterPcie,
        set_nic_cap: Callable[[int, float | None, float | None], None] | None = None,
    ) -> None:
        self.env = env
        self.pcie = pcie
        self.set_nic_cap = set_nic_cap
        self._nodes: dict[int, _Node] = defaultdict(_Node)
        self._applied: dict[int, tuple[float | None, float | None]] = {}
        #: per transfer: kind, rank(s), key, bytes, start, end (NaN until delivered)
        self.transfers: list[dict[str, Any]] = []
        self.resolves = 0
        self.cap_changes = 0

    # ------------------------------------------------------------------ RDMA streams

    def rdma_start(self, src_rank: int, dst_rank: int) -> None:
        """An RDMA message from ``src_rank`` to ``dst_rank`` was posted."""
        self._gdr(*self.pcie.tx_key(src_rank), +1)
        self._gdr(*self.pcie.rx_key(dst_rank), +1)

    def rdma_end(self, src_rank: int, dst_rank: int) -> None:
        """That message completed."""
        self._gdr(*self.pcie.tx_key(src_rank), -1)
        self._gdr(*self.pcie.rx_key(dst_rank), -1)

    def _gdr(self, server: int, key: StreamKey, delta: int) -> None:
        st = self._nodes[server]
        c = st.gdr[key] + delta
        if c < 0:
            raise RuntimeError(
                f"PCIe stream {key} on server {server} ended more often than it began"
            )
        st.gdr[key] = c
        if c == 0:
            del st.gdr[key]
            self._touch(server)
        elif c == 1 and delta > 0:  # the active set changed
            self._touch(server)

    # ------------------------------------------------------------------ fluid transfers

    def p2p(self, src_rank: int, dst_rank: int, nbytes: int, done: Callable[[Any], object],
            arg: Any = None) -> None:  # fmt: skip
        """Copy ``nbytes`` from ``src_rank``'s GPU to ``dst_rank``'s through the tree;
        ``done(arg)`` when the last byte has arrived."""
        server, key = self.pcie.p2p_key(src_rank, dst_rank)
        lat = self.pcie.p2p_latency(src_rank, dst_rank)
        self._start(server, key, nbytes, lat, done, arg, "p2p", src_rank, dst_rank)

    def storage_read(self, rank: int, nbytes: int, done: Callable[[Any], object] | None = None,
                     arg: Any = None) -> None:  # fmt: skip
        """A GPUDirect Storage read of ``nbytes`` from the SSD ``rank``'s GPU reads from
        (:meth:`ClusterPcie.ssd_of`)."""
        server, key = self.pcie.gds_key(rank)
        lat = self.pcie.gds_latency(rank)
        self._start(server, key, nbytes, lat, done, arg, "gds", -1, rank)

    def schedule_storage(self, storage: Any) -> None:
        """Start the scenario's ``workload.storage`` reads
        (:class:`scenarios.input.schema.StorageReads`:
        ``reads_per_gpu``, ``start``, ``ranks``) at their start time."""
        ranks = range(self.pcie.num_ranks) if storage.ranks is None else storage.ranks
        t0 = max(self.env.now, float(storage.start))
        nbytes = int(storage.reads_per_gpu)
        for r in ranks:
            call_at(self.env, t0, lambda _a, r=int(r): self.storage_read(r, nbytes))

    def _start(self, server: int, key: StreamKey, nbytes: int, latency: float,
               done: Callable[[Any], object] | None, arg: Any, kind: str, src: int,
               dst: int) -> None:  # fmt: skip
        row = len(self.transfers)
        self.transfers.append({"kind": kind, "src_rank": src, "dst_rank": dst, "src": key[0],
                               "dst": key[1], "server": server, "bytes": int(nbytes),
                               "start_s": self.env.now, "end_s": math.nan})  # fmt: skip
        f = _Fluid(key, nbytes, latency, done, arg, row)
        if nbytes <= 0:
            call_later(self.env, latency, self._deliver, f)
            return
        st = self._nodes[server]
        self._advance(st)
        st.fluids.append(f)
        st.fluid_count[key] += 1
        self._touch(server)

    def _deliver(self, f: _Fluid) -> None:
        self.transfers[f.row]["end_s"] = self.env.now
        if f.done is not None:
            f.done(f.arg)

    # ------------------------------------------------------------------ solving

    def _touch(self, server: int) -> None:
        st = self._nodes[server]
        if not st.dirty:
            st.dirty = True
            call_later(self.env, 0.0, self._resolve, server)

    def _advance(self, st: _Node) -> None:
        now = self.env.now
        dt = now - st.last
        if dt > 0:
            for f in st.fluids:
                f.remaining -= f.rate * dt / 8.0
        st.last = now

    def _resolve(self, server: int) -> None:
        st = self._nodes[server]
        st.dirty = False
        self._advance(st)
        active: dict[StreamKey, float] = dict.fromkeys(st.gdr, 1.0)
        for key, c in st.fluid_count.items():
            active[key] = float(c)
        res = self.pcie.rates(server, active)
        self.resolves += 1
        if self.set_nic_cap is not None:
            for card, dev in self.pcie.node(server).nic.items():
                caps = (res.nic_cap(dev, "tx"), res.nic_cap(dev, "rx"))
                if self._applied.get(card, (None, None)) != caps:
                    self._applied[card] = caps
                    self.cap_changes += 1
                    self.set_nic_cap(card, *caps)
        if st.timer is not None:
            st.timer.cancel()
            st.timer = None
        t_min = math.inf
        for f in st.fluids:
            f.rate = res.rate_bps[f.key] / st.fluid_count[f.key]
            if f.rate > 0:
                t_min = min(t_min, 8.0 * max(f.remaining, 0.0) / f.rate)
        if math.isfinite(t_min):
            st.timer = call_later(self.env, t_min, self._finish, server)

    def _finish(self, server: int) -> None:
        st = self._nodes[server]
        st.timer = None
        if st.dirty:
            return  # a solve is already due at this instant and will reschedule
        self._advance(st)
        keep: list[_Fluid] = []
        for f in st.fluids:
            # bytes the current rate would carry in a picosecond count as done
            if f.remaining <= _EPS_BYTES + f.rate * 1e-12 / 8.0:
                st.fluid_count[f.key] -= 1
                if st.fluid_count[f.key] == 0:
                    del st.fluid_count[f.key]
                call_at(self.env, self.env.now + f.latency, self._deliver, f)
            else:
                keep.append(f)
        st.fluids = keep
        self._resolve(server)

    # ------------------------------------------------------------------ results

    def transfer_table(self) -> pd.DataFrame:
        """One row per fluid transfer (P2P copies and storage reads): bytes, bytes moved by
        now (``bytes_done``), start, delivery (NaN if not yet) and mean rate so far."""
        df = pd.DataFrame(
            self.transfers,
            columns=["kind", "src_rank", "dst_rank", "src", "dst", "server", "bytes", "start_s",
                     "end_s"],
        )  # fmt: skip
        # transfers still running at the end (background storage reads) report their progress
        done = df["bytes"].to_numpy(float).copy()
        for st in self._nodes.values():
            self._advance(st)
            for f in st.fluids:
                done[f.row] = max(0.0, done[f.row] - max(f.remaining, 0.0))
        df["bytes_done"] = np.round(done).astype(np.int64)
        end = df["end_s"].fillna(self.env.now)
        dur = (end - df["start_s"]).where(lambda x: x > 0)
        df["rate_bps"] = 8.0 * df["bytes_done"] / dur
        return df

    def report(self, messages: pd.DataFrame, network_rows: Any) -> dict[str, Any]:
        """:meth:`summary` plus every rank's network goodput (:func:`network_goodput` over the
        trace rows in ``network_rows``) as columns ``rank``, ``tx_goodput_bps``,
        ``rx_goodput_bps`` (None for a rank without network traffic that way)."""
        mask = np.zeros(len(messages), dtype=bool)
        mask[np.asarray(list(network_rows), dtype=np.int64)] = True
        gp = network_goodput(messages, mask, self.pcie.num_ranks)
        cols = {
            c: [None if not np.isfinite(x) else float(x) for x in gp[c].to_numpy(float)]
            for c in ("tx_goodput_bps", "rx_goodput_bps")
        }
        return {
            **self.summary(),
            "gpu_network_goodput": {"rank": gp["rank"].tolist(), **cols},
        }

    def summary(self) -> dict[str, Any]:
        """JSON-friendly counters and the storage reads."""
        solves = sum(n.coupling.solves for n in {id(m.coupling): m for m in
                                                  self.pcie.nodes.values()}.values())  # fmt: skip
        tt = self.transfer_table()
        gds = tt[tt["kind"] == "gds"]
        p2p = tt[tt["kind"] == "p2p"]
        return {
            "resolves": self.resolves,
            "solves": solves,
            "nic_cap_changes": self.cap_changes,
            "nic_caps_applied": self.set_nic_cap is not None,
            "p2p_messages": len(p2p),
            "p2p_bytes": int(p2p["bytes"].sum()),
            "storage_reads": [
                {
                    "rank": int(r.dst_rank),
                    "ssd": str(r.src),
                    "bytes": int(r.bytes),
                    "bytes_done": int(r.bytes_done),
                    "start_s": float(r.start_s),
                    "end_s": None if math.isnan(r.end_s) else float(r.end_s),
                    "rate_bps": None if math.isnan(r.rate_bps) else float(r.rate_bps),
                }
                for r in gds.itertuples(index=False)
            ],
        }


def network_goodput(messages: pd.DataFrame, network: np.ndarray, num_ranks: int) -> pd.DataFrame:
    """Per rank: payload bytes it sent and received over the network (rows where
    ``network`` is true) and the goodput of each direction, bytes x 8 / (last delivery - first
    posting) over those messages (NaN for a rank without such traffic)."""
    m = messages[np.asarray(network, dtype=bool)]
    m = m[np.isfinite(m["end_s"].to_numpy(float))]
    out = pd.DataFrame({"rank": np.arange(num_ranks, dtype=np.int64)})
    for side, col in (("tx", "src_rank"), ("rx", "dst_rank")):
        g = m.groupby(col).agg(b=("bytes", "sum"), t0=("post_s", "min"), t1=("end_s", "max"))
        span = (g["t1"] - g["t0"]).where(lambda x: x > 0)
        bps = 8.0 * g["b"] / span
        out[f"{side}_bytes"] = out["rank"].map(g["b"]).fillna(0).astype(np.int64)
        out[f"{side}_goodput_bps"] = out["rank"].map(bps).astype(float)
    return out
