#include "ops/rope/plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/byte_range.hpp"
#include "core/errors.hpp"
#include "core/fastdiv.hpp"
#include "ops/hadamard/plan.hpp"

namespace shapejit::plan {
namespace {

constexpr std::int64_t kMaxTokens = std::numeric_limits<std::int32_t>::max();
constexpr int kBlockThreads = 256;
constexpr int kGridYLimit = 65535;
constexpr int kBlockZLimit = 64;
constexpr std::int64_t kFusedMaxBlocks = 65535;  // fused blocks loop over their rows: a few waves suffice

/// Heads each thread rotates, from the chunk-heads of work: one while threads are scarce (decode),
/// more as work grows, so that sin/cos loads and index math are shared over more heads while
/// enough threads remain to fill the device. Measured on an H200 (bench/RESULTS.md).
int heads_per_thread(double work) {
  if (work < 0x1p18) return 1;
  if (work < 0x1p20) return 2;
  if (work < 0x1p23) return 4;
  return 8;
}

std::string shape_text(const std::vector<std::int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ",")); }

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// The strides of `t` (given or contiguous), with 0 for dimensions of extent 1: those never move
/// an offset, so their stride changes neither the code nor the index width.
std::vector<std::int64_t> normalized_strides(const TensorDesc& t) {
  std::vector<std::int64_t> strides = t.effective_strides();
  for (std::size_t i = 0; i < strides.size(); ++i)
    if (t.shape[i] == 1) strides[i] = 0;
  return strides;
}

/// Lowest and highest element offset a strided view reaches (0, 0 when it is empty).
struct Span {
  std::int64_t low = 0, high = 0;
};

Span span_of(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides, const char* name) {
  Span span;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return {};
    std::int64_t reach = 0;
    if (__builtin_mul_overflow(shape[i] - 1, strides[i], &reach) ||
        __builtin_add_overflow(reach > 0 ? span.high : span.low, reach, reach > 0 ? &span.high : &span.low))
      invalid_argument("{} spans more than 2^63 elements (shape {}, strides {})", name, shape_text(shape),
                       shape_text(strides));
  }
  return span;
}

bool fits_32_bits(const Span& span) {
  return span.low >= std::numeric_limits<std::int32_t>::min() && span.high <= std::numeric_limits<std::int32_t>::max();
}

void require_float_data(const TensorDesc& t, const char* name) {
  if (!dtype_is_float(t.dtype))
    invalid_argument("{}.dtype is {}; rope data must be f16, bf16, f32 or f64", name, dtype_name(t.dtype));
}

/// Rank, extents and strides of a [.., heads, dhead] tensor of the given rank (`like`: what
/// fixes that rank, for the message).
void check_rows(const TensorDesc& t, const char* name, std::size_t rank, const char* like = "like x") {
  if (t.shape.size() != rank)
    invalid_argument("{} has shape {} (rank {}); it must have rank {} {}", name, shape_text(t.shape), t.shape.size(),
                     rank, like);
  for (std::size_t i = 0; i < rank; ++i)
    if (t.shape[i] < 0) invalid_argument("{}.shape[{}] is {}; extents must be 0 or more", name, i, t.shape[i]);
  if (!t.strides.empty() && t.strides.size() != rank)
    invalid_argument("{} has {} strides for rank {}; give one per dimension or none", name, t.strides.size(), rank);
  if (!t.strides.empty() && t.strides.back() != 1)
    invalid_argument("{}.strides[{}] is {}; the dhead stride must be 1", name, rank - 1, t.strides.back());
  if (t.elem_bytes != 0 && static_cast<std::size_t>(t.elem_bytes) != dtype_size(t.dtype))
    invalid_argument("{}.elem_bytes is {}; rope takes no opaque elements (use 0)", name, t.elem_bytes);
}

/// An output must not write one element from two rows: no zero stride on a dimension of extent > 1.
void check_no_zero_stride(const TensorDesc& t, const char* name) {
  const auto strides = t.effective_strides();
  for (std::size_t i = 0; i + 1 < strides.size(); ++i)
    if (strides[i] == 0 && t.shape[i] > 1)
      invalid_argument("{}.strides[{}] is 0 with extent {}: output rows would overlap; give a nonzero stride", name,
                       i, t.shape[i]);
}

/// The dtype an output of `input` is written in: the input's, or the codes of a quantized output.
DType output_dtype(RopeQuantize quantize, DType input) {
  return quantize == RopeQuantize::none ? input : rope_code_dtype(quantize);
}

