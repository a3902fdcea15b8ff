// The rope planner: validates a RopeDesc and reduces it to a specialization (what changes the
// generated code), the kernel's run-time arguments and a launch shape. Pure host code.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "core/spec.hpp"
#include "shapejit/rope.hpp"

namespace shapejit {
namespace plan {
/// Where a fused rotation finds a value's partner (value i pairs with i +- P, P = R/2 for NeoX,
/// 1 for GPT-J): in the thread's own vector, its other chunk (i ^ P on a chunk bit), a lane shuffle
/// (i ^ P on a lane bit), a second read of the input (rotating first), or the row's copy in shared
/// memory (rotating last).
enum class RopePartner : std::uint8_t { none, vector, chunk, lane, memory, shared };
std::string_view rope_partner_name(RopePartner p) noexcept;
inline std::string_view field_text(RopePartner p) { return rope_partner_name(p); }
}  // namespace plan
inline std::string_view field_text(RopeStyle style) { return rope_style_name(style); }
inline std::string_view field_text(RopeQuantize q) { return rope_quantize_name(q); }
inline std::string_view field_text(RopeAxisRule rule) { return rope_axis_rule_name(rule); }
}  // namespace shapejit

namespace shapejit::plan {

/// Everything that changes the generated code of a rope kernel. Fused with a Hadamard transform,
/// a thread owns chunks of `access` consecutive values of a row (the G heads of a group) laid out
/// as in templates/hadamard_transform.cu, and `chunk` equals `access`.
#define SHAPEJIT_ROPE_SPEC_FIELDS(X)                                                               \
  X(RopeStyle, style, RopeStyle::neox)                                                             \
  X(DType, data, DType::bf16)                                                                      \
  X(DType, table, DType::f32)                                                                      \
  X(std::optional<DType>, position, std::nullopt) /* none: position = s + offset */               \
  X(bool, positions_batched, false) /* positions are [batch, seq] (else [seq]) */                  \
  X(int, position_axes, 1)          /* A: multi-axis positions [A, ...] */                         \
  X(RopeAxisRule, axis_rule, RopeAxisRule::none)                                                   \
  X(std::int64_t, axis_limit1, 0) /* sections, blocks: first pair of axis 1, 2, 3; interleaved: 3 s_1, */ \
  X(std::int64_t, axis_limit2, 0) /* 3 s_2 (R/2 where an axis is absent) */                        \
  X(std::int64_t, axis_limit3, 0)                                                                  \
  X(std::int64_t, head_dim, 0)      /* D */                                                        \
  X(std::int64_t, rotary_dim, 0)    /* R */                                                        \
  X(bool, four_d, false)                                                                           \
  X(bool, has_k, false)                                                                            \
  X(bool, inplace, false)                                                                          \
  X(bool, inverse, false)                                                                          \
  X(bool, checked, false)                                                                          \
  X(bool, wide_index, false) /* 64-bit element offsets */                                          \
  X(int, chunk, 1)           /* data elements one thread owns along dhead (per half for NeoX) */   \
  X(int, access, 1)          /* data elements per memory access (divides chunk) */                 \
  X(int, table_access, 1)    /* table elements per memory access */                             \
  X(std::int64_t, hadamard_group, 0) /* G of a fused Hadamard transform; 0: none */               \
  X(std::int64_t, hadamard_base, 1)  /* m, for n = G * D = m * 2^k */                              \
  X(bool, hadamard_first, false)     /* the transform runs before the rotation (order, inverse) */ \
  X(int, hadamard_threads, 1)        /* threads per row (one head group of one token) */          \
  X(int, hadamard_rows_per_block, 1)                                                               \
  X(RopePartner, hadamard_partner, RopePartner::none)                                              \
  X(RopeQuantize, q_quantize, RopeQuantize::none) /* fused only: q's output as 8-bit codes */      \
  X(RopeQuantize, k_quantize, RopeQuantize::none)                                                   \
  X(std::optional<DType>, cache, std::nullopt) /* cache append: the caches' element dtype */         \
  X(RopeQuantize, cache_quantize, RopeQuantize::none) /* the caches hold 8-bit codes */             \
  X(DType, slot, DType::i64)                                                                       \
  X(bool, k_out_skipped, false) /* cache append: k's rotation goes to the cache only */            \
  X(int, cache_access, 1)       /* cache elements per memory access */

struct RopeSpec {
  SHAPEJIT_SPEC_FIELDS(SHAPEJIT_ROPE_SPEC_FIELDS)
  bool operator==(const RopeSpec&) const = default;
};
SHAPEJIT_CHECK_SPEC_FIELDS(RopeSpec, SHAPEJIT_ROPE_SPEC_FIELDS)

/// The specialization key: a hash of every spec field.
inline SpecKey rope_key(const RopeSpec& spec) { return spec_key("rope", spec); }

/// The dtype of 8-bit codes: i8 for int8, u8 (float8 e4m3fn bits) for fp8_e4m3.
DType rope_code_dtype(RopeQuantize q);

/// Table entries (pairs) one chunk needs.
int rope_chunk_pairs(const RopeSpec& spec);
/// Chunks of the rotated part of a row, and of the pass-through part.
std::int64_t rope_rotated_chunks(const RopeSpec& spec);
std::int64_t rope_pass_chunks(const RopeSpec& spec);

/// The same specialization with one-element accesses: what runs on pointers less aligned than
/// the plan assumed.
RopeSpec scalar_variant(RopeSpec spec);

/// Fused plans: where the rotation finds partners, from the row layout and the order.
RopePartner fused_partner(const RopeSpec& spec);
/// Fused plans: shared memory a block needs (rows across warps, or partners found there).
unsigned fused_shared_bytes(const RopeSpec& spec);

/// The kernel's parameter block. Mirrors `RopeArgs` in templates/rope_common.cu field for field (every
/// field 8 bytes, so both sides lay it out the same way).
struct RopeKernelArgs {
  const void* x = nullptr;
  void* y = nullptr;
  const void* k = nullptr;
  void* k_out = nullptr;
  const void* cos = nullptr;
  const void* sin = nullptr;
  const void* positions = nullptr;
  unsigned long long* bad_token = nullptr;  ///< checked mode: the lowest token with a bad position
  std::int64_t tokens = 0;                  ///< batch * seq
  std::int64_t seq = 0;
  std::int64_t heads_q = 0;
  std::int64_t heads_total = 0;             ///< q heads + k heads
  std::int64_t seq_div_multiplier = 0;      ///< token / seq as a multiply and shift
  std::int64_t seq_div_shift = 0;
  std::int64_t x_stride[3] = {};            ///< batch, seq, head strides
  std::int64_t y_stride[3] = {};
  std::int64_t k_stride[3] = {};
  std::int64_t k_out_stride[3] = {};
  std::int64_t position_stride[2] = {};     ///< batch, seq
  std::int64_t table_rows = 0;              ///< P
  std::int64_t table_stride = 0;            ///< table row stride
  std::int64_t offset = 0;                  ///< set per launch
  // Fused with a Hadamard transform (zero otherwise):
  std::int64_t group_rows[2] = {};          ///< rows (head groups) of q; of q and k together
  std::int64_t group_div[4] = {};           ///< row / (q groups), row / (k groups) as multiply and shift
  double hadamard_scale = 0;
  void* q_scale = nullptr;                  ///< quantized outputs: one f32 scale per row
  void* k_scale = nullptr;
  std::int64_t q_scale_stride[3] = {};      ///< batch, seq, head group
  std::int64_t k_scale_stride[3] = {};
  std::int64_t position_axis_stride = 0;    ///< multi-axis positions: the axis stride
  // Cache append (zero otherwise); heads_total then counts v's heads too, after k's.
  const void* v = nullptr;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  const void* slots = nullptr;
  const float* k_cache_scale = nullptr;
  const float* v_cache_scale = nullptr;
  std::int64_t v_stride[3] = {};            ///< batch, seq, head
  std::int64_t k_cache_stride[3] = {};      ///< block, row in block, head
  std::int64_t v_cache_stride[3] = {};
  std::int64_t slot_stride[2] = {};         ///< batch, seq
  std::int64_t cache_slots = 0;             ///< blocks * block_size
  std::int64_t block_size = 0;
  std::int64_t block_div_multiplier = 0;    ///< slot / block_size as a multiply and shift
  std::int64_t block_div_shift = 0;
};
static_assert(sizeof(RopeKernelArgs) == 8 * 68, "RopeKernelArgs must match RopeArgs in templates/rope_common.cu");

/// Grid and block of a rope launch: tokens on grid.x, head groups on grid.y (at most 65535).
/// Fused with a Hadamard transform: blocks of rows on grid.x, the rows' threads on block.x.
struct RopeLaunchShape {
  unsigned grid[2] = {1, 1};
  unsigned block[3] = {1, 1, 1};  ///< chunks, heads, tokens (fused: threads, 1, 1)
  int heads_per_thread = 1;
  unsigned shared_bytes = 0;      ///< fused: the rows of a block in shared memory
};

/// What a manifest line may impose over the planner's choices from the shapes alone, so that its
/// contiguous plan compiles the same kernels as a strided one. Such plans are compiled, never launched.
struct RopeOverrides {
  int max_access = 16;        ///< at most this many data elements per access
  int max_table_access = 16;  ///< at most this many table elements per access
  int index_bits = 0;         ///< 32 or 64 forces the offset width; 0 lets the shapes decide
  int max_cache_access = 16;  ///< at most this many cache elements per access
};

/// Everything a RopePlan holds besides its kernels.
struct RopePlanData {
  RopeDesc desc;        ///< as given, with y, k_out and table strides filled in
  RopeSpec spec;
  RopeKernelArgs args;  ///< pointers and offset left for the launch
  RopeLaunchShape launch;
  std::int64_t batch = 1, seq = 0, heads_q = 0, heads_k = 0;
  std::int64_t cache_blocks = 0, block_size = 0;  ///< cache append
  bool empty = false;   ///< no token or no head: a launch does nothing
};

/// Validates `desc` and plans it. Throws invalid_argument (see plan_rope) or unsupported (more
/// than 2^31 - 1 tokens).
RopePlanData plan_rope_data(const RopeDesc& desc, const RopeOverrides& overrides = {});

/// Tokens per block, heads per thread and grid for the given sizes (a pure function of them).
RopeLaunchShape choose_rope_launch(std::int64_t tokens, std::int64_t heads_total, std::int64_t rotated_chunks);

/// The largest power of two <= limit that divides every value (0 divides nothing away).
std::int64_t largest_pow2_dividing(std::int64_t limit, std::initializer_list<std::int64_t> values);

}  // namespace shapejit::plan
