// hadamard on the host: the matrices, the planner's layouts and errors, the manifest line, the CPU
// reference.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <tuple>

#include "core/convert.hpp"
#include "ops/hadamard/codegen.hpp"
#include "ops/hadamard/impl.hpp"
#include "ops/hadamard/reference.hpp"
#include "ops/registry.hpp"
#include "shapejit/hadamard.hpp"

using namespace shapejit;

namespace {

/// Every supported size: 2^1..2^15, and 12, 20, 28 times 2^0..2^10.
std::vector<std::int64_t> all_sizes() {
  std::vector<std::int64_t> sizes;
  for (std::int64_t n = 2; n <= 32768; n *= 2) sizes.push_back(n);
  for (std::int64_t m : {12, 20, 28})
    for (std::int64_t p = 1; p <= 1024; p *= 2) sizes.push_back(m * p);
  return sizes;
}

void require_error(const std::function<void()>& call, const std::string& part) {
  try {
    call();
  } catch (const Error& e) {
    CAPTURE(e.what());
    CHECK(std::string(e.what()).find(part) != std::string::npos);
    return;
  }
  FAIL("no error; expected one containing: " << part);
}

HadamardDesc desc_of(std::vector<std::int64_t> shape, std::int64_t group, DType t = DType::bf16) {
  HadamardDesc d;
  d.x = TensorDesc{std::move(shape), {}, t};
  d.group = group;
  return d;
}

}  // namespace

TEST_CASE("hadamard: every H_n up to 2048 is symmetric with H H = n I (above 256 on sampled rows)") {
  for (std::int64_t n : all_sizes()) {
    CAPTURE(n);
    REQUIRE(hadamard_size_supported(n));
    if (n > 2048) continue;  // n * n bytes each; the kernels' GPU tests cover the larger sizes
    const std::vector<std::int8_t> h = hadamard_matrix(n);
    bool symmetric = true, orthogonal = true;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n && (n <= 256 || j <= i); ++j) {
        symmetric = symmetric && h[static_cast<std::size_t>(i * n + j)] == h[static_cast<std::size_t>(j * n + i)];
        if (n > 256 && i % 61 != 0) continue;
        std::int64_t dot = 0;
        for (std::int64_t k = 0; k < n; ++k)
          dot += h[static_cast<std::size_t>(i * n + k)] * h[static_cast<std::size_t>(k * n + j)];
        orthogonal = orthogonal && dot == (i == j ? n : 0);
      }
    CHECK(symmetric);
    CHECK(orthogonal);
  }
  // Sylvester ordering: H_2n = [[H_n, H_n], [H_n, -H_n]].
  const std::vector<std::int8_t> h4 = hadamard_matrix(4), h8 = hadamard_matrix(8);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) CHECK(h8[i * 8 + j] == (i >= 4 && j >= 4 ? -1 : 1) * h4[(i % 4) * 4 + j % 4]);
  // m * 2^k: H_m on the outer index.
  const std::vector<std::int8_t> h12 = hadamard_matrix(12), h24 = hadamard_matrix(24);
  for (int i = 0; i < 24; ++i)
    for (int j = 0; j < 24; ++j) CHECK(h24[i * 24 + j] == ((i % 2) & (j % 2) ? -1 : 1) * h12[(i / 2) * 12 + j / 2]);
  for (std::int64_t n : {0, 1, 3, 6, 36, 24576, 65536}) {
    CAPTURE(n);
    CHECK_FALSE(hadamard_size_supported(n));
    require_error([&] { hadamard_matrix(n); }, "not a supported Hadamard size");
  }
}

TEST_CASE("hadamard: layouts split every size evenly, keep values per thread bounded and vectors in a head") {
  for (DType t : {DType::f16, DType::bf16, DType::f32, DType::f64})
    for (std::int64_t n : all_sizes()) {
      if (t == DType::f64 && n > 16384) continue;
      for (std::int64_t head_dim : {n, n / 2}) {
        if (head_dim < 1 || n % head_dim != 0) continue;
        CAPTURE(dtype_name(t));
        CAPTURE(n);
        CAPTURE(head_dim);
        const auto plan = plan::plan_hadamard_data(desc_of({3, n / head_dim * 2, head_dim}, n / head_dim, t));
        for (const plan::HadamardSpec& s : {plan.spec, plan::hadamard_scalar_variant(plan.spec)}) {
          const plan::HadamardFactors f = plan::hadamard_factors(n);
          const std::int64_t values = n / s.threads_per_row;
          CHECK(s.base == f.base);
          CHECK(head_dim % s.vec == 0);
          CHECK(f.pow2 % (static_cast<std::int64_t>(s.threads_per_row) * s.vec) == 0);  // chunks split 2^k evenly
          CHECK(values <= (t == DType::f64 ? 32 : 64));
          CHECK(s.threads_per_row * s.rows_per_block <= 1024);
          CHECK((s.threads_per_row <= 32 || s.rows_per_block == 1));
          CHECK(plan::hadamard_shared_bytes(s) <= 227 * 1024);
          // What include/shapejit/hadamard.hpp promises GPUs of 99 KB a block, prefetching or not.
          if (n <= (t == DType::f64 ? 12288 : 24576)) CHECK(plan::hadamard_shared_bytes(s) <= 99 * 1024);
        }
      }
    }
}

