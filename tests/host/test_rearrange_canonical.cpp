// Rearrange planner: canonicalization rules one by one, family choice, specialization keys.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ops/rearrange/plan.hpp"
#include "rearrange_executor.hpp"
#include "shapejit/rearrange.hpp"

using namespace shapejit;
using plan::RearrangeDim;
using plan::RearrangeDims;
using plan::RearrangeFamily;

namespace {

TensorDesc desc(std::vector<std::int64_t> shape, std::vector<std::int64_t> strides = {}, DType dtype = DType::f32) {
  return {std::move(shape), std::move(strides), dtype, 0};
}

// Plan of permuting a contiguous `shape` by `perm` into a contiguous destination.
plan::RearrangePlanData permute_plan(std::vector<std::int64_t> shape, std::vector<int> perm, DType dtype,
                                     RearrangeOptions options = {}) {
  const TensorDesc view = permuted(desc(std::move(shape), {}, dtype), perm);
  return plan::plan_rearrange_data(desc(view.shape, {}, dtype), view, options);
}

// A copy: the plan is often a temporary.
plan::RearrangeVariant aligned(const plan::RearrangePlanData& p) { return plan::variant_for_pointers(p, 0); }

// Shared-memory wavefronts of one warp's accesses of `units` units each at the given unit positions:
// lanes are served 128 bytes at a time, and a bank serves one 32-bit word per wavefront.
int warp_wavefronts(const std::vector<int>& positions, int units, int unit_bytes) {
  const int bytes = units * unit_bytes;
  const std::size_t group = bytes <= 4 ? 32 : static_cast<std::size_t>(128 / bytes);
  int total = 0;
  for (std::size_t first = 0; first < positions.size(); first += group) {
    std::vector<std::vector<int>> words(32);
    for (std::size_t lane = first; lane < std::min(positions.size(), first + group); ++lane)
      for (int w = 0; w < std::max(1, bytes / 4); ++w) {
        const int word = positions[lane] * unit_bytes / 4 + w;
        auto& bank = words[static_cast<std::size_t>(word % 32)];
        if (std::find(bank.begin(), bank.end(), word) == bank.end()) bank.push_back(word);
      }
    std::size_t most = 0;
    for (const auto& bank : words) most = std::max(most, bank.size());
    total += static_cast<int>(most);
  }
  return total;
}

}  // namespace

TEST_CASE("canonicalize: unit dims are dropped") {
  const RearrangeDims dims = plan::drop_unit_dims({{1, 5, 5}, {4, 1, 1}, {1, 0, 9}});
  CHECK(dims == RearrangeDims{{4, 1, 1}});
}

TEST_CASE("canonicalize: a dim negative in dst is flipped on both sides, with base offsets") {
  RearrangeDims dims{{4, -3, -1}, {5, 2, 4}, {3, -7, 20}};
  const plan::FlipOffsets off = plan::flip_negative_dims(dims);
  CHECK(dims == RearrangeDims{{4, 3, 1}, {5, 2, 4}, {3, -7, 20}});
  CHECK(off.src == -9);
  CHECK(off.dst == -3);
}

TEST_CASE("canonicalize: dims are ordered by descending destination stride") {
  const RearrangeDims dims = plan::sort_by_dst_stride({{2, 1, 1}, {3, 2, 6}, {4, 6, 2}});
  CHECK(dims == RearrangeDims{{3, 2, 6}, {4, 6, 2}, {2, 1, 1}});
}

TEST_CASE("canonicalize: dims contiguous on both sides merge, and only those") {
  CHECK(plan::merge_contiguous_dims({{2, 12, 15}, {3, 4, 4}, {4, 1, 1}}) == RearrangeDims{{2, 12, 15}, {12, 1, 1}});
  CHECK(plan::merge_contiguous_dims({{3, 0, 4}, {4, 0, 1}}) == RearrangeDims{{12, 0, 1}});  // broadcast rows
  CHECK(plan::merge_contiguous_dims({{3, 4, 5}, {4, 1, 1}}) == RearrangeDims{{3, 4, 5}, {4, 1, 1}});
}

TEST_CASE("canonicalize: a reversed contiguous tensor becomes one forward run") {
  const TensorDesc d = desc({6, 5}, {-5, -1});
  const plan::CanonicalForm f = plan::canonicalize(d, d);
  CHECK(f.dims == RearrangeDims{{30, 1, 1}});
  CHECK(f.src_offset == -29);
  CHECK(f.dst_offset == -29);
}

TEST_CASE("fold into units: the shared contiguous run becomes 16-byte units when alignment allows") {
  const plan::CanonicalForm elements{{{8, 64, 32}, {32, 1, 1}}, 4, 0, 0};
  CHECK(plan::fold_into_units(elements, 16, 16) == plan::CanonicalForm{{{8, 16, 8}, {8, 1, 1}}, 16, 0, 0});
  CHECK(plan::fold_into_units(elements, 16, 8).unit_bytes == 8);
  CHECK(plan::fold_into_units(elements, 2, 16).unit_bytes == 2);
  // A 12-byte element is three 4-byte units; a 3-byte element is three bytes.
  CHECK(plan::fold_into_units({{{5, 1, 5}, {7, 5, 1}}, 12, 0, 0}, 16, 16) ==
        plan::CanonicalForm{{{5, 3, 15}, {7, 15, 3}, {3, 1, 1}}, 4, 0, 0});
  CHECK(plan::fold_into_units({{{5, 1, 5}, {7, 5, 1}}, 3, 0, 0}, 16, 16).unit_bytes == 1);
  // An odd stride keeps units narrow even when the run is long.
  CHECK(plan::fold_into_units({{{9, 33, 32}, {32, 1, 1}}, 4, 0, 0}, 16, 16).unit_bytes == 4);
}

TEST_CASE("families: copy, row, transpose, packed and gather are chosen from the canonical form") {
  CHECK(aligned(permute_plan({64, 128}, {0, 1}, DType::f32)).spec.family == RearrangeFamily::copy);
  const auto& row = aligned(permute_plan({64, 512, 32, 128}, {0, 2, 1, 3}, DType::f16));
  CHECK(row.spec.family == RearrangeFamily::row);
  CHECK(row.spec.unit_bytes == 16);
  const auto& transpose = aligned(permute_plan({8192, 8192}, {1, 0}, DType::f32));
  CHECK(transpose.spec.family == RearrangeFamily::transpose);
  CHECK(transpose.spec.vec_a * transpose.spec.unit_bytes == 16);
  CHECK(transpose.spec.vec_b * transpose.spec.unit_bytes == 16);
  CHECK(transpose.spec.swizzle);
  std::vector<std::int64_t> twos(24, 2);
  std::vector<int> reversed(24);
  for (int i = 0; i < 24; ++i) reversed[static_cast<std::size_t>(i)] = 23 - i;
  const auto& packed = aligned(permute_plan(twos, reversed, DType::f32));
  CHECK(packed.spec.family == RearrangeFamily::packed);
  CHECK(packed.spec.dims_a > 1);
  CHECK(packed.spec.dims_b > 1);
  CHECK(packed.spec.tile_a * packed.spec.tile_b >= 1024);
  const auto& channels = aligned(permute_plan({256, 3, 224, 224}, {0, 2, 3, 1}, DType::f16));
  CHECK(channels.spec.family == RearrangeFamily::packed);
  CHECK(channels.spec.store_linear * channels.spec.unit_bytes == 16);
  const TensorDesc strided = desc({4096, 4096}, {16384, 2}, DType::f16);
  const auto gather = plan::plan_rearrange_data(desc({4096, 4096}, {}, DType::f16), strided, {});
  CHECK(aligned(gather).spec.family == RearrangeFamily::gather);
}

