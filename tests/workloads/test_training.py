"""A training step as an operation graph: pipeline bubble, MFU, overlap, errors."""

from __future__ import annotations

import pytest
import simpy
import yaml
from podsim.scenarios.execution.executor import execute
from podsim.scenarios.execution.timeline import span_table
from podsim.workloads.training.metrics import training_summary
from podsim.workloads.training.schedule import schedule
from podsim.workloads.training.step import TrainingError, TrainingSpec, build_training_step


class Transport:
    """Delivers nbytes / rate + lat after posting; rate=inf, lat=0: free communication."""

    def __init__(self, rate: float = float("inf"), lat: float = 0.0) -> None:
        self.env = simpy.Environment()
        self.rate, self.lat = rate, lat

    def send(self, msg, src_rank, dst_rank, nbytes, hop, on_done):
        self.env.timeout(nbytes / self.rate + self.lat).callbacks.append(lambda _e: on_done(msg))


def step(spec: TrainingSpec, transport: Transport | None = None) -> dict:
    g = build_training_step(spec)
    t = transport or Transport()
    hops = g.messages(spec.gpus)["hop"].to_numpy()
    run = execute(t.env, t, g, hops)
    assert run.status == "complete"
    return training_summary(span_table(g, run), g.meta["training"])


@pytest.mark.parametrize("name", ["1f1b", "gpipe"])
@pytest.mark.parametrize(("p", "m"), [(4, 8), (2, 1), (8, 4)])
def test_pipeline_bubble_is_p_minus_1_over_m_plus_p_minus_1(name: str, p: int, m: int) -> None:
    """Narayanan et al. SC'21 section 2.2: with free communication and equal stages the bubble
    fraction of 1F1B (and GPipe) is (p - 1) / (m + p - 1)."""
    spec = TrainingSpec("deepseek-v3", gpus=p, pp=p, microbatches=m, layers=8, schedule=name)
    s = step(spec)
    assert s["bubble_fraction"] == pytest.approx((p - 1) / (m + p - 1), rel=1e-9)
    assert sum(s["exposed_comm_s"].values()) == pytest.approx(0.0, abs=1e-15)


def test_one_gpu_without_communication_reaches_the_achieved_fraction_as_mfu() -> None:
    spec = TrainingSpec("kimi-k2", gpus=1, microbatches=2, layers=4, achieved=0.55)
    s = step(spec)
    assert s["mfu"] == pytest.approx(0.55, rel=1e-9)
    assert s["compute_fraction"] == pytest.approx(1.0)


def test_step_time_splits_into_compute_exposed_communication_and_idle() -> None:
    spec = TrainingSpec("deepseek-v3", gpus=16, tp=2, pp=2, ep=4, microbatches=4, layers=4)
    s = step(spec, Transport(rate=50e9, lat=2e-6))
    total = s["compute_fraction"] + s["bubble_fraction"] + sum(s["exposed_comm_fraction"].values())
    assert total == pytest.approx(1.0, rel=1e-9)
    for kind in ("tp", "pp", "dispatch", "combine", "dp"):
        assert s["exposed_comm_s"][kind] > 0, kind


def test_overlap_hides_all_to_all_behind_the_other_micro_batch_and_never_below_compute() -> None:
    base = dict(model="deepseek-v3", gpus=8, ep=8, microbatches=4, layers=2)
    slow = Transport(rate=20e9, lat=5e-6)
    plain = step(TrainingSpec(**base), slow)
    both = step(TrainingSpec(**base, ep_overlap=True), Transport(rate=20e9, lat=5e-6))
    free = step(TrainingSpec(**base))  # communication costs nothing: compute alone
    assert free["step_time_s"] <= both["step_time_s"] < plain["step_time_s"]
    exposed = sum(both["exposed_comm_s"].values())
    assert exposed < sum(plain["exposed_comm_s"].values())


