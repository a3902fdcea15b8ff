#include "ops/rearrange/codegen.hpp"

#include <fmt/format.h>

#include "codegen/templates.hpp"
#include "core/errors.hpp"

namespace shapejit::codegen {

CodeParams rearrange_params(const plan::RearrangeSpec& s, const plan::RearrangeKernelArgs& args) {
  using plan::RearrangeFamily;
  CodeParams p;
  p.integer("UNIT", s.unit_bytes)
      .type("Unit", fmt::format("sj_bytes<{}>", s.unit_bytes))
      .type("Index", s.index64 ? "long long" : "int")
      .integer("NUM_DIMS", s.num_dims)
      .integer("THREADS", s.threads)
      .flag("INDEX64", s.index64)
      .flag("BOUNDS", s.bounds)
      .flag("EXACT", s.exact);

  std::vector<std::int64_t> extents(static_cast<std::size_t>(s.num_dims), 1), src(extents.size(), 0),
      dst(extents.size(), 0);
  if (s.exact)
    for (std::size_t k = 0; k < extents.size(); ++k) {
      extents[k] = args.dim[k].extent.value;
      src[k] = args.dim[k].src_stride;
      dst[k] = args.dim[k].dst_stride;
    }
  p.integer("K_NUM_TILES", s.exact ? args.num_tiles : 0)
      .integer("K_EXTENT_A", s.exact ? args.extent_a : 0)
      .integer("K_EXTENT_B", s.exact ? args.extent_b : 0)
      .integer("K_TILES_X", s.exact ? args.tiles_x.value : 1)
      .integer("K_TILES_Y", s.exact ? args.tiles_y.value : 1)
      .array("K_EXTENT", extents)
      .array("K_SRC_STRIDE", src)
      .array("K_DST_STRIDE", dst);

  switch (s.family) {
    case RearrangeFamily::row:
    case RearrangeFamily::gather:
      p.integer("TILE_X", s.tile_x)
          .integer("ITEMS_X", s.items_x)
          .integer("ITEMS_Y", s.items_y)
          .integer("TILE_Y1", s.tile_y1)
          .flag("SPLIT_ROWS", s.split_rows)
          .flag("SRC_INNER_UNIT", s.src_inner_unit)
          .flag("DST_INNER_UNIT", s.dst_inner_unit);
      break;
    case RearrangeFamily::transpose:
    case RearrangeFamily::packed:
      p.integer("DIMS_A", s.dims_a)
          .integer("DIMS_B", s.dims_b)
          .integer("TILE_A", s.tile_a)
          .integer("TILE_B", s.tile_b)
          .integer("VEC_A", s.vec_a)
          .integer("VEC_B", s.vec_b)
          .integer("PITCH", s.pitch)
          .flag("SWIZZLE", s.swizzle)
          .integer("SWIZZLE_PERIOD", s.swizzle_period)
          .integer("LOAD_LINEAR", s.load_linear)
          .integer("STORE_LINEAR", s.store_linear)
          .integer("MIN_BLOCKS", s.min_blocks);
      break;
    case RearrangeFamily::skewed:
      p.integer("TILE_A", s.tile_a).integer("TILE_B", s.tile_b).integer("VEC", s.vec_a).integer("MIN_BLOCKS", s.min_blocks);
      break;
    case RearrangeFamily::copy:
      break;
  }
  return p;
}

std::string rearrange_template(plan::RearrangeFamily family) {
  switch (family) {
    case plan::RearrangeFamily::row:
    case plan::RearrangeFamily::gather: return "rearrange_rows.cu";
    case plan::RearrangeFamily::transpose:
    case plan::RearrangeFamily::packed: return "rearrange_tiled.cu";
    case plan::RearrangeFamily::skewed: return "rearrange_skewed.cu";
    case plan::RearrangeFamily::copy: break;
  }
  fail(ErrorCode::internal, "the rearrange copy family is a memcpy and has no kernel template");
}

jit::Program rearrange_program(const plan::RearrangeVariant& variant, const std::string& manifest_line) {
  const std::string body_name = rearrange_template(variant.spec.family);
  return {fmt::format("rearrange_{}", plan::family_name(variant.spec.family)),
          render({"rearrange_common.cu", body_name}, rearrange_params(variant.spec, variant.args)), {}, manifest_line};
}

}  // namespace shapejit::codegen
