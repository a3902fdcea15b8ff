// Process-wide JIT counters behind shapejit::counters().
#pragma once

namespace shapejit::jit {

void record_compile(double milliseconds) noexcept;
void record_load(double milliseconds) noexcept;
void record_memory_hit() noexcept;
void record_disk_hit() noexcept;
void record_bad_entry() noexcept;

}  // namespace shapejit::jit
