// Host test support for rearrange: a naive strided-copy reference, and a CPU executor that runs a
// planned variant's index math exactly as its template does (tiles, threads, micro-tiles, shared
// memory positions, bounds checks), from the same RearrangeKernelArgs the kernel receives.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/rearrange/plan.hpp"

namespace shapejit::test {

/// Copies every logical element of `src` (at `src_base`) into `dst` (at `dst_base`), one at a time.
void reference_rearrange(std::uint8_t* dst_base, const TensorDesc& dst, const std::uint8_t* src_base,
                         const TensorDesc& src);

/// Runs `variant` on the CPU. `dst` and `src` are the pointers the kernel starts from (the base
/// pointers plus the plan's flip offsets). Throws std::logic_error when the simulated kernel would
/// touch shared memory out of range or misaligned.
void execute_variant(const plan::RearrangeVariant& variant, std::uint8_t* dst, const std::uint8_t* src);

/// Unit offset in shared memory where a transpose or packed kernel stages tile element (a, b), as
/// its template's sj_smem_pos computes it.
int tiled_smem_pos(const plan::RearrangeSpec& s, int a, int b);
/// The shared-memory place of the unit a tiled kernel's linear stores read at tile offset l.
int tiled_rotated(const plan::RearrangeSpec& s, int l);

/// Whether a runs spec's two runs end on one tile dim (tiled alike, along B only).
inline bool runs_share_their_end(const plan::RearrangeSpec& s) {
  return s.family == plan::RearrangeFamily::runs &&
         s.dst_run_dims - 1 == ((s.src_order >> (4 * (s.src_run_dims - 1))) & 15);
}

/// Launches the plan on the CPU as RearrangePlan::launch does on the GPU, for base pointers
/// whose addresses OR'ed together are `address_bits` (this picks the alignment variant).
void execute_plan(const plan::RearrangePlanData& plan, std::uint8_t* dst, const std::uint8_t* src,
                  std::uintptr_t address_bits);

}  // namespace shapejit::test
