// Rotary position embedding, after compute.cu and rope_common.cu. Reads from the specialization:
//   STYLE_NEOX, HEAD_DIM, ROTARY_DIM, FOUR_D, HAS_K, INPLACE, INVERSE, CHECKED,
//   HAS_POSITIONS, POSITIONS_BATCHED, POSITION_AXES, AXIS_RULE, AXIS_LIMIT1..3, CHUNK, ACCESS, TABLE_ACCESS,
//   data_t, table_t, pos_t (unused without positions), compute_t, idx_t.
//
// Work split: a thread owns one chunk of CHUNK elements along dhead (for NeoX, the chunk and its
// partner R/2 further on) of one token. It loads that chunk's cos/sin once, then rotates the chunk
// in every head it visits, q heads first, then k heads. Block = (chunks, heads, tokens); grid =
// (token groups, head groups). One head at a time keeps registers low (about 64), so many warps
// stay resident: that hides memory latency better than several heads' loads per thread.

constexpr int HALF = ROTARY_DIM / 2;
constexpr int PAIRS = STYLE_NEOX ? CHUNK : CHUNK / 2;  // table entries one chunk uses
constexpr int ROTATED_CHUNKS = (STYLE_NEOX ? HALF : ROTARY_DIM) / CHUNK;
constexpr int PASS_CHUNKS = (HEAD_DIM - ROTARY_DIM) / CHUNK;

// Two f32 values rounded to a 16-bit dtype in one instruction: a in the low half, b in the high.
__device__ __forceinline__ unsigned pack_pair(float a, float b, sj_bf16) {
  unsigned packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(b), "f"(a));
  return packed;
}
__device__ __forceinline__ unsigned pack_pair(float a, float b, sj_f16) {
  unsigned packed;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(b), "f"(a));
  return packed;
}
__device__ __forceinline__ unsigned pack_pair(float, float, float) { return 0; }  // never called: 4-byte data
__device__ __forceinline__ unsigned pack_pair(double, double, double) { return 0; }

// Rounds CHUNK computed values to data_t and stores them at p: 16-bit dtypes two at a time.
constexpr int WORDS_PER_ACCESS = ACCESS >= 2 ? ACCESS / 2 : 1;  // 32-bit words per access (16-bit data)

__device__ __forceinline__ void store_chunk(data_t* p, const compute_t (&v)[CHUNK]) {
  if constexpr (sizeof(data_t) == 2 && ACCESS >= 2) {
    sj_access<WORDS_PER_ACCESS, unsigned> words[CHUNK / ACCESS];
#pragma unroll
    for (int j = 0; j < CHUNK / 2; ++j)
      words[j / WORDS_PER_ACCESS].elements[j % WORDS_PER_ACCESS] = pack_pair(v[2 * j], v[2 * j + 1], data_t{});
#pragma unroll
    for (int i = 0; i < CHUNK / ACCESS; ++i) {
      auto* to = reinterpret_cast<decltype(words[i].bytes)*>(p) + i;
      __builtin_assume(__isGlobal(to));
      *to = words[i].bytes;
    }
  } else {
    data_t d[CHUNK];
#pragma unroll
    for (int j = 0; j < CHUNK; ++j) d[j] = from_compute<data_t>(v[j]);
    sj_store_elements<CHUNK, ACCESS>(p, d);
  }
}

__device__ __forceinline__ idx_t row_offset(const long long (&stride)[3], idx_t b, idx_t s) {
  return b * (idx_t)stride[0] + s * (idx_t)stride[1];
}

// One token's view of the arguments: where its rows start in each tensor, and its positions.
struct Token {
  idx_t x, y, k, k_out;
  TokenPositions positions;
};

// The input and output rows (dhead element 0) of head h: q heads first, then k heads.
struct Rows {
  const data_t* in;
  data_t* out;
};

__device__ __forceinline__ Rows head_rows(const RopeArgs& a, const Token& t, idx_t h) {
  if (!HAS_K || h < (idx_t)a.heads_q) return {a.x + t.x + h * (idx_t)a.x_stride[2], a.y + t.y + h * (idx_t)a.y_stride[2]};
  h -= (idx_t)a.heads_q;
  return {a.k + t.k + h * (idx_t)a.k_stride[2], a.k_out + t.k_out + h * (idx_t)a.k_out_stride[2]};
}

