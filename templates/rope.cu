// Rotary position embedding, after compute.cu and rope_common.cu. Reads from the specialization:
//   STYLE_NEOX, HEAD_DIM, ROTARY_DIM, FOUR_D, HAS_K, INPLACE, INVERSE, CHECKED,
//   HAS_POSITIONS, POSITIONS_BATCHED, POSITION_AXES, AXIS_RULE, AXIS_LIMIT1..3, CHUNK, ACCESS, TABLE_ACCESS,
//   HAS_CACHE, CACHE_QUANTIZE, K_OUT_SKIPPED, CACHE_ACCESS,
//   data_t, table_t, pos_t (unused without positions), cache_t, slot_t, compute_t, idx_t.
//
// Work split: a thread owns one chunk of CHUNK elements along dhead (for NeoX, the chunk and its
// partner R/2 further on) of one token. It loads that chunk's cos/sin once, then rotates the chunk
// in every head it visits, q heads first, then k heads. Block = (chunks, heads, tokens); grid =
// (token groups, head groups). One head at a time keeps registers low (about 64), so many warps
// stay resident: that hides memory latency better than several heads' loads per thread.
//
// Cache append: v's heads follow k's and are not rotated; k's and v's rows also go, converted to
// cache_t, to the token's slot of the caches (not for a skipped token: a negative slot, or one past
// the cache).

constexpr int HALF = ROTARY_DIM / 2;
constexpr int PAIRS = STYLE_NEOX ? CHUNK : CHUNK / 2;  // table entries one chunk uses
constexpr int ROTATED_CHUNKS = (STYLE_NEOX ? HALF : ROTARY_DIM) / CHUNK;
constexpr int PASS_CHUNKS = (HEAD_DIM - ROTARY_DIM) / CHUNK;

// Rounds CHUNK computed values to data_t and stores them at p, N elements per access: 16-bit
// dtypes two at a time.
template <int N = ACCESS>
__device__ __forceinline__ void store_chunk(data_t* p, const compute_t (&v)[CHUNK]) {
  if constexpr (sizeof(data_t) == 2 && N >= 2) {
    constexpr int WORDS_PER_ACCESS = N / 2;
    sj_access<WORDS_PER_ACCESS, unsigned> words[CHUNK / N];
#pragma unroll
    for (int j = 0; j < CHUNK / 2; ++j)
      words[j / WORDS_PER_ACCESS].elements[j % WORDS_PER_ACCESS] = sj_pair_from_floats<data_t>(v[2 * j], v[2 * j + 1]);
#pragma unroll
    for (int i = 0; i < CHUNK / N; ++i) {
      auto* to = reinterpret_cast<decltype(words[i].bytes)*>(p) + i;
      __builtin_assume(__isGlobal(to));
      *to = words[i].bytes;
    }
  } else {
    data_t d[CHUNK];
#pragma unroll
    for (int j = 0; j < CHUNK; ++j) d[j] = from_compute<data_t>(v[j]);
    sj_store_elements<CHUNK, N>(p, d);
  }
}

template <typename A, typename B>
struct same_type {
  static constexpr bool value = false;
};
template <typename A>
struct same_type<A, A> {
  static constexpr bool value = true;
};