def test_dp_overlap_starts_the_reduction_during_the_backward() -> None:
    base = dict(model="deepseek-v3", gpus=8, tp=1, pp=1, ep=1, microbatches=2, layers=4)
    plain = step(TrainingSpec(**base), Transport(rate=50e9, lat=2e-6))
    over = step(TrainingSpec(**base, dp_overlap=True), Transport(rate=50e9, lat=2e-6))
    assert over["step_time_s"] < plain["step_time_s"]
    assert over["exposed_comm_s"]["dp"] < plain["exposed_comm_s"]["dp"]


def test_schedules_run_every_micro_batch_forward_then_backward() -> None:
    for p in range(4):
        order = schedule("1f1b", p, 4, 6)
        want = [("F", i, 0) for i in range(6)] + [("B", i, 0) for i in range(6)]
        assert sorted(order) == sorted(want)
        assert order[: 4 - p - 1] == [("F", i, 0) for i in range(4 - p - 1)]  # warm-up


def test_interleaved_schedule_follows_megatron_order() -> None:
    """Megatron-LM forward_backward_pipelining_with_interleaving (p=4, v=2, m=8): stage s warms
    up with 2 (p - s - 1) + (v - 1) p forwards; the k-th forward is chunk (k // p) % v of
    micro-batch (k // (p v)) p + k % p; backwards run the chunks in reverse."""
    p, v, m = 4, 2, 8
    for s in range(p):
        order = schedule("interleaved-1f1b", s, p, m, v)
        assert sorted(order) == sorted(
            [(k, mb, c) for k in "FB" for mb in range(m) for c in range(v)]
        )
        warm = 2 * (p - s - 1) + (v - 1) * p
        assert all(k == "F" for k, _, _ in order[:warm]) and order[warm + 1][0] == "B"
        assert order[:5] == [("F", 0, 0), ("F", 1, 0), ("F", 2, 0), ("F", 3, 0), ("F", 0, 1)]
        backwards = [(mb, c) for k, mb, c in order if k == "B"]
        assert backwards[:4] == [(0, 1), (1, 1), (2, 1), (3, 1)]
    # every micro-batch: all-forward when m == p (Megatron's special case)
    order = schedule("interleaved-1f1b", 0, 4, 4, 2)
    assert [k for k, _, _ in order] == ["F"] * 8 + ["B"] * 8


@pytest.mark.parametrize(("p", "m", "v"), [(4, 8, 2), (4, 4, 2), (2, 4, 4), (4, 12, 3)])
def test_interleaved_bubble_is_p_minus_1_over_v_m_plus_p_minus_1(p: int, m: int, v: int) -> None:
    """Narayanan et al. SC'21 section 2.2.2: with v model chunks per stage the bubble time is
    (p - 1)(t_f + t_b) / v against m (t_f + t_b) of work: a fraction (p - 1) / (v m + p - 1)."""
    spec = TrainingSpec("deepseek-v3", gpus=p, pp=p, microbatches=m, layers=p * v * 2,
                        schedule="interleaved-1f1b", virtual_stages=v)  # fmt: skip
    s = step(spec)
    assert s["bubble_fraction"] == pytest.approx((p - 1) / (v * m + p - 1), rel=1e-9)
    plain = step(TrainingSpec("deepseek-v3", gpus=p, pp=p, microbatches=m, layers=p * v * 2))
    assert s["step_time_s"] < plain["step_time_s"]


def test_interleaved_stages_exchange_activations_around_the_ring_of_stages() -> None:
    """With v chunks the last stage sends chunk c's output to stage 0 (chunk c + 1): per
    micro-batch p v - 1 forward and as many backward pipeline sends per (t, d) rank."""
    p, v, m = 2, 2, 2
    g = build_training_step(TrainingSpec("deepseek-v3", gpus=p, pp=p, microbatches=m,
                            layers=4, schedule="interleaved-1f1b"))  # fmt: skip
    pp_msgs = g.messages(p).query("phase == 'other'")
    pairs = sorted(zip(pp_msgs["src_rank"], pp_msgs["dst_rank"], strict=True))
    assert pairs.count((1, 0)) == pairs.count((0, 1)) == m * (p * v - 1)


