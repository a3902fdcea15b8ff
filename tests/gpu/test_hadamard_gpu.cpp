// hadamard kernels against the dense float64 CPU reference: every size class and dtype, strided and
// padded views, in place, misaligned pointers (the scalar variant), and H(H(x)) = x.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/convert.hpp"
#include "gpu/gpu.hpp"
#include "ops/hadamard/impl.hpp"
#include "ops/hadamard/reference.hpp"
#include "shapejit/hadamard.hpp"

using namespace shapejit;

namespace {

/// Elements a view with non-negative strides reaches past its start.
std::int64_t span(const TensorDesc& d) {
  const auto st = d.effective_strides();
  std::int64_t n = 1;
  for (std::size_t i = 0; i < d.shape.size(); ++i) n += (d.shape[i] - 1) * st[i];
  return n;
}

struct Run {
  std::int64_t checked = 0, bad = 0;
};

/// Plans `desc`, launches it on random x (at element offset `x_offset` of its buffer) into a
/// poisoned y, and compares every output (sampled rows and outputs for large n; with `every_row`,
/// `values_per_row` sampled outputs of every row) with the reference. Elements of y's buffer outside
/// its view must keep the poison.
Run check_plan(const HadamardDesc& desc, std::int64_t x_offset, std::uint64_t seed, bool every_row = false,
               std::int64_t values_per_row = 1024) {
  const HadamardPlan plan = plan_hadamard(desc);
  const plan::HadamardPlanData& data = plan.impl().data;
  const DType t = desc.x.dtype;
  const std::size_t e = dtype_size(t);
  const std::int64_t x_elems = span(desc.x) + x_offset;
  std::vector<std::uint8_t> x_host(static_cast<std::size_t>(x_elems) * e);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-2, 2);
  for (std::int64_t i = 0; i < x_elems; ++i) detail::store_from_double(x_host.data(), t, i, dist(rng));
  test::DeviceBuffer x(x_host.size());
  x.upload(x_host.data(), x_host.size());
  const TensorDesc& yd = *data.desc.y;
  const std::int64_t y_elems = desc.inplace ? x_elems : span(yd) + x_offset;
  test::DeviceBuffer y_own(desc.inplace ? 0 : static_cast<std::size_t>(y_elems) * e);
  if (!desc.inplace) y_own.fill(0xff);
  char* x_ptr = static_cast<char*>(x.get()) + x_offset * static_cast<std::int64_t>(e);
  char* y_ptr = desc.inplace ? x_ptr : static_cast<char*>(y_own.get()) + x_offset * static_cast<std::int64_t>(e);
  plan.launch({x_ptr, y_ptr});
  std::vector<std::uint8_t> y_host(static_cast<std::size_t>(y_elems) * e);
  (desc.inplace ? x : y_own).download(y_host.data(), y_host.size());

  const std::int64_t n = plan::hadamard_n(data.spec);
  const std::int64_t rows = data.args.rows;
  const std::vector<std::int64_t> y_strides = yd.effective_strides();
  std::vector<bool> written(static_cast<std::size_t>(y_elems), false);
  Run run;
  std::mt19937_64 pick(seed + 1);
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::vector<std::int64_t> at = detail::hadamard_row_offsets(data, y_strides, row);
    for (std::int64_t o : at) written[static_cast<std::size_t>(o + x_offset)] = true;
    if (!every_row && n > 1024 && row % std::max<std::int64_t>(1, rows / 3) != 0) continue;
    const std::vector<double> in = detail::hadamard_row_inputs(data, x_host.data() + x_offset * e, row);
    double l1 = 0;
    for (double v : in) l1 += std::fabs(v);
    for (std::int64_t k = 0; k < std::min(n, values_per_row); ++k) {
      const std::int64_t i =
          n <= values_per_row ? k : static_cast<std::int64_t>(pick() % static_cast<std::uint64_t>(n));
      const double want = detail::hadamard_reference_output(data, in, i);
      const double got = detail::load_as_double(y_host.data(), t, at[static_cast<std::size_t>(i)] + x_offset);
      const double tolerance = test::ulp(t, want) + (t == DType::f64 ? 1e-13 : 4e-6) * l1 * *data.desc.scale;
      ++run.checked;
      if (!(std::fabs(got - want) <= tolerance)) {
        if (run.bad++ < 5) MESSAGE("row " << row << " value " << i << ": got " << got << ", want " << want);
      }
    }
  }
  if (!desc.inplace)
    for (std::int64_t i = 0; i < y_elems; ++i)
      if (!written[static_cast<std::size_t>(i)]) {
        std::uint64_t bits = 0;
        std::memcpy(&bits, y_host.data() + i * static_cast<std::int64_t>(e), e);
        ++run.checked;
        if (bits != (e == 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * e)) - 1) && run.bad++ < 5)
          MESSAGE("y element " << i << " outside the view was written");
      }
  return run;
}

