"""PyTorch integration, imported only once torch has been.

Torch tensors are read directly (data_ptr, shape, stride, dtype, device) and launched on the
current torch stream of their device, so a tensor on cuda:1 runs there whatever the current
device. Eager calls plan through the shared plan cache and launch at once. Under torch.compile,
and when autograd must record the call, the public functions call the ops registered here with
torch.library.custom_op in the namespace ``shapejit`` instead; their fake implementations let
``torch.compile(fullgraph=True)`` trace them without a graph break.

A launch allocates nothing but its outputs (from torch's caching allocator), never synchronizes
and reads nothing back unless ``checked=True``, so it can be captured in a CUDA graph; plan (warm
up) before capturing. (No ``from __future__ import annotations`` here: torch.library reads the
op signatures from the annotations.)
"""

import os
import warnings
from typing import Any, List, Optional, Sequence, Tuple

import torch

from . import _ops
from . import _shapejit as _ext
from ._errors import InvalidArgumentError
from ._views import DTYPE_CODES, U8, TensorSpec, View, broadcast, stream_handle

Tensor = torch.Tensor

# ------------------------------------------------------------------------------------------------
# Reading tensors


def _dtype_table() -> dict:
    """torch dtype -> (shapejit dtype code, opaque element bytes or 0)."""
    table = {}
    names = (("uint8", "u8"), ("int8", "i8"), ("uint16", "u16"), ("int16", "i16"),
             ("uint32", "u32"), ("int32", "i32"), ("uint64", "u64"), ("int64", "i64"),
             ("float16", "f16"), ("bfloat16", "bf16"), ("float32", "f32"), ("float64", "f64"))
    for torch_name, name in names:
        dt = getattr(torch, torch_name, None)
        if dt is not None:
            table[dt] = (DTYPE_CODES[name], 0)
    # Dtypes with no shapejit name copy as opaque elements of their size.
    for torch_name in ("bool", "complex32", "complex64", "complex128", "float8_e4m3fn",
                       "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"):
        dt = getattr(torch, torch_name, None)
        if dt is not None and dt not in table:
            table[dt] = (U8, dt.itemsize)
    return table


_DTYPES = _dtype_table()
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or torch._dynamo.is_compiling
_contiguous = torch.contiguous_format


def _register_fast_path() -> bool:
    """Lets the extension read plain tensors through libtorch's C functions
    (python/src/torch_tensors.cpp); it checks its reading of a strided probe against ours."""
    probe = torch.empty(64, dtype=torch.float16)[3:].as_strided((2, 3, 4), (1, 8, 2))
    with warnings.catch_warnings():  # empty complex32 tensors warn that the dtype is experimental
        warnings.simplefilter("ignore")
        dtype_probes = [(torch.empty(0, dtype=dt), code, eb) for dt, (code, eb) in _DTYPES.items()]
    return _ext.torch_register(
        os.path.join(os.path.dirname(torch.__file__), "lib"), [torch.Tensor, torch.nn.Parameter],
        dtype_probes, probe, (probe.data_ptr(), tuple(probe.shape), tuple(probe.stride())))


#: Whether plain CUDA tensors take the C++ fast path (else every call takes the Python one).
FAST_PATH = _register_fast_path()
#: Whether the fast path also allocates one-shot outputs in C++ (else torch allocates them).
ALLOCATES = _ext.torch_allocation(True)


def _not_cuda(name: str, t: Tensor) -> InvalidArgumentError:
    return InvalidArgumentError(f"{name} is on {t.device}: shapejit runs on CUDA tensors", 1)


def _dtype(t: Tensor, name: str) -> Tuple[int, int]:
    d = _DTYPES.get(t.dtype)
    if d is None:
        raise InvalidArgumentError(f"{name}: dtype {t.dtype} is not supported", 1)
    return d


def current_stream(t: Tensor) -> int:
    """The handle of the current torch stream of t's device."""
    dev = t.get_device()
    if dev < 0:
        raise _not_cuda("the tensor", t)
    if _raw_stream is not None:
        return _raw_stream(dev)
    return torch.cuda.current_stream(dev).cuda_stream