TEST_CASE("families: u8 tiles of narrow accesses go to runs or word tiles only where those won") {
  auto family_of = [](std::vector<std::int64_t> shape, std::vector<int> perm) {
    return aligned(permute_plan(std::move(shape), std::move(perm), DType::u8)).spec.family;
  };
  // Single-byte stores beside 2- or 4-byte loads along 16+ units: runs; beside 8-byte loads: fixed.
  CHECK(family_of({60, 69, 151, 4}, {0, 3, 2, 1}) == RearrangeFamily::runs);
  CHECK(family_of({281, 19, 95, 58}, {2, 0, 3, 1}) == RearrangeFamily::runs);
  CHECK(family_of({144, 3, 5, 20, 11, 30, 6, 2}, {3, 1, 5, 0, 6, 7, 2, 4}) == RearrangeFamily::packed);
  // Word stores beside 2-byte loads: word tiles in a plain transpose, not in a packed tile.
  CHECK(family_of({340, 5458}, {1, 0}) == RearrangeFamily::words);
  CHECK(family_of({583, 6, 2, 122, 174}, {2, 0, 4, 3, 1}) == RearrangeFamily::packed);
  // 8-byte stores beside 2-byte loads: word tiles where they store 16-byte vectors (A of 1024 units
  // or more), else the fixed tile.
  const auto& long_a = aligned(permute_plan({1032, 466}, {1, 0}, DType::u8));
  CHECK(long_a.spec.family == RearrangeFamily::words);
  CHECK(long_a.spec.store_words == 4);
  CHECK(family_of({1040, 3, 466}, {2, 1, 0}) == RearrangeFamily::words);
  const auto& short_a = aligned(permute_plan({160, 2466}, {1, 0}, DType::u8));
  CHECK(short_a.spec.family == RearrangeFamily::transpose);
  CHECK(short_a.spec.vec_a == 8);
  CHECK(short_a.spec.vec_b == 2);
  // With 64-bit indices word tiles store words, so the fixed tile stays.
  const auto& index64 = aligned(permute_plan({65536, 32770}, {1, 0}, DType::u8));
  CHECK(index64.spec.family == RearrangeFamily::transpose);
  CHECK(index64.spec.index64);
  CHECK(index64.spec.vec_a == 8);
  // Single-byte loads beside wide stores: word tiles only when both groups reach 128 units.
  CHECK(family_of({167, 317, 28, 103}, {1, 3, 0, 2}) == RearrangeFamily::packed);
  CHECK(family_of({359, 9, 8, 5655}, {1, 3, 0, 2}) == RearrangeFamily::words);
}

TEST_CASE("families: f16 tiles that would store single units take words of two, or skewed 16-byte stores where "
          "they load 4 bytes or more; single-unit loads stay tiled") {
  auto family_of = [](std::vector<std::int64_t> shape, std::vector<int> perm) {
    return aligned(permute_plan(std::move(shape), std::move(perm), DType::f16)).spec.family;
  };
  // Single units on both sides of a packed tile, and a 2-D transpose with odd pitches (skewed tiles
  // before): words of two. Single-unit stores beside 8-byte loads over one A dim: skewed 16-byte stores.
  CHECK(family_of({13, 4, 60, 49, 19, 37}, {0, 1, 2, 5, 4, 3}) == RearrangeFamily::words);
  CHECK(family_of({5699, 34561}, {1, 0}) == RearrangeFamily::words);
  const plan::RearrangeSpec skewed = aligned(permute_plan({3, 154, 1577, 41, 4}, {4, 1, 0, 3, 2}, DType::f16)).spec;
  CHECK((skewed.family == RearrangeFamily::packed && skewed.skew_store && skewed.vec_a == 8 && skewed.vec_b == 4));
  // Single-unit loads beside 16-byte stores keep the packed tile.
  CHECK(family_of({40, 4, 36, 2, 5, 35, 3, 33}, {3, 5, 2, 7, 4, 6, 1, 0}) == RearrangeFamily::packed);
  // Pairs stored from fixed tiles over one A dim, beside loads of 4 bytes or more, take skewed 16-byte
  // stores before word tiles are considered; over two A dims they take tiles four times as long along
  // A (narrow_store_aspect), A 272 units over B 32.
  for (const auto& [shape, perm] : std::vector<std::pair<std::vector<std::int64_t>, std::vector<int>>>{
           {{1293, 342, 386}, {0, 2, 1}},
           {{3, 2, 37, 39, 70, 176}, {0, 1, 5, 2, 3, 4}},
           {{7, 185, 3182, 32}, {0, 1, 3, 2}},
           {{28434, 5966}, {1, 0}}}) {
    const plan::RearrangeSpec s = aligned(permute_plan(shape, perm, DType::f16)).spec;
    CHECK(s.family == RearrangeFamily::transpose);
    CHECK((s.skew_store && s.vec_a == 8 && s.vec_b >= 2));
  }
  const plan::RearrangeSpec two_a = aligned(permute_plan({3, 270, 2, 226}, {3, 0, 2, 1}, DType::f16)).spec;
  CHECK((two_a.family == RearrangeFamily::packed && two_a.dims_a == 2 && two_a.tile_a == 272 && two_a.tile_b == 32 &&
         two_a.vec_a >= 2));
  // A of one 64-unit dim cannot grow: at 4-byte pointers the 64 x 128 tile of pairs takes word tiles,
  // aligned on both sides.
  const plan::RearrangeSpec fixed_a =
      plan::variant_for_pointers(permute_plan({7, 64, 1000}, {0, 2, 1}, DType::f16), 4).spec;
  CHECK(fixed_a.family == RearrangeFamily::words);
  CHECK_FALSE(fixed_a.skew_load);
  CHECK_FALSE(fixed_a.skew_store);
}

TEST_CASE("families: short rows of units up to 8 bytes take segment tiles where the tile and its runs are long") {
  auto spec_of = [](std::vector<std::int64_t> shape, std::vector<int> perm, DType dtype) {
    return aligned(permute_plan(std::move(shape), std::move(perm), dtype)).spec;
  };
  // u8 rows of 9 and 71 bytes, f16 rows of 22 units (4-byte units), f32 rows of 35 (140 bytes).
  const auto nine = spec_of({7, 1241, 13, 103, 9}, {1, 2, 3, 0, 4}, DType::u8);
  CHECK(nine.family == RearrangeFamily::segments);
  CHECK(nine.segment == 9);
  CHECK(nine.merge_dst);  // A (7 rows) whole, and B next in the destination: one destination run
  CHECK_FALSE(nine.merge_src);
  const auto merged_src = spec_of({1241, 7, 9}, {1, 0, 2}, DType::u8);
  CHECK(merged_src.family == RearrangeFamily::segments);
  CHECK(merged_src.merge_src);
  CHECK(spec_of({535, 30, 162, 71}, {0, 2, 1, 3}, DType::u8).family == RearrangeFamily::segments);
  CHECK(spec_of({416, 14511, 22}, {1, 0, 2}, DType::f16).family == RearrangeFamily::segments);
  CHECK(spec_of({17, 3, 31, 5, 21, 2, 17, 35}, {4, 3, 0, 2, 1, 6, 5, 7}, DType::f32).family ==
        RearrangeFamily::segments);
  // Groups of several dims where one dim per group makes a small tile or short source runs.
  const auto two_b = spec_of({9, 17, 41, 10, 94, 3, 3, 3}, {6, 0, 5, 1, 2, 3, 4, 7}, DType::u8);
  CHECK(two_b.family == RearrangeFamily::segments);
  CHECK(two_b.dims_b == 2);
  // (f32: rows of 2-byte units under a sector take runs tiles instead.)
  const auto three_a = spec_of({22, 18, 2, 2, 2, 2, 24, 20, 2, 3, 3, 3}, {10, 4, 2, 1, 5, 3, 8, 7, 6, 0, 9, 11}, DType::f32);
  CHECK(three_a.family == RearrangeFamily::segments);
  CHECK(three_a.dims_a == 3);
  // A one-dim tile of 64 x 4 rows of 20 bytes (5 KiB) that merges no run grows B by a dim instead.
  const auto grown = spec_of({12, 20, 8, 8, 8, 38, 4, 10}, {1, 5, 2, 6, 0, 3, 4, 7}, DType::f16);
  CHECK(grown.family == RearrangeFamily::segments);
  CHECK(grown.dims_a == 1);
  CHECK(grown.dims_b == 2);
  // Rows of 768 bytes or more whose ends are off 16 bytes move in 16-byte vectors (f32 rows of 780 bytes).
  const auto vectors = spec_of({17, 3, 31, 5, 21, 2, 17, 195}, {4, 3, 0, 2, 1, 6, 5, 7}, DType::f32);
  CHECK(vectors.family == RearrangeFamily::row);
  CHECK(vectors.vector_rows);
  // Rows of 8-byte units take segment tiles (f32 rows of 72 bytes), and so do rows of 2-byte units
  // of 160 to 255 bytes (u8 rows of 234 bytes); rows of 16-byte units (80 bytes) stay rows, unless
  // the rows are under a 32-byte sector (u8 rows of 15 bytes), which take runs tiles.
  const auto eight = spec_of({2282, 4869, 18}, {1, 0, 2}, DType::f32);
  CHECK(eight.family == RearrangeFamily::segments);
  CHECK(eight.unit_bytes == 8);
  CHECK(spec_of({2282, 4869, 20}, {1, 0, 2}, DType::f32).family == RearrangeFamily::row);
  const auto pairs = spec_of({755, 1020, 78, 3}, {1, 0, 2, 3}, DType::u8);
  CHECK(pairs.family == RearrangeFamily::segments);
  CHECK(pairs.unit_bytes == 2);
  CHECK(pairs.segment == 117);
  CHECK(spec_of({94, 133, 4, 81, 2, 15}, {3, 0, 1, 4, 2, 5}, DType::u8).family == RearrangeFamily::runs);
}

