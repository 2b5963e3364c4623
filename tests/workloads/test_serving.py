"""podsim.workloads.serving: KV bytes per attention design, requests, the serving graph."""

from __future__ import annotations

import math

import numpy as np
import pytest
from podsim.scenarios.execution.timeline import run_timeline
from podsim.tests.workloads.trace_testutil import LAT, FixedTransport, msg_time
from podsim.workloads.dispatch import get_mode, rank_share
from podsim.workloads.graph import COMPUTE
from podsim.workloads.precision import WEIGHT_FORMATS, weight_format
from podsim.workloads.serving import (
    Attention,
    Gpu,
    InstancePerf,
    RequestClass,
    RequestError,
    Requests,
    build_serving_graph,
    get_serving_model,
    poisson_requests,
    read_requests_csv,
    requests_table,
)
from podsim.workloads.serving.exchange import InstanceComm

# -- KV bytes per token, by hand from each design's formula ---------------------------------


def test_mla_cache_is_latent_plus_rope_key_per_layer() -> None:
    # DeepSeek-V3: (d_c + d_h^R) = 512 + 64 values per token and layer, 61 layers, BF16
    att = get_serving_model("deepseek-v3").attention
    assert att.values_per_token_layer == 512 + 64
    assert att.bytes_per_token(2) == 61 * (512 + 64) * 2 == 70_272
    assert att.state_bytes == 0
    assert att.cache_bytes(1000, 2) == 1000 * 70_272


def test_gqa_cache_is_two_vectors_per_kv_head_per_layer() -> None:
    # Qwen3-235B-A22B: 4 KV heads of 128, 94 layers: 2 x 4 x 128 values per token and layer
    att = get_serving_model("qwen3-235b-a22b").attention
    assert att.values_per_token_layer == 2 * 4 * 128
    assert att.bytes_per_token(2) == 94 * 2 * 4 * 128 * 2
    assert att.bytes_per_token(1) == 94 * 1024


def test_hybrid_cache_counts_full_layers_per_token_and_linear_layers_per_sequence() -> None:
    # 12 layers, one full MLA layer in every 4 (layers 3, 7, 11), 1 MiB state per linear layer
    att = Attention("hybrid", 12, kv_lora_rank=512, rope_dim=64, full_every=4,
                    linear_state_bytes=1 << 20)  # fmt: skip
    assert att.full_layers().tolist() == [False, False, False, True] * 3
    assert att.bytes_per_token(1) == 3 * 576
    assert att.state_bytes == 9 * (1 << 20)
    assert att.cache_bytes(10_000, 1) == 10_000 * 3 * 576 + 9 * (1 << 20)
    per_layer = att.layer_bytes(10_000, 1)
    assert per_layer.sum() == att.cache_bytes(10_000, 1)
    assert per_layer[3] == 10_000 * 576 and per_layer[0] == 1 << 20
    gqa = Attention("hybrid", 8, cache="gqa", kv_heads=8, head_dim=128, full_every=8)
    assert gqa.bytes_per_token(2) == 1 * 2 * 8 * 128 * 2


def test_kimi_k3_class_hybrid_preset() -> None:
    m = get_serving_model("kimi-k3.1-pro-class")
    att = m.attention
    assert att.num_full == 15 and att.num_linear == 48  # 63 layers, 3 linear : 1 MLA
    assert att.bytes_per_token(1) == 15 * 576
    assert att.state_bytes == 48 * 64 * 128 * 128 * 4
    assert m.total_params == pytest.approx(2.8e12, rel=0.01)
    assert m.max_context == 1 << 20


def test_bad_attention_is_refused() -> None:
    with pytest.raises(ValueError, match="GQA needs"):
        Attention("gqa", 4)
    with pytest.raises(ValueError, match="full_every"):
        Attention("mla", 4, kv_lora_rank=512, full_every=2)


def test_weight_formats_set_bytes_per_parameter() -> None:
    assert weight_format("bf16").bytes_per_param == 2.0
    assert weight_format("fp8").bytes_per_param == 1.0 + 4 / (128 * 128)
    assert weight_format("w4a8").bytes_per_param == 0.5 + 2 / 32
    assert weight_format("w4a8").activations == "fp8"
    with pytest.raises(ValueError, match="w4a8"):
        weight_format("int3")
    assert all(f.source for f in WEIGHT_FORMATS.values())


# -- instance timing ------------------------------------------------------------------------


def _perf(model: str = "qwen3-235b-a22b", gpus: int = 8, **kw: float) -> InstancePerf:
    return InstancePerf(get_serving_model(model), gpus, Gpu(), weight_format("fp8"), 2.0, **kw)


