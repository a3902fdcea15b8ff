"""Multi-axis rope against transformers' own functions, through the Python package.

Qwen2-VL's M-RoPE (sections) and Qwen3-VL's (interleaved) as the models compute them: their text
rotary embedding modules (cos and sin per token, the axes recombined) and ``apply_rotary_pos_emb``
on torch tensors; shapejit rotates the same f32 q and k from tables of the modules' inverse
frequencies with ``shapejit.plan_rope(..., axis_rule=...)``. Skipped by name without torch and a
GPU, or transformers.
"""

import pytest

import shapejit
from gpu import requires_torch_gpu, torch


def _transformers(module):
    try:
        import importlib
        return importlib.import_module(f"transformers.models.{module}")
    except Exception:
        return None


def _shapejit_mrope(q, k, positions, cos_table, sin_table, rule, sections):
    """q, k [B, S, H, D] f32 rotated out of place by a shapejit plan with multi-axis positions
    [3, B, S]."""
    y, k_out = torch.empty_like(q), torch.empty_like(k)
    plan = shapejit.plan_rope(q, k, cos=cos_table, positions=positions, out=y, k_out=k_out, axis_rule=rule,
                              axis_sections=sections)
    plan.launch(q, k, cos=cos_table, sin=sin_table, positions=positions, out=y, k_out=k_out)
    torch.cuda.synchronize()
    return y, k_out


def _rotary_module(module, cls, heads, sections, theta):
    """transformers' text rotary embedding of a Qwen-VL model, from a minimal config."""
    from types import SimpleNamespace
    config = SimpleNamespace(max_position_embeddings=4096, head_dim=128, hidden_size=128 * heads,
                             num_attention_heads=heads,
                             rope_parameters={"rope_type": "default", "rope_theta": theta, "mrope_section": sections})
    return getattr(_transformers(module), f"modeling_{module}").__dict__[cls](config).cuda()


def _compare(module, cls, rule, sections, theta, seed):
    """Rotates random f32 q [2, 300, 16, 128] and k (4 heads) at random positions [3, 2, 300] with the
    model's rotary module and apply_rotary_pos_emb, and with shapejit from tables of the module's
    inverse frequencies; the two must agree to f32 rounding."""
    m = getattr(_transformers(module), f"modeling_{module}")
    rot = _rotary_module(module, cls, 16, sections, theta)
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(2, 300, 16, 128, device="cuda", generator=g)
    k = torch.randn(2, 300, 4, 128, device="cuda", generator=g)
    rows = 4096
    positions = torch.randint(0, rows, (3, 2, 300), device="cuda", generator=g, dtype=torch.int64)
    cos, sin = rot(q, positions)  # [B, S, D], the sections or interleaving applied
    q_ref, k_ref = m.apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
    angles = torch.arange(rows, device="cuda", dtype=torch.float32)[:, None] * rot.inv_freq.float()[None, :]
    y, k_out = _shapejit_mrope(q, k, positions, angles.cos(), angles.sin(), rule, sections)
    torch.testing.assert_close(y, q_ref.transpose(1, 2), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(k_out, k_ref.transpose(1, 2), rtol=1e-5, atol=1e-5)
    # The comparison tells the rules apart: the other rule's rotation disagrees with the model.
    other = "interleaved" if rule == "sections" else "sections"
    y_other, _ = _shapejit_mrope(q, k, positions, angles.cos(), angles.sin(), other, sections)
    assert not torch.allclose(y_other, q_ref.transpose(1, 2), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(_transformers("qwen2_vl") is None, reason="needs transformers with qwen2_vl")
@requires_torch_gpu
def test_qwen2_vl_mrope_sections_match_transformers():
    _compare("qwen2_vl", "Qwen2VLRotaryEmbedding", "sections", [16, 24, 24], 1e6, 1)


@pytest.mark.skipif(_transformers("qwen3_vl") is None, reason="needs transformers with qwen3_vl")
@requires_torch_gpu
def test_qwen3_vl_interleaved_mrope_matches_transformers():
    _compare("qwen3_vl", "Qwen3VLTextRotaryEmbedding", "interleaved", [24, 20, 20], 5e6, 2)


if __name__ == "__main__":  # without pytest: run both and say which ran
    for test in (test_qwen2_vl_mrope_sections_match_transformers, test_qwen3_vl_interleaved_mrope_matches_transformers):
        test()
        print(f"{test.__name__}: passed")
