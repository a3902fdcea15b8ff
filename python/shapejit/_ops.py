"""Plans and one-shot calls: copy (rearrange), permute, rope and hadamard.

Plans (:func:`plan_copy`, :func:`plan_rope`, :func:`plan_hadamard`) are made once from specs or
arrays and launched many times; one-shot calls (:func:`permute`, :func:`copy_`, :func:`rope`,
:func:`hadamard`) plan through a cache keyed by every shape, stride and dtype. Torch tensors go to ``_torch.py``, which reads them directly and
registers the torch.library ops; everything else arrives here through ``_views.view_of``.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Union

from . import _shapejit as _ext
from . import _views
from ._errors import InvalidArgumentError
from ._views import TensorSpec, broadcast, contiguous_strides, spec, spec_of, stream_handle, view_of

#: Anything a plan or call accepts as a tensor: a torch tensor, an object with
#: ``__cuda_array_interface__`` or ``__dlpack__``, or (for planning) a :class:`TensorSpec`.
ArrayLike = Any
#: A stream: an int CUstream handle, a torch.cuda.Stream, a CuPy stream, or None (the default).
StreamLike = Any

_STYLES = ("neox", "gptj")


# ------------------------------------------------------------------------------------------------
# Plan cache of the one-shot calls


_plans: dict[tuple, Any] = {}
_PLAN_CACHE_LIMIT = 4096


def cached_plan(key: tuple, make: Callable[[], Any]) -> Any:
    """The plan cached under ``key``, made by ``make()`` on a miss (the cache is emptied when it
    holds more than a few thousand plans)."""
    plan = _plans.get(key)
    if plan is None:
        if len(_plans) >= _PLAN_CACHE_LIMIT:
            _plans.clear()
        plan = _plans[key] = make()
    return plan


def clear_plan_cache() -> None:
    """Forgets every plan the one-shot calls made (kernels stay loaded)."""
    _plans.clear()
    _ext.clear_torch_plans()


# ------------------------------------------------------------------------------------------------
# Helpers


def _mismatch(name: str, got: TensorSpec, planned: TensorSpec) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"{name}: shape {got.shape}, strides {got.strides}, dtype {got.dtype} differ from the "
        f"plan's shape {planned.shape}, strides {planned.strides}, dtype {planned.dtype}", 1)


def _pointer(obj: Any, planned: TensorSpec, name: str, stream: int) -> int:
    """The device pointer of ``obj`` after checking it against the planned spec; ints are taken
    as trusted pointers."""
    if type(obj) is int:
        return obj
    t = _views.torch_integration
    if t is not None and isinstance(obj, t.Tensor):
        return t.pointer(obj, planned, name)
    v = view_of(obj, name, stream)
    if v.spec[:3] != planned[:3] or v.spec.itemsize != planned.itemsize:
        raise _mismatch(name, v.spec, planned)
    return v.ptr


def _stream_or_none(stream: StreamLike) -> Optional[int]:
    return None if stream is None else stream_handle(stream)


def _launch_stream(stream: StreamLike, first: Any) -> int:
    """The stream handle a launch uses: the one given, else the default for ``first``'s kind
    (torch: the current stream of its device)."""
    if stream is not None:
        return stream_handle(stream)
    t = _views.torch_integration
    if t is not None and isinstance(first, t.Tensor):
        return t.current_stream(first)
    if type(first) is int:
        return 0
    return _views.default_stream(first)


def permutation(dims: Sequence[int], rank: int) -> tuple[int, ...]:
    """``dims`` as non-negative axes, checked to be a permutation of range(rank)."""
    try:
        axes = tuple(int(d) + rank if int(d) < 0 else int(d) for d in dims)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"dims {dims!r} is not a sequence of ints", 1) from None
    if sorted(axes) != list(range(rank)):
        raise InvalidArgumentError(
            f"dims {tuple(dims)} is not a permutation of the {rank} dimensions", 1)
    return axes


def permuted(s: TensorSpec, axes: tuple[int, ...]) -> TensorSpec:
    """The view of ``s`` whose dimension i is ``s``'s dimension axes[i]."""
    return TensorSpec(tuple(s.shape[a] for a in axes), tuple(s.strides[a] for a in axes),
                      s.code, s.elem_bytes)