@pytest.mark.parametrize(
    ("kw", "key"),
    [
        (dict(gpus=12, tp=8), "pp"),
        (dict(gpus=8, pp=3, layers=8), "pp"),
        (dict(gpus=8, ep=3), "ep"),
        (dict(gpus=8, ep=8, achieved=1.5), "achieved"),
        (
            dict(gpus=4, pp=4, layers=8, schedule="interleaved-1f1b", virtual_stages=4),
            "virtual_stages",
        ),
        (dict(gpus=4, pp=4, layers=8, schedule="interleaved-1f1b", microbatches=6), "microbatches"),
        (dict(gpus=4, pp=4, layers=8, virtual_stages=2), "virtual_stages"),
        (dict(gpus=4, ep=4, dispatch_mode="deepep-nrmal"), "dispatch_mode"),
    ],
)
def test_bad_parallelism_names_its_key(kw: dict, key: str) -> None:
    with pytest.raises(TrainingError) as exc:
        build_training_step(TrainingSpec("deepseek-v3", **kw))
    assert exc.value.key == key


def _scenario(**training) -> dict:
    return {
        "name": "train",
        "engine": "flow",
        "cluster": {"preset": "h800-deepep", "params": {"nodes": 2}},
        "workload": {"training": {"layers": 4, "microbatches": 2, "seq_len": 1024, **training}},
        "outputs": {"plots": False},
    }


def test_a_training_step_runs_on_the_flow_engine_and_reports_itself(tmp_path) -> None:
    from podsim.scenarios.runner import run

    res = run(_scenario(tp=2, pp=2, ep=4), write=False)
    t = res.summary["training"]
    assert res.summary["status"] == "complete"
    assert 0 < t["mfu"] < 0.6
    assert t["dp"] == 4 and t["pp"] == 2
    assert set(res.phases["phase"]) >= {"compute", "tp", "pp", "dispatch", "combine", "dp"}


def test_cli_refuses_a_pipeline_that_does_not_divide_the_layers(tmp_path) -> None:
    from podsim.scenarios.cli.app import app
    from typer.testing import CliRunner

    f = tmp_path / "t.yaml"
    f.write_text(yaml.safe_dump(_scenario(pp=3)))
    r = CliRunner().invoke(app, ["run", str(f)])
    assert r.exit_code == 2
    assert "workload.training.pp" in r.output and "does not divide" in r.output
    r = CliRunner().invoke(app, ["run", str(f), "--set", "workload.training.schedule=zigzag"])
    assert r.exit_code == 2 and "zigzag" in r.output


def test_the_timeline_figure_shows_the_whole_training_step() -> None:
    from podsim.scenarios.report.plots import fig_layer_timeline
    from podsim.scenarios.runner import run

    res = run(_scenario(pp=2, ep=8), write=False)
    fig = fig_layer_timeline(res)
    assert fig is not None
    ax = fig.axes[0]
    assert "training step 0" in ax.get_title()
    shown = {t.get_text() for t in ax.get_legend().get_texts()}
    assert {"compute", "pp", "dispatch", "combine", "dp"} <= shown
    # the bars reach the end of the step
    assert ax.get_xlim()[1] >= res.summary["training"]["step_time_s"] * 1e6


def test_mla_parameters_and_score_flops_follow_the_config_by_hand() -> None:
    """DeepSeek-V3 (config.json): hidden 7168, q_lora 1536, kv_lora 512, 128 heads, nope 128,
    rope 64, v 128: 11.01 M + 37.75 M + 4.13 M + 16.78 M + 117.44 M = 187.11 M weights; causal
    scores over S = 4096 tokens cost S x 128 x (192 + 128) FLOPs per token."""
    from podsim.workloads.training.model import layer_costs

    c = layer_costs("deepseek-v3", 4096)
    hand = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168
    assert c[0].attn_params == hand == 187_105_280
    assert c[10].attn_flops == pytest.approx(2 * hand + 4096 * 128 * 320)
    assert [x.moe for x in c[:4]] == [False, False, False, True]  # 3 dense layers first
    # the hybrid preset's linear layers cost their state update, not the quadratic scores
    k3 = layer_costs("kimi-k3.1-pro-class", 65536)
    assert k3[0].attn_flops < k3[3].attn_flops