/// The output descriptor: given (checked against its input) or contiguous of the input's shape, in
/// the input's dtype or the codes of a quantized output.
TensorDesc output_desc(const std::optional<TensorDesc>& given, const TensorDesc& input, bool inplace,
                       RopeQuantize quantize, const char* name, const char* input_name) {
  const DType dtype = output_dtype(quantize, input.dtype);
  if (!given) {
    TensorDesc out = input;
    if (!inplace) out.strides.clear();
    out.dtype = dtype;
    return out;
  }
  check_rows(*given, name, input.shape.size());
  if (given->shape != input.shape)
    invalid_argument("{} has shape {} but {} has {}; they must match", name, shape_text(given->shape), input_name,
                     shape_text(input.shape));
  if (given->dtype != dtype)
    invalid_argument("{}.dtype is {} but must be {} ({})", name, dtype_name(given->dtype), dtype_name(dtype),
                     quantize == RopeQuantize::none ? fmt::format("{}'s dtype", input_name)
                                                    : fmt::format("{} codes", rope_quantize_name(quantize)));
  if (inplace && given->effective_strides() != input.effective_strides())
    invalid_argument("{} has strides {} but {} has {}; an in-place plan writes {} itself (omit {} or give equal strides)",
                     name, shape_text(given->effective_strides()), input_name,
                     shape_text(input.effective_strides()), input_name, name);
  return *given;
}

void check_table(const TensorDesc& table, std::int64_t rotary_dim) {
  if (table.shape.size() != 2)
    invalid_argument("table has shape {}; it must be [P, W] with W >= rotary_dim/2 = {}", shape_text(table.shape),
                     rotary_dim / 2);
  if (!dtype_is_float(table.dtype))
    invalid_argument("table.dtype is {}; sin/cos tables must be f16, bf16, f32 or f64", dtype_name(table.dtype));
  if (table.shape[0] < 1) invalid_argument("table has {} rows; it needs at least one", table.shape[0]);
  if (table.shape[1] < rotary_dim / 2)
    invalid_argument("table is {} wide; it must be at least rotary_dim/2 = {}", table.shape[1], rotary_dim / 2);
  if (!table.strides.empty()) {
    if (table.strides.size() != 2) invalid_argument("table has {} strides; give 2 or none", table.strides.size());
    if (table.strides[1] != 1) invalid_argument("table.strides[1] is {}; table columns must be contiguous (1)", table.strides[1]);
    if (table.strides[0] < 0) invalid_argument("table.strides[0] is {}; the row stride must be 0 or more", table.strides[0]);
  }
}

/// `axes`: 0 for one-axis positions, else A (multi-axis positions lead with their axis dim).
void check_positions(const TensorDesc& positions, std::int64_t batch, std::int64_t seq, bool four_d, std::int64_t axes) {
  if (dtype_is_float(positions.dtype))
    invalid_argument("positions.dtype is {}; positions must be an integer type (i8 i16 i32 i64 u8 u16 u32 u64)",
                     dtype_name(positions.dtype));
  std::vector<std::int64_t> seq_only = {seq};
  std::vector<std::int64_t> per_batch = {batch, seq};
  if (axes > 0) {
    seq_only.insert(seq_only.begin(), axes);
    per_batch.insert(per_batch.begin(), axes);
  }
  const char* lead = axes > 0 ? "axes, " : "";
  if (positions.shape != seq_only && !(four_d && positions.shape == per_batch))
    invalid_argument("positions has shape {}; it must be [{}seq] = {}{}", shape_text(positions.shape), lead,
                     shape_text(seq_only),
                     four_d ? fmt::format(" or [{}batch, seq] = {}", lead, shape_text(per_batch)) : "");
  if (!positions.strides.empty() && positions.strides.size() != positions.shape.size())
    invalid_argument("positions has {} strides for rank {}; give one per dimension or none", positions.strides.size(),
                     positions.shape.size());
}

/// Multi-axis positions: checks the rule's sections and sets the spec's axis count and pair limits.
void plan_axes(const RopeDesc& desc, std::int64_t rotary_dim, RopeSpec& spec) {
  const std::vector<std::int64_t>& sections = desc.axis_sections;
  if (desc.axis_rule == RopeAxisRule::none) {
    if (!sections.empty())
      invalid_argument("axis_sections are given but axis_rule is none; choose sections, interleaved or blocks");
    return;
  }
  const std::string_view rule = rope_axis_rule_name(desc.axis_rule);
  if (!desc.positions) invalid_argument("axis_rule is {} but no positions are given; multi-axis rope needs [axes, ...] positions", rule);
  if (desc.hadamard_group != 0)
    fail(ErrorCode::unsupported, "multi-axis positions (axis_rule {}) with a fused Hadamard transform are not supported", rule);
  const auto axes = static_cast<std::int64_t>(sections.size());
  if (desc.axis_rule == RopeAxisRule::interleaved ? axes != 3 : (axes < 1 || axes > 4))
    invalid_argument("axis_sections has {} entries; axis_rule {} takes {}", axes, rule,
                     desc.axis_rule == RopeAxisRule::interleaved ? "3 (time, height, width)" : "1 to 4");
  std::int64_t sum = 0;
  for (std::int64_t s : sections) {
    if (s < 0 || s > rotary_dim / 2)
      invalid_argument("axis_sections are {}; each must be 0 to R/2 = {}", shape_text(sections), rotary_dim / 2);
    sum += s;
  }
  if (sum != rotary_dim / 2)
    invalid_argument("axis_sections are {} and sum to {}; they must sum to R/2 = {}", shape_text(sections), sum,
                     rotary_dim / 2);
  spec.position_axes = static_cast<int>(axes);
  spec.axis_rule = desc.axis_rule;
  std::int64_t limits[3] = {rotary_dim / 2, rotary_dim / 2, rotary_dim / 2};
  if (desc.axis_rule != RopeAxisRule::interleaved) {  // sections, blocks: the first pair of each axis
    for (std::int64_t a = 1, first = sections[0]; a < axes; first += sections[static_cast<std::size_t>(a)], ++a)
      limits[a - 1] = first;
  } else {
    limits[0] = 3 * sections[1];
    limits[1] = 3 * sections[2];
  }
  spec.axis_limit1 = limits[0];
  spec.axis_limit2 = limits[1];
  spec.axis_limit3 = limits[2];
}

