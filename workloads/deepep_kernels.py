"""DeepEP's internode normal kernels as a message schedule: channels, RDMA chunks, forwarding.

Read from github:deepseek-ai/DeepEP at commit dd758caf451848bd150e1046af3d0a73e5fff38d
(``csrc/kernels/legacy/internode.cu``, ``csrc/legacy/config.hpp``, ``deep_ep/buffers/legacy.py``,
``tests/legacy/test_internode.py``). The mechanism, as the dispatch kernel runs it:

- the kernel runs on ``num_sms`` SMs grouped in ``num_sms / 2`` *channels* (one RDMA-sender SM
  and one forwarder SM each); channel ``c`` of a rank owns its tokens
  ``[c * ceil(N / C), (c + 1) * ceil(N / C))`` (``get_channel_task_range``);
- the sender SM copies each token once per destination *node* into that node's send buffer (the
  node's GPU with the sender's local index receives it: ``translate_dst_rdma_rank``); the
  coordinator warp issues one RDMA write per (channel, node) whenever
  ``num_max_rdma_chunked_send_tokens`` tokens are ready (fewer at the end), on that channel's
  queue pair, in token order; tokens for the sender's own node go through its own receive
  buffer without the NIC;
- the forwarder SM of the receiving GPU forwards each arrived token over NVLink to every GPU of
  its node that holds one of the token's experts, once per GPU, as the chunks arrive (its
  ``kRDMAAndNVLForwarder`` warps, one per destination GPU, go round-robin over the source nodes
  and forward whatever a node's RDMA channel tail has advanced past: no forward waits for
  another node's chunks or for traffic it does not carry).

podsim models this as route stages with chunk *rounds* (trace columns ``stage`` and ``chunk``,
:mod:`podsim.workloads.trace`): round ``k`` of a (source, node) pair is the ``k``-th RDMA chunk of
every channel (channels run side by side, so round ``k`` of all channels travels as one message);
round ``k`` of a pair is posted after round ``k - 1`` of that pair, without waiting for it to
complete (the coordinator's puts are non-blocking, ``nvshmemi_ibgda_put_nbi_warp``, and one queue
pair sends them in order);
the NVLink forward of round ``k`` from forwarder ``f`` to ``t`` waits for the round-``k`` RDMA
chunks arriving at ``f`` (from every source node together: coarser than DeepEP's per-node
forwarding). Tokens from the forwarder's own node go to their GPUs directly (stage 0),
chunked the same way, as final deliveries (trace column ``final``: no forward waits for them).
Combine is the mirror image (the GPUs send their partial rows of round ``k``
to the forwarder over NVLink, which sends the reduced chunk over RDMA), with the combine chunk.

Assumptions: the receive buffers never stall a sender (DeepEP's ``num_max_rdma_chunked_recv_tokens``
= 128 tokens per (channel, node) holds 4 to 16 chunks of the recommended configs, so a window
would bind only when forwarding falls that far behind); per-SM copy throughput is not limited
(DeepEP publishes no SM copy rate); the NVLink forward of a round is one message per (forwarder,
GPU) rather than DeepEP's ``num_max_nvl_chunked_send_tokens`` pieces (NVLink latency is well
below a chunk's serialisation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "COMBINE_RDMA_CHUNK",
    "DISPATCH_RDMA_CHUNK",
    "TEST_NUM_SMS",
    "DeepEPKernel",
    "deepep_kernel",
    "normal_rounds",
]

#: SMs of DeepEP's internode test (``tests/legacy/test_internode.py``: ``num_sms = 24``), the
#: setting of its published normal-kernel table; ``Buffer.num_sms`` defaults to 20.
TEST_NUM_SMS = 24
#: ``num_max_rdma_chunked_send_tokens`` of DeepEP's recommended configs by EP size
#: (``Buffer.get_dispatch_config`` / ``get_combine_config`` in deep_ep/buffers/legacy.py).
DISPATCH_RDMA_CHUNK = {2: 6, 4: 6, 8: 6, 16: 20, 24: 8, 32: 8, 48: 8, 64: 8, 96: 12, 128: 12,
                       144: 12, 160: 12}  # fmt: skip
COMBINE_RDMA_CHUNK = {2: 6, 4: 6, 8: 6, 16: 12, 24: 8, 32: 8, 48: 8, 64: 8, 96: 8, 128: 8,
                      144: 8, 160: 8}  # fmt: skip


@dataclass(frozen=True)
class DeepEPKernel:
    """Parameters of DeepEP's internode normal kernels (module docstring).

    ``num_sms``: SMs of the kernel (even; channels = num_sms / 2). ``dispatch_rdma_chunk`` /
    ``combine_rdma_chunk``: tokens per RDMA write of one channel to one node
    (``num_max_rdma_chunked_send_tokens``).
    """

    num_sms: int = TEST_NUM_SMS
    dispatch_rdma_chunk: int = 8
    combine_rdma_chunk: int = 8

    def __post_init__(self) -> None:
        if self.num_sms < 2 or self.num_sms % 2:
            raise ValueError(f"num_sms={self.num_sms!r}: DeepEP needs an even SM count >= 2")
        for name in ("dispatch_rdma_chunk", "combine_rdma_chunk"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)!r}: expected >= 1 tokens")

    @property
    def channels(self) -> int:
        return self.num_sms // 2

    def chunk(self, phase: str) -> int:
        """RDMA chunk (tokens) of ``phase`` ('dispatch' or 'combine')."""
        return self.dispatch_rdma_chunk if phase == "dispatch" else self.combine_rdma_chunk


def _recommended(table: dict[int, int], num_ranks: int) -> int:
    """The entry of DeepEP's table for ``num_ranks``, or of the nearest EP size in it."""
    return table[min(table, key=lambda k: (abs(k - num_ranks), k))]