TEST_CASE("tiles: small units split a group evenly when power-of-two tiles would idle, and a block walks two tiles") {
  // Group B = 5 x 112 = 560 f16 units: 512 + 48 would leave 45% of the second tile idle.
  const auto& uneven = aligned(permute_plan({15, 15, 15, 32, 5, 112}, {2, 0, 4, 1, 5, 3}, DType::f16));
  CHECK(uneven.spec.family == RearrangeFamily::packed);
  CHECK(uneven.spec.tile_b == 280);
  CHECK_FALSE(uneven.spec.bounds);
  // 480 units in four tiles of 128 idle 6%: the power-of-two tile stays.
  const auto& near = aligned(permute_plan({15, 15, 32, 15, 15, 32}, {1, 5, 4, 0, 3, 2}, DType::f16));
  CHECK(near.spec.tile_a == 128);
  CHECK(near.spec.tile_b == 128);
  // 4-byte units too: 560 units in five tiles of 128 idle 12.5%, so the power-of-two tile stays.
  const auto& f32 = aligned(permute_plan({15, 15, 15, 32, 5, 112}, {2, 0, 4, 1, 5, 3}, DType::f32));
  CHECK((f32.spec.tile_b & (f32.spec.tile_b - 1)) == 0);
  for (const auto* v : {&uneven, &near, &f32}) CHECK(v->grid == (v->args.num_tiles + 1) / 2);
}

TEST_CASE("tiles: over a 2-dim canonical form of 4- to 16-byte units a block walks one tile, over others two") {
  const auto tiles_per_block = [](const plan::RearrangeVariant& v) {
    REQUIRE((v.spec.family == RearrangeFamily::transpose || v.spec.family == RearrangeFamily::packed));
    return (v.args.num_tiles + v.grid - 1) / v.grid;
  };
  // Two dims: one tile per block for f32 and f64, two for 1- and 2-byte units.
  for (const auto& [type, per_block] : {std::pair{DType::f32, 1}, std::pair{DType::f64, 1},
                                        std::pair{DType::u8, 2}, std::pair{DType::f16, 2}}) {
    const auto flat = aligned(permute_plan({14900, 13420}, {1, 0}, type));
    CHECK(flat.spec.num_dims == 2);
    CHECK(tiles_per_block(flat) == per_block);
  }
  // f64 pairs move as 16-byte units: one. 4-byte units over three dims: two.
  const auto pairs = aligned(permute_plan({1490, 1342, 2}, {1, 0, 2}, DType::f64));
  CHECK(pairs.spec.unit_bytes == 16);
  CHECK(pairs.spec.num_dims == 2);
  CHECK(tiles_per_block(pairs) == 1);
  const auto batched = aligned(permute_plan({6, 1490, 1342}, {0, 2, 1}, DType::f32));
  CHECK(batched.spec.num_dims == 3);
  CHECK(tiles_per_block(batched) == 2);
}

TEST_CASE("tiles: blocks count tiles along A first unless A's rows are many times longer in units") {
  // f64 [5, 6567, 6091] 2,1,0: 64-unit tiles along A's 32835 units (twice as long as a square's, for
  // its single-unit stores), 32-unit tiles along B's 6091: A's rows are under 8 times as long, so A
  // goes first. (The wide case below goes B first on its rows' lengths, with under 8 times the tiles.)
  const auto& rect = aligned(permute_plan({5, 6567, 6091}, {2, 1, 0}, DType::f64));
  REQUIRE(rect.spec.family == RearrangeFamily::packed);
  CHECK((rect.spec.tile_a == 64 && rect.spec.tile_b == 32));
  CHECK(rect.spec.a_first);
  // f32 [5, 7, 383, 27, 4, 138] 4,5,3,2,1,0: 256 x 16 tiles, 53 along A's 13405 units to 35 along B's
  // 552: under 8 times the tiles, yet A's rows are 24 times longer, so B goes first.
  const auto& wide = aligned(permute_plan({5, 7, 383, 27, 4, 138}, {4, 5, 3, 2, 1, 0}, DType::f32));
  REQUIRE(wide.spec.family == RearrangeFamily::packed);
  CHECK((wide.spec.tile_a == 256 && wide.spec.tile_b == 16));
  CHECK_FALSE(wide.spec.a_first);
  // f32 [65424, 3057] 1,0: square tiles, A's rows 21 times longer: B first.
  const auto& tall = aligned(permute_plan({65424, 3057}, {1, 0}, DType::f32));
  REQUIRE(tall.spec.family == RearrangeFamily::transpose);
  CHECK_FALSE(tall.spec.a_first);
  // Word tiles too: u8 [42927, 4535] 1,0, 112 x 64 units, 384 tiles along A to 71 along B, A's rows
  // 9.5 times longer: B first.
  const auto& words = aligned(permute_plan({42927, 4535}, {1, 0}, DType::u8));
  REQUIRE(words.spec.family == RearrangeFamily::words);
  CHECK((words.spec.tile_a == 112 && words.spec.tile_b == 64));
  CHECK_FALSE(words.spec.a_first);
}

