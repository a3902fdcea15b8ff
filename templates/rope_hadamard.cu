// Rope fused with a grouped-head Hadamard transform, after compute.cu, hadamard_transform.cu and
// rope_common.cu. Reads from the specialization, besides theirs:
//   STYLE_NEOX, ROTARY_DIM, FOUR_D, HAS_K, CHECKED, HADAMARD_FIRST, ROWS_PER_BLOCK, TABLE_ACCESS,
//   Q_QUANTIZE, K_QUANTIZE.
//
// A row is the GROUP heads of one head group of one token (q's rows first, then k's), laid out
// over THREADS_PER_ROW threads as the transform piece says. The row is loaded once, rotated and
// transformed in registers in the planned order (HADAMARD_FIRST), scaled and stored once. A
// rotation pairs value d of a head with d +- R/2 (NeoX) or d ^ 1 (GPT-J); the partner is found in
// the thread's registers, read again from the input (rotating first), through a shuffle, or in the
// row's copy in shared memory. A token whose position is outside
// the table gets NaN in every value of its rows (quantized: a NaN scale, codes 0 for int8 and NaN for
// fp8). A quantized row is written as 8-bit codes of value / scale with scale = max |value| / 127
// (int8) or / 448 (fp8 e4m3), and its scale; NaN values of a valid row do not enter the scale and
// become code 0 (int8) or NaN (fp8).

constexpr int HALF = ROTARY_DIM / 2;
constexpr int PAIRS = STYLE_NEOX ? VEC : (VEC >= 2 ? VEC / 2 : 1);  // table entries of one chunk
constexpr long long ROW_SLOTS = padded(N);
// Where a value's partner is (the planner's HADAMARD_PARTNER: 1 vector, 2 chunk, 3 lane, 4 memory,
// 5 shared). Value i's partner is i + P or i - P; where P is a power of two, heads hold whole 2P
// blocks and P < POW2, that is i ^ P: one bit of the row index, which the layout puts in the vector,
// the chunk index or the lane. Otherwise, rotating first, the thread reads the partner's input
// again (its own load brought the line close); rotating last, the row goes through shared memory.
constexpr int P = STYLE_NEOX ? HALF : 1;
constexpr bool PAIR_BIT = (P & (P - 1)) == 0 && HEAD_DIM % (2 * P) == 0 && P < POW2;
constexpr bool PARTNER_IN_VECTOR = HADAMARD_PARTNER == 1;
constexpr bool PARTNER_IN_CHUNK = HADAMARD_PARTNER == 2;
constexpr bool PARTNER_IN_LANE = HADAMARD_PARTNER == 3;
constexpr bool PARTNER_IN_MEMORY = HADAMARD_PARTNER == 4;
constexpr bool PARTNER_IN_SHARED = HADAMARD_PARTNER == 5;
static_assert(!PARTNER_IN_VECTOR || P < VEC, "partners in the vector need P < VEC");
static_assert(!PARTNER_IN_CHUNK || (PAIR_BIT && P % (T * VEC) == 0), "partners in another chunk need P on a chunk bit");
static_assert(!PARTNER_IN_LANE || (PAIR_BIT && P / VEC < LANES && P >= VEC), "partners in a lane need P on a lane bit");
static_assert(!PARTNER_IN_MEMORY || !HADAMARD_FIRST, "a second read of the input finds partners only rotating first");
static_assert(HADAMARD_PARTNER >= 1 && HADAMARD_PARTNER <= 5, "no partner kind");
constexpr int PARTNER_CHUNK = PARTNER_IN_CHUNK ? P / (T * VEC) : 0;  // chunk index bit of the partner
// Chunk c's dhead offset is chunk (c % ANGLE_PERIOD)'s where a thread's chunks step by whole heads (or
// divide a head evenly): their angles are then loaded once per row.
constexpr int ANGLE_PERIOD = BASE > 1 && POW2 % HEAD_DIM != 0 ? 0
                             : (T * VEC) % HEAD_DIM == 0      ? 1
                             : HEAD_DIM % (T * VEC) == 0      ? (int)(HEAD_DIM / (T * VEC))
                                                              : 0;
