"""Synthetic traffic patterns for testing the fabric (not MoE): each returns a trace.

- ``uniform_all_to_all``: every rank sends ``bytes_per_pair`` to every other rank;
- ``permutation``: every rank sends ``message_bytes`` to one partner; the partners form one
  random cycle (a derangement: nobody sends to itself, everybody receives once);
- ``incast``: ``senders`` ranks (default all but the receiver) send to one ``receiver``;
- ``ring_allreduce``: the 2(R-1) steps of a ring all-reduce of ``total_bytes``: the buffer is cut
  into R chunks (sizes differ by at most one byte); in reduce-scatter step i rank r sends chunk
  (r - i) mod R to rank r+1, in all-gather step i chunk (r - i + 1) mod R. Ring step i is the
  trace's ``step`` column (steps are sequential), phase "other".

Hops follow workloads.traffic.classify_hops (``gpus_per_node`` None: every rank its own node).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from podsim.workloads.trace import make_trace

__all__ = ["incast", "permutation", "ring_allreduce", "uniform_all_to_all"]


def _check_ranks(num_ranks: int, least: int = 2) -> None:
    if num_ranks < least:
        raise ValueError(f"num_ranks must be >= {least}; got {num_ranks}")


def _check_bytes(name: str, value: int) -> int:
    if int(value) != value or value < 0:
        raise ValueError(f"{name} must be a whole number of bytes >= 0; got {value!r}")
    return int(value)


def uniform_all_to_all(
    num_ranks: int, bytes_per_pair: int, *, gpus_per_node: int | None = None, phase: str = "other"
) -> pd.DataFrame:
    """All ordered pairs of distinct ranks, ``bytes_per_pair`` each."""
    _check_ranks(num_ranks)
    b = _check_bytes("bytes_per_pair", bytes_per_pair)
    src, dst = np.nonzero(~np.eye(num_ranks, dtype=bool))
    return make_trace(
        src_rank=src,
        dst_rank=dst,
        bytes=b,
        phase=phase,
        num_ranks=num_ranks,
        gpus_per_node=gpus_per_node,
        workload="uniform",
    )


def permutation(
    num_ranks: int, message_bytes: int, *, seed: int = 0, gpus_per_node: int | None = None
) -> pd.DataFrame:
    """Each rank sends to its successor on one random cycle through all ranks."""
    _check_ranks(num_ranks)
    b = _check_bytes("message_bytes", message_bytes)
    order = np.random.default_rng(seed).permutation(num_ranks)
    return make_trace(
        src_rank=order,
        dst_rank=np.roll(order, -1),
        bytes=b,
        num_ranks=num_ranks,
        gpus_per_node=gpus_per_node,
        workload="permutation",
        seed=seed,
    )


def incast(
    num_ranks: int,
    message_bytes: int,
    *,
    receiver: int = 0,
    senders: int | None = None,
    gpus_per_node: int | None = None,
) -> pd.DataFrame:
    """``senders`` ranks (the lowest ones other than ``receiver``) each send to ``receiver``."""
    _check_ranks(num_ranks)
    b = _check_bytes("message_bytes", message_bytes)
    if not 0 <= receiver < num_ranks:
        raise ValueError(f"receiver {receiver} outside 0..{num_ranks - 1}")
    others = np.delete(np.arange(num_ranks), receiver)
    senders = len(others) if senders is None else senders
    if not 1 <= senders <= len(others):
        raise ValueError(f"senders must be in 1..{len(others)}; got {senders}")
    return make_trace(
        src_rank=others[:senders],
        dst_rank=receiver,
        bytes=b,
        num_ranks=num_ranks,
        gpus_per_node=gpus_per_node,
        workload="incast",
        receiver=receiver,
    )


def ring_allreduce(
    num_ranks: int, total_bytes: int, *, gpus_per_node: int | None = None
) -> pd.DataFrame:
    """The 2(R-1) ring steps of an all-reduce of ``total_bytes`` per rank (module docstring)."""
    _check_ranks(num_ranks)
    total = _check_bytes("total_bytes", total_bytes)
    r = num_ranks
    chunk = total // r + (np.arange(r) < total % r)
    steps = np.arange(2 * (r - 1))
    rank = np.arange(r)
    shift = np.where(steps < r - 1, steps, steps - (r - 1) - 1)  # all-gather: chunk r - i + 1
    sent = (rank[None, :] - shift[:, None]) % r  # [step, rank] chunk that rank sends
    return make_trace(
        step=np.repeat(steps, r),
        src_rank=np.tile(rank, len(steps)),
        dst_rank=np.tile((rank + 1) % r, len(steps)),
        bytes=chunk[sent].ravel(),
        num_ranks=r,
        gpus_per_node=gpus_per_node,
        workload="ring-allreduce",
        total_bytes=total,
    )