// Stores CHUNK values into a cache row: rounded to cache_t, or as 8-bit codes of value * inverse,
// inverse = 1 / the cache's scale (int8: rounded and clamped to +-127, NaN as 0; fp8 e4m3:
// saturated to +-448, two at a time). (A template, so that only the branch of the cache's type is
// compiled.)
template <typename C>
__device__ __forceinline__ void store_cache(C* p, const compute_t (&v)[CHUNK], float inverse) {
  if constexpr (CACHE_QUANTIZE == 0 && same_type<C, data_t>::value) {
    store_chunk<CACHE_ACCESS>(p, v);
  } else {
    C d[CHUNK];
#pragma unroll
    for (int j = 0; j < CHUNK; ++j) {
      if constexpr (CACHE_QUANTIZE == 1) {
        const float q = (float)v[j] * inverse;
        d[j] = (C)(q != q ? 0 : __float2int_rn(fminf(fmaxf(q, -127.0f), 127.0f)));
      } else if constexpr (CACHE_QUANTIZE == 2) {
        if (CHUNK == 1) {
          d[j] = (C)to_e4m3((float)v[j] * inverse);
        } else if (j % 2 == 1) {
          const unsigned short pair = to_e4m3x2((float)v[j - 1] * inverse, (float)v[j] * inverse);
          d[j - 1] = (C)(pair & 0xff);
          d[j] = (C)(pair >> 8);
        }
      } else if constexpr (sizeof(C) == 8) {
        d[j] = (C)v[j];
      } else {
        d[j] = sj_from_float<C>((float)v[j]);
      }
    }
    sj_store_elements<CHUNK, CACHE_ACCESS>(p, d);
  }
}

__device__ __forceinline__ idx_t row_offset(const long long (&stride)[3], idx_t b, idx_t s) {
  return b * (idx_t)stride[0] + s * (idx_t)stride[1];
}

// One token's view of the arguments: where its rows start in each tensor, and its positions.
// Cache append: whether its slot is inside the cache, where the slot's rows start, the scales.
struct Token {
  idx_t x, y, k, k_out, v;
  TokenPositions positions;
  bool in_cache;
  long long k_cache, v_cache;
  float k_cache_inverse, v_cache_inverse;
};

// The input and output rows (dhead element 0) of head h: q heads first, then k heads, then v heads.
struct Rows {
  const data_t* in;
  data_t* out;     // nullptr: not written (v; k of a plan that writes it to the cache only)
  cache_t* cache;  // nullptr: no cache row (q, or a token not in the cache)
  float cache_inverse;  // 8-bit caches: 1 / the cache's scale
  bool rotates;    // false for v
};

__device__ __forceinline__ Rows head_rows(const RopeArgs& a, const Token& t, idx_t h) {
  if (!HAS_K || h < (idx_t)a.heads_q)
    return {a.x + t.x + h * (idx_t)a.x_stride[2], a.y + t.y + h * (idx_t)a.y_stride[2], nullptr, 1.0f, true};
  h -= (idx_t)a.heads_q;
  if constexpr (HAS_CACHE) {
    const idx_t kv_heads = ((idx_t)a.heads_total - (idx_t)a.heads_q) >> 1;
    if (h >= kv_heads) {
      h -= kv_heads;
      cache_t* cache = t.in_cache ? a.v_cache + t.v_cache + (long long)h * a.v_cache_stride[2] : nullptr;
      return {a.v + t.v + h * (idx_t)a.v_stride[2], nullptr, cache, t.v_cache_inverse, false};
    }
    cache_t* cache = t.in_cache ? a.k_cache + t.k_cache + (long long)h * a.k_cache_stride[2] : nullptr;
    data_t* out = K_OUT_SKIPPED ? nullptr : a.k_out + t.k_out + h * (idx_t)a.k_out_stride[2];
    return {a.k + t.k + h * (idx_t)a.k_stride[2], out, cache, t.k_cache_inverse, true};
  }
  return {a.k + t.k + h * (idx_t)a.k_stride[2], a.k_out + t.k_out + h * (idx_t)a.k_out_stride[2], nullptr, 1.0f, true};
}

// Stores CHUNK values of a head at dhead element `at` to its output and its cache row.
__device__ __forceinline__ void store_values(const Rows& rows, int at, const compute_t (&v)[CHUNK]) {
  if (!HAS_CACHE || rows.out) store_chunk(rows.out + at, v);
  if constexpr (HAS_CACHE)
    if (rows.cache) store_cache(rows.cache + at, v, rows.cache_inverse);
}