/// Batch, seq, head strides of a 3-D or 4-D data tensor (batch stride 0 for 3-D).
void fill_row_strides(std::int64_t (&out)[3], const TensorDesc& t) {
  const auto s = normalized_strides(t);
  if (s.size() == 4) {
    out[0] = s[0], out[1] = s[1], out[2] = s[2];
  } else {
    out[0] = 0, out[1] = s[0], out[2] = s[1];
  }
}

/// The cache append's inputs, checked against k: v, the two caches, the slots. Fills the cache
/// sizes and the spec's cache fields; the strides are filled by fill_cache_args.
void check_cache(const RopeDesc& desc, RopePlanData& plan) {
  const bool given = desc.v || desc.k_cache || desc.v_cache || desc.slots || desc.cache_quantize != RopeQuantize::none;
  if (desc.cache_layout == KvCacheLayout::none) {
    if (given)
      invalid_argument("v, k_cache, v_cache, slots or cache_quantize is given but cache_layout is none; choose nhd "
                       "([blocks, block_size, heads, dhead]) or hnd ([blocks, heads, block_size, dhead])");
    return;
  }
  const std::string_view layout = kv_cache_layout_name(desc.cache_layout);
  if (!desc.k) invalid_argument("cache_layout is {} but there is no k; the cache append writes k and v", layout);
  for (auto [t, name] : {std::pair{&desc.v, "v"}, {&desc.k_cache, "k_cache"}, {&desc.v_cache, "v_cache"}, {&desc.slots, "slots"}})
    if (!*t) invalid_argument("cache_layout is {} but {} is not given; the cache append needs v, k_cache, v_cache and slots",
                              layout, name);
  if (desc.hadamard_group != 0)
    fail(ErrorCode::unsupported, "a cache append (cache_layout {}) with a fused Hadamard transform is not supported", layout);
  const TensorDesc& k = *desc.k;
  const std::size_t rank = k.shape.size();
  check_rows(*desc.v, "v", rank);
  if (desc.v->shape != k.shape || desc.v->dtype != k.dtype)
    invalid_argument("v is {} {} but k is {} {}; v must have k's shape and dtype", dtype_name(desc.v->dtype),
                     shape_text(desc.v->shape), dtype_name(k.dtype), shape_text(k.shape));

  const TensorDesc& kc = *desc.k_cache;
  check_rows(kc, "k_cache", 4, "(a paged cache)");
  const bool nhd = desc.cache_layout == KvCacheLayout::nhd;
  const std::int64_t heads = kc.shape[nhd ? 2 : 1];
  if (heads != plan.heads_k || kc.shape[3] != k.shape[rank - 1])
    invalid_argument("k_cache has shape {}; with layout {} it must be {} with k's {} heads and dhead {}",
                     shape_text(kc.shape), layout,
                     nhd ? "[blocks, block_size, heads, dhead]" : "[blocks, heads, block_size, dhead]", plan.heads_k,
                     k.shape[rank - 1]);
  check_rows(*desc.v_cache, "v_cache", 4, "(a paged cache)");
  if (desc.v_cache->shape != kc.shape || desc.v_cache->dtype != kc.dtype)
    invalid_argument("v_cache is {} {} but k_cache is {} {}; the caches must have one shape and dtype",
                     dtype_name(desc.v_cache->dtype), shape_text(desc.v_cache->shape), dtype_name(kc.dtype),
                     shape_text(kc.shape));
  const DType codes = output_dtype(desc.cache_quantize, kc.dtype);
  if (desc.cache_quantize == RopeQuantize::none ? !dtype_is_float(kc.dtype) : kc.dtype != codes)
    invalid_argument("k_cache.dtype is {}; {}", dtype_name(kc.dtype),
                     desc.cache_quantize == RopeQuantize::none
                         ? std::string("a cache holds f16, bf16, f32 or f64 values, or 8-bit codes with cache_quantize")
                         : fmt::format("{} codes are {}", rope_quantize_name(desc.cache_quantize), dtype_name(codes)));
  check_distinct_elements(kc, "k_cache");
  check_distinct_elements(*desc.v_cache, "v_cache");

  const TensorDesc& slots = *desc.slots;
  const std::vector<std::int64_t> flat = {plan.batch * plan.seq}, per_batch = {plan.batch, plan.seq};
  const bool four_d = rank == 4;
  if (slots.shape != flat && !(four_d && slots.shape == per_batch))
    invalid_argument("slots has shape {}; it must be [batch * seq] = {}{}", shape_text(slots.shape), shape_text(flat),
                     four_d ? fmt::format(" or [batch, seq] = {}", shape_text(per_batch)) : "");
  if (slots.dtype != DType::i32 && slots.dtype != DType::i64)
    invalid_argument("slots.dtype is {}; slots must be i32 or i64 (negative: skip the token)", dtype_name(slots.dtype));
  if (!slots.strides.empty() && slots.strides.size() != slots.shape.size())
    invalid_argument("slots has {} strides for rank {}; give one per dimension or none", slots.strides.size(),
                     slots.shape.size());
  for (std::size_t i = 0; i < slots.strides.size(); ++i)
    if (slots.strides[i] == 0 && slots.shape[i] > 1)
      invalid_argument("slots.strides[{}] is 0; tokens would share one slot (slots of appended tokens must be distinct)",
                       i);

  plan.cache_blocks = kc.shape[0];
  plan.block_size = kc.shape[nhd ? 1 : 2];
  std::int64_t slot_count = 0;
  if (__builtin_mul_overflow(plan.cache_blocks, plan.block_size, &slot_count) || slot_count > kMaxTokens)
    fail(ErrorCode::unsupported, "the cache has {} blocks of {} slots; a cache append supports at most {} slots",
         plan.cache_blocks, plan.block_size, kMaxTokens);
  span_of(kc.shape, normalized_strides(kc), "k_cache");  // offsets are 64-bit: only their range is checked
  span_of(desc.v_cache->shape, normalized_strides(*desc.v_cache), "v_cache");
  plan.spec.cache = kc.dtype;
  plan.spec.cache_quantize = desc.cache_quantize;
  plan.spec.slot = slots.dtype;
  plan.spec.k_out_skipped = !plan.desc.k_out;  // left unset above: k goes to the cache only
}

