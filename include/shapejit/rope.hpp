// shapejit C++ API: rope, rotary position embedding (GPT-J interleaved and GPT-NeoX half-split
// styles) for q and optionally k in one launch, in place or out of place, forward or inverse,
// plus host builders for the sin/cos tables.
//
// For each token (batch b, sequence index s) with position p and each pair i < R/2 (R = rotary
// dim), GPT-J rotates (x[2i], x[2i+1]) and NeoX rotates (x[i], x[i + R/2]) by the angle whose
// cosine and sine are cos[p][i] and sin[p][i]:
//   y0 = x0*cos - x1*sin,  y1 = x0*sin + x1*cos   (inverse: the same with -sin).
// Elements R..D-1 pass through unchanged. Arithmetic is f32 (f64 for f64 data).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shapejit/core.hpp"

namespace shapejit {

/// Which elements form a rotated pair.
enum class RopeStyle : std::uint8_t {
  gptj,  ///< interleaved: (x[2i], x[2i+1])
  neox,  ///< half-split: (x[i], x[i + R/2])
};

/// "gptj" or "neox".
std::string_view rope_style_name(RopeStyle style) noexcept;

/// Which step comes first when rope is fused with a Hadamard transform (RopeDesc::hadamard_group).
enum class HadamardOrder : std::uint8_t {
  rope_then_hadamard,  ///< rotate, then transform (QuaRot, SpinQuant: keys rotated after rope)
  hadamard_then_rope,  ///< transform, then rotate (rope on keys dequantized from a rotated cache)
};

/// "rope-then-hadamard" or "hadamard-then-rope".
std::string_view hadamard_order_name(HadamardOrder order) noexcept;

/// How a rope fused with a Hadamard transform writes an output (RopeDesc::q_quantize, k_quantize).
enum class RopeQuantize : std::uint8_t {
  none,      ///< the data dtype
  int8,      ///< i8 codes: round(value / scale), scale = max |value| / 127
  fp8_e4m3,  ///< float8_e4m3fn bit patterns (as u8): value / scale rounded to nearest even, scale = max |value| / 448
};

/// "none", "int8" or "fp8-e4m3".
std::string_view rope_quantize_name(RopeQuantize q) noexcept;

/// How rotary pairs take their positions when positions have several axes (time, height, width:
/// multimodal RoPE). Every pair j keeps table column j (its frequency); only the row differs.
enum class RopeAxisRule : std::uint8_t {
  none,         ///< one axis: positions [seq] or [batch, seq]
  sections,     ///< Qwen2-VL M-RoPE: sections s_0..s_{A-1} sum to R/2; pair j takes the axis whose section holds j
  interleaved,  ///< Qwen3-VL: pair j takes axis 1 if j % 3 == 1 and j < 3 s_1, axis 2 if j % 3 == 2 and j < 3 s_2, else axis 0
  /// ChatGLM 2-D RoPE, FLUX: the rotary channels cut into one contiguous block per axis,
  /// block i holding 2 s_i channels from channel 2 (s_0 + ... + s_{i-1}); inside a block, NeoX
  /// pairs are half-split (channel c with c + s_i) and GPT-J pairs adjacent. Pair j (counted over
  /// the blocks in order) reads table column j: a block's frequencies are its own column range
  /// (rope_axes_tables builds such tables). With GPT-J pairs this is the sections rule.
  blocks,
};

/// "none", "sections", "interleaved" or "blocks".
std::string_view rope_axis_rule_name(RopeAxisRule rule) noexcept;

/// How a paged KV cache orders a block's tokens and heads (RopeDesc::cache_layout).
enum class KvCacheLayout : std::uint8_t {
  none,  ///< no cache append
  nhd,   ///< [blocks, block_size, heads, dhead] (vLLM, FlashInfer NHD)
  hnd,   ///< [blocks, heads, block_size, dhead] (FlashInfer HND)
};

/// "none", "nhd" or "hnd".
std::string_view kv_cache_layout_name(KvCacheLayout layout) noexcept;

/// What a rope call looks like: every shape, stride and dtype, but no pointer.
///
/// Shapes are [seq, heads, dhead] (3-D) or [batch, seq, heads, dhead] (4-D). Strides are in
/// elements, signed, one per dimension (empty: row-major contiguous); the dhead stride must be 1.
struct RopeDesc {
  RopeStyle style = RopeStyle::neox;
  /// The input q. dtype f16, bf16, f32 or f64.
  TensorDesc x;
  /// The output for x: same shape and dtype. std::nullopt: contiguous (x itself for an in-place plan).
  std::optional<TensorDesc> y;
  /// An optional second input rotated in the same launch: same batch, seq, dhead and dtype as x,
  /// its own head count and strides.
  std::optional<TensorDesc> k;
  /// The output for k (needs k). std::nullopt: contiguous (k itself for an in-place plan); with a
  /// cache append out of place, std::nullopt means k_out is not written (k goes to the cache only).
  std::optional<TensorDesc> k_out;
  /// The layout of both the cos and the sin table: [P, W] with W >= R/2 (columns past R/2 are
  /// not read), any float dtype, strides {row stride, 1} (empty: row stride W).
  TensorDesc table;
  /// Position ids: [seq] (shared by every batch) or [batch, seq], any integer dtype, any strides.
  /// std::nullopt: the position of sequence index s is s + RopePointers::offset.
  std::optional<TensorDesc> positions;
  /// Multi-axis positions: A = axis_sections.size() axes (1 to 4; 3 for interleaved), whose
  /// sections (pairs per axis) sum to R/2. positions are then [A, seq] or [A, batch, seq] (any integer dtype and
  /// strides); a token with any axis outside the table is a bad token (NaN, or checked mode's error).
  /// Not with a fused Hadamard transform.
  RopeAxisRule axis_rule = RopeAxisRule::none;
  std::vector<std::int64_t> axis_sections;
  /// R, the number of leading dhead elements rotated (even, at most dhead); 0 means dhead.
  std::int64_t rotary_dim = 0;
  /// y is x and k_out is k: launch with pointers.y == pointers.x (and k_out == k). y and k_out
  /// descriptors, when given, must equal x's and k's.
  bool inplace = false;
  /// Rotate by -angle (the backward pass). With a Hadamard transform, the inverse of the whole
  /// fused step: the two steps run in the opposite order, the rotation by -angle and the transform
  /// scaled by 1 / (hadamard_scale * n), so that the inverse plan undoes the forward one.
  bool inverse = false;
  /// Fuses a grouped-head Hadamard transform (shapejit/hadamard.hpp) into the launch: 0 for none,
  /// else G, dividing the head counts of x and k; each token's heads are taken G at a time and the
  /// n = G * dhead values of a group are multiplied by hadamard_scale * H_n, for n a power of two
  /// from 2 to 32768 or 12, 20 or 28 times a power of two (f64: n up to 16384).
  std::int64_t hadamard_group = 0;
  /// The transform's factor; std::nullopt: 1 / sqrt(n) (orthonormal).
  std::optional<double> hadamard_scale;
  HadamardOrder hadamard_order = HadamardOrder::rope_then_hadamard;
  /// With a Hadamard transform, 8-bit outputs for q and/or k: each row (the G heads of one head
  /// group of one token) gets one f32 scale, stored in q_scale / k_scale, and its values are written
  /// as codes of value / scale (see RopeQuantize); code * scale gives the value back within one
  /// step of the code. A quantized output's descriptor has dtype i8 (int8) or u8 (fp8_e4m3);
  /// std::nullopt makes it contiguous. Not in place.
  RopeQuantize q_quantize = RopeQuantize::none;
  RopeQuantize k_quantize = RopeQuantize::none;
  /// The scales of a quantized output: [batch, seq, heads / G] (3-D data: [seq, heads / G]), f32,
  /// any strides; std::nullopt: contiguous.
  std::optional<TensorDesc> q_scale;
  std::optional<TensorDesc> k_scale;
  /// Fused KV-cache append (needs k; not with a Hadamard transform): the rotated k and v are
  /// written into the paged caches k_cache and v_cache at each token's slot. Token t (b * seq + s)
  /// goes to block slot / block_size, row slot % block_size, where slot = slots[t] (or slots[b, s]);
  /// a negative slot skips the token (padding), and a slot at or past blocks * block_size is skipped
  /// too (checked mode throws naming the token): nothing is written out of the cache. q is rotated
  /// as without a cache. k's rotation is also written to k_out when the plan is in place or k_out
  /// is given; otherwise it goes to the cache only.
  KvCacheLayout cache_layout = KvCacheLayout::none;
  /// The values appended beside k: k's shape and dtype, its own strides (dhead stride 1).
  std::optional<TensorDesc> v;
  /// The caches: [blocks, block_size, heads_k, dhead] (nhd) or [blocks, heads_k, block_size, dhead]
  /// (hnd), one shape and dtype for both, each its own strides (dhead stride 1, elements distinct).
  /// dtype: any float dtype (values converted from the data dtype), or the codes of cache_quantize.
  std::optional<TensorDesc> k_cache;
  std::optional<TensorDesc> v_cache;
  /// The slot mapping: [batch * seq] (or [batch, seq] for 4-D data), i32 or i64, any strides. Slots
  /// of appended tokens must be distinct (two tokens at one slot race for its rows).
  std::optional<TensorDesc> slots;
  /// Caches of 8-bit codes with one f32 scale per cache (RopePointers::k_cache_scale and
  /// v_cache_scale, device memory, as vLLM's k_scale and v_scale): code = value * (1 / scale) as
  /// int8 (rounded, clamped to +-127, NaN as 0; cache dtype i8) or float8 e4m3fn (rounded to
  /// nearest even, saturated to +-448; cache dtype u8).
  RopeQuantize cache_quantize = RopeQuantize::none;
  /// After each launch, wait for the stream and throw invalid_argument naming the first token
  /// whose position is outside [0, P) (with a cache append: or whose slot is past the cache). Each
  /// launch then costs a 16-byte allocation, a context synchronization before (the flags' reset)
  /// and a stream synchronization after; without it such a token's q and k outputs become NaN
  /// (with a cache append, its k cache rows too: int8 codes 0; v is appended as given; a token whose
  /// slot is past the cache is not appended) and the launch stays asynchronous.
  bool checked = false;
  /// Before each launch, verify that every pointer is device memory of the stream's device (or
  /// managed memory) and that every byte its view reaches (for cos and sin: rows [0, P), columns
  /// [0, R/2)) lies inside its allocation; a violation throws invalid_argument naming the pointer
  /// and nothing is launched. Costs one driver query per pointer (see README); off by default.
  bool check_pointers = false;
};

/// The device pointers of one launch.
struct RopePointers {
  const void* x = nullptr;
  void* y = nullptr;  ///< for an in-place plan, x itself
  const void* k = nullptr;
  void* k_out = nullptr;  ///< for an in-place plan, k itself; NULL when a cache append writes k to the cache only
  const void* cos = nullptr;
  const void* sin = nullptr;
  const void* positions = nullptr;  ///< required when the plan has positions
  std::int64_t offset = 0;          ///< position of sequence index 0 when the plan has no positions
  void* q_scale = nullptr;          ///< required when q's output is quantized
  void* k_scale = nullptr;          ///< required when k's output is quantized
  const void* v = nullptr;          ///< cache append: the values written beside k
  void* k_cache = nullptr;          ///< cache append: the caches
  void* v_cache = nullptr;
  const void* slots = nullptr;      ///< cache append: the slot mapping
  const float* k_cache_scale = nullptr;  ///< 8-bit caches: each cache's f32 scale (device memory)
  const float* v_cache_scale = nullptr;
};

namespace detail {
struct RopePlanImpl;
}

/// A planned rope: immutable, cheap to copy, safe to launch from several threads at once
/// (checked launches of one plan take turns).
class RopePlan {
 public:
  RopePlan() = default;

