// shapejit C++ API: rearrange, an arbitrary-rank strided copy (permute, transpose, slice, reversal,
// broadcast-expand), for any element type or opaque element of 1 to 64 bytes.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "shapejit/core.hpp"

namespace shapejit {

/// The most dimensions a rearrange accepts.
inline constexpr int kMaxRearrangeRank = 64;

struct RearrangeOptions {
  /// Bake every extent and stride into the kernel ("exact" mode) instead of passing them at launch:
  /// one compile per shape, for fixed deployment shapes.
  bool exact = false;
  /// Alignment in bytes the plan assumes for both base pointers (a power of two, at most 16).
  /// Launching with less aligned pointers is safe: a narrower variant is used.
  std::size_t assumed_alignment = 16;
  /// Before each launch, verify that dst and src are device memory of the stream's device (or
  /// managed memory) and that every byte each view reaches lies inside its pointer's allocation;
  /// a violation throws invalid_argument naming the argument and nothing is launched. Costs one
  /// driver query per pointer (see README); off by default.
  bool check_pointers = false;
  /// Measured planning: time the candidate kernels on scratch buffers on the current device,
  /// launch the fastest, and remember the choice in a tuning record in the cache directory (keyed
  /// by the plan's manifest line, the device name and the library version). A later plan with
  /// `tune` finds the record, in deployment caches too, and measures nothing. Costs the candidates'
  /// compiles and, on tensors of 1e8 elements, 0.1-0.5 s of measuring per new plan; without a GPU,
  /// or offline with no record, the default plan is kept. Also on for every plan with SHAPEJIT_TUNE=1.
  bool tune = false;
};

namespace detail {
struct RearrangePlanImpl;
}

/// A planned rearrange: cheap to copy, safe to launch from several threads at once. It is planned
/// for pointers aligned as RearrangeOptions::assumed_alignment says; the first launch on less
/// aligned pointers plans their variant once (a few microseconds), later launches reuse it.
class RearrangePlan {
 public:
  RearrangePlan() = default;

  /// Copies every logical element of `src` into `dst` on `stream` (a CUstream/cudaStream_t;
  /// nullptr is the default stream). The copy runs on the stream's device, in the stream's context,
  /// whatever the calling thread's current device (the default streams: the current context's
  /// device). Checks the pointers' alignment, their overlap, with check_pointers their memory, and
  /// the launch.
  void launch(void* dst, const void* src, void* stream = nullptr) const;

  /// Canonical form, kernel family and parameters, launch shape and specialization key.
  std::string describe() const;
  /// describe() as a JSON document.
  std::string json() const;
  /// The `shapejit plan` manifest line that reproduces this plan's kernels.
  std::string manifest_line() const;

  /// Internal: the plan's data (planner output and kernels).
  const detail::RearrangePlanImpl& impl() const;

 private:
  friend RearrangePlan plan_rearrange(const TensorDesc&, const TensorDesc&, const RearrangeOptions&);
  std::shared_ptr<const detail::RearrangePlanImpl> impl_;
};

/// Plans copying `src` into `dst`: same shape and element size, each with its own signed strides
/// (src strides may be 0 to broadcast). Throws shapejit::Error (invalid_argument) for a shape or
/// element-size mismatch, a destination whose elements overlap, a rank over kMaxRearrangeRank, or
/// extents whose byte span overflows 64 bits. Overlap between src and dst memory is checked at launch.
RearrangePlan plan_rearrange(const TensorDesc& dst, const TensorDesc& src, const RearrangeOptions& options = {});

/// One-shot rearrange through an internal plan cache keyed by both descriptors.
void rearrange(void* dst, const TensorDesc& dst_desc, const void* src, const TensorDesc& src_desc,
               void* stream = nullptr);

/// A view of `src` permuted so that output dimension i is source dimension perm[i] (strides are
/// permuted with it): plan_rearrange(contiguous(permuted shape), permuted(src, perm)) is a permute.
TensorDesc permuted(const TensorDesc& src, const std::vector<int>& perm);

}  // namespace shapejit
