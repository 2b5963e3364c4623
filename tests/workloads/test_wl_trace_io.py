from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from podsim.workloads.moe import moe_layer_trace
from podsim.workloads.trace import (
    COLUMNS,
    TraceError,
    compute_table,
    concat_traces,
    make_trace,
    read_trace,
    validate_trace,
    write_trace,
)


@pytest.fixture(scope="module")
def trace():
    return moe_layer_trace("mixtral-8x7b", 8, 16, 4, layers=2)


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_round_trip_keeps_rows_dtypes_and_attrs(trace, tmp_path, suffix):
    path = write_trace(trace, tmp_path / f"t{suffix}")
    back = read_trace(path)
    pd.testing.assert_frame_equal(back, trace, check_dtype=True)
    assert back.attrs.keys() == trace.attrs.keys()
    for k, v in trace.attrs.items():
        if k in ("compute", "deepep_bytes"):
            for kk, vv in v.items():
                np.testing.assert_array_equal(back.attrs[k][kk], vv)
                assert back.attrs[k][kk].dtype == vv.dtype
        else:
            assert back.attrs[k] == v
    pd.testing.assert_frame_equal(compute_table(back), compute_table(trace))


def test_schema_columns_and_types(trace):
    assert list(trace.columns[: len(COLUMNS)]) == list(COLUMNS)
    for c in ("step", "layer", "src_rank", "dst_rank", "bytes", "tokens", "stage"):
        assert trace[c].dtype == np.int64
    assert trace.start_s.dtype == np.float64
    assert set(trace.phase) == {"dispatch", "combine"}


def _bad(trace, **change):
    df = trace.copy()
    for k, v in change.items():
        df[k] = v
    df.attrs = dict(trace.attrs)
    return df


def test_missing_column_named(trace):
    with pytest.raises(TraceError, match=r"missing column.*'bytes'.*'hop'"):
        validate_trace(trace.drop(columns=["bytes", "hop"]))


def test_rank_out_of_range_named(trace):
    dst = trace.dst_rank.to_numpy().copy()
    dst[5] = 8
    with pytest.raises(TraceError, match=r"'dst_rank' has rank 8 at row 5, outside 0\.\.7"):
        validate_trace(_bad(trace, dst_rank=dst))


def test_negative_bytes_named(trace):
    b = trace.bytes.to_numpy().copy()
    b[3] = -1
    with pytest.raises(TraceError, match="'bytes' has negative value -1 at row 3"):
        validate_trace(_bad(trace, bytes=b))


def test_wrong_dtype_and_nan_named(trace):
    b = trace.bytes.to_numpy().astype(float)
    b[2] = 1.5
    with pytest.raises(
        TraceError, match=r"'bytes' has dtype float64; expected integers \(row 2: 1.5\)"
    ):
        validate_trace(_bad(trace, bytes=b))
    b[2] = np.nan
    with pytest.raises(TraceError, match=r"'bytes'.*row 2: nan"):
        validate_trace(_bad(trace, bytes=b))
    s = trace.start_s.to_numpy().copy()
    s[4] = np.nan
    with pytest.raises(TraceError, match="'start_s' has nan at row 4"):
        validate_trace(_bad(trace, start_s=s))


def test_bad_labels_and_num_ranks(trace):
    hop = trace.hop.to_numpy().copy()
    hop[1] = "nvlink"
    with pytest.raises(TraceError, match="'hop' has 'nvlink' at row 1; expected one of rdma"):
        validate_trace(_bad(trace, hop=hop))
    df = trace.copy()
    df.attrs = {}
    with pytest.raises(TraceError, match="no num_ranks"):
        validate_trace(df)
    assert validate_trace(df, num_ranks=8).attrs["num_ranks"] == 8


def test_csv_errors_name_the_file(tmp_path, trace):
    p = tmp_path / "hand.csv"
    trace.drop(columns=["tokens"]).to_csv(p, index=False)
    with pytest.raises(TraceError, match=r"hand\.csv: trace is missing column\(s\) 'tokens'"):
        read_trace(p, num_ranks=8)
    with pytest.raises(TraceError, match="does not exist"):
        read_trace(tmp_path / "nope.parquet")
    with pytest.raises(TraceError, match="suffix"):
        write_trace(trace, tmp_path / "t.json")


def test_make_and_concat():
    a = make_trace(src_rank=[0, 1], dst_rank=[1, 0], bytes=5, num_ranks=2, gpus_per_node=1)
    b = make_trace(
        src_rank=[0, 1], dst_rank=[1, 1], bytes=[3, 7], num_ranks=2, step=1, stage=[0, 1]
    )
    c = concat_traces([a, b], note="x")
    assert c.bytes.tolist() == [5, 5, 3, 7] and c.stage.tolist() == [0, 0, 0, 1]
    assert c.hop.tolist() == ["rdma", "rdma", "rdma", "local"] and c.attrs["note"] == "x"
    with pytest.raises(TraceError, match="different num_ranks"):
        concat_traces([a, make_trace(src_rank=[0], dst_rank=[0], bytes=1, num_ranks=3)])
    with pytest.raises(TraceError, match="different lengths: src_rank 2, dst_rank 3"):
        make_trace(src_rank=[0, 1], dst_rank=[1, 0, 1], bytes=1, num_ranks=2)


