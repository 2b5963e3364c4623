from __future__ import annotations

import numpy as np
import pytest
from podsim.workloads.splits import load_splits, splits_trace
from podsim.workloads.synthetic import incast, permutation, ring_allreduce, uniform_all_to_all


def test_uniform_all_to_all():
    t = uniform_all_to_all(6, 100, gpus_per_node=3)
    assert len(t) == 6 * 5 and (t.bytes == 100).all() and (t.src_rank != t.dst_rank).all()
    assert (t.hop == "scaleup").sum() == 6 * 2  # two same-node peers each


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_permutation_is_a_single_cycle(seed):
    r = 9
    t = permutation(r, 10, seed=seed)
    nxt = dict(zip(t.src_rank, t.dst_rank, strict=True))
    assert sorted(nxt) == list(range(r)) and sorted(nxt.values()) == list(range(r))
    seen, cur = set(), 0
    while cur not in seen:
        seen.add(cur)
        cur = nxt[cur]
    assert len(seen) == r  # one cycle through everybody: no fixed points


def test_incast():
    t = incast(8, 64, receiver=3, senders=5)
    assert (t.dst_rank == 3).all() and len(t) == 5 and 3 not in set(t.src_rank)
    with pytest.raises(ValueError, match=r"senders must be in 1\.\.7"):
        incast(8, 64, senders=8)


@pytest.mark.parametrize(("r", "total"), [(4, 1000), (5, 13), (8, 7)])
def test_ring_allreduce_closed_form(r, total):
    t = ring_allreduce(r, total, gpus_per_node=2)
    chunk = total // r + (np.arange(r) < total % r)
    assert chunk.sum() == total
    assert t.step.nunique() == 2 * (r - 1) and len(t) == 2 * (r - 1) * r
    assert ((t.dst_rank - t.src_rank) % r == 1).all()
    sent = t.groupby("src_rank")["bytes"].sum().to_numpy()
    rank = np.arange(r)
    # reduce-scatter: every chunk but (r+1)'s; all-gather: every chunk but (r+2)'s
    np.testing.assert_array_equal(sent, 2 * total - chunk[(rank + 1) % r] - chunk[(rank + 2) % r])
    assert t.bytes.sum() == 2 * (r - 1) * total


def test_splits_from_npy_and_csv(tmp_path):
    m = np.array([[0, 5, 0], [2, 1, 3], [0, 0, 4]])
    np.save(tmp_path / "s.npy", m)
    np.savetxt(tmp_path / "s.csv", m, delimiter=",", fmt="%d", header="src x dst")
    for name in ("s.npy", "s.csv"):
        t = splits_trace(tmp_path / name, unit="tokens", bytes_per_token=10, gpus_per_node=2)
        got = np.zeros_like(m)
        got[t.src_rank, t.dst_rank] = t.tokens
        np.testing.assert_array_equal(got, m)
        assert (t.bytes == 10 * t.tokens).all() and t.attrs["num_ranks"] == 3
    t = splits_trace(m)
    assert t.bytes.sum() == m.sum() and (t.tokens == 0).all()


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        (np.zeros((2, 3)), "square"),
        (np.array([[0, -1], [0, 0]]), r"\[src 0, dst 1\] = -1 is negative"),
        (np.array([[0, 1.5], [0, 0]]), "not a whole number"),
        (np.array([[0, np.nan], [0, 0]]), "not finite"),
    ],
)
def test_splits_errors(matrix, message):
    with pytest.raises(ValueError, match=message):
        load_splits(matrix)


def test_splits_file_errors(tmp_path):
    (tmp_path / "bad.csv").write_text("1,2\n3,x\n")
    with pytest.raises(ValueError, match="not a numeric CSV"):
        load_splits(tmp_path / "bad.csv")
    with pytest.raises(ValueError, match="does not exist"):
        load_splits(tmp_path / "none.npy")
    with pytest.raises(ValueError, match="bytes_per_token is required"):
        splits_trace(np.eye(2), unit="tokens")
