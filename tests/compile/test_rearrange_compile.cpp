// rearrange kernels compile with NVRTC for sm_80 and sm_90: every family x unit size x index width
// (skewed, words, runs: the unit sizes they take), exact mode, and every alignment variant of representative plans.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <map>
#include <set>
#include <tuple>

#include "../host/rearrange_executor.hpp"
#include "jit/kernel_cache.hpp"
#include "jit/nvrtc.hpp"
#include "ops/rearrange/codegen.hpp"
#include "ops/rearrange/plan.hpp"

using namespace shapejit;
using plan::RearrangeFamily;

namespace {

plan::RearrangePlanData make(std::vector<std::int64_t> shape, std::vector<std::int64_t> src_strides, int elem,
                             bool exact = false) {
  const TensorDesc src{shape, std::move(src_strides), DType::u8, elem};
  RearrangeOptions options;
  options.exact = exact;
  return plan::plan_rearrange_data({std::move(shape), {}, DType::u8, elem}, src, options);
}

// A plan that permutes a contiguous `src_shape` by swapping its first two dims (the second of
// three keeps the innermost dim).
plan::RearrangePlanData swap_first_two(std::vector<std::int64_t> src_shape, int elem, bool exact = false) {
  std::vector<std::int64_t> strides = contiguous_strides(src_shape);
  std::swap(src_shape[0], src_shape[1]);
  std::swap(strides[0], strides[1]);
  return make(src_shape, strides, elem, exact);
}

// Representative plans of one family at element (= unit) size `elem`, small or past 32-bit indices.
plan::RearrangePlanData family_plan(RearrangeFamily family, int elem, bool big, bool exact = false) {
  const std::int64_t r = big ? 1 << 16 : 320, c = big ? 1 << 15 : 512;  // pitches of 16-byte multiples
  switch (family) {
    case RearrangeFamily::row: {  // rows of an odd count of units (unit = elem), at least 32 bytes (shorter
                                  // ones take runs tiles) and too short for 16-byte vectors, a slice of
                                  // source rows two units longer
      const std::int64_t length = std::max<std::int64_t>(7, 32 / elem + 1);
      return make({big ? r * c * 8 : r, length}, {length + 2, 1}, elem, exact);
    }
    case RearrangeFamily::transpose: return swap_first_two({r, c}, elem, exact);
    case RearrangeFamily::packed: {  // all dims of extent 2, reversed
      std::vector<std::int64_t> twos(big ? 31 : 12, 2), strides = contiguous_strides(twos);
      std::reverse(strides.begin(), strides.end());
      return make(twos, strides, elem, exact);
    }
    case RearrangeFamily::gather: return make({r, c}, {2 * c, 2}, elem, exact);  // a step-2 slice
    case RearrangeFamily::skewed:  // planned from odd pitches below
    case RearrangeFamily::words:
    case RearrangeFamily::runs:
    case RearrangeFamily::segments:
    case RearrangeFamily::copy: break;
  }
  return make({1}, {}, elem);
}

// The plan of copying contiguous `shape` permuted by `perm` (view dim i = source dim perm[i]).
plan::RearrangePlanData permute(const std::vector<std::int64_t>& shape, const std::vector<int>& perm, int elem) {
  const TensorDesc view = permuted({shape, {}, DType::u8, elem}, perm);
  return make(view.shape, view.strides, elem);
}

}  // namespace