constexpr bool ANGLES_PER_ROW = ANGLE_PERIOD > 0 && ANGLE_PERIOD * PAIRS <= 16;
constexpr int ANGLE_SETS = ANGLES_PER_ROW ? ANGLE_PERIOD : 1;
static_assert((STYLE_NEOX ? HALF : ROTARY_DIM) % VEC == 0, "a vector must stay inside one half of the rotated span");

constexpr bool QUANTIZES = Q_QUANTIZE != 0 || K_QUANTIZE != 0;  // 1: int8 codes, 2: fp8 e4m3 codes

// Where one row lives and which token it belongs to.
struct RowPlace {
  const data_t* in = nullptr;
  data_t* out = nullptr;  // the output tensor; 8-bit codes where the row is quantized
  idx_t out_at = 0;       // the row's first element in it
  long long in_head = 0, out_head = 0;  // head strides
  long long token = 0, position = 0;
  bool valid = false;  // the position lies inside the table
  int quantize = 0;    // Q_QUANTIZE or K_QUANTIZE
  float* scale = nullptr;
};

__device__ __forceinline__ RowPlace row_place(const RopeArgs& a, unsigned r) {
  RowPlace p;
  const bool is_q = !HAS_K || r < (unsigned)a.group_rows[0];
  const unsigned local = is_q ? r : r - (unsigned)a.group_rows[0];
  const unsigned token = sj_fastdiv(local, (unsigned)a.group_div[is_q ? 0 : 2], (unsigned)a.group_div[is_q ? 1 : 3]);
  const unsigned groups = (unsigned)((is_q ? a.heads_q : a.heads_total - a.heads_q) / GROUP);
  const idx_t head = (idx_t)(local - token * groups) * GROUP;
  idx_t b = 0, s = (idx_t)token;
  if (FOUR_D) {
    b = (idx_t)sj_fastdiv(token, (unsigned)a.seq_div_multiplier, (unsigned)a.seq_div_shift);
    s = (idx_t)token - b * (idx_t)a.seq;
  }
  const long long(&in_stride)[3] = is_q ? a.x_stride : a.k_stride;
  const long long(&out_stride)[3] = is_q ? a.y_stride : a.k_out_stride;
  p.in = (is_q ? a.x : a.k) + b * (idx_t)in_stride[0] + s * (idx_t)in_stride[1] + head * (idx_t)in_stride[2];
  p.out = is_q ? a.y : a.k_out;
  p.out_at = b * (idx_t)out_stride[0] + s * (idx_t)out_stride[1] + head * (idx_t)out_stride[2];
  p.in_head = in_stride[2];
  p.out_head = out_stride[2];
  p.token = token;
  p.position = token_position(a, b, s);
  p.valid = p.position >= 0 && p.position < a.table_rows;
  p.quantize = is_q ? Q_QUANTIZE : K_QUANTIZE;
  if (QUANTIZES && p.quantize != 0) {
    const long long(&st)[3] = is_q ? a.q_scale_stride : a.k_scale_stride;
    p.scale = (is_q ? a.q_scale : a.k_scale) + b * (idx_t)st[0] + s * (idx_t)st[1] + (idx_t)(head / GROUP) * (idx_t)st[2];
  }
  return p;
}

// First value of chunk c of thread t as stored: a transform that runs last leaves the row in its
// output layout.
__device__ __forceinline__ long long stored_start(int c, int t) {
  if constexpr (HADAMARD_FIRST) return chunk_start(c, t);
  return out_start(c, t);
}

// The largest |value| of the row, in every thread of it. Every thread of the block calls it.
__device__ __forceinline__ float row_absmax(const compute_t (&v)[CHUNKS][VEC], compute_t* row, int t) {
  float m = 0;
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c)
#pragma unroll
    for (int e = 0; e < VEC; ++e) m = fmaxf(m, fabsf((float)v[c][e]));
#pragma unroll
  for (int h = 1; h < LANES; h <<= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, h));
  if constexpr (WARPS > 1) {
    if (t % 32 == 0) row[t / 32] = m;
    __syncthreads();
#pragma unroll
    for (int w = 0; w < WARPS; ++w) m = fmaxf(m, (float)row[w]);
    __syncthreads();
  }
  return m;
}