/// The cache append's run-time arguments: v's and the caches' strides (block, row in block, head),
/// the slots' (batch, seq), the cache size and block_size as a multiply and shift.
void fill_cache_args(const RopeDesc& desc, const RopePlanData& plan, RopeKernelArgs& args) {
  fill_row_strides(args.v_stride, *desc.v);
  const bool nhd = desc.cache_layout == KvCacheLayout::nhd;
  for (auto [cache, out] : {std::pair{&*desc.k_cache, &args.k_cache_stride}, {&*desc.v_cache, &args.v_cache_stride}}) {
    const auto s = normalized_strides(*cache);
    (*out)[0] = s[0];
    (*out)[1] = s[nhd ? 1 : 2];
    (*out)[2] = s[nhd ? 2 : 1];
  }
  const auto slot_strides = normalized_strides(*desc.slots);
  args.slot_stride[0] = slot_strides.size() == 2 ? slot_strides[0] : plan.seq * slot_strides[0];
  args.slot_stride[1] = slot_strides.back();
  args.cache_slots = plan.cache_blocks * plan.block_size;
  args.block_size = plan.block_size;
  const FastDivisor block_div = make_fast_divisor(static_cast<std::uint32_t>(std::max<std::int64_t>(plan.block_size, 1)));
  args.block_div_multiplier = block_div.multiplier;
  args.block_div_shift = block_div.shift;
}

/// Quantized outputs need a Hadamard transform (their scale is per head group), separate outputs and
/// a k to quantize.
void check_quantize(const RopeDesc& desc) {
  if (desc.hadamard_group == 0 && (desc.hadamard_scale || desc.hadamard_order != HadamardOrder::rope_then_hadamard))
    invalid_argument("hadamard_scale / hadamard_order are set but hadamard_group is 0 (no transform)");
  const bool quantized = desc.q_quantize != RopeQuantize::none || desc.k_quantize != RopeQuantize::none;
  if (quantized && desc.hadamard_group == 0)
    invalid_argument("q_quantize / k_quantize need hadamard_group: a scale belongs to one head group of one token");
  if (quantized && desc.inplace)
    invalid_argument("q_quantize / k_quantize write 8-bit codes, so the plan cannot be in place");
  if (desc.k_quantize != RopeQuantize::none && !desc.k) invalid_argument("k_quantize is set but there is no k");
  if (desc.q_scale && desc.q_quantize == RopeQuantize::none) invalid_argument("q_scale is given but q is not quantized");
  if (desc.k_scale && desc.k_quantize == RopeQuantize::none) invalid_argument("k_scale is given but k is not quantized");
}