def _check_style(style: str) -> None:
    if style not in _STYLES:
        raise InvalidArgumentError(
            f"style {style!r} is not a rope style: use 'neox' (half-split) or 'gptj' (interleaved)", 1)


def _desc(s: Optional[TensorSpec]) -> Optional[tuple]:
    return None if s is None else s.desc()


# ------------------------------------------------------------------------------------------------
# Copy


class _Plan:
    """What every plan object shows of its library plan."""

    __slots__ = ("_plan",)

    def describe(self) -> str:
        """The plan as text: shapes, specialization, kernel family and parameters, launch shape
        and the kernels' keys."""
        return self._plan.describe()

    def json(self) -> str:
        """:meth:`describe` as a JSON document."""
        return self._plan.json()

    def manifest_line(self) -> str:
        """The ``shapejit plan`` manifest line that reproduces this plan's kernels."""
        return self._plan.manifest_line()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.manifest_line()!r})"


class CopyPlan(_Plan):
    """A planned copy of one strided view into another (shapejit's rearrange).

    Immutable and reusable from several threads. ``dst`` and ``src`` are the planned specs.
    """

    __slots__ = ("dst", "src", "_layouts")

    def __init__(self, plan: Any, dst: TensorSpec, src: TensorSpec) -> None:
        self._plan = plan
        self.dst = dst
        self.src = src
        self._layouts = _ext.Layouts([dst.desc(), src.desc()])

    def launch(self, dst: ArrayLike, src: ArrayLike, *, stream: StreamLike = None) -> None:
        """Copies ``src`` into ``dst`` on ``stream`` (default: the current torch stream of dst's
        device for torch tensors, CuPy's current stream for CuPy arrays, else the legacy default
        stream). Arrays must match the planned specs (checked); ints are device pointers taken
        on trust, the lowest-overhead form."""
        if _ext.copy_launch(self._plan, self._layouts, dst, src, _stream_or_none(stream)):
            return
        s = _launch_stream(stream, dst)
        self._plan.launch(_pointer(dst, self.dst, "dst", s), _pointer(src, self.src, "src", s), s)


def _make_copy_plan(dst: TensorSpec, src: TensorSpec, exact: bool = False,
                    assumed_alignment: int = 16, check_pointers: bool = False) -> CopyPlan:
    plan = _ext.plan_rearrange(dst.desc(), src.desc(), exact, assumed_alignment, check_pointers)
    return CopyPlan(plan, dst, src)


def plan_copy(dst: ArrayLike, src: ArrayLike, *, exact: bool = False, assumed_alignment: int = 16,
              check_pointers: bool = False) -> CopyPlan:
    """Plans copying ``src`` into ``dst``: two strided views of one shape and element size
    (``src`` broadcasts to dst's shape). Either may be a :class:`TensorSpec`, a torch tensor or a
    CUDA array; only their shapes, strides and dtypes are read.

    ``exact`` bakes every extent and stride into the kernel (one compile per shape);
    ``assumed_alignment`` is the pointer alignment in bytes the plan assumes (less aligned
    pointers take a narrower variant); ``check_pointers`` asks the driver about both pointers
    before each launch. Raises InvalidArgumentError naming what is wrong."""
    d = spec_of(dst, "dst")
    s = broadcast(spec_of(src, "src"), d.shape, "src")
    return _make_copy_plan(d, s, exact, assumed_alignment, check_pointers)


def _output_required(name: str, obj: Any) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"{name}= is required here ({type(obj).__name__} input): shapejit allocates outputs only "
        "for torch tensors", 1)