// The row's values as codes of value / scale, and the scale (NaN for a token outside the table).
__device__ __forceinline__ void store_codes(const compute_t (&v)[CHUNKS][VEC], const RowPlace& p, float absmax,
                                            int t) {
  const float limit = p.quantize == 1 ? 127.0f : 448.0f;
  const bool normal = absmax >= 0x1p-126f;  // rows of smaller values are written as zeros (limit / absmax overflows)
  const float inverse = normal ? limit / absmax : 0.0f;
  if (t == 0) *p.scale = p.valid ? (normal ? absmax / limit : 0.0f) : __int_as_float(0x7fffffff);
  unsigned char* out = reinterpret_cast<unsigned char*>(p.out) + p.out_at;  // one byte per element
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    unsigned char codes[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float q = (float)v[c][e] * inverse;
      if (p.quantize == 1) {
        codes[e] = (unsigned char)(signed char)max(-127, min(127, __float2int_rn(q)));
      } else if (VEC == 1) {
        codes[e] = to_e4m3(q);
      } else if (e % 2 == 1) {
        const unsigned short pair = to_e4m3x2((float)v[c][e - 1] * inverse, q);
        codes[e - 1] = (unsigned char)pair;
        codes[e] = (unsigned char)(pair >> 8);
      }
    }
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      if (!p.valid) codes[e] = p.quantize == 1 ? 0 : 0x7f;
    sj_store_elements<VEC, VEC>(out + value_offset(stored_start(c, t), p.out_head), codes);
  }
}

// The angles a thread's chunks share (ANGLES_PER_ROW), loaded once per row beside the row's data,
// so that a transform running first hides their latency.
struct RowAngles {
  compute_t cs[ANGLE_SETS][PAIRS], sn[ANGLE_SETS][PAIRS];
};

__device__ __forceinline__ RowAngles row_angles(const RopeArgs& a, const RowPlace& p, int t) {
  RowAngles angles;
  if constexpr (ANGLES_PER_ROW)
#pragma unroll
    for (int c = 0; c < ANGLE_SETS; ++c) {
      const int d = (int)(chunk_start(c, t) % HEAD_DIM);
      if (d < ROTARY_DIM) load_angles(a, p.position, p.valid, STYLE_NEOX ? d % HALF : d / 2, angles.cs[c], angles.sn[c]);
    }
  return angles;
}

// Rotates the row's values in v by the angles of the row's token. Every thread of the block calls
// it (it may shuffle, or pass the row through shared memory).
__device__ __forceinline__ void rotate_row(compute_t (&v)[CHUNKS][VEC], compute_t* row, int t, const RopeArgs& a,
                                           const RowPlace& p, const RowAngles& angles) {
  if constexpr (PARTNER_IN_SHARED) {
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c)
#pragma unroll
      for (int e = 0; e < VEC; ++e) row[padded(chunk_start(c, t) + e)] = v[c][e];
    __syncthreads();
  }
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const long long i = chunk_start(c, t);
    const int d = (int)(i % HEAD_DIM);
    compute_t other[VEC];
    if constexpr (PARTNER_IN_LANE)  // every lane shuffles, passing through or not
