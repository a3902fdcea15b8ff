// Classifying a canonical form and choosing each family's parameters.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <limits>
#include <memory_resource>
#include <numeric>
#include <optional>
#include <tuple>

#include "core/errors.hpp"
#include "core/fastdiv.hpp"
#include "ops/rearrange/spec.hpp"

namespace shapejit::plan {
namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;
// Tiles that span a whole group on one side, and that a thread of a half-size block still holds
// within its limits, run there at twice the blocks per SM: the same threads per SM keep twice the
// tiles in flight (H200, tuning seeds 40 and 44: u8 [3,21999,668,4] 0,1,3,2 79% -> 92% of copy, f16
// [3,619,85,371,2] 2,1,0,4,3 62% -> 89%). Tiles that are pieces of long rows on both sides lost
// (f16 64 x 64 transposes of seed 45: 61-62% -> 54-57%). Final tiles with fewer micro-tiles than
// threads take them too (take_small_blocks_for_idle_threads).
constexpr int kSmallBlockThreads = 128;
constexpr int kMaxStaticShared = 48 * 1024;
// Shared memory per SM (sm_80 and sm_90) and threads per SM, which bound the blocks an SM holds.
constexpr int kSharedPerSm[] = {164 * 1024, 228 * 1024};
constexpr std::int64_t kThreadsPerSm = 2048;
constexpr std::int64_t kRegistersPerSm = 65536;
constexpr int kSlabSpillMinBlocks = 4;  // blocks per SM of slab tiles over their register budget
constexpr std::int64_t kSlabOverLinearUnits = 5;  // units per thread under which slab dims beat linear moves
// Micro-tiles a thread of a tiled kernel holds at most (tile_fits), and where each holds 1 or 2 bytes,
// the count a grown tile may take once its family is chosen (plan_fixed_family).
constexpr std::int64_t kMicroTilesPerThread = 8;
constexpr std::int64_t kNarrowMicroTilesPerThread = 16;
constexpr std::int64_t kHeldBytes = 128;  // loaded bytes a thread of a tiled kernel holds at most
// Tiled kernels: each block walks two tiles, loading the second while it stores the first. H200,
// TTC geomeans of copy for u8 / f16 / f32: one tile per block 80 / 85 / 90%, two 82 / 89 / 92%, four
// 80 / 88 / 92%, a persistent grid of resident blocks 82 / 87 / 89% (it loses the hardware's dynamic
// balancing of blocks over SMs). Tiles of 4- to 16-byte units over a 2-dim canonical form are the
// exception (tiles_per_block).
constexpr std::int64_t kTilesPerBlock = 2;
// 32-bit index math keeps a factor two of headroom, so a tile running past an extent cannot wrap.
constexpr std::int64_t kIndex32Limit = std::numeric_limits<std::int32_t>::max() / 2;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// At most one entry per dim of a canonical form, kept inline: a plan tries many tile shapes, and
/// heap-allocated lists took a third of the planner's time.
template <typename T>
class DimList {
 public:
  DimList() = default;
  DimList(std::initializer_list<T> items) {
    for (T item : items) push_back(item);
  }
  // Copies only the entries in use: the capacity is the largest rank, and plans copy lists often.
  DimList(const DimList& other) : size_(other.size_) { std::copy(other.begin(), other.end(), items_); }
  DimList& operator=(const DimList& other) {
    if (this == &other) return *this;
    size_ = other.size_;
    std::copy(other.begin(), other.end(), items_);
    return *this;
  }
  void push_back(T item) {
    if (size_ == kCapacity) fail(ErrorCode::internal, "DimList: more than {} dims", kCapacity);
    items_[size_++] = item;
  }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](std::size_t i) { return items_[i]; }
  T operator[](std::size_t i) const { return items_[i]; }
  T* begin() { return items_; }
  T* end() { return items_ + size_; }
  const T* begin() const { return items_; }
  const T* end() const { return items_ + size_; }
  T front() const { return items_[0]; }
  T back() const { return items_[size_ - 1]; }
  bool operator==(const DimList& other) const { return std::equal(begin(), end(), other.begin(), other.end()); }
  // A plain scan: lists hold a few dims, where std::find's unrolled loop costs more (plan time).
  bool contains(T item) const {
    for (std::size_t k = 0; k < size_; ++k)
      if (items_[k] == item) return true;
    return false;
  }

 private:
  static constexpr std::size_t kCapacity = kMaxRearrangeRank + 1;
  T items_[kCapacity];  // only [0, size_) is ever read
  std::size_t size_ = 0;
};

// A dim's index in a canonical form, in lists of dims (groups, chains, runs): one byte keeps a
// tile choice small (400 bytes with its memo key), so a plan's memo of them (tens of entries) stays
// under 26 KB: larger, freeing it made glibc trim the heap after every plan.
using DimIndex = std::uint8_t;
static_assert(kMaxRearrangeRank < 256, "dim indices fit in a DimIndex");

std::int64_t pow2_floor(std::int64_t x) {
  std::int64_t p = 1;
  while (p * 2 <= x) p *= 2;
  return p;
}

std::int64_t pow2_ceil(std::int64_t x) {
  std::int64_t p = 1;
  while (p < x) p *= 2;
  return p;
}

bool divides(std::int64_t v, std::int64_t x) { return x % v == 0; }

// Whether a family's kernels come from the tiled template (rearrange_tiled.cu).
bool is_tiled(RearrangeFamily family) {
  return family == RearrangeFamily::transpose || family == RearrangeFamily::packed;
}

// Appends the divisors of n > 0 that are at most `most` to `divisors` (which holds just 1), in no
// order, built from n's prime factors: a divisor's divisors are all smaller, so larger products are
// left out as they come. Trial division stops at the square root of what is left of n, so extents
// made of small factors take a few steps.
void add_divisors_at_most(std::int64_t n, std::int64_t most, std::pmr::vector<std::int64_t>& divisors) {
  const auto multiply_in = [&](std::int64_t prime, int power) {
    const std::size_t count = divisors.size();
    std::int64_t factor = 1;
    for (int k = 0; k < power && factor <= most / prime; ++k) {
      factor *= prime;
      for (std::size_t i = 0; i < count; ++i)
        if (divisors[i] <= most / factor) divisors.push_back(divisors[i] * factor);
    }
  };
  for (std::int64_t p = 2; p * p <= n; p += p == 2 ? 1 : 2) {
    int power = 0;
    for (; n % p == 0; n /= p) ++power;
    if (power > 0) multiply_in(p, power);
  }
  if (n > 1) multiply_in(n, 1);
}

// Calls visit(d) for each divisor d of n > 0 that is at most `most`, largest first, until it returns
// true. Up to kDivisorWalk, a walk down from `most` one integer at a time; past it, the divisors from
// n's factors (a walk down from the square root of a 7-digit extent took most of a plan's time).
constexpr std::int64_t kDivisorWalk = 64;
template <typename Visit>
void visit_divisors_descending(std::int64_t n, std::int64_t most, Visit visit) {
  if (most <= kDivisorWalk) {
    for (std::int64_t d = std::min(most, n); d >= 1; --d)
      if (n % d == 0 && visit(d)) return;
    return;
  }
  // Most extents have a few dozen divisors: they stay on the stack. The visits mostly stop at the
  // first few, so the divisors are taken off a heap rather than sorted.
  std::array<std::byte, 2048> buffer;
  std::pmr::monotonic_buffer_resource arena(buffer.data(), buffer.size());
  std::pmr::vector<std::int64_t> divisors({1}, &arena);
  add_divisors_at_most(n, most, divisors);
  std::make_heap(divisors.begin(), divisors.end());
  for (auto end = divisors.end(); end != divisors.begin(); --end) {
    std::pop_heap(divisors.begin(), end);
    if (visit(*(end - 1))) return;
  }
}

// The largest divisor of n > 0 that is at most `most` >= 1: n itself where `most` reaches it, without
// building n's divisors (which took 13% of the instructions of the plan of f16 [4,13,8,2,23,39,27,9]
// 5,4,2,3,0,6,7,1 and 10% of u8 [82,2,5,7,3,147,69] 4,3,5,2,0,6,1, build machine).
std::int64_t largest_divisor_at_most(std::int64_t n, std::int64_t most) {
  if (most >= n) return n;
  std::int64_t found = 1;
  visit_divisors_descending(n, most, [&](std::int64_t d) {
    found = d;
    return true;
  });
  return found;
}

bool needs_index64(const RearrangeDims& dims) {
  std::int64_t src_span = 0, dst_span = 0;
  for (const RearrangeDim& d : dims) {
    src_span += std::llabs(d.src_stride) * (d.extent - 1);
    dst_span += d.dst_stride * (d.extent - 1);
  }
  return std::max({unit_count(dims), src_span + 1, dst_span + 1}) > kIndex32Limit;
}

KernelDim kernel_dim(const RearrangeDim& d) { return {make_kernel_divisor(d.extent), d.src_stride, d.dst_stride}; }

std::uint32_t grid_for(std::int64_t tiles) {
  return static_cast<std::uint32_t>(std::min<std::int64_t>(tiles, std::numeric_limits<std::int32_t>::max()));
}

// ---- row and gather -------------------------------------------------------------------------

constexpr std::int64_t kShortRowBytes = 256;

// The row dim to split off for short rows: the one nearest in the source (smallest nonzero
// |src stride|), when it is nearer than the destination's next dim; rows are `dims[0, size - 1)`.
std::optional<std::size_t> split_row_dim(const RearrangeDims& dims) {
  if (dims.size() < 3) return std::nullopt;
  const std::size_t next = dims.size() - 2;
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i + 1 < dims.size(); ++i)
    if (dims[i].src_stride != 0 && (!best || std::llabs(dims[i].src_stride) < std::llabs(dims[*best].src_stride)))
      best = i;
  if (best && *best != next && std::llabs(dims[*best].src_stride) < std::llabs(dims[next].src_stride)) return best;
  return std::nullopt;
}

// dim[0] = innermost dim, dim[1..] = the others innermost first (split: the split dim first); a
// tile is (threads / tile_x * items_y) rows x (tile_x * items_x) units.
RearrangeVariant plan_rows(const CanonicalForm& form, bool exact) {
  const RearrangeDim inner = form.dims.back();
  RearrangeSpec spec;
  spec.unit_bytes = static_cast<int>(form.unit_bytes);
  spec.src_inner_unit = inner.src_stride == 1;
  spec.dst_inner_unit = inner.dst_stride == 1;
  spec.family = spec.src_inner_unit && spec.dst_inner_unit ? RearrangeFamily::row : RearrangeFamily::gather;
  spec.exact = exact;
  spec.index64 = needs_index64(form.dims);
  spec.num_dims = static_cast<int>(form.dims.size());

  const std::int64_t length = inner.extent;
  const std::int64_t rows = unit_count(form.dims) / length;
  // About 64 bytes in flight per thread, at least 4 and at most 16 accesses.
  const std::int64_t items = std::clamp<std::int64_t>(64 / form.unit_bytes, 4, 16);
  const std::int64_t tile_x = std::min<std::int64_t>(kThreads, pow2_ceil(length));
  const std::int64_t threads_y = kThreads / tile_x;
  const std::int64_t items_x = std::min(items, pow2_floor(std::max<std::int64_t>(1, length / tile_x)));
  std::int64_t items_y = std::min(items / items_x, pow2_ceil(ceil_div(rows, threads_y)));
  spec.tile_x = static_cast<int>(tile_x);
  spec.items_x = static_cast<int>(items_x);
  const std::int64_t tile_cols = tile_x * items_x;

  // Rows of kShortRowBytes or less come from all over the source: tile them along the source's
  // nearest row dim too, so both sides see runs of several rows.
  const bool short_rows = length * form.unit_bytes <= kShortRowBytes && spec.family == RearrangeFamily::row;
  const std::size_t none = form.dims.size();
  const std::size_t split = short_rows ? split_row_dim(form.dims).value_or(none) : none;
  RearrangeDims order;  // kernel dim order: innermost, then (split dim,) then rows innermost first
  order.push_back(inner);
  if (split != none) order.push_back(form.dims[split]);
  for (std::size_t k = form.dims.size() - 1; k-- > 0;)
    if (k != split) order.push_back(form.dims[k]);

  RearrangeVariant v{form, spec, {}, 0, 0};
  RearrangeKernelArgs& args = v.args;
  args.extent_a = length;
  args.tiles_x = make_kernel_divisor(ceil_div(length, tile_cols));
  if (split != none) {
    const std::int64_t extent2 = form.dims[split].extent, rows1 = rows / extent2;
    const std::int64_t tile_y1 = std::min({threads_y, pow2_ceil(rows1),
                                          pow2_ceil(static_cast<std::int64_t>(std::sqrt(threads_y * items_y)))});
    const std::int64_t step2 = threads_y / tile_y1;
    items_y = std::min(items_y, pow2_ceil(ceil_div(extent2, step2)));
    v.spec.split_rows = true;
    v.spec.tile_y1 = static_cast<int>(tile_y1);
    v.spec.bounds = !divides(tile_cols, length) || !divides(tile_y1, rows1) || !divides(step2 * items_y, extent2);
    args.extent_b = rows1;
    args.tiles_y = make_kernel_divisor(ceil_div(rows1, tile_y1));
    args.num_tiles = args.tiles_x.value * args.tiles_y.value * ceil_div(extent2, step2 * items_y);
  } else {
    const std::int64_t tile_rows = threads_y * items_y;
    v.spec.bounds = !divides(tile_cols, length) || !divides(tile_rows, rows);
    args.extent_b = rows;
    args.num_tiles = args.tiles_x.value * ceil_div(rows, tile_rows);
  }
  v.spec.items_y = static_cast<int>(items_y);
  for (std::size_t k = 0; k < order.size(); ++k) args.dim[k] = kernel_dim(order[k]);
  v.grid = grid_for(args.num_tiles);
  return v;
}

// Rows in 16-byte destination vectors (rearrange_rows_vectors.cu): rows whose ends are not all 16-byte
// aligned (units under 16 bytes), by default where they hold kVectorRowMinBytes or more, and as a
// tuning candidate where they are longer than kShortRowBytes (shorter ones are split, or take segment
// tiles). H200, tuning seeds 1552-1575, against the row and segment plans they replace: rows of 800
// bytes or more 53 lines, every one up (by 0.3 to 35 points of copy); rows of 257 to 776 bytes 51
// lines, 13 up and 31 down, where a warp along each row idles a third of its lanes or more.
constexpr std::int64_t kVectorBytes = 16;
constexpr std::int64_t kVectorRowItems = 4;
constexpr std::int64_t kVectorRowMinBytes = 768;
constexpr std::int64_t kSectorBytes = 32;  // the unit of DRAM and L2 traffic

// Bytes per row where the innermost dim is shared (unit stride on both sides) in units under 16 bytes,
// else 0.
std::int64_t unaligned_row_bytes(const CanonicalForm& form) {
  const RearrangeDim& inner = form.dims.back();
  const bool shared = inner.src_stride == 1 && inner.dst_stride == 1;
  return shared && form.unit_bytes < kVectorBytes ? inner.extent * form.unit_bytes : 0;
}

// dim[0] = the row, dim[1..] = the others innermost first. A row touches at most `vectors` aligned
// destination vectors: a warp's lanes side by side along it, each taking up to kVectorRowItems of
// them, so that a tile holds whole rows of about 2 KiB (tiles of 4 lanes per row, a few vectors of
// many rows, lost up to 26 points of copy on the tuning seeds).
RearrangeVariant plan_vector_rows(const CanonicalForm& form, bool exact) {
  const RearrangeDim& inner = form.dims.back();
  const std::int64_t row_bytes = inner.extent * form.unit_bytes;
  const std::int64_t vectors = (row_bytes + 2 * kVectorBytes - 2) / kVectorBytes;
  const std::int64_t tile_x = kWarp;
  const std::int64_t items_x = std::min(kVectorRowItems, ceil_div(vectors, tile_x));
  RearrangeSpec spec;
  spec.family = RearrangeFamily::row;
  spec.vector_rows = true;
  spec.unit_bytes = static_cast<int>(form.unit_bytes);
  spec.exact = exact;
  spec.index64 = needs_index64(form.dims);
  spec.num_dims = static_cast<int>(form.dims.size());
  spec.tile_x = static_cast<int>(tile_x);
  spec.items_x = static_cast<int>(items_x);
  const std::int64_t rows = unit_count(form.dims) / inner.extent;
  spec.items_y = static_cast<int>(std::min(kVectorRowItems / items_x, pow2_ceil(ceil_div(rows, kThreads / tile_x))));
  spec.bounds = !divides(kThreads / tile_x * spec.items_y, rows);

  RearrangeVariant v{form, spec, {}, 0, 0};
  RearrangeKernelArgs& args = v.args;
  args.extent_a = inner.extent;
  args.extent_b = rows;
  args.tiles_x = make_kernel_divisor(ceil_div(vectors, tile_x * items_x));
  args.num_tiles = args.tiles_x.value * ceil_div(rows, kThreads / tile_x * spec.items_y);
  args.dim[0] = kernel_dim(inner);
  for (std::size_t k = form.dims.size() - 1, i = 1; k-- > 0; ++i) args.dim[i] = kernel_dim(form.dims[k]);
  v.grid = grid_for(args.num_tiles);
  return v;
}

// ---- transpose and packed -------------------------------------------------------------------

// Group A: dims contiguous in the destination starting at its stride-1 dim; group B: dims contiguous
// in the source starting at `b`. Each holds dim indices into the form, innermost first.
struct Groups {
  DimList<DimIndex> a, b;  // add dims with add_a and add_b, which keep the bit sets
  std::int64_t extent_a = 1, extent_b = 1;
  std::uint64_t a_bits = 0, b_bits = 0;  // bit i: dim i is in a (in b)

  void add_a(std::size_t i, std::int64_t extent) {
    check_bit_index(i);
    a.push_back(static_cast<DimIndex>(i));
    a_bits |= std::uint64_t{1} << i;
    extent_a *= extent;
  }
  void add_b(std::size_t i, std::int64_t extent) {
    check_bit_index(i);
    b.push_back(static_cast<DimIndex>(i));
    b_bits |= std::uint64_t{1} << i;
    extent_b *= extent;
  }
  bool in_a(std::size_t i) const { return (a_bits >> i & 1) != 0; }
  bool in_b(std::size_t i) const { return (b_bits >> i & 1) != 0; }
  // A form in units may hold a dim more than kMaxRearrangeRank; only 64 fit the bit sets (more dims
  // of extent 2 or over would span more than 2^63 bytes).
  static void check_bit_index(std::size_t i) {
    if (i >= 64) fail(ErrorCode::internal, "tile group dim {} past the bit sets", i);
  }
};

bool in_groups(const Groups& g, std::size_t i) { return ((g.a_bits | g.b_bits) >> i & 1) != 0; }

// Units of a group's first dims up to and including dim i, or 0 when i is not in the group.
std::int64_t prefix_through(const RearrangeDims& dims, const DimList<DimIndex>& group, std::size_t i) {
  std::int64_t units = 1;
  for (std::size_t k : group) {
    units *= dims[k].extent;
    if (k == i) return units;
  }
  return 0;
}

// The dim of destination stride `stride`, if any. Destination elements are distinct, so no two dims
// share a stride; canonical dims end with the smallest strides, so the search starts there.
std::optional<std::size_t> dst_dim_with_stride(const RearrangeDims& dims, std::int64_t stride) {
  for (std::size_t i = dims.size(); i-- > 0;)
    if (dims[i].dst_stride == stride) return i;
  return std::nullopt;
}

// The dims of the destination's contiguous chain, innermost first: the dim of destination stride 1,
// then the dim whose stride is the units before it, and so on.
DimList<DimIndex> destination_chain(const RearrangeDims& dims) {
  DimList<DimIndex> chain;
  std::int64_t next = 1;
  for (std::optional<std::size_t> i = dst_dim_with_stride(dims, next); i; i = dst_dim_with_stride(dims, next)) {
    chain.push_back(static_cast<DimIndex>(*i));
    next *= dims[*i].extent;
  }
  return chain;
}

// Adds dims of the destination chain (destination_chain) that continue group A until its extent
// reaches `target`. The chain may pass once through B's first dims, in B's order, while they hold at
// most `pass_b` units (tiles that span them whole keep the destination contiguous across both
// groups, and a B index's low part is then its offset past the chain); returns the B units it passed
// before an A dim (1: none).
std::int64_t grow_a(const RearrangeDims& dims, const DimList<DimIndex>& dst_chain, Groups& g, std::int64_t target,
                    std::int64_t pass_b = 1) {
  std::int64_t passed = 1, passing = 1;
  for (const std::size_t i : dst_chain) {
    const bool in_a = g.in_a(i);
    if (!in_a && g.extent_a < target && !in_groups(g, i)) g.add_a(i, dims[i].extent);
    if (in_a || g.a.back() == i) {
      passed = passing;
    } else if (const std::int64_t prefix = prefix_through(dims, g.b, i);
               passed == 1 && prefix == passing * dims[i].extent && prefix <= pass_b) {
      passing = prefix;
    } else {
      break;
    }
  }
  return passed;
}

// Units of a group's first dims that are back to back in src.
std::int64_t source_run_units(const RearrangeDims& dims, const DimList<DimIndex>& group) {
  std::int64_t units = 1;
  for (std::size_t i : group) {
    if (dims[i].src_stride != units) break;
    units *= dims[i].extent;
  }
  return units;
}

// Units of a group's first dims that are back to back in dst.
std::int64_t destination_run_units(const RearrangeDims& dims, const DimList<DimIndex>& group) {
  std::int64_t units = 1;
  for (std::size_t i : group) {
    if (dims[i].dst_stride != units) break;
    units *= dims[i].extent;
  }
  return units;
}

// A run of a tile that spans one group whole (`whole` units): on the side where that group is
// contiguous (A in dst, B in src), the other group's first `dims` dims continue it, each stride the
// units before it; `indices` of the other group per run (0: no such run).
struct TileRun {
  std::int64_t indices = 0;
  std::size_t dims = 0;
};

// The other group's indices per run: the whole tile (`tile` indices) where all of the group
// continues the whole one, else the longest product of its first continuing dims that divides
// `tile` (tiles start at its multiples).
TileRun run_over(const RearrangeDims& dims, std::int64_t whole, const DimList<DimIndex>& group, std::int64_t tile,
                 bool in_src) {
  auto stride = [&](std::size_t i) { return in_src ? dims[i].src_stride : dims[i].dst_stride; };
  std::int64_t units = whole;
  std::size_t continuing = 0;
  for (; continuing < group.size() && stride(group[continuing]) == units; ++continuing)
    units *= dims[group[continuing]].extent;
  if (continuing == group.size()) return {tile, continuing};
  TileRun run{1, 0};
  for (; run.dims < continuing && divides(run.indices * dims[group[run.dims]].extent, tile); ++run.dims)
    run.indices *= dims[group[run.dims]].extent;
  return run.dims > 0 ? run : TileRun{};
}

// Strides on one side of the dims outside the whole group and the run: where the runs start.
DimList<std::int64_t> strides_past_run(const RearrangeDims& dims, const DimList<DimIndex>& whole,
                                       const DimList<DimIndex>& group, const TileRun& run, bool in_src) {
  DimList<std::int64_t> strides;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const auto in_group = std::find(group.begin(), group.end(), i);
    const bool in_run = in_group != group.end() && static_cast<std::size_t>(in_group - group.begin()) < run.dims;
    if (!whole.contains(i) && !in_run)
      strides.push_back(in_src ? dims[i].src_stride : dims[i].dst_stride);
  }
  return strides;
}

// Adds dims that continue group B contiguously in src until its extent reaches `target`. The chain
// may pass through A's first dims while they hold at most `pass_a` units (tiles that span them whole
// keep the source contiguous across both groups); returns the A units it passed before a dim it
// added (1: none).
std::int64_t grow_b(const RearrangeDims& dims, Groups& g, std::int64_t target, std::int64_t pass_a = 1) {
  if (dims[g.b.front()].src_stride != 1) return 1;
  std::int64_t next = g.extent_b, passed = 1, passing = 1;
  for (bool grown = true; grown && g.extent_b < target;) {
    grown = false;
    for (std::size_t i = 0; i < dims.size() && !grown; ++i) {
      if (dims[i].src_stride != next) continue;
      if (!in_groups(g, i)) {
        g.add_b(i, dims[i].extent);
        passed = passing;
        grown = true;
      } else if (const std::int64_t prefix = prefix_through(dims, g.a, i); prefix > 0 && prefix <= pass_a) {
        passing = std::max(passing, prefix);
        grown = true;
      }
      if (grown) next *= dims[i].extent;
    }
  }
  return passed;
}

// The dim that reads best along a tile row: the smallest nonzero |src stride| that beats the
// destination's innermost dim, or none (then walking in destination order is as good).
std::optional<std::size_t> source_inner_dim(const RearrangeDims& dims, std::size_t a) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i == a || dims[i].src_stride == 0) continue;
    if (!best || std::llabs(dims[i].src_stride) < std::llabs(dims[*best].src_stride)) best = i;
  }
  if (best && std::llabs(dims[*best].src_stride) < std::llabs(dims[a].src_stride)) return best;
  return std::nullopt;
}

// Widest access (in units, a power of two up to `max_units`) such that `count` and every listed
// stride are multiples of it and the pointer is aligned for it (`max_units` and `align_units` are
// powers of two, so a multiple of v is a value whose bits below v are clear).
std::int64_t widest_vector(std::int64_t max_units, std::int64_t count, const DimList<std::int64_t>& strides,
                           std::int64_t align_units) {
  std::int64_t low_bits = count;
  for (std::int64_t s : strides) low_bits |= s;
  std::int64_t v = std::min(max_units, align_units);
  while (v > 1 && (low_bits & (v - 1)) != 0) v /= 2;
  return v;
}

// Blocks per SM the registers must allow, from the bytes a thread holds in registers, whether both
// groups are single dims (composite ones keep offset tables) and the micro-tiles per thread.
// Four for light micro-tiles of wide units, three for other light ones, two for the rest so that
// heavier micro-tiles keep their registers. 1-byte units take three unless they are heavy and
// composite: at two too few of their narrow loads are in flight (H200, u8 TTC lines at 57-68% of copy
// rose to 71-81%; heavy composite ones lost 2-10 points; four was worse: geomean 71% vs 77%).
int min_blocks_per_sm(std::int64_t unit, std::int64_t held, bool single, std::int64_t micro_per_thread) {
  if (unit == 1) return held > 64 && !single ? 2 : 3;
  if (held > 64) return 2;
  if (single && unit >= 4 && micro_per_thread <= 4) return 4;
  return single || unit >= 4 ? 3 : 2;
}

// `tile`, or when its tiles of `extent` would leave 30% or more idle, the tile in multiples of
// `step` that splits `extent` into as many tiles evenly: 560 into 280 + 280 rather than 512 + 48.
// (H200, f16: such lines rose 5 to 15 points; evening out smaller waste, 480 into 4 x 120 rather
// than 4 x 128, cost 20 points: the tile loses its swizzle and whole micro-tile passes. Tiles of 4-
// to 16-byte units, evened too since: on the 22 lines of seeds 1881-1884 it changes, 75.0% -> 79.1%
// of copy; on the 99 lines of seeds 1885-1896 it changes, drawn after, 77.5% -> 79.4%, f32 (40)
// 73.7% -> 75.7%, f64 (53) 81.4% -> 82.9%, 21 up and 7 down by 3 points or more.)
std::int64_t even_tile(std::int64_t extent, std::int64_t tile, std::int64_t step) {
  const std::int64_t tiles = ceil_div(extent, tile);
  if (10 * (tiles * tile - extent) < 3 * tiles * tile) return tile;
  return std::min(tile, ceil_div(ceil_div(extent, tiles), step) * step);
}

// Whether tiles of `tile` units along a group (dims innermost first) start at indices whose
// offsets add to those of a tile's own indices without carries: the tile spans the group, or whole
// inner dims times a piece of the next dim, which the tiles split evenly unless it is the last.
bool carry_free_tiles(const RearrangeDims& dims, const DimList<DimIndex>& group, std::int64_t tile) {
  std::int64_t inner = 1;
  for (std::size_t k = 0; k < group.size(); ++k) {
    const std::int64_t extent = dims[group[k]].extent;
    if (tile <= inner * extent) {
      if (tile % inner != 0) return false;
      return k + 1 == group.size() || extent % (tile / inner) == 0;
    }
    inner *= extent;
  }
  return true;
}

