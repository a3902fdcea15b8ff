// Rotary position embedding. Reads from the specialization:
//   STYLE_NEOX, HEAD_DIM, ROTARY_DIM, FOUR_D, HAS_K, INPLACE, INVERSE, CHECKED,
//   HAS_POSITIONS, POSITIONS_BATCHED, CHUNK, ACCESS, TABLE_ACCESS,
//   data_t, table_t, pos_t (unused without positions), compute_t, idx_t.
//
// Work split: a thread owns one chunk of CHUNK elements along dhead (for NeoX, the chunk and its
// partner R/2 further on) of one token. It loads that chunk's cos/sin once, then rotates the chunk
// in every head it visits, q heads first, then k heads, HEADS_UNROLL heads' loads in flight at a
// time. Block = (chunks, heads, tokens); grid = (token groups, head groups).

constexpr int HALF = ROTARY_DIM / 2;
constexpr int PAIRS = STYLE_NEOX ? CHUNK : CHUNK / 2;  // table entries one chunk uses
constexpr int ROTATED_CHUNKS = (STYLE_NEOX ? HALF : ROTARY_DIM) / CHUNK;
constexpr int PASS_CHUNKS = (HEAD_DIM - ROTARY_DIM) / CHUNK;
constexpr int HEADS_UNROLL = 4;

struct RopeArgs {
  const data_t* x;
  data_t* y;
  const data_t* k;
  data_t* k_out;
  const table_t* cos;
  const table_t* sin;
  const pos_t* positions;
  unsigned long long* bad_token;
  long long tokens, seq, heads_q, heads_total, seq_div_multiplier, seq_div_shift;
  long long x_stride[3], y_stride[3], k_stride[3], k_out_stride[3];  // batch, seq, head
  long long position_stride[2];                                     // batch, seq
  long long table_rows, table_stride, offset;
};

template <typename T>
__device__ __forceinline__ compute_t to_compute(T v) {
  if constexpr (sizeof(compute_t) == 8) return sj_to_double(v);
  else return sj_to_float(v);
}

template <typename T>
__device__ __forceinline__ T from_compute(compute_t v) {
  if constexpr (sizeof(compute_t) == 8) return v;  // f64 data only
  else return sj_from_float<T>(v);
}

__device__ __forceinline__ compute_t nan_compute() {
  if constexpr (sizeof(compute_t) == 8) return sj_nan_double();
  else return sj_nan_float();
}

// W elements of T seen as one W * sizeof(T)-byte access.
template <int W, typename T>
union Access {
  sj_bytes<W * sizeof(T)> bytes;
  T elements[W];
};

// N elements at p (aligned to W elements) as N/W accesses of W elements.
template <int N, int W, typename T>
__device__ __forceinline__ void load_elements(T (&v)[N], const T* p) {
#pragma unroll
  for (int i = 0; i < N / W; ++i) {
    Access<W, T> a;
    const auto* from = reinterpret_cast<const decltype(a.bytes)*>(p) + i;
    __builtin_assume(__isGlobal(from));  // lets the compiler use global, not generic, loads
    a.bytes = *from;
#pragma unroll
    for (int j = 0; j < W; ++j) v[i * W + j] = a.elements[j];
  }
}

template <int N, int W, typename T>
__device__ __forceinline__ void store_elements(T* p, const T (&v)[N]) {
#pragma unroll
  for (int i = 0; i < N / W; ++i) {
    Access<W, T> a;
#pragma unroll
    for (int j = 0; j < W; ++j) a.elements[j] = v[i * W + j];
    auto* to = reinterpret_cast<decltype(a.bytes)*>(p) + i;
    __builtin_assume(__isGlobal(to));
    *to = a.bytes;
  }
}

__device__ __forceinline__ idx_t row_offset(const long long (&stride)[3], idx_t b, idx_t s) {
  return b * (idx_t)stride[0] + s * (idx_t)stride[1];
}

// The input and output rows (dhead element 0) of head h: q heads first, then k heads.
struct Rows {
  const data_t* in;
  data_t* out;
};

__device__ __forceinline__ Rows head_rows(const RopeArgs& a, idx_t x_token, idx_t y_token, idx_t k_token,
                                          idx_t k_out_token, idx_t h) {
  if (!HAS_K || h < (idx_t)a.heads_q)
    return {a.x + x_token + h * (idx_t)a.x_stride[2], a.y + y_token + h * (idx_t)a.y_stride[2]};
  h -= (idx_t)a.heads_q;
  return {a.k + k_token + h * (idx_t)a.k_stride[2], a.k_out + k_out_token + h * (idx_t)a.k_out_stride[2]};
}

__device__ __forceinline__ long long token_position(const RopeArgs& a, idx_t b, idx_t s) {
  if constexpr (HAS_POSITIONS) {
    idx_t at = s * (idx_t)a.position_stride[1];
    if (POSITIONS_BATCHED) at += b * (idx_t)a.position_stride[0];
    return (long long)a.positions[at];  // u64 beyond 2^63 turns negative: out of range either way
  } else {
    return (long long)s + a.offset;
  }
}

