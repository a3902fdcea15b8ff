#include "ops/hadamard/plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/byte_range.hpp"
#include "core/errors.hpp"
#include "core/fastdiv.hpp"

namespace shapejit::plan {
namespace {

constexpr int kMaxRank = 6;
constexpr int kBlockThreads = 256;
constexpr int kMaxThreadsPerRow = 1024;
constexpr std::int64_t kMaxBlocks = 65535;
constexpr std::int64_t kPrefetchRowsPerBlock = 4;
constexpr std::int64_t kPrefetchMinBlocks = 264;  // two blocks per SM of an H100 SXM or H200 (132 SMs)
// sm_86, sm_89 and sm_120 allow 99 KB of shared memory a block: prefetching keeps every size that fits
// there without it (include/shapejit/hadamard.hpp) fitting there.
constexpr unsigned kPrefetchMaxSharedBytes = 99 * 1024;
constexpr std::int64_t kMaxF64Size = 16384;  // a row of f64 values in shared memory fits 227 KB up to here

bool is_pow2(std::int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

/// The largest power of two <= limit dividing every value (a 0 stride divides everything).
int largest_pow2_dividing(int limit, const std::vector<std::int64_t>& values) {
  int p = limit;
  for (std::int64_t v : values)
    while (p > 1 && v % p != 0) p /= 2;
  return p;
}

bool is_float(DType t) { return t == DType::f16 || t == DType::bf16 || t == DType::f32 || t == DType::f64; }

/// Whether rows of `data` may prefetch (f32 and f64): those that span several warps do where the
/// copies fit (HadamardSpec::prefetch).
bool prefetches_rows(DType data) { return data == DType::f32 || data == DType::f64; }

// ---- the base matrices ----------------------------------------------------------------------

/// GF(q) for q = 5, 9 or 13: subtraction and the quadratic character. GF(9) is GF(3)[i]/(i^2 + 1),
/// element a + 3b standing for a + b i.
struct SmallField {
  std::int64_t q;

  std::int64_t sub(std::int64_t x, std::int64_t y) const {
    if (q != 9) return ((x - y) % q + q) % q;
    return ((x % 3 - y % 3 + 3) % 3) + 3 * ((x / 3 - y / 3 + 3) % 3);
  }
  std::int64_t mul(std::int64_t x, std::int64_t y) const {
    if (q != 9) return x * y % q;
    const std::int64_t a = x % 3, b = x / 3, c = y % 3, d = y / 3;
    return ((a * c - b * d) % 3 + 3) % 3 + 3 * ((a * d + b * c) % 3);
  }
  int chi(std::int64_t x) const {
    if (x == 0) return 0;
    for (std::int64_t r = 1; r < q; ++r)
      if (mul(r, r) == x) return 1;
    return -1;
  }
};

}  // namespace

std::vector<std::int8_t> paley_hadamard(std::int64_t m) {
  if (m != 12 && m != 20 && m != 28) fail(ErrorCode::internal, "paley_hadamard({}): only 12, 20 and 28", m);
  // Paley II: q = m/2 - 1 = 1 (mod 4); the symmetric conference matrix C = [[0, 1^T], [1, Q]] with
  // Q[i][j] = chi(i - j), then each 0 of C becomes [[1, -1], [-1, -1]] and each +-1 +-[[1, 1], [1, -1]].
  const SmallField field{m / 2 - 1};
  const std::int64_t c = field.q + 1;
  auto conference = [&](std::int64_t i, std::int64_t j) -> int {
    if (i == 0 || j == 0) return i == j ? 0 : 1;
    return field.chi(field.sub(i - 1, j - 1));
  };
  std::vector<std::int8_t> h(static_cast<std::size_t>(m * m));
  for (std::int64_t i = 0; i < c; ++i)
    for (std::int64_t j = 0; j < c; ++j)
      for (int s = 0; s < 2; ++s)
        for (int t = 0; t < 2; ++t) {
          const int entry = conference(i, j);
          const int sign = entry == 0 ? (s == 0 && t == 0 ? 1 : -1) : entry * (s == 1 && t == 1 ? -1 : 1);
          h[static_cast<std::size_t>((2 * i + s) * m + 2 * j + t)] = static_cast<std::int8_t>(sign);
        }
  return h;
}

int hadamard_sign(const HadamardFactors& f, std::int64_t i, std::int64_t j) {
  static const std::vector<std::int8_t> bases[3] = {paley_hadamard(12), paley_hadamard(20), paley_hadamard(28)};
  const int sylvester = __builtin_popcountll(static_cast<std::uint64_t>((i % f.pow2) & (j % f.pow2))) % 2 ? -1 : 1;
  if (f.base == 1) return sylvester;
  const std::vector<std::int8_t>& h = bases[f.base == 12 ? 0 : f.base == 20 ? 1 : 2];
  return sylvester * h[static_cast<std::size_t>((i / f.pow2) * f.base + j / f.pow2)];
}

HadamardFactors hadamard_factors(std::int64_t n) {
  if (n >= 2 && n <= 32768 && is_pow2(n)) return {1, n};
  for (std::int64_t m : {12, 20, 28})
    if (n % m == 0 && is_pow2(n / m) && n / m <= 1024) return {m, n / m};
  return {};
}

HadamardFactors checked_hadamard_factors(std::int64_t group, std::int64_t head_dim, DType data,
                                         const char* group_name) {
  const std::int64_t n = group * head_dim;
  const HadamardFactors factors = hadamard_factors(n);
  if (factors.base == 0)
    invalid_argument("n = {} * dhead = {} * {} = {} is not a supported size: use a power of two from 2 to 32768, "
                     "or 12, 20 or 28 times a power of two (up to 12288, 20480 and 28672)",
                     group_name, group, head_dim, n);
  if (data == DType::f64 && n > kMaxF64Size)
    invalid_argument("n = {} with f64 data: f64 transforms go up to n = {} (a row must fit shared memory)", n,
                     kMaxF64Size);
  return factors;
}

HadamardLayout choose_hadamard_layout(std::int64_t base, std::int64_t pow2, int vec, int value_bytes,
                                      bool prefetching) {
  // About 32 (f32) or 16 (f64) values in registers per thread; twice that where it keeps the row in
  // one warp (an exchange across warps costs more than the registers; H100, bf16/f16 n = 2048: 77-84%
  // of copy -> 98-99%, while n = 4096 with twice the values went both ways; such rows now cross their
  // lanes in shared memory, hadamard_lane_passes), unless rows across warps prefetch (H200, f32 n =
  // 2048: 66-67% in one warp, 94-95% in two). The m-point factor lives in the thread, so with m > 1
  // the vector shrinks until m vectors fit twice the base budget.
  const std::int64_t base_values = value_bytes == 8 ? 16 : 32;
  const bool one_warp_with_twice =
      !prefetching && base * pow2 > 32 * base_values && base * pow2 <= 64 * base_values;
  const std::int64_t values = one_warp_with_twice ? 2 * base_values : base_values;
  HadamardLayout layout;
  layout.vec = vec;
  while (layout.vec > 1 && (layout.vec > pow2 || base * layout.vec > 2 * base_values)) layout.vec /= 2;
  // An m-point row that would fill one warp spans two with half the vector where rows across warps
  // prefetch (H200: f32 n = 1280 70% of copy -> 73%, 1792 61% -> 65%, f64 768 79% -> 81%, f32 1536 unchanged).
  if (prefetching && base > 1 && layout.vec > 1 && pow2 / layout.vec == 32) layout.vec /= 2;
  const std::int64_t threads = base > 1 ? pow2 / layout.vec : std::max<std::int64_t>(1, pow2 / values);
  layout.threads_per_row = static_cast<int>(std::min({threads, pow2 / layout.vec, std::int64_t{kMaxThreadsPerRow}}));
  layout.rows_per_block = layout.threads_per_row >= 32 ? 1 : kBlockThreads / layout.threads_per_row;
  return layout;
}

unsigned hadamard_rows_bytes(std::int64_t n, DType data, std::int64_t rows) {
  const std::int64_t value_bytes = data == DType::f64 ? 8 : 4;
  return static_cast<unsigned>((n + n / 32) * value_bytes * rows);
}

bool hadamard_lane_passes(const HadamardSpec& s) {
  // Crossing 32 lanes costs each value five shuffles and five multiply-adds, against two stores and
  // two loads in shared memory (H200, n = 2048 in one warp: f16 83% of copy -> 90%, bf16 87% -> 89%;
  // rows of 32 values a thread, n = 1024, stayed within 1.5 points either way and keep the
  // shuffles; m-point rows of one warp fell, bf16 n = 1280 89% -> 65%).
  return s.threads_per_row == 32 && s.base == 1 && hadamard_n(s) / 32 >= 64;
}

unsigned hadamard_exchange_bytes(const HadamardSpec& s) {
  const bool exchanges = s.threads_per_row > 32 || hadamard_lane_passes(s);
  return exchanges ? hadamard_rows_bytes(hadamard_n(s), s.data, s.rows_per_block) : 0;
}

unsigned hadamard_shared_bytes(const HadamardSpec& s) {
  const std::int64_t copies = s.prefetch ? hadamard_n(s) * s.rows_per_block * dtype_size(s.data) : 0;
  return hadamard_exchange_bytes(s) + static_cast<unsigned>(copies);
}

unsigned hadamard_grid(const HadamardSpec& spec, std::int64_t rows) {
  // Blocks loop over their rows, so a grid of a few waves is enough. Prefetching blocks take
  // kPrefetchRowsPerBlock rows each, down to kPrefetchMinBlocks blocks: a block's first row is not
  // prefetched.
  const std::int64_t blocks = (rows + spec.rows_per_block - 1) / spec.rows_per_block;
  const std::int64_t grid =
      spec.prefetch
          ? std::max(std::min(blocks, kPrefetchMinBlocks), (blocks + kPrefetchRowsPerBlock - 1) / kPrefetchRowsPerBlock)
          : blocks;
  return static_cast<unsigned>(std::clamp<std::int64_t>(grid, 1, kMaxBlocks));
}

HadamardSpec hadamard_scalar_variant(HadamardSpec spec) {
  const HadamardFactors f = hadamard_factors(hadamard_n(spec));
  const HadamardLayout layout =
      choose_hadamard_layout(f.base, f.pow2, 1, spec.data == DType::f64 ? 8 : 4, prefetches_rows(spec.data));
  spec.vec = layout.vec;
  spec.threads_per_row = layout.threads_per_row;
  spec.rows_per_block = layout.rows_per_block;
  return spec;
}

namespace {

void check_tensor(const TensorDesc& t, const char* name) {
  if (t.shape.size() < 2 || t.shape.size() > static_cast<std::size_t>(kMaxRank))
    invalid_argument("{} has rank {}: hadamard takes [..., heads, dhead] of rank 2 to {}", name, t.shape.size(),
                     kMaxRank);
  if (!t.strides.empty() && t.strides.size() != t.shape.size())
    invalid_argument("{}.strides has {} values for {} dims: give one per dim (or none for contiguous)", name,
                     t.strides.size(), t.shape.size());
  for (std::size_t i = 0; i < t.shape.size(); ++i)
    if (t.shape[i] < 0) invalid_argument("{}.shape[{}] is {}: extents must be 0 or more", name, i, t.shape[i]);
  if (!is_float(t.dtype) || t.elem_bytes != 0)
    invalid_argument("{} has dtype {}: hadamard takes f16, bf16, f32 or f64", name, dtype_name(t.dtype));
  if (t.effective_strides().back() != 1 && t.shape.back() > 1)
    invalid_argument("{}.strides ends in {}: the dhead stride must be 1", name, t.effective_strides().back());
}

TensorDesc output_desc(const HadamardDesc& d) {
  if (d.y) {
    check_tensor(*d.y, "y");
    if (d.y->shape != d.x.shape || d.y->dtype != d.x.dtype)
      invalid_argument("y is {} {} but x is {} {}: give y x's shape and dtype", dtype_name(d.y->dtype), d.y->shape,
                       dtype_name(d.x.dtype), d.x.shape);
    if (d.inplace && d.y->effective_strides() != d.x.effective_strides())
      invalid_argument("y.strides {} differ from x.strides {} but the plan is in place: give y x's strides (or "
                       "plan with inplace = false)",
                       d.y->effective_strides(), d.x.effective_strides());
    return *d.y;
  }
  TensorDesc y = d.x;
  if (!d.inplace) y.strides.clear();
  return y;
}

/// The run-time row dims, innermost first: the head group index, then the outer dims, merged where
/// both x and y step through them as one.
std::vector<HadamardDim> row_dims(const TensorDesc& x, const TensorDesc& y, std::int64_t group) {
  const auto xs = x.effective_strides(), ys = y.effective_strides();
  const std::size_t rank = x.shape.size();
  std::vector<HadamardDim> dims;
  dims.push_back({x.shape[rank - 2] / group, 1, 0, group * xs[rank - 2], group * ys[rank - 2]});
  for (std::size_t i = rank - 2; i-- > 0;) {
    if (x.shape[i] == 1) continue;
    HadamardDim& inner = dims.back();
    if (inner.extent == 1) {
      inner = {x.shape[i], 1, 0, xs[i], ys[i]};
    } else if (xs[i] == inner.x_stride * inner.extent && ys[i] == inner.y_stride * inner.extent) {
      inner.extent *= x.shape[i];
    } else {
      dims.push_back({x.shape[i], 1, 0, xs[i], ys[i]});
    }
  }
  return dims;
}

/// Whether every element offset of t fits a signed 32-bit int.
bool fits_int32(const TensorDesc& t) {
  const ByteRange r = byte_range(t);
  const auto e = static_cast<std::int64_t>(t.element_size());
  return -r.lo / e <= std::numeric_limits<std::int32_t>::max() && r.hi / e <= std::numeric_limits<std::int32_t>::max();
}

}  // namespace

HadamardPlanData plan_hadamard_data(const HadamardDesc& desc, const HadamardOverrides& overrides) {
  check_tensor(desc.x, "x");
  HadamardPlanData plan;
  plan.desc = desc;
  const TensorDesc y = output_desc(desc);
  plan.desc.y = y;
  const std::size_t rank = desc.x.shape.size();
  const std::int64_t heads = desc.x.shape[rank - 2], head_dim = desc.x.shape[rank - 1];
  if (desc.group < 1 || heads % desc.group != 0)
    invalid_argument("group is {} but x has {} heads: the group must divide the heads", desc.group, heads);
  const std::int64_t n = desc.group * head_dim;
  const HadamardFactors factors = checked_hadamard_factors(desc.group, head_dim, desc.x.dtype, "group");
  if (desc.scale && !std::isfinite(*desc.scale)) invalid_argument("scale is {}: give a finite factor", *desc.scale);
  plan.desc.scale = desc.scale.value_or(1.0 / std::sqrt(static_cast<double>(n)));
  check_distinct_elements(y, desc.inplace ? "x" : "y");  // in place, y is x

  std::vector<HadamardDim> dims = row_dims(desc.x, y, desc.group);
  std::int64_t rows = 1;
  for (const HadamardDim& d : dims) rows *= d.extent;
  if (overrides.row_dims > 0) {
    if (static_cast<std::size_t>(overrides.row_dims) < dims.size())
      invalid_argument("--row-dims {} is fewer than the {} row dims of these shapes", overrides.row_dims, dims.size());
    dims.resize(static_cast<std::size_t>(overrides.row_dims));
  }
  if (dims.size() > static_cast<std::size_t>(kHadamardMaxRowDims))
    fail(ErrorCode::internal, "{} row dims from a rank-{} tensor: at most {} fit the kernel's arguments",
         dims.size(), rank, kHadamardMaxRowDims);
  if (rows > std::numeric_limits<std::int32_t>::max())
    fail(ErrorCode::unsupported, "{} rows (head groups) to transform: hadamard takes fewer than 2^31", rows);
  for (HadamardDim& d : dims) {
    const FastDivisor f = make_fast_divisor(static_cast<std::uint32_t>(std::max<std::int64_t>(d.extent, 1)));
    d.multiplier = f.multiplier;
    d.shift = f.shift;
  }

  const auto xs = desc.x.effective_strides(), ys = y.effective_strides();
  // A group whose heads lie back to back in x and in y is one head of n values: the kernel then
  // addresses each row as one run (bf16 [32768, 32, 128] in groups of 32 ran at 80-84% of copy as
  // 32 heads, where the same bytes as [32768, 1, 4096] ran at 100%).
  const bool adjacent_heads =
      !overrides.split_heads && desc.group > 1 && xs[rank - 2] == head_dim && ys[rank - 2] == head_dim;
  HadamardSpec& s = plan.spec;
  s.data = desc.x.dtype;
  s.head_dim = adjacent_heads ? n : head_dim;
  s.group = adjacent_heads ? 1 : desc.group;
  s.base = factors.base;
  s.row_dims = static_cast<int>(dims.size());
  s.inplace = desc.inplace;
  s.wide_index = overrides.index_bits == 64 || (overrides.index_bits != 32 && !(fits_int32(desc.x) && fits_int32(y)));
  // Vectors must stay aligned across every head and row a plan steps through.
  std::vector<std::int64_t> steps = {head_dim};
  if (heads > 1) steps.insert(steps.end(), {xs[rank - 2], ys[rank - 2]});
  for (const HadamardDim& d : dims)
    if (d.extent > 1) steps.insert(steps.end(), {d.x_stride, d.y_stride});
  const int max_vec = std::min(overrides.max_vec, static_cast<int>(16 / dtype_size(s.data)));
  const HadamardLayout layout = choose_hadamard_layout(factors.base, factors.pow2, largest_pow2_dividing(max_vec, steps),
                                                       s.data == DType::f64 ? 8 : 4, prefetches_rows(s.data));
  s.vec = layout.vec;
  s.threads_per_row = layout.threads_per_row;
  s.rows_per_block = layout.rows_per_block;
  // f32 and f64 rows across warps copy a block's next rows into shared memory while it transforms
  // these. (H200, hadamard_bench: the f32 rows that did at first, n = 2048-12288, went from 47-85%
  // of copy to 76-95%, the f64 rows, n = 1024-6144, from 49-82% to 73-94%; m-point rows of one warp
  // joined them later, see choose_hadamard_layout. bf16 and f16 rows lost up to 19 points, likely to
  // the blocks per SM the copies take, except n = 32768, alone on its SM either way, which gained
  // 5-8 points but needs 196 KB.)
  HadamardSpec with_copies = s;
  with_copies.prefetch = true;
  s.prefetch = prefetches_rows(s.data) && s.threads_per_row > 32 &&
               hadamard_shared_bytes(with_copies) <= kPrefetchMaxSharedBytes;

  HadamardKernelArgs& a = plan.args;
  a.rows = rows;
  a.scale = *plan.desc.scale;
  a.x_head_stride = xs[rank - 2];
  a.y_head_stride = ys[rank - 2];
  for (std::size_t i = 0; i < dims.size(); ++i) a.dim[i] = dims[i];
  plan.empty = rows == 0;
  return plan;
}

}  // namespace shapejit::plan