// The largest carry-free tile (see carry_free_tiles) of at most `target` units along a group.
std::int64_t carry_free_tile(const RearrangeDims& dims, const DimList<DimIndex>& group, std::int64_t target) {
  std::int64_t inner = 1, best = 1;
  for (std::size_t k = 0; k < group.size() && inner <= target; ++k) {
    const std::int64_t extent = dims[group[k]].extent;
    std::int64_t piece = std::min(extent, target / inner);
    if (k + 1 < group.size()) piece = largest_divisor_at_most(extent, piece);
    best = std::max(best, inner * piece);
    inner *= extent;
  }
  return best;
}

// Unit offset in shared memory of a tiled spec's A vector `vector` of B index b, whose micro-tile
// row is b / vec_b (sj_smem_pos, where rows hold B indices).
int staged_position(const RearrangeSpec& s, int vector, int b, int micro_row) {
  if (s.swizzle) vector ^= micro_row * s.swizzle_step & (s.swizzle_period - 1);  // the period is a power of two
  return b * s.pitch + vector * s.vec_a;
}

// Lanes of a warp whose shared-memory accesses of `access_bytes` are served together: 128 bytes'
// worth, all 32 for accesses of up to 4 bytes.
int lanes_served_together(int access_bytes) { return access_bytes <= 4 ? 32 : 128 / access_bytes; }

// Shared-memory wavefronts of one warp access of `access_bytes` per lane at the given byte offsets
// (aligned to the access), its lanes served in groups (lanes_served_together). In each group a bank
// serves one 32-bit word per wavefront, so aligned vectors conflict where they fall in the same
// 128-byte slot, and lanes that touch the same word (narrower accesses) share it.
int warp_wavefronts(const int* offsets, int lanes, int access_bytes) {
  const int group = lanes_served_together(access_bytes);
  const int shift = std::countr_zero(static_cast<unsigned>(access_bytes));  // accesses are powers of two
  int total = 0;
  for (int first = 0; first < lanes; first += group) {
    const int last = std::min(lanes, first + group);
    std::uint8_t per_slot[32] = {};  // counts of at most 32 lanes: bytes, cheap to zero per group
    int most = 0;
    if (access_bytes < 4) {
      // A word counts once in its bank, on the first lane that touches it. The words seen are kept
      // in an open-addressed table of twice a group's lanes, hashed so that one bank's many words
      // do not collide (words are never negative: -1 marks a free entry).
      int seen[64];
      std::fill(std::begin(seen), std::end(seen), -1);
      for (int lane = first; lane < last; ++lane) {
        const int word = offsets[lane] / 4;
        unsigned h = static_cast<unsigned>(word) * 0x9E3779B1u >> 26;
        while (seen[h] != -1 && seen[h] != word) h = (h + 1) & 63;
        if (seen[h] == -1) {
          seen[h] = word;
          most = std::max<int>(most, ++per_slot[word & 31]);
        }
      }
    } else {
      for (int lane = first; lane < last; ++lane)
        most = std::max<int>(most, ++per_slot[(offsets[lane] >> shift) & (group - 1)]);
    }
    total += most;
  }
  return total;
}

// One lane's shared-memory access: its A vector, B index and micro-tile row.
struct StagingLane {
  int vector, b, micro_row;
};
// A tiled spec's shared-memory traffic, sampled on its first two warps: the staging writes (a
// warp's micro-tiles, VEC_A units down one column each) and the reads of the stores (a warp's
// vectors along the rows). The two passes issue equally many warp accesses per tile. The lanes
// depend on the tile alone, so a layout search samples them once and places them in each layout
// (staging_wavefronts).
struct StagingSample {
  StagingLane writes[64], reads[64];
  int write_lanes[2] = {}, read_lanes[2] = {};
  int fewest = 0;  // the wavefronts of a layout free of conflicts
  // Where rows hold whole groups of lanes, each group reads consecutive vectors of one row (permuted
  // within 128 bytes when swizzled): one wavefront per 128 bytes in every layout. Such reads are not
  // sampled (no read lanes); their wavefronts are added as they are to `fewest` and to every count.
  int fixed_reads = 0;
};

StagingSample sample_staging(const RearrangeSpec& s) {
  const int micro_a = s.tile_a / s.vec_a, micro_b = s.tile_b / s.vec_b;
  const int access_bytes = s.vec_a * s.unit_bytes;
  StagingSample out;
  // Staging: lane l writes micro-tile (l / micro_b, l % micro_b), walked with counters (divisions
  // cost more).
  for (int warp = 0, vector = 0, row = 0; warp < 2; ++warp) {
    int& lanes = out.write_lanes[warp];
    for (; lanes < 32 && vector < micro_a; ++lanes) {
      out.writes[32 * warp + lanes] = {vector, row * s.vec_b, row};
      if (++row == micro_b) row = 0, ++vector;
    }
    out.fewest += (lanes * access_bytes + 127) / 128;
  }
  // Reads: lane l reads vector l % micro_a of row l / micro_a.
  if (micro_a % lanes_served_together(access_bytes) == 0) {
    for (int warp = 0, lanes = micro_a * s.tile_b; warp < 2 && lanes > 0; ++warp, lanes -= 32)
      out.fixed_reads += (std::min(lanes, 32) * access_bytes + 127) / 128;
    out.fewest += out.fixed_reads;
    return out;
  }
  for (int warp = 0, vector = 0, row = 0, micro_row = 0, row_in_micro = 0; warp < 2; ++warp) {
    int& lanes = out.read_lanes[warp];
    for (; lanes < 32 && row < s.tile_b; ++lanes) {
      out.reads[32 * warp + lanes] = {vector, row, micro_row};
      if (++vector == micro_a) {
        vector = 0;
        ++row;
        if (++row_in_micro == s.vec_b) row_in_micro = 0, ++micro_row;
      }
    }
    out.fewest += (lanes * access_bytes + 127) / 128;
  }
  return out;
}

// Wavefronts the sampled warps take in layout s (its pitch and swizzle), counted until `bound`.
int staging_wavefronts(const RearrangeSpec& s, const StagingSample& sample,
                       int bound = std::numeric_limits<int>::max()) {
  const int access_bytes = s.vec_a * s.unit_bytes;
  int taken = sample.fixed_reads;
  auto count = [&](const StagingLane* lanes, int n) {
    int offsets[32];
    for (int l = 0; l < n; ++l)
      offsets[l] = staged_position(s, lanes[l].vector, lanes[l].b, lanes[l].micro_row) * s.unit_bytes;
    taken += warp_wavefronts(offsets, n, access_bytes);
  };
  for (int warp = 0; warp < 2 && taken < bound; ++warp) count(sample.writes + 32 * warp, sample.write_lanes[warp]);
  for (int warp = 0; warp < 2 && taken < bound; ++warp) count(sample.reads + 32 * warp, sample.read_lanes[warp]);
  return taken;
}

// Shared-memory rows of a tiled spec, while its tile is chosen: linear loads and stores need rows
// back to back; otherwise an XOR swizzle of the A vectors when a row holds whole 128-byte periods,
// else one vector of padding (spread_rows may change the layout of the final tile).
// A vectors (of at least a bank's 4 bytes) in 128 bytes of shared memory: the widest swizzle period.
int vectors_per_128_bytes(const RearrangeSpec& s) { return 128 / std::max(s.vec_a * s.unit_bytes, 4); }

void choose_rows(RearrangeSpec& s) {
  const std::int64_t vec_a_bytes = std::int64_t{s.vec_a} * s.unit_bytes;
  const std::int64_t micro_a = s.tile_a / s.vec_a, micro_b = s.tile_b / s.vec_b;
  s.swizzle_period = vectors_per_128_bytes(s);
  s.swizzle_step = 1;
  s.swizzle = false;
  if (s.load_linear) {
    s.pitch = s.tile_b;
  } else if (s.store_linear) {
    s.pitch = s.tile_a;
  } else if (vec_a_bytes >= 4 && divides(s.swizzle_period, micro_a) && divides(s.swizzle_period, micro_b)) {
    s.swizzle = true;
    s.pitch = s.tile_a;
  } else {
    s.pitch = static_cast<int>(s.tile_a + (micro_a % 2 == 0 ? s.vec_a : 0));
  }
}

// Blocks per SM that a block's shared memory allows (the hardware keeps 1 KiB per block) with
// `per_sm` bytes of shared memory, up to what the threads allow.
std::int64_t blocks_by_shared(int bytes, int per_sm, int threads) {
  return std::min<std::int64_t>(per_sm / (bytes + 1024), kThreadsPerSm / threads);
}

// Whether a layout of `bytes` of shared memory fits as many blocks per SM, on every architecture,
// as `current_bytes` do, and the static limit.
bool keeps_blocks(int bytes, int current_bytes, int threads) {
  return bytes <= kMaxStaticShared && std::all_of(std::begin(kSharedPerSm), std::end(kSharedPerSm), [&](int per_sm) {
           return blocks_by_shared(bytes, per_sm, threads) >= blocks_by_shared(current_bytes, per_sm, threads);
         });
}

// Where linear stores read tile offset l in shared memory: sj_rotated in the tiled template. Spans
// and store vectors are powers of two (rotate_store_vectors), so shifts and masks place it.
int rotated_place(const RearrangeSpec& s, int l) {
  if (s.rotate_span == 0) return l;
  const int span_shift = std::countr_zero(static_cast<unsigned>(s.rotate_span));
  const int vector_shift = std::countr_zero(static_cast<unsigned>(s.store_linear));
  const int span = l >> span_shift, vector_in_span = (l & (s.rotate_span - 1)) >> vector_shift;
  const int vectors_mask = (s.rotate_span >> vector_shift) - 1;
  return (span << span_shift) + (((vector_in_span + span) & vectors_mask) << vector_shift) +
         (l & (s.store_linear - 1));
}

// Tile offset of unit (a, b) in a tile of linear stores, before rotate_span's rotation: rows back to
// back, A's chain passing B's first units where a_pass is set (sj_smem_pos).
int linear_staged_offset(const RearrangeSpec& s, int a, int b) {
  if (s.a_pass == 0) return b * s.pitch + a;
  const int a_low = a % s.a_chain, b_low = b % s.a_pass;
  return a_low + s.a_chain * b_low + s.a_pass * (a - a_low) + s.tile_a * (b - b_low);
}

// A linear-store tile's first warp: the tile offsets of its staging writes (each micro-tile's first
// row) before rotation, which do not depend on rotate_span (rotate_store_vectors searches it), and
// its stores' lanes.
struct LinearStoreWarp {
  int writes[32];
  int write_lanes, read_lanes;
};

LinearStoreWarp linear_store_warp(const RearrangeSpec& s) {
  const int micro_b = s.tile_b / s.vec_b, micro = s.tile_a / s.vec_a * micro_b;
  LinearStoreWarp w;
  w.write_lanes = std::min(32, micro);
  for (int m = 0; m < w.write_lanes; ++m)
    w.writes[m] = linear_staged_offset(s, m / micro_b * s.vec_a, m % micro_b * s.vec_b);
  w.read_lanes = std::min(32, s.tile_a * s.tile_b / s.store_linear);
  return w;
}

// Wavefronts of that warp's staging writes and its stores' reads (lane k reads tile offset k *
// store_linear) at s's rotation.
int linear_store_wavefronts(const RearrangeSpec& s, const LinearStoreWarp& warp) {
  int writes[32], reads[32];
  for (int m = 0; m < warp.write_lanes; ++m) writes[m] = rotated_place(s, warp.writes[m]) * s.unit_bytes;
  for (int k = 0; k < warp.read_lanes; ++k) reads[k] = rotated_place(s, k * s.store_linear) * s.unit_bytes;
  return warp_wavefronts(writes, warp.write_lanes, s.vec_a * s.unit_bytes) +
         warp_wavefronts(reads, warp.read_lanes, s.store_linear * s.unit_bytes);
}

// Tiles of linear stores keep their rows back to back, so a warp's staging writes may fall a multiple
// of 128 bytes apart, in one bank: rotating the store vectors of each span by the span's index spreads
// them. The span of the fewest wavefronts among powers of two of units (shifts and masks in the
// kernel) of 2 to 64 store vectors. (H200: f16 [16,28,7,65,32,9,2] 3,5,4,1,0,6,2, 31-way conflicts
// under Nsight Compute, 17% -> 61% of copy; lines not measured while it was made, the 11 of seeds
// 4691-4694 it changes and 20 drawn from the 71 of seeds 4853-4880: 73.0% -> 73.8%, 9 up by 3
// points or more and 4 down, f16 [15,65,60,46,46] 93% -> 78%.)
void rotate_store_vectors(RearrangeSpec& s) {
  s.rotate_span = 0;
  if (s.store_linear % s.vec_a != 0 || !std::has_single_bit(static_cast<unsigned>(s.store_linear))) return;
  const LinearStoreWarp warp = linear_store_warp(s);
  int best = linear_store_wavefronts(s, warp);
  RearrangeSpec candidate = s;
  for (int span = 2 * s.store_linear; span <= 64 * s.store_linear; span *= 2) {
    if (s.tile_a * s.tile_b % span != 0) continue;
    candidate.rotate_span = span;
    if (const int w = linear_store_wavefronts(candidate, warp); w < best) {
      best = w;
      s.rotate_span = span;
    }
  }
}

// The final tile's rows, where choose_rows' layout makes a warp's staging writes or the stores'
// reads conflict in the shared-memory banks: the layout with the fewest wavefronts among padding of
// 0 to 8 vectors and XOR swizzles over the widest power of two of vectors that divides a row,
// stepping the XOR by 1, 2, 4, ... per micro-tile row (a warp stages rows VEC_B apart, which the
// step spreads over the banks); one that takes more shared memory only where as many blocks fit.
void spread_rows(RearrangeSpec& s) {
  const bool tiled = is_tiled(s.family);
  // Skewed runs read their staged vectors in order, and keep them in order.
  if (tiled && s.skew_runs) return;
  if (tiled && s.store_linear && !s.load_linear) return rotate_store_vectors(s);
  // choose_rows' swizzle over whole periods of both groups needs no search: it is conflict-free.
  if (!tiled || s.load_linear || s.store_linear || (s.swizzle && s.swizzle_step == 1)) return;
  const StagingSample sample = sample_staging(s);
  int current = staging_wavefronts(s, sample);
  if (current == sample.fewest) return;
  const int current_bytes = shared_bytes(s);
  RearrangeSpec best = s;
  // Whether the candidate keeps the blocks per SM; if so, it is taken where it takes fewer wavefronts.
  auto consider = [&](const RearrangeSpec& candidate) {
    if (!keeps_blocks(shared_bytes(candidate), current_bytes, s.threads)) return false;
    if (const int w = staging_wavefronts(candidate, sample, current); w < current) {
      best = candidate;
      current = w;
    }
    return true;
  };
  RearrangeSpec padded = s;
  padded.swizzle = false;
  // More padding takes more shared memory: the first pad that loses blocks ends the search.
  for (int pad = 0; pad <= 8 && current > sample.fewest; ++pad) {
    padded.pitch = s.tile_a + pad * s.vec_a;
    if (!s.swizzle && padded.pitch == s.pitch) continue;  // s's own layout, counted above
    if (!consider(padded)) break;
  }
  int period = vectors_per_128_bytes(s);
  while (period > 1 && !divides(period, s.tile_a / s.vec_a)) period /= 2;
  if (s.vec_a * s.unit_bytes >= 4 && period > 1) {
    RearrangeSpec swizzled = s;
    swizzled.swizzle = true;
    swizzled.pitch = s.tile_a;
    swizzled.swizzle_period = period;
    for (int step = 1; step < period && current > sample.fewest; step *= 2) {
      swizzled.swizzle_step = step;
      consider(swizzled);
    }
  }
  s = best;
}

// Which group's contiguous chain may pass the other's first dims (tiles then span those whole).
enum class Passing { none, b_through_a, a_through_b };

struct TiledChoice {
  Groups g;
  RearrangeSpec spec;
  int micro_vec_b = 1;  // the micro-tiles' load width, kept where linear loads replace them
  bool whole_taken = false;  // a group over its target was kept whole (only `whole_groups` does that)
  bool passed_nothing = false;  // a passing search whose chains passed nothing: the rest is left out
  // Of a plain search: whether the search passing B's chain through A (A's through B) at its
  // arguments could pass anything (b_chain_may_pass, a_chain_may_pass); where not, it is this one.
  bool b_through_a_may_pass = true, a_through_b_may_pass = true;
};

// Tile volume in units: 16 KiB of shared memory (32 KiB for 2- and 8-byte units; see plan_fixed_tiles
// for where 16 KiB tiles double).
std::int64_t tile_volume(std::int64_t unit) {
  switch (unit) {
    case 1: return 16384;
    case 2: return 16384;
    case 4: return 4096;
    case 8: return 4096;
    default: return 1024;
  }
}

// Destination runs of at least this many 16-byte vectors whose starts allow only stores narrower
// than a word are stored skewed (take_skewed_runs).
constexpr std::int64_t kSkewedRunMinVectors = 8;

// Linear stores over runs of `run_units` units that `vector`-unit stores (all their starts allow)
// would move in pieces narrower than a word: aligned 16-byte vectors instead, each shifted out of
// the two staged vectors around it (skew_runs), where the runs hold several of them and the tile's
// loads move a word or more. Whether it took them. (H200. Skewing every such run of 4 vectors or
// more, on the 64 u8/f16 lines of seeds 4899-4938 whose plans changed: 43.8% -> 47.3% of copy, 26 up
// and 25 down by 3 points or more, the falls where the tile loaded single units or 2-byte vectors or
// stored runs under 128 bytes. With both guards (and plan_tiled's passing guard, tuned on seeds
// 4999-5118), on the 84 lines of seeds 5119-5238 whose plans changed (83 with plan_tiled's search
// filter), drawn after: 46.0% -> 59.8%, u8 (54) 44.0% -> 57.5%, f16 (30) 49.7% -> 64.2%, 65 up and 12
// down; u8 [28,39,49,336,9] 3,0,2,4,1, runs of 39 x 9 bytes, 29% -> 59%.)
bool take_skewed_runs(RearrangeSpec& s, std::int64_t vector, std::int64_t run_units) {
  const std::int64_t full = 16 / s.unit_bytes;  // units of 4 bytes or more store words at any start
  if (vector * s.unit_bytes >= 4 || run_units < kSkewedRunMinVectors * full || s.vec_b * s.unit_bytes < 4) return false;
  s.store_linear = static_cast<int>(full);
  s.skew_runs = true;
  return true;
}

// Linear stores for a tile that spans A whole (and does not load linearly): runs of A and B's first
// dims that continue it in the destination, in vectors wider than its A vectors, where those are
// narrower than the widest micro-tile vector, or skewed (take_skewed_runs).
void take_linear_stores(const CanonicalForm& form, const Groups& g, RearrangeSpec& s, std::int64_t dst_align) {
  const std::int64_t unit = form.unit_bytes, max_vec = unit == 1 ? 8 : 16 / unit;
  const TileRun run = run_over(form.dims, g.extent_a, g.b, s.tile_b, false);
  if (s.vec_a >= max_vec || run.indices == 0) return;
  const std::int64_t run_units = std::int64_t{s.tile_a} * run.indices;
  const std::int64_t v =
      widest_vector(16 / unit, run_units, strides_past_run(form.dims, g.a, g.b, run, false), dst_align / unit);
  if (take_skewed_runs(s, std::max<std::int64_t>(v, s.vec_a), run_units)) {
    s.store_run = static_cast<int>(run.indices);
    return;
  }
  if (v <= s.vec_a) return;
  s.store_linear = static_cast<int>(v);
  s.store_run = static_cast<int>(run.indices);
}

// Stores of a tile whose A chain passes B's first dims (s.a_pass units in `passed_dims` dims): runs
// of the passed units times the A tile, continued by B's next dims where the tile spans A whole, in
// the widest vectors those runs and their starts (A tiles start a_pass * tile_a apart) allow, or
// skewed (take_skewed_runs).
void take_passing_stores(const CanonicalForm& form, const Groups& g, RearrangeSpec& s, std::int64_t dst_align,
                         std::size_t passed_dims) {
  DimList<DimIndex> rest;
  for (std::size_t k = passed_dims; k < g.b.size(); ++k) rest.push_back(g.b[k]);
  const TileRun run = s.tile_a == g.extent_a
                          ? run_over(form.dims, g.extent_a * s.a_pass, rest, s.tile_b / s.a_pass, false)
                          : TileRun{};
  DimList<std::int64_t> starts{std::int64_t{s.a_pass} * s.tile_a};
  for (std::size_t k = passed_dims + run.dims; k < g.b.size(); ++k) starts.push_back(form.dims[g.b[k]].dst_stride);
  for (std::size_t i = 0; i < form.dims.size(); ++i)
    if (!in_groups(g, i)) starts.push_back(form.dims[i].dst_stride);
  s.store_run = static_cast<int>(s.a_pass * std::max<std::int64_t>(1, run.indices));
  const std::int64_t run_units = std::int64_t{s.tile_a} * s.store_run;
  const std::int64_t v = widest_vector(16 / form.unit_bytes, run_units, starts, dst_align / form.unit_bytes);
  if (!take_skewed_runs(s, v, run_units)) s.store_linear = static_cast<int>(v);
}

// Whether a tile of 1- or 2-byte units loads single units beside A vectors of at most a word: its
// loads may be skewed (take_skewed_loads). (H200, tuning seeds 2413-2420: skewing every load narrower
// than a word took 107 of 448 u8 and f16 lines from 66.5% to 54.2% of copy, 80 down: beside A vectors
// of 8 bytes or more, and where it drew tiles off the word and runs families. With A vectors of a
// word at most and the family kept, on seeds 2421-2436: f16 18 lines 54.9% -> 63.9%, u8 30 lines
// 54.6% -> 50.2%, the u8 losses where plain loads already moved 2 bytes, [156,1223938] 1,0 80% ->
// 48%. Single-unit loads only, on seeds 2441-2460, drawn after: 38 of 1,120 lines 51.2% -> 58.2%,
// 23 up and 5 down by 3 points or more.)
bool may_skew_loads(const RearrangeSpec& s) {
  return s.unit_bytes <= 2 && !s.load_linear && !s.b_chain && s.vec_b == 1 && s.vec_a * s.unit_bytes <= 4;
}

// Whether a tile of 2- or 4-byte units over one A dim stores vectors of a word or narrower, as where
// its destination rows sit at odd places (an odd pitch, a misaligned pointer): its stores may be
// skewed (take_skewed_stores). may_skew_stores: a tiled plan's tile that does.
bool stores_narrow_rows(const RearrangeSpec& s) {
  return (s.unit_bytes == 2 || s.unit_bytes == 4) && s.dims_a == 1 && s.vec_a * s.unit_bytes <= 4 &&
         !s.store_linear && !s.a_pass && !s.load_linear && !s.skew_load;
}
bool may_skew_stores(const RearrangeSpec& s) { return is_tiled(s.family) && stores_narrow_rows(s); }

// A tile of may_skew_stores that splits A into several tiles of 8 or more whole 16-byte vectors stores
// aligned 16-byte vectors instead: each destination row's range in the tile is skewed by the row's
// misalignment, so the tile loads a vector's units more along A (skew_store).
bool skews_stores(const Groups& g, const RearrangeSpec& s) {
  const int full = 16 / s.unit_bytes;
  return stores_narrow_rows(s) && s.tile_a < g.extent_a && s.tile_a % full == 0 && s.tile_a >= 8 * full;
}
void take_skewed_stores(const Groups& g, RearrangeSpec& s) {
  if (!skews_stores(g, s)) return;
  s.vec_a = 16 / s.unit_bytes;
  s.skew_store = true;
  s.bounds = true;
}

// Tiles along A: a tile of skewed stores stores tile_a - vec_a units of each destination row, whose
// ranges start up to vec_a - 1 units before the row.
std::int64_t tiles_along_a(const RearrangeSpec& s, std::int64_t extent_a) {
  return s.skew_store ? ceil_div(extent_a + s.vec_a - 1, s.tile_a - s.vec_a) : ceil_div(extent_a, s.tile_a);
}

// The widest vector of at most `max_vec` units whose multiple that covers a B dim of `extent` units
// reaches past it by under a quarter of that multiple, or 1.
std::int64_t rounding_vector(std::int64_t extent, std::int64_t max_vec) {
  std::int64_t vec = max_vec;
  while (vec > 1 && 4 * (ceil_div(extent, vec) * vec - extent) >= ceil_div(extent, vec) * vec) vec /= 2;
  return vec;
}

// The units of the skewed loads take_skewed_loads gives a tile, or 0 where it gives none.
std::int64_t skewed_load_vector(const CanonicalForm& form, const Groups& g, const RearrangeSpec& s, bool passing) {
  const std::int64_t unit = form.unit_bytes, max_vec = unit == 1 ? 8 : 16 / unit;
  if (form.dims[g.b.front()].src_stride != 1 || !may_skew_loads(s)) return 0;
  std::int64_t vec = widest_vector(max_vec, s.tile_b, {}, max_vec);
  const bool rounds = vec * unit < 4 && g.b.size() == 1 && s.tile_b == g.extent_b && s.tile_a != g.extent_a &&
                      !passing && s.vec_a * unit >= 4;
  if (rounds) vec = rounding_vector(s.tile_b, max_vec);
  while (vec > 1 && 2 * s.vec_a * vec * unit > kHeldBytes) vec /= 2;
  return vec * unit < (rounds ? 8 : 4) ? 0 : vec;
}

// Micro-tile rows of 1- and 2-byte units that the source's row pitches or pointer keep narrower than
// the tile allows load as the aligned vectors around them, funnel-shifted (skew_load), as wide as a
// word at least and as the register budget allows: a row holds two vectors and its shift. A tile
// storing A vectors of a word that spans a B of one dim whose extent no such vector divides (13
// units) rounds its B up to vectors of 8 bytes or more, under a quarter of the tile past B's end
// (the micro-tile at its end reads the next row's first units and stores none of them); tiles of
// linear stores, which span A, and passing tiles keep B exact. (H200: the 44 u8/f16 lines of seeds
// 7964-8183 that rounding to 4-byte vectors or more changed, 49.9% -> 57.6% of copy, 33 up and 5
// down by 3 points or more, 4 of the 5 down on 4-byte vectors, so those are left out; 40 of the 92
// lines of seeds 8184-8583 that the rule changes, drawn after, 49.4% -> 58.9%, 31 up and 3 down.)
void take_skewed_loads(const CanonicalForm& form, const Groups& g, RearrangeSpec& s, bool passing) {
  const std::int64_t vec = skewed_load_vector(form, g, s, passing);
  if (vec == 0) return;
  s.vec_b = static_cast<int>(vec);
  s.skew_load = true;
  s.tile_b = static_cast<int>(ceil_div(s.tile_b, vec) * vec);
  s.bounds = s.bounds || s.tile_b != g.extent_b;
}

// The A tile of a passing tile: a multiple of A's chain (`chain` units, each `run` destination units
// with the passed ones) of at most `limit` units that divides A's `extent`, the largest one or, where
// one holds at least half as many, the largest whose runs hold whole vectors of `vector` units.
std::int64_t passing_tile_a(std::int64_t extent, std::int64_t chain, std::int64_t run, std::int64_t vector,
                            std::int64_t limit) {
  std::int64_t largest = 0, chosen = 0;
  const std::int64_t most = std::min(limit, extent) / chain;
  // Multiples k * chain that divide extent: k divides extent / chain.
  if (extent % chain == 0)
    visit_divisors_descending(extent / chain, most, [&](std::int64_t k) {
      if (largest == 0) largest = k * chain;
      if (2 * k * chain < largest) return true;
      if (k * run % vector == 0) chosen = k * chain;
      return chosen > 0;
    });
  return chosen > 0 ? chosen : std::max(largest, chain);
}

// A's side of a square tile of `volume` units, or `aspect` doublings (halvings where negative) of it.
std::int64_t tile_side_a(std::int64_t volume, int aspect) {
  const std::int64_t square = pow2_floor(static_cast<std::int64_t>(std::sqrt(static_cast<double>(volume))));
  return aspect >= 0 ? square << aspect : std::max<std::int64_t>(1, square >> -aspect);
}