TEST_CASE("blocks: tiles that span a whole group and fit 128 threads run there at twice the blocks per SM") {
  // B spans the whole 4-unit dim and the tile fits a half-size block.
  const auto& small = aligned(permute_plan({3, 21999, 668, 4}, {0, 1, 3, 2}, DType::u8));
  CHECK(small.spec.family == RearrangeFamily::packed);
  CHECK(small.spec.tile_b == 4);
  CHECK(small.spec.threads == 128);
  CHECK(small.spec.min_blocks == 6);
  // A whole-group tile whose linear loads would not fit a half-size block keeps 256 threads.
  const auto& linear = aligned(permute_plan({248, 3888, 169}, {0, 2, 1}, DType::f16));
  CHECK(linear.spec.load_linear > 0);
  CHECK(linear.spec.tile_b == 169);
  CHECK(linear.spec.threads == 256);
  // Pieces of long rows on both sides keep 256-thread blocks.
  const auto& rows = aligned(permute_plan({22718, 6010}, {1, 0}, DType::f16));
  CHECK(rows.spec.family == RearrangeFamily::transpose);
  CHECK(rows.spec.tile_a < 6010);
  CHECK(rows.spec.tile_b < 22718);
  CHECK(rows.spec.threads == 256);
  // Word tiles: 128 threads and half the B words, six blocks per SM...
  auto check_words = [](const plan::RearrangeVariant& v, int threads, int tile_b, int min_blocks) {
    CHECK(v.spec.family == RearrangeFamily::words);
    CHECK(v.spec.threads == threads);
    CHECK(v.spec.tile_b == tile_b);
    CHECK(v.spec.min_blocks == min_blocks);
  };
  check_words(aligned(permute_plan({55454, 3512}, {1, 0}, DType::u8)), 128, 64, 6);
  // Funnel-shifted loads (odd source pitch) hold two words per row, 8 B words at 128 threads,
  // stretched to 16: a row's pieces then touch 3 sectors per 64 bytes, not 4.
  const auto& shifted = aligned(permute_plan({6001, 19015}, {1, 0}, DType::u8));
  CHECK(shifted.spec.skew_load);
  check_words(shifted, 128, 64, 6);
  // ...but not where the stretched tile would be evened out: B of 65 units keeps three tiles of 24.
  check_words(aligned(permute_plan({3001, 65}, {1, 0}, DType::u8)), 128, 24, 6);
  // A B group of 66 units at byte-aligned pointers: three even tiles of 24 units, not 32 + 32 + 2.
  const auto uneven = permute_plan({3, 4, 40, 35, 36, 5, 2, 33}, {3, 2, 7, 6, 0, 4, 1, 5}, DType::u8);
  check_words(plan::variant_for_pointers(uneven, 1), 128, 24, 6);
  // ...unless one 256-thread tile spans the whole B group (88 units), which is not split.
  check_words(aligned(permute_plan({2117473, 88}, {1, 0}, DType::u8)), 256, 88, 3);
  // 2-byte units take twice the B their load blocks give (on a plain 2-D transpose, blocks of 4 words
  // a row): 32 B units there, not 16, and over composite groups, whose 6 KB cap keeps it at 32;
  // a short A group (39 units, funnel-shifted loads) had 24 B units; twice its budget passes one run
  // of 16 words and is cut back to the run: 32 (in its word-tile candidate: the planned tile stores A
  // whole in linear vectors since narrow_store_aspect).
  check_words(aligned(permute_plan({5699, 34561}, {1, 0}, DType::f16)), 128, 32, 6);
  const std::vector<plan::RearrangeVariant> short_a =
      plan::tuning_candidates(permute_plan({39, 3123589}, {1, 0}, DType::f16));
  const auto word_tile = std::find_if(short_a.begin(), short_a.end(), [](const plan::RearrangeVariant& v) {
    return v.spec.family == RearrangeFamily::words && v.spec.store_words == 1;
  });
  REQUIRE(word_tile != short_a.end());
  check_words(*word_tile, 128, 32, 6);
  // 1-byte units over composite groups: four blocks where the tile stays within 6 KB (A = 76 units:
  // 64 B units), two over a full A group (112 units plus a skew vector: 32), and two with 64-bit indices.
  check_words(aligned(permute_plan({143, 12, 133, 12, 41}, {2, 1, 4, 3, 0}, DType::u8)), 128, 64, 6);
  check_words(aligned(permute_plan({4583, 4151, 2, 4}, {2, 3, 1, 0}, DType::u8)), 128, 32, 6);
  const auto& wide = aligned(permute_plan({480, 5, 35, 4, 33, 2, 3, 36}, {7, 6, 5, 0, 3, 2, 1, 4}, DType::u8));
  CHECK(wide.spec.index64);
  check_words(wide, 128, 32, 6);
  // A whole B group of 64 units that a 128-thread tile over a full composite A does not span: one
  // 256-thread tile takes all of it (the 6 KB cap is for 128-thread tiles).
  check_words(aligned(permute_plan({999, 4, 16}, {2, 1, 0}, DType::u8)), 256, 64, 3);
  // A B group of 37 units longer than a 128-thread tile stays split: 256 threads span only the
  // groups of up to 16 words that rule was measured on.
  check_words(aligned(permute_plan({13, 4, 60, 49, 19, 37}, {0, 1, 2, 5, 4, 3}, DType::f16)), 128, 20, 6);
}

TEST_CASE("blocks: tiles 16 times longer on one side than the other halve that side in 128-thread blocks, in "
          "1-, 2- and 8-byte units") {
  // u8 [4, 79, 57, 2, 194, 2, 11] 2,3,6,5,0,1,4: a 512 x 22 tile of 256 threads becomes 256 x 22 in
  // 128 threads, at twice the blocks per SM.
  const plan::RearrangeSpec halved =
      aligned(permute_plan({4, 79, 57, 2, 194, 2, 11}, {2, 3, 6, 5, 0, 1, 4}, DType::u8)).spec;
  CHECK((halved.tile_a == 256 && halved.tile_b == 22 && halved.threads == 128 && halved.min_blocks == 6));
  // f16 [21, 13, 2, 52, 42, 4, 23] 0,3,1,6,2,5,4: 336 x 23 is under 16 times as long; it keeps 256 threads.
  const plan::RearrangeSpec kept =
      aligned(permute_plan({21, 13, 2, 52, 42, 4, 23}, {0, 3, 1, 6, 2, 5, 4}, DType::f16)).spec;
  CHECK((kept.tile_a == 336 && kept.tile_b == 23 && kept.threads == 256));
  // u8 [21, 11, 8, 50, 5, 7, 2, 16] 3,1,7,6,2,5,4,0: the 16 KiB tile stores single bytes; the 32 KiB
  // tile that spans more dims is weighed first, and taken.
  const plan::RearrangeSpec larger =
      aligned(permute_plan({21, 11, 8, 50, 5, 7, 2, 16}, {3, 1, 7, 6, 2, 5, 4, 0}, DType::u8)).spec;
  CHECK((larger.tile_a == 1024 && larger.tile_b == 32 && larger.threads == 256));
  // 4-byte units keep their tile: f32 [5, 7, 383, 27, 4, 138] 4,5,3,2,1,0 stays 256 x 16; so do
  // 16-byte units: f32 [2, 110, 291, 4] 1,2,0,3 (units of 4 elements) stays 2 x 512.
  const plan::RearrangeSpec f32 =
      aligned(permute_plan({5, 7, 383, 27, 4, 138}, {4, 5, 3, 2, 1, 0}, DType::f32)).spec;
  CHECK((f32.tile_a == 256 && f32.tile_b == 16 && f32.threads == 256));
  const plan::RearrangeSpec wide =
      aligned(permute_plan({2, 110, 291, 4}, {1, 2, 0, 3}, DType::f32)).spec;
  CHECK((wide.unit_bytes == 16 && wide.tile_a == 2 && wide.tile_b == 512 && wide.threads == 256));
}

TEST_CASE("blocks: 8-byte tiles of 16-byte vectors on both sides take three blocks per SM, others keep theirs") {
  for (const auto& [shape, perm] : std::vector<std::pair<std::vector<std::int64_t>, std::vector<int>>>{
           {{8192, 24576}, {1, 0}}, {{35, 5, 4, 40, 3, 33, 36, 2}, {7, 2, 5, 4, 0, 6, 1, 3}}}) {
    CAPTURE(shape);
    const auto& tile = aligned(permute_plan(shape, perm, DType::f64));
    REQUIRE((tile.spec.family == RearrangeFamily::transpose || tile.spec.family == RearrangeFamily::packed));
    CHECK((tile.spec.vec_a == 2 && tile.spec.vec_b == 2));
    CHECK(tile.spec.tile_a * tile.spec.tile_b > 2048);  // not halved to fit the register budget
    CHECK(tile.spec.min_blocks == 3);
  }
  // Single-unit loads (an odd source pitch) keep two blocks per SM.
  const auto& narrow = aligned(permute_plan({2320, 59, 385}, {2, 1, 0}, DType::f64));
  REQUIRE(narrow.spec.family == RearrangeFamily::transpose);
  CHECK(narrow.spec.vec_b == 1);
  CHECK(narrow.spec.min_blocks == 2);
}