/// The scales of a quantized output of `heads` heads: given (checked) or contiguous [batch, seq,
/// heads / G] ([seq, heads / G] for 3-D data). Fills `stride` (batch, seq, group).
TensorDesc scale_desc(const std::optional<TensorDesc>& given, const RopePlanData& plan, std::int64_t heads,
                      std::int64_t (&stride)[3], const char* name) {
  std::vector<std::int64_t> shape = {plan.seq, heads / plan.spec.hadamard_group};
  if (plan.spec.four_d) shape.insert(shape.begin(), plan.batch);
  TensorDesc out = given.value_or(TensorDesc{shape, {}, DType::f32});
  if (out.shape != shape)
    invalid_argument("{} has shape {}; it must be {} (one scale per head group of each token)", name,
                     shape_text(out.shape), shape_text(shape));
  if (out.dtype != DType::f32 || out.elem_bytes != 0)
    invalid_argument("{} has dtype {} (element bytes {}); scales are f32", name, dtype_name(out.dtype), out.elem_bytes);
  if (!out.strides.empty() && out.strides.size() != shape.size())
    invalid_argument("{} has {} strides for rank {}; give one per dimension or none", name, out.strides.size(),
                     shape.size());
  check_distinct_elements(out, name);
  const std::vector<std::int64_t> strides = normalized_strides(out);
  stride[0] = plan.spec.four_d ? strides[0] : 0;
  stride[1] = strides[strides.size() - 2];
  stride[2] = strides.back();
  return out;
}

/// Fuses the transform of desc.hadamard_group heads into `plan` (already planned as a plain rope):
/// checks the group and its size, lays a row (one head group of one token) out as
/// templates/hadamard_transform.cu does, and launches over rows instead of tokens.
void fuse_hadamard(const RopeDesc& desc, const RopeOverrides& overrides, RopePlanData& plan) {
  RopeSpec& spec = plan.spec;
  const std::int64_t group = desc.hadamard_group;
  if (group < 1 || plan.heads_q % group != 0 || plan.heads_k % group != 0)
    invalid_argument("hadamard_group is {} but x has {} heads{}: the group must divide every head count", group,
                     plan.heads_q, spec.has_k ? fmt::format(" and k {}", plan.heads_k) : "");
  const HadamardFactors factors = checked_hadamard_factors(group, spec.head_dim, spec.data, "hadamard_group");
  const std::int64_t n = group * spec.head_dim;
  const double scale = desc.hadamard_scale.value_or(1.0 / std::sqrt(static_cast<double>(n)));
  // f32 arithmetic (all but f64 data) needs the factor and the inverse's 1 / (scale * n) as normal floats.
  const double limit_low = spec.data == DType::f64 ? 0x1p-1022 : 0x1p-126, limit_high = spec.data == DType::f64 ? 0x1p1023 : 0x1p127;
  const double inverse = 1.0 / (std::fabs(scale) * static_cast<double>(n));
  if (!std::isfinite(scale) || std::fabs(scale) < limit_low || std::fabs(scale) > limit_high || inverse < limit_low ||
      inverse > limit_high)
    invalid_argument("hadamard_scale is {}: give a factor that, like the inverse's 1 / (scale * n), is a finite, "
                     "normal {} number",
                     scale, spec.data == DType::f64 ? "f64" : "f32");
  plan.desc.hadamard_scale = scale;

  spec.hadamard_group = group;
  spec.hadamard_base = factors.base;
  spec.hadamard_first = (desc.hadamard_order == HadamardOrder::hadamard_then_rope) != desc.inverse;
  // A vector stays inside one head, one half of the rotated span (or whole pairs) and every row step.
  RopeKernelArgs& args = plan.args;
  const std::int64_t rotated_span = spec.style == RopeStyle::neox ? spec.rotary_dim / 2 : spec.rotary_dim;
  std::int64_t vec = std::min<std::int64_t>(16 / static_cast<std::int64_t>(dtype_size(spec.data)), overrides.max_access);
  vec = largest_pow2_dividing(vec, {spec.head_dim, rotated_span, spec.head_dim - spec.rotary_dim});
  for (const auto* strides : {&args.x_stride, &args.y_stride, &args.k_stride, &args.k_out_stride})
    vec = largest_pow2_dividing(vec, {(*strides)[0], (*strides)[1], (*strides)[2]});
  const HadamardLayout layout = choose_hadamard_layout(factors.base, factors.pow2, static_cast<int>(vec),
                                                       spec.data == DType::f64 ? 8 : 4, false);
  spec.chunk = spec.access = layout.vec;
  spec.hadamard_threads = layout.threads_per_row;
  spec.hadamard_rows_per_block = layout.rows_per_block;
  const std::int64_t pairs = spec.style == RopeStyle::neox ? spec.access : std::max(spec.access / 2, 1);
  const auto max_table_vector = static_cast<std::int64_t>(16 / dtype_size(spec.table));
  spec.table_access = static_cast<int>(largest_pow2_dividing(
      std::min<std::int64_t>(max_table_vector, overrides.max_table_access), {pairs, args.table_stride}));

  const std::int64_t q_groups = plan.heads_q / group, k_groups = plan.heads_k / group;
  args.group_rows[0] = args.tokens * q_groups;
  args.group_rows[1] = args.tokens * (q_groups + k_groups);
  if (args.group_rows[1] > kMaxTokens)
    fail(ErrorCode::unsupported, "{} head groups (tokens x groups) to transform: rope with hadamard_group takes "
                                 "fewer than 2^31",
         args.group_rows[1]);
  const FastDivisor q_div = make_fast_divisor(static_cast<std::uint32_t>(std::max<std::int64_t>(q_groups, 1)));
  const FastDivisor k_div = make_fast_divisor(static_cast<std::uint32_t>(std::max<std::int64_t>(k_groups, 1)));
  args.group_div[0] = q_div.multiplier;
  args.group_div[1] = q_div.shift;
  args.group_div[2] = k_div.multiplier;
  args.group_div[3] = k_div.shift;
  args.hadamard_scale = desc.inverse ? 1.0 / (scale * static_cast<double>(n)) : scale;
  spec.q_quantize = desc.q_quantize;
  spec.k_quantize = desc.k_quantize;
  if (desc.q_quantize != RopeQuantize::none)
    plan.desc.q_scale = scale_desc(desc.q_scale, plan, plan.heads_q, args.q_scale_stride, "q_scale");
  if (desc.k_quantize != RopeQuantize::none)
    plan.desc.k_scale = scale_desc(desc.k_scale, plan, plan.heads_k, args.k_scale_stride, "k_scale");
  for (const auto& scales : {plan.desc.q_scale, plan.desc.k_scale})
    if (scales && overrides.index_bits == 0)
      spec.wide_index |= !fits_32_bits(span_of(scales->shape, normalized_strides(*scales), "scales"));

  spec.hadamard_partner = fused_partner(spec);

  RopeLaunchShape& launch = plan.launch;
  launch = RopeLaunchShape{};
  const std::int64_t blocks = ceil_div(args.group_rows[1], spec.hadamard_rows_per_block);
  launch.grid[0] = static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, kFusedMaxBlocks));
  launch.block[0] = static_cast<unsigned>(layout.threads_per_row * spec.hadamard_rows_per_block);
  // The scalar variant runs with the same launch, and may find its partners elsewhere.
  launch.shared_bytes = std::max(fused_shared_bytes(spec), fused_shared_bytes(scalar_variant(spec)));
}

}  // namespace