// Units of A's first dims that B's chain may pass (Passing::b_through_a): a tile side, or in units of
// up to 4 bytes the units a tile holds per index of B's first dim, where that is more. A tile whose
// B is one short dim gives A the rest of its volume anyway (2048 x 2 units of 1 or 2 bytes), and the
// side kept B's chain from an A dim that continued B in the source after A dims of more than a side:
// loads of one unit or pair per source row. A passing search may now aim at tiles too large to fit;
// at the smaller volumes it then tries it may pass nothing and return that volume's plain tile.
// (H200, the 25 lines of seeds 5399-5418 it changed: u8 (12) 49.7% -> 52.9% of copy, f16 (6) 67.1%
// -> 69.2%, 4- and 16-byte units (3) 79.6% -> 75.4%, 8-byte units (4) 77.1% -> 65.6%. On the 44 lines
// of seeds 5419-5458 it changed, drawn after: u8 (15) 42.6% -> 48.9%, f16 (14) 66.9% -> 75.5%, f32
// (6) 71.6% -> 78.1%, 21 up and 7 down by 3 points or more; f16 [3,40,36,4,35,33,5,2]
// 2,5,0,4,7,3,6,1 46% -> 81%. f64 (9) fell again, 87.8% -> 79.0%: 8- and 16-byte units keep a side.
// On the 64 lines of seeds 5459-5518 that this rule changes, drawn after: 56.2% -> 63.6%, 36 up and 19
// down; the falls mostly where B already held several dims.)
std::int64_t b_through_a_bound(std::int64_t volume, std::int64_t side, std::int64_t b_extent, std::int64_t unit) {
  return unit <= 4 ? std::max(side, volume / b_extent) : side;
}

// Whether the search passing B's chain through A could pass anything where the plain search grew
// groups `g`, B toward `target_b`. Its grow_b parts from the plain one only on meeting, while B is
// under its target, a dim of A within `pass_a` units that continues B in the source: at a source
// stride of B's units so far. Where none does, it grows the plain groups and passes nothing.
bool b_chain_may_pass(const RearrangeDims& dims, const Groups& g, std::int64_t target_b, std::int64_t pass_a) {
  std::int64_t units = 1;
  for (std::size_t i : g.b) {
    units *= dims[i].extent;
    if (units >= target_b) return false;
    std::int64_t a_units = 1;
    for (std::size_t k : g.a) {
      a_units *= dims[k].extent;
      if (a_units > pass_a) break;
      if (dims[k].src_stride == units) return true;
    }
  }
  return false;
}

// Whether the search passing A's chain through B could pass anything where the plain search grew
// groups `g`, A toward `target_a` (at least the first grow_a's target). Its grow_a parts from the
// plain one only where that one stops at a dim of B, and then passes only by reaching a dim it adds
// or one of A. Where A reached its target and holds the destination chain's first dims (all before
// that stop), it adds none and meets none: it passes nothing.
bool a_chain_may_pass(const DimList<DimIndex>& dst_chain, const Groups& g, std::int64_t target_a) {
  if (g.extent_a < target_a || g.a.size() > dst_chain.size()) return true;
  for (std::size_t k = 0; k < g.a.size(); ++k)
    if (g.a[k] != dst_chain[k]) return true;
  return false;
}

// `dst_chain`: the form's destination_chain.
TiledChoice choose_tiles(const CanonicalForm& form, const DimList<DimIndex>& dst_chain, std::size_t a_dim,
                         std::size_t b_dim, std::int64_t volume, bool whole_groups, std::int64_t src_align,
                         std::int64_t dst_align, Passing passing, bool load_runs, int aspect, bool skewed_loads,
                         bool skewed_stores) {
  const RearrangeDims& dims = form.dims;
  const std::int64_t unit = form.unit_bytes;
  TiledChoice c;
  Groups& g = c.g;
  g.add_a(a_dim, dims[a_dim].extent);
  g.add_b(b_dim, dims[b_dim].extent);

  const std::int64_t side = tile_side_a(volume, aspect);
  // A's chain may pass B's first dims of up to a tile side, and B's chain A's (b_through_a_bound);
  // tiles along the other group then span them whole.
  const std::int64_t pass_b = passing == Passing::a_through_b ? side : 1;
  const std::int64_t passing_b = grow_a(dims, dst_chain, g, side, pass_b);
  // A passing tile balances its runs: destination runs of tile_a times the passed units against
  // source runs of tile_b.
  const std::int64_t a_side =
      passing_b > 1 ? pow2_floor(std::max<std::int64_t>(
                          1, static_cast<std::int64_t>(std::sqrt(static_cast<double>(volume / passing_b)))))
                    : side;
  const std::int64_t target_b = volume / std::min(g.extent_a, a_side);
  const std::int64_t pass_a =
      passing == Passing::b_through_a ? b_through_a_bound(volume, side, g.extent_b, unit) : 1;
  const std::int64_t passed_a = grow_b(dims, g, target_b, pass_a);
  // With `whole_groups`, a group up to twice its target is one whole tile (no partial tiles);
  // otherwise tiles are powers of two, shrunk in whole 16-byte vectors to split the group evenly
  // where they would leave 30% of its tiles' slots idle (even_tile).
  const std::int64_t slack = whole_groups ? 2 : 1;
  auto tile_for = [&](std::int64_t extent, std::int64_t target) {
    if (extent <= slack * target) {
      c.whole_taken = c.whole_taken || extent > target;
      return extent;
    }
    return even_tile(extent, pow2_floor(target), std::max<std::int64_t>(1, 16 / unit));
  };
  std::int64_t tile_b = tile_for(g.extent_b, target_b);
  const std::int64_t target_a = std::max<std::int64_t>(a_side, volume / tile_b);
  const std::int64_t passed_b = grow_a(dims, dst_chain, g, target_a, pass_b);
  // Chains that passed nothing grew the groups the plain search grows: the tile is the plain one.
  if (passing != Passing::none && passing_b == 1 && passed_a == 1 && passed_b == 1) {
    c.passed_nothing = true;
    return c;
  }
  std::int64_t tile_a = tile_for(g.extent_a, target_a);
  if (passing == Passing::none) {
    c.b_through_a_may_pass =
        b_chain_may_pass(dims, g, target_b, b_through_a_bound(volume, side, dims[b_dim].extent, unit));
    c.a_through_b_may_pass = a_chain_may_pass(dst_chain, g, target_a);
  }
  // A composite group whose table, refilled per tile, would hold an entry per few units (the other
  // group's tile is at most 16 units) takes a carry-free tile where one holds at least half as many
  // units in whole `step`-unit pieces: its table is then filled once per block. B's pieces are the
  // widest micro-tile vector, A's 16 bytes. (H200, 1-byte units, whose B pieces were 16 units too.
  // With 8-unit pieces on both groups, on the 16 u8 lines of seeds 1913-1950 that changes: lines
  // whose B table became fixed rose, B's whole dims then often storing linearly (u8
  // [90,80,9,11,2,140] 3,1,4,0,5,2: 42% -> 74% of copy); lines whose A table became fixed rose and
  // fell alike ([58,4,341,65,33] 1,2,4,3,0: 39% -> 26%). B alone, on the 16 lines of seeds
  // 1953-2150 it changes, drawn after: 58.3% -> 61.7%, 7 up and 3 down by 3 points or more;
  // [6,13,335,3,16,137] 3,1,2,4,5,0 fell 94% -> 72% where B's one long dim became two.)
  const std::int64_t max_vec = unit == 1 ? 8 : 16 / unit;
  auto carry_free = [&](const DimList<DimIndex>& group, std::int64_t tile, std::int64_t other, std::int64_t step) {
    if (group.size() == 1 || other > 16 || carry_free_tiles(dims, group, tile)) return tile;
    const std::int64_t fixed = carry_free_tile(dims, group, tile);
    return 2 * fixed >= tile && divides(std::min(tile, step), fixed) ? fixed : tile;
  };
  tile_b = carry_free(g.b, tile_b, tile_a, max_vec);
  tile_a = carry_free(g.a, tile_a, tile_b, 16 / unit);
  if (tile_a != g.extent_a) tile_a = std::max(passed_a, tile_a / passed_a * passed_a);
  // Passing tiles store in destination order, runs of whole A tiles: A tiles of whole chains that
  // divide A, B tiles of whole passed dims, in multiples of a whole vector where they can.
  const std::int64_t a_chain = passed_b > 1 ? destination_run_units(dims, g.a) : 1;
  if (passed_b > 1) {
    const std::int64_t vector_step = std::lcm(passed_b, unit == 1 ? 8 : 16 / unit);
    if (tile_b != g.extent_b)
      tile_b = tile_b >= vector_step ? tile_b / vector_step * vector_step
                                     : std::max(passed_b, tile_b / passed_b * passed_b);
    if (tile_a != g.extent_a) tile_a = passing_tile_a(g.extent_a, a_chain, passed_b * a_chain, 16 / unit, tile_a);
  }

  RearrangeSpec& s = c.spec;
  s.unit_bytes = static_cast<int>(unit);
  s.dims_a = static_cast<int>(g.a.size());
  s.dims_b = static_cast<int>(g.b.size());
  s.tile_a = static_cast<int>(tile_a);
  s.tile_b = static_cast<int>(tile_b);
  s.bounds = !divides(tile_a, g.extent_a) || !divides(tile_b, g.extent_b);

  // Strides of the dims outside each group decide which vectors stay aligned.
  DimList<std::int64_t> dst_others, src_others;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const bool in_a = g.in_a(i);
    const bool in_b = g.in_b(i);
    if (!in_a) dst_others.push_back(dims[i].dst_stride);
    if (!in_b) src_others.push_back(dims[i].src_stride);
  }
  // One-byte units stop at 8-unit micro-tiles (max_vec): 16 x 16 byte tiles would need 128 registers
  // per thread.
  s.vec_a = static_cast<int>(widest_vector(max_vec, std::gcd(tile_a, g.extent_a), dst_others, dst_align / unit));
  s.vec_b = dims[b_dim].src_stride == 1
                ? static_cast<int>(widest_vector(max_vec, std::gcd(tile_b, g.extent_b), src_others, src_align / unit))
                : 1;

  // A tile that spans a whole small group moves runs of it and of the other group's first dims
  // linearly on that side (over a composite group, each run's offset from its table). Linear loads
  // (only when micro-tile loads would be narrower than 4 bytes) keep the tile in source order, one
  // shared-memory row per A index; linear stores read rows of B indices.
  const std::int64_t full = 16 / unit;
  if (passed_a > 1) s.b_chain = static_cast<int>(source_run_units(dims, g.b));
  const TileRun load_run = tile_b == g.extent_b && dims[b_dim].src_stride == 1
                               ? run_over(dims, g.extent_b, g.a, tile_a, true)
                               : TileRun{};
  if (passed_b == 1 && s.vec_b * unit < 4 && load_run.indices > 0 && (load_runs || load_run.indices == tile_a)) {
    const std::int64_t v = widest_vector(full, tile_b * load_run.indices,
                                         strides_past_run(dims, g.b, g.a, load_run, true), src_align / unit);
    // Runs shorter than the tile pay an address per load and stores gathered from columns: taken
    // where micro-tile loads move single units or linear loads four times as many (H200, u8/f16
    // lines of seeds 133-142, unseen: 22 changed lines, 61.4% -> 65.1% of copy, 7 up, 1 down by 6).
    const bool worth = load_run.indices == tile_a || s.vec_b == 1 || v >= 4 * s.vec_b;
    if (v > s.vec_b && worth) {
      s.load_linear = static_cast<int>(v);
      s.load_run = static_cast<int>(load_run.indices);
      c.micro_vec_b = s.vec_b;
      s.vec_b = 1;  // the micro-tile loads are not used
    }
  }
  if (skewed_loads) {
    take_skewed_loads(form, g, s, passed_b > 1);
    tile_b = s.tile_b;
  }
  if (skewed_stores && passed_b == 1) take_skewed_stores(g, s);
  // Linear stores only when A vectors are narrower than the widest micro-tile vector: 1-byte tiles
  // with 8-byte A vectors store faster per vector into a padded tile (H200, u8 TTC: the four such
  // lines went from 51-74% to 66-82% of copy).
  // Over a composite B group the runs are A times B's first dims, each looked up in B's table
  // (H200: 62 such lines, u8 and f16 of seeds 40-53 and 99-121 and one f32 and one f64 of seeds 40,
  // 41, 44, 45, 122 and 123, from 50.7% to 62.5% of copy, 37 up by more than 2 points and 8 down by
  // up to 10; u8 and f16 lines of seeds 122-131, 27: 43.9% -> 52.6%).
  if (passed_b > 1) {
    s.a_chain = static_cast<int>(a_chain);
    s.a_pass = static_cast<int>(passed_b);
    std::size_t passed_dims = 0;
    for (std::int64_t units = 1; units < passed_b; ++passed_dims) units *= dims[g.b[passed_dims]].extent;
    take_passing_stores(form, g, s, dst_align, passed_dims);
  } else if (!s.load_linear && tile_a == g.extent_a) {
    take_linear_stores(form, g, s, dst_align);
  }

  choose_rows(s);
  const std::int64_t micro_a = tile_a / s.vec_a, micro_b = tile_b / s.vec_b;
  const std::int64_t micro_per_thread = ceil_div(micro_a * micro_b, kThreads);
  // A skewed row's second vector is left out here, as in every measurement of skewed loads (counted,
  // it took most skewed tiles from three blocks per SM to two; not timed on its own). ptxas fit the
  // skewed kernels checked without spilling.
  const std::int64_t held =
      s.load_linear ? 16 : std::min(kMicroTilesPerThread, micro_per_thread) * s.vec_a * s.vec_b * unit;
  const bool single = g.a.size() == 1 && g.b.size() == 1;
  s.min_blocks = min_blocks_per_sm(unit, held, single, micro_per_thread);
  s.family = g.a.size() > 1 || g.b.size() > 1 || s.load_linear || s.store_linear ? RearrangeFamily::packed
                                                                                : RearrangeFamily::transpose;
  return c;
}

// choose_tiles's results for one form, by their arguments. A plan searches the same tile volumes
// again at the 16-micro-tile bound, and its quarter-volume search revisits the full search's smaller
// volumes (the slowest plan of seeds 1897-1898 and 1911-1912 on the build machine, 11.1 -> 8.5 us).
// A skewed search whose plain tile would not skew is that tile (the slowest plan of seeds 5239-5242,
// f16 [27,367,13,71,18] 0,3,1,4,2, 18.5 -> 12.1 us on the build machine). The form's destination
// chain is found once for all its searches. A passing search whose plain search shows it would pass
// nothing is that plain search. (The 20 slowest plans of seeds 10885-10924 on the build machine, with
// plan_tiled's and plan_fixed_family's skips: 2.75M -> 2.06M instructions in all, u8
// [2,78,63,4,20,2,3,41] 1,7,4,3,0,6,5,2 251k -> 164k; 305 -> 207 us.)
class TileChoices {
 public:
  // choose_tiles's arguments besides the form.
  struct Arguments {
    // Those that vary within a plan first: == compares in this order.
    std::int64_t volume;
    int aspect;
    Passing passing;
    bool load_runs;
    bool whole_groups;
    std::size_t a_dim, b_dim;
    std::int64_t src_align, dst_align;
    bool skewed_loads = false;   // set from set_skewed_loads
    bool skewed_stores = false;  // set from set_skewed_stores
    bool operator==(const Arguments&) const = default;
  };
  // Room for the searches of nearly every plan (seeds 2331-2334 and 2371-2410: at most 61, 97% of
  // plans at 32 or under; the slowest plan of seeds 10885-10924 makes 76).
  explicit TileChoices(const CanonicalForm& form)
      : form_(form), dst_chain_(destination_chain(form.dims)), index64_(needs_index64(form.dims)) {
    choices_.reserve(32);
    slots_.fill(-1);
  }
  explicit TileChoices(CanonicalForm&&) = delete;  // it keeps a reference
  const CanonicalForm& form() const { return form_; }
  // Whether later searches may take skewed loads (take_skewed_loads).
  void set_skewed_loads(bool allowed) { skewed_loads_ = allowed; }
  // Whether later searches may take skewed stores (take_skewed_stores).
  void set_skewed_stores(bool allowed) { skewed_stores_ = allowed; }
  // The lopsided tile that tiled_groups halves into 128-thread blocks, or none (plan_fixed_tiles).
  void set_lopsided_tile(const RearrangeSpec* tile) { lopsided_tile_ = tile; }
  const RearrangeSpec* lopsided_tile() const { return lopsided_tile_; }
  // Whether any search so far has a tile whose loads (stores) a skewed search would skew.
  bool found_skewable_loads() const {
    return std::any_of(choices_.begin(), choices_.end(),
                       [&](const auto& seen) { return skews_loads(seen.second.choice); });
  }
  bool found_skewable_stores() const {
    return std::any_of(choices_.begin(), choices_.end(), [](const auto& seen) {
      return skews_stores(seen.second.choice.g, seen.second.choice.spec);
    });
  }
  // The choice for `asked`, valid until the next call.
  const TiledChoice& choose(const Arguments& asked) { return search(asked).choice; }
  // The choice for `asked` (valid until the next call), and whether its tile fits as tiled_groups's
  // walk asks (walk_fits), worked out once per search and bound.
  std::pair<const TiledChoice*, bool> choose_in_walk(const Arguments& asked, std::int64_t narrow_micro_tiles);

 private:
  // A search's choice, and walk_fits at kMicroTilesPerThread and kNarrowMicroTilesPerThread once
  // known (-1: not yet).
  struct Search {
    TiledChoice choice;
    std::array<std::int8_t, 2> walk_fits{-1, -1};
  };

  Search& search(const Arguments& asked) {
    Arguments a = asked;
    a.skewed_loads = skewed_loads_;
    a.skewed_stores = skewed_stores_;
    if (Search* seen = find(a)) return *seen;
    if (a.passing != Passing::none) {
      Arguments plain = a;
      plain.passing = Passing::none;
      if (Search* seen = find(plain); seen && !may_pass(seen->choice, a.passing)) return *seen;
    }
    if (a.skewed_loads) {
      // A plain tile whose loads would not be skewed is its own skewed choice.
      Arguments plain = a;
      plain.skewed_loads = false;
      if (Search* seen = find(plain); seen && !skews_loads(seen->choice)) return *seen;
    }
    if (a.skewed_stores) {
      // So is one whose stores would not be (take_skewed_stores comes before the stores that leave
      // a tile's rows wide: linear ones span A whole, passing ones pass B).
      Arguments plain = a;
      plain.skewed_stores = false;
      if (Search* seen = find(plain); seen && !skews_stores(seen->choice.g, seen->choice.spec)) return *seen;
    }
    TiledChoice c = choose_tiles(form_, dst_chain_, a.a_dim, a.b_dim, a.volume, a.whole_groups, a.src_align,
                                 a.dst_align, a.passing, a.load_runs, a.aspect, a.skewed_loads, a.skewed_stores);
    if (c.passed_nothing) {
      // Remembered under the passing arguments too: a plan asks for them again in its later searches.
      Arguments plain = a;
      plain.passing = Passing::none;
      TiledChoice plain_choice = choose(plain);
      return remember(a, std::move(plain_choice));
    }
    c.spec.index64 = index64_;
    return remember(a, std::move(c));
  }

  // Searches are found by open addressing on a hash of the arguments that vary within a plan: the
  // slowest plans make some 240 lookups among 80 searches, where a scan of every search took 4.5% of
  // their instructions. Past kIndexed searches (no plan measured came near), later ones are not
  // indexed and are searched again.
  static constexpr std::size_t kSlots = 256;
  static constexpr std::size_t kIndexed = kSlots / 2;
  static std::size_t slot_of(const Arguments& a) {
    const std::uint64_t key = static_cast<std::uint64_t>(a.volume) * 31 + static_cast<std::uint64_t>(a.aspect) * 7 +
                              static_cast<std::uint64_t>(a.passing) * 3 + a.load_runs + 2 * a.whole_groups +
                              4 * a.skewed_loads + 8 * a.skewed_stores;
    return (key * 0x9E3779B97F4A7C15ull) >> 56;  // the top 8 bits: one of kSlots
  }
  Search* find(const Arguments& a) {
    for (std::size_t k = slot_of(a); slots_[k] >= 0; k = (k + 1) % kSlots)
      if (choices_[slots_[k]].first == a) return &choices_[slots_[k]].second;
    return nullptr;
  }
  // Whether a plain search's passing one at its arguments could pass anything.
  static bool may_pass(const TiledChoice& plain, Passing passing) {
    return passing == Passing::b_through_a ? plain.b_through_a_may_pass : plain.a_through_b_may_pass;
  }
  // Whether a plain tile's skewed search would skew its loads (what skewed_load_vector reads is final
  // in the plain tile).
  bool skews_loads(const TiledChoice& c) const {
    return skewed_load_vector(form_, c.g, c.spec, c.spec.a_pass > 0) != 0;
  }
  Search& remember(const Arguments& a, TiledChoice&& c) {
    if (choices_.size() < kIndexed) {
      std::size_t k = slot_of(a);
      while (slots_[k] >= 0) k = (k + 1) % kSlots;
      slots_[k] = static_cast<std::int16_t>(choices_.size());
    }
    return choices_.emplace_back(a, Search{std::move(c)}).second;
  }

  const CanonicalForm& form_;
  DimList<DimIndex> dst_chain_;
  bool index64_;
  bool skewed_loads_ = false, skewed_stores_ = false;
  const RearrangeSpec* lopsided_tile_ = nullptr;
  std::vector<std::pair<Arguments, Search>> choices_;
  std::array<std::int16_t, kSlots> slots_;  // indices into choices_, -1 where free
};

/// The order in which a kernel of tiles_a x tiles_b tiles of tile_a x tile_b units counts them. The
/// blocks in flight cover consecutive tiles, and DRAM streams best when they cover whole rows on one
/// side and long pieces of rows on the other. Counting along A first, they write whole destination
/// rows and read pieces of W / tiles_a tiles (W: tiles in flight); along B first, they read whole
/// source rows and write pieces of W / tiles_b. Writes in short pieces cost the most (H200, f32 [4406,
/// 45393] 1,0: 52% of copy along B, 85% along A), so A goes first unless its rows are many times
/// longer than B's, where its reads would be single tiles (f32 [65424, 3057] 1,0: 82% along A, 88%
/// along B). Rows are weighed in units, as tiles are often many times longer on one side (256 x 16).
/// (H200, against weighing them in tiles. Transpose and packed tiles, the 32 lines of seeds 1085-1092
/// and the suites whose order that changes: 3 up by 4 to 10 points, none down by 3 or more; f64 [5,
/// 6567, 6091] 2,1,0 70% -> 80%. Word tiles, the 34 such lines of seeds 1093-1126: u8 (31) 67.5% ->
/// 69.4%, 9 up by 7 to 9 points, 1 down by 3; f16 (3) 59.2% -> 61.2%.)
bool counts_along_b(std::int64_t tiles_a, std::int64_t tiles_b, std::int64_t tile_a, std::int64_t tile_b) {
  return tiles_b > 1 && tiles_a * tile_a >= 8 * tiles_b * tile_b;
}

/// The families whose kernels count (A, B) tiles in the order of their spec's a_first.
bool counts_tiles(RearrangeFamily family) {
  return is_tiled(family) || family == RearrangeFamily::skewed || family == RearrangeFamily::words;
}

/// Whether A goes first (counts_along_b) for the transpose, packed and segments families; with one
/// tile on either side both orders are one walk, and those kernels keep counting along B, as they all
/// did before the order was planned.
bool tiles_along_a_first(std::int64_t tiles_a, std::int64_t tiles_b, std::int64_t tile_a, std::int64_t tile_b) {
  return tiles_a > 1 && tiles_b > 1 && !counts_along_b(tiles_a, tiles_b, tile_a, tile_b);
}

// A tiled spec's work per thread of a block of `threads`: micro-tiles loaded and store vectors
// written, and the registers they hold (a load narrower than a register still takes one).
struct ThreadShare {
  std::int64_t micro_tiles, stores, micro_registers, store_registers;
};

ThreadShare thread_share(const RearrangeSpec& s, std::int64_t threads) {
  const std::int64_t units = std::int64_t{s.tile_a} * s.tile_b;
  ThreadShare t;
  t.micro_tiles = ceil_div(units / s.vec_a / s.vec_b, threads);
  t.stores = ceil_div(units / s.vec_a, threads);
  // A skewed row holds two vectors and its shift.
  const std::int64_t row_registers = ceil_div(s.vec_b * s.unit_bytes, 4);
  t.micro_registers = t.micro_tiles * s.vec_a * (s.skew_load ? 2 * row_registers + 1 : row_registers);
  t.store_registers = t.stores * ceil_div(s.vec_a * s.unit_bytes, 4);
  return t;
}

std::int64_t thread_registers(std::int64_t threads, std::int64_t min_blocks) {
  return kRegistersPerSm / (min_blocks * threads);
}

// Units per load of a tile: its linear loads' vectors, else its micro-tiles'.
int load_vector(const RearrangeSpec& s) { return s.load_linear > 0 ? s.load_linear : s.vec_b; }

// Units per store of a tile: its linear stores' vectors, else its A vectors.
int store_vector(const RearrangeSpec& s) { return s.store_linear > 0 ? s.store_linear : s.vec_a; }

// Whether a tile's linear loads read it as one source run (else runs of load_run A indices).
bool loads_one_run(const RearrangeSpec& s) { return s.load_linear && s.load_run == s.tile_a; }

// Whether a tile's linear stores write it as one destination run (else runs of store_run B indices).
bool stores_one_run(const RearrangeSpec& s) { return s.store_linear && s.store_run == s.tile_b; }

// Tiles of 16 KiB in blocks of 256 threads double to kLargeTileBytes where the larger tile, in a
// block of 256 threads too, keeps each group's dims and spans more, in vectors as wide: it then
// reaches whole dims on that side. Twice the volume over the same dims only halves the blocks per SM,
// and tiles of 128-thread blocks already hold more blocks per SM. The larger tile may also keep a plan
// from the runs or word families, which the smaller tile's narrow accesses would have chosen. (H200,
// two rounds. Chosen on the lines of seeds 2335-2340 and of the TTC and DL suites that 32 KiB tiles
// change, without the block guard: those it takes 35 lines 82.7% -> 86.1% of copy, 16 up and 2 down
// by 3 points or more; the other 162 lines 85.8% -> 85.4%. The block guard came from seeds
// 2341-2370, where the 128-thread tiles it replaced fell: 25 lines 79.3% -> 77.0%, 6 up and 15 down.
// On the 130 lines of seeds 2371-2410 it changes, drawn after: 74.8% -> 81.3%, 82 up and 11 down;
// 4-byte elements 89 lines 77.3% -> 84.4%, 1-byte elements 34 lines 66.8% -> 72.4%, and u8
// [12,13,51,8,2,2,13,44] 4,1,5,7,0,3,2,6 from a runs tile at 32% to 89%.)
constexpr std::int64_t kLargeTileBytes = 32 * 1024;

// Tiles of 16-byte vectors on both sides take a third block per SM past tile_fits' register
// budget where it pays: ptxas fits them in 78-80 registers (where it spills, compile_program tries
// the low-register variant). 8-byte units: every such tile (H200, held out, 79 lines of seeds
// 4571-4690: 89.6% -> 91.1% of copy, 18 up by 3 points or more, none down). Other units: packed
// tiles under kLargeTileBytes that store aligned; transposes, skewed stores and 32 KiB tiles lost
// (H200, tuned on lines of seeds 4556-4560 and 4571-4790; on 80 f16 and f32 lines of seeds 4731-4790,
// tiles under 32 KiB 79.5% -> 84.8%, of 32 KiB 87.0% -> 84.9%; 11 2-D f16 transposes of skewed
// stores 83.4% -> 74.0%).
// Held out, the 95 lines of seeds 4791-4850 it changes: f16 78.8% -> 84.7%, 51 up and 2 down; f32
// 83.8% -> 88.7%, 16 up and 2 down.
bool takes_third_block(const RearrangeSpec& s) {
  const bool vectors_16 = s.unit_bytes * s.vec_a == 16 && s.unit_bytes * s.vec_b == 16;
  if (!vectors_16 || s.min_blocks != 2 || s.load_linear || s.store_linear) return false;
  if (s.unit_bytes == 8) return true;
  const bool under_large = std::int64_t{s.tile_a} * s.tile_b * s.unit_bytes < kLargeTileBytes;
  return s.family == RearrangeFamily::packed && !s.skew_store && under_large;
}