TEST_CASE("blocks: packed tiles of 2- and 4-byte units with 16-byte vectors on both sides take three blocks per SM "
          "under 32 KiB where they store aligned; 32 KiB tiles, transposes and skewed stores keep two") {
  enum class Keeps { none, large, transpose, skewed };  // why a tile keeps two blocks
  struct Case {
    std::vector<std::int64_t> shape;
    std::vector<int> perm;
    DType dtype;
    Keeps keeps;
  };
  for (const Case& c : std::vector<Case>{
           {{2, 2, 22, 20, 3, 2, 18, 3, 3, 24, 2, 2}, {4, 6, 9, 7, 1, 5, 2, 10, 8, 11, 0, 3}, DType::f16, Keeps::none},
           {{2, 22, 3, 3, 2, 2, 20, 18, 2, 2, 24, 3}, {11, 6, 10, 2, 4, 8, 7, 9, 3, 1, 5, 0}, DType::f32, Keeps::none},
           {{4, 2, 2, 28, 5, 54, 24, 55}, {5, 0, 6, 7, 1, 4, 3, 2}, DType::f16, Keeps::large},
           {{20, 49, 40, 47, 54, 2}, {5, 4, 3, 2, 1, 0}, DType::f32, Keeps::large},
           {{2209872, 48}, {1, 0}, DType::f16, Keeps::transpose},
           {{4, 4, 52, 3, 185, 12, 22}, {2, 0, 3, 5, 1, 6, 4}, DType::f16, Keeps::skewed},
       }) {
    CAPTURE(c.shape);
    const plan::RearrangeSpec& s = aligned(permute_plan(c.shape, c.perm, c.dtype)).spec;
    CHECK(s.unit_bytes * s.vec_a == 16);
    CHECK(s.unit_bytes * s.vec_b == 16);
    CHECK_FALSE(s.store_linear);
    const bool large = std::int64_t{s.tile_a} * s.tile_b * s.unit_bytes >= 32 * 1024;
    CHECK(large == (c.keeps == Keeps::large));
    CHECK((s.family == RearrangeFamily::transpose) == (c.keeps == Keeps::transpose));
    CHECK(s.skew_store == (c.keeps == Keeps::skewed));
    CHECK(s.min_blocks == (c.keeps == Keeps::none ? 3 : 2));
  }
}

TEST_CASE("index width: 32-bit until offsets approach 2^31 units") {
  CHECK_FALSE(aligned(permute_plan({8192, 8192}, {1, 0}, DType::f32)).spec.index64);
  CHECK(aligned(permute_plan({46341, 46341}, {1, 0}, DType::u8)).spec.index64);
}

TEST_CASE("the specialization excludes outer extents: one kernel for every batch size") {
  const std::string key = [] {
    const auto& v = aligned(permute_plan({2, 512, 32, 128}, {0, 2, 1, 3}, DType::f16));
    return plan::kernel_label(v.spec, v.args);
  }();
  for (std::int64_t batch : {3, 17, 64}) {
    const auto& v = aligned(permute_plan({batch, 512, 32, 128}, {0, 2, 1, 3}, DType::f16));
    CHECK(plan::kernel_label(v.spec, v.args) == key);
  }
  const auto batched = aligned(permute_plan({2, 4096, 768}, {0, 2, 1}, DType::f32));
  CHECK(batched.spec.family == RearrangeFamily::transpose);
  for (std::int64_t batch : {3, 16, 300}) {
    const auto& v = aligned(permute_plan({batch, 4096, 768}, {0, 2, 1}, DType::f32));
    CHECK(plan::kernel_label(v.spec, v.args) == plan::kernel_label(batched.spec, batched.args));
  }
  // Exact mode bakes extents into the key.
  RearrangeOptions exact;
  exact.exact = true;
  const auto a = permute_plan({2, 512, 32, 128}, {0, 2, 1, 3}, DType::f16, exact);
  const auto b = permute_plan({3, 512, 32, 128}, {0, 2, 1, 3}, DType::f16, exact);
  CHECK(plan::kernel_label(aligned(a).spec, aligned(a).args) != plan::kernel_label(aligned(b).spec, aligned(b).args));
}

TEST_CASE("alignment variants: narrower pointers pick narrower units, never wider") {
  const auto p = permute_plan({64, 512, 32, 128}, {0, 2, 1, 3}, DType::f16);
  for (std::uintptr_t bits : {16u, 8u, 4u, 2u}) {
    const auto& v = plan::variant_for_pointers(p, bits);
    CHECK(static_cast<std::uintptr_t>(v.spec.unit_bytes) <= bits);
  }
  CHECK(plan::variant_for_pointers(p, 2).spec.unit_bytes == 2);
  RearrangeOptions four;
  four.assumed_alignment = 4;
  const auto q = permute_plan({64, 512, 32, 128}, {0, 2, 1, 3}, DType::f16, four);
  CHECK(plan::variant_for_pointers(q, 0).spec.unit_bytes == 4);
}

TEST_CASE("alignment variants: a plan object plans the assumed alignment, the others when asked, as the eager plan does") {
  for (DType dtype : {DType::u8, DType::f16, DType::f32}) {
    const TensorDesc view = permuted(desc({37, 6, 53, 11}, {}, dtype), {2, 0, 3, 1});
    const TensorDesc dst = desc(view.shape, {}, dtype);
    const plan::RearrangePlanData every = plan::plan_rearrange_data(dst, view, {});
    plan::RearrangePlanData lazy = plan::plan_rearrange_data(dst, view, {}, plan::PlannedLevels::assumed);
    REQUIRE(lazy.variants.size() == 1);
    for (int level = 0; level < plan::kAlignmentLevels - 1; ++level) CHECK(lazy.variant_for_level[level] == plan::kUnplanned);
    CHECK(plan::describe(plan::with_every_level(lazy)) == plan::describe(every));
    for (int level : {1, 0, 3, 2}) {  // in launch order, not the eager order
      const int index = plan::plan_level(lazy, level);
      CHECK(index == lazy.variant_for_level[level]);
      const plan::RearrangeVariant& want = plan::variant_for_pointers(every, std::uintptr_t{1} << level);
      CHECK(lazy.variants[static_cast<std::size_t>(index)].spec == want.spec);
      CHECK(lazy.variants[static_cast<std::size_t>(index)].form == want.form);
    }
    CHECK(lazy.variants.size() == every.variants.size());
    CHECK(lazy.variants.size() <= static_cast<std::size_t>(plan::kMaxVariants));
  }
  // A tuned aligned variant (here one that differs by its grid alone) stays with the assumed
  // alignment: lower levels planned later get the variants an untuned plan has, grid included.
  {
    const TensorDesc view = permuted(desc({96, 3, 130}, {}, DType::u8), {2, 1, 0});
    const TensorDesc dst = desc(view.shape, {}, DType::u8);
    const plan::RearrangePlanData every = plan::plan_rearrange_data(dst, view, {});
    plan::RearrangePlanData lazy = plan::plan_rearrange_data(dst, view, {}, plan::PlannedLevels::assumed);
    const std::vector<plan::RearrangeVariant> candidates = plan::tuning_candidates(lazy);
    const auto other_grid = std::find_if(candidates.begin(), candidates.end(), [&](const plan::RearrangeVariant& c) {
      return c.spec == lazy.variants.front().spec && c.grid != lazy.variants.front().grid;
    });
    REQUIRE(other_grid != candidates.end());
    plan::choose_variant(lazy, *other_grid);
    for (int level = 0; level < plan::kAlignmentLevels - 1; ++level) {
      const plan::RearrangeVariant& got = lazy.variants[static_cast<std::size_t>(plan::plan_level(lazy, level))];
      const plan::RearrangeVariant& want = plan::variant_for_pointers(every, std::uintptr_t{1} << level);
      CHECK(got.spec == want.spec);
      CHECK(got.grid == want.grid);
    }
    CHECK(plan::variant_for_pointers(lazy, 0).grid == other_grid->grid);
  }
  // A plan object's description lists every level, as a plan of every level does.
  const TensorDesc view = permuted(desc({37, 6, 53, 11}, {}, DType::u8), {2, 0, 3, 1});
  CHECK(plan_rearrange(desc(view.shape, {}, DType::u8), view).describe() ==
        plan::describe(plan::plan_rearrange_data(desc(view.shape, {}, DType::u8), view, {})));
}