// (x0, x1) -> (y0, y1) rotated by the angle with cosine c and sine s (by -angle when INVERSE).
__device__ __forceinline__ void rotate(compute_t x0, compute_t x1, compute_t c, compute_t s, compute_t& y0,
                                       compute_t& y1) {
  if (INVERSE) {
    y0 = x0 * c + x1 * s;
    y1 = x1 * c - x0 * s;
  } else {
    y0 = x0 * c - x1 * s;
    y1 = x0 * s + x1 * c;
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
  const long long position = token_position(a, b, s);
  const bool valid = position >= 0 && position < a.table_rows;
  if (CHECKED && !valid && threadIdx.x == 0 && threadIdx.y == 0 && blockIdx.y == 0)
    atomicMin(a.bad_token, (unsigned long long)token);

  const idx_t x_token = row_offset(a.x_stride, b, s), y_token = row_offset(a.y_stride, b, s);
  const idx_t k_token = HAS_K ? row_offset(a.k_stride, b, s) : 0;
  const idx_t k_out_token = HAS_K ? row_offset(a.k_out_stride, b, s) : 0;
  const idx_t head_first = (idx_t)blockIdx.y * blockDim.y + threadIdx.y;
  const idx_t head_step = (idx_t)gridDim.y * blockDim.y;
  const idx_t heads = (idx_t)a.heads_total;

  for (int c = threadIdx.x; c < ROTATED_CHUNKS; c += blockDim.x) {
    compute_t cs[PAIRS], sn[PAIRS];
    if (valid) {
      const idx_t at = (idx_t)position * (idx_t)a.table_stride + c * PAIRS;
      table_t t[PAIRS];
      load_elements<PAIRS, TABLE_ACCESS>(t, a.cos + at);
#pragma unroll
      for (int j = 0; j < PAIRS; ++j) cs[j] = to_compute(t[j]);
      load_elements<PAIRS, TABLE_ACCESS>(t, a.sin + at);
#pragma unroll
      for (int j = 0; j < PAIRS; ++j) sn[j] = to_compute(t[j]);
    } else {
#pragma unroll
      for (int j = 0; j < PAIRS; ++j) cs[j] = sn[j] = nan_compute();
    }

    for (idx_t h0 = head_first; h0 < heads; h0 += HEADS_UNROLL * head_step) {
      // Every load of the group first, then every store: in place, a pair is read before it is written.
      Rows rows[HEADS_UNROLL];
      data_t lo[HEADS_UNROLL][CHUNK], hi[HEADS_UNROLL][CHUNK];  // hi: NeoX only
#pragma unroll
      for (int u = 0; u < HEADS_UNROLL; ++u) {
        const idx_t h = h0 + u * head_step;
        if (h < heads) {
          rows[u] = head_rows(a, x_token, y_token, k_token, k_out_token, h);
          load_elements<CHUNK, ACCESS>(lo[u], rows[u].in + c * CHUNK);
          if constexpr (STYLE_NEOX) load_elements<CHUNK, ACCESS>(hi[u], rows[u].in + HALF + c * CHUNK);
        }
      }
#pragma unroll
      for (int u = 0; u < HEADS_UNROLL; ++u) {
        if (h0 + u * head_step < heads) {
          if constexpr (STYLE_NEOX) {
#pragma unroll
            for (int j = 0; j < CHUNK; ++j) {
              compute_t y0, y1;
              rotate(to_compute(lo[u][j]), to_compute(hi[u][j]), cs[j], sn[j], y0, y1);
              lo[u][j] = from_compute<data_t>(y0);
              hi[u][j] = from_compute<data_t>(y1);
            }
            store_elements<CHUNK, ACCESS>(rows[u].out + c * CHUNK, lo[u]);
            store_elements<CHUNK, ACCESS>(rows[u].out + HALF + c * CHUNK, hi[u]);
          } else {
#pragma unroll
            for (int j = 0; j < PAIRS; ++j) {
              compute_t y0, y1;
              rotate(to_compute(lo[u][2 * j]), to_compute(lo[u][2 * j + 1]), cs[j], sn[j], y0, y1);
              lo[u][2 * j] = from_compute<data_t>(y0);
              lo[u][2 * j + 1] = from_compute<data_t>(y1);
            }
            store_elements<CHUNK, ACCESS>(rows[u].out + c * CHUNK, lo[u]);
          }
        }
      }
    }
  }

  // Elements past the rotary dim: copied out of place; in place only a bad token's are written (NaN).
  if (PASS_CHUNKS > 0 && (!INPLACE || !valid)) {
    for (int c = threadIdx.x; c < PASS_CHUNKS; c += blockDim.x) {
      for (idx_t h0 = head_first; h0 < heads; h0 += HEADS_UNROLL * head_step) {
        Rows rows[HEADS_UNROLL];
        data_t v[HEADS_UNROLL][CHUNK];
#pragma unroll
        for (int u = 0; u < HEADS_UNROLL; ++u) {
          const idx_t h = h0 + u * head_step;
          if (h < heads) {
            rows[u] = head_rows(a, x_token, y_token, k_token, k_out_token, h);
            if (valid) load_elements<CHUNK, ACCESS>(v[u], rows[u].in + ROTARY_DIM + c * CHUNK);
            else
#pragma unroll
              for (int j = 0; j < CHUNK; ++j) v[u][j] = from_compute<data_t>(nan_compute());
          }
        }
#pragma unroll
        for (int u = 0; u < HEADS_UNROLL; ++u)
          if (h0 + u * head_step < heads) store_elements<CHUNK, ACCESS>(rows[u].out + ROTARY_DIM + c * CHUNK, v[u]);
      }
    }
  }
}