def deepep_kernel(
    num_ranks: int,
    num_sms: int = TEST_NUM_SMS,
    dispatch_rdma_chunk: int | None = None,
    combine_rdma_chunk: int | None = None,
) -> DeepEPKernel:
    """DeepEP's kernel parameters for ``num_ranks``: chunks not given are DeepEP's recommended
    ones for that EP size (the nearest size in its table when it has no entry)."""
    return DeepEPKernel(
        num_sms,
        dispatch_rdma_chunk or _recommended(DISPATCH_RDMA_CHUNK, num_ranks),
        combine_rdma_chunk or _recommended(COMBINE_RDMA_CHUNK, num_ranks),
    )


def normal_rounds(
    tok: np.ndarray,
    node: np.ndarray,
    src_rank: np.ndarray,
    token_offsets: np.ndarray,
    channels: int,
    chunk: int,
) -> np.ndarray:
    """Round of every distinct (token ``tok[i]``, node ``node[i]``) pair (int64).

    Rank ``r``'s tokens are ids ``token_offsets[r]:token_offsets[r + 1]`` in order
    (``src_rank`` the rank of every token id). A token's channel is its index within its rank
    over ``ceil(N_r / channels)``; its round on a node is its position among the channel's
    tokens bound for that node (token order) integer-divided by ``chunk``.
    """
    tok = np.asarray(tok, dtype=np.int64)
    node = np.asarray(node, dtype=np.int64)
    off = np.asarray(token_offsets, dtype=np.int64)
    src = np.asarray(src_rank, dtype=np.int64)[tok]
    per = np.maximum(-(-(off[1:] - off[:-1]) // channels), 1)  # ceil(N_r / C) per rank
    ch = (tok - off[src]) // per[src]
    run = (src * channels + ch) * (int(node.max(initial=-1)) + 1) + node  # (rank, channel, node)
    order = np.lexsort((tok, run))
    ordered = run[order]
    n = ordered.size
    first = np.ones(n, dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n) - start
    return pos // chunk
