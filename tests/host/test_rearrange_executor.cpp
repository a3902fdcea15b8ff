// Rearrange plans executed on the CPU (every family's index math, as its template runs it) against a
// naive strided copy: random shapes, strides and permutations up to rank 8, every permutation of
// ranks 2 to 5, every element size and pointer alignment. Whole buffers are compared, so elements
// outside the logical ones (padding, gaps) must stay untouched.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <map>
#include <numeric>
#include <random>
#include <string>

#include "rearrange_executor.hpp"
#include "shapejit/rearrange.hpp"

using namespace shapejit;

namespace {

// A host buffer holding `range` bytes around a base pointer whose alignment is exactly `align`.
struct HostView {
  std::vector<std::uint8_t> storage;
  std::uint8_t* base = nullptr;
  HostView(ByteRange range, std::size_t align, std::uint8_t fill) {
    storage.assign(static_cast<std::size_t>(range.hi - range.lo) + 256, fill);
    auto start = reinterpret_cast<std::uintptr_t>(storage.data()) + static_cast<std::uintptr_t>(-range.lo) + 64;
    start = (start + 63) / 64 * 64 + (align % 64 == 0 ? 0 : align);  // lowest set bit = align (or 64)
    base = reinterpret_cast<std::uint8_t*>(start);
  }
};

void fill_random(std::vector<std::uint8_t>& bytes, std::mt19937_64& rng) {
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
}

// Runs `dst <- src` on the CPU for every pointer alignment and compares whole buffers with the
// reference. Returns the families that ran.
// Variants that ran with split rows, linear loads, linear stores (and of those, over runs shorter
// than the tile), and variants of each family of (A, B) tiles by tile order (to check coverage).
struct Modes {
  int split_rows = 0, load_linear = 0, store_linear = 0, store_runs = 0;
  std::map<std::pair<plan::RearrangeFamily, bool>, int> tile_orders;  ///< (family, a_first) -> runs
} g_modes;

// Runs plan `p` of `dst <- src` on the CPU for base pointers aligned to each of `alignments`.
std::vector<plan::RearrangeFamily> check_plan(const plan::RearrangePlanData& p, const TensorDesc& dst,
                                              const TensorDesc& src, std::mt19937_64& rng,
                                              std::initializer_list<std::size_t> alignments) {
  std::vector<plan::RearrangeFamily> families;
  if (p.empty) return families;
  for (std::size_t align : alignments) {
    HostView in(p.src_range, align, 0);
    fill_random(in.storage, rng);
    HostView out(p.dst_range, align, 0xa5), expected(p.dst_range, align, 0xa5);
    test::reference_rearrange(expected.base, dst, in.base, src);
    try {
      test::execute_plan(p, out.base, in.base, reinterpret_cast<std::uintptr_t>(out.base) | reinterpret_cast<std::uintptr_t>(in.base));
    } catch (const std::exception& e) {
      FAIL_CHECK(std::string(e.what()) << "\n" << plan::describe(p));
      return families;
    }
    const auto& v = plan::variant_for_pointers(p, align);
    families.push_back(v.spec.family);
    g_modes.split_rows += v.spec.split_rows;
    g_modes.load_linear += v.spec.load_linear > 0;
    g_modes.store_linear += v.spec.store_linear > 0;
    g_modes.store_runs += v.spec.store_linear > 0 && v.spec.store_run < v.spec.tile_b;
    ++g_modes.tile_orders[{v.spec.family, v.spec.a_first}];
    // Every byte of the destination's range and 64 bytes around it.
    const bool same = std::equal(out.base + p.dst_range.lo - 64, out.base + p.dst_range.hi + 64,
                                 expected.base + p.dst_range.lo - 64);
    if (!same) {
      FAIL_CHECK("mismatch at alignment " << align << "\n" << plan::describe(p));
      return families;
    }
  }
  return families;
}

std::vector<plan::RearrangeFamily> check_against_reference(const TensorDesc& dst, const TensorDesc& src,
                                                           std::mt19937_64& rng, bool exact = false) {
  RearrangeOptions options;
  options.exact = exact;
  return check_plan(plan::plan_rearrange_data(dst, src, options), dst, src, rng, {16, 8, 4, 2, 1});
}

// Runs variant `v` of plan `p` of `dst <- src` on the CPU from base pointers aligned to `src_align`
// and `dst_align`, and checks every byte of the destination's range and 64 bytes around it. Returns
// whether the variant ran (a failure to run is reported).
bool check_variant_at(const plan::RearrangePlanData& p, const plan::RearrangeVariant& v, const TensorDesc& dst,
                      const TensorDesc& src, std::size_t src_align, std::size_t dst_align, std::mt19937_64& rng) {
  HostView in(p.src_range, src_align, 0);
  fill_random(in.storage, rng);
  HostView out(p.dst_range, dst_align, 0xa5), expected(p.dst_range, dst_align, 0xa5);
  test::reference_rearrange(expected.base, dst, in.base, src);
  try {
    test::execute_variant(v, out.base, in.base);
  } catch (const std::exception& e) {
    FAIL_CHECK(std::string(e.what()));
    return false;
  }
  CHECK(std::equal(out.base + p.dst_range.lo - 64, out.base + p.dst_range.hi + 64, expected.base + p.dst_range.lo - 64));
  return true;
}

// Every tuning candidate of `dst <- src`, launched on aligned pointers as a tuned plan would.
// Returns the candidates' families.
std::vector<plan::RearrangeFamily> check_tuning_candidates(const TensorDesc& dst, const TensorDesc& src,
                                                           std::mt19937_64& rng) {
  const plan::RearrangePlanData p = plan::plan_rearrange_data(dst, src, {});
  std::vector<plan::RearrangeFamily> families;
  for (const plan::RearrangeVariant& c : plan::tuning_candidates(p)) {
    plan::RearrangePlanData tuned = p;
    plan::choose_variant(tuned, c);
    INFO("candidate " << plan::candidate_name(c));
    check_plan(tuned, dst, src, rng, {16});
    families.push_back(c.spec.family);
  }
  return families;
}

// Strides of a tensor stored with dims in `order` (outermost first), each padded by `pad[i]`
// elements, stepped by `step[i]` and reversed where `flip[i]`.
std::vector<std::int64_t> storage_strides(const std::vector<std::int64_t>& shape, const std::vector<int>& order,
                                          const std::vector<int>& pad, const std::vector<int>& step,
                                          const std::vector<bool>& flip) {
  std::vector<std::int64_t> strides(shape.size());
  std::int64_t running = 1;
  for (std::size_t k = order.size(); k-- > 0;) {
    const auto i = static_cast<std::size_t>(order[k]);
    strides[i] = running * step[i] * (flip[i] ? -1 : 1);
    running *= (std::max<std::int64_t>(shape[i], 1) + pad[i]) * step[i];
  }
  return strides;
}

struct RandomCase {
  TensorDesc dst, src;
};

RandomCase random_case(std::mt19937_64& rng) {
  auto pick = [&rng](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  const int rank = pick(9);
  std::vector<std::int64_t> shape;
  std::int64_t volume = 1;
  for (int i = 0; i < rank; ++i) {
    const int r = pick(20);
    std::int64_t e = r == 0 ? 1 : r < 14 ? 1 + pick(5) : r < 19 ? 5 + pick(40) : 60 + pick(140);
    if (volume * e > 6000) e = 1;
    volume *= e;
    shape.push_back(e);
  }
  if (rank > 0 && pick(40) == 0) shape[static_cast<std::size_t>(pick(rank))] = 0;
  static const int sizes[] = {1, 1, 2, 2, 3, 4, 4, 4, 6, 8, 8, 12, 16, 16, 32, 64};
  const int elem = sizes[pick(16)];

  auto layout = [&](bool allow_broadcast) {
    std::vector<int> order(static_cast<std::size_t>(rank)), pad(order.size()), step(order.size());
    std::vector<bool> flip(order.size());
    std::iota(order.begin(), order.end(), 0);
    const bool permute = pick(3) > 0;
    if (permute) std::shuffle(order.begin(), order.end(), rng);
    for (std::size_t i = 0; i < order.size(); ++i) {
      pad[i] = pick(5) == 0 ? 1 + pick(3) : 0;
      step[i] = pick(6) == 0 ? 2 + pick(2) : 1;
      flip[i] = pick(5) == 0;
    }
    auto strides = storage_strides(shape, order, pad, step, flip);
    if (allow_broadcast)
      for (auto& s : strides)
        if (pick(8) == 0) s = 0;
    return strides;
  };
  RandomCase c;
  c.src = {shape, layout(true), DType::u8, elem};
  c.dst = {shape, pick(2) ? std::vector<std::int64_t>{} : layout(false), DType::u8, elem};
  return c;
}

// A contiguous tensor of `elem`-byte opaque elements, permuted by `perm`.
struct PermuteCase {
  std::vector<std::int64_t> shape;
  std::vector<int> perm;
  int elem;
};

// Checks the permuted view of `c` against the naive copy, default or exact mode; returns the
// families its variants took.
std::vector<plan::RearrangeFamily> check_permute(const PermuteCase& c, std::mt19937_64& rng, bool exact) {
  const TensorDesc view = permuted({c.shape, {}, DType::u8, c.elem}, c.perm);
  return check_against_reference({view.shape, {}, DType::u8, c.elem}, view, rng, exact);
}

// The plan of copying `c`'s permuted view into a contiguous tensor.
plan::RearrangePlanData plan_of(const PermuteCase& c) {
  const TensorDesc view = permuted({c.shape, {}, DType::u8, c.elem}, c.perm);
  return plan::plan_rearrange_data({view.shape, {}, DType::u8, c.elem}, view, {});
}

// The spec of that plan's variant for pointers aligned to 16 bytes.
plan::RearrangeSpec aligned_spec(const PermuteCase& c) { return plan::variant_for_pointers(plan_of(c), 16).spec; }

// A random view for word tiles: two dims of `shortest` to `shortest + spread - 1` elements, up to
// two of 1 to 5, in random order, under a random permutation.
PermuteCase random_word_view(std::mt19937_64& rng, std::int64_t shortest, std::uint64_t spread, int elem) {
  std::vector<std::int64_t> shape = {shortest + static_cast<std::int64_t>(rng() % spread),
                                     shortest + static_cast<std::int64_t>(rng() % spread)};
  for (std::uint64_t extra = rng() % 3; extra > 0; --extra) shape.push_back(1 + static_cast<std::int64_t>(rng() % 5));
  std::shuffle(shape.begin(), shape.end(), rng);
  std::vector<int> perm(shape.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  return {shape, perm, elem};
}

}  // namespace

TEST_CASE("random shapes, strides and permutations up to rank 8 match the naive copy on every family") {
  std::mt19937_64 rng(20261122);
  std::map<plan::RearrangeFamily, int> seen;
  const int cases = 3000;
  for (int i = 0; i < cases; ++i) {
    const RandomCase c = random_case(rng);
    INFO("case " << i << ": shape " << c.src.shape.size() << " dims, elem " << c.src.elem_bytes);
    for (plan::RearrangeFamily f : check_against_reference(c.dst, c.src, rng, i % 7 == 0)) ++seen[f];
  }
  for (plan::RearrangeFamily f : {plan::RearrangeFamily::copy, plan::RearrangeFamily::row,
                                  plan::RearrangeFamily::transpose, plan::RearrangeFamily::packed,
                                  plan::RearrangeFamily::gather}) {
    MESSAGE(plan::family_name(f) << ": " << seen[f] << " runs");
    CHECK(seen[f] > 20);
  }
  MESSAGE("split rows " << g_modes.split_rows << ", linear loads " << g_modes.load_linear << ", linear stores "
                        << g_modes.store_linear << " (over shorter runs " << g_modes.store_runs << ")");
  CHECK(g_modes.split_rows > 20);
  CHECK(g_modes.load_linear > 2);
  CHECK(g_modes.store_linear > 5);
}

TEST_CASE("every tuning candidate of random views matches the naive copy") {
  std::mt19937_64 rng(20261123);
  g_modes = {};
  std::map<plan::RearrangeFamily, int> seen;
  int plans_with_choices = 0;
  auto count = [&](const std::vector<plan::RearrangeFamily>& families) {
    for (plan::RearrangeFamily f : families) ++seen[f];
    plans_with_choices += families.size() > 1;
  };
  for (int i = 0; i < 400; ++i) {
    const RandomCase c = random_case(rng);
    INFO("case " << i << ": shape " << c.src.shape.size() << " dims, elem " << c.src.elem_bytes);
    count(check_tuning_candidates(c.dst, c.src, rng));
  }
  // Transposes long enough for the skewed and word families, with odd pitches, a packed tile of a
  // composite group with several tiles on both sides (both tile orders), a tile whose B chain passes
  // A (its candidates pass either way) and one whose candidates include tiles longer along A and B.
  for (const PermuteCase& c : std::vector<PermuteCase>{{{70, 131}, {1, 0}, 1}, {{67, 3, 129}, {2, 1, 0}, 2},
                                                       {{130, 65}, {1, 0}, 4}, {{9, 64, 71}, {0, 2, 1}, 1},
                                                       {{301, 263}, {1, 0}, 1}, {{7, 66, 3, 300}, {3, 1, 0, 2}, 1},
                                                       {{3, 35, 9, 5, 6, 2, 31}, {2, 4, 1, 3, 6, 5, 0}, 2},
                                                       {{31, 10, 4, 29, 20}, {0, 4, 3, 1, 2}, 1}}) {
    const TensorDesc view = permuted({c.shape, {}, DType::u8, c.elem}, c.perm);
    count(check_tuning_candidates({view.shape, {}, DType::u8, c.elem}, view, rng));
  }
  CHECK(plans_with_choices > 200);
  // Both tile orders of every family of (A, B) tiles (the other order is a candidate).
  for (plan::RearrangeFamily f : {plan::RearrangeFamily::transpose, plan::RearrangeFamily::packed,
                                  plan::RearrangeFamily::skewed, plan::RearrangeFamily::words}) {
    const int along_a = g_modes.tile_orders[{f, true}], along_b = g_modes.tile_orders[{f, false}];
    MESSAGE(plan::family_name(f) << ": " << along_a << " runs counting along A first, " << along_b << " along B");
    CHECK(along_a > 0);
    CHECK(along_b > 0);
  }
  for (const auto& [family, runs] : seen) MESSAGE(plan::family_name(family) << ": " << runs << " candidate runs");
  for (plan::RearrangeFamily f : {plan::RearrangeFamily::row, plan::RearrangeFamily::transpose,
                                  plan::RearrangeFamily::packed, plan::RearrangeFamily::gather,
                                  plan::RearrangeFamily::skewed, plan::RearrangeFamily::words})
    CHECK(seen[f] > 0);
}

TEST_CASE("segment tiles match the naive copy at every alignment: merged runs, groups of several dims, exact mode") {
  std::mt19937_64 rng(20261126);
  // Short shared rows under a transpose: merged destination runs ([7, 300, 9]), merged source runs
  // ([300, 7, 9]), uneven tiles, outer dims on either side, rows of 3 to 71 bytes in 1-, 2-, 4- and
  // 8-byte units; groups of two A dims ([5, 7, 13, 5]), two B dims ([9, 7, 2, 2, 9]), two of each
  // ([5, 9, 5, 9, 3]) and three B dims ([11, 4, 3, 2, 21]).
  const std::vector<PermuteCase> cases = {
      {{7, 300, 9}, {1, 0, 2}, 1},          {{300, 7, 9}, {1, 0, 2}, 1},         {{53, 61, 71}, {1, 0, 2}, 1},
      {{3, 41, 47, 13}, {0, 2, 1, 3}, 1},    {{47, 3, 41, 5}, {2, 1, 0, 3}, 1},   {{300, 6, 2, 3}, {1, 2, 0, 3}, 1},
      {{37, 2, 45, 23}, {2, 1, 0, 3}, 2},    {{29, 33, 11}, {1, 0, 2}, 2},        {{31, 5, 39, 9}, {2, 0, 1, 3}, 4},
      {{5, 7, 13, 5}, {2, 1, 0, 3}, 1},      {{9, 7, 2, 2, 9}, {3, 2, 0, 1, 4}, 1}, {{5, 9, 5, 9, 3}, {3, 2, 1, 0, 4}, 4},
      {{11, 4, 3, 2, 21}, {3, 2, 1, 0, 4}, 4}, {{4, 13, 7, 4, 5}, {3, 2, 1, 0, 4}, 2},
      {{23, 3, 37, 7}, {2, 0, 1, 3}, 8},
  };
  int segments = 0, launches = 0;
  for (const PermuteCase& c : cases)
    for (bool exact : {false, true}) {
      INFO("shape " << c.shape.size() << " dims, elem " << c.elem << (exact ? ", exact" : ""));
      const auto families = check_permute(c, rng, exact);
      for (plan::RearrangeFamily f : families) segments += f == plan::RearrangeFamily::segments;
      launches += static_cast<int>(families.size());
    }
  MESSAGE(segments << " of " << launches << " runs on segment tiles");
  CHECK(segments >= launches / 2);
  for (const PermuteCase& c : {cases[9], cases[10], cases[11], cases[12]}) {
    const TensorDesc view = permuted({c.shape, {}, DType::u8, c.elem}, c.perm);
    const plan::RearrangeSpec spec =
        plan::variant_for_pointers(plan::plan_rearrange_data({view.shape, {}, DType::u8, c.elem}, view, {}), 16).spec;
    CHECK(spec.family == plan::RearrangeFamily::segments);
    CHECK(spec.dims_a + spec.dims_b > 2);
  }
}

TEST_CASE("runs tiles, gathering stores or scattering loads, match the naive copy with source and destination pointers "
          "aligned to 16, 1, 2 and 3 bytes (where the unit allows)") {
  std::mt19937_64 rng(20261129);
  // Scaled-down shapes of the classes that take runs tiles: a destination run inside one long source
  // run ([5, 3, 116, 71, 11]), runs over two and three dims on each side, a tiled dim on each side,
  // destination runs of one dim outside the source run (scattering loads: [13, 19, 8, 133, 65]), in
  // 1-, 2- and 4-byte units.
  const std::vector<PermuteCase> cases = {
      {{5, 3, 116, 71, 11}, {2, 4, 1, 0, 3}, 1}, {{6, 12, 6, 57, 57}, {2, 3, 1, 4, 0}, 1},
      {{4, 2, 4, 10, 5, 51, 13}, {3, 0, 4, 2, 1, 6, 5}, 1}, {{9, 2, 31, 4, 137, 2, 29}, {0, 2, 3, 1, 6, 5, 4}, 1},
      {{58, 5, 6, 9, 15, 5}, {0, 1, 5, 2, 4, 3}, 1}, {{13, 19, 8, 133, 65}, {2, 1, 3, 4, 0}, 1},
      {{10, 4, 2, 17, 6, 13, 3, 31}, {1, 0, 4, 2, 7, 5, 6, 3}, 2}, {{63, 12, 6, 57, 57}, {2, 3, 1, 4, 0}, 2},
      {{40, 2, 35, 3, 4, 5, 3, 36}, {6, 3, 4, 5, 1, 0, 7, 2}, 4},
  };
  int launches = 0, gathering = 0;
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, DType::u8, c.elem}, c.perm);
    const TensorDesc dst{view.shape, {}, DType::u8, c.elem};
    const plan::RearrangePlanData p = plan::plan_rearrange_data(dst, view, {});
    for (const plan::RearrangeVariant& v : plan::tuning_candidates(p)) {
      if (v.spec.family != plan::RearrangeFamily::runs) continue;
      INFO("shape " << c.shape.size() << " dims, elem " << c.elem << ", candidate " << plan::candidate_name(v));
      const int unit = v.spec.unit_bytes;
      for (std::size_t src_align : {16, 1, 2, 3}) {
        for (std::size_t dst_align : {16, 1, 2, 3}) {
          if (src_align % unit != 0 && src_align != 16) continue;
          if (dst_align % unit != 0 && dst_align != 16) continue;
          if (!check_variant_at(p, v, dst, view, src_align, dst_align, rng)) continue;
          ++launches;
          gathering += v.spec.gather_stores;
        }
      }
    }
  }
  MESSAGE(launches << " launches of runs tiles, " << gathering << " gathering their stores");
  CHECK(gathering >= 20);
  CHECK(launches - gathering >= 20);
}

