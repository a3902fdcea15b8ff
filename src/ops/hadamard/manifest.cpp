#include "ops/hadamard/manifest.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"
#include "ops/hadamard/impl.hpp"
#include "ops/registry.hpp"

namespace shapejit::plan {

std::string hadamard_manifest_line(const HadamardPlanData& plan) {
  const HadamardSpec& s = plan.spec;
  HadamardDesc contiguous;
  contiguous.x = TensorDesc{plan.desc.x.shape, {}, s.data};
  contiguous.group = plan.desc.group;
  contiguous.inplace = s.inplace;
  const HadamardSpec natural = plan_hadamard_data(contiguous).spec;
  std::string line = fmt::format("hadamard --dtype {} --shape {}", dtype_name(s.data), fmt::join(plan.desc.x.shape, ","));
  if (plan.desc.group != 1) line += fmt::format(" --group {}", plan.desc.group);
  if (s.inplace) line += " --inplace";
  if (s.vec != natural.vec) line += fmt::format(" --vec {}", s.vec);
  if (s.wide_index != natural.wide_index) line += fmt::format(" --index {}", s.wide_index ? 64 : 32);
  if (s.row_dims != natural.row_dims) line += fmt::format(" --row-dims {}", s.row_dims);
  if (s.group != natural.group) line += " --split-heads";
  return line;
}

}  // namespace shapejit::plan

namespace shapejit::ops {
namespace {

PlannedLine plan_line(const ManifestArgs& args) {
  HadamardDesc desc;
  const std::string dtype = args.text("dtype");
  const auto t = parse_dtype(dtype);
  if (!t) invalid_argument("--dtype {} is not a dtype name (f16 bf16 f32 f64)", dtype);
  desc.x = TensorDesc{args.integers("shape"), {}, *t};
  desc.group = args.integer("group", 1);
  if (args.has("scale")) {
    try {
      desc.scale = std::stod(args.text("scale"));
    } catch (const std::exception&) {
      invalid_argument("--scale {} is not a number", args.text("scale"));
    }
  }
  desc.inplace = args.has("inplace");
  desc.check_pointers = args.has("check-pointers");
  const plan::HadamardOverrides overrides{args.small_integer("vec", 16), args.small_integer("index", 0),
                                          args.small_integer("row-dims", 0), args.has("split-heads")};
  const auto plan = detail::make_hadamard_plan(desc, overrides);
  PlannedLine result{detail::describe(*plan), detail::json(*plan), {}};
  for (const jit::Program* p : plan->programs()) result.programs.push_back(*p);
  return result;
}

}  // namespace

const Operator& hadamard_operator() {
  static const Operator op{
      "hadamard",
      "Grouped-head fast Walsh-Hadamard transform of [..., heads, dhead] data",
      {
          {"dtype", OptionKind::text, "Data dtype: f16, bf16, f32 or f64", true},
          {"shape", OptionKind::integers, "x's shape: ...,heads,dhead (rank 2 to 6)", true},
          {"group", OptionKind::integer, "Heads transformed together, G (divides heads; n = G * dhead; default 1)"},
          {"scale", OptionKind::text, "Factor applied to the result (default 1/sqrt(n); no kernel change)"},
          {"inplace", OptionKind::flag, "Write the output over the input"},
          {"check-pointers", OptionKind::flag,
           "Verify at each launch that both pointers are memory of the stream's device holding their views"},
          {"vec", OptionKind::integer, "At most this many values per access (strided plans)", false,
           {"1", "2", "4", "8", "16"}},
          {"index", OptionKind::integer, "Offset width: 32 or 64 (default: as the shapes need)", false, {"32", "64"}},
          {"row-dims", OptionKind::integer, "Run-time row dims (strided plans whose outer dims do not merge)", false,
           {"1", "2", "3", "4", "5"}},
          {"split-heads", OptionKind::flag,
           "Address a group's heads apart even where they lie back to back (strided plans whose heads do not)"},
      },
      plan_line,
  };
  return op;
}

}  // namespace shapejit::ops