// Whether a block of `threads` threads holds tile `s` within a thread's limits at `min_blocks`
// blocks per SM: at most 8 micro-tiles (128 bytes; `narrow_micro_tiles` of micro-tiles that hold 1
// or 2 bytes) and 16 store vectors, and loaded units plus the store vectors gathered from shared
// memory (live beside the next tile's loads) in at most half its registers. A load narrower than a
// register still takes one: eight micro-tiles of 8 x 1 bytes hold 64, which spilled at three blocks
// per SM (H100, u8 [209, 32, 14, 1875] 0,3,2,1: 26% of copy, 75% on a tile of half the rows; f16
// tiles holding 64 at two blocks per SM run at 80-93%). Linear loads are counted only where
// `count_linear` (the tile search leaves them unchecked).
bool tile_fits(const RearrangeSpec& s, std::int64_t threads, std::int64_t min_blocks, bool count_linear = false,
               std::int64_t narrow_micro_tiles = kMicroTilesPerThread) {
  const std::int64_t units = std::int64_t{s.tile_a} * s.tile_b;
  const std::int64_t micro = units / s.vec_a / s.vec_b;
  const std::int64_t registers = thread_registers(threads, min_blocks);
  // Linear stores over one run per tile need no registers; over shorter runs an address per store.
  const bool one_store_run = stores_one_run(s);
  const std::int64_t stores = units / (s.store_linear ? s.store_linear : s.vec_a);
  const ThreadShare share = thread_share(s, threads);
  const std::int64_t store_registers =
      one_store_run ? 0 : s.store_linear ? ceil_div(stores, threads) : share.store_registers;
  bool loads_fit = true;
  if (!s.load_linear) {
    const std::int64_t held = share.micro_tiles * s.vec_a * s.vec_b * s.unit_bytes * (s.skew_load ? 2 : 1);
    const std::int64_t max_micro_tiles =
        s.vec_a * s.vec_b * s.unit_bytes <= 2 ? narrow_micro_tiles : kMicroTilesPerThread;
    loads_fit = held <= kHeldBytes && 2 * (share.micro_registers + store_registers) <= registers &&
                micro <= max_micro_tiles * threads;
  } else if (count_linear) {
    // Over runs shorter than the tile, an address per load too.
    const std::int64_t loads = ceil_div(ceil_div(units, s.load_linear), threads);
    const std::int64_t linear_registers =
        loads * (ceil_div(s.load_linear * s.unit_bytes, 4) + (loads_one_run(s) ? 0 : 1));
    loads_fit = 2 * (linear_registers + store_registers) <= registers;
  }
  return loads_fit && (one_store_run || stores <= 16 * threads) && shared_bytes(s) <= kMaxStaticShared;
}

// Whether tiled_groups's walk down the tile volumes stops at tile `s`: it fits a thread of a
// 256-thread block at its blocks per SM, counting linear loads over runs shorter than the tile.
bool walk_fits(const RearrangeSpec& s, std::int64_t narrow_micro_tiles) {
  const bool short_load_runs = s.load_linear && !loads_one_run(s);
  return tile_fits(s, kThreads, s.min_blocks, short_load_runs, narrow_micro_tiles);
}

std::pair<const TiledChoice*, bool> TileChoices::choose_in_walk(const Arguments& asked,
                                                                std::int64_t narrow_micro_tiles) {
  if (narrow_micro_tiles != kMicroTilesPerThread && narrow_micro_tiles != kNarrowMicroTilesPerThread)
    fail(ErrorCode::internal, "a tile walk bound of {} micro-tiles", narrow_micro_tiles);
  Search& found = search(asked);
  std::int8_t& fits = found.walk_fits[narrow_micro_tiles == kMicroTilesPerThread ? 0 : 1];
  if (fits < 0) fits = walk_fits(found.choice.spec, narrow_micro_tiles) ? 1 : 0;
  return {&found.choice, fits == 1};
}

// Registers a thread of a slab tile (or any tile whose B source offsets come from a table, b_chain)
// needs: loaded units and store vectors (twice: the next tile's loads stay in flight beside the
// stores), plus an address looked up in a table per micro-tile row and per store vector, which
// tile_fits does not count. Where they exceed the block's budget the tile takes fewer blocks per
// SM: ptxas spilled 100-220 bytes at six blocks of 128 threads on u8 [4,12,3,4,6,12,6,4,3,3,10] and
// [8,12,2,2,7,5,2,2,3,12,6,2,3,2] (H100: 37% and 52% of copy; 64% and 64% at four blocks), while
// tiles within the budget lost 1-3 points at four.
std::int64_t slab_registers(const RearrangeSpec& s) {
  const ThreadShare share = thread_share(s, s.threads);
  const std::int64_t addresses = share.micro_tiles * ((s.dims_a > 1 ? s.vec_a : 0) + 1) + share.stores;
  return 2 * (share.micro_registers + share.store_registers) + addresses;
}

// Whether slab_registers fit a thread's budget at the spec's threads and blocks per SM.
bool slab_fits(const RearrangeSpec& s) { return slab_registers(s) <= thread_registers(s.threads, s.min_blocks); }

// Adds slab dims to the B group of a tile that spans both groups whole but holds under half the
// volume of a full tile of its block (`budget` units): outer dims it then spans whole, innermost in
// the destination first (so that they lengthen its destination runs), each while the tile stays
// within the budget and fits the block (tile_fits). A small tile alone leaves most of a block's
// threads idle and few bytes in flight per SM (H100, tuning seeds 40 and 44: u8
// [2,2,8,2,6,4,3,4,7,9,8,2,2,2,2] 17% -> 62% of copy on a 168 x 2 tile grown to 168 x 32; tiles
// too small for a thread each, walked as gathers before, f16 29% -> 89%, f32 48% -> 93%). Where no
// further dim fits whole and the tile is still under half the budget, it grows by a piece of the
// innermost outer dim it does not span (H200, u8 [9084,112,2,76] 0,1,3,2, a batch of 2 x 76
// transposes: 35% -> 88% of copy on a 2 x 1824 tile that stores its run linearly; with linear stores
// alone it stays a gather at 36%).
void add_slab_dims(const RearrangeDims& dims, Groups& g, RearrangeSpec& s, std::int64_t budget,
                   std::int64_t narrow_micro_tiles) {
  // A linear load or store assumes the tile is one run on that side: the caller clears them first.
  if (s.load_linear || s.store_linear) fail(ErrorCode::internal, "slab dims asked of a tile moved as one run");
  if (s.skew_load) return;  // skewed rows read along one source-contiguous B
  DimList<DimIndex> outer;
  for (std::size_t i = 0; i < dims.size(); ++i)
    if (!in_groups(g, i)) outer.push_back(i);
  // Innermost in dst first, ties in dim order (std::stable_sort would allocate a buffer per call).
  std::sort(outer.begin(), outer.end(), [&](std::size_t x, std::size_t y) {
    const std::int64_t sx = std::llabs(dims[x].dst_stride), sy = std::llabs(dims[y].dst_stride);
    return sx != sy ? sx < sy : x < y;
  });
  const int chain = s.tile_b;
  // The tile grown by `piece` indices of outer dim i, if it fits the block; a piece, only where it
  // keeps the blocks per SM (see slab_registers; H200, u8 [40,6,7,60,22,2,23] 3,4,2,0,6,1,5: a piece
  // that took it from six blocks to four, 46% -> 33% of copy).
  auto grow = [&](std::size_t i, std::int64_t piece) {
    RearrangeSpec grown = s;
    grown.tile_b = static_cast<int>(s.tile_b * piece);
    grown.dims_b = s.dims_b + 1;
    grown.b_chain = s.b_chain > 0 ? s.b_chain : chain;
    grown.family = RearrangeFamily::packed;
    choose_rows(grown);
    if (!tile_fits(grown, s.threads, s.min_blocks, true, narrow_micro_tiles)) return false;
    const bool whole = piece == dims[i].extent;
    if (!whole && !slab_fits(grown)) return false;
    s = grown;
    g.add_b(i, dims[i].extent);
    return true;
  };
  std::optional<std::size_t> not_whole;  // the innermost outer dim (in dst) the tile does not span
  for (std::size_t i : outer) {
    const std::int64_t units = std::int64_t{s.tile_a} * s.tile_b;
    if (2 * units >= budget) return;
    if (units * dims[i].extent > budget || !grow(i, dims[i].extent)) {
      if (!not_whole) not_whole = i;
    }
  }
  // Still under half the budget: a piece of that dim, the largest divisor of its extent that fits
  // (tiles then start at multiples of it and carry into no other dim).
  const std::int64_t units = std::int64_t{s.tile_a} * s.tile_b;
  if (!not_whole || 2 * units >= budget) return;
  visit_divisors_descending(dims[*not_whole].extent, std::min(budget / units, dims[*not_whole].extent - 1),
                            [&](std::int64_t piece) { return piece < 2 || grow(*not_whole, piece); });
}

// Tiles whose long side holds kLopsidedAspect times the units of the short side or more: in blocks of
// 256 threads they lose to the tile of half the long side in blocks of 128, at twice the blocks per
// SM (plan_fixed_tiles). (H200, measured planning's timings of every candidate on 218 u8/f16 lines
// of earlier seeds: where that candidate was timed, tiles of 480 to 1024 units over 5 to 22 won, 7
// of 7 lines by 1.06x to 1.24x; shorter aspects, up to 7.5, lost or tied. On 64 lines of seeds
// 5267-5276 and 5277-5356 it changed: 75.8% -> 77.0% of copy, 21 up and 5 down by 3 points or more,
// two of the falls where the halved 16 KiB tile no longer gave way to the 32 KiB tile, which is now
// weighed first. On the 42 lines of 1-, 2- and 8-byte units among 52 drawn after from seeds
// 5357-5396: u8 (16) 74.5% -> 78.1%, f16 (16) 80.1% -> 82.8%, f64 (10) 91.3% -> 93.6%, 17 up and 2
// down. f32 fell on both sets, 11 lines 85.3% -> 84.9% and 10 lines 86.7% -> 84.3%, so 4-byte units
// keep their tile, as do 16-byte units, which were not measured.)
constexpr std::int64_t kLopsidedAspect = 16;
bool is_lopsided(const RearrangeSpec& s) {
  return std::max(s.tile_a, s.tile_b) >= kLopsidedAspect * std::min(s.tile_a, s.tile_b);
}

// Whether tile `h` is tile `t` with its long side halved: the same short side, vectors, chains and
// kinds of loads and stores (groups compared by the caller).
bool halves_long_side(const RearrangeSpec& t, const RearrangeSpec& h) {
  const bool long_a = t.tile_a >= t.tile_b;
  const bool same_moves = t.vec_a == h.vec_a && t.vec_b == h.vec_b && t.load_linear == h.load_linear &&
                          t.store_linear == h.store_linear && t.skew_load == h.skew_load &&
                          t.skew_store == h.skew_store && t.skew_runs == h.skew_runs;
  const bool same_chains = t.a_chain == h.a_chain && t.a_pass == h.a_pass && t.b_chain == h.b_chain;
  return t.dims_a == h.dims_a && t.dims_b == h.dims_b && same_moves && same_chains &&
         (long_a ? h.tile_b == t.tile_b && 2 * h.tile_a == t.tile_a : h.tile_a == t.tile_a && 2 * h.tile_b == t.tile_b);
}

// Whether any plain search of a tiled_groups walk could pass anything with each Passing.
struct PassingReach {
  bool b_through_a = false, a_through_b = false;
  void add(const TiledChoice& c) {
    b_through_a = b_through_a || c.b_through_a_may_pass;
    a_through_b = a_through_b || c.a_through_b_may_pass;
  }
  bool reaches(Passing passing) const { return passing == Passing::b_through_a ? b_through_a : a_through_b; }
};

// The tile of a transpose or packed plan, its spec final (the variant is built by tiled_variant).
// `reach`, where given, receives the PassingReach of the searches it made.
TiledChoice tiled_groups(TileChoices& choices, std::size_t a_dim, std::size_t b_dim, bool exact,
                         std::int64_t src_align, std::int64_t dst_align, std::int64_t max_volume, Passing passing,
                         bool load_runs, int aspect = 0, std::int64_t narrow_micro_tiles = kMicroTilesPerThread,
                         PassingReach* reach = nullptr) {
  const CanonicalForm& form = choices.form();
  const TiledChoice* chosen = nullptr;
  PassingReach searched;
  // Shrink the tile until it fits a thread of a 256-thread block (tile_fits); for units under 4
  // bytes whole groups first, then power-of-two (or evened) tiles. (Measured on an H200: whole
  // 96-unit groups lift 1-byte lines but cost 4-byte transposes up to 20 points against 64-unit
  // tiles.)
  bool found = false;
  TileChoices::Arguments asked;  // the search that found the tile
  for (std::int64_t volume = max_volume; !found; volume /= 2)
    for (bool whole : {true, false}) {
      if (whole && form.unit_bytes >= 4) continue;
      // Linear loads over runs shorter than the tile hold an address per load, and their stores
      // gather units from columns: where the tile does not fit with them it keeps its micro-tiles.
      bool whole_taken = false;
      for (bool runs : {load_runs, false}) {
        asked = {.volume = volume, .aspect = aspect, .passing = passing, .load_runs = runs, .whole_groups = whole,
                 .a_dim = a_dim, .b_dim = b_dim, .src_align = src_align, .dst_align = dst_align};
        bool fits = false;
        std::tie(chosen, fits) = choices.choose_in_walk(asked, narrow_micro_tiles);
        searched.add(*chosen);
        const RearrangeSpec& spec = chosen->spec;
        whole_taken = whole_taken || chosen->whole_taken;
        const bool short_load_runs = spec.load_linear && !loads_one_run(spec);
        found = fits || (volume <= 256 && !whole && shared_bytes(spec) <= kMaxStaticShared);
        if (found || !short_load_runs) break;
      }
      // Where no group was kept whole over its target, tiles of this volume without whole groups
      // are the same tiles, which did not fit either.
      if (found || (whole && !whole_taken && volume > 256)) break;
    }
  TiledChoice c = *chosen;
  RearrangeSpec& s = c.spec;
  Groups& g = c.g;
  s.exact = exact;
  s.threads = kThreads;
  const bool spans_a_group = s.tile_a == g.extent_a || s.tile_b == g.extent_b;
  const int small_min_blocks = s.min_blocks * kThreads / kSmallBlockThreads;  // the same threads per SM
  if (spans_a_group && tile_fits(s, kSmallBlockThreads, small_min_blocks, true, narrow_micro_tiles)) {
    s.threads = kSmallBlockThreads;
    s.min_blocks = small_min_blocks;
  } else if (const RearrangeSpec* lopsided = choices.lopsided_tile();
             lopsided && s.tile_a == lopsided->tile_a && s.tile_b == lopsided->tile_b) {
    asked.volume /= 2;
    const TiledChoice& half = choices.choose(asked);
    searched.add(half);
    if (c.g.a == half.g.a && c.g.b == half.g.b && halves_long_side(s, half.spec) &&
        tile_fits(half.spec, kSmallBlockThreads, small_min_blocks, true, narrow_micro_tiles)) {
      c = half;
      s.exact = exact;
      s.threads = kSmallBlockThreads;
      s.min_blocks = small_min_blocks;
    }
  }
  if (s.tile_a == g.extent_a && s.tile_b == g.extent_b && s.a_pass == 0) {
    // Slab dims before linear stores or loads where the tile holds under kSlabOverLinearUnits units
    // per thread: moved as one run, it still leaves most of its block idle (H200, f16
    // [2,3,7,5,3,7,7,2,6,5,2,2,6,2,2], a 60 x 2 tile: walked as gathers, 20% of copy; grown to 60 x
    // 120 with 8-byte stores, 89%, and 90% storing its runs linearly). Of 34 more lines of linear
    // tiles grown so (two rounds each), 18 of 22 rose under 5 units per thread (by up to 47 points)
    // and 9 of 12 fell from 5 up (by up to 12).
    // Grown past linear loads, with the micro-tiles' load width: 4 lines of tuning seeds rose by 22
    // to 45 points (u8 [2,2,5,4,8,2,2,2,5,2,5,6,4,5,6], a 4 x 30 tile walked as gathers: 11% -> 56%).
    RearrangeSpec grown = s;
    grown.store_linear = 0;
    grown.store_run = 0;
    grown.skew_runs = false;
    grown.load_linear = 0;
    grown.load_run = 0;
    if (s.load_linear) grown.vec_b = c.micro_vec_b;
    Groups grown_groups = g;
    const bool few_units = std::int64_t{s.tile_a} * s.tile_b < kSlabOverLinearUnits * s.threads;
    // Linear moves over runs shorter than the tile leave it to slab dims, as vector moves do.
    const bool one_run = loads_one_run(s) || stores_one_run(s);
    if (!one_run || few_units)
      add_slab_dims(form.dims, grown_groups, grown, max_volume * s.threads / kThreads, narrow_micro_tiles);
    if (grown.tile_b > s.tile_b) {
      s = grown;
      g = grown_groups;
      // The grown tile stores linearly where B's first dims, slab dims among them, continue A in
      // dst (H200: the 31 u8/f16 lines of tuning seeds and seeds 143-145 whose plans changed with a
      // first form of slab pieces, 53.1% -> 59.4% of copy with linear stores alone, 64.6% with both; u8
      // [36,3,35,5,40,2,33,4] 4,2,1,0,5,3,7,6 12% -> 56%, 8-byte stores where it stored single bytes).
      take_linear_stores(form, g, s, dst_align);
      choose_rows(s);
    }
    if (s.b_chain > 0 && !slab_fits(s))
      s.min_blocks = std::min(s.min_blocks, kSlabSpillMinBlocks);
  }
  if (takes_third_block(s)) s.min_blocks = 3;
  // Tables the same for every tile are filled once per block (H100, seeds 40 and 44, whole tiles:
  // u8 rank-15 1080 x 20 tile 45% -> 62% of copy, f16 336 x 36 71% -> 90%).
  s.fixed_a = g.a.size() > 1 && carry_free_tiles(form.dims, g.a, s.tile_a);
  s.fixed_b = g.b.size() > 1 && carry_free_tiles(form.dims, g.b, s.tile_b);
  s.num_dims = static_cast<int>(form.dims.size());

  s.a_first = tiles_along_a_first(tiles_along_a(s, g.extent_a), ceil_div(g.extent_b, s.tile_b), s.tile_a, s.tile_b);
  if (reach) *reach = searched;
  return c;
}

// Tiles a block of a tiled plan walks. Units of 4 to 16 bytes over a 2-dim canonical form (one A
// dim, one B dim, nothing outside the tile) take one. (H200, held-out tiled lines of that form, seeds
// 4519-4530: f32 86.2 -> 88.7% of copy, 19 up by 3+ points and none down, f64 90.1 -> 91.0%; with
// one, u8 fell 69.4 -> 66.4% and f16 held, 83.3 -> 83.2%. On the tuning seeds 4515-4518, 4- and
// 8-byte tiles over more dims lost with one: packed 85.9 -> 84.5%, transposes 86.9 -> 85.4%.)
std::int64_t tiles_per_block(const RearrangeSpec& s) {
  return s.num_dims == 2 && s.unit_bytes >= 4 ? 1 : kTilesPerBlock;
}

// The variant of a tiled plan's tile: dim[0, |A|) = group A, then group B, then the outer dims, each
// innermost first.
RearrangeVariant tiled_variant(const CanonicalForm& form, const TiledChoice& c) {
  const RearrangeSpec& s = c.spec;
  const Groups& g = c.g;
  const std::int64_t tiles_a = tiles_along_a(s, g.extent_a), tiles_b = ceil_div(g.extent_b, s.tile_b);
  RearrangeVariant v{form, s, {}, 0, 0};
  RearrangeKernelArgs& args = v.args;
  args.extent_a = g.extent_a;
  args.extent_b = g.extent_b;
  args.tiles_x = make_kernel_divisor(tiles_b);
  args.tiles_y = make_kernel_divisor(tiles_a);
  args.num_tiles = tiles_a * tiles_b * (unit_count(form.dims) / g.extent_a / g.extent_b);
  int k = 0;
  for (std::size_t i : g.a) args.dim[k++] = kernel_dim(form.dims[i]);
  for (std::size_t i : g.b) args.dim[k++] = kernel_dim(form.dims[i]);
  for (std::size_t i = form.dims.size(); i-- > 0;)
    if (!in_groups(g, i)) args.dim[k++] = kernel_dim(form.dims[i]);
  v.grid = grid_for(ceil_div(args.num_tiles, tiles_per_block(s)));
  return v;
}

// The variant of tiled_groups's tile for one passing and aspect (the tuning candidates take each).
RearrangeVariant plan_tiled_groups(TileChoices& choices, std::size_t a_dim, std::size_t b_dim, bool exact,
                                   std::int64_t src_align, std::int64_t dst_align, std::int64_t max_volume,
                                   Passing passing, bool load_runs, int aspect = 0) {
  return tiled_variant(choices.form(), tiled_groups(choices, a_dim, b_dim, exact, src_align, dst_align, max_volume,
                                                    passing, load_runs, aspect));
}

// A dim of a tiled plan's groups: its extent, the extent its tiles span, and its strides.
struct TileDim {
  std::int64_t extent, tile, src_stride, dst_stride;
};

// The dims of a tiled plan's groups: each group's tile spans its inner dims whole while it holds
// them, then a piece of the next.
DimList<TileDim> tile_group_dims(const CanonicalForm& form, const TiledChoice& c) {
  DimList<TileDim> out;
  auto add_group = [&](const DimList<DimIndex>& group, std::int64_t tile) {
    std::int64_t inner = 1;
    for (std::size_t i : group) {
      const RearrangeDim& d = form.dims[i];
      const bool whole = tile >= inner * d.extent;
      out.push_back({d.extent, whole ? d.extent : std::max<std::int64_t>(1, tile / inner), d.src_stride, d.dst_stride});
      if (!whole) return;
      inner *= d.extent;
    }
  };
  add_group(c.g.a, c.spec.tile_a);
  add_group(c.g.b, c.spec.tile_b);
  return out;
}

// Units of the contiguous run a tile covers on one side, from its unit-stride dim outwards.
std::int64_t tile_run_units(const DimList<TileDim>& dims, bool src_side) {
  std::int64_t run = 1, next = 1;
  for (bool grown = true; grown;) {
    grown = false;
    for (const TileDim& d : dims)
      if (std::llabs(src_side ? d.src_stride : d.dst_stride) == next && d.tile > 1) {
        run *= d.tile;
        if (d.tile < d.extent) return run;
        next *= d.extent;
        grown = true;
        break;
      }
  }
  return run;
}

// How well runs of these lengths (bytes) move memory, from 0 to 1: each side's run against the
// sector-sized waste at its ends.
double run_pair_score(double dst_bytes, double src_bytes) {
  return dst_bytes / (dst_bytes + 64) * src_bytes / (src_bytes + 64);
}

// How well a tiled plan's tile moves memory: run_pair_score of its contiguous runs.
double tile_footprint_score(const CanonicalForm& form, const TiledChoice& c) {
  const DimList<TileDim> dims = tile_group_dims(form, c);
  return run_pair_score(static_cast<double>(tile_run_units(dims, false) * c.spec.unit_bytes),
                        static_cast<double>(tile_run_units(dims, true) * c.spec.unit_bytes));
}

// Tiles of source-contiguous groups that read source runs under kPassingMinRunUnits units or
// kPassingMinRunBytes bytes grow B through A's first dims where that lengthens the tile's runs. (H200,
// tuning seeds 40, 41 and 44-53: of the 214 lines whose plans change when every tile may pass, 95
// rose and 82 fell; the 34 this rule passes went from 45% to 62% of copy, 26 up by up to 44 points,
// 2 down by up to 9.) Tiles that write such short destination runs grow A through B's first dims the
// same way: A's chain of 2 to 6 units stopped at B's first dim, so each unit or pair was stored
// apart, two to ten bytes a run. (H200, the 25 u8/f16 lines of seeds 900-951 whose plans this
// changes, 23 of them never looked at while writing it: 25.8% -> 57.3% of copy, all 25 up; u8
// [18,3,2,2,22,2,3,24,2,2,20,3] 10,0,7,3,1,8,6,4,2,5,11,9 13% -> 70%.) Runs of 32 to 63 bytes still
// take two or three sectors each, so they may pass too. (H200: the bound was chosen on the 10 lines
// of seeds 1094-1101 whose plans it changes, u8 (7) 39.4% -> 53.5% of copy, f16 (3) 61.6% -> 69.7%,
// 6 up by 14 to 34 points, 3 down by 4 to 10, where 128 bytes changed 27 lines and 5 of their 8 f32
// lines fell. On the 25 lines of seeds 1102-1125 it changes, drawn after: u8 (14) 47.1% -> 60.7%,
// f16 (11) 52.2% -> 74.2%, 20 up, 3 down.)
constexpr std::int64_t kPassingMinRunUnits = 16;
constexpr std::int64_t kPassingMinRunBytes = 64;
// Destination runs of 1- and 2-byte units pass under 128 bytes: the tile writes each run, two to four
// sectors at any alignment, apart from the runs beside it, which other tiles write. (H200, the lines
// of seeds 5239-5242 and 5267-5276 whose plans a 128-byte bound changes: on the destination side 6
// lines, all up, 1.6x geomean, f16 [13,40,2,2,24,35,6,17] 6,4,1,3,5,0,7,2 37% -> 69% of copy; on the
// source side 10 lines, 7 down, so source runs keep 64 bytes. On the 38 u8/f16 lines of seeds
// 5277-5356 it changes, drawn after: 52.8% -> 62.5%, 24 up and 10 down by 3 points or more; u8
// [22,24,3,2,3,2,20,3,2,2,18,2] 15% -> 78%, f16 [30,2,9,3,38,14,24,5] 63% -> 37% on a passing tile
// that loads 5-unit rows unit by unit.)
constexpr std::int64_t kNarrowPassingMinDstRunBytes = 128;

// The tile of a transpose or packed plan: tiled_groups's plain tile, or a passing one that moves
// longer runs. The rules that weigh tiles read these; the plan builds one variant (tiled_variant).
TiledChoice plan_tiled(TileChoices& choices, std::size_t a_dim, std::size_t b_dim, bool exact,
                       std::int64_t src_align, std::int64_t dst_align, std::int64_t max_volume,
                       bool load_runs = true, int aspect = 0,
                       std::int64_t narrow_micro_tiles = kMicroTilesPerThread) {
  const CanonicalForm& form = choices.form();
  PassingReach reach;
  TiledChoice best = tiled_groups(choices, a_dim, b_dim, exact, src_align, dst_align, max_volume, Passing::none,
                                  load_runs, aspect, narrow_micro_tiles, &reach);
  const DimList<TileDim> plain_dims = tile_group_dims(form, best);
  // A tile storing vectors narrower than a word tries A's chain through B's first dims even over long
  // destination runs, and takes it where it then stores words or wider vectors (skewed runs among
  // them) beside loads of a word or more. (H200, the lines of seeds 4999-5118 that took passing tiles
  // without skewed runs: 19 that stored or loaded under a word 47.8% -> 40.8% of copy, 13 down, f16
  // [580,5,1075,13,3] 2,0,1,4,3 56% -> 35%; 28 that moved words or more 48.6% -> 61.1%, 18 up and 5
  // down, u8 [85,21,3,4,2,2,21,92] 4,3,5,6,2,0,7,1 28% -> 64%.)
  // (Searched only where the tile loads words and its chain meets B's first dim, short enough to pass.)
  const std::optional<std::size_t> after_a =
      dst_dim_with_stride(form.dims, destination_run_units(form.dims, best.g.a));
  const bool narrow_stores_meet_b = store_vector(best.spec) * form.unit_bytes < 4 &&
                                    load_vector(best.spec) * form.unit_bytes >= 4 && after_a &&
                                    *after_a == best.g.b.front() &&
                                    form.dims[*after_a].extent <= tile_side_a(max_volume, aspect);
  for (const Passing passing : {Passing::b_through_a, Passing::a_through_b}) {
    const std::int64_t run = tile_run_units(plain_dims, passing == Passing::b_through_a);
    const std::int64_t min_bytes = passing == Passing::a_through_b && form.unit_bytes <= 2
                                       ? kNarrowPassingMinDstRunBytes
                                       : kPassingMinRunBytes;
    const bool long_runs = run >= kPassingMinRunUnits && run * form.unit_bytes >= min_bytes;
    if (long_runs && !(passing == Passing::a_through_b && narrow_stores_meet_b)) continue;
    // Where no search of the plain walk could pass, each passing search is the plain one, so the
    // passing walk repeats the plain walk and finds its tile, which does not beat `best`.
    if (!reach.reaches(passing)) continue;
    TiledChoice passed = tiled_groups(choices, a_dim, b_dim, exact, src_align, dst_align, max_volume, passing,
                                      load_runs, aspect, narrow_micro_tiles);
    if (long_runs && std::min(store_vector(passed.spec), load_vector(passed.spec)) * form.unit_bytes < 4) continue;
    if (tile_footprint_score(form, passed) > tile_footprint_score(form, best)) best = std::move(passed);
  }
  return best;
}