def permute(x: ArrayLike, dims: Sequence[int], *, out: Optional[ArrayLike] = None,
            stream: StreamLike = None) -> ArrayLike:
    """A contiguous copy of ``x`` with its dimensions permuted, like
    ``x.permute(dims).contiguous()``: output dimension i is input dimension dims[i] (negative
    dims count from the end).

    Torch tensors get a new tensor (or fill ``out``) on the current stream of their device; other
    CUDA arrays need ``out`` (a contiguous array of the permuted shape). Returns the output."""
    t = _views.torch_integration or _views.load_torch()
    if t is not None and isinstance(x, t.Tensor):
        return t.permute(x, dims, out=out, stream=stream)
    s = _launch_stream(stream, x)
    v = view_of(x, "x", s)
    src = permuted(v.spec, permutation(dims, len(v.spec.shape)))
    if out is None:
        raise _output_required("out", x)
    o = view_of(out, "out", s)
    plan = cached_plan(("copy", o.spec, src), lambda: _make_copy_plan(o.spec, src))
    plan._plan.launch(o.ptr, v.ptr, s)
    return out


def copy_(dst: ArrayLike, src: ArrayLike, *, stream: StreamLike = None) -> ArrayLike:
    """Copies ``src`` into ``dst`` (any two strided views of one shape and element size; ``src``
    broadcasts, and may have negative strides where its producer allows them) on the current
    stream of dst's device (torch), CuPy's current stream (CuPy) or ``stream``. Returns ``dst``."""
    t = _views.torch_integration or _views.load_torch()
    if t is not None and isinstance(dst, t.Tensor) and isinstance(src, t.Tensor):
        return t.copy_(dst, src, stream=stream)
    s = _launch_stream(stream, dst)
    d = view_of(dst, "dst", s)
    v = view_of(src, "src", s)
    src_spec = broadcast(v.spec, d.spec.shape, "src")
    plan = cached_plan(("copy", d.spec, src_spec), lambda: _make_copy_plan(d.spec, src_spec))
    plan._plan.launch(d.ptr, v.ptr, s)
    return dst


# ------------------------------------------------------------------------------------------------
# Rope


