// The hadamard planner: validates a HadamardDesc and reduces it to a specialization (what changes the
// generated code), the kernel's run-time arguments and a launch shape. Pure host code.
#pragma once

#include <cstdint>
#include <vector>

#include "core/spec.hpp"
#include "shapejit/hadamard.hpp"

namespace shapejit::plan {

/// Everything that changes the generated code of a hadamard kernel. A row is one transform: the n
/// values of one head group. A thread owns VALUES = n / THREADS_PER_ROW of them, as chunks of VEC
/// consecutive values (one access each); chunk c of thread t starts at value
/// (c / POW2_CHUNKS) * 2^k + ((c % POW2_CHUNKS) * THREADS_PER_ROW + t) * VEC, so the m-point factor
/// and the high bits of the power-of-two index stay inside the thread.
#define SHAPEJIT_HADAMARD_SPEC_FIELDS(X)                                                           \
  X(DType, data, DType::bf16)                                                                      \
  X(std::int64_t, head_dim, 0)     /* D */                                                         \
  X(std::int64_t, group, 1)        /* G */                                                         \
  X(std::int64_t, base, 1)         /* m: 1, 12, 20 or 28; n = m * 2^k */                           \
  X(int, vec, 1)                   /* values per access (divides D) */                             \
  X(int, threads_per_row, 1)       /* T (a power of two) */                                        \
  X(int, rows_per_block, 1)        /* R: rows one block transforms together */                     \
  X(int, row_dims, 1)              /* run-time dims the row index spans (group index first) */     \
  X(bool, inplace, false)          /* y is x */                                                    \
  X(bool, wide_index, false)       /* 64-bit element offsets */                                    \
  X(bool, prefetch, false)         /* next rows copied to shared memory during this one (f32, f64: \
                                      accesses of 4, 8 or 16 bytes; plain loads before sm_80) */

struct HadamardSpec {
  SHAPEJIT_SPEC_FIELDS(SHAPEJIT_HADAMARD_SPEC_FIELDS)
  bool operator==(const HadamardSpec&) const = default;
};
SHAPEJIT_CHECK_SPEC_FIELDS(HadamardSpec, SHAPEJIT_HADAMARD_SPEC_FIELDS)

/// The specialization key: a hash of every spec field.
inline SpecKey hadamard_key(const HadamardSpec& spec) { return spec_key("hadamard", spec); }

/// n = G * D.
inline std::int64_t hadamard_n(const HadamardSpec& s) { return s.group * s.head_dim; }

/// Shared memory holding `rows` rows of n values in the transform's arithmetic (f64 data: 8 bytes a
/// value, else 4), padded one value per 32 against bank conflicts (templates/hadamard_transform.cu).
unsigned hadamard_rows_bytes(std::int64_t n, DType data, std::int64_t rows);

/// Whether a row of one warp crosses its lanes through shared memory rather than shuffles
/// (LANE_PASSES in templates/hadamard_transform.cu): power-of-two rows of 64 values a thread.
bool hadamard_lane_passes(const HadamardSpec& spec);

/// Shared memory a block exchanges its rows' values through: where a row spans several warps or
/// takes lane passes, else 0.
unsigned hadamard_exchange_bytes(const HadamardSpec& spec);

/// Dynamic shared memory of one block: the exchange, then the copies of its next rows where it
/// prefetches (EXCHANGE_BYTES, SHARED_BYTES and copy_slot in templates/hadamard.cu).
unsigned hadamard_shared_bytes(const HadamardSpec& spec);

/// Blocks of a launch of `rows` rows.
unsigned hadamard_grid(const HadamardSpec& spec, std::int64_t rows);

/// The same specialization with one-value accesses: what runs on pointers less aligned than the
/// plan assumed.
HadamardSpec hadamard_scalar_variant(HadamardSpec spec);

/// Most run-time row dims: the group index and up to four outer dims that do not merge.
inline constexpr int kHadamardMaxRowDims = 5;

/// One run-time row dim, innermost first: its extent (with fast-division magic) and strides in
/// elements. Mirrors `HadamardDim` in templates/hadamard.cu (every field 8 bytes).
struct HadamardDim {
  std::int64_t extent = 1;
  std::int64_t multiplier = 1;
  std::int64_t shift = 0;
  std::int64_t x_stride = 0;
  std::int64_t y_stride = 0;
};

/// The kernel's parameter block. Mirrors `HadamardArgs` in templates/hadamard.cu field for field.
struct HadamardKernelArgs {
  const void* x = nullptr;
  void* y = nullptr;
  std::int64_t rows = 0;
  double scale = 1.0;
  std::int64_t x_head_stride = 0;
  std::int64_t y_head_stride = 0;
  HadamardDim dim[kHadamardMaxRowDims];
};
static_assert(sizeof(HadamardKernelArgs) == 8 * (6 + 5 * kHadamardMaxRowDims),
              "HadamardKernelArgs must match HadamardArgs in templates/hadamard.cu");

/// Everything a HadamardPlan holds besides its kernels.
struct HadamardPlanData {
  HadamardDesc desc;  ///< as given, with y filled in and the scale resolved
  HadamardSpec spec;
  HadamardKernelArgs args;  ///< pointers left for the launch
  bool empty = false;  ///< no row: a launch does nothing
};

/// What a manifest line may impose over the planner's choice from the shapes alone (so that its
/// contiguous plan compiles the same kernels as a strided one).
struct HadamardOverrides {
  int max_vec = 16;    ///< at most this many values per access
  int index_bits = 0;  ///< 32 or 64 forces the offset width; 0 lets the shapes decide
  int row_dims = 0;    ///< forces this many run-time row dims; 0 lets the shapes decide
  bool split_heads = false;  ///< keeps a group's heads apart even where they lie back to back
};

/// Validates `desc` and plans it. Throws invalid_argument (see plan_hadamard) or unsupported (2^31
/// rows or more).
HadamardPlanData plan_hadamard_data(const HadamardDesc& desc, const HadamardOverrides& overrides = {});

/// m and 2^k of a supported n (m = 1 for a power of two); {0, 0} for an unsupported n.
struct HadamardFactors {
  std::int64_t base = 0, pow2 = 0;
};
HadamardFactors hadamard_factors(std::int64_t n);

/// The factors of n = group * head_dim for `data`; throws invalid_argument naming `group_name`
/// for a size no kernel serves (or too large for f64 rows in shared memory).
HadamardFactors checked_hadamard_factors(std::int64_t group, std::int64_t head_dim, DType data,
                                         const char* group_name);

/// Threads per row and rows per block for n = base * pow2 with `vec`-value accesses and `value_bytes`
/// per computed value (4 or 8), where rows across warps prefetch (`prefetching`) or not: a pure
/// function of them.
struct HadamardLayout {
  int vec = 1, threads_per_row = 1, rows_per_block = 1;
};
HadamardLayout choose_hadamard_layout(std::int64_t base, std::int64_t pow2, int vec, int value_bytes,
                                      bool prefetching);

/// H_m of Paley's second construction for m in {12, 20, 28}, row-major signs.
std::vector<std::int8_t> paley_hadamard(std::int64_t m);

/// Entry (i, j) of H_n for n = f.base * f.pow2: (-1)^popcount((i mod 2^k) & (j mod 2^k)) times
/// H_m[i / 2^k][j / 2^k].
int hadamard_sign(const HadamardFactors& f, std::int64_t i, std::int64_t j);

}  // namespace shapejit::plan
