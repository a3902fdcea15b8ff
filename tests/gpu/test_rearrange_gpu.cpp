// rearrange on the GPU: bit-exact against the CPU reference, destination poisoned first and compared
// whole (so padding and gaps must stay untouched): the shared case list in several element types,
// random views with element sizes 1 to 32 bytes at misaligned pointers, exact mode, more than 2^31
// elements, the C API and streams.
#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "../host/rearrange_executor.hpp"
#include "../test_support.hpp"
#include "gpu.hpp"
#include "jit/kernel_cache.hpp"
#include "jit/kernel_registry.hpp"
#include "jit/nvrtc.hpp"
#include "ops/rearrange/codegen.hpp"
#include "shapejit/rearrange.h"
#include "shapejit/rearrange.hpp"

using namespace shapejit;

namespace {

constexpr std::uint8_t kPoison = 0xa5;

// A device allocation around a view's byte range, with 64 guard bytes on each side and a base
// pointer offset by `misalign` bytes from a 256-byte boundary.
struct DeviceView {
  std::size_t base_offset;
  test::DeviceBuffer buffer;
  DeviceView(ByteRange range, std::size_t misalign)
      : base_offset((static_cast<std::size_t>(-range.lo) + 64 + 255) / 256 * 256 + misalign),
        buffer(base_offset + static_cast<std::size_t>(range.hi) + 64) {}
  std::uint8_t* base() const { return static_cast<std::uint8_t*>(buffer.get()) + base_offset; }
};

// Runs `launch(dst_base, src_base)` on device buffers around plan `p`'s byte ranges, with base
// pointers `src_misalign` and `dst_misalign` bytes past 256-byte boundaries, and dst <- src on the
// CPU; "" when every byte of dst's buffer matches.
std::string compare_with_cpu(const plan::RearrangePlanData& p, const TensorDesc& dst, const TensorDesc& src,
                             std::size_t src_misalign, std::size_t dst_misalign, std::uint64_t seed,
                             const std::function<void(std::uint8_t*, const std::uint8_t*)>& launch) {
  DeviceView in(p.src_range, src_misalign), out(p.dst_range, dst_misalign);
  const std::vector<std::uint8_t> host_in = test::random_bytes(in.buffer.bytes(), seed);
  in.buffer.upload(host_in.data(), host_in.size());
  out.buffer.fill(kPoison);
  std::vector<std::uint8_t> expected(out.buffer.bytes(), kPoison), got(out.buffer.bytes());
  test::reference_rearrange(expected.data() + out.base_offset, dst, host_in.data() + in.base_offset, src);
  launch(out.base(), in.base());
  out.buffer.download(got.data(), got.size());
  if (got == expected) return "";
  const auto at = std::mismatch(got.begin(), got.end(), expected.begin()).first - got.begin();
  std::ostringstream why;
  why << "first wrong byte at " << (at - static_cast<std::ptrdiff_t>(out.base_offset)) << " from dst (got "
      << int(got[static_cast<std::size_t>(at)]) << ", expected " << int(expected[static_cast<std::size_t>(at)])
      << "), src misalign " << src_misalign << ", dst misalign " << dst_misalign << "\n";
  return why.str();
}

// Runs dst <- src on the GPU and on the CPU; "" when every byte of dst's buffer matches.
std::string check_on_gpu(const TensorDesc& dst, const TensorDesc& src, std::size_t src_misalign,
                         std::size_t dst_misalign, std::uint64_t seed, RearrangeOptions options = {}) {
  const RearrangePlan plan = plan_rearrange(dst, src, options);
  const plan::RearrangePlanData& p = plan.impl().data;
  if (p.empty) {
    plan.launch(nullptr, nullptr);
    return "";
  }
  const std::string failure = compare_with_cpu(p, dst, src, src_misalign, dst_misalign, seed,
                                               [&](std::uint8_t* d, const std::uint8_t* s) { plan.launch(d, s); });
  return failure.empty() ? failure : failure + plan.describe();
}

std::vector<std::int64_t> parse_list(const std::string& text) {
  std::vector<std::int64_t> values;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (item.find_first_not_of(" ") != std::string::npos) values.push_back(std::stoll(item));
  return values;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

struct CaseLine {
  std::vector<std::int64_t> shape, src_strides, dst_strides;
};

std::vector<CaseLine> read_cases() {
  std::ifstream file;
  for (const char* path : {"tests/cases/rearrange-tests.txt", "../tests/cases/rearrange-tests.txt"}) {
    file.open(path);
    if (file) break;
    file.clear();
  }
  REQUIRE_MESSAGE(file.is_open(), "tests/cases/rearrange-tests.txt not found (run from the repository root)");
  std::vector<CaseLine> cases;
  for (std::string line; std::getline(file, line);) {
    if (trim(line).empty() || trim(line)[0] == '#') continue;
    std::stringstream fields(line);
    std::string shape, src, dst;
    std::getline(fields, shape, '|');
    std::getline(fields, src, '|');
    std::getline(fields, dst, '|');
    cases.push_back({parse_list(shape), trim(src) == "-" ? std::vector<std::int64_t>{} : parse_list(src),
                     trim(dst) == "-" ? std::vector<std::int64_t>{} : parse_list(dst)});
  }
  return cases;
}

struct PermuteCase {
  std::vector<std::int64_t> shape;
  std::vector<int> perm;
  DType dtype;
};

// The variant a plan launches on base pointers whose addresses OR'ed together are `address`.
plan::RearrangeVariant launched_variant(const RearrangePlan& plan, std::uintptr_t address) {
  return plan::variant_for_pointers(plan::with_every_level(plan.impl().data), address);
}

// Whether a variant comes from the tiled template (the transpose and packed families).
bool tiled_family(const plan::RearrangeSpec& s) {
  return s.family == plan::RearrangeFamily::transpose || s.family == plan::RearrangeFamily::packed;
}

// The family of a case's plan at 16-byte aligned pointers.
plan::RearrangeFamily aligned_family(const PermuteCase& c) {
  const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
  return launched_variant(plan_rearrange({view.shape, {}, c.dtype, 0}, view), 0).spec.family;
}

// The (source, destination) pointer misalignments in bytes each case runs at: none, one element,
// and three (source) or two (destination) elements.
std::vector<std::pair<std::size_t, std::size_t>> misalignments(std::size_t elem) {
  std::vector<std::pair<std::size_t, std::size_t>> shifts;
  for (std::size_t src_shift : {std::size_t{0}, elem, 3 * elem})
    for (std::size_t dst_shift : {std::size_t{0}, elem, 2 * elem}) shifts.emplace_back(src_shift, dst_shift);
  return shifts;
}

// Checks each case on the GPU at every misalignment; returns how many launches' variants `taken` holds for.
int launches_where(const std::vector<PermuteCase>& cases, std::uint64_t seed,
                   const std::function<bool(const plan::RearrangeSpec&)>& taken) {
  int count = 0;
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const TensorDesc dst{view.shape, {}, c.dtype, 0};
    const RearrangePlan plan = plan_rearrange(dst, view);
    for (const auto& [src_shift, dst_shift] : misalignments(dtype_size(c.dtype))) {
      count += taken(launched_variant(plan, src_shift | dst_shift).spec);
      const std::string failure = check_on_gpu(dst, view, src_shift, dst_shift, ++seed);
      CHECK_MESSAGE(failure.empty(), failure);
    }
  }
  return count;
}

int launches_on_families(const std::vector<PermuteCase>& cases, std::initializer_list<plan::RearrangeFamily> families,
                         std::uint64_t seed) {
  return launches_where(cases, seed, [&](const plan::RearrangeSpec& s) {
    return std::find(families.begin(), families.end(), s.family) != families.end();
  });
}

// Checks that each case's launch on aligned pointers takes `taken`, then launches every case at every
// misalignment (others may take other tiles) and checks that at least the aligned ones took it.
void check_aligned_launches(const std::vector<PermuteCase>& cases, std::uint64_t seed,
                            const std::function<bool(const plan::RearrangeSpec&)>& taken, const char* what) {
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    CHECK(taken(launched_variant(plan_rearrange({view.shape, {}, c.dtype, 0}, view), 0).spec));
  }
  const int count = launches_where(cases, seed, taken);
  MESSAGE(count << " of " << cases.size() * 9 << " launches on " << std::string(what));
  CHECK(count >= static_cast<int>(cases.size()));
}

// Launches every case as launches_on_families does and checks that at least half of the launches
// (all of them with `every`) ran on `families`, named `what` in the output.
void check_launch_share(const std::vector<PermuteCase>& cases, std::initializer_list<plan::RearrangeFamily> families,
                        std::uint64_t seed, const char* what, bool every = false) {
  const int launches = static_cast<int>(cases.size()) * 9;
  const int taken = launches_on_families(cases, families, seed);
  MESSAGE(taken << " of " << launches << " launches on " << std::string(what));
  if (every)
    CHECK(taken == launches);
  else
    CHECK(taken >= launches / 2);
}

// Launches variant `v` of plan `p` (a tuning candidate, which the plan need not launch) on the GPU
// as compare_with_cpu does.
std::string check_variant_on_gpu(const plan::RearrangePlanData& p, const plan::RearrangeVariant& v,
                                 const TensorDesc& dst, const TensorDesc& src, std::size_t src_misalign,
                                 std::size_t dst_misalign, std::uint64_t seed) {
  const jit::KernelHandle& kernel = jit::registered_kernel(plan::rearrange_key(v.spec, v.args),
                                                           [&] { return codegen::rearrange_program(v, ""); });
  auto launch = [&](std::uint8_t* out, const std::uint8_t* in) {
    void* d = out + p.elements.dst_offset * p.elem_bytes;
    const void* s = in + p.elements.src_offset * p.elem_bytes;
    plan::RearrangeKernelArgs args = v.args;
    void* params[] = {&d, &s, &args};
    kernel.launch(plan::launch_dims(v), nullptr, params);
  };
  return compare_with_cpu(p, dst, src, src_misalign, dst_misalign, seed, launch);
}

// Calls visit(plan, candidate, dst, src) once for each distinct tuning candidate that `taken` holds
// for, of each case's plan (measured planning may launch any of them).
void for_each_candidate(const std::vector<PermuteCase>& cases,
                        const std::function<bool(const plan::RearrangeSpec&)>& taken,
                        const std::function<void(const plan::RearrangePlanData&, const plan::RearrangeVariant&,
                                                 const TensorDesc&, const TensorDesc&)>& visit) {
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const TensorDesc dst{view.shape, {}, c.dtype, 0};
    const plan::RearrangePlanData p = plan::plan_rearrange_data(dst, view, {});
    std::set<std::string> seen;
    for (const plan::RearrangeVariant& v : plan::tuning_candidates(p)) {
      if (!taken(v.spec) || !seen.insert(plan::candidate_name(v)).second) continue;
      INFO("shape " << c.shape.size() << " dims, " << dtype_name(c.dtype) << ", candidate " << plan::candidate_name(v));
      visit(p, v, dst, view);
    }
  }
}

}  // namespace

TEST_CASE("rearrange: every case of the case list, in u8, f16, bf16, f32, f64 and 16-byte elements" *
          test::gpu_only()) {
  const std::vector<CaseLine> cases = read_cases();
  REQUIRE(cases.size() >= 12);
  const std::pair<DType, int> types[] = {{DType::u8, 0},  {DType::f16, 0}, {DType::bf16, 0},
                                         {DType::f32, 0}, {DType::f64, 0}, {DType::u8, 16}};
  std::uint64_t seed = 1;
  for (const CaseLine& c : cases)
    for (auto [dtype, elem] : types) {
      const TensorDesc src{c.shape, c.src_strides, dtype, elem}, dst{c.shape, c.dst_strides, dtype, elem};
      const std::string failure = check_on_gpu(dst, src, 0, 0, ++seed);
      CHECK_MESSAGE(failure.empty(), failure);
      // The same case from pointers offset by one element.
      const std::size_t e = dst.element_size();
      const std::string shifted = check_on_gpu(dst, src, e, e, ++seed);
      CHECK_MESSAGE(shifted.empty(), shifted);
    }
}

