#include "ops/rope/manifest.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "ops/registry.hpp"
#include "ops/rope/impl.hpp"

namespace shapejit::plan {
namespace {

DType default_table_dtype(DType data) { return data == DType::f64 ? DType::f64 : DType::f32; }

/// The fused transform's scale when it is not the default 1/sqrt(n): it changes no kernel, but a
/// line that names it describes the same plan.
std::optional<double> explicit_hadamard_scale(const RopePlanData& plan) {
  const std::optional<double>& scale = plan.desc.hadamard_scale;
  const auto n = static_cast<double>(plan.spec.hadamard_group * plan.spec.head_dim);
  if (!scale || *scale == 1.0 / std::sqrt(n)) return std::nullopt;
  return scale;
}

}  // namespace

RopeDesc manifest_desc(const RopeManifest& m) {
  RopeDesc desc;
  desc.style = m.style;
  desc.x = TensorDesc{m.shape, {}, m.dtype};
  desc.rotary_dim = m.rotary_dim;
  desc.inplace = m.inplace;
  desc.inverse = m.inverse;
  desc.checked = m.checked;
  desc.check_pointers = m.check_pointers;
  desc.hadamard_group = m.hadamard_group;
  desc.hadamard_scale = m.hadamard_scale;
  desc.hadamard_order = m.hadamard_order;
  desc.q_quantize = m.q_quantize;
  desc.k_quantize = m.k_quantize;
  desc.axis_rule = m.axis_rule;
  desc.axis_sections = m.axis_sections;
  const DType table_dtype = m.table_dtype.value_or(default_table_dtype(m.dtype));
  if (m.shape.size() < 3) {  // the planner names what is wrong with x
    desc.table = TensorDesc{{1, std::max<std::int64_t>(m.rotary_dim / 2, 1)}, {}, table_dtype};
    return desc;
  }
  const std::size_t rank = m.shape.size();
  const std::int64_t seq = m.shape[rank - 3];
  const std::int64_t rotary_dim = m.rotary_dim == 0 ? m.shape.back() : m.rotary_dim;
  if (m.k_heads) {
    std::vector<std::int64_t> k_shape = m.shape;
    k_shape[rank - 2] = *m.k_heads;
    desc.k = TensorDesc{k_shape, {}, m.dtype};
    if (m.k_quantize != RopeQuantize::none && !m.inplace)
      desc.k_out = TensorDesc{k_shape, {}, rope_code_dtype(m.k_quantize)};
  }
  if (m.q_quantize != RopeQuantize::none && !m.inplace)
    desc.y = TensorDesc{m.shape, {}, rope_code_dtype(m.q_quantize)};
  desc.table = TensorDesc{{std::max<std::int64_t>(seq, 1), std::max<std::int64_t>(rotary_dim / 2, 1)}, {}, table_dtype};
  if (m.cache_layout != KvCacheLayout::none && m.k_heads) {
    desc.cache_layout = m.cache_layout;
    desc.cache_quantize = m.cache_quantize;
    desc.v = desc.k;
    const std::int64_t tokens = rank == 4 ? m.shape[0] * seq : seq;
    constexpr std::int64_t block_size = 16, blocks = 1;  // the cache's size changes no kernel
    const std::vector<std::int64_t> cache_shape =
        m.cache_layout == KvCacheLayout::nhd ? std::vector<std::int64_t>{blocks, block_size, *m.k_heads, m.shape.back()}
                                             : std::vector<std::int64_t>{blocks, *m.k_heads, block_size, m.shape.back()};
    const DType cache_dtype =
        m.cache_quantize != RopeQuantize::none ? rope_code_dtype(m.cache_quantize) : m.cache_dtype.value_or(m.dtype);
    desc.k_cache = desc.v_cache = TensorDesc{cache_shape, {}, cache_dtype};
    desc.slots = TensorDesc{{tokens}, {}, m.slot_dtype};
    if (m.write_k && !m.inplace) desc.k_out = desc.k;
  }
  if (m.position_dtype) {
    std::vector<std::int64_t> pos_shape = {seq};
    if (rank == 4 && !m.positions_shared) pos_shape = {m.shape[0], seq};
    if (m.axis_rule != RopeAxisRule::none)
      pos_shape.insert(pos_shape.begin(), static_cast<std::int64_t>(m.axis_sections.size()));
    desc.positions = TensorDesc{pos_shape, {}, *m.position_dtype};
  }
  return desc;
}

std::string rope_manifest_line(const RopePlanData& plan) {
  const RopeSpec& spec = plan.spec;
  RopeManifest m;
  m.style = spec.style;
  m.dtype = spec.data;
  m.table_dtype = spec.table;
  m.position_dtype = spec.position;
  m.positions_shared = spec.four_d && spec.position && !spec.positions_batched;
  m.axis_rule = plan.desc.axis_rule;
  m.axis_sections = plan.desc.axis_sections;
  m.shape = plan.desc.x.shape;
  if (spec.has_k) m.k_heads = plan.heads_k;
  m.rotary_dim = spec.rotary_dim == spec.head_dim ? 0 : spec.rotary_dim;
  if (spec.hadamard_group != 0) {
    m.hadamard_group = spec.hadamard_group;
    m.hadamard_scale = explicit_hadamard_scale(plan);
    m.hadamard_order = plan.desc.hadamard_order;
  }
  m.q_quantize = spec.q_quantize;
  m.k_quantize = spec.k_quantize;
  if (spec.cache) {
    m.cache_layout = plan.desc.cache_layout;
    m.cache_quantize = spec.cache_quantize;
    if (spec.cache_quantize == RopeQuantize::none) m.cache_dtype = spec.cache;
    m.slot_dtype = spec.slot;
    m.write_k = !spec.k_out_skipped && !spec.inplace;
  }
  m.inplace = spec.inplace;
  m.inverse = spec.inverse;
  m.checked = spec.checked;
  const RopeSpec natural = plan_rope_data(manifest_desc(m)).spec;

  std::string line = fmt::format("rope --algo {} --dtype {}", rope_style_name(spec.style), dtype_name(spec.data));
  if (spec.table != default_table_dtype(spec.data)) line += fmt::format(" --table-dtype {}", dtype_name(spec.table));
  if (spec.position != DType::i64)
    line += fmt::format(" --pos-dtype {}", spec.position ? dtype_name(*spec.position) : "none");
  if (m.positions_shared) line += " --pos-layout seq";
  if (m.axis_rule != RopeAxisRule::none)
    line += fmt::format(" --axis-rule {} --axis-sections {}", rope_axis_rule_name(m.axis_rule), fmt::join(m.axis_sections, ","));
  line += fmt::format(" --shape {}", fmt::join(m.shape, ","));
  if (m.k_heads) line += fmt::format(" --k-heads {}", *m.k_heads);
  if (m.rotary_dim != 0) line += fmt::format(" --rotary-dim {}", m.rotary_dim);
  if (m.hadamard_group != 0) line += fmt::format(" --hadamard-group {}", m.hadamard_group);
  if (m.hadamard_scale) line += fmt::format(" --hadamard-scale {}", *m.hadamard_scale);  // shortest round-trip form
  if (m.hadamard_order != HadamardOrder::rope_then_hadamard)
    line += fmt::format(" --hadamard-order {}", hadamard_order_name(m.hadamard_order));
  if (m.q_quantize != RopeQuantize::none) line += fmt::format(" --q-quantize {}", rope_quantize_name(m.q_quantize));
  if (m.k_quantize != RopeQuantize::none) line += fmt::format(" --k-quantize {}", rope_quantize_name(m.k_quantize));
  if (spec.cache) {
    line += fmt::format(" --kv-cache {}", kv_cache_layout_name(m.cache_layout));
    if (m.cache_quantize != RopeQuantize::none) line += fmt::format(" --cache-dtype {}", rope_quantize_name(m.cache_quantize));
    else if (*m.cache_dtype != spec.data) line += fmt::format(" --cache-dtype {}", dtype_name(*m.cache_dtype));
    if (m.slot_dtype != DType::i64) line += fmt::format(" --slot-dtype {}", dtype_name(m.slot_dtype));
    if (m.write_k) line += " --write-k";
  }
  if (spec.inplace) line += " --inplace";
  if (spec.inverse) line += " --inverse";
  if (spec.checked) line += " --checked";
  if (spec.access != natural.access) line += fmt::format(" --access {}", spec.access);
  if (spec.table_access != natural.table_access) line += fmt::format(" --table-access {}", spec.table_access);
  if (spec.cache_access != natural.cache_access) line += fmt::format(" --cache-access {}", spec.cache_access);
  if (spec.wide_index != natural.wide_index) line += fmt::format(" --index {}", spec.wide_index ? 64 : 32);
  return line;
}

}  // namespace shapejit::plan

