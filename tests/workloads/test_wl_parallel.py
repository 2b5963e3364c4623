"""Threaded kernels (podsim.workloads.parallel): every row once, same bits for any thread count."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from podsim.workloads.combine import combine
from podsim.workloads.dispatch import MODES, dispatch
from podsim.workloads.gating import gate, popularity_logits
from podsim.workloads.parallel import (
    MAX_DEFAULT_THREADS,
    default_threads,
    resolve_threads,
    run_chunks,
)
from podsim.workloads.precision import f32_to_bf16_bits, quantize
from podsim.workloads.workspace import Workspace


@pytest.mark.parametrize(("n", "chunk", "threads"), [(0, 4, 3), (1, 4, 3), (37, 4, 3), (64, 8, 2)])
def test_run_chunks_covers_every_item_once(n, chunk, threads):
    seen = np.zeros(n, np.int64)
    busy = [threading.Lock() for _ in range(threads)]
    workers = set()

    def task(worker, lo, hi):
        assert busy[worker].acquire(blocking=False), "one worker ran two tasks at once"
        try:
            assert 0 <= lo < hi <= n and hi - lo <= chunk
            seen[lo:hi] += 1
            workers.add(worker)
        finally:
            busy[worker].release()

    run_chunks(task, n, chunk, threads)
    np.testing.assert_array_equal(seen, 1)
    assert workers <= set(range(threads))


def test_run_chunks_reraises_a_task_error():
    def task(worker, lo, hi):
        if lo == 12:
            raise ValueError("boom at 12")

    with pytest.raises(ValueError, match="boom at 12"):
        run_chunks(task, 40, 4, 2)


def test_thread_count_resolution(monkeypatch):
    monkeypatch.delenv("PODSIM_WORKLOAD_THREADS", raising=False)
    assert 1 <= default_threads() <= MAX_DEFAULT_THREADS
    monkeypatch.setenv("PODSIM_WORKLOAD_THREADS", "3")
    assert default_threads() == 3 and resolve_threads(None) == 3 and resolve_threads(1) == 1
    for bad in ("0", "two"):
        monkeypatch.setenv("PODSIM_WORKLOAD_THREADS", bad)
        with pytest.raises(ValueError, match="PODSIM_WORKLOAD_THREADS"):
            default_threads()
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="threads must be a positive integer"):
            resolve_threads(bad)


@pytest.mark.parametrize("mode", MODES.names())
def test_threaded_kernels_are_bit_identical(mode):
    """At hidden 7168 a threaded combine works in 9-token blocks and tasks of whole groups;
    75 tokens leave partial blocks, groups and tasks. Dispatch copies row ranges per task."""
    n, h, e, r, k = 75, 7168, 32, 8, 8
    rng = np.random.default_rng(3)
    rt = gate(popularity_logits(n, e, k, "uniform", rng=rng), k, scoring="sigmoid")
    q = quantize(rng.standard_normal((n, h)).astype(np.float32), "fp8")
    recv1, hd = dispatch(q, rt.topk_idx, rt.topk_weights, e, r, mode, threads=1)
    eo = f32_to_bf16_bits(rng.standard_normal((hd.num_rows, h)).astype(np.float32))
    want = combine(eo, hd, threads=1)
    ws = Workspace()
    for threads in (2, 3):
        recv, _ = dispatch(q, rt.topk_idx, rt.topk_weights, e, r, mode, threads=threads)
        np.testing.assert_array_equal(recv.data, recv1.data)
        np.testing.assert_array_equal(recv.scales, recv1.scales)
        np.testing.assert_array_equal(combine(eo, hd, workspace=ws, threads=threads), want)
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        combine(eo, hd, threads=0)