TEST_CASE("tiles whose registers spill compile to their low-register variant where it spills less") {
  // Tiles of 16 store vectors or of many loads per thread, some of which spill with NVRTC 13.0
  // (sm_90) where their variant does not (H100, at full size: f16 [12,5,8,4,36,4,33,22] 51% -> 75%
  // of copy, u8 [41,5,236,8,28,17] 54% -> 62%). The GPU suite runs them. The first stores linear
  // runs of 128 B indices, whose passes kept hoisted offsets in both variants until its variant
  // read the thread index afresh there too (368 bytes with NVRTC 13.0, none with the variant; H200,
  // f16 [2,46,86,54,244] 1,2,4,3,0: 51% -> 95% of copy), so its variant must spill less.
  const std::vector<std::tuple<std::vector<std::int64_t>, std::vector<int>, int>> cases = {
      {{2, 2, 86, 54, 244}, {1, 2, 4, 3, 0}, 2},
      {{2, 5, 8, 4, 3, 4, 33, 22}, {2, 3, 6, 4, 0, 7, 1, 5}, 2},
      {{2, 3, 2, 2, 3, 18, 24, 22, 2, 3, 2, 2}, {7, 11, 3, 6, 8, 1, 2, 4, 10, 9, 0, 5}, 2},
      {{2, 19, 45, 6, 17, 6, 12}, {0, 4, 5, 3, 6, 2, 1}, 4},
      {{3, 5, 236, 8, 28, 17}, {4, 5, 0, 1, 3, 2}, 1},
  };
  int relieved = 0;
  bool linear_stores = true;  // the first case's
  for (const auto& [shape, perm, elem] : cases) {
    const plan::RearrangePlanData p = permute(shape, perm, elem);
    const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 0);
    INFO(plan::kernel_label(v.spec, v.args));
    REQUIRE((v.spec.family == RearrangeFamily::transpose || v.spec.family == RearrangeFamily::packed));
    const jit::Program program = codegen::rearrange_program(v, "test");
    REQUIRE(!program.low_register_options.empty());
    std::vector<std::string> low_options = program.options;
    low_options.insert(low_options.end(), program.low_register_options.begin(), program.low_register_options.end());
    int spilled = 0, spilled_low = 0;
    const auto first = jit::compile_to_cubin(program.source, "sm_90", program.options, program.label, &spilled);
    const auto low = jit::compile_to_cubin(program.source, "sm_90", low_options, program.label, &spilled_low);
    MESSAGE(plan::kernel_label(v.spec, v.args) << ": " << spilled << " bytes spilled, " << spilled_low
                                               << " with the variant");
    CHECK(jit::compile_program(program, "sm_90") == (spilled > 0 && spilled_low < spilled ? low : first));
    relieved += spilled_low < spilled;
    if (linear_stores) {
      CHECK(v.spec.store_linear > 0);
      CHECK(spilled_low < spilled);
      linear_stores = false;
    }
  }
  CHECK(relieved >= 1);  // the second compile ran
}

TEST_CASE("gathering runs tiles of more than 8 KiB compile for sm_80 and sm_90 without spilling") {
  // Up to twice the loads and stores per thread of an 8 KiB tile, at three blocks per SM: u8 tiles of 11,842
  // and 14,268 bytes, an f16 tile of 13,608 bytes.
  const std::vector<std::tuple<std::vector<std::int64_t>, std::vector<int>, int>> cases = {
      {{3, 5921, 2}, {0, 2, 1}, 1},
      {{4, 37, 3567, 4}, {3, 1, 0, 2}, 1},
      {{2, 6, 11, 189, 9}, {0, 2, 1, 4, 3}, 2},
  };
  for (const auto& [shape, perm, elem] : cases) {
    const plan::RearrangeVariant& v = plan::variant_for_pointers(permute(shape, perm, elem), 0);
    INFO(plan::kernel_label(v.spec, v.args));
    REQUIRE(v.spec.family == RearrangeFamily::runs);
    CHECK(v.spec.gather_stores);
    CHECK(plan::runs_tile_bytes(v.spec, v.args) > 8192);
    CHECK(plan::runs_tile_bytes(v.spec, v.args) <= 16384);
    const jit::Program program = codegen::rearrange_program(v, "test");
    for (const char* arch : {"sm_80", "sm_90"}) {
      INFO(arch);
      int spilled = -1;
      jit::compile_to_cubin(program.source, arch, program.options, program.label, &spilled);
      CHECK(spilled == 0);
    }
  }
}

