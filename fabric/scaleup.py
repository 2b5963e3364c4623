"""Scale-up (NVLink/UB-style) transfers for engines whose substrate models only the scale-out
fabric.

Model: a fluid, max-min fair scale-up domain. Every GPU has one egress and one ingress
constraint of capacity R = the sum of its scale-up links' ``rate_bps`` (the pod's switches share
the GPU's bandwidth, as NVLink links spread over NVSwitch chips; podsim.fabric.superpod builds them
that way); the switches themselves are non-blocking. Between events (a transfer starting or
finishing) every active transfer runs at its max-min fair rate over the two constraints it
crosses (:func:`podsim.fabric.maxmin.maxmin_pairs`, progressive filling), so k transfers out of one
GPU share its egress evenly and a GPU that receives from k peers gets R/k from each. A transfer's
last byte is delivered one path latency after it leaves: propagation at 5 ns/m plus the edge's
``latency_s`` on the GPU -> switch and switch -> GPU links, the packet engine's per-link rule.

The SMs' copy path (``copy_rate_bps``, DeepEP's normal kernels: podsim.scenarios.engines.flow
says why): every transfer into a GPU also crosses that GPU's copy constraint, and
:meth:`ScaleUpPipes.copy_local` posts a GPU's copy to itself, which crosses it alone (no link,
no latency); the rates then come from the general solver
(:func:`podsim.fabric.maxmin.maxmin_rates`, three constraints a transfer).

Scale-up domains: the GPUs that one scale-up fabric joins (a connected component of the
scale-up links: a SuperPoD's pod, an NVLink domain) share nothing with another domain's GPUs, so
each domain is a fluid of its own (:class:`_Domain`: its own transfers, rates and next finish),
and a finish re-solves and rescans only its own domain's transfers. Two GPUs of different domains
have no scale-up path (:meth:`ScaleUpPipes.reaches` is False). With the whole cluster in one
array a finish cost O(transfers of every pod), which made superpod-moe (two 128-GPU pods) spend
84 % of its run here (README, "Performance").

Time resolution (``resolution_s``, the scenario's ``sim.scaleup_resolution``; 0 = exact):
in an all-to-all every transfer finishes at its own instant (superpod-moe: 39,000 finishes, half
of them within 0.5 ns of the previous one), and each finish re-solves the rates. With a
resolution q, a finish also takes every transfer that would finish within q of it: each is
still delivered at its own finish time (at the rates of that instant), but leaves the fluid up to
q early, so its remaining bytes (at most its rate x q) stop competing for its GPUs' capacity that
much early, and the others speed up that much early. A numerical resolution, not a model
constant: superpod-moe's phases move by 0.0006 % at 1 ns (the scenarios' default) and 0.016 %
at 10 ns, against 0 at q = 0; the run's CPU falls from 46 s to 25 s and 14 s (README,
"Performance"; tests/fabric/test_scaleup_pipes.py bounds the delivery error).

Faults: :meth:`ScaleUpPipes.set_link_rate` changes one scale-up link's rate (0 = down, a lower
rate = degraded, the nominal rate = restored) and every active transfer is re-solved at once. A
GPU's traffic is striped evenly over its links that are up (as NVLink stripes over its links,
and as the flow engine spreads a scale-up flow over the switch planes), so its egress and
ingress capacity is (links up) x (slowest link up): a link down moves the traffic to the other
planes, a degraded link slows every stripe to its rate. A GPU with no scale-up link left holds
its transfers until a link comes back.

Scale-up links carry 3-4x the scale-out bandwidth per GPU (docs/physics.md: NVLink 160 GB/s vs
IB 50 GB/s per GPU [S]), so this domain rarely sets a phase's time; the fluid model ignores
packetisation and protocol overhead inside it (payload at the link rate).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np
import simpy
from podsim.fabric.kernel import Callback, call_at, call_later
from podsim.fabric.maxmin import maxmin_pairs, maxmin_rates
from podsim.fabric.phy import PROPAGATION_S_PER_M

__all__ = ["ScaleUpPipes"]

_EPS_BYTES = 1e-6


class ScaleUpPipes:
    """Fluid max-min transfers over per-GPU scale-up egress/ingress (see module docstring)."""

    def __init__(
        self,
        env: simpy.Environment,
        graph: nx.Graph,
        copy_rate_bps: float | None = None,
        resolution_s: float = 0.0,
    ) -> None:
        if not 0.0 <= resolution_s < math.inf:
            raise ValueError(f"resolution_s={resolution_s!r}: expected seconds >= 0")
        self.env = env
        rate: dict[int, float] = defaultdict(float)
        self.latency: dict[int, float] = {}
        self.links: dict[int, list[tuple[str, str]]] = defaultdict(list)
        #: (gpu node, switch) -> nominal and current rate (bit/s) of every scale-up link
        self.nominal: dict[tuple[str, str], float] = {}
        self.current: dict[tuple[str, str], float] = {}
        self._gid: dict[str, int] = {}
        scaleup = nx.Graph()
        for u, v, d in graph.edges(data=True):
            if d.get("kind") != "scaleup":
                continue
            scaleup.add_edge(u, v)
            gpu_node, sw = (u, v) if graph.nodes[u].get("role") == "gpu" else (v, u)
            gid = int(graph.nodes[gpu_node]["gpu"])
            rate[gid] += float(d["rate_bps"])
            hop = float(d.get("length_m", 0.0)) * PROPAGATION_S_PER_M + float(
                d.get("latency_s", 0.0)
            )
            self.latency[gid] = max(self.latency.get(gid, 0.0), hop)
            self.links[gid].append((gpu_node, sw))
            self.nominal[gpu_node, sw] = self.current[gpu_node, sw] = float(d["rate_bps"])
            self._gid[gpu_node] = gid
        self.gpus = sorted(rate)
        self.rate = dict(rate)
        self.copy_rate_bps = copy_rate_bps
        #: the scale-up domains (module docstring), in the order of their lowest GPU id, and
        #: each GPU's (domain, index in it)
        self.domains: list[_Domain] = []
        self._where: dict[int, tuple[_Domain, int]] = {}
        groups = sorted(
            sorted(self._gid[n] for n in comp if n in self._gid)
            for comp in nx.connected_components(scaleup)
        )
        for gpus in groups:
            dom = _Domain(env, [rate[g] for g in gpus], copy_rate_bps, resolution_s, self._finished)
            self.domains.append(dom)
            for i, g in enumerate(gpus):
                self._where[g] = (dom, i)
        #: payload bytes sent out of / into each GPU (for the links table)
        self.tx_bytes: dict[int, int] = defaultdict(int)
        self.rx_bytes: dict[int, int] = defaultdict(int)
        #: every transfer with bytes: (source GPU, destination GPU, bytes, start time) and its
        #: end time (last byte sent; NaN while in flight), for link bytes over time
        self.transfers: list[tuple[int, int, int, float]] = []
        self.t_end: list[float] = []

    @property
    def event_owners(self) -> tuple[object, ...]:
        """The objects whose methods the pipes schedule: themselves (deliveries) and each
        domain (solves, finishes); the fast-forward counts their events as the pipes'."""
        return (self, *self.domains)

    def reaches(self, gpu_a: int, gpu_b: int) -> bool:
        """Whether both GPUs have a scale-up port in one scale-up domain."""
        a, b = self._where.get(gpu_a), self._where.get(gpu_b)
        return a is not None and b is not None and a[0] is b[0]

    def send(self, gpu_a: int, gpu_b: int, nbytes: int, done: Callable[[object], None],
             arg: object = None) -> None:  # fmt: skip
        """Start a transfer; ``done(arg)`` runs when its last byte is delivered."""
        wa, wb = self._where.get(gpu_a), self._where.get(gpu_b)
        if wa is None or wb is None or wa[0] is not wb[0]:
            raise ValueError(f"GPUs {gpu_a} and {gpu_b} share no scale-up domain")
        self.tx_bytes[gpu_a] += nbytes
        self.rx_bytes[gpu_b] += nbytes
        lat = self.latency[gpu_a] + self.latency[gpu_b]
        if nbytes <= 0:
            call_later(self.env, lat, self._deliver, (done, arg))
            return
        (dom, a), b = wa, wb[1]
        n = dom.n
        cp = 2 * n + b if self.copy_rate_bps is not None else 3 * n
        dom.post(nbytes, (a, n + b, cp), lat, self._record(gpu_a, gpu_b, nbytes), (done, arg))

    def copy_local(self, gpu: int, nbytes: int, done: Callable[[object], None],
                   arg: object = None) -> None:  # fmt: skip
        """A GPU's copy of ``nbytes`` to itself over its SMs' copy path (needs
        ``copy_rate_bps``); ``done(arg)`` runs when it has finished (no link, no latency)."""
        if self.copy_rate_bps is None:
            raise ValueError("a GPU's copies to itself take time only with the SMs' copy path")
        if nbytes <= 0:
            call_later(self.env, 0.0, self._deliver, (done, arg))
            return
        dom, i = self._where[gpu]
        n = dom.n
        dom.post(nbytes, (3 * n, 3 * n, 2 * n + i), 0.0, self._record(-1, gpu, nbytes), (done, arg))

    def _record(self, gpu_a: int, gpu_b: int, nbytes: int) -> int:
        """Record a transfer with bytes in :attr:`transfers`; returns its id there."""
        self.transfers.append((gpu_a, gpu_b, int(nbytes), float(self.env.now)))
        self.t_end.append(math.nan)
        return len(self.transfers) - 1

    def _finished(
        self,
        tid: int,
        early: float,
        lat: float,
        done_arg: tuple[Callable[[object], None], object],
    ) -> None:
        """A domain's transfer ``tid`` sends its last byte ``early`` seconds from now (0 but
        within a domain's ``resolution_s``): record it, deliver it ``lat`` after that (the
        domains' ``on_end``)."""
        end = self.env.now + early
        self.t_end[tid] = end
        call_at(self.env, end + lat, self._deliver, done_arg)

    def link_key(self, u: str, v: str) -> tuple[str, str]:
        """(gpu node, switch) of the scale-up link between ``u`` and ``v``; KeyError if none."""
        key = (u, v) if u in self._gid else (v, u)
        if key not in self.nominal:
            raise KeyError(f"no scale-up link {u!r}-{v!r}")
        return key

    def set_link_rate(self, u: str, v: str, rate_bps: float) -> None:
        """Set the current rate of scale-up link ``u``-``v`` (both directions; 0 = down) and
        re-solve every active transfer of its domain with the GPU's new egress/ingress
        capacity."""
        key = self.link_key(u, v)
        if not rate_bps >= 0:
            raise ValueError(f"rate {rate_bps!r} of scale-up link {u}-{v} must be >= 0")
        self.current[key] = float(rate_bps)
        gid = self._gid[key[0]]
        up = [self.current[link] for link in self.links[gid] if self.current[link] > 0]
        total = len(up) * min(up) if up else 0.0  # striped over the links that are up
        self.rate[gid] = total
        dom, i = self._where[gid]
        dom.set_gpu_capacity(i, total)

    def skip(self, dt: float) -> None:
        """Let ``dt`` seconds of transfer pass with no event, for the packet engine's
        fast-forward (:mod:`podsim.nic.fastforward`), whose jumps move these pipes' pending
        events ``dt`` earlier: every active transfer carries its rate x ``dt`` (the rates are
        constant between events, so this is exact). ``dt`` must end at or before the next
        finish."""
        for dom in self.domains:
            dom.skip(dt)

    def _deliver(self, done_arg: tuple[Callable[[object], None], object]) -> None:
        """A transfer's last byte arrived: ``done(arg)`` (a method of the pipes, so that the
        fast-forward knows whose event it is)."""
        done, arg = done_arg
        done(arg)

    def link_transfers(self) -> tuple[list[str], np.ndarray, np.ndarray, Any]:
        """(link names, start times, end times, transfers x links bytes as a SciPy sparse
        array) of every transfer with bytes, a GPU's share split evenly over its scale-up links
        as :meth:`link_counters` does (end NaN: still in flight)."""
        import scipy.sparse as sps

        names: list[str] = []
        out_cols: dict[int, list[int]] = {}
        in_cols: dict[int, list[int]] = {}
        for gid, links in self.links.items():
            for gpu_node, sw in links:
                out_cols.setdefault(gid, []).append(len(names))
                names.append(f"{gpu_node}->{sw}")
                in_cols.setdefault(gid, []).append(len(names))
                names.append(f"{sw}->{gpu_node}")
        rows: list[int] = []
        cols: list[int] = []
        vals: list[float] = []
        for k, (a, b, nbytes, _t0) in enumerate(self.transfers):
            if a < 0:
                continue  # a GPU's copy to itself crosses no link
            for side, gid in ((out_cols, a), (in_cols, b)):
                c = side[gid]
                rows += [k] * len(c)
                cols += c
                vals += [nbytes / len(c)] * len(c)
        n = len(self.transfers)
        mat = sps.csr_array((vals, (rows, cols)), shape=(n, len(names)))
        t0 = np.fromiter((t[3] for t in self.transfers), float, n)
        return names, t0, np.asarray(self.t_end, dtype=float), mat

    def link_counters(self) -> list[dict[str, object]]:
        """tx_bytes per scale-up link direction (a GPU's bytes split evenly over its links)."""
        rows: list[dict[str, object]] = []
        for gid, links in self.links.items():
            n = len(links)
            for gpu_node, sw in links:
                rows.append({"link": f"{gpu_node}->{sw}", "tx_bytes": self.tx_bytes[gid] // n})
                rows.append({"link": f"{sw}->{gpu_node}", "tx_bytes": self.rx_bytes[gid] // n})
        return rows


class _Domain:
    """One scale-up domain's fluid (module docstring): the active transfers of its ``n`` GPUs
    and their max-min rates. Constraints: GPU i's egress at i, ingress at n + i; with the SMs'
    copy path also its copy rate at 2n + i, and one that never binds at 3n (the egress and
    ingress of a GPU's copy to itself). Its events are its own methods' (the fast-forward
    counts them with the pipes': :attr:`ScaleUpPipes.event_owners`)."""

    def __init__(
        self,
        env: simpy.Environment,
        gpu_rates: list[float],
        copy_rate_bps: float | None,
        resolution_s: float,
        on_end: Callable[[int, float, float, tuple[Any, ...]], None],
    ) -> None:
        self.env = env
        #: finishes within this many seconds of each other are one event (module docstring)
        self.resolution_s = float(resolution_s)
        #: ``on_end(tid, early, lat, done_arg)`` when transfer ``tid`` sends its last byte
        #: ``early`` seconds from now (:meth:`ScaleUpPipes._finished`)
        self._on_end = on_end
        n = self.n = len(gpu_rates)
        self.copy = copy_rate_bps is not None
        caps = list(gpu_rates) * 2
        if copy_rate_bps is not None:
            caps += [float(copy_rate_bps)] * n + [math.inf]
        self._capacity = np.array(caps, dtype=float)
        # active transfers as arrays (a phase has tens of thousands at once; per-flow Python
        # loops on every start and finish made a 256-GPU layer take minutes): bytes left,
        # egress and ingress constraint, current rate (bit/s), delivery latency; what ends
        # each, in an object array in the same order. Transfers posted at one instant wait in
        # _new until the rates are solved for all of them.
        self._rem = np.zeros(0)
        self._src = np.zeros(0, dtype=np.int64)
        self._dst = np.zeros(0, dtype=np.int64)
        self._cp = np.zeros(0, dtype=np.int64)  # copy constraint (the never-binding one: off)
        self._rate = np.zeros(0)
        self._lat = np.zeros(0)
        # (transfer id, (done, arg)) as an object array: compacting it after every finish is
        # one NumPy gather, not a Python loop over every active transfer
        self._cb = np.empty(0, dtype=object)
        self._new: list[tuple[float, int, int, int, float, tuple[int, tuple[Any, ...]]]] = []
        self._last = 0.0
        self._next: Callback | None = None
        self._dirty = False

    def post(
        self,
        nbytes: int,
        cons: tuple[int, int, int],
        lat: float,
        tid: int,
        done_arg: tuple[Any, ...],
    ) -> None:
        """Add transfer ``tid`` of ``nbytes`` over constraints ``cons``; when its last byte is
        sent, ``on_end(tid, early, lat, done_arg)`` runs."""
        self._advance()
        self._new.append((float(nbytes), *cons, lat, (tid, done_arg)))
        # a phase posts many transfers at one instant: solve the rates once for all of them
        if not self._dirty:
            self._dirty = True
            call_later(self.env, 0.0, self._resolve)

    def set_gpu_capacity(self, i: int, rate_bps: float) -> None:
        """GPU ``i``'s egress and ingress capacity is now ``rate_bps``: re-solve everything."""
        self._advance()
        self._capacity[i] = self._capacity[self.n + i] = rate_bps
        self._merge()
        self._reschedule(0.0)

    def skip(self, dt: float) -> None:
        """:meth:`ScaleUpPipes.skip` for this domain."""
        self._advance()
        if dt > 0 and self._rem.size:
            self._rem -= self._rate * dt / 8.0

    def _resolve(self, _arg: object) -> None:
        self._dirty = False
        self._advance()
        self._merge()
        self._reschedule()

    # ----------------------------------------------------------------- fluid core

    def _merge(self) -> None:
        """Append the transfers posted since the last solve (at rate 0 until solved)."""
        new = self._new
        if not new:
            return
        self._new = []
        k = len(new)
        self._rem = np.concatenate([self._rem, np.fromiter((f[0] for f in new), float, k)])
        self._src = np.concatenate([self._src, np.fromiter((f[1] for f in new), np.int64, k)])
        self._dst = np.concatenate([self._dst, np.fromiter((f[2] for f in new), np.int64, k)])
        self._cp = np.concatenate([self._cp, np.fromiter((f[3] for f in new), np.int64, k)])
        self._lat = np.concatenate([self._lat, np.fromiter((f[4] for f in new), float, k)])
        self._rate = np.concatenate([self._rate, np.zeros(k)])
        cbs = np.empty(k, dtype=object)
        cbs[:] = [f[5] for f in new]
        self._cb = np.concatenate([self._cb, cbs])

    def _advance(self) -> None:
        now = self.env.now
        dt = now - self._last
        if dt > 0 and self._rem.size:
            self._rem -= self._rate * dt / 8.0
        self._last = now

    def _reschedule(self, solve_from: float | None = 0.0) -> None:
        """Re-solve the rates of transfers whose rate is at least ``solve_from`` (0: all of
        them; None: none, the set of transfers did not change) and schedule the next finish.

        Why a partial solve is exact: when transfers leave, every transfer whose max-min rate
        was below the lowest rate r of the leavers keeps its rate (progressive filling runs
        identically up to level r: no constraint that saturates below r carried a leaver).
        With those rates fixed, the others' allocation is the max-min allocation over the
        capacity they leave: the true allocation meets the bottleneck condition there, and it
        is unique. In an all-to-all phase the re-solved set is a few per cent of the active
        transfers (median 2 % in superpod-moe), so a finish costs O(active) NumPy work, not a
        full progressive filling."""
        if self._next is not None:
            self._next.cancel()
            self._next = None
        m = self._rem.size
        if not m:
            return
        if solve_from is not None:
            self._solve(solve_from)
        rates = self._rate
        moving = rates > 0
        if moving.any():
            t_min = float((8.0 * np.maximum(self._rem[moving], 0.0) / rates[moving]).min())
            if math.isfinite(t_min):
                self._next = call_later(self.env, t_min, self._finish)

    def _solve(self, solve_from: float) -> None:
        # 1e-6 below: transfers tied with the lowest leaver within rounding are re-solved too
        # (re-solving more than needed is still exact, see _reschedule)
        sub = self._rate >= solve_from * (1.0 - 1e-6) if solve_from > 0 else None
        if sub is not None and sub.all():
            sub = None
        capacity = self._capacity
        src, dst, cp = self._src, self._dst, self._cp
        m = capacity.size
        if sub is not None:
            fixed = ~sub
            load = np.bincount(src[fixed], self._rate[fixed], minlength=m)
            load += np.bincount(dst[fixed], self._rate[fixed], minlength=m)
            if self.copy:
                load += np.bincount(cp[fixed], self._rate[fixed], minlength=m)
            capacity = np.maximum(capacity - load, 0.0)
            src, dst, cp = src[sub], dst[sub], cp[sub]
        if not self.copy:
            rates = maxmin_pairs(src, dst, capacity)
        else:
            # three constraints a transfer (egress, ingress, copy): the general solver
            import scipy.sparse as sps  # imported when first used (fabric.maxmin)

            f = np.arange(src.size)
            inc = sps.csc_array(
                (np.ones(3 * f.size), (np.concatenate([src, dst, cp]), np.tile(f, 3))),
                shape=(m, f.size),
            )
            rates = maxmin_rates(inc, capacity).rates
        if sub is None:
            self._rate = rates
        else:
            self._rate[sub] = rates

    def _finish(self, _arg: object) -> None:
        self._next = None
        if self._dirty:
            return  # a re-solve is already scheduled for this instant
        self._advance()
        # bytes left that the current rate would carry in a picosecond count as done, and
        # with a resolution those it would carry within it: they leave the fluid now and are
        # delivered at their own finish times
        q = self.resolution_s
        done = self._rem <= _EPS_BYTES + self._rate * (1e-12 + q) / 8.0
        solve_from = None  # nothing left: the allocation stands
        if done.any():
            solve_from = float(self._rate[done].min())
            cb = self._cb
            for i in np.flatnonzero(done).tolist():
                tid, done_arg = cb[i]
                d = 0.0
                if q > 0 and self._rate[i] > 0:
                    d = max(8.0 * float(self._rem[i]) / float(self._rate[i]), 0.0)
                self._on_end(tid, d, float(self._lat[i]), done_arg)
            keep = ~done
            self._cb = cb[keep]
            self._rem, self._src, self._dst = self._rem[keep], self._src[keep], self._dst[keep]
            self._cp = self._cp[keep]
            self._rate, self._lat = self._rate[keep], self._lat[keep]
        self._reschedule(solve_from)
