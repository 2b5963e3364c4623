"""The transport's retry limit (InfiniBand retry_cnt): a QP that times out ``retry_limit``
times in a row without progress fails on the next timeout, instead of retransmitting forever.

Timeout times are closed forms of the RTO schedule: the first RTO is armed when the first
packet leaves (``rto = rto_min``: the base RTT here is far below it) and doubles on every
timeout, so timeout ``j`` (1-based) fires at ``t0 + rto x (2^j - 1)``.
"""

from __future__ import annotations

import math

import pytest
import simpy
from podsim.fabric.faults import FaultInjector, NicDown
from podsim.fabric.network import Network
from podsim.fabric.topology import build_topology
from podsim.nic.nic import NicConfig, RdmaNetwork

RTO = 100e-6
SIZE = 64 << 10


def setup(retry_limit: int | None, outage: tuple[float, float | None] = (0.0, None),
          cc: str = "dcqcn"):  # fmt: skip
    env = simpy.Environment()
    net = Network(env, build_topology("star", hosts=2), seed=1)
    cfg = NicConfig(cc=cc, selector="ecmp", n_evs=1, rto_min_s=RTO, rto_max_s=1.0,
                    retry_limit=retry_limit)  # fmt: skip
    rdma = RdmaNetwork(net, cfg, seed=1)
    at, until = outage
    FaultInjector(net, [NicDown(node="nic1.p0", at=at, until=until)], reconvergence_s=0.0)
    failed: list[tuple[float, object]] = []
    rdma.on_failed.append(lambda m: failed.append((env.now, m)))
    return env, rdma, failed


@pytest.mark.parametrize("limit", [0, 2, 4])
def test_unreachable_destination_fails_after_limit_plus_one_timeouts(limit: int) -> None:
    _env, rdma, failed = setup(limit)
    m = rdma.post(0, 1, SIZE)
    rdma.run()  # returns: nothing is pending any more (no "ran dry" error)
    assert rdma.pending == 0 and not m.done and math.isnan(m.done_s)
    assert m.error.startswith("retry limit exceeded") and f"retry_limit {limit}" in m.error
    [(t, got)] = failed
    assert got is m
    assert t == pytest.approx(m.start_s + RTO * (2 ** (limit + 1) - 1), rel=1e-9)
    q = rdma.qp_table().iloc[0]
    assert q.timeouts == limit and q.failed == m.error  # retransmitted after `limit` of them
    assert rdma.message_table().error.tolist() == [m.error]


def test_no_limit_retransmits_forever() -> None:
    _env, rdma, failed = setup(None)
    m = rdma.post(0, 1, SIZE)
    rdma.run(until=RTO * (2**10))
    assert not failed and m.error is None and not m.done
    # timeout j at t0 + (2^j - 1) RTO: j = 1..10 fall before 1024 RTO (t0 is a few ns)
    assert rdma.qp_table().iloc[0].timeouts == 10
    with pytest.raises(ValueError, match="retry_limit"):
        NicConfig(retry_limit=-1)


def test_progress_resets_the_count_and_a_failed_qp_fails_new_posts_at_once() -> None:
    # an outage shorter than the retry budget: two timeouts (100, 300 us), then it gets through
    env, rdma, failed = setup(2, outage=(0.0, 250e-6))
    m = rdma.post(0, 1, SIZE)
    rdma.run()
    assert m.done and not failed and rdma.qp_table().iloc[0].timeouts == 2
    # a second outage, again two timeouts: allowed, the count restarted on progress
    env, rdma, failed = setup(2, outage=(0.0, 250e-6))
    a = rdma.post(0, 1, SIZE)
    rdma.run()
    FaultInjector(rdma.network, [NicDown(node="nic1.p0", at=env.now, until=env.now + 250e-6)],
                  reconvergence_s=0.0)  # fmt: skip
    b = rdma.post(0, 1, SIZE)
    rdma.run()
    assert a.done and b.done and rdma.qp_table().iloc[0].timeouts == 4
    # a permanent outage fails the QP; a message posted to it later fails at once
    env, rdma, failed = setup(1)
    first = rdma.post(0, 1, SIZE)
    rdma.run()
    late = rdma.post(0, 1, SIZE)
    assert [m for _, m in failed] == [first, late] and failed[1][0] == env.now
    assert late.error == first.error and rdma.pending == 0


# RCCC: the sender may not send before the receiver grants credit, so a lost credit request
# leaves nothing in flight for the data RTO to catch. The request is refreshed on the same
# schedule (one RTO, doubling), and counts against the retry limit.


def test_lost_credit_request_is_refreshed_and_the_message_completes() -> None:
    _env, rdma, failed = setup(None, outage=(0.0, 250e-6), cc="rccc")
    m = rdma.post(0, 1, SIZE)
    rdma.run()
    assert m.done and not failed
    # posted at 0; refreshes at RTO and 3 RTO; the second one finds the port up again
    first_refresh_after_outage = 3 * RTO
    assert first_refresh_after_outage < m.done_s < first_refresh_after_outage + 20e-6
    assert rdma.qp_table().iloc[0].timeouts == 0  # no data packet was ever lost


@pytest.mark.parametrize("limit", [0, 2])
def test_unreachable_credit_receiver_fails_after_limit_plus_one_refreshes(limit: int) -> None:
    _env, rdma, failed = setup(limit, cc="rccc")
    m = rdma.post(0, 1, SIZE)
    rdma.run()
    assert rdma.pending == 0 and not m.done
    assert m.error.startswith("retry limit exceeded")
    [(t, got)] = failed
    # posted at 0 and never sent (no credit): the refresh schedule alone sets the time
    assert math.isnan(m.start_s)
    assert got is m and t == pytest.approx(RTO * (2 ** (limit + 1) - 1), rel=1e-9)