TEST_CASE("tiles: u8 tiles of 8-byte stores take A twice as long only into rows that start off 32-byte sectors") {
  // Rows of 16384 bytes start on sectors: the square tile.
  const plan::RearrangeSpec on_sectors = aligned(permute_plan({16384, 16384}, {1, 0}, DType::u8)).spec;
  CHECK(on_sectors.tile_a == 128);
  CHECK(on_sectors.tile_b == 128);
  CHECK(on_sectors.vec_a == 8);
  // Rows of 520 bytes start 8 bytes off sectors: A grows and keeps its 8-byte vectors.
  const plan::RearrangeSpec off_sectors = aligned(permute_plan({520, 4096}, {1, 0}, DType::u8)).spec;
  CHECK(off_sectors.tile_a > 128);
  CHECK(off_sectors.vec_a == 8);
}

TEST_CASE("tiles: 8-byte units storing single units take A twice as long where B keeps its dims") {
  // f64 [4, 529, 259, 365] 3,0,2,1: 8-byte stores along A's 529-unit rows (an odd destination pitch):
  // the 32 x 64 tile becomes 64 x 32.
  const plan::RearrangeSpec longer = aligned(permute_plan({4, 529, 259, 365}, {3, 0, 2, 1}, DType::f64)).spec;
  CHECK(longer.family == RearrangeFamily::transpose);
  CHECK((longer.tile_a == 64 && longer.tile_b == 32 && longer.vec_a == 1));
  // f64 [27, 2, 31, 17, 34, 6, 34] 4,6,1,5,2,3,0: the longer tile's B would drop a dim, so the tile
  // stays square, B over two dims.
  const plan::RearrangeSpec kept =
      aligned(permute_plan({27, 2, 31, 17, 34, 6, 34}, {4, 6, 1, 5, 2, 3, 0}, DType::f64)).spec;
  CHECK((kept.tile_a == 64 && kept.tile_b == 64 && kept.dims_b == 2 && kept.vec_a == 1));
  // Tiles that store 16-byte vectors keep their square tile.
  const plan::RearrangeSpec wide = aligned(permute_plan({4, 528, 259, 364}, {3, 0, 2, 1}, DType::f64)).spec;
  CHECK((wide.vec_a == 2 && wide.tile_a == wide.tile_b));
}

TEST_CASE("tiles: A's chain passes B's first dim over destination runs under 128 bytes in 1- and 2-byte units, "
          "under 64 bytes in wider units") {
  // [13, 40, 2, 2, 24, 35, 6, X] 6,4,1,3,5,0,7,2: a 2-unit A, then B's first dim (X units) in dst.
  auto a_pass = [](std::int64_t x, DType dtype) {
    return aligned(permute_plan({13, 40, 2, 2, 24, 35, 6, x}, {6, 4, 1, 3, 5, 0, 7, 2}, dtype)).spec.a_pass;
  };
  CHECK(a_pass(17, DType::f16) == 17);  // 68-byte runs
  CHECK(a_pass(40, DType::u8) == 40);   // 80 bytes
  CHECK(a_pass(40, DType::f16) == 0);   // 160 bytes
  CHECK(a_pass(12, DType::f32) == 0);   // 96 bytes
}

TEST_CASE("tiles: B's chain passes A's second dim where B's first dim is short, in units of up to 4 bytes") {
  // [4, 50, 44, 18, 11, 11, 5, 2] 5,7,2,4,0,1,6,3: B's first dim holds 2 units, and A's second dim (5
  // units, after A's first of 18) continues it in the source: B's chain passes 18 x 5 = 90 A units,
  // more than the side (64 units) of the volume the tile fits in.
  auto plan_of = [](DType dtype) {
    return aligned(permute_plan({4, 50, 44, 18, 11, 11, 5, 2}, {5, 7, 2, 4, 0, 1, 6, 3}, dtype)).spec;
  };
  for (DType dtype : {DType::u8, DType::f16, DType::f32}) {
    const plan::RearrangeSpec s = plan_of(dtype);
    INFO("unit " << s.unit_bytes);
    CHECK(s.b_chain == 2);
    CHECK(s.dims_b == 3);
  }
  // 8-byte units keep B's one dim (and its 2-unit loads).
  const plan::RearrangeSpec wide = plan_of(DType::f64);
  CHECK(wide.b_chain == 0);
  CHECK(wide.dims_b == 1);
}

TEST_CASE("families: f32 transposes with odd pitches take tiles of skewed 16-byte stores; skewed tiles are a "
          "tuning candidate") {
  // Odd pitches on both sides ([195, 1025641], [1021, 1029]) or in the destination ([1025641, 195],
  // [677, 1931, 153]): 64 x 64 tiles storing 60 units of each destination row in aligned vectors.
  for (const auto& [shape, perm] : std::vector<std::pair<std::vector<std::int64_t>, std::vector<int>>>{
           {{195, 1025641}, {1, 0}}, {{1021, 1029}, {1, 0}}, {{1025641, 195}, {1, 0}}, {{677, 1931, 153}, {2, 0, 1}}}) {
    const plan::RearrangeVariant v = aligned(permute_plan(shape, perm, DType::f32));
    CHECK(v.spec.family == RearrangeFamily::transpose);
    CHECK((v.spec.skew_store && v.spec.vec_a == 4 && v.spec.tile_a == 64 && v.spec.tile_b == 64));
    // Tiles step by the 60 units a row stores, from up to 3 units before each row.
    CHECK(v.args.tiles_y.value == (v.args.extent_a + 3 + 59) / 60);
  }
  int skewed = 0;
  for (const plan::RearrangeVariant& c : plan::tuning_candidates(permute_plan({1021, 1029}, {1, 0}, DType::f32)))
    skewed += c.spec.family == RearrangeFamily::skewed;
  CHECK(skewed > 0);
}

TEST_CASE("tuning candidates: tiles longer along either group and tiles whose chain passes the other group") {
  // The default is a 256 x 64 tile (8-byte stores, the widest for 1-byte units, along an A twice as
  // long as a square's); measured planning also times tiles longer along A and longer along B, at a
  // full and a quarter volume.
  const plan::RearrangePlanData longer_a = permute_plan({31, 8, 102, 289, 24}, {0, 4, 3, 1, 2}, DType::u8);
  const plan::RearrangeSpec& planned = aligned(longer_a).spec;
  REQUIRE(planned.tile_a == 256);
  REQUIRE(planned.tile_b == 64);
  const std::vector<plan::RearrangeVariant> candidates = plan::tuning_candidates(longer_a);
  auto has = [&](auto&& predicate) { return std::any_of(candidates.begin(), candidates.end(), predicate); };
  CHECK(has([&](const plan::RearrangeVariant& c) { return c.spec.tile_a > 256 && c.spec.tile_b < 64; }));
  CHECK(has([&](const plan::RearrangeVariant& c) { return c.spec.tile_a == 128 && c.spec.tile_b == 128; }));
  CHECK(has([&](const plan::RearrangeVariant& c) { return c.spec.tile_a < 128 && c.spec.tile_b > 128; }));
  // B's chain passes A's first dims by default here (source runs of 31 units); A's chain passing
  // B's first dims is a candidate too, although the default plan's destination runs are not short.
  const plan::RearrangePlanData passing = permute_plan({3, 35, 9, 15, 126, 2, 31}, {2, 4, 1, 3, 6, 5, 0}, DType::f16);
  REQUIRE(aligned(passing).spec.b_chain > 0);
  REQUIRE(aligned(passing).spec.a_pass == 0);
  const std::vector<plan::RearrangeVariant> passing_candidates = plan::tuning_candidates(passing);
  CHECK(std::any_of(passing_candidates.begin(), passing_candidates.end(),
                    [](const plan::RearrangeVariant& c) { return c.spec.a_pass > 0; }));
}

