"""GPU tests with PyTorch: permute and copy against torch, rope against a float64 reference,
autograd, torch.compile and CUDA graphs. Each test is skipped by name without torch or a GPU."""

import os
import random

import pytest

import shapejit
from gpu import GPU_COUNT, requires_torch_gpu, requires_two_gpus, torch

pytestmark = requires_torch_gpu

DTYPES = ["uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
          "bool", "complex64", "complex128", "uint16", "uint32", "uint64", "float8_e4m3fn"]
FLOATS = ["float16", "bfloat16", "float32", "float64"]
POSITION_DTYPES = ["uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64"]
TOLERANCE = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-6, "float64": 1e-12}


def torch_dtype(name):
    dt = getattr(torch, name, None)
    if dt is None:
        pytest.skip(f"this torch has no {name}")
    return dt


def random_tensor(shape, dtype, device="cuda"):
    """Random bits (0/1 for bool) of any dtype: compare results as bytes."""
    numel = 1
    for e in shape:
        numel *= e
    if dtype == torch.bool:
        return torch.randint(0, 2, tuple(shape), device=device).bool()
    raw = torch.randint(0, 256, (numel * dtype.itemsize,), dtype=torch.uint8, device=device)
    return raw.view(dtype).reshape(shape)


def bits(t):
    """t viewed as signed integers of its element size (torch copies those for every size), so
    references work for dtypes torch supports only partly (uint16, uint32, uint64, float8)."""
    ints = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    if t.dtype == torch.bool or t.dtype.is_complex or t.dtype.itemsize not in ints:
        return t
    return t.view(ints[t.dtype.itemsize])


def as_bytes(t):
    """The bytes of t in row-major order (a fresh tensor: contiguous() keeps odd strides of size-1 dims)."""
    if t.dtype == torch.bool:
        return t.to(torch.uint8).flatten()
    b = bits(t)
    return torch.empty(b.shape, dtype=b.dtype, device=b.device).copy_(b).view(torch.uint8)


def random_view(rng, dtype, rank):
    """A strided view (slices with steps, then a permutation) into a bigger random buffer."""
    shape = [rng.randint(1, 9) for _ in range(rank)]
    steps = [rng.choice([1, 1, 2, 3]) for _ in range(rank)]
    base = random_tensor([e * s + rng.randint(0, 2) for e, s in zip(shape, steps)], dtype)
    view = base[tuple(slice(0, e * s, s) for e, s in zip(shape, steps))]
    perm = list(range(rank))
    rng.shuffle(perm)
    return base, view.permute(perm)


# ------------------------------------------------------------------------------------------------
# permute and copy_


@pytest.mark.parametrize("name", DTYPES)
def test_permute_matches_torch(name):
    dtype = torch_dtype(name)
    rng = random.Random(name)
    for _ in range(20):
        rank = rng.randint(1, 5)
        _, x = random_view(rng, dtype, rank)
        dims = list(range(rank))
        rng.shuffle(dims)
        got = shapejit.permute(x, dims)
        assert got.is_contiguous() and got.shape == x.permute(dims).shape
        assert torch.equal(as_bytes(got), as_bytes(x.permute(dims)))


@pytest.mark.parametrize("name", DTYPES)
def test_copy_matches_torch(name):
    dtype = torch_dtype(name)
    rng = random.Random("copy" + name)
    for _ in range(20):
        rank = rng.randint(1, 5)
        dst_base, dst = random_view(rng, dtype, rank)
        src = random_tensor(list(reversed(dst.shape)), dtype).permute(*reversed(range(rank)))
        if rng.random() < 0.3:  # broadcast along a dimension
            src = src.narrow(0, 0, 1)
        expected_base = bits(dst_base).clone()
        expected_base.as_strided(dst.shape, dst.stride(), dst.storage_offset()).copy_(bits(src))
        assert shapejit.copy_(dst, src) is dst
        torch.cuda.synchronize()
        assert torch.equal(as_bytes(dst_base), as_bytes(expected_base.view(dtype) if dtype != torch.bool else expected_base))


