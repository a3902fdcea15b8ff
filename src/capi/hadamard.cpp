// The hadamard C API: converts C descriptors to HadamardDesc and runs the C++ API inside capi::guarded.
#include "capi/guard.hpp"
#include "core/errors.hpp"
#include "shapejit/hadamard.h"
#include "shapejit/hadamard.hpp"

struct sj_hadamard_plan_s {
  shapejit::HadamardPlan plan;
};

namespace shapejit::capi {
namespace {

HadamardDesc to_hadamard_desc(const sj_hadamard_desc* desc) {
  if (desc == nullptr) invalid_argument("desc is NULL");
  HadamardDesc out;
  out.x = to_desc(&desc->x, "desc.x");
  if (desc->y.rank != 0) out.y = to_desc(&desc->y, "desc.y");
  out.group = desc->group;
  if (desc->has_scale) out.scale = desc->scale;
  out.inplace = desc->inplace != 0;
  out.check_pointers = desc->check_pointers != 0;
  return out;
}

HadamardPointers to_pointers(const sj_hadamard_pointers* p) {
  if (p == nullptr) invalid_argument("pointers is NULL");
  return HadamardPointers{p->x, p->y};
}

}  // namespace
}  // namespace shapejit::capi

extern "C" {

sj_status sj_hadamard_plan_create(sj_hadamard_plan* plan, const sj_hadamard_desc* desc) {
  return shapejit::capi::guarded([&] {
    if (plan == nullptr) shapejit::invalid_argument("plan (the output) is NULL");
    *plan = nullptr;
    *plan = new sj_hadamard_plan_s{shapejit::plan_hadamard(shapejit::capi::to_hadamard_desc(desc))};
  });
}

sj_status sj_hadamard_plan_launch(sj_hadamard_plan plan, const sj_hadamard_pointers* pointers, void* stream) {
  return shapejit::capi::guarded([&] {
    if (plan == nullptr) shapejit::invalid_argument("plan is NULL; create it with sj_hadamard_plan_create");
    plan->plan.launch(shapejit::capi::to_pointers(pointers), stream);
  });
}

sj_status sj_hadamard_plan_destroy(sj_hadamard_plan plan) {
  return shapejit::capi::guarded([&] { delete plan; });
}

sj_status sj_hadamard(const sj_hadamard_desc* desc, const sj_hadamard_pointers* pointers, void* stream) {
  return shapejit::capi::guarded([&] {
    shapejit::hadamard(shapejit::capi::to_hadamard_desc(desc), shapejit::capi::to_pointers(pointers), stream);
  });
}

}  // extern "C"
