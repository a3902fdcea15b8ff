"""shapejit: exact-fit CUDA kernels generated at run time, for permutes, strided copies and rope.

One-shot calls (``permute``, ``copy_``, ``rope``) plan through a cache and launch; plans
(``plan_copy``, ``plan_rope``) are made once and launched many times with the lowest overhead.
Torch tensors are read directly and run on the current stream of their device; objects with
``__cuda_array_interface__`` or ``__dlpack__`` (CuPy, JAX) are accepted too, with their outputs
passed in. The CUDA driver and NVRTC are loaded on first use, so importing shapejit, planning and
describing plans work on a machine without a GPU.
"""

from ._errors import (
    CacheIOError,
    CompileError,
    DriverError,
    DriverUnavailableError,
    Error,
    InternalError,
    InvalidArgumentError,
    NvrtcUnavailableError,
    OfflineMissError,
    UnsupportedError,
    CLASSES_BY_STATUS as _CLASSES_BY_STATUS,
)
from . import _shapejit

_shapejit._register_errors(list(_CLASSES_BY_STATUS))

from ._views import DTYPE_NAMES, TensorSpec, spec  # noqa: E402
from ._ops import (  # noqa: E402
    CopyPlan,
    HadamardPlan,
    RopePlan,
    clear_plan_cache,
    copy_,
    hadamard,
    permute,
    plan_copy,
    plan_hadamard,
    plan_rope,
    rope,
)
from ._tables import (  # noqa: E402
    hadamard_matrix,
    hadamard_size_supported,
    SUPPORTED_ROPE_TYPES,
    rope_config,
    rope_axes_tables,
    rope_frequencies,
    rope_tables,
    rope_tables_from_config,
)
from ._runtime import (  # noqa: E402
    cache_clear,
    cache_dir,
    cache_prune,
    cache_stats,
    cache_verify,
    counters,
    deployment_cache_dirs,
    describe_manifest_line,
    doctor,
    is_offline,
    offline_mode,
    record_file,
    recording,
    set_cache_dir,
    set_offline,
    set_record_file,
    version,
)
from . import _views  # noqa: E402

__version__ = version()

# torch already imported: register the shapejit ops now (else on the first call with a tensor).
_views.load_torch()

__all__ = [
    "CacheIOError", "CompileError", "DriverError", "DriverUnavailableError", "Error",
    "InternalError", "InvalidArgumentError", "NvrtcUnavailableError", "OfflineMissError",
    "UnsupportedError",
    "DTYPE_NAMES", "TensorSpec", "spec",
    "CopyPlan", "RopePlan", "plan_copy", "plan_rope", "permute", "copy_", "rope",
    "HadamardPlan", "plan_hadamard", "hadamard", "hadamard_matrix", "hadamard_size_supported",
    "clear_plan_cache",
    "SUPPORTED_ROPE_TYPES", "rope_axes_tables", "rope_config", "rope_frequencies", "rope_tables",
    "rope_tables_from_config",
    "cache_clear", "cache_dir", "cache_prune", "cache_stats", "cache_verify", "counters",
    "deployment_cache_dirs", "describe_manifest_line", "doctor", "is_offline", "offline_mode",
    "record_file", "recording", "set_cache_dir", "set_offline", "set_record_file", "version",
    "enable_torch",
]


def enable_torch() -> bool:
    """Imports torch and registers the ``shapejit::`` torch.library ops now (they are registered
    by themselves when torch was imported first, or at the first call with a tensor). Call it
    before ``torch.compile`` traces a shapejit call if shapejit was imported before torch.
    Returns False when torch is not installed."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return _views.load_torch() is not None