TEST_CASE("runs tiles that gather their stores hold up to 16 KiB, those that scatter their loads up to 8 KiB; both "
          "match the naive copy at every alignment") {
  std::mt19937_64 rng(20261202);
  // Scaled-down lines of seeds 5539-5618 whose gathering tiles pass 8 KiB: a source run of one long dim
  // over a short destination dim ([3, 5921, 2]), a destination run of one dim inside a source run of
  // two ([2, 7, 265, 43]), and f16 runs of a long and a short dim on each side.
  const std::vector<PermuteCase> gathering = {
      {{3, 5921, 2}, {0, 2, 1}, 1},
      {{2, 7, 265, 43}, {3, 1, 0, 2}, 1},
      {{2, 6, 11, 189, 9}, {0, 2, 1, 4, 3}, 2},
  };
  // A scattering tile that 16 KiB would take to 45 x 276 units.
  const PermuteCase scattering = {{2, 45, 1101}, {0, 2, 1}, 1};
  for (const PermuteCase& c : gathering) {
    const plan::RearrangePlanData p = plan_of(c);
    const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 16);
    INFO("candidate " << plan::candidate_name(v));
    REQUIRE(v.spec.family == plan::RearrangeFamily::runs);
    CHECK(v.spec.gather_stores);
    CHECK(plan::runs_tile_bytes(v.spec, v.args) > 8192);
    CHECK(plan::runs_tile_bytes(v.spec, v.args) <= 16384);
    const TensorDesc view = permuted({c.shape, {}, DType::u8, c.elem}, c.perm);
    const TensorDesc dst{view.shape, {}, DType::u8, c.elem};
    for (std::size_t src_align : {16, 1, 2, 3})
      for (std::size_t dst_align : {16, 1, 2, 3}) {
        if ((src_align % c.elem != 0 && src_align != 16) || (dst_align % c.elem != 0 && dst_align != 16)) continue;
        INFO("source aligned to " << src_align << ", destination to " << dst_align);
        check_variant_at(p, v, dst, view, src_align, dst_align, rng);
      }
    check_permute(c, rng, true);
  }
  const plan::RearrangeVariant v = plan::variant_for_pointers(plan_of(scattering), 16);
  INFO("candidate " << plan::candidate_name(v));
  REQUIRE(v.spec.family == plan::RearrangeFamily::runs);
  CHECK(!v.spec.gather_stores);
  CHECK(plan::runs_tile_bytes(v.spec, v.args) <= 8192);
  check_permute(scattering, rng, false);
}

TEST_CASE("runs tiles whose two runs end on one dim tiled alike (a tuning candidate) match the naive copy at every "
          "alignment") {
  std::mt19937_64 rng(20261203);
  // Lines of seeds 5519-5538 and 5619-5620, scaled down, whose destination chain reaches a dim M after
  // dims X.. and whose source chain reaches M after other dims Y..: one dim each before M (u8 [17,
  // 151, 75, 12], M of 151 x 75 merged; f32; f16), several (u8 ranks 8 and 12: up to five before M).
  const std::vector<PermuteCase> cases = {
      {{17, 151, 75, 12}, {3, 1, 2, 0}, 1},
      {{5, 11, 17, 10, 3, 2, 16, 3}, {3, 6, 5, 7, 1, 0, 4, 2}, 1},
      {{2, 3, 2, 2, 18, 2, 3, 3, 3, 22, 2, 2}, {0, 2, 9, 5, 11, 6, 8, 1, 10, 3, 7, 4}, 1},
      {{2, 7, 4, 3, 18, 24, 45}, {0, 4, 6, 2, 5, 1, 3}, 2},
      {{5, 55, 12, 2, 125, 30}, {1, 3, 2, 5, 4, 0}, 2},
      {{2, 6, 14, 2, 49, 37, 2}, {1, 3, 0, 6, 2, 5, 4}, 4},
  };
  int launches = 0;
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, DType::u8, c.elem}, c.perm);
    const TensorDesc dst{view.shape, {}, DType::u8, c.elem};
    const plan::RearrangePlanData p = plan::plan_rearrange_data(dst, view, {});
    int found = 0;
    for (const plan::RearrangeVariant& v : plan::tuning_candidates(p)) {
      if (!test::runs_share_their_end(v.spec)) continue;
      ++found;
      INFO("shape " << c.shape.size() << " dims, elem " << c.elem << ", candidate " << plan::candidate_name(v));
      CHECK(v.spec.tile_a == v.spec.tile_b);
      CHECK(!v.spec.bounds);
      CHECK(v.args.tiles_y.value == 1);
      CHECK(plan::runs_tile_bytes(v.spec, v.args) <= 16384);
      for (std::size_t src_align : {16, 1, 2, 3})
        for (std::size_t dst_align : {16, 1, 2, 3}) {
          if ((src_align % c.elem != 0 && src_align != 16) || (dst_align % c.elem != 0 && dst_align != 16)) continue;
          INFO("source aligned to " << src_align << ", destination to " << dst_align);
          launches += check_variant_at(p, v, dst, view, src_align, dst_align, rng);
        }
    }
    CHECK(found > 0);
  }
  MESSAGE(launches << " launches of runs tiles whose runs share their end");
}

TEST_CASE("runs tiles with a run under 128 bytes give way to tiles whose runs share their end, or to tiles of "
          "vector loads that store single bytes; both match the naive copy at every alignment") {
  std::mt19937_64 rng(20261204);
  // Scaled-down u8 lines of seeds 5539-7960 and 5619-5620 whose runs tiles held runs of 3 to 75
  // bytes: the tiles whose runs share their end hold 4 KiB or more.
  const std::vector<PermuteCase> shared = {
      {{17, 51, 75, 12}, {3, 1, 2, 0}, 1},  {{36, 11, 2, 405, 5}, {2, 0, 4, 3, 1}, 1},
      {{2, 3, 51, 187, 22}, {0, 4, 2, 3, 1}, 1}, {{7, 5, 31, 75, 3, 4}, {0, 5, 1, 4, 3, 2}, 1},
      {{15, 23, 3, 39, 20}, {4, 2, 0, 3, 1}, 1}, {{2, 33, 1159, 10}, {3, 0, 2, 1}, 1},
      {{2, 75, 19, 39, 15}, {2, 4, 0, 3, 1}, 1},
  };
  // No such tile; a 128 x 12 tile of 4-byte loads in its place.
  const PermuteCase single_byte_stores = {{6, 3, 9, 437, 12}, {4, 0, 3, 2, 1}, 1};
  // That tile would hold under 4 KiB (27 x 11 x 13 bytes): the runs tile stays.
  const PermuteCase small_shared = {{2, 10, 27, 50, 55, 13}, {0, 3, 1, 5, 4, 2}, 1};
  for (const PermuteCase& c : shared) {
    const plan::RearrangeVariant v = plan::variant_for_pointers(plan_of(c), 16);
    INFO("candidate " << plan::candidate_name(v));
    CHECK(test::runs_share_their_end(v.spec));
    CHECK(plan::runs_tile_bytes(v.spec, v.args) >= 4096);
    check_permute(c, rng, true);
  }
  {
    const plan::RearrangeVariant packed = plan::variant_for_pointers(plan_of(single_byte_stores), 16);
    INFO("candidate " << plan::candidate_name(packed));
    CHECK(packed.spec.family == plan::RearrangeFamily::packed);
    CHECK(packed.spec.vec_a == 1);
    CHECK(packed.spec.vec_b > 1);
    check_permute(single_byte_stores, rng, true);
  }
  const plan::RearrangeVariant runs = plan::variant_for_pointers(plan_of(small_shared), 16);
  INFO("candidate " << plan::candidate_name(runs));
  CHECK(runs.spec.family == plan::RearrangeFamily::runs);
  CHECK(!test::runs_share_their_end(runs.spec));
  check_permute(small_shared, rng, false);
}