// NeoX: the dhead elements of the chunk of pairs from `first` (first's channel) and of their
// partners: R/2 further on, or, with blocks (AXIS_RULE 3), half their block further on (block i
// spans channels [2 L_i, 2 L_{i+1}) for first pairs L_i: 0, the limits, R/2).
__device__ __forceinline__ int block_first_pair(int axis) {
  return axis == 0 ? 0 : axis == 1 ? AXIS_LIMIT1 : axis == 2 ? AXIS_LIMIT2 : axis == 3 ? AXIS_LIMIT3 : HALF;
}
__device__ __forceinline__ int lo_element(int first) {
  if constexpr (AXIS_RULE == 3) return first + block_first_pair(pair_axis(first));
  return first;
}
__device__ __forceinline__ int hi_element(int first) {
  if constexpr (AXIS_RULE == 3) return first + block_first_pair(pair_axis(first) + 1);
  return HALF + first;
}

// One head's chunk at pair `first` (GPT-J: dhead element `first`; NeoX: lo_element, and the
// partner chunk at hi_element).
struct HeadChunk {
  Rows rows;
  data_t lo[CHUNK];
  data_t hi[CHUNK];  // NeoX only
};

__device__ __forceinline__ void load_head(HeadChunk& g, const RopeArgs& a, const Token& t, idx_t h, int first) {
  g.rows = head_rows(a, t, h);
  sj_load_elements<CHUNK, ACCESS>(g.lo, g.rows.in + (STYLE_NEOX ? lo_element(first) : first));
  if constexpr (STYLE_NEOX) sj_load_elements<CHUNK, ACCESS>(g.hi, g.rows.in + hi_element(first));
}

// Asks L1 for the chunk of head h without holding registers for it.
__device__ __forceinline__ void prefetch_head(const RopeArgs& a, const Token& t, idx_t h, int first) {
  const data_t* in = head_rows(a, t, h).in;
  asm volatile("prefetch.global.L1 [%0];" ::"l"(in + (STYLE_NEOX ? lo_element(first) : first)));
  if constexpr (STYLE_NEOX) asm volatile("prefetch.global.L1 [%0];" ::"l"(in + hi_element(first)));
}

// Rotates a loaded chunk (v's: converts it) and stores it: both elements of every pair are loaded
// before any store.
__device__ __forceinline__ void rotate_head(const HeadChunk& g, int first, const compute_t (&cs)[PAIRS],
                                            const compute_t (&sn)[PAIRS]) {
  compute_t lo[CHUNK], hi[CHUNK];
  if (HAS_CACHE && !g.rows.rotates) {
#pragma unroll
    for (int j = 0; j < CHUNK; ++j) {
      lo[j] = to_compute(g.lo[j]);
      if (STYLE_NEOX) hi[j] = to_compute(g.hi[j]);
    }
  } else if constexpr (STYLE_NEOX) {
#pragma unroll
    for (int j = 0; j < CHUNK; ++j) rotate(to_compute(g.lo[j]), to_compute(g.hi[j]), cs[j], sn[j], lo[j], hi[j]);
  } else {
#pragma unroll
    for (int j = 0; j < PAIRS; ++j)
      rotate(to_compute(g.lo[2 * j]), to_compute(g.lo[2 * j + 1]), cs[j], sn[j], lo[2 * j], lo[2 * j + 1]);
  }
  store_values(g.rows, STYLE_NEOX ? lo_element(first) : first, lo);
  if constexpr (STYLE_NEOX) store_values(g.rows, hi_element(first), hi);
}