def test_one_shot_plans_are_keyed_by_every_layout_fact():
    """The one-shot cache must not hand a plan to tensors of the same shape with other strides,
    dtype or element size: each variant is called twice (a miss, then a hit), interleaved."""
    from shapejit import _torch

    assert _torch.FAST_PATH
    base = random_tensor([6, 10, 14], torch.float32)
    variants = [base, base.transpose(0, 2).contiguous().transpose(0, 2), base[:, :, ::2].contiguous(),
                base.to(torch.float64), base.to(torch.float16), base.view(torch.int32),
                base[:, :1].expand(6, 10, 14)]
    outputs = []
    for _ in range(2):
        for src in variants:
            want = src.permute(2, 0, 1)
            got = shapejit.permute(src, (2, 0, 1))
            assert got.is_contiguous() and got.dtype == src.dtype and torch.equal(as_bytes(got), as_bytes(want))
            outputs.append(got)
            dst = torch.empty(list(reversed(src.shape)), dtype=src.dtype, device="cuda").permute(2, 1, 0)
            shapejit.copy_(dst, src)
            assert torch.equal(as_bytes(dst), as_bytes(src))
    assert len({t.data_ptr() for t in outputs}) == len(outputs)  # every hit returns a new tensor
    # Dtypes that share an element size and shapejit's opaque code must still not mix in copy_.
    same_size = [getattr(torch, n) for n in ("bool", "uint8", "float8_e4m3fn", "float8_e5m2") if hasattr(torch, n)]
    for a in same_size:
        shapejit.copy_(torch.zeros(4, 4, device="cuda", dtype=a), torch.zeros(4, 4, device="cuda", dtype=a))
    for a, b in zip(same_size, same_size[1:]):
        with pytest.raises(shapejit.InvalidArgumentError, match="does not convert"):
            shapejit.copy_(torch.zeros(4, 4, device="cuda", dtype=a), torch.zeros(4, 4, device="cuda", dtype=b))


def test_fast_path_takes_only_what_matches_the_plan():
    from shapejit import _shapejit, _torch

    assert _torch.FAST_PATH, "this torch's tensors are not read through its C functions"
    x = random_tensor([8, 16, 32], torch.float16)
    view = x.permute(2, 0, 1)
    out = torch.full(view.shape, float("nan"), device="cuda", dtype=torch.float16)
    plan = shapejit.plan_copy(out, view)
    assert _shapejit.copy_launch(plan._plan, plan._layouts, out, view, None) is True
    assert torch.equal(as_bytes(out), as_bytes(view))

    class Subclass(torch.Tensor):
        pass

    others = [x, view.cpu(), view.float(), view.contiguous(), view.as_subclass(Subclass), view.data_ptr(), None]
    if GPU_COUNT > 1:
        others.append(view.to("cuda:1"))
    for other in others:
        assert _shapejit.copy_launch(plan._plan, plan._layouts, out, other, None) is False
    param = torch.nn.Parameter(view.contiguous().permute(0, 1, 2), requires_grad=False)
    assert _shapejit.copy_launch(plan._plan, plan._layouts, out, param, None) is False  # strides differ
    plan_p = shapejit.plan_copy(out, param)
    out.fill_(float("nan"))
    assert _shapejit.copy_launch(plan_p._plan, plan_p._layouts, out, param, None) is True
    assert torch.equal(as_bytes(out), as_bytes(param))


def test_permute_new_launches_only_a_cached_plan():
    """The one-call permute of the fast path: None (nothing launched) until a plan is cached for
    the layout, for axes it does not key (a list, out of range) and for CPU tensors."""
    from shapejit import _shapejit, _torch

    assert _torch.FAST_PATH
    x = random_tensor([6, 7, 9], torch.float16)
    _shapejit.clear_torch_plans()
    assert _shapejit.permute_new(x, (2, 0, 1), None) is None
    first = shapejit.permute(x, (2, 0, 1))  # plans (or finds the Python cache's plan) and stores it
    got = _shapejit.permute_new(x, (2, 0, 1), None)
    assert got is not None and got.data_ptr() != first.data_ptr() and got.is_contiguous()
    assert torch.equal(as_bytes(got), as_bytes(x.permute(2, 0, 1)))
    assert _shapejit.permute_new(x, [2, 0, 1], None) is None
    assert _shapejit.permute_new(x, (2, 0, 3), None) is None
    assert _shapejit.permute_new(x.cpu(), (2, 0, 1), None) is None


def test_fast_path_off_keeps_every_call_working():
    """A probe the extension reads differently turns the fast path off; calls still work."""
    from shapejit import _shapejit, _torch

    probe = torch.empty(6, dtype=torch.float16)
    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    dtypes = [(torch.empty(0, dtype=dt), code, eb) for dt, (code, eb) in _torch._DTYPES.items()
              if dt is not getattr(torch, "complex32", None)]
    try:
        assert not _shapejit.torch_register(lib, [torch.Tensor], dtypes, probe, (probe.data_ptr(), (6,), (2,)))
        assert not _shapejit.torch_fast_path()
        x = random_tensor([5, 7, 3], torch.float32)
        for _ in range(2):  # a plan, then the Python cache's hit
            assert torch.equal(as_bytes(shapejit.permute(x, (1, 2, 0))), as_bytes(x.permute(1, 2, 0)))
        assert _shapejit.permute_new(x, (1, 2, 0), None) is None
        cos, sin = tables()
        q = torch.randn(2, 3, 64, device="cuda")
        assert_close(shapejit.rope(q, cos=cos, sin=sin), rope_reference(q, cos, sin, torch.arange(2, device="cuda"), "neox", 64))
    finally:
        assert _torch._register_fast_path()


