// A rearrange plan as data: the validated descriptors, the canonical form, and one planned variant
// per base-pointer alignment (launch picks the one the real pointers allow; a plan object plans
// the less aligned ones at their first launch).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ops/rearrange/canonical.hpp"
#include "ops/rearrange/checks.hpp"
#include "ops/rearrange/spec.hpp"
#include "jit/launch.hpp"
#include "shapejit/rearrange.hpp"

namespace shapejit::plan {

/// Alignment levels 1, 2, 4, 8, 16 bytes, indexed by their log2.
inline constexpr int kAlignmentLevels = 5;
/// At most one variant per level, and one more that measured planning may add.
inline constexpr int kMaxVariants = kAlignmentLevels + 1;
inline constexpr int kUnplanned = -1;

/// Which alignment levels plan_rearrange_data plans: all of them, or only those of pointers aligned
/// as the plan assumes (a plan object plans the others at the first launch that needs them).
enum class PlannedLevels { every, assumed };

struct RearrangePlanData {
  TensorDesc dst, src;
  RearrangeOptions options;
  std::int64_t elem_bytes = 1;
  bool empty = false;       ///< a zero extent: nothing is copied or launched
  CanonicalForm elements;   ///< canonical form in elements (offsets included)
  ByteRange src_range, dst_range;  ///< bytes each side touches, relative to its base pointer
  bool same_layout = false;  ///< equal strides: the same pointer on both sides is a no-op
  std::vector<RearrangeVariant> variants;  ///< distinct variants, the widest alignment first
  /// Index into variants by log2(alignment); kUnplanned for a level not planned yet.
  std::array<int, kAlignmentLevels> variant_for_level{};
  std::string tuning;  ///< with tune: how the aligned variant was chosen (record, measurement, or why not)
};

/// Validates and plans copying `src` into `dst` (throws shapejit::Error on bad input).
RearrangePlanData plan_rearrange_data(const TensorDesc& dst, const TensorDesc& src, const RearrangeOptions& options,
                                      PlannedLevels levels = PlannedLevels::every);

/// The alignment level of base pointers whose addresses OR'ed together are `address_bits` (their
/// common alignment is its lowest set bit; levels above the assumed alignment share its variant).
int alignment_level(std::uintptr_t address_bits);

/// Plans `level` if it is not planned yet (a variant equal to a planned one is shared) and returns
/// its index into plan.variants.
int plan_level(RearrangePlanData& plan, int level);

/// `plan` with every level planned, the assumed alignment's variant first, the others in order of
/// decreasing alignment (what describe, precompile and record show of a plan object).
RearrangePlanData with_every_level(const RearrangePlanData& plan);

/// The variant to launch for base pointers whose addresses OR'ed together are `address_bits`; its
/// level must be planned.
const RearrangeVariant& variant_for_pointers(const RearrangePlanData& plan, std::uintptr_t address_bits);

/// The variants measured planning times for pointers aligned as the plan assumes: the planned one
/// first, then candidate_variants of its units, then the variants planned for less aligned
/// pointers (smaller units), no two alike, and last, unless the plan is exact or a copy, the planned
/// one with extents and strides baked in.
std::vector<RearrangeVariant> tuning_candidates(const RearrangePlanData& plan);

/// Makes `chosen` (one of tuning_candidates) the variant launched on pointers aligned as the plan
/// assumes.
void choose_variant(RearrangePlanData& plan, const RearrangeVariant& chosen);

/// A candidate's name in tuning records: its kernel label and the tiles each block walks.
std::string candidate_name(const RearrangeVariant& v);

/// Launch shape of a kernel variant.
jit::LaunchDims launch_dims(const RearrangeVariant& v);

/// The `shapejit plan` line (without "shapejit plan") that reproduces every kernel of the plan: its
/// canonical form in elements, so every view with that form records the same line. "" when the
/// plan launches no kernel.
std::string manifest_line(const RearrangePlanData& plan);

/// Human-readable plan: canonical form, each variant's family, parameters, launch shape and key.
std::string describe(const RearrangePlanData& plan);

/// describe() as a JSON document.
std::string describe_json(const RearrangePlanData& plan);

}  // namespace shapejit::plan

namespace shapejit::detail {

/// What a RearrangePlan shares between its copies: the plan data, each level's variant, planned for
/// the assumed alignment at creation and for less aligned pointers at the first launch that has
/// them, and each variant's kernel, resolved at its first launch.
struct RearrangePlanImpl {
  /// Grows only under `planning`, within its reserved kMaxVariants, so variants never move.
  mutable plan::RearrangePlanData data;
  mutable std::mutex planning;
  /// Published index into data.variants per level, read without the lock; kUnplanned until planned.
  mutable std::array<std::atomic<int>, plan::kAlignmentLevels> level_variant;
  const plan::RearrangeVariant* variants = nullptr;  ///< data.variants.data()
  /// The plan's manifest line, rendered when first asked for (a kernel's first compile, record mode,
  /// RearrangePlan::manifest_line), not at planning.
  mutable std::once_flag manifest_once;
  mutable std::string manifest;
  std::unique_ptr<std::atomic<const jit::KernelHandle*>[]> kernels;  ///< kMaxVariants
};

}  // namespace shapejit::detail
