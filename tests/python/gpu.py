"""What the GPU tests need, and the skip markers that name what is missing."""

import importlib

import pytest


def _optional(name):
    try:
        return importlib.import_module(name)
    except Exception:  # not installed, or broken without a GPU
        return None


torch = _optional("torch")
cupy = _optional("cupy")
jax = _optional("jax")

HAVE_TORCH_GPU = torch is not None and torch.cuda.is_available()
GPU_COUNT = torch.cuda.device_count() if HAVE_TORCH_GPU else 0

if torch is None:
    requires_torch_gpu = pytest.mark.skipif(True, reason="needs torch (not installed)")
else:
    requires_torch_gpu = pytest.mark.skipif(not HAVE_TORCH_GPU, reason="needs a CUDA GPU (torch sees none)")

requires_two_gpus = pytest.mark.skipif(GPU_COUNT < 2, reason="needs two CUDA GPUs")


def _cupy_gpu():
    try:
        return cupy is not None and cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def _jax_gpu():
    try:
        return jax is not None and any(d.platform == "gpu" for d in jax.devices())
    except Exception:
        return False


requires_cupy_gpu = pytest.mark.skipif(not _cupy_gpu(), reason="needs CuPy with a CUDA GPU")
requires_jax_gpu = pytest.mark.skipif(not _jax_gpu(), reason="needs JAX with a CUDA GPU")