def test_one_shot_outputs_from_cpp_or_torch_allocation():
    """One-shot outputs made in C++ (at::empty_strided through libtorch's C functions) are plain
    contiguous tensors on the input's device that free their memory; with that allocation off,
    torch allocates them and the results are the same."""
    from shapejit import _shapejit, _torch

    assert _torch.ALLOCATES, "this torch's outputs are not allocated through its C functions"
    cos, sin = tables()
    x = random_tensor([6, 7, 9], torch.float16)
    q = torch.randn(2, 5, 4, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 5, 2, 64, device="cuda", dtype=torch.bfloat16)
    pos = torch.randint(0, 64, (2, 5), device="cuda", dtype=torch.int32)
    try:
        for on in (True, False, True):
            assert _shapejit.torch_allocation(on) is on
            for _ in range(2):  # a miss (or hit) then a hit
                got = shapejit.permute(x, (2, 0, 1))
                q_out, k_out = shapejit.rope(q, k, cos=cos, sin=sin, positions=pos)
                q_only = shapejit.rope(q, cos=cos, sin=sin, positions=pos, style="gptj")
                for t, like in ((got, x.permute(2, 0, 1)), (q_out, q), (k_out, k), (q_only, q)):
                    assert type(t) is torch.Tensor and t.is_contiguous() and not t.requires_grad
                    assert t.shape == like.shape and t.dtype == like.dtype and t.device == like.device
                assert torch.equal(as_bytes(got), as_bytes(x.permute(2, 0, 1)))
                assert_close(q_out, rope_reference(q, cos, sin, pos.long(), "neox", 64))
                assert_close(k_out, rope_reference(k, cos, sin, pos.long(), "neox", 64))
                assert_close(q_only, rope_reference(q, cos, sin, pos.long(), "gptj", 64))
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        for _ in range(50):
            shapejit.permute(x, (2, 0, 1))
            shapejit.rope(q, k, cos=cos, sin=sin, positions=pos)
        torch.cuda.synchronize()
        assert torch.cuda.memory_allocated() == before  # every output was freed with its tensor
    finally:
        _shapejit.torch_allocation(True)


def test_copy_errors():
    a = torch.zeros(4, 4, device="cuda")
    with pytest.raises(shapejit.InvalidArgumentError, match="does not convert"):
        shapejit.copy_(a, torch.zeros(4, 4, device="cuda", dtype=torch.float16))
    with pytest.raises(shapejit.InvalidArgumentError, match="broadcast"):
        shapejit.copy_(a, torch.zeros(3, device="cuda"))
    with pytest.raises(shapejit.InvalidArgumentError, match="is on cpu"):
        shapejit.copy_(a, torch.zeros(4, 4))
    with pytest.raises(shapejit.InvalidArgumentError, match="autograd"):
        shapejit.copy_(a, torch.zeros(4, 4, device="cuda", requires_grad=True))


def test_permute_out_and_cpu_tensors():
    x = torch.randn(3, 4, 5, device="cuda")
    out = torch.empty(5, 3, 4, device="cuda")
    assert shapejit.permute(x, (-1, 0, 1), out=out) is out
    assert torch.equal(out, x.permute(2, 0, 1))
    with pytest.raises(shapejit.InvalidArgumentError, match="is on cpu"):
        shapejit.permute(torch.zeros(2, 3), (1, 0))


def test_copy_plan_with_tensors():
    x = torch.randn(8, 16, 32, device="cuda", dtype=torch.float16)
    view = x.permute(2, 0, 1)
    out = torch.empty(view.shape, device="cuda", dtype=torch.float16)
    plan = shapejit.plan_copy(out, view)
    plan.launch(out, view)
    assert torch.equal(out, view)
    plan.launch(out.data_ptr(), view.data_ptr(), stream=torch.cuda.current_stream())
    with pytest.raises(shapejit.InvalidArgumentError, match="differ from the plan"):
        plan.launch(out, x)


# ------------------------------------------------------------------------------------------------
# rope