TEST_CASE("hadamard: the planner rejects what it cannot run, naming the argument") {
  require_error([] { plan_hadamard(desc_of({4, 128}, 3)); }, "group is 3 but x has 4 heads");
  require_error([] { plan_hadamard(desc_of({4, 100}, 2)); }, "n = group * dhead = 2 * 100 = 200");
  require_error([] { plan_hadamard(desc_of({4, 100}, 1)); }, "not a supported size");
  require_error([] { plan_hadamard(desc_of({2, 32768}, 1, DType::f64)); }, "f64 transforms go up to n = 16384");
  require_error([] { plan_hadamard(desc_of({128}, 1)); }, "rank 1");
  require_error([] { plan_hadamard(desc_of({1, 1, 1, 1, 1, 2, 128}, 1)); }, "rank 7");
  require_error([] { plan_hadamard(desc_of({4, 128}, 1, DType::i32)); }, "hadamard takes f16, bf16, f32 or f64");
  HadamardDesc d = desc_of({4, 128}, 1);
  d.x.strides = {256, 2};
  require_error([&] { plan_hadamard(d); }, "the dhead stride must be 1");
  d = desc_of({4, 128}, 1);
  d.y = TensorDesc{{4, 64}, {}, DType::bf16};
  require_error([&] { plan_hadamard(d); }, "give y x's shape and dtype");
  d.y = TensorDesc{{4, 128}, {64, 1}, DType::bf16};
  require_error([&] { plan_hadamard(d); }, "make output elements overlap");
  d.y = TensorDesc{{4, 128}, {0, 1}, DType::bf16};
  require_error([&] { plan_hadamard(d); }, "y.strides[0] is 0");
  d = desc_of({4, 128}, 1);
  d.inplace = true;
  d.y = TensorDesc{{4, 128}, {256, 1}, DType::bf16};
  require_error([&] { plan_hadamard(d); }, "but the plan is in place");
  d.y.reset();
  d.x.strides = {0, 1};  // in place, y is x: its rows must not overlap either
  require_error([&] { plan_hadamard(d); }, "x.strides[0] is 0");
  d = desc_of({4, 128}, 1);
  d.scale = std::nan("");
  require_error([&] { plan_hadamard(d); }, "give a finite factor");
  d = desc_of({2, 3, 5, 7, 4, 128}, 1);  // rank 6: four outer dims, none mergeable below
  d.x.strides = {1000000, 200000, 30000, 3000, 300, 1};
  CHECK(plan_hadamard(d).impl().data.spec.row_dims == 5);
}

