"""Event-kernel helpers: scheduled callbacks on a SimPy environment without processes.

docs/design.md ("Making SimPy fast") measured SimPy at about 2.4 M bare callbacks/s against 2.0 M
timeouts/s, with a Store hand-off costing about 3x a callback. The packet engine therefore never
runs a process per element: it puts small objects straight on the environment's event heap and
lets :meth:`simpy.Environment.step` call their ``callbacks``.

SimPy's ``step`` needs only two things from a scheduled object: an iterable ``callbacks``
attribute (set to ``None`` once processed) and a truthy ``_ok``. :class:`Callback` is such an
object with ``__slots__``; :class:`fabric.packet.Packet` is one too, so a packet in flight on a
link *is* its own arrival event (no extra allocation per hop).

The fast paths bind ``env._queue`` (the heap) and ``env._eid`` (the tie-break counter), which are
SimPy 4 internals; :func:`check_kernel` verifies at import that they exist.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

import simpy
from simpy.events import Event

__all__ = [
    "NORMAL",
    "URGENT",
    "Callback",
    "StopRun",
    "call_at",
    "call_later",
    "check_kernel",
    "events_scheduled",
    "run",
    "stop_after_event",
]

#: SimPy's priority for ordinary events (``simpy.events.NORMAL``); same-time events run FIFO.
NORMAL = 1
#: SimPy's priority for urgent events (``simpy.events.URGENT``): before NORMAL ones at a time.
URGENT = 0


class StopRun(Exception):
    """Raised by a scheduled callback to end :func:`run` at once.

    ``run`` catches it and returns normally, leaving ``env.now`` at that event's time and later
    events on the heap (like its ``stop`` predicate, but without a call per event). Only
    :func:`run` catches it: raise it from an event that runs inside ``run`` (see
    :func:`stop_after_event`, whose ``check`` can make sure of that).
    """


class Callback:
    """A one-shot scheduled call ``fn(arg)``; cancel it with :meth:`cancel` (lazy: it still pops
    from the heap, but does nothing)."""

    __slots__ = ("arg", "callbacks", "fn")
    _ok = True  # what simpy.Environment.step checks after running callbacks

    def __init__(self, fn: Callable[[Any], object], arg: Any) -> None:
        self.fn = fn
        self.arg = arg
        self.callbacks = (self._fire,)

    def _fire(self, _ev: object) -> None:
        self.fn(self.arg)

    def cancel(self) -> None:
        self.fn = _noop

    @property
    def pending(self) -> bool:
        """True until the call has run (or been popped after :meth:`cancel`)."""
        return self.callbacks is not None


def _noop(_arg: object) -> None:
    return None


def call_later(
    env: simpy.Environment, delay: float, fn: Callable[[Any], object], arg: Any = None
) -> Callback:
    """Run ``fn(arg)`` ``delay`` seconds from now (one heap entry, no process)."""
    if delay < 0:
        raise ValueError(f"delay={delay!r} must be >= 0 seconds")
    ev = Callback(fn, arg)
    heappush(env._queue, (env._now + delay, NORMAL, next(env._eid), ev))
    return ev


def call_at(
    env: simpy.Environment, when: float, fn: Callable[[Any], object], arg: Any = None
) -> Callback:
    """Run ``fn(arg)`` at absolute simulated time ``when`` (>= now)."""
    if when < env._now:
        raise ValueError(f"when={when!r} is before now={env._now!r}")
    ev = Callback(fn, arg)
    heappush(env._queue, (when, NORMAL, next(env._eid), ev))
    return ev


def stop_after_event(env: simpy.Environment, check: Callable[[], bool] | None = None) -> Callback:
    """End the running :func:`run` right after the event now being processed, if ``check()``
    (called then) is true or ``check`` is None.

    The check is an urgent event at the current time, so it runs before any ordinary event
    scheduled for now: the run stops exactly where a ``stop`` predicate that became true during
    this event would have stopped it. Costs one event per call, instead of one predicate call
    per event for the whole run. ``check`` should be false when no :func:`run` is active (the
    callback raises :class:`StopRun`, which only ``run`` catches).
    """

    def fire(_arg: object) -> None:
        if check is None or check():
            raise StopRun

    ev = Callback(fire, None)
    heappush(env._queue, (env._now, URGENT, next(env._eid), ev))
    return ev


def events_scheduled(env: simpy.Environment) -> int:
    """How many events have been scheduled on ``env`` so far (SimPy numbers each one).

    Reading the counter consumes one id; ids only need to be unique and increasing, so this is
    harmless. Used by benchmarks to report events per packet-hop.
    """
    return next(env._eid)


def run(
    env: simpy.Environment,
    until: float | Event | None = None,
    *,
    stop: Callable[[], bool] | None = None,
) -> Any:
    """Run ``env`` like :meth:`simpy.Environment.run`, with a tighter event loop.

    Same semantics for a numeric ``until`` (events scheduled exactly at ``until`` are left for
    later, and ``env.now`` ends at ``until``) or ``None`` (run until no events remain); an
    Event ``until`` is delegated to SimPy. Processes, timeouts and every other SimPy event work
    unchanged: this only inlines :meth:`simpy.Environment.step` (about 20 % fewer
    instructions per event for the packet engine).

    ``stop``: a predicate tested before the first event and after every event; once it is
    true the run returns at once, leaving ``env.now`` at the last event's time (not at
    ``until``) and later events on the heap. It costs one call per event (about 2 % of the
    NIC transport's per-event work), so callers with a cheap condition pass a bound method;
    callers that know *when* the condition can become true use :func:`stop_after_event`
    instead (a callback raising :class:`StopRun` ends the run the same way, at no cost per
    event).
    """
    if until is not None and not isinstance(until, int | float):
        if stop is not None:
            raise ValueError("stop= needs a numeric until (or None), not an Event")
        return env.run(until)
    limit = math.inf if until is None else float(until)
    if limit <= env._now:
        raise ValueError(f"until ({limit}) must be greater than the current simulation time")
    queue = env._queue
    pop = heappop
    try:  # StopRun from a callback ends the run (zero cost per event while not raised)
        if stop is not None:
            if stop():
                return None
            while queue and queue[0][0] < limit:
                env._now, _, _, ev = pop(queue)
                cbs = ev.callbacks
                ev.callbacks = None
                for cb in cbs:
                    cb(ev)
                if not ev._ok and not hasattr(ev, "_defused"):
                    _crash(ev)
                if stop():
                    return None
        elif limit == math.inf:
            while queue:
                env._now, _, _, ev = pop(queue)
                cbs = ev.callbacks
                ev.callbacks = None
                for cb in cbs:
                    cb(ev)
                if not ev._ok and not hasattr(ev, "_defused"):
                    _crash(ev)
            return None
        else:
            while queue and queue[0][0] < limit:
                env._now, _, _, ev = pop(queue)
                cbs = ev.callbacks
                ev.callbacks = None
                for cb in cbs:
                    cb(ev)
                if not ev._ok and not hasattr(ev, "_defused"):
                    _crash(ev)
    except StopRun:
        return None
    if limit < math.inf:
        env._now = limit
    return None


def _crash(ev: Event) -> None:
    """Re-raise a failed, undefused event's exception, as SimPy's ``step`` does."""
    exc = type(ev._value)(*ev._value.args)
    exc.__cause__ = ev._value
    raise exc


def check_kernel() -> None:
    """Fail loudly if the installed SimPy lacks the internals the fast paths use."""
    env = simpy.Environment()
    for attr in ("_queue", "_eid", "_now"):
        if not hasattr(env, attr):
            raise RuntimeError(
                f"simpy {simpy.__version__} has no Environment.{attr}; podsim's packet engine "
                "needs SimPy 4.x"
            )


check_kernel()
