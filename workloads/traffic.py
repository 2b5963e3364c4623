"""Messages of one MoE phase, derived from a dispatch layout for each dispatch mode.

One message per (source rank, destination rank) and route stage, with its token count. Hops are
classified by locality with ``gpus_per_node`` = the scale-up domain size: same rank ``local``,
same node ``scaleup``, otherwise ``rdma`` (``gpus_per_node`` None: every rank is its own node).

- ``megatron-alltoall`` / ``deepep-low-latency``: direct messages carrying pair_copies[s, t]
  (token, expert) rows each way; the low-latency dispatch adds its 16 B header per row.
  Megatron's all-to-all (NCCL) uses the scale-up domain inside a node, so its hops follow
  locality. DeepEP's low-latency kernels put every message over RDMA (IBGDA), peers in the same
  node included; only a rank's copies to itself are ``local``. With
  ``allow_nvlink_for_low_latency_mode=True`` (DeepEP's Buffer argument: NVSHMEM P2P over NVLink
  for intra-node peers) same-node messages become ``scaleup``. The default is True, as DeepEP's
  own ``Buffer`` (deep_ep/buffer.py since PR #173, 2025-06); False is the pure-RDMA setting of
  DeepEP's first low-latency table (test_low_latency.py ``--disable-nvlink``).
- ``deepep-normal`` (docs/physics.md: RDMA to the same local index on each target node, then NVLink
  to the experts there). Dispatch stage 0: RDMA s -> (node b, local index of s) carrying
  node_tokens[s, b] for every other node b, and direct scale-up s -> t inside s's node carrying
  pair_tokens[s, t]; stage 1: the forwarder f on node b sends t on node b the tokens of all
  sources with f's local index (f -> f is a ``local`` copy out of the RDMA buffer). Every
  deduplicated (token, rank) pair thus arrives over exactly one scale-up or local message, and
  every (token, remote node) pair crosses RDMA once. Combine is the mirror image: stage 0 sends
  partial sums to the forwarder (or straight to the source inside its node), stage 1 sends the
  node's reduced token back over RDMA.

``stage`` 1 rows depend on the stage 0 rows that deliver to their source rank, except the direct
scale-up rows inside a node (``final`` 1: DeepEP's forwarder forwards each source node's RDMA
chunks as they arrive, not waiting for traffic it does not carry); an engine that ignores the
column treats them as simultaneous.

With a :class:`podsim.workloads.deepep_kernels.DeepEPKernel`, ``deepep-normal`` over several
nodes follows DeepEP's pipelined kernels instead: the same bytes on the same routes, cut into
chunk rounds (``chunk``): a stage-1 row of round ``k`` waits only for the stage-0 rows of round
``k`` arriving at its sender, and round ``k`` of a pair follows its round ``k - 1``
(:func:`podsim.workloads.deepep_kernels.normal_rounds` says which token travels in which round).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from podsim.workloads.deepep_kernels import DeepEPKernel, normal_rounds
from podsim.workloads.dispatch import DispatchMode, get_mode
from podsim.workloads.layout import EPLayout

__all__ = ["Messages", "classify_hops", "phase_messages"]

HOPS = ("rdma", "scaleup", "local")


@dataclass(frozen=True, eq=False)
class Messages:
    """Parallel arrays, one entry per message."""

    src: np.ndarray
    dst: np.ndarray
    tokens: np.ndarray
    bytes: np.ndarray
    hop: np.ndarray
    stage: np.ndarray
    chunk: np.ndarray
    #: 1 for a stage-0 message that ends at its destination (no forward waits for it)
    final: np.ndarray

    def __len__(self) -> int:
        return int(self.src.shape[0])


def classify_hops(src: np.ndarray, dst: np.ndarray, gpus_per_node: int | None) -> np.ndarray:
    """'local' / 'scaleup' / 'rdma' for each (src, dst) rank pair."""
    src, dst = np.asarray(src), np.asarray(dst)
    if gpus_per_node is None:
        same_node = src == dst
    else:
        if gpus_per_node <= 0:
            raise ValueError(f"gpus_per_node must be > 0; got {gpus_per_node}")
        same_node = src // gpus_per_node == dst // gpus_per_node
    return np.where(src == dst, "local", np.where(same_node, "scaleup", "rdma"))


def _matrix_rows(mat: np.ndarray, stage: int) -> tuple[np.ndarray, ...]:
    """(src, dst, tokens, stage, chunk, final) of the non-zero entries of ``mat``."""
    src, dst = np.nonzero(mat)
    zeros = np.zeros(src.shape, np.int64)
    return src, dst, mat[src, dst], np.full(src.shape, stage), zeros, zeros


def _final(rows: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """``rows`` marked as final deliveries: direct scale-up traffic inside a node, which no
    forwarder carries on (trace column ``final``)."""
    return (*rows[:5], np.ones(rows[0].shape, np.int64))


def _assemble(
    parts: list[tuple[np.ndarray, ...]],
    bytes_per_token: int,
    gpn: int | None,
    rdma_peers: bool = False,
) -> Messages:
    src, dst, tok, stage, chunk, final = (
        np.concatenate([p[i] for p in parts]).astype(np.int64) for i in range(6)
    )
    # DeepEP low-latency: IBGDA puts to every other rank, NVLink peers included
    hop = np.where(src == dst, "local", "rdma") if rdma_peers else classify_hops(src, dst, gpn)
    return Messages(src, dst, tok, tok * bytes_per_token, hop, stage, chunk, final)


def _round_rows(
    src: np.ndarray, dst: np.ndarray, rnd: np.ndarray, r: int, stage: int
) -> tuple[np.ndarray, ...]:
    """One row per distinct (src, dst, round) of the given (token, destination) pairs."""
    k = int(rnd.max(initial=0)) + 1
    key, count = np.unique((src * r + dst) * k + rnd, return_counts=True)
    pair, rnd_u = np.divmod(key, k)
    return pair // r, pair % r, count, np.full(key.shape, stage), rnd_u, np.zeros_like(rnd_u)


def _pipelined_normal(
    lay: EPLayout, phase: str, bytes_per_token: int, kernel: DeepEPKernel
) -> Messages:
    """``deepep-normal`` over several nodes as DeepEP's chunked kernels (module docstring)."""
    gpn, r = lay.gpus_per_node, lay.num_ranks
    assert gpn is not None
    ranks = lay.layout.token_ranks
    if ranks is None:
        raise ValueError(
            "DeepEP's chunked kernels need each token's ranks; this layout keeps only counts "
            "(ep_layout_blocks): build it with ep_layout, or pass kernel=None"
        )
    nodes = r // gpn
    src = lay.src_rank
    t2, j = np.nonzero(ranks >= 0)  # every (token, rank) pair once
    d = ranks[t2, j].astype(np.int64)
    bn = d // gpn
    pair = t2 * nodes + bn
    key = np.unique(pair)  # every (token, node) pair once
    tn, nb = np.divmod(key, nodes)
    rnd = normal_rounds(tn, nb, src, lay.token_offsets, kernel.channels, kernel.chunk(phase))
    src_node, local = src // gpn, src % gpn
    # RDMA: each (token, remote node) once, to the node's GPU with the source's local index
    far_n = nb != src_node[tn]
    rdma = _round_rows(src[tn[far_n]], nb[far_n] * gpn + local[tn[far_n]], rnd[far_n], r, 0)
    # NVLink: each (token, rank) once, from the source itself inside its node, else from the
    # forwarder (the destination node's GPU with the source's local index)
    k2 = rnd[np.searchsorted(key, pair)]
    own = bn == src_node[t2]
    # (final deliveries: DeepEP's forwarders never wait for them, deepep_kernels)
    direct = _final(_round_rows(src[t2[own]], d[own], k2[own], r, 0))
    far = ~own
    fwd = _round_rows(bn[far] * gpn + local[t2[far]], d[far], k2[far], r, 1)
    if phase == "dispatch":
        parts = [direct, rdma, fwd]
    else:  # the mirror image: partial rows to the forwarder, then the reduced row over RDMA
        parts = [_flip(direct, 0), _flip(fwd, 0), _flip(rdma, 1)]
    return _assemble(parts, bytes_per_token, gpn)


