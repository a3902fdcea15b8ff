#include <doctest/doctest.h>

#include <random>

#include "codegen/render.hpp"
#include "core/spec.hpp"
#include "core/fastdiv.hpp"
#include "jit/driver.hpp"
#include "jit/nvrtc.hpp"
#include "jit/program.hpp"
#include "shapejit/core.hpp"

using namespace shapejit;

TEST_CASE("dtype names, sizes and parsing round-trip") {
  const std::pair<const char*, std::size_t> expected[] = {{"u8", 1}, {"i8", 1},  {"u16", 2}, {"i16", 2},
                                                          {"u32", 4}, {"i32", 4}, {"u64", 8}, {"i64", 8},
                                                          {"f16", 2}, {"bf16", 2}, {"f32", 4}, {"f64", 8}};
  for (auto [name, size] : expected) {
    const auto t = parse_dtype(name);
    REQUIRE(t.has_value());
    CHECK(dtype_name(*t) == name);
    CHECK(dtype_size(*t) == size);
  }
  CHECK_FALSE(parse_dtype("f8").has_value());
  CHECK_FALSE(parse_dtype("").has_value());
  CHECK(dtype_is_float(DType::bf16));
  CHECK_FALSE(dtype_is_float(DType::i64));
}

TEST_CASE("tensor descriptors: contiguous strides, numel, element size") {
  CHECK(contiguous_strides({2, 3, 4}) == std::vector<std::int64_t>{12, 4, 1});
  CHECK(contiguous_strides({}).empty());
  TensorDesc d{{2, 0, 4}, {}, DType::f16};
  CHECK(d.numel() == 0);
  CHECK(d.effective_strides() == std::vector<std::int64_t>{4, 4, 1});
  CHECK(d.element_size() == 2);
  d.elem_bytes = 12;
  CHECK(d.element_size() == 12);
  CHECK(TensorDesc{}.numel() == 1);  // 0-d scalar
}

TEST_CASE("fast division is exact for edge and random values") {
  std::mt19937_64 rng(7);
  std::vector<std::uint32_t> divisors = {1, 2, 3, 5, 7, 10, 641, 65535, 65536, 1u << 31, 0x7fffffffu, 0xffffffffu};
  for (int i = 0; i < 200; ++i) divisors.push_back(static_cast<std::uint32_t>(rng() % 0xffffffffu) + 1);
  for (std::uint32_t d : divisors) {
    const FastDivisor f = make_fast_divisor(d);
    const std::uint32_t edges[] = {0, 1, d - 1, d, d + 1, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu};
    for (std::uint32_t n : edges) CHECK_MESSAGE(fast_div(n, f) == n / d, "n=" << n << " d=" << d);
    for (int j = 0; j < 2000; ++j) {
      const auto n = static_cast<std::uint32_t>(rng());
      REQUIRE(fast_div(n, f) == n / d);
    }
  }
}

TEST_CASE("cache keys depend on source, options and arch, and nothing else") {
  jit::Program a{"probe", "kernel source", {"-DX=1"}, "plan probe"};
  jit::Program b = a;
  b.label = "other label";
  b.manifest_line = "other line";
  CHECK(jit::kernel_key(a, "sm_90") == jit::kernel_key(b, "sm_90"));
  CHECK_FALSE(jit::kernel_key(a, "sm_90") == jit::kernel_key(a, "sm_80"));
  b.source += " ";
  CHECK_FALSE(jit::kernel_key(a, "sm_90") == jit::kernel_key(b, "sm_90"));
  jit::Program c = a;
  c.options = {"-DY=2", "-DX=1"};
  jit::Program d = a;
  d.options = {"-DX=1", "-DY=2"};
  CHECK(jit::kernel_key(c, "sm_90") == jit::kernel_key(d, "sm_90"));  // options are normalized
  CHECK(jit::kernel_key(a, "sm_90").hex().size() == 32);
  jit::Program low = a;
  low.low_register_options = {"-DLOW=1"};  // they choose the cubin where ptxas spills
  CHECK_FALSE(jit::kernel_key(low, "sm_90") == jit::kernel_key(a, "sm_90"));
  jit::Program moved = a;
  moved.options.push_back("-DLOW=1");  // an option is not a low-register option
  CHECK_FALSE(jit::kernel_key(low, "sm_90") == jit::kernel_key(moved, "sm_90"));
}