TEST_CASE("rearrange: random views, element sizes 1 to 32 bytes, misaligned pointers, exact mode" *
          test::gpu_only()) {
  std::mt19937_64 rng(42);
  auto pick = [&rng](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  const int sizes[] = {1, 2, 3, 4, 8, 12, 16, 32};
  for (int i = 0; i < 240; ++i) {
    const int elem = sizes[i % 8];
    const int rank = 1 + pick(7);
    std::vector<std::int64_t> shape;
    std::int64_t volume = 1;
    for (int k = 0; k < rank; ++k) {
      std::int64_t e = pick(3) == 0 ? 1 + pick(4) : 2 + pick(pick(2) ? 40 : 300);
      if (volume * e > (1 << 20) / elem) e = 1;
      volume *= e;
      shape.push_back(e);
    }
    // Source: a permuted, padded, sliced view with some reversed and some broadcast dims.
    std::vector<int> order(static_cast<std::size_t>(rank));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::int64_t> src_strides(shape.size()), dst_strides;
    std::int64_t running = 1;
    for (std::size_t k = order.size(); k-- > 0;) {
      const auto d = static_cast<std::size_t>(order[k]);
      const int step = pick(5) == 0 ? 2 : 1;
      src_strides[d] = pick(6) == 0 ? 0 : running * step * (pick(5) == 0 ? -1 : 1);
      running *= (shape[d] + (pick(4) == 0 ? 3 : 0)) * step;
    }
    if (pick(3) == 0) {  // a padded, partly reversed destination
      dst_strides.resize(shape.size());
      running = 1;
      for (std::size_t k = shape.size(); k-- > 0;) {
        dst_strides[k] = running * (pick(6) == 0 ? -1 : 1);
        running *= shape[k] + pick(3);
      }
    }
    const TensorDesc src{shape, src_strides, DType::u8, elem}, dst{shape, dst_strides, DType::u8, elem};
    const std::size_t misalign[] = {0, 1, 2, 4, 8, static_cast<std::size_t>(elem)};
    RearrangeOptions options;
    options.exact = i % 10 == 0;
    INFO("random case " << i);
    const std::string failure =
        check_on_gpu(dst, src, misalign[pick(6)], misalign[pick(6)], static_cast<std::uint64_t>(i) + 100, options);
    CHECK_MESSAGE(failure.empty(), failure);
  }
}

TEST_CASE("rearrange: high-rank tiny extents, wide transposes and channel moves" * test::gpu_only()) {
  struct Case {
    std::vector<std::int64_t> shape;
    std::vector<int> perm;
    DType dtype;
  };
  std::vector<int> reversed(20);
  for (int i = 0; i < 20; ++i) reversed[static_cast<std::size_t>(i)] = 19 - i;
  std::vector<int> rotate(13);
  for (int i = 0; i < 13; ++i) rotate[static_cast<std::size_t>(i)] = (i + 1) % 13;
  const Case cases[] = {
      {std::vector<std::int64_t>(20, 2), reversed, DType::f32},
      {std::vector<std::int64_t>(13, 3), rotate, DType::f16},
      {{2000, 2000}, {1, 0}, DType::u8},
      {{1031, 2053}, {1, 0}, DType::f16},
      {{8, 3, 64, 64}, {0, 2, 3, 1}, DType::f16},
      {{8, 64, 64, 3}, {0, 3, 1, 2}, DType::u8},
      {{16, 128, 8, 64}, {0, 2, 1, 3}, DType::bf16},
      {{32, 8, 16, 64, 32}, {4, 1, 3, 0, 2}, DType::f16},
      {{333, 65, 7}, {2, 0, 1}, DType::f64},
  };
  std::uint64_t seed = 7;
  for (const Case& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const TensorDesc dst{view.shape, {}, c.dtype, 0};
    for (std::size_t shift : {std::size_t{0}, dtype_size(c.dtype)}) {
      const std::string failure = check_on_gpu(dst, view, shift, 0, ++seed);
      CHECK_MESSAGE(failure.empty(), failure);
    }
    RearrangeOptions exact;
    exact.exact = true;
    const std::string failure = check_on_gpu(dst, view, 0, 0, ++seed, exact);
    CHECK_MESSAGE(failure.empty(), failure);
  }
}

TEST_CASE("rearrange: tiles of 4-byte units storing 8- or 4-byte vectors, with A two or four times as long, at every "
          "pointer misalignment" * test::gpu_only()) {
  struct Case {
    std::vector<std::int64_t> shape;
    std::vector<int> perm;
    int tile_a, tile_b;  // with pointers aligned to 16 bytes
  };
  // Destination rows of 190 units (8-byte stores), of 13 x 29 units (single units) and of 70 x 5 units
  // (8-byte stores over two dims), B's 67, 33 and 65 units split evenly. (Single-unit stores over one
  // A dim store skewed 16-byte vectors: the case of skewed stores below.)
  const Case cases[] = {{{3, 190, 67}, {0, 2, 1}, 128, 24},
                        {{29, 7, 13, 33}, {3, 1, 0, 2}, 128, 12},
                        {{3, 3, 70, 2, 4, 5, 65}, {1, 4, 0, 6, 3, 5, 2}, 128, 24}};
  std::uint64_t seed = 4099;
  for (const Case& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, DType::f32, 0}, c.perm);
    const TensorDesc dst{view.shape, {}, DType::f32, 0};
    const RearrangePlan plan = plan_rearrange(dst, view);
    const plan::RearrangeSpec& aligned = launched_variant(plan, 0).spec;
    CHECK(aligned.vec_a < 4);
    CHECK(aligned.tile_a == c.tile_a);
    CHECK(aligned.tile_b == c.tile_b);
    for (std::size_t src_shift : {std::size_t{0}, std::size_t{4}, std::size_t{8}})
      for (std::size_t dst_shift : {std::size_t{0}, std::size_t{4}, std::size_t{8}}) {
        const std::string failure = check_on_gpu(dst, view, src_shift, dst_shift, ++seed);
        CHECK_MESSAGE(failure.empty(), failure);
      }
  }
}

TEST_CASE("rearrange: odd row pitches take tiles of skewed 16-byte stores (4-byte units) or words of two (2-byte "
          "units loading single units) at every pointer misalignment" * test::gpu_only()) {
  struct Case {
    std::vector<std::int64_t> shape;
    std::vector<int> perm;
    DType dtype;
  };
  const Case cases[] = {
      {{1021, 1029}, {1, 0}, DType::f32}, {{3, 301, 517}, {0, 2, 1}, DType::f32}, {{1031, 2053}, {1, 0}, DType::f16},
      {{917, 455}, {1, 0}, DType::bf16},  {{2001, 999}, {1, 0}, DType::i16},      {{252, 252}, {1, 0}, DType::f32},
  };
  std::uint64_t seed = 8191;
  for (const Case& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const TensorDesc dst{view.shape, {}, c.dtype, 0};
    const std::size_t elem = dtype_size(c.dtype);
    for (const auto& [src_shift, dst_shift] : misalignments(elem)) {
      // 252 x 252 f32 has pitches of 1008 bytes: skewed stores only where a pointer is misaligned for
      // 8-byte vectors.
      const auto address = static_cast<std::uintptr_t>(src_shift | dst_shift);
      const bool skewed = c.shape[0] != 252 || address % 8 != 0;
      const RearrangePlan plan = plan_rearrange(dst, view);
      const plan::RearrangeSpec& spec = launched_variant(plan, address).spec;
      if (elem == 2)
        CHECK(spec.family == plan::RearrangeFamily::words);
      else
        CHECK((spec.family == plan::RearrangeFamily::transpose && spec.skew_store) == skewed);
      const std::string failure = check_on_gpu(dst, view, src_shift, dst_shift, ++seed);
      CHECK_MESSAGE(failure.empty(), failure);
    }
  }
}

TEST_CASE("rearrange: tiles of 2- and 4-byte units whose destination rows sit at odd places store skewed 16-byte "
          "vectors, at every pointer misalignment" * test::gpu_only()) {
  // Odd destination pitches over 16- and 8-byte loads, odd pitches on both sides, B over two dims, and
  // f16 over 4-byte loads, a 2-D transpose and an A tile of 80 units beside B over two dims.
  // Also the lines other cases held before: f32 [545, 3, 26, 18] (A twice as long), f16 [1029, 1022]
  // and [6002, 130] (words of two).
  const std::vector<PermuteCase> cases = {
      {{445, 132}, {1, 0}, DType::f32},        {{445, 130}, {1, 0}, DType::f32},
      {{301, 397}, {1, 0}, DType::f32},        {{5, 287, 20, 41}, {0, 3, 2, 1}, DType::f32},
      {{301, 398}, {1, 0}, DType::f16},        {{3, 150, 67, 22}, {2, 0, 3, 1}, DType::f16},
      {{545, 3, 26, 18}, {3, 2, 1, 0}, DType::f32}, {{1029, 1022}, {1, 0}, DType::f16},
      {{6002, 130}, {1, 0}, DType::f16},
  };
  auto skewed_stores = [](const plan::RearrangeSpec& s) { return s.skew_store && s.vec_a * s.unit_bytes == 16; };
  check_aligned_launches(cases, 6007, skewed_stores, "skewed 16-byte stores");
}

TEST_CASE("rearrange: tiles whose destination runs sit at odd places store aligned 16-byte vectors shifted out of "
          "the staged tile, at every pointer misalignment" * test::gpu_only()) {
  // A's chain of 21 f16 units passing B's first dim (runs of 273 units); tiles spanning A whose runs
  // continue into B's first dims (39 x 54, 63 x 54, 49 x 10, 35 x 7 bytes, f16 35 x 41 units), or
  // through B whole (34 x 176 and 54 x 256 bytes, with a partial last tile along B).
  const std::vector<PermuteCase> cases = {
      {{16, 21, 400, 13}, {2, 0, 3, 1}, DType::f16},
      {{5, 39, 50, 18, 4, 2, 27}, {3, 0, 4, 2, 5, 6, 1}, DType::u8},
      {{5, 2, 8, 3, 63, 2, 2, 54}, {1, 3, 2, 5, 6, 0, 7, 4}, DType::u8},
      {{5, 27, 4, 49, 2, 16, 2, 10}, {4, 1, 6, 0, 5, 2, 7, 3}, DType::u8},
      {{5, 2, 2, 35, 83, 12, 4, 7}, {1, 4, 0, 2, 6, 5, 7, 3}, DType::u8},
      {{8, 35, 19, 10, 2, 41}, {0, 4, 3, 2, 5, 1}, DType::f16},
      {{8, 20, 34, 515}, {1, 0, 3, 2}, DType::u8},
      {{2, 7, 23, 54, 595}, {1, 0, 2, 4, 3}, DType::u8},
  };
  auto skewed_runs = [](const plan::RearrangeSpec& s) { return s.skew_runs && s.store_linear * s.unit_bytes == 16; };
  check_aligned_launches(cases, 6011, skewed_runs, "skewed runs");
  // The aligned plans' kernels at every destination misalignment (a plan launches them on aligned
  // pointers only).
  std::uint64_t seed = 6101;
  int launched = 0;
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const TensorDesc dst{view.shape, {}, c.dtype, 0};
    const plan::RearrangePlanData p = plan::plan_rearrange_data(dst, view, {});
    const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 16);
    if (!skewed_runs(v.spec)) continue;  // failed above
    for (std::size_t dst_shift = dtype_size(c.dtype); dst_shift < 16; dst_shift += dtype_size(c.dtype)) {
      const std::string failure = check_variant_on_gpu(p, v, dst, view, 0, dst_shift, ++seed);
      CHECK_MESSAGE(failure.empty(), "destination misaligned by " << dst_shift << " bytes: " << failure);
      ++launched;
    }
  }
  CHECK(launched >= 60);
}

