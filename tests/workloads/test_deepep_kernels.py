"""DeepEP's pipelined internode kernels as chunk rounds (podsim.workloads.deepep_kernels)."""

from __future__ import annotations

import numpy as np
import pytest
from podsim.workloads.deepep_kernels import DeepEPKernel, deepep_kernel, normal_rounds
from podsim.workloads.layout import ep_layout
from podsim.workloads.moe import moe_layer
from podsim.workloads.traffic import phase_messages


def _rows(msg) -> dict[tuple[int, int, int, int], int]:
    """(src, dst, stage, chunk) -> tokens."""
    return {
        (int(a), int(b), int(s), int(k)): int(n)
        for a, b, s, k, n in zip(msg.src, msg.dst, msg.stage, msg.chunk, msg.tokens, strict=True)
    }


def tiny():
    """2 nodes x 2 GPUs, one expert per GPU. Rank 0's tokens: t0 -> experts 2 and 3 (both GPUs
    of node 1), t1 -> 1 and 2, t2 -> 0 and 3; every other rank's token stays at home."""
    topk = np.array(
        [[2, 3], [1, 2], [0, 3], [1, -1], [2, -1], [3, -1]],
        dtype=np.int64,
    )
    return ep_layout(topk, 4, 4, [3, 1, 1, 1], gpus_per_node=2)


def test_hand_checked_dispatch_sends_each_token_once_per_node():
    """One channel, chunks of 2 tokens. Node 1 gets t0, t1, t2 from rank 0: RDMA 0 -> 2 (the
    node's GPU with rank 0's local index) carries 3 tokens, not the 4 (token, GPU) pairs:
    round 0 = t0, t1, round 1 = t2. GPU 2 forwards t0 (round 0) and t2 (round 1) to GPU 3 and
    keeps t0, t1 (round 0). Inside node 0, rank 0 sends t1 to GPU 1 and keeps t2 (round 0: the
    node-0 positions of t1, t2 are 0, 1)."""
    msg = phase_messages(tiny(), "deepep-normal", "dispatch", 10, kernel=DeepEPKernel(2, 2, 2))
    assert _rows(msg) == {
        (0, 2, 0, 0): 2,
        (0, 2, 0, 1): 1,  # RDMA: 3 tokens to node 1 in two chunks
        (2, 3, 1, 0): 1,
        (2, 3, 1, 1): 1,  # NVLink forwards of what arrived
        (2, 2, 1, 0): 2,  # the forwarder's own rows (local)
        (0, 1, 0, 0): 1,
        (0, 0, 0, 0): 1,  # rank 0's own node
        (1, 1, 0, 0): 1,
        (2, 2, 0, 0): 1,
        (3, 3, 0, 0): 1,  # the other ranks' tokens stay at home
    }
    hop = {(int(a), int(b)): h for a, b, h in zip(msg.src, msg.dst, msg.hop, strict=True)}
    assert hop[(0, 2)] == "rdma" and hop[(2, 3)] == "scaleup" and hop[(2, 2)] == "local"
    assert msg.bytes[msg.hop == "rdma"].sum() == 3 * 10


@pytest.mark.parametrize("kernel", [DeepEPKernel(2, 2, 2), None])
def test_direct_rows_inside_a_node_are_final_and_nothing_else_is(kernel) -> None:
    """The direct scale-up and local rows of a rank's own node are final deliveries (no forward
    waits for them: DeepEP's forwarders forward per source node as its RDMA chunks arrive);
    RDMA rows, forwards and the combine's partials to a forwarder are not."""
    for phase in ("dispatch", "combine"):
        msg = phase_messages(tiny(), "deepep-normal", phase, 10, kernel=kernel)
        rows = zip(msg.src, msg.dst, msg.stage, msg.final, strict=True)
        fin = {(int(a), int(b), int(s)): int(f) for a, b, s, f in rows}
        if phase == "dispatch":
            assert fin[(0, 1, 0)] == 1 and fin[(0, 0, 0)] == 1  # rank 0's own node
            assert fin[(0, 2, 0)] == 0 and fin[(2, 3, 1)] == 0  # RDMA, forward
        else:
            assert fin[(1, 0, 0)] == 1 and fin[(0, 0, 0)] == 1  # partials for rank 0's tokens
            assert fin[(3, 2, 0)] == 0 and fin[(2, 0, 1)] == 0  # partial to the forwarder, RDMA
        assert not (msg.final.astype(bool) & (msg.stage == 1)).any()
        assert not (msg.final.astype(bool) & (msg.hop == "rdma")).any()


