// Record mode: SHAPEJIT_RECORD=FILE appends each planned kernel's manifest line once.
#pragma once

#include <string>
#include <vector>

#include "core/spec.hpp"

namespace shapejit::jit {

/// Whether SHAPEJIT_RECORD is set: callers skip building what they would record when it is not.
bool recording() noexcept;

/// Appends `line` to $SHAPEJIT_RECORD unless this process already recorded a line that builds the
/// same `kernels` (their specialization keys), or the file
/// already has the line. So a workload whose shapes vary only in runtime extents records one line
/// per kernel, not one per shape. Safe across threads and processes (an flock around
/// check-and-append). Never throws; a file that cannot be written is warned about once.
void record_manifest_line(const std::string& line, const std::vector<SpecKey>& kernels);

}  // namespace shapejit::jit
