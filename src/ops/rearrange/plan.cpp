#include "ops/rearrange/plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>

#include "core/env.hpp"
#include "core/errors.hpp"

namespace shapejit::plan {
namespace {

std::string join(const std::vector<std::int64_t>& values) { return fmt::format("{}", fmt::join(values, ",")); }

std::string variant_text(const RearrangeVariant& v) {
  const RearrangeSpec& s = v.spec;
  std::string out = fmt::format("  unit {} bytes, canonical dims (extent:src:dst, units) {}\n", s.unit_bytes,
                                format_dims(v.form.dims));
  switch (s.family) {
    case RearrangeFamily::copy:
      return out + fmt::format("  family copy: device-to-device memcpy of {} bytes\n", v.copy_bytes);
    case RearrangeFamily::row:
    case RearrangeFamily::gather:
      if (s.vector_rows) {
        out += fmt::format("  family row: {} threads as {} along a row x {} rows, {} x {} aligned 16-byte destination "
                           "vectors per thread (row x col), sources shifted into them, {} row dims\n",
                           s.threads, s.tile_x, s.threads / s.tile_x, s.items_y, s.items_x, s.num_dims - 1);
        break;
      }
      out += fmt::format("  family {}: {} threads as {} along a row x {} rows, {} x {} units per thread "
                         "(row x col), {} row dims{}{}{}\n",
                         family_name(s.family), s.threads, s.tile_x, s.threads / s.tile_x, s.items_y, s.items_x,
                         s.num_dims - 1,
                         s.split_rows ? fmt::format(", split: {} rows x {} along the source's nearest row dim",
                                                    s.tile_y1, s.threads / s.tile_x / s.tile_y1 * s.items_y)
                                      : "",
                         s.src_inner_unit ? "" : ", strided source", s.dst_inner_unit ? "" : ", strided destination");
      break;
    case RearrangeFamily::transpose:
    case RearrangeFamily::packed:
      out += fmt::format("  family {}: tile {} (A, {} dims, {}) x {} (B, {} dims, {}) units, "
                         "{} outer dims, {} threads{}\n",
                         family_name(s.family), s.tile_a, s.dims_a,
                         s.a_pass ? fmt::format("dst-contiguous over {} units, then past B's first {}", s.a_chain,
                                                s.a_pass)
                                  : "dst-contiguous",
                         s.tile_b, s.dims_b,
                         s.b_chain ? fmt::format("src-contiguous over {} units, then dims past them", s.b_chain)
                                   : "src-contiguous",
                         s.num_dims - s.dims_a - s.dims_b, s.threads,
                         s.fixed_a || s.fixed_b
                             ? fmt::format(", {} table the same for every tile (filled once)",
                                           s.fixed_a && s.fixed_b ? "each" : s.fixed_a ? "A's" : "B's")
                             : "");
      out += fmt::format("  loads: {}; stores: {}; shared memory {} bytes, rows of {} units{}\n",
                         s.load_linear ? fmt::format("linear, {} units, runs of {} A indices", s.load_linear, s.load_run)
                                       : fmt::format("{} x {} micro-tiles{}", s.vec_a, s.vec_b,
                                                     s.skew_load ? ", rows funnel-shifted out of aligned vectors" : ""),
                         s.store_linear ? fmt::format("linear, {} units, runs of {} B indices{}{}", s.store_linear,
                                                      s.store_run,
                                                      s.rotate_span ? fmt::format(", vectors of every {} units rotated",
                                                                                  s.rotate_span)
                                                                    : "",
                                                      s.skew_runs ? ", aligned vectors shifted out of each run" : "")
                                        : fmt::format("{} units along A{}", s.vec_a,
                                                      s.skew_store ? ", destination rows skewed" : ""),
                         shared_bytes(s), s.pitch, s.swizzle ? fmt::format(", XOR swizzle over {} vectors, step {}", s.swizzle_period, s.swizzle_step) : "");
      break;
    case RearrangeFamily::skewed:
      out += fmt::format("  family skewed: tile {} (A, dst-contiguous) x {} (B, src-contiguous) units, skewed per row "
                         "to aligned {}-unit vectors on both sides, {} outer dims, {} threads, shared memory {} bytes\n",
                         s.tile_a, s.tile_b, s.vec_a, s.num_dims - 2, s.threads, shared_bytes(s));
      break;
    case RearrangeFamily::words:
      out += fmt::format("  family words: tile {} (A, {} dims, dst-contiguous) x {} (B, {} dims, src-contiguous) units "
                         "loaded as aligned 32-bit words and stored in aligned {}-byte vectors{}{}, {} outer dims, {} "
                         "threads, shared memory {} bytes\n",
                         s.tile_a, s.dims_a, s.tile_b, s.dims_b, 4 * s.store_words,
                         s.skew_load ? ", source rows funnel-shifted" : "",
                         s.skew_store ? ", destination rows skewed" : "",
                         s.num_dims - s.dims_a - s.dims_b, s.threads, shared_bytes(s));
      break;
    case RearrangeFamily::runs:
      out += fmt::format("  family runs: tile {} units over {} dims (destination order), destination runs over the first "
                         "{} (last tiled by {}), source runs over {} (last tiled by {}), {}, {} outer dims, {} threads, "
                         "shared memory {} bytes\n",
                         fmt::join(runs_tile_extents(s, v.args), " x "), s.tile_dims, s.dst_run_dims, s.tile_a,
                         s.src_run_dims, s.tile_b,
                         s.gather_stores ? fmt::format("source runs staged in aligned 16-byte vectors, stores gathered "
                                                       "in aligned {}-byte vectors", 4 * s.store_words)
                                         : "loads scattered into staged destination runs, aligned 32-bit words on both sides",
                         s.num_dims - s.tile_dims, s.threads, shared_bytes(s));
      break;
    case RearrangeFamily::segments:
      out += fmt::format("  family segments: rows of {} bytes, tile {} (A, {} dims, dst-next) x {} (B, {} dims, src-next) "
                         "rows, {}, {}, loads in aligned 16-byte vectors, stores in aligned {}, {} outer dims, "
                         "{} threads, shared memory {} bytes\n",
                         s.segment * s.unit_bytes, s.tile_a, s.dims_a, s.tile_b, s.dims_b,
                         s.merge_src ? "one source run" : fmt::format("{} source runs", s.tile_a),
                         s.merge_dst ? "one destination run" : fmt::format("{} destination runs", s.tile_b),
                         segment_store_bytes(s) == 16 ? "16-byte vectors" : "32-bit words",
                         s.num_dims - 1 - s.dims_a - s.dims_b, s.threads, shared_bytes(s));
      break;
  }
  out += fmt::format("  index {}-bit, bounds checks {}, {}\n", s.index64 ? 64 : 32, s.bounds ? "yes" : "no",
                     s.exact ? "exact (extents and strides baked in)" : "extents and strides at run time");
  out += fmt::format("  launch: {} blocks x {} threads for {} tiles\n", v.grid, s.threads, v.args.num_tiles);
  return out + fmt::format("  key: {}\n", kernel_label(s, v.args));
}

struct Alignments {
  std::int64_t src, dst;
};

// Alignment in bytes of the pointers a kernel starts from, for base pointers aligned to 2^level.
Alignments alignments_at(const RearrangePlanData& p, int level) {
  const std::int64_t base = std::int64_t{1} << level;
  return {std::min(base, alignment_of(p.elements.src_offset * p.elem_bytes)),
          std::min(base, alignment_of(p.elements.dst_offset * p.elem_bytes))};
}

RearrangeVariant planned_variant(const RearrangePlanData& p, int level) {
  const Alignments a = alignments_at(p, level);
  return plan_variant(fold_into_units(p.elements, a.src, a.dst), p.options.exact, a.src, a.dst);
}

}  // namespace

int alignment_level(std::uintptr_t address_bits) { return std::countr_zero(address_bits | 16u); }

int plan_level(RearrangePlanData& p, int level) {
  int& index = p.variant_for_level[static_cast<std::size_t>(level)];
  if (index != kUnplanned) return index;
  RearrangeVariant v = planned_variant(p, level);
  for (std::size_t i = 0; i < p.variants.size() && index == kUnplanned; ++i)
    // The grid too: a tuned variant (choose_variant) may differ from the planned one by its grid alone.
    if (p.variants[i].form == v.form && p.variants[i].spec == v.spec && p.variants[i].grid == v.grid)
      index = static_cast<int>(i);
  if (index == kUnplanned) {
    index = static_cast<int>(p.variants.size());
    p.variants.push_back(std::move(v));
  }
  return index;
}

RearrangePlanData with_every_level(const RearrangePlanData& p) {
  if (p.empty) return p;
  RearrangePlanData every = p;
  const int top = alignment_level(p.options.assumed_alignment);
  every.variants = {p.variants[static_cast<std::size_t>(p.variant_for_level[static_cast<std::size_t>(top)])]};
  every.variants.reserve(kMaxVariants);
  every.variant_for_level.fill(0);
  for (int level = top - 1; level >= 0; --level) {
    every.variant_for_level[static_cast<std::size_t>(level)] = kUnplanned;
    plan_level(every, level);
  }
  return every;
}

RearrangePlanData plan_rearrange_data(const TensorDesc& dst, const TensorDesc& src, const RearrangeOptions& options,
                                      PlannedLevels levels) {
  check_assumed_alignment(options.assumed_alignment);
  check_rearrange_descs(dst, src);
  RearrangePlanData p;
  p.dst = dst;
  p.src = src;
  p.options = options;
  p.options.tune = options.tune || env_flag("SHAPEJIT_TUNE");
  p.elem_bytes = static_cast<std::int64_t>(dst.element_size());
  for (std::int64_t e : dst.shape) p.empty = p.empty || e == 0;
  if (p.empty) return p;
  p.elements = canonicalize(dst, src);
  p.src_range = byte_range(src);
  p.dst_range = byte_range(dst);
  p.same_layout = dst.effective_strides() == src.effective_strides();

  const int top = alignment_level(options.assumed_alignment);
  p.variant_for_level.fill(kUnplanned);
  p.variants.reserve(kMaxVariants);
  const int lowest = levels == PlannedLevels::every ? 0 : top;
  for (int level = top; level >= lowest; --level) plan_level(p, level);
  for (int level = top + 1; level < kAlignmentLevels; ++level)
    p.variant_for_level[static_cast<std::size_t>(level)] = p.variant_for_level[static_cast<std::size_t>(top)];
  return p;
}

std::vector<RearrangeVariant> tuning_candidates(const RearrangePlanData& p) {
  if (p.empty) return {};
  const int top = alignment_level(p.options.assumed_alignment);
  const Alignments a = alignments_at(p, top);
  std::vector<RearrangeVariant> out =
      candidate_variants(fold_into_units(p.elements, a.src, a.dst), p.options.exact, a.src, a.dst);
  for (int level = top - 1; level >= 0; --level) {
    RearrangeVariant v = planned_variant(p, level);
    bool seen = false;
    for (const RearrangeVariant& c : out) seen = seen || (c.form == v.form && c.spec == v.spec && c.grid == v.grid);
    if (!seen) out.push_back(std::move(v));
  }
  // The planned kernel with the view's extents and strides baked in: the same code with constant
  // index math, one kernel per shape, which a measured plan (itself one line's) may afford. Figures:
  // bench/RESULTS.md, the section of 6961443.
  if (!p.options.exact && out.front().spec.family != RearrangeFamily::copy) {
    RearrangeVariant baked = out.front();
    baked.spec.exact = true;
    out.push_back(std::move(baked));
  }
  return out;
}

void choose_variant(RearrangePlanData& p, const RearrangeVariant& chosen) {
  const int top = alignment_level(p.options.assumed_alignment);
  const int replaced = p.variant_for_level[static_cast<std::size_t>(top)];
  bool still_used = false;
  for (int level = 0; level < top; ++level) still_used = still_used || p.variant_for_level[static_cast<std::size_t>(level)] == replaced;
  int index = replaced;
  if (still_used) {
    index = static_cast<int>(p.variants.size());
    p.variants.push_back(chosen);
  } else {
    p.variants[static_cast<std::size_t>(replaced)] = chosen;
  }
  for (int level = top; level < kAlignmentLevels; ++level) p.variant_for_level[static_cast<std::size_t>(level)] = index;
}

std::string candidate_name(const RearrangeVariant& v) {
  const std::int64_t per_block = v.grid == 0 ? 0 : (v.args.num_tiles + v.grid - 1) / v.grid;
  return fmt::format("{} tiles/block {}", kernel_label(v.spec, v.args), per_block);
}

jit::LaunchDims launch_dims(const RearrangeVariant& v) {
  jit::LaunchDims dims;
  dims.grid[0] = v.grid;
  dims.block[0] = static_cast<unsigned>(v.spec.threads);
  return dims;
}

const RearrangeVariant& variant_for_pointers(const RearrangePlanData& plan, std::uintptr_t address_bits) {
  const int index = plan.variant_for_level[static_cast<std::size_t>(alignment_level(address_bits))];
  if (index == kUnplanned)
    fail(ErrorCode::internal, "rearrange: no variant is planned for pointers aligned to {} bytes",
         std::uintptr_t{1} << alignment_level(address_bits));
  return plan.variants[static_cast<std::size_t>(index)];
}

std::string manifest_line(const RearrangePlanData& p) {
  // A copy at one alignment is a copy at every alignment (its form is one contiguous run).
  if (p.empty || p.variants.front().spec.family == RearrangeFamily::copy) return "";
  std::vector<std::int64_t> shape, src, dst;
  for (const RearrangeDim& d : p.elements.dims) {
    shape.push_back(d.extent);
    src.push_back(d.src_stride);
    dst.push_back(d.dst_stride);
  }
  std::string line = p.dst.elem_bytes > 0 ? fmt::format("rearrange --elem-bytes {}", p.elem_bytes)
                                          : fmt::format("rearrange --dtype {}", dtype_name(p.dst.dtype));
  line += fmt::format(" --shape {} --src-strides {} --dst-strides {}", join(shape), join(src), join(dst));
  if (p.options.assumed_alignment != 16) line += fmt::format(" --align {}", p.options.assumed_alignment);
  if (p.options.exact) line += " --exact";
  if (p.options.tune) line += " --tune";
  return line;
}

std::string describe(const RearrangePlanData& p) {
  std::string out = fmt::format("rearrange: shape {}, {} bytes per element\n  src strides {}\n  dst strides {}\n",
                                p.dst.shape, p.elem_bytes, p.src.effective_strides(), p.dst.effective_strides());
  if (p.options.check_pointers) out += "  pointers checked at each launch (device, allocation bounds)\n";
  if (p.empty) return out + "  empty (a zero extent): nothing is launched\n";
  out += fmt::format("canonical form (extent:src:dst, elements): {}, base offsets src {} dst {}\n",
                     format_dims(p.elements.dims), p.elements.src_offset, p.elements.dst_offset);
  if (!p.tuning.empty()) out += fmt::format("tuning: {}\n", p.tuning);
  for (std::size_t i = 0; i < p.variants.size(); ++i) {
    std::vector<int> levels;
    for (int level = 0; level < kAlignmentLevels; ++level)
      if (p.variant_for_level[static_cast<std::size_t>(level)] == static_cast<int>(i)) levels.push_back(1 << level);
    out += fmt::format("variant {} (base pointers aligned to {} bytes):\n", i, fmt::join(levels, "/"));
    out += variant_text(p.variants[i]);
  }
  return out;
}

std::string describe_json(const RearrangePlanData& p) {
  auto dims_json = [](const RearrangeDims& dims) {
    std::vector<std::string> items;
    for (const RearrangeDim& d : dims)
      items.push_back(fmt::format("{{\"extent\": {}, \"src_stride\": {}, \"dst_stride\": {}}}", d.extent, d.src_stride,
                                  d.dst_stride));
    return fmt::format("[{}]", fmt::join(items, ", "));
  };
  std::string out = fmt::format(
      "{{\"op\": \"rearrange\", \"shape\": {}, \"elem_bytes\": {}, \"src_strides\": {}, \"dst_strides\": {}, "
      "\"check_pointers\": {}, \"empty\": {}",
      p.dst.shape, p.elem_bytes, p.src.effective_strides(), p.dst.effective_strides(), p.options.check_pointers, p.empty);
  if (!p.empty) {
    out += fmt::format(", \"canonical\": {}, \"src_offset\": {}, \"dst_offset\": {}, \"manifest_line\": \"{}\"",
                       dims_json(p.elements.dims), p.elements.src_offset, p.elements.dst_offset, manifest_line(p));
    std::vector<std::string> variants;
    for (std::size_t i = 0; i < p.variants.size(); ++i) {
      const RearrangeVariant& v = p.variants[i];
      const RearrangeSpec& s = v.spec;
      std::vector<int> levels;
      for (int level = 0; level < kAlignmentLevels; ++level)
        if (p.variant_for_level[static_cast<std::size_t>(level)] == static_cast<int>(i)) levels.push_back(1 << level);
      variants.push_back(fmt::format(
          "{{\"alignments\": {}, \"dims\": {}, \"key\": \"{}\", \"grid\": {}, \"tiles\": {}, \"index_bits\": {}, "
          "\"shared_bytes\": {}, \"copy_bytes\": {}, {}}}",
          levels, dims_json(v.form.dims), kernel_label(s, v.args), v.grid, v.args.num_tiles, s.index64 ? 64 : 32,
          shared_bytes(s), v.copy_bytes, spec_json_members(s)));
    }
    out += fmt::format(", \"variants\": [{}]", fmt::join(variants, ", "));
    if (p.options.tune) out += fmt::format(", \"tuning\": \"{}\"", p.tuning);
  }
  return out + "}";
}

}  // namespace shapejit::plan