class RopePlan(_Plan):
    """A planned rope: q (and k) rotated by the cos/sin tables, in one launch.

    Immutable and reusable from several threads. The attributes hold the planned specs (``k``,
    ``out``, ``k_out`` and ``positions`` may be None) and options; ``cache`` the specs of a cache
    append (v, k_cache, v_cache, slots), or None.
    """

    __slots__ = ("q", "k", "out", "k_out", "table", "positions", "inplace", "checked", "cache", "_layouts")

    def __init__(self, plan: Any, q: TensorSpec, k: Optional[TensorSpec], out: Optional[TensorSpec],
                 k_out: Optional[TensorSpec], table: TensorSpec, positions: Optional[TensorSpec],
                 inplace: bool, checked: bool, cache: Optional[tuple[TensorSpec, ...]] = None) -> None:
        self._plan = plan
        self.q, self.k, self.out, self.k_out = q, k, out, k_out
        self.table, self.positions = table, positions
        self.inplace, self.checked, self.cache = inplace, checked, cache
        self._layouts = _ext.Layouts([
            q.desc(), (out or q).desc(), _desc(k), _desc(k_out or k), table.desc(), table.desc(),
            _desc(positions)])

    def launch(self, q: ArrayLike, k: Optional[ArrayLike] = None, *, cos: ArrayLike, sin: ArrayLike,
               positions: Optional[ArrayLike] = None, offset: int = 0, out: Optional[ArrayLike] = None,
               k_out: Optional[ArrayLike] = None, stream: StreamLike = None, v: Optional[ArrayLike] = None,
               k_cache: Optional[ArrayLike] = None, v_cache: Optional[ArrayLike] = None,
               slots: Optional[ArrayLike] = None, k_cache_scale: Optional[ArrayLike] = None,
               v_cache_scale: Optional[ArrayLike] = None) -> Any:
        """Rotates q (and k) on ``stream`` (default as for :meth:`CopyPlan.launch`). Arrays must
        match the planned specs (checked); ints are device pointers taken on trust. Without
        ``positions`` the position of sequence index s is ``s + offset``. A plan with a cache
        append also takes ``v``, ``k_cache``, ``v_cache`` and ``slots`` (and, for 8-bit caches,
        ``k_cache_scale`` and ``v_cache_scale``: one-element f32 arrays).

        Returns the outputs: ``out`` (and ``k_out``); for torch tensors missing outputs are
        allocated (contiguous), for an in-place plan they are q and k. A cache append that writes
        k to the cache only returns ``out`` (and ``k_out`` is not taken)."""
        if self.cache is not None:
            return self._launch_with_cache(q, k, cos, sin, positions, offset, out, k_out, stream,
                                           (v, k_cache, v_cache, slots, k_cache_scale, v_cache_scale))
        if self.inplace:
            out, k_out = q, k
        fast_stream = _stream_or_none(stream)
        if _ext.rope_launch(self._plan, self._layouts, self.checked, q, out, k, k_out, cos, sin,
                            positions, offset, fast_stream):
            return out if k is None else (out, k_out)
        if (k is None) != (self.k is None):
            raise InvalidArgumentError("k: pass k exactly when the plan was made with k", 1)
        if (positions is None) != (self.positions is None):
            raise InvalidArgumentError(
                "positions: pass positions exactly when the plan was made with positions", 1)
        if not self.inplace and (out is None or (k is not None and k_out is None)):
            out = self._output(out, q, self.q, "out")
            if k is not None:
                k_out = self._output(k_out, k, self.k, "k_out")
            if _ext.rope_launch(self._plan, self._layouts, self.checked, q, out, k, k_out, cos, sin,
                                positions, offset, fast_stream):
                return out if k is None else (out, k_out)
        s = _launch_stream(stream, q)
        y_spec = self.out or self.q
        ko_spec = self.k_out or self.k
        self._plan.launch(
            self.checked,
            _pointer(q, self.q, "q", s),
            _pointer(out, y_spec, "out", s),
            0 if k is None else _pointer(k, self.k, "k", s),
            0 if k is None else _pointer(k_out, ko_spec, "k_out", s),
            _pointer(cos, self.table, "cos", s),
            _pointer(sin, self.table, "sin", s),
            0 if positions is None else _pointer(positions, self.positions, "positions", s),
            int(offset), s)
        return out if k is None else (out, k_out)

    def _launch_with_cache(self, q: Any, k: Any, cos: Any, sin: Any, positions: Any, offset: int, out: Any,
                           k_out: Any, stream: StreamLike, cache: tuple[Any, ...]) -> Any:
        """A cache append's launch: every argument checked against the plan, pointers to C++."""
        names = ("v", "k_cache", "v_cache", "slots", "k_cache_scale", "v_cache_scale")
        quantized = len(self.cache) == 6
        for name, given in zip(names, cache):
            required = quantized or not name.endswith("scale")
            if (given is None) == required:
                what = "8-bit caches" if name.endswith("scale") else "a KV cache"
                raise InvalidArgumentError(f"{name}: pass {name} exactly when the plan appends to {what}", 1)
        if k is None or (positions is None) != (self.positions is None):
            raise InvalidArgumentError("k, positions: pass them as the plan was made", 1)
        if self.inplace:
            out, k_out = q, k
        writes_k = self.inplace or self.k_out is not None
        out = self._output(out, q, self.q, "out")
        if writes_k:
            k_out = self._output(k_out, k, self.k, "k_out")
        elif k_out is not None:
            raise InvalidArgumentError("k_out: the plan writes k to the cache only; plan with k_out to write it", 1)
        s = _launch_stream(stream, q)
        pointers = tuple(0 if a is None else _pointer(a, spec, name, s)
                         for a, spec, name in zip(cache, self.cache, names))
        self._plan.launch(
            self.checked, _pointer(q, self.q, "q", s), _pointer(out, self.out or self.q, "out", s),
            _pointer(k, self.k, "k", s), _pointer(k_out, self.k_out or self.k, "k_out", s) if writes_k else 0,
            _pointer(cos, self.table, "cos", s), _pointer(sin, self.table, "sin", s),
            0 if positions is None else _pointer(positions, self.positions, "positions", s),
            int(offset), s, pointers + (0,) * (6 - len(pointers)))
        return out if not writes_k else (out, k_out)

    def _output(self, given: Any, like: Any, planned: TensorSpec, name: str) -> Any:
        if given is not None:
            return given
        t = _views.torch_integration
        if t is not None and isinstance(like, t.Tensor):
            return t.empty_contiguous(like)
        raise _output_required(name, like)