TEST_CASE("every rearrange family, unit size and index width compiles for sm_80 and sm_90") {
  std::map<std::string, plan::RearrangeVariant> variants;  // by specialization key
  std::set<std::tuple<RearrangeFamily, int, bool>> covered;
  for (RearrangeFamily family :
       {RearrangeFamily::row, RearrangeFamily::transpose, RearrangeFamily::packed, RearrangeFamily::gather})
    for (int elem : {1, 2, 4, 8, 16})
      for (bool big : {false, true}) {
        const plan::RearrangePlanData p = family_plan(family, elem, big);
        const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 0);
        INFO(plan::describe(p));
        CHECK(v.spec.family == family);
        CHECK(v.spec.unit_bytes == elem);
        CHECK(v.spec.index64 == big);
        covered.insert({v.spec.family, v.spec.unit_bytes, v.spec.index64});
        variants.emplace(plan::kernel_label(v.spec, v.args), v);
      }
  CHECK(covered.size() == 40);
  // Transposes with odd row pitches on both sides: units of 4 bytes take tiles of skewed 16-byte
  // stores, units of 2 bytes (single-unit loads) word tiles of two units, and 2-byte units over an
  // even source pitch (4-byte loads) skewed stores too; skewed-family tiles are a tuning candidate of
  // each.
  for (int elem : {2, 4})
    for (bool big : {false, true})
      for (std::int64_t extra_column : {0, 1}) {
        if (elem == 4 && extra_column) continue;
        const std::int64_t r = big ? (1 << 17) + 1 : 301, c = (big ? (1 << 15) + 1 : 501) + extra_column;
        const plan::RearrangePlanData p = swap_first_two({r, c}, elem, !big);
        const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 0);
        INFO(plan::describe(p));
        if (elem == 2 && !extra_column)
          CHECK(v.spec.family == RearrangeFamily::words);
        else
          CHECK((v.spec.family == RearrangeFamily::transpose && v.spec.skew_store));
        CHECK(v.spec.unit_bytes == elem);
        CHECK(v.spec.index64 == big);
        variants.emplace(plan::kernel_label(v.spec, v.args), v);
        int skewed = 0;
        for (const plan::RearrangeVariant& candidate : plan::candidate_variants(v.form, !big, 16, 16))
          if (candidate.spec.family == RearrangeFamily::skewed) {
            variants.emplace(plan::kernel_label(candidate.spec, candidate.args), candidate);
            ++skewed;
          }
        CHECK(skewed > 0);
      }
  // Word tiles: 1-byte transposes with odd pitches, each skew mode (pointer alignment 16: rows
  // skewed where the pitch is odd; alignment 1: both sides), both index widths, and exact mode.
  for (bool big : {false, true})
    for (const auto& [rows, cols] : {std::pair{601, 512}, std::pair{512, 301}, std::pair{301, 501}}) {
      const std::int64_t r = big ? (std::int64_t{1} << 17) + rows : rows, c = big ? (1 << 15) + cols : cols;
      const plan::RearrangePlanData p = swap_first_two({r, c}, 1, !big);
      for (std::uintptr_t alignment : {16u, 1u}) {
        const plan::RearrangeVariant& v = plan::variant_for_pointers(p, alignment);
        INFO(plan::describe(p));
        CHECK(v.spec.family == RearrangeFamily::words);
        CHECK(v.spec.index64 == big);
        variants.emplace(plan::kernel_label(v.spec, v.args), v);
      }
    }
  // Word tiles over composite groups: [5, 61, 517] -> [517, 61, 5] (A = 5 x 61 in dst, skewed stores)
  // and [131, 5, 3, 37] -> [3, 5, 37, 131] (B = 37 x 3 x 5 in src for 1-byte units, 37 x 3 for
  // 2-byte ones), 1- and 2-byte units, both index widths, exact.
  for (int elem : {1, 2})
    for (bool big : {false, true})
      for (const auto& [shape, order] :
           {std::pair{std::vector<std::int64_t>{5, 61, 517}, std::vector<std::size_t>{2, 1, 0}},
            std::pair{std::vector<std::int64_t>{131, 5, 3, 37}, std::vector<std::size_t>{2, 1, 3, 0}}}) {
        std::vector<std::int64_t> sized = shape;
        if (big) sized[1] += std::int64_t{1} << 26;  // past 32-bit indices, groups unchanged
        const std::vector<std::int64_t> strides = contiguous_strides(sized);
        std::vector<std::int64_t> out_shape, out_strides;
        for (std::size_t k : order) {
          out_shape.push_back(sized[k]);
          out_strides.push_back(strides[k]);
        }
        const plan::RearrangePlanData p = make(out_shape, out_strides, elem, !big);
        const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 16);
        INFO(plan::describe(p));
        CHECK(v.spec.family == RearrangeFamily::words);
        CHECK(v.spec.unit_bytes == elem);
        CHECK(v.spec.dims_a + v.spec.dims_b > 2);
        CHECK(v.spec.index64 == big);
        variants.emplace(plan::kernel_label(v.spec, v.args), v);
      }
  // Runs tiles (a tuning candidate; the default for u8 tiles that move single bytes on both sides): a
  // short shared inner dim (rows of 5 units) under a transpose, for 1-, 2- and 4-byte units, both
  // index widths (bounds checked: 301 and 501 are tiled unevenly) and exact mode.
  for (int elem : {1, 2, 4})
    for (bool big : {false, true}) {
      const std::int64_t r = big ? (std::int64_t{1} << 19) + 301 : 301;
      const plan::RearrangePlanData p = swap_first_two({r, 501, 5}, elem, !big);
      std::set<std::string> runs;  // kernels: a candidate is also timed at other tiles per block
      for (const plan::RearrangeVariant& v : plan::candidate_variants(plan::variant_for_pointers(p, 16).form, !big, 16, 16))
        if (v.spec.family == RearrangeFamily::runs) {
          CHECK(v.spec.index64 == big);
          variants.emplace(plan::kernel_label(v.spec, v.args), v);
          runs.insert(plan::kernel_label(v.spec, v.args));
        }
      CHECK(runs.size() == 1);
    }
  // u8 [51, 3, 231] -> [3, 231, 51] and [51, 2, 231, 5] -> [2, 5, 231, 51]: single bytes on both sides
  // of a square fixed tile, so runs (by default for the second; the first stores its short A whole in
  // linear vectors since narrow_store_aspect, and runs are its candidate).
  for (const auto& [shape, order] : {std::pair{std::vector<std::int64_t>{51, 3, 231}, std::vector<std::size_t>{1, 2, 0}},
                                     std::pair{std::vector<std::int64_t>{51, 2, 231, 5}, std::vector<std::size_t>{1, 3, 2, 0}}}) {
    const std::vector<std::int64_t> strides = contiguous_strides(shape);
    std::vector<std::int64_t> out_shape, out_strides;
    for (std::size_t k : order) {
      out_shape.push_back(shape[k]);
      out_strides.push_back(strides[k]);
    }
    const plan::RearrangePlanData p = make(out_shape, out_strides, 1);
    const std::vector<plan::RearrangeVariant> candidates = plan::tuning_candidates(p);
    const auto v = std::find_if(candidates.begin(), candidates.end(),
                                [](const plan::RearrangeVariant& c) { return c.spec.family == RearrangeFamily::runs; });
    INFO(plan::describe(p));
    REQUIRE(v != candidates.end());
    variants.emplace(plan::kernel_label(v->spec, v->args), *v);
  }
  // Runs tiles whose two runs end on one dim tiled alike (tuning candidates): u8 [17, 151, 75, 12]
  // 3,1,2,0 (one dim before it on each side), f16 with two before it in the destination.
  for (const auto& [shape, perm, elem] :
       {std::tuple{std::vector<std::int64_t>{17, 151, 75, 12}, std::vector<int>{3, 1, 2, 0}, 1},
        std::tuple{std::vector<std::int64_t>{2, 7, 4, 3, 18, 24, 45}, std::vector<int>{0, 4, 6, 2, 5, 1, 3}, 2}}) {
    const plan::RearrangePlanData p = permute(shape, perm, elem);
    const std::vector<plan::RearrangeVariant> candidates = plan::tuning_candidates(p);
    const auto v = std::find_if(candidates.begin(), candidates.end(),
                                [](const plan::RearrangeVariant& c) { return test::runs_share_their_end(c.spec); });
    INFO(plan::describe(p));
    REQUIRE(v != candidates.end());
    variants.emplace(plan::kernel_label(v->spec, v->args), *v);
  }
  // Runs tiles that gather their stores: [outer, 3, 116, 171, 11] -> [116, 11, 3, outer, 171],
  // destination runs inside the source run of two dims, for 1-, 2- and 4-byte units, both index widths
  // and exact mode.
  for (int elem : {1, 2, 4})
    for (bool big : {false, true}) {
      const TensorDesc view = permuted({{big ? 4096 : 2, 3, 116, 171, 11}, {}, DType::u8, elem}, {2, 4, 1, 0, 3});
      const plan::RearrangePlanData p = make(view.shape, view.strides, elem, !big);
      bool gathering = false;
      for (const plan::RearrangeVariant& v : plan::candidate_variants(plan::variant_for_pointers(p, 16).form, !big, 16, 16))
        if (v.spec.family == RearrangeFamily::runs && v.spec.gather_stores) {
          CHECK(v.spec.index64 == big);
          variants.emplace(plan::kernel_label(v.spec, v.args), v);
          gathering = true;
        }
      INFO(plan::describe(p));
      CHECK(gathering);
    }
  // Skewed loads: u8 [81, c] and f16 [23, c] transposes with c odd, so every source row starts at its
  // own misalignment; a u8 [1201, 4, 7119] -> [1201, 7119, 4] transpose too; both index widths and
  // exact mode.
  for (int elem : {1, 2})
    for (bool big : {false, true}) {
      const std::int64_t c = big ? (std::int64_t{1} << 26) + 1 : 20001;
      const plan::RearrangePlanData p = swap_first_two({elem == 1 ? 81 : 23, c}, elem, !big);
      const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 16);
      INFO(plan::describe(p));
      CHECK(v.spec.skew_load);
      CHECK(v.spec.index64 == big);
      variants.emplace(plan::kernel_label(v.spec, v.args), v);
    }
  // Rows of one 4-byte vector: u8 rows of 20 units at a pitch of 21, f16 rows of 6 at a pitch of -7.
  const std::tuple<std::vector<std::int64_t>, std::vector<std::int64_t>, int> word_rows[] = {
      {{20, 1004}, {1, 21}, 1}, {{6, 1002}, {1, -7}, 2}};
  for (const auto& [shape, strides, elem] : word_rows) {
    const plan::RearrangePlanData p = make(shape, strides, elem);
    const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 16);
    INFO(plan::describe(p));
    CHECK((v.spec.skew_load && v.spec.vec_b * v.spec.unit_bytes == 4));
    variants.emplace(plan::kernel_label(v.spec, v.args), v);
  }
  // Skewed tiles over a composite A whose last pass of micro-tiles leaves lanes idle, with rows of
  // fewer than 8 micro-tiles along B (both aligned vectors loaded) and of 8 over a composite B (the
  // next one taken from the next lane, or read late through A's table): f16 [7, 33, 2, 16, 2, 46, 7,
  // 35] and u8 [40, 2, 36, 35, 5, 4, 33, 3], permuted.
  for (const auto& [shape, perm, elem, shuffled] :
       {std::tuple{std::vector<std::int64_t>{7, 33, 2, 16, 2, 46, 7, 35}, std::vector<int>{2, 6, 3, 0, 7, 4, 1, 5}, 2, false},
        std::tuple{std::vector<std::int64_t>{40, 2, 36, 35, 5, 4, 33, 3}, std::vector<int>{4, 0, 1, 7, 2, 6, 5, 3}, 1, true}}) {
    const plan::RearrangePlanData p = permute(shape, perm, elem);
    const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 16);
    INFO(plan::describe(p));
    const int micro_b = v.spec.tile_b / v.spec.vec_b, micro = v.spec.tile_a / v.spec.vec_a * micro_b;
    CHECK(v.spec.skew_load);
    CHECK(v.spec.dims_a > 1);
    CHECK(micro % v.spec.threads != 0);
    CHECK((micro_b >= 8) == shuffled);
    if (shuffled) CHECK(v.spec.dims_b > 1);
    variants.emplace(plan::kernel_label(v.spec, v.args), v);
  }
  // Rows of 8 micro-tiles over a composite B of 3 x 221 units that tiles of 64 split, beside a one-dim
  // A, the last pass of micro-tiles leaving lanes idle: u8 [39, 13, 5, 17, 2, 17, 13, 3], permuted.
  // (The GPU case of skewed loads launches the two shapes above and [38, ...], whose rows now hold 16.)
  {
    const plan::RearrangePlanData p = permute({39, 13, 5, 17, 2, 17, 13, 3}, {5, 6, 2, 3, 4, 1, 7, 0}, 1);
    const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 16);
    INFO(plan::describe(p));
    CHECK(v.spec.skew_load);
    CHECK(v.spec.dims_a == 1);
    CHECK(v.spec.dims_b == 2);
    CHECK(v.spec.tile_b == 64);
    CHECK(v.spec.tile_b / v.spec.vec_b == 8);
    CHECK(v.spec.tile_a / v.spec.vec_a * 8 % v.spec.threads != 0);
    variants.emplace(plan::kernel_label(v.spec, v.args), v);
  }
  {
    const TensorDesc view = permuted({{1201, 4, 7119}, {}, DType::u8, 1}, {0, 2, 1});
    const plan::RearrangePlanData p = make(view.shape, view.strides, 1);
    const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 16);
    INFO(plan::describe(p));
    CHECK(v.spec.skew_load);
    CHECK(v.spec.family == RearrangeFamily::transpose);
    variants.emplace(plan::kernel_label(v.spec, v.args), v);
  }
  // Segment tiles: rows of 21 units (1-, 2-, 4- and 8-byte units; the last two gather words) under a
  // transpose, both index widths, exact mode; one merged destination run ([7, 300, 9]) and merged
  // source runs of 1- and 4-byte units ([300, 7, 9] and [300, 7, 10]).
  for (int elem : {1, 2, 4, 8})
    for (bool big : {false, true}) {
      const plan::RearrangePlanData p = swap_first_two({big ? (std::int64_t{1} << 19) + 301 : 301, 501, 21}, elem, !big);
      const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 16);
      INFO(plan::describe(p));
      CHECK(v.spec.family == RearrangeFamily::segments);
      CHECK(v.spec.index64 == big);
      variants.emplace(plan::kernel_label(v.spec, v.args), v);
    }
  const std::pair<std::vector<std::int64_t>, int> merged[] = {{{7, 300, 9}, 1}, {{300, 7, 9}, 1}, {{300, 7, 10}, 4}};
  for (const auto& [shape, elem] : merged) {
    const plan::RearrangePlanData p = swap_first_two(shape, elem);
    const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 16);
    INFO(plan::describe(p));
    CHECK(v.spec.family == RearrangeFamily::segments);
    CHECK((v.spec.merge_src || v.spec.merge_dst));
    variants.emplace(plan::kernel_label(v.spec, v.args), v);
  }
  // Rows in 16-byte vectors: rows of 8193, 601 and 201 units (1-, 2-, 4- and 8-byte units), both
  // index widths, exact too.
  for (int elem : {1, 2, 4, 8})
    for (bool big : {false, true})
      for (bool exact : {false, true}) {
        if (big && exact) continue;
        const std::int64_t length = elem == 1 ? 8193 : elem == 2 ? 601 : 201;
        const plan::RearrangePlanData p =
            swap_first_two({big ? std::int64_t{1} << 16 : 80, big ? 1 << 15 : 128, length}, elem, exact);
        const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 16);
        INFO(plan::describe(p));
        CHECK(v.spec.vector_rows);
        CHECK(v.spec.unit_bytes == elem);
        CHECK(v.spec.index64 == big);
        variants.emplace(plan::kernel_label(v.spec, v.args), v);
      }
  // Segment tiles over groups of several dims: two of each (f32 rows of 3), three B dims (f32 rows of
  // 21), two A dims (u8 rows of 5), in exact mode too.
  for (const auto& [shape, perm, elem] :
       {std::tuple{std::vector<std::int64_t>{5, 9, 5, 9, 3}, std::vector<int>{3, 2, 1, 0, 4}, 4},
        std::tuple{std::vector<std::int64_t>{11, 4, 3, 2, 21}, std::vector<int>{3, 2, 1, 0, 4}, 4},
        std::tuple{std::vector<std::int64_t>{5, 7, 13, 5}, std::vector<int>{2, 1, 0, 3}, 1}})
    for (bool exact : {false, true}) {
      const TensorDesc view = permuted({shape, {}, DType::u8, elem}, perm);
      const plan::RearrangePlanData p = make(view.shape, view.strides, elem, exact);
      const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 16);
      INFO(plan::describe(p));
      CHECK(v.spec.family == RearrangeFamily::segments);
      CHECK(v.spec.dims_a + v.spec.dims_b > 2);
      variants.emplace(plan::kernel_label(v.spec, v.args), v);
    }
  // Packed tiles with slab dims and fixed tables: many small dims, 1-, 2- and 4-byte units, exact too.
  for (const auto& [shape, order, elem] :
       {std::tuple{std::vector<std::int64_t>{3, 4, 2, 5, 5, 7, 5, 4}, std::vector<std::size_t>{6, 3, 1, 4, 2, 7, 5, 0}, 1},
        std::tuple{std::vector<std::int64_t>{2, 5, 6, 4, 2, 4, 2, 2, 4}, std::vector<std::size_t>{5, 1, 0, 6, 4, 7, 8, 3, 2}, 2},
        std::tuple{std::vector<std::int64_t>{2, 5, 6, 2, 4, 2, 4, 6}, std::vector<std::size_t>{0, 3, 5, 2, 7, 4, 6, 1}, 4}})
    for (bool exact : {false, true}) {
      const std::vector<std::int64_t> strides = contiguous_strides(shape);
      std::vector<std::int64_t> out_shape, out_strides;
      for (std::size_t k : order) {
        out_shape.push_back(shape[k]);
        out_strides.push_back(strides[k]);
      }
      const plan::RearrangePlanData p = make(out_shape, out_strides, elem, exact);
      const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 16);
      INFO(plan::describe(p));
      CHECK(v.spec.family == RearrangeFamily::packed);
      CHECK(v.spec.b_chain > 0);
      CHECK(v.spec.fixed_b);
      variants.emplace(plan::kernel_label(v.spec, v.args), v);
    }
  // Packed tiles that load (u8, f16) or store (u8, f16) linearly over runs shorter than the tile,
  // their offsets from A's or B's table, exact too.
  for (const auto& [shape, perm, elem] :
       {std::tuple{std::vector<std::int64_t>{9, 4, 11, 11, 4, 7, 5}, std::vector<int>{5, 3, 6, 2, 0, 1, 4}, 1},
        std::tuple{std::vector<std::int64_t>{11, 3, 4, 10, 11, 6, 11}, std::vector<int>{4, 6, 1, 0, 3, 2, 5}, 2},
        std::tuple{std::vector<std::int64_t>{15, 6, 3, 2, 37, 32}, std::vector<int>{4, 0, 2, 1, 5, 3}, 1},
        std::tuple{std::vector<std::int64_t>{4, 15, 5, 2, 30, 25, 4}, std::vector<int>{4, 5, 3, 1, 0, 6, 2}, 2}})
    for (bool exact : {false, true}) {
      const TensorDesc view = permuted({shape, {}, DType::u8, elem}, perm);
      const plan::RearrangePlanData p = make(view.shape, view.strides, elem, exact);
      const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 16);
      INFO(plan::describe(p));
      CHECK(v.spec.family == RearrangeFamily::packed);
      CHECK(((v.spec.load_linear > 0 && v.spec.load_run < v.spec.tile_a) ||
             (v.spec.store_linear > 0 && v.spec.store_run < v.spec.tile_b)));
      variants.emplace(plan::kernel_label(v.spec, v.args), v);
    }
  // Tiles whose destination chain passes B's first dims (u8, f16, f32), exact too.
  for (const auto& [shape, perm, elem] :
       {std::tuple{std::vector<std::int64_t>{9, 8, 3, 2, 8, 7, 11}, std::vector<int>{4, 5, 2, 0, 1, 6, 3}, 1},
        std::tuple{std::vector<std::int64_t>{7, 4, 2, 6, 3, 8, 33, 5}, std::vector<int>{3, 6, 5, 0, 2, 1, 7, 4}, 2},
        std::tuple{std::vector<std::int64_t>{7, 4, 2, 6, 3, 8, 33, 5}, std::vector<int>{3, 6, 5, 0, 2, 1, 7, 4}, 4}})
    for (bool exact : {false, true}) {
      const TensorDesc view = permuted({shape, {}, DType::u8, elem}, perm);
      const plan::RearrangePlanData p = make(view.shape, view.strides, elem, exact);
      const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 16);
      INFO(plan::describe(p));
      CHECK(v.spec.a_pass > 1);
      variants.emplace(plan::kernel_label(v.spec, v.args), v);
    }
  // Tiles of linear stores whose store vectors rotate in shared memory (f16 passing B's first dims,
  // u8 at rank 15), exact too.
  for (const auto& [shape, perm, elem] :
       {std::tuple{std::vector<std::int64_t>{2, 28, 7, 5, 32, 9, 2}, std::vector<int>{3, 5, 4, 1, 0, 6, 2}, 2},
        std::tuple{std::vector<std::int64_t>{2, 2, 7, 2, 2, 2, 3, 4, 2, 2, 3, 2, 4, 2, 8},
                   std::vector<int>{13, 4, 6, 8, 7, 12, 9, 3, 0, 11, 14, 1, 5, 10, 2}, 1}})
    for (bool exact : {false, true}) {
      const TensorDesc view = permuted({shape, {}, DType::u8, elem}, perm);
      const plan::RearrangePlanData p = make(view.shape, view.strides, elem, exact);
      const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 16);
      INFO(plan::describe(p));
      CHECK(v.spec.rotate_span > 0);
      variants.emplace(plan::kernel_label(v.spec, v.args), v);
    }
  // Slab tiles grown by a piece of an outer dim that store their runs linearly (u8, f16), exact too.
  for (const auto& [shape, perm, elem] :
       {std::tuple{std::vector<std::int64_t>{96, 2, 76}, std::vector<int>{0, 2, 1}, 1},
        std::tuple{std::vector<std::int64_t>{120, 4, 67}, std::vector<int>{0, 2, 1}, 2}})
    for (bool exact : {false, true}) {
      const TensorDesc view = permuted({shape, {}, DType::u8, elem}, perm);
      const plan::RearrangePlanData p = make(view.shape, view.strides, elem, exact);
      const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 16);
      INFO(plan::describe(p));
      CHECK(v.spec.b_chain > 0);
      CHECK(v.spec.tile_b < v.args.extent_b);  // a piece of the outer dim
      CHECK(v.spec.store_linear > 0);
      variants.emplace(plan::kernel_label(v.spec, v.args), v);
    }
  // Exact mode, and the narrower variants that misaligned pointers select.
  for (RearrangeFamily family :
       {RearrangeFamily::row, RearrangeFamily::transpose, RearrangeFamily::packed, RearrangeFamily::gather}) {
    const plan::RearrangePlanData p = family_plan(family, 4, false, true);
    const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 0);
    CHECK(v.spec.exact);
    variants.emplace(plan::kernel_label(v.spec, v.args), v);
  }
  // Tiles of skewed runs (destination runs at odd places stored in aligned 16-byte vectors): a u8
  // tile spanning A whose runs continue into B, an f16 tile whose A chain passes B's first dim; both
  // index widths (an outer dim grown past 32-bit indices) and exact mode.
  for (bool big : {false, true})
    for (bool exact : {false, true})
      for (const auto& [shape, perm, elem] :
           {std::tuple{std::vector<std::int64_t>{28, 39, 49, 336, 9}, std::vector<int>{3, 0, 2, 4, 1}, 1},
            std::tuple{std::vector<std::int64_t>{16, 21, 400, 13}, std::vector<int>{2, 0, 3, 1}, 2}}) {
        if (big && exact) continue;
        std::vector<std::int64_t> sized = shape;
        if (big) sized[0] *= 1024;
        const TensorDesc view = permuted({sized, {}, DType::u8, elem}, perm);
        const plan::RearrangePlanData p = make(view.shape, view.strides, elem, exact);
        const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 16);
        INFO(plan::describe(p));
        CHECK(v.spec.skew_runs);
        CHECK(v.spec.index64 == big);
        variants.emplace(plan::kernel_label(v.spec, v.args), v);
      }
  for (const auto& p : {swap_first_two({4096, 4096}, 4), swap_first_two({4096, 4096}, 1),
                        swap_first_two({8, 3, 64 * 64}, 2), swap_first_two({8, 64 * 64, 3}, 1)})
    for (const plan::RearrangeVariant& v : p.variants)
      if (v.spec.family != RearrangeFamily::copy) variants.emplace(plan::kernel_label(v.spec, v.args), v);

  std::vector<std::future<std::string>> compiles;
  for (const auto& [key, v] : variants)
    for (const char* arch : {"sm_80", "sm_90"})
      compiles.push_back(std::async(std::launch::async, [v = v, key = key, arch] {
        const jit::Program program = codegen::rearrange_program(v, "test");
        try {
          std::vector<std::vector<std::string>> option_sets = {program.options};  // and the low-register variant's
          if (!program.low_register_options.empty()) {
            option_sets.push_back(program.options);
            option_sets.back().insert(option_sets.back().end(), program.low_register_options.begin(),
                                      program.low_register_options.end());
          }
          for (const auto& options : option_sets) {
            const auto cubin = jit::compile_to_cubin(program.source, arch, options, program.label);
            if (cubin.size() <= 4 || cubin[0] != 0x7f) return fmt::format("{} {}: not an ELF cubin", key, arch);
          }
          return std::string();
        } catch (const Error& e) {
          return fmt::format("{} {}: {}", key, arch, e.what());
        }
      }));
  for (auto& c : compiles) {
    const std::string failure = c.get();
    CHECK_MESSAGE(failure.empty(), failure);
  }
  MESSAGE(compiles.size() << " rearrange kernels compiled");
}
