// Rope kernels compile with NVRTC for every dtype combination and every code-changing flag.
#include <doctest/doctest.h>

#include <tuple>

#include "compile/compile_jobs.hpp"
#include "ops/rope/impl.hpp"
#include "shapejit/rope.hpp"

using namespace shapejit;

namespace {

constexpr DType kFloatTypes[] = {DType::f16, DType::bf16, DType::f32, DType::f64};
constexpr DType kPositionTypes[] = {DType::i8, DType::i16, DType::i32, DType::i64,
                                    DType::u8, DType::u16, DType::u32, DType::u64};

RopeDesc small_desc(RopeStyle style, DType data, DType table, std::optional<DType> position) {
  RopeDesc desc;
  desc.style = style;
  desc.x = {{2, 3, 4, 64}, {}, data};
  desc.k = TensorDesc{{2, 3, 2, 64}, {}, data};
  desc.table = {{16, 32}, {}, table};
  if (position) desc.positions = TensorDesc{{2, 3}, {}, *position};
  return desc;
}

/// Compiles each plan's kernel (and, with `variants`, its scalar variant) for sm_80 and sm_90 on
/// all cores; returns the failures.
std::vector<std::string> compile_all(const std::vector<RopeDesc>& descs, bool variants, std::size_t& compiled) {
  std::vector<jit::Program> programs;
  for (const RopeDesc& desc : descs) {
    const auto plan = detail::make_rope_plan(desc, {});
    const auto all = plan->programs();
    for (std::size_t i = 0; i < (variants ? all.size() : 1); ++i) programs.push_back(*all[i]);
  }
  compiled = 2 * programs.size();
  return test::compile_programs(programs, {"sm_80", "sm_90"});
}

void require_no_failures(const std::vector<std::string>& failures) {
  for (const std::string& f : failures) FAIL_CHECK(f);
}

}  // namespace

TEST_CASE("rope compiles for every style x data dtype x table dtype x position dtype, sm_80 and sm_90") {
  std::vector<RopeDesc> descs;
  for (RopeStyle style : {RopeStyle::gptj, RopeStyle::neox})
    for (DType data : kFloatTypes)
      for (DType table : kFloatTypes) {
        descs.push_back(small_desc(style, data, table, std::nullopt));
        for (DType position : kPositionTypes) descs.push_back(small_desc(style, data, table, position));
      }
  std::size_t compiled = 0;
  require_no_failures(compile_all(descs, false, compiled));
  CHECK(descs.size() == 2 * 4 * 4 * 9);
  CHECK(compiled == descs.size() * 2);
}

TEST_CASE("rope compiles with every code-changing flag: 3-D, partial rotary, in place, inverse, checked, "
          "64-bit offsets, shared positions, odd pair counts, scalar accesses, multi-axis positions") {
  std::vector<RopeDesc> descs;
  for (RopeStyle style : {RopeStyle::gptj, RopeStyle::neox}) {
    RopeDesc three_d;
    three_d.style = style;
    three_d.x = {{5, 3, 96}, {}, DType::bf16};
    three_d.table = {{8, 12}, {}, DType::f32};
    three_d.rotary_dim = 24;
    three_d.positions = TensorDesc{{5}, {}, DType::i32};
    descs.push_back(three_d);

    RopeDesc flags = small_desc(style, DType::f16, DType::f32, DType::i64);
    flags.inplace = true;
    flags.inverse = true;
    flags.checked = true;
    flags.rotary_dim = 32;
    descs.push_back(flags);

    RopeDesc shared = small_desc(style, DType::bf16, DType::bf16, DType::u16);
    shared.positions = TensorDesc{{3}, {}, DType::u16};
    descs.push_back(shared);

    RopeDesc wide = small_desc(style, DType::f32, DType::f32, DType::i64);
    wide.x.strides = {std::int64_t{1} << 32, 4 * 64, 64, 1};
    descs.push_back(wide);

    RopeDesc odd = small_desc(style, DType::f16, DType::f16, std::nullopt);  // D = 18: 9 pairs
    odd.x.shape[3] = 18;
    odd.k->shape[3] = 18;
    odd.table = {{16, 9}, {}, DType::f16};
    descs.push_back(odd);

    RopeDesc padded = small_desc(style, DType::bf16, DType::f32, DType::i32);  // odd strides: scalar accesses
    padded.x.strides = {3 * 4 * 65, 4 * 65, 65, 1};
    padded.table.strides = {33, 1};
    descs.push_back(padded);
    for (RopeAxisRule rule : {RopeAxisRule::sections, RopeAxisRule::interleaved, RopeAxisRule::blocks}) {  // multi-axis
      RopeDesc axes = small_desc(style, DType::bf16, DType::f32, DType::i32);
      axes.positions = TensorDesc{{3, 2, 3}, {}, DType::i32};
      axes.axis_rule = rule;
      axes.axis_sections = {8, 12, 12};
      descs.push_back(axes);
      axes.x = {{3, 4, 64}, {}, DType::f16};  // 3-D, checked, four axes by sections
      axes.k = std::nullopt;
      const bool four = rule != RopeAxisRule::interleaved;
      axes.positions = TensorDesc{{four ? 4 : 3, 3}, {}, DType::u8};
      axes.axis_sections = four ? std::vector<std::int64_t>{4, 4, 8, 16} : std::vector<std::int64_t>{16, 8, 8};
      axes.checked = true;
      descs.push_back(axes);
    }
  }
  std::size_t compiled = 0;
  require_no_failures(compile_all(descs, true, compiled));
  CHECK(compiled > descs.size() * 2);  // scalar variants included
}