def make_rope_plan(q: TensorSpec, k: Optional[TensorSpec], out: Optional[TensorSpec],
                   k_out: Optional[TensorSpec], table: TensorSpec, positions: Optional[TensorSpec],
                   style: str, rotary_dim: Optional[int], inplace: bool, inverse: bool,
                   checked: bool, check_pointers: bool = False, axis_rule: str = "none",
                   axis_sections: Sequence[int] = (), cache_layout: str = "none",
                   cache: Optional[tuple[TensorSpec, TensorSpec, TensorSpec, TensorSpec]] = None,
                   cache_quantize: str = "none") -> RopePlan:
    """Plans a rope from specs (the outputs None: contiguous, or q and k when in place; with a
    cache append, k_out None: not written)."""
    _check_style(style)
    if inplace and (out is not None or k_out is not None):
        raise InvalidArgumentError("out, k_out: an in-place rope writes q and k; pass neither", 1)
    if k_out is not None and k is None:
        raise InvalidArgumentError("k_out: given without k", 1)
    cache_descs = None
    if cache_layout != "none" or cache is not None or cache_quantize != "none":
        if cache is None or any(c is None for c in cache):
            raise InvalidArgumentError("v, k_cache, v_cache, slots: a cache append needs all four", 1)
        cache_descs = (cache_layout,) + tuple(c.desc() for c in cache) + (cache_quantize,)
    plan = _ext.plan_rope(style, q.desc(), _desc(out), _desc(k), _desc(k_out), table.desc(),
                          _desc(positions), int(rotary_dim or 0), inplace, inverse, checked,
                          check_pointers, axis_rule, [int(s) for s in axis_sections], cache_descs)
    cache_specs = None
    if cache is not None:
        scale = spec([1], "f32")
        cache_specs = tuple(cache) + ((scale, scale) if cache_quantize != "none" else ())
    return RopePlan(plan, q, k, out, k_out, table, positions, inplace, checked, cache_specs)