def test_prefill_time_is_dense_plus_quadratic_attention_flops() -> None:
    p = _perf()
    m = p.model
    t = 4096
    flops = 2 * m.active_params * t + 94 * t * t * 64 * (128 + 128)
    assert p.prefill_s(t) == pytest.approx(flops / (8 * 1979e12 * 0.4), rel=1e-12)


def test_decode_step_reads_touched_weights_and_every_cache() -> None:
    p = _perf()
    m = p.model
    ctx = [1000, 3000]
    e, k = m.moe.routed_experts, m.moe.top_k
    weights = (
        m.dense_params + m.moe.routed_params * (1 - (1 - k / e) ** 2)
    ) * p.weights.bytes_per_param
    kv = 4000 * m.attention.bytes_per_token(2.0)
    assert p.decode_step_s(ctx) == pytest.approx((weights + kv) / (8 * 3.35e12 * 0.7), rel=1e-12)
    assert p.decode_step_s([]) == 0.0


# -- requests -------------------------------------------------------------------------------


def test_poisson_requests_are_seeded_and_drawn_from_the_mix() -> None:
    mix = [RequestClass(1000, 10, 3.0), RequestClass((5000, 9000), (20, 40), 1.0)]
    a = poisson_requests(400, 2.0, mix, np.random.default_rng(7))
    b = poisson_requests(400, 2.0, mix, np.random.default_rng(7))
    c = poisson_requests(400, 2.0, mix, np.random.default_rng(8))
    assert np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(
        a.prompt_tokens, b.prompt_tokens
    )
    assert not np.array_equal(a.arrival_s, c.arrival_s)
    assert np.all(np.diff(a.arrival_s) > 0)
    # mean gap 1/rate (400 draws: within 20 %)
    assert np.mean(np.diff(a.arrival_s)) == pytest.approx(0.5, rel=0.2)
    long = a.prompt_tokens > 1000
    assert set(a.prompt_tokens[~long].tolist()) == {1000}
    assert a.prompt_tokens[long].min() >= 5000 and a.prompt_tokens[long].max() <= 9000
    assert 0.15 < long.mean() < 0.35  # weight 1 of 4


def test_requests_csv_reads_and_names_file_row_and_column(tmp_path) -> None:
    f = tmp_path / "req.csv"
    f.write_text("prompt_tokens,arrival_s,output_tokens\n100,0.5,8\n200,0.1,4\n")
    r = read_requests_csv(f)
    assert r.arrival_s.tolist() == [0.1, 0.5]  # sorted by arrival
    assert r.prompt_tokens.tolist() == [200, 100]
    f.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,8\n1,abc,8\n")
    with pytest.raises(RequestError, match=r"req.csv, row 3, column prompt_tokens: 'abc'"):
        read_requests_csv(f)
    f.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,8\n-1,100,8\n")
    with pytest.raises(RequestError, match="row 3, column arrival_s"):
        read_requests_csv(f)
    f.write_text("arrival_s,prompt\n0,100\n")
    with pytest.raises(RequestError, match="no column prompt_tokens, output_tokens"):
        read_requests_csv(f)
    f.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,8\n0,2000,100\n")
    with pytest.raises(RequestError, match=r"row 3, column prompt_tokens.*context of 1024"):
        read_requests_csv(f, max_context=1024)


# -- the graph ------------------------------------------------------------------------------

P, D = [0, 1, 2, 3], [4, 5, 6, 7]


def _run(req: Requests, mode: str = "whole", **kw):
    pp, dp = _perf(gpus=4), _perf(gpus=4)
    plan = build_serving_graph(req, [P], [D], pp, dp, kv_transfer=mode, pair_rate=8e9,
                               pair_latency=1e-6, **kw)  # fmt: skip
    tr = FixedTransport()
    tl = run_timeline(tr.env, tr, plan.graph.messages(8), None, num_ranks=8, graph=plan.graph)
    assert tl.status == "complete"
    return plan, requests_table(tl.phases, len(req)), pp, dp


def _exchange_s(comm: InstanceComm, tokens: int, merged: int = 1) -> float:
    """Closed form of one block's dispatch + combine on the fixed transport: each phase is one
    message per pair, all at once, of the merged layers' bytes."""
    k = merged * comm.moe_layers(0, comm.model.layers)
    return sum(msg_time(round(k * b)) for b in comm.pair_bytes(tokens))