// One head's chunk at dhead element `first` (and, for NeoX, its partner chunk R/2 further on).
struct HeadChunk {
  Rows rows;
  data_t lo[CHUNK];
  data_t hi[CHUNK];  // NeoX only
};

__device__ __forceinline__ void load_head(HeadChunk& g, const RopeArgs& a, const Token& t, idx_t h, int first) {
  g.rows = head_rows(a, t, h);
  sj_load_elements<CHUNK, ACCESS>(g.lo, g.rows.in + first);
  if constexpr (STYLE_NEOX) sj_load_elements<CHUNK, ACCESS>(g.hi, g.rows.in + HALF + first);
}

// Rotates a loaded chunk and stores it: both elements of every pair are loaded before any store.
__device__ __forceinline__ void rotate_head(const HeadChunk& g, int first, const compute_t (&cs)[PAIRS],
                                            const compute_t (&sn)[PAIRS]) {
  compute_t lo[CHUNK], hi[CHUNK];
  if constexpr (STYLE_NEOX) {
#pragma unroll
    for (int j = 0; j < CHUNK; ++j) rotate(to_compute(g.lo[j]), to_compute(g.hi[j]), cs[j], sn[j], lo[j], hi[j]);
    store_chunk(g.rows.out + first, lo);
    store_chunk(g.rows.out + HALF + first, hi);
  } else {
#pragma unroll
    for (int j = 0; j < PAIRS; ++j)
      rotate(to_compute(g.lo[2 * j]), to_compute(g.lo[2 * j + 1]), cs[j], sn[j], lo[2 * j], lo[2 * j + 1]);
    store_chunk(g.rows.out + first, lo);
  }
}

extern "C" __global__ void __launch_bounds__(256) sj_kernel(const RopeArgs a) {
  const long long token = (long long)blockIdx.x * blockDim.z + threadIdx.z;
  if (token >= a.tokens) return;
  idx_t b = 0, s = (idx_t)token;
  if (FOUR_D) {
    b = (idx_t)sj_fastdiv((unsigned)token, (unsigned)a.seq_div_multiplier, (unsigned)a.seq_div_shift);
    s = (idx_t)token - b * (idx_t)a.seq;
  }
  Token t;
  t.positions = token_positions(a, b, s);
  const bool valid = t.positions.valid;
  t.x = row_offset(a.x_stride, b, s);
  t.y = row_offset(a.y_stride, b, s);
  t.k = HAS_K ? row_offset(a.k_stride, b, s) : 0;
  t.k_out = HAS_K ? row_offset(a.k_out_stride, b, s) : 0;
  if (CHECKED && !valid && threadIdx.x == 0 && threadIdx.y == 0 && blockIdx.y == 0)
    atomicMin(a.bad_token, (unsigned long long)token);
  const idx_t head_first = (idx_t)blockIdx.y * blockDim.y + threadIdx.y;
  const idx_t head_step = (idx_t)gridDim.y * blockDim.y;
  const idx_t heads = (idx_t)a.heads_total;

  for (int c = threadIdx.x; c < ROTATED_CHUNKS; c += blockDim.x) {
    const int first = c * CHUNK;
    // The first head's data does not depend on the position: its loads overlap the table's.
    HeadChunk g;
    if (head_first < heads) load_head(g, a, t, head_first, first);
    compute_t cs[PAIRS], sn[PAIRS];
    load_token_angles(a, t.positions, c * PAIRS, cs, sn);
    for (idx_t h = head_first; h < heads; h += head_step) {
      if (h != head_first) load_head(g, a, t, h, first);
      rotate_head(g, first, cs, sn);
    }
  }

  // Elements past the rotary dim: copied out of place; in place only a bad token's are written (NaN).
  if (PASS_CHUNKS > 0 && (!INPLACE || !valid)) {
    for (int c = threadIdx.x; c < PASS_CHUNKS; c += blockDim.x) {
      const int first = ROTARY_DIM + c * CHUNK;
      for (idx_t h = head_first; h < heads; h += head_step) {
        const Rows rows = head_rows(a, t, h);
        if (valid) {
          data_t v[CHUNK];
          sj_load_elements<CHUNK, ACCESS>(v, rows.in + first);
          sj_store_elements<CHUNK, ACCESS>(rows.out + first, v);
        } else {
          compute_t nan[CHUNK];
#pragma unroll
          for (int j = 0; j < CHUNK; ++j) nan[j] = nan_compute();
          store_chunk(rows.out + first, nan);
        }
      }
    }
  }
}