def view_of(t: Tensor, name: str) -> View:
    """The view of a CUDA tensor; raises InvalidArgumentError for other devices and dtypes."""
    dev = t.get_device()
    if dev < 0:
        raise _not_cuda(name, t)
    code, elem_bytes = _dtype(t, name)
    return View(t.data_ptr(), TensorSpec(tuple(t.shape), tuple(t.stride()), code, elem_bytes), dev)


def pointer(t: Tensor, planned: TensorSpec, name: str) -> int:
    """t's data pointer after checking its shape, strides, dtype and device against a plan."""
    if (t.shape != planned.shape or t.stride() != planned.strides
            or _DTYPES.get(t.dtype) != (planned.code, planned.elem_bytes) or t.get_device() < 0):
        if t.get_device() < 0:
            raise _not_cuda(name, t)
        raise _ops._mismatch(name, view_of(t, name).spec, planned)
    return t.data_ptr()


def empty_contiguous(t: Tensor) -> Tensor:
    """A new contiguous tensor shaped like t."""
    return torch.empty_like(t, memory_format=_contiguous)


def _stream(stream: Any, dev: int) -> int:
    if stream is not None:
        return stream_handle(stream)
    return _raw_stream(dev) if _raw_stream is not None else torch.cuda.current_stream(dev).cuda_stream


def _same_device(dev: int, tensors: Sequence[Tuple[str, Optional[Tensor]]]) -> None:
    for name, t in tensors:
        if t is not None and t.get_device() != dev:
            raise InvalidArgumentError(
                f"{name} is on {t.device}, the launch on cuda:{dev}: every tensor of a call must be "
                "on one device", 1)


def _graph_only_arguments(stream: Any, what: str) -> None:
    if stream is not None:
        raise InvalidArgumentError(
            f"stream= is not supported {what}: use `with torch.cuda.stream(s):` instead", 1)


def records(*tensors: Optional[Tensor]) -> bool:
    """Whether a call must go through the torch.library ops: while compiling, or when autograd
    records it."""
    if _is_compiling():
        return True
    for t in tensors:
        if t is not None and getattr(t, "requires_grad", False):
            return torch.is_grad_enabled()
    return False


# ------------------------------------------------------------------------------------------------
# Eager implementations (the ops' kernels too)


def _permute_eager(x: Tensor, axes: Tuple[int, ...], out: Optional[Tensor], stream: Any) -> Tensor:
    s = None if stream is None else _ops.stream_handle(stream)
    if out is None:
        y = _ext.permute_new(x, axes, s)
        if y is not None:
            return y
        out = x.new_empty([x.shape[a] for a in axes])
    elif _ext.copy_cached(out, x, axes, s, None):
        return out
    # A new layout, or arguments the fast path does not take: check and plan (cached here too, for
    # when the fast path is off).
    dev = x.get_device()
    if dev < 0:
        raise _not_cuda("x", x)
    key = ("torch.permute", x.shape, x.stride(), x.dtype, axes, out.shape, out.stride(), out.dtype,
           out.get_device(), dev)

    def make() -> Any:
        _same_device(dev, (("out", out),))
        if out.dtype != x.dtype:
            raise InvalidArgumentError(f"out: dtype {out.dtype} differs from x's {x.dtype}", 1)
        return _ops._make_copy_plan(view_of(out, "out").spec, _ops.permuted(view_of(x, "x").spec, axes))
    _plan_and_copy(out, x, axes, s, key, make, stream, dev)
    return out


