// The rope C API: converts C descriptors to RopeDesc and runs the C++ API inside capi::guarded.
#include "capi/guard.hpp"
#include "core/errors.hpp"
#include "shapejit/rope.h"
#include "shapejit/rope.hpp"

struct sj_rope_plan_s {
  shapejit::RopePlan plan;
};

namespace shapejit::capi {
namespace {

std::optional<TensorDesc> optional_desc(const sj_tensor_desc& desc, const char* argument) {
  if (desc.rank == 0) return std::nullopt;
  return to_desc(&desc, argument);
}

/// `q` as a RopeQuantize; throws invalid_argument naming `field` for a value outside the enum.
RopeQuantize to_quantize(sj_rope_quantize q, const char* field) {
  switch (q) {
    case SJ_QUANTIZE_NONE: return RopeQuantize::none;
    case SJ_QUANTIZE_INT8: return RopeQuantize::int8;
    case SJ_QUANTIZE_FP8_E4M3: return RopeQuantize::fp8_e4m3;
  }
  invalid_argument("{} is {}; use SJ_QUANTIZE_NONE, SJ_QUANTIZE_INT8 or SJ_QUANTIZE_FP8_E4M3", field,
                   static_cast<int>(q));
}

RopeDesc to_rope_desc(const sj_rope_desc* desc) {
  if (desc == nullptr) invalid_argument("desc is NULL");
  if (desc->style != SJ_ROPE_GPTJ && desc->style != SJ_ROPE_NEOX)
    invalid_argument("desc.style is {}; use SJ_ROPE_GPTJ or SJ_ROPE_NEOX", static_cast<int>(desc->style));
  if (desc->hadamard_order != SJ_ROPE_THEN_HADAMARD && desc->hadamard_order != SJ_HADAMARD_THEN_ROPE)
    invalid_argument("desc.hadamard_order is {}; use SJ_ROPE_THEN_HADAMARD or SJ_HADAMARD_THEN_ROPE",
                     static_cast<int>(desc->hadamard_order));
  RopeDesc out;
  out.style = desc->style == SJ_ROPE_GPTJ ? RopeStyle::gptj : RopeStyle::neox;
  out.q_quantize = to_quantize(desc->q_quantize, "desc.q_quantize");
  out.k_quantize = to_quantize(desc->k_quantize, "desc.k_quantize");
  out.x = to_desc(&desc->x, "desc.x");
  out.y = optional_desc(desc->y, "desc.y");
  out.k = optional_desc(desc->k, "desc.k");
  out.k_out = optional_desc(desc->k_out, "desc.k_out");
  out.table = to_desc(&desc->table, "desc.table");
  out.positions = optional_desc(desc->positions, "desc.positions");
  out.rotary_dim = desc->rotary_dim;
  out.inplace = desc->inplace != 0;
  out.inverse = desc->inverse != 0;
  out.checked = desc->checked != 0;
  out.check_pointers = desc->check_pointers != 0;
  out.hadamard_group = desc->hadamard_group;
  if (desc->has_hadamard_scale) out.hadamard_scale = desc->hadamard_scale;
  out.hadamard_order = desc->hadamard_order == SJ_HADAMARD_THEN_ROPE ? HadamardOrder::hadamard_then_rope
                                                                      : HadamardOrder::rope_then_hadamard;
  out.q_scale = optional_desc(desc->q_scale, "desc.q_scale");
  out.k_scale = optional_desc(desc->k_scale, "desc.k_scale");
  switch (desc->axis_rule) {
    case SJ_AXES_NONE: break;
    case SJ_AXES_SECTIONS: out.axis_rule = RopeAxisRule::sections; break;
    case SJ_AXES_INTERLEAVED: out.axis_rule = RopeAxisRule::interleaved; break;
    case SJ_AXES_BLOCKS: out.axis_rule = RopeAxisRule::blocks; break;
    default:
      invalid_argument("desc.axis_rule is {}; use SJ_AXES_NONE, SJ_AXES_SECTIONS, SJ_AXES_INTERLEAVED or SJ_AXES_BLOCKS",
                       static_cast<int>(desc->axis_rule));
  }
  if (desc->axis_count < 0 || desc->axis_count > 4)
    invalid_argument("desc.axis_count is {}; give 0 to 4 sections", desc->axis_count);
  if (desc->axis_count > 0 && desc->axis_sections == nullptr)
    invalid_argument("desc.axis_count is {} but desc.axis_sections is NULL", desc->axis_count);
  out.axis_sections.assign(desc->axis_sections, desc->axis_sections + desc->axis_count);
  switch (desc->cache_layout) {
    case SJ_KV_CACHE_NONE: break;
    case SJ_KV_CACHE_NHD: out.cache_layout = KvCacheLayout::nhd; break;
    case SJ_KV_CACHE_HND: out.cache_layout = KvCacheLayout::hnd; break;
    default:
      invalid_argument("desc.cache_layout is {}; use SJ_KV_CACHE_NONE, SJ_KV_CACHE_NHD or SJ_KV_CACHE_HND",
                       static_cast<int>(desc->cache_layout));
  }
  out.v = optional_desc(desc->v, "desc.v");
  out.k_cache = optional_desc(desc->k_cache, "desc.k_cache");
  out.v_cache = optional_desc(desc->v_cache, "desc.v_cache");
  out.slots = optional_desc(desc->slots, "desc.slots");
  out.cache_quantize = to_quantize(desc->cache_quantize, "desc.cache_quantize");
  return out;
}

RopePointers to_pointers(const sj_rope_pointers* p) {
  if (p == nullptr) invalid_argument("pointers is NULL");
  return RopePointers{p->x,       p->y,       p->k,       p->k_out,   p->cos,   p->sin,           p->positions,
                      p->offset,  p->q_scale, p->k_scale, p->v,       p->k_cache, p->v_cache, p->slots,
                      p->k_cache_scale, p->v_cache_scale};
}

}  // namespace
}  // namespace shapejit::capi

extern "C" {

sj_status sj_rope_plan_create(sj_rope_plan* plan, const sj_rope_desc* desc) {
  return shapejit::capi::guarded([&] {
    if (plan == nullptr) shapejit::invalid_argument("plan (the output) is NULL");
    *plan = nullptr;
    *plan = new sj_rope_plan_s{shapejit::plan_rope(shapejit::capi::to_rope_desc(desc))};
  });
}

sj_status sj_rope_plan_launch(sj_rope_plan plan, const sj_rope_pointers* pointers, void* stream) {
  return shapejit::capi::guarded([&] {
    if (plan == nullptr) shapejit::invalid_argument("plan is NULL; create it with sj_rope_plan_create");
    plan->plan.launch(shapejit::capi::to_pointers(pointers), stream);
  });
}

sj_status sj_rope_plan_destroy(sj_rope_plan plan) {
  return shapejit::capi::guarded([&] { delete plan; });
}

sj_status sj_rope(const sj_rope_desc* desc, const sj_rope_pointers* pointers, void* stream) {
  return shapejit::capi::guarded(
      [&] { shapejit::rope(shapejit::capi::to_rope_desc(desc), shapejit::capi::to_pointers(pointers), stream); });
}

}  // extern "C"