def plan_rope(q: ArrayLike, k: Optional[ArrayLike] = None, *, cos: ArrayLike,
              positions: Optional[ArrayLike] = None, style: str = "neox",
              rotary_dim: Optional[int] = None, inplace: bool = False, inverse: bool = False,
              out: Optional[ArrayLike] = None, k_out: Optional[ArrayLike] = None,
              checked: bool = False, check_pointers: bool = False, axis_rule: str = "none",
              axis_sections: Sequence[int] = (), cache_layout: str = "none", v: Optional[ArrayLike] = None,
              k_cache: Optional[ArrayLike] = None, v_cache: Optional[ArrayLike] = None,
              slots: Optional[ArrayLike] = None, cache_quantize: str = "none") -> RopePlan:
    """Plans a rope over q ([seq, heads, dhead] or [batch, seq, heads, dhead]) and optionally k
    (same batch, seq and dhead, its own head count). Every argument may be a :class:`TensorSpec`,
    a torch tensor or a CUDA array; only shapes, strides and dtypes are read.

    ``cos`` gives the layout of both tables ([P, W], W >= rotary_dim / 2); ``positions`` ([seq]
    or [batch, seq], any integer dtype) or None (position = sequence index + offset); ``style``
    "neox" (half-split) or "gptj" (interleaved); ``rotary_dim`` the leading elements rotated
    (None: all); ``inplace`` writes q and k; ``inverse`` rotates backwards; ``out``/``k_out``
    the output layouts (None: contiguous); ``checked`` makes each launch wait and raise for a
    position outside the table; ``check_pointers`` asks the driver about every pointer first.

    Multi-axis positions (vision-language models): ``positions`` [axes, seq] or [axes, batch,
    seq] and ``axis_rule`` "sections" (Qwen2-VL M-RoPE: pair j takes the axis whose section of
    ``axis_sections`` holds j), "interleaved" (Qwen3-VL: axes 1 and 2 on j % 3 == 1, 2 within
    3 s_1, 3 s_2) or "blocks" (ChatGLM 2-D RoPE, FLUX: one block of 2 s_i channels per axis, NeoX
    pairs half-split inside it; tables from :func:`rope_axes_tables`); the sections sum to
    rotary_dim / 2.

    KV-cache append (serving): ``cache_layout`` "nhd" ([blocks, block_size, heads, dhead], vLLM)
    or "hnd" ([blocks, heads, block_size, dhead]) with ``v`` (k's shape), ``k_cache``, ``v_cache``
    and ``slots`` ([batch * seq] or [batch, seq], int32 or int64; a negative slot skips the
    token). k is rotated and written, with v, at each token's slot; k_out is written only in place
    or when given. ``cache_quantize`` "int8" or "fp8-e4m3" makes the caches 8-bit codes (int8 /
    uint8 arrays) of value / scale, the scales passed to :meth:`RopePlan.launch`."""
    cache = None
    if any(a is not None for a in (v, k_cache, v_cache, slots)) or cache_layout != "none":
        cache = tuple(None if a is None else spec_of(a, name) for a, name in
                      ((v, "v"), (k_cache, "k_cache"), (v_cache, "v_cache"), (slots, "slots")))
    return make_rope_plan(
        spec_of(q, "q"), None if k is None else spec_of(k, "k"),
        None if out is None else spec_of(out, "out"), None if k_out is None else spec_of(k_out, "k_out"),
        spec_of(cos, "cos"), None if positions is None else spec_of(positions, "positions"),
        style, rotary_dim, inplace, inverse, checked, check_pointers, axis_rule, axis_sections,
        cache_layout, cache, cache_quantize)