TEST_CASE("rearrange: u8 transposes with odd pitches take word tiles at every pointer misalignment" *
          test::gpu_only()) {
  const std::vector<PermuteCase> cases = {
      {{575, 1972}, {1, 0}, DType::u8},     {{1029, 1021}, {1, 0}, DType::u8},     {{200, 1031}, {1, 0}, DType::u8},
      {{3, 301, 517}, {0, 2, 1}, DType::u8}, {{65, 7, 1249, 154}, {3, 2, 0, 1}, DType::u8}, {{4099, 65}, {1, 0}, DType::u8},
  };
  check_launch_share(cases, {plan::RearrangeFamily::words}, 4099, "word tiles");
}

TEST_CASE("rearrange: u8 word tiles store rows of 18 to 31 words, by whole-row lanes or by consecutive words, "
          "and long rows in 16-byte vectors, at every pointer misalignment" * test::gpu_only()) {
  // Destination rows of 18 and 19 words (consecutive threads on consecutive words), 26 words
  // (whole-row lanes, 6 idle), 31 words with 68 and 76 rows per tile of 256 threads (a ragged last
  // pass of whole-row lanes); rows of 3001 units stored in 16-byte vectors, and of 1040 units, at
  // 16-byte pointers aligned to them.
  const std::vector<PermuteCase> cases = {
      {{135, 2999}, {1, 0}, DType::u8}, {{70, 3001}, {1, 0}, DType::u8}, {{100, 3001}, {1, 0}, DType::u8},
      {{1001, 68}, {1, 0}, DType::u8},  {{999, 76}, {1, 0}, DType::u8},  {{3001, 68}, {1, 0}, DType::u8},
      {{1040, 1031}, {1, 0}, DType::u8},
  };
  std::set<int> row_words;
  bool ragged_256 = false, vector_stores = false, aligned_vector_stores = false;
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const plan::RearrangePlanData data =
        plan::with_every_level(plan_rearrange({view.shape, {}, c.dtype, 0}, view).impl().data);
    for (const plan::RearrangeVariant& v : data.variants) {
      if (v.spec.family != plan::RearrangeFamily::words) continue;
      vector_stores = vector_stores || v.spec.store_words == 4;
      aligned_vector_stores = aligned_vector_stores || (v.spec.store_words == 4 && !v.spec.skew_store);
      if (v.spec.store_words != 1) continue;
      row_words.insert(v.spec.tile_a / 4);
      ragged_256 = ragged_256 || (v.spec.threads == 256 && v.spec.tile_b % 8 != 0);
    }
  }
  CHECK(row_words.count(18) == 1);
  CHECK(row_words.count(19) == 1);
  CHECK(row_words.count(26) == 1);
  CHECK(row_words.count(31) == 1);
  CHECK(ragged_256);
  CHECK(vector_stores);
  CHECK(aligned_vector_stores);
  check_launch_share(cases, {plan::RearrangeFamily::words}, 2999, "word tiles");
}

TEST_CASE("rearrange: u8 transposes whose groups span several dims take word tiles over them" * test::gpu_only()) {
  // A = 5 x 61 in dst; B = 37 x 3 x 5 in src; A = 13 x 3 x 12 with outer dims; A = 9 x 8 beside a
  // long B. Each spans tiles inside B (A's rows alone checked) and edge tiles along B.
  const std::vector<PermuteCase> cases = {
      {{5, 61, 1037}, {2, 1, 0}, DType::u8},
      {{531, 5, 3, 37}, {2, 1, 3, 0}, DType::u8},
      {{7, 5, 2, 12, 3, 43, 13}, {5, 6, 4, 3, 1, 2, 0}, DType::u8},
      {{359, 9, 8, 565}, {1, 3, 0, 2}, DType::u8},
  };
  int composite = 0;
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const plan::RearrangeVariant v = launched_variant(plan_rearrange({view.shape, {}, c.dtype, 0}, view), 0);
    composite += v.spec.family == plan::RearrangeFamily::words && v.spec.dims_a + v.spec.dims_b > 2;
  }
  CHECK(composite == static_cast<int>(cases.size()));
  check_launch_share(cases, {plan::RearrangeFamily::words}, 8191, "word tiles", true);
}

TEST_CASE("rearrange: f16 transposes that fixed tiles would store one unit at a time take words of two, or tiles "
          "four times as long along A, at every pointer misalignment" * test::gpu_only()) {
  // Odd destination pitches over odd source pitches, plain and over composite groups (A = 5 x 61, A =
  // 49 x 19 in dst; B = 37 x 3 in src). (Over even source pitches, [1029, 1022] and [6002, 130], they
  // store skewed 16-byte vectors since: the case of skewed stores runs them.)
  const std::vector<PermuteCase> words = {
      {{1029, 1021}, {1, 0}, DType::f16},
      {{5, 61, 1037}, {2, 1, 0}, DType::f16},
      {{3, 49, 19, 37}, {0, 3, 2, 1}, DType::f16},
      {{531, 5, 3, 37}, {2, 1, 3, 0}, DType::f16},
  };
  for (const PermuteCase& c : words) CHECK(aligned_family(c) == plan::RearrangeFamily::words);
  check_launch_share(words, {plan::RearrangeFamily::words}, 6151, "word tiles", true);
  // Tiles four times as long along A (narrow_store_aspect) at aligned pointers, word tiles at some
  // misaligned ones: single-unit stores over an outer dim, and pairs from what were 64 x 128 tiles.
  const std::vector<PermuteCase> longer = {
      {{97, 38, 3879}, {2, 1, 0}, DType::f16},
      {{6, 342, 386}, {0, 2, 1}, DType::f16},
      {{3, 270, 2, 226}, {3, 0, 2, 1}, DType::f16},
  };
  int word_launches = 0;
  for (const PermuteCase& c : longer) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const RearrangePlan plan = plan_rearrange({view.shape, {}, c.dtype, 0}, view);
    const plan::RearrangeSpec spec = launched_variant(plan, 0).spec;
    CHECK(tiled_family(spec));
    CHECK(spec.tile_a >= 128);
    for (const auto& [src_shift, dst_shift] : misalignments(dtype_size(c.dtype)))
      word_launches += launched_variant(plan, src_shift | dst_shift).spec.family == plan::RearrangeFamily::words;
  }
  CHECK(word_launches > 0);
  check_launch_share(longer,
                     {plan::RearrangeFamily::words, plan::RearrangeFamily::transpose, plan::RearrangeFamily::packed},
                     6161, "word or fixed tiles", true);
  // A of one 64-unit dim cannot grow: at 4-byte pointers its 64 x 128 tile of pairs takes word tiles,
  // aligned on both sides (wants_word_tiles).
  const std::vector<PermuteCase> fixed_a = {{{7, 64, 1000}, {0, 2, 1}, DType::f16}};
  const TensorDesc view = permuted({fixed_a[0].shape, {}, DType::f16, 0}, fixed_a[0].perm);
  const plan::RearrangeSpec at_words = launched_variant(plan_rearrange({view.shape, {}, DType::f16, 0}, view), 4).spec;
  CHECK(at_words.family == plan::RearrangeFamily::words);
  CHECK_FALSE(at_words.skew_load);
  CHECK_FALSE(at_words.skew_store);
  check_launch_share(fixed_a, {plan::RearrangeFamily::words, plan::RearrangeFamily::transpose}, 6171,
                     "word or fixed tiles", true);
}

TEST_CASE("rearrange: small whole tiles of many small dims take slab dims, at every pointer misalignment" *
          test::gpu_only()) {
  const std::vector<PermuteCase> cases = {
      {{4, 5, 4, 6, 6, 4, 6, 2, 4, 2}, {6, 1, 2, 0, 8, 4, 3, 5, 9, 7}, DType::u8},
      {{2, 3, 2, 6, 2, 3, 2, 3, 4, 6, 5}, {3, 5, 0, 7, 6, 10, 9, 4, 1, 8, 2}, DType::u8},
      {{3, 7, 3, 6, 6, 2, 2, 4, 5, 4, 2}, {3, 7, 0, 9, 1, 5, 10, 6, 4, 2, 8}, DType::u8},
      {{2, 5, 6, 4, 2, 4, 2, 2, 4, 5}, {5, 1, 0, 6, 9, 4, 7, 8, 3, 2}, DType::f16},
      {{3, 3, 3, 6, 7, 3, 2, 4, 4}, {7, 0, 3, 1, 5, 6, 2, 8, 4}, DType::bf16},
      {{3, 7, 6, 3, 4, 3, 2, 5, 6, 2}, {7, 1, 8, 3, 4, 0, 2, 9, 5, 6}, DType::f32},
      {{6, 3, 2, 3, 5, 2, 4, 5, 7, 5}, {4, 5, 6, 0, 1, 3, 9, 8, 7, 2}, DType::f64},
  };
  int slabs = 0;
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    slabs += launched_variant(plan_rearrange({view.shape, {}, c.dtype, 0}, view), 0).spec.b_chain > 0;
  }
  MESSAGE(slabs << " of " << cases.size() << " cases take slab dims at aligned pointers");
  CHECK(slabs >= static_cast<int>(cases.size()) - 1);
  check_launch_share(cases, {plan::RearrangeFamily::packed}, 6151, "packed tiles");
}

TEST_CASE("rearrange: tiles whose destination chain passes B's first dims, at every pointer misalignment" *
          test::gpu_only()) {
  const std::vector<PermuteCase> cases = {
      {{7, 4, 2, 6, 3, 8, 33, 5}, {3, 6, 5, 0, 2, 1, 7, 4}, DType::f16},
      {{7, 4, 2, 6, 3, 8, 33, 5}, {3, 6, 5, 0, 2, 1, 7, 4}, DType::f32},
      {{9, 8, 3, 2, 8, 7, 11}, {4, 5, 2, 0, 1, 6, 3}, DType::u8},
      {{2, 13, 11, 2, 9, 17, 2}, {4, 1, 3, 5, 2, 6, 0}, DType::u8},
      {{6, 11, 13, 2, 13, 8, 2, 2}, {0, 6, 5, 4, 1, 2, 7, 3}, DType::bf16},
      {{35, 4, 2, 36, 3, 40, 3, 5}, {3, 6, 5, 0, 2, 1, 7, 4}, DType::f16},
  };
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const plan::RearrangeVariant v = launched_variant(plan_rearrange({view.shape, {}, c.dtype, 0}, view), 0);
    CHECK(v.spec.family == plan::RearrangeFamily::packed);
    CHECK(v.spec.a_pass > 1);
  }
  check_launch_share(cases, {plan::RearrangeFamily::packed}, 8151, "packed tiles");
}