def _copy_eager(dst: Tensor, src: Tensor, stream: Any) -> Tensor:
    s = _ops._stream_or_none(stream)
    if _ext.copy_cached(dst, src, None, s, None):
        return dst
    dev = dst.get_device()
    if dev < 0:
        raise _not_cuda("dst", dst)
    key = ("torch.copy", dst.shape, dst.stride(), dst.dtype, src.shape, src.stride(), src.dtype,
           src.get_device(), dev)

    def make() -> Any:
        _same_device(dev, (("src", src),))
        if src.dtype != dst.dtype:
            raise InvalidArgumentError(
                f"src: dtype {src.dtype} differs from dst's {dst.dtype} (copy_ does not convert)", 1)
        d = view_of(dst, "dst").spec
        return _ops._make_copy_plan(d, broadcast(view_of(src, "src").spec, d.shape, "src"))
    _plan_and_copy(dst, src, None, s, key, make, stream, dev)
    return dst


def _plan_and_copy(dst: Tensor, src: Tensor, axes: Optional[Tuple[int, ...]], s: Optional[int],
                   key: tuple, make: Any, stream: Any, dev: int) -> None:
    """The miss path of a one-shot copy or permute: the plan cached under ``key`` (made by
    ``make``), stored for the fast path and launched there, or here when the fast path is off."""
    plan = _ops.cached_plan(key, make)
    if not _ext.copy_cached(dst, src, axes, s, plan._plan):
        plan._plan.launch(dst.data_ptr(), src.data_ptr(), _stream(stream, dev))


def _rope_eager(q: Tensor, k: Optional[Tensor], cos: Tensor, sin: Tensor,
                positions: Optional[Tensor], offset: int, style: str, rotary_dim: Optional[int],
                inplace: bool, inverse: bool, out: Optional[Tensor], k_out: Optional[Tensor],
                checked: bool, stream: Any) -> Any:
    s = _ops._stream_or_none(stream)
    offset = int(offset)
    rd = int(rotary_dim or 0)
    if inplace:
        if out is not None or k_out is not None:
            raise InvalidArgumentError("out, k_out: an in-place rope writes q and k; pass neither", 1)
        y, ko = q, k
    elif out is None and k_out is None:
        made = _ext.rope_new(q, k, cos, sin, positions, offset, style, rd, inverse, checked, s)
        if made is not None:
            return made
        y = torch.empty_like(q, memory_format=_contiguous)
        ko = None if k is None else torch.empty_like(k, memory_format=_contiguous)
    else:
        if k is None and k_out is not None:
            raise InvalidArgumentError("k_out: given without k", 1)
        y = out if out is not None else torch.empty_like(q, memory_format=_contiguous)
        ko = None if k is None else (k_out if k_out is not None else torch.empty_like(k, memory_format=_contiguous))
    args = (q, y, k, ko, cos, sin, positions, offset, style, rd, inplace, inverse, checked, s)
    if not _ext.rope_cached(*args, None):
        key = ("torch.rope", q.get_device(), style, rd, inplace, inverse, checked) + tuple(
            None if t is None else (t.shape, t.stride(), t.dtype, t.get_device())
            for t in (q, y, k, ko, cos, sin, positions))
        plan = _ops.cached_plan(key, lambda: _rope_plan(q, y, k, ko, cos, sin, positions, style, rd,
                                                        inplace, inverse, checked))
        if not _ext.rope_cached(*args, plan._plan):
            plan._plan.launch(
                checked, q.data_ptr(), y.data_ptr(), 0 if k is None else k.data_ptr(),
                0 if k is None else ko.data_ptr(), cos.data_ptr(), sin.data_ptr(),
                0 if positions is None else positions.data_ptr(), offset, _stream(stream, q.get_device()))
    return y if k is None else (y, ko)


