"""Rope sin/cos tables, computed in double by the library with the formulas of Hugging Face
transformers' ``modeling_rope_utils`` (rope types default, linear, llama3 and yarn), and the
Hadamard matrices of the hadamard transform."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import numpy as np

from . import _shapejit as _ext
from ._errors import InvalidArgumentError, UnsupportedError
from ._views import DTYPE_NAMES, dtype_code

SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3", "yarn")

_NUMPY_DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "bf16": np.uint16}

# rope_scaling / rope_parameters keys -> RopeTableOptions fields.
_FIELDS = {
    "factor": "factor",
    "low_freq_factor": "low_freq_factor",
    "high_freq_factor": "high_freq_factor",
    "original_max_position_embeddings": "original_max_positions",
    "beta_fast": "beta_fast",
    "beta_slow": "beta_slow",
    "mscale": "mscale",
    "mscale_all_dim": "mscale_all_dim",
    "attention_factor": "attention_factor",
    "truncate": "truncate",
}


def rope_type(scaling: Optional[Mapping[str, Any]]) -> str:
    """The rope type a rope_scaling / rope_parameters dict names (``rope_type``, or the older
    ``type``); "default" for None."""
    if not scaling:
        return "default"
    return str(scaling.get("rope_type", scaling.get("type", "default")))


def table_options(theta: float = 10000.0, scaling: Optional[Mapping[str, Any]] = None,
                  max_position_embeddings: Optional[int] = None) -> Any:
    """The extension's RopeTableOptions for ``theta`` and a transformers-style scaling dict.

    For yarn without ``factor``, the factor is max_position_embeddings /
    original_max_position_embeddings, and a missing original_max_position_embeddings is
    max_position_embeddings, as transformers derives them. Raises UnsupportedError for rope
    types other than default, linear, llama3 and yarn."""
    o = _ext.RopeTableOptions()
    o.theta = float(theta)
    kind = rope_type(scaling)
    if kind not in SUPPORTED_ROPE_TYPES:
        raise UnsupportedError(
            f"rope type {kind!r} is not supported: use one of {', '.join(SUPPORTED_ROPE_TYPES)}", 2)
    o.scaling = kind
    if kind == "default":
        return o
    params = dict(scaling or {})
    if kind == "yarn":
        if params.get("original_max_position_embeddings") is None and max_position_embeddings:
            params["original_max_position_embeddings"] = max_position_embeddings
        if params.get("factor") is None and max_position_embeddings:
            params["factor"] = max_position_embeddings / params["original_max_position_embeddings"]
    if params.get("factor") is None:
        raise InvalidArgumentError(f"rope type {kind!r} needs a factor", 1)
    for key, field in _FIELDS.items():
        value = params.get(key)
        if value is None:
            continue
        if field == "original_max_positions":
            value = int(value)
        elif field == "truncate":
            value = bool(value)
        else:
            value = float(value)
        setattr(o, field, value)
    return o


def rope_frequencies(rotary_dim: int, *, theta: float = 10000.0,
                     scaling: Optional[Mapping[str, Any]] = None,
                     max_position_embeddings: Optional[int] = None) -> tuple[np.ndarray, float]:
    """The rotary_dim / 2 inverse frequencies (float64) and the attention factor sin and cos
    are multiplied by, for rope_theta ``theta`` and a transformers-style ``scaling`` dict
    (``{"rope_type": "llama3", "factor": 8.0, ...}``; None: default)."""
    inv_freq, attention = _ext.rope_frequencies(
        int(rotary_dim), table_options(theta, scaling, max_position_embeddings))
    return np.asarray(inv_freq, dtype=np.float64), float(attention)


def _to_device(array: np.ndarray, dtype_name: str, device: Any) -> Any:
    import torch

    tensor = torch.from_numpy(array)
    if dtype_name == "bf16":
        tensor = tensor.view(torch.bfloat16)
    return tensor.to(device)


def _table_dtype_code(dtype: Any, device: Any) -> int:
    """The dtype code of a table dtype; f16, bf16 (with a device), f32 or f64."""
    code = dtype_code(dtype)
    name = DTYPE_NAMES[code]
    if name not in _NUMPY_DTYPES:
        raise InvalidArgumentError(f"dtype {name}: rope tables are f16, bf16, f32 or f64", 1)
    if name == "bf16" and device is None:
        raise InvalidArgumentError(
            "dtype bf16 needs device= (a torch device): numpy has no bfloat16", 1)
    return code


def _tables_on(tables: tuple[bytes, bytes], shape: tuple[int, int], code: int, device: Any) -> tuple[Any, Any]:
    """The extension's (cos bytes, sin bytes) as numpy arrays of `shape`, or torch tensors on `device`."""
    name = DTYPE_NAMES[code]
    cos, sin = (np.frombuffer(b, dtype=_NUMPY_DTYPES[name]).reshape(shape) for b in tables)
    if device is None:
        return cos, sin
    return _to_device(cos.copy(), name, device), _to_device(sin.copy(), name, device)


