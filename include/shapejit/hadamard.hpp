// shapejit C++ API: hadamard, the grouped-head fast Walsh-Hadamard transform.
//
// x is [..., heads, dhead]; its heads are taken in groups of G consecutive heads, and the n = G *
// dhead values of one group (head-major: value i is head i / dhead of the group, element
// i % dhead) are multiplied by the n x n Hadamard matrix H_n, times `scale`:
//   y[i] = scale * sum_j H_n[i][j] x[j].
// A layout [B, H, S, D] is passed as its [B, S, H, D] view (strides {H*S*D, D, S*D, 1}); the
// KV-cache recipe "[B, H, S, D] -> [B, S, H/G, G*D], transform, back" is then one call with group G.
//
// H_n (see hadamard_matrix): for n = 2^k, Sylvester's matrix (H_1 = [1], H_2m = [[H_m, H_m],
// [H_m, -H_m]]); for n = m * 2^k with m in {12, 20, 28}, the Kronecker product H_m (x) H_(2^k), the
// m-point factor on the outer index (i = a * 2^k + r) as fast-hadamard-transform lays it out, with
// H_m from Paley's second construction (q = 5, 9 and 13). Every H_n is symmetric with H_n H_n = n I,
// so with the default scale 1/sqrt(n) the transform is orthonormal and its own inverse.
// Arithmetic is f32 (f64 for f64 data).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shapejit/core.hpp"

namespace shapejit {

/// What a hadamard call looks like: every shape, stride and dtype, but no pointer.
struct HadamardDesc {
  /// The input: rank 2 to 6, [..., heads, dhead], dtype f16, bf16, f32 or f64, any strides with a
  /// dhead stride of 1 (empty strides: row-major contiguous).
  TensorDesc x;
  /// The output: x's shape and dtype, any strides with a dhead stride of 1 whose groups do not
  /// overlap. std::nullopt: contiguous (x itself for an in-place plan).
  std::optional<TensorDesc> y;
  /// G, the heads transformed together (divides heads); n = G * dhead must be a power of two from 2
  /// to 32768 (16384 for f64), or 12, 20 or 28 times a power of two up to 12288, 20480 and 28672.
  /// A row that spans several warps (power-of-two rows above 2048 values of 2-byte data, from 2048
  /// of f32 and from 1024 of f64; m-point rows from about as long, f32 from 1280 and f64 from 768),
  /// and a 2-byte row of 2048 values in one warp, is exchanged through (n + n/32) * 4 bytes (8 for
  /// f64) of shared memory per block, and f32 and f64 blocks across warps also copy their next
  /// rows there (n * 4 or 8 bytes more) where the sum stays within 99 KB. n above 24576 (12288 for
  /// f64) needs a GPU with more than 99 KB per block (A100, H100; not sm_86, sm_89 or sm_120, where
  /// the first launch fails). Hadamard kernels target sm_80 and later (before it, bf16 does not
  /// compile and f32/f64 blocks reserve copies past a Turing block's 64 KB from n = 8192).
  std::int64_t group = 1;
  /// The factor applied to the result; std::nullopt: 1 / sqrt(n) (orthonormal).
  std::optional<double> scale;
  /// y is x: launch with pointers.y == pointers.x. A y descriptor, when given, must equal x's.
  bool inplace = false;
  /// Before each launch, verify that both pointers are device memory of the stream's device holding
  /// their whole views (one driver query each); a violation throws and nothing is launched.
  bool check_pointers = false;
};

/// The device pointers of one launch.
struct HadamardPointers {
  const void* x = nullptr;
  void* y = nullptr;  ///< for an in-place plan, x itself
};

namespace detail {
struct HadamardPlanImpl;
}

/// A planned hadamard: immutable, cheap to copy, safe to launch from several threads at once.
class HadamardPlan {
 public:
  HadamardPlan() = default;

  /// Transforms on `stream` (a CUstream/cudaStream_t; nullptr is the default stream), on the
  /// stream's device. Pointers less aligned than the plan's vector accesses take a scalar variant.
  /// Throws shapejit::Error for a missing or misaligned pointer, an in-place mismatch or a failed
  /// launch.
  void launch(const HadamardPointers& pointers, void* stream = nullptr) const;

  /// Shapes, specialization, launch shape, kernels and their keys, as text.
  std::string describe() const;
  /// describe() as a JSON document.
  std::string json() const;
  /// The `shapejit plan` manifest line that reproduces this plan's kernels.
  std::string manifest_line() const;

  /// Internal: the plan's data (planner output and kernels).
  const detail::HadamardPlanImpl& impl() const;

 private:
  friend HadamardPlan plan_hadamard(const HadamardDesc&);
  std::shared_ptr<const detail::HadamardPlanImpl> impl_;
};

/// Validates `desc` and plans it. Throws shapejit::Error (invalid_argument) naming the argument for:
/// a rank outside 2..6, a non-float dtype, a group that does not divide the heads, an unsupported
/// n, a dhead stride other than 1, a y of another shape or dtype, output strides (y's, or x's in
/// place) that make elements overlap.
/// Records the manifest line in record mode (SHAPEJIT_RECORD).
HadamardPlan plan_hadamard(const HadamardDesc& desc);

/// One-shot hadamard through an internal plan cache keyed by `desc`.
void hadamard(const HadamardDesc& desc, const HadamardPointers& pointers, void* stream = nullptr);

/// Whether n is a supported transform size (2^k for 1 <= k <= 15; 12, 20 or 28 times 2^k up to
/// 12 * 1024, 20 * 1024 and 28 * 1024).
bool hadamard_size_supported(std::int64_t n) noexcept;

/// H_n as signs (+1 or -1), row-major n x n (n * n bytes), in the ordering described above. Throws
/// invalid_argument for an unsupported n.
std::vector<std::int8_t> hadamard_matrix(std::int64_t n);

}  // namespace shapejit