HadamardDesc desc_of(std::vector<std::int64_t> shape, std::int64_t group, DType t) {
  HadamardDesc d;
  d.x = TensorDesc{std::move(shape), {}, t};
  d.group = group;
  return d;
}

}  // namespace

TEST_CASE("hadamard: every size class and dtype against the dense reference" * test::gpu_only()) {
  std::uint64_t seed = 1;
  for (DType t : {DType::bf16, DType::f16, DType::f32, DType::f64}) {
    // Rows across warps that store from the layout of their last pass: 4096 (2- and 4-byte data), 2048
    // (f64), 3072, 5120 and 14336.
    std::vector<std::int64_t> sizes = {2, 4, 16, 64, 128, 512, 2048, 4096, 8192, 32768, 12, 48, 96, 768, 3072,
                                       12288, 20, 80, 1280, 5120, 20480, 28, 112, 3584, 14336, 28672};
    for (std::int64_t n : sizes) {
      if (t == DType::f64 && n > 16384) continue;
      const std::int64_t group = n >= 256 && n % 128 == 0 ? n / 128 : 1;
      CAPTURE(dtype_name(t));
      CAPTURE(n);
      const Run run = check_plan(desc_of({3, 2 * group, n / group}, group, t), 0, seed++);
      CHECK(run.checked > 0);
      CHECK(run.bad == 0);
    }
  }
}

TEST_CASE("hadamard: [B, H, S, D] views, padded outputs, in place and misaligned pointers" * test::gpu_only()) {
  for (DType t : {DType::bf16, DType::f32}) {
    CAPTURE(dtype_name(t));
    // [B, H, S, D] storage seen as [B, S, H, D]; groups of 4 heads, n = 256.
    HadamardDesc d = desc_of({2, 5, 8, 64}, 4, t);
    d.x.strides = {8 * 5 * 64, 64, 5 * 64, 1};
    d.y = TensorDesc{{2, 5, 8, 64}, {5 * 8 * 72, 8 * 72, 72, 1}, t};  // rows padded to 72
    Run run = check_plan(d, 0, 11);
    CHECK(run.bad == 0);
    CHECK(run.checked > 2 * 5 * 8 * 64);
    // An odd head stride: one-value accesses planned.
    d.x.strides = {5 * 8 * 67, 8 * 67, 67, 1};
    CHECK(plan_hadamard(d).impl().data.spec.vec == 1);
    run = check_plan(d, 0, 12);
    CHECK(run.bad == 0);
    // In place, and on pointers one element off the vector alignment (the scalar variant).
    d = desc_of({4, 3, 16, 128}, 16, t);
    d.inplace = true;
    CHECK(check_plan(d, 0, 13).bad == 0);
    CHECK(check_plan(d, 1, 14).bad == 0);
    d.inplace = false;
    CHECK(check_plan(d, 1, 15).bad == 0);
    d = desc_of({2, 28, 64}, 28, t);  // n = 1792 = 28 * 64; misaligned, its scalar variant spans two warps
    CHECK(check_plan(d, 1, 16).bad == 0);
    d = desc_of({3, 32, 128}, 32, t);  // n = 4096; misaligned, one-value bit passes across four warps
    CHECK(check_plan(d, 1, 17).bad == 0);
  }
}