TEST_CASE("rows of 2-byte units under a sector take runs tiles before segment tiles; they match the naive copy at "
          "every alignment") {
  std::mt19937_64 rng(20261202);
  // Scaled-down lines of seeds 7961-7962 and 7261-7960: f16 rows of 3 and 9 units, u8 rows of 10
  // bytes moved in 2-byte units; each took a segment tile before.
  const std::vector<PermuteCase> cases = {
      {{38, 37, 26, 16, 3}, {1, 3, 2, 0, 4}, 2},
      {{36, 20, 7, 3, 9}, {1, 3, 0, 2, 4}, 2},
      {{112, 1254, 10}, {1, 0, 2}, 1},
  };
  for (const PermuteCase& c : cases) {
    const plan::RearrangePlanData p = plan::with_every_level(plan_of(c));
    const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 16);
    INFO("candidate " << plan::candidate_name(v));
    CHECK(v.spec.family == plan::RearrangeFamily::runs);
    CHECK(v.spec.unit_bytes == 2);
    // Pointers off 4 bytes keep segment tiles (the rule was measured on aligned pointers).
    CHECK(plan::variant_for_pointers(p, 2).spec.family == plan::RearrangeFamily::segments);
    check_permute(c, rng, false);
  }
}

TEST_CASE("gathering runs tiles of destination rows shorter than a store vector step to each unit's staged place, "
          "at every alignment") {
  std::mt19937_64 rng(20261201);
  // Rows of 2 and 3 units: dim 1 long enough to be crossed at most once a vector ([5, 7, 15, 13, 2, 4,
  // 3], [6, 15, 9, 2, 5, 3], f16 rows of 3 in 2-byte units), or wrapping several times a vector, over
  // up to eight run dims ([4, 5, 6, 7, 3], the f16 case in 1-byte units, [2, 5, 3, 4, 2, 6, 3] and
  // [3, 4, 2, 5, 2, 3, 2, 3]). Tiles of two run dims never wrap dim 1, so only tiles of more count.
  const std::vector<PermuteCase> cases = {
      {{5, 7, 15, 13, 2, 4, 3}, {2, 5, 0, 1, 4, 3, 6}, 1}, {{6, 15, 9, 2, 5, 3}, {0, 3, 4, 1, 2, 5}, 1},
      {{5, 46, 9, 3, 7}, {0, 1, 2, 4, 3}, 2},           {{4, 5, 6, 7, 3}, {3, 1, 2, 0, 4}, 1},
      {{2, 5, 3, 4, 2, 6, 3}, {6, 1, 3, 0, 2, 5, 4}, 1}, {{3, 4, 2, 5, 2, 3, 2, 3}, {1, 4, 6, 0, 3, 7, 5, 2}, 1},
  };
  int crossing_once = 0, wrapping_often = 0;  // launches of candidates of more than two run dims on each path
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, DType::u8, c.elem}, c.perm);
    const TensorDesc dst{view.shape, {}, DType::u8, c.elem};
    const plan::RearrangePlanData p = plan::plan_rearrange_data(dst, view, {});
    for (const plan::RearrangeVariant& v : plan::tuning_candidates(p)) {
      if (v.spec.family != plan::RearrangeFamily::runs || !v.spec.gather_stores || v.spec.dst_run_dims < 2) continue;
      const std::vector<std::int64_t> tile = plan::runs_tile_extents(v.spec, v.args);
      const std::int64_t vector_units = 4 * v.spec.store_words / v.spec.unit_bytes;
      if (tile[0] >= vector_units) continue;
      const bool once = v.spec.dst_run_dims == 2 || tile[1] >= (tile[0] - 1 + vector_units - 1) / tile[0];
      INFO("shape " << c.shape.size() << " dims, elem " << c.elem << ", candidate " << plan::candidate_name(v));
      const std::size_t unit = static_cast<std::size_t>(v.spec.unit_bytes);
      for (std::size_t src_align : {16, 1, 2, 3}) {
        for (std::size_t dst_align : {16, 1, 2, 3}) {
          if ((src_align % unit != 0 && src_align != 16) || (dst_align % unit != 0 && dst_align != 16)) continue;
          INFO("source aligned to " << src_align << ", destination to " << dst_align);
          const bool ran = check_variant_at(p, v, dst, view, src_align, dst_align, rng);
          if (ran && v.spec.dst_run_dims > 2) (once ? crossing_once : wrapping_often) += 1;
        }
      }
    }
  }
  MESSAGE(crossing_once << " launches crossing dim 1 at most once a vector, " << wrapping_often << " wrapping it more");
  CHECK(crossing_once >= 16);
  CHECK(wrapping_often >= 16);
}

TEST_CASE("shared rows under a 32-byte sector that the row family would move take runs tiles, at every alignment") {
  std::mt19937_64 rng(20261130);
  // Scaled-down random-suite lines whose rows are 3 bytes (u8), 12 bytes (f32), 6 bytes (f16) and 18
  // bytes (u8, in 2-byte units), over many small dims.
  const PermuteCase cases[] = {
      {{7, 5, 6, 4, 10, 2, 5, 3}, {0, 5, 4, 1, 2, 6, 3, 7}, 1},
      {{4, 5, 3, 2, 2, 3, 2, 2, 6, 9, 2, 3}, {9, 6, 3, 8, 1, 5, 2, 7, 0, 10, 4, 11}, 4},
      {{14, 21, 23, 11, 7, 2, 3}, {1, 4, 0, 3, 5, 2, 6}, 2},
      {{28, 2, 29, 6, 4, 5, 18}, {1, 3, 2, 0, 5, 4, 6}, 1},
  };
  for (const PermuteCase& c : cases) {
    INFO(plan::describe(plan_of(c)));
    CHECK(aligned_spec(c).family == plan::RearrangeFamily::runs);
    check_permute(c, rng, false);
    check_permute(c, rng, true);
  }
  // Rows sliced from source rows of 33 bytes (1-byte units): 32 bytes stay rows, 31 take runs tiles.
  for (const std::int64_t row : {32, 31}) {
    const TensorDesc src{{300, 40, row}, {33, 9900, 1}, DType::u8, 1}, dst{{300, 40, row}, {}, DType::u8, 1};
    const plan::RearrangeSpec s = plan::variant_for_pointers(plan::plan_rearrange_data(dst, src, {}), 16).spec;
    CHECK(s.family == (row == 32 ? plan::RearrangeFamily::row : plan::RearrangeFamily::runs));
    check_against_reference(dst, src, rng, false);
  }
}

TEST_CASE("tiles of 2-byte units that load and store single units take runs tiles that gather their stores, at "
          "every alignment") {
  std::mt19937_64 rng(20261130);
  // Scaled-down random-suite lines: f16 [23, 7, 7, 3, 9] 4,1,0,2,3 (a tile of 256 x 9 units) and
  // [5, 9, 3, 35] 1,0,3,2 (3 x 525 over three B dims), each moving one 2-byte unit at a time.
  const PermuteCase cases[] = {{{23, 7, 7, 3, 9}, {4, 1, 0, 2, 3}, 2}, {{5, 9, 3, 35}, {1, 0, 3, 2}, 2}};
  for (const PermuteCase& c : cases) {
    INFO(plan::describe(plan_of(c)));
    const plan::RearrangeSpec s = aligned_spec(c);
    CHECK((s.family == plan::RearrangeFamily::runs && s.gather_stores));
    // Pointers 2 bytes off 4 keep their tiles.
    const plan::RearrangeFamily off = plan::variant_for_pointers(plan_of(c), 2).spec.family;
    CHECK((off == plan::RearrangeFamily::packed || off == plan::RearrangeFamily::transpose));
    check_permute(c, rng, false);
    check_permute(c, rng, true);
  }
  // f16 [6, 15, 4, 165, 5] 4,2,0,3,1: its runs tile would scatter its loads, so it keeps the tile.
  // ([6, 15, 4, 65, 5], whose runs tile of up to 16 KiB gathers, takes it. B of 7 units rounds up to
  // skewed 8-unit rows instead.)
  const plan::RearrangeSpec taken = aligned_spec({{6, 15, 4, 65, 5}, {4, 2, 0, 3, 1}, 2});
  CHECK((taken.family == plan::RearrangeFamily::runs && taken.gather_stores));
  const plan::RearrangeSpec kept = aligned_spec({{6, 15, 4, 165, 5}, {4, 2, 0, 3, 1}, 2});
  CHECK((kept.family == plan::RearrangeFamily::packed && kept.vec_a == 1 && kept.vec_b == 1));
}

TEST_CASE("shared rows over 256 bytes whose ends are off 16 bytes move in 16-byte vectors (by default from 768 "
          "bytes), exact, with source and destination pointers aligned to 16, 1, 2, 4 and 8 bytes (where the unit allows)") {
  std::mt19937_64 rng(20261127);
  // Rows of 257 to 8191 bytes in 1-, 2-, 4- and 8-byte units: one row dim ([3, 5, 8191]) and several,
  // rows shorter than a warp's vectors ([20, 3, 405]) and rows several tiles long ([3, 4, 2, 4097]),
  // partial row tiles ([6, 5, 7, 333]), rows just over 256 and 768 bytes ([9, 7, 257], [9, 7, 769]) and
  // rows of 2-, 4- and 8-byte units of 270, 1716, 5100 and 824 bytes.
  const std::vector<PermuteCase> cases = {
      {{20, 3, 405}, {1, 0, 2}, 1},       {{4, 9, 261}, {1, 0, 2}, 1},      {{6, 5, 7, 333}, {2, 0, 1, 3}, 1},
      {{3, 7, 2, 1203}, {1, 2, 0, 3}, 1}, {{2, 2, 2001}, {1, 0, 2}, 1},     {{3, 5, 8191}, {1, 0, 2}, 1},
      {{3, 4, 2, 4097}, {2, 1, 0, 3}, 1}, {{7, 3, 5, 2, 3, 263}, {4, 2, 0, 3, 1, 5}, 1},
      {{9, 7, 257}, {1, 0, 2}, 1},        {{9, 7, 769}, {1, 0, 2}, 1},      {{5, 9, 135}, {1, 0, 2}, 2},
      {{3, 4, 5, 429}, {2, 0, 1, 3}, 4},  {{3, 2, 1275}, {1, 0, 2}, 4},     {{7, 3, 103}, {1, 0, 2}, 8},
  };
  int launches = 0;
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, DType::u8, c.elem}, c.perm);
    const TensorDesc dst{view.shape, {}, DType::u8, c.elem};
    const std::int64_t row_bytes = c.shape.back() * c.elem;
    for (bool exact : {false, true}) {
      RearrangeOptions options;
      options.exact = exact;
      const plan::RearrangePlanData p = plan::plan_rearrange_data(dst, view, options);
      INFO(plan::describe(p));
      CHECK(plan::variant_for_pointers(p, 16).spec.vector_rows == (row_bytes >= 768));
      const std::vector<plan::RearrangeVariant> candidates = plan::tuning_candidates(p);
      const auto v = std::find_if(candidates.begin(), candidates.end(),
                                  [](const plan::RearrangeVariant& candidate) { return candidate.spec.vector_rows; });
      REQUIRE(v != candidates.end());
      const std::size_t unit = static_cast<std::size_t>(v->spec.unit_bytes);
      for (std::size_t src_align : {16, 1, 2, 4, 8})
        for (std::size_t dst_align : {16, 1, 2, 4, 8}) {
          if ((src_align < 16 && src_align % unit != 0) || (dst_align < 16 && dst_align % unit != 0)) continue;
          INFO("source aligned to " << src_align << ", destination to " << dst_align);
          launches += check_variant_at(p, *v, dst, view, src_align, dst_align, rng);
        }
    }
  }
  MESSAGE(launches << " launches of vector rows");
}

