"""Rope tables against the formulas of transformers' modeling_rope_utils, written here in numpy."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

import shapejit

# ------------------------------------------------------------------------------------------------
# Reference formulas (float64)


def ref_default(dim, theta):
    return 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)


def ref_linear(dim, theta, factor):
    return ref_default(dim, theta) / factor


def ref_llama3(dim, theta, factor, low, high, old_context):
    inv = ref_default(dim, theta)
    wavelen = 2 * math.pi / inv
    low_wavelen, high_wavelen = old_context / low, old_context / high
    scaled = np.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old_context / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return np.where(medium, smoothed, scaled)


def ref_yarn(dim, theta, factor, original, beta_fast=32.0, beta_slow=1.0, mscale=None,
             mscale_all_dim=None, attention_factor=None, truncate=True):
    def get_mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
        else:
            attention_factor = get_mscale(factor)

    def correction_dim(rotations):
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    extrapolation = 1 - ramp
    pos = theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    inv = (1 / (factor * pos)) * (1 - extrapolation) + (1 / pos) * extrapolation
    return inv, attention_factor


LLAMA31 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 8192}


# ------------------------------------------------------------------------------------------------
# Frequencies


@pytest.mark.parametrize("dim,theta", [(128, 10000.0), (64, 500000.0), (2, 10.0), (96, 1e6)])
def test_default_frequencies(dim, theta):
    inv, attention = shapejit.rope_frequencies(dim, theta=theta)
    np.testing.assert_allclose(inv, ref_default(dim, theta), rtol=1e-13)
    assert attention == 1.0


def test_linear_frequencies():
    inv, attention = shapejit.rope_frequencies(64, theta=10000.0, scaling={"type": "linear", "factor": 4})
    np.testing.assert_allclose(inv, ref_linear(64, 10000.0, 4.0), rtol=1e-13)
    assert attention == 1.0


@pytest.mark.parametrize("params", [LLAMA31, dict(LLAMA31, factor=32.0, high_freq_factor=2.0,
                                                  original_max_position_embeddings=4096)])
def test_llama3_frequencies(params):
    inv, _ = shapejit.rope_frequencies(128, theta=500000.0, scaling=params)
    ref = ref_llama3(128, 500000.0, params["factor"], params["low_freq_factor"],
                     params["high_freq_factor"], params["original_max_position_embeddings"])
    np.testing.assert_allclose(inv, ref, rtol=1e-12)


@pytest.mark.parametrize("extra", [
    {}, {"beta_fast": 16.0, "beta_slow": 2.0}, {"mscale": 1.0, "mscale_all_dim": 0.707},
    {"attention_factor": 1.25}, {"truncate": False}])
def test_yarn_frequencies(extra):
    params = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, **extra}
    inv, attention = shapejit.rope_frequencies(128, theta=1e6, scaling=params)
    ref_inv, ref_attention = ref_yarn(128, 1e6, 4.0, 4096, **extra)
    np.testing.assert_allclose(inv, ref_inv, rtol=1e-12)
    assert attention == pytest.approx(ref_attention, rel=1e-12)


def test_yarn_factor_from_max_positions():
    params = {"rope_type": "yarn", "original_max_position_embeddings": 4096}
    inv, attention = shapejit.rope_frequencies(64, theta=10000.0, scaling=params,
                                               max_position_embeddings=32768)
    ref_inv, ref_attention = ref_yarn(64, 10000.0, 8.0, 4096)
    np.testing.assert_allclose(inv, ref_inv, rtol=1e-12)
    assert attention == pytest.approx(ref_attention)


@pytest.mark.parametrize("kind", ["dynamic", "longrope", "su", "mrope"])
def test_other_rope_types_are_unsupported(kind):
    with pytest.raises(shapejit.UnsupportedError, match="default, linear, llama3, yarn"):
        shapejit.rope_frequencies(64, scaling={"rope_type": kind, "factor": 2.0})


def test_bad_table_parameters():
    with pytest.raises(shapejit.InvalidArgumentError, match="factor"):
        shapejit.rope_frequencies(64, scaling={"rope_type": "linear"})
    with pytest.raises(shapejit.InvalidArgumentError):
        shapejit.rope_frequencies(63)
    with pytest.raises(shapejit.InvalidArgumentError):
        shapejit.rope_frequencies(64, theta=1.0)
    with pytest.raises(shapejit.InvalidArgumentError):
        shapejit.rope_frequencies(64, scaling=dict(LLAMA31, high_freq_factor=1.0))


# ------------------------------------------------------------------------------------------------
# Tables


@pytest.mark.parametrize("dtype,rtol", [("f64", 1e-13), ("f32", 2e-7), ("f16", 1e-3)])
def test_tables_are_rounded_cos_and_sin(dtype, rtol):
    rows, dim = 300, 64
    cos, sin = shapejit.rope_tables(rows, dim, theta=10000.0, dtype=dtype)
    assert cos.shape == sin.shape == (rows, dim // 2)
    angles = np.arange(rows, dtype=np.float64)[:, None] * ref_default(dim, 10000.0)[None, :]
    np.testing.assert_allclose(cos.astype(np.float64), np.cos(angles), rtol=rtol, atol=rtol)
    np.testing.assert_allclose(sin.astype(np.float64), np.sin(angles), rtol=rtol, atol=rtol)
    if dtype != "f64":  # rounded once from double: exactly numpy's rounding of the double value
        np.testing.assert_array_equal(cos, np.cos(angles).astype(cos.dtype))


def test_yarn_tables_carry_the_attention_factor():
    params = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}
    cos, sin = shapejit.rope_tables(64, 32, theta=10000.0, scaling=params, dtype="f64")
    inv, attention = ref_yarn(32, 10000.0, 4.0, 2048)
    angles = np.arange(64)[:, None] * inv[None, :]
    # Angles up to 64 rad: their last bit (1.4e-14) may round differently in the library's libm.
    np.testing.assert_allclose(cos, np.cos(angles) * attention, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(sin, np.sin(angles) * attention, rtol=1e-12, atol=1e-13)


def test_table_dtype_errors():
    with pytest.raises(shapejit.InvalidArgumentError, match="bf16 needs device"):
        shapejit.rope_tables(8, 16, dtype="bf16")
    with pytest.raises(shapejit.InvalidArgumentError):
        shapejit.rope_tables(8, 16, dtype="i32")
    with pytest.raises(shapejit.InvalidArgumentError):
        shapejit.rope_tables(0, 16)


# ------------------------------------------------------------------------------------------------
# From configs


def llama31_config(**changes):
    fields = dict(rope_theta=500000.0, hidden_size=4096, num_attention_heads=32, head_dim=128,
                  max_position_embeddings=131072, rope_scaling=dict(LLAMA31))
    fields.update(changes)
    return SimpleNamespace(**fields)


def test_from_transformers_style_config():
    cos, sin = shapejit.rope_tables_from_config(llama31_config(), 1000, dtype="f64")
    inv = ref_llama3(128, 500000.0, 8.0, 1.0, 4.0, 8192)
    # Angles up to 1000 rad: a few units in their last place (1.1e-13 each) separate two libms.
    np.testing.assert_allclose(cos, np.cos(np.arange(1000)[:, None] * inv[None, :]), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sin, np.sin(np.arange(1000)[:, None] * inv[None, :]), rtol=1e-12, atol=1e-12)


def test_config_reading():
    c = shapejit.rope_config(llama31_config())
    assert c["rotary_dim"] == 128 and c["theta"] == 500000.0 and c["rows"] == 131072
    assert c["scaling"]["rope_type"] == "llama3"
    # transformers 5: rope_parameters holds rope_theta and the type
    v5 = SimpleNamespace(hidden_size=2048, num_attention_heads=16, max_position_embeddings=4096,
                         rope_parameters={"rope_type": "default", "rope_theta": 1e6})
    c = shapejit.rope_config(v5)
    assert c == {"rotary_dim": 128, "theta": 1e6, "scaling": None, "rows": 4096}
    # a dict config, partial rotary factor (GPT-NeoX style)
    neox = {"hidden_size": 2560, "num_attention_heads": 32, "rotary_pct": 0.25,
            "partial_rotary_factor": 0.25, "rope_theta": 10000, "max_position_embeddings": 2048}
    assert shapejit.rope_config(neox)["rotary_dim"] == 20
    cos, _ = shapejit.rope_tables_from_config(neox)
    assert cos.shape == (2048, 10)


def test_bare_rope_dict_needs_rotary_dim_and_rows():
    params = {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}
    with pytest.raises(shapejit.InvalidArgumentError, match="rotary_dim"):
        shapejit.rope_tables_from_config(params, 16)
    with pytest.raises(shapejit.InvalidArgumentError, match="rows"):
        shapejit.rope_tables_from_config(params, rotary_dim=32)
    cos, _ = shapejit.rope_tables_from_config(params, 16, rotary_dim=32, dtype="f64")
    np.testing.assert_allclose(cos[5], np.cos(5 * ref_linear(32, 10000.0, 2.0)), rtol=1e-13)


def test_per_layer_type_parameters():
    config = SimpleNamespace(head_dim=64, max_position_embeddings=512, rope_parameters={
        "full_attention": {"rope_type": "default", "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}})
    with pytest.raises(shapejit.InvalidArgumentError, match="layer_type"):
        shapejit.rope_config(config)
    assert shapejit.rope_config(config, layer_type="sliding_attention")["theta"] == 1e4
    with pytest.raises(shapejit.InvalidArgumentError, match="no such entry"):
        shapejit.rope_config(config, layer_type="other")


@pytest.mark.parametrize("kind", ["dynamic", "longrope"])
def test_unsupported_config_types(kind):
    config = llama31_config(rope_scaling={"rope_type": kind, "factor": 2.0, "short_factor": [1.0]})
    with pytest.raises(shapejit.UnsupportedError, match=kind):
        shapejit.rope_tables_from_config(config, 16)


@pytest.mark.parametrize("axes_dims,theta", [((16, 56, 56), 10000.0), ((64, 64), 10000.0), ((2, 30), 500.0)])
def test_axes_tables_match_the_axial_formula(axes_dims, theta):
    """FLUX's EmbedND and ChatGLM's halves: block i holds cos/sin of p * theta^(-2k / d_i), k < d_i / 2."""
    rows = 37
    cos, sin = shapejit.rope_axes_tables(rows, axes_dims, theta=theta, dtype="f64")
    angles = np.concatenate([np.arange(rows, dtype=np.float64)[:, None] * ref_default(d, theta)[None, :]
                             for d in axes_dims], axis=1)
    assert cos.shape == (rows, sum(axes_dims) // 2)
    np.testing.assert_allclose(cos, np.cos(angles), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sin, np.sin(angles), rtol=1e-12, atol=1e-12)


def test_axes_tables_errors():
    with pytest.raises(shapejit.InvalidArgumentError):
        shapejit.rope_axes_tables(8, [15, 16])
    with pytest.raises(shapejit.InvalidArgumentError):
        shapejit.rope_axes_tables(8, [])
    with pytest.raises(shapejit.InvalidArgumentError, match="numpy has no bfloat16"):
        shapejit.rope_axes_tables(8, [16], dtype="bf16")