def test_a_model_without_a_training_shape_names_the_model_key() -> None:
    """A model preset with no MLA projection shape is refused at workload.training.model (it was
    a KeyError, an internal error)."""
    from podsim.workloads.training.model import PROJECTIONS

    with pytest.raises(TrainingError) as exc:
        build_training_step(TrainingSpec("qwen3-235b-a22b", gpus=8, ep=8))
    assert exc.value.key == "model" and "qwen3-235b-a22b" not in PROJECTIONS


def _dp_only(n: int, per_node: int | None, algo: str) -> TrainingSpec:
    """Data parallelism alone over ``n`` GPUs (tp = pp = ep = 1, no compute): the step is the
    four DP collectives (dense and expert reduce-scatter + all-gather), one after the other."""
    return TrainingSpec("deepseek-v3", gpus=n, microbatches=1, layers=2, compute_scale=0.0,
                        gpus_per_node=per_node, dp_algorithm=algo)  # fmt: skip


@pytest.mark.parametrize(("n", "local"), [(16, 4), (24, 8), (12, 2)])
def test_hierarchical_dp_takes_its_closed_form_latency_and_message_count(n: int, local: int):
    """With per-message latency only, a ring reduce-scatter or all-gather over n ranks takes
    (n - 1) latencies and n (n - 1) messages; the hierarchical one (L - 1) + (G - 1) latencies
    (scale-up ring, then the ring over the G = n / L domains) and n (L - 1) + n (G - 1)
    messages. The step runs four of them."""
    lat, groups = 3e-6, n // local
    ring = step(_dp_only(n, local, "ring"), Transport(lat=lat))
    hier = step(_dp_only(n, local, "hierarchical"), Transport(lat=lat))
    assert ring["step_time_s"] == pytest.approx(4 * (n - 1) * lat, rel=1e-12)
    assert hier["step_time_s"] == pytest.approx(4 * (local - 1 + groups - 1) * lat, rel=1e-12)
    assert build_training_step(_dp_only(n, local, "ring")).num_messages == 4 * n * (n - 1)
    msgs = build_training_step(_dp_only(n, local, "hierarchical")).num_messages
    assert msgs == 4 * n * (local - 1 + groups - 1)


def test_hierarchical_dp_moves_the_ring_bytes_in_the_ring_bandwidth_time() -> None:
    """Reduce-scatter inside the domain then over the rails sends (L - 1) / L S + (G - 1) / (G L)
    S = (n - 1) / n S per rank, as the flat ring: same bytes (up to the rounding of slices to
    whole bytes) and, bandwidth alone, the same time."""
    rate = 40e9
    ring_g = build_training_step(_dp_only(16, 4, "ring"))
    hier_g = build_training_step(_dp_only(16, 4, "hierarchical"))
    ring_b, hier_b = ring_g.messages(16)["bytes"].sum(), hier_g.messages(16)["bytes"].sum()
    assert hier_b == pytest.approx(ring_b, rel=1e-6)
    ring = step(_dp_only(16, 4, "ring"), Transport(rate=rate))
    hier = step(_dp_only(16, 4, "hierarchical"), Transport(rate=rate))
    assert hier["step_time_s"] == pytest.approx(ring["step_time_s"], rel=1e-6)


def test_hierarchical_dp_groups_by_gpus_per_node_over_tp_and_keeps_strided_groups_a_ring():
    """tp 2 on 8-GPU nodes: a DP group has 4 members per node (local size 4); the expert
    replicas (strided by ep 4, one per node) have no scale-up split and stay a ring; with
    gpus_per_node unset (one GPU per node) every group is a ring."""
    from podsim.workloads.training.step import scale_up_local

    assert scale_up_local([0, 2, 4, 6, 8, 10, 12, 14], 8) == 4
    assert scale_up_local([0, 8, 16, 24], 8) == 1
    assert scale_up_local([0, 1, 8, 9, 2, 3], 8) == 1  # a domain's members not consecutive
    assert scale_up_local([0, 1, 2, 3], None) == 1
    base = dict(model="deepseek-v3", gpus=32, tp=2, ep=4, microbatches=1, layers=2)
    unset = build_training_step(TrainingSpec(**base, dp_algorithm="hierarchical"))
    ring = build_training_step(TrainingSpec(**base, gpus_per_node=8))
    hier = build_training_step(TrainingSpec(**base, gpus_per_node=8, dp_algorithm="hierarchical"))
    assert unset.num_messages == ring.num_messages
    # dense: 2 groups of 16 (L 4, G 4): 16 x 6 instead of 16 x 15 per collective, x 2 x 2
    assert ring.num_messages - hier.num_messages == 2 * 2 * 16 * (15 - 6)


