"""The summary's figures against their definitions, and the result files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import podsim
import pytest
from podsim.scenarios.results.tables import SCHEMAS, Results, conform, summarise


def tables() -> dict[str, pd.DataFrame]:
    # 4 ranks, one dispatch phase; rank r sends 100 (r+1) bytes over RDMA to r+1 and keeps 50
    rdma = [100 * (r + 1) for r in range(4)]
    msgs = [(0, 0, "dispatch", r, (r + 1) % 4, "rdma", rdma[r]) for r in range(4)]
    msgs += [(0, 0, "dispatch", r, r, "local", 50) for r in range(4)]
    m = pd.DataFrame(
        msgs, columns=["step", "layer", "phase", "src_rank", "dst_rank", "hop", "bytes"]
    )
    m["post_s"], m["end_s"] = 0.0, 1e-6
    m["fct_s"], m["status"] = 1e-6, "complete"
    starts = [0.0, 0.0, 1e-6, 1e-6]
    ends = [2e-6, 3e-6, 4e-6, 5e-6]
    ph = pd.DataFrame(
        {
            "step": 0,
            "layer": 0,
            "phase": "dispatch",
            "rank": range(4),
            "start_s": starts,
            "end_s": ends,
            "bytes_out": [b + 50 for b in rdma],
            "bytes_in": 0,
        }
    )
    ph["duration_s"] = ph["end_s"] - ph["start_s"]
    links = pd.DataFrame(
        {
            "link": ["a->b", "b->a", "b->c"],
            "u": ["a", "b", "b"],
            "v": ["b", "a", "c"],
            "tier": ["nic-leaf", "nic-leaf", "leaf-spine"],
            "rate_bps": 1e9,
            "tx_bytes": [10, 20, 30],
            "drops": [1, 0, 2],
            "ecn_marks": [3, 0, 0],
            "pauses": [0, 4, 0],
            "utilisation": [0.1, 0.3, 0.5],
        }
    )
    qps = pd.DataFrame({"qp": [0, 1], "retx_packets": [5, 6], "timeouts": [1, 0]})
    return {
        "messages": conform("messages", m),
        "phases": conform("phases", ph),
        "links": conform("links", links),
        "qps": conform("qps", qps),
    }


def test_bandwidth_definitions_follow_nccl_and_deepep() -> None:
    t = tables()
    s = summarise(**t, num_ranks=4, makespan_s=5e-6)
    d = s["phases"]["dispatch"]
    T = 5e-6 - 0.0  # last end - first start
    mean_sent = np.mean([150, 250, 350, 450])
    assert d["completion_time_s"] == pytest.approx(T)
    assert d["algbw_per_gpu_Bps"] == pytest.approx(mean_sent / T)
    assert d["busbw_per_gpu_Bps"] == pytest.approx(mean_sent / T * 3 / 4)
    own = [100 / 2e-6, 200 / 3e-6, 300 / 3e-6, 400 / 4e-6]  # RDMA bytes / own phase time
    assert d["rdma_send_bw_per_gpu_Bps"] == pytest.approx(np.mean(own))
    assert d["nvl_send_bw_per_gpu_Bps"] is None  # no scale-up traffic
    assert d["deepep_rdma_bw_per_gpu_Bps"] is None  # no DeepEP byte counts given


def test_tier_utilisation_and_counters() -> None:
    s = summarise(**tables(), num_ranks=4, makespan_s=5e-6)
    nl = s["link_utilisation"]["nic-leaf"]
    assert (nl["links"], nl["mean_utilisation"], nl["max_utilisation"]) == (
        2,
        pytest.approx(0.2),
        0.3,
    )
    assert s["counters"] == {
        "drops": 3,
        "ecn_marks": 3,
        "pfc_pauses": 4,
        "retransmitted_packets": 11,
        "timeouts": 1,
    }


def test_conform_fills_documented_columns() -> None:
    df = conform("qps", pd.DataFrame({"qp": [3], "extra": ["kept"]}))
    assert list(df.columns[: len(SCHEMAS["qps"])]) == list(SCHEMAS["qps"])
    assert df["extra"].tolist() == ["kept"] and int(df["retx_packets"].iloc[0]) == 0


def test_write_read_round_trip(tmp_path: Path) -> None:
    t = tables()
    res = Results(**t, queues=conform("queues", None), summary={"ranks": 4}, scenario={"a": 1})
    res.write(tmp_path, ["parquet", "csv"])
    back = Results.read(tmp_path)
    for name in ("messages", "phases", "links", "qps"):
        pd.testing.assert_frame_equal(back.tables()[name], res.tables()[name], check_dtype=False)
    assert back.scenario == {"a": 1}


def test_incast_completion_matches_the_line_rate_bound(tmp_path: Path) -> None:
    """N:1 incast with line-rate hosts: the receiver's downlink is the bottleneck, so the phase
    takes N x S wire bytes at 400 Gb/s (plus one path latency), and that link is ~fully used."""
    n, size, mtu = 7, 256 * 1024, 4096
    doc = {
        "name": "incast",
        "cluster": {"topology": {"name": "star", "params": {"hosts": n + 1}}},
        "workload": {"synthetic": {"pattern": "incast", "size": size, "params": {"receiver": 0}}},
        "sim": {"endpoint": "host"},
        "outputs": {"plots": False},
    }
    res = podsim.run(doc)
    wire = n * (size // mtu) * (mtu + 82)
    bound = 8 * wire / 400e9
    t = res.summary["phases"]["other"]["completion_time_s"]
    assert bound <= t <= bound * 1.02 + 3e-6
    down = res.links[res.links["link"] == "leaf0->nic0.p0"]
    assert int(down["tx_bytes"].iloc[0]) == wire
    assert float(down["utilisation"].iloc[0]) == pytest.approx(bound / res.summary["makespan_s"])
    assert res.summary["messages"]["unfinished"] == 0


def test_text_columns_become_objects_shared_per_distinct_value() -> None:
    """conform's text columns equal astype(object), with one object per distinct value (a
    10^7-row message table must not hold a string object per row)."""
    import pandas as pd
    from podsim.scenarios.results.tables import _text_objects

    for s in (
        pd.Series(["rdma", "scaleup", None, "rdma"] * 3, dtype="str"),
        pd.Series(["a", pd.NA, "b"], dtype="string"),
        pd.Series([], dtype="str"),
        pd.Series(["x", None], dtype=object),
    ):
        out = _text_objects(s)
        assert out.dtype == object and out.equals(s.astype(object))
    out = _text_objects(pd.Series(["rdma", "scaleup"] * 1000, dtype="str"))
    assert len({id(v) for v in out}) == 2
