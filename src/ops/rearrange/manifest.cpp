// The rearrange manifest line: `rearrange --dtype D | --elem-bytes N --shape ... [--perm ...]
// [--src-strides ...] [--dst-strides ...] [--exact] [--align N] [--check-pointers]`.
#include <cstdint>
#include <numeric>

#include "core/errors.hpp"
#include "ops/rearrange/codegen.hpp"
#include "ops/rearrange/plan.hpp"
#include "ops/registry.hpp"
#include "shapejit/rearrange.hpp"

namespace shapejit::ops {
namespace {

PlannedLine plan_line(const ManifestArgs& args) {
  const int elem_bytes = args.small_integer("elem-bytes", 0);
  if (!args.has("dtype") && elem_bytes == 0) invalid_argument("rearrange: give --dtype or --elem-bytes");
  DType dtype = DType::u8;
  if (args.has("dtype")) {
    const auto parsed = parse_dtype(args.text("dtype"));
    if (!parsed)
      invalid_argument("--dtype {} is not a dtype: use u8 i8 u16 i16 u32 i32 u64 i64 f16 bf16 f32 f64", args.text("dtype"));
    dtype = *parsed;
  }
  const std::vector<std::int64_t> shape = args.integers("shape");
  std::vector<int> perm(shape.size());
  std::iota(perm.begin(), perm.end(), 0);
  if (args.has("perm")) {
    perm.clear();
    for (std::int64_t p : args.integers("perm")) {
      if (p < INT32_MIN || p > INT32_MAX) invalid_argument("--perm: {} is not a dimension", p);
      perm.push_back(static_cast<int>(p));
    }
  }
  const TensorDesc view = permuted(TensorDesc{shape, args.integers("src-strides"), dtype, elem_bytes}, perm);
  const TensorDesc dst{view.shape, args.integers("dst-strides"), dtype, elem_bytes};
  RearrangeOptions options;
  options.exact = args.has("exact");
  options.assumed_alignment = static_cast<std::size_t>(args.integer("align", 16));
  options.check_pointers = args.has("check-pointers");
  const RearrangePlan plan = plan_rearrange(dst, view, options);

  PlannedLine result{plan.describe(), plan.json(), {}};
  for (const plan::RearrangeVariant& v : plan.impl().data.variants) {
    if (v.spec.family == plan::RearrangeFamily::copy) continue;
    jit::Program program = codegen::rearrange_program(v, plan.manifest_line());
    bool seen = false;
    for (const jit::Program& p : result.programs) seen = seen || p.source == program.source;
    if (!seen) result.programs.push_back(std::move(program));
  }
  return result;
}

}  // namespace

const Operator& rearrange_operator() {
  static const Operator op{
      "rearrange",
      "Plan copying a permuted (or strided) view of a tensor into a contiguous (or strided) destination",
      {
          {"dtype", OptionKind::text, "Element type: u8 i8 u16 i16 u32 i32 u64 i64 f16 bf16 f32 f64"},
          {"elem-bytes", OptionKind::integer, "Opaque element size in bytes (1 to 64), overrides --dtype"},
          {"shape", OptionKind::integers, "The source's logical shape, comma-separated", true},
          {"perm", OptionKind::integers, "Output dim i is source dim perm[i] (default: identity)"},
          {"src-strides", OptionKind::integers, "Source strides in elements (default: row-major contiguous)"},
          {"dst-strides", OptionKind::integers,
           "Destination strides in elements, per output dim (default: row-major contiguous)"},
          {"exact", OptionKind::flag, "Bake extents and strides into the kernels"},
          {"align", OptionKind::integer, "Alignment in bytes assumed for both base pointers (1 to 16, default 16)"},
          {"check-pointers", OptionKind::flag,
           "Verify at each launch that dst and src are memory of the stream's device holding their views"},
      },
      plan_line,
  };
  return op;
}

}  // namespace shapejit::ops