def _flip(rows: tuple[np.ndarray, ...], stage: int) -> tuple[np.ndarray, ...]:
    """The rows sent the other way (combine), at ``stage``."""
    s, d, n, _, k, f = rows
    return d, s, n, np.full(s.shape, stage), k, f


def _forward_matrix(pair_tokens: np.ndarray, gpn: int) -> np.ndarray:
    """[R, R] stage-1 forward tokens f -> t (f and t on the same node, b)."""
    r = pair_tokens.shape[0]
    nodes = r // gpn
    p = pair_tokens.reshape(nodes, gpn, nodes, gpn)  # [src node, src local, dst node, dst local]
    same = p[np.arange(nodes), :, np.arange(nodes), :]  # [b, l, t] from sources on node b itself
    fwd = p.sum(axis=0).transpose(1, 0, 2) - same  # [b, l, t] from sources on other nodes
    out = np.zeros((nodes, gpn, nodes, gpn), dtype=np.int64)
    out[np.arange(nodes), :, np.arange(nodes), :] = fwd
    return out.reshape(r, r)


def phase_messages(
    lay: EPLayout,
    mode: str | DispatchMode,
    phase: str,
    bytes_per_token: int,
    *,
    allow_nvlink_for_low_latency_mode: bool = True,
    kernel: DeepEPKernel | None = None,
) -> Messages:
    """Messages of ``phase`` ('dispatch' or 'combine') for ``mode`` (module docstring).

    ``kernel``: DeepEP's channels and chunks; given, ``deepep-normal`` over several nodes is cut
    into DeepEP's chunk rounds (None: one message per pair and stage).

    ``bytes_per_token`` is the payload per token row (podsim.workloads.precision.bytes_per_token);
    the mode's per-message header is added here. ``allow_nvlink_for_low_latency_mode`` only
    matters for modes that reach their peers over RDMA (``deepep-low-latency``): True (default,
    as DeepEP) sends same-node messages over the scale-up domain, False over RDMA.
    """
    m = get_mode(mode)
    if phase not in ("dispatch", "combine"):
        raise ValueError(f"phase must be 'dispatch' or 'combine'; got {phase!r}")
    gpn = lay.gpus_per_node
    header = m.header_bytes if phase == "dispatch" else 0
    if not isinstance(allow_nvlink_for_low_latency_mode, (bool, np.bool_)):
        raise ValueError(
            "allow_nvlink_for_low_latency_mode must be True or False; "
            f"got {allow_nvlink_for_low_latency_mode!r}"
        )
    if not m.dedup:
        mat = lay.pair_copies if phase == "dispatch" else lay.pair_copies.T
        rdma_peers = m.rdma_peers and not allow_nvlink_for_low_latency_mode
        return _assemble([_matrix_rows(mat, 0)], bytes_per_token + header, gpn, rdma_peers)
    r = lay.num_ranks
    if gpn is None or gpn >= r:  # one node: every pair is direct
        mat = lay.pair_tokens if phase == "dispatch" else lay.pair_tokens.T
        return _assemble([_matrix_rows(mat, 0)], bytes_per_token + header, gpn)
    if r % gpn:
        raise ValueError(f"deepep-normal over {r} ranks needs whole nodes of gpus_per_node={gpn}")
    if kernel is not None:
        return _pipelined_normal(lay, phase, bytes_per_token + header, kernel)
    node = np.arange(r) // gpn
    same_node = node[:, None] == node[None, :]
    direct = np.where(same_node, lay.pair_tokens, 0)
    remote = lay.node_tokens.copy()
    remote[np.arange(r), node] = 0
    rdma = np.zeros((r, r), dtype=np.int64)  # s -> (node b, local index of s)
    fwd_rank = np.arange(remote.shape[1])[None, :] * gpn + (np.arange(r) % gpn)[:, None]
    rdma[np.repeat(np.arange(r), remote.shape[1]), fwd_rank.ravel()] = remote.ravel()
    forward = _forward_matrix(lay.pair_tokens, gpn)
    if phase == "dispatch":
        parts = [_final(_matrix_rows(direct, 0)), _matrix_rows(rdma, 0), _matrix_rows(forward, 1)]
    else:
        parts = [
            _final(_matrix_rows(direct.T, 0)),
            _matrix_rows(forward.T, 0),
            _matrix_rows(rdma.T, 1),
        ]
    return _assemble(parts, bytes_per_token + header, gpn)
