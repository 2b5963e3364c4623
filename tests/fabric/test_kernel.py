"""Event-kernel helpers: scheduled callbacks and the inlined run loop match SimPy."""

from __future__ import annotations

import pytest
import simpy
from podsim.fabric.kernel import call_at, call_later, events_scheduled, run


def test_call_later_order_and_args():
    env = simpy.Environment()
    seen = []
    call_later(env, 2.0, seen.append, "b")
    call_later(env, 1.0, seen.append, "a")
    call_at(env, 2.0, seen.append, "c")  # same time as "b": FIFO
    env.run()
    assert seen == ["a", "b", "c"]
    assert env.now == 2.0


def test_cancel():
    env = simpy.Environment()
    seen = []
    ev = call_later(env, 1.0, seen.append, 1)
    assert ev.pending
    ev.cancel()
    env.run()
    assert seen == [] and not ev.pending


def test_bad_times():
    env = simpy.Environment()
    with pytest.raises(ValueError, match="delay"):
        call_later(env, -1.0, print)
    env.run(until=1.0)
    with pytest.raises(ValueError, match="before now"):
        call_at(env, 0.5, print)


def _scenario(runner):
    env = simpy.Environment()
    log = []

    def proc():
        for i in range(3):
            yield env.timeout(1.0)
            log.append(("p", i, env.now))

    env.process(proc())
    call_later(env, 1.5, lambda a: log.append(("c", a, env.now)), 7)
    call_later(env, 2.0, lambda a: log.append(("at2", a, env.now)), 0)
    runner(env)
    return log, env.now


@pytest.mark.parametrize("until", [None, 2.0, 2.5, 10.0])
def test_run_matches_simpy(until):
    ref = _scenario(lambda env: env.run(until))
    fast = _scenario(lambda env: run(env, until))
    assert fast == ref


def test_run_propagates_process_errors():
    env = simpy.Environment()

    def bad():
        yield env.timeout(1)
        raise KeyError("boom")

    env.process(bad())
    with pytest.raises(KeyError):
        run(env)


def test_events_scheduled_counts():
    env = simpy.Environment()
    n0 = events_scheduled(env)
    for i in range(5):
        call_later(env, i, print)
    assert events_scheduled(env) - n0 == 6  # five calls plus the read itself


@pytest.mark.parametrize("until", [None, 10.0])
def test_run_stop_predicate(until):
    """``stop`` ends the run right after the event that made it true; later events stay."""
    env = simpy.Environment()
    seen = []
    for t in (1.0, 2.0, 2.0, 3.0):
        call_at(env, t, seen.append, t)
    run(env, until, stop=lambda: len(seen) >= 2)
    assert seen == [1.0, 2.0] and env.now == 2.0
    assert len(env._queue) == 2  # the second t=2 event and t=3 remain
    run(env, until, stop=lambda: len(seen) >= 2)  # already true: nothing runs
    assert seen == [1.0, 2.0]
    run(env, until)
    assert seen == [1.0, 2.0, 2.0, 3.0]
    assert env.now == (3.0 if until is None else until)


def test_run_stop_needs_numeric_until():
    env = simpy.Environment()
    with pytest.raises(ValueError, match="stop"):
        run(env, env.timeout(1.0), stop=lambda: False)