TEST_CASE("rearrange: tiles whose source chain passes A's first dims, at every pointer misalignment" *
          test::gpu_only()) {
  const std::vector<PermuteCase> cases = {
      {{18, 2, 2, 3, 5, 4, 3, 3, 24, 2, 2, 2}, {1, 8, 11, 2, 9, 4, 3, 5, 0, 6, 10, 7}, DType::f64},
      {{3, 4, 3, 2, 2, 8, 8, 10, 3, 3, 2, 3, 2, 2, 3}, {4, 11, 9, 14, 5, 10, 1, 0, 8, 13, 6, 7, 3, 2, 12}, DType::f32},
      {{2, 2, 2, 6, 11, 7, 2, 2, 4, 10, 2, 8, 2, 3, 2}, {0, 11, 10, 9, 13, 5, 8, 4, 7, 6, 14, 1, 3, 12, 2}, DType::f16},
      {{4, 5, 5, 2, 2, 3, 6, 2, 4, 9, 2, 13, 3, 2, 2}, {4, 1, 7, 6, 3, 8, 11, 0, 14, 5, 9, 10, 2, 13, 12}, DType::bf16},
      {{3, 13, 4, 7, 18, 5, 2, 2}, {5, 4, 7, 1, 0, 2, 6, 3}, DType::u8},
      {{2, 2, 24, 18, 22, 3, 3, 2, 3, 20, 2, 2}, {9, 7, 0, 3, 8, 11, 1, 4, 2, 5, 10, 6}, DType::u8},
      // B's first dim of 2 or 3 units, its chain passing more A units than a tile side.
      {{7, 18, 4, 9, 3, 2}, {5, 2, 0, 4, 1, 3}, DType::u8},
      {{20, 5, 7, 9, 11, 3}, {5, 2, 3, 1, 4, 0}, DType::u8},
      {{6, 5, 18, 8, 11, 2}, {3, 0, 5, 1, 4, 2}, DType::f16},
      {{4, 18, 5, 20, 6, 2}, {5, 2, 3, 0, 4, 1}, DType::f32},
  };
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const plan::RearrangeVariant v = launched_variant(plan_rearrange({view.shape, {}, c.dtype, 0}, view), 0);
    // An A dim continues B's source-contiguous units (the host executor test checks the whole chain).
    const bool passes = std::any_of(v.args.dim, v.args.dim + v.spec.dims_a,
                                    [&](const plan::KernelDim& d) { return d.src_stride == v.spec.b_chain; });
    CHECK(v.spec.family == plan::RearrangeFamily::packed);
    CHECK(passes);
    CHECK(v.spec.dims_b >= 2);
  }
  check_launch_share(cases, {plan::RearrangeFamily::packed}, 7151, "packed tiles");
}

TEST_CASE("rearrange: single-unit loads of rows at odd pitches are funnel-shifted out of aligned vectors (skewed "
          "loads), at every pointer misalignment" *
          test::gpu_only()) {
  // Odd source pitches and odd B extents: each source row starts at its own misalignment, and the
  // tiles at a row's end read past it into the next.
  const std::vector<PermuteCase> cases = {
      {{81, 20001}, {1, 0}, DType::u8},
      {{9, 115001}, {1, 0}, DType::u8},
      {{1201, 4, 7119}, {0, 2, 1}, DType::u8},
      {{23, 30001}, {1, 0}, DType::f16},
      {{13, 31, 790, 53}, {0, 3, 2, 1}, DType::f16},
      {{37, 47, 46, 5, 21, 21}, {1, 0, 5, 3, 2, 4}, DType::f16},
      // Composite groups whose last pass of micro-tiles leaves lanes idle: rows of 3 micro-tiles
      // along B (both aligned vectors loaded), and of 16 over a composite B that tiles split (the next
      // vector taken from the next lane, or read late at a row's or a warp's end).
      {{7, 33, 2, 16, 2, 46, 7, 35}, {2, 6, 3, 0, 7, 4, 1, 5}, DType::f16},
      {{40, 2, 36, 35, 5, 4, 33, 3}, {4, 0, 1, 7, 2, 6, 5, 3}, DType::u8},
      {{38, 13, 5, 17, 2, 17, 13, 3}, {5, 6, 2, 3, 4, 1, 7, 0}, DType::u8},
  };
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    CHECK(launched_variant(plan_rearrange({view.shape, {}, c.dtype, 0}, view), 0).spec.skew_load);
  }
  const int launches = static_cast<int>(cases.size()) * 9;
  int shuffled = 0, both_loaded = 0;  // skewed launches by how a row's next aligned vector arrives
  const int skewed = launches_where(cases, 7301, [&](const plan::RearrangeSpec& s) {
    if (s.skew_load) ++(s.tile_b / s.vec_b >= 8 ? shuffled : both_loaded);
    return s.skew_load;
  });
  MESSAGE(skewed << " of " << launches << " launches with skewed loads, " << shuffled
                 << " of them taking the next vector from the next lane");
  CHECK(skewed >= launches / 2);
  CHECK(shuffled > 0);
  CHECK(both_loaded > 0);
}

TEST_CASE("rearrange: tiles storing word vectors over a whole one-dim B that no word vector divides round B up to "
          "skewed vectors, exact at every pointer misalignment" *
          test::gpu_only()) {
  // B of 7 f16 units and of 47, 41 and 19 bytes: the micro-tile at B's end reads into the next row.
  const std::vector<PermuteCase> cases = {
      {{6, 15, 4, 65, 7}, {4, 2, 0, 3, 1}, DType::f16},
      {{9, 5, 2, 42, 16, 6, 47}, {6, 4, 2, 1, 3, 5, 0}, DType::u8},
      {{164, 13, 3, 2, 33, 41}, {2, 5, 3, 0, 1, 4}, DType::u8},
      {{10, 45, 6, 2, 21, 2, 4, 19}, {5, 0, 7, 3, 2, 1, 6, 4}, DType::u8},
  };
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const plan::RearrangeVariant v = launched_variant(plan_rearrange({view.shape, {}, c.dtype, 0}, view), 0);
    CHECK((v.spec.skew_load && v.spec.tile_b > v.args.extent_b));
  }
  // Misaligned pointers may plan other tiles; the aligned launches are the rounded ones checked above.
  const int skewed = launches_where(cases, 7411, [](const plan::RearrangeSpec& s) { return s.skew_load && s.bounds; });
  MESSAGE(skewed << " of " << cases.size() * 9 << " launches on skewed tiles with bounds");
  CHECK(skewed >= static_cast<int>(cases.size()));
}

TEST_CASE("rearrange: skewed-load tiles among the tuning candidates, rows of 4 and 8 bytes of 1-byte units and of "
          "4, 8 and 16 bytes of 2-byte units, are exact at four source misalignments" *
          test::gpu_only()) {
  // Measured planning may launch any candidate, among them skewed rows that default plans of
  // contiguous tensors seldom take (4-byte rows come mostly from strided views). Only the loads are
  // skewed, so the destination stays aligned as the top-level candidates were planned.
  const std::vector<PermuteCase> cases = {
      {{9, 36, 3, 3, 60, 5}, {4, 1, 0, 2, 5, 3}, DType::u8},  // rows of 4 bytes
      {{81, 20001}, {1, 0}, DType::u8},                       // 8
      {{13367, 10}, {1, 0}, DType::f16},                      // 4
      {{11699, 12}, {1, 0}, DType::f16},                      // 8
      {{81, 2001}, {1, 0}, DType::f16},                       // 16
  };
  std::uint64_t seed = 7401;
  std::set<std::pair<int, int>> kinds;  // (unit bytes, row bytes) of the skewed tiles launched
  int launches = 0;
  const auto skewed_tile = [](const plan::RearrangeSpec& s) {
    return tiled_family(s) && s.skew_load;
  };
  for_each_candidate(cases, skewed_tile, [&](const auto& p, const auto& v, const TensorDesc& dst, const TensorDesc& view) {
    const std::size_t unit = static_cast<std::size_t>(v.spec.unit_bytes);
    for (std::size_t src_shift : {std::size_t{0}, unit, 3 * unit, 7 * unit}) {
      const std::string failure = check_variant_on_gpu(p, v, dst, view, src_shift, 0, ++seed);
      CHECK_MESSAGE(failure.empty(), failure);
      ++launches;
    }
    kinds.insert({v.spec.unit_bytes, v.spec.vec_b * v.spec.unit_bytes});
  });
  MESSAGE(launches << " launches of skewed-load candidates");
  for (const auto& [unit, row] : {std::pair{1, 4}, std::pair{1, 8}, std::pair{2, 4}, std::pair{2, 8}, std::pair{2, 16}})
    CHECK_MESSAGE(kinds.count({unit, row}) == 1, "a skewed tile of " << row << "-byte rows of " << unit << "-byte units");
}

TEST_CASE("rearrange: the baked planned kernel among the tuning candidates, of every family the cases plan, is "
          "exact" *
          test::gpu_only()) {
  // Measured planning also times the planned kernel with extents and strides baked in, and may
  // launch it: one case per family the planner takes here, at aligned pointers (as it was planned).
  const std::vector<PermuteCase> cases = {
      {{316, 3221}, {1, 0}, DType::u8},                               // words
      {{44, 9, 8, 2, 47, 2, 5, 55}, {2, 6, 5, 3, 4, 0, 7, 1}, DType::u8},  // packed
      {{35, 7, 150, 133, 2, 4, 3}, {2, 5, 0, 1, 4, 3, 6}, DType::u8},  // runs
      {{3056, 1471, 34}, {1, 0, 2}, DType::f16},                      // segments
      {{1793, 1114}, {1, 0}, DType::f32},                             // transpose
      {{3, 10272, 649}, {1, 0, 2}, DType::f64},                       // row
  };
  std::uint64_t seed = 9101;
  std::set<plan::RearrangeFamily> families;
  for_each_candidate(cases, [](const plan::RearrangeSpec& s) { return s.exact; },
                     [&](const auto& p, const auto& v, const TensorDesc& dst, const TensorDesc& view) {
                       const std::string failure = check_variant_on_gpu(p, v, dst, view, 0, 0, ++seed);
                       CHECK_MESSAGE(failure.empty(), failure);
                       families.insert(v.spec.family);
                     });
  CHECK(families.size() == cases.size());
}

TEST_CASE("rearrange: skewed loads with 64-bit indices, source rows an odd pitch apart over 2 billion units, are "
          "exact" *
          test::gpu_only()) {
  // A transposing view whose source rows lie so far apart that the span takes 64-bit indices (the
  // planner switches past 2^30 units) while the elements stay few (the source buffer holds the whole
  // span).
  const struct {
    std::int64_t rows, row_length, pitch;
    DType dtype;
  } cases[] = {{81, 20001, 26512145, DType::u8}, {23, 30001, 93368657, DType::f16}};
  std::uint64_t seed = 7501;
  for (const auto& c : cases) {
    const TensorDesc view{{c.row_length, c.rows}, {1, c.pitch}, c.dtype, 0};
    const TensorDesc dst{view.shape, {}, c.dtype, 0};
    const RearrangePlan plan = plan_rearrange(dst, view);
    // Aligned, and 2 bytes off (pointers aligned to 1 byte take word tiles or rows).
    for (std::size_t src_shift : {std::size_t{0}, std::size_t{2}}) {
      const plan::RearrangeSpec s = launched_variant(plan, src_shift).spec;
      CHECK(tiled_family(s));
      CHECK(s.skew_load);
      CHECK(s.index64);
      const std::string failure = check_on_gpu(dst, view, src_shift, 0, ++seed);
      CHECK_MESSAGE(failure.empty(), failure);
    }
  }
}