def rope_tables(rows: int, rotary_dim: int, *, theta: float = 10000.0,
                scaling: Optional[Mapping[str, Any]] = None, dtype: Any = "f32", device: Any = None,
                max_position_embeddings: Optional[int] = None) -> tuple[Any, Any]:
    """cos and sin tables, each [rows, rotary_dim / 2]: entry (p, i) is cos (sin) of
    p * inv_freq[i] times the attention factor (see :func:`rope_frequencies`), computed in double
    and rounded to ``dtype`` (f16, bf16, f32 or f64).

    With ``device=None`` they are numpy arrays (bf16 has no numpy dtype: pass a device, or take
    f32); with a torch device (``"cuda"``, ``torch.device("cuda", 1)``) they are torch tensors
    there. CuPy or JAX users convert the numpy arrays (``cupy.asarray(cos)``)."""
    code = _table_dtype_code(dtype, device)
    tables = _ext.rope_tables(int(rows), int(rotary_dim), code,
                              table_options(theta, scaling, max_position_embeddings))
    return _tables_on(tables, (int(rows), int(rotary_dim) // 2), code, device)


def rope_axes_tables(rows: int, axes_dims: Sequence[int], *, theta: float = 10000.0, dtype: Any = "f32",
                     device: Any = None) -> tuple[Any, Any]:
    """cos and sin tables for axial positions, each [rows, sum(axes_dims) / 2]: one block of d_i / 2
    columns per axis (each d_i even), column k of block i holding cos (sin) of
    p * theta^(-2k / d_i). With ``axis_rule="blocks"`` and ``axis_sections`` d_i / 2 in
    :func:`plan_rope`: FLUX's EmbedND (style "gptj", axes_dims such as (16, 56, 56)) or
    ChatGLM-6B's 2-D RoPE (style "neox", axes_dims (R/2, R/2)). ``dtype`` and ``device`` as for
    :func:`rope_tables`."""
    code = _table_dtype_code(dtype, device)
    dims = [int(d) for d in axes_dims]
    tables = _ext.rope_axes_tables(int(rows), dims, code, float(theta))
    return _tables_on(tables, (int(rows), sum(dims) // 2), code, device)


def _field(config: Any, name: str, default: Any = None) -> Any:
    if isinstance(config, Mapping):
        value = config.get(name, default)
    else:
        value = getattr(config, name, default)
    return default if value is None else value


def rope_config(config: Any, *, rotary_dim: Optional[int] = None,
                layer_type: Optional[str] = None) -> dict[str, Any]:
    """What :func:`rope_tables_from_config` reads from a transformers config (object or dict) or
    from a bare rope_parameters / rope_scaling dict: ``rotary_dim``, ``theta``, ``scaling`` and
    ``rows`` (max_position_embeddings, or None).

    The rope dict is ``rope_parameters`` (transformers 5; per layer type when ``layer_type`` is
    given), else ``rope_scaling``, else the config itself when it names a rope type. The rotary dim
    is head_dim (or hidden_size // num_attention_heads) times partial_rotary_factor unless
    ``rotary_dim`` is given."""
    params = _field(config, "rope_parameters") or _field(config, "rope_scaling")
    if params is None and isinstance(config, Mapping) and (
            "rope_type" in config or "type" in config or "rope_theta" in config):
        params = config
    params = dict(params or {})
    if layer_type is not None:
        if layer_type not in params:
            raise InvalidArgumentError(f"layer_type {layer_type!r}: the config's rope parameters "
                                       f"have no such entry ({', '.join(map(str, params))})", 1)
        params = dict(params[layer_type])
    elif params and all(isinstance(v, Mapping) for v in params.values()):
        raise InvalidArgumentError(
            f"the config has rope parameters per layer type ({', '.join(params)}): pass layer_type=", 1)
    theta = params.get("rope_theta") or _field(config, "rope_theta", 10000.0)
    partial = params.get("partial_rotary_factor") or _field(config, "partial_rotary_factor", 1.0)
    if rotary_dim is None:
        head_dim = _field(config, "head_dim")
        if head_dim is None:
            hidden, heads = _field(config, "hidden_size"), _field(config, "num_attention_heads")
            if hidden is None or heads is None:
                raise InvalidArgumentError(
                    "rotary_dim: the config names no head_dim, hidden_size and num_attention_heads; "
                    "pass rotary_dim=", 1)
            head_dim = int(hidden) // int(heads)
        rotary_dim = int(int(head_dim) * float(partial))
    return {
        "rotary_dim": int(rotary_dim),
        "theta": float(theta),
        "scaling": params if rope_type(params) != "default" else None,
        "rows": _field(config, "max_position_embeddings"),
    }


def rope_tables_from_config(config: Any, rows: Optional[int] = None, *,
                            rotary_dim: Optional[int] = None, dtype: Any = "f32",
                            device: Any = None, layer_type: Optional[str] = None) -> tuple[Any, Any]:
    """cos and sin tables for a Hugging Face model: ``config`` is a transformers config object
    (or its dict), or a bare rope_parameters / rope_scaling dict (then pass ``rotary_dim`` and
    ``rows``). Rope types default, linear, llama3 and yarn; any other raises UnsupportedError.

    ``rows`` defaults to max_position_embeddings; ``dtype`` and ``device`` as for
    :func:`rope_tables`."""
    c = rope_config(config, rotary_dim=rotary_dim, layer_type=layer_type)
    rows = rows if rows is not None else c["rows"]
    if rows is None:
        raise InvalidArgumentError("rows: the config names no max_position_embeddings; pass rows=", 1)
    return rope_tables(int(rows), c["rotary_dim"], theta=c["theta"], scaling=c["scaling"],
                       dtype=dtype, device=device, max_position_embeddings=c["rows"])


def hadamard_size_supported(n: int) -> bool:
    """Whether ``n`` is a transform size :func:`plan_hadamard` serves: 2^k (2 to 32768), or 12, 20
    or 28 times a power of two up to 12288, 20480 and 28672."""
    return _ext.hadamard_size_supported(int(n))


def hadamard_matrix(n: int) -> np.ndarray:
    """H_n as an n x n int8 numpy array of +1 and -1, in the ordering :func:`plan_hadamard` uses
    (x @ hadamard_matrix(n).T * scale is the transform of rows x). Raises InvalidArgumentError for
    an unsupported n."""
    n = int(n)
    return np.frombuffer(_ext.hadamard_matrix(n), dtype=np.int8).reshape(n, n).copy()