std::int64_t largest_pow2_dividing(std::int64_t limit, std::initializer_list<std::int64_t> values) {
  std::int64_t p = 1;
  while (p * 2 <= limit && std::all_of(values.begin(), values.end(), [&](std::int64_t v) { return v % (p * 2) == 0; }))
    p *= 2;
  return p;
}

DType rope_code_dtype(RopeQuantize q) { return q == RopeQuantize::int8 ? DType::i8 : DType::u8; }

int rope_chunk_pairs(const RopeSpec& spec) { return spec.style == RopeStyle::neox ? spec.chunk : spec.chunk / 2; }

std::int64_t rope_rotated_chunks(const RopeSpec& spec) {
  return (spec.style == RopeStyle::neox ? spec.rotary_dim / 2 : spec.rotary_dim) / spec.chunk;
}

std::int64_t rope_pass_chunks(const RopeSpec& spec) { return (spec.head_dim - spec.rotary_dim) / spec.chunk; }

RopeSpec scalar_variant(RopeSpec spec) {
  spec.access = 1;
  spec.table_access = 1;
  spec.cache_access = 1;
  if (spec.hadamard_group != 0) {  // same threads per row, each with more chunks
    spec.chunk = 1;
    spec.hadamard_partner = fused_partner(spec);
  }
  return spec;
}

std::string_view rope_partner_name(RopePartner p) noexcept {
  constexpr std::string_view names[] = {"none", "vector", "chunk", "lane", "memory", "shared"};
  return names[static_cast<int>(p)];
}

RopePartner fused_partner(const RopeSpec& spec) {
  const std::int64_t partner_step = spec.style == RopeStyle::neox ? spec.rotary_dim / 2 : 1;
  const std::int64_t pow2 = spec.hadamard_group * spec.head_dim / spec.hadamard_base;
  const std::int64_t vec = spec.access, threads = spec.hadamard_threads;
  // i ^ P is one bit of the row index where P is a power of two, heads hold whole 2P blocks and P < 2^k.
  const bool pair_bit = (partner_step & (partner_step - 1)) == 0 && spec.head_dim % (2 * partner_step) == 0 &&
                        partner_step < pow2;
  if (partner_step < vec) return RopePartner::vector;
  if (pair_bit && partner_step % (threads * vec) == 0) return RopePartner::chunk;
  if (pair_bit && partner_step / vec < std::min<std::int64_t>(threads, 32)) return RopePartner::lane;
  return spec.hadamard_first ? RopePartner::shared : RopePartner::memory;
}

unsigned fused_shared_bytes(const RopeSpec& spec) {
  if (spec.hadamard_threads <= 32 && spec.hadamard_partner != RopePartner::shared) return 0;
  return hadamard_rows_bytes(spec.hadamard_group * spec.head_dim, spec.data, spec.hadamard_rows_per_block);
}