TEST_CASE("rearrange: linear stores over runs of A and B's first dims, from fixed and per-tile B tables, at every "
          "pointer misalignment" *
          test::gpu_only()) {
  // f16 [150, 218, 3, 2]: a composite B group that is one destination run, its offset from B's table.
  const std::vector<PermuteCase> cases = {
      {{15, 26, 3, 2, 37, 32}, {4, 0, 2, 1, 5, 3}, DType::u8},
      {{150, 218, 3, 2}, {0, 1, 3, 2}, DType::f16},
      {{6, 4, 3, 38, 31, 60, 2}, {4, 3, 0, 5, 6, 1, 2}, DType::u8},
      {{41, 15, 30, 50, 4}, {3, 2, 1, 4, 0}, DType::u8},
      {{26, 45, 2, 35, 4}, {3, 1, 2, 4, 0}, DType::f16},
      {{10, 18, 27, 30, 8}, {1, 3, 2, 4, 0}, DType::bf16},
      {{2, 5, 13, 2, 10, 35, 3, 4}, {3, 5, 0, 6, 4, 2, 7, 1}, DType::f32},
      {{2, 15, 7, 2, 3, 109, 4}, {5, 0, 3, 2, 1, 6, 4}, DType::f64},
      {{5, 3, 2, 2, 3, 6, 4, 2, 2, 7, 5, 3, 2, 4, 4}, {6, 11, 12, 1, 8, 2, 7, 5, 3, 4, 0, 9, 14, 13, 10}, DType::u8},
  };
  int linear = 0, short_runs = 0, composite_one_run = 0, per_tile_tables = 0;
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const plan::RearrangeSpec s = launched_variant(plan_rearrange({view.shape, {}, c.dtype, 0}, view), 0).spec;
    linear += s.store_linear > 0;
    short_runs += s.store_linear > 0 && s.store_run < s.tile_b;
    composite_one_run += s.store_linear > 0 && s.store_run == s.tile_b && s.dims_b > 1;
    per_tile_tables += s.store_linear > 0 && s.store_run < s.tile_b && !s.fixed_b;
  }
  CHECK(linear == static_cast<int>(cases.size()));
  CHECK(short_runs == 8);
  CHECK(composite_one_run == 1);
  CHECK(per_tile_tables == 3);
  check_launch_share(cases, {plan::RearrangeFamily::packed}, 8151, "packed tiles");
}

TEST_CASE("rearrange: linear stores whose store vectors rotate in shared memory, at every pointer misalignment" *
          test::gpu_only()) {
  // A passing B's first units (tiles of 56 and 28 A units, f16 and bf16), rank 15 (u8, f16), one run per tile
  // (f16 [52, 932, 333]).
  const std::vector<PermuteCase> cases = {
      {{2, 28, 7, 5, 32, 9, 2}, {3, 5, 4, 1, 0, 6, 2}, DType::f16},
      {{3, 28, 7, 3, 32, 9, 2}, {3, 5, 4, 1, 0, 6, 2}, DType::bf16},
      {{2, 2, 7, 2, 2, 2, 3, 4, 2, 2, 3, 2, 4, 2, 8}, {13, 4, 6, 8, 7, 12, 9, 3, 0, 11, 14, 1, 5, 10, 2}, DType::u8},
      {{2, 3, 2, 3, 2, 2, 2, 4, 2, 7, 2, 5, 2, 5, 4}, {13, 8, 10, 2, 12, 4, 5, 1, 0, 6, 3, 11, 14, 9, 7}, DType::f16},
      {{52, 932, 333}, {1, 2, 0}, DType::f16},
  };
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const plan::RearrangeSpec s = launched_variant(plan_rearrange({view.shape, {}, c.dtype, 0}, view), 0).spec;
    CHECK(s.rotate_span > 0);
  }
  check_launch_share(cases, {plan::RearrangeFamily::packed}, 8161, "packed tiles");
}

TEST_CASE("rearrange: linear loads over runs of B and A's first dims, from fixed and per-tile A tables, at every "
          "pointer misalignment" *
          test::gpu_only()) {
  const std::vector<PermuteCase> cases = {
      {{7, 3, 10, 9, 5, 4, 10}, {6, 2, 3, 1, 4, 0, 5}, DType::u8},
      {{9, 4, 11, 11, 4, 7, 5}, {5, 3, 6, 2, 0, 1, 4}, DType::u8},
      {{11, 3, 4, 10, 11, 6, 11}, {4, 6, 1, 0, 3, 2, 5}, DType::u8},
      {{3, 10, 3, 6, 3, 6, 9, 7}, {1, 7, 4, 6, 0, 3, 2, 5}, DType::f16},
      {{11, 3, 4, 10, 11, 6, 11}, {4, 6, 1, 0, 3, 2, 5}, DType::f16},
      {{3, 9, 5, 5, 5, 3, 10, 7}, {3, 7, 5, 0, 1, 2, 4, 6}, DType::bf16},
      {{9, 11, 4, 9, 10, 3, 5}, {1, 6, 3, 5, 0, 2, 4}, DType::f16},
      {{11, 3, 4, 10, 11, 6, 11}, {4, 6, 1, 0, 3, 2, 5}, DType::bf16},
  };
  int short_runs = 0, per_tile_tables = 0;
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const plan::RearrangeSpec s = launched_variant(plan_rearrange({view.shape, {}, c.dtype, 0}, view), 0).spec;
    short_runs += s.load_linear > 0 && s.load_run < s.tile_a;
    per_tile_tables += s.load_linear > 0 && s.load_run < s.tile_a && !s.fixed_a;
  }
  CHECK(short_runs == static_cast<int>(cases.size()));
  CHECK(per_tile_tables == 3);
  check_launch_share(cases, {plan::RearrangeFamily::packed}, 8161, "packed tiles");
}

TEST_CASE("rearrange: slab tiles grown by a piece of a long outer dim store their runs linearly, at every pointer "
          "misalignment" *
          test::gpu_only()) {
  const std::vector<PermuteCase> cases = {
      {{96, 2, 76}, {0, 2, 1}, DType::u8},
      {{908, 112, 2, 76}, {0, 1, 3, 2}, DType::u8},
      {{120, 4, 67}, {0, 2, 1}, DType::f16},
      {{7, 66, 3, 10}, {0, 1, 3, 2}, DType::u8},
      {{48, 78, 13, 2, 111}, {0, 2, 1, 4, 3}, DType::bf16},
  };
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const plan::RearrangeVariant v = launched_variant(plan_rearrange({view.shape, {}, c.dtype, 0}, view), 0);
    CHECK(v.spec.b_chain > 0);
    CHECK(v.spec.tile_b < v.args.extent_b);
    CHECK(v.spec.store_linear > 0);
  }
  check_launch_share(cases, {plan::RearrangeFamily::packed}, 8171, "packed tiles");
}

TEST_CASE("rearrange: quarter tiles in blocks of 128 threads, at every pointer misalignment" * test::gpu_only()) {
  const std::vector<PermuteCase> cases = {
      {{3, 1500, 2}, {2, 0, 1}, DType::f32},                 // a long A over a short B
      {{3, 4100, 3}, {0, 2, 1}, DType::u8},
      {{2, 5, 38, 40, 45}, {4, 2, 1, 3, 0}, DType::u8},      // short sides moved 1 or 2 bytes at a time
      {{5, 37, 30, 5}, {1, 0, 3, 2}, DType::u8},
      {{2, 5, 12, 64, 25}, {4, 2, 1, 3, 0}, DType::f16},
      {{2, 5, 12, 64, 25}, {4, 2, 1, 3, 0}, DType::bf16},
      {{4, 19, 2, 2, 6, 20, 2}, {4, 3, 2, 6, 5, 0, 1}, DType::u8},   // B takes the dims A would have
      {{4, 17, 2, 2, 12, 30, 2}, {4, 3, 2, 6, 5, 0, 1}, DType::f16},
  };
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const plan::RearrangeVariant v = launched_variant(plan_rearrange({view.shape, {}, c.dtype, 0}, view), 0);
    CHECK(v.spec.threads == 128);
  }
  check_launch_share(cases, {plan::RearrangeFamily::transpose, plan::RearrangeFamily::packed}, 8111, "tiled kernels");
}

TEST_CASE("rearrange: tiles of fewer micro-tiles than 256 threads in 128-thread blocks, at every pointer "
          "misalignment" * test::gpu_only()) {
  const std::vector<PermuteCase> cases = {
      {{34, 2, 2, 38, 24, 2}, {2, 1, 5, 3, 4, 0}, DType::f64},
      {{3, 11, 28, 8, 29}, {4, 1, 3, 2, 0}, DType::u8},
      {{14, 20, 7, 13, 4, 2}, {1, 5, 3, 0, 2, 4}, DType::f32},
      {{6, 6, 16, 36}, {2, 3, 1, 0}, DType::f32},
      {{26, 32, 8, 5}, {3, 2, 1, 0}, DType::u8},
  };
  check_aligned_launches(
      cases, 8123, [](const plan::RearrangeSpec& s) { return tiled_family(s) && s.threads == 128; },
      "tiled kernels of 128 threads");
}

TEST_CASE("rearrange: tiles whose registers spill without their low-register variant are exact at every "
          "pointer misalignment" * test::gpu_only()) {
  // The shapes of the compile test that checks their kernels' variants spill less.
  const std::vector<PermuteCase> cases = {
      {{2, 2, 86, 54, 244}, {1, 2, 4, 3, 0}, DType::f16},
      {{2, 5, 8, 4, 3, 4, 33, 22}, {2, 3, 6, 4, 0, 7, 1, 5}, DType::f16},
      {{2, 3, 2, 2, 3, 18, 24, 22, 2, 3, 2, 2}, {7, 11, 3, 6, 8, 1, 2, 4, 10, 9, 0, 5}, DType::bf16},
      {{2, 19, 45, 6, 17, 6, 12}, {0, 4, 5, 3, 6, 2, 1}, DType::f32},
      {{3, 5, 236, 8, 28, 17}, {4, 5, 0, 1, 3, 2}, DType::u8},
  };
  check_launch_share(cases, {plan::RearrangeFamily::transpose, plan::RearrangeFamily::packed}, 7919, "tiled kernels");
}

TEST_CASE("rearrange: a tile whose registers spill compiles to its low-register variant however often NVRTC "
          "compiled it before" * test::gpu_only()) {
  // With a driver, NVRTC 12.9+ serves repeated compiles from the driver's compute cache without a
  // ptxas report; read as no spills, that kept the spilling cubin (a 2x slower f64 tile).
  const TensorDesc view = permuted({{45, 13, 6, 4, 5, 55, 2, 26}, {}, DType::f64, 0}, {7, 1, 2, 6, 0, 5, 4, 3});
  const plan::RearrangeVariant v = launched_variant(plan_rearrange({view.shape, {}, DType::f64, 0}, view), 0);
  INFO(plan::kernel_label(v.spec, v.args));
  REQUIRE(tiled_family(v.spec));
  const jit::Program program = codegen::rearrange_program(v, "test");
  std::vector<std::string> low_options = program.options;
  low_options.insert(low_options.end(), program.low_register_options.begin(), program.low_register_options.end());
  int spilled = 0, spilled_low = 0;
  jit::compile_to_cubin(program.source, "sm_90", program.options, program.label, &spilled);
  const auto low = jit::compile_to_cubin(program.source, "sm_90", low_options, program.label, &spilled_low);
  MESSAGE(spilled << " bytes spilled, " << spilled_low << " with the variant");
  REQUIRE(spilled > spilled_low);
  for (int round = 0; round < 2; ++round) {
    const std::uint64_t before = counters().compiles;
    CHECK(jit::compile_program(program, "sm_90") == low);
    const std::uint64_t compiles = counters().compiles - before;
    MESSAGE(compiles << " NVRTC compiles (more than two where its cache answered first)");
  }
}

TEST_CASE("rearrange: u8 tiles of single bytes on both sides take runs at every pointer misalignment" *
          test::gpu_only()) {
  // [51, 3, 231] and the rank-15 case take runs at 1-byte pointers; at wider ones their A, short,
  // is stored whole in linear vectors since narrow_store_aspect (half the launches or more stay runs).
  const std::vector<PermuteCase> cases = {
      {{51, 3, 231}, {1, 2, 0}, DType::u8},
      {{51, 2, 231, 5}, {1, 3, 2, 0}, DType::u8},
      {{37, 6, 51, 4, 3, 7, 33}, {4, 0, 3, 1, 5, 6, 2}, DType::u8},
      // eight tile dims, source runs over five (the per-dim constants that nvcc turned into jump tables)
      {{3, 2, 7, 7, 3, 2, 6, 2, 2, 2, 2, 2, 2, 3, 2}, {14, 0, 7, 10, 12, 11, 2, 8, 4, 5, 9, 3, 1, 6, 13}, DType::u8},
  };
  check_launch_share(cases, {plan::RearrangeFamily::runs}, 5101, "runs");
}