// Whether every destination row of a tile starts on a 32-byte sector: the destination strides of
// all dims outside its A group are multiples of 32 bytes.
bool rows_start_on_sectors(const CanonicalForm& form, const Groups& g) {
  for (std::size_t i = 0; i < form.dims.size(); ++i)
    if (!g.in_a(i) && std::llabs(form.dims[i].dst_stride) * form.unit_bytes % kSectorBytes != 0) return false;
  return true;
}

// The aspect (doublings of A's side of a square tile) of a tile of 1- to 8-byte units whose default
// tile stores A in vectors narrower than the unit's widest (16 bytes, 8 for 1-byte units): one for a
// vector half as wide, two for narrower ones; one for 1-byte units storing the widest, 8-byte vectors,
// into destination rows that start off 32-byte sectors (a 128-unit piece of such a row touches five
// sectors, a 256-unit piece nine). The tile is planned again with it (kept or not by
// takes_longer_tile), and may then group its dims differently (A taking dims B had; some
// leave skewed or word tiles). Why longer pieces help the narrower vectors was not measured. (H200,
// f32 on random seeds 971-974, every tile with A two and four times as long: lines storing 4-byte
// vectors 65.3% -> 67.5% and 69.2% of copy, 8-byte vectors 78.6% -> 83.4% and 83.2%; those storing
// 16-byte vectors lost, 82.2% -> 79.8% and 76.0%, as did TTC f32, 92.5% -> 91.4% and 85.5%, so they
// keep their tile. On seeds 975-980, drawn after, the 40 lines of 168 it changed: 72.2% -> 80.3%. 1- and
// 2-byte units, on the lines of fresh seeds 1041-1060 it changes: u8 (62) 55.4% -> 67.1%, 53 up and 7
// down by 3 points or more, f16 (107) 63.6% -> 71.4%, 72 up and 16 down. u8 tiles of 8-byte stores:
// measured planning's timings of every candidate on seeds 1127-1132 favoured longer A tiles; on the 30
// lines of seeds 1133-1160 that A twice as long changes, 69.6% -> 71.4%, 15 up and 7 down, the worst
// where A did not grow or stored narrower vectors, so those keep their tile; with that guard, on the
// 146 lines of seeds 1161-1200 it changes, drawn after: 65.9% -> 69.4%. There, rows off sectors rose
// (100 lines, 63.5% -> 68.8%, 56 up and 6 down) and rows on sectors did not (46, 71.3% -> 70.7%, 10 up
// and 18 down), as on seeds 1133-1160 (17 lines 67.9% -> 72.4% against 13 lines 71.9% -> 70.0%); the
// DL u8 transpose [16384,16384] 1,0, rows on sectors, fell 92% -> 77% in a separate run. Rows off sectors only, on the 126 lines of seeds 1201-1260 it
// changes, drawn after: 64.3% -> 71.6%, 88 up and 8 down, lines under 55% 15 -> 8.) 8-byte units
// storing single units: measured planning's timings on seeds 1600-1601 favoured A twice as long; on
// the 118 lines of fresh f64 seeds 1605-1624 it changes (18% of them) and 1 f32 line of seeds
// 1605-1644, 83.7% -> 86.6% of copy, 41 up and 5 down by 3 points or more, three of the five falls
// where B lost a dim; with that guard (takes_longer_tile), on the 103 lines of f64 seeds 1625-1644 it
// changes, 82.8% -> 86.5%, 37 up and 5 down.
int narrow_store_aspect(const CanonicalForm& form, const TiledChoice& c) {
  const RearrangeSpec& planned = c.spec;
  const bool tiled = is_tiled(planned.family);
  if (planned.unit_bytes > 8 || !tiled || planned.store_linear > 0) return 0;
  const int widest = planned.unit_bytes == 1 ? 8 : 16 / planned.unit_bytes;
  if (planned.unit_bytes == 1 && planned.vec_a == widest) return rows_start_on_sectors(form, c.g) ? 0 : 1;
  if (planned.vec_a >= widest) return 0;
  return 2 * planned.vec_a == widest ? 1 : 2;
}

// Whether a tile planned with narrow_store_aspect replaces the default: it loads vectors as wide; for
// 1-byte units that stored the widest vectors, its A grows and keeps them; for 8-byte units its B
// keeps its dims (H200, f64: on 9 lines of seeds 1600-1624 where B lost a dim, 7 fell by 1-12
// points, as [27,2,31,17,34,6,34] 4,6,1,5,2,3,0 86% -> 74%; 2 rose by 1 and 8).
bool takes_longer_tile(const RearrangeSpec& planned, const RearrangeSpec& longer) {
  if (load_vector(longer) < load_vector(planned)) return false;
  if (planned.unit_bytes == 8 && longer.dims_b < planned.dims_b) return false;
  if (planned.unit_bytes != 1 || planned.vec_a < 8) return true;
  return longer.tile_a > planned.tile_a && longer.vec_a >= planned.vec_a;
}

// Whether takes_longer_tile refuses narrow_store_aspect's A four times as long for 2- or 4-byte units:
// their tile then takes A twice as long, under the same guard. (H200, measured planning's timings: f32
// tiles of 64 x 64 units storing single units and loading 16-byte vectors ran 1.14x faster at 128 x 32;
// the 256 x 16 tile loads 8-byte vectors. On the 55 lines of fresh seeds 3645-3900 it changes, 0.4% of
// 2- and 4-byte lines: 66.9% -> 75.3% of copy, 45 up and 2 down by 3 points or more; f32 (27 lines)
// 70.5% -> 78.3%, none down; f16 (28) 63.7% -> 72.4%, the largest gains where the longer tile then
// kept f16 lines off word tiles. 1-byte units were not measured: on u8 it would move word tiles to
// packed ones.) Taking A twice as long wherever f32 tiles store single units moved 148 lines of seeds
// 3605-3644 from 75.9% to 76.4% only, 42 up and 36 down, so the other tiles keep A four times as long.
bool refuses_a_four_times_as_long(const RearrangeSpec& planned, const RearrangeSpec& longer, int aspect) {
  return aspect == 2 && planned.unit_bytes > 1 && !takes_longer_tile(planned, longer);
}

// Whether a tile's A group is one dim that its tiles split in two: each destination run then ends
// mid-row, in pieces of half a row or so.
bool splits_one_dim_a_in_two(const TiledChoice& c) {
  const RearrangeSpec& s = c.spec;
  return s.dims_a == 1 && s.tile_a < c.g.extent_a && 2 * std::int64_t{s.tile_a} >= c.g.extent_a;
}

// Whether a tile of A twice as long replaces such a tile: its A gains a dim (the chain runs on past
// the split dim, so destination runs are longer than a row), B keeps its dims and loads are as wide.
// The guard compares tiles of one volume: plan_fixed_tiles then weighs the 32 KiB tile against the
// chained one, which may keep a tile whose B the larger one would have grown. (H200: measured
// planning's timings, f64 [74,23,38,3092] 2,3,1,0 1.51x faster with A over two dims. Without the B
// guard, on the 70 lines of fresh seeds 2601-2700 it changed: 81.8% -> 85.9% of copy, 33 up and 11
// down by 3 points or more, of which the 25 whose final tile had B lose a dim 7 up and 9 down: hence
// the guard, like takes_longer_tile's. With it, on the 52 lines of fresh seeds 2701-2800 it changes:
// 81.3% -> 86.7%, 26 up and 4 down; f64 (24 lines) 83.9% -> 89.0%, none down. The 4 falls are f32
// lines where the chained tile displaced the larger tile, among 11 lines where the larger tile's
// choice or a refused narrow_store_aspect tile was involved: those 11 went 4 up by 3.5 to 34 points
// and 4 down by 3.5 to 9.5.)
bool takes_chained_a(const RearrangeSpec& planned, const RearrangeSpec& longer) {
  return longer.dims_a > planned.dims_a && longer.dims_b >= planned.dims_b &&
         load_vector(longer) >= load_vector(planned);
}

// Fixed tiles of a long A group over a short B group: tile_a of at least kLongTileA units over
// tile_b of at most kShortTileB.
constexpr std::int64_t kLongTileA = 1024;
constexpr std::int64_t kShortTileB = 4;
constexpr std::int64_t kNarrowSideMinUnits = 8;
constexpr std::int64_t kNarrowSideMaxUnits = 45;
constexpr std::int64_t kNarrowSideMaxBytes = 2;

// Whether a tile's shorter side is moved in narrow accesses: kNarrowSideMinUnits to
// kNarrowSideMaxUnits units, each access (its vector, or its linear piece) of at most
// kNarrowSideMaxBytes bytes.
bool narrow_short_side(const RearrangeSpec& s) {
  const bool a_short = s.tile_a <= s.tile_b;
  const std::int64_t units = a_short ? s.tile_a : s.tile_b;
  const std::int64_t linear = a_short ? s.store_linear : s.load_linear;
  const std::int64_t access = linear > 0 ? linear : (a_short ? s.vec_a : s.vec_b);
  return units >= kNarrowSideMinUnits && units <= kNarrowSideMaxUnits && access * s.unit_bytes <= kNarrowSideMaxBytes;
}

// Whether B's source chain runs on through a dim of A past its first (A's first dim, innermost in
// the destination, stays in A at any volume): the dim whose source stride continues B's first
// back-to-back dims lies there.
bool b_chain_meets_a(const CanonicalForm& form, const Groups& g) {
  std::int64_t run = 1;
  for (std::size_t k = 0; k < g.b.size() && form.dims[g.b[k]].src_stride == run; ++k) run *= form.dims[g.b[k]].extent;
  for (std::size_t k = 1; k < g.a.size() && run > 1; ++k)
    if (form.dims[g.a[k]].src_stride == run) return true;
  return false;
}

// Whether the quarter tile replaces a tile that loads under a word (1- and 2-byte units only) where
// B's source chain runs on into A's dims (b_chain_meets_a; B mostly of 5 to 38 units, often odd,
// loaded unit by unit or in pairs): where the quarter's B gains a dim and loads words or wider, its
// A holds 32 bytes or more, and its stores keep half their width and a word, or their whole width
// where that was under a word. (H200, two rounds: the 13 lines of seeds 8684-8884 it changes,
// 61.5% -> 77.5% of copy, all 13 up by 3 points or more, f16 [2,2,2,3,4,4,2,2,3,4,8,7,3,6,9] 59%
// -> 89%; the A bound came from a 14th, whose A fell to 16 bytes, u8 [21,40,2,84,18,10,7] 59% ->
// 53%. The half-width bound came from seeds 8885-9684, where quarters storing 4-byte vectors in
// place of 16-byte ones fell by 3 to 16 points (6 of 24 f16 lines); the 38 lines the final rule
// changes there, 61.6% -> 78.8%. On the 58 lines of seeds 9685-10884 it changes, drawn after: u8
// (37) 57.0% -> 70.9%, f16 (21) 67.4% -> 82.3%, 49 up and 6 down, u8 [2,22,3,20,3,2,2,18,24,2,3,2]
// 71% -> 52%.)
bool takes_widened_b(const RearrangeSpec& planned, const RearrangeSpec& quarter) {
  const int planned_store = store_vector(planned) * planned.unit_bytes;
  const int quarter_store = store_vector(quarter) * quarter.unit_bytes;
  return quarter.dims_b > planned.dims_b && load_vector(quarter) * quarter.unit_bytes >= 4 &&
         std::int64_t{quarter.tile_a} * quarter.unit_bytes >= kSectorBytes && 2 * quarter_store >= planned_store &&
         quarter_store >= std::min(4, planned_store);
}

// The plan_tiled search behind a fixed tile: its volume, load runs and aspect.
struct TiledSearch {
  std::int64_t volume;
  bool load_runs;
  int aspect;
};

// The fixed tiles of a transpose of `volume` units, or of a quarter of it where that keeps both
// groups and their vectors, for two shapes of tile (measured at the unit's default volume); or a
// quarter that gives B the dims of its source chain that A took, for narrow loads (takes_widened_b).
// A long A over a short B: the smaller tile then fits blocks of 128 threads, more of them per SM.
// (H200, tuning seeds 40, 41 and 44-53: 21 such lines from 76.8% to 80.7% of copy, 10 up by up to
// 18 points and 3 down by up to 7. Quarter tiles that changed the groups lost: 3 of 5 such lines fell
// by 9 to 21 points; the exception, a quarter whose B takes dims the full tile's A held, is below.)
// A tile of 256 threads whose short side moves 1 or 2 bytes per access, where the quarter tile
// takes 128 threads and keeps half the units or more: twice the blocks per SM hold as many bytes in
// flight, in smaller blocks between barriers. (H200: measured planning's timings of every candidate
// on the 1- and 2-byte lines of tuning seeds 41 and 45-47 chose the bounds, 8 of 224 lines
// changing, each faster by 4% to 32%; quarters they leave out fell: a tile of 128 threads by 14%,
// short sides of 6 units by 2-3% and of 50 units by 13%, 4-byte accesses along a 36-unit side by
// 7%. Without the half-the-units bound, 17 lines of seeds 42, 43 and 54-65 went from 60.7% to 59.0%
// of copy, the four largest falls, by 9 to 12 points, on quarters of a quarter the units. With it,
// on 16 lines of seeds 66-85, drawn after: 46.8% -> 50.3% and 46.2% -> 48.6% in two rounds, 9-10 up
// and 1-2 down.)
// `found`, where given, receives the plan_tiled search behind the returned tile.
TiledChoice fixed_tiles_of_volume(TileChoices& choices, std::size_t a_dim, std::size_t b_dim, bool exact,
                                  std::int64_t src_align, std::int64_t dst_align, std::int64_t volume,
                                  std::int64_t narrow_micro_tiles, TiledSearch* found = nullptr) {
  const CanonicalForm& form = choices.form();
  TiledChoice v = plan_tiled(choices, a_dim, b_dim, exact, src_align, dst_align, volume, true, 0, narrow_micro_tiles);
  int aspect = narrow_store_aspect(form, v);
  std::optional<TiledChoice> refused_twice_as_long;  // planned with aspect 1 and refused
  if (aspect > 0) {
    // Kept as takes_longer_tile says; the load guard (H200, measured planning's timings: f32
    // [7,2,7,5,2,2,5,3,4,5,3,6,3,3,2] 62% -> 77% of copy keeping the square tile's 16-byte loads; f16
    // [19,6,24213,39] 0,3,1,2 84% against 73% keeping its linear 4-byte loads. On the 26 f32 lines of
    // fresh seeds 1003-1040 the guard changes: 67.9% -> 71.2%, 11 up and 9 down, the losses where the
    // longer tile also stored wider vectors: [2,617,75,46,47] 0,4,1,3,2 85% -> 68%.)
    TiledChoice longer = plan_tiled(choices, a_dim, b_dim, exact, src_align, dst_align, volume, /*load_runs=*/true,
                                    aspect, narrow_micro_tiles);
    if (refuses_a_four_times_as_long(v.spec, longer.spec, aspect)) {
      aspect = 1;
      longer = plan_tiled(choices, a_dim, b_dim, exact, src_align, dst_align, volume, /*load_runs=*/true, aspect,
                          narrow_micro_tiles);
    }
    if (takes_longer_tile(v.spec, longer.spec)) {
      v = std::move(longer);
    } else {
      if (aspect == 1) refused_twice_as_long = std::move(longer);
      aspect = 0;
    }
  }
  // Also where takes_longer_tile refused narrow_store_aspect's tile (3 of the 52 lines of seeds
  // 2701-2800 that chaining changes), under takes_chained_a's guard. Taken, its quarter below keeps
  // its aspect, as a tile of narrow_store_aspect's does.
  if (aspect == 0 && splits_one_dim_a_in_two(v)) {
    TiledChoice longer = refused_twice_as_long ? std::move(*refused_twice_as_long)
                                               : plan_tiled(choices, a_dim, b_dim, exact, src_align, dst_align, volume,
                                                            /*load_runs=*/true, /*aspect=*/1, narrow_micro_tiles);
    if (takes_chained_a(v.spec, longer.spec)) {
      v = std::move(longer);
      aspect = 1;
    }
  }
  if (found) *found = {volume, true, aspect};
  const RearrangeSpec& s = v.spec;
  const bool long_over_short = s.tile_a >= kLongTileA && s.tile_b <= kShortTileB;
  const bool narrow_side = s.threads == kThreads && narrow_short_side(s);
  const bool narrow_loads_meet_a = load_vector(s) * s.unit_bytes < 4 && b_chain_meets_a(form, v.g);
  if (!long_over_short && !narrow_side && !narrow_loads_meet_a) return v;
  // The quarter loads as the full tile does: over runs shorter than the tile only where it does.
  const bool short_load_runs = s.load_linear && !loads_one_run(s);
  TiledChoice quarter = plan_tiled(choices, a_dim, b_dim, exact, src_align, dst_align, volume / 4, short_load_runs,
                                   aspect, narrow_micro_tiles);
  const RearrangeSpec& q = quarter.spec;
  const bool same = q.dims_a == s.dims_a && q.dims_b == s.dims_b && q.vec_a == s.vec_a && q.vec_b == s.vec_b;
  const bool half_or_more = 2 * std::int64_t{q.tile_a} * q.tile_b >= std::int64_t{s.tile_a} * s.tile_b;
  // A long A over a short B whose source chain runs on through dims A took: the quarter, whose
  // smaller A leaves them to B, loads rows four times as long or more. (H200: measured planning's
  // picks on seeds 801-806; on the 6 lines of seeds 40-53 and 99-131 it moves, never timed before,
  // 45.8% -> 66.8% of copy, 5 up by 8 to 37 points, f16 [5,40,2,33,3,35,36,4] 1,4,0,3,7,6,5,2 65% ->
  // 63%.)
  const bool b_lengthened = q.dims_b > s.dims_b && q.tile_b >= 4 * s.tile_b;
  const bool smaller_blocks = same && q.threads == kSmallBlockThreads && half_or_more;
  const bool takes_quarter = long_over_short ? same || b_lengthened
                                             : (narrow_side && smaller_blocks) ||
                                                   (narrow_loads_meet_a && takes_widened_b(s, q));
  if (found && takes_quarter) *found = {volume / 4, short_load_runs, aspect};
  return takes_quarter ? quarter : v;
}

// Whether a fixed-family plan is a tile of 1-byte units that stores one byte at a time, and loads so
// too, or in 2- or 4-byte vectors along a destination row of 16 units or more: bound by instruction
// issue, it loses to runs of aligned words (H100, u8 [159,6,51,4,3,7,33] 4,0,3,1,5,6,2: 26% -> 45% of
// copy; with 2- and 4-byte loads, measured planning's picks on seeds 23 and 24: 30% -> 45%, 43% ->
// 58%). Fixed tiles kept the lead on rows of 3 and 7 units, and with 8-byte loads (u8
// [144,3,5,20,11,30,6,2] 3,1,5,0,6,7,2,4: 38% against 23% on runs). Runs lost on tiles with wider
// stores (u8 and f16 on seeds 4 and 6), on gathers and on rows of 5 bytes (mixed), so those keep
// their family and runs stay a tuning candidate.
bool stores_single_bytes(const RearrangeSpec& s) {
  const bool tiled = is_tiled(s.family);
  const bool single_loads = s.vec_b == 1 && !s.load_linear;
  const bool narrow_loads = s.vec_b <= 4 && !s.load_linear;
  return tiled && s.unit_bytes == 1 && s.vec_a == 1 && !s.store_linear && (single_loads || (narrow_loads && s.tile_a >= 16));
}

// Whether a tile of 2-byte units loads and stores single units: like u8 tiles of single bytes, it
// loses to runs tiles that gather their stores. (H200, measured planning's timings: the five such f16
// lines among the tuning lines of seeds 3601-3604 and earlier, runs 1.01x to 1.43x faster. On the 44
// lines of fresh seeds 3961-4160 that such tiles take, 0.8% of f16 lines: runs tiles that gather
// their stores 37 lines 41.0% -> 47.3% of copy, 28 up and 2 down by 3 points or more (f16
// [839,2200,7,3,5] 4,1,3,0,2 52% -> 36%); those that scatter their loads 7 lines 42.7% -> 33.2%, 6
// down, so those keep the tile. With that guard, on the 26 lines of fresh seeds 4161-4400 it changes:
// 42.6% -> 52.5%, 22 up and 1 down. All at 16-byte aligned pointers.)
bool moves_single_units_of_two_bytes(const RearrangeSpec& s) {
  return is_tiled(s.family) && s.unit_bytes == 2 && s.vec_a == 1 && s.vec_b == 1 && !s.load_linear &&
         !s.store_linear;
}

bool takes_larger_tile(const RearrangeSpec& larger, const RearrangeSpec& planned) {
  return larger.threads == kThreads && larger.dims_a >= planned.dims_a && larger.dims_b >= planned.dims_b &&
         larger.dims_a + larger.dims_b > planned.dims_a + planned.dims_b &&
         store_vector(larger) >= store_vector(planned) && load_vector(larger) >= load_vector(planned);
}

TiledChoice plan_fixed_tiles(TileChoices& choices, std::size_t a_dim, std::size_t b_dim, bool exact,
                             std::int64_t src_align, std::int64_t dst_align,
                             std::int64_t narrow_micro_tiles = kMicroTilesPerThread) {
  const std::int64_t unit = choices.form().unit_bytes;
  const std::int64_t volume = tile_volume(unit), large_volume = kLargeTileBytes / unit;
  TiledSearch search{};
  TiledChoice v =
      fixed_tiles_of_volume(choices, a_dim, b_dim, exact, src_align, dst_align, volume, narrow_micro_tiles, &search);
  const bool groups_hold_every_dim = v.spec.dims_a + v.spec.dims_b == static_cast<int>(choices.form().dims.size());
  if (volume < large_volume && v.spec.threads == kThreads && !groups_hold_every_dim) {
    // A tile that stores single bytes is weighed against the plain larger tile only: with its longer
    // and quarter forms too, every plan of 8,762 lines was the same, and the 66 runs lines of rank 8
    // or less planned in 8.6 us (median, build machine) rather than 6.9.
    TiledChoice larger =
        stores_single_bytes(v.spec)
            ? plan_tiled(choices, a_dim, b_dim, exact, src_align, dst_align, large_volume, true, 0, narrow_micro_tiles)
            : fixed_tiles_of_volume(choices, a_dim, b_dim, exact, src_align, dst_align, large_volume,
                                    narrow_micro_tiles);
    if (takes_larger_tile(larger.spec, v.spec)) return larger;
  }
  const bool measured_unit = v.spec.unit_bytes == 1 || v.spec.unit_bytes == 2 || v.spec.unit_bytes == 8;
  if (v.spec.threads != kThreads || !measured_unit || !is_lopsided(v.spec)) return v;
  // The search that found the tile, again, halving the tiles of its size that it finds (the pointer
  // lives as long as this plan's TileChoices needs it: cleared below).
  choices.set_lopsided_tile(&v.spec);
  TiledChoice halved = plan_tiled(choices, a_dim, b_dim, exact, src_align, dst_align, search.volume,
                                  search.load_runs, search.aspect, narrow_micro_tiles);
  choices.set_lopsided_tile(nullptr);
  return halved.spec.threads == kSmallBlockThreads && halved.g.a == v.g.a && halved.g.b == v.g.b &&
                 halves_long_side(v.spec, halved.spec)
             ? halved
             : v;
}

// ---- skewed ----------------------------------------------------------------------------------

// Arguments of the skewed and word-tile families: dim[0, |A|) = group A, then group B, then the outer
// dims, each innermost first; tiles count ceil((extent_a + a_lead) / tile_a) along A, as a
// destination row's owned ranges start up to a_lead units before the row.
RearrangeKernelArgs skew_tile_args(const CanonicalForm& form, const Groups& g, const RearrangeSpec& s,
                                   std::int64_t a_lead) {
  RearrangeKernelArgs args;
  args.extent_a = g.extent_a;
  args.extent_b = g.extent_b;
  args.tiles_x = make_kernel_divisor(ceil_div(g.extent_b, s.tile_b));
  args.tiles_y = make_kernel_divisor(ceil_div(g.extent_a + a_lead, s.tile_a));
  args.num_tiles = args.tiles_x.value * args.tiles_y.value * (unit_count(form.dims) / g.extent_a / g.extent_b);
  int k = 0;
  for (std::size_t i : g.a) args.dim[k++] = kernel_dim(form.dims[i]);
  for (std::size_t i : g.b) args.dim[k++] = kernel_dim(form.dims[i]);
  for (std::size_t i = form.dims.size(); i-- > 0;)
    if (!in_groups(g, i)) args.dim[k++] = kernel_dim(form.dims[i]);
  return args;
}

// Groups of one dim each.
Groups single_dims(const RearrangeDims& dims, std::size_t a_dim, std::size_t b_dim) {
  Groups g;
  g.add_a(a_dim, dims[a_dim].extent);
  g.add_b(b_dim, dims[b_dim].extent);
  return g;
}

constexpr std::int64_t kSkewedTile = 64;  // units along A and along B
// Skewed tiles of 4-byte units hold units in this share of their slots at least: where their last
// tiles along A or B are mostly empty, tiles of the transpose family (narrow_store_aspect's, of 128
// x 16 units or so) go faster. (H200, f32: the 7 skewed lines of seeds 1600-1604 and the DL suite,
// the bound set on them: moved to transposes, 3 rose by 11-17 points at fills of 0.53-0.69; at fills
// of 0.82-0.99, 3 fell by 1-7 and 1 rose by 1. On the 7 lines of 1,280 of fresh seeds 1605-1644 that
// it moves, 53.1% -> 65.2% of copy, every line up by 3 points or more.) Between kSkewedMinFill and
// kSkewedSureFill they are taken only where the transpose's own tiles fill no more of their slots
// (by kSkewedFillLead): two lines at fills of 0.76 and 0.80 ran 1.25x and 1.19x faster on transposes
// filling 0.92 and 0.96 (measured planning, f32 lines of seeds 2491-2494). Moving every line under
// 0.82, on the 15 lines of fresh seeds 2601-2800 that moved: 7 up by 3 to 9 points, 3 down by 4 to
// 6, the three where the transposes idled as much ([199, 1005025] 1,0, [201, 439, 2267] 1,2,0,
// [195, 1025641] 1,0), and one up by 6 whose transposes idled more ([120, 9, 287, 3, 215]
// 1,0,4,3,2). With the lead, on the 21 f32 lines of fresh seeds 2801-3400 it moves: 61.7% -> 68.7%,
// 18 up, none down.
constexpr double kSkewedMinFill = 0.75;
constexpr double kSkewedSureFill = 0.82;
constexpr double kSkewedFillLead = 0.02;

// The share of a group's slots that tiles of `tile` units fill.
double tile_fill(std::int64_t extent, std::int64_t tile) {
  return static_cast<double>(extent) / static_cast<double>(ceil_div(extent, tile) * tile);
}

// The share of the slots of skewed tiles over a transpose of extent_a x extent_b units that hold
// units: a destination row's tiles along A start up to a vector less a unit before it.
double skewed_tile_fill(std::int64_t extent_a, std::int64_t extent_b, std::int64_t unit) {
  const std::int64_t lead = 16 / unit - 1;
  const auto fill = [](std::int64_t extent, std::int64_t slots) {
    return static_cast<double>(extent) / static_cast<double>(ceil_div(slots, kSkewedTile) * kSkewedTile);
  };
  return fill(extent_a, extent_a + lead) * fill(extent_b, extent_b);
}