RopeLaunchShape choose_rope_launch(std::int64_t tokens, std::int64_t heads_total, std::int64_t rotated_chunks) {
  RopeLaunchShape shape;
  const std::int64_t bx = std::min<std::int64_t>(rotated_chunks, kBlockThreads);
  shape.heads_per_thread = heads_per_thread(static_cast<double>(tokens) * static_cast<double>(heads_total) *
                                            static_cast<double>(rotated_chunks));
  const std::int64_t head_threads = std::max<std::int64_t>(1, ceil_div(heads_total, shape.heads_per_thread));
  const std::int64_t by_max = std::max<std::int64_t>(1, kBlockThreads / bx);
  const std::int64_t gy = std::min<std::int64_t>(ceil_div(head_threads, by_max), kGridYLimit);
  const std::int64_t by = std::min(ceil_div(head_threads, gy), by_max);
  const std::int64_t bz = std::clamp<std::int64_t>(kBlockThreads / (bx * by), 1,
                                                   std::clamp<std::int64_t>(tokens, 1, kBlockZLimit));
  shape.block[0] = static_cast<unsigned>(bx);
  shape.block[1] = static_cast<unsigned>(by);
  shape.block[2] = static_cast<unsigned>(bz);
  shape.grid[0] = static_cast<unsigned>(std::max<std::int64_t>(1, ceil_div(tokens, bz)));
  shape.grid[1] = static_cast<unsigned>(gy);
  return shape;
}