TEST_CASE("tuning candidates: the planned kernel with extents and strides baked in, once, unless the plan is exact") {
  const std::vector<std::int64_t> shape{44, 9, 8, 2, 47, 2, 5, 55};
  const std::vector<int> perm{2, 6, 5, 3, 4, 0, 7, 1};
  // Every candidate has a name of its own (a tuning record names its choice), and the planned one
  // stays first (measured planning times it as the default).
  auto check_names_distinct = [](const std::vector<plan::RearrangeVariant>& candidates) {
    std::set<std::string> names;
    for (const plan::RearrangeVariant& c : candidates) CHECK(names.insert(plan::candidate_name(c)).second);
  };
  const plan::RearrangePlanData generic = permute_plan(shape, perm, DType::u8);
  const std::vector<plan::RearrangeVariant> candidates = plan::tuning_candidates(generic);
  const plan::RearrangeVariant& planned = aligned(generic);
  REQUIRE_FALSE(planned.spec.exact);
  CHECK(candidates.front().spec == planned.spec);
  check_names_distinct(candidates);
  std::vector<const plan::RearrangeVariant*> baked;
  for (const plan::RearrangeVariant& c : candidates)
    if (c.spec.exact) baked.push_back(&c);
  REQUIRE(baked.size() == 1);
  // The same kernel as an exact plan of the view compiles: same spec, grid, form and arguments.
  const plan::RearrangeVariant& exact_planned = aligned(permute_plan(shape, perm, DType::u8, {.exact = true}));
  CHECK(baked.front()->spec == exact_planned.spec);
  CHECK(baked.front()->grid == exact_planned.grid);
  CHECK(baked.front()->form == exact_planned.form);
  CHECK(plan::rearrange_key(baked.front()->spec, baked.front()->args) ==
        plan::rearrange_key(exact_planned.spec, exact_planned.args));

  // An exact plan adds no second copy of its planned kernel.
  const std::vector<plan::RearrangeVariant> exact_candidates =
      plan::tuning_candidates(permute_plan(shape, perm, DType::u8, {.exact = true}));
  check_names_distinct(exact_candidates);
  CHECK(std::count_if(exact_candidates.begin(), exact_candidates.end(), [&](const plan::RearrangeVariant& c) {
          return c.spec == exact_planned.spec && c.grid == exact_planned.grid;
        }) == 1);
  // A contiguous copy at the assumed alignment launches no kernel to bake.
  for (const plan::RearrangeVariant& c : plan::tuning_candidates(permute_plan({64, 128}, {0, 1}, DType::f32)))
    CHECK_FALSE(c.spec.exact);
}

TEST_CASE("plans describe themselves and their manifest line reproduces the canonical form") {
  const RearrangePlan plan = [] {
    const TensorDesc view = permuted(desc({64, 512, 32, 128}, {}, DType::f16), {0, 2, 1, 3});
    return plan_rearrange(desc(view.shape, {}, DType::f16), view);
  }();
  CHECK(plan.describe().find("family row") != std::string::npos);
  CHECK(plan.json().find("\"family\": \"row\"") != std::string::npos);
  CHECK(plan.manifest_line() ==
        "rearrange --dtype f16 --shape 64,32,512,128 --src-strides 2097152,128,4096,1 --dst-strides 2097152,65536,128,1");
  // A contiguous copy launches no kernel: nothing to precompile.
  CHECK(plan_rearrange(desc({5, 7}), desc({5, 7})).manifest_line().empty());
}

TEST_CASE("planning a rank-8 permute takes microseconds") {
  const TensorDesc view = permuted(desc({3, 4, 5, 6, 7, 8, 9, 10}), {7, 1, 5, 3, 0, 6, 2, 4});
  const TensorDesc dst = desc(view.shape);
  std::vector<double> us;
  for (int i = 0; i < 200; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const RearrangePlan plan = plan_rearrange(dst, view);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    CHECK(plan.impl().data.variants.size() >= 1);
  }
  std::sort(us.begin(), us.end());
  MESSAGE("plan_rearrange rank 8: median " << us[us.size() / 2] << " us");
  CHECK(us[us.size() / 2] < 100.0);
}

TEST_CASE("tables: filled once where tiles add to them without carries; composite groups beside a small tile take such tiles") {
  // B = 33 x 36 x 35 f32 units beside a 2-unit A tile: 1188 = 33 x 36 units instead of 2048, no bounds.
  const auto& beside_small = aligned(permute_plan({5, 4, 2, 40, 35, 3, 36, 33}, {1, 0, 4, 6, 5, 3, 7, 2}, DType::f32));
  CHECK(beside_small.spec.tile_a == 2);
  CHECK(beside_small.spec.tile_b == 1188);
  CHECK(beside_small.spec.fixed_b);
  CHECK_FALSE(beside_small.spec.bounds);
  // 1-byte units: B = 140 x 2 x 11 beside a 9-unit A tile takes 840 = 140 x 2 x 3 units, whole 8-unit
  // vectors though not 16 (11 in pieces of 3 leaves a partial last tile); its 140-unit dim, whole,
  // continues A in dst, so it stores runs of 140 B indices linearly.
  const auto& bytes_beside_small = aligned(permute_plan({90, 80, 9, 11, 2, 140}, {3, 1, 4, 0, 5, 2}, DType::u8));
  CHECK(bytes_beside_small.spec.tile_a == 9);
  CHECK(bytes_beside_small.spec.tile_b == 840);
  CHECK(bytes_beside_small.spec.fixed_b);
  CHECK(bytes_beside_small.spec.bounds);
  CHECK(bytes_beside_small.spec.store_linear > 0);
  CHECK(bytes_beside_small.spec.store_run == 140);
  // B (198 units) is whole; A's 64-unit tiles cut 35 x 36 across its dims, so only B's table is fixed
  // (the square tile, a tuning candidate: the default takes A four times as long, narrow_store_aspect).
  const std::vector<plan::RearrangeVariant> candidates =
      plan::tuning_candidates(permute_plan({40, 4, 36, 5, 35, 3, 33, 2}, {7, 1, 3, 6, 0, 5, 2, 4}, DType::u8));
  const auto whole_b = std::find_if(candidates.begin(), candidates.end(), [](const plan::RearrangeVariant& c) {
    return c.spec.family == RearrangeFamily::packed && c.spec.tile_a == 64 && c.spec.tile_b == c.args.extent_b;
  });
  REQUIRE(whole_b != candidates.end());
  CHECK(whole_b->spec.fixed_b);
  CHECK_FALSE(whole_b->spec.fixed_a);
  // A = 32 x 15 f16 units in tiles of 128: whole 32s times 4 of the last dim (its last tile partial).
  const auto& last_in_pieces = aligned(permute_plan({15, 15, 32, 15, 15, 32}, {1, 5, 4, 0, 3, 2}, DType::f16));
  CHECK(last_in_pieces.spec.dims_a == 2);
  CHECK(last_in_pieces.args.extent_a == 32 * 15);
  CHECK(last_in_pieces.spec.tile_a == 128);
  CHECK(last_in_pieces.spec.fixed_a);
  CHECK(last_in_pieces.spec.bounds);
}

TEST_CASE("blocks: slab tiles whose table-looked-up addresses overrun the register budget take four blocks per SM") {
  const auto& heavy = aligned(permute_plan({4, 12, 3, 4, 6, 12, 6, 4, 3, 3, 10}, {0, 5, 4, 9, 2, 1, 3, 6, 10, 8, 7}, DType::u8));
  CHECK(heavy.spec.b_chain > 0);
  CHECK(heavy.spec.threads == 128);
  CHECK(heavy.spec.min_blocks == 4);
  const auto& light = aligned(permute_plan({7, 3, 2, 4, 3, 5, 6, 5, 2, 3, 2, 2, 4, 8, 2},
                                           {1, 10, 3, 13, 0, 2, 6, 8, 9, 5, 14, 12, 4, 7, 11}, DType::u8));
  CHECK(light.spec.b_chain > 0);
  CHECK(light.spec.threads == 128);
  CHECK(light.spec.min_blocks == 6);
}

