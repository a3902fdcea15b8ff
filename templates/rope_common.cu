// What the rope kernels share (plain rope, and rope fused with a Hadamard transform): the
// argument block, the rotation, a token's position and its angles. Reads INVERSE, HAS_POSITIONS,
// POSITIONS_BATCHED, POSITION_AXES, AXIS_RULE, AXIS_LIMIT1..3, TABLE_ACCESS, data_t, table_t, pos_t,
// cache_t, slot_t, compute_t, idx_t.

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
  // Rope fused with a Hadamard transform: rows (head groups) of q, then of q and k; row -> token
  // as a multiply and shift by the group counts of q and of k; the transform's scale.
  long long group_rows[2], group_div[4];
  double hadamard_scale;
  // Quantized outputs: one f32 scale per row, at these batch, seq and head group strides.
  float* q_scale;
  float* k_scale;
  long long q_scale_stride[3], k_scale_stride[3];
  long long position_axis_stride;  // multi-axis positions
  // Cache append: v, the caches, the slot mapping and the 8-bit caches' scales; strides of v (batch,
  // seq, head), of the caches (block, row in block, head) and of the slots (batch, seq); the cache's
  // slots, block_size and slot / block_size as a multiply and shift.
  const data_t* v;
  cache_t* k_cache;
  cache_t* v_cache;
  const slot_t* slots;
  const float* k_cache_scale;
  const float* v_cache_scale;
  long long v_stride[3], k_cache_stride[3], v_cache_stride[3], slot_stride[2];
  long long cache_slots, block_size, block_div_multiplier, block_div_shift;
};

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

// Position of token (batch b, sequence index s) on an axis: its position id, or s + offset.
__device__ __forceinline__ long long token_position(const RopeArgs& a, idx_t b, idx_t s, int axis = 0) {
  if constexpr (HAS_POSITIONS) {
    idx_t at = s * (idx_t)a.position_stride[1] + (idx_t)axis * (idx_t)a.position_axis_stride;
    if (POSITIONS_BATCHED) at += b * (idx_t)a.position_stride[0];
    return (long long)a.positions[at];  // u64 beyond 2^63 turns negative: out of range either way
  } else {
    return (long long)s + a.offset;
  }
}

// cos and sin of N table entries from column `first` of row `position` (NaN for a position outside
// the table: valid false). L2_LAST: loaded evict-last, for kernels that read each token's row once:
// later tokens read table rows again while q and k stream through once, and L2 then keeps the
// rows rather than the streamed lines. (Kernels that read a row again for each head group read it
// mostly from L1, and hinted loads measured slower there.)
template <int N, bool L2_LAST = false>
__device__ __forceinline__ void load_angles(const RopeArgs& a, long long position, bool valid, int first,
                                            compute_t (&cs)[N], compute_t (&sn)[N]) {
  if (!valid) {
#pragma unroll
    for (int j = 0; j < N; ++j) cs[j] = sn[j] = nan_compute();
    return;
  }
  const idx_t at = (idx_t)position * (idx_t)a.table_stride + first;
  table_t v[N];
  if constexpr (L2_LAST) sj_load_elements_l2_last<N, TABLE_ACCESS>(v, a.cos + at);
  else sj_load_elements<N, TABLE_ACCESS>(v, a.cos + at);
#pragma unroll
  for (int j = 0; j < N; ++j) cs[j] = to_compute(v[j]);
  if constexpr (L2_LAST) sj_load_elements_l2_last<N, TABLE_ACCESS>(v, a.sin + at);
  else sj_load_elements<N, TABLE_ACCESS>(v, a.sin + at);
#pragma unroll
  for (int j = 0; j < N; ++j) sn[j] = to_compute(v[j]);
}

// Multi-axis positions: the axis rotary pair j takes its row from (AXIS_RULE 1: sections and 3:
// blocks, whose first pairs are the limits; 2: interleaved, with limits 3 s_1 and 3 s_2).
__device__ __forceinline__ int pair_axis(int j) {
  if constexpr (AXIS_RULE == 1 || AXIS_RULE == 3) return (j >= AXIS_LIMIT1) + (j >= AXIS_LIMIT2) + (j >= AXIS_LIMIT3);
  if constexpr (AXIS_RULE == 2) return j % 3 == 1 && j < AXIS_LIMIT1 ? 1 : j % 3 == 2 && j < AXIS_LIMIT2 ? 2 : 0;
  return 0;
}

// A token's positions on every axis, and whether all of them lie inside the table.
struct TokenPositions {
  long long p[POSITION_AXES];
  bool valid;
};

__device__ __forceinline__ TokenPositions token_positions(const RopeArgs& a, idx_t b, idx_t s) {
  TokenPositions t;
  t.valid = true;
#pragma unroll
  for (int axis = 0; axis < POSITION_AXES; ++axis) {
    t.p[axis] = token_position(a, b, s, axis);
    t.valid = t.valid && t.p[axis] >= 0 && t.p[axis] < a.table_rows;
  }
  return t;
}

// Whether every chunk of n pairs takes all its angles from one axis's row.
__host__ __device__ constexpr bool one_axis_per_chunk(int n) {
  return POSITION_AXES == 1 ||
         ((AXIS_RULE == 1 || AXIS_RULE == 3) && AXIS_LIMIT1 % n == 0 && AXIS_LIMIT2 % n == 0 && AXIS_LIMIT3 % n == 0);
}

// cos and sin of pairs [first, first + N), first a multiple of N: one row; with multi-axis
// positions, the row of the chunk's axis where sections start at multiples of N, else the N entries
// of every axis's row, each pair taking its own axis's.
template <int N>
__device__ __forceinline__ void load_token_angles(const RopeArgs& a, const TokenPositions& t, int first,
                                                  compute_t (&cs)[N], compute_t (&sn)[N]) {
  if constexpr (one_axis_per_chunk(N)) {
    // Selected by comparisons: a run-time index would put the positions on the stack.
    const int chunk_axis = pair_axis(first);
    long long position = t.p[0];
#pragma unroll
    for (int axis = 1; axis < POSITION_AXES; ++axis)
      if (axis == chunk_axis) position = t.p[axis];
    load_angles<N, true>(a, position, t.valid, first, cs, sn);
  } else {
    compute_t axis_cs[POSITION_AXES][N], axis_sn[POSITION_AXES][N];
#pragma unroll
    for (int axis = 0; axis < POSITION_AXES; ++axis)
      load_angles<N, true>(a, t.p[axis], t.valid, first, axis_cs[axis], axis_sn[axis]);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const int axis = pair_axis(first + j);
      cs[j] = axis_cs[0][j];
      sn[j] = axis_sn[0][j];
#pragma unroll
      for (int other = 1; other < POSITION_AXES; ++other)
        if (axis == other) cs[j] = axis_cs[other][j], sn[j] = axis_sn[other][j];
    }
  }
}
