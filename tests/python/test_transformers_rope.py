"""Multi-axis rope against transformers' own functions, through the C API (ctypes).

Qwen2-VL's M-RoPE (sections) and Qwen3-VL's (interleaved) as the models compute them: their text
rotary embedding modules (cos and sin per token, the axes recombined) and ``apply_rotary_pos_emb``
on torch tensors; shapejit rotates the same f32 q and k from tables of the modules' inverse
frequencies through ``sj_rope`` of libshapejit (``SHAPEJIT_LIBRARY``, else ``<build>/src/libshapejit.so`` beside the
package). Skipped by name without torch and a GPU, transformers, or the library.
"""

import ctypes
import os
import pathlib

import pytest

from gpu import requires_torch_gpu, torch

c_i64p = ctypes.POINTER(ctypes.c_int64)


class TensorDesc(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int), ("shape", c_i64p), ("strides", c_i64p), ("dtype", ctypes.c_int),
                ("elem_bytes", ctypes.c_int)]


class RopeDesc(ctypes.Structure):  # sj_rope_desc, field for field
    _fields_ = [("style", ctypes.c_int), ("x", TensorDesc), ("y", TensorDesc), ("k", TensorDesc),
                ("k_out", TensorDesc), ("table", TensorDesc), ("positions", TensorDesc), ("rotary_dim", ctypes.c_int64),
                ("inplace", ctypes.c_int), ("inverse", ctypes.c_int), ("checked", ctypes.c_int),
                ("check_pointers", ctypes.c_int), ("hadamard_group", ctypes.c_int64), ("has_hadamard_scale", ctypes.c_int),
                ("hadamard_scale", ctypes.c_double), ("hadamard_order", ctypes.c_int), ("q_quantize", ctypes.c_int),
                ("k_quantize", ctypes.c_int), ("q_scale", TensorDesc), ("k_scale", TensorDesc), ("axis_rule", ctypes.c_int),
                ("axis_count", ctypes.c_int), ("axis_sections", c_i64p), ("cache_layout", ctypes.c_int), ("v", TensorDesc),
                ("k_cache", TensorDesc), ("v_cache", TensorDesc), ("slots", TensorDesc), ("cache_quantize", ctypes.c_int)]


class RopePointers(ctypes.Structure):  # sj_rope_pointers
    _fields_ = [(name, ctypes.c_void_p) for name in ("x", "y", "k", "k_out", "cos", "sin", "positions")] + \
               [("offset", ctypes.c_int64)] + \
               [(name, ctypes.c_void_p) for name in ("q_scale", "k_scale", "v", "k_cache", "v_cache", "slots",
                                                     "k_cache_scale", "v_cache_scale")]


SJ_I64, SJ_F32, SJ_ROPE_NEOX, SJ_AXES_SECTIONS, SJ_AXES_INTERLEAVED = 7, 10, 1, 1, 2


def _library():
    path = os.environ.get("SHAPEJIT_LIBRARY")
    candidates = [pathlib.Path(path)] if path else []
    try:
        import shapejit
        candidates.append(pathlib.Path(shapejit.__file__).resolve().parents[2] / "src" / "libshapejit.so")
    except Exception:
        pass
    for candidate in candidates:
        if candidate.is_file():
            lib = ctypes.CDLL(str(candidate))
            lib.sj_rope.argtypes = [ctypes.POINTER(RopeDesc), ctypes.POINTER(RopePointers), ctypes.c_void_p]
            lib.sj_last_error.restype = ctypes.c_char_p
            return lib
    return None


def _transformers(module):
    try:
        import importlib
        return importlib.import_module(f"transformers.models.{module}")
    except Exception:
        return None


LIB = _library() if torch is not None else None
requires_library = pytest.mark.skipif(LIB is None, reason="needs libshapejit.so (SHAPEJIT_LIBRARY)")


def _desc(t, keep):
    shape = (ctypes.c_int64 * t.dim())(*t.shape)
    keep.append(shape)
    return TensorDesc(t.dim(), shape, None, SJ_I64 if t.dtype == torch.int64 else SJ_F32, 0)


def _shapejit_mrope(q, k, positions, cos_table, sin_table, rule, sections):
    """q, k [B, S, H, D] f32 rotated out of place by sj_rope with multi-axis positions [3, B, S]."""
    keep = []
    y, k_out = torch.empty_like(q), torch.empty_like(k)
    d = RopeDesc()
    d.style = SJ_ROPE_NEOX
    d.x, d.y, d.k, d.k_out = _desc(q, keep), _desc(y, keep), _desc(k, keep), _desc(k_out, keep)
    d.table, d.positions = _desc(cos_table, keep), _desc(positions, keep)
    d.axis_rule = rule
    d.axis_count = len(sections)
    d.axis_sections = (ctypes.c_int64 * len(sections))(*sections)
    p = RopePointers(q.data_ptr(), y.data_ptr(), k.data_ptr(), k_out.data_ptr(), cos_table.data_ptr(),
                     sin_table.data_ptr(), positions.data_ptr(), 0)
    status = LIB.sj_rope(ctypes.byref(d), ctypes.byref(p), torch.cuda.current_stream().cuda_stream)
    assert status == 0, LIB.sj_last_error().decode()
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
    model's rotary module and apply_rotary_pos_emb, and with sj_rope from tables of the module's
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
    other = SJ_AXES_INTERLEAVED if rule == SJ_AXES_SECTIONS else SJ_AXES_SECTIONS
    y_other, _ = _shapejit_mrope(q, k, positions, angles.cos(), angles.sin(), other, sections)
    assert not torch.allclose(y_other, q_ref.transpose(1, 2), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(_transformers("qwen2_vl") is None, reason="needs transformers with qwen2_vl")
@requires_library
@requires_torch_gpu
def test_qwen2_vl_mrope_sections_match_transformers():
    _compare("qwen2_vl", "Qwen2VLRotaryEmbedding", SJ_AXES_SECTIONS, [16, 24, 24], 1e6, 1)


@pytest.mark.skipif(_transformers("qwen3_vl") is None, reason="needs transformers with qwen3_vl")
@requires_library
@requires_torch_gpu
def test_qwen3_vl_interleaved_mrope_matches_transformers():
    _compare("qwen3_vl", "Qwen3VLTextRotaryEmbedding", SJ_AXES_INTERLEAVED, [24, 20, 20], 5e6, 2)


if __name__ == "__main__":  # without pytest: run both and say which ran
    for test in (test_qwen2_vl_mrope_sections_match_transformers, test_qwen3_vl_interleaved_mrope_matches_transformers):
        test()
        print(f"{test.__name__}: passed")