TEST_CASE("rearrange: u8 tiles that store single bytes beside 2- and 4-byte loads take runs, at every pointer "
          "misalignment" * test::gpu_only()) {
  const std::vector<PermuteCase> cases = {
      {{60, 69, 151, 4}, {0, 3, 2, 1}, DType::u8},
      {{281, 19, 95, 58}, {2, 0, 3, 1}, DType::u8},
      {{24, 53, 3, 37, 9, 37, 2}, {0, 3, 6, 2, 1, 4, 5}, DType::u8},
  };
  for (const PermuteCase& c : cases) CHECK(aligned_family(c) == plan::RearrangeFamily::runs);
  check_launch_share(cases, {plan::RearrangeFamily::runs}, 5107, "runs");
}

TEST_CASE("rearrange: shared rows under a 32-byte sector take runs tiles, at every pointer misalignment" *
          test::gpu_only()) {
  // Rows of 3 bytes (u8), 12 bytes (f32), 6 bytes (f16) and 18 bytes (u8) over many small dims.
  const std::vector<PermuteCase> cases = {
      {{35, 13, 6, 4, 10, 2, 5, 3}, {0, 5, 4, 1, 2, 6, 3, 7}, DType::u8},
      {{8, 5, 3, 2, 2, 3, 2, 2, 10, 9, 2, 3}, {9, 6, 3, 8, 1, 5, 2, 7, 0, 10, 4, 11}, DType::f32},
      {{14, 21, 23, 11, 17, 2, 3}, {1, 4, 0, 3, 5, 2, 6}, DType::f16},
      {{28, 2, 29, 16, 4, 5, 18}, {1, 3, 2, 0, 5, 4, 6}, DType::u8},
  };
  for (const PermuteCase& c : cases) CHECK(aligned_family(c) == plan::RearrangeFamily::runs);
  check_launch_share(cases, {plan::RearrangeFamily::runs}, 5109, "runs");
}

TEST_CASE("rearrange: tiles whose A four times as long would load narrower vectors take A twice as long, at every "
          "pointer misalignment" *
          test::gpu_only()) {
  // f16 4-byte stores over two A dims (128 x 64 units). (The f32 single-unit stores of [545, 3, 26, 18],
  // 128 x 32 by this rule before, store skewed 16-byte vectors over their one A dim since: the case of
  // skewed stores runs them.)
  const std::vector<PermuteCase> cases = {
      {{7, 19, 6, 3, 12, 2, 3, 9}, {7, 6, 4, 0, 5, 2, 3, 1}, DType::f16},
  };
  auto twice_as_long = [](const plan::RearrangeSpec& s) {
    return s.family == plan::RearrangeFamily::packed && s.tile_a == 128 && s.vec_b * s.unit_bytes == 16;
  };
  // Pointers off 16 bytes take narrower loads and other tiles.
  check_aligned_launches(cases, 5119, twice_as_long, "tiles of A twice as long");
}

TEST_CASE("rearrange: runs tiles that gather their stores from staged source runs, at every pointer misalignment" *
          test::gpu_only()) {
  // Destination runs of one dim inside a source run of two ([2, 3, 116, 711, 11]), runs of three dims
  // on both sides, source runs of four dims under destination runs of three, tiled dims on both sides.
  const std::vector<PermuteCase> cases = {
      {{2, 3, 116, 711, 11}, {2, 4, 1, 0, 3}, DType::u8},
      {{4, 54, 63, 9, 15, 5}, {0, 1, 5, 2, 4, 3}, DType::u8},
      {{2, 35, 40, 6, 33, 5, 4, 3}, {4, 7, 3, 0, 2, 6, 1, 5}, DType::u8},
      {{15, 7, 25, 21, 11, 7, 3}, {3, 0, 6, 2, 4, 1, 5}, DType::u8},
  };
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const plan::RearrangeSpec& spec = launched_variant(plan_rearrange({view.shape, {}, c.dtype, 0}, view), 0).spec;
    CHECK(spec.family == plan::RearrangeFamily::runs);
    CHECK(spec.gather_stores);
  }
  check_launch_share(cases, {plan::RearrangeFamily::runs}, 5113, "runs");
}

TEST_CASE("rearrange: gathering runs tiles of more than 8 KiB, at every pointer misalignment" * test::gpu_only()) {
  // Lines of seeds 5539-5618, scaled down: a source run of one long dim over a short destination dim,
  // a destination run of one dim inside a source run of two, f16 runs of a long and a short dim.
  const std::vector<PermuteCase> cases = {
      {{300, 5921, 2}, {0, 2, 1}, DType::u8},
      {{20, 7, 265, 43}, {3, 1, 0, 2}, DType::u8},
      {{6, 6, 11, 189, 9}, {0, 2, 1, 4, 3}, DType::f16},
  };
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const plan::RearrangeVariant v = launched_variant(plan_rearrange({view.shape, {}, c.dtype, 0}, view), 0);
    CHECK(v.spec.family == plan::RearrangeFamily::runs);
    CHECK(v.spec.gather_stores);
    CHECK(plan::runs_tile_bytes(v.spec, v.args) > 8192);
  }
  check_launch_share(cases, {plan::RearrangeFamily::runs}, 5539, "runs tiles");
}

TEST_CASE("rearrange: runs tiles with a run under 128 bytes give way to tiles whose runs share their end, or to "
          "tiles of vector loads storing single bytes, at every pointer misalignment" *
          test::gpu_only()) {
  // u8 lines of seeds 5619-5620 and 5861-7960, some scaled down; [11, 33, 5215, 10] wrote destination
  // runs of 33 bytes, [16, 75, 19, 39, 15] runs of 75.
  const std::vector<PermuteCase> shared = {
      {{17, 651, 75, 12}, {3, 1, 2, 0}, DType::u8},
      {{11, 33, 5215, 10}, {3, 0, 2, 1}, DType::u8},
      {{16, 75, 19, 39, 15}, {2, 4, 0, 3, 1}, DType::u8},
      {{36, 11, 12, 405, 5}, {2, 0, 4, 3, 1}, DType::u8},
      {{24, 3, 51, 187, 22}, {0, 4, 2, 3, 1}, DType::u8},
      {{77, 5, 31, 75, 3, 4}, {0, 5, 1, 4, 3, 2}, DType::u8},
  };
  check_aligned_launches(shared, 5861, test::runs_share_their_end, "runs tiles whose runs share their end");
  const std::vector<PermuteCase> single_byte_stores = {{{60, 3, 9, 437, 12}, {4, 0, 3, 2, 1}, DType::u8}};
  check_aligned_launches(
      single_byte_stores, 5619,
      [](const plan::RearrangeSpec& s) { return s.family == plan::RearrangeFamily::packed && s.vec_a == 1 && s.vec_b > 1; },
      "packed tiles of single-byte stores");
}

TEST_CASE("rearrange: runs tiles whose two runs end on one dim tiled alike (a tuning candidate), exact at every "
          "pointer misalignment" *
          test::gpu_only()) {
  // Lines of seeds 5519-5538 and 5619-5620, some scaled down: one dim before the shared one on each
  // side (u8, f16, f32), several (u8 rank 8).
  const std::vector<PermuteCase> cases = {
      {{17, 651, 75, 12}, {3, 1, 2, 0}, DType::u8},
      {{5, 11, 17, 10, 3, 2, 16, 3}, {3, 6, 5, 7, 1, 0, 4, 2}, DType::u8},
      {{8, 7, 44, 3, 18, 24, 45}, {0, 4, 6, 2, 5, 1, 3}, DType::f16},
      {{32, 62, 14, 2, 49, 37, 2}, {1, 3, 0, 6, 2, 5, 4}, DType::f32},
  };
  std::uint64_t seed = 5619;
  int launches = 0;
  for_each_candidate(cases, test::runs_share_their_end,
                     [&](const auto& p, const auto& v, const TensorDesc& dst, const TensorDesc& view) {
                       const std::size_t unit = static_cast<std::size_t>(v.spec.unit_bytes);
                       for (std::size_t src_align : {16, 1, 2, 3})
                         for (std::size_t dst_align : {16, 1, 2, 3}) {
                           if ((src_align % unit != 0 && src_align != 16) || (dst_align % unit != 0 && dst_align != 16))
                             continue;
                           const std::string failure =
                               check_variant_on_gpu(p, v, dst, view, src_align % 16, dst_align % 16, ++seed);
                           CHECK_MESSAGE(failure.empty(), failure);
                           ++launches;
                         }
                     });
  MESSAGE(launches << " launches of runs tiles whose runs share their end");
  CHECK(launches >= 16 + 16 + 4 + 4);
}

TEST_CASE("rearrange: gathering runs tiles of destination rows shorter than a store vector, exact at every pointer "
          "misalignment" *
          test::gpu_only()) {
  // Rows of 3 units (u8, f16), carrying into a second run dim ([35, 41, 2, 3, 7, 51]) and on through
  // more of them (up to five run dims), whose vectors cross dim 1's end at most once, except the last
  // case's, whose dim 1 of 2 rows wraps several times a vector (rows found a row at a time there).
  const std::vector<PermuteCase> cases = {
      {{35, 41, 2, 3, 7, 51}, {0, 1, 2, 4, 5, 3}, DType::u8},
      {{51, 52, 79, 3, 7}, {0, 1, 2, 4, 3}, DType::f16},
      {{46, 21, 32, 7, 5, 3}, {4, 2, 0, 3, 1, 5}, DType::u8},
      {{6, 22, 6, 34, 33, 3}, {2, 3, 1, 4, 0, 5}, DType::u8},
      {{8, 8, 3, 2, 2, 2, 2, 6, 9, 3, 2, 3}, {2, 9, 5, 7, 8, 0, 6, 4, 3, 10, 1, 11}, DType::u8},
      {{3, 9, 8, 6, 8, 2, 2, 3, 2, 2, 2, 3}, {0, 9, 5, 6, 4, 1, 7, 3, 10, 2, 8, 11}, DType::u8},
  };
  int crossing_once = 0, wrapping_often = 0;  // tiles of more than two run dims on each path
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const plan::RearrangeVariant v = launched_variant(plan_rearrange({view.shape, {}, c.dtype, 0}, view), 0);
    const std::vector<std::int64_t> extents = plan::runs_tile_extents(v.spec, v.args);
    const std::int64_t vector_units = 4 * v.spec.store_words / v.spec.unit_bytes;
    CHECK(v.spec.family == plan::RearrangeFamily::runs);
    CHECK(v.spec.gather_stores);
    CHECK(v.spec.dst_run_dims > 1);
    if (extents.size() < 2) continue;  // not a runs tile (failed above)
    CHECK(extents[0] < vector_units);
    if (v.spec.dst_run_dims > 2) {
      const bool once = extents[1] >= (extents[0] - 1 + vector_units - 1) / extents[0];
      (once ? crossing_once : wrapping_often) += 1;
    }
  }
  CHECK(crossing_once >= 1);
  CHECK(wrapping_often >= 1);
  check_launch_share(cases, {plan::RearrangeFamily::runs}, 5127, "runs");
}