@pytest.mark.parametrize(
    ("kw", "key"),
    [(dict(dp_algorithm="butterfly"), "dp_algorithm"), (dict(gpus_per_node=0), "gpus_per_node")],
)
def test_bad_dp_settings_name_their_key(kw: dict, key: str) -> None:
    with pytest.raises(TrainingError) as exc:
        build_training_step(TrainingSpec("deepseek-v3", gpus=8, **kw))
    assert exc.value.key == key


def test_cli_refuses_an_unknown_dp_algorithm(tmp_path) -> None:
    from podsim.scenarios.cli.app import app
    from typer.testing import CliRunner

    f = tmp_path / "t.yaml"
    f.write_text(yaml.safe_dump(_scenario(dp_algorithm="butterfly")))
    r = CliRunner().invoke(app, ["run", str(f)])
    assert r.exit_code == 2
    assert "workload.training.dp_algorithm" in r.output and "butterfly" in r.output


def test_a_scenario_s_hierarchical_dp_takes_its_local_size_from_the_cluster() -> None:
    """h800-deepep: 8 GPUs per node; 4 nodes, pp 2: DP 16 in 2 domains of 8."""
    from podsim.scenarios.runner import run

    sc = _scenario(pp=2, ep=8)
    sc["cluster"]["params"]["nodes"] = 4
    ring = run(sc, write=False)
    sc["workload"]["training"]["dp_algorithm"] = "hierarchical"
    hier = run(sc, write=False)
    assert hier.summary["status"] == "complete"
    # per stage: dense 16 x 15 -> 16 x (7 + 1) per collective, two collectives, two stages;
    # the expert replicas (2 per expert, one per node) stay a ring
    assert len(ring.messages) - len(hier.messages) == 2 * 2 * 16 * (15 - 8)


def _ep_bytes(mode: str, gpus_per_node: int | None) -> tuple[int, int, int]:
    """(dispatch-phase messages, their bytes, one forward dispatch pair's bytes) of one
    all-MoE layer at EP 16, one micro-batch: forward FP8 dispatch + backward BF16 gradient."""
    from podsim.workloads.dispatch import rank_share
    from podsim.workloads.models import get_model
    from podsim.workloads.precision import bytes_per_token

    spec = TrainingSpec("deepseek-v3", gpus=16, ep=16, layers=1, seq_len=512,
                        dispatch_mode=mode, gpus_per_node=gpus_per_node)  # fmt: skip
    m = get_model("deepseek-v3")
    per_peer = 512 * (rank_share(m.routed_experts, m.top_k, 16) if mode == "deepep-normal"
                      else m.top_k / 16)  # fmt: skip
    fp8 = round(per_peer * bytes_per_token("fp8", m.hidden))
    bf16 = round(per_peer * bytes_per_token("bf16", m.hidden))
    t = build_training_step(spec).messages(16)
    d = t[t["phase"] == "dispatch"]
    return len(d), int(d["bytes"].sum()), fp8 + bf16


def test_deepep_normal_dedups_per_rank_and_routes_over_scale_up_then_one_rail() -> None:
    """EP 16 over two nodes of 8, by hand: each rank sends its 7 node peers the slices of
    both nodes' local index (2 x pair), then its rail peer the other node's 8 slices; 22 pair
    slices per rank ((2n - G - L) of the collectives module), in forward and in backward."""
    n = 16
    count, total, pair = _ep_bytes("deepep-normal", 8)
    assert count == 2 * n * (7 + 1)
    assert total == n * 22 * pair
    # one scale-up domain per rank: direct, every peer once; no dedup without deepep-normal
    count, total, pair_d = _ep_bytes("deepep-normal", None)
    assert (count, total) == (2 * n * 15, n * 15 * pair_d) and pair_d == pair
    count, total, pair_m = _ep_bytes("megatron-alltoall", 8)
    assert (count, total) == (2 * n * 15, n * 15 * pair_m) and pair_m > pair


