// What the rope kernels share (plain rope, and rope fused with a Hadamard transform): the
// argument block, the rotation, a token's position and its angles. Reads INVERSE, HAS_POSITIONS,
// POSITIONS_BATCHED, TABLE_ACCESS, data_t, table_t, pos_t, compute_t, idx_t.

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

// Position of token (batch b, sequence index s): its position id, or s + offset.
__device__ __forceinline__ long long token_position(const RopeArgs& a, idx_t b, idx_t s) {
  if constexpr (HAS_POSITIONS) {
    idx_t at = s * (idx_t)a.position_stride[1];
    if (POSITIONS_BATCHED) at += b * (idx_t)a.position_stride[0];
    return (long long)a.positions[at];  // u64 beyond 2^63 turns negative: out of range either way
  } else {
    return (long long)s + a.offset;
  }
}

// cos and sin of N table entries from column `first` of row `position` (NaN for a position outside
// the table: valid false).
template <int N>
__device__ __forceinline__ void load_angles(const RopeArgs& a, long long position, bool valid, int first,
                                            compute_t (&cs)[N], compute_t (&sn)[N]) {
  if (!valid) {
#pragma unroll
    for (int j = 0; j < N; ++j) cs[j] = sn[j] = nan_compute();
    return;
  }
  const idx_t at = (idx_t)position * (idx_t)a.table_stride + first;
  table_t v[N];
  sj_load_elements<N, TABLE_ACCESS>(v, a.cos + at);
#pragma unroll
  for (int j = 0; j < N; ++j) cs[j] = to_compute(v[j]);
  sj_load_elements<N, TABLE_ACCESS>(v, a.sin + at);
#pragma unroll
  for (int j = 0; j < N; ++j) sn[j] = to_compute(v[j]);
}
