/* shapejit C API: rope, rotary position embedding (GPT-J interleaved and GPT-NeoX half-split),
 * q and optionally k in one launch, optionally fused with a grouped Hadamard transform. See
 * shapejit/rope.hpp for the semantics; this mirrors it. */
#ifndef SHAPEJIT_ROPE_H
#define SHAPEJIT_ROPE_H

#include "shapejit/shapejit_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Which elements form a rotated pair: GPT-J (x[2i], x[2i+1]) or NeoX (x[i], x[i + R/2]). */
typedef enum sj_rope_style { SJ_ROPE_GPTJ = 0, SJ_ROPE_NEOX = 1 } sj_rope_style;

/** Which step runs first when rope is fused with a Hadamard transform (sj_rope_desc.hadamard_group). */
typedef enum sj_hadamard_order { SJ_ROPE_THEN_HADAMARD = 0, SJ_HADAMARD_THEN_ROPE = 1 } sj_hadamard_order;

/** How a rope fused with a Hadamard transform writes an output (sj_rope_desc.q_quantize, k_quantize):
 *  the data dtype, i8 codes (scale = max |value| / 127) or float8_e4m3fn bit patterns as u8
 *  (scale = max |value| / 448), with one f32 scale per row (the G heads of one head group of one token). */
typedef enum sj_rope_quantize {
  SJ_QUANTIZE_NONE = 0,
  SJ_QUANTIZE_INT8 = 1,
  SJ_QUANTIZE_FP8_E4M3 = 2
} sj_rope_quantize;

/** How rotary pairs take their positions from multi-axis positions (sj_rope_desc.axis_rule): one
 *  axis; sections (Qwen2-VL M-RoPE: pair j takes the axis whose section holds j); interleaved
 *  (Qwen3-VL: pair j takes axis 1 if j % 3 == 1 and j < 3 s_1, axis 2 if j % 3 == 2 and j < 3 s_2);
 *  blocks (ChatGLM 2-D RoPE, FLUX: one contiguous block of 2 s_i channels per axis, NeoX
 *  pairs half-split inside their block, pair j reading table column j). */
typedef enum sj_rope_axis_rule {
  SJ_AXES_NONE = 0,
  SJ_AXES_SECTIONS = 1,
  SJ_AXES_INTERLEAVED = 2,
  SJ_AXES_BLOCKS = 3
} sj_rope_axis_rule;

/** How a paged KV cache orders a block's tokens and heads (sj_rope_desc.cache_layout): no cache
 *  append; [blocks, block_size, heads, dhead] (NHD, vLLM); [blocks, heads, block_size, dhead] (HND). */
typedef enum sj_kv_cache_layout { SJ_KV_CACHE_NONE = 0, SJ_KV_CACHE_NHD = 1, SJ_KV_CACHE_HND = 2 } sj_kv_cache_layout;

/** A rope call's shapes, strides and dtypes. A descriptor of rank 0 means "absent" (y, k_out:
 *  contiguous, or the input itself for an in-place plan, and k_out not written by an out-of-place
 *  cache append; k, positions: none; q_scale, k_scale: contiguous). A zero-initialized tail (the Hadamard, quantization, axis and cache fields) means no
 *  fused transform, outputs in the data dtype, one-axis positions and no cache append. */