  /// Rotates on `stream` (a CUstream/cudaStream_t; nullptr is the default stream), on the stream's
  /// device and in its context whatever the caller's current device (the default streams: the
  /// current context's device); checked mode allocates and reads back there too. Launching
  /// costs no allocation, lock or hash; pointers less aligned than the plan assumed take a
  /// scalar variant of the kernel. Throws shapejit::Error for a missing or inconsistent pointer,
  /// a failed launch, or (checked plans) a position outside the table or a slot past the cache.
  void launch(const RopePointers& pointers, void* stream = nullptr) const;

  /// Shapes, specialization, launch shape, kernels and their keys, as text.
  std::string describe() const;
  /// describe() as a JSON document.
  std::string json() const;
  /// The `shapejit plan` manifest line that reproduces this plan's kernels.
  std::string manifest_line() const;

  /// Internal: the plan's data (planner output and kernels).
  const detail::RopePlanImpl& impl() const;

 private:
  friend RopePlan plan_rope(const RopeDesc&);
  std::shared_ptr<const detail::RopePlanImpl> impl_;
};

/// Validates `desc` and plans it. Throws shapejit::Error (invalid_argument) naming the argument
/// for: a rank other than 3 or 4, an odd dhead or rotary dim, a rotary dim over dhead, a table
/// narrower than R/2, a dhead stride other than 1, shapes of y, k, k_out or positions that do not
/// match x, an integer data dtype, a non-integer position dtype, output strides that make rows
/// overlap, cache append inputs that are missing or do not match k (see RopeDesc::cache_layout).
/// Throws unsupported for a cache append fused with a Hadamard transform or a cache of 2^31 slots
/// or more. Records the manifest line in record mode (SHAPEJIT_RECORD).
RopePlan plan_rope(const RopeDesc& desc);

/// One-shot rope through an internal plan cache keyed by `desc`.
void rope(const RopeDesc& desc, const RopePointers& pointers, void* stream = nullptr);

/// How the rotation frequencies are derived from theta (Hugging Face transformers' rope types).
enum class RopeScaling : std::uint8_t {
  none,    ///< "default": inv_freq[i] = theta^(-2i/R)
  linear,  ///< "linear": inv_freq / factor
  llama3,  ///< "llama3": Llama 3.1's smooth blend of scaled and unscaled frequencies
  yarn,    ///< "yarn": ramp between interpolated and extrapolated frequencies, scaled sin/cos
};

/// Parameters of the sin/cos tables, named after transformers' rope_scaling fields.
struct RopeTableOptions {
  double theta = 10000.0;  ///< rope_theta (the base)
  RopeScaling scaling = RopeScaling::none;
  double factor = 1.0;  ///< linear, llama3, yarn: the scaling factor
  double low_freq_factor = 1.0;   ///< llama3
  double high_freq_factor = 4.0;  ///< llama3
  /// llama3 and yarn: the pre-training context length. (transformers derives yarn's factor as
  /// max_position_embeddings / original_max_position_embeddings when the config names both:
  /// pass that ratio as `factor`.)
  std::int64_t original_max_positions = 8192;
  double beta_fast = 32.0;  ///< yarn
  double beta_slow = 1.0;   ///< yarn
  double mscale = 0.0;          ///< yarn, 0 = unset
  double mscale_all_dim = 0.0;  ///< yarn, 0 = unset
  /// yarn: the factor sin and cos are multiplied by; std::nullopt derives it from factor and mscale.
  std::optional<double> attention_factor;
  bool truncate = true;  ///< yarn: round the correction range outward to whole dimensions