TEST_CASE("hadamard: f32 and f64 blocks that prefetch their next rows, on every row, strided, in place, misaligned" *
          test::gpu_only()) {
  // Grids of a quarter of the rows (at least 264 blocks): blocks take 4 rows, or 2 to 4 where the
  // rows do not split evenly, so some copy past the last row and skip it.
  struct Shape {
    std::vector<std::int64_t> shape;
    std::int64_t group;
    DType t;
  };
  for (const Shape& c : {Shape{{1100, 1, 4096}, 1, DType::f32}, Shape{{700, 1, 12 * 256}, 1, DType::f32},
                         Shape{{40, 16, 32, 128}, 32, DType::f32}, Shape{{1000, 1, 28 * 128}, 1, DType::f32},
                         Shape{{1200, 1, 2048}, 1, DType::f32}, Shape{{600, 1, 2048}, 1, DType::f64},
                         Shape{{700, 1, 1024}, 1, DType::f64}, Shape{{700, 1, 20 * 64}, 1, DType::f64},
                         Shape{{900, 1, 20 * 64}, 1, DType::f32}, Shape{{900, 1, 12 * 128}, 1, DType::f32},
                         Shape{{700, 1, 12 * 64}, 1, DType::f64}}) {
    CAPTURE(dtype_name(c.t));
    CAPTURE(c.shape.back() * c.group);  // n
    HadamardDesc d = desc_of(c.shape, c.group, c.t);
    if (c.shape.size() == 4) d.x.strides = {16 * 32 * 128, 128, 16 * 128, 1};  // [B, H, S, D] storage
    REQUIRE(plan_hadamard(d).impl().data.spec.prefetch);
    Run run = check_plan(d, 0, 21, true, 32);
    CHECK(run.bad == 0);
    CHECK(run.checked >= 600 * 32);
    d.inplace = true;
    CHECK(check_plan(d, 0, 22, true, 32).bad == 0);
    CHECK(check_plan(d, 1, 23, true, 32).bad == 0);  // one element off: one-value copies
  }
}

TEST_CASE("hadamard: 2-byte rows of one warp that cross their lanes in shared memory, every row, strided, in place, "
          "misaligned" * test::gpu_only()) {
  for (DType t : {DType::bf16, DType::f16}) {
    CAPTURE(dtype_name(t));
    HadamardDesc d = desc_of({30, 8, 16, 128}, 16, t);  // n = 2048 over 16 heads of [B, H, S, D] storage
    d.x.strides = {16 * 8 * 128, 128, 8 * 128, 1};
    REQUIRE(plan::hadamard_lane_passes(plan_hadamard(d).impl().data.spec));
    Run run = check_plan(d, 0, 31, true, 32);
    CHECK(run.bad == 0);
    CHECK(run.checked >= 30 * 8 * 32);
    d.inplace = true;
    CHECK(check_plan(d, 0, 32, true, 32).bad == 0);
    CHECK(check_plan(d, 1, 33, true, 32).bad == 0);  // one element off: the one-value variant
    d = desc_of({50, 1, 2048}, 1, t);
    CHECK(check_plan(d, 0, 34, true, 64).bad == 0);
    d = desc_of({30, 8, 16, 128}, 16, t);  // sequence rows padded to 132: four-value accesses
    d.x.strides = {16 * 8 * 132, 132, 8 * 132, 1};
    const plan::HadamardSpec four = plan_hadamard(d).impl().data.spec;
    REQUIRE(four.vec == 4);
    REQUIRE(plan::hadamard_lane_passes(four));
    CHECK(check_plan(d, 0, 35, true, 32).bad == 0);
  }
}

TEST_CASE("hadamard: H(H(x)) = x with the orthonormal scale, in place" * test::gpu_only()) {
  for (std::int64_t n : {256, 4096, 12 * 64, 32768}) {
    CAPTURE(n);
    HadamardDesc d = desc_of({5, n}, 1, DType::f32);
    d.inplace = true;
    const HadamardPlan plan = plan_hadamard(d);
    std::vector<float> host(static_cast<std::size_t>(5 * n));
    std::mt19937_64 rng(static_cast<std::uint64_t>(n));
    std::uniform_real_distribution<float> dist(-2, 2);
    for (float& v : host) v = dist(rng);
    test::DeviceBuffer x(host.size() * sizeof(float));
    x.upload(host.data(), host.size() * sizeof(float));
    plan.launch({x.get(), x.get()});
    plan.launch({x.get(), x.get()});
    std::vector<float> back(host.size());
    x.download(back.data(), back.size() * sizeof(float));
    double worst = 0;
    for (std::size_t i = 0; i < host.size(); ++i) worst = std::max(worst, std::fabs(double(back[i]) - host[i]));
    CHECK(worst < 1e-4);
  }
}
