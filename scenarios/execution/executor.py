"""The executor: runs an operation graph (:mod:`podsim.workloads.graph`) over an engine.

A simulating engine offers a :class:`Transport` (post a message, get called back when it has
been delivered); :func:`execute` starts every node of the graph when its dependencies have ended
(see the graph module for the timing rules), hands ``send`` nodes to the transport, lets
``compute`` nodes take their duration on the simulated clock, and records each node's start and
end. Nothing else is modelled here: where a message goes and how long it takes is the engine's.

Order of work at one instant is deterministic: nodes that become ready at once start in the order
they became ready (breadth first from the node that ended), the nodes with no dependency in the
order they were added. Zero-time cascades (joins, zero-length compute, ``local`` messages) run in
a loop, never by recursion, so a chain of a million joins cannot overflow the stack.

The event loop is :func:`podsim.fabric.invariants.run_checked`: ``fabric.kernel.run``'s inlined
loop plus one comparison per event that stops the run with an
:class:`podsim.fabric.invariants.InvariantViolation` if an event would run before ``now`` (the
``time`` invariant, checked on every event; it costs nothing measurable, so it stays on even with
``sim.checks: false``, which only skips the O(ports) checks an engine runs from ``progress``).
The loop leaves at the event that ends the graph's last node (nothing after it runs, so the
fabric's counters stop with the workload), at ``time_limit`` (status ``time-limit``; events at
exactly the limit are left) or when no event is left (``stalled``). It calls
``progress(now, events scheduled so far)`` at the start, every ``progress_every`` events and at
the end (deterministic: a count of events, never wall time; the loop puts nothing on the event
heap, so where progress is reported cannot change the simulation); Ctrl-C stops it after the
current event and returns what was completed (status ``interrupted``).
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import simpy
from podsim.fabric.invariants import run_checked
from podsim.scenarios.execution.collector import checkpoint
from podsim.workloads.graph import COMPUTE, JOIN, OpGraph

__all__ = ["PROGRESS_EVENTS", "GraphRun", "Transport", "execute"]

#: events between two progress calls (about 20 per second of wall time at 400 k events/s)
PROGRESS_EVENTS = 20_000


class Transport(Protocol):
    """What a simulating engine offers the executor.

    ``send`` must eventually call ``on_done(msg)`` exactly once, at the simulated time the
    message's last byte was delivered to the receiver (or never, if it cannot be delivered).
    A transport may set ``carries_local = True`` to be sent a rank's messages to itself too.
    """

    env: simpy.Environment

    def send(
        self,
        msg: int,
        src_rank: int,
        dst_rank: int,
        nbytes: int,
        hop: str,
        on_done: Callable[[int], None],
    ) -> None: ...


@dataclass
class GraphRun:
    """Start and end of every node (NaN if it never started / ended), the run's status
    (``complete``, ``time-limit``, ``stalled``, ``interrupted``) and the simulated time at which
    the last node ended (or the clock when the run stopped)."""

    start_s: np.ndarray
    end_s: np.ndarray
    status: str
    sim_time_s: float


def _event_count(env: simpy.Environment) -> int | None:
    eid = getattr(env, "_eid", None)
    text = repr(eid)
    if text.startswith("count(") and text.endswith(")"):
        try:
            return int(text[6:-1].split(",")[0])
        except ValueError:
            return None
    return None


class _Finished(Exception):
    """Raised by the callback of the graph-done event: leaves the event loop right there (what
    SimPy's ``env.run(until=event)`` does with StopSimulation)."""


def _leave_loop(_ev: simpy.Event) -> None:
    raise _Finished


@contextmanager
def _ctrl_c_between_events(pending: list[bool]) -> Iterator[None]:
    """Defer Ctrl-C to the next progress point, between two events.

    Python raises KeyboardInterrupt wherever the main thread is: inside a NIC callback it
    left a packet counted as sent but nowhere in flight, and the checks that follow called the
    user's Ctrl-C a model bug ("bytes not conserved") and kept no results. A second Ctrl-C
    stops at once. Only in the main thread with Python's own handler in place (tests and
    embedding programs that install theirs keep them)."""
    import signal
    import threading

    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return

    def defer(_signum: int, _frame: object) -> None:
        if pending:
            raise KeyboardInterrupt
        pending.append(True)

    previous = signal.signal(signal.SIGINT, defer)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def execute(
    env: simpy.Environment,
    transport: Transport,
    graph: OpGraph,
    hops: np.ndarray,
    *,
    time_limit: float | None = None,
    progress: Callable[[float, int | None], None] | None = None,
    progress_every: int = PROGRESS_EVENTS,
    clock: Callable[[], float] | None = None,
) -> GraphRun:
    """Run ``graph`` over ``transport`` (see the module docstring). ``hops[m]`` is message
    ``m``'s hop (the ``hop`` column of ``graph.messages()``); a ``local`` message or one to the
    sender itself is delivered at once, without the transport, unless the transport's
    ``carries_local`` is true (it models a GPU's copies to itself). ``clock``: the run's time now
    when it is not ``env.now`` (an engine's fast-forward runs a virtual clock ahead of the
    event clock; the executor records, compares and reports on it, and its timeouts are
    differences of it)."""
    a = graph.arrays()
    n = len(a.kind)
    start_s = np.full(n, np.nan)
    end_s = np.full(n, np.nan)
    # The graph's own typed columns (8 bytes a node; a list would hold an object per node):
    # a 10,000-GPU training step has about 10^7 nodes.
    kind, rank, peer, nbytes = graph.kind, graph.rank, graph.peer, graph.nbytes
    duration, delay, anchor, msg = graph.duration_s, graph.delay_s, graph.anchor, graph.msg
    succ_ptr = array("q", a.succ_ptr.tobytes())
    succ = array("q", a.succ.tobytes())
    pending = array("q", a.indegree.tobytes())
    hop_names, hop_codes = np.unique(np.asarray(hops, dtype=str), return_inverse=True)
    hop_name = [str(h) for h in hop_names]  # one string object per distinct hop
    hop_of = array("i", hop_codes.astype(np.int32).tobytes())
    node_of_msg = array("q", bytes(8 * len(hop_of)))
    for i in np.flatnonzero(a.msg >= 0).tolist():
        node_of_msg[msg[i]] = i
    left = [n]
    busy: dict[int, deque[int]] = {}  # rank -> compute nodes waiting for its GPU (key: busy)
    cascade: deque[int] = deque()  # nodes that ended at this instant, successors not yet freed
    timeout = env.timeout
    clock_ = clock if clock is not None else lambda: env.now
    # a transport that models a GPU's copies to itself (the SMs' copy path) takes them too
    carries_local = bool(getattr(transport, "carries_local", False))

    def ended(i: int) -> None:
        """Node ``i`` ended now: free its successors, and theirs when they end at once."""
        cascade.append(i)
        if len(cascade) > 1:
            return  # an outer call is draining the cascade
        now = clock_()
        while cascade:
            j = cascade[0]
            end_s[j] = now
            left[0] -= 1
            for k in succ[succ_ptr[j] : succ_ptr[j + 1]]:
                pending[k] -= 1
                if pending[k] == 0:
                    ready(k, now)
            cascade.popleft()
        if left[0] == 0:
            done = env.event()
            done.callbacks.append(_leave_loop)
            done.succeed()

    def ready(i: int, now: float) -> None:
        t = now + delay[i] if anchor[i] < 0 else max(now, start_s[anchor[i]] + delay[i])
        if t > now:
            timeout(t - now).callbacks.append(lambda _ev, i=i: begin(i))
        else:
            begin(i)

    def computed(i: int) -> None:
        """Compute node ``i`` ended: its GPU takes the next waiting node, if any."""
        r = rank[i]
        waiting = busy[r]
        if waiting:
            j = waiting.popleft()
            start_s[j] = clock_()
            timeout(duration[j]).callbacks.append(lambda _ev, j=j: computed(j))
        else:
            del busy[r]
        ended(i)

    def delivered(m: int) -> None:
        i = node_of_msg[m]
        if not math.isnan(end_s[i]):
            raise RuntimeError(f"message {m} was delivered twice (engine bug)")
        ended(i)

    def begin(i: int) -> None:
        start_s[i] = clock_()
        k = kind[i]
        if k == JOIN:
            ended(i)
        elif k == COMPUTE:
            if duration[i] <= 0:
                ended(i)
            elif rank[i] in busy:  # the GPU runs one kernel at a time: wait for it
                busy[rank[i]].append(i)
            else:
                busy[rank[i]] = deque()
                timeout(duration[i]).callbacks.append(lambda _ev, i=i: computed(i))
        else:
            m = msg[i]
            h = hop_name[hop_of[m]]
            if (h == "local" or rank[i] == peer[i]) and not carries_local:
                ended(i)
            else:
                transport.send(m, rank[i], peer[i], nbytes[i], h, delivered)

    ctrl_c: list[bool] = []

    def report() -> bool:
        if ctrl_c:
            raise KeyboardInterrupt  # deferred to here, between two events
        if progress is not None:
            progress(clock_(), _event_count(env))
        return False

    status = "complete"
    try:
        with _ctrl_c_between_events(ctrl_c):
            report()  # the run has started (a Ctrl-C from here on keeps what was done)
            t0 = clock_()
            for i in np.flatnonzero(a.indegree == 0).tolist():
                ready(i, t0)
            if n == 0:
                left[0] = 0
            if time_limit is not None and time_limit <= clock_():
                status = "time-limit" if left[0] else status
            elif left[0] or env._queue:
                # the network and the posted messages live until the run ends, and the loop
                # leaves garbage the collector need not walk (scenarios.execution.collector)
                checkpoint()
                try:
                    run_checked(
                        env, time_limit, check_every=max(1, int(progress_every)), stop=report
                    )
                finally:
                    checkpoint()
                # the loop ran dry or reached the limit before the last node ended (if it
                # ended exactly at the limit, its event is left unprocessed)
                if left[0]:
                    status = "stalled" if not env._queue else "time-limit"
    except _Finished:
        pass
    except KeyboardInterrupt:
        status = "interrupted"
    try:
        report()
    except KeyboardInterrupt:
        # the run is over: a Ctrl-C now only marks a run that had not finished
        status = status if status == "complete" else "interrupted"
    sim_time = float(np.nanmax(end_s)) if status == "complete" and n else float(clock_())
    return GraphRun(start_s, end_s, status, sim_time)
