// A planned rope: the planner's output, its kernels and the text forms of the plan.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "core/byte_range.hpp"
#include "jit/launch.hpp"
#include "ops/rope/plan.hpp"

namespace shapejit::detail {

struct RopePlanImpl {
  /// Registers the kernels of `data`: the planned one and, when it uses wide accesses, the scalar
  /// variant launched on less aligned pointers.
  explicit RopePlanImpl(plan::RopePlanData data);

  plan::RopePlanData data;
  std::string manifest;
  const jit::KernelHandle* kernel = nullptr;
  const jit::KernelHandle* scalar_kernel = nullptr;  ///< nullptr when the plan has no wide accesses
  /// Quantized plans: the bytes x, k, y, k_out, q_scale and k_scale reach (empty where absent), so
  /// a launch checks overlaps without touching the descriptors.
  std::array<ByteRange, 6> quantized_ranges = {};

  /// Every program a launch of this plan may run (what a precompile must build).
  std::vector<const jit::Program*> programs() const;
  /// Their specialization keys, in the same order.
  std::vector<SpecKey> kernel_keys() const;
};

/// Plans `desc` under manifest-line overrides (what `shapejit plan rope` does); plan_rope is
/// this with no overrides, plus record mode.
std::shared_ptr<const RopePlanImpl> make_rope_plan(const RopeDesc& desc, const plan::RopeOverrides& overrides);

/// RopePlan::describe(), json() of a plan.
std::string describe(const RopePlanImpl& plan);
std::string json(const RopePlanImpl& plan);

}  // namespace shapejit::detail