def rope_reference(x, cos, sin, positions, style, rotary_dim, inverse=False):
    """y = x rotated pairwise by cos/sin[position], in float64, rounded to x's dtype."""
    half = rotary_dim // 2
    c = cos.double()[positions][..., :half].unsqueeze(-2)
    s = sin.double()[positions][..., :half].unsqueeze(-2)
    if inverse:
        s = -s
    y = x.double().clone()
    if style == "neox":
        x0, x1 = y[..., :half].clone(), y[..., half:rotary_dim].clone()
        y[..., :half], y[..., half:rotary_dim] = x0 * c - x1 * s, x0 * s + x1 * c
    else:
        x0, x1 = y[..., 0:rotary_dim:2].clone(), y[..., 1:rotary_dim:2].clone()
        y[..., 0:rotary_dim:2], y[..., 1:rotary_dim:2] = x0 * c - x1 * s, x0 * s + x1 * c
    return y.to(x.dtype)


def assert_close(got, want):
    tol = TOLERANCE[str(want.dtype).removeprefix("torch.")]
    torch.testing.assert_close(got.double(), want.double(), rtol=tol, atol=tol)


def tables(rows=64, dim=64, dtype=None):
    """cos and sin [rows, dim / 2] on the GPU (default float32)."""
    cos, sin = shapejit.rope_tables(rows, dim, theta=10000.0, dtype="f32", device="cuda")
    return cos.to(dtype or torch.float32), sin.to(dtype or torch.float32)


@pytest.mark.parametrize("style", ["neox", "gptj"])
@pytest.mark.parametrize("name", FLOATS)
def test_rope_matches_reference(style, name):
    dtype = torch_dtype(name)
    cos, sin = tables()
    q = torch.randn(2, 5, 4, 64, device="cuda").to(dtype)
    k = torch.randn(2, 5, 2, 64, device="cuda").to(dtype)
    pos = torch.randint(0, 64, (2, 5), device="cuda")
    q_out, k_out = shapejit.rope(q, k, cos=cos, sin=sin, positions=pos, style=style)
    assert_close(q_out, rope_reference(q, cos, sin, pos, style, 64))
    assert_close(k_out, rope_reference(k, cos, sin, pos, style, 64))
    q_only = shapejit.rope(q, cos=cos, sin=sin, positions=pos, style=style)
    assert torch.equal(q_only, q_out)


@pytest.mark.parametrize("name", POSITION_DTYPES)
def test_rope_position_dtypes(name):
    dtype = torch_dtype(name)
    cos, sin = tables(rows=100)
    q = torch.randn(7, 3, 64, device="cuda")
    pos = torch.randint(0, 100, (7,), device="cuda").to(dtype)
    got = shapejit.rope(q, cos=cos, sin=sin, positions=pos)
    assert_close(got, rope_reference(q, cos, sin, pos.long(), "neox", 64))


@pytest.mark.parametrize("style", ["neox", "gptj"])
def test_rope_strided_in_place_on_a_fused_qkv(style):
    cos, sin = tables(dtype=torch.bfloat16)
    qkv = torch.randn(3, 9, 8 + 2 + 2, 64, device="cuda", dtype=torch.bfloat16)
    before = qkv.clone()
    q, k = qkv[:, :, :8], qkv[:, :, 8:10]
    pos = torch.arange(9, device="cuda", dtype=torch.int32)
    result = shapejit.rope(q, k, cos=cos, sin=sin, positions=pos, style=style, inplace=True)
    assert result[0] is q and result[1] is k
    assert_close(q, rope_reference(before[:, :, :8], cos, sin, pos.long(), style, 64))
    assert_close(k, rope_reference(before[:, :, 8:10], cos, sin, pos.long(), style, 64))
    assert torch.equal(qkv[:, :, 10:], before[:, :, 10:])


def test_rope_partial_rotary_offset_and_out():
    cos, sin = tables(rows=128, dim=32)
    q = torch.randn(6, 4, 64, device="cuda", dtype=torch.float16)
    out = torch.empty(6, 4, 64, device="cuda", dtype=torch.float16)
    assert shapejit.rope(q, cos=cos, sin=sin, offset=7, rotary_dim=32, out=out, style="gptj") is out
    pos = torch.arange(7, 13, device="cuda")
    assert_close(out, rope_reference(q, cos, sin, pos, "gptj", 32))
    assert torch.equal(out[..., 32:], q[..., 32:])