typedef struct sj_rope_desc {
  sj_rope_style style;
  sj_tensor_desc x;         /**< [seq, heads, dhead] or [batch, seq, heads, dhead]; f16 bf16 f32 f64 */
  sj_tensor_desc y;         /**< x's shape and dtype */
  sj_tensor_desc k;         /**< optional: x's batch, seq, dhead and dtype, its own heads */
  sj_tensor_desc k_out;     /**< k's shape and dtype */
  sj_tensor_desc table;     /**< layout of cos and sin: [P, W >= R/2], float dtype, strides {row, 1} */
  sj_tensor_desc positions; /**< optional: [seq] or [batch, seq], integer dtype; absent: s + offset */
  int64_t rotary_dim;       /**< R (even, <= dhead); 0 means dhead */
  int inplace;              /**< nonzero: y is x and k_out is k */
  int inverse;              /**< nonzero: rotate by -angle (backward pass) */
  int checked;              /**< nonzero: each launch waits and fails on a position outside [0, P)
                                 (or, appending to a cache, a slot past it) */
  int check_pointers;       /**< nonzero: each launch first verifies every pointer is memory of the
                                 stream's device (or managed) holding its whole view; see rope.hpp */
  int64_t hadamard_group;   /**< fused Hadamard transform over G heads (divides x's and k's heads),
                                 n = G * dhead; 0: none */
  int has_hadamard_scale;   /**< nonzero: use `hadamard_scale`; zero: 1/sqrt(n) */
  double hadamard_scale;
  sj_hadamard_order hadamard_order; /**< which step runs first (an inverse plan runs them the other way) */
  sj_rope_quantize q_quantize; /**< with a Hadamard transform: q's output (y) as 8-bit codes, y's dtype
                                    SJ_I8 (int8) or SJ_U8 (fp8-e4m3); not in place */
  sj_rope_quantize k_quantize; /**< the same for k's output (k_out) */
  sj_tensor_desc q_scale;   /**< q's scales: [batch, seq, heads / G] (3-D data: [seq, heads / G]), f32 */
  sj_tensor_desc k_scale;   /**< k's scales, laid out as q_scale with k's heads */
  sj_rope_axis_rule axis_rule; /**< multi-axis positions [axes, seq] or [axes, batch, seq]; not fused */
  int axis_count;              /**< A, the entries of axis_sections (1 to 4; 3 for interleaved) */
  const int64_t* axis_sections; /**< s_0 .. s_{A-1}, summing to R/2 */
  sj_kv_cache_layout cache_layout; /**< append the rotated k and v to paged caches at each token's slot
                                        (needs k; not fused); k_out is then written only in place or
                                        when given (rank > 0) */
  sj_tensor_desc v;         /**< k's shape and dtype */
  sj_tensor_desc k_cache;   /**< [blocks, block_size, heads_k, dhead] (NHD) or [blocks, heads_k, block_size, dhead] (HND) */
  sj_tensor_desc v_cache;   /**< k_cache's shape and dtype */
  sj_tensor_desc slots;     /**< [batch * seq] or [batch, seq], i32 or i64; a negative slot skips the token */
  sj_rope_quantize cache_quantize; /**< caches of codes of value / scale (SJ_I8 for int8, SJ_U8 for fp8-e4m3) */
} sj_rope_desc;

/** Device pointers of one launch (NULL for what the plan does not use). */
typedef struct sj_rope_pointers {
  const void* x;
  void* y; /**< x itself for an in-place plan */
  const void* k;
  void* k_out; /**< k itself for an in-place plan; NULL when a cache append writes k to the cache only */
  const void* cos;
  const void* sin;
  const void* positions;
  int64_t offset; /**< position of sequence index 0 when the plan has no positions */
  void* q_scale;  /**< f32 scales of q's quantized output (required when quantized) */
  void* k_scale;  /**< f32 scales of k's quantized output (required when quantized) */
  const void* v;  /**< cache append: the values written beside k */
  void* k_cache;
  void* v_cache;
  const void* slots;
  const float* k_cache_scale; /**< caches of codes: each cache's f32 scale, in device memory */
  const float* v_cache_scale;
} sj_rope_pointers;

/** An opaque planned rope. */
typedef struct sj_rope_plan_s* sj_rope_plan;

/** Validates and plans `desc`; on success `*plan` holds a plan to launch and destroy (NULL on
 *  failure). The output comes first, as in sj_rearrange_plan_create. */
sj_status sj_rope_plan_create(sj_rope_plan* plan, const sj_rope_desc* desc);

/** Launches `plan` on `stream` (a CUstream; NULL is the legacy default stream), on the stream's
 *  device whatever the current device. */
sj_status sj_rope_plan_launch(sj_rope_plan plan, const sj_rope_pointers* pointers, void* stream);

/** Frees a plan (NULL is ignored). Kernels it loaded stay cached in the process. */
sj_status sj_rope_plan_destroy(sj_rope_plan plan);

/** One-shot rope through an internal plan cache. */
sj_status sj_rope(const sj_rope_desc* desc, const sj_rope_pointers* pointers, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* SHAPEJIT_ROPE_H */