def _rope_plan(q: Tensor, y: Tensor, k: Optional[Tensor], ko: Optional[Tensor], cos: Tensor,
               sin: Tensor, positions: Optional[Tensor], style: str, rotary_dim: int, inplace: bool,
               inverse: bool, checked: bool) -> Any:
    """Checks a one-shot rope's tensors (explaining what the fast path did not take) and plans it."""
    dev = q.get_device()
    if dev < 0:
        raise _not_cuda("q", q)
    _same_device(dev, (("out", y), ("k", k), ("k_out", ko), ("cos", cos), ("sin", sin),
                       ("positions", positions)))
    table = view_of(cos, "cos").spec
    if view_of(sin, "sin").spec != table:
        raise _ops._mismatch("sin", view_of(sin, "sin").spec, table)

    def spec(t: Optional[Tensor], name: str) -> Optional[TensorSpec]:
        return None if t is None else view_of(t, name).spec
    return _ops.make_rope_plan(
        spec(q, "q"), spec(k, "k"), None if inplace else spec(y, "out"),
        None if inplace else spec(ko, "k_out"), table, spec(positions, "positions"),
        style, rotary_dim, inplace, inverse, checked)


# ------------------------------------------------------------------------------------------------
# torch.library ops


def _dhead_contiguous(t: Tensor) -> Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


@torch.library.custom_op("shapejit::permute", mutates_args=())
def permute_op(x: Tensor, dims: List[int]) -> Tensor:
    """x.permute(dims).contiguous()"""
    return _permute_eager(x, tuple(dims), None, None)


@permute_op.register_fake
def _permute_fake(x: Tensor, dims: List[int]) -> Tensor:
    return x.new_empty([x.shape[d] for d in dims])


