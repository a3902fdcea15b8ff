"""The package without a GPU: import, specs, planning, describe/json, errors, runtime switches."""

import json
import subprocess
import sys

import numpy as np
import pytest

import shapejit
from shapejit import _shapejit


# Tests that launch on pointers that are not memory: they check the error without a driver, and
# would fault a real GPU's context, so they run only where no driver is usable.
without_driver = pytest.mark.skipif(
    _shapejit.doctor_info()["driver"].get("usable", False),
    reason="launches on fake pointers: meaningful and safe only without a usable CUDA driver")


# ------------------------------------------------------------------------------------------------
# Import, version, errors


def test_import_and_version():
    assert shapejit.__version__ == shapejit.version() == _shapejit.version()
    assert shapejit.DTYPE_NAMES == ("u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64", "f16",
                                    "bf16", "f32", "f64")


def test_error_classes_carry_status():
    expected = {
        shapejit.InvalidArgumentError: 1, shapejit.UnsupportedError: 2, shapejit.CompileError: 3,
        shapejit.NvrtcUnavailableError: 4, shapejit.DriverUnavailableError: 5,
        shapejit.DriverError: 6, shapejit.OfflineMissError: 7, shapejit.CacheIOError: 8,
        shapejit.InternalError: 9,
    }
    for cls, status in expected.items():
        assert issubclass(cls, shapejit.Error)
        assert cls.status == status
        assert cls.__module__ == "shapejit"
        e = cls("message")
        assert e.message == "message" and e.status == status
    assert issubclass(shapejit.InvalidArgumentError, ValueError)
    assert shapejit.InvalidArgumentError("m").status_name == "SJ_INVALID_ARGUMENT"


def test_library_errors_arrive_as_subclasses_with_the_message():
    with pytest.raises(shapejit.InvalidArgumentError) as info:
        shapejit.describe_manifest_line("rearrange --dtype f17 --shape 8,4 --perm 1,0")
    assert info.value.status == 1
    assert "f17" in str(info.value)
    assert info.value.message == str(info.value)


# ------------------------------------------------------------------------------------------------
# Specs and dtypes


@pytest.mark.parametrize("spelling,name", [
    ("f16", "f16"), ("float16", "f16"), (np.float16, "f16"), (np.dtype("float32"), "f32"),
    ("bfloat16", "bf16"), ("int64", "i64"), ("u8", "u8"), ("uint8", "u8"), (np.uint64, "u64"),
    ("double", "f64"),
])
def test_dtype_spellings(spelling, name):
    assert shapejit.spec([2], spelling).dtype == name


@pytest.mark.parametrize("bad", ["f17", "complex64", object(), 99])
def test_unknown_dtype_raises(bad):
    with pytest.raises(shapejit.InvalidArgumentError):
        shapejit.spec([2], bad)


def test_spec_strides():
    s = shapejit.spec([2, 3, 4], "f32")
    assert s.strides == (12, 4, 1) and s.itemsize == 4
    assert shapejit.spec([2, 3], "f16", strides=[1, -2]).strides == (1, -2)
    assert shapejit.spec([5, 0, 3], "u8").strides == (3, 3, 1)
    with pytest.raises(shapejit.InvalidArgumentError, match="one stride per dimension"):
        shapejit.spec([2, 3], "f32", strides=[1])


# ------------------------------------------------------------------------------------------------
# Copy plans


def attention_permute_plan():
    src = shapejit.spec([64, 512, 32, 128], "f16")
    view = shapejit.TensorSpec((64, 32, 512, 128), (src.strides[0], src.strides[2], src.strides[1], 1),
                               src.code)
    return shapejit.plan_copy(shapejit.spec(view.shape, "f16"), view)