def rope(q: ArrayLike, k: Optional[ArrayLike] = None, *, cos: ArrayLike, sin: ArrayLike,
         positions: Optional[ArrayLike] = None, offset: int = 0, style: str = "neox",
         rotary_dim: Optional[int] = None, inplace: bool = False, inverse: bool = False,
         out: Optional[ArrayLike] = None, k_out: Optional[ArrayLike] = None,
         checked: bool = False, stream: StreamLike = None) -> Any:
    """Rotary position embedding of q (and k in the same launch).

    For each token with position p and each pair i < R/2 (R = rotary_dim, default dhead), "neox"
    rotates (x[i], x[i + R/2]) and "gptj" rotates (x[2i], x[2i+1]) by the angle whose cosine and
    sine are cos[p, i] and sin[p, i]; elements past R pass through. Positions come from
    ``positions`` ([seq] or [batch, seq], any integer dtype) or are ``s + offset``.

    q, k: [seq, heads, dhead] or [batch, seq, heads, dhead], f16/bf16/f32/f64, any strides with
    dhead contiguous. cos, sin: [P, W >= R/2] tables (see :func:`rope_tables`), any float dtype.
    ``inplace`` overwrites q and k; otherwise results go to ``out``/``k_out`` or, for torch
    tensors, to new contiguous tensors. ``inverse`` rotates backwards (the gradient).
    ``checked`` waits for the launch and raises InvalidArgumentError naming the first token whose
    position is outside the table (else such tokens become NaN); it synchronizes, so it is not
    for CUDA graphs.

    Torch tensors run on the current stream of q's device; under torch.compile and autograd the
    call becomes the ``shapejit::rope`` ops (the backward pass is the inverse rotation).
    Returns q's output, or (q's, k's) when k is given."""
    t = _views.torch_integration or _views.load_torch()
    if t is not None and isinstance(q, t.Tensor):
        if (out is None and k_out is None and stream is None and not inplace and not t.records(q, k)):
            # The common call in one extension call: None on a first call or other arguments.
            made = _ext.rope_new(q, k, cos, sin, positions, offset, style, rotary_dim, inverse,
                                 checked, None)
            if made is not None:
                return made
        return t.rope(q, k, cos, sin, positions, offset, style, rotary_dim, inplace, inverse, out,
                      k_out, checked, stream)
    s = _launch_stream(stream, q)
    views = {name: view_of(a, name, s) for name, a in
             (("q", q), ("k", k), ("cos", cos), ("sin", sin), ("positions", positions),
              ("out", out), ("k_out", k_out)) if a is not None}
    if not inplace and out is None:
        raise _output_required("out", q)
    if not inplace and k is not None and k_out is None:
        raise _output_required("k_out", q)
    if views["sin"].spec != views["cos"].spec:
        raise _mismatch("sin", views["sin"].spec, views["cos"].spec)

    def sp(name: str) -> Optional[TensorSpec]:
        v = views.get(name)
        return None if v is None else v.spec

    def ptr(name: str, fallback: int = 0) -> int:
        v = views.get(name)
        return fallback if v is None else v.ptr

    key = ("rope", sp("q"), sp("k"), sp("out"), sp("k_out"), sp("cos"), sp("positions"), style,
           rotary_dim, inplace, inverse, checked)
    plan = cached_plan(key, lambda: make_rope_plan(
        sp("q"), sp("k"), sp("out"), sp("k_out"), sp("cos"), sp("positions"), style, rotary_dim,
        inplace, inverse, checked))
    y = ptr("q") if inplace else ptr("out")
    ko = ptr("k") if inplace else ptr("k_out")
    plan._plan.launch(checked, ptr("q"), y, ptr("k"), ko, ptr("cos"), ptr("sin"), ptr("positions"),
                      int(offset), s)
    if inplace:
        return q if k is None else (q, k)
    return out if k is None else (out, k_out)


# ------------------------------------------------------------------------------------------------
# Hadamard


class HadamardPlan(_Plan):
    """A planned grouped-head Hadamard transform: the n = group * dhead values of each group of
    ``group`` consecutive heads of x ([..., heads, dhead]) times H_n and ``scale``.

    Immutable and reusable from several threads. ``x`` and ``out`` are the planned specs (``out``
    is x's for an in-place plan)."""

    __slots__ = ("x", "out", "inplace")

    def __init__(self, plan: Any, x: TensorSpec, out: TensorSpec, inplace: bool) -> None:
        self._plan = plan
        self.x, self.out, self.inplace = x, out, inplace

    def launch(self, x: ArrayLike, out: Optional[ArrayLike] = None, *, stream: StreamLike = None) -> Any:
        """Transforms ``x`` into ``out`` on ``stream`` (default as for :meth:`CopyPlan.launch`).
        An in-place plan takes no ``out``; otherwise torch tensors get a new contiguous output when
        ``out`` is None, other arrays must pass it. Arrays must match the planned specs (checked);
        ints are device pointers taken on trust. Returns the output."""
        if self.inplace:
            if out is not None:
                raise InvalidArgumentError("out: an in-place plan writes x itself; pass no out", 1)
            out = x
        elif out is None:
            t = _views.torch_integration
            if t is None or not isinstance(x, t.Tensor):
                raise _output_required("out", x)
            if self.out.strides != contiguous_strides(self.out.shape):
                raise InvalidArgumentError(
                    "out: the plan's output is strided; pass out (only contiguous outputs are allocated)", 1)
            out = t.empty_contiguous(x)
        s = _launch_stream(stream, x)
        self._plan.launch(_pointer(x, self.x, "x", s), _pointer(out, self.out, "out", s), s)
        return out