def _permute_setup(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
    ctx.dims = list(inputs[1])


def _permute_backward(ctx: Any, grad: Tensor) -> Tuple[Optional[Tensor], None]:
    inverse = [0] * len(ctx.dims)
    for i, d in enumerate(ctx.dims):
        inverse[d] = i
    return torch.ops.shapejit.permute(grad, inverse), None


permute_op.register_autograd(_permute_backward, setup_context=_permute_setup)


@torch.library.custom_op("shapejit::copy_", mutates_args=("dst",))
def copy_op(dst: Tensor, src: Tensor) -> None:
    """dst.copy_(src) for tensors of one dtype (src broadcasts)."""
    _copy_eager(dst, src, None)


@copy_op.register_fake
def _copy_fake(dst: Tensor, src: Tensor) -> None:
    return None


@torch.library.custom_op("shapejit::rope", mutates_args=())
def rope_op(q: Tensor, cos: Tensor, sin: Tensor, positions: Optional[Tensor], offset: int,
            style: str, rotary_dim: int, inverse: bool, checked: bool) -> Tensor:
    """Rope of q into a new contiguous tensor."""
    return _rope_eager(q, None, cos, sin, positions, offset, style, rotary_dim, False, inverse,
                       None, None, checked, None)


@rope_op.register_fake
def _rope_fake(q: Tensor, cos: Tensor, sin: Tensor, positions: Optional[Tensor], offset: int,
               style: str, rotary_dim: int, inverse: bool, checked: bool) -> Tensor:
    return torch.empty_like(q, memory_format=_contiguous)


@torch.library.custom_op("shapejit::rope_qk", mutates_args=())
def rope_qk_op(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, positions: Optional[Tensor],
               offset: int, style: str, rotary_dim: int, inverse: bool,
               checked: bool) -> Tuple[Tensor, Tensor]:
    """Rope of q and k, in one launch, into new contiguous tensors."""
    return _rope_eager(q, k, cos, sin, positions, offset, style, rotary_dim, False, inverse,
                       None, None, checked, None)


@rope_qk_op.register_fake
def _rope_qk_fake(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, positions: Optional[Tensor],
                  offset: int, style: str, rotary_dim: int, inverse: bool,
                  checked: bool) -> Tuple[Tensor, Tensor]:
    return torch.empty_like(q, memory_format=_contiguous), torch.empty_like(k, memory_format=_contiguous)


def _rope_setup(ctx: Any, inputs: Tuple[Any, ...], output: Any) -> None:
    cos, sin, positions, offset, style, rotary_dim, inverse = inputs[-8:-1]
    ctx.save_for_backward(cos, sin, positions)
    ctx.args = (offset, style, rotary_dim, inverse)
    ctx.with_k = len(inputs) == 10


def _rope_backward(ctx: Any, *grads: Tensor) -> Tuple[Optional[Tensor], ...]:
    """The gradient of a rotation is the inverse rotation of the incoming gradient."""
    cos, sin, positions = ctx.saved_tensors
    offset, style, rotary_dim, inverse = ctx.args
    rest = (None,) * 7
    if ctx.with_k:
        gq, gk = torch.ops.shapejit.rope_qk(_dhead_contiguous(grads[0]), _dhead_contiguous(grads[1]),
                                            cos, sin, positions, offset, style, rotary_dim,
                                            not inverse, False)
        return (gq, gk) + rest + (None,)
    gq = torch.ops.shapejit.rope(_dhead_contiguous(grads[0]), cos, sin, positions, offset, style,
                                 rotary_dim, not inverse, False)
    return (gq,) + rest + (None,)


rope_op.register_autograd(_rope_backward, setup_context=_rope_setup)
rope_qk_op.register_autograd(_rope_backward, setup_context=_rope_setup)


@torch.library.custom_op("shapejit::rope_", mutates_args=("q", "k"))
def rope_inplace_op(q: Tensor, k: Optional[Tensor], cos: Tensor, sin: Tensor,
                    positions: Optional[Tensor], offset: int, style: str, rotary_dim: int,
                    inverse: bool, checked: bool) -> None:
    """Rope of q (and k) in place."""
    _rope_eager(q, k, cos, sin, positions, offset, style, rotary_dim, True, inverse, None, None,
                checked, None)


@rope_inplace_op.register_fake
def _rope_inplace_fake(q: Tensor, k: Optional[Tensor], cos: Tensor, sin: Tensor,
                       positions: Optional[Tensor], offset: int, style: str, rotary_dim: int,
                       inverse: bool, checked: bool) -> None:
    return None


@torch.library.custom_op("shapejit::rope_out", mutates_args=("out", "k_out"))
def rope_out_op(q: Tensor, k: Optional[Tensor], out: Tensor, k_out: Optional[Tensor], cos: Tensor,
                sin: Tensor, positions: Optional[Tensor], offset: int, style: str, rotary_dim: int,
                inverse: bool, checked: bool) -> None:
    """Rope of q (and k) into given outputs."""
    _rope_eager(q, k, cos, sin, positions, offset, style, rotary_dim, False, inverse, out, k_out,
                checked, None)


@rope_out_op.register_fake
def _rope_out_fake(q: Tensor, k: Optional[Tensor], out: Tensor, k_out: Optional[Tensor],
                   cos: Tensor, sin: Tensor, positions: Optional[Tensor], offset: int, style: str,
                   rotary_dim: int, inverse: bool, checked: bool) -> None:
    return None


@torch.library.custom_op("shapejit::hadamard", mutates_args=())
def hadamard_op(x: Tensor, group: int, scale: Optional[float]) -> Tensor:
    """The grouped-head Hadamard transform of x into a new contiguous tensor."""
    return _ops.hadamard_eager(_dhead_contiguous(x), group, scale, None, False, None)


@hadamard_op.register_fake
def _hadamard_fake(x: Tensor, group: int, scale: Optional[float]) -> Tensor:
    return torch.empty_like(x, memory_format=_contiguous)


def _hadamard_setup(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
    ctx.group, ctx.scale = inputs[1], inputs[2]


def _hadamard_backward(ctx: Any, grad: Tensor) -> Tuple[Optional[Tensor], None, None]:
    # y = scale * H x with H symmetric: the gradient is the same transform of grad.
    return torch.ops.shapejit.hadamard(grad, ctx.group, ctx.scale), None, None


hadamard_op.register_autograd(_hadamard_backward, setup_context=_hadamard_setup)


# ------------------------------------------------------------------------------------------------
# The public calls for torch tensors (shapejit.permute, copy_, rope, hadamard route here)


_checked_axes: dict = {}


def _axes(dims: Sequence[int], rank: int) -> Tuple[int, ...]:
    """permutation(dims, rank), remembered for hashable dims (checking costs more than a lookup)."""
    try:
        return _checked_axes[(dims, rank)]
    except (KeyError, TypeError):
        pass
    axes = _ops.permutation(dims, rank)
    if len(_checked_axes) < 4096:
        try:
            _checked_axes[(dims, rank)] = axes
        except TypeError:
            pass
    return axes


def permute(x: Tensor, dims: Sequence[int], out: Optional[Tensor] = None, stream: Any = None) -> Tensor:
    axes = _axes(dims, x.dim())
    if _is_compiling() or (x.requires_grad and torch.is_grad_enabled()):
        _graph_only_arguments(stream, "under torch.compile or autograd")
        if out is not None:
            raise InvalidArgumentError("out= is not supported under torch.compile or autograd", 1)
        return torch.ops.shapejit.permute(x, list(axes))
    return _permute_eager(x, axes, out, stream)


def copy_(dst: Tensor, src: Tensor, stream: Any = None) -> Tensor:
    if _is_compiling():
        _graph_only_arguments(stream, "under torch.compile")
        torch.ops.shapejit.copy_(dst, src)
        return dst
    if torch.is_grad_enabled() and (src.requires_grad or dst.requires_grad):
        raise InvalidArgumentError(
            "copy_ does not record autograd: call it under torch.no_grad() or on detached tensors", 1)
    return _copy_eager(dst, src, stream)


def rope(q: Tensor, k: Optional[Tensor], cos: Tensor, sin: Tensor, positions: Optional[Tensor],
         offset: int, style: str, rotary_dim: Optional[int], inplace: bool, inverse: bool,
         out: Optional[Tensor], k_out: Optional[Tensor], checked: bool, stream: Any) -> Any:
    if not records(q, k):
        return _rope_eager(q, k, cos, sin, positions, offset, style, rotary_dim, inplace, inverse,
                           out, k_out, checked, stream)
    _graph_only_arguments(stream, "under torch.compile or autograd")
    rd = int(rotary_dim or 0)
    grad = torch.is_grad_enabled() and (q.requires_grad or (k is not None and k.requires_grad))
    if grad and (inplace or out is not None or k_out is not None):
        raise InvalidArgumentError(
            "autograd records only the functional rope: drop inplace, out and k_out, or call it "
            "under torch.no_grad()", 1)
    if inplace:
        if out is not None or k_out is not None:
            raise InvalidArgumentError("out, k_out: an in-place rope writes q and k; pass neither", 1)
        torch.ops.shapejit.rope_(q, k, cos, sin, positions, offset, style, rd, inverse, checked)
        return q if k is None else (q, k)
    if out is not None or k_out is not None:
        if k is None and k_out is not None:
            raise InvalidArgumentError("k_out: given without k", 1)
        out = out if out is not None else torch.empty_like(q, memory_format=_contiguous)
        if k is not None and k_out is None:
            k_out = torch.empty_like(k, memory_format=_contiguous)
        torch.ops.shapejit.rope_out(q, k, out, k_out, cos, sin, positions, offset, style, rd,
                                    inverse, checked)
        return out if k is None else (out, k_out)
    if k is None:
        return torch.ops.shapejit.rope(q, cos, sin, positions, offset, style, rd, inverse, checked)
    q_out, k_out = torch.ops.shapejit.rope_qk(q, k, cos, sin, positions, offset, style, rd,
                                              inverse, checked)
    return q_out, k_out


def hadamard(x: Tensor, group: int, scale: Optional[float], out: Optional[Tensor], inplace: bool,
             stream: Any) -> Tensor:
    if not records(x):
        return _ops.hadamard_eager(x, group, scale, out, inplace, stream)
    _graph_only_arguments(stream, "under torch.compile or autograd")
    if out is not None or inplace:
        raise InvalidArgumentError(
            "out= and inplace are not supported under torch.compile or autograd: use the functional "
            "form, or call it under torch.no_grad()", 1)
    return torch.ops.shapejit.hadamard(x, int(group), None if scale is None else float(scale))
