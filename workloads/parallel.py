"""A small thread pool for the NumPy kernels: disjoint output rows per task, same bits as serial.

NumPy releases the GIL inside ``take``, ufunc loops and ``matmul`` (BLAS), so the per-block
work of dispatch and combine can run on several cores from threads. Each task writes its own
contiguous range of output rows and uses its own scratch, and every row is computed by exactly
the calls a serial run makes, so results are bit-identical for any thread count.

Tasks are handed out dynamically: the calling thread and the pool workers take the next chunk
from a shared iterator until none is left. On a machine shared with other work (this project's
2-core VM) a worker that the OS deschedules simply takes fewer chunks, instead of holding up
the whole call as a static split would.

Thread count: the ``threads`` argument of the kernels; ``None`` means :func:`default_threads`,
which is ``PODSIM_WORKLOAD_THREADS`` from the environment if set, else ``os.cpu_count()``
capped at :data:`MAX_DEFAULT_THREADS` (the kernels are memory-bound beyond a few cores).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

__all__ = ["MAX_DEFAULT_THREADS", "default_threads", "resolve_threads", "run_chunks"]

MAX_DEFAULT_THREADS = 8
"""Cap of the default thread count."""

_ENV = "PODSIM_WORKLOAD_THREADS"
_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def default_threads() -> int:
    """``PODSIM_WORKLOAD_THREADS`` if set, else ``min(os.cpu_count(), MAX_DEFAULT_THREADS)``."""
    env = os.environ.get(_ENV)
    if env is not None:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"{_ENV}={env!r}: expected a positive integer") from None
        if n < 1:
            raise ValueError(f"{_ENV}={env!r}: expected a positive integer")
        return n
    return max(1, min(os.cpu_count() or 1, MAX_DEFAULT_THREADS))


def resolve_threads(threads: int | None) -> int:
    """``threads`` checked (a positive int), or the default for ``None``."""
    if threads is None:
        return default_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive integer or None; got {threads!r}")
    return threads


def _pool(workers: int) -> ThreadPoolExecutor:
    with _pools_lock:
        pool = _pools.get(workers)
        if pool is None:
            pool = ThreadPoolExecutor(workers, thread_name_prefix="workloads")
            _pools[workers] = pool
        return pool


def run_chunks(task: Callable[[int, int, int], None], n: int, chunk: int, threads: int) -> None:
    """Run ``task(worker, lo, hi)`` over ``[0, n)`` cut into chunks of ``chunk`` items.

    ``worker`` (0 .. threads-1) names the scratch a task may use: one worker never runs two
    tasks at once. With one thread, or a single chunk, everything runs in the calling thread.
    The first exception raised by a task is re-raised here after all workers have stopped.
    """
    chunk = max(1, chunk)
    nchunks = -(-n // chunk)
    workers = min(threads, nchunks)
    if workers <= 1:
        if n > 0:
            task(0, 0, n)
        return
    starts: Iterator[int] = iter(range(0, n, chunk))  # next() on it is atomic under the GIL
    failed = threading.Event()

    def work(worker: int) -> None:
        for lo in starts:
            if failed.is_set():
                return
            try:
                task(worker, lo, min(n, lo + chunk))
            except BaseException:
                failed.set()
                raise

    futures = [_pool(workers - 1).submit(work, w) for w in range(1, workers)]
    errors: list[BaseException] = []
    try:
        work(0)
    except BaseException as exc:  # wait for the others before re-raising
        errors.append(exc)
    for f in futures:
        exc = f.exception()
        if exc is not None:
            errors.append(exc)
    if errors:
        raise errors[0]
