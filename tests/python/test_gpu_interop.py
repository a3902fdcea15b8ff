"""GPU tests with CuPy and JAX arrays (``__cuda_array_interface__`` and ``__dlpack__``), outputs
passed in. Each test is skipped by name without the framework or a GPU."""

import numpy as np
import pytest

import shapejit
from gpu import cupy, requires_cupy_gpu, requires_jax_gpu


@requires_cupy_gpu
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float16, np.float32, np.float64, np.complex64])
def test_cupy_permute_and_copy(dtype):
    x = cupy.asarray((np.random.default_rng(1).random((4, 5, 6)) * 100).astype(dtype))
    out = cupy.empty((6, 4, 5), dtype)
    assert shapejit.permute(x, (2, 0, 1), out=out) is out
    assert cupy.array_equal(out, x.transpose(2, 0, 1))
    dst = cupy.zeros((4, 5, 6), dtype)
    shapejit.copy_(dst, x[::-1, :, ::-1])  # negative strides
    assert cupy.array_equal(dst, x[::-1, :, ::-1])
    shapejit.copy_(dst, x[0])  # broadcast
    assert cupy.array_equal(dst, cupy.broadcast_to(x[0], dst.shape))


@requires_cupy_gpu
def test_cupy_on_a_non_default_stream():
    x = cupy.arange(24, dtype=cupy.float32).reshape(4, 6)
    out = cupy.empty((6, 4), cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        shapejit.permute(x, (1, 0), out=out)
    stream.synchronize()
    assert cupy.array_equal(out, x.T)


@requires_cupy_gpu
@pytest.mark.parametrize("style", ["neox", "gptj"])
def test_cupy_rope(style):
    rng = np.random.default_rng(2)
    cos, sin = shapejit.rope_tables(32, 16, dtype="f32")
    q = rng.standard_normal((5, 3, 16)).astype(np.float32)
    pos = np.array([0, 7, 31, 2, 2], np.int64)
    out = cupy.empty(q.shape, cupy.float32)
    shapejit.rope(cupy.asarray(q), cos=cupy.asarray(cos), sin=cupy.asarray(sin),
                  positions=cupy.asarray(pos), style=style, out=out)
    c, s = cos[pos][:, None, :], sin[pos][:, None, :]
    if style == "neox":
        x0, x1 = q[..., :8], q[..., 8:]
        want = np.concatenate([x0 * c - x1 * s, x0 * s + x1 * c], axis=-1)
    else:
        x0, x1 = q[..., 0::2], q[..., 1::2]
        want = np.stack([x0 * c - x1 * s, x0 * s + x1 * c], axis=-1).reshape(q.shape)
    np.testing.assert_allclose(cupy.asnumpy(out), want, rtol=1e-5, atol=1e-5)


@requires_jax_gpu
@requires_cupy_gpu
def test_jax_arrays_through_dlpack():
    import jax.numpy as jnp

    x = jnp.arange(60, dtype=jnp.float32).reshape(3, 4, 5)
    x.block_until_ready()
    expected = np.asarray(x).transpose(1, 2, 0)
    out = cupy.empty((4, 5, 3), cupy.float32)
    shapejit.permute(x, (1, 2, 0), out=out)
    np.testing.assert_array_equal(cupy.asnumpy(out), expected)
    plan = shapejit.plan_copy(out, shapejit.TensorSpec((4, 5, 3), (5, 1, 20), shapejit.spec([1], "f32").code))
    assert "rearrange" in plan.describe()
