"""Multi-axis rope against transformers' own functions, through the C API (ctypes).

Qwen2-VL's ``apply_multimodal_rotary_pos_emb`` (sections) and Qwen3-VL's interleaved M-RoPE
(``Qwen3VLTextRotaryEmbedding.apply_interleaved_mrope`` and ``apply_rotary_pos_emb``) are run on
torch tensors; shapejit rotates the same f32 q and k from tables of the same frequencies through
``sj_rope`` of libshapejit (``SHAPEJIT_LIBRARY``, else ``<build>/src/libshapejit.so`` beside the
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


def _inputs(batch, seq, heads, k_heads, dim, rows, theta, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(batch, seq, heads, dim, device="cuda", generator=g)
    k = torch.randn(batch, seq, k_heads, dim, device="cuda", generator=g)
    positions = torch.randint(0, rows, (3, batch, seq), device="cuda", generator=g, dtype=torch.int64)
    inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, device="cuda", dtype=torch.float32) / dim)
    table = torch.arange(rows, device="cuda", dtype=torch.float32)[:, None] * inv_freq  # [rows, D/2]
    freqs = positions.float()[..., None] * inv_freq  # [3, B, S, D/2], as the models compute them
    return q, k, positions, table.cos(), table.sin(), freqs


def _close(ours, theirs):
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(_transformers("qwen2_vl") is None, reason="needs transformers with qwen2_vl")
@requires_library
@requires_torch_gpu
def test_qwen2_vl_mrope_sections_match_transformers():
    m = _transformers("qwen2_vl").modeling_qwen2_vl
    sections = [16, 24, 24]
    q, k, positions, cos_t, sin_t, freqs = _inputs(2, 300, 12, 2, 128, 4096, 1e6, 1)
    emb = torch.cat((freqs, freqs), dim=-1)
    q_ref, k_ref = m.apply_multimodal_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), emb.cos(), emb.sin(),
                                                     sections)
    y, k_out = _shapejit_mrope(q, k, positions, cos_t, sin_t, SJ_AXES_SECTIONS, sections)
    _close(y, q_ref.transpose(1, 2))
    _close(k_out, k_ref.transpose(1, 2))


@pytest.mark.skipif(_transformers("qwen3_vl") is None, reason="needs transformers with qwen3_vl")
@requires_library
@requires_torch_gpu
def test_qwen3_vl_interleaved_mrope_matches_transformers():
    m = _transformers("qwen3_vl").modeling_qwen3_vl
    interleave = getattr(m.Qwen3VLTextRotaryEmbedding, "apply_interleaved_mrope", None)
    if interleave is None:
        pytest.skip("this transformers has no Qwen3VLTextRotaryEmbedding.apply_interleaved_mrope")
    sections = [24, 20, 20]
    q, k, positions, cos_t, sin_t, freqs = _inputs(2, 300, 16, 4, 128, 4096, 5e6, 2)
    freqs_t = interleave(None, freqs.clone(), sections)  # [B, S, D/2]; reads no state
    emb = torch.cat((freqs_t, freqs_t), dim=-1)
    q_ref, k_ref = m.apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), emb.cos(), emb.sin())
    y, k_out = _shapejit_mrope(q, k, positions, cos_t, sin_t, SJ_AXES_INTERLEAVED, sections)
    _close(y, q_ref.transpose(1, 2))
    _close(k_out, k_ref.transpose(1, 2))


if __name__ == "__main__":  # without pytest: run both and say which ran
    for test in (test_qwen2_vl_mrope_sections_match_transformers, test_qwen3_vl_interleaved_mrope_matches_transformers):
        test()
        print(f"{test.__name__}: passed")
