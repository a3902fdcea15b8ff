// Measured planning for rearrange: time the candidate variants on scratch buffers on the current
// device, launch the fastest, and remember the choice in a tuning record.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "ops/rearrange/plan.hpp"

namespace shapejit::plan {

struct TuneRequest {
  bool reuse_records = true;  ///< take the choice of an existing record instead of measuring
  /// Where to write the record: a directory of its own, or (unset) the user cache.
  std::optional<std::filesystem::path> record_root;
};

/// Chooses the variant `plan` launches on pointers aligned as it assumes, from its record or by
/// measuring its tuning_candidates, and says how in plan.tuning. Keeps the default, saying why,
/// when there is nothing to choose, no GPU, no record in offline mode, or a failed measurement.
void tune_plan(RearrangePlanData& plan, const TuneRequest& request = {});

}  // namespace shapejit::plan
