// The rearrange manifest line: `rearrange --dtype D | --elem-bytes N --shape ... [--perm ...]
// [--src-strides ...] [--dst-strides ...] [--exact] [--align N] [--check-pointers] [--tune]`.
#include <fmt/format.h>

#include <cstdint>
#include <numeric>

#include "core/errors.hpp"
#include "ops/rearrange/codegen.hpp"
#include "ops/rearrange/plan.hpp"
#include "ops/rearrange/tune.hpp"
#include "ops/registry.hpp"
#include "shapejit/rearrange.hpp"

namespace shapejit::ops {
namespace {

plan::RearrangePlanData plan_data(const ManifestArgs& args) {
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
  options.tune = args.has("tune");
  return plan::plan_rearrange_data(dst, view, options);
}

// Planning a line measures nothing: a tuned line lists every candidate it may choose, and its
// programs are all of them, so a deployment holds whichever kernel a tuning record names.
PlannedLine plan_line(const ManifestArgs& args) {
  const plan::RearrangePlanData data = plan_data(args);
  const std::string manifest = plan::manifest_line(data);
  std::vector<plan::RearrangeVariant> variants = data.variants;
  std::string text = plan::describe(data);
  if (data.options.tune) {
    const std::vector<plan::RearrangeVariant> candidates = plan::tuning_candidates(data);
    text += fmt::format("tuning candidates ({}), timed by `shapejit tune` or a plan with tune on a GPU:\n",
                        candidates.size());
    for (const plan::RearrangeVariant& c : candidates) text += fmt::format("  {}\n", plan::candidate_name(c));
    variants.insert(variants.end(), candidates.begin(), candidates.end());
  }
  PlannedLine result{text, plan::describe_json(data), {}};
  for (const plan::RearrangeVariant& v : variants) {
    if (v.spec.family == plan::RearrangeFamily::copy) continue;
    jit::Program program = codegen::rearrange_program(v, manifest);
    bool seen = false;
    for (const jit::Program& p : result.programs) seen = seen || p.source == program.source;
    if (!seen) result.programs.push_back(std::move(program));
  }
  return result;
}

std::string tune_line(const ManifestArgs& args, const std::filesystem::path& out) {
  plan::RearrangePlanData data = plan_data(args);
  plan::tune_plan(data, {false, out});
  return data.tuning.empty() ? "nothing to tune" : data.tuning;
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
          {"tune", OptionKind::flag,
           "Measured planning: choose among the candidate kernels by timing them (precompile builds them all)"},
      },
      plan_line,
      tune_line,
  };
  return op;
}

}  // namespace shapejit::ops
