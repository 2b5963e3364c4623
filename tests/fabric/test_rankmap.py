"""Rank-to-GPU placement: contiguous, by-node, custom; NIC lookup; clear errors."""

from __future__ import annotations

import numpy as np
import pytest
from podsim.fabric.rankmap import RANK_MAPS, RankMapError, by_node, map_ranks
from podsim.fabric.topology import build_topology


@pytest.fixture(scope="module")
def h800():
    return build_topology("h800-deepep", nodes=4)


def test_registry_has_placements():
    assert {"contiguous", "by-node"} <= set(RANK_MAPS.names())


@pytest.mark.parametrize("n", [1, 5, 32])
def test_contiguous(h800, n):
    m = map_ranks(h800, n)
    assert m.num_ranks == n
    np.testing.assert_array_equal(m.gpu, np.arange(n))
    np.testing.assert_array_equal(m.server, np.arange(n) // 8)
    np.testing.assert_array_equal(m.pod, np.arange(n) // 8)
    np.testing.assert_array_equal(m.nic, np.arange(n))  # one NIC per GPU
    assert m.ports(n - 1) == (f"nic{n - 1}.p0",)


@pytest.mark.parametrize("n", [4, 10, 32])
def test_by_node_round_robin(h800, n):
    m = map_ranks(h800, n, "by-node")
    r = np.arange(n)
    np.testing.assert_array_equal(m.server, r % 4)
    np.testing.assert_array_equal(m.gpu, (r % 4) * 8 + r // 4)
    assert len(set(m.gpu.tolist())) == n


def test_custom_list(h800):
    placement = [31, 0, 8, 9]
    m = map_ranks(h800, 4, placement)
    np.testing.assert_array_equal(m.gpu, placement)
    np.testing.assert_array_equal(m.server, [3, 0, 1, 1])
    assert m.ports(0) == ("nic31.p0",)


def test_shared_multi_plane_nics():
    g = build_topology("superpod-128", pods=1)
    m = map_ranks(g, 4)
    np.testing.assert_array_equal(m.nic, [0, 0, 1, 1])
    assert m.ports(1) == ("nic0.p0", "nic0.p1") == m.gpu_nics[0]
    np.testing.assert_array_equal(m.pod, [0, 0, 0, 0])


def test_generic_topology_without_gpu_nodes():
    g = build_topology("rail", servers=2, gpus_per_server=4, gpus_per_nic=2)
    m = map_ranks(g, 8, "by-node")
    np.testing.assert_array_equal(m.gpu, [0, 4, 1, 5, 2, 6, 3, 7])
    np.testing.assert_array_equal(m.nic, [0, 2, 0, 2, 1, 3, 1, 3])


@pytest.mark.parametrize(
    "n,placement,needle",
    [
        (33, "contiguous", "num_ranks=33 does not fit .* 32 GPUs"),
        (0, "contiguous", "num_ranks=0"),
        (2, "by_node", "did you mean 'by-node'"),
        (3, [0, 1], "lists 2 GPUs for num_ranks=3"),
        (2, [0, 99], r"GPUs \[99\]"),
        (3, [1, 2, 1], r"several ranks on GPUs \[1\]"),
        (2, [0.5, 1.0], "integer GPU ids"),
        (2, [[0, 1]], "flat list"),
    ],
)
def test_errors_are_clear(h800, n, placement, needle):
    with pytest.raises(ValueError, match=f"(?i){needle}"):
        map_ranks(h800, n, placement)


def test_by_node_uneven_servers():
    with pytest.raises(RankMapError, match="puts 2 on server 1, which has 1 GPUs"):
        by_node([[0, 1], [2]], 4)
    np.testing.assert_array_equal(by_node([[0, 1], [2]], 3), [0, 2, 1])


def test_rank_gpu_with_no_nic():
    g = build_topology("h800-deepep", nodes=1)
    g.nodes["nic1.p0"]["gpu"] = -1  # GPU node 1 stays, its NIC no longer serves it
    assert map_ranks(g, 1).num_ranks == 1
    with pytest.raises(RankMapError, match=r"GPUs \[1\] .* have no NIC port"):
        map_ranks(g, 2)
