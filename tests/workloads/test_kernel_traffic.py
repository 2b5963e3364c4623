"""MoE traffic from the kernels' buffers (podsim.workloads.kernel_traffic) equals the counts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from podsim.workloads.dispatch import MODES, get_mode
from podsim.workloads.kernel_traffic import (
    check_against_counts,
    kernel_bytes,
    kernel_traffic,
    pick_ranks,
)
from podsim.workloads.layout import EPLayout
from podsim.workloads.moe import moe_layer, moe_layer_trace
from podsim.workloads.precision import bytes_per_token

R, TPR, GPN = 16, 24, 4


@pytest.fixture(scope="module")
def layer():
    return moe_layer("deepseek-v3", R, TPR, GPN, routing_limit="none", seed=3)


@pytest.mark.parametrize("mode", MODES.names())
@pytest.mark.parametrize("dtypes", [("fp8", "bf16"), ("bf16", "fp8")])
def test_kernel_buffers_hold_exactly_the_counted_messages(layer, mode, dtypes):
    m, (dd, cd) = get_mode(mode), dtypes
    hidden = 7168
    kt = kernel_traffic(
        layer.layout,
        layer.physical_topk,
        layer.placement.num_physical,
        m,
        np.arange(R),
        dd,
        cd,
        hidden,
    )
    lay = layer.layout
    np.testing.assert_array_equal(kt.layout.pair_tokens, lay.pair_tokens)
    np.testing.assert_array_equal(kt.layout.pair_copies, lay.pair_copies)
    np.testing.assert_array_equal(kt.layout.node_tokens, lay.node_tokens)
    assert kt.dispatch_row == bytes_per_token(dd, hidden)
    assert kt.combine_row == bytes_per_token(cd, hidden)
    check_against_counts(kt, lay, bytes_per_token(dd, hidden), bytes_per_token(cd, hidden))


def test_a_sample_of_ranks_reads_only_those_rows(layer):
    m = get_mode("deepep-normal")
    ranks = np.array([0, 5, 15])
    kt = kernel_traffic(
        layer.layout,
        layer.physical_topk,
        layer.placement.num_physical,
        m,
        ranks,
        "fp8",
        "bf16",
        1024,
    )
    lay = layer.layout
    np.testing.assert_array_equal(kt.layout.pair_tokens[ranks], lay.pair_tokens[ranks])
    others = np.setdiff1d(np.arange(R), ranks)
    assert kt.layout.pair_tokens[others].sum() == 0 < lay.pair_tokens[others].sum()


def test_a_count_that_disagrees_with_the_buffers_is_an_error(layer):
    m = get_mode("megatron-alltoall")
    lay = layer.layout
    kt = kernel_traffic(
        lay,
        layer.physical_topk,
        layer.placement.num_physical,
        m,
        np.arange(R),
        "fp8",
        "bf16",
        1024,
    )
    wrong = lay.pair_copies.copy()
    wrong[3, 7] += 1
    bad = EPLayout(lay.layout, lay.token_offsets, lay.pair_tokens, wrong, lay.node_tokens)
    with pytest.raises(ValueError, match=r"pair_copies\[src 3, dst 7\] = \d+ rows in the buf"):
        check_against_counts(kt, bad, kt.dispatch_row, kt.combine_row)
    with pytest.raises(ValueError, match="dispatch buffer rows are 1056 B; the counts use 1057"):
        check_against_counts(kt, lay, kt.dispatch_row + 1, kt.combine_row)


def test_pick_ranks_follows_the_memory_budget(layer):
    m, lay = get_mode("deepep-normal"), layer.layout
    every = kernel_bytes(lay, m, np.arange(R), 7392, 7168)
    assert pick_ranks(lay, m, "counts", 1 << 40, 4, 7392, 7168) is None
    np.testing.assert_array_equal(pick_ranks(lay, m, "auto", every, 4, 7392, 7168), np.arange(R))
    sample = pick_ranks(lay, m, "auto", every // 3, 4, 7392, 7168)
    assert sample.tolist() == [0, 5, 10, 15]  # spread evenly over the group
    assert kernel_bytes(lay, m, sample, 7392, 7168) <= every // 3
    with pytest.raises(ValueError, match="more than kernel_memory = 1000 B"):
        pick_ranks(lay, m, "kernels", 1000, 4, 7392, 7168)
    with pytest.raises(ValueError, match="cannot hold the kernel buffers of even one rank"):
        pick_ranks(lay, m, "auto", 1000, 4, 7392, 7168)


@pytest.mark.parametrize("mode", MODES.names())
def test_trace_from_kernels_equals_trace_from_counts(mode):
    kw = {"mode": mode, "layers": 2, "seed": 1}
    a = moe_layer_trace("deepseek-v3", R, TPR, GPN, traffic_source="kernels", **kw)
    b = moe_layer_trace("deepseek-v3", R, TPR, GPN, traffic_source="counts", **kw)
    c = moe_layer_trace("deepseek-v3", R, TPR, GPN, kernel_memory=12 << 20, **kw)
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(a, c)
    assert (a.attrs["traffic_source"], a.attrs["kernel_ranks"]) == ("kernels", R)
    assert (b.attrs["traffic_source"], b.attrs["kernel_ranks"]) == ("counts", 0)
    assert c.attrs["traffic_source"] == "counts" and 0 < c.attrs["kernel_ranks"] < R
