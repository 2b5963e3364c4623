"""Sampling port counters into NumPy arrays at a fixed interval.

Counters on the hot path are plain ints on the ports (:class:`podsim.fabric.port.Port`); a
:class:`Sampler` reads them every ``interval_s`` with one scheduled callback (no process), so
the cost is one event per interval, independent of traffic. Queue depth is the instantaneous
``qbytes`` of each port at the sample instant.

By default the sampler stops by itself when nothing else is scheduled (the simulation has gone
quiet), so ``env.run()`` still terminates; give ``until`` to stop earlier. With ``skip_idle``
it also jumps over stretches where every sampled queue is empty and no event is due before the
next grid point but one: those samples would all be zero, and long runs spend most of their
simulated time in such gaps (compute phases between all-to-alls); no counter changes in such
a gap (nothing happens in it). Sample times lie on the grid ``start_s + n * interval_s``, but
for the one :meth:`Sampler.finish` takes at the end of the run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import simpy
from podsim.fabric.kernel import call_at

if TYPE_CHECKING:
    from podsim.fabric.network import Network
    from podsim.fabric.port import Port

__all__ = ["Sampler"]


class Sampler:
    """Every ``interval_s`` record, for each port in ``ports`` (default: all of ``network``),
    its queue bytes and cumulative tx bytes, plus any ``probes`` (name -> zero-argument
    callable returning a number, e.g. a conservation check).

    Results after the run: ``times`` (n,), ``queue_bytes`` (n, ports) int64, ``tx_bytes`` (n,
    ports) int64 (unless ``record_tx`` is False), ``probe(name)`` (n,), ``port_names``, and
    :meth:`table` (long form of the busiest queues). ``skip_idle``: see the module docstring.
    """

    def __init__(
        self,
        env: simpy.Environment,
        network: Network | None = None,
        interval_s: float = 1e-6,
        *,
        ports: Sequence[Port] | None = None,
        probes: dict[str, Callable[[], float]] | None = None,
        start_s: float | None = None,
        until: float | None = None,
        skip_idle: bool = False,
        record_tx: bool = True,
    ) -> None:
        if not (interval_s > 0 and math.isfinite(interval_s)):
            raise ValueError(f"sampler interval_s={interval_s!r} must be a finite time > 0 s")
        if ports is None:
            if network is None:
                raise ValueError("Sampler needs a network or an explicit list of ports")
            ports = network.ports
        self.env = env
        self.interval_s = float(interval_s)
        self.ports = list(ports)
        self.port_names = [p.name for p in self.ports]
        self.until = until
        self.skip_idle = skip_idle
        self.record_tx = record_tx
        self._probes = dict(probes or {})
        self._t: list[float] = []
        self._q: list[np.ndarray] = []
        self._tx: list[np.ndarray] = []
        self._pv: dict[str, list[float]] = {k: [] for k in self._probes}
        self._n = 0
        self._t0 = env.now if start_s is None else float(start_s)
        call_at(env, self._t0, self._tick)

    def _record(self) -> np.ndarray:
        """Append one sample at ``now``; returns the queue depths."""
        ports = self.ports
        n_ports = len(ports)
        self._t.append(self.env.now)
        depth = np.fromiter((p.qbytes for p in ports), np.int64, n_ports)
        self._q.append(depth)
        if self.record_tx:
            self._tx.append(np.fromiter((p.tx_bytes for p in ports), np.int64, n_ports))
        for name, fn in self._probes.items():
            self._pv[name].append(fn())
        return depth

    def finish(self) -> None:
        """Take a last sample at ``now`` (the end of the run), off the grid, so that the last
        row holds the run's totals; one taken at this very instant is replaced."""
        if self._t and self._t[-1] == self.env.now:
            self._t.pop()
            self._q.pop()
            if self.record_tx:
                self._tx.pop()
            for name in self._probes:
                self._pv[name].pop()
        self._record()

    def _tick(self, _arg: object) -> None:
        env = self.env
        depth = self._record()
        due = env.peek()
        if due == math.inf:
            return  # nothing else will ever happen
        self._n += 1
        if self.skip_idle and not depth.any():
            # no queue can fill before the next event, so every sample up to the last grid
            # point at or before it would be zero
            self._n = max(self._n, math.floor((due - self._t0) / self.interval_s))
        nxt = self._t0 + self._n * self.interval_s  # no drift from repeated addition
        if self.until is not None and nxt > self.until:
            return
        call_at(env, nxt, self._tick)

    @property
    def times(self) -> np.ndarray:
        return np.asarray(self._t, dtype=float)

    @property
    def queue_bytes(self) -> np.ndarray:
        return _stack(self._q, len(self.ports))

    @property
    def tx_bytes(self) -> np.ndarray:
        if not self.record_tx:
            raise ValueError("this sampler was made with record_tx=False")
        return _stack(self._tx, len(self.ports))

    def table(self, keep: int) -> pd.DataFrame:
        """Long-form queue series (``time_s``, ``port``, ``depth_bytes``) of the ``keep`` ports
        with the highest peak depth (ports that never queued are left out; ties keep port
        order)."""
        if not self._t:
            return pd.DataFrame()
        depth = self.queue_bytes
        peak = depth.max(axis=0)
        order = [i for i in np.argsort(-peak, kind="stable") if peak[i] > 0][:keep]
        t = self.times
        frames = [
            pd.DataFrame({"time_s": t, "port": self.port_names[i], "depth_bytes": depth[:, i]})
            for i in order
        ]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def probe(self, name: str) -> np.ndarray:
        try:
            return np.asarray(self._pv[name], dtype=float)
        except KeyError:
            raise ValueError(f"no probe {name!r}; probes: {sorted(self._pv)}") from None

    def queue_of(self, port_name: str) -> np.ndarray:
        """Queue-depth series of one port by name (``"leaf0->nic3.p0"``)."""
        try:
            j = self.port_names.index(port_name)
        except ValueError:
            raise ValueError(f"port {port_name!r} is not sampled") from None
        return self.queue_bytes[:, j]


def _stack(rows: list[np.ndarray], n_ports: int) -> np.ndarray:
    if not rows:
        return np.zeros((0, n_ports), dtype=np.int64)
    return np.vstack(rows)