TEST_CASE("shared rows of 160 to 767 bytes take segment tiles that store 16-byte vectors, exact at every alignment") {
  std::mt19937_64 rng(20261130);
  // Rows under the vector-rows threshold that the row family would move a byte or a pair at a time,
  // or in 4- or 8-byte units: merged runs on either side ([20, 3, 205], [4, 9, 161]), partial tiles
  // ([6, 5, 7, 333]), three A dims ([7, 3, 5, 2, 3, 163]), rows of 495 and 257 bytes; rows of 2-byte
  // units of 270, 402, 174 and 234 bytes (the last in u8); rows of 4- and 8-byte units of 268 and 360
  // bytes, whose stores gather words.
  const std::vector<PermuteCase> cases = {
      {{20, 3, 205}, {1, 0, 2}, 1},        {{4, 9, 161}, {1, 0, 2}, 1},  {{6, 5, 7, 333}, {2, 0, 1, 3}, 1},
      {{7, 3, 5, 2, 3, 163}, {4, 2, 0, 3, 1, 5}, 1}, {{2, 15, 2, 43, 495}, {2, 3, 1, 0, 4}, 1},
      {{9, 9, 257}, {1, 0, 2}, 1},         {{5, 9, 135}, {1, 0, 2}, 2},  {{3, 4, 5, 201}, {2, 0, 1, 3}, 2},
      {{6, 5, 87}, {1, 0, 2}, 2},          {{4, 7, 234}, {1, 0, 2}, 1},  {{9, 7, 67}, {1, 0, 2}, 4},
      {{5, 3, 9, 45}, {2, 0, 1, 3}, 8},
  };
  for (const PermuteCase& c : cases) {
    const plan::RearrangePlanData p = plan_of(c);
    INFO(plan::describe(p));
    const plan::RearrangeSpec& spec = plan::variant_for_pointers(p, 16).spec;
    CHECK(spec.family == plan::RearrangeFamily::segments);
    CHECK(spec.segment * spec.unit_bytes >= 160);
    for (bool exact : {false, true})
      for (plan::RearrangeFamily f : check_permute(c, rng, exact)) CHECK(f == plan::RearrangeFamily::segments);
  }
}

