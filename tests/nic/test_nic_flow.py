"""The SmartNIC's fluid model (podsim.nic.flow): QP-context misses as latency."""

from __future__ import annotations

import numpy as np
import pytest
from podsim.fabric.packet import ROCE_OVERHEAD
from podsim.nic.flow import QpCacheLatency

MTU = 4096
RATE = 400e9


def test_first_message_of_a_queue_pair_misses_and_the_next_does_not() -> None:
    q = QpCacheLatency(capacity=16, penalty_s=1e-6, mtu=MTU, first_extra=0)
    one = np.array([0]), np.array([1]), np.array([MTU]), np.array([RATE])
    # a one-packet message hides nothing of the receiver's miss: both ends pay in full
    assert q.delay(*one)[0] == pytest.approx(2e-6)
    assert q.delay(*one)[0] == 0.0  # the context is cached now


def test_the_receivers_miss_hides_behind_the_serialisation_of_the_rest() -> None:
    q = QpCacheLatency(capacity=16, penalty_s=1e-6, mtu=MTU, first_extra=0)
    n = 40 * MTU  # 39 packets after the first: 39 x (4096 + 82) B at 400 Gb/s = 3.26 us
    d = q.delay(np.array([0]), np.array([1]), np.array([n]), np.array([RATE]))[0]
    hidden = 8.0 * 39 * (MTU + ROCE_OVERHEAD) / RATE
    assert hidden > 1e-6 and d == pytest.approx(1e-6)


def test_a_card_with_more_peers_than_its_cache_keeps_missing() -> None:
    q = QpCacheLatency(capacity=2, penalty_s=1e-6, mtu=MTU, first_extra=0)
    src = np.zeros(3, dtype=np.int64)
    dst = np.array([1, 2, 3])
    size = np.full(3, MTU)
    rate = np.full(3, RATE)
    q.delay(src, dst, size, rate)  # card 0 now holds 3 contexts, above its 2
    assert (q.delay(src, dst, size, rate) > 0).all()
    wide = QpCacheLatency(capacity=3, penalty_s=1e-6, mtu=MTU, first_extra=0)
    wide.delay(src, dst, size, rate)
    assert (wide.delay(src, dst, size, rate) == 0).all()
