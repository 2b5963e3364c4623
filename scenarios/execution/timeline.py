"""The layer timeline: each rank plays dispatch -> compute -> combine, layer after layer.

A simulating engine offers a :class:`Transport` (post a message, get called back when it has
been delivered); :func:`run_timeline` plays the trace over it. The model, per rank ``r`` and per
(step, layer), in trace order of phases (``dispatch``, then expert ``compute``, then ``combine``,
then any ``other`` traffic):

- a communication phase starts on ``r`` when ``r`` finished its previous phase; ``r`` posts its
  outgoing messages of the phase, each at the phase start plus the message's ``start_s``;
- hierarchical dispatch (trace column ``stage``, deepep-normal): ``r`` posts its stage-1 rows
  (forwarding inside the node what arrived over RDMA) once every stage-0 message addressed to
  ``r`` in the phase has been delivered, and not before the row's ``start_s``;
- the phase ends on ``r`` when every message ``r`` sends *and* every message ``r`` receives in
  that phase has been delivered (as DeepEP's dispatch/combine kernels return only when both the
  send and the receive side are done). A sender that runs ahead may deliver into a receiver that
  has not reached the phase yet: RDMA writes land in pre-registered buffers;
- ``compute`` takes the rank's expert-compute time for that layer (from the workload's compute
  model, scaled by straggler faults) and starts when the dispatch phase ended on that rank.

There is no global barrier: ranks drift apart exactly as far as the data dependencies allow.
``local`` hop messages (a rank to itself) are delivered at once, without the transport.

The event loop is :func:`fabric.invariants.run_checked`: ``fabric.kernel.run``'s inlined loop
plus one comparison per event that stops the run with an
:class:`podsim.fabric.invariants.InvariantViolation` if an event would run before ``now`` (the
``time`` invariant, checked on every event; it costs nothing measurable, so it stays on even
with ``sim.checks: false``, which only skips the O(ports) checks an engine runs from
``progress``). The loop leaves at the event that ends the last rank's last phase (nothing after
it runs, so the fabric's counters stop with the workload), at ``time_limit`` (status
``time-limit``; events at exactly the limit are left) or when no event is left (``stalled``).
It calls ``progress(now, events scheduled so far)`` at the start, every ``progress_every``
events and at the end (deterministic: a count of events, never wall time; the loop puts nothing
on the event heap, so where progress is reported cannot change the simulation); Ctrl-C stops it
after the current event and returns what was completed (status ``interrupted``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd
import simpy
from podsim.fabric.invariants import run_checked

__all__ = ["PHASE_ORDER", "PROGRESS_EVENTS", "TimelineResult", "Transport", "run_timeline"]

#: events between two progress calls (about 20 per second of wall time at 400 k events/s)
PROGRESS_EVENTS = 20_000
PHASE_ORDER = ("dispatch", "compute", "combine", "other")


class Transport(Protocol):
    """What a simulating engine offers the timeline.

    ``send`` must eventually call ``on_done(msg)`` exactly once, at the simulated time the
    message's last byte was delivered to the receiver (or never, if it cannot be delivered).
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
class TimelineResult:
    """Posting and delivery time of every trace message (NaN if never), per-rank phases."""

    post_s: np.ndarray
    end_s: np.ndarray
    phases: pd.DataFrame
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
    """Raised by the callback of the all-ranks-done event: leaves the event loop right there
    (what SimPy's ``env.run(until=event)`` does with StopSimulation)."""


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