TEST_CASE("hadamard: plans merge contiguous outer dims, pick vectors from every stride, and describe themselves") {
  HadamardDesc d = desc_of({2, 64, 32, 128}, 4);
  const HadamardPlan contiguous = plan_hadamard(d);
  const plan::HadamardPlanData& c = contiguous.impl().data;
  CHECK(c.spec.row_dims == 1);
  CHECK(c.args.rows == 2 * 64 * 8);
  CHECK(c.spec.vec == 8);
  CHECK(*c.desc.scale == doctest::Approx(1.0 / std::sqrt(512.0)));
  CHECK(contiguous.describe().find("n = 512 = 1 x 512, group 4 x dhead 128, heads back to back") != std::string::npos);
  CHECK(c.spec.group == 1);  // the group's heads are one run of 512 values
  CHECK(c.spec.head_dim == 512);
  CHECK(contiguous.json().find(R"("op": "hadamard", "n": 512)") != std::string::npos);
  CHECK(contiguous.manifest_line() == "hadamard --dtype bf16 --shape 2,64,32,128 --group 4");

  // [B, H, S, D] storage seen as [B, S, H, D] with a head stride of S * D; an odd padded row stride
  // leaves one-value accesses.
  d.x.strides = {64 * 32 * 128, 128, 64 * 128, 1};
  const plan::HadamardPlanData strided = plan_hadamard(d).impl().data;
  CHECK(strided.spec.row_dims == 3);  // group, seq, batch: x steps through them apart
  CHECK(strided.args.x_head_stride == 64 * 128);
  CHECK(strided.spec.group == 4);
  d.x.strides = {64 * 32 * 131, 32 * 131, 131, 1};
  const HadamardPlan padded = plan_hadamard(d);
  CHECK(padded.impl().data.spec.vec == 1);
  CHECK(padded.impl().data.spec.row_dims == 1);  // padded rows still merge
  // Padded heads lie apart: the line keeps them apart too, so that it names the same kernel.
  CHECK(padded.manifest_line() == "hadamard --dtype bf16 --shape 2,64,32,128 --group 4 --vec 1 --split-heads");
  d.x.strides = {64 * 32 * 128, 128, 64 * 128, 1};
  CHECK(plan_hadamard(d).manifest_line() ==
        "hadamard --dtype bf16 --shape 2,64,32,128 --group 4 --row-dims 3 --split-heads");

  // A head stride that no row steps through does not limit the vector.
  HadamardDesc one_head = desc_of({4, 1, 128}, 1);
  one_head.x.strides = {128, 7, 1};
  CHECK(plan_hadamard(one_head).impl().data.spec.vec == 8);

  // The manifest line plans the same kernels from contiguous shapes.
  for (const HadamardPlan& p : {padded, plan_hadamard(d)}) {
    const ops::PlannedLine line = ops::plan_manifest_line(p.manifest_line());
    const auto programs = p.impl().programs();
    REQUIRE(line.programs.size() == programs.size());
    for (std::size_t i = 0; i < programs.size(); ++i) CHECK(line.programs[i].source == programs[i]->source);
  }
}

TEST_CASE("hadamard: f32 and f64 rows across warps prefetch their next rows, four rows a block, in shared memory") {
  const plan::HadamardPlanData f32 = plan_hadamard(desc_of({1100, 1, 4096}, 1, DType::f32)).impl().data;
  CHECK(f32.spec.threads_per_row == 128);
  CHECK(f32.spec.prefetch);
  CHECK(f32.spec.vec == 4);  // 16-byte copies
  // The exchanged row in f32 with a word of padding per 32, then the copied row.
  CHECK(plan::hadamard_shared_bytes(f32.spec) == (4096 + 128) * 4 + 4096 * 4);
  CHECK(plan::hadamard_grid(f32.spec, 1100) == 275);
  CHECK(plan::hadamard_grid(f32.spec, 300) == 264);  // at least 264 blocks where there are rows for them
  CHECK(plan::hadamard_grid(f32.spec, 5) == 5);
  // Its one-value variant (4-byte copies) launches in the same shared memory and grid.
  const plan::HadamardSpec scalar = plan::hadamard_scalar_variant(f32.spec);
  CHECK(scalar.prefetch);
  CHECK(plan::hadamard_shared_bytes(scalar) == plan::hadamard_shared_bytes(f32.spec));
  CHECK(plan::hadamard_grid(scalar, 1100) == 275);

  // Not for 2-byte data, rows of one warp, or copies past 99 KB of shared memory.
  const plan::HadamardSpec bf16 = plan_hadamard(desc_of({1100, 1, 4096}, 1)).impl().data.spec;
  CHECK_FALSE(bf16.prefetch);
  CHECK(plan::hadamard_grid(bf16, 1100) == 1100);
  CHECK(plan::hadamard_shared_bytes(bf16) == (4096 + 128) * 4);
  CHECK_FALSE(plan_hadamard(desc_of({8, 1, 1024}, 1, DType::f32)).impl().data.spec.prefetch);
  // Rows of 2048 stay in one warp of 64 values a thread unless they prefetch across two.
  const plan::HadamardSpec f32_2048 = plan_hadamard(desc_of({8, 1, 2048}, 1, DType::f32)).impl().data.spec;
  CHECK(f32_2048.threads_per_row == 64);
  CHECK(f32_2048.prefetch);
  CHECK(plan_hadamard(desc_of({8, 1, 2048}, 1)).impl().data.spec.threads_per_row == 32);
  const plan::HadamardSpec f64 = plan_hadamard(desc_of({8, 1, 4096}, 1, DType::f64)).impl().data.spec;
  CHECK(f64.prefetch);
  CHECK(plan::hadamard_shared_bytes(f64) == (4096 + 128) * 8 + 4096 * 8);
  CHECK_FALSE(plan_hadamard(desc_of({8, 1, 8192}, 1, DType::f64)).impl().data.spec.prefetch);
  CHECK(plan_hadamard(desc_of({8, 1, 12288}, 1, DType::f32)).impl().data.spec.prefetch);
  // m-point rows that would fill one warp span two and prefetch, with half the vector.
  for (const auto& [n, t, vec] : {std::tuple{20 * 64, DType::f32, 1}, std::tuple{12 * 128, DType::f32, 2},
                                  std::tuple{28 * 64, DType::f32, 1}, std::tuple{12 * 64, DType::f64, 1}}) {
    CAPTURE(n);
    const plan::HadamardSpec s = plan_hadamard(desc_of({8, 1, n}, 1, t)).impl().data.spec;
    CHECK(s.threads_per_row == 64);
    CHECK(s.vec == vec);
    CHECK(s.prefetch);
  }
  CHECK(plan_hadamard(desc_of({8, 1, 20 * 64}, 1)).impl().data.spec.threads_per_row == 32);  // bf16: one warp
  CHECK_FALSE(plan_hadamard(desc_of({8, 1, 16384}, 1, DType::f32)).impl().data.spec.prefetch);
}

