"""Tensor interop: what shapejit reads from the arrays it is given.

A *spec* (:class:`TensorSpec`) is a view without memory: shape, element strides, dtype. A *view*
(:class:`View`) is a spec plus a device pointer and the device it lives on. Views come from torch
tensors (read directly; see ``_torch.py``), from any object with ``__cuda_array_interface__``
(CuPy, Numba, ...) or with ``__dlpack__`` (CuPy, JAX, ...), and specs from :class:`TensorSpec`
values, so plans can be made and printed on a machine without a GPU.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any, NamedTuple, Optional, Sequence

from . import _shapejit as _ext
from ._errors import InvalidArgumentError

#: Dtype names by code (the C API's sj_dtype order): u8 i8 u16 i16 u32 i32 u64 i64 f16 bf16 f32 f64.
DTYPE_NAMES: tuple[str, ...] = tuple(_ext.dtype_names())
DTYPE_CODES: dict[str, int] = {name: code for code, name in enumerate(DTYPE_NAMES)}
DTYPE_BYTES: tuple[int, ...] = tuple(_ext.dtype_size(code) for code in range(len(DTYPE_NAMES)))
U8 = DTYPE_CODES["u8"]

# Other spellings of the dtypes: numpy's and torch's names.
_ALIASES = {
    "uint8": "u8", "int8": "i8", "uint16": "u16", "int16": "i16", "uint32": "u32", "int32": "i32",
    "uint64": "u64", "int64": "i64", "float16": "f16", "half": "f16", "bfloat16": "bf16",
    "float32": "f32", "float": "f32", "float64": "f64", "double": "f64",
}
# Array-interface kinds with no shapejit dtype that still copy as opaque elements.
_OPAQUE_KINDS = ("b", "c", "V", "m", "M")

#: CUDA device types in DLPack (kDLCUDA, kDLCUDAManaged).
_DLPACK_CUDA = (2, 13)


def dtype_code(dtype: Any) -> int:
    """The shapejit dtype code of ``dtype``: a shapejit name (``"f16"``), a numpy name or dtype
    (``"float16"``, ``numpy.float16``) or a torch dtype. Raises InvalidArgumentError otherwise."""
    if isinstance(dtype, int) and not isinstance(dtype, bool) and 0 <= dtype < len(DTYPE_NAMES):
        return dtype
    if isinstance(dtype, str):
        name = dtype
    else:
        name = getattr(dtype, "name", None) or getattr(dtype, "__name__", None) or str(dtype)
    name = str(name).removeprefix("torch.")
    code = DTYPE_CODES.get(name)
    if code is None:
        code = DTYPE_CODES.get(_ALIASES.get(name, ""))
    if code is None:
        raise InvalidArgumentError(
            f"dtype {dtype!r} is not a shapejit dtype: use one of {', '.join(DTYPE_NAMES)}", 1)
    return code


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides, in elements, of ``shape``."""
    strides = []
    step = 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(int(extent), 1)
    return tuple(reversed(strides))


class TensorSpec(NamedTuple):
    """A strided view without memory: what a plan is made for.

    ``strides`` are in elements (signed; ``None`` means row-major contiguous). ``elem_bytes``
    overrides the dtype's size for opaque elements (copies only, 1 to 64 bytes).
    Build one with :func:`spec`.
    """

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    code: int
    elem_bytes: int = 0

    @property
    def dtype(self) -> str:
        """The shapejit dtype name (``"u8"`` for opaque elements)."""
        return DTYPE_NAMES[self.code]

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.elem_bytes or DTYPE_BYTES[self.code]

    def desc(self) -> tuple:
        """The extension's descriptor tuple: (shape, strides, dtype code, element bytes)."""
        return (self.shape, self.strides, self.code, self.elem_bytes)


def spec(shape: Sequence[int], dtype: Any = "f32", strides: Optional[Sequence[int]] = None,
         *, elem_bytes: int = 0) -> TensorSpec:
    """A :class:`TensorSpec` of ``shape`` and ``dtype`` (any spelling :func:`dtype_code` takes),
    with ``strides`` in elements (default: row-major contiguous)."""
    shape_t = tuple(int(e) for e in shape)
    if strides is None:
        strides_t = contiguous_strides(shape_t)
    else:
        strides_t = tuple(int(s) for s in strides)
        if len(strides_t) != len(shape_t):
            raise InvalidArgumentError(
                f"strides {strides_t} do not match shape {shape_t}: one stride per dimension", 1)
    return TensorSpec(shape_t, strides_t, dtype_code(dtype), int(elem_bytes))


class View(NamedTuple):
    """A spec plus where it lives: the device pointer and the CUDA device index (-1: unknown)."""

    ptr: int
    spec: TensorSpec
    device: int


# ------------------------------------------------------------------------------------------------
# torch, loaded lazily: the integration module is imported once torch itself has been.

torch_integration: Optional[ModuleType] = None


def load_torch() -> Optional[ModuleType]:
    """The torch integration (``shapejit._torch``) when torch has been imported, else None."""
    global torch_integration
    if torch_integration is None and "torch" in sys.modules:
        from . import _torch

        torch_integration = _torch
    return torch_integration