TEST_CASE("slab dims: a small whole tile grows by them rather than moving as one run, at 16 and 8 bytes") {
  // f16, innermost dims 2 x 2: A (3 dims, 60 units) x B (2 units). At 16 bytes the tile would store
  // as one 16-byte run and stay 60 x 2, under a unit per thread, so it was walked as gathers; at
  // 8 bytes it already grew by slab dims. Both alignments now take the grown tile (256 B units: B
  // grows through A's first dims, as tiles whose runs are under 64 bytes may; 120 before); at 16
  // bytes it stores runs of A x B's chain (2 B indices) in 16-byte vectors, at 8 bytes A vectors.
  const plan::RearrangePlanData p = permute_plan({2, 3, 7, 5, 3, 7, 7, 2, 6, 5, 2, 2, 6, 2, 2},
                                                 {0, 4, 7, 1, 2, 11, 5, 12, 6, 10, 9, 14, 8, 3, 13}, DType::f16);
  const auto& at16 = plan::variant_for_pointers(p, 0);
  const auto& at8 = plan::variant_for_pointers(p, 8);
  for (const plan::RearrangeVariant* v : {&at16, &at8}) {
    CHECK(v->spec.family == RearrangeFamily::packed);
    CHECK(v->spec.tile_a == 60);
    CHECK(v->spec.tile_b == 256);
    CHECK(v->spec.b_chain == 2);
  }
  CHECK(at16.spec.store_linear == 8);
  CHECK(at16.spec.store_run == 2);
  CHECK(at8.spec.store_linear == 0);
  // u8, a 4 x 30 tile that would load as one run (walked as gathers before): it grows along B by
  // slab dims and loads 2-byte micro-tile vectors instead.
  const auto& loads = aligned(permute_plan({2, 2, 5, 4, 8, 2, 2, 2, 5, 2, 5, 6, 4, 5, 6},
                                           {7, 6, 13, 9, 11, 10, 5, 0, 1, 4, 2, 8, 3, 14, 12}, DType::u8));
  CHECK(loads.spec.family == RearrangeFamily::packed);
  CHECK(loads.spec.load_linear == 0);
  CHECK(loads.spec.tile_a == 4);
  CHECK(loads.spec.b_chain == 30);
  CHECK(loads.spec.tile_b > 30);
  CHECK(loads.spec.vec_b == 2);
}

// Shared-memory wavefronts of a whole tile's staging writes (micro-tile m of thread pass r, its row
// j) and its stores' reads, warp by warp as the template issues them, and the fewest they could take.
std::pair<int, int> tile_wavefronts(const plan::RearrangeSpec& s) {
  const int micro_a = s.tile_a / s.vec_a, micro_b = s.tile_b / s.vec_b;
  const int bytes = s.vec_a * s.unit_bytes;
  int taken = 0, fewest = 0;
  for (int first = 0; first < micro_a * micro_b; first += 32)
    for (int j = 0; j < s.vec_b; ++j) {
      std::vector<int> writes;
      for (int m = first; m < std::min(first + 32, micro_a * micro_b); ++m)
        writes.push_back(test::tiled_smem_pos(s, m / micro_b * s.vec_a, m % micro_b * s.vec_b + j));
      taken += warp_wavefronts(writes, s.vec_a, s.unit_bytes);
      fewest += (static_cast<int>(writes.size()) * bytes + 127) / 128;
    }
  for (int first = 0; first < micro_a * s.tile_b; first += 32) {
    std::vector<int> reads;
    for (int k = first; k < std::min(first + 32, micro_a * s.tile_b); ++k)
      reads.push_back(test::tiled_smem_pos(s, k % micro_a * s.vec_a, k / micro_a));
    taken += warp_wavefronts(reads, s.vec_a, s.unit_bytes);
    fewest += (static_cast<int>(reads.size()) * bytes + 127) / 128;
  }
  return {taken, fewest};
}

// Shared-memory wavefronts of a linear-store tile's staging writes, every warp and row as the template
// issues them.
int linear_staging_wavefronts(const plan::RearrangeSpec& s) {
  const int micro_b = s.tile_b / s.vec_b, micro = s.tile_a / s.vec_a * micro_b;
  int taken = 0;
  for (int first = 0; first < micro; first += 32)
    for (int j = 0; j < s.vec_b; ++j) {
      std::vector<int> writes;
      for (int m = first; m < std::min(first + 32, micro); ++m)
        writes.push_back(test::tiled_smem_pos(s, m / micro_b * s.vec_a, m % micro_b * s.vec_b + j));
      taken += warp_wavefronts(writes, s.vec_a, s.unit_bytes);
    }
  return taken;
}

TEST_CASE("tiled: linear-store tiles whose staging writes fall in one bank rotate their store vectors") {
  // f16, a 56 x 256 tile stored in runs of 2 B indices: a warp's writes fall 896 bytes apart, in one
  // bank (31-way conflicts under Nsight Compute on the H200, 17% of copy).
  const plan::RearrangeVariant v = aligned(permute_plan({16, 28, 7, 65, 32, 9, 2}, {3, 5, 4, 1, 0, 6, 2}, DType::f16));
  const plan::RearrangeSpec& s = v.spec;
  CAPTURE(plan::kernel_label(s, v.args));
  REQUIRE(s.family == RearrangeFamily::packed);
  REQUIRE(s.store_linear == 8);
  REQUIRE(s.store_run == 2);
  CHECK(s.rotate_span > 0);
  plan::RearrangeSpec unrotated = s;
  unrotated.rotate_span = 0;
  CHECK(linear_staging_wavefronts(s) * 4 <= linear_staging_wavefronts(unrotated));
  // Tiles whose writes spread already keep their layout: one run per tile, 16-byte vectors staged.
  const plan::RearrangeVariant spread = aligned(permute_plan({561, 94, 2558}, {0, 2, 1}, DType::f16));
  CAPTURE(plan::kernel_label(spread.spec, spread.args));
  REQUIRE(spread.spec.store_linear > 0);
  CHECK(spread.spec.rotate_span == 0);
}

TEST_CASE("tiled: staging writes and the stores' reads take the fewest shared-memory wavefronts found") {
  struct Case {
    std::vector<std::int64_t> shape;
    std::vector<int> perm;
    DType dtype;
    bool conflict_free;
  };
  // Tiles whose rows padded by one vector conflicted: single 4-byte units 16 B indices to a warp (f32,
  // 2-way), 2-byte vectors beside single-unit loads (f16, 2-way), 4 x 8-byte micro-tiles (u8, 2-way),
  // and 8 x 4-byte micro-tiles over 36 B indices, which no candidate makes conflict-free (a swizzle
  // over 16 vectors stepped by 2 halves them); a 16-byte transpose keeps its swizzle.
  const std::vector<Case> cases = {{{113, 27, 9, 123, 59}, {4, 3, 1, 0, 2}, DType::f32, true},
                                   {{5128205, 39}, {1, 0}, DType::f32, true},
                                   {{2, 58, 41, 18, 26, 51}, {3, 1, 0, 5, 2, 4}, DType::f16, true},
                                   {{13, 6708, 376, 4}, {2, 0, 3, 1}, DType::u8, true},
                                   {{100000, 36}, {1, 0}, DType::u8, false},
                                   {{8192, 8192}, {1, 0}, DType::f32, true}};
  for (const Case& c : cases) {
    const plan::RearrangeVariant v = aligned(permute_plan(c.shape, c.perm, c.dtype));
    const plan::RearrangeSpec& s = v.spec;
    CAPTURE(plan::kernel_label(s, v.args));
    REQUIRE((s.family == RearrangeFamily::transpose || s.family == RearrangeFamily::packed));
    REQUIRE(s.load_linear == 0);
    REQUIRE(s.store_linear == 0);
    const auto [taken, fewest] = tile_wavefronts(s);
    if (c.conflict_free) {
      CHECK(taken == fewest);
    } else {
      plan::RearrangeSpec padded = s;
      padded.swizzle = false;
      padded.pitch = s.tile_a + s.vec_a;
      CHECK(s.swizzle_step > 1);
      CHECK(taken < tile_wavefronts(padded).first);
    }
  }
}
