// rearrange entry points: plan objects, launch (alignment variant, overlap and pointer checks) and
// the one-shot call.
#include "shapejit/rearrange.hpp"

#include <fmt/format.h>

#include <cstring>
#include <optional>

#include "core/errors.hpp"
#include "core/plan_cache.hpp"
#include "jit/driver.hpp"
#include "jit/kernel_registry.hpp"
#include "jit/launch.hpp"
#include "jit/pointer_check.hpp"
#include "jit/record.hpp"
#include "ops/rearrange/codegen.hpp"
#include "ops/rearrange/plan.hpp"
#include "ops/rearrange/tune.hpp"

namespace shapejit {
namespace {

const std::string& manifest_of(const detail::RearrangePlanImpl& impl) {
  std::call_once(impl.manifest_once, [&] {
    const std::lock_guard lock(impl.planning);  // launches may be planning other levels
    impl.manifest = plan::manifest_line(impl.data);
  });
  return impl.manifest;
}

// Resolved at the variant's first launch, so that planning never renders source.
const jit::KernelHandle& kernel_of(const detail::RearrangePlanImpl& impl, std::size_t index) {
  std::atomic<const jit::KernelHandle*>& slot = impl.kernels[index];
  if (const jit::KernelHandle* k = slot.load(std::memory_order_acquire)) return *k;
  const plan::RearrangeVariant& variant = impl.variants[index];
  const jit::KernelHandle* k = &jit::registered_kernel(plan::rearrange_key(variant.spec, variant.args),
                                                       [&] { return codegen::rearrange_program(variant, manifest_of(impl)); });
  slot.store(k, std::memory_order_release);
  return *k;
}

// The variant for pointers at alignment `level`: planned at the first launch that needs it.
std::size_t variant_index(const detail::RearrangePlanImpl& impl, int level) {
  const int published = impl.level_variant[static_cast<std::size_t>(level)].load(std::memory_order_acquire);
  if (published != plan::kUnplanned) return static_cast<std::size_t>(published);
  const std::lock_guard lock(impl.planning);
  const int index = plan::plan_level(impl.data, level);
  impl.level_variant[static_cast<std::size_t>(level)].store(index, std::memory_order_release);
  return static_cast<std::size_t>(index);
}

plan::RearrangePlanData every_level(const detail::RearrangePlanImpl& impl) {
  const std::lock_guard lock(impl.planning);
  return plan::with_every_level(impl.data);
}

std::string cache_key(const TensorDesc& dst, const TensorDesc& src) {
  std::string key;
  auto put = [&key](const std::vector<std::int64_t>& values) {
    const std::size_t n = values.size();
    key.append(reinterpret_cast<const char*>(&n), sizeof n);
    key.append(reinterpret_cast<const char*>(values.data()), n * sizeof(std::int64_t));
  };
  put(dst.shape);
  put(src.shape);
  put(dst.effective_strides());
  put(src.effective_strides());
  const std::size_t sizes[2] = {dst.element_size(), src.element_size()};
  key.append(reinterpret_cast<const char*>(sizes), sizeof sizes);
  return key;
}

}  // namespace

const detail::RearrangePlanImpl& RearrangePlan::impl() const {
  if (!impl_) invalid_argument("the rearrange plan is empty: create it with shapejit::plan_rearrange");
  return *impl_;
}

RearrangePlan plan_rearrange(const TensorDesc& dst, const TensorDesc& src, const RearrangeOptions& options) {
  auto impl = std::make_shared<detail::RearrangePlanImpl>();
  impl->data = plan::plan_rearrange_data(dst, src, options, plan::PlannedLevels::assumed);
  if (impl->data.options.tune) plan::tune_plan(impl->data);
  impl->variants = impl->data.variants.data();
  for (int level = 0; level < plan::kAlignmentLevels; ++level)
    impl->level_variant[static_cast<std::size_t>(level)].store(impl->data.variant_for_level[static_cast<std::size_t>(level)]);
  impl->kernels = std::make_unique<std::atomic<const jit::KernelHandle*>[]>(plan::kMaxVariants);
  if (jit::recording()) {
    std::vector<SpecKey> kernels;
    for (const plan::RearrangeVariant& v : plan::with_every_level(impl->data).variants)
      if (v.spec.family != plan::RearrangeFamily::copy) kernels.push_back(plan::rearrange_key(v.spec, v.args));
    jit::record_manifest_line(manifest_of(*impl), kernels);
  }
  RearrangePlan plan;
  plan.impl_ = std::move(impl);
  return plan;
}

void RearrangePlan::launch(void* dst, const void* src, void* stream) const {
  const detail::RearrangePlanImpl& im = impl();
  const plan::RearrangePlanData& p = im.data;
  if (p.empty) return;
  if (dst == nullptr) invalid_argument("dst is NULL: give the destination's device pointer");
  if (src == nullptr) invalid_argument("src is NULL: give the source's device pointer");
  const auto dst_address = reinterpret_cast<std::uintptr_t>(dst);
  const auto src_address = reinterpret_cast<std::uintptr_t>(src);
  if (ranges_overlap(dst_address, p.dst_range, src_address, p.src_range)) {
    if (dst == src && p.same_layout) return;
    invalid_argument("src and dst memory overlap (src bytes [{:#x}, {:#x}), dst bytes [{:#x}, {:#x})): rearrange "
                     "needs separate buffers, or the same pointer with the same layout (a no-op)",
                     src_address + p.src_range.lo, src_address + p.src_range.hi, dst_address + p.dst_range.lo,
                     dst_address + p.dst_range.hi);
  }
  const std::size_t index = variant_index(im, plan::alignment_level(dst_address | src_address));
  const plan::RearrangeVariant& v = im.variants[index];
  char* d = static_cast<char*>(dst) + p.elements.dst_offset * p.elem_bytes;
  const char* s = static_cast<const char*>(src) + p.elements.src_offset * p.elem_bytes;
  const jit::StreamContext context(stream);
  if (p.options.check_pointers) {
    jit::check_pointer({"dst", dst, p.dst_range}, context.device());
    jit::check_pointer({"src", src, p.src_range}, context.device());
  }
  if (v.spec.family == plan::RearrangeFamily::copy) {
    jit::check(jit::driver().cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(d), reinterpret_cast<CUdeviceptr>(s),
                                               static_cast<std::size_t>(v.copy_bytes), static_cast<CUstream>(stream)),
               "cuMemcpyDtoDAsync (rearrange copy)");
    return;
  }
  const jit::LaunchDims dims = plan::launch_dims(v);
  void* args[] = {&d, &s, const_cast<plan::RearrangeKernelArgs*>(&v.args)};
  kernel_of(im, index).launch(context, dims, stream, args);
}