TEST_CASE("rearrange: runs tiles among the tuning candidates, gathering or scattering, in 1-, 2- and 4-byte units, "
          "are exact at pointers aligned to 16, 1, 2 and 3 bytes (where the unit allows)" * test::gpu_only()) {
  // Measured planning may launch any candidate; the planner takes runs tiles by default only for
  // 1-byte units. Gathering tiles whose destination rows hold a store vector or more (one crossing
  // per vector: [5, 3, 116, 71, 11], rows of 51 with carries over four dims, f16 rows of 13 and 12,
  // 4-byte units of two f16) or fewer (rows of 9 bytes, f16 rows of 7 and 3), and
  // scattering tiles in 1-, 2- and 4-byte units ([13, 19, 8, 133, 65] in u8, [2, 45, 1101] in f16
  // and f32, whose tiles of up to 16 KiB would scatter too).
  const std::vector<PermuteCase> cases = {
      {{5, 3, 116, 71, 11}, {2, 4, 1, 0, 3}, DType::u8},
      {{4, 2, 4, 10, 5, 51, 13}, {3, 0, 4, 2, 1, 6, 5}, DType::u8},
      {{58, 5, 6, 9, 15, 5}, {0, 1, 5, 2, 4, 3}, DType::u8},
      {{13, 19, 8, 133, 65}, {2, 1, 3, 4, 0}, DType::u8},
      {{33, 39, 13, 18}, {1, 3, 0, 2}, DType::f16},
      {{9, 12, 18, 5, 13}, {0, 4, 3, 2, 1}, DType::f16},
      {{23, 26, 7, 32}, {1, 0, 3, 2}, DType::f16},
      {{21, 7, 32, 3, 20}, {4, 1, 2, 0, 3}, DType::f16},
      {{16, 39, 5, 38}, {1, 2, 0, 3}, DType::f16},
      {{63, 12, 6, 57, 57}, {2, 3, 1, 4, 0}, DType::f16},
      {{40, 2, 35, 3, 4, 5, 3, 36}, {6, 3, 4, 5, 1, 0, 7, 2}, DType::f32},
      {{2, 45, 1101}, {0, 2, 1}, DType::f16},
      {{2, 45, 1101}, {0, 2, 1}, DType::f32},
  };
  std::uint64_t seed = 5119;
  std::set<std::pair<int, bool>> kinds;  // (unit bytes, gathering) of the runs tiles launched
  int launches = 0;
  const auto runs_tile = [](const plan::RearrangeSpec& s) { return s.family == plan::RearrangeFamily::runs; };
  for_each_candidate(cases, runs_tile, [&](const auto& p, const auto& v, const TensorDesc& dst, const TensorDesc& view) {
    const std::size_t unit = static_cast<std::size_t>(v.spec.unit_bytes);
    for (std::size_t src_align : {16, 1, 2, 3})
      for (std::size_t dst_align : {16, 1, 2, 3}) {
        if ((src_align % unit != 0 && src_align != 16) || (dst_align % unit != 0 && dst_align != 16)) continue;
        const std::string failure = check_variant_on_gpu(p, v, dst, view, src_align % 16, dst_align % 16, ++seed);
        CHECK_MESSAGE(failure.empty(), failure);
        ++launches;
      }
    kinds.insert({v.spec.unit_bytes, v.spec.gather_stores});
  });
  MESSAGE(launches << " launches of runs-tile candidates");
  for (int unit : {1, 2, 4}) {
    CHECK_MESSAGE(kinds.count({unit, true}) == 1, "a gathering runs tile of " << unit << "-byte units");
    CHECK_MESSAGE(kinds.count({unit, false}) == 1, "a scattering runs tile of " << unit << "-byte units");
  }
}

TEST_CASE("rearrange: shared rows of 768 bytes or more whose ends are off 16 bytes move in 16-byte vectors, exact at "
          "every pointer misalignment" * test::gpu_only()) {
  // Rows of 769 to 8191 bytes: rows just over the threshold ([37, 301, 769]) and several tiles long
  // ([3, 50, 8191]), partial row tiles, several row dims; rows of 2-, 4- and 8-byte units (f16 rows of
  // 830 bytes, bf16 of 858, f32 of 5100, f64 of 824).
  const std::vector<PermuteCase> cases = {
      {{2, 2, 2001}, {1, 0, 2}, DType::u8},          {{3, 50, 8191}, {1, 0, 2}, DType::u8},
      {{20, 3, 2005}, {1, 0, 2}, DType::u8},         {{4, 901, 801}, {1, 0, 2}, DType::u8},
      {{6, 5, 7, 933}, {2, 0, 1, 3}, DType::u8},     {{3, 7, 2, 1203}, {1, 2, 0, 3}, DType::u8},
      {{2, 153, 2, 43, 895}, {2, 3, 1, 0, 4}, DType::u8}, {{37, 301, 769}, {1, 0, 2}, DType::u8},
      {{548, 38, 7, 415}, {2, 0, 1, 3}, DType::f16}, {{23, 5, 8, 12, 4, 429}, {2, 3, 1, 4, 0, 5}, DType::bf16},
      {{9, 17, 1275}, {1, 0, 2}, DType::f32},        {{31, 3, 60, 103}, {2, 0, 1, 3}, DType::f64},
  };
  const int launches = static_cast<int>(cases.size()) * 9;
  const int vector_rows = launches_where(cases, 5131, [](const plan::RearrangeSpec& s) { return s.vector_rows; });
  MESSAGE(vector_rows << " of " << launches << " launches on vector rows");
  CHECK(vector_rows == launches);
}

TEST_CASE("rearrange: shared rows of 160 to 767 bytes take segment tiles that store 16-byte vectors, exact at every "
          "pointer misalignment" * test::gpu_only()) {
  // Rows of 161 to 495 bytes: a merged destination run ([4, 901, 161]), partial tiles, three A dims;
  // rows of 2-byte units of 174, 234, 270 and 402 bytes; rows of 4- and 8-byte units (f32 rows of 268 and 460
  // bytes, f64 rows of 360 and 744 bytes), whose stores gather words.
  const std::vector<PermuteCase> cases = {
      {{4, 901, 161}, {1, 0, 2}, DType::u8},     {{20, 3, 205}, {1, 0, 2}, DType::u8},
      {{6, 5, 7, 333}, {2, 0, 1, 3}, DType::u8}, {{2, 153, 2, 43, 495}, {2, 3, 1, 0, 4}, DType::u8},
      {{7, 3, 5, 2, 3, 163}, {4, 2, 0, 3, 1, 5}, DType::u8}, {{548, 38, 7, 135}, {2, 0, 1, 3}, DType::f16},
      {{23, 5, 8, 12, 4, 201}, {2, 3, 1, 4, 0, 5}, DType::bf16}, {{290, 37, 67}, {1, 0, 2}, DType::f32},
      {{55, 316, 115}, {1, 0, 2}, DType::f32},   {{41, 3, 90, 45}, {2, 0, 1, 3}, DType::f64},
      {{2, 243, 23, 19, 93}, {2, 3, 1, 0, 4}, DType::f64}, {{9, 4, 6, 87}, {2, 0, 1, 3}, DType::f16},
      {{3, 11, 234}, {1, 0, 2}, DType::u8},
  };
  for (const PermuteCase& c : cases) CHECK(aligned_family(c) == plan::RearrangeFamily::segments);
  check_launch_share(cases, {plan::RearrangeFamily::segments}, 5123, "segment tiles");
}

TEST_CASE("rearrange: short shared rows take segment tiles, exact at every pointer misalignment" *
          test::gpu_only()) {
  // u8 rows of 9, 11, 13, 15, 23 and 71 bytes and of 12 (three 4-byte units), 6 and 22 f16 units, 9
  // f32 and 9 f64 units (rows of 8 to 15 bytes store 16-byte vectors that span up to three rows); rows
  // of 2-byte units under a sector take runs tiles instead. A merged destination run ([7,
  // ..., 9]), a merged source run ([1241, 7, 9]), tiles cut by the extents, and groups of several dims.
  const std::vector<PermuteCase> cases = {
      {{413, 95, 15}, {1, 0, 2}, DType::u8},          {{29, 3, 640, 6}, {2, 0, 1, 3}, DType::f16},
      {{333, 71, 12}, {1, 0, 2}, DType::u8},          {{370, 97, 11}, {1, 0, 2}, DType::u8},
      {{290, 113, 13}, {1, 0, 2}, DType::u8},
      {{7, 1241, 13, 10, 9}, {1, 2, 3, 0, 4}, DType::u8}, {{1241, 7, 9}, {1, 0, 2}, DType::u8},
      {{35, 30, 162, 71}, {0, 2, 1, 3}, DType::u8},      {{2343, 48, 2, 6, 13}, {2, 1, 3, 0, 4}, DType::u8},
      {{550, 47, 5, 12, 23}, {2, 1, 3, 0, 4}, DType::u8}, {{416, 1451, 22}, {1, 0, 2}, DType::f16},
      {{265, 8, 1047, 9}, {1, 2, 0, 3}, DType::f32}, {{265, 8, 147, 9}, {1, 2, 0, 3}, DType::f64},
      // Groups of several dims: two B dims, four A dims, two of each (rows of 2-byte units under a
      // sector take runs tiles, so the four A dims move f32 rows).
      {{9, 7, 11, 10, 14, 3, 3, 3}, {6, 0, 5, 1, 2, 3, 4, 7}, DType::u8},
      {{6, 18, 2, 2, 2, 2, 24, 5, 2, 3, 3, 3}, {10, 4, 2, 1, 5, 3, 8, 7, 6, 0, 9, 11}, DType::f32},
      {{40, 5, 9, 5, 9, 3}, {0, 4, 3, 2, 1, 5}, DType::f32},
  };
  for (const PermuteCase& c : cases) CHECK(aligned_family(c) == plan::RearrangeFamily::segments);
  check_launch_share(cases, {plan::RearrangeFamily::segments}, 5119, "segment tiles");
  // Rows of 8 bytes move as 8-byte units at aligned pointers and as segment tiles at the other eight
  // misalignments.
  CHECK(launches_on_families({{{413, 95, 8}, {1, 0, 2}, DType::u8}}, {plan::RearrangeFamily::segments}, 5131) == 8);
}

