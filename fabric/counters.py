"""Sampling port counters into NumPy arrays at a fixed interval.

Counters on the hot path are plain ints on the ports (:class:`fabric.port.Port`); a
:class:`Sampler` reads them every ``interval_s`` with one scheduled callback (no process), so
the cost is one event per interval, independent of traffic. Queue depth is the instantaneous
``qbytes`` of each port at the sample instant.

By default the sampler stops by itself when nothing else is scheduled (the simulation has gone
quiet), so ``env.run()`` still terminates; give ``until`` to stop earlier.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import simpy

from fabric.kernel import call_at

if TYPE_CHECKING:
    from fabric.network import Network
    from fabric.port import Port

__all__ = ["Sampler"]


class Sampler:
    """Every ``interval_s`` record, for each port in ``ports`` (default: all of ``network``),
    its queue bytes and cumulative tx bytes, plus any ``probes`` (name -> zero-argument
    callable returning a number, e.g. a conservation check).

    Results after the run: ``times`` (n,), ``queue_bytes`` (n, ports) int64, ``tx_bytes`` (n,
    ports) int64, ``probe(name)`` (n,), ``port_names``.
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
        self._probes = dict(probes or {})
        self._t: list[float] = []
        self._q: list[list[int]] = []
        self._tx: list[list[int]] = []
        self._pv: dict[str, list[float]] = {k: [] for k in self._probes}
        self._n = 0
        self._t0 = env.now if start_s is None else float(start_s)
        call_at(env, self._t0, self._tick)

    def _tick(self, _arg: object) -> None:
        env = self.env
        ports = self.ports
        self._t.append(env.now)
        self._q.append([p.qbytes for p in ports])
        self._tx.append([p.tx_bytes for p in ports])
        for name, fn in self._probes.items():
            self._pv[name].append(fn())
        self._n += 1
        nxt = self._t0 + self._n * self.interval_s  # no drift from repeated addition
        if self.until is not None and nxt > self.until:
            return
        if env.peek() == math.inf:
            return  # nothing else will ever happen
        call_at(env, nxt, self._tick)

    @property
    def times(self) -> np.ndarray:
        return np.asarray(self._t, dtype=float)

    @property
    def queue_bytes(self) -> np.ndarray:
        return np.asarray(self._q, dtype=np.int64).reshape(len(self._t), len(self.ports))

    @property
    def tx_bytes(self) -> np.ndarray:
        return np.asarray(self._tx, dtype=np.int64).reshape(len(self._t), len(self.ports))

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