def _comms(pp: InstancePerf, dp: InstancePerf) -> tuple[InstanceComm, InstanceComm]:
    m = pp.model
    return (
        InstanceComm(m, 4, local_size=4, mode="deepep-normal"),
        InstanceComm(m, 4, local_size=4, mode="deepep-low-latency"),
    )


def test_one_request_ttft_is_prefill_plus_transfer_plus_first_step() -> None:
    req = Requests.of([0.25], [4096], [16])
    plan, tab, pp, dp = _run(req)
    pc, dc = _comms(pp, dp)
    row = tab.iloc[0]
    kv = plan.kv_bytes[0]
    assert kv == get_serving_model("qwen3-235b-a22b").attention.cache_bytes(4096, 2.0)
    per_pair = -(-int(kv) // 4)  # 4 pairs, the first shares carry the remainder
    transfer = msg_time(per_pair)
    prefill = pp.prefill_s(4096) + _exchange_s(pc, 4096)  # one group: one exchange per phase
    first = dp.decode_step_s([4096]) + _exchange_s(dc, 1)
    assert row["ttft_s"] == pytest.approx(prefill + transfer + first, rel=1e-12)
    assert row["prefill_s"] == pytest.approx(prefill, rel=1e-12)
    assert row["kv_transfer_s"] == pytest.approx(transfer, rel=1e-12)
    assert row["queue_s"] == 0.0
    # 15 more steps with contexts 4097 .. 4111, each with its own exchange
    rest = sum(dp.decode_step_s([4096 + i]) + _exchange_s(dc, 1) for i in range(1, 16))
    assert row["tpot_s"] == pytest.approx(rest / 15, rel=1e-12)
    assert row["e2e_s"] == pytest.approx(row["ttft_s"] + rest, rel=1e-12)


def test_decode_step_is_compute_plus_ep_all_to_all_and_merging_keeps_it() -> None:
    # 30 steps of one sequence; per step and MoE layer a dispatch and a combine message per pair
    # would take t(b) = b / RATE + LAT each. One merged message per step (exchange_steps 1) or
    # per 5 steps, with exchange_latency = the transport's latency, takes the same time: the
    # merged bytes plus the latencies the merged message absorbed, put back
    req = Requests.of([0.0], [2048], [31])
    _, one, pp, dp = _run(req, exchange_latency=LAT)
    _, five, *_ = _run(req, exchange_steps=5, exchange_latency=LAT)
    _, free, *_ = _run(req)
    dc = _comms(pp, dp)[1]
    layers = dc.moe_layers(0, dc.model.layers)
    per_layer = sum(b / 8e9 + LAT for b in dc.pair_bytes(1))
    exact = sum(dp.decode_step_s([2048 + i]) + layers * per_layer for i in range(1, 31))
    assert one["tpot_s"].iloc[0] == pytest.approx(exact / 30, rel=1e-9)
    assert five["tpot_s"].iloc[0] == pytest.approx(exact / 30, rel=1e-9)
    # without putting the latency back, a step's merged message hides (layers - 1) latencies
    # per phase
    hidden = 30 * 2 * (layers - 1) * LAT
    assert free["tpot_s"].iloc[0] == pytest.approx((exact - hidden) / 30, rel=1e-9)


def test_every_rank_of_an_instance_computes_and_exchanges_with_every_peer() -> None:
    req = Requests.of([0.0], [4096], [4])
    plan, *_ = _run(req)
    a = plan.graph.arrays()
    busy = a.duration_s[a.kind == COMPUTE] > 0
    assert set(a.rank[a.kind == COMPUTE][busy].tolist()) == set(P + D)
    msgs = plan.graph.messages(8)
    for phase in ("dispatch", "combine"):
        m = msgs[msgs["phase"] == phase]
        pairs = set(zip(m["src_rank"], m["dst_rank"], strict=True))
        want = {(s, d) for inst in (P, D) for s in inst for d in inst if s != d}
        assert pairs == want


def test_ep_pair_bytes_by_dispatch_mode() -> None:
    m = get_serving_model("deepseek-v3")  # 256 routed experts, top-8, hidden 7168
    ll = InstanceComm(m, 32, mode="deepep-low-latency")
    normal = InstanceComm(m, 32, mode="deepep-normal", activations="bf16")
    # low latency: T/n x k/n (token, expert) copies, FP8 + scales + 16 B header; BF16 combine
    d, c = ll.pair_bytes(64)
    assert d == pytest.approx(64 / 32 * 8 / 32 * (7168 + 7168 // 128 * 4 + 16))
    assert c == pytest.approx(64 / 32 * 8 / 32 * 2 * 7168)
    # normal: once per rank holding any of the token's experts (hypergeometric miss)
    miss = math.comb(256 - 8, 8) / math.comb(256, 8)
    assert rank_share(256, 8, 32) == pytest.approx(1 - miss, rel=1e-12)
    assert normal.pair_bytes(64)[0] == pytest.approx(64 / 32 * (1 - miss) * 2 * 7168)
    assert rank_share(8, 2, 1) == 1.0
    # dense layers first: DeepSeek-V3's 3 dense layers carry no exchange
    assert ll.moe_layers(0, 61) == 58 and ll.moe_layers(0, 3) == 0 and ll.moe_layers(2, 5) == 2
    with pytest.raises(ValueError, match="tp 3 must divide"):
        InstanceComm(m, 32, tp=3)


def test_tp_all_reduce_stays_inside_each_tp_group() -> None:
    pp, dp = _perf(gpus=4), _perf(gpus=4)
    m = pp.model
    req = Requests.of([0.0], [1024], [2])
    comm = InstanceComm(m, 4, tp=2, local_size=4, mode="deepep-low-latency")
    plan = build_serving_graph(req, [P], [D], pp, dp, kv_transfer="whole", decode_comm=comm,
                               pair_rate=8e9, pair_latency=1e-6)  # fmt: skip
    msgs = plan.graph.messages(8)
    tp = msgs[msgs["phase"] == "other"]
    tp = tp[tp["src_rank"] >= 4]  # the decode instance's, not the KV cache's
    assert set(zip(tp["src_rank"], tp["dst_rank"], strict=True)) == {(4, 5), (5, 4), (6, 7), (7, 6)}
    # two all-reduces per layer of T x tp / n tokens' BF16 activations, merged over the layers:
    # a 2-rank ring sends each rank's half twice per all-reduce
    per = round(m.layers * comm.tp_bytes(1))
    assert sorted(set(tp["bytes"].tolist())) == [-(-per // 2)]


def test_layerwise_streaming_hides_the_transfer_behind_prefill() -> None:
    req = Requests.of([0.0], [32_768], [4])
    _, whole, *_ = _run(req, "whole")
    _, layer, *_ = _run(req, "layerwise")
    assert layer["ttft_s"].iloc[0] < whole["ttft_s"].iloc[0]
    assert layer["kv_exposed_s"].iloc[0] < whole["kv_exposed_s"].iloc[0]
    assert whole["kv_exposed_s"].iloc[0] == pytest.approx(whole["kv_transfer_s"].iloc[0])


def test_continuous_batching_joins_a_later_request_into_the_running_batch() -> None:
    # request 1 arrives while request 0 decodes: it joins, so both decode in one batch and
    # request 0's steps get slower (batch 2 reads more) than alone
    req = Requests.of([0.0, 0.05], [2048, 2048], [400, 400])
    plan, tab, *_ = _run(req)
    alone = _run(Requests.of([0.0], [2048], [400]))[1]
    assert tab["tpot_s"].iloc[0] > alone["tpot_s"].iloc[0]
    assert tab["first_token_s"].iloc[1] < tab["last_token_s"].iloc[0]  # overlapped
    assert plan.decode_nodes < 2 * 400  # iterations merged into few nodes
    # the prefill instance is FIFO: request 1 waited for request 0's prefill if it overlapped
    assert tab["prefill_start_s"].iloc[1] >= tab["prefill_end_s"].iloc[0] - 1e-12


def test_max_batch_holds_requests_back() -> None:
    req = Requests.of([0.0, 0.0, 0.0], [1024] * 3, [50] * 3)
    _, tab, *_ = _run(req, max_batch=1)
    firsts = tab["first_token_s"].to_numpy()
    lasts = tab["last_token_s"].to_numpy()
    assert firsts[1] >= lasts[0] - 1e-12 and firsts[2] >= lasts[1] - 1e-12


def test_gpu_by_name_takes_the_training_table_and_overrides() -> None:
    from podsim.workloads.training.gpu import GPUS

    b = Gpu.named("b200")
    assert b.flops_fp8 == GPUS.get("b200").fp8_flops and b.memory == 180e9
    assert Gpu.named("h800") == Gpu()  # the defaults are the H800's
    assert Gpu.named("h800", memory=141e9, hbm_bandwidth=None).memory == 141e9


def test_requests_spread_over_free_prefill_and_least_loaded_decode_instances() -> None:
    pp, dp = _perf(gpus=2), _perf(gpus=2)
    req = Requests.of([0.0, 0.0, 0.0], [4096, 4096, 4096], [100, 100, 100])
    plan = build_serving_graph(req, [[0, 1], [2, 3]], [[4, 5], [6, 7]], pp, dp,
                               kv_transfer="whole", pair_rate=8e9, pair_latency=1e-6)  # fmt: skip
    # two prefill instances free at 0: requests 0 and 1 start at once, 2 waits for instance 0
    assert plan.prefill_instance.tolist() == [0, 1, 0]
    # decode: 0 and 1 arrive together and take one instance each; 2 goes to the emptier one
    assert sorted(plan.decode_instance[:2].tolist()) == [0, 1]
    tr = FixedTransport()
    tl = run_timeline(tr.env, tr, plan.graph.messages(8), None, num_ranks=8, graph=plan.graph)
    tab = requests_table(tl.phases, 3)
    assert tab["queue_s"].tolist()[:2] == [0.0, 0.0]
    # request 2 waits for request 0's prefill, compute and exchanges
    assert tab["queue_s"].iloc[2] == pytest.approx(tab["prefill_end_s"].iloc[0], rel=1e-12)
    assert tab["prefill_s"].iloc[0] > pp.prefill_s(4096)
    # each request's cache went from its prefill instance's ranks to its decode instance's
    msgs = plan.graph.messages(8)
    msgs = msgs[msgs["phase"] == "other"]  # the caches (the instances' exchanges: dispatch/combine)
    for r in range(3):
        m = msgs[msgs["step"] == r]
        assert set(m["src_rank"]) == set([[0, 1], [2, 3]][plan.prefill_instance[r]])
        assert set(m["dst_rank"]) == set([[4, 5], [6, 7]][plan.decode_instance[r]])


def test_two_prefill_microbatches_overlap_one_s_exchanges_with_the_other_s_compute() -> None:
    # one prefill, whole cache: attention parts a/2, a/2, then experts e/2, e/2 on the GPU;
    # micro-batch 0's dispatch runs beside micro-batch 1's attention and its combine beside
    # micro-batch 1's experts; each experts' part starts once its dispatch arrived and the GPU
    # is free, and micro-batch 1's combine is exposed
    pp, dp = _perf(gpus=4), _perf(gpus=4)
    m = pp.model
    req = Requests.of([0.0], [4096], [2])
    two = InstanceComm(m, 4, local_size=4, mode="deepep-normal", microbatches=2)
    plan = build_serving_graph(req, [P], [D], pp, dp, kv_transfer="whole", prefill_comm=two,
                               pair_rate=8e9, pair_latency=1e-6)  # fmt: skip
    tr = FixedTransport()
    tl = run_timeline(tr.env, tr, plan.graph.messages(8), None, num_ranks=8, graph=plan.graph)
    got = requests_table(tl.phases, 1)["prefill_s"].iloc[0]
    attn, experts = (float(x.sum()) for x in pp.prefill_layer_parts(4096))
    d, c = (msg_time(round(94 * b)) for b in two.pair_bytes(2048))
    e0 = max(attn, attn / 2 + d) + experts / 2  # micro-batch 0's experts end
    e1 = max(e0, attn + d) + experts / 2
    assert got == pytest.approx(max(e0 + c, e1 + c), rel=1e-12)
    one = _comms(pp, dp)[0]
    serial = attn + experts + sum(msg_time(round(94 * b)) for b in one.pair_bytes(4096))
    assert got < serial  # the overlap hides exchange time
    with pytest.raises(ValueError, match="microbatches"):
        InstanceComm(m, 4, microbatches=0)


@pytest.mark.parametrize(
    ("mode", "local", "want"),
    [
        ("deepep-normal", 8, ("pipelined", 2)),  # 4 nodes of 8: scale-up, then one rail
        ("deepep-normal", 32, ("direct", 1)),  # one node: the intranode kernel
        ("deepep-normal", 1, ("direct", 1)),  # no scale-up domain
        ("deepep-low-latency", 8, ("direct", 1)),
        ("megatron-alltoall", 8, ("direct", 1)),
    ],
)
def test_serving_and_training_run_a_mode_s_exchange_the_same_way(mode, local, want) -> None:
    """One rule for both: a serving instance's EP exchange takes the dispatch mode's algorithm
    (DeepEP normal across nodes: the pipelined two hops, as the training step's EP)."""
    comm = InstanceComm(get_serving_model("deepseek-v3"), 32, local_size=local, mode=mode)
    assert (comm.algorithm, comm.rounds) == want
    assert comm.algorithm == get_mode(mode).collective(local, 32)
