// Record mode: SHAPEJIT_RECORD=FILE appends each planned kernel's manifest line once.
#pragma once

#include <string>

namespace shapejit::jit {

/// Appends `line` to $SHAPEJIT_RECORD unless this process or the file already has it.
/// Safe across threads and processes (an flock around check-and-append). Never throws; a file
/// that cannot be written is warned about once.
void record_manifest_line(const std::string& line);

}  // namespace shapejit::jit
