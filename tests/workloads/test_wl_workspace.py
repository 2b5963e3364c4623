"""Workspace arenas (DeepEP-Buffer-like reuse) and the kernels that draw on them."""

from __future__ import annotations

import numpy as np
import pytest
from podsim.workloads.combine import combine, expert_forward
from podsim.workloads.dispatch import MODES, dispatch
from podsim.workloads.gating import gate, popularity_logits
from podsim.workloads.precision import quantize
from podsim.workloads.workspace import Workspace


def test_arrays_reuse_grow_and_align():
    ws = Workspace()
    a = ws.array("x", (4, 8), np.float32)
    assert a.shape == (4, 8) and a.dtype == np.float32 and a.flags.c_contiguous
    assert a.ctypes.data % 64 == 0
    b = ws.array("x", (2, 4), np.uint16)  # smaller: same memory
    assert np.shares_memory(a, b) and ws.nbytes == 4 * 8 * 4
    c = ws.array("x", (100,), np.float64)  # larger: a new arena, the old views stay valid
    assert not np.shares_memory(a, c) and ws.nbytes == 800 and c.ctypes.data % 64 == 0
    assert ws.array("y", (0, 5), np.int64).shape == (0, 5)
    assert ws.names() == ["x", "y"]
    ws.clear()
    assert ws.nbytes == 0
    with pytest.raises(ValueError, match=r"'z': negative dimension in shape \(-1, 2\)"):
        ws.array("z", (-1, 2), np.uint8)


@pytest.mark.parametrize("mode", MODES.names())
def test_kernels_reuse_the_workspace(mode):
    """Second call: same receive buffer, no arena grows, results identical to fresh buffers."""
    n, h, e, r, k = 64, 256, 16, 4, 4
    rng = np.random.default_rng(5)
    rt = gate(popularity_logits(n, e, k, "uniform", rng=rng), k, scoring="softmax")
    q = quantize(rng.standard_normal((n, h)).astype(np.float32), "fp8")
    ws = Workspace()
    recv, hd = dispatch(q, rt.topk_idx, rt.topk_weights, e, r, mode, workspace=ws)
    y = combine(expert_forward(recv, hd), hd, workspace=ws)
    size, names = ws.nbytes, ws.names()
    recv2, hd2 = dispatch(q, rt.topk_idx, rt.topk_weights, e, r, mode, workspace=ws)
    assert np.shares_memory(recv2.data, recv.data) and ws.nbytes == size
    fresh, hf = dispatch(q, rt.topk_idx, rt.topk_weights, e, r, mode)
    np.testing.assert_array_equal(recv2.data, fresh.data)
    np.testing.assert_array_equal(recv2.scales, fresh.scales)
    y2 = combine(expert_forward(recv2, hd2), hd2, workspace=ws)
    assert ws.nbytes == size and ws.names() == names
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(combine(expert_forward(fresh, hf), hf), y)
