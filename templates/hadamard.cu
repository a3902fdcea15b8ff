// Grouped-head fast Walsh-Hadamard transform kernel, after compute.cu and hadamard_transform.cu
// (the transform of one row). Reads from the specialization, besides theirs:
//   ROWS_PER_BLOCK, ROW_DIMS, INPLACE, WIDE_INDEX, data_t, idx_t.

struct HadamardDim {
  long long extent, multiplier, shift, x_stride, y_stride;
};

struct HadamardArgs {
  const data_t* x;
  data_t* y;
  long long rows;
  double scale;
  long long x_head_stride, y_head_stride;
  HadamardDim dim[5];
};

// Offsets of row r in x and y: the group index, then the outer dims, innermost first.
__device__ __forceinline__ void row_offsets(const HadamardArgs& a, unsigned r, idx_t& x, idx_t& y) {
  x = 0;
  y = 0;
#pragma unroll
  for (int k = 0; k < ROW_DIMS; ++k) {
    unsigned c = r;
    if (k + 1 < ROW_DIMS) {
      const unsigned q = sj_fastdiv(r, (unsigned)a.dim[k].multiplier, (unsigned)a.dim[k].shift);
      c = r - q * (unsigned)a.dim[k].extent;
      r = q;
    }
    x += (idx_t)c * (idx_t)a.dim[k].x_stride;
    y += (idx_t)c * (idx_t)a.dim[k].y_stride;
  }
}

// Rows with an m-point factor: ptxas otherwise spends registers freely on them (f16 n = 3072: 168
// registers for 48 values), which leaves too few threads per SM to keep loads in flight. Their
// values plus 32 registers suffice, but f16 threads of more than 48 values (f16 -> f32 conversions
// held as well) need 48: n = 3584 spilled 74 bytes at 80 registers and ran at 59% of copy, 80% at 96.
// (Since m-point rows across warps go through bit passes, n = 5120 spills 64 bytes at its 72.)
// 0 asks for nothing: an explicit 1 lets ptxas spend more registers on power-of-two rows (bf16 n =
// 2048: 128 instead of 90, and 66% of copy at n = 16384 instead of 91%).
// (f64 values and their temporaries take two registers each; an SM holds at most 32 blocks.)
constexpr int REGISTERS_PER_VALUE = (int)(sizeof(compute_t) / 4);
template <typename D>
struct is_f16_data {
  static constexpr bool value = false;
};
template <>
struct is_f16_data<sj_f16> {
  static constexpr bool value = true;
};
constexpr int SPARE_REGISTERS = is_f16_data<data_t>::value && VALUES > 48 ? 48 : 32;
constexpr int REGISTER_BLOCKS = (int)(65536 / (T * ROWS_PER_BLOCK * (VALUES + SPARE_REGISTERS) * REGISTERS_PER_VALUE));
constexpr int MIN_BLOCKS = BASE > 1 && REGISTER_BLOCKS > 1 ? (REGISTER_BLOCKS < 32 ? REGISTER_BLOCKS : 32) : 0;

extern "C" __global__ void __launch_bounds__(T * ROWS_PER_BLOCK, MIN_BLOCKS) sj_kernel(const HadamardArgs args) {
  extern __shared__ __align__(16) unsigned char sj_shared[];
  compute_t* row = reinterpret_cast<compute_t*>(sj_shared);
  const int t = threadIdx.x % T;
  const long long rows = args.rows;
  // Every thread runs every iteration (rows past the end only skip memory), so shuffles and
  // barriers see the whole warp and block.
  for (long long first = (long long)blockIdx.x * ROWS_PER_BLOCK; first < rows;
       first += (long long)gridDim.x * ROWS_PER_BLOCK) {
    const long long r = first + threadIdx.x / T;
    const bool live = r < rows;
    idx_t x_row, y_row;
    row_offsets(args, live ? (unsigned)r : 0u, x_row, y_row);
    compute_t v[CHUNKS][VEC];
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      data_t in[VEC];
      if (live) sj_load_elements<VEC, VEC>(in, args.x + x_row + value_offset(chunk_start(c, t), args.x_head_stride));
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[c][e] = live ? to_compute(in[e]) : (compute_t)0;
    }
    transform_row_to_out(v, row, t);
    if (!live) continue;
    const compute_t scale = (compute_t)args.scale;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      data_t out[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) out[e] = from_compute<data_t>(v[c][e] * scale);
      sj_store_elements<VEC, VEC>(args.y + y_row + value_offset(out_start(c, t), args.y_head_stride), out);
    }
  }
}