std::string RearrangePlan::describe() const { return plan::describe(every_level(impl())); }

std::string RearrangePlan::json() const { return plan::describe_json(every_level(impl())); }

std::string RearrangePlan::manifest_line() const { return manifest_of(impl()); }

void rearrange(void* dst, const TensorDesc& dst_desc, const void* src, const TensorDesc& src_desc, void* stream) {
  static PlanCache<RearrangePlan> plans;
  const std::string key = cache_key(dst_desc, src_desc);
  std::optional<RearrangePlan> plan = plans.find(key);
  if (!plan) {
    plan = plan_rearrange(dst_desc, src_desc);
    plans.insert(key, *plan);
  }
  plan->launch(dst, src, stream);
}

TensorDesc permuted(const TensorDesc& src, const std::vector<int>& perm) {
  const std::size_t rank = src.shape.size();
  if (perm.size() != rank)
    invalid_argument("perm has {} entries but the tensor has {} dimensions: give a permutation of 0..{}", perm.size(),
                     rank, static_cast<long long>(rank) - 1);
  std::vector<bool> seen(rank, false);
  for (std::size_t i = 0; i < rank; ++i) {
    const int p = perm[i];
    if (p < 0 || static_cast<std::size_t>(p) >= rank || seen[static_cast<std::size_t>(p)])
      invalid_argument("perm[{}] is {}: perm must name each dimension 0..{} exactly once", i, p,
                       static_cast<long long>(rank) - 1);
    seen[static_cast<std::size_t>(p)] = true;
  }
  const auto strides = src.effective_strides();
  if (strides.size() != rank)
    invalid_argument("src.strides has {} values but src.shape has {} dimensions", strides.size(), rank);
  TensorDesc out = src;
  out.strides.resize(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    out.shape[i] = src.shape[static_cast<std::size_t>(perm[i])];
    out.strides[i] = strides[static_cast<std::size_t>(perm[i])];
  }
  return out;
}

}  // namespace shapejit