RopePlanData plan_rope_data(const RopeDesc& desc, const RopeOverrides& overrides) {
  RopePlanData plan;
  plan.desc = desc;
  const TensorDesc& x = desc.x;
  if (x.shape.size() != 3 && x.shape.size() != 4)
    invalid_argument("x has shape {} (rank {}); it must be [seq, heads, dhead] or [batch, seq, heads, dhead]",
                     shape_text(x.shape), x.shape.size());
  const std::size_t rank = x.shape.size();
  check_rows(x, "x", rank);
  require_float_data(x, "x");
  const bool four_d = rank == 4;
  const std::int64_t head_dim = x.shape[rank - 1];
  const std::int64_t rotary_dim = desc.rotary_dim == 0 ? head_dim : desc.rotary_dim;
  if (head_dim % 2 != 0 || head_dim < 2)
    invalid_argument("x.shape[{}] (dhead) is {}; it must be even and at least 2", rank - 1, head_dim);
  if (rotary_dim < 2 || rotary_dim % 2 != 0)
    invalid_argument("rotary_dim is {}; it must be even and at least 2 (or 0 for dhead)", desc.rotary_dim);
  if (rotary_dim > head_dim) invalid_argument("rotary_dim is {}; it must be at most dhead = {}", rotary_dim, head_dim);

  plan.batch = four_d ? x.shape[0] : 1;
  plan.seq = x.shape[rank - 3];
  plan.heads_q = x.shape[rank - 2];
  check_quantize(desc);
  plan.desc.y = output_desc(desc.y, x, desc.inplace, desc.q_quantize, "y", "x");
  check_no_zero_stride(*plan.desc.y, "y");

  if (desc.k_out && !desc.k) invalid_argument("k_out is given without k; give k too, or neither");
  if (desc.k) {
    const TensorDesc& k = *desc.k;
    check_rows(k, "k", rank);
    if (k.dtype != x.dtype)
      invalid_argument("k.dtype is {} but x.dtype is {}; they must match", dtype_name(k.dtype), dtype_name(x.dtype));
    for (std::size_t i = 0; i < rank; ++i)
      if (i != rank - 2 && k.shape[i] != x.shape[i])
        invalid_argument("k has shape {} but x has {}; they may differ only in heads (dimension {})",
                         shape_text(k.shape), shape_text(x.shape), rank - 2);
    plan.heads_k = k.shape[rank - 2];
    const bool cache_only = desc.cache_layout != KvCacheLayout::none && !desc.inplace && !desc.k_out;
    if (!cache_only) {
      plan.desc.k_out = output_desc(desc.k_out, k, desc.inplace, desc.k_quantize, "k_out", "k");
      check_no_zero_stride(*plan.desc.k_out, "k_out");
    }
  }
  check_cache(desc, plan);

  check_table(desc.table, rotary_dim);
  plan.desc.table.strides = desc.table.effective_strides();
  const std::int64_t axes = desc.axis_rule == RopeAxisRule::none ? 0 : static_cast<std::int64_t>(desc.axis_sections.size());
  if (desc.positions) check_positions(*desc.positions, plan.batch, plan.seq, four_d, axes);

  const std::int64_t tokens = plan.batch * plan.seq;
  if (tokens > kMaxTokens)
    fail(ErrorCode::unsupported, "x has {} tokens (batch * seq); rope supports at most {}", tokens, kMaxTokens);

  RopeSpec& spec = plan.spec;
  spec.style = desc.style;
  spec.data = x.dtype;
  spec.table = desc.table.dtype;
  plan_axes(desc, rotary_dim, spec);
  if (desc.positions) {
    spec.position = desc.positions->dtype;
    spec.positions_batched = desc.positions->shape.size() == (axes > 0 ? 3u : 2u);
  }
  spec.head_dim = head_dim;
  spec.rotary_dim = rotary_dim;
  spec.four_d = four_d;
  spec.has_k = desc.k.has_value();
  spec.inplace = desc.inplace;
  spec.inverse = desc.inverse;
  spec.checked = desc.checked;

  const auto max_vector = static_cast<std::int64_t>(16 / dtype_size(x.dtype));
  const std::int64_t rotated_span = desc.style == RopeStyle::neox ? rotary_dim / 2 : rotary_dim;
  spec.chunk = static_cast<int>(largest_pow2_dividing(max_vector, {rotated_span, head_dim - rotary_dim}));
  if (desc.axis_rule == RopeAxisRule::blocks && desc.style == RopeStyle::neox)  // a chunk inside one block's half
    for (std::int64_t section : desc.axis_sections)
      spec.chunk = static_cast<int>(largest_pow2_dividing(spec.chunk, {section}));

  // Accesses as wide as every row start allows (pointer alignment is checked per launch).
  RopeKernelArgs& args = plan.args;
  fill_row_strides(args.x_stride, x);
  fill_row_strides(args.y_stride, *plan.desc.y);
  if (desc.k) {
    fill_row_strides(args.k_stride, *desc.k);
    if (plan.desc.k_out) fill_row_strides(args.k_out_stride, *plan.desc.k_out);
  }
  if (spec.cache) fill_cache_args(desc, plan, args);
  std::int64_t access = std::min<std::int64_t>(spec.chunk, overrides.max_access);
  for (const auto* strides : {&args.x_stride, &args.y_stride, &args.k_stride, &args.k_out_stride, &args.v_stride})
    access = largest_pow2_dividing(access, {(*strides)[0], (*strides)[1], (*strides)[2]});
  spec.access = static_cast<int>(access);
  if (spec.cache) {
    const auto max_cache_vector = static_cast<std::int64_t>(16 / dtype_size(*spec.cache));
    std::int64_t cache_access = std::min({access, max_cache_vector, std::int64_t{overrides.max_cache_access}});
    for (const auto* strides : {&args.k_cache_stride, &args.v_cache_stride})
      cache_access = largest_pow2_dividing(cache_access, {(*strides)[0], (*strides)[1], (*strides)[2]});
    spec.cache_access = static_cast<int>(cache_access);
  }

  const std::int64_t table_rows = desc.table.shape[0];
  const std::int64_t table_stride = table_rows == 1 ? 0 : plan.desc.table.strides[0];
  const auto max_table_vector = static_cast<std::int64_t>(16 / dtype_size(desc.table.dtype));
  spec.table_access = static_cast<int>(largest_pow2_dividing(
      std::min<std::int64_t>(max_table_vector, overrides.max_table_access), {rope_chunk_pairs(spec), table_stride}));

  // 32-bit offsets when every tensor's reach fits.
  bool wide = false;
  wide |= !fits_32_bits(span_of(x.shape, normalized_strides(x), "x"));
  wide |= !fits_32_bits(span_of(plan.desc.y->shape, normalized_strides(*plan.desc.y), "y"));
  if (desc.k) wide |= !fits_32_bits(span_of(desc.k->shape, normalized_strides(*desc.k), "k"));
  if (plan.desc.k_out) wide |= !fits_32_bits(span_of(plan.desc.k_out->shape, normalized_strides(*plan.desc.k_out), "k_out"));
  if (spec.cache) {  // cache offsets are 64-bit in any case
    wide |= !fits_32_bits(span_of(desc.v->shape, normalized_strides(*desc.v), "v"));
    wide |= !fits_32_bits(span_of(desc.slots->shape, normalized_strides(*desc.slots), "slots"));
  }
  wide |= !fits_32_bits(span_of({table_rows, rotary_dim / 2}, {table_stride, 1}, "table"));
  if (desc.positions) {
    const auto pos_strides = normalized_strides(*desc.positions);
    wide |= !fits_32_bits(span_of(desc.positions->shape, pos_strides, "positions"));
    const std::size_t lead = axes > 0 ? 1 : 0;  // multi-axis positions: [axes, (batch,) seq]
    args.position_axis_stride = axes > 0 ? pos_strides[0] : 0;
    args.position_stride[0] = pos_strides.size() == lead + 2 ? pos_strides[lead] : 0;
    args.position_stride[1] = pos_strides.back();
  }
  spec.wide_index = overrides.index_bits == 0 ? wide : overrides.index_bits == 64;

  args.tokens = tokens;
  args.seq = plan.seq;
  args.heads_q = plan.heads_q;
  args.heads_total = plan.heads_q + plan.heads_k * (spec.cache ? 2 : 1);
  const FastDivisor seq_div = make_fast_divisor(static_cast<std::uint32_t>(std::max<std::int64_t>(plan.seq, 1)));
  args.seq_div_multiplier = seq_div.multiplier;
  args.seq_div_shift = seq_div.shift;
  args.table_rows = table_rows;
  args.table_stride = table_stride;

  plan.empty = tokens == 0 || args.heads_total == 0;
  plan.launch = choose_rope_launch(tokens, args.heads_total, rope_rotated_chunks(spec));
  if (desc.hadamard_group != 0) fuse_hadamard(desc, overrides, plan);
  return plan;
}

}  // namespace shapejit::plan