def _make_hadamard_plan(x: TensorSpec, out: Optional[TensorSpec], group: int, scale: Optional[float],
                        inplace: bool, check_pointers: bool = False) -> HadamardPlan:
    if inplace and out is not None and out != x:
        raise InvalidArgumentError("out: an in-place plan writes x itself; pass no out, or x's spec", 1)
    planned_out = x if inplace else (out or TensorSpec(x.shape, contiguous_strides(x.shape), x.code, x.elem_bytes))
    plan = _ext.plan_hadamard(x.desc(), None if inplace else planned_out.desc(), int(group),
                              None if scale is None else float(scale), bool(inplace), bool(check_pointers))
    return HadamardPlan(plan, x, planned_out, bool(inplace))


def plan_hadamard(x: ArrayLike, *, group: int = 1, scale: Optional[float] = None,
                  out: Optional[ArrayLike] = None, inplace: bool = False,
                  check_pointers: bool = False) -> HadamardPlan:
    """Plans the grouped-head fast Walsh-Hadamard transform of ``x``: [..., heads, dhead] (rank 2
    to 6), f16/bf16/f32/f64, any strides with dhead contiguous. Each group of ``group``
    consecutive heads (``group`` divides heads) is one row of n = group * dhead values (head-major)
    multiplied by H_n (Sylvester ordering for powers of two; m x 2^k with m in 12, 20, 28 as
    fast-hadamard-transform lays it out) and by ``scale`` (default 1/sqrt(n): orthonormal, its own
    inverse). n is a power of two from 2 to 32768 or 12, 20 or 28 times a power of two. A
    [B, H, S, D] layout is passed as its [B, S, H, D] view (``x.transpose(1, 2)``).

    ``out`` (a spec or array of x's shape and dtype, any strides with dhead contiguous) is where
    launches write; default: contiguous. ``inplace`` writes x itself. ``check_pointers`` asks the
    driver about both pointers before each launch. Raises InvalidArgumentError naming what is
    wrong (UnsupportedError for sizes past the limits)."""
    x_spec = spec_of(x, "x")
    out_spec = None if out is None else spec_of(out, "out")
    return _make_hadamard_plan(x_spec, out_spec, group, scale, inplace, check_pointers)


def hadamard(x: ArrayLike, *, group: int = 1, scale: Optional[float] = None,
             out: Optional[ArrayLike] = None, inplace: bool = False, stream: StreamLike = None) -> Any:
    """One-shot :func:`plan_hadamard` and launch, through the plan cache. Torch tensors run on the
    current stream of their device and get a new contiguous output unless ``out`` is given or
    ``inplace``; other CUDA arrays need ``out`` (or ``inplace``). Under torch.compile and autograd
    the call becomes the ``shapejit::hadamard`` op (functional only; its backward pass is the same
    transform, H being symmetric). Returns the output."""
    t = _views.torch_integration or _views.load_torch()
    if t is not None and isinstance(x, t.Tensor):
        return t.hadamard(x, group, scale, out, inplace, stream)
    return hadamard_eager(x, group, scale, out, inplace, stream)


def hadamard_eager(x: ArrayLike, group: int, scale: Optional[float], out: Optional[ArrayLike],
                   inplace: bool, stream: StreamLike) -> Any:
    """:func:`hadamard` launched now (no torch op)."""
    s = _launch_stream(stream, x)
    t = _views.torch_integration
    if t is not None and isinstance(x, t.Tensor):
        x_spec = t.view_of(x, "x").spec
        if out is None and not inplace:
            out = t.empty_contiguous(x)
    else:
        x_spec = view_of(x, "x", s).spec
        if out is None and not inplace:
            raise _output_required("out", x)
    out_spec = None if out is None or inplace else spec_of(out, "out")
    key = ("hadamard", x_spec, out_spec, int(group), scale, bool(inplace))
    plan = cached_plan(key, lambda: _make_hadamard_plan(x_spec, out_spec, group, scale, inplace))
    return plan.launch(x, None if inplace else out, stream=s)


Plan = Union[CopyPlan, RopePlan, HadamardPlan]