// A transpose whose fixed tiles would store in vectors narrower than 8 bytes (an odd destination
// pitch, a misaligned pointer): units of 4 bytes, or of 2 bytes in a plain 2-D transpose; B
// unit-stride in the source, both groups one dim of 64 units or more (a tile reads VEC - 1 extra
// source rows, and a row's two ends take single units). H100, against fixed tiles: f32 with narrow
// stores 32-51% -> 84-88% of copy (seeds 4, 6, 9, 10), f16 2-D 38-46% -> 68-70% (tune's picks,
// seeds 7, 8). Narrow loads alone lost (f32 86-92% -> 59-82%, f16 79-94% -> 50-58%), as did f16 with outer dims
// (35-59% against 53-71%): eight 2-byte units per vector cost more shared-memory writes than the
// narrow side saves. u8 lost too (H200, [8191, 8193]: 32% -> 29%, sixteen one-byte shared-memory
// writes per vector), so 1-byte units stay tiled. 2-byte units that pass take word tiles instead,
// unless fixed tiles of pairs count along A (fixed_tiles_along_a; plan_fixed_family): skewed tiles
// stay their tuning candidate. Tiles of 4-byte units that load wider vectors keep their tile, long
// along A since narrow_store_aspect (H200, the 42 lines of fresh f32 seeds 1003-1040 this moves off
// skewed tiles: 67.9% -> 77.5% of copy, 34 up and 5 down by 3 points or more, the losses long A rows
// counted along A first, [127389,1570] 1,0 68% -> 59%). Tiles of 4-byte units whose skewed tiles
// would hold units in under kSkewedMinFill of their slots keep their tile too (skewed_tile_fill), as
// do those under kSkewedSureFill whose transpose tiles fill more. Tiles of skewed stores are weighed
// first (plan_fixed_family): 4-byte units come here only where those are refused.
bool wants_skewed_tiles(const RearrangeSpec& tiled, const CanonicalForm& form, std::size_t a_dim,
                        std::size_t b_dim) {
  const bool narrow_stores = tiled.vec_a * form.unit_bytes < 8;
  const std::int64_t extent_a = form.dims[a_dim].extent, extent_b = form.dims[b_dim].extent;
  const double skewed_fill = skewed_tile_fill(extent_a, extent_b, form.unit_bytes);
  const double tiled_fill = tile_fill(extent_a, tiled.tile_a) * tile_fill(extent_b, tiled.tile_b);
  const bool fills = skewed_fill >= kSkewedSureFill ||
                     (skewed_fill >= kSkewedMinFill && skewed_fill + kSkewedFillLead >= tiled_fill);
  const bool unit_fits =
      (form.unit_bytes == 4 && load_vector(tiled) == 1 && fills) || (form.unit_bytes == 2 && form.dims.size() == 2);
  return tiled.family == RearrangeFamily::transpose && narrow_stores && unit_fits &&
         form.dims[b_dim].src_stride == 1 && form.dims[a_dim].extent >= kSkewedTile &&
         form.dims[b_dim].extent >= kSkewedTile;
}

// The fixed 64 x 64 tiles of an f16 2-D transpose with narrow stores, where they count along A: there
// they beat skewed tiles (tune's picks, seeds 40 and 44: H100 68-70% -> 71-80% on 4 of 6 lines, H200
// 52% -> 67-68% on 2 of 3; seeds 46-49: H100 67-68% -> 67-81% (3 of 4 up), H200 51-52% -> 64-70%),
// where tiles of 64 x 128 lost (seeds 41 and 45, H200: 52% -> 35-36%) and so did tiles of 32 x 64,
// which single units on both sides shrink to (seeds 46-49: 68% -> 63% H100, 51-52% -> 49% H200).
// Since word tiles take 2-byte single-unit stores first (wants_word_tiles), only tiles that store
// pairs reach here: forced onto word tiles, those 2-D lines lost (H200, tuning seeds: 70-71% -> 59-64%).
std::optional<TiledChoice> fixed_tiles_along_a(TileChoices& choices, std::size_t a_dim, std::size_t b_dim,
                                               bool exact, std::int64_t src_align, std::int64_t dst_align) {
  const CanonicalForm& form = choices.form();
  if (form.unit_bytes != 2 || form.dims.size() != 2) return std::nullopt;
  TiledChoice v = plan_tiled(choices, a_dim, b_dim, exact, src_align, dst_align, kSkewedTile * kSkewedTile);
  if (!v.spec.a_first || v.spec.tile_a < kSkewedTile || v.spec.tile_b < kSkewedTile) return std::nullopt;
  return v;
}

// dim[0] = A (dst stride 1), dim[1] = B (src stride 1), then the outer dims innermost first. Tiles
// along A number ceil((extent + VEC - 1) / TILE_A): a row's owned ranges start up to VEC - 1 units
// before the row.
RearrangeVariant plan_skewed(const CanonicalForm& form, std::size_t a_dim, std::size_t b_dim, bool exact) {
  const std::int64_t unit = form.unit_bytes, vec = 16 / unit;
  RearrangeSpec s;
  s.family = RearrangeFamily::skewed;
  s.unit_bytes = static_cast<int>(unit);
  s.threads = kThreads;
  s.num_dims = static_cast<int>(form.dims.size());
  s.index64 = needs_index64(form.dims);
  s.bounds = true;
  s.exact = exact;
  s.tile_a = static_cast<int>(kSkewedTile);
  s.tile_b = static_cast<int>(kSkewedTile);
  s.vec_a = s.vec_b = static_cast<int>(vec);
  s.pitch = s.tile_a;
  s.min_blocks = 3;

  RearrangeVariant v{form, s, {}, 0, 0};
  v.args = skew_tile_args(form, single_dims(form.dims, a_dim, b_dim), s, vec - 1);
  v.spec.a_first = !counts_along_b(v.args.tiles_y.value, v.args.tiles_x.value, s.tile_a, s.tile_b);
  // One tile per block: the kernel is bound by instruction issue, and walking two or four tiles per
  // block with the next one's loads in flight cost it (H200, f32 [8191, 8193]: 68%, 62%, 57%).
  v.grid = grid_for(v.args.num_tiles);
  return v;
}

// ---- words ----------------------------------------------------------------------------------

constexpr std::int64_t kWordBytes = 4;  // word tiles move 1- and 2-byte units in 32-bit words
// Row groups along A a tile holds at most (groups grow to fill it); also the B words a 256-thread
// tile may span whole.
constexpr std::int64_t kWordTileWords = 32;
// Threads per SM a word kernel asks for: 80 registers each; at 1024 (64 registers) the loaded words
// spill.
constexpr std::int64_t kWordThreadsPerSm = 768;
// Shorter groups leave most of a tile's lanes idle: on an H100, u8 lines with a B group of 12 to 50
// bytes fell from 31-74% of copy on packed tiles to 10-35% on word tiles.
constexpr std::int64_t kWordTileMinBytes = 64;
// Word tiles whose A group holds this many units or more store 16-byte vectors, shorter ones words.
// A vector takes about a quarter of the instructions of four word stores, but with skewed stores a
// tile reads three more groups of source rows ahead of a0. (H200, 16-byte against word stores on the
// word-tile lines of tuning seeds 40, 41 and 44-47: A groups of 1024 units or more, u8 65.3% -> 65.8%
// of copy (12 up, 6 down), f16 63.8% -> 64.3%; on seeds 86-91, u8 64.5% -> 68.9%. Shorter u8 groups
// fell on the tuning seeds, 47.8% -> 45.2%, 17 of 29 lines down.) 1-byte tiles with 64-bit indices
// spill with 16-byte stores (sm_90: 108 bytes at 80 registers), so 64-bit indices keep word stores.
constexpr std::int64_t kWordVectorStoreMinUnits = 1024;

bool vector_stores_fit(const CanonicalForm& form) { return !needs_index64(form.dims); }

int word_store_words(const CanonicalForm& form, const Groups& g) {
  return g.extent_a >= kWordVectorStoreMinUnits && vector_stores_fit(form) ? 4 : 1;
}

std::int64_t units_per_word(std::int64_t unit) { return unit >= kWordBytes ? 1 : kWordBytes / unit; }

// Source rows a word tile reads along A: its own, and one store vector before a0 when stores are
// skewed.
std::int64_t word_tile_rows(const RearrangeSpec& s) {
  return s.tile_a + (s.skew_store ? units_per_word(s.unit_bytes) * s.store_words : 0);
}

// Whether every row of one side starts aligned to `bytes`: the pointer is, and so is every stride
// (in units) but those of the group the rows run along.
bool rows_aligned(const RearrangeDims& dims, const DimList<DimIndex>& along, bool src_side, std::int64_t align_bytes,
                  std::int64_t unit, std::int64_t bytes) {
  if (align_bytes < bytes) return false;
  for (std::size_t i = 0; i < dims.size(); ++i)
    if (!along.contains(i) && !divides(bytes / unit, src_side ? dims[i].src_stride : dims[i].dst_stride))
      return false;
  return true;
}

// Groups A and B for word tiles: each grown along its contiguous chain to fill a tile.
Groups word_groups(const CanonicalForm& form, std::size_t a_dim, std::size_t b_dim) {
  Groups g = single_dims(form.dims, a_dim, b_dim);
  const std::int64_t tile_units = kWordTileWords * units_per_word(form.unit_bytes);
  grow_a(form.dims, destination_chain(form.dims), g, tile_units);
  grow_b(form.dims, g, tile_units);
  return g;
}

// Whether word tiles can move groups `g`: B unit-stride in the source, both groups `min_bytes` or longer.
bool word_groups_fit(const CanonicalForm& form, const Groups& g, std::int64_t min_bytes) {
  const std::int64_t min_units = min_bytes / form.unit_bytes;
  return form.dims[g.b.front()].src_stride == 1 && g.extent_a >= min_units && g.extent_b >= min_units;
}

// A transpose of 1-byte units that fixed tiles would store narrower than a word or load byte by
// byte (odd row pitches, misaligned pointers, short inner dims) or in pairs beside stores no wider
// than word tiles' own, or of 2-byte units that they would store one at a time, with B unit-stride
// in the source and both groups long enough to fill a tile.
// A group may span several dims: a range of its indices is still one run on its side.
bool wants_word_tiles(const RearrangeSpec& tiled, const CanonicalForm& form, const Groups& g) {
  const bool tiled_family = is_tiled(tiled.family);
  // 2-byte units: H200, the 85 f16 lines of tuning seeds 40, 41 and 44-53 with a single-unit side
  // on fixed tiles, moved on word tiles instead. Single-unit stores (36 lines; the skewed ones aside,
  // see plan_fixed_family): 48.8% -> 55.9% of copy in one round, 48.9% -> 56.0% in another (23 up by
  // up to 27 points, 4 down by up to 12). Single-unit loads beside stores of pairs or wider (36
  // lines): 29 down by up to 43 points, 4 up, the fixed tiles already store 4 bytes or more. Pairs on both
  // sides lost too outside the skewed 2-D case (f16 [222, 4953, 168] 0,2,1, H100: 75% -> 67%).
  // Pairs stored from fixed tiles of 64 x 128 units or longer along B, outside 2-D transposes
  // (those take 64 x 64 tiles, fixed_tiles_along_a): H200, on 38 f16 lines of seeds 40-53, 99-131
  // and 271-470 with tiles of pairs from 64 x 88 to 64 x 128, measured planning picked word tiles
  // for most; this rule moves the 36 of 64 x 128, taking the 38 from 58.9% to 67.3% of copy. On 50
  // lines of seeds 471-800, drawn after: 49.0% -> 70.1% in each of three rounds, 49 up (f16
  // [1293,342,386] 0,2,1: 40% -> 79%), one level; a 256 x 32 tile of the same volume fell (95% ->
  // 87%), all measured before narrow_store_aspect: tiles of pairs now take A four times as long
  // first (f16 [1293,342,386]: 73% on word tiles, 82% on 176 x 32), so a 64 x 128 tile reaches here
  // only where A, one dim of 64 units, cannot grow (f16 [7,64,1000] 0,2,1 at 4-byte pointers; not
  // measured since).
  if (form.unit_bytes == 2) {
    const bool wide_pair_tile = form.dims.size() > 2 && tiled.family == RearrangeFamily::transpose &&
                                tiled.vec_a == 2 && tiled.tile_a == kSkewedTile && tiled.tile_b >= 2 * kSkewedTile;
    return tiled_family && (tiled.vec_a == 1 || wide_pair_tile) && tiled.store_linear == 0 &&
           word_groups_fit(form, g, kWordTileMinBytes);
  }
  // Stores narrower than a word, or single-byte loads: 2-byte loads beside stores of 8 bytes or more
  // kept fixed tiles near copy speed when word tiles stored only words (H100, u8 [25984, 7326] 1,0:
  // 84% of copy on fixed tiles, 62% on words; at 4-byte aligned pointers its stores are words and it
  // takes word tiles). With 16-byte word stores, see word_and_pair.
  const bool narrow_a = tiled.store_linear == 0 && tiled.vec_a < kWordBytes;
  const bool narrow_b = tiled.vec_b == 1 && !loads_one_run(tiled);
  // Stores of a word or wider beside 2-byte loads in a plain transpose, where word tiles store as
  // wide: H100, word stores, u8 [2,3316,16758] 0,2,1 45% -> 78% of copy, [5,27,252,11,185,2] 55% ->
  // 61%, [340,545578] 1,0 31% -> 69%. H200, 8-byte stores against word tiles' 16-byte vectors (A
  // groups of kWordVectorStoreMinUnits or more): 11 u8 lines of the tuning seeds 65.4% -> 72.0%
  // ([69928,2466] 1,0: 55% -> 71%) and 10 of seeds drawn after 62.9% -> 71.3%, none of them down by
  // more than 2 points, [25984,7326] above 71% -> 68%; against word stores they lost ([160,67289,18]
  // 1,2,0: 74% -> 56%). Packed tiles keep theirs (u8 [583,6,2,122,174] 2,0,4,3,1: 83% on its
  // packed tile, 57% on words; measured before narrow_store_aspect lengthened that tile).
  const std::int64_t word_store_bytes = kWordBytes * word_store_words(form, g);
  const bool word_and_pair = tiled.family == RearrangeFamily::transpose && tiled.store_linear == 0 &&
                             tiled.load_linear == 0 && tiled.vec_a >= kWordBytes && tiled.vec_b == 2 &&
                             word_store_bytes >= tiled.vec_a;
  // Beside word stores or wider, narrow loads (single bytes, or pairs above) pay for word tiles only
  // on long groups: of eight u8 lines with single-byte loads on an H100, the four that rose (4-20
  // points) had both groups of 128 units or more; two of the four that fell (6-19 points) had a group
  // of 80 or 103 units.
  return form.unit_bytes == 1 && tiled_family && (narrow_a || narrow_b || word_and_pair) &&
         word_groups_fit(form, g, narrow_a ? kWordTileMinBytes : 2 * kWordTileMinBytes);
}

// Whether a skewed tile of 2-byte units that takes B in one or two rows of 16 bytes goes faster on
// word tiles: it reads two aligned 16-byte vectors for each row, four for each 32-byte piece of a
// source row, where word tiles read the piece in words with one more per load block. Tiles with
// linear stores keep theirs, as wants_word_tiles leaves them. (H200: the 6 f16 lines of seeds
// 2491-2494 and 2507-2522 with such tiles, all a1x256v2.b1x16v8k, moved to word tiles in an
// experiment on every pair-storing tile, 5 up by 6.5 to 16 points and 1 down by 4; on every f16 line
// of seeds 2523-2600 this rule changes, 11 of 2,184, drawn after: 62.8% -> 69.3% of copy, 5 up by 8
// to 32 points, none down by 3 or more.)
bool wants_word_tiles_over_skewed(const RearrangeSpec& skewed, const CanonicalForm& form, const Groups& g) {
  return form.unit_bytes == 2 && skewed.skew_load && skewed.vec_b * form.unit_bytes == 16 &&
         skewed.tile_b <= 2 * skewed.vec_b && skewed.store_linear == 0 && word_groups_fit(form, g, kWordTileMinBytes);
}

// Load blocks (W x W units) a thread of a word tile holds: four, or two with funnel-shifted loads
// (each row takes two words) except 2-byte units over composite groups; more spill (sm_90, 80
// registers). Over composite groups, whose tiles start by filling offset tables, four blocks make
// the tile twice as long along B for the same tables, up to kWordCompositeTileBytes (binding for
// 1-byte units, and for 2-byte units since plan_words stretches their B) in 128-thread tiles: tiles
// of 8 KB lost. H200, two rounds each:
// - 2-byte units, tuning seeds 40-53 and seeds 99-105, 36 lines: 50.5% -> 54.8% of copy, 25 up by
//   more than 2 points and none down; on plain 2-D transposes four blocks lost 5 to 10 points;
// - 1-byte units with a short A group (72 to 84 units measured; the cap admits tiles of up to 96
//   rows), seeds 40-53 and 99-113, 8 lines: each 3 to 5 points up; with a full A group (8 KB tiles),
//   39 lines: 63.5% -> 56.6%, 30 down. With 64-bit indices their kernels spill (48 bytes), so those
//   keep two.
constexpr std::int64_t kWordCompositeTileBytes = 6144;
constexpr std::int64_t kWordSmallTileBytes = 2048;
int word_loads_per_thread(std::int64_t word, bool skew_load, bool composite, bool index64) {
  if (skew_load && (word == 4 || !composite)) return 2;
  return composite && word == 4 && index64 ? 2 : 4;
}

// A tile is at most 32 row groups along A (32 - store_words when stores are skewed: store_words
// groups are read ahead) and as many words along B as its threads' load blocks fill. For 2-byte
// units a short A group makes a longer B side (f16 [39, 3123589] 1,0: 33% -> 38% with 24 units along
// B, not 16, before narrow_store_aspect gave it a packed tile; 32 since the stretch below); 1-byte
// tiles share the budget among a full A's 32 groups whatever their A (the one u8 line a shorter A
// lengthened on those seeds, [2,143,6,29,160,2,9] 4,5,6,0,2,3,1, spilled 40 bytes and fell from 44%
// to 38%).
RearrangeVariant plan_words(const CanonicalForm& form, const Groups& g, bool exact, std::int64_t src_align,
                            std::int64_t dst_align, int store_words) {
  const std::int64_t word = units_per_word(form.unit_bytes);
  RearrangeSpec s;
  s.family = RearrangeFamily::words;
  s.unit_bytes = static_cast<int>(form.unit_bytes);
  s.num_dims = static_cast<int>(form.dims.size());
  s.index64 = needs_index64(form.dims);
  s.bounds = true;
  s.exact = exact;
  s.dims_a = static_cast<int>(g.a.size());
  s.dims_b = static_cast<int>(g.b.size());
  s.store_words = store_words;
  const std::int64_t vector = word * store_words;  // units per store
  s.skew_load = !rows_aligned(form.dims, g.b, true, src_align, form.unit_bytes, kWordBytes);
  s.skew_store = !rows_aligned(form.dims, g.a, false, dst_align, form.unit_bytes, kWordBytes * store_words);
  // A tile's owned ranges start up to vector - 1 units before a skewed row; tiles that would leave
  // 30% or more idle split A evenly (153 units: two tiles of 80, not 124 + 32).
  const std::int64_t lead = s.skew_store ? vector - 1 : 0;
  const std::int64_t max_tile_a = (kWordTileWords / store_words - (s.skew_store ? 1 : 0)) * vector;
  const std::int64_t vectors_a = std::min(ceil_div(g.extent_a + lead, vector), max_tile_a / vector);
  s.tile_a = static_cast<int>(even_tile(g.extent_a + lead, vectors_a * vector, vector));
  const std::int64_t rows = word_tile_rows(s);
  const std::int64_t budget_groups = form.unit_bytes == 1 ? kWordTileWords : rows / word;  // share the load blocks
  const bool composite = g.a.size() > 1 || g.b.size() > 1;
  const std::int64_t loads = word_loads_per_thread(word, s.skew_load, composite, s.index64);
  // A warp's lanes walk a row group's words in runs of up to 32 / W, so beyond one run the words
  // along B come in whole runs (the kernel counts a partial run's idle lanes as load blocks).
  const std::int64_t run_words = 32 / word;
  // 2-byte tiles take twice the B their load budget gives, so that the template's blocks read 4 words
  // a row where they fill the tile, not 2. (H200, the 14 f16 word-tile lines of seeds 1085-1092:
  // 63.9% -> 67.4% of copy, 9 up 3 to 8 points, 2 down 2 to 3 points. Those tiles, of 56-62 x 32
  // units, are past 2 KiB and so walk one per block, which the figure includes; and a 2-byte B
  // group is now never longer than the stretched budget yet short enough for one 256-thread tile,
  // so the whole-B rule below is left to 1-byte units.)
  auto budget_words_b = [&](std::int64_t stretch) {
    std::int64_t words = stretch * kSmallBlockThreads * loads / budget_groups;
    if (composite) words = std::min(words, kWordCompositeTileBytes / (rows * form.unit_bytes * word));
    return words > run_words ? words / run_words * run_words : words;
  };
  std::int64_t max_words_b = budget_words_b(form.unit_bytes == 2 ? 2 : 1);
  // 1-byte tiles with misaligned source rows stretch too, over B groups longer than a stretched tile
  // that need no evening out: each row's 32-byte piece and the word funnel-shifted into it straddle
  // two sectors, so L2, not DRAM, limits them (H200, u8 [3843,44290] 1,0: L2 94.6% busy, DRAM 57.7%,
  // 2.2 times the tensor read from L2). Twice as long, the SMs read 24% fewer sectors (that line 74% ->
  // 76% of copy; tiles past 2 KiB then walk one per block, below). On the lines of fresh seeds it
  // changes: 1919-1924 (23) 61.5% -> 63.5%, 1925-1930 (19) 61.9% -> 66.1%, 1941-1948 (24, drawn
  // after this rule's last change) 64.9% -> 64.9%; 16 up by 3 to 15 points, 3 down by 3 to 7. B groups
  // of 65 to 134 units, whose stretched tiles are evened into two or three, fell by up to 26 points
  // (u8 [6,115,3,61,22,70] 1,5,2,0,3,4: 59% -> 33%); composite tiles keep their cap (stretched past
  // it, 7 lines lost up to 7 points), and aligned rows (a piece per sector already) their tile
  // (longer ones spill).
  const std::int64_t group_words_b = ceil_div(g.extent_b, word);
  if (form.unit_bytes == 1 && s.skew_load) {
    const std::int64_t stretched = budget_words_b(2);
    const std::int64_t stretched_units = stretched * word;
    if (group_words_b > stretched && even_tile(g.extent_b, stretched_units, word) == stretched_units)
      max_words_b = stretched;
  }
  // Blocks of 128 threads: an SM holds twice the tiles of 256 (H200, the 22 word-tile lines of
  // tuning seeds 40 and 44: geomean 42% -> 47% of copy, every line 1 to 11 points higher; quarter
  // tiles at eight blocks per SM 45%, half tiles of 256 threads 43%). A B group longer than a
  // 128-thread tile that one tile of 256 threads spans, up to the 16 words (32 with aligned loads
  // over single dims) that rule was measured on, stays whole: split in two it lost (H200, u8
  // [2117473, 88] 1,0: 59% -> 49%); longer groups spanned by 256 threads lost 4 to 12 points (f16
  // [13,4,60,49,19,37] 0,1,2,5,4,3: 38% -> 27%).
  const std::int64_t max_whole_words_b = s.skew_load || composite ? kWordTileWords / 2 : kWordTileWords;
  const bool whole_b_needs_256 = group_words_b > max_words_b && group_words_b <= max_whole_words_b;
  s.threads = whole_b_needs_256 ? kThreads : kSmallBlockThreads;
  const std::int64_t words_b = whole_b_needs_256 ? group_words_b : std::min(max_words_b, group_words_b);
  s.tile_b = static_cast<int>(even_tile(g.extent_b, words_b * word, word));
  s.pitch = static_cast<int>((s.tile_a / word + (s.skew_store ? store_words : 0)) | 1);
  s.min_blocks = static_cast<int>(kWordThreadsPerSm / s.threads);

  RearrangeVariant v{form, s, {}, 0, 0};
  v.args = skew_tile_args(form, g, s, lead);
  v.spec.a_first = !counts_along_b(v.args.tiles_y.value, v.args.tiles_x.value, s.tile_a, s.tile_b);
  // Tiles of 2 KiB or less walk four per block. (H200, measured planning on seeds 835, 836 and
  // 841 chose four per block for 5 of the 8 f16 word tiles of 56-62 x 16 units, 4-5 points up; on
  // the 33 such f16 lines of seeds 876-899, drawn after: 54.0% -> 56.9% of copy, 27 up, 2 down.
  // f16 tiles are twice that long along B since, and walk one per block.)
  const bool small_tiles = std::int64_t{s.tile_a} * s.tile_b * s.unit_bytes <= kWordSmallTileBytes;
  v.grid = grid_for(small_tiles ? ceil_div(v.args.num_tiles, 4) : v.args.num_tiles);
  return v;
}

// ---- runs -----------------------------------------------------------------------------------

constexpr std::int64_t kRunsTileBytes = 8192;
// Runs tiles that gather their stores may hold twice as much: their runs on both sides lengthen, a
// source run often by a whole dim, where tiles whose loads scatter lost. (H200, the 49 u8/f16 lines of
// seeds 5519-5538 whose plans 16 KiB runs tiles change: the 41 that gather 46.2% -> 53.7% of copy, 32
// up and 2 down by 3 points or more; the 8 whose loads scatter 30.8% -> 23.1%, 7 down. On the 62 lines
// of seeds 5539-5618 it changes, drawn after: u8 (44) 41.4% -> 51.4%, f16 (18) 56.5% -> 64.4%, 56 up
// and 1 down; u8 [12,23,4,7,40,27,21] 3,6,0,4,2,5,1 23% -> 54%. Measured at 16-byte aligned pointers.
// Unmeasured: tiles of 4-byte units (of 628 f32 lines, it changes the plan of 2 for pointers aligned
// to 4 bytes, none at 16), and the plans of wider elements at pointers that fold them into 1- or
// 2-byte units, which change as u8 and f16 plans do.)
constexpr std::int64_t kGatheringRunsTileBytes = 16384;
constexpr int kRunsMaxTileDims = 8;  // src_order holds 4 bits per tile dim

// The dims contiguous on one side starting at its unit-stride dim, innermost first.
DimList<DimIndex> contiguous_chain(const RearrangeDims& dims, bool src_side) {
  DimList<DimIndex> chain;
  std::int64_t next = 1;
  for (bool grown = true; grown;) {
    grown = false;
    for (std::size_t i = 0; i < dims.size() && !grown; ++i)
      if ((src_side ? dims[i].src_stride : dims[i].dst_stride) == next && !chain.contains(i)) {
        chain.push_back(i);
        next *= dims[i].extent;
        grown = true;
      }
  }
  return chain;
}

// The tile: per form dim, its tile extent (0 outside the tile), and each side's run, innermost first.
struct RunsTile {
  DimList<std::int64_t> extent;
  DimList<DimIndex> dst_run, src_run;
};

// Each side's contiguous chain: [0] destination, [1] source.
using Chains = DimList<DimIndex>[2];

// Extends `run` by dim i of its chain, at tile extent t (t < extent ends the run).
void add_to_run(RunsTile& tile, DimList<DimIndex>& run, std::size_t i, std::int64_t t) {
  tile.extent[i] = t;
  run.push_back(i);
}

