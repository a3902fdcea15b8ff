// `shapejit plan rearrange ...`: plans a permute (or any strided copy) and lists its kernels.
#include <memory>
#include <numeric>

#include "cli/commands.hpp"
#include "ops/rearrange/codegen.hpp"
#include "core/errors.hpp"
#include "ops/rearrange/plan.hpp"
#include "shapejit/rearrange.hpp"

namespace shapejit::cli {
namespace {

struct RearrangeArgs {
  std::string dtype;
  std::vector<std::int64_t> shape, src_strides, dst_strides;
  std::vector<int> perm;
  int elem_bytes = 0;
  bool exact = false;
  std::size_t align = 16;
  bool check_pointers = false;
};

PlanResult build_rearrange_plan(const RearrangeArgs& a) {
  if (a.dtype.empty() && a.elem_bytes == 0) invalid_argument("give --dtype or --elem-bytes");
  DType dtype = DType::u8;
  if (!a.dtype.empty()) {
    const auto parsed = parse_dtype(a.dtype);
    if (!parsed) invalid_argument("--dtype {} is not a dtype: use u8 i8 u16 i16 u32 i32 u64 i64 f16 bf16 f32 f64", a.dtype);
    dtype = *parsed;
  }
  std::vector<int> perm = a.perm;
  if (perm.empty()) {
    perm.resize(a.shape.size());
    std::iota(perm.begin(), perm.end(), 0);
  }
  const TensorDesc src{a.shape, a.src_strides, dtype, a.elem_bytes};
  const TensorDesc view = permuted(src, perm);
  const TensorDesc dst{view.shape, a.dst_strides, dtype, a.elem_bytes};
  const RearrangePlan plan = plan_rearrange(dst, view, {a.exact, a.align, a.check_pointers});

  PlanResult result{plan.describe(), nlohmann::json::parse(plan.json()), {}};
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

void add_plan_rearrange(CLI::App& plan, PlanBuilder& builder) {
  auto args = std::make_shared<RearrangeArgs>();
  CLI::App* cmd = plan.add_subcommand(
      "rearrange", "Plan copying a permuted (or strided) view of a tensor into a contiguous (or strided) destination");
  cmd->add_option("--dtype", args->dtype, "Element type: u8 i8 u16 i16 u32 i32 u64 i64 f16 bf16 f32 f64");
  cmd->add_option("--elem-bytes", args->elem_bytes, "Opaque element size in bytes (1 to 64), overrides --dtype");
  cmd->add_option("--shape", args->shape, "The source's logical shape, comma-separated")->delimiter(',')->required();
  cmd->add_option("--perm", args->perm, "Output dim i is source dim perm[i] (default: identity)")->delimiter(',');
  cmd->add_option("--src-strides", args->src_strides, "Source strides in elements (default: row-major contiguous)")
      ->delimiter(',');
  cmd->add_option("--dst-strides", args->dst_strides,
                  "Destination strides in elements, per output dim (default: row-major contiguous)")
      ->delimiter(',');
  cmd->add_flag("--exact", args->exact, "Bake extents and strides into the kernels");
  cmd->add_option("--align", args->align, "Alignment in bytes assumed for both base pointers (1 to 16, default 16)");
  cmd->add_flag("--check-pointers", args->check_pointers,
                "Verify at each launch that dst and src are memory of the stream's device holding their views");
  cmd->callback([args, &builder] { builder = [a = *args] { return build_rearrange_plan(a); }; });
}

}  // namespace shapejit::cli
