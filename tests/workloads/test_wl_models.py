from __future__ import annotations

import pytest
from podsim.fabric.registry import UnknownNameError
from podsim.workloads.models import MODELS, MoEModel, get_model


@pytest.mark.parametrize(
    ("name", "hidden", "layers", "moe_layers", "experts", "shared", "top_k"),
    [  # docs/physics.md, MoE table
        ("deepseek-v3", 7168, 61, 58, 256, 1, 8),
        ("kimi-k2", 7168, 61, 60, 384, 1, 8),
        ("qwen3-235b-a22b", 4096, 94, 94, 128, 0, 8),
        ("mixtral-8x7b", 4096, 32, 32, 8, 0, 2),
    ],
)
def test_presets_match_physics_table(name, hidden, layers, moe_layers, experts, shared, top_k):
    m = MODELS.get(name)
    assert (m.hidden, m.layers, m.moe_layers) == (hidden, layers, moe_layers)
    assert (m.routed_experts, m.shared_experts, m.top_k) == (experts, shared, top_k)


def test_deepseek_v3_group_limit():
    m = get_model("deepseek-v3")
    assert (m.n_groups, m.topk_groups, m.scoring) == (8, 4, "sigmoid")


def test_kimi_k31_class_is_scaled_to_the_brief():
    """2.8 T parameters, about 104 B active (docs/physics.md); routed experts are most of both."""
    m = get_model("kimi-k3.1-pro-class")
    k2 = get_model("kimi-k2")
    assert m.routed_params == m.routed_experts * m.moe_layers * 3 * m.hidden * m.moe_ffn
    assert abs(m.routed_params - 2.8e12) / 2.8e12 < 0.05
    non_routed_active_k2 = 32e9 - k2.active_routed_params  # K2: about 32 B active
    assert m.active_routed_params + non_routed_active_k2 <= 104e9 * 1.05
    assert m.active_routed_params + 2 * non_routed_active_k2 >= 104e9 * 0.95
    assert "ASSUMPTION" in m.source


def test_unknown_model_suggests():
    with pytest.raises(UnknownNameError, match="deepseek-v3"):
        get_model("deepseek-v4")


def test_invalid_model_rejected():
    with pytest.raises(ValueError, match="n_groups"):
        MoEModel("x", 128, 128, 2, 2, 10, 0, 2, n_groups=3)
    with pytest.raises(ValueError, match="top_k"):
        MoEModel("x", 128, 128, 2, 2, 4, 0, 8)