def run_timeline(
    env: simpy.Environment,
    transport: Transport,
    trace: pd.DataFrame,
    compute: pd.DataFrame,
    *,
    num_ranks: int,
    time_limit: float | None = None,
    progress: Callable[[float, int | None], None] | None = None,
    progress_every: int = PROGRESS_EVENTS,
) -> TimelineResult:
    """Play ``trace`` (row i is message i) over ``transport``; see the module docstring.

    ``compute`` has columns step, layer, rank, compute_s (missing rows mean zero).
    """
    n = len(trace)
    post_s = np.full(n, np.nan)
    end_s = np.full(n, np.nan)
    steps = trace["step"].to_numpy()
    layers = trace["layer"].to_numpy()
    phases = trace["phase"].to_numpy()
    src = trace["src_rank"].to_numpy()
    dst = trace["dst_rank"].to_numpy()
    nbytes = trace["bytes"].to_numpy()
    start = trace["start_s"].to_numpy(dtype=float)
    hops = trace["hop"].to_numpy()
    stage = trace["stage"].to_numpy(np.int64) if "stage" in trace.columns else np.zeros(n, np.int64)

    # (step, layer) -> ordered phases; compute sits between dispatch and combine when the layer
    # has either, or a compute time.
    comp: dict[tuple[int, int, int], float] = {}
    if len(compute):
        for s, l_, r, c in compute[["step", "layer", "rank", "compute_s"]].itertuples(index=False):
            comp[(int(s), int(l_), int(r))] = float(c)
    layer_phases: dict[tuple[int, int], set[str]] = defaultdict(set)
    for s, l_, p in zip(steps.tolist(), layers.tolist(), phases.tolist(), strict=True):
        layer_phases[(s, l_)].add(p)
    for (s, l_, _r), c in comp.items():
        if c > 0:
            layer_phases[(s, l_)].add("compute")
    order = sorted(layer_phases)
    plan = {
        key: [
            p for p in PHASE_ORDER if p in ph or (p == "compute" and {"dispatch", "combine"} & ph)
        ]
        for key, ph in layer_phases.items()
    }

    outgoing: dict[tuple[int, int, str, int], list[int]] = defaultdict(list)
    forward: dict[tuple[int, int, str, int], list[int]] = defaultdict(list)
    in_stage0: dict[tuple[int, int, str, int], int] = defaultdict(int)
    remaining: dict[tuple[int, int, str, int], int] = defaultdict(int)
    bytes_out: dict[tuple[int, int, str, int], int] = defaultdict(int)
    bytes_in: dict[tuple[int, int, str, int], int] = defaultdict(int)
    for i in range(n):
        ks = (int(steps[i]), int(layers[i]), str(phases[i]), int(src[i]))
        kd = (ks[0], ks[1], ks[2], int(dst[i]))
        if stage[i] > 0:
            forward[ks].append(i)
        else:
            outgoing[ks].append(i)
            in_stage0[kd] += 1
        remaining[ks] += 1
        remaining[kd] += 1
        bytes_out[ks] += int(nbytes[i])
        bytes_in[kd] += int(nbytes[i])
    waiters: dict[tuple[int, int, str, int], simpy.Event] = {}
    msg_key = [
        (int(steps[i]), int(layers[i]), str(phases[i]), int(src[i]), int(dst[i])) for i in range(n)
    ]

    def tick(key: tuple[int, int, str, int]) -> None:
        remaining[key] -= 1
        if remaining[key] == 0:
            ev = waiters.pop(key, None)
            if ev is not None:
                ev.succeed()

    phase_start: dict[tuple[int, int, str, int], float] = {}

    def post_forward(key: tuple[int, int, str, int]) -> None:
        t0 = phase_start[key]
        for i in forward.pop(key, ()):
            delay = t0 + start[i] - env.now
            if delay > 0:
                env.timeout(delay).callbacks.append(lambda _ev, i=i: post(i))
            else:
                post(i)

    def delivered(i: int) -> None:
        if not math.isnan(end_s[i]):
            raise RuntimeError(f"message {i} was delivered twice (engine bug)")
        end_s[i] = env.now
        s, l_, p, a, b = msg_key[i]
        if stage[i] == 0:
            kd = (s, l_, p, b)
            in_stage0[kd] -= 1
            if in_stage0[kd] == 0 and kd in phase_start:
                post_forward(kd)
        tick((s, l_, p, a))
        tick((s, l_, p, b))

    def post(i: int) -> None:
        post_s[i] = env.now
        if hops[i] == "local" or src[i] == dst[i]:
            delivered(i)
        else:
            transport.send(i, int(src[i]), int(dst[i]), int(nbytes[i]), str(hops[i]), delivered)

    rows: list[tuple[int, int, str, int, float, float, int, int]] = []

    def rank_proc(r: int):
        for s, l_ in order:
            for p in plan[(s, l_)]:
                t0 = env.now
                if p == "compute":
                    dt = comp.get((s, l_, r), 0.0)
                    if dt > 0:
                        yield env.timeout(dt)
                    rows.append((s, l_, p, r, t0, env.now, 0, 0))
                    continue
                key = (s, l_, p, r)
                phase_start[key] = t0
                for i in outgoing.get(key, ()):
                    if start[i] > 0:
                        env.timeout(start[i]).callbacks.append(lambda _ev, i=i: post(i))
                    else:
                        post(i)
                if in_stage0.get(key, 0) == 0:
                    post_forward(key)
                if remaining.get(key, 0) > 0:
                    ev = env.event()
                    waiters[key] = ev
                    yield ev
                rows.append((s, l_, p, r, t0, env.now, bytes_out.get(key, 0), bytes_in.get(key, 0)))

    procs = [env.process(rank_proc(r)) for r in range(num_ranks)]
    all_done = env.all_of(procs)
    finished_at: list[float] = []
    all_done.callbacks.append(lambda _ev: finished_at.append(env.now))
    all_done.callbacks.append(_leave_loop)

    ctrl_c: list[bool] = []

    def report() -> bool:
        if ctrl_c:
            raise KeyboardInterrupt  # deferred to here, between two events
        if progress is not None:
            progress(env.now, _event_count(env))
        return False

    status = "complete"
    try:
        with _ctrl_c_between_events(ctrl_c):
            report()  # the run has started (a Ctrl-C from here on keeps what was done)
            if time_limit is not None and time_limit <= env.now:
                status = "time-limit"
            else:
                run_checked(env, time_limit, check_every=max(1, int(progress_every)), stop=report)
                # the loop ran dry or reached the limit without the last rank finishing (if the
                # last phase ended exactly at the limit, its event is left unprocessed)
                if not all_done.triggered:
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
    cols = ["step", "layer", "phase", "rank", "start_s", "end_s", "bytes_out", "bytes_in"]
    ph = pd.DataFrame(rows, columns=cols)
    ph["_order"] = ph["phase"].map(PHASE_ORDER.index)
    ph = ph.sort_values(["step", "layer", "_order", "rank"], kind="stable").drop(columns="_order")
    ph["duration_s"] = ph["end_s"] - ph["start_s"]
    sim_time = finished_at[0] if finished_at else float(env.now)
    return TimelineResult(post_s, end_s, ph.reset_index(drop=True), status, sim_time)
