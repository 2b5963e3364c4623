"""RDMA messages on one QP go in order; messages on different QPs share the link.

Both the packet and the flow engine put a message from rank ``a`` to rank ``b`` on the QP of
that rank pair (or on one of ``cluster.nic.qps_per_pair``, round-robin:
:class:`podsim.scenarios.engines.qps.QpNumbering`), and a QP's send queue is FIFO: two messages
posted at once on one QP are delivered after B/R and 2B/R, while two messages on two QPs (two
QPs per pair, or two GPUs behind one NIC card, each its own process with its own QPs) share the
port and are both delivered after about 2B/R. A line-rate host (``sim.endpoint: host``) sends
all its messages one after another, whatever their destination. In a training step's ring
reduce-scatter/all-gather this decides whether a ring's RDMA hop delivers its steps one by
one or bunched.
"""

from __future__ import annotations

import pandas as pd
import pytest
from podsim.scenarios.build.cluster import build_cluster
from podsim.scenarios.engines import ENGINES, RunContext
from podsim.scenarios.input.loader import load_scenario

NO_COMPUTE = pd.DataFrame({"step": [], "layer": [], "rank": [], "compute_s": []})
B = 4_000_000  # bytes per message
R = 400e9 / 8  # B/s: the 400G NIC port (payload; framing adds about 2 %)
ENGINE_NAMES = ["packet", "flow"]


def run_pairs(
    engine: str, pairs: list[tuple[int, int]], overrides: list[str], scenario: str = "deepep-h800"
) -> tuple[list[float], pd.DataFrame]:
    """Delivery times of B-byte messages over ``pairs`` (source, destination rank) all posted
    at t = 0, in posting order, and the run's qps table."""
    sc, _ = load_scenario(scenario, overrides=[*overrides, f"engine={engine}"])
    src, dst = zip(*pairs, strict=True)
    tr = pd.DataFrame({"src_rank": src, "dst_rank": dst, "bytes": B, "hop": "rdma"}).assign(
        step=0, layer=0, phase="dispatch", tokens=1, start_s=0.0
    )
    out = ENGINES.get(engine)(
        RunContext(sc, build_cluster(sc, max(max(pairs)) + 1), tr, NO_COMPUTE)
    )
    assert out.status == "complete"
    return out.messages.sort_values("msg")["end_s"].tolist(), out.qps


H800 = ["workload.moe.tokens_per_rank=8"]


def h800(nodes: int) -> list[str]:
    return [*H800, f"cluster.params.nodes={nodes}", f"workload.moe.ep_size={8 * nodes}"]


def fifo(first: float, second: float) -> None:
    # B/R and 2B/R, plus framing and one path latency (a few us) each
    assert B / R < first < 1.1 * B / R
    assert 2 * B / R < second < 1.1 * 2 * B / R


def shared(first: float, second: float) -> None:
    # the port's rate split in two: both about 2B/R
    assert 2 * B / R < first < 1.1 * 2 * B / R
    assert 2 * B / R < second < 1.1 * 2 * B / R


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_messages_on_one_qp_are_sent_in_order(engine: str) -> None:
    ends, qps = run_pairs(engine, [(0, 8), (0, 8)], h800(2))
    fifo(*ends)
    assert len(qps) == 1


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_two_qps_per_pair_share_the_port(engine: str) -> None:
    ends, qps = run_pairs(engine, [(0, 8), (0, 8)], [*h800(2), "cluster.nic.qps_per_pair=2"])
    shared(*ends)
    assert len(qps) == 2


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_a_line_rate_host_sends_its_messages_in_order_whatever_the_destination(
    engine: str,
) -> None:
    ends, _ = run_pairs(engine, [(0, 8), (0, 16)], [*h800(3), "sim.endpoint=host"])
    fifo(*ends)


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_two_gpus_behind_one_nic_use_a_qp_each(engine: str) -> None:
    """Two GPUs of one NIC card (superpod-128 with two GPUs per NIC) send to two GPUs of one
    remote card at once: two rank pairs, two QPs, sharing the card's ports."""
    o = [
        "cluster.params.pods=2",
        "cluster.params.gpus_per_pod=8",
        "cluster.params.gpus_per_nic=2",
        "cluster.rank_map=contiguous",
        "cluster.nic.model=smartnic-400g",
    ]
    sc, _ = load_scenario("superpod-moe", overrides=o)
    cl = build_cluster(sc, 16)
    a, b = 0, 1
    x, y = 8, 9
    assert cl.rank_nic[a] == cl.rank_nic[b] and cl.rank_nic[x] == cl.rank_nic[y]
    assert cl.rank_nic[a] != cl.rank_nic[x]
    ends, qps = run_pairs(engine, [(a, x), (b, y)], o, scenario="superpod-moe")
    first, second = ends
    assert abs(first - second) < 0.05 * first  # together, not one after the other
    assert sorted(zip(qps["src_rank"], qps["dst_rank"], strict=True)) == [(a, x), (b, y)]