// Grows the two runs in turn (the shorter one next) along their contiguous chains while the tile
// holds at most `budget` units. A dim already in the tile costs nothing more. While the other run is
// open, a run takes a dim whole up to `cap` units, else tiles it to about `cap`; a tiled dim (evened
// out over its tiles) closes its run, and a run stops before a dim the other run tiled, so that each
// run's tiled dim is whole in the other. Then a run of whole dims takes the budget left over.
RunsTile grow_runs(const RearrangeDims& dims, const Chains& chains, std::int64_t budget, std::int64_t cap) {
  RunsTile tile;
  for (std::size_t i = 0; i < dims.size(); ++i) tile.extent.push_back(0);
  std::int64_t volume = 1, length[2] = {1, 1};
  std::size_t next[2] = {0, 0};
  bool closed[2] = {chains[0].empty(), chains[1].empty()};
  int tile_dims = 0;
  auto run_of = [&](int side) -> DimList<DimIndex>& { return side == 0 ? tile.dst_run : tile.src_run; };
  // Adds the next dim of `side` at most `limit` units long; false when the run must stop.
  auto extend = [&](int side, std::int64_t limit) {
    if (next[side] == chains[side].size()) return false;
    const std::size_t i = chains[side][next[side]];
    const std::int64_t e = dims[i].extent;
    std::int64_t t = e;
    if (tile.extent[i] != 0) {
      if (tile.extent[i] != e) return false;
    } else {
      if (tile_dims == kRunsMaxTileDims) return false;
      if (volume * e > budget || length[side] * e > limit) {
        const std::int64_t most = std::min(budget / volume, limit / length[side]);
        if (most < 2) return false;
        t = ceil_div(e, ceil_div(e, most));
      }
      volume *= t;
      ++tile_dims;
    }
    add_to_run(tile, run_of(side), i, t);
    length[side] *= t;
    ++next[side];
    return t == e;
  };
  while (!closed[0] || !closed[1]) {
    const int side = closed[0] ? 1 : closed[1] ? 0 : (length[0] <= length[1] ? 0 : 1);
    if (!extend(side, closed[1 - side] ? budget : cap)) closed[side] = true;
  }
  for (int side : {length[0] <= length[1] ? 0 : 1, length[0] <= length[1] ? 1 : 0}) {
    DimList<DimIndex>& run = run_of(side);
    while (!run.empty() && tile.extent[run.back()] == dims[run.back()].extent && extend(side, budget)) {
    }
  }
  return tile;
}

// How well a runs tile moves memory, from 0 to 1: run_pair_score of its runs, and the tile's fill of
// the budget (small tiles leave too few units per thread).
double runs_score(const RunsTile& tile, std::int64_t unit, std::int64_t budget) {
  auto run_bytes = [&](const DimList<DimIndex>& run) {
    std::int64_t n = unit;
    for (std::size_t i : run) n *= tile.extent[i];
    return static_cast<double>(n);
  };
  std::int64_t volume = 1;
  for (std::int64_t e : tile.extent) volume *= std::max<std::int64_t>(e, 1);
  const double d = run_bytes(tile.dst_run), s = run_bytes(tile.src_run);
  return run_pair_score(d, s) * std::min(1.0, 2.0 * static_cast<double>(volume) / static_cast<double>(budget));
}

// The best-scoring tile over run caps from the square root of the budget up to the budget.
RunsTile choose_runs(const RearrangeDims& dims, const Chains& chains, std::int64_t unit, std::int64_t budget) {
  RunsTile best;
  double best_score = -1;
  for (auto cap = static_cast<std::int64_t>(std::sqrt(static_cast<double>(budget))); cap <= budget; cap *= 2) {
    RunsTile tile = grow_runs(dims, chains, budget, cap);
    if (tile.dst_run.empty() || tile.src_run.empty()) return tile;
    const double score = runs_score(tile, unit, budget);
    if (score > best_score) {
      best_score = score;
      best = std::move(tile);
    }
  }
  return best;
}

// Words per store vector of a runs tile that gathers its stores, for destination runs `run_bytes`
// long: a run's two end vectors are written in part, so shorter runs take narrower vectors (chosen
// when those were written unit by unit).
int runs_store_words(std::int64_t run_bytes) { return run_bytes >= 128 ? 4 : run_bytes >= 64 ? 2 : 1; }

// Whether a runs tile stages its source runs as they are and gathers each store's units, rather than
// staging destination runs that loads scatter into. A gather finds a store's units one constant step
// apart inside a staged row where the destination's innermost dim lies inside the source run; where
// it does not, each unit comes from another row, which pays only where the scatter would divide
// every unit's run position too: runs of several dims on both sides (a scatter over a source run of
// one dim steps by a constant). (H200, the runs lines of seeds 1301-1440 and the survey seeds, against
// scattering every tile: innermost dim inside the source run 50 lines, 34 up and 7 down by 3 points
// or more; outside, several dims on both sides 31 lines, 21 up and 6 down; one dim on either side
// 19 lines, 0 up and 18 down. The rule on the 70 lines of seeds 1441-1540, drawn after it: 29.6% ->
// 34.7% of copy, 44 up and 8 down.)
bool runs_gather_stores(const RunsTile& tile) {
  const std::size_t innermost = tile.dst_run.front();
  const bool in_source_run = tile.src_run.contains(innermost);
  return in_source_run || (tile.dst_run.size() > 1 && tile.src_run.size() > 1);
}

// The variant of a runs tile: dim[0, tile_dims) = the tile's dims by destination stride, then the
// outer dims innermost first. Where both runs end on one dim (shared_end_runs_tile), the kernels tile
// it along B only: A's extent is its tile, one tile long.
RearrangeVariant runs_variant(const CanonicalForm& form, bool exact, const RunsTile& tile) {
  const RearrangeDims& dims = form.dims;
  const std::int64_t unit = form.unit_bytes;
  std::vector<std::size_t> order;  // kernel order of the tile dims
  for (std::size_t i = 0; i < dims.size(); ++i)
    if (tile.extent[i] != 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t x, std::size_t y) { return dims[x].dst_stride < dims[y].dst_stride; });
  std::vector<std::size_t> by_src(tile.src_run.begin(), tile.src_run.end());
  std::vector<std::size_t> rest;
  for (std::size_t i : order)
    if (std::find(by_src.begin(), by_src.end(), i) == by_src.end()) rest.push_back(i);
  std::stable_sort(rest.begin(), rest.end(), [&](std::size_t x, std::size_t y) {
    return std::llabs(dims[x].src_stride) < std::llabs(dims[y].src_stride);
  });
  by_src.insert(by_src.end(), rest.begin(), rest.end());
  int src_order = 0;
  for (std::size_t o = 0; o < by_src.size(); ++o) {
    const auto k = std::find(order.begin(), order.end(), by_src[o]) - order.begin();
    src_order |= static_cast<int>(k) << (4 * o);
  }

  std::int64_t src_length = 1, dst_length = 1, volume = 1;
  for (std::size_t i : tile.src_run) src_length *= tile.extent[i];
  for (std::size_t i : tile.dst_run) dst_length *= tile.extent[i];
  for (std::size_t i : order) volume *= tile.extent[i];
  const std::size_t a = tile.dst_run.back(), b = tile.src_run.back();

  RearrangeSpec s;
  s.family = RearrangeFamily::runs;
  s.unit_bytes = static_cast<int>(unit);
  s.threads = kThreads;
  s.num_dims = static_cast<int>(dims.size());
  s.index64 = needs_index64(dims);
  s.exact = exact;
  s.tile_dims = static_cast<int>(order.size());
  s.dst_run_dims = static_cast<int>(tile.dst_run.size());
  s.src_run_dims = static_cast<int>(tile.src_run.size());
  s.src_order = src_order;
  s.tile_a = static_cast<int>(tile.extent[a]);
  s.tile_b = static_cast<int>(tile.extent[b]);
  s.bounds = !divides(tile.extent[a], dims[a].extent) || !divides(tile.extent[b], dims[b].extent);
  s.gather_stores = runs_gather_stores(tile);
  // Staged rows start in different banks: an odd number of 16-byte vectors for staged source runs,
  // of words for staged destination runs (which hold a word more than the run: a misaligned run's
  // words straddle it).
  const std::int64_t step = s.gather_stores ? 16 / unit : units_per_word(unit);
  const std::int64_t staged_length = s.gather_stores ? src_length : dst_length + step;
  std::int64_t pitch = ceil_div(staged_length, step) * step;
  if (step > 1 && (pitch / step) % 2 == 0) pitch += step;
  s.pitch = static_cast<int>(pitch);
  s.tile_runs = static_cast<int>(volume / (s.gather_stores ? src_length : dst_length));
  if (s.gather_stores) s.store_words = runs_store_words(dst_length * unit);
  s.min_blocks = 3;

  RearrangeVariant v{form, s, {}, 0, 0};
  RearrangeKernelArgs& args = v.args;
  const bool shared_end = a == b;
  args.extent_a = shared_end ? s.tile_a : dims[a].extent;
  args.extent_b = dims[b].extent;
  args.tiles_x = make_kernel_divisor(ceil_div(dims[b].extent, s.tile_b));
  args.tiles_y = make_kernel_divisor(ceil_div(args.extent_a, s.tile_a));
  std::int64_t tiled_units = 1;
  for (std::size_t i : order) tiled_units *= dims[i].extent;
  args.num_tiles = args.tiles_x.value * args.tiles_y.value * (unit_count(dims) / tiled_units);
  int k = 0;
  for (std::size_t i : order) args.dim[k++] = kernel_dim(dims[i]);
  for (std::size_t i = dims.size(); i-- > 0;)
    if (tile.extent[i] == 0) args.dim[k++] = kernel_dim(dims[i]);
  v.grid = grid_for(args.num_tiles);
  return v;
}

// Units a runs tile holds.
std::int64_t runs_tile_volume(const RunsTile& tile) {
  std::int64_t volume = 1;
  for (std::int64_t e : tile.extent) volume *= std::max<std::int64_t>(e, 1);
  return volume;
}

std::optional<RearrangeVariant> plan_runs(const CanonicalForm& form, bool exact) {
  const RearrangeDims& dims = form.dims;
  const std::int64_t unit = form.unit_bytes;
  if (unit > kWordBytes) return std::nullopt;
  const Chains chains = {contiguous_chain(dims, false), contiguous_chain(dims, true)};
  for (std::int64_t budget = kGatheringRunsTileBytes / unit; budget >= 256; budget /= 2) {
    const RunsTile tile = choose_runs(dims, chains, unit, budget);
    if (tile.dst_run.empty() || tile.src_run.empty()) return std::nullopt;
    if (budget * unit > kRunsTileBytes && !runs_gather_stores(tile)) continue;
    if (runs_tile_volume(tile) < kThreads) return std::nullopt;
    RearrangeVariant v = runs_variant(form, exact, tile);
    if (shared_bytes(v.spec) > kMaxStaticShared) continue;
    return v;
  }
  return std::nullopt;
}

// A runs tile whose two runs end on one dim M, tiled alike: where each side's contiguous chain
// reaches M after whole dims of its own (dst [X.., M], src [Y.., M]), a tile of X.. x Y.. x a piece of
// M reads source runs and writes destination runs both as long as the piece. grow_runs never ends
// both runs on one tiled dim, so where X.. and Y.. are short it stops at runs of them alone (u8
// [17,6551,75,12] 3,1,2,0: destination runs of 17 bytes). The piece is the largest divisor of M's
// extent that keeps the tile within `budget` units: the kernels tile M once, along B, so its tiles
// must not be partial. None where M's piece would be under 2 or the tile under a unit per thread.
std::optional<RunsTile> shared_end_runs_tile(const RearrangeDims& dims, const Chains& chains, std::int64_t budget) {
  const DimList<DimIndex>&dst = chains[0], &src = chains[1];
  // M's places in the two chains: the first destination dim past the first whose source place is
  // past the first too, with no dim before it in both chains.
  auto src_place = [&](std::size_t i) {
    return static_cast<std::size_t>(std::find(src.begin(), src.end(), i) - src.begin());
  };
  std::size_t p = 1, q = 0;
  for (; p < dst.size(); ++p) {
    q = src_place(dst[p]);
    bool apart = q > 0 && q < src.size();
    for (std::size_t k = 0; k < p && apart; ++k) apart = src_place(dst[k]) >= q;
    if (apart) break;
  }
  if (p >= dst.size() || p + q + 1 > static_cast<std::size_t>(kRunsMaxTileDims)) return std::nullopt;
  RunsTile tile;
  for (std::size_t i = 0; i < dims.size(); ++i) tile.extent.push_back(0);
  std::int64_t whole = 1;
  for (std::size_t k = 0; k < p; ++k) add_to_run(tile, tile.dst_run, dst[k], dims[dst[k]].extent);
  for (std::size_t k = 0; k < q; ++k) add_to_run(tile, tile.src_run, src[k], dims[src[k]].extent);
  for (std::int64_t e : tile.extent) whole *= std::max<std::int64_t>(e, 1);
  const std::size_t m = dst[p];
  const std::int64_t piece = largest_divisor_at_most(dims[m].extent, budget / whole);
  if (piece < 2 || whole * piece < kThreads) return std::nullopt;
  tile.extent[m] = piece;
  tile.dst_run.push_back(m);
  tile.src_run.push_back(m);
  return tile;
}

// The runs tile of shared_end_runs_tile: a tuning candidate, and the plan where lengthen_short_runs takes it.
std::optional<RearrangeVariant> plan_shared_end_runs(const CanonicalForm& form, bool exact) {
  const std::int64_t unit = form.unit_bytes;
  if (unit > kWordBytes) return std::nullopt;
  const Chains chains = {contiguous_chain(form.dims, false), contiguous_chain(form.dims, true)};
  const std::optional<RunsTile> tile = shared_end_runs_tile(form.dims, chains, kGatheringRunsTileBytes / unit);
  if (!tile) return std::nullopt;
  RearrangeVariant v = runs_variant(form, exact, *tile);
  if (shared_bytes(v.spec) > kMaxStaticShared) return std::nullopt;
  return v;
}

// Bytes of a runs variant's destination runs, or source runs.
std::int64_t runs_run_bytes(const RearrangeVariant& v, bool source) {
  const std::vector<std::int64_t> tile = runs_tile_extents(v.spec, v.args);
  std::int64_t bytes = v.spec.unit_bytes;
  for (int o = 0; o < (source ? v.spec.src_run_dims : v.spec.dst_run_dims); ++o)
    bytes *= tile[static_cast<std::size_t>(source ? (v.spec.src_order >> (4 * o)) & 15 : o)];
  return bytes;
}
// Bytes of a runs variant's shorter run.
std::int64_t shorter_run_bytes(const RearrangeVariant& runs) {
  return std::min(runs_run_bytes(runs, false), runs_run_bytes(runs, true));
}

// A runs tile whose shorter run is under kShortRunBytes gives way to the tile whose runs share their
// end (plan_shared_end_runs) where that tile's shorter run is longer, a sector at least, and the tile
// holds kSharedEndMinTileBytes. (H200, u8, 16-byte aligned pointers. Runs under a sector first:
// measured planning's timings on 11 lines of seeds 5539-5860 whose runs tiles had one: the 9 that
// the 4 KiB bound keeps 1.24x to 2.46x faster on 8 (u8 [17,6551,75,12] 3,1,2,0 at 24% of copy:
// 2.46x) and 5% slower on [19,27,36,5,75,2,2,7] 2,0,3,7,5,6,4,1; tiles of 693 and 3,740 bytes, which
// set the bound, 2.9x and 1.2x slower. With beats_short_runs, drawn after: on the 14 of 39,200
// u8/f16 lines of seeds 5861-6560 that the two change, 31.2% -> 52.0% of copy, and on the 10 of
// seeds 6561-7260, 32.9% -> 48.9%, every line up. Then runs under two sectors, a bound fixed before
// any line was timed with it, on the lines it adds in those two seed ranges: 20, 31.1% -> 47.0%, 20
// up; 23, 30.1% -> 45.7%, 20 up and 1 down; and in seeds 7261-7960, drawn after: 16, 34.8% -> 47.7%,
// 14 up and 1 down. Then runs under four sectors, likewise fixed before timing: the 28 lines it adds
// in seeds 5861-7260, 27.9% -> 45.4%, 27 up and 1 down; the 12 of seeds 7261-7960, 28.9% -> 43.5%,
// 10 up and none down.)
constexpr std::int64_t kShortRunBytes = 4 * kSectorBytes;
constexpr std::int64_t kSharedEndMinTileBytes = 4096;
RearrangeVariant lengthen_short_runs(const CanonicalForm& form, bool exact, RearrangeVariant runs) {
  const std::int64_t run = shorter_run_bytes(runs);
  if (run >= kShortRunBytes) return runs;
  std::optional<RearrangeVariant> shared = plan_shared_end_runs(form, exact);
  if (!shared || runs_tile_bytes(shared->spec, shared->args) < kSharedEndMinTileBytes) return runs;
  const std::int64_t shared_run = shorter_run_bytes(*shared);
  return shared_run > run && shared_run >= kSectorBytes ? std::move(*shared) : std::move(runs);
}

// The planned runs tile (plan_runs), or the tile whose runs share their end where lengthen_short_runs
// takes it.
std::optional<RearrangeVariant> plan_lengthened_runs(const CanonicalForm& form, bool exact) {
  std::optional<RearrangeVariant> runs = plan_runs(form, exact);
  if (runs) runs = lengthen_short_runs(form, exact, std::move(*runs));
  return runs;
}

// Whether a tile that stores single bytes (stores_single_bytes) along an A of a sector or more, from
// loads of 2- or 4-byte vectors, goes faster than a runs tile whose destination runs are under a
// sector. (H200, u8 [760,3,9,437,12] 4,0,3,2,1: 24% -> 51% of copy on a 128 x 12 tile; measured
// planning found such tiles 1.17x to 2.14x faster than the runs tile on three more lines of seeds
// 5539-5860 (2.2x on this one), and one that loaded single bytes 1.55x slower. Drawn after, seeds
// 5861-6560: 3 lines, 29-32% -> 36-46%.)
bool beats_short_runs(const RearrangeVariant& tile, const RearrangeVariant& runs) {
  return tile.spec.tile_a * tile.spec.unit_bytes >= kSectorBytes && tile.spec.vec_b > 1 &&
         runs_run_bytes(runs, false) < kSectorBytes;
}

// ---- segments -------------------------------------------------------------------------------

// Segment tiles hold about kSegmentTileBytes of rows. (H200, against 8 KiB: on 31 lines, the 25
// segment-tile lines of seeds 1600-1601, 1603-1604 and 1645-1646 and six XLA-led lines of earlier
// seeds, 61.4% -> 67.3% of copy at 16 KiB, 62.5% at 24 KiB, 51.6% at 32 KiB, 4 KiB lower still; on
// the 51 lines of seeds 1701-1716, drawn after, whose tiles it changes: 60.6% -> 67.6%, 39 up by 3
// points or more, 3 down. Rows under 8 bytes, which store words, were flat: 46.5% -> 45.6% and
// 44.3% -> 45.4%.)
constexpr std::int64_t kSegmentTileBytes = 16384;
// Segment tiles move rows under kSegmentMaxRowBytes in units of at most kSegmentMaxUnit bytes;
// longer rows went faster on the row family (H100, tuning seeds, the first segment kernel, which
// stored words: rows of 234 and 236 bytes 87-89% -> 78-82% of copy, on tiles that merged every
// store's bytes), except three kinds. Rows of 4- and 8-byte units, whose stores gather whole words,
// under kVectorRowMinBytes (H200, the 172 lines of seeds 1721-1760 that the row family moved in
// units of 4 bytes or more: 4-byte units, rows of 160-767 bytes, 14 lines 65% -> 91% of copy, every
// line up; 8-byte units, 86 lines 79% -> 85%: rows of 160-767 bytes 26 up and 3 down by 3 points or
// more, shorter rows 26 up and 10 down; 16-byte units lost, 72 lines 90% -> 89% and the 37 such TTC
// and DL lines 94% -> 92%, so they stay rows). Rows the row family would move a byte at a time, of
// up to kSegmentByteRowMaxBytes (H200, tiles of 8 KiB, rows of 169-7599 bytes: tuning seeds 40, 41,
// 44-53, 4 lines, 35% -> 69%; seeds 143-174, 7 lines, 49% -> 68%, every line up). Rows of 2-byte
// units under kSegmentPairRowEndBytes, which it moves a unit per thread: rows of 256 bytes or more,
// seeds 40-174, 8 lines, 40% -> 63%, and seeds 175-190, drawn after, 8 lines, 40% -> 64%, every
// line up (longer rows fell by up to 16 points); rows of 160-255 bytes, on today's tiles that store
// 16-byte vectors (H200), 21 probe lines of random shapes, 71.1% -> 82.2%, 18 up by 3 points or
// more and none down, and the 21 lines of seeds 4571-4690 they change, drawn after, 66.8% -> 79.7%,
// 17 up and 1 down. Wider elements at 1-byte misaligned pointers are planned in 1-byte units, so
// their rows take segment tiles too (not measured). Rows of kVectorRowMinBytes or more move in
// vectors instead (plan_vector_rows).
constexpr std::int64_t kSegmentMaxRowBytes = 160;
constexpr std::int64_t kSegmentByteRowMaxBytes = 8192;
constexpr std::int64_t kSegmentPairRowEndBytes = 1024;
constexpr std::int64_t kSegmentMaxUnit = 8;
// Destination runs this long where the extents allow (a run's two end vectors are stored in pieces);
// the planner takes a tile only with destination runs of kSegmentMinDstRun bytes or more (H100, tuning
// seeds: runs of 66-147 bytes fell 7-25 points below rows, runs of 174 bytes and more gained).
constexpr std::int64_t kSegmentDstRunBytes = 512;
constexpr std::int64_t kSegmentMinDstRun = 160;
constexpr std::int64_t kSegmentMinTile = 2048;

// Rows that the innermost dim shares (unit stride on both sides), tiled over group A (the dims that
// follow the row in the destination) and group B (those that follow it in the source): about
// kSegmentTileBytes of whole rows, A long enough for kSegmentDstRunBytes where it can be, B the rest,
// each group its first dim or, if `composite`, grown dim by dim to its share, and its tiles evened
// out. dim[0] = the row, then group A, group B and the outer dims, each innermost first.
std::optional<RearrangeVariant> plan_segments(const CanonicalForm& form, bool exact, bool composite) {
  const RearrangeDims& dims = form.dims;
  const std::size_t inner = dims.size() - 1;
  const RearrangeDim& row = dims[inner];
  const std::int64_t seg = row.extent * form.unit_bytes;
  const bool long_rows = (form.unit_bytes == 1 && seg <= kSegmentByteRowMaxBytes) ||
                         (form.unit_bytes == 2 && seg < kSegmentPairRowEndBytes) ||
                         (form.unit_bytes >= 4 && seg < kVectorRowMinBytes);
  if (row.src_stride != 1 || row.dst_stride != 1 || seg < 3 || (seg >= kSegmentMaxRowBytes && !long_rows) ||
      form.unit_bytes > kSegmentMaxUnit)
    return std::nullopt;
  Groups g;
  // Grows A (dst_side) or B.
  auto grow = [&](bool dst_side, std::int64_t target) {
    const std::int64_t& extent = dst_side ? g.extent_a : g.extent_b;
    for (bool grown = true; grown && extent < target;) {
      grown = false;
      for (std::size_t i = 0; i < inner && !grown; ++i)
        if (!in_groups(g, i) && (dst_side ? dims[i].dst_stride : dims[i].src_stride) == row.extent * extent) {
          dst_side ? g.add_a(i, dims[i].extent) : g.add_b(i, dims[i].extent);
          grown = true;
        }
    }
  };
  // Each group starts with the dim next to the row on its side, so neither takes the other's first.
  grow(true, 2);
  grow(false, 2);
  if (g.a.empty() || g.b.empty()) return std::nullopt;
  const std::int64_t rows = std::max<std::int64_t>(1, kSegmentTileBytes / seg);
  const auto square = static_cast<std::int64_t>(std::sqrt(static_cast<double>(rows)));
  const std::int64_t target_a = std::min(rows, std::max(square, ceil_div(kSegmentDstRunBytes, seg)));
  if (composite) grow(true, target_a);
  if (composite) grow(false, std::max<std::int64_t>(1, rows / std::min(g.extent_a, target_a)));
  const std::int64_t tile_b = std::min(g.extent_b, std::max<std::int64_t>(1, rows / std::min(g.extent_a, target_a)));
  if (composite) grow(true, rows / tile_b);  // B short of its share: A takes the rest
  const std::int64_t extent_a = g.extent_a, extent_b = g.extent_b;
  std::int64_t tile_a = std::min(extent_a, std::max<std::int64_t>(1, rows / tile_b));
  tile_a = ceil_div(extent_a, ceil_div(extent_a, tile_a));
  const std::int64_t even_b = ceil_div(extent_b, ceil_div(extent_b, tile_b));

  RearrangeSpec s;
  s.family = RearrangeFamily::segments;
  s.unit_bytes = static_cast<int>(form.unit_bytes);
  s.threads = kThreads;
  s.num_dims = static_cast<int>(dims.size());
  s.index64 = needs_index64(dims);
  s.exact = exact;
  s.segment = static_cast<int>(row.extent);
  s.tile_a = static_cast<int>(tile_a);
  s.tile_b = static_cast<int>(even_b);
  s.bounds = !divides(tile_a, extent_a) || !divides(even_b, extent_b);
  s.dims_a = static_cast<int>(g.a.size());
  s.dims_b = static_cast<int>(g.b.size());
  s.merge_src = g.a.size() == 1 && even_b == extent_b && dims[g.a[0]].src_stride == row.extent * extent_b;
  s.merge_dst = g.b.size() == 1 && tile_a == extent_a && dims[g.b[0]].dst_stride == row.extent * extent_a;
  // Staged source runs start at their address's offset within 16 bytes; an odd number of 16-byte
  // steps apart, so that runs start in different banks.
  const std::int64_t src_run_bytes = seg * even_b * (s.merge_src ? tile_a : 1);
  std::int64_t pitch = ceil_div(src_run_bytes + 15, 16) * 16;
  if ((pitch / 16) % 2 == 0) pitch += 16;
  s.pitch = static_cast<int>(pitch);
  s.min_blocks = 4;
  if (shared_bytes(s) > kMaxStaticShared) return std::nullopt;

  RearrangeVariant v{form, s, {}, 0, 0};
  RearrangeKernelArgs& args = v.args;
  args.extent_a = extent_a;
  args.extent_b = extent_b;
  args.tiles_x = make_kernel_divisor(ceil_div(extent_b, even_b));
  args.tiles_y = make_kernel_divisor(ceil_div(extent_a, tile_a));
  v.spec.a_first = tiles_along_a_first(args.tiles_y.value, args.tiles_x.value, 1, 1);  // rows weighed in tiles
  args.num_tiles = args.tiles_x.value * args.tiles_y.value * (unit_count(dims) / (row.extent * extent_a * extent_b));
  int k = 0;
  args.dim[k++] = kernel_dim(row);
  for (std::size_t i : g.a) args.dim[k++] = kernel_dim(dims[i]);
  for (std::size_t i : g.b) args.dim[k++] = kernel_dim(dims[i]);
  for (std::size_t i = inner; i-- > 0;)
    if (!in_groups(g, i)) args.dim[k++] = kernel_dim(dims[i]);
  v.grid = grid_for(ceil_div(args.num_tiles, kTilesPerBlock));
  return v;
}

}  // namespace

std::string_view family_name(RearrangeFamily family) {
  switch (family) {
    case RearrangeFamily::copy: return "copy";
    case RearrangeFamily::row: return "row";
    case RearrangeFamily::transpose: return "transpose";
    case RearrangeFamily::packed: return "packed";
    case RearrangeFamily::gather: return "gather";
    case RearrangeFamily::skewed: return "skewed";
    case RearrangeFamily::words: return "words";
    case RearrangeFamily::runs: return "runs";
    case RearrangeFamily::segments: return "segments";
  }
  return "?";
}

KernelDivisor make_kernel_divisor(std::int64_t divisor) {
  KernelDivisor d{divisor, 1, 0};
  if (divisor >= 1 && divisor <= std::numeric_limits<std::uint32_t>::max()) {
    const FastDivisor f = make_fast_divisor(static_cast<std::uint32_t>(divisor));
    d.multiplier = f.multiplier;
    d.shift = f.shift;
  }
  return d;
}