TEST_CASE("hadamard: power-of-two rows of 64 values in one warp cross their lanes through shared memory") {
  for (DType t : {DType::bf16, DType::f16}) {
    CAPTURE(dtype_name(t));
    const plan::HadamardSpec s = plan_hadamard(desc_of({8, 1, 2048}, 1, t)).impl().data.spec;
    CHECK(s.threads_per_row == 32);
    CHECK(plan::hadamard_lane_passes(s));
    CHECK(plan::hadamard_exchange_bytes(s) == (2048 + 64) * 4);  // the row in f32, a word of padding per 32
    CHECK(plan::hadamard_shared_bytes(s) == plan::hadamard_exchange_bytes(s));
    const plan::HadamardSpec scalar = plan::hadamard_scalar_variant(s);
    CHECK(scalar.threads_per_row == 32);
    CHECK(plan::hadamard_shared_bytes(scalar) == plan::hadamard_shared_bytes(s));
    for (const plan::HadamardSpec& k : {s, scalar})
      CHECK(codegen::hadamard_program(k, "").source.find("constexpr bool LANE_PASSES = true;") != std::string::npos);
  }
  // Sequence rows padded to 132 in [B, H, S, D] storage: four-value accesses, the same lanes.
  HadamardDesc padded = desc_of({30, 8, 16, 128}, 16);
  padded.x.strides = {16 * 8 * 132, 132, 8 * 132, 1};
  const plan::HadamardSpec four = plan_hadamard(padded).impl().data.spec;
  CHECK(four.vec == 4);
  CHECK(plan::hadamard_lane_passes(four));
  // Rows of 32 values a thread, m-point rows and rows across warps keep their exchange as it was.
  for (const plan::HadamardSpec& s :
       {plan_hadamard(desc_of({8, 1, 1024}, 1)).impl().data.spec,
        plan_hadamard(desc_of({8, 1, 1024}, 1, DType::f32)).impl().data.spec,
        plan_hadamard(desc_of({8, 1, 20 * 64}, 1)).impl().data.spec}) {
    CHECK(s.threads_per_row == 32);
    CHECK_FALSE(plan::hadamard_lane_passes(s));
    CHECK(plan::hadamard_exchange_bytes(s) == 0);
    CHECK(codegen::hadamard_program(s, "").source.find("constexpr bool LANE_PASSES = false;") != std::string::npos);
  }
  const plan::HadamardSpec f32_2048 = plan_hadamard(desc_of({8, 1, 2048}, 1, DType::f32)).impl().data.spec;
  CHECK_FALSE(plan::hadamard_lane_passes(f32_2048));
  CHECK(plan::hadamard_exchange_bytes(f32_2048) == (2048 + 64) * 4);
}

TEST_CASE("hadamard: the reference transform twice with the orthonormal scale gives the input back") {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> dist(-2, 2);
  for (std::int64_t n : {2, 8, 12, 40, 56, 256}) {
    CAPTURE(n);
    HadamardDesc d = desc_of({2, 2, n}, 1, DType::f64);
    const plan::HadamardPlanData plan = plan::plan_hadamard_data(d);
    std::vector<double> x(static_cast<std::size_t>(4 * n));
    for (double& v : x) v = dist(rng);
    for (std::int64_t row = 0; row < 4; ++row) {
      const std::vector<double> in = detail::hadamard_row_inputs(plan, x.data(), row);
      std::vector<double> once(in.size());
      for (std::int64_t i = 0; i < n; ++i) once[static_cast<std::size_t>(i)] = detail::hadamard_reference_output(plan, in, i);
      for (std::int64_t i = 0; i < n; ++i)
        CHECK(detail::hadamard_reference_output(plan, once, i) ==
              doctest::Approx(x[static_cast<std::size_t>(row * n + i)]).epsilon(1e-12));
    }
  }
}
