"""A transport with a fixed delay per message, shared by the trace-import tests."""

from __future__ import annotations

import simpy
from podsim.scenarios.execution.executor import GraphRun, execute
from podsim.workloads.graph import OpGraph

RATE = 8e9  # bytes/s
LAT = 1e-6  # s


class FixedTransport:
    """Delivers a message nbytes / RATE + LAT after it is posted (no contention)."""

    def __init__(self) -> None:
        self.env = simpy.Environment()

    def send(self, msg, src_rank, dst_rank, nbytes, hop, on_done):
        self.env.timeout(nbytes / RATE + LAT).callbacks.append(lambda _e: on_done(msg))


def replay(g: OpGraph, num_ranks: int) -> GraphRun:
    t = FixedTransport()
    return execute(t.env, t, g, g.messages(num_ranks)["hop"].to_numpy())


def msg_time(nbytes: int) -> float:
    return nbytes / RATE + LAT
