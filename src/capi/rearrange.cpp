// The rearrange C API: thin wrappers; no exception crosses this line.
#include "shapejit/rearrange.h"

#include <memory>
#include <mutex>
#include <string>

#include "capi/guard.hpp"
#include "core/errors.hpp"
#include "shapejit/rearrange.hpp"

struct sj_rearrange_plan_t {
  shapejit::RearrangePlan plan;
  std::once_flag described;  // the description is built on first request
  std::string description;
};

namespace {

sj_rearrange_plan_t& checked(sj_rearrange_plan plan) {
  if (plan == nullptr) shapejit::invalid_argument("plan is NULL: create it with sj_rearrange_plan_create");
  return *plan;
}

}  // namespace

extern "C" {

sj_status sj_rearrange_plan_create(sj_rearrange_plan* plan, const sj_tensor_desc* dst, const sj_tensor_desc* src,
                                   const sj_rearrange_options* options) {
  if (plan != nullptr) *plan = nullptr;
  return shapejit::capi::guarded([&] {
    if (plan == nullptr) shapejit::invalid_argument("plan is NULL: pass the address of an sj_rearrange_plan");
    shapejit::RearrangeOptions opts;
    if (options != nullptr) {
      opts.exact = options->exact != 0;
      opts.assumed_alignment = options->assumed_alignment;
      opts.check_pointers = options->check_pointers != 0;
      opts.tune = options->tune != 0;
    }
    auto created = std::make_unique<sj_rearrange_plan_t>();
    created->plan = shapejit::plan_rearrange(shapejit::capi::to_desc(dst, "dst"), shapejit::capi::to_desc(src, "src"),
                                             opts);
    *plan = created.release();
  });
}

sj_status sj_rearrange_plan_launch(sj_rearrange_plan plan, void* dst, const void* src, void* stream) {
  return shapejit::capi::guarded([&] { checked(plan).plan.launch(dst, src, stream); });
}

const char* sj_rearrange_plan_describe(sj_rearrange_plan plan) {
  if (plan == nullptr) return nullptr;
  const sj_status status = shapejit::capi::guarded(
      [&] { std::call_once(plan->described, [&] { plan->description = plan->plan.describe(); }); });
  return status == SJ_OK ? plan->description.c_str() : nullptr;
}

sj_status sj_rearrange_plan_destroy(sj_rearrange_plan plan) {
  return shapejit::capi::guarded([&] { delete plan; });
}

sj_status sj_rearrange(void* dst, const sj_tensor_desc* dst_desc, const void* src, const sj_tensor_desc* src_desc,
                       void* stream) {
  return shapejit::capi::guarded([&] {
    shapejit::rearrange(dst, shapejit::capi::to_desc(dst_desc, "dst_desc"), src,
                        shapejit::capi::to_desc(src_desc, "src_desc"), stream);
  });
}

}  // extern "C"