def test_hand_checked_combine_is_the_mirror():
    msg = phase_messages(tiny(), "deepep-normal", "combine", 10, kernel=DeepEPKernel(2, 2, 2))
    rows = _rows(msg)
    assert rows[(3, 2, 0, 0)] == 1 and rows[(3, 2, 0, 1)] == 1  # partial rows to the forwarder
    assert rows[(2, 0, 1, 0)] == 2 and rows[(2, 0, 1, 1)] == 1  # reduced rows over RDMA
    assert rows[(1, 0, 0, 0)] == 1


def test_rounds_follow_channels_and_chunks():
    """Two ranks of 5 and 3 tokens, 2 channels (ceil(5/2) = 3 and ceil(3/2) = 2 tokens each),
    chunk 2: positions restart in every (rank, channel)."""
    in_node = np.array([[1, 0], [1, 1], [1, 1], [0, 1], [1, 1], [1, 0], [1, 1], [1, 1]], bool)
    src = np.array([0, 0, 0, 0, 0, 1, 1, 1])
    tok, node = np.nonzero(in_node)
    got = normal_rounds(tok, node, src, np.array([0, 5, 8]), channels=2, chunk=2)
    expect = np.array([[0, -1], [0, 0], [1, 0], [-1, 0], [0, 0], [0, -1], [0, 0], [0, 0]])
    np.testing.assert_array_equal(got, expect[tok, node])


@pytest.mark.parametrize("phase", ["dispatch", "combine"])
def test_chunking_preserves_every_pairs_bytes(phase):
    """Summed over rounds, every (src, dst, stage) carries what the unchunked model carries."""
    lay = moe_layer("deepseek-v3", 32, 256, 8, seed=3).layout
    whole = phase_messages(lay, "deepep-normal", phase, 7392)
    cut = phase_messages(lay, "deepep-normal", phase, 7392, kernel=deepep_kernel(32))
    assert cut.chunk.max() > 0  # really cut

    def by_pair(m):
        out: dict[tuple[int, int, int], int] = {}
        for a, b, s, n in zip(m.src, m.dst, m.stage, m.bytes, strict=True):
            out[(int(a), int(b), int(s))] = out.get((int(a), int(b), int(s)), 0) + int(n)
        return out

    assert by_pair(cut) == by_pair(whole)
    # every RDMA chunk holds at most channels x chunk tokens
    k = deepep_kernel(32)
    rdma = cut.hop == "rdma"
    assert cut.tokens[rdma].max() <= k.channels * k.chunk(phase)


def test_recommended_chunks_are_deepeps_and_bad_values_refused():
    assert deepep_kernel(16).dispatch_rdma_chunk == 20  # Config(num_sms, 36, 288, 20, 128)
    assert deepep_kernel(64).combine_rdma_chunk == 8
    assert deepep_kernel(256).dispatch_rdma_chunk == 12  # nearest size in the table: 160
    assert deepep_kernel(64, dispatch_rdma_chunk=4).dispatch_rdma_chunk == 4
    with pytest.raises(ValueError, match="even SM count"):
        DeepEPKernel(num_sms=23)
    with pytest.raises(ValueError, match="combine_rdma_chunk=0"):
        DeepEPKernel(combine_rdma_chunk=0)