// Cache append: where token (b, s)'s slot lies in the caches; a slot past the cache is flagged in
// checked mode (the second checked-mode word).
__device__ __forceinline__ void locate_slot(const RopeArgs& a, Token& t, idx_t b, idx_t s, long long token) {
  const long long slot = (long long)a.slots[b * (idx_t)a.slot_stride[0] + s * (idx_t)a.slot_stride[1]];
  t.in_cache = slot >= 0 && slot < a.cache_slots;
  t.k_cache = t.v_cache = 0;
  if (t.in_cache) {
    const long long block = sj_fastdiv((unsigned)slot, (unsigned)a.block_div_multiplier, (unsigned)a.block_div_shift);
    const long long row = slot - block * a.block_size;
    t.k_cache = block * a.k_cache_stride[0] + row * a.k_cache_stride[1];
    t.v_cache = block * a.v_cache_stride[0] + row * a.v_cache_stride[1];
  } else if (CHECKED && slot >= a.cache_slots && threadIdx.x == 0 && threadIdx.y == 0 && blockIdx.y == 0) {
    atomicMin(a.bad_token + 1, (unsigned long long)token);
  }
  t.k_cache_inverse = CACHE_QUANTIZE != 0 ? 1.0f / *a.k_cache_scale : 1.0f;
  t.v_cache_inverse = CACHE_QUANTIZE != 0 ? 1.0f / *a.v_cache_scale : 1.0f;
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
  t.v = HAS_CACHE ? row_offset(a.v_stride, b, s) : 0;
  t.in_cache = false;
  if constexpr (HAS_CACHE) locate_slot(a, t, b, s, token);
  if (CHECKED && !valid && threadIdx.x == 0 && threadIdx.y == 0 && blockIdx.y == 0)
    atomicMin(a.bad_token, (unsigned long long)token);
  const idx_t head_first = (idx_t)blockIdx.y * blockDim.y + threadIdx.y;
  const idx_t head_step = (idx_t)gridDim.y * blockDim.y;
  const idx_t heads = (idx_t)a.heads_total;

  for (int c = threadIdx.x; c < ROTATED_CHUNKS; c += blockDim.x) {
    const int first = c * CHUNK;
    // The first head's data does not depend on the position: its loads overlap the table's. Chunks
    // that load several axes' rows only prefetch it (registers for both would cost occupancy).
    constexpr bool EARLY_HEAD = one_axis_per_chunk(PAIRS);
    HeadChunk g;
    if (head_first < heads) {
      if constexpr (EARLY_HEAD) load_head(g, a, t, head_first, first);
      else prefetch_head(a, t, head_first, first);
    }
    compute_t cs[PAIRS], sn[PAIRS];
    load_token_angles(a, t.positions, c * PAIRS, cs, sn);
    for (idx_t h = head_first; h < heads; h += head_step) {
      if (!EARLY_HEAD || h != head_first) load_head(g, a, t, h, first);
      rotate_head(g, first, cs, sn);
    }
  }

  // Elements past the rotary dim: copied out of place (in place only a bad token's are written,
  // NaN), and to the cache rows.
  if (PASS_CHUNKS > 0 && (!INPLACE || !valid || HAS_CACHE)) {
    for (int c = threadIdx.x; c < PASS_CHUNKS; c += blockDim.x) {
      const int first = ROTARY_DIM + c * CHUNK;
      for (idx_t h = head_first; h < heads; h += head_step) {
        const Rows rows = head_rows(a, t, h);
        const bool nan = !valid && rows.rotates;  // a bad token's q and k
        const bool to_out = (!HAS_CACHE || rows.out) && (!INPLACE || nan);
        if (!to_out && !(HAS_CACHE && rows.cache)) continue;
        data_t v[CHUNK];
        compute_t values[CHUNK];
        if (nan) {
#pragma unroll
          for (int j = 0; j < CHUNK; ++j) values[j] = nan_compute();
          if (to_out) store_chunk(rows.out + first, values);
        } else {
          sj_load_elements<CHUNK, ACCESS>(v, rows.in + first);
          if (to_out) sj_store_elements<CHUNK, ACCESS>(rows.out + first, v);
#pragma unroll
          for (int j = 0; j < CHUNK; ++j) values[j] = to_compute(v[j]);
        }
        if constexpr (HAS_CACHE)
          if (rows.cache) store_cache(rows.cache + first, values, rows.cache_inverse);
      }
    }
  }
}