TEST_CASE("rope with a KV-cache append compiles for every style, data dtype, cache dtype and code, layout and slot "
          "dtype, with the rope flags and scalar accesses") {
  std::vector<RopeDesc> descs;
  for (RopeStyle style : {RopeStyle::gptj, RopeStyle::neox})
    for (DType data : kFloatTypes)
      for (int cache = 0; cache < 6; ++cache) {  // the four float dtypes, then int8 and fp8-e4m3 codes
        RopeDesc desc = small_desc(style, data, data == DType::f64 ? DType::f64 : DType::f32, DType::i64);
        const bool nhd = cache % 2 == 0;
        desc.cache_layout = nhd ? KvCacheLayout::nhd : KvCacheLayout::hnd;
        desc.cache_quantize = cache == 4 ? RopeQuantize::int8 : cache == 5 ? RopeQuantize::fp8_e4m3 : RopeQuantize::none;
        const DType cache_dtype = cache < 4 ? kFloatTypes[cache] : cache == 4 ? DType::i8 : DType::u8;
        desc.v = desc.k;
        desc.k_cache = desc.v_cache = TensorDesc{nhd ? std::vector<std::int64_t>{3, 8, 2, 64} : std::vector<std::int64_t>{3, 2, 8, 64},
                                                 {}, cache_dtype};
        desc.slots = TensorDesc{{6}, {}, cache % 3 == 0 ? DType::i32 : DType::i64};
        desc.inplace = cache == 1;                // k in place too
        if (cache == 2) desc.k_out = desc.k;      // k written beside the cache
        desc.checked = cache == 3;
        desc.rotary_dim = cache == 5 ? 32 : 0;    // pass-through elements reach the cache too
        descs.push_back(desc);
      }
  std::size_t compiled = 0;
  require_no_failures(compile_all(descs, true, compiled));
  CHECK(descs.size() == 2 * 4 * 6);
  MESSAGE(compiled << " cache-append kernels compiled");
}

TEST_CASE("rope fused with a Hadamard transform compiles for every style, data dtype, order and size class, with "
          "every rope flag, scalar accesses and 8-bit outputs") {
  std::vector<RopeDesc> descs;
  auto fused = [](RopeStyle style, DType data, std::int64_t heads, std::int64_t head_dim, std::int64_t group,
                  HadamardOrder order) {
    RopeDesc desc;
    desc.style = style;
    desc.x = {{2, 3, heads, head_dim}, {}, data};
    desc.k = TensorDesc{{2, 3, group, head_dim}, {}, data};
    desc.table = {{16, head_dim / 2}, {}, data == DType::f64 ? DType::f64 : DType::f32};
    desc.positions = TensorDesc{{2, 3}, {}, DType::i32};
    desc.hadamard_group = group;
    desc.hadamard_order = order;
    return desc;
  };
  for (RopeStyle style : {RopeStyle::gptj, RopeStyle::neox})
    for (HadamardOrder order : {HadamardOrder::rope_then_hadamard, HadamardOrder::hadamard_then_rope}) {
      for (DType data : kFloatTypes) descs.push_back(fused(style, data, 8, 128, 4, order));  // one warp per row
      descs.push_back(fused(style, DType::bf16, 2, 64, 1, order));         // several rows per warp
      descs.push_back(fused(style, DType::bf16, 32, 128, 32, order));      // n = 4096: bit passes over warps
      descs.push_back(fused(style, DType::f16, 12, 64, 12, order));        // n = 768 = 12 x 64
      descs.push_back(fused(style, DType::bf16, 40, 128, 20, order));      // n = 2560 = 20 x 128
      descs.push_back(fused(style, DType::f32, 28, 64, 28, order));        // n = 1792 = 28 x 64
      RopeDesc m_point = fused(style, DType::bf16, 24, 128, 24, order);   // n = 3072: m-point passes over warps
      descs.push_back(m_point);
      m_point.k_quantize = RopeQuantize::int8;  // codes stored from the last pass's layout
      descs.push_back(m_point);
      RopeDesc flags = fused(style, DType::f16, 4, 64, 2, order);
      flags.inplace = flags.inverse = flags.checked = true;
      flags.rotary_dim = 32;
      descs.push_back(flags);
      RopeDesc three_d = fused(style, DType::bf16, 4, 96, 2, order);  // n = 192 = 12 x 16, partial rotary
      three_d.x.shape = {5, 4, 96};
      three_d.k->shape = {5, 2, 96};
      three_d.positions = TensorDesc{{5}, {}, DType::u8};
      three_d.rotary_dim = 48;
      descs.push_back(three_d);
      RopeDesc padded = fused(style, DType::bf16, 4, 64, 4, order);  // odd strides: one value per access
      padded.x.strides = {3 * 4 * 65, 4 * 65, 65, 1};
      descs.push_back(padded);
      for (RopeQuantize quantize : {RopeQuantize::int8, RopeQuantize::fp8_e4m3})
        for (auto [data, heads, group] : {std::tuple{DType::bf16, 8, 4}, {DType::f32, 32, 32}, {DType::f64, 4, 4}}) {
          RopeDesc q8 = fused(style, data, heads, 128, group, order);  // f32 n = 4096: the absmax across warps
          q8.k_quantize = quantize;
          q8.q_quantize = data == DType::bf16 ? RopeQuantize::none : quantize;
          descs.push_back(q8);
        }
    }
  std::size_t compiled = 0;
  require_no_failures(compile_all(descs, true, compiled));
  CHECK(compiled > descs.size() * 2);  // scalar variants included
  MESSAGE(compiled << " fused rope + hadamard kernels compiled");
}