#pragma unroll
      for (int e = 0; e < VEC; ++e) other[e] = __shfl_xor_sync(0xffffffffu, v[c][e], P / VEC);
    if (d >= ROTARY_DIM) continue;  // passes through
    if constexpr (PARTNER_IN_CHUNK) {
      if (c & PARTNER_CHUNK) continue;  // rotated with its partner's chunk below
    }
    compute_t cs[PAIRS], sn[PAIRS];
    if constexpr (ANGLES_PER_ROW) {
#pragma unroll
      for (int j = 0; j < PAIRS; ++j) cs[j] = angles.cs[c % ANGLE_SETS][j], sn[j] = angles.sn[c % ANGLE_SETS][j];
    } else {
      load_angles(a, p.position, p.valid, STYLE_NEOX ? d % HALF : d / 2, cs, sn);
    }
    if constexpr (PARTNER_IN_VECTOR) {
#pragma unroll
      for (int j = 0; j < PAIRS; ++j) rotate(v[c][2 * j], v[c][2 * j + 1], cs[j], sn[j], v[c][2 * j], v[c][2 * j + 1]);
    } else if constexpr (PARTNER_IN_CHUNK) {
      constexpr int hi = PARTNER_CHUNK;
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        rotate(v[c][e], v[c | hi][e], cs[STYLE_NEOX ? e : 0], sn[STYLE_NEOX ? e : 0], v[c][e], v[c | hi][e]);
    } else {
      const bool low = STYLE_NEOX ? d < HALF : (d & 1) == 0;
      if constexpr (PARTNER_IN_MEMORY) {
        data_t in[VEC];
        if (p.valid) sj_load_elements<VEC, VEC>(in, p.in + value_offset(low ? i + P : i - P, p.in_head));
#pragma unroll
        for (int e = 0; e < VEC; ++e) other[e] = p.valid ? to_compute(in[e]) : (compute_t)0;
      }
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const int j = STYLE_NEOX ? e : 0;  // GPT-J reaches here with one value per vector
        if constexpr (PARTNER_IN_SHARED) other[e] = row[padded(low ? i + e + P : i + e - P)];
        compute_t y0, y1;
        if (low) rotate(v[c][e], other[e], cs[j], sn[j], y0, y1);
        else rotate(other[e], v[c][e], cs[j], sn[j], y0, y1);
        v[c][e] = low ? y0 : y1;
      }
    }
  }
  if constexpr (PARTNER_IN_SHARED) __syncthreads();  // before the row's memory is written again
}

extern "C" __global__ void __launch_bounds__(T * ROWS_PER_BLOCK) sj_kernel(const RopeArgs args) {
  extern __shared__ __align__(16) unsigned char sj_shared[];
  compute_t* row = reinterpret_cast<compute_t*>(sj_shared) + (threadIdx.x / T) * ROW_SLOTS;
  const int t = threadIdx.x % T;
  const long long rows = args.group_rows[HAS_K ? 1 : 0];
  // Every thread runs every iteration (rows past the end only skip memory), so shuffles and
  // barriers see the whole warp and block.
  for (long long first = (long long)blockIdx.x * ROWS_PER_BLOCK; first < rows;
       first += (long long)gridDim.x * ROWS_PER_BLOCK) {
    const long long r = first + threadIdx.x / T;
    const bool live = r < rows;
    const RowPlace p = live ? row_place(args, (unsigned)r) : RowPlace{};
    compute_t v[CHUNKS][VEC];
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      data_t in[VEC];
      if (live) sj_load_elements<VEC, VEC>(in, p.in + value_offset(chunk_start(c, t), p.in_head));
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[c][e] = live ? to_compute(in[e]) : (compute_t)0;
    }
    const RowAngles angles = row_angles(args, p, t);
    if constexpr (HADAMARD_FIRST) transform_row(v, row, t);
    rotate_row(v, row, t, args, p, angles);
    if constexpr (!HADAMARD_FIRST) transform_row_to_out(v, row, t);
    const compute_t scale = (compute_t)args.hadamard_scale;
    float absmax = 0;
    if constexpr (QUANTIZES) {
#pragma unroll
      for (int c = 0; c < CHUNKS; ++c)
#pragma unroll
        for (int e = 0; e < VEC; ++e) v[c][e] *= scale;
      absmax = row_absmax(v, row, t);
    }
    if (!live) continue;
    if (CHECKED && !p.valid && t == 0) atomicMin(args.bad_token, (unsigned long long)p.token);
    if (QUANTIZES && p.quantize != 0) {
      store_codes(v, p, absmax, t);
      continue;
    }
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      data_t out[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) out[e] = from_compute<data_t>(p.valid ? (QUANTIZES ? v[c][e] : v[c][e] * scale) : nan_compute());
      sj_store_elements<VEC, VEC>(p.out + p.out_at + value_offset(stored_start(c, t), p.out_head), out);
    }
  }
}