def test_copy_plan_describe_json_manifest():
    plan = attention_permute_plan()
    assert "rearrange" in plan.describe()
    doc = json.loads(plan.json())
    assert doc["op"] == "rearrange" and doc["shape"] == [64, 32, 512, 128] and doc["elem_bytes"] == 2
    line = plan.manifest_line()
    assert line.startswith("rearrange ") and "--dtype f16" in line
    assert shapejit.describe_manifest_line(line) == plan.describe()
    assert json.loads(shapejit.describe_manifest_line(line, json=True)) == doc
    assert repr(plan).startswith("CopyPlan(")


def test_copy_plan_broadcasts_src():
    plan = shapejit.plan_copy(shapejit.spec([3, 4], "f32"), shapejit.spec([4], "f32"))
    assert plan.src.strides == (0, 1)
    assert json.loads(plan.json())["src_strides"] == [0, 1]


def test_copy_plan_opaque_elements():
    plan = shapejit.plan_copy(shapejit.spec([10, 3], "u8", elem_bytes=12),
                              shapejit.spec([10, 3], "u8", strides=[1, 10], elem_bytes=12))
    assert json.loads(plan.json())["elem_bytes"] == 12


@pytest.mark.parametrize("dst,src,match", [
    (([3, 4], "f32"), ([4, 3], "f32"), "broadcast"),
    (([3, 4], "f32"), ([3, 4], "f16"), None),
])
def test_copy_plan_mismatch_raises(dst, src, match):
    with pytest.raises(shapejit.InvalidArgumentError, match=match):
        shapejit.plan_copy(shapejit.spec(*dst), shapejit.spec(*src))


def test_copy_plan_overlapping_dst_raises():
    with pytest.raises(shapejit.InvalidArgumentError, match="overlap"):
        shapejit.plan_copy(shapejit.spec([3, 4], "f32", strides=[0, 1]), shapejit.spec([3, 4], "f32"))


def test_copy_plan_bad_element_size_and_rank():
    with pytest.raises(shapejit.Error):
        shapejit.plan_copy(shapejit.spec([4], "u8", elem_bytes=65), shapejit.spec([4], "u8", elem_bytes=65))
    with pytest.raises(shapejit.Error):
        shapejit.plan_copy(shapejit.spec([1] * 65, "f32"), shapejit.spec([1] * 65, "f32"))


@without_driver
def test_copy_plan_launch_needs_a_gpu_or_matching_arrays():
    plan = attention_permute_plan()
    with pytest.raises(shapejit.DriverUnavailableError):
        plan.launch(1 << 40, 1 << 41)
    with pytest.raises(shapejit.InvalidArgumentError, match="not a CUDA array"):
        plan.launch(object(), 1 << 41)


@without_driver
def test_stream_arguments():
    plan = attention_permute_plan()
    with pytest.raises(shapejit.InvalidArgumentError, match="not a CUDA stream"):
        plan.launch(1 << 40, 1 << 41, stream="s")

    class Stream:
        cuda_stream = 0

    with pytest.raises(shapejit.DriverUnavailableError):
        plan.launch(1 << 40, 1 << 41, stream=Stream())


# ------------------------------------------------------------------------------------------------
# Arrays without a GPU: __cuda_array_interface__ objects and DLPack capsules


class FakeCudaArray:
    """Something that says it is CUDA memory (never dereferenced: launches fail without a GPU)."""

    def __init__(self, shape, typestr, strides=None, ptr=1 << 30):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr,
                                         "strides": strides, "data": (ptr, False), "version": 3}


def test_array_interface_is_read():
    x = FakeCudaArray((4, 6), "<f2", strides=(2, 8))
    plan = shapejit.plan_copy(FakeCudaArray((4, 6), "<f2"), x)
    assert plan.src.strides == (1, 4) and plan.src.dtype == "f16"
    assert shapejit.plan_copy(FakeCudaArray((4,), "<u8"), FakeCudaArray((4,), "<u8")).dst.dtype == "u64"
    neg = FakeCudaArray((4, 6), "<f4", strides=(-24, 4))
    assert shapejit.plan_copy(FakeCudaArray((4, 6), "<f4"), neg).src.strides == (-6, 1)
    opaque = shapejit.plan_copy(FakeCudaArray((3,), "<c8"), FakeCudaArray((3,), "<c8"))
    assert opaque.dst.itemsize == 8


