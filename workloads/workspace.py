"""Preallocated buffers reused across dispatch/combine calls, as DeepEP's ``Buffer`` does.

DeepEP allocates its NVLink and RDMA buffers once (``Buffer(group, num_nvl_bytes,
num_rdma_bytes)``) and every dispatch/combine writes into them. The NumPy kernels do the same
through a :class:`Workspace`: named byte arenas that grow to the largest request and are then
reused, so a steady-state call allocates nothing large (no page faults, no ``mmap``/``munmap``
of temporaries in the timed path).

An array handed out by a workspace is a view of its arena: it stays valid until the next
request for the same name, which overwrites it. Kernels that return workspace arrays say so.
"""

from __future__ import annotations

from math import prod

import numpy as np

__all__ = ["Workspace"]

_ALIGN = 64
"""Arena start alignment in bytes: one cache line, the widest AVX-512 load."""


class Workspace:
    """Named, growable, 64-byte-aligned scratch arenas (see the module docstring)."""

    def __init__(self) -> None:
        self._arenas: dict[str, np.ndarray] = {}

    def array(self, name: str, shape: tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
        """A C-contiguous ``shape``/``dtype`` view of arena ``name`` (contents undefined)."""
        dt = np.dtype(dtype)
        if any(s < 0 for s in shape):
            raise ValueError(f"workspace array {name!r}: negative dimension in shape {shape}")
        nbytes = prod(shape) * dt.itemsize
        arena = self._arenas.get(name)
        if arena is None or arena.nbytes < nbytes:
            raw = np.empty(nbytes + _ALIGN, dtype=np.uint8)
            skip = -raw.ctypes.data % _ALIGN
            arena = raw[skip : skip + nbytes]
            self._arenas[name] = arena
        return arena[:nbytes].view(dt).reshape(shape)

    @property
    def nbytes(self) -> int:
        """Bytes held by all arenas."""
        return sum(a.nbytes for a in self._arenas.values())

    def names(self) -> list[str]:
        return sorted(self._arenas)

    def clear(self) -> None:
        """Release every arena."""
        self._arenas.clear()