def test_rope_one_shot_cache_hits_stay_correct():
    cos, sin = tables(rows=64)
    q = torch.randn(3, 5, 4, 64, device="cuda", dtype=torch.float16)
    k = torch.randn(3, 5, 2, 64, device="cuda", dtype=torch.float16)
    cases = [dict(positions=torch.randint(0, 64, (3, 5), device="cuda", dtype=dt)) for dt in
             (torch.int32, torch.int64, torch.uint8)] + [dict(offset=3), dict(offset=9)]
    for _ in range(2):
        for args in cases:
            pos = args.get("positions")
            if pos is None:
                pos = torch.arange(args["offset"], args["offset"] + 5, device="cuda")
            for style in ("neox", "gptj"):
                q_out, k_out = shapejit.rope(q, k, cos=cos, sin=sin, style=style, **args)
                assert_close(q_out, rope_reference(q, cos, sin, pos.long(), style, 64))
                assert_close(k_out, rope_reference(k, cos, sin, pos.long(), style, 64))
                q_half = shapejit.rope(q[:, :, ::2], cos=cos, sin=sin, style=style, **args)
                assert_close(q_half, rope_reference(q[:, :, ::2], cos, sin, pos.long(), style, 64))


def test_rope_allocating_one_shot_is_one_extension_call_once_planned():
    """After a first call plans a layout, rope_new finds that plan before it allocates (the keys of
    its derived outputs equal those of torch's contiguous ones): q strided, size-1 dims, k absent or
    given; its outputs equal the first call's."""
    from shapejit import _shapejit, _torch
    if not _torch.ALLOCATES:
        pytest.skip("allocation from C++ is off with this torch (its probe disagreed)")
    cos, sin = tables(rows=64)
    qkv = torch.randn(4, 1, 6 + 2, 64, device="cuda", dtype=torch.bfloat16)
    q, k = qkv[:, :, :6], qkv[:, :, 6:]
    pos = torch.randint(0, 64, (4, 1), device="cuda", dtype=torch.int32)
    for key in (None, k):
        first = shapejit.rope(q, key, cos=cos, sin=sin, positions=pos)
        made = _shapejit.rope_new(q, key, cos, sin, pos, 0, "neox", None, False, False, None)
        assert made is not None
        pairs = [(made, first)] if key is None else list(zip(made, first))
        for got, want in pairs:
            assert got.is_contiguous() and got.shape == want.shape
            assert torch.equal(got, want)


def test_rope_inverse_round_trip():
    cos, sin = tables(dtype=torch.float64)
    q = torch.randn(2, 5, 4, 64, device="cuda", dtype=torch.float64)
    pos = torch.randint(0, 64, (5,), device="cuda")
    y = shapejit.rope(q, cos=cos, sin=sin, positions=pos)
    torch.testing.assert_close(shapejit.rope(y, cos=cos, sin=sin, positions=pos, inverse=True), q)


def test_rope_checked_names_a_bad_position():
    cos, sin = tables(rows=16)
    q = torch.randn(4, 2, 64, device="cuda")
    pos = torch.tensor([0, 3, 99, 1], device="cuda")
    with pytest.raises(shapejit.InvalidArgumentError, match="position"):
        shapejit.rope(q, cos=cos, sin=sin, positions=pos, checked=True)
    shapejit.rope(q, cos=cos, sin=sin, positions=pos.clamp(max=15), checked=True)