def test_array_interface_errors():
    with pytest.raises(shapejit.InvalidArgumentError, match="multiples"):
        shapejit.plan_copy(FakeCudaArray((4,), "<f4"), FakeCudaArray((4,), "<f4", strides=(6,)))


@without_driver
def test_one_shot_calls_on_arrays_need_outputs_or_a_gpu():
    x = FakeCudaArray((4, 6), "<f4")
    with pytest.raises(shapejit.InvalidArgumentError, match="out= is required"):
        shapejit.permute(x, (1, 0))
    with pytest.raises(shapejit.DriverUnavailableError):
        shapejit.permute(x, (1, 0), out=FakeCudaArray((6, 4), "<f4", ptr=1 << 31))
    with pytest.raises(shapejit.DriverUnavailableError):
        shapejit.copy_(FakeCudaArray((3, 4), "<f4", ptr=1 << 31), FakeCudaArray((4,), "<f4"))
    with pytest.raises(shapejit.InvalidArgumentError, match="broadcast"):
        shapejit.copy_(FakeCudaArray((3, 4), "<f4", ptr=1 << 31), FakeCudaArray((5,), "<f4"))


@pytest.mark.parametrize("dims,match", [((0, 0), "permutation"), ((0,), "permutation"), (("a", 1), "ints")])
def test_permute_dims_are_checked(dims, match):
    with pytest.raises(shapejit.InvalidArgumentError, match=match):
        shapejit.permute(FakeCudaArray((4, 6), "<f4"), dims, out=FakeCudaArray((6, 4), "<f4"))


def test_host_arrays_are_refused():
    a = np.zeros((4, 6), np.float32)
    with pytest.raises(shapejit.InvalidArgumentError, match="not in CUDA memory"):
        shapejit.permute(a, (1, 0), out=np.zeros((6, 4), np.float32))
    with pytest.raises(shapejit.InvalidArgumentError, match="not a CUDA array"):
        shapejit.plan_copy([1, 2], [1, 2])


@pytest.mark.parametrize("dtype,name", [
    (np.int8, "i8"), (np.uint16, "u16"), (np.int32, "i32"), (np.uint64, "u64"), (np.float16, "f16"),
    (np.float32, "f32"), (np.float64, "f64")])