# ------------------------------------------------------------------------------------------------
# Streams


def stream_handle(stream: Any) -> int:
    """A CUstream handle from an int, a torch.cuda.Stream (``cuda_stream``) or a CuPy stream
    (``ptr``)."""
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr"):
        handle = getattr(stream, attr, None)
        if isinstance(handle, int):
            return handle
    raise InvalidArgumentError(
        f"stream {stream!r} is not a CUDA stream: pass an int handle, a torch.cuda.Stream or a "
        "CuPy stream", 1)


def default_stream(obj: Any) -> int:
    """The stream a launch on ``obj`` uses when none is given: CuPy's current stream for CuPy
    arrays, else the legacy default stream (0)."""
    if type(obj).__module__.startswith("cupy"):
        cupy = sys.modules.get("cupy")
        if cupy is not None:
            return int(cupy.cuda.get_current_stream().ptr)
    return 0


# ------------------------------------------------------------------------------------------------
# Reading arrays


def _from_array_interface(obj: Any, cai: dict, name: str) -> View:
    typestr: str = cai["typestr"]
    kind, size = typestr[1], int(typestr[2:])
    code = DTYPE_CODES.get(f"{kind}{size * 8}") if kind in "uif" else None
    if code is not None:
        elem_bytes = 0
    elif kind in _OPAQUE_KINDS:
        code, elem_bytes = U8, size
    else:
        raise InvalidArgumentError(f"{name}: array-interface type {typestr!r} is not supported", 1)
    itemsize = elem_bytes or DTYPE_BYTES[code]
    shape = tuple(int(e) for e in cai["shape"])
    byte_strides = cai.get("strides")
    if byte_strides is None:
        strides = contiguous_strides(shape)
    else:
        if any(s % itemsize for s in byte_strides):
            raise InvalidArgumentError(
                f"{name}: byte strides {tuple(byte_strides)} are not multiples of the element size "
                f"{itemsize}", 1)
        strides = tuple(int(s) // itemsize for s in byte_strides)
    return View(int(cai["data"][0]), TensorSpec(shape, strides, code, elem_bytes), -1)


def _not_cuda(name: str, device_type: int) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"{name} is not in CUDA memory (DLPack device type {device_type}): shapejit runs on CUDA "
        "devices", 1)


def _from_dlpack(obj: Any, stream: int, name: str) -> View:
    device = getattr(obj, "__dlpack_device__", None)
    if device is not None and device()[0] not in _DLPACK_CUDA:
        raise _not_cuda(name, device()[0])
    try:  # the producer orders its pending work before our stream (1: the legacy default stream)
        capsule = obj.__dlpack__(stream=stream if stream != 0 else 1)
    except TypeError:
        capsule = obj.__dlpack__()
    ptr, shape, strides, code, elem_bytes, device_type, device_id = _ext.dlpack_view(capsule)
    if device_type not in _DLPACK_CUDA:
        raise _not_cuda(name, device_type)
    shape = tuple(shape)
    strides = contiguous_strides(shape) if strides is None else tuple(strides)
    if code < 0:
        code, opaque = U8, elem_bytes
    else:
        opaque = 0
    return View(ptr, TensorSpec(shape, strides, code, opaque), device_id)


def view_of(obj: Any, name: str, stream: int = 0) -> View:
    """Reads ``obj`` (a torch tensor, an object with ``__cuda_array_interface__`` or
    ``__dlpack__``). ``stream`` is the stream the caller will launch on, passed to ``__dlpack__``
    so that the producer orders its work before it. Raises InvalidArgumentError for anything else,
    host arrays included."""
    t = torch_integration or load_torch()
    if t is not None and isinstance(obj, t.Tensor):
        return t.view_of(obj, name)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_array_interface(obj, cai, name)
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj, stream, name)
    raise InvalidArgumentError(
        f"{name} ({type(obj).__name__}) is not a CUDA array: pass a torch tensor or an object "
        "with __cuda_array_interface__ or __dlpack__", 1)


def spec_of(obj: Any, name: str) -> TensorSpec:
    """The spec of ``obj``: a :class:`TensorSpec` as it is, else what :func:`view_of` reads."""
    if isinstance(obj, TensorSpec):
        return obj
    return view_of(obj, name).spec


def broadcast(s: TensorSpec, shape: tuple[int, ...], name: str) -> TensorSpec:
    """``s`` broadcast to ``shape`` with numpy's rules (stride 0 along the expanded dimensions)."""
    if s.shape == shape:
        return s
    extra = len(shape) - len(s.shape)
    if extra < 0:
        raise InvalidArgumentError(f"{name} of shape {s.shape} cannot broadcast to {shape}", 1)
    src_shape = (1,) * extra + s.shape
    src_strides = (0,) * extra + s.strides
    strides = []
    for have, want, stride in zip(src_shape, shape, src_strides):
        if have == want:
            strides.append(stride)
        elif have == 1:
            strides.append(0)
        else:
            raise InvalidArgumentError(f"{name} of shape {s.shape} cannot broadcast to {shape}", 1)
    return TensorSpec(shape, tuple(strides), s.code, s.elem_bytes)