def test_rope_plan_launch_with_tensors():
    cos, sin = tables()
    q = torch.randn(64, 1, 32, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(64, 1, 8, 64, device="cuda", dtype=torch.bfloat16)
    pos = torch.randint(0, 64, (64, 1), device="cuda")
    plan = shapejit.plan_rope(q, k, cos=cos, positions=pos)
    q_out, k_out = plan.launch(q, k, cos=cos, sin=sin, positions=pos)
    want_q, want_k = shapejit.rope(q, k, cos=cos, sin=sin, positions=pos)
    assert torch.equal(q_out, want_q) and torch.equal(k_out, want_k)
    with pytest.raises(shapejit.InvalidArgumentError, match="differ from the plan"):
        plan.launch(q[:32], k[:32], cos=cos, sin=sin, positions=pos[:32])


@pytest.mark.parametrize("rule,sections", [("sections", [16, 24, 24]), ("interleaved", [24, 20, 20]),
                                           ("blocks", [32, 32])])
def test_rope_plan_multi_axis_positions_against_torch(rule, sections):
    """M-RoPE and 2-D RoPE through a plan, against the rule written in torch (float64)."""
    g = torch.Generator(device="cuda").manual_seed(7)
    q = torch.randn(2, 40, 8, 128, device="cuda", generator=g)
    k = torch.randn(2, 40, 2, 128, device="cuda", generator=g)
    cos, sin = shapejit.rope_tables(512, 128, dtype="f32", device="cuda")
    pos = torch.randint(0, 512, (len(sections), 2, 40), device="cuda", generator=g)
    plan = shapejit.plan_rope(q, k, cos=cos, positions=pos, axis_rule=rule, axis_sections=sections)
    q_out, k_out = plan.launch(q, k, cos=cos, sin=sin, positions=pos)

    def reference(x):  # x [B, S, H, 128]
        half = 64
        axis = torch.zeros(half, dtype=torch.long)
        if rule == "interleaved":
            j = torch.arange(half)
            axis[(j % 3 == 1) & (j < 3 * sections[1])] = 1
            axis[(j % 3 == 2) & (j < 3 * sections[2])] = 2
        else:
            axis = torch.repeat_interleave(torch.arange(len(sections)), torch.tensor(sections))
        p = pos.permute(1, 2, 0)[..., axis.cuda()]  # [B, S, 64]: pair j's position
        c = cos.double()[p, torch.arange(half, device="cuda")].unsqueeze(2)
        s = sin.double()[p, torch.arange(half, device="cuda")].unsqueeze(2)
        lo, hi = torch.arange(half), torch.arange(half) + half
        if rule == "blocks":  # half-split inside each block of 2 s_i channels
            first = torch.cumsum(torch.tensor([0] + sections[:-1]), 0)
            lo = torch.cat([2 * f + torch.arange(n) for f, n in zip(first.tolist(), sections)])
            hi = lo + torch.repeat_interleave(torch.tensor(sections), torch.tensor(sections))
        x = x.double()
        y = x.clone()
        y[..., lo.cuda()] = x[..., lo.cuda()] * c - x[..., hi.cuda()] * s
        y[..., hi.cuda()] = x[..., lo.cuda()] * s + x[..., hi.cuda()] * c
        return y

    torch.testing.assert_close(q_out.double(), reference(q), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(k_out.double(), reference(k), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout,codes", [("nhd", "none"), ("hnd", "none"), ("nhd", "fp8-e4m3")])
def test_rope_plan_with_a_kv_cache_append(layout, codes):
    """A decode step: q rotated, k rotated and appended with v to a paged cache at each token's
    slot (one skipped), against shapejit.rope and the tensors themselves."""
    g = torch.Generator(device="cuda").manual_seed(11)
    q = torch.randn(16, 8, 128, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(16, 2, 128, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(16, 2, 128, device="cuda", dtype=torch.bfloat16, generator=g)
    cos, sin = shapejit.rope_tables(256, 128, dtype="f32", device="cuda")
    pos = torch.randint(0, 256, (16,), device="cuda", generator=g)
    slots = torch.randperm(40 * 16, device="cuda", generator=g)[:16].to(torch.int64)
    slots[5] = -1
    shape = (40, 16, 2, 128) if layout == "nhd" else (40, 2, 16, 128)
    dtype = torch.uint8 if codes != "none" else torch.bfloat16
    k_cache, v_cache = torch.zeros(shape, device="cuda", dtype=dtype), torch.zeros(shape, device="cuda", dtype=dtype)
    scale = torch.ones(1, device="cuda")
    plan = shapejit.plan_rope(q, k, cos=cos, positions=pos, cache_layout=layout, v=v, k_cache=k_cache,
                              v_cache=v_cache, slots=slots, cache_quantize=codes)
    extra = dict(k_cache_scale=scale, v_cache_scale=scale) if codes != "none" else {}
    q_out = plan.launch(q, k, cos=cos, sin=sin, positions=pos, v=v, k_cache=k_cache, v_cache=v_cache,
                        slots=slots, **extra)
    want_q, want_k = shapejit.rope(q, k, cos=cos, sin=sin, positions=pos)
    assert torch.equal(q_out, want_q)

    def rows(cache, t):  # the [heads, dhead] rows of token t's slot
        block, row = divmod(int(slots[t]), 16)
        return cache[block, row] if layout == "nhd" else cache[block, :, row]

    for t in range(16):
        if t == 5:
            continue
        got_k, got_v = rows(k_cache, t), rows(v_cache, t)
        if codes != "none":
            got_k, got_v = got_k.view(torch.float8_e4m3fn).float(), got_v.view(torch.float8_e4m3fn).float()
            # k: one e4m3 step (2^-3 relative) of the bf16 rotation; v: e4m3 of v itself.
            torch.testing.assert_close(got_k, want_k[t].float(), rtol=0.13, atol=2.0 ** -9)
            torch.testing.assert_close(got_v, v[t].float().to(torch.float8_e4m3fn).float())
        else:
            assert torch.equal(got_k, want_k[t]) and torch.equal(got_v, v[t])
    assert int((k_cache != 0).sum()) <= 15 * 2 * 128  # nothing past the appended rows


def test_rope_errors_name_the_argument():
    cos, sin = tables()
    q = torch.randn(4, 2, 64, device="cuda")
    with pytest.raises(shapejit.InvalidArgumentError, match="sin"):
        shapejit.rope(q, cos=cos, sin=sin.double(), inplace=True)
    with pytest.raises(shapejit.InvalidArgumentError, match="is on cpu"):
        shapejit.rope(q, cos=cos.cpu(), sin=sin.cpu())
    with pytest.raises(shapejit.InvalidArgumentError):
        shapejit.rope(q[..., :63], cos=cos, sin=sin)


def test_tables_on_the_device():
    cos, sin = shapejit.rope_tables(32, 16, dtype="bf16", device="cuda")
    ref_cos, ref_sin = shapejit.rope_tables(32, 16, dtype="f64")
    assert cos.dtype == torch.bfloat16 and cos.is_cuda
    torch.testing.assert_close(cos.double().cpu(), torch.from_numpy(ref_cos), rtol=8e-3, atol=8e-3)
    torch.testing.assert_close(sin.double().cpu(), torch.from_numpy(ref_sin), rtol=8e-3, atol=8e-3)


# ------------------------------------------------------------------------------------------------
# autograd, torch.compile, CUDA graphs


def test_rope_gradcheck_f64():
    cos, sin = tables(rows=16, dtype=torch.float64)
    pos = torch.tensor([3, 0, 15], device="cuda")
    q = torch.randn(3, 2, 64, device="cuda", dtype=torch.float64, requires_grad=True)
    k = torch.randn(3, 1, 64, device="cuda", dtype=torch.float64, requires_grad=True)
    for style in ("neox", "gptj"):
        assert torch.autograd.gradcheck(
            lambda a, b: shapejit.rope(a, b, cos=cos, sin=sin, positions=pos, style=style), (q, k))
        assert torch.autograd.gradcheck(
            lambda a: shapejit.rope(a, cos=cos, sin=sin, positions=pos, rotary_dim=32), (q,))


def test_permute_gradcheck_f64():
    x = torch.randn(3, 4, 5, device="cuda", dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: shapejit.permute(a, (2, 0, 1)), (x,))


def test_autograd_refuses_in_place():
    cos, sin = tables()
    q = torch.randn(4, 2, 64, device="cuda", requires_grad=True)
    with pytest.raises(shapejit.InvalidArgumentError, match="autograd"):
        shapejit.rope(q, cos=cos, sin=sin, inplace=True)


def test_torch_compile_fullgraph():
    cos, sin = tables()

    def block(q, k, pos):
        q, k = shapejit.rope(q, k, cos=cos, sin=sin, positions=pos)
        return shapejit.permute(q, (0, 2, 1, 3)), k * 2

    compiled = torch.compile(block, fullgraph=True)
    for seq in (1, 1, 3):
        q = torch.randn(2, seq, 4, 64, device="cuda", dtype=torch.float16)
        k = torch.randn(2, seq, 2, 64, device="cuda", dtype=torch.float16)
        pos = torch.randint(0, 64, (2, seq), device="cuda")
        for got, want in zip(compiled(q, k, pos), block(q, k, pos)):
            assert torch.equal(got, want)


def test_torch_compile_in_place_and_backward():
    cos, sin = tables(dtype=torch.float32)

    def in_place(q, pos):
        shapejit.rope(q, cos=cos, sin=sin, positions=pos, inplace=True)
        return q + 1

    q = torch.randn(5, 3, 64, device="cuda")
    pos = torch.arange(5, device="cuda")
    want = rope_reference(q, cos, sin, pos, "neox", 64) + 1
    torch.testing.assert_close(torch.compile(in_place, fullgraph=True)(q.clone(), pos), want)

    def loss(q):
        return (shapejit.rope(q, cos=cos, sin=sin, positions=pos) ** 2).sum()

    a = q.clone().requires_grad_()
    b = q.clone().requires_grad_()
    loss(a).backward()
    torch.compile(loss, fullgraph=True)(b).backward()
    torch.testing.assert_close(a.grad, b.grad)
    torch.testing.assert_close(a.grad, 2 * q)  # a rotation keeps the norm: d|Rq|^2/dq = 2q


def test_cuda_graph_capture():
    cos, sin = tables(dtype=torch.bfloat16)
    q = torch.randn(8, 1, 32, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(8, 1, 8, 64, device="cuda", dtype=torch.bfloat16)
    pos = torch.randint(0, 64, (8, 1), device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up: plan and load the kernels before capturing
        shapejit.rope(q, k, cos=cos, sin=sin, positions=pos)
        shapejit.permute(q, (0, 2, 1, 3))
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        q_out, k_out = shapejit.rope(q, k, cos=cos, sin=sin, positions=pos)
        moved = shapejit.permute(q_out, (0, 2, 1, 3))
    for _ in range(2):
        q.copy_(torch.randn_like(q))
        pos.copy_(torch.randint(0, 64, (8, 1), device="cuda"))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(q_out, rope_reference(q, cos, sin, pos, "neox", 64))
        assert_close(k_out, rope_reference(k, cos, sin, pos, "neox", 64))
        assert torch.equal(moved, q_out.permute(0, 2, 1, 3))


# ------------------------------------------------------------------------------------------------
# Several GPUs


@requires_two_gpus
def test_tensors_on_the_second_gpu_run_there():
    assert GPU_COUNT >= 2
    torch.cuda.set_device(0)
    cos, sin = tables()
    cos1, sin1 = cos.to("cuda:1"), sin.to("cuda:1")
    q = torch.randn(4, 3, 64, device="cuda:1")
    pos = torch.arange(4, device="cuda:1")
    got = shapejit.rope(q, cos=cos1, sin=sin1, positions=pos)
    assert got.device == q.device
    assert_close(got, rope_reference(q, cos1, sin1, pos, "neox", 64))
    x = torch.randn(5, 6, device="cuda:1")
    x0 = x.to("cuda:0")
    for _ in range(2):  # a miss, then a hit, on each device: one-shot plans are keyed by device
        for t in (x0, x):
            got = shapejit.permute(t, (1, 0))
            assert got.device == t.device and torch.equal(got, t.t())
    dst = torch.full((6, 5), float("nan"), device="cuda:1")
    assert torch.equal(shapejit.copy_(dst, x.t()), x.t())
    side = torch.cuda.Stream(device="cuda:1")
    side.wait_stream(torch.cuda.current_stream(1))
    with torch.cuda.stream(side):  # a side stream of device 1 is its current one here
        got = shapejit.permute(x, (1, 0))
    side.synchronize()
    assert torch.equal(got, x.t())
    with pytest.raises(shapejit.InvalidArgumentError, match="one device"):
        shapejit.rope(q, cos=cos, sin=sin, positions=pos)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("group,dhead", [(1, 128), (8, 128), (4, 64), (3, 256)])
def test_hadamard_against_a_dense_matrix_product(dtype, group, dhead):
    """One-shot and planned hadamard on a [B, H, S, D] tensor's [B, S, H, D] view, new output, given
    strided output and in place, against x @ H^T * scale in float64."""
    dt = torch_dtype(dtype)
    g = torch.Generator(device="cuda").manual_seed(11)
    heads = 2 * group
    bhsd = torch.randn(2, heads, 9, dhead, device="cuda", generator=g).to(dt)
    x = bhsd.transpose(1, 2)  # [B, S, H, D], heads strided
    n = group * dhead
    h = torch.from_numpy(shapejit.hadamard_matrix(n)).to("cuda", torch.float64)
    scale = n ** -0.5

    def reference(t):
        rows = t.double().reshape(2, 9, heads // group, n)
        return (rows @ h.T * scale).reshape(t.shape)

    tol = TOLERANCE[dtype] * 4 if dtype in ("float16", "bfloat16") else TOLERANCE[dtype] * 16
    want = reference(x)
    y = shapejit.hadamard(x, group=group)
    assert y.is_contiguous() and y.shape == x.shape
    torch.testing.assert_close(y.double(), want, atol=tol * 4, rtol=tol)
    out = torch.full((2, 9, heads, dhead + 8), float("nan"), device="cuda", dtype=dt)[..., :dhead]
    plan = shapejit.plan_hadamard(x, group=group, out=out)
    assert plan.launch(x, out) is out
    torch.testing.assert_close(out.double(), want, atol=tol * 4, rtol=tol)
    original = x.clone()
    shapejit.hadamard(x, group=group, inplace=True)
    torch.testing.assert_close(x.double(), reference(original), atol=tol * 4, rtol=tol)
    shapejit.hadamard(x, group=group, inplace=True)  # orthonormal: its own inverse
    torch.testing.assert_close(x.double(), original.double(), atol=tol * 8, rtol=tol * 2)


def test_hadamard_autograd_and_torch_compile():
    """The shapejit::hadamard op: gradcheck in float64 (the backward is the same transform) and a
    torch.compile(fullgraph=True) trace equal to the eager call."""
    g = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(2, 3, 4, 32, device="cuda", dtype=torch.float64, generator=g, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: shapejit.hadamard(t, group=2, scale=0.3), (x,))
    y = torch.randn(2, 7, 8, 64, device="cuda", dtype=torch.bfloat16, generator=g)

    def f(t):
        return shapejit.hadamard(t * 2, group=4) + 1

    compiled = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(compiled(y), f(y))
    with pytest.raises(shapejit.InvalidArgumentError, match="not supported under torch.compile or autograd"):
        shapejit.hadamard(x, group=2, inplace=True)
