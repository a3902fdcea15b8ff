#include "ops/rearrange/codegen.hpp"

#include <fmt/format.h>

#include "codegen/templates.hpp"
#include "core/errors.hpp"

namespace shapejit::codegen {

CodeParams rearrange_params(const plan::RearrangeSpec& s, const plan::RearrangeKernelArgs& args) {
  CodeParams p;
  p.fields(s)
      .type("Unit", fmt::format("sj_bytes<{}>", s.unit_bytes))
      .type("Index", s.index64 ? "long long" : "int");

  std::vector<std::int64_t> extents(static_cast<std::size_t>(s.num_dims), 1), src(extents.size(), 0),
      dst(extents.size(), 0);
  if (s.exact)
    for (std::size_t k = 0; k < extents.size(); ++k) {
      extents[k] = args.dim[k].extent.value;
      src[k] = args.dim[k].src_stride;
      dst[k] = args.dim[k].dst_stride;
    }
  std::vector<std::int64_t> tile = plan::runs_tile_extents(s, args);
  tile.resize(8, 1);
  for (std::size_t k = 0; k < tile.size(); ++k) p.integer(fmt::format("TILE_E{}", k), tile[k]);
  return p.integer("K_NUM_TILES", s.exact ? args.num_tiles : 0)
      .integer("K_EXTENT_A", s.exact ? args.extent_a : 0)
      .integer("K_EXTENT_B", s.exact ? args.extent_b : 0)
      .integer("K_TILES_X", s.exact ? args.tiles_x.value : 1)
      .integer("K_TILES_Y", s.exact ? args.tiles_y.value : 1)
      .array("K_EXTENT", extents)
      .array("K_SRC_STRIDE", src)
      .array("K_DST_STRIDE", dst);
}

std::string rearrange_template(const plan::RearrangeSpec& spec) {
  switch (spec.family) {
    case plan::RearrangeFamily::row: return spec.vector_rows ? "rearrange_rows_vectors.cu" : "rearrange_rows.cu";
    case plan::RearrangeFamily::gather: return "rearrange_rows.cu";
    case plan::RearrangeFamily::transpose:
    case plan::RearrangeFamily::packed: return "rearrange_tiled.cu";
    case plan::RearrangeFamily::skewed: return "rearrange_skewed.cu";
    case plan::RearrangeFamily::words: return "rearrange_words.cu";
    case plan::RearrangeFamily::runs: return spec.gather_stores ? "rearrange_runs_gather.cu" : "rearrange_runs.cu";
    case plan::RearrangeFamily::segments: return "rearrange_segments.cu";
    case plan::RearrangeFamily::copy: break;
  }
  fail(ErrorCode::internal, "the rearrange copy family is a memcpy and has no kernel template");
}

jit::Program rearrange_program(const plan::RearrangeVariant& variant, const std::string& manifest_line) {
  const plan::RearrangeFamily family = variant.spec.family;
  const bool tiled = family == plan::RearrangeFamily::transpose || family == plan::RearrangeFamily::packed;
  const std::string kernel = rearrange_template(variant.spec);
  const CodeParams params = rearrange_params(variant.spec, variant.args);
  // Both runs kernels read the tile they share from rearrange_runs_tile.cu.
  std::string source = family == plan::RearrangeFamily::runs
                           ? render({"rearrange_common.cu", "rearrange_runs_tile.cu", kernel}, params)
                           : render({"rearrange_common.cu", kernel}, params);
  jit::Program program{fmt::format("rearrange_{}", plan::family_name(family)), std::move(source), {}, manifest_line};
  if (tiled) program.low_register_options = {"-DSJ_LOW_REGISTERS=1"};
  return program;
}

}  // namespace shapejit::codegen
