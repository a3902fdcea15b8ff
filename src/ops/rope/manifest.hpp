// The rope manifest line: `rope --algo neox|gptj --dtype D [--table-dtype T] [--pos-dtype P|none]
// [--pos-layout seq] [--axis-rule sections|interleaved|blocks --axis-sections S0,S1,...] --shape [B,]S,H,D
// [--k-heads N] [--rotary-dim R] [--hadamard-group G]
// [--hadamard-scale S] [--hadamard-order rope-then-hadamard|hadamard-then-rope]
// [--q-quantize none|int8|fp8-e4m3] [--k-quantize none|int8|fp8-e4m3]
// [--kv-cache nhd|hnd [--cache-dtype D|int8|fp8-e4m3] [--slot-dtype i32|i64] [--write-k]]
// [--inplace] [--inverse] [--checked] [--access N] [--table-access N] [--cache-access N]
// [--index 32|64]`, what `shapejit plan` accepts and record mode writes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ops/rope/plan.hpp"

namespace shapejit::plan {

/// The options of one manifest line.
struct RopeManifest {
  RopeStyle style = RopeStyle::neox;
  DType dtype = DType::bf16;
  std::optional<DType> table_dtype;  ///< std::nullopt: f64 for f64 data, else f32
  std::optional<DType> position_dtype = DType::i64;  ///< std::nullopt: no positions (s + offset)
  bool positions_shared = false;     ///< 4-D only: positions [seq] instead of [batch, seq]
  RopeAxisRule axis_rule = RopeAxisRule::none;  ///< multi-axis positions [axes, ...]
  std::vector<std::int64_t> axis_sections;
  std::vector<std::int64_t> shape;   ///< [seq, heads, dhead] or [batch, seq, heads, dhead]
  std::optional<std::int64_t> k_heads;  ///< std::nullopt: no k
  std::int64_t rotary_dim = 0;       ///< 0: dhead
  std::int64_t hadamard_group = 0;   ///< 0: no fused Hadamard transform
  std::optional<double> hadamard_scale;  ///< std::nullopt: 1/sqrt(G * dhead)
  HadamardOrder hadamard_order = HadamardOrder::rope_then_hadamard;
  RopeQuantize q_quantize = RopeQuantize::none;  ///< q's output as 8-bit codes (fused transform only)
  RopeQuantize k_quantize = RopeQuantize::none;  ///< k's output as 8-bit codes (fused transform only)
  KvCacheLayout cache_layout = KvCacheLayout::none;  ///< --kv-cache: append k and v to paged caches
  std::optional<DType> cache_dtype;  ///< std::nullopt: the data dtype (or the codes of cache_quantize)
  RopeQuantize cache_quantize = RopeQuantize::none;
  DType slot_dtype = DType::i64;
  bool write_k = false;              ///< --write-k: k's rotation also goes to k_out (not in place)
  bool inplace = false;
  bool inverse = false;
  bool checked = false;
  bool check_pointers = false;       ///< --check-pointers: launch-time checks only, no kernel change
  RopeOverrides overrides;           ///< --access, --table-access, --index, --cache-access (16, 16, 0, 16 = unset)
};

/// The contiguous descriptor a manifest line stands for: x, y, k, k_out contiguous, a table of
/// max(seq, 1) rows of rotary_dim/2, contiguous positions. A quantized output (y for q, k_out for
/// k) is given contiguous with its code dtype, i8 for int8 and u8 for fp8-e4m3 (not in place: the
/// planner names that conflict); the scales are left to the planner, contiguous. A cache append
/// gets contiguous v, slots [tokens] and caches of one block of 16 rows.
RopeDesc manifest_desc(const RopeManifest& manifest);

/// The manifest line that reproduces the kernels of `plan`: the shapes and flags, plus --access,
/// --table-access and --index where the plan's strides made it choose differently from the
/// contiguous descriptor of the same line. A Hadamard scale other than 1/sqrt(n) is written too,
/// though it changes no kernel, so that the line describes the same plan.
std::string rope_manifest_line(const RopePlanData& plan);

}  // namespace shapejit::plan

namespace shapejit::ops {

class ManifestArgs;

/// The options of a parsed `rope` manifest line (names and choices already checked by the
/// registry); throws invalid_argument naming a value that is not a dtype or a number.
plan::RopeManifest rope_manifest(const ManifestArgs& args);

}  // namespace shapejit::ops
