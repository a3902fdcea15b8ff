// The hadamard entry points: plan, launch, one-shot with a plan cache, text forms, H_n.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "core/byte_range.hpp"
#include "core/errors.hpp"
#include "core/plan_cache.hpp"
#include "jit/kernel_registry.hpp"
#include "jit/pointer_check.hpp"
#include "jit/record.hpp"
#include "ops/hadamard/codegen.hpp"
#include "ops/hadamard/impl.hpp"
#include "ops/hadamard/manifest.hpp"
#include "ops/plan_text.hpp"
#include "shapejit/hadamard.hpp"

namespace shapejit {
namespace detail {
namespace {

bool aligned(const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

/// Checks `p` against the plan and fills the pointer fields of `args`.
void bind_pointers(const HadamardPlanImpl& plan, const HadamardPointers& p, plan::HadamardKernelArgs& args) {
  if (p.x == nullptr) invalid_argument("pointers.x is NULL; pass the input");
  if (p.y == nullptr) invalid_argument("pointers.y is NULL; pass the output (x itself for an in-place plan)");
  const bool inplace = plan.data.spec.inplace;
  if (inplace && p.y != p.x)
    invalid_argument("pointers.y differs from pointers.x but the plan is in place; pass x as y (or plan with inplace = "
                     "false)");
  if (!inplace && ranges_overlap(reinterpret_cast<std::uintptr_t>(p.x), plan.x_range,
                                 reinterpret_cast<std::uintptr_t>(p.y), plan.y_range))
    invalid_argument("x and y memory overlap but the plan is not in place: give y memory of its own, or plan with "
                     "inplace = true and y = x");
  const std::size_t bytes = dtype_size(plan.data.spec.data);
  if (!aligned(p.x, bytes) || !aligned(p.y, bytes))
    invalid_argument("pointers.x or pointers.y is not aligned to its {}-byte elements", bytes);
  args.x = p.x;
  args.y = p.y;
}

const jit::KernelHandle& registered_hadamard_kernel(const plan::HadamardSpec& spec, const std::string& manifest) {
  return jit::registered_kernel(
      plan::hadamard_key(spec), [&] { return codegen::hadamard_program(spec, manifest); },
      plan::hadamard_shared_bytes(spec));
}

jit::LaunchDims launch_dims(const plan::HadamardSpec& spec, std::int64_t rows) {
  jit::LaunchDims dims;
  dims.grid[0] = plan::hadamard_grid(spec, rows);
  dims.block[0] = static_cast<unsigned>(spec.threads_per_row * spec.rows_per_block);
  dims.shared_bytes = plan::hadamard_shared_bytes(spec);
  return dims;
}

}  // namespace

HadamardPlanImpl::HadamardPlanImpl(plan::HadamardPlanData planned)
    : data(std::move(planned)),
      manifest(plan::hadamard_manifest_line(data)),
      x_range(byte_range(data.desc.x)),
      y_range(byte_range(*data.desc.y)),
      dims(launch_dims(data.spec, data.args.rows)),
      kernel(&registered_hadamard_kernel(data.spec, manifest)) {
  if (data.spec.vec == 1) return;
  const plan::HadamardSpec scalar = plan::hadamard_scalar_variant(data.spec);
  scalar_dims = launch_dims(scalar, data.args.rows);
  scalar_kernel = &registered_hadamard_kernel(scalar, manifest);
}

std::vector<const jit::Program*> HadamardPlanImpl::programs() const {
  std::vector<const jit::Program*> out = {&kernel->program()};
  if (scalar_kernel) out.push_back(&scalar_kernel->program());
  return out;
}

std::vector<SpecKey> HadamardPlanImpl::kernel_keys() const {
  std::vector<SpecKey> out = {plan::hadamard_key(data.spec)};
  if (scalar_kernel) out.push_back(plan::hadamard_key(plan::hadamard_scalar_variant(data.spec)));
  return out;
}

std::shared_ptr<const HadamardPlanImpl> make_hadamard_plan(const HadamardDesc& desc,
                                                           const plan::HadamardOverrides& overrides) {
  return std::make_shared<const HadamardPlanImpl>(plan::plan_hadamard_data(desc, overrides));
}

std::string describe(const HadamardPlanImpl& plan) {
  const plan::HadamardPlanData& d = plan.data;
  const plan::HadamardSpec& s = d.spec;
  const plan::HadamardFactors f = plan::hadamard_factors(plan::hadamard_n(s));
  const std::int64_t head_dim = d.desc.x.shape.back();
  std::string text = fmt::format("hadamard plan (n = {} = {} x {}, group {} x dhead {}{}, scale {})\n",
                                 plan::hadamard_n(s), f.base, f.pow2, d.desc.group, head_dim,
                                 s.group != d.desc.group ? ", heads back to back: one run per row" : "", *d.desc.scale);
  text += fmt::format("  x:        {}\n  y:        {}{}\n", ops::tensor_text(d.desc.x), ops::tensor_text(*d.desc.y),
                      s.inplace ? " (in place)" : "");
  if (d.desc.check_pointers) text += "  pointers: checked at each launch (device, allocation bounds)\n";
  text += fmt::format("  rows:     {} (head groups), over {} run-time dims\n", d.args.rows, s.row_dims);
  text += fmt::format("  launch:   grid {} x block {} ({} thread(s) per row, {} row(s) per block), shared memory {} "
                      "bytes{}\n",
                      plan.dims.grid[0], s.threads_per_row * s.rows_per_block, s.threads_per_row, s.rows_per_block,
                      plan::hadamard_shared_bytes(s), d.empty ? " (empty: nothing to launch)" : "");
  text += fmt::format("  spec:     {}-value accesses, {} values per thread, {}-bit offsets\n", s.vec,
                      plan::hadamard_n(s) / s.threads_per_row, s.wide_index ? 64 : 32);
  text += ops::kernels_text(plan.programs(), 12);
  text += fmt::format("  manifest: {}\n", plan.manifest);
  return text;
}

std::string json(const HadamardPlanImpl& plan) {
  const plan::HadamardPlanData& d = plan.data;
  const auto tensor = ops::tensor_json;
  const std::string kernels = ops::kernels_json(plan.programs());
  return fmt::format(
      R"({{"op": "hadamard", "n": {}, "x": {}, "y": {}, "scale": {}, "spec": {{{}, "check_pointers": {}}}, )"
      R"("rows": {}, "launch": {{"grid": {}, "block": {}, "shared_bytes": {}, "empty": {}}}, "kernels": [{}], )"
      R"("manifest": "{}"}})",
      plan::hadamard_n(d.spec), tensor(d.desc.x), tensor(*d.desc.y), *d.desc.scale, spec_json_members(d.spec),
      d.desc.check_pointers, d.args.rows, plan.dims.grid[0], d.spec.threads_per_row * d.spec.rows_per_block,
      plan::hadamard_shared_bytes(d.spec), d.empty, kernels, plan.manifest);
}

}  // namespace detail

HadamardPlan plan_hadamard(const HadamardDesc& desc) {
  HadamardPlan plan;
  plan.impl_ = detail::make_hadamard_plan(desc, {});
  if (jit::recording()) jit::record_manifest_line(plan.impl_->manifest, plan.impl_->kernel_keys());
  return plan;
}

const detail::HadamardPlanImpl& HadamardPlan::impl() const {
  if (!impl_) fail(ErrorCode::invalid_argument, "this HadamardPlan is empty; create it with plan_hadamard");
  return *impl_;
}

void HadamardPlan::launch(const HadamardPointers& pointers, void* stream) const {
  const detail::HadamardPlanImpl& plan = impl();
  if (plan.data.empty) return;
  plan::HadamardKernelArgs args = plan.data.args;
  detail::bind_pointers(plan, pointers, args);
  const std::size_t vector_bytes = static_cast<std::size_t>(plan.data.spec.vec) * dtype_size(plan.data.spec.data);
  const bool vector_aligned = detail::aligned(args.x, vector_bytes) && detail::aligned(args.y, vector_bytes);
  const bool scalar = !vector_aligned && plan.scalar_kernel != nullptr;
  const jit::StreamContext context(stream);
  if (plan.data.desc.check_pointers)
    for (const jit::PointerUse& use : {jit::PointerUse{"pointers.x", args.x, plan.x_range},
                                       jit::PointerUse{"pointers.y", args.y, plan.y_range}})
      jit::check_pointer(use, context.device());
  void* params[] = {&args};
  if (scalar) return plan.scalar_kernel->launch(context, plan.scalar_dims, stream, params);
  plan.kernel->launch(context, plan.dims, stream, params);
}

std::string HadamardPlan::describe() const { return detail::describe(impl()); }
std::string HadamardPlan::json() const { return detail::json(impl()); }
std::string HadamardPlan::manifest_line() const { return impl().manifest; }

void hadamard(const HadamardDesc& desc, const HadamardPointers& pointers, void* stream) {
  static PlanCache<HadamardPlan> plans;
  auto tensor = [](const std::optional<TensorDesc>& t) {
    return t ? fmt::format("{}:{}:{}", dtype_name(t->dtype), fmt::join(t->shape, ","), fmt::join(t->strides, ","))
             : std::string("-");
  };
  const std::string key = fmt::format("{}|{}|{}|{}|{}{}", tensor(desc.x), tensor(desc.y), desc.group,
                                      desc.scale ? fmt::format("{:a}", *desc.scale) : "-", desc.inplace ? 'i' : '-',
                                      desc.check_pointers ? 'p' : '-');
  std::optional<HadamardPlan> plan = plans.find(key);
  if (!plan) {
    plan = plan_hadamard(desc);
    plans.insert(key, *plan);
  }
  plan->launch(pointers, stream);
}

bool hadamard_size_supported(std::int64_t n) noexcept { return plan::hadamard_factors(n).base != 0; }

std::vector<std::int8_t> hadamard_matrix(std::int64_t n) {
  const plan::HadamardFactors f = plan::hadamard_factors(n);
  if (f.base == 0)
    invalid_argument("n = {} is not a supported Hadamard size: a power of two from 2 to 32768, or 12, 20 or 28 times "
                     "a power of two (up to 12288, 20480 and 28672)",
                     n);
  std::vector<std::int8_t> h(static_cast<std::size_t>(n * n));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      h[static_cast<std::size_t>(i * n + j)] = static_cast<std::int8_t>(plan::hadamard_sign(f, i, j));
  return h;
}

}  // namespace shapejit