def test_stage_column_values_and_dependencies(trace):
    """stage is optional, 0 or 1; a stage-1 row needs a stage-0 arrival at its src_rank."""
    assert "stage" not in validate_trace(trace.drop(columns=["stage"])).columns
    with pytest.raises(TraceError, match=r"'stage' has 2 at row 3; expected 0 .* or 1"):
        validate_trace(_bad(trace, stage=np.where(np.arange(len(trace)) == 3, 2, 0)))
    with pytest.raises(TraceError, match="'stage' has negative value -1 at row 0"):
        validate_trace(_bad(trace, stage=np.where(np.arange(len(trace)) == 0, -1, 0)))
    with pytest.raises(TraceError, match="'stage' has dtype float64"):
        validate_trace(_bad(trace, stage=0.5))
    # forwarding rank 1's stage-1 row is fed by the stage-0 row 0 -> 1 of the same phase ...
    ok = make_trace(
        src_rank=[0, 1], dst_rank=[1, 2], bytes=[4, 4], num_ranks=3, phase="dispatch", stage=[0, 1]
    )
    assert ok.stage.tolist() == [0, 1]
    # ... but not by one of another layer, nor by rows it sends itself
    with pytest.raises(
        TraceError, match=r"'stage' is 1 at row 1 \(step 0, layer 1, dispatch, src_rank 1\)"
    ):
        make_trace(
            src_rank=[0, 1],
            dst_rank=[1, 2],
            bytes=4,
            num_ranks=3,
            layer=[0, 1],
            stage=[0, 1],
            phase="dispatch",
        )
    with pytest.raises(TraceError, match="no stage-0 row of that phase arrives at rank 1"):
        make_trace(src_rank=[1, 1], dst_rank=[0, 2], bytes=4, num_ranks=3, stage=[0, 1])


def test_final_column_values_and_a_forward_fed_only_by_final_rows() -> None:
    """final is optional, 0 or 1; a stage-1 row whose only arrivals are final is refused."""
    ok = make_trace(src_rank=[0, 3, 1], dst_rank=[1, 1, 2], bytes=4, num_ranks=4,
                    phase="dispatch", stage=[0, 0, 1], final=[0, 1, 0])  # fmt: skip
    assert ok.final.tolist() == [0, 1, 0]
    with pytest.raises(TraceError, match=r"'final' has 2 at row 1; expected 0 .* or 1"):
        make_trace(src_rank=[0, 3], dst_rank=[1, 1], bytes=4, num_ranks=4, final=[0, 2])
    with pytest.raises(TraceError, match=r"arrives at rank 1 \(rows with final 1 do not count\)"):
        make_trace(src_rank=[3, 1], dst_rank=[1, 2], bytes=4, num_ranks=4, phase="dispatch",
                   stage=[0, 1], final=[1, 0])  # fmt: skip
    # concatenated with a trace without the column: its rows are not final
    plain = make_trace(src_rank=[0], dst_rank=[1], bytes=4, num_ranks=4, phase="dispatch")
    assert concat_traces([ok, plain]).final.tolist() == [0, 1, 0, 0]


def test_deepep_normal_stages_pass_validation():
    """The generated hierarchical trace satisfies the stage contract in both phases."""
    t = moe_layer_trace("deepseek-v3", 16, 8, 8, "deepep-normal", seed=2)
    assert set(t.stage) == {0, 1}
    d, c = t[t.phase == "dispatch"], t[t.phase == "combine"]
    # dispatch: RDMA first, then the intra-node forward; combine: the mirror image
    assert (d.stage[d.hop == "rdma"] == 0).all() and (d.hop[d.stage == 1] != "rdma").all()
    assert (c.hop[c.stage == 1] == "rdma").all() and (c.hop[c.stage == 0] != "rdma").all()
    # the own node's direct rows are final in both phases, and only they
    assert t.final[t.stage == 1].eq(0).all() and t.final[t.hop == "rdma"].eq(0).all()
    assert t.final[(t.stage == 0) & (t.hop != "rdma")].any()


def test_message_to_itself_must_be_local(trace):
    net = np.flatnonzero(trace.hop.to_numpy() != "local")
    i = int(net[0])
    dst = trace.dst_rank.to_numpy().copy()
    dst[i] = trace.src_rank.iloc[i]
    with pytest.raises(TraceError, match=rf"row {i} sends from rank \d+ to itself with hop"):
        validate_trace(_bad(trace, dst_rank=dst))
    # the same row marked local is fine
    hop = trace.hop.to_numpy().copy()
    hop[i] = "local"
    assert len(validate_trace(_bad(trace, dst_rank=dst, hop=hop))) == len(trace)