TEST_CASE("random views of short shared rows (padded, stepped and flipped outer dims) match the naive copy") {
  std::mt19937_64 rng(20261127);
  auto pick = [&rng](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  int segments = 0, launches = 0;
  for (int i = 0; i < 120; ++i) {
    // Rank 3 to 6, the innermost dim (3 to 40 elements of 1, 2, 4 or 8 bytes) kept innermost and
    // contiguous on both sides; the other dims permuted, padded, stepped and flipped in the source.
    const int rank = 3 + pick(4);
    std::vector<std::int64_t> shape;
    for (int k = 0; k + 1 < rank; ++k) shape.push_back(2 + pick(rank > 4 ? 9 : 40));
    shape.push_back(3 + pick(38));
    const int elem = std::array<int, 4>{1, 2, 4, 8}[static_cast<std::size_t>(pick(4))];
    std::vector<int> order(static_cast<std::size_t>(rank)), pad(order.size()), step(order.size(), 1);
    std::vector<bool> flip(order.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end() - 1, rng);
    for (std::size_t k = 0; k + 1 < order.size(); ++k) {
      pad[k] = pick(4) == 0 ? 1 + pick(3) : 0;
      step[k] = pick(6) == 0 ? 2 : 1;
      flip[k] = pick(5) == 0;
    }
    const TensorDesc src{shape, storage_strides(shape, order, pad, step, flip), DType::u8, elem};
    INFO("case " << i << ": " << rank << " dims, elem " << elem);
    for (plan::RearrangeFamily f : check_against_reference({shape, {}, DType::u8, elem}, src, rng, i % 5 == 0)) {
      segments += f == plan::RearrangeFamily::segments;
      ++launches;
    }
  }
  MESSAGE(segments << " of " << launches << " runs on segment tiles");
  CHECK(segments >= launches / 4);
}

TEST_CASE("every permutation of ranks 2 to 5 matches the naive copy") {
  std::mt19937_64 rng(5);
  const std::vector<std::int64_t> extents = {3, 5, 7, 2, 3};
  for (std::size_t rank = 2; rank <= 5; ++rank) {
    const std::vector<std::int64_t> shape(extents.begin(), extents.begin() + static_cast<std::ptrdiff_t>(rank));
    std::vector<int> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    do {
      for (int elem : {1, 2, 4, 12, 16}) check_permute({shape, perm, elem}, rng, false);
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

TEST_CASE("odd row pitches take tiles of skewed 16-byte stores (4-byte units) or words of two (2-byte units that "
          "load single units), all accesses aligned") {
  std::mt19937_64 rng(8191);
  const PermuteCase cases[] = {
      {{189, 253}, {1, 0}, 4}, {{253, 189}, {1, 0}, 4}, {{97, 64}, {1, 0}, 4},     {{3, 189, 125}, {0, 2, 1}, 4},
      {{201, 135}, {1, 0}, 2}, {{257, 129}, {1, 0}, 1}, {{67, 5, 93}, {2, 1, 0}, 2}, {{129, 255}, {1, 0}, 2},
  };
  int skewed_stores = 0, words = 0;
  for (const PermuteCase& c : cases) {
    for (bool exact : {false, true})
      for (plan::RearrangeFamily f : check_permute(c, rng, exact))
        words += c.elem == 2 && f == plan::RearrangeFamily::words;
    if (c.elem == 4)
      for (std::uintptr_t alignment : {16u, 8u, 4u})
        skewed_stores += plan::variant_for_pointers(plan_of(c), alignment).spec.skew_store;
  }
  // Skewed stores: every 4-byte case at pointers aligned to 16, 8 and 4 bytes, except [97, 64] with
  // 16- and 8-byte pointers, whose tile spans the 97-unit rows whole and stores them linearly. Words
  // of two: the 2-byte elements, whose odd source pitches load single units, down to 2-byte pointers,
  // [67, 5, 93] (an outer dim) included, 12 per mode. Narrower pointers split elements into units
  // that stay tiled, as do 1-byte elements ([257, 129]).
  CHECK(skewed_stores == 10);
  CHECK(words == 24);
  // Narrow loads alone keep fixed tiles: an odd source pitch under an even destination pitch, with
  // pointers aligned for 8- and 16-byte vectors.
  const TensorDesc odd_source{{125, 124}, {1, 125}, DType::f32, 0};
  const plan::RearrangePlanData narrow_loads =
      plan::plan_rearrange_data({{125, 124}, {}, DType::f32, 0}, odd_source, {});
  for (std::uintptr_t alignment : {16u, 8u}) {
    CHECK(plan::variant_for_pointers(narrow_loads, alignment).spec.family == plan::RearrangeFamily::transpose);
    CHECK_FALSE(plan::variant_for_pointers(narrow_loads, alignment).spec.skew_store);
  }
  // Narrow stores over 16- and 8-byte loads (an odd destination pitch over an even source pitch) take
  // 64 x 64 tiles of skewed 16-byte stores, as they do at 4-byte pointers, where the loads are single
  // units too.
  for (const PermuteCase& c : {PermuteCase{{445, 124}, {1, 0}, 4}, PermuteCase{{445, 126}, {1, 0}, 4}}) {
    const plan::RearrangePlanData data = plan_of(c);
    for (std::uintptr_t alignment : {16u, 8u, 4u}) {
      const plan::RearrangeSpec s = plan::variant_for_pointers(data, alignment).spec;
      CHECK(s.family == plan::RearrangeFamily::transpose);
      CHECK((s.skew_store && s.vec_a == 4 && s.tile_a == 64 && s.tile_b == 64));
    }
    check_permute(c, rng, false);
  }
  // Transposes whose skewed-family tiles would leave their last tiles mostly empty ([131, 197] and
  // [197, 131] fill 0.53 of their slots, [3, 131, 67] 0.36, [65, 64] 0.51, [127, 255] 0.66) never take
  // that family by default.
  for (const PermuteCase& c : {PermuteCase{{131, 197}, {1, 0}, 4}, PermuteCase{{197, 131}, {1, 0}, 4},
                               PermuteCase{{3, 131, 67}, {0, 2, 1}, 4}, PermuteCase{{65, 64}, {1, 0}, 4},
                               PermuteCase{{127, 255}, {1, 0}, 4}})
    for (plan::RearrangeFamily f : check_permute(c, rng, false)) CHECK(f != plan::RearrangeFamily::skewed);
  // A source walked backwards along B (stride -1) needs the tiled kernels' strided loads.
  const TensorDesc reversed{{253, 189}, {-1, 253}, DType::f32, 0};
  for (plan::RearrangeFamily f : check_against_reference({{253, 189}, {}, DType::f32, 0}, reversed, rng))
    CHECK(f != plan::RearrangeFamily::skewed);
}

TEST_CASE("tiles of 2- and 4-byte units whose destination rows sit at odd places store aligned 16-byte vectors, "
          "each row's range skewed by its misalignment, at every alignment") {
  std::mt19937_64 rng(20261130);
  // Odd pitches on both sides (f32 single-unit loads), B over two dims (packed), f16 over 4-byte loads,
  // and an f16 A tile of 80 units (72 stored a row) beside B over two dims.
  const PermuteCase skewed[] = {{{301, 397}, {1, 0}, 4},
                                {{5, 287, 20, 41}, {0, 3, 2, 1}, 4},
                                {{301, 398}, {1, 0}, 2},
                                {{3, 150, 67, 22}, {2, 0, 3, 1}, 2}};
  for (const PermuteCase& c : skewed) {
    const plan::RearrangeVariant v = plan::variant_for_pointers(plan_of(c), 16);
    INFO(plan::describe(plan_of(c)));
    CHECK((v.spec.skew_store && v.spec.dims_a == 1 && v.spec.vec_a * c.elem == 16));
    CHECK(v.args.tiles_y.value ==
          (v.args.extent_a + v.spec.vec_a - 1 + v.spec.tile_a - v.spec.vec_a - 1) / (v.spec.tile_a - v.spec.vec_a));
    check_permute(c, rng, false);
    check_permute(c, rng, true);
  }
  // Not taken: f16 loads of single units (an odd source pitch: word tiles), and an A tile that spans A
  // whole (37 units).
  const PermuteCase single_loads{{301, 397}, {1, 0}, 2}, whole_a{{7, 22, 37, 14, 5, 501}, {0, 4, 1, 3, 5, 2}, 4};
  CHECK(aligned_spec(single_loads).family == plan::RearrangeFamily::words);
  CHECK_FALSE(aligned_spec(whole_a).skew_store);
  // Measured planning times skewed stores there too.
  const TensorDesc view = permuted({single_loads.shape, {}, DType::u8, 2}, single_loads.perm);
  int candidates = 0;
  for (const plan::RearrangeVariant& c : plan::tuning_candidates(plan_of(single_loads)))
    candidates += c.spec.skew_store && c.spec.family == plan::RearrangeFamily::transpose;
  CHECK(candidates > 0);
  check_tuning_candidates({view.shape, {}, DType::u8, 2}, view, rng);
}

TEST_CASE("tiles of 4- to 16-byte units split a group evenly where power-of-two tiles would leave 30% of its slots "
          "idle") {
  std::mt19937_64 rng(4111);
  // A of 80 4-byte units: two tiles of 40, not 64 + 16; A of 70 8-byte units: two of 36, not 64 + 6;
  // B of 33 16-byte units: two of 17, not 32 + 1, beside A's 97 in tiles of 32 (24% idle, kept).
  const PermuteCase f32{{80, 3000}, {1, 0}, 4}, f64{{70, 3000}, {1, 0}, 8}, wide{{97, 33}, {1, 0}, 16};
  CHECK(aligned_spec(f32).tile_a == 40);
  CHECK(aligned_spec(f64).tile_a == 36);
  CHECK((aligned_spec(wide).tile_a == 32 && aligned_spec(wide).tile_b == 17));
  for (const PermuteCase& c : {f32, f64, wide}) check_permute(c, rng, false);
}

TEST_CASE("tiles of 1- or 2-byte micro-tiles grow to 16 micro-tiles a thread, keeping the family chosen at 8") {
  std::mt19937_64 rng(4127);
  // 49-byte destination rows over source rows 1002 and 1001 bytes apart: 2-byte and 1-byte loads,
  // 8 micro-tiles a thread gave 49 x 64 and 49 x 32 tiles. The single bytes load skewed rows of 8
  // instead, in a 49 x 256 tile.
  const PermuteCase pairs{{49, 1002}, {1, 0}, 1}, singles{{49, 1001}, {1, 0}, 1};
  const plan::RearrangeSpec p = aligned_spec(pairs), s = aligned_spec(singles);
  CHECK((p.family == plan::RearrangeFamily::packed && p.vec_b == 2 && p.tile_a == 49 && p.tile_b == 128));
  CHECK((s.family == plan::RearrangeFamily::packed && s.skew_load && s.vec_b == 8 && s.tile_a == 49 &&
         s.tile_b == 256));
  // A tile that would store single bytes once grown (255 x 16 in single units) keeps its smaller
  // tile rather than leave it to the runs family.
  const plan::RearrangeSpec kept = aligned_spec({{204, 37, 395, 5, 3, 3}, {5, 3, 1, 2, 0, 4}, 1});
  CHECK((kept.family == plan::RearrangeFamily::packed && kept.vec_a == 2 && kept.tile_a == 126 && kept.tile_b == 16));
  for (const PermuteCase& c : {pairs, singles}) check_permute(c, rng, false);
}

TEST_CASE("tiles of 4-byte units that store A in 8- or 4-byte vectors take A two or four times as long") {
  std::mt19937_64 rng(4099);
  // Destination rows of 190 units (8-byte stores), of 13 x 29 units (single units), of 9 x 40 (16-byte).
  // B's 67 and 33 units split evenly: three tiles of 24 and of 12.
  const PermuteCase pairs{{3, 190, 67}, {0, 2, 1}, 4}, singles{{29, 7, 13, 33}, {3, 1, 0, 2}, 4},
      vectors{{40, 9, 33}, {2, 0, 1}, 4};
  const plan::RearrangeSpec p = aligned_spec(pairs), s = aligned_spec(singles), v = aligned_spec(vectors);
  CHECK((p.vec_a == 2 && p.tile_a == 128 && p.tile_b == 24));
  CHECK((s.vec_a == 1 && s.tile_a == 128 && s.tile_b == 12));
  CHECK((v.vec_a == 4 && v.tile_a == 64));
  for (const PermuteCase& c : {pairs, singles, vectors}) check_permute(c, rng, false);
}

TEST_CASE("tiles of 2- and 4-byte units whose A four times as long would load narrower vectors take A twice "
          "as long, at every alignment") {
  std::mt19937_64 rng(20261130);
  // f16 [7, 19, 6, 3, 12, 2, 3, 9] 7,6,4,0,5,2,3,1: 4-byte stores over two A dims, 64 x 128 -> 128 x
  // 64 with 16-byte loads. f32 [545, 3, 26, 18] 3,2,1,0 (single-unit stores, 128 x 32 by this rule
  // before) stores skewed 16-byte vectors over its one A dim since, in a 64 x 64 tile.
  const PermuteCase f32{{545, 3, 26, 18}, {3, 2, 1, 0}, 4}, f16{{7, 19, 6, 3, 12, 2, 3, 9}, {7, 6, 4, 0, 5, 2, 3, 1}, 2};
  const plan::RearrangeSpec a = aligned_spec(f32), b = aligned_spec(f16);
  CHECK((a.skew_store && a.vec_a == 4 && a.tile_a == 64 && a.vec_b == 4));
  CHECK((b.vec_a == 2 && b.tile_a == 128 && b.tile_b == 64 && b.vec_b == 8));
  for (const PermuteCase& c : {f32, f16}) {
    check_permute(c, rng, false);
    check_permute(c, rng, true);
  }
}

TEST_CASE("16 KiB tiles of 256 threads double where the larger tile spans another dim, at every alignment") {
  std::mt19937_64 rng(4111);
  // f32 [4,3,17,7,16] 4,0,2,3,1: A takes a third dim (and 16-byte stores); f32 [40,2,3,9,20,6]
  // 2,4,3,5,0,1: B takes a third dim; u8 [8,4,16,17,24] 4,0,3,1,2: A takes a third dim.
  const PermuteCase a_f32{{4, 3, 17, 7, 16}, {4, 0, 2, 3, 1}, 4}, b_f32{{40, 2, 3, 9, 20, 6}, {2, 4, 3, 5, 0, 1}, 4},
      a_u8{{8, 4, 16, 17, 24}, {4, 0, 3, 1, 2}, 1};
  const plan::RearrangeSpec a = aligned_spec(a_f32), b = aligned_spec(b_f32), u = aligned_spec(a_u8);
  CHECK((a.dims_a == 3 && a.dims_b == 1 && a.tile_a * a.tile_b * 4 > 16384 && a.vec_a == 4));
  CHECK((b.dims_a == 1 && b.dims_b == 3 && b.tile_a * b.tile_b * 4 > 16384));
  CHECK((u.dims_a == 3 && u.dims_b == 1));
  // Batched 2-D transposes gain no dim at twice the volume: the 64 x 64 tile stays.
  const plan::RearrangeSpec square = aligned_spec({{3, 300, 500}, {0, 2, 1}, 4});
  CHECK((square.tile_a == 64 && square.tile_b == 64));
  // A tile of 128-thread blocks stays (f32 [6,16,19,28,26,3,25,2] 1,3,4,7,5,0,2,6 would take a
  // 256-thread tile over four A dims).
  CHECK(aligned_spec({{6, 16, 19, 28, 26, 3, 25, 2}, {1, 3, 4, 7, 5, 0, 2, 6}, 4}).threads == 128);
  for (const PermuteCase& c : {a_f32, b_f32, a_u8}) {
    check_permute(c, rng, false);
    check_permute(c, rng, true);
  }
}

TEST_CASE("tiles that would split a one-dim A in two take A on through the next destination dim, at every alignment") {
  std::mt19937_64 rng(20261130);
  // f64 [74, 5, 6, 300] 2,3,1,0: A = the 74-unit rows, which the square tile splits into 38 + 36;
  // their destination chain runs on through the 5-unit dim, so A spans both in 128-unit tiles.
  // f16 [136, 2, 16, 50, 8, 13] 1,3,4,5,2,0: 136 units split into 72 + 64, then A of 256 over two dims.
  const PermuteCase f64{{74, 5, 6, 300}, {2, 3, 1, 0}, 8}, f16{{136, 2, 16, 50, 8, 13}, {1, 3, 4, 5, 2, 0}, 2};
  const plan::RearrangeSpec a = aligned_spec(f64), b = aligned_spec(f16);
  CHECK((a.dims_a == 2 && a.tile_a == 128 && a.dims_b == 1));
  CHECK((b.dims_a == 2 && b.tile_a == 256 && b.dims_b == 1));
  for (const PermuteCase& c : {f64, f16}) {
    check_permute(c, rng, false);
    check_permute(c, rng, true);
  }
  // Where the longer A would cost B a dim, the split tile stays (f64 [3,96,2,147,47,10,5]: B of
  // three dims).
  const plan::RearrangeSpec kept = aligned_spec({{3, 96, 2, 147, 47, 10, 5}, {3, 5, 4, 6, 0, 2, 1}, 8});
  CHECK((kept.dims_a == 1 && kept.tile_a == 64 && kept.dims_b == 3));
}

TEST_CASE("single-unit loads of rows at odd pitches load the aligned vectors around them, funnel-shifted, at every "
          "alignment") {
  std::mt19937_64 rng(4127);
  // Whole short A over an odd B (u8 [81, 2001], f16 [23, 3001], f16 [121, 10477]): the plain tile
  // loads single units; a u8 [101, 4, 7119] -> [101, 7119, 4] transpose; an f16 tile over two A dims.
  const PermuteCase cases[] = {
      {{81, 2001}, {1, 0}, 1},     {{23, 3001}, {1, 0}, 2},       {{121, 10477}, {1, 0}, 2},
      {{101, 4, 7119}, {0, 2, 1}, 1}, {{13, 31, 190, 53}, {0, 3, 2, 1}, 2},
  };
  for (const PermuteCase& c : cases) {
    const plan::RearrangeSpec s = aligned_spec(c);
    CHECK((s.skew_load && s.vec_b * s.unit_bytes >= 4));
    check_permute(c, rng, false);
    check_permute(c, rng, true);
  }
  // Rows of one 4-byte vector: u8 rows of 20 units at a pitch of 21, f16 rows of 6 units at a pitch of
  // -7 (a flipped outer dim).
  struct StridedCase {
    std::vector<std::int64_t> shape, src_strides;
    int elem;
  };
  for (const StridedCase& c : {StridedCase{{20, 1004}, {1, 21}, 1}, StridedCase{{6, 1002}, {1, -7}, 2}}) {
    const TensorDesc src{c.shape, c.src_strides, DType::u8, c.elem}, dst{c.shape, {}, DType::u8, c.elem};
    const plan::RearrangeSpec s = plan::variant_for_pointers(plan::plan_rearrange_data(dst, src, {}), 16).spec;
    CHECK((s.skew_load && s.vec_b * s.unit_bytes == 4));
    check_against_reference(dst, src, rng, false);
    check_against_reference(dst, src, rng, true);
  }
  // Plain loads of two bytes stay (u8 [42, 44650]), and so does a tile spanning an odd B whole that
  // skewed tiles would split (u8 [33, 207670, 21] -> [21, 207670, 33]).
  const plan::RearrangeSpec pairs = aligned_spec({{42, 44650}, {1, 0}, 1});
  CHECK((!pairs.skew_load && pairs.vec_b == 2));
  const plan::RearrangeSpec whole_b = aligned_spec({{33, 207670, 21}, {2, 1, 0}, 1});
  CHECK((!whole_b.skew_load && whole_b.tile_b == 21));
  // A skewed f16 tile that takes B in two 16-byte rows (f16 [3, 286, 829] -> [3, 829, 286], 144 x 16
  // units) moves on word tiles instead; one of four rows (f16 [29, 86, 129], 86 x 32) stays skewed.
  const PermuteCase two_rows{{3, 286, 829}, {0, 2, 1}, 2};
  CHECK(aligned_spec(two_rows).family == plan::RearrangeFamily::words);
  check_permute(two_rows, rng, false);
  check_permute(two_rows, rng, true);
  const plan::RearrangeSpec four_rows = aligned_spec({{29, 86, 129}, {0, 2, 1}, 2});
  CHECK((four_rows.skew_load && four_rows.tile_b == 32 && four_rows.vec_b == 8));
}

TEST_CASE("tiles storing word vectors over a whole one-dim B that no word vector divides round B up to skewed "
          "vectors, at every alignment") {
  std::mt19937_64 rng(20261202);
  // B of 7 f16 units (a 1024 x 8 tile), of 47 and of 41 bytes (tiles of 48), each loading single units
  // before; the micro-tile at B's end reads into the next row.
  const PermuteCase cases[] = {{{6, 15, 4, 65, 7}, {4, 2, 0, 3, 1}, 2},
                               {{9, 5, 2, 42, 16, 6, 47}, {6, 4, 2, 1, 3, 5, 0}, 1},
                               {{164, 13, 3, 2, 33, 41}, {2, 5, 3, 0, 1, 4}, 1}};
  for (const PermuteCase& c : cases) {
    const plan::RearrangeVariant v = plan::variant_for_pointers(plan_of(c), 16);
    INFO(plan::describe(plan_of(c)));
    CHECK((v.spec.skew_load && v.spec.bounds && v.spec.tile_b > v.args.extent_b &&
           v.spec.tile_b - v.args.extent_b < v.spec.vec_b && v.spec.vec_a * v.spec.unit_bytes >= 4));
    check_permute(c, rng, false);
    check_permute(c, rng, true);
  }
}

TEST_CASE("f16 2-D transposes with narrow stores take tiles of skewed 16-byte stores where they load 4 bytes or "
          "more, else words of two") {
  std::mt19937_64 rng(1283);
  // [642, 1282] and [641, 1282]: even source pitches, 4-byte loads: skewed stores, tiles of 128 x 128
  // (120 units of each destination row); [6002, 130] too, B's 130 units in two tiles of 72;
  // [5699, 3457]: an odd source pitch, single-unit loads: words of two.
  const PermuteCase pairs{{642, 1282}, {1, 0}, 2}, along_b{{6002, 130}, {1, 0}, 2},
      single_store{{641, 1282}, {1, 0}, 2}, single{{5699, 3457}, {1, 0}, 2};
  for (const PermuteCase& c : {pairs, along_b, single_store}) {
    const plan::RearrangeSpec s = aligned_spec(c);
    CHECK(s.family == plan::RearrangeFamily::transpose);
    CHECK((s.skew_store && s.vec_a == 8 && s.vec_b == 2 && s.tile_a == 128));
  }
  CHECK(aligned_spec(along_b).tile_b == 72);
  CHECK(aligned_spec(single).family == plan::RearrangeFamily::words);
  for (const PermuteCase& c : {pairs, along_b, single_store, single}) check_permute(c, rng, false);
}

TEST_CASE("1-byte transposes with odd pitches move aligned words, skewed and funnel-shifted") {
  std::mt19937_64 rng(4099);
  const PermuteCase cases[] = {
      {{257, 129}, {1, 0}, 1},     {{129, 257}, {1, 0}, 1},         {{200, 131}, {1, 0}, 1},
      {{131, 200}, {1, 0}, 1},     {{67, 5, 93}, {2, 1, 0}, 1},     {{3, 67, 41}, {0, 2, 1}, 1},
      {{35, 17, 22}, {1, 2, 0}, 1}, {{201, 135}, {1, 0}, 2},       {{130, 97}, {1, 0}, 2},
      {{16, 8}, {1, 0}, 1},        {{1000, 9}, {1, 0}, 1},          {{9, 1000}, {1, 0}, 1},
      {{177, 8, 50, 19}, {2, 0, 3, 1}, 1}, {{200, 1031}, {1, 0}, 1},   {{3, 120, 517}, {0, 2, 1}, 1},
      {{144, 517}, {1, 0}, 1},  // destination rows word-aligned, source rows odd
      // Rows long enough for 16-byte stores: odd (skewed), and aligned to them at 16-byte pointers.
      {{1031, 200}, {1, 0}, 1}, {{1040, 1031}, {1, 0}, 1},
      // Composite groups: A = 5 x 31 in dst; B = 37 x 3 x 5 in src; both, with outer dims.
      {{5, 31, 137}, {2, 1, 0}, 1},     {{131, 5, 3, 37}, {2, 1, 3, 0}, 1},
      {{7, 5, 2, 12, 3, 43, 13}, {5, 6, 4, 3, 1, 2, 0}, 1},
      // A short A group (143 units, tiles of 76) over composite B: four load blocks a thread, two
      // runs of lanes along B.
      {{143, 2, 3, 12, 41}, {2, 1, 4, 3, 0}, 1},
  };
  std::map<std::pair<bool, bool>, int> skews;  // (skew_load, skew_store) -> runs
  std::map<int, int> store_words;               // words per store vector -> variants
  int aligned_vectors = 0;  // variants storing 16-byte vectors into rows aligned to them
  int composite = 0;  // word-tile variants whose groups span several dims
  int composite_four_loads = 0;  // ... with four load blocks a thread (64 B units)
  for (const PermuteCase& c : cases)
    for (bool exact : {false, true}) {
      RearrangeOptions options;
      options.exact = exact;
      check_permute(c, rng, exact);
      const TensorDesc view = permuted({c.shape, {}, DType::u8, c.elem}, c.perm);
      const auto p = plan::plan_rearrange_data({view.shape, {}, DType::u8, c.elem}, view, options);
      for (const plan::RearrangeVariant& v : p.variants)
        if (v.spec.family == plan::RearrangeFamily::words) {
          ++skews[{v.spec.skew_load, v.spec.skew_store}];
          ++store_words[v.spec.store_words];
          aligned_vectors += v.spec.store_words == 4 && !v.spec.skew_store;
          composite += v.spec.dims_a + v.spec.dims_b > 2;
          composite_four_loads += v.spec.dims_a + v.spec.dims_b > 2 && !v.spec.skew_load && v.spec.threads == 128 &&
                                  v.spec.tile_b == 64;
        }
    }
  CHECK(composite_four_loads > 0);
  for (int i = 0; i < 60; ++i) {
    const PermuteCase c = random_word_view(rng, 64, 200, 1);
    INFO("random words case " << i);
    check_permute(c, rng, i % 5 == 0);
    const TensorDesc view = permuted({c.shape, {}, DType::u8, c.elem}, c.perm);
    for (const plan::RearrangeVariant& v : plan::plan_rearrange_data({view.shape, {}, DType::u8, c.elem}, view, {}).variants)
      if (v.spec.family == plan::RearrangeFamily::words) {
        ++skews[{v.spec.skew_load, v.spec.skew_store}];
        composite += v.spec.dims_a + v.spec.dims_b > 2;
      }
  }
  MESSAGE(composite << " word-tile variants over composite groups");
  CHECK(composite >= 6);
  MESSAGE(store_words[1] << " word-tile variants storing words, " << store_words[4] << " storing 16-byte vectors");
  CHECK(store_words[1] > 0);
  CHECK(store_words[4] > 0);
  CHECK(aligned_vectors > 0);
  // Rows aligned on both sides with narrow tiles needs padded strides.
  for (auto [load, store] : {std::pair{true, true}, std::pair{true, false}, std::pair{false, true}}) {
    MESSAGE("skew_load " << load << ", skew_store " << store << ": " << skews[{load, store}] << " variants");
    CHECK(skews[{load, store}] > 0);
  }
}

TEST_CASE("2-byte transposes that fixed tiles would store one unit at a time move words of two") {
  std::mt19937_64 rng(4111);
  // Odd destination pitches (single-unit stores) over even and odd source pitches, groups of one dim
  // and composite ones (A = 49 x 19, A = 5 x 31, B = 37 x 3), outer dims on either side; pairs on
  // both sides of 2-D transposes over an odd source pitch: [6002, 131] counts along B and stores its
  // long rows in 16-byte vectors, [602, 131] stores words, its rows aligned to them. [67, 5, 94] and
  // [601, 132] keep word tiles over even source pitches (aligned loads, skewed stores), where most
  // such tiles take a longer A since narrow_store_aspect.
  const PermuteCase cases[] = {
      {{201, 135}, {1, 0}, 2},        {{129, 256}, {1, 0}, 2},        {{97, 38, 387}, {2, 1, 0}, 2},
      {{3, 49, 19, 37}, {0, 3, 2, 1}, 2}, {{5, 31, 137}, {2, 1, 0}, 2}, {{131, 5, 3, 37}, {2, 1, 3, 0}, 2},
      {{67, 5, 93}, {2, 1, 0}, 2},    {{6002, 131}, {1, 0}, 2},       {{602, 131}, {1, 0}, 2},
      {{67, 5, 94}, {2, 1, 0}, 2},    {{601, 132}, {1, 0}, 2},
  };
  std::map<std::pair<bool, bool>, int> skews;  // (skew_load, skew_store) -> 2-byte word-tile variants
  std::map<int, int> store_words;               // words per store vector -> 2-byte word-tile variants
  int composite = 0, taken = 0;
  for (const PermuteCase& c : cases)
    for (bool exact : {false, true}) {
      RearrangeOptions options;
      options.exact = exact;
      for (plan::RearrangeFamily f : check_permute(c, rng, exact)) taken += f == plan::RearrangeFamily::words;
      const TensorDesc view = permuted({c.shape, {}, DType::u8, c.elem}, c.perm);
      for (const plan::RearrangeVariant& v :
           plan::plan_rearrange_data({view.shape, {}, DType::u8, c.elem}, view, options).variants)
        if (v.spec.family == plan::RearrangeFamily::words && v.spec.unit_bytes == 2) {
          ++skews[{v.spec.skew_load, v.spec.skew_store}];
          ++store_words[v.spec.store_words];
          composite += v.spec.dims_a + v.spec.dims_b > 2;
        }
    }
  MESSAGE(taken << " runs on word tiles, " << composite << " 2-byte word-tile variants over composite groups");
  CHECK(taken >= 40);
  CHECK(composite >= 6);
  CHECK(store_words[1] > 0);
  CHECK(store_words[4] > 0);
  for (auto [load, store] : {std::pair{true, true}, std::pair{true, false}, std::pair{false, true}}) {
    MESSAGE("skew_load " << load << ", skew_store " << store << ": " << skews[{load, store}] << " variants");
    CHECK(skews[{load, store}] > 0);
  }
  int random_taken = 0;
  for (int i = 0; i < 40; ++i) {
    INFO("random 2-byte words case " << i);
    for (plan::RearrangeFamily f : check_permute(random_word_view(rng, 32, 150, 2), rng, i % 5 == 0))
      random_taken += f == plan::RearrangeFamily::words;
  }
  MESSAGE(random_taken << " runs of random views on word tiles");
  CHECK(random_taken > 0);
}

TEST_CASE("wide tensors exercise multi-tile transposes, partial tiles and composite groups") {
  std::mt19937_64 rng(11);
  const PermuteCase cases[] = {
      {{130, 70}, {1, 0}, 4},          {{128, 256}, {1, 0}, 4},        {{257, 129}, {1, 0}, 1},
      {{512, 384}, {1, 0}, 1},         {{200, 136}, {1, 0}, 2},        {{96, 64}, {1, 0}, 8},
      {{70, 66}, {1, 0}, 16},          {{3, 900}, {1, 0}, 2},          {{900, 3}, {1, 0}, 1},
      {{4, 3, 50, 60}, {0, 2, 3, 1}, 2}, {{4, 50, 60, 3}, {0, 3, 1, 2}, 1}, {{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2},
                                                                               {11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, 4},
      {{3, 3, 3, 3, 3, 3, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 0}, 4}, {{5, 6, 7, 8, 9}, {4, 2, 0, 3, 1}, 2},
      {{33, 65, 3}, {1, 0, 2}, 4},     {{8, 300, 3}, {0, 2, 1}, 12},   {{16, 16, 16, 4}, {3, 2, 1, 0}, 4},
  };
  for (const PermuteCase& c : cases)
    for (bool exact : {false, true}) check_permute(c, rng, exact);
}

TEST_CASE("small whole tiles of many small dims take slab dims and fixed tables, at every alignment") {
  std::mt19937_64 rng(23);
  const PermuteCase cases[] = {
      {{2, 3, 2, 6, 2, 3, 2, 3, 4, 6}, {3, 5, 0, 7, 6, 9, 4, 1, 8, 2}, 1},
      {{3, 4, 2, 5, 5, 7, 5, 4}, {6, 3, 1, 4, 2, 7, 5, 0}, 1},
      {{2, 5, 6, 4, 2, 4, 2, 2, 4}, {5, 1, 0, 6, 4, 7, 8, 3, 2}, 2},
      {{3, 3, 3, 6, 7, 3, 2, 4, 4}, {7, 0, 3, 1, 5, 6, 2, 8, 4}, 2},
      {{2, 5, 6, 2, 4, 2, 4, 6}, {0, 3, 5, 2, 7, 4, 6, 1}, 4},
  };
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, DType::u8, c.elem}, c.perm);
    const TensorDesc dst{view.shape, {}, DType::u8, c.elem};
    const plan::RearrangePlanData p = plan::plan_rearrange_data(dst, view, {});
    const plan::RearrangeSpec& s = plan::variant_for_pointers(p, 0).spec;
    INFO(plan::describe(p));
    // The slab dims follow B's source chain: its micro-tiles stay inside it, and the tile is whole.
    CHECK(s.b_chain > 0);
    CHECK(s.tile_b % s.b_chain == 0);
    CHECK(s.b_chain % s.vec_b == 0);
    CHECK(s.fixed_b);
    CHECK((s.fixed_a || s.dims_a == 1));
    CHECK(s.tile_b == variant_for_pointers(p, 0).args.extent_b);
    for (bool exact : {false, true}) check_permute(c, rng, exact);
  }
}

// The A units that B's source chain passes in a tiled variant: from B's source-contiguous units, A
// dims continue the source chain up to B's next dim; the units of A's dims up to the last of them
// (0 when the chain does not reach B's next dim).
std::int64_t passed_a_units(const plan::RearrangeVariant& v) {
  const plan::RearrangeSpec& s = v.spec;
  int first_past = s.dims_a;  // B's first dim past its source-contiguous units
  for (std::int64_t units = 1; units < s.b_chain && first_past < s.dims_a + s.dims_b; ++first_past)
    units *= v.args.dim[first_past].extent.value;
  if (first_past == s.dims_a + s.dims_b) return 0;
  const std::int64_t target = v.args.dim[first_past].src_stride;
  std::int64_t next = s.b_chain;
  int last = -1;
  for (bool grown = true; grown && next != target;) {
    grown = false;
    for (int k = 0; k < s.dims_a && !grown; ++k)
      if (v.args.dim[k].src_stride == next) {
        next *= v.args.dim[k].extent.value;
        last = std::max(last, k);
        grown = true;
      }
  }
  if (next != target || last < 0) return 0;
  std::int64_t units = 1;
  for (int k = 0; k <= last; ++k) units *= v.args.dim[k].extent.value;
  return units;
}

TEST_CASE("tiles spanning A whole store runs of A and B's first dims linearly, over tables of B, at every alignment") {
  std::mt19937_64 rng(29);
  // Runs shorter than the tile over fixed and per-tile B tables, partial tiles, and (f16 [150, 218,
  // 3, 2]) a composite B group that is one destination run, its offset from B's fixed table.
  const PermuteCase cases[] = {
      {{15, 6, 3, 2, 37, 32}, {4, 0, 2, 1, 5, 3}, 1},   {{150, 218, 3, 2}, {0, 1, 3, 2}, 2},
      {{41, 5, 30, 10, 4}, {3, 2, 1, 4, 0}, 1},        {{26, 5, 2, 35, 4}, {3, 1, 2, 4, 0}, 2},
      {{10, 18, 7, 30, 8}, {1, 3, 2, 4, 0}, 2},        {{2, 5, 3, 6, 4, 35, 3, 4}, {3, 5, 0, 6, 4, 2, 7, 1}, 4},
      {{2, 15, 7, 2, 3, 109, 4}, {5, 0, 3, 2, 1, 6, 4}, 8},
  };
  int short_runs = 0, composite_one_run = 0, per_tile_tables = 0;
  for (const PermuteCase& c : cases) {
    const plan::RearrangePlanData p = plan_of(c);
    const plan::RearrangeSpec& s = plan::variant_for_pointers(p, 0).spec;
    INFO(plan::describe(p));
    REQUIRE(s.store_linear > 0);
    REQUIRE(s.store_run > 0);
    CHECK(s.tile_b % s.store_run == 0);
    short_runs += s.store_run < s.tile_b;
    composite_one_run += s.store_run == s.tile_b && s.dims_b > 1;
    per_tile_tables += s.store_run < s.tile_b && !s.fixed_b;
    for (bool exact : {false, true}) check_permute(c, rng, exact);
  }
  CHECK(short_runs == 6);
  CHECK(composite_one_run == 1);
  CHECK(per_tile_tables >= 2);
}

TEST_CASE("tiles of linear stores that rotate their store vectors in shared memory match the naive copy at every "
          "alignment") {
  std::mt19937_64 rng(31);
  // A passing B's first 2 units (tiles of 56 and 28 A units), partial tiles; u8 and f16 at rank 15.
  const PermuteCase cases[] = {
      {{2, 28, 7, 5, 32, 9, 2}, {3, 5, 4, 1, 0, 6, 2}, 2},
      {{3, 28, 7, 3, 32, 9, 2}, {3, 5, 4, 1, 0, 6, 2}, 2},
      {{2, 2, 7, 2, 2, 2, 3, 4, 2, 2, 3, 2, 4, 2, 8}, {13, 4, 6, 8, 7, 12, 9, 3, 0, 11, 14, 1, 5, 10, 2}, 1},
      {{2, 3, 2, 3, 2, 2, 2, 4, 2, 7, 2, 5, 2, 5, 4}, {13, 8, 10, 2, 12, 4, 5, 1, 0, 6, 3, 11, 14, 9, 7}, 2},
  };
  int passing = 0;
  for (const PermuteCase& c : cases) {
    const plan::RearrangePlanData p = plan_of(c);
    const plan::RearrangeSpec& s = plan::variant_for_pointers(p, 0).spec;
    INFO(plan::describe(p));
    REQUIRE(s.store_linear > 0);
    CHECK(s.rotate_span > 0);
    passing += s.a_pass > 0;
    for (bool exact : {false, true}) check_permute(c, rng, exact);
  }
  CHECK(passing == 2);
}

TEST_CASE("tiles spanning B whole load runs of B and A's first dims linearly, over tables of A, at every alignment") {
  std::mt19937_64 rng(30);
  // Runs shorter than the tile over fixed and per-tile A tables, with and without partial tiles.
  const PermuteCase cases[] = {
      {{2, 8, 8, 8, 7, 3}, {4, 0, 5, 2, 1, 3}, 1},          {{5, 7, 2, 4, 5, 3, 2, 7}, {7, 1, 2, 5, 0, 3, 4, 6}, 1},
      {{10, 11, 3, 8, 13}, {4, 1, 0, 2, 3}, 1},             {{12, 4, 12, 6, 11}, {4, 1, 3, 0, 2}, 1},
      {{11, 8, 8, 9, 5}, {3, 4, 1, 0, 2}, 2},               {{13, 7, 12, 3, 5}, {1, 4, 3, 0, 2}, 2},
      {{5, 2, 3, 5, 6, 8, 7}, {6, 1, 3, 4, 0, 2, 5}, 2},    {{2, 3, 4, 3, 5, 5, 4, 7}, {7, 0, 5, 1, 3, 2, 4, 6}, 2},
  };
  int per_tile_tables = 0, fixed_tables = 0, partial_tiles = 0;
  for (const PermuteCase& c : cases) {
    const plan::RearrangePlanData p = plan_of(c);
    const plan::RearrangeSpec& s = plan::variant_for_pointers(p, 0).spec;
    INFO(plan::describe(p));
    REQUIRE(s.load_linear > 0);
    CHECK(s.load_run < s.tile_a);
    CHECK(s.tile_a % s.load_run == 0);
    per_tile_tables += !s.fixed_a;
    fixed_tables += s.fixed_a;
    partial_tiles += s.bounds;
    for (bool exact : {false, true}) check_permute(c, rng, exact);
  }
  CHECK(per_tile_tables >= 2);
  CHECK(fixed_tables >= 2);
  CHECK(partial_tiles >= 3);
}

TEST_CASE("B's source chain passes A's first dims where the tile's source runs would be short, at every alignment") {
  std::mt19937_64 rng(31);
  // Each has a dim that follows B's first dims in the source and lies in A: B (the source's chain)
  // reaches past it only by passing through A, whose tiles then span it whole. Every plan here
  // differs from the planner's before B could pass.
  const PermuteCase cases[] = {
      {{6, 7, 2, 9, 5, 2, 4, 3}, {7, 4, 2, 0, 6, 1, 3, 5}, 1},
      {{8, 4, 4, 6, 3, 7}, {3, 1, 5, 0, 4, 2}, 1},
      {{4, 3, 6, 4, 6, 3, 7}, {1, 3, 4, 6, 0, 2, 5}, 1},
      {{3, 13, 4, 7, 18, 5, 2, 2}, {5, 4, 7, 1, 0, 2, 6, 3}, 1},
      {{9, 9, 7, 2, 7}, {1, 2, 4, 3, 0}, 2},
      {{3, 4, 3, 6, 6, 2}, {3, 5, 1, 2, 0, 4}, 4},
      {{7, 2, 6, 2, 2, 4, 5, 3, 2}, {4, 5, 0, 2, 7, 3, 1, 6, 8}, 4},
      {{8, 4, 6, 6, 2, 4}, {3, 5, 2, 1, 0, 4}, 8},
      {{9, 30, 2, 2}, {1, 3, 2, 0}, 8},
      {{2, 7, 8, 2, 3, 5}, {5, 3, 2, 1, 0, 4}, 16},
      {{9, 30, 3, 2}, {1, 3, 2, 0}, 16},
  };
  for (const PermuteCase& c : cases) {
    const plan::RearrangePlanData p = plan_of(c);
    const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 0);
    const plan::RearrangeSpec& s = v.spec;
    INFO(plan::describe(p));
    CHECK(s.family == plan::RearrangeFamily::packed);
    const std::int64_t passed = s.family == plan::RearrangeFamily::packed && s.dims_b >= 2 ? passed_a_units(v) : 0;
    CHECK(passed > 1);
    CHECK(s.b_chain % s.vec_b == 0);
    // The tiles along A span the passed dims whole.
    CHECK((passed > 0 && (s.tile_a % passed == 0 || s.tile_a == v.args.extent_a)));
    for (bool exact : {false, true}) check_permute(c, rng, exact);
  }
}

TEST_CASE("a long A over a short B whose source chain runs on through A's dims takes the quarter tile that leaves "
          "them to B, at every alignment") {
  std::mt19937_64 rng(37);
  // B (2 units) continues in the source through the 30-unit dim that A (dst-contiguous, 68 x 30)
  // would take; the quarter tile keeps A to its first dim and gives B that dim and the next.
  const PermuteCase cases[] = {
      {{4, 17, 2, 2, 12, 30, 2}, {4, 3, 2, 6, 5, 0, 1}, 1},
      {{4, 17, 2, 2, 12, 30, 2}, {4, 3, 2, 6, 5, 0, 1}, 2},
  };
  for (const PermuteCase& c : cases) {
    const plan::RearrangePlanData p = plan_of(c);
    const plan::RearrangeSpec& s = plan::variant_for_pointers(p, 0).spec;
    INFO(plan::describe(p));
    CHECK(s.family == plan::RearrangeFamily::packed);
    CHECK(s.dims_a == 1);
    CHECK(s.tile_a == 68);
    CHECK(s.dims_b == 3);
    CHECK(s.tile_b >= 64);
    for (bool exact : {false, true}) check_permute(c, rng, exact);
  }
}

TEST_CASE("tiles loading 1- and 2-byte units under a word where B's source chain runs on through A's dims take the "
          "quarter tile that leaves them to B, at every alignment") {
  std::mt19937_64 rng(41);
  // B (17 f16 units; 5 u8 units) continues in the source through dims that A (dst-contiguous)
  // would take at the full volume; the quarter tile gives them to B, which then loads words or wider.
  const PermuteCase cases[] = {
      {{3, 112, 2, 42, 17}, {4, 0, 2, 3, 1}, 2},
      {{2, 36, 3, 17, 40, 16, 5}, {6, 0, 4, 3, 2, 5, 1}, 1},
  };
  for (const PermuteCase& c : cases) {
    const plan::RearrangePlanData p = plan_of(c);
    const plan::RearrangeSpec& s = plan::variant_for_pointers(p, 0).spec;
    INFO(plan::describe(p));
    CHECK(s.family == plan::RearrangeFamily::packed);
    CHECK(s.dims_b == 2);
    CHECK(s.vec_b * s.unit_bytes >= 4);
    CHECK(s.threads == 128);
    for (bool exact : {false, true}) check_permute(c, rng, exact);
  }
}

TEST_CASE("final tiles of 1-, 4- and 8-byte units with fewer micro-tiles than 256 threads run in 128-thread blocks "
          "at twice the blocks per SM, or where over a quarter of the threads idle at the most blocks that fit over "
          "theirs; 2-byte units, busier tiles that fit no more than that, and tiles whose table addresses fit at no "
          "more blocks keep theirs") {
  std::mt19937_64 rng(43);
  const auto micro_tiles = [](const plan::RearrangeSpec& s) {
    return std::int64_t{s.tile_a} / s.vec_a * (s.tile_b / s.vec_b);
  };
  struct SmallBlockCase {
    PermuteCase permute;
    int min_blocks;  // of the 128-thread block; the 256-thread one ran 3
  };
  const SmallBlockCase taken[] = {
      {{{34, 2, 2, 38, 24, 2}, {2, 1, 5, 3, 4, 0}, 8}, 6},  // 9 x 16 micro-tiles of 2 x 2 units
      {{{3, 11, 28, 8, 29}, {4, 1, 3, 2, 0}, 1}, 6},        // 12 x 16 of 4 x 8
      {{{14, 20, 7, 13, 4, 2}, {1, 5, 3, 0, 2, 4}, 4}, 6},  // 7 x 16 of 4 x 2
      {{{6, 6, 16, 36}, {2, 3, 1, 0}, 4}, 4},               // 9 x 16 of 4 x 4: registers for 4 blocks, not 5
      {{{26, 32, 8, 5}, {3, 2, 1, 0}, 1}, 4},               // 32 x 5 of 8 x 8
  };
  for (const SmallBlockCase& c : taken) {
    const plan::RearrangePlanData p = plan_of(c.permute);
    const plan::RearrangeSpec& s = plan::variant_for_pointers(p, 0).spec;
    INFO(plan::describe(p));
    CHECK(s.family == plan::RearrangeFamily::packed);
    CHECK(micro_tiles(s) < 256);
    CHECK(s.threads == 128);
    CHECK(s.min_blocks == c.min_blocks);
    for (bool exact : {false, true}) check_permute(c.permute, rng, exact);
  }
  const PermuteCase kept[] = {
      {{3, 35, 8, 16, 2}, {2, 4, 3, 0, 1}, 2},                  // 2-byte units: 8 x 8 micro-tiles of 8 x 8 units
      {{5, 3, 15, 17, 7, 4, 8}, {4, 1, 6, 3, 0, 5, 2}, 1},      // 30 x 8 micro-tiles, 16 of 256 threads idle
      {{13, 8, 2, 4, 4, 3, 5, 8}, {3, 5, 7, 0, 1, 4, 6, 2}, 1},  // B's table addresses fit no more blocks
      {{4, 24, 11, 6, 6, 2, 4}, {5, 3, 6, 1, 2, 4, 0}, 1},       // again, at 30 x 6
  };
  for (const PermuteCase& c : kept) {
    const plan::RearrangePlanData p = plan_of(c);
    const plan::RearrangeSpec& s = plan::variant_for_pointers(p, 0).spec;
    INFO(plan::describe(p));
    CHECK(micro_tiles(s) < 256);
    CHECK(s.threads == 256);
  }
}

TEST_CASE("tiles loading under a word keep their tile where the quarter's A would hold under 32 bytes or its "
          "stores would narrow to a quarter of their width") {
  // u8: the quarter's A would hold 16 bytes; f16: the quarter would store 4-byte vectors where the
  // tile stores 16 bytes.
  const PermuteCase kept_a{{21, 40, 2, 84, 18, 10, 7}, {0, 3, 5, 4, 1, 6, 2}, 1};
  const PermuteCase kept_stores{{2, 5, 36, 3, 35, 4, 40, 33}, {1, 2, 3, 7, 5, 6, 4, 0}, 2};
  {
    const plan::RearrangePlanData p = plan_of(kept_a);
    const plan::RearrangeSpec& s = plan::variant_for_pointers(p, 0).spec;
    INFO(plan::describe(p));
    CHECK(s.family == plan::RearrangeFamily::packed);
    CHECK(s.dims_b == 2);
    CHECK(s.tile_a == 96);
  }
  {
    const plan::RearrangePlanData p = plan_of(kept_stores);
    const plan::RearrangeSpec& s = plan::variant_for_pointers(p, 0).spec;
    INFO(plan::describe(p));
    CHECK(s.family == plan::RearrangeFamily::packed);
    CHECK(s.dims_b == 1);
    CHECK(s.vec_a * s.unit_bytes == 16);
  }
}

TEST_CASE("small whole tiles grow by a piece of an outer dim too long to span whole, and store the grown tile's runs") {
  std::mt19937_64 rng(37);
  // Blocks of A x B contiguous on both sides (a batch of small transposes): the tile spans both
  // groups, then a divisor of the batch dim, and stores A x B x that piece as one run.
  const PermuteCase cases[] = {
      {{96, 2, 76}, {0, 2, 1}, 1},
      {{120, 4, 67}, {0, 2, 1}, 2},
      {{7, 66, 3, 10}, {0, 1, 3, 2}, 1},
  };
  for (const PermuteCase& c : cases) {
    const plan::RearrangePlanData p = plan_of(c);
    const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 0);
    const plan::RearrangeSpec& s = v.spec;
    INFO(plan::describe(p));
    CHECK(s.family == plan::RearrangeFamily::packed);
    CHECK(s.b_chain > 0);
    CHECK(s.tile_b < v.args.extent_b);  // a piece of the outer dim
    CHECK(v.args.extent_b % s.tile_b == 0);
    CHECK(s.fixed_b);
    CHECK(s.store_linear > s.vec_a);
    CHECK(s.store_run == s.tile_b);
    for (bool exact : {false, true}) check_permute(c, rng, exact);
  }
}