def test_uneven_stages_split_the_rest_over_the_middle_stages() -> None:
    """Megatron-LM's first/last pipeline layers: Kimi K2's 61 layers over pp 16 as 3, 14 x 4,
    2; one end given, the other stages share the rest."""
    spec = TrainingSpec("kimi-k2", gpus=16, pp=16, first_stage_layers=3, last_stage_layers=2)
    spec.check()
    assert spec.stage_layers(61) == [3] + [4] * 14 + [2]
    one = TrainingSpec("kimi-k2", gpus=4, pp=4, layers=61, first_stage_layers=1)
    one.check()
    assert one.stage_layers(61) == [1, 20, 20, 20]


@pytest.mark.parametrize("m", [1, 4])
def test_uneven_stages_take_the_flow_shop_time(m: int) -> None:
    """With free communication, GPipe over stages of n_s equal layers is a flow shop of m
    identical jobs, forward then backward (twice as long): its time is proportional to
    sum(n_s) + (m - 1) max(n_s) in each pass. 8 layers as 2 + 6 against 4 + 4."""
    base = dict(gpus=2, pp=2, microbatches=m, layers=8, schedule="gpipe")
    even = step(TrainingSpec("deepseek-v3", **base))["step_time_s"]
    uneven = step(TrainingSpec("deepseek-v3", **base, first_stage_layers=2, last_stage_layers=6))[
        "step_time_s"
    ]
    assert uneven / even == pytest.approx((8 + (m - 1) * 6) / (8 + (m - 1) * 4), rel=1e-9)


def test_every_layer_runs_once_on_its_stage() -> None:
    spec = TrainingSpec("kimi-k2", gpus=4, pp=4, layers=10, first_stage_layers=1,
                        last_stage_layers=3)  # fmt: skip
    g = build_training_step(spec)
    layers_of: dict[int, set[int]] = {}
    for r, _first, _last, tags in g.spans():
        if tags.get("phase") == "compute" and tags.get("layer", -1) >= 0:
            layers_of.setdefault(r, set()).add(tags["layer"])
    assert [sorted(layers_of[r]) for r in range(4)] == [[0], [1, 2, 3], [4, 5, 6], [7, 8, 9]]


@pytest.mark.parametrize(
    ("kw", "key"),
    [
        (
            dict(gpus=4, pp=4, layers=10, first_stage_layers=2, last_stage_layers=3),
            "first_stage_layers",
        ),
        (dict(gpus=1, layers=4, last_stage_layers=2), "last_stage_layers"),
        (
            dict(gpus=2, pp=2, layers=8, first_stage_layers=3, last_stage_layers=4),
            "first_stage_layers",
        ),
        (
            dict(gpus=4, pp=4, layers=16, schedule="interleaved-1f1b", first_stage_layers=2),
            "first_stage_layers",
        ),
        (dict(gpus=4, pp=4, layers=8, first_stage_layers=0), "first_stage_layers"),
    ],
)
def test_uneven_stages_that_do_not_fit_name_their_key(kw: dict, key: str) -> None:
    with pytest.raises(TrainingError) as exc:
        build_training_step(TrainingSpec("deepseek-v3", **kw))
    assert exc.value.key == key


def test_cli_refuses_uneven_stages_that_do_not_fit(tmp_path) -> None:
    from podsim.scenarios.cli.app import app
    from typer.testing import CliRunner

    f = tmp_path / "t.yaml"
    f.write_text(yaml.safe_dump(_scenario(pp=2, first_stage_layers=4)))
    r = CliRunner().invoke(app, ["run", str(f)])
    assert r.exit_code == 2
    assert "workload.training.first_stage_layers" in r.output and "split evenly" in r.output
