"""Placing workload ranks on the GPUs of a topology, and finding each rank's NIC ports.

A placement is a registered function (``RANK_MAPS``) or a custom list of GPU ids, one per rank.
Built-ins: ``contiguous`` (rank r on the r-th GPU in id order, so ranks fill a server, then the
next: what ``torchrun`` does with one process per GPU) and ``by-node`` (round robin across
servers: rank r on server r mod S, the (r div S)-th GPU there). GPU ids, servers and pods come
from the graph (:func:`fabric.topology.gpus`), NIC ports from :func:`fabric.topology.gpu_nics`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np
from podsim.fabric.registry import Registry
from podsim.fabric.topology import TopologyError, gpu_nics, gpu_table

__all__ = ["RANK_MAPS", "RankMap", "RankMapError", "map_ranks"]


class RankMapError(TopologyError):
    """Ranks that do not fit the topology, or a custom placement that is not valid."""


# A placement takes (GPU ids per server in server order, num_ranks) and returns rank -> GPU.
Placement = Callable[[list[list[int]], int], np.ndarray]
RANK_MAPS: Registry[Placement] = Registry("rank mapping")


@RANK_MAPS.register("contiguous", "rank r on the r-th GPU: ranks fill a server, then the next")
def contiguous(server_gpus: list[list[int]], num_ranks: int) -> np.ndarray:
    """Rank r on the r-th GPU in (server, GPU id) order."""
    flat = [gid for srv in server_gpus for gid in srv]
    return np.asarray(flat[:num_ranks], dtype=np.int64)


@RANK_MAPS.register("by-node", "round robin across servers: rank r on server r mod S")
def by_node(server_gpus: list[list[int]], num_ranks: int) -> np.ndarray:
    """Rank r on server r mod S, the (r div S)-th GPU of that server."""
    n_srv = len(server_gpus)
    for i, srv in enumerate(server_gpus):
        ranks_here = len(range(i, num_ranks, n_srv))
        if ranks_here > len(srv):
            raise RankMapError(
                f"by-node placement of {num_ranks} ranks puts {ranks_here} on server {i}, "
                f"which has {len(srv)} GPUs"
            )
    return np.asarray(
        [server_gpus[r % n_srv][r // n_srv] for r in range(num_ranks)], dtype=np.int64
    )


@dataclass(frozen=True)
class RankMap:
    """Where every rank runs. Arrays are indexed by rank."""

    gpu: np.ndarray  # global GPU id
    server: np.ndarray
    pod: np.ndarray  # scale-up domain: same pod = reachable without the NIC
    nic: np.ndarray  # global NIC card index of the rank's (first) NIC
    gpu_nics: dict[int, tuple[str, ...]]  # GPU id -> NIC ports (one per plane), every mapped GPU

    @property
    def num_ranks(self) -> int:
        return int(self.gpu.size)

    def ports(self, rank: int) -> tuple[str, ...]:
        """The NIC port nodes (one per plane) that serve ``rank``."""
        return self.gpu_nics[int(self.gpu[rank])]


def map_ranks(
    g: nx.Graph, num_ranks: int, placement: str | Sequence[int] = "contiguous"
) -> RankMap:
    """Place ``num_ranks`` ranks on the GPUs of ``g``.

    ``placement`` is a :data:`RANK_MAPS` name (``"contiguous"``, ``"by-node"``) or a custom
    sequence of ``num_ranks`` distinct GPU ids (rank r on ``placement[r]``). Raises
    :class:`RankMapError` (a ValueError) when the ranks do not fit, a GPU id is unknown or
    repeated, or a mapped GPU has no NIC port.
    """
    if isinstance(num_ranks, bool) or not isinstance(num_ranks, int | np.integer):
        raise RankMapError(f"num_ranks={num_ranks!r} must be an integer >= 1")
    num_ranks = int(num_ranks)
    if num_ranks < 1:
        raise RankMapError(f"num_ranks={num_ranks} must be >= 1")
    where = gpu_table(g)
    ids = sorted(where)
    name = g.graph.get("name", "?")
    if num_ranks > len(ids):
        raise RankMapError(
            f"num_ranks={num_ranks} does not fit topology {name!r}, which has {len(ids)} GPUs"
        )
    if isinstance(placement, str):
        servers: dict[int, list[int]] = {}
        for gid in ids:
            servers.setdefault(where[gid][0], []).append(gid)
        server_gpus = [servers[s] for s in sorted(servers)]
        rank_gpu = RANK_MAPS.get(placement)(server_gpus, num_ranks)
    else:
        rank_gpu = _custom(placement, num_ranks, set(ids), name)
    nics = gpu_nics(g)
    missing = [int(x) for x in rank_gpu if not nics.get(int(x))]
    if missing:
        raise RankMapError(f"GPUs {missing[:8]} of topology {name!r} have no NIC port")
    used = {int(x): tuple(nics[int(x)]) for x in rank_gpu}
    return RankMap(
        gpu=rank_gpu,
        server=np.asarray([where[int(x)][0] for x in rank_gpu], dtype=np.int64),
        pod=np.asarray([where[int(x)][1] for x in rank_gpu], dtype=np.int64),
        nic=np.asarray([g.nodes[used[int(x)][0]]["nic"] for x in rank_gpu], dtype=np.int64),
        gpu_nics=used,
    )


def _custom(placement: Sequence[int], num_ranks: int, known: set[int], name: str) -> np.ndarray:
    try:
        arr = np.asarray(placement)
    except (TypeError, ValueError):
        raise RankMapError(f"placement {placement!r} is not a list of GPU ids") from None
    if arr.ndim != 1 or not (arr.size == 0 or np.issubdtype(arr.dtype, np.integer)):
        raise RankMapError(
            f"placement must be a name ({', '.join(RANK_MAPS.names())}) or a flat list of "
            f"integer GPU ids, got {placement!r}"
        )
    if arr.size != num_ranks:
        raise RankMapError(
            f"custom placement lists {arr.size} GPUs for num_ranks={num_ranks}; give one per rank"
        )
    unknown = sorted({int(x) for x in arr} - known)
    if unknown:
        raise RankMapError(f"placement names GPUs {unknown[:8]} that topology {name!r} lacks")
    uniq, counts = np.unique(arr, return_counts=True)
    dup = uniq[counts > 1]
    if dup.size:
        raise RankMapError(f"placement puts several ranks on GPUs {dup[:8].tolist()}")
    return arr.astype(np.int64)