TEST_CASE("tiles of a long A over a short B take a quarter of the volume in blocks of 128 threads, at every alignment") {
  std::mt19937_64 rng(37);
  const PermuteCase cases[] = {
      {{3, 1500, 2}, {2, 0, 1}, 4},
      {{5, 2100, 2}, {0, 2, 1}, 4},
      {{3, 2100, 3}, {2, 0, 1}, 2},
      {{3, 4100, 3}, {0, 2, 1}, 1},
  };
  for (const PermuteCase& c : cases) {
    const plan::RearrangePlanData p = plan_of(c);
    const plan::RearrangeSpec& s = plan::variant_for_pointers(p, 0).spec;
    INFO(plan::describe(p));
    // A quarter of the default volume: 16384 units for 1- and 2-byte units, 4096 for 4-byte ones.
    CHECK(std::int64_t{s.tile_a} * s.tile_b <= (c.elem == 4 ? 4096 : 16384) / 4);
    CHECK(s.tile_a <= 1024);
    CHECK(s.threads == 128);
    for (bool exact : {false, true}) check_permute(c, rng, exact);
  }
}

TEST_CASE("tiles whose short side moves 1 or 2 bytes per access take a quarter of the volume in 128 threads "
          "where it keeps half the units, at every alignment") {
  std::mt19937_64 rng(41);
  struct NarrowCase {
    PermuteCase permute;
    bool quarter;  // whether the quarter tile keeps half the units or more
  };
  const NarrowCase cases[] = {
      {{{2, 5, 38, 40, 45}, {4, 2, 1, 3, 0}, 1}, true},          // B of 45 units, single-byte loads
      {{{5, 37, 30, 5}, {1, 0, 3, 2}, 1}, true},                 // A of 30 units in 2-byte stores, B of 25
      {{{2, 5, 12, 64, 25}, {4, 2, 1, 3, 0}, 2}, true},         // f16, B of 25 units, single-unit loads
      {{{2, 4, 3, 7, 4, 40, 18}, {0, 3, 1, 6, 4, 5, 2}, 1}, false},  // 480 x 18: its quarter is 128 x 18
  };
  const std::int64_t default_volume = 16384;  // units, for 1- and 2-byte units
  for (const NarrowCase& c : cases) {
    const PermuteCase& pc = c.permute;
    const TensorDesc view = permuted({pc.shape, {}, DType::u8, pc.elem}, pc.perm);
    const plan::RearrangePlanData p = plan::plan_rearrange_data({view.shape, {}, DType::u8, pc.elem}, view, {});
    const plan::RearrangeSpec& s = plan::variant_for_pointers(p, 0).spec;
    INFO(plan::describe(p));
    const bool a_short = s.tile_a <= s.tile_b;
    CHECK((a_short ? s.tile_a : s.tile_b) <= 45);
    CHECK((a_short ? s.vec_a : s.vec_b) * pc.elem <= 2);
    CHECK((std::int64_t{s.tile_a} * s.tile_b <= default_volume / 4) == c.quarter);
    CHECK(s.threads == (c.quarter ? 128 : 256));
    for (bool exact : {false, true}) check_permute(pc, rng, exact);
  }
}

