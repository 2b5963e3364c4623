"""Flow-level simulation: SimPy events at flow starts and ends, max-min fair rates in between.

The model (a fluid one; docs/design.md "the flow engine does its arithmetic in NumPy over all active
flows at once"):

- a flow carries ``B`` payload bytes over a set of *constraints* (directed links, bundles of
  links, NIC packet-rate or PCIe limits; :mod:`podsim.fabric.flow.paths`), loading constraint ``c``
  with ``coef[c]`` units per payload bit (``fraction x wire bytes / payload bytes`` on a link:
  the RoCEv2 framing of :mod:`podsim.fabric.flow.wire`; packets per payload bit on a packet-rate
  limit; the fraction alone on a PCIe limit);
- between two events every active flow runs at its weighted max-min fair rate over all active
  flows (:func:`podsim.fabric.maxmin.maxmin_rates`, progressive filling in NumPy/SciPy sparse),
  capped by its own ``cap`` (line rate, PCIe path, demand);
- events: a flow is posted (it joins at once), a flow sends its last byte (it leaves; its last
  byte is delivered ``latency_s`` later: propagation, FEC and switch latency per hop, plus
  store-and-forward serialisation when the caller adds it). The whole rate vector is re-solved
  at each event, never per flow. A caller that queues work behind a flow (an RDMA QP's next
  message) asks to hear when its last byte left (:meth:`FlowSim.watch_sent`).

Congestion control enters as an efficiency factor ``eta`` (:mod:`podsim.fabric.flow.cc`): a queue
inside the fabric (``switch_egress`` constraints) that two or more flows share delivers
``eta x capacity``, since a real CC loop oscillates around the fair share and keeps some
headroom; a flow alone on its path is not slowed (CC starts at line rate).

Batching (``rtol`` > 0, a fidelity knob for very large runs): after a solve at time ``t`` no
other solve happens before ``t + rtol x (t - t_a)``, ``t_a`` being the start of the oldest
flow still active (so the window scales with the age of the current communication phase;
*background* flows, such as storage reads that run through many phases, are left out: their
age says nothing about the phase, and counting it would widen every window after them);
flows that finish inside that window finish at their exact times under the rates of ``t``, and
flows posted inside it start at its end. The number of solves per phase is then at most about
``ln(T / t_1) / rtol`` whatever the number of flows, and completion times come out late by a
small multiple of ``rtol`` (capacity freed inside a window is reused only at its end).
``rtol = 0`` is the exact event-driven model.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import simpy
from podsim.fabric.kernel import call_at
from podsim.fabric.maxmin import maxmin_rates, maxmin_rows

__all__ = ["FlowSim"]

_GROW = 2


class FlowSim:
    """Flow-level fluid simulator over ``capacity`` (one entry per constraint, bit/s or
    packets/s).

    ``switch_egress`` marks the constraints that CC efficiency ``eta`` applies to; ``rtol`` is
    the batching tolerance (module docstring); ``on_deliver(flow_id)`` is called at each
    flow's delivery time; ``on_sent(flow_id)`` at the time a watched flow (:meth:`watch_sent`)
    sent its last byte; ``t0`` is the earliest origin of the batching window (default: now);
    ``expect_flows`` the flows to make room for at once (more grow the storage).
    """

    def __init__(
        self,
        env: simpy.Environment,
        capacity: np.ndarray,
        *,
        switch_egress: np.ndarray | None = None,
        eta: float = 1.0,
        rtol: float = 0.0,
        on_deliver: Callable[[int], None] | None = None,
        on_sent: Callable[[int], None] | None = None,
        t0: float | None = None,
        expect_flows: int = 1024,
    ) -> None:
        cap = np.asarray(capacity, dtype=float)
        if cap.ndim != 1 or np.isnan(cap).any() or (cap < 0).any():
            raise ValueError("capacity must be a 1-D array of values >= 0 (inf = never binds)")
        if not 0 < eta <= 1:
            raise ValueError(f"eta={eta!r}: the CC efficiency must be in (0, 1]")
        if not rtol >= 0:
            raise ValueError(f"rtol={rtol!r} must be >= 0")
        self.env = env
        self.capacity = cap
        self.switch_egress = (
            np.zeros(cap.size, dtype=bool)
            if switch_egress is None
            else np.asarray(switch_egress, dtype=bool)
        )
        if self.switch_egress.shape != cap.shape:
            raise ValueError("switch_egress must have one entry per constraint")
        self.eta = float(eta)
        self.rtol = float(rtol)
        self.on_deliver = on_deliver
        self.on_sent = on_sent
        self.t0 = env.now if t0 is None else float(t0)
        self.n = 0
        # room for the flows the caller expects: growing by doubling copies every column and
        # can leave half of it unused (a 10,000-GPU training step posts about 10^7 flows)
        self._alloc(max(1, int(expect_flows)), 6)
        self._active = np.zeros(0, dtype=np.int64)
        self._pending: list[np.ndarray] = []
        self._t_last = env.now
        self._gap_until = -math.inf
        self._sched_t: float | None = None
        self._token = 0
        self.carried = np.zeros(cap.size)  # constraint units x s (bits on links)
        self.packets_on = np.zeros(cap.size)  # packets that crossed each constraint
        self.solves = 0
        self.solve_wall_s = 0.0
        self.max_active = 0
        self.passes = 0

    # ------------------------------------------------------------------ storage

    def _alloc(self, n: int, k: int) -> None:
        self.idx = np.full((n, k), -1, dtype=np.int32)
        self.coef = np.zeros((n, k))
        self.frac = np.zeros((n, k), dtype=np.float32)
        self.ctrl = np.zeros((n, k), dtype=bool)
        self.size = np.zeros(n)
        self.rem = np.zeros(n)
        self.pkts = np.zeros(n)
        self.latency_s = np.zeros(n)
        self.cap = np.full(n, np.inf)
        self.weight = np.ones(n)
        self.rate = np.zeros(n)
        self.t_post = np.full(n, np.nan)
        self.t_start = np.full(n, np.nan)
        self.t_sent = np.full(n, np.nan)
        self.t_deliver = np.full(n, np.nan)
        self.committed = np.zeros(n, dtype=bool)
        self.watched = np.zeros(n, dtype=bool)
        self.background = np.zeros(n, dtype=bool)

    def _grow(self, need: int, k: int) -> None:
        cur_n, cur_k = self.idx.shape
        if need <= cur_n and k <= cur_k:
            return
        new_n = max(cur_n, need if need <= cur_n else max(need, _GROW * cur_n))
        new_k = max(cur_k, k)
        old = {
            name: getattr(self, name)
            for name in (
                "idx",
                "coef",
                "frac",
                "ctrl",
                "size",
                "rem",
                "pkts",
                "latency_s",
                "cap",
                "weight",
                "rate",
                "t_post",
                "t_start",
                "t_sent",
                "t_deliver",
                "committed",
                "watched",
                "background",
            )
        }
        self._alloc(new_n, new_k)
        m = self.n
        for name, arr in old.items():
            if arr.ndim == 2:
                getattr(self, name)[:m, : arr.shape[1]] = arr[:m]
            else:
                getattr(self, name)[:m] = arr[:m]

    # ------------------------------------------------------------------ API

    def add(
        self,
        idx: np.ndarray,
        coef: np.ndarray,
        nbytes: np.ndarray,
        *,
        latency_s: np.ndarray | float = 0.0,
        frac: np.ndarray | None = None,
        packets: np.ndarray | None = None,
        caps: np.ndarray | float | None = None,
        weights: np.ndarray | float | None = None,
        ctrl: np.ndarray | None = None,
        background: bool = False,
    ) -> np.ndarray:
        """Post flows now; returns their ids (consecutive ints).

        ``idx`` (n, K) constraint ids (-1 = none), ``coef`` (n, K) units of each constraint per
        payload bit, ``nbytes`` payload bytes, ``latency_s`` last-byte delivery latency,
        ``frac`` (n, K) fraction of the flow on each constraint (for packet counts; default
        ``idx >= 0``), ``packets`` packets per flow, ``caps`` per-flow rate caps (bit/s of
        payload), ``weights`` max-min weights, ``ctrl`` (n, K) entries that are control traffic
        (ACKs): they load their constraint but do not make it a queue shared by two flows
        (CC efficiency ``eta``: control packets are not congestion-controlled);
        ``background`` flows do not set the origin of the batching window (module docstring).
        """
        idx = np.atleast_2d(np.asarray(idx, dtype=np.int64))
        coef = np.atleast_2d(np.asarray(coef, dtype=float))
        n, k = idx.shape
        if coef.shape != idx.shape:
            raise ValueError(f"coef shape {coef.shape} must match idx shape {idx.shape}")
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        if idx.max(initial=-1) >= self.capacity.size or idx.min(initial=0) < -1:
            raise ValueError(f"constraint ids must be in [-1, {self.capacity.size})")
        b = np.broadcast_to(np.asarray(nbytes, dtype=float), (n,))
        if np.isnan(b).any() or (b < 0).any():
            raise ValueError("nbytes must be >= 0")
        if (np.where(idx >= 0, coef, 0.0) < 0).any():
            raise ValueError("coef must be >= 0")
        self._grow(self.n + n, k)
        ids = np.arange(self.n, self.n + n, dtype=np.int64)
        self.idx[ids, :k] = idx
        self.idx[ids, k:] = -1
        self.coef[ids, :k] = np.where(idx >= 0, coef, 0.0)
        self.frac[ids, :k] = (idx >= 0) if frac is None else np.where(idx >= 0, frac, 0.0)
        self.ctrl[ids, :k] = False if ctrl is None else np.asarray(ctrl, dtype=bool)
        self.ctrl[ids, k:] = False
        self.size[ids] = b
        self.rem[ids] = b
        self.pkts[ids] = 0.0 if packets is None else np.broadcast_to(packets, (n,))
        self.latency_s[ids] = np.broadcast_to(np.asarray(latency_s, dtype=float), (n,))
        self.cap[ids] = np.inf if caps is None else np.broadcast_to(np.asarray(caps, float), (n,))
        self.weight[ids] = 1.0 if weights is None else np.broadcast_to(weights, (n,))
        self.t_post[ids] = self.env.now
        self.background[ids] = background
        self.n += n
        self._pending.append(ids)
        self._request(max(self.env.now, self._gap_until))
        return ids

    def set_capacity(self, ids: np.ndarray, values: np.ndarray) -> None:
        """Change the capacity of constraints ``ids`` now (a fault: a link degraded, down or
        repaired) and re-solve the rates at once. Flows keep the bytes they sent at the old
        rates; a capacity of 0 stalls every flow that loads the constraint (rate 0)."""
        ids = np.asarray(ids, dtype=np.int64)
        v = np.broadcast_to(np.asarray(values, dtype=float), ids.shape)
        if np.isnan(v).any() or (v < 0).any():
            raise ValueError("capacity values must be >= 0")
        self.capacity[ids] = v
        self._request(self.env.now)

    def set_caps(self, ids: np.ndarray, caps: np.ndarray | float) -> None:
        """Change the rate caps (bit/s of payload) of flows ``ids`` now and re-solve: an
        engine whose caps depend on which flows are active (e.g. a PCIe share) updates them
        when that set changes. Bytes already sent stay sent. Caps equal to the present ones
        change no rate and ask for no solve (one at once would fall inside the batching
        window)."""
        ids = np.asarray(ids, dtype=np.int64)
        v = np.broadcast_to(np.asarray(caps, dtype=float), ids.shape)
        if np.isnan(v).any() or (v < 0).any():
            raise ValueError("caps must be >= 0")
        if not ids.size or np.array_equal(self.cap[ids], v):
            return
        self.cap[ids] = v
        self._request(self.env.now)

    def reroute(self, ids: np.ndarray, idx: np.ndarray, coef: np.ndarray, frac: np.ndarray) -> None:
        """Give flows ``ids`` new constraint rows now (routing moved them to other paths) and
        re-solve. Bytes already sent stay sent; the link counters charge the flow's bytes to
        its final route (a fluid approximation)."""
        ids = np.asarray(ids, dtype=np.int64)
        idx = np.atleast_2d(np.asarray(idx, dtype=np.int64))
        if not ids.size:
            return
        k = idx.shape[1]
        self._grow(self.n, k)
        self.idx[ids, :k] = idx
        self.idx[ids, k:] = -1
        self.coef[ids, :k] = np.where(idx >= 0, coef, 0.0)
        self.coef[ids, k:] = 0.0
        self.frac[ids, :k] = np.where(idx >= 0, frac, 0.0)
        self.frac[ids, k:] = 0.0
        self.ctrl[ids] = False  # a re-routed flow keeps its data path only
        self._request(self.env.now)

    def watch_sent(self, fid: int) -> None:
        """Call ``on_sent(fid)`` when flow ``fid`` has sent its last byte (now, if it already
        has; at that time if it is known; else when a solve finds it)."""
        if self.on_sent is None:
            raise ValueError("watch_sent needs an on_sent callback")
        if self.committed[fid]:
            call_at(self.env, max(float(self.t_sent[fid]), self.env.now), self.on_sent, fid)
        else:
            self.watched[fid] = True

    @property
    def active(self) -> np.ndarray:
        """Ids of flows that are sending now."""
        return self._active[~self.committed[self._active]]

    def delivered(self) -> np.ndarray:
        """Mask over all flows: delivered by now."""
        return self.t_deliver[: self.n] <= self.env.now

    # ------------------------------------------------------------------ events

    def _request(self, t: float) -> None:
        if self._sched_t is not None and self._sched_t <= t:
            return
        self._token += 1
        self._sched_t = t
        call_at(self.env, t, self._solve, self._token)

    def _solve(self, token: int) -> None:
        if token != self._token:
            return  # superseded by an earlier request
        self._sched_t = None
        env = self.env
        now = env.now
        act = self._active
        if act.size:
            act = act[~self.committed[act]]
            dt = now - self._t_last
            if dt > 0 and act.size:
                self.rem[act] -= self.rate[act] * (dt / 8.0)
        if self._pending:
            new = np.concatenate(self._pending)
            self._pending = []
            self.t_start[new] = now
            act = np.concatenate([act, new])
        self._t_last = now
        # flows that have sent their last byte leave before the rates are re-solved
        done = self.rem[act] <= 1e-9 * self.size[act] + 1e-6
        if done.any():
            self.rate[act[done]] = 0.0
            self._commit(act[done], np.full(int(done.sum()), now))
            act = act[~done]
        self._active = act
        if not act.size:
            return
        self.max_active = max(self.max_active, int(act.size))
        t_wall = time.perf_counter()
        rate = self._rates(act)
        self.solve_wall_s += time.perf_counter() - t_wall
        self.solves += 1
        self.rate[act] = rate
        rem = np.maximum(self.rem[act], 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            t_fin = now + 8.0 * rem / rate
        t_fin = np.where(np.isnan(t_fin), np.inf, t_fin)
        origin = now
        if self.rtol > 0:
            fg = act[~self.background[act]]
            if fg.size:
                origin = max(self.t0, float(self.t_start[fg].min()))
        window = now + self.rtol * max(now - origin, 0.0)
        commit = t_fin <= window + 1e-12 * max(window, 1e-9)
        if commit.any():
            self._commit(act[commit], t_fin[commit])
        rest = t_fin[~commit]
        self._gap_until = window
        if rest.size:
            nxt = float(rest.min())
            if math.isfinite(nxt):
                self._request(max(nxt, window))
        if self._pending:  # posted during this call's callbacks: cannot happen, but be safe
            self._request(max(now, window))

    def _commit(self, ids: np.ndarray, t_fin: np.ndarray) -> None:
        self.committed[ids] = True
        self.t_sent[ids] = t_fin
        t_del = t_fin + self.latency_s[ids]
        self.t_deliver[ids] = t_del
        idx = self.idx[ids]
        valid = idx >= 0
        rows = idx[valid]
        bits = (self.coef[ids] * (8.0 * self.size[ids])[:, None])[valid]
        self.carried += np.bincount(rows, weights=bits, minlength=self.capacity.size)
        pk = (self.frac[ids] * self.pkts[ids][:, None])[valid]
        self.packets_on += np.bincount(rows, weights=pk, minlength=self.capacity.size)
        w = self.watched[ids]
        if w.any():
            env, fn = self.env, self.on_sent
            for i, t in zip(ids[w].tolist(), t_fin[w].tolist(), strict=True):
                call_at(env, t, fn, i)
        if self.on_deliver is not None:
            env, fn = self.env, self.on_deliver
            order = np.argsort(t_del, kind="stable")
            for i, t in zip(ids[order].tolist(), t_del[order].tolist(), strict=True):
                call_at(env, t, fn, i)

    def _rates(self, act: np.ndarray) -> np.ndarray:
        """Max-min rates of flows ``act``: :func:`podsim.fabric.maxmin.maxmin_rows` on their
        rows (the same arrays as :meth:`_rates_readable`, without SciPy's per-call cost), over
        the constraints they load alone, renumbered in ascending order. A large cluster has
        hundreds of thousands of constraints and a solve touches a few of them: every pass of
        the filling works on arrays of the constraints it is given. Renumbering in order keeps
        each row's sorted order and every per-constraint sum's order, so the rates are the
        readable path's bit for bit (a differential test checks it)."""
        idx = self.idx[act]
        valid = idx >= 0
        entries = idx[valid]
        used = np.zeros(self.capacity.size, dtype=bool)
        used[entries] = True
        used_ids = np.flatnonzero(used)
        lut = np.empty(self.capacity.size, dtype=np.int32)
        lut[used_ids] = np.arange(used_ids.size, dtype=np.int32)
        local = np.full(idx.shape, -1, dtype=np.int32)
        local[valid] = lut[entries]
        cap = self.capacity[used_ids]
        if self.eta < 1.0:  # CC efficiency on shared fabric queues; ACKs do not crowd
            crowd = np.bincount(local[valid & ~self.ctrl[act]], minlength=used_ids.size) >= 2
            cap = np.where(self.switch_egress[used_ids] & crowd, cap * self.eta, cap)
        res = maxmin_rows(local, self.coef[act], cap, self.cap[act], self.weight[act])
        if res is None:  # a flow names a constraint twice: SciPy sums the entries
            return self._rates_readable(act)
        self.passes += res.iterations
        return res.rates

    def _capacity_now(self, rows: np.ndarray) -> np.ndarray:
        """Capacities with CC efficiency on the fabric queues two or more flows share (``rows``:
        the constraint of every data entry of the active flows; control entries left out)."""
        cap = self.capacity
        if self.eta < 1.0:
            crowd = np.bincount(rows, minlength=cap.size) >= 2
            cap = np.where(self.switch_egress & crowd, cap * self.eta, cap)
        return cap

    def _rates_readable(self, act: np.ndarray) -> np.ndarray:
        """:meth:`_rates` through the sparse incidence matrix of :func:`maxmin_rates`."""
        idx = self.idx[act]
        valid = idx >= 0
        counts = valid.sum(axis=1)
        indptr = np.zeros(act.size + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        rows = idx[valid]
        import scipy.sparse as sp  # imported when first used: a packet run never needs it

        a = sp.csc_array(
            (self.coef[act][valid], rows, indptr), shape=(self.capacity.size, act.size)
        )
        cap = self._capacity_now(rows[~self.ctrl[act][valid]])  # ACKs do not crowd
        res = maxmin_rates(a, cap, caps=self.cap[act], weights=self.weight[act])
        self.passes += res.iterations
        return res.rates

    # ------------------------------------------------------------------ results

    def stats(self) -> dict[str, float | int]:
        """Counters of the run: flows, solves, solver wall time, most flows active at once."""
        return {
            "flows": int(self.n),
            "solves": int(self.solves),
            "solver_wall_s": float(self.solve_wall_s),
            "filling_passes": int(self.passes),
            "max_active_flows": int(self.max_active),
            "rtol": self.rtol,
            "eta": self.eta,
        }