TEST_CASE("rearrange: random views of short shared rows, misaligned pointers, exact mode" * test::gpu_only()) {
  // The innermost dim (3 to 40 elements of 1, 2, 4 or 8 bytes) stays innermost and contiguous on both
  // sides; the other dims are permuted, padded, stepped and reversed in the source.
  std::mt19937_64 rng(4243);
  auto pick = [&rng](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  int segments = 0;
  const int cases = 60;
  for (int i = 0; i < cases; ++i) {
    const int rank = 3 + pick(4);
    const int elem = std::array<int, 4>{1, 2, 4, 8}[static_cast<std::size_t>(pick(4))];
    const std::int64_t row = 3 + pick(38);
    std::vector<std::int64_t> shape;
    std::int64_t volume = row;
    for (int k = 0; k + 1 < rank; ++k) {
      const std::int64_t e = 2 + pick(rank > 4 ? 12 : 200);
      shape.push_back(volume * e > (1 << 20) / elem ? 2 : e);
      volume *= shape.back();
    }
    shape.push_back(row);
    std::vector<int> order(static_cast<std::size_t>(rank - 1));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::int64_t> src_strides(shape.size());
    src_strides.back() = 1;
    std::int64_t running = shape.back();
    for (std::size_t k = order.size(); k-- > 0;) {
      const auto d = static_cast<std::size_t>(order[k]);
      const int step = pick(5) == 0 ? 2 : 1;
      src_strides[d] = running * step * (pick(5) == 0 ? -1 : 1);
      running *= (shape[d] + (pick(4) == 0 ? 3 : 0)) * step;
    }
    const TensorDesc src{shape, src_strides, DType::u8, elem}, dst{shape, {}, DType::u8, elem};
    const std::size_t misalign[] = {0, 1, 2, 4, 8, static_cast<std::size_t>(elem)};
    const std::size_t src_shift = misalign[pick(6)], dst_shift = misalign[pick(6)];
    RearrangeOptions options;
    options.exact = i % 5 == 0;
    segments += launched_variant(plan_rearrange(dst, src, options), src_shift | dst_shift).spec.family ==
                plan::RearrangeFamily::segments;
    INFO("random case " << i);
    const std::string failure = check_on_gpu(dst, src, src_shift, dst_shift, static_cast<std::uint64_t>(i) + 700, options);
    CHECK_MESSAGE(failure.empty(), failure);
  }
  MESSAGE(segments << " of " << cases << " launches on segment tiles");
  CHECK(segments >= cases / 4);
}

TEST_CASE("rearrange: u8 transposes of word or 8-byte stores beside 2-byte loads take word tiles, at every pointer "
          "misalignment" * test::gpu_only()) {
  const std::vector<PermuteCase> cases = {
      {{2, 332, 1678}, {0, 2, 1}, DType::u8},
      {{340, 5458}, {1, 0}, DType::u8},
      // 8-byte stores on fixed tiles; 16-byte vectors on word tiles.
      {{1032, 466}, {1, 0}, DType::u8},
      {{1040, 3, 466}, {2, 1, 0}, DType::u8},
  };
  for (const PermuteCase& c : cases) CHECK(aligned_family(c) == plan::RearrangeFamily::words);
  check_launch_share(cases, {plan::RearrangeFamily::words}, 5113, "word tiles");
}

TEST_CASE("rearrange: tiled kernels counting their tiles along A first and along B first are both exact" *
          test::gpu_only()) {
  // Destination rows of many more tiles than the source rows count along B first, the others along A.
  const std::vector<PermuteCase> cases = {{{3008, 72}, {1, 0}, DType::f32},         {{72, 3008}, {1, 0}, DType::f32},
                                          {{5008, 2, 64}, {2, 1, 0}, DType::f16},   {{64, 4, 5008}, {2, 0, 1}, DType::f16},
                                          {{8, 1200, 5, 32}, {3, 2, 0, 1}, DType::f64}, {{4096, 128}, {1, 0}, DType::u8},
                                          {{520, 4096}, {1, 0}, DType::u8}};
  int a_first = 0, b_first = 0;
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const plan::RearrangeSpec spec = launched_variant(plan_rearrange({view.shape, {}, c.dtype, 0}, view), 0).spec;
    CHECK(tiled_family(spec));
    ++(spec.a_first ? a_first : b_first);
  }
  CHECK(a_first >= 3);
  CHECK(b_first >= 3);
  const int launches = static_cast<int>(cases.size()) * 9;
  const int transposes = launches_on_families(cases, {plan::RearrangeFamily::transpose}, 6007);
  MESSAGE(a_first << " cases along A first, " << b_first << " along B first; " << transposes << " of " << launches
                  << " checked launches on transpose tiles");
}

TEST_CASE("rearrange: tune times the candidates, records the fastest, and a later plan reuses the record" *
          test::gpu_only()) {
  const test::TempDir cache;
  ::setenv("SHAPEJIT_CACHE_DIR", cache.path.c_str(), 1);
  struct Case {
    std::vector<std::int64_t> shape;
    std::vector<int> perm;
    DType dtype;
  };
  const Case cases[] = {{{1029, 1021}, {1, 0}, DType::u8},
                        {{25, 25, 10, 10, 14, 21, 5}, {4, 3, 1, 0, 6, 2, 5}, DType::f16},
                        {{196, 182, 206, 27}, {1, 3, 2, 0}, DType::u8}};
  std::uint64_t seed = 77;
  RearrangeOptions tune;
  tune.tune = true;
  for (const Case& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, c.dtype, 0}, c.perm);
    const TensorDesc dst{view.shape, {}, c.dtype, 0};
    const std::string measured = plan_rearrange(dst, view, tune).describe();
    INFO(measured);
    CHECK(measured.find("tuning: measured: ") != std::string::npos);
    const std::string failure = check_on_gpu(dst, view, 0, 0, ++seed, tune);
    CHECK_MESSAGE(failure.empty(), failure);
    CHECK(plan_rearrange(dst, view, tune).describe().find("tuning: from a record: ") != std::string::npos);
  }
  int records = 0;
  for (const auto& f : std::filesystem::recursive_directory_iterator(cache.path))
    records += f.path().extension() == ".sjt";
  CHECK(records == 3);
  ::unsetenv("SHAPEJIT_CACHE_DIR");
}

TEST_CASE("rearrange: a transpose of more than 2^31 u8 elements uses 64-bit indices and is exact" *
          test::gpu_only()) {
  const std::int64_t n = 46341;  // n * n > 2^31
  const TensorDesc view = permuted({{n, n}, {}, DType::u8, 0}, {1, 0});
  const TensorDesc dst{view.shape, {}, DType::u8, 0};
  const RearrangePlan plan = plan_rearrange(dst, view);
  REQUIRE(launched_variant(plan, 0).spec.index64);
  const std::size_t bytes = static_cast<std::size_t>(n * n);
  test::DeviceBuffer in(bytes), out(bytes + 64);
  const std::vector<std::uint8_t> host = test::random_bytes(bytes, 2026);
  in.upload(host.data(), bytes);
  out.fill(kPoison);
  plan.launch(out.get(), in.get());
  std::vector<std::uint8_t> got(bytes + 64);
  out.download(got.data(), got.size());
  std::int64_t wrong = 0;
  constexpr std::int64_t kBlock = 64;  // blocked, so the CPU check runs at memory speed
  for (std::int64_t i0 = 0; i0 < n; i0 += kBlock)
    for (std::int64_t j0 = 0; j0 < n; j0 += kBlock)
      for (std::int64_t i = i0; i < std::min(n, i0 + kBlock); ++i)
        for (std::int64_t j = j0; j < std::min(n, j0 + kBlock); ++j)
          wrong += got[static_cast<std::size_t>(j * n + i)] != host[static_cast<std::size_t>(i * n + j)];
  CHECK(wrong == 0);
  CHECK(std::count(got.begin() + static_cast<std::ptrdiff_t>(bytes), got.end(), kPoison) == 64);
}

TEST_CASE("rearrange: the C API, the one-shot call, streams and device-side overlap checks" * test::gpu_only()) {
  const std::int64_t transposed[] = {1, 500};
  const std::int64_t out_shape[] = {500, 300};
  sj_tensor_desc src{2, out_shape, transposed, SJ_F32, 0}, dst{2, out_shape, nullptr, SJ_F32, 0};
  const std::size_t bytes = 300 * 500 * 4;
  test::DeviceBuffer a(bytes), b(bytes), c(bytes);
  const std::vector<std::uint8_t> host = test::random_bytes(bytes, 9);
  a.upload(host.data(), bytes);
  sj_rearrange_plan plan = nullptr;
  REQUIRE(sj_rearrange_plan_create(&plan, &dst, &src, nullptr) == SJ_OK);
  CUstream stream = nullptr;
  jit::check(jit::driver().cuStreamCreate(&stream, 0), "cuStreamCreate");
  b.fill(0);
  c.fill(0);
  CHECK(sj_rearrange_plan_launch(plan, b.get(), a.get(), stream) == SJ_OK);
  CHECK(sj_rearrange(c.get(), &dst, a.get(), &src, stream) == SJ_OK);
  jit::check(jit::driver().cuStreamSynchronize(stream), "cuStreamSynchronize");
  std::vector<std::uint8_t> from_plan(bytes), one_shot(bytes);
  b.download(from_plan.data(), bytes);
  c.download(one_shot.data(), bytes);
  std::vector<float> in(300 * 500), out(300 * 500);
  std::memcpy(in.data(), host.data(), bytes);
  std::memcpy(out.data(), from_plan.data(), bytes);
  bool right = true;
  for (int i = 0; i < 300; ++i)
    for (int j = 0; j < 500; ++j) right = right && std::memcmp(&out[j * 300 + i], &in[i * 500 + j], 4) == 0;
  CHECK(right);
  CHECK(one_shot == from_plan);
  // Overlapping device memory is refused; the same pointer and layout is a no-op.
  CHECK(sj_rearrange_plan_launch(plan, static_cast<char*>(a.get()) + 4, a.get(), stream) == SJ_INVALID_ARGUMENT);
  CHECK(std::string(sj_last_error()).find("overlap") != std::string::npos);
  CHECK(sj_rearrange(a.get(), &src, a.get(), &src, stream) == SJ_OK);
  CHECK(sj_rearrange_plan_destroy(plan) == SJ_OK);
  jit::check(jit::driver().cuStreamDestroy(stream), "cuStreamDestroy");
}

TEST_CASE("rearrange: threads launching one plan on pointers of every alignment plan each level as they need it" *
          test::gpu_only()) {
  // Two views: one with a variant per level (a contiguous inner run folds into 16- to 1-byte units),
  // one whose levels share variants.
  for (const auto& [shape, perm] : {std::pair{std::vector<std::int64_t>{4, 40, 8, 48}, std::vector<int>{0, 2, 1, 3}},
                                    std::pair{std::vector<std::int64_t>{37, 6, 53, 11}, std::vector<int>{2, 0, 3, 1}}}) {
    const TensorDesc view = permuted({shape, {}, DType::u8, 0}, perm);
    const TensorDesc dst{view.shape, {}, DType::u8, 0};
    const RearrangePlan plan = plan_rearrange(dst, view);
    const detail::RearrangePlanImpl& impl = plan.impl();
    constexpr int kThreads = 16;
    std::vector<std::unique_ptr<DeviceView>> ins, outs;
    std::vector<std::vector<std::uint8_t>> expected;
    for (int i = 0; i < kThreads; ++i) {
      ins.push_back(std::make_unique<DeviceView>(impl.data.src_range, static_cast<std::size_t>(i)));
      outs.push_back(std::make_unique<DeviceView>(impl.data.dst_range, static_cast<std::size_t>(3 * i % 16)));
      const std::vector<std::uint8_t> host_in = test::random_bytes(ins.back()->buffer.bytes(), 700 + i);
      ins.back()->buffer.upload(host_in.data(), host_in.size());
      outs.back()->buffer.fill(kPoison);
      expected.emplace_back(outs.back()->buffer.bytes(), kPoison);
      test::reference_rearrange(expected.back().data() + outs.back()->base_offset, dst,
                                host_in.data() + ins.back()->base_offset, view);
    }
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i)
      threads.emplace_back([&, i] {
        for (int round = 0; round < 5; ++round) plan.launch(outs[i]->base(), ins[i]->base());
      });
    for (std::thread& t : threads) t.join();
    for (int i = 0; i < kThreads; ++i) {
      std::vector<std::uint8_t> got(outs[i]->buffer.bytes());
      outs[i]->buffer.download(got.data(), got.size());
      CHECK_MESSAGE(got == expected[static_cast<std::size_t>(i)], "thread " << i);
    }
    // Every level was launched; each published the variant a plan of every level has for it.
    const plan::RearrangePlanData every = plan::plan_rearrange_data(dst, view, {});
    for (int level = 0; level < plan::kAlignmentLevels; ++level) {
      const int index = impl.level_variant[static_cast<std::size_t>(level)].load();
      REQUIRE(index != plan::kUnplanned);
      const plan::RearrangeVariant& got = impl.variants[index];
      const plan::RearrangeVariant& want = plan::variant_for_pointers(every, std::uintptr_t{1} << level);
      CHECK(got.spec == want.spec);
      CHECK(got.form == want.form);
      CHECK(got.grid == want.grid);
    }
    CHECK(impl.data.variants.size() == every.variants.size());
  }
}

TEST_CASE("rearrange: scalars and empty tensors" * test::gpu_only()) {
  const std::string scalar = check_on_gpu({{}, {}, DType::f64, 0}, {{}, {}, DType::f64, 0}, 0, 8, 3);
  CHECK_MESSAGE(scalar.empty(), scalar);
  const std::string odd = check_on_gpu({{}, {}, DType::u8, 12}, {{}, {}, DType::u8, 12}, 1, 3, 4);
  CHECK_MESSAGE(odd.empty(), odd);
  CHECK(check_on_gpu({{4, 0, 3}, {}, DType::f32, 0}, {{4, 0, 3}, {0, 0, 1}, DType::f32, 0}, 0, 0, 5).empty());
}