TEST_CASE("tiles whose destination chain passes B's first dims stage in destination order, at every alignment") {
  std::mt19937_64 rng(31);
  const PermuteCase cases[] = {
      {{7, 4, 2, 6, 3, 8, 33, 5}, {3, 6, 5, 0, 2, 1, 7, 4}, 2},  // 3 units, then B's 5, then 4 x 2 of A
      {{7, 4, 2, 6, 3, 8, 33, 5}, {3, 6, 5, 0, 2, 1, 7, 4}, 4},
      {{9, 8, 3, 2, 8, 7, 11}, {4, 5, 2, 0, 1, 6, 3}, 1},        // A tiles of a piece of A's next dim
      {{2, 13, 11, 2, 9, 17, 2}, {4, 1, 3, 5, 2, 6, 0}, 1},      // B is the passed dim alone
      {{6, 11, 13, 2, 13, 8, 2, 2}, {0, 6, 5, 4, 1, 2, 7, 3}, 2},
  };
  for (const PermuteCase& c : cases) {
    const plan::RearrangePlanData p = plan_of(c);
    const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 0);
    const plan::RearrangeSpec& s = v.spec;
    INFO(plan::describe(p));
    CHECK(s.a_pass > 1);
    CHECK(s.store_linear > 0);
    CHECK(s.store_run % s.a_pass == 0);
    CHECK(s.tile_a % s.a_chain == 0);
    CHECK(v.args.extent_a % s.tile_a == 0);
    // The chain's next destination dim is B's first: A's chain stops there without passing.
    CHECK(v.args.dim[s.dims_a].dst_stride == s.a_chain);
    for (bool exact : {false, true}) check_permute(c, rng, exact);
  }
}