  /// Llama 3.1's published settings: theta 500000, factor 8, low 1, high 4, original 8192.
  static RopeTableOptions llama3_defaults();
};

/// Inverse frequencies (R/2 of them) and the factor sin and cos are scaled by.
struct RopeFrequencies {
  std::vector<double> inv_freq;
  double attention_factor = 1.0;
};

/// The frequencies for rotary dim `rotary_dim` (even, >= 2), computed in double with the
/// formulas of transformers' modeling_rope_utils. Throws invalid_argument for a bad rotary dim,
/// theta <= 1, factor <= 0, or llama3 with high_freq_factor <= low_freq_factor.
RopeFrequencies rope_frequencies(std::int64_t rotary_dim, const RopeTableOptions& options = {});

/// Host sin and cos tables, row-major [rows, rotary_dim/2] in `dtype`.
struct RopeTables {
  DType dtype = DType::f32;
  std::int64_t rows = 0;
  std::int64_t width = 0;  ///< rotary_dim / 2
  std::vector<std::uint8_t> cos;  ///< rows * width elements of dtype
  std::vector<std::uint8_t> sin;
  /// The table descriptor for RopeDesc::table: [rows, width], contiguous.
  TensorDesc desc() const;
};

/// cos and sin of p * inv_freq[i], times the attention factor, for p < rows, computed in double
/// and rounded to `dtype` (a float dtype). Throws invalid_argument for rows < 1, a non-float
/// dtype, or what rope_frequencies rejects.
RopeTables rope_tables(std::int64_t rows, std::int64_t rotary_dim, DType dtype,
                       const RopeTableOptions& options = {});

/// Tables for axial positions (FLUX's EmbedND, axes_dim d_0 .. d_{A-1}, each even): one block of
/// d_i / 2 columns per axis, column k of block i holding cos and sin of p * theta^(-2k / d_i).
/// Width sum(d_i) / 2. With axis_rule blocks and axis_sections d_i / 2, pair j of a head rotates by
/// its block's frequency at its axis's position: FLUX with style gptj; ChatGLM-6B's 2-D RoPE
/// (position and block position, each rotating half of the rotary channels NeoX-style with the
/// same ladder) with style neox and axes_dims {R/2, R/2}. Throws invalid_argument for no
/// axes, an odd or non-positive d_i, or what rope_tables rejects.
RopeTables rope_axes_tables(std::int64_t rows, const std::vector<std::int64_t>& axes_dims, DType dtype,
                            double theta = 10000.0);

}  // namespace shapejit