namespace {

// The row, gather, tiled, skewed or word-tile plan of a form that is not a plain copy.
RearrangeVariant plan_fixed_family(const CanonicalForm& units, bool exact, std::int64_t src_align,
                                   std::int64_t dst_align) {
  const RearrangeDims& dims = units.dims;
  const std::size_t inner = dims.size() - 1;
  if (dims[inner].src_stride == 1 && dims[inner].dst_stride == 1) return plan_rows(units, exact);
  if (dims[inner].dst_stride == 1) {
    if (const auto b = source_inner_dim(dims, inner)) {
      TileChoices choices(units);
      const TiledChoice v = plan_fixed_tiles(choices, inner, *b, exact, src_align, dst_align);
      // Tiles that store narrow vectors over one A dim store skewed 16-byte vectors instead where those
      // tiles load 4 bytes or more. (H200, an odd destination pitch costs 2-D f32 transposes 11-16 points
      // of copy where an odd source pitch costs none: [14901, 13424] 74% against [14904, 13423] 90%.
      // On the 52 f16 and f32 lines of seeds 4403-4410 that skewed stores changed: 71.0% -> 76.2%, 31 up
      // and 11 down by 3 points or more; f32 23 lines 72.7% -> 80.1%, f16 29 lines 69.6% -> 73.3%. Each
      // line down loaded single 2-byte units (9 f16 lines) or an A tile under 8 vectors (20 and
      // 40 units) that loads a quarter more than it stores. With both guards, on the 112 lines of seeds
      // 4411-4430 it changes, drawn after: 72.7% -> 81.5%, 83 up and 7 down; f32 60 lines 74.6% ->
      // 82.1%, f16 51 lines 70.6% -> 80.8%.)
      // (Not where no search so far would skew: each skewed search is then the plain one, and the
      // skewed search repeats plan_fixed_tiles's first, fixed_tiles_of_volume, whose tile does not skew.)
      if (may_skew_stores(v.spec) && choices.found_skewable_stores()) {
        choices.set_skewed_stores(true);
        const TiledChoice skewed = fixed_tiles_of_volume(choices, inner, *b, exact, src_align, dst_align,
                                                         tile_volume(units.unit_bytes), kMicroTilesPerThread);
        choices.set_skewed_stores(false);
        if (skewed.spec.skew_store && load_vector(skewed.spec) * units.unit_bytes >= 4)
          return tiled_variant(units, skewed);
      }
      const Groups words = word_groups(units, inner, *b);
      const auto word_tiles = [&] {
        return plan_words(units, words, exact, src_align, dst_align, word_store_words(units, words));
      };
      if (wants_word_tiles(v.spec, units, words)) return word_tiles();
      if (wants_skewed_tiles(v.spec, units, inner, *b)) {
        if (const auto quarter = fixed_tiles_along_a(choices, inner, *b, exact, src_align, dst_align))
          return tiled_variant(units, *quarter);
        // 2-byte units in words of two beat skewed tiles: H200, the 14 such lines of tuning seeds 40,
        // 41 and 44-53, 47.5% -> 59.7% of copy (every line up, by 2 to 42 points).
        if (units.unit_bytes == 2) return word_tiles();
        return plan_skewed(units, inner, *b, exact);
      }
      // A tile smaller than a unit per thread is better walked in destination order.
      if (static_cast<std::int64_t>(v.spec.tile_a) * v.spec.tile_b < kThreads) return plan_rows(units, exact);
      // Micro-tiles of 1 or 2 bytes, 8 a thread, cut tiles to a few KiB: too few bytes in flight for
      // their narrow loads (H200, u8 [49,4048058] 1,0 took 49 x 64 tiles at 52% of copy). Once the
      // family is chosen on that tile, it grows to 16 a thread, unless it would then store single
      // bytes (which the runs family takes). (H200: with 16 a thread everywhere, lines that changed
      // family fell by up to 13 points, so the family is chosen first; the 18 lines of seeds
      // 1885-1896 this changes, 38.0% -> 47.0% of copy, 14 up and 2 down by 3 points or more; the 16
      // of seeds 1899-1910, drawn after, 38.9% -> 42.1%, 11 up and 2 down: u8 [7,27,2,5,46,15,43,2]
      // 5,6,2,4,3,1,7,0 34% -> 19% and [50,32,29,77,5,3,2] 3,0,1,2,6,5,4 40% -> 24%, whose grown
      // kernels spill registers that tile_fits does not count; a bound on slab_registers kept those
      // two but lost more of the gains.)
      TiledChoice plain = v;
      if (v.spec.vec_a * v.spec.vec_b * v.spec.unit_bytes <= 2 && !stores_single_bytes(v.spec)) {
        TiledChoice grown =
            plan_fixed_tiles(choices, inner, *b, exact, src_align, dst_align, kNarrowMicroTilesPerThread);
        if (!stores_single_bytes(grown.spec)) plain = std::move(grown);
      }
      // Once the family is chosen on the plain tile (stores of single bytes go to runs tiles), loads of
      // single units may be skewed, on a tile searched again with them (take_skewed_loads).
      // (Not where no search so far would skew, as for skewed stores above.)
      if (is_tiled(v.spec.family) && may_skew_loads(v.spec) && !stores_single_bytes(v.spec) &&
          choices.found_skewable_loads()) {
        choices.set_skewed_loads(true);
        const TiledChoice skewed = fixed_tiles_of_volume(choices, inner, *b, exact, src_align, dst_align,
                                                         tile_volume(units.unit_bytes), kMicroTilesPerThread);
        choices.set_skewed_loads(false);
        // Not where it splits a B group the plain tile spans whole (odd extents: whole tiles of 21 or 27
        // units cut into 16, H200, 45-53% -> 32-45% of copy). The skewed tile is searched at
        // tile_volume only: plan_fixed_tiles's larger-tile pass added plan time and changed no plan
        // of 8,762 lines.
        const bool splits_b = plain.spec.tile_b == plain.g.extent_b && skewed.spec.tile_b < skewed.g.extent_b;
        if (skewed.spec.skew_load && !splits_b) {
          if (wants_word_tiles_over_skewed(skewed.spec, units, words)) return word_tiles();
          return tiled_variant(units, skewed);
        }
      }
      return tiled_variant(units, plain);
    }
  }
  return plan_rows(units, exact);
}

// Whether a segment tile of rows that the row family would move goes faster than rows: a tile of
// kSegmentMinTile bytes or more whose destination runs hold kSegmentMinDstRun bytes or more. (H100,
// tuning seeds 40, 41 and 44-53: u8 rows of 13-71 bytes 36-45% -> 52-76% of copy, f16 rows of 4-byte
// units 72-78% -> 85-89%; tiles of a few rows fell to 2-29%.) Tiles of one dim per group, which need
// no tables, are taken first where they hold 4 KiB (8 KiB unless they merge a run) and source runs
// of 32 bytes or more; else groups grown dim by dim (the same tile where no group can grow), which
// beat smaller one-dim tiles (u8 [9,17,41,10,94,3,3,3]: source runs of 9 bytes, 24% -> 79% on two B
// dims) and lost to larger ones by 6-10 points.
bool wants_segments(const RearrangeVariant& segments, bool one_dim_groups) {
  const RearrangeSpec& s = segments.spec;
  const std::int64_t seg = std::int64_t{s.segment} * s.unit_bytes, tile = seg * s.tile_a * s.tile_b;
  const std::int64_t dst_run = s.merge_dst ? tile : seg * s.tile_a, src_run = s.merge_src ? tile : seg * s.tile_b;
  // One-dim tiles under 8 KiB that merge no run grow their groups instead (H200: on the 5 lines of
  // seeds 1801-1840 it changes, 62.8% -> 67.3% of copy; on the 3 of 4,480 lines of seeds 1841-1880 it
  // changes, drawn after, 65.8% -> 75.2%, 2 up and 1 down by 5 points). Growing tiles that merge a
  // source run lost most (seeds 1721-1840); those that merge a destination run are left alone too,
  // unmeasured.
  const bool small_unmerged = tile < 4 * kSegmentMinTile && !s.merge_src && !s.merge_dst;
  if (one_dim_groups && (tile < 2 * kSegmentMinTile || src_run < 32 || small_unmerged)) return false;
  return tile >= kSegmentMinTile && dst_run >= kSegmentMinDstRun;
}

// Whether a form's shared rows are shorter than a sector. Moved by the row family, rows scattered over
// the source read their sectors again and again once L2 no longer holds them (H200: 3-byte u8 rows at
// 6-15% of copy, 12-byte f32 rows at 22-24%). Runs tiles read and write whole runs of several dims instead:
// measured planning's timings of the 19 such lines with a runs tile among the 8,762 lines used to
// compare plans and seeds 2491-2494: runs 1.15x to 5.3x faster than the planned rows on every one.
bool rows_under_a_sector(const CanonicalForm& units) {
  const std::int64_t row = unaligned_row_bytes(units);
  return row > 0 && row < kSectorBytes;
}

// Whether rows of 2-byte units under a sector take runs tiles before segment tiles. (H200: measured
// planning found the runs tile 1.13x to 1.18x faster than the planned segment tile on three f16
// lines of seeds 7961-7962, rows of 3 and 9 units. Drawn after, 24 of the 548 u8/f16 lines of seeds
// 7261-7960 whose plans at 16-byte aligned pointers this changes: 53.4% -> 59.3% of copy (geometric
// means), 15 up and 5 down by 3 points or more; u8 in 2-byte units (8 lines) 51.2% -> 64.3%, f16 (16)
// 54.6% -> 57.0%. The falls are segment tiles of rows of 3 to 15 units that were already at 47-72%:
// f16 [148,96359,13] 1,0,2 72% -> 54%. Measured at 16-byte aligned pointers only: pointers aligned to
// 4 or 8 bytes take the rule unmeasured; pointers off 4 bytes keep segment tiles, whether their
// 2-byte units are the elements or fold wider ones.)
bool pair_rows_take_runs(const CanonicalForm& units, std::int64_t src_align, std::int64_t dst_align) {
  return units.unit_bytes == 2 && src_align >= 4 && dst_align >= 4 && rows_under_a_sector(units);
}

}  // namespace

namespace {

// A final tiled tile of 1-, 4- or 8-byte units with fewer micro-tiles than its block's 256 threads
// leaves threads idle in its loads; in a half-size block, where a thread still holds it within its
// limits (tile_fits, and slab_registers for tiles whose B offsets come from a table), it runs at
// twice the blocks per SM: as many threads per SM, twice the tiles in flight. Tiles of linear or
// skewed loads, and 16-byte units, keep their blocks (not measured). Only the final tile: taken
// during the tile search, it changed which tiles later rules weighed, and those lines fell as often
// as they rose. (H200, two rounds, 16-byte aligned pointers; with it in the search, on the 62 lines
// of seeds 10885-11084 and 99 drawn from the 146 of seeds 11085-11684 it changed, the lines that kept
// their tile: 4-byte units of at most 128 micro-tiles 41 lines +21.5 points of copy (39 up, 1 down by
// 3 points or more), of 129 to 255 25 lines +7.5 (17 up, 5 down); 8-byte units 29 lines +17.7 (29
// up); 1-byte units 17 lines +7.4 (8 up, 3 down); 2-byte units 24 lines -0.3 (8 up, 11 down), so
// those keep their blocks. On the 72 lines of seeds 11685-12084 the rule changes, drawn after: 60.8%
// -> 75.2% of copy, 55 up and 4 down; u8 (8) 55.1% -> 64.2%, f32 (48) 58.7% -> 73.8%, f64 (16) 71.1%
// -> 86.1%.)
// A tile that does not fit twice the blocks but has more than a quarter of its threads idle takes
// the most blocks that fit over its own (mostly 3 x 256 -> 4 x 128 threads): fewer threads per SM, a
// third more tiles in flight. With busier tiles that did not pay: on 66 lines of seeds 12285-12484
// and the TTC suite, micro-tile counts of 192-255 (34 lines) 88.2% -> 88.8% of copy (6 up, 4 down by
// 3 points or more; u8 [15,15,15,32,15,32] 2,0,4,1,5,3 104% -> 95%), counts of 135-180 (32) 78.6% ->
// 84.9% (25 up, 2 down). Held out, 48 of the 304 lines of seeds 12485-12684 it changes: 78.4% ->
// 84.3% (37 up, 1 down).
void take_small_blocks_for_idle_threads(RearrangeSpec& s) {
  const bool measured_unit = s.unit_bytes == 1 || s.unit_bytes == 4 || s.unit_bytes == 8;
  if (!is_tiled(s.family) || !measured_unit || s.threads != kThreads || s.load_linear || s.skew_load) return;
  const std::int64_t micro_tiles = std::int64_t{s.tile_a} / s.vec_a * (s.tile_b / s.vec_b);
  if (micro_tiles >= kThreads) return;
  RearrangeSpec small = s;
  small.threads = kSmallBlockThreads;
  const int twice_the_blocks = s.min_blocks * kThreads / kSmallBlockThreads;
  const bool over_a_quarter_idle = micro_tiles * 4 < kThreads * 3;
  const int fewest_blocks = over_a_quarter_idle ? s.min_blocks + 1 : twice_the_blocks;
  for (int blocks = twice_the_blocks; blocks >= fewest_blocks; --blocks) {
    small.min_blocks = blocks;
    if (!tile_fits(small, small.threads, blocks, true)) continue;
    if (small.b_chain > 0 && !slab_fits(small)) continue;
    s = small;
    return;
  }
}

// The planned variant, its tile's shared-memory rows not yet spread (spread_rows).
RearrangeVariant plan_unspread_variant(const CanonicalForm& units, bool exact, std::int64_t src_align,
                                       std::int64_t dst_align) {
  const RearrangeDims& dims = units.dims;
  if (dims.empty() || (dims.size() == 1 && dims[0].src_stride == 1 && dims[0].dst_stride == 1)) {
    RearrangeVariant v{units, {}, {}, 0, unit_count(dims) * units.unit_bytes};
    v.spec.unit_bytes = static_cast<int>(units.unit_bytes);
    return v;
  }
  RearrangeVariant v = plan_fixed_family(units, exact, src_align, dst_align);
  if (v.spec.family == RearrangeFamily::row && unaligned_row_bytes(units) >= kVectorRowMinBytes)
    return plan_vector_rows(units, exact);
  if (v.spec.family == RearrangeFamily::row) {
    if (pair_rows_take_runs(units, src_align, dst_align)) {
      if (std::optional<RearrangeVariant> runs = plan_lengthened_runs(units, exact)) return *runs;
    }
    const std::optional<RearrangeVariant> single = plan_segments(units, exact, false);
    if (single && wants_segments(*single, true)) return *single;
    const std::optional<RearrangeVariant> composite = plan_segments(units, exact, true);
    if (composite && wants_segments(*composite, false)) return *composite;
    if (rows_under_a_sector(units)) {
      if (std::optional<RearrangeVariant> runs = plan_lengthened_runs(units, exact)) return *runs;
    }
  }
  if (stores_single_bytes(v.spec)) {
    if (std::optional<RearrangeVariant> runs = plan_lengthened_runs(units, exact))
      if (!beats_short_runs(v, *runs)) return *runs;
  }
  // Measured at 16-byte aligned pointers only. Pointers off 4 bytes make most 2-byte tiles single
  // units, so those keep their tiles; pointers aligned to 4 or 8 bytes take the rule, unmeasured.
  if (moves_single_units_of_two_bytes(v.spec) && src_align >= 4 && dst_align >= 4) {
    std::optional<RearrangeVariant> runs = plan_runs(units, exact);
    if (runs && runs->spec.gather_stores) return lengthen_short_runs(units, exact, std::move(*runs));
  }
  take_small_blocks_for_idle_threads(v.spec);
  return v;
}

}  // namespace

RearrangeVariant plan_variant(const CanonicalForm& units, bool exact, std::int64_t src_align,
                              std::int64_t dst_align) {
  RearrangeVariant v = plan_unspread_variant(units, exact, src_align, dst_align);
  spread_rows(v.spec);
  return v;
}

std::vector<RearrangeVariant> candidate_variants(const CanonicalForm& units, bool exact, std::int64_t src_align,
                                                std::int64_t dst_align) {
  std::vector<RearrangeVariant> out{plan_variant(units, exact, src_align, dst_align)};
  if (out.front().spec.family == RearrangeFamily::copy) return out;
  auto add = [&out](RearrangeVariant v) {
    spread_rows(v.spec);
    for (const RearrangeVariant& seen : out)
      if (seen.spec == v.spec && seen.form == v.form && seen.grid == v.grid) return;
    out.push_back(std::move(v));
  };
  const RearrangeDims& dims = units.dims;
  const std::size_t inner = dims.size() - 1;
  if (dims[inner].dst_stride == 1 && dims[inner].src_stride != 1) {
    if (const auto b = source_inner_dim(dims, inner)) {
      // Tiles of a full, a quarter and a sixteenth of the unit's volume, each plain and with either
      // group's chain passing the other's first dims whatever its runs (the default passes only where
      // runs are short), and plain tiles two and four times as long along A or along B. Which shape
      // wins varies by line with no rule found: on 224 u8/f16 lines of seeds 954-957, 84 tuned plans
      // took one of these, 28 of them a longer A, at 12.5 points over the default on average; a
      // default of A twice as long lost 2-3 points on the TTC lines it changed (H200).
      const std::int64_t volume = tile_volume(units.unit_bytes);
      TileChoices choices(units);
      for (std::int64_t v : {volume, volume / 4, volume / 16})
        for (const Passing passing : {Passing::none, Passing::b_through_a, Passing::a_through_b})
          add(plan_tiled_groups(choices, inner, *b, exact, src_align, dst_align, v, passing, true));
      for (std::int64_t v : {volume, volume / 4})
        for (int aspect : {-2, -1, 1, 2})
          add(plan_tiled_groups(choices, inner, *b, exact, src_align, dst_align, v, Passing::none, true, aspect));
      // Tiles of skewed 16-byte stores where narrow stores allow them, also where their loads are narrow.
      choices.set_skewed_stores(true);
      for (std::int64_t v : {volume, volume / 4})
        add(plan_tiled_groups(choices, inner, *b, exact, src_align, dst_align, v, Passing::none, true));
      choices.set_skewed_stores(false);
      const bool long_dims = dims[inner].extent >= kSkewedTile && dims[*b].extent >= kSkewedTile;
      if (long_dims && dims[*b].src_stride == 1 && (units.unit_bytes == 2 || units.unit_bytes == 4))
        add(plan_skewed(units, inner, *b, exact));
      const Groups words = word_groups(units, inner, *b);
      if (units.unit_bytes <= 2 && word_groups_fit(units, words, kWordTileMinBytes))
        for (int store_words : {1, 4})
          if (store_words == 1 || vector_stores_fit(units))
            add(plan_words(units, words, exact, src_align, dst_align, store_words));
    }
  }
  add(plan_rows(units, exact));
  if (unaligned_row_bytes(units) > kShortRowBytes) add(plan_vector_rows(units, exact));
  add(plan_fixed_family(units, exact, src_align, dst_align));
  if (std::optional<RearrangeVariant> runs = plan_runs(units, exact)) add(*runs);
  if (std::optional<RearrangeVariant> runs = plan_shared_end_runs(units, exact)) add(*runs);
  for (bool composite : {false, true})
    if (std::optional<RearrangeVariant> segments = plan_segments(units, exact, composite)) add(*segments);
  // The other tile order, where it is another walk (several tiles on both sides).
  for (std::size_t i = 0, n = out.size(); i < n; ++i)
    if (counts_tiles(out[i].spec.family) && out[i].args.tiles_x.value > 1 && out[i].args.tiles_y.value > 1) {
      RearrangeVariant other_order = out[i];
      other_order.spec.a_first = !other_order.spec.a_first;
      add(std::move(other_order));
    }
  // Every kernel walks its tiles in a grid-stride loop, so the grid is a launch choice, not code:
  // each candidate also walks one, two and four tiles per block (which is fastest varies by shape
  // and is not predicted: on H200 lines of one kernel it moved the time by up to 2x either way).
  for (std::size_t i = 0, n = out.size(); i < n; ++i)
    for (std::int64_t per_block : {1, 2, 4}) {
      RearrangeVariant v = out[i];
      v.grid = grid_for(ceil_div(v.args.num_tiles, per_block));
      add(std::move(v));
    }
  return out;
}

std::vector<std::int64_t> runs_tile_extents(const RearrangeSpec& spec, const RearrangeKernelArgs& args) {
  std::vector<std::int64_t> extents;
  if (spec.family != RearrangeFamily::runs) return extents;
  const int a = spec.dst_run_dims - 1, b = (spec.src_order >> (4 * (spec.src_run_dims - 1))) & 15;
  if (spec.tile_dims > kRunsMaxTileDims || a < 0 || a >= spec.tile_dims || spec.src_run_dims < 1 || b >= spec.tile_dims)
    fail(ErrorCode::internal, "a runs specialization names tile dims it does not have");
  for (int k = 0; k < spec.tile_dims; ++k) extents.push_back(args.dim[k].extent.value);
  extents[static_cast<std::size_t>(a)] = spec.tile_a;
  extents[static_cast<std::size_t>(b)] = spec.tile_b;
  return extents;
}

std::int64_t runs_tile_bytes(const RearrangeSpec& spec, const RearrangeKernelArgs& args) {
  std::int64_t bytes = spec.unit_bytes;
  for (const std::int64_t e : runs_tile_extents(spec, args)) bytes *= e;
  return bytes;
}

SpecKey rearrange_key(const RearrangeSpec& spec, const RearrangeKernelArgs& args) {
  std::vector<std::uint64_t> baked;
  for (std::int64_t e : runs_tile_extents(spec, args)) baked.push_back(static_cast<std::uint64_t>(e));
  if (spec.exact) {
    baked = {static_cast<std::uint64_t>(args.num_tiles), static_cast<std::uint64_t>(args.extent_a),
             static_cast<std::uint64_t>(args.extent_b)};
    for (int k = 0; k < spec.num_dims; ++k)
      for (std::int64_t v : {args.dim[k].extent.value, args.dim[k].src_stride, args.dim[k].dst_stride})
        baked.push_back(static_cast<std::uint64_t>(v));
  }
  return spec_key("rearrange", spec, baked.data(), baked.size());
}

std::string kernel_label(const RearrangeSpec& s, const RearrangeKernelArgs& args) {
  std::string key = fmt::format("{}.u{}.t{}.d{}.i{}{}", family_name(s.family), s.unit_bytes, s.threads, s.num_dims,
                                s.index64 ? 64 : 32, s.bounds ? ".b" : "");
  switch (s.family) {
    case RearrangeFamily::copy: return "copy";
    case RearrangeFamily::row:
    case RearrangeFamily::gather:
      key += fmt::format(".x{}.ix{}.iy{}{}{}{}{}", s.tile_x, s.items_x, s.items_y,
                         s.split_rows ? fmt::format(".y{}", s.tile_y1) : "", s.src_inner_unit ? "" : ".ss",
                         s.dst_inner_unit ? "" : ".ds", s.vector_rows ? ".vr" : "");
      break;
    case RearrangeFamily::transpose:
    case RearrangeFamily::packed:
      key += fmt::format(".a{}x{}v{}{}.b{}x{}v{}{}{}.p{}.mb{}{}{}{}{}{}", s.dims_a, s.tile_a, s.vec_a,
                         s.a_pass ? fmt::format("c{}p{}", s.a_chain, s.a_pass) : "", s.dims_b, s.tile_b,
                         s.vec_b, s.b_chain ? fmt::format("c{}", s.b_chain) : "", s.skew_load ? "k" : "", s.pitch,
                         s.min_blocks,
                         s.swizzle ? fmt::format(".sw{}{}", s.swizzle_period,
                                                 s.swizzle_step > 1 ? fmt::format("x{}", s.swizzle_step) : "")
                                   : "",
                         s.load_linear ? fmt::format(".ll{}r{}", s.load_linear, s.load_run) : "",
                         s.store_linear ? fmt::format(".sl{}r{}{}{}", s.store_linear, s.store_run,
                                                      s.rotate_span ? fmt::format("t{}", s.rotate_span) : "",
                                                      s.skew_runs ? "k" : "")
                                        : "",
                         s.a_first ? ".af" : "",
                         s.fixed_a || s.fixed_b ? fmt::format(".f{}{}", s.fixed_a ? "a" : "", s.fixed_b ? "b" : "") : "");
      if (s.skew_store) key += ".ss";
      break;
    case RearrangeFamily::skewed:
      key += fmt::format(".a{}.b{}.v{}.mb{}{}", s.tile_a, s.tile_b, s.vec_a, s.min_blocks, s.a_first ? "" : ".bf");
      break;
    case RearrangeFamily::words:
      key += fmt::format(".a{}x{}.b{}x{}.p{}.mb{}{}{}{}{}", s.dims_a, s.tile_a, s.dims_b, s.tile_b, s.pitch,
                         s.min_blocks, s.skew_load ? ".sl" : "", s.skew_store ? ".ss" : "",
                         s.store_words > 1 ? fmt::format(".sv{}", kWordBytes * s.store_words) : "",
                         s.a_first ? "" : ".bf");
      break;
    case RearrangeFamily::segments:
      key += fmt::format(".r{}.a{}x{}.b{}x{}.p{}{}{}{}", s.segment, s.dims_a, s.tile_a, s.dims_b, s.tile_b, s.pitch,
                         s.merge_src ? ".ms" : "",
                         s.merge_dst ? ".md" : "", s.a_first ? ".af" : "");
      break;
    case RearrangeFamily::runs:
      key += fmt::format(".t{}.d{}.s{}.o{:x}.a{}.b{}.p{}", fmt::join(runs_tile_extents(s, args), "x"), s.dst_run_dims,
                         s.src_run_dims, s.src_order, s.tile_a, s.tile_b, s.pitch);
      if (s.gather_stores) key += fmt::format(".g{}", s.store_words);
      break;
  }
  if (s.exact) {
    key += fmt::format(".exact.n{}.ea{}.eb{}", args.num_tiles, args.extent_a, args.extent_b);
    for (int k = 0; k < s.num_dims; ++k)
      key += fmt::format("_{}:{}:{}", args.dim[k].extent.value, args.dim[k].src_stride, args.dim[k].dst_stride);
  }
  return key;
}

std::size_t kernel_args_bytes(const RearrangeSpec& spec) {
  return offsetof(RearrangeKernelArgs, dim) + sizeof(KernelDim) * static_cast<std::size_t>(spec.num_dims);
}

int segment_store_bytes(const RearrangeSpec& s) { return s.segment * s.unit_bytes >= 8 ? 16 : 4; }

int skewed_runs_staged_units(const RearrangeSpec& s) {
  return (s.tile_a * s.tile_b + s.store_linear - 1) / s.store_linear * s.store_linear + s.store_linear;
}

int shared_bytes(const RearrangeSpec& s) {
  if (s.family == RearrangeFamily::skewed) return s.tile_a * s.tile_b * s.unit_bytes;
  const int index_bytes = s.index64 ? 8 : 4;
  if (s.family == RearrangeFamily::words) {
    // Composite-group tables, one per tile: the rows a tile reads along A, its B indices.
    const int rows_a = static_cast<int>(word_tile_rows(s));
    return s.tile_b * s.pitch * static_cast<int>(kWordBytes) +
           (s.dims_a > 1 ? rows_a * index_bytes : 0) + (s.dims_b > 1 ? s.tile_b * index_bytes : 0);
  }
  if (s.family == RearrangeFamily::segments) {
    // Staged rows with 16 bytes of padding on each side, then the tables of composite groups, each at
    // least one entry (SjSegmentShared in the template).
    const int rows_and_a = 16 + (s.merge_src ? 1 : s.tile_a) * s.pitch + 16 + 4 * (s.dims_a > 1 ? s.tile_a : 1);
    return (rows_and_a + index_bytes - 1) / index_bytes * index_bytes + index_bytes * (s.dims_b > 1 ? s.tile_b : 1);
  }
  if (s.family == RearrangeFamily::runs) {
    if (s.gather_stores) return s.tile_runs * s.pitch * s.unit_bytes;
    // Staged destination runs start a word in, with a word of padding at the end.
    const std::int64_t word = units_per_word(s.unit_bytes);
    return static_cast<int>(ceil_div(std::int64_t{s.tile_runs} * s.pitch + 2 * word, word) * word * s.unit_bytes);
  }
  if (s.family != RearrangeFamily::transpose && s.family != RearrangeFamily::packed) return 0;
  const int rows = s.load_linear ? s.tile_a : s.tile_b;
  // Composite-group offset tables are double-buffered (the next tile's are filled during this one)
  // unless they are the same for every tile.
  const int sets_a = s.fixed_a ? 1 : 2, sets_b = s.fixed_b ? 1 : 2;
  const int staged = s.skew_runs ? skewed_runs_staged_units(s) : rows * s.pitch;
  return staged * s.unit_bytes + sets_a * (s.dims_a > 1 ? s.tile_a * index_bytes : 0) +
         sets_b * ((s.dims_b > 1 ? s.tile_b * index_bytes : 0) + (s.b_chain > 0 ? s.tile_b * index_bytes : 0));
}

}  // namespace shapejit::plan