def test_dlpack_capsules_are_read(dtype, name):
    base = np.zeros((5, 7, 3), dtype)
    view = base[1:, ::2].transpose(2, 0, 1)
    ptr, shape, strides, code, elem_bytes, device_type, device_id = _shapejit.dlpack_view(view.__dlpack__())
    assert shape == [3, 4, 4] and device_type == 1
    assert strides == [s // base.itemsize for s in view.strides]
    assert shapejit.DTYPE_NAMES[code] == name and elem_bytes == base.itemsize
    assert ptr == view.__array_interface__["data"][0]


def test_dlpack_opaque_and_bad_capsules():
    _, _, _, code, elem_bytes, _, _ = _shapejit.dlpack_view(np.zeros(3, np.complex64).__dlpack__())
    assert code == -1 and elem_bytes == 8
    with pytest.raises(shapejit.InvalidArgumentError, match="DLPack capsule"):
        _shapejit.dlpack_view(object())


# ------------------------------------------------------------------------------------------------
# Rope plans


def decode_rope_plan(**options):
    q = shapejit.spec([64, 1, 32, 128], "bf16")
    k = shapejit.spec([64, 1, 8, 128], "bf16")
    return shapejit.plan_rope(q, k, cos=shapejit.spec([4096, 64], "f32"),
                              positions=shapejit.spec([64, 1], "i32"), **options)


def test_rope_plan_describe_json_manifest():
    plan = decode_rope_plan()
    text = plan.describe()
    assert "neox" in text and "[64,1,32,128]" in text
    line = plan.manifest_line()
    assert line.startswith("rope --algo neox --dtype bf16") and "--k-heads 8" in line
    doc = json.loads(plan.json())
    assert doc  # a JSON object
    assert shapejit.describe_manifest_line(line).splitlines()[0] == text.splitlines()[0]


@pytest.mark.parametrize("options,word", [
    (dict(style="gptj"), "gptj"), (dict(inverse=True), "inverse"), (dict(rotary_dim=64), "64 of 128"),
    (dict(inplace=True), "")])
def test_rope_plan_options(options, word):
    assert word in decode_rope_plan(**options).describe()


def test_rope_plan_3d_with_offset_and_strided_q():
    qkv = shapejit.spec([16, 48, 64], "f16")  # a fused [seq, q+k+v heads, dhead] buffer
    q = shapejit.TensorSpec((16, 32, 64), qkv.strides, qkv.code)
    k = shapejit.TensorSpec((16, 8, 64), qkv.strides, qkv.code)
    plan = shapejit.plan_rope(q, k, cos=shapejit.spec([128, 32], "f16"), inplace=True)
    assert "[3072,64,1]" in plan.describe()


@pytest.mark.parametrize("q,table,options,match", [
    ([8, 4, 63], [16, 32], {}, None),
    ([8, 64], [16, 32], {}, None),
    ([8, 4, 64], [16, 8], {}, None),
    ([8, 4, 64], [16, 32], dict(rotary_dim=66), None),
    ([8, 4, 64], [16, 32], dict(style="half"), "rope style"),
])
def test_rope_plan_errors(q, table, options, match):
    with pytest.raises(shapejit.InvalidArgumentError, match=match):
        shapejit.plan_rope(shapejit.spec(q, "f16"), cos=shapejit.spec(table, "f32"), **options)


def test_rope_plan_dtype_errors():
    with pytest.raises(shapejit.InvalidArgumentError):
        shapejit.plan_rope(shapejit.spec([8, 4, 64], "i32"), cos=shapejit.spec([16, 32], "f32"))
    with pytest.raises(shapejit.InvalidArgumentError):
        shapejit.plan_rope(shapejit.spec([8, 4, 64], "f16"), cos=shapejit.spec([16, 32], "f32"),
                           positions=shapejit.spec([8], "f32"))
    with pytest.raises(shapejit.InvalidArgumentError):
        shapejit.plan_rope(shapejit.spec([8, 4, 64], "f16"), cos=shapejit.spec([16, 32], "f32"),
                           positions=shapejit.spec([9], "i64"))


@pytest.mark.parametrize("rule,sections,axes", [
    ("sections", [16, 24, 24], 3), ("interleaved", [24, 20, 20], 3), ("blocks", [32, 32], 2)])
def test_rope_plan_multi_axis_positions(rule, sections, axes):
    q, k = shapejit.spec([2, 50, 8, 128], "bf16"), shapejit.spec([2, 50, 2, 128], "bf16")
    plan = shapejit.plan_rope(q, k, cos=shapejit.spec([4096, 64], "f32"),
                              positions=shapejit.spec([axes, 2, 50], "i64"), axis_rule=rule,
                              axis_sections=sections)
    assert f"rule {rule}" in plan.describe()
    line = plan.manifest_line()
    assert f"--axis-rule {rule} --axis-sections {','.join(map(str, sections))}" in line
    assert shapejit.describe_manifest_line(line).splitlines()[0] == plan.describe().splitlines()[0]


@pytest.mark.parametrize("positions,options,match", [
    ([3, 50], dict(axis_rule="mrope", axis_sections=[16, 24, 24]), "not an axis rule"),
    ([3, 50], dict(axis_rule="sections", axis_sections=[16, 24, 20]), "sum to R/2"),
    ([3, 50], dict(), "positions has shape"),
    ([50], dict(axis_sections=[16, 24, 24]), "axis_rule is none"),
])
def test_rope_plan_multi_axis_errors(positions, options, match):
    with pytest.raises(shapejit.InvalidArgumentError, match=match):
        shapejit.plan_rope(shapejit.spec([50, 8, 128], "f16"), cos=shapejit.spec([64, 64], "f32"),
                           positions=shapejit.spec(positions, "i32"), **options)


def cache_plan(**options):
    q, k = shapejit.spec([64, 32, 128], "bf16"), shapejit.spec([64, 8, 128], "bf16")
    codes = options.get("cache_quantize", "none") != "none"
    cache = shapejit.spec([100, 16, 8, 128], "u8" if codes else "bf16")
    options.setdefault("cache_layout", "nhd")
    return shapejit.plan_rope(q, k, cos=shapejit.spec([4096, 64], "f32"), positions=shapejit.spec([64], "i64"),
                              v=k, k_cache=cache, v_cache=cache, slots=shapejit.spec([64], "i32"), **options)


def test_rope_plan_with_a_kv_cache_append():
    plan = cache_plan(inplace=True)
    assert plan.cache is not None and "k_cache:" in plan.describe()
    assert "--kv-cache nhd --slot-dtype i32 --inplace" in plan.manifest_line()
    assert "--cache-dtype fp8-e4m3" in cache_plan(cache_quantize="fp8-e4m3").manifest_line()
    assert json.loads(plan.json())["cache"]["layout"] == "nhd"


@pytest.mark.parametrize("options,match", [
    (dict(cache_layout="paged"), "not a cache layout"),
    (dict(cache_quantize="int4"), "not a cache code"),
    (dict(cache_quantize="int8"), "int8 codes are i8"),
])
def test_rope_plan_cache_errors(options, match):
    with pytest.raises(shapejit.InvalidArgumentError, match=match):
        cache_plan(**options)
    q, k = shapejit.spec([64, 32, 128], "bf16"), shapejit.spec([64, 8, 128], "bf16")
    with pytest.raises(shapejit.InvalidArgumentError, match="needs all four"):
        shapejit.plan_rope(q, k, cos=shapejit.spec([4096, 64], "f32"), cache_layout="nhd", v=k)


def test_rope_cache_plan_launch_checks_its_arguments():
    plan = cache_plan()  # k to the cache only
    p = {name: (i + 1) << 20 for i, name in enumerate(("q", "k", "out", "cos", "sin", "positions", "v", "kc", "vc", "s"))}
    base = dict(cos=p["cos"], sin=p["sin"], positions=p["positions"], out=p["out"])
    with pytest.raises(shapejit.InvalidArgumentError, match="pass v exactly"):
        plan.launch(p["q"], p["k"], **base)
    cache = dict(v=p["v"], k_cache=p["kc"], v_cache=p["vc"], slots=p["s"])
    with pytest.raises(shapejit.InvalidArgumentError, match="cache only"):
        plan.launch(p["q"], p["k"], k_out=p["k"], **base, **cache)
    with pytest.raises(shapejit.InvalidArgumentError, match="k_cache_scale exactly"):
        plan.launch(p["q"], p["k"], k_cache_scale=p["s"], **base, **cache)
    with pytest.raises(shapejit.InvalidArgumentError, match="k_cache_scale exactly"):
        cache_plan(cache_quantize="fp8-e4m3").launch(p["q"], p["k"], **base, **cache)


def test_rope_plan_output_arguments():
    q, cos = shapejit.spec([8, 4, 64], "f16"), shapejit.spec([16, 32], "f32")
    with pytest.raises(shapejit.InvalidArgumentError, match="in-place"):
        shapejit.plan_rope(q, cos=cos, inplace=True, out=q)
    with pytest.raises(shapejit.InvalidArgumentError, match="without k"):
        shapejit.plan_rope(q, cos=cos, k_out=q)
    out = shapejit.spec([8, 4, 64], "f16", strides=[512, 128, 1])
    assert "[512,128,1]" in shapejit.plan_rope(q, cos=cos, out=out).describe()


@without_driver
def test_rope_plan_launch_checks_its_arguments():
    plan = decode_rope_plan()
    ptrs = dict(cos=1 << 22, sin=1 << 23, out=1 << 25, k_out=1 << 26)
    with pytest.raises(shapejit.InvalidArgumentError, match="positions"):
        plan.launch(1 << 20, 1 << 21, **ptrs)
    with pytest.raises(shapejit.InvalidArgumentError, match="k:"):
        plan.launch(1 << 20, positions=1 << 24, **ptrs)
    with pytest.raises(shapejit.InvalidArgumentError, match="out= is required"):
        plan.launch(1 << 20, 1 << 21, cos=1, sin=2, positions=1 << 24)
    with pytest.raises(shapejit.DriverUnavailableError):
        plan.launch(1 << 20, 1 << 21, positions=1 << 24, **ptrs)


@without_driver
def test_rope_one_shot_on_arrays():
    q = FakeCudaArray((8, 4, 64), "<f2", ptr=1 << 30)
    cos = FakeCudaArray((16, 32), "<f4", ptr=1 << 31)
    sin = FakeCudaArray((16, 32), "<f4", ptr=1 << 32)
    with pytest.raises(shapejit.InvalidArgumentError, match="out= is required"):
        shapejit.rope(q, cos=cos, sin=sin)
    with pytest.raises(shapejit.InvalidArgumentError, match="sin"):
        shapejit.rope(q, cos=cos, sin=FakeCudaArray((16, 32), "<f2"), inplace=True)
    with pytest.raises(shapejit.DriverUnavailableError):
        shapejit.rope(q, cos=cos, sin=sin, inplace=True, offset=3)


# ------------------------------------------------------------------------------------------------
# Runtime: offline, record, caches, doctor


def test_offline_switch():
    assert not shapejit.is_offline()
    with shapejit.offline_mode():
        assert shapejit.is_offline()
    assert not shapejit.is_offline()
    shapejit.set_offline(True)
    try:
        assert shapejit.doctor(print_report=False)["offline"]
    finally:
        shapejit.set_offline(False)


def test_record_switch_writes_manifest_lines(tmp_path):
    path = tmp_path / "record.manifest"
    assert shapejit.record_file() is None
    with shapejit.recording(path):
        assert shapejit.record_file() == str(path)
        plan = shapejit.plan_rope(shapejit.spec([3, 5, 6, 32], "f32"),
                                  cos=shapejit.spec([100, 16], "f32"), style="gptj")
    assert shapejit.record_file() is None
    assert path.read_text().splitlines() == [plan.manifest_line()]


def test_cache_helpers(tmp_cache):
    assert shapejit.cache_dir() == str(tmp_cache)
    stats = shapejit.cache_stats()
    assert stats["entries"] == 0 and stats["bytes"] == 0
    assert shapejit.cache_verify(repair=True)["bad"] == 0
    assert shapejit.cache_prune(1)["removed"] == 0
    assert shapejit.cache_clear() == 0
    with pytest.raises(shapejit.InvalidArgumentError):
        shapejit.cache_prune(-1)
    shapejit.set_cache_dir(tmp_cache / "other")
    assert shapejit.cache_dir() == str(tmp_cache / "other")


def test_doctor(capsys):
    info = shapejit.doctor()
    assert set(info) >= {"version", "driver", "nvrtc", "user_cache", "deployment_caches", "offline",
                         "record_file", "counters"}
    out = capsys.readouterr().out
    assert out.startswith(f"shapejit {shapejit.version()}") and "counters:" in out
    assert set(shapejit.counters()) == set(info["counters"])


def test_module_main_prints_the_doctor_report():
    result = subprocess.run([sys.executable, "-m", "shapejit", "doctor"], capture_output=True,
                            text=True, check=True)
    assert result.stdout.startswith("shapejit ")
    assert subprocess.run([sys.executable, "-m", "shapejit", "x"], capture_output=True).returncode == 2


def test_enable_torch_without_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        assert shapejit.enable_torch() is False
    else:
        assert shapejit.enable_torch() is True


# ------------------------------------------------------------------------------------------------
# Hadamard


def sylvester(n):
    h = np.ones((1, 1), dtype=np.int64)
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


@pytest.mark.parametrize("n", [2, 8, 128, 1024])
def test_hadamard_matrix_is_sylvester_for_powers_of_two(n):
    assert np.array_equal(shapejit.hadamard_matrix(n).astype(np.int64), sylvester(n))


@pytest.mark.parametrize("n", [12, 20, 28, 12 * 8, 28 * 4])
def test_hadamard_matrix_of_m_point_sizes_is_symmetric_and_orthogonal(n):
    h = shapejit.hadamard_matrix(n).astype(np.int64)
    assert set(np.unique(h)) == {-1, 1}
    assert np.array_equal(h, h.T)
    assert np.array_equal(h @ h, n * np.eye(n, dtype=np.int64))


def test_hadamard_sizes():
    assert all(shapejit.hadamard_size_supported(n) for n in (2, 4096, 32768, 12, 3072, 20480, 28672))
    assert not any(shapejit.hadamard_size_supported(n) for n in (1, 3, 24 * 3, 65536, 36))
    with pytest.raises(shapejit.InvalidArgumentError, match="not a supported"):
        shapejit.hadamard_matrix(36)


def test_hadamard_plan_describes_itself_and_round_trips_its_line():
    x = shapejit.spec([2, 16, 32, 128], "bf16")
    plan = shapejit.plan_hadamard(x, group=8)
    assert isinstance(plan, shapejit.HadamardPlan)
    assert plan.out.shape == x.shape and plan.out.strides == x.strides and not plan.inplace
    assert plan.describe().startswith("hadamard plan (n = 1024 = 1 x 1024, group 8 x dhead 128")
    assert json.loads(plan.json())["op"] == "hadamard"
    line = plan.manifest_line()
    assert line.startswith("hadamard ") and "--group 8" in line
    assert shapejit.describe_manifest_line(line).splitlines()[0] == plan.describe().splitlines()[0]
    # A [B, H, S, D] tensor passed as its [B, S, H, D] view, transformed in place.
    bhsd = shapejit.spec([2, 32, 16, 128], "f16")
    view = shapejit.TensorSpec((2, 16, 32, 128), (32 * 16 * 128, 128, 16 * 128, 1), bhsd.code, bhsd.elem_bytes)
    in_place = shapejit.plan_hadamard(view, group=4, scale=0.5, inplace=True)
    assert in_place.inplace and in_place.out == view


@pytest.mark.parametrize("shape,dtype,options,error,match", [
    ([2, 8, 6, 64], "bf16", dict(group=4), shapejit.InvalidArgumentError, "divide"),
    ([2, 8, 6, 96], "bf16", dict(group=3), shapejit.InvalidArgumentError, "not a supported size"),
    ([2, 8, 4, 64], "i32", dict(group=2), shapejit.InvalidArgumentError, "dtype"),
    ([64], "f32", dict(), shapejit.InvalidArgumentError, "rank"),
])
def test_hadamard_plan_errors(shape, dtype, options, error, match):
    with pytest.raises(error, match=match):
        shapejit.plan_hadamard(shapejit.spec(shape, dtype), **options)


def test_hadamard_out_must_match_and_in_place_takes_no_out():
    x = shapejit.spec([4, 8, 64], "f32")
    with pytest.raises(shapejit.InvalidArgumentError, match="shape"):
        shapejit.plan_hadamard(x, group=2, out=shapejit.spec([4, 8, 32], "f32"))
    with pytest.raises(shapejit.InvalidArgumentError, match="in-place"):
        shapejit.plan_hadamard(x, group=2, inplace=True, out=shapejit.spec([4, 16, 64], "f32"))
    plan = shapejit.plan_hadamard(x, group=2, inplace=True)
    with pytest.raises(shapejit.InvalidArgumentError, match="in-place"):
        plan.launch(0x1000, 0x2000)