namespace shapejit::ops {
namespace {

DType dtype_option(const ManifestArgs& args, const char* name) {
  const std::string text = args.text(name);
  const auto t = parse_dtype(text);
  if (!t) invalid_argument("--{} {} is not a dtype name (f16 bf16 f32 f64, i8 ... u64)", name, text);
  return *t;
}

double number_option(const ManifestArgs& args, const char* name) {
  const std::string text = args.text(name);
  std::size_t used = 0;
  try {
    const double value = std::stod(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  invalid_argument("--{} {} is not a number", name, text);
}

RopeQuantize quantize_option(const ManifestArgs& args, const char* name) {
  const std::string text = args.text(name, "none");  // the registry checked it is one of the names
  if (text == rope_quantize_name(RopeQuantize::int8)) return RopeQuantize::int8;
  if (text == rope_quantize_name(RopeQuantize::fp8_e4m3)) return RopeQuantize::fp8_e4m3;
  return RopeQuantize::none;
}

}  // namespace

plan::RopeManifest rope_manifest(const ManifestArgs& args) {
  plan::RopeManifest m;
  m.style = args.text("algo") == "gptj" ? RopeStyle::gptj : RopeStyle::neox;
  m.dtype = dtype_option(args, "dtype");
  if (args.has("table-dtype")) m.table_dtype = dtype_option(args, "table-dtype");
  if (args.text("pos-dtype", "i64") == "none") {
    m.position_dtype = std::nullopt;
  } else if (args.has("pos-dtype")) {
    m.position_dtype = dtype_option(args, "pos-dtype");
  }
  m.positions_shared = args.text("pos-layout") == "seq";
  const std::string rule = args.text("axis-rule", "none");  // the registry checked it is one of the names
  m.axis_rule = rule == "sections"      ? RopeAxisRule::sections
                : rule == "interleaved" ? RopeAxisRule::interleaved
                : rule == "blocks"      ? RopeAxisRule::blocks
                                        : RopeAxisRule::none;
  if (args.has("axis-sections")) m.axis_sections = args.integers("axis-sections");
  m.shape = args.integers("shape");
  if (args.has("k-heads")) m.k_heads = args.integer("k-heads");
  m.rotary_dim = args.integer("rotary-dim", 0);
  m.hadamard_group = args.integer("hadamard-group", 0);
  if (args.has("hadamard-scale")) m.hadamard_scale = number_option(args, "hadamard-scale");
  m.hadamard_order = args.text("hadamard-order") == "hadamard-then-rope" ? HadamardOrder::hadamard_then_rope
                                                                          : HadamardOrder::rope_then_hadamard;
  m.q_quantize = quantize_option(args, "q-quantize");
  m.k_quantize = quantize_option(args, "k-quantize");
  const std::string layout = args.text("kv-cache", "none");  // the registry checked it is one of the names
  m.cache_layout = layout == "nhd" ? KvCacheLayout::nhd : layout == "hnd" ? KvCacheLayout::hnd : KvCacheLayout::none;
  if (m.cache_layout == KvCacheLayout::none &&
      (args.has("cache-dtype") || args.has("slot-dtype") || args.has("write-k") || args.has("cache-access")))
    invalid_argument("--cache-dtype, --slot-dtype, --write-k and --cache-access need --kv-cache nhd or hnd");
  if (m.cache_layout != KvCacheLayout::none && !args.has("k-heads"))
    invalid_argument("--kv-cache needs --k-heads (the cache append writes k and v)");
  const std::string cache_dtype = args.text("cache-dtype", "");
  if (cache_dtype == rope_quantize_name(RopeQuantize::int8)) m.cache_quantize = RopeQuantize::int8;
  else if (cache_dtype == rope_quantize_name(RopeQuantize::fp8_e4m3)) m.cache_quantize = RopeQuantize::fp8_e4m3;
  else if (!cache_dtype.empty()) m.cache_dtype = dtype_option(args, "cache-dtype");
  if (args.has("slot-dtype")) m.slot_dtype = dtype_option(args, "slot-dtype");
  m.write_k = args.has("write-k");
  m.inplace = args.has("inplace");
  m.inverse = args.has("inverse");
  m.checked = args.has("checked");
  m.check_pointers = args.has("check-pointers");
  m.overrides = {args.small_integer("access", 16), args.small_integer("table-access", 16),
                 args.small_integer("index", 0), args.small_integer("cache-access", 16)};
  return m;
}

namespace {

PlannedLine plan_line(const ManifestArgs& args) {
  const plan::RopeManifest m = rope_manifest(args);
  const auto plan = detail::make_rope_plan(plan::manifest_desc(m), m.overrides);
  PlannedLine result{detail::describe(*plan), detail::json(*plan), {}};
  for (const jit::Program* p : plan->programs()) result.programs.push_back(*p);
  return result;
}

}  // namespace

const Operator& rope_operator() {
  static const Operator op{
      "rope",
      "Rotary position embedding of [batch,] seq, heads, dhead data",
      {
          {"algo", OptionKind::text, "Pair style: neox (x[i], x[i+R/2]) or gptj (x[2i], x[2i+1])", true,
           {"neox", "gptj"}},
          {"dtype", OptionKind::text, "Data dtype: f16, bf16, f32 or f64", true},
          {"table-dtype", OptionKind::text, "sin/cos table dtype (default f32; f64 for f64 data)"},
          {"pos-dtype", OptionKind::text, "Position id dtype (i8 ... u64), or none for seq index + offset (default i64)"},
          {"pos-layout", OptionKind::text, "Position ids per batch ([batch, seq]) or shared ([seq]), 4-D only (default batch)",
           false, {"batch", "seq"}},
          {"axis-rule", OptionKind::text,
           "Multi-axis positions [axes, ...]: pair j takes the axis whose section holds j (sections, Qwen2-VL "
           "M-RoPE), axes 1 and 2 on j % 3 == 1, 2 within 3 s_1, 3 s_2 (interleaved, Qwen3-VL), or one "
           "contiguous block of 2 s_i channels per axis, NeoX pairs half-split inside it (blocks, ChatGLM, FLUX)",
           false, {"none", "sections", "interleaved", "blocks"}},
          {"axis-sections", OptionKind::integers, "Sections s_0,...,s_{A-1} of the axes, summing to R/2 (with --axis-rule)"},
          {"shape", OptionKind::integers, "x's shape: seq,heads,dhead or batch,seq,heads,dhead", true},
          {"k-heads", OptionKind::integer, "Rotate k too, with this many heads, in the same launch"},
          {"rotary-dim", OptionKind::integer, "Rotated leading dims R (default dhead)"},
          {"hadamard-group", OptionKind::integer,
           "Fuse a Hadamard transform over groups of G heads (G divides x's and k's heads; n = G * dhead)"},
          {"hadamard-scale", OptionKind::text, "Factor of the fused transform (default 1/sqrt(n); no kernel change)"},
          {"hadamard-order", OptionKind::text, "Which step of the fused transform runs first (default rope-then-hadamard)",
           false, {"rope-then-hadamard", "hadamard-then-rope"}},
          {"q-quantize", OptionKind::text,
           "q's output as 8-bit codes with one f32 scale per head group of a token, fused transform only "
           "(int8: i8 codes; fp8-e4m3: u8 bit patterns; default none)",
           false, {"none", "int8", "fp8-e4m3"}},
          {"k-quantize", OptionKind::text,
           "k's output as 8-bit codes with one f32 scale per head group of a token, fused transform only "
           "(int8: i8 codes; fp8-e4m3: u8 bit patterns; default none)",
           false, {"none", "int8", "fp8-e4m3"}},
          {"kv-cache", OptionKind::text,
           "Append the rotated k and v to paged caches at each token's slot: nhd [blocks, block_size, heads, "
           "dhead] or hnd [blocks, heads, block_size, dhead] (needs --k-heads; default none)",
           false, {"none", "nhd", "hnd"}},
          {"cache-dtype", OptionKind::text,
           "The caches' dtype: a float dtype, or int8 / fp8-e4m3 codes of value / a per-cache scale (default: the data dtype)"},
          {"slot-dtype", OptionKind::text, "The slot mapping's dtype (default i64)", false, {"i32", "i64"}},
          {"write-k", OptionKind::flag, "With --kv-cache out of place: also write the rotated k to k_out (default: the cache only)"},
          {"inplace", OptionKind::flag, "Write the outputs over the inputs"},
          {"inverse", OptionKind::flag, "Rotate by -angle (backward pass)"},
          {"checked", OptionKind::flag, "Fail on positions outside the table (synchronizes)"},
          {"check-pointers", OptionKind::flag,
           "Verify at each launch that every pointer is memory of the stream's device holding its view"},
          {"access", OptionKind::integer, "At most this many data elements per access (strided plans)", false,
           {"1", "2", "4", "8", "16"}},
          {"table-access", OptionKind::integer, "At most this many table elements per access", false,
           {"1", "2", "4", "8", "16"}},
          {"cache-access", OptionKind::integer, "At most this many cache elements per access", false,
           {"1", "2", "4", "8", "16"}},
          {"index", OptionKind::integer, "Offset width: 32 or 64 (default: as the shapes need)", false, {"32", "64"}},
      },
      plan_line,
  };
  return op;
}

}  // namespace shapejit::ops
