// A planned hadamard: the planner's output, its kernels and the text forms of the plan.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/byte_range.hpp"
#include "jit/launch.hpp"
#include "ops/hadamard/plan.hpp"

namespace shapejit::detail {

struct HadamardPlanImpl {
  /// Registers the kernels of `data`: the planned one and, when it uses vector accesses, the scalar
  /// variant launched on less aligned pointers.
  explicit HadamardPlanImpl(plan::HadamardPlanData data);

  plan::HadamardPlanData data;
  std::string manifest;
  ByteRange x_range, y_range;  ///< the bytes x and y reach, for the launch's overlap and pointer checks
  jit::LaunchDims dims;         ///< the planned kernel's launch
  jit::LaunchDims scalar_dims;  ///< the scalar variant's launch
  const jit::KernelHandle* kernel = nullptr;
  const jit::KernelHandle* scalar_kernel = nullptr;  ///< nullptr when the plan's accesses are scalar

  /// Every program a launch of this plan may run (what a precompile must build).
  std::vector<const jit::Program*> programs() const;
  /// Their specialization keys, in the same order.
  std::vector<SpecKey> kernel_keys() const;
};

/// Plans `desc` under manifest-line overrides (what `shapejit plan hadamard` does); plan_hadamard is
/// this with no overrides, plus record mode.
std::shared_ptr<const HadamardPlanImpl> make_hadamard_plan(const HadamardDesc& desc,
                                                           const plan::HadamardOverrides& overrides);

/// HadamardPlan::describe(), json() of a plan.
std::string describe(const HadamardPlanImpl& plan);
std::string json(const HadamardPlanImpl& plan);

}  // namespace shapejit::detail