TEST_CASE("register spills are read from ptxas reports in NVRTC logs") {
  const std::string log =
      "ptxas info    : Compiling entry function 'sj_kernel' for 'sm_90'\n"
      "ptxas info    : Function properties for sj_kernel\n"
      "ptxas         .     232 bytes stack frame, 296 bytes spill stores, 296 bytes spill loads\n"
      "ptxas info    : Function properties for helper\n"
      "ptxas         .     8 bytes stack frame, 12 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 80 registers, used 1 barriers, 16384 bytes smem\n";
  CHECK(jit::spill_store_bytes_in_log(log) == 308);
  CHECK(jit::spill_store_bytes_in_log("ptxas . 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads") == 0);
  // No report: NVRTC served the cubin from its cache, or ptxas was not asked.
  CHECK(!jit::spill_store_bytes_in_log("").has_value());
  CHECK(!jit::spill_store_bytes_in_log("k.cu(3): warning: variable \"x\" was declared "
                                       "but never referenced").has_value());
}

TEST_CASE("rendered source is self-contained: prelude, parameters, template") {
  codegen::CodeParams params;
  params.integer("PROBE_OFFSET", 3).flag("CHECKED", true).type("T", "float").array("EXTENTS", {4, 5});
  const std::string source = codegen::render({"probe.cu"}, params);
  CHECK(source.find("#include") == std::string::npos);
  CHECK(source.find("constexpr long long PROBE_OFFSET = 3LL;") != std::string::npos);
  CHECK(source.find("constexpr bool CHECKED = true;") != std::string::npos);
  CHECK(source.find("typedef float T;") != std::string::npos);
  CHECK(source.find("__device__ constexpr long long EXTENTS[] = {4LL, 5LL, };") != std::string::npos);
  CHECK(source.find("sj_fastdiv") < source.find("sj_kernel"));
  CHECK_THROWS_AS(codegen::render({"no_such_template.cu"}, params), Error);
}

namespace {
#define PROBE_SPEC_FIELDS(X) X(int, tile_a, 64) X(bool, swizzle, true) X(shapejit::DType, data, shapejit::DType::f16)
struct ProbeSpec {
  SHAPEJIT_SPEC_FIELDS(PROBE_SPEC_FIELDS)
};
}  // namespace

TEST_CASE("a spec's bool and integer fields become upper-case parameters; dtype fields are the operator's") {
  codegen::CodeParams params;
  params.fields(ProbeSpec{});
  CHECK(params.text() == "constexpr long long TILE_A = 64LL;\nconstexpr bool SWIZZLE = true;\n");
}

TEST_CASE("without a usable driver, asking for it is a clear error") {
  if (jit::driver_available()) {
    CHECK(jit::driver().version > 0);
    CHECK(jit::driver_unavailable_reason().empty());
  } else {
    CHECK_FALSE(jit::driver_unavailable_reason().empty());
    try {
      jit::driver();
      FAIL("expected driver_unavailable");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::driver_unavailable);
    }
  }
}

extern "C" int shapejit_c_api_check(void);

TEST_CASE("the driver's version reads as major.minor") {
  jit::Driver d;
  d.version = 12080;
  CHECK(jit::driver_version_name(d) == "12.8");
  d.version = 13000;
  CHECK(jit::driver_version_name(d) == "13.0");
}

TEST_CASE("the C headers compile as C, and the C API plans and reports errors without a GPU") {
  CHECK(shapejit_c_api_check() == 0);
}