TEST_CASE("a destination chain passes B's first dims only in B's order, at every alignment") {
  std::mt19937_64 rng(37);
  // Each chain reaches B dims out of B's order (a later B dim first): passing them would stage units
  // where the destination does not have them. (Lines of seeds 900-951 with their outer extents cut
  // to 2: the plans are the same.)
  const PermuteCase cases[] = {
      {{5, 2, 2, 2, 3, 2, 2, 7, 2, 2, 2, 2, 2, 10, 2}, {8, 3, 9, 2, 10, 1, 6, 13, 5, 14, 12, 4, 0, 11, 7}, 1},
      {{2, 2, 2, 2, 2, 2, 2, 20, 2, 3, 18, 3}, {4, 5, 0, 3, 2, 11, 8, 10, 7, 1, 9, 6}, 1},
      {{2, 2, 2, 2, 3, 2, 2, 2, 9, 9, 9, 2, 3, 2, 2}, {10, 3, 1, 12, 9, 5, 0, 13, 7, 4, 2, 11, 6, 14, 8}, 2},
      {{2, 2, 3, 2, 7, 2, 2, 2, 2, 2, 3, 4, 2, 2, 2}, {9, 0, 5, 8, 7, 1, 11, 13, 3, 12, 4, 2, 6, 14, 10}, 1},
  };
  // The default plans of these shapes do not pass; measured planning's candidates pass wherever a
  // chain can, so they are checked too.
  int passing_candidates = 0;
  for (const PermuteCase& c : cases) {
    const plan::RearrangePlanData p = plan_of(c);
    INFO(plan::describe(p));
    std::vector<plan::RearrangeSpec> checked;
    for (const plan::RearrangeVariant& v : plan::tuning_candidates(p)) {
      if (v.spec.a_pass == 0) continue;
      ++passing_candidates;
      // The passed dims follow the chain in the destination, each stride the units before it.
      std::int64_t units = v.spec.a_chain;
      for (int k = v.spec.dims_a; units < std::int64_t{v.spec.a_chain} * v.spec.a_pass; ++k) {
        CHECK(v.args.dim[k].dst_stride == units);
        units *= v.args.dim[k].extent.value;
      }
      if (std::find(checked.begin(), checked.end(), v.spec) != checked.end()) continue;
      checked.push_back(v.spec);
      plan::RearrangePlanData tuned = p;
      plan::choose_variant(tuned, v);
      INFO("candidate " << plan::candidate_name(v));
      const TensorDesc view = permuted({c.shape, {}, DType::u8, c.elem}, c.perm);
      check_plan(tuned, {view.shape, {}, DType::u8, c.elem}, view, rng, {16});
    }
    for (bool exact : {false, true}) check_permute(c, rng, exact);
  }
  CHECK(passing_candidates > 0);
}

TEST_CASE("lopsided tiles halved into 128-thread blocks and passing tiles over destination runs under 128 bytes "
          "match the naive copy at every alignment, default and exact") {
  std::mt19937_64 rng(20261201);
  const std::vector<PermuteCase> halved = {
      {{2100, 3, 10}, {2, 1, 0}, 1},   // u8 512 x 30 -> 256 x 30, linear loads
      {{7, 22, 1100}, {0, 2, 1}, 1},   // u8 22 x 512 -> 22 x 256, linear stores
      {{4200, 3, 10}, {2, 1, 0}, 2},   // f16 512 x 30 -> 256 x 30, micro-tiles both ways
      {{3, 22, 4200}, {0, 2, 1}, 2},   // f16 22 x 512 -> 22 x 256, linear stores of rotated spans
      {{1100, 3, 5}, {2, 1, 0}, 8},    // f64 256 x 15 -> 128 x 15
      {{3, 10, 1100}, {0, 2, 1}, 8},   // f64 transpose 10 x 256 -> 10 x 128
  };
  for (const PermuteCase& c : halved) {
    const plan::RearrangeSpec s = aligned_spec(c);
    INFO("elem " << c.elem << ", shape " << c.shape[0] << " x " << c.shape[1] << " x " << c.shape[2]);
    CHECK(s.threads == 128);
    CHECK(std::max(s.tile_a, s.tile_b) >= 8 * std::min(s.tile_a, s.tile_b));
    for (bool exact : {false, true}) check_permute(c, rng, exact);
  }
  // A 2-unit A, then B's first dim of 17 f16 (68 bytes) or 40 u8 units (80 bytes) in dst.
  const std::vector<PermuteCase> passing = {
      {{3, 5, 2, 2, 9, 35, 6, 17}, {6, 4, 1, 3, 5, 0, 7, 2}, 2},
      {{3, 5, 2, 2, 9, 35, 6, 40}, {6, 4, 1, 3, 5, 0, 7, 2}, 1},
  };
  for (const PermuteCase& c : passing) {
    INFO("elem " << c.elem);
    CHECK(aligned_spec(c).a_pass == c.shape.back());
    for (bool exact : {false, true}) check_permute(c, rng, exact);
  }
}

TEST_CASE("tiles whose B chain passes A's first dims past a short first B dim match the naive copy at every "
          "alignment, default and exact") {
  std::mt19937_64 rng(20261203);
  // B's first dim of 2 or 3 units, continued in the source by an A dim past A's first: the chain
  // passes more A units than a tile side, which kept these tiles to a one-dim B before.
  const std::vector<PermuteCase> cases = {
      {{7, 18, 4, 9, 3, 2}, {5, 2, 0, 4, 1, 3}, 1},
      {{20, 5, 7, 9, 11, 3}, {5, 2, 3, 1, 4, 0}, 1},
      {{6, 5, 18, 8, 11, 2}, {3, 0, 5, 1, 4, 2}, 2},
      {{4, 18, 5, 20, 6, 2}, {5, 2, 3, 0, 4, 1}, 4},
  };
  for (const PermuteCase& c : cases) {
    const plan::RearrangePlanData p = plan_of(c);
    const plan::RearrangeVariant& v = plan::variant_for_pointers(p, 16);
    INFO("elem " << c.elem << ", " << plan::candidate_name(v) << ", passes " << passed_a_units(v));
    CHECK(v.spec.b_chain == c.shape.back());  // the source's innermost dim
    CHECK(passed_a_units(v) > 64);
    for (bool exact : {false, true}) check_permute(c, rng, exact);
  }
}

TEST_CASE("tiles whose destination runs sit at odd places store aligned 16-byte vectors shifted out of the staged "
          "tile, at every destination alignment") {
  std::mt19937_64 rng(20261202);
  // Runs whose starts allow only 1- or 2-byte stores: A's chain of 41 or 7 units passing B's first
  // dim of 66 or 9, or a tile spanning A (41, 21, 45 or 30 units) whose runs continue into B's first
  // dim.
  const std::vector<PermuteCase> cases = {
      {{3, 41, 8, 66}, {2, 0, 3, 1}, 1}, {{5, 7, 30, 9}, {2, 0, 3, 1}, 1}, {{4, 41, 10, 3}, {2, 0, 3, 1}, 1},
      {{6, 21, 40, 13}, {2, 0, 3, 1}, 2}, {{3, 41, 8, 66}, {2, 0, 3, 1}, 2}, {{5, 45, 3, 99}, {0, 2, 3, 1}, 1},
      {{8, 30, 2, 2, 8, 41}, {2, 4, 3, 0, 5, 1}, 1},
  };
  int passing = 0, spanning = 0;  // launches of skewed-run tiles whose A chain passes B, or spans A
  for (const PermuteCase& c : cases) {
    const TensorDesc view = permuted({c.shape, {}, DType::u8, c.elem}, c.perm);
    const TensorDesc dst{view.shape, {}, DType::u8, c.elem};
    const plan::RearrangePlanData p = plan::plan_rearrange_data(dst, view, {});
    std::vector<plan::RearrangeVariant> variants = plan::tuning_candidates(p);
    for (std::size_t align : {16, 8, 4, 2}) variants.push_back(plan::variant_for_pointers(p, align));
    for (const plan::RearrangeVariant& v : variants) {
      if (!v.spec.skew_runs) continue;
      INFO("shape " << c.shape.size() << " dims, elem " << c.elem << ", candidate " << plan::candidate_name(v));
      CHECK(v.spec.store_linear * v.spec.unit_bytes == 16);
      // The loads keep the alignment the variant was planned for; the stores take any.
      for (std::size_t dst_align = 1; dst_align <= 16; ++dst_align) {
        if (dst_align % static_cast<std::size_t>(c.elem) != 0) continue;
        INFO("destination aligned to " << dst_align);
        if (check_variant_at(p, v, dst, view, 16, dst_align, rng)) (v.spec.a_pass > 0 ? passing : spanning) += 1;
      }
    }
  }
  MESSAGE(passing << " launches of passing tiles, " << spanning << " of tiles spanning A");
  CHECK(passing >= 16);
  CHECK(spanning >= 16);
}

TEST_CASE("small whole tiles that would load as one run grow by slab dims with micro-tile loads, at every alignment") {
  std::mt19937_64 rng(29);
  const PermuteCase cases[] = {
      {{12, 10, 10, 3}, {2, 0, 3, 1}, 1},                 // 10 x 30 tile, 2-unit loads
      {{7, 12, 12, 6, 23, 3}, {2, 4, 1, 0, 5, 3}, 1},     // 6 x 483 tile: an odd chain of 69, 1-unit loads
      {{3, 30, 7, 10, 7, 3, 3}, {4, 1, 0, 5, 2, 6, 3}, 2},  // f16, 10 x 63 tile
  };
  for (const PermuteCase& c : cases) {
    const plan::RearrangePlanData p = plan_of(c);
    const plan::RearrangeSpec& s = plan::variant_for_pointers(p, 0).spec;
    INFO(plan::describe(p));
    CHECK(s.load_linear == 0);
    CHECK(s.b_chain > 0);
    CHECK(s.tile_b > s.b_chain);
    CHECK(s.b_chain % s.vec_b == 0);
    for (bool exact : {false, true}) check_permute(c, rng, exact);
  }
}
