"""workload.serving through the runner on the flow engine: TTFT in closed form on an idle
fabric, the KV-transfer share against context length, layer-wise vs whole-cache, determinism,
the written requests table and summary, and bad input as exit 2 naming the key."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import podsim
import pytest
from podsim.scenarios.cli.app import app
from podsim.workloads.precision import weight_format
from podsim.workloads.serving import Gpu, InstancePerf, get_serving_model
from podsim.workloads.serving.exchange import InstanceComm
from podsim.workloads.serving.metrics import REQUEST_COLUMNS
from typer.testing import CliRunner

NIC_BPS = 400e9  # the h800-deepep preset's 400GbE NIC per GPU


def _scenario(tmp_path, rows: list[tuple[float, int, int]], **serving: Any) -> dict[str, Any]:
    f = tmp_path / "req.csv"
    f.write_text("arrival_s,prompt_tokens,output_tokens\n"
                 + "".join(f"{a},{p},{o}\n" for a, p, o in rows))  # fmt: skip
    return {
        "name": "serving-test",
        "seed": 3,
        "engine": "flow",
        "cluster": {"preset": "h800-deepep", "params": {"nodes": 2}, "nic": {"phy": "400GbE"}},
        "workload": {
            "serving": {
                "model": "qwen3-235b-a22b",
                "prefill": {"instances": 1, "nodes": 1},
                "decode": {"instances": 1, "nodes": 1},
                "csv": str(f),
                "weights": "fp8",
                "kv_dtype": "bf16",
                **serving,
            }
        },
        "outputs": {"plots": False},
    }


def _perf() -> InstancePerf:
    return InstancePerf(get_serving_model("qwen3-235b-a22b"), 8, Gpu(), weight_format("fp8"), 2.0)


def test_single_request_ttft_is_prefill_plus_transfer_plus_first_step(tmp_path) -> None:
    prompt = 16_384
    res = podsim.run(_scenario(tmp_path, [(0.5, prompt, 8)], kv_transfer="whole"))
    assert res.status == "complete"
    row = res.analysis["requests"].iloc[0]
    p = _perf()
    prefill = p.prefill_s(prompt)
    first = p.decode_step_s([prompt])
    # the engine's message time: 8 pairs in parallel, one per rail, each 1/8 of the cache at the
    # NIC rate, plus RoCE framing, congestion-control efficiency and path latency (< 15 %)
    per_pair = p.model.attention.cache_bytes(prompt, 2.0) / 8
    wire_floor = per_pair * 8 / NIC_BPS
    assert wire_floor <= row["kv_transfer_s"] <= 1.15 * wire_floor + 20e-6
    msgs = res.messages
    ex = msgs[msgs["phase"] != "other"]  # the instances' dispatch and combine, inside a node
    assert set(ex["phase"]) == {"dispatch", "combine"} and ex["hop"].eq("scaleup").all()
    msgs = msgs[msgs["phase"] == "other"]
    assert len(msgs) == 8 and msgs["hop"].eq("rdma").all()
    # the cache is complete when the sender's write completed: the last delivery, plus the ACK
    # with the SmartNIC endpoint (one path latency, a few microseconds)
    assert 0 <= row["kv_end_s"] - msgs["end_s"].max() < 5e-6
    # prefill and first step: compute, then each MoE phase's exchange inside the node over
    # NVLink (160 GB/s per GPU in the preset): one message per pair and phase, at least 7 x
    # pair bytes through a rank's scale-up port, plus the 5 us exchange_latency put back for
    # each of the 93 other layers' exchanges it stands for (one round: inside one node both
    # modes send direct, DeepEP's intranode kernels)
    for got, compute, mode, tokens in (
        (row["prefill_s"], prefill, "deepep-normal", prompt),
        (row["first_step_s"], first, "deepep-low-latency", 1),
    ):
        comm = InstanceComm(p.model, 8, local_size=8, mode=mode)
        assert (comm.algorithm, comm.rounds) == ("direct", 1)
        floor = sum(7 * round(94 * b) / 160e9 for b in comm.pair_bytes(tokens))
        floor += 2 * 93 * 5e-6
        assert floor <= got - compute <= 1.15 * floor + 20e-6
    assert row["ttft_s"] == pytest.approx(
        row["prefill_s"] + row["kv_transfer_s"] + row["first_step_s"], rel=1e-9
    )
    assert row["kv_exposed_s"] == pytest.approx(row["kv_transfer_s"], rel=1e-9)
    assert row["kv_rate_Bps"] == pytest.approx(row["kv_bytes"] / row["kv_transfer_s"])
    assert row["kv_rate_Bps"] <= 8 * NIC_BPS / 8  # at most 8 NICs' line rate
    s = res.summary["serving"]
    assert s["completed"] == 1 and s["ttft_s"]["p50"] == pytest.approx(row["ttft_s"])


def _share(tmp_path, prompt: int, **kw: Any) -> float:
    res = podsim.run(_scenario(tmp_path, [(0.0, prompt, 2)], kv_transfer="whole", **kw))
    return float(res.analysis["requests"]["kv_share_of_ttft"].iloc[0])


def test_kv_share_of_ttft_follows_context_length(tmp_path) -> None:
    # share = cT / (aT + bT^2 + cT + d): prefill a per token and b per token^2 (attention),
    # transfer c per token, first decode step d (here 50 ms of fixed overhead dominates). It
    # grows with T while d dominates and falls once the quadratic attention term does.
    kw = {"decode_overhead": "50ms"}
    short = [_share(tmp_path, t, **kw) for t in (256, 1024, 4096)]
    assert short[0] < short[1] < short[2]
    long = {"max_context": 262_144, **kw}
    assert _share(tmp_path, 32_768, **long) > _share(tmp_path, 262_000, **long)


def test_layerwise_ttft_is_at_most_whole_cache_ttft(tmp_path) -> None:
    rows = [(0.0, 30_000, 4), (0.1, 8_000, 4)]
    whole = podsim.run(_scenario(tmp_path, rows, kv_transfer="whole")).analysis["requests"]
    layer = podsim.run(_scenario(tmp_path, rows, kv_transfer="layerwise")).analysis["requests"]
    assert (layer["ttft_s"] <= whole["ttft_s"] + 1e-12).all()
    assert layer["ttft_s"].iloc[0] < whole["ttft_s"].iloc[0]
    assert (layer["kv_exposed_s"] < whole["kv_exposed_s"]).all()


def test_same_seed_gives_identical_requests_table(tmp_path) -> None:
    sc = _scenario(tmp_path, [(0.0, 10, 2)], requests=12, rate=20.0,
                   mix=[{"prompt_tokens": [512, 4096], "output_tokens": [4, 32]}])  # fmt: skip
    del sc["workload"]["serving"]["csv"]
    a = podsim.run(sc, out=tmp_path / "a")
    b = podsim.run(sc, out=tmp_path / "b")
    c = podsim.run({**sc, "seed": 4})
    pd.testing.assert_frame_equal(a.analysis["requests"], b.analysis["requests"])
    assert not a.analysis["requests"]["arrival_s"].equals(c.analysis["requests"]["arrival_s"])
    back = pd.read_parquet(tmp_path / "a" / "requests.parquet")
    assert list(back.columns) == REQUEST_COLUMNS and len(back) == 12
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert set(summary["serving"]["ttft_s"]) == {"p50", "p90", "p99", "mean"}
    assert summary["serving"]["completed"] == 12
    from podsim.scenarios.report.html import render_report

    page = render_report(tmp_path / "a")
    assert "Serving: 12 of 12 requests completed" in page and "TTFT" in page
    reread = podsim.Results.read(tmp_path / "a")
    pd.testing.assert_frame_equal(reread.analysis["requests"], a.analysis["requests"],
                                  check_dtype=False)  # fmt: skip


def _write(tmp_path, sc: dict[str, Any]) -> str:
    import yaml

    f = tmp_path / "sc.yaml"
    f.write_text(yaml.safe_dump(sc))
    return str(f)


@pytest.mark.parametrize(
    ("change", "csv_text", "expect"),
    [
        ({"model": "kimi-k9"}, None, ["workload.serving.model", "kimi-k9"]),
        ({"rate": 1.0}, None, ["workload.serving", "exactly one source"]),
        ({"csv": "nope.csv"}, None, ["workload.serving.csv", "nope.csv"]),
        ({}, "arrival_s,prompt_tokens,output_tokens\n0,12x,4\n", ["row 2", "prompt_tokens", "12x"]),
        ({}, "arrival_s,prompt_tokens,output_tokens\n0,40000,4\n", ["row 2", "context of 32768"]),
        (
            {"weights": "bf16", "gpu": {"memory": "40GB"}},
            None,
            ["serving.prefill.nodes", "GB per GPU"],
        ),
        ({"kv_transfer": "lazy"}, None, ["workload.serving.kv_transfer", "lazy"]),
        ({"prefill": {"instances": 2, "nodes": 1}}, None, ["workload.serving", "need 3 nodes"]),
    ],
)
def test_bad_serving_input_is_exit_2_naming_the_key(tmp_path, change, csv_text, expect) -> None:
    sc = _scenario(tmp_path, [(0.0, 1024, 4)])
    sc["workload"]["serving"].update(change)
    if csv_text is not None:
        (tmp_path / "req.csv").write_text(csv_text)
    r = CliRunner().invoke(app, ["validate", _write(tmp_path, sc)])
    assert r.exit_code == 2, r.output
    out = " ".join(r.output.split())
    for text in expect:
        assert text in out, out
    assert "Traceback" not in r.output


def test_mix_longer_than_the_context_is_refused_at_its_entry(tmp_path) -> None:
    mix = [{"prompt_tokens": 100, "output_tokens": 4}, {"prompt_tokens": [1000, 40000]}]
    sc = _scenario(tmp_path, [(0.0, 1024, 4)], rate=1.0, mix=mix)
    del sc["workload"]["serving"]["csv"]
    r = CliRunner().invoke(app, ["validate", _write(tmp_path, sc)])
    assert r.exit_code == 2, r.output
    assert "workload.serving.mix[1].prompt_tokens" in r.output


def test_kv_cache_that_does_not_fit_beside_the_weights_is_refused(tmp_path) -> None:
    # bf16 weights: 235 GB x 2 / 8 GPUs = 59 GB per GPU, 1 GB left on a 60 GB GPU; two
    # 30,000-token requests decoding together hold 2 x 30,000 x 192.5 KB = 11.6 GB (1.4 per GPU)
    rows = [(0.0, 30_000, 2000), (0.0, 30_000, 2000)]
    sc = _scenario(tmp_path, rows, weights="bf16", gpu={"memory": "60GB"})
    r = CliRunner().invoke(app, ["validate", _write(tmp_path, sc)])
    assert r.exit_code == 2, r.output
    out = " ".join(r.output.split())
    assert "workload.serving.max_batch" in out and "KV cache" in out
    sc["workload"]["serving"]["max_batch"] = 1  # one at a time: 0.7 GB per GPU fits
    r = CliRunner().invoke(app, ["validate", _write(tmp_path, sc)])
    assert r.exit_code == 0, r.output


def test_serving_refuses_stragglers_and_ranks_spread_over_nodes(tmp_path) -> None:
    sc = _scenario(tmp_path, [(0.0, 1024, 4)])
    sc["faults"] = [{"kind": "straggler", "rank": 3, "factor": 2.0}]
    r = CliRunner().invoke(app, ["validate", _write(tmp_path, sc)])
    assert r.exit_code == 2 and "faults" in r.output and "straggler" in r.output, r.output
    sc = _scenario(tmp_path, [(0.0, 1024, 4)])
    sc["cluster"]["params"]["nodes"] = 4
    sc["cluster"]["rank_map"] = "by-node"
    r = CliRunner().invoke(app, ["validate", _write(tmp_path, sc)])
    assert r.exit_code == 2 and "cluster.rank_map" in r.output, r.output


def test_serving_messages_have_their_traffic_kinds(tmp_path) -> None:
    # prefill node (ranks 0-7, tp 2) and decode node (ranks 8-15): the cache is kv-transfer, the
    # prefill's dispatch/combine DeepEP normal, the decode's low latency, TP all-reduces
    # collectives
    from podsim.scenarios.build.classes import message_kinds
    from podsim.scenarios.build.cluster import build_cluster
    from podsim.scenarios.build.workload_graph import build_workload_graph, graph_trace
    from podsim.scenarios.input.loader import load_scenario

    sc, _ = load_scenario(_scenario(tmp_path, [(0.0, 1024, 2)], prefill={"nodes": 1, "tp": 2}))
    cluster = build_cluster(sc)
    trace = graph_trace(build_workload_graph(sc, cluster), cluster)
    kinds = pd.Series(message_kinds(sc, trace), index=trace.index)
    ex = trace["phase"].isin(("dispatch", "combine"))
    pre = trace["src_rank"] < 8
    assert set(kinds[ex & pre]) == {"moe-normal"} and set(kinds[ex & ~pre]) == {"moe-low-latency"}
    kv = ~ex & pre & (trace["dst_rank"] >= 8)
    assert kv.any() and set(kinds[kv]) == {"kv-transfer"}
    tp = ~ex & ~kv
    assert tp.any() and set(kinds[tp]) == {"collective"} and (trace["src_rank"][tp] < 8).all()
