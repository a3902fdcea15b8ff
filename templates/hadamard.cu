// Grouped-head fast Walsh-Hadamard transform kernel, after compute.cu and hadamard_transform.cu
// (the transform of one row). Reads from the specialization, besides theirs:
//   ROWS_PER_BLOCK, ROW_DIMS, INPLACE, WIDE_INDEX, PREFETCH, EXCHANGE_BYTES, SHARED_BYTES, data_t, idx_t.

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
constexpr int SPARE_REGISTERS = sj_is_f16<data_t> && VALUES > 48 ? 48 : 32;
constexpr int REGISTER_BLOCKS = (int)(65536 / (T * ROWS_PER_BLOCK * (VALUES + SPARE_REGISTERS) * REGISTERS_PER_VALUE));
// No more blocks than the SM's shared memory holds (SHARED_BYTES a block, plus 1 KB the driver
// keeps): a cap past them only starves the registers (H200, f32 rows prefetching their copies:
// n = 3584 58% -> 81% of copy, 7168 64% -> 85%, 5120 70% -> 81% when ptxas is not held to 11, 5
// and 7 blocks where 7, 3 and 5 fit).
#if __CUDA_ARCH__ == 800 || __CUDA_ARCH__ == 870
constexpr long long SM_SHARED_BYTES = 164 * 1024;
#elif __CUDA_ARCH__ == 900 || __CUDA_ARCH__ == 1000 || __CUDA_ARCH__ == 1030
constexpr long long SM_SHARED_BYTES = 228 * 1024;
#else
constexpr long long SM_SHARED_BYTES = 100 * 1024;  // sm_86, sm_89, sm_120, and what is not listed
#endif
constexpr int SHARED_BLOCKS = SHARED_BYTES > 0 ? (int)(SM_SHARED_BYTES / (SHARED_BYTES + 1024)) : 32;
constexpr int FITTING_BLOCKS = REGISTER_BLOCKS < SHARED_BLOCKS ? REGISTER_BLOCKS : SHARED_BLOCKS;
constexpr int MIN_BLOCKS = BASE > 1 && FITTING_BLOCKS > 1 ? (FITTING_BLOCKS < 32 ? FITTING_BLOCKS : 32) : 0;

// With PREFETCH, a block's next rows are copied into shared memory past its EXCHANGE_BYTES (cp.async,
// no registers held) while it transforms these: a block alone on its SM otherwise leaves DRAM idle
// between its loads. Each thread copies and later reads only its own chunks, so the copies need no
// barrier; a slot is copied into again only after the thread has read it into registers.
#if __CUDA_ARCH__ >= 800
constexpr bool ASYNC_COPIES = true;
#else
constexpr bool ASYNC_COPIES = false;  // cp.async is sm_80 and later: plain loads before
#endif
constexpr int ACCESS_BYTES = VEC * (int)sizeof(data_t);
static_assert(!PREFETCH || ACCESS_BYTES == 4 || ACCESS_BYTES == 8 || ACCESS_BYTES == 16, "copies of 4, 8 or 16 bytes");
constexpr bool PREFETCHED = PREFETCH && ASYNC_COPIES;
constexpr int BLOCK_THREADS = T * ROWS_PER_BLOCK;
static_assert(EXCHANGE_BYTES % 16 == 0, "copy slots start 16-byte aligned");
static_assert(SHARED_BYTES == EXCHANGE_BYTES + (PREFETCH ? N * ROWS_PER_BLOCK * (long long)sizeof(data_t) : 0),
              "the host's shared memory holds the exchange and the copies");

__device__ __forceinline__ void sj_copy_async(void* shared, const void* global) {
  const unsigned to = (unsigned)__cvta_generic_to_shared(shared);
  if constexpr (ACCESS_BYTES == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(to), "l"(global) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(to), "l"(global), "n"(ACCESS_BYTES) : "memory");
}

// This thread's slot for chunk c of its row in the copied rows.
__device__ __forceinline__ data_t* copy_slot(unsigned char* shared, int c) {
  return reinterpret_cast<data_t*>(shared + EXCHANGE_BYTES) + ((long long)c * BLOCK_THREADS + threadIdx.x) * VEC;
}

// Starts copying this thread's chunks of row r (nothing past the last row).
__device__ __forceinline__ void prefetch_row(const HadamardArgs& args, unsigned char* shared, long long r, int t) {
  if (r >= args.rows) return;
  idx_t x_row, y_row;
  row_offsets(args, (unsigned)r, x_row, y_row);
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c)
    sj_copy_async(copy_slot(shared, c), args.x + x_row + value_offset(chunk_start(c, t), args.x_head_stride));
}

// Stores one vector of results times `scale`; 2-byte data converts them two at a time.
template <typename D>
__device__ __forceinline__ void store_scaled(D* to, const compute_t (&v)[VEC], compute_t scale) {
  if constexpr (sizeof(D) == 2 && VEC % 2 == 0) {
    union {
      sj_bytes<VEC * 2> bytes;
      unsigned words[(VEC + 1) / 2];
    } out;
#pragma unroll
    for (int p = 0; p < VEC / 2; ++p) out.words[p] = sj_pair_from_floats<D>(v[2 * p] * scale, v[2 * p + 1] * scale);
    *reinterpret_cast<decltype(out.bytes)*>(to) = out.bytes;
  } else {
    D out[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) out[e] = from_compute<D>(v[e] * scale);
    sj_store_elements<VEC, VEC>(to, out);
  }
}

extern "C" __global__ void __launch_bounds__(T * ROWS_PER_BLOCK, MIN_BLOCKS) sj_kernel(const HadamardArgs args) {
  extern __shared__ __align__(16) unsigned char sj_shared[];
  compute_t* row = reinterpret_cast<compute_t*>(sj_shared);
  const int t = threadIdx.x % T;
  const long long rows = args.rows;
  const long long step = (long long)gridDim.x * ROWS_PER_BLOCK;
  if constexpr (PREFETCHED) prefetch_row(args, sj_shared, (long long)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / T, t);
  // Every thread runs every iteration (rows past the end only skip memory), so shuffles and
  // barriers see the whole warp and block.
  for (long long first = (long long)blockIdx.x * ROWS_PER_BLOCK; first < rows; first += step) {
    const long long r = first + threadIdx.x / T;
    const bool live = r < rows;
    idx_t x_row, y_row;
    row_offsets(args, live ? (unsigned)r : 0u, x_row, y_row);
    compute_t v[CHUNKS][VEC];
    if constexpr (PREFETCHED) asm volatile("cp.async.wait_all;" ::: "memory");
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      data_t in[VEC];
      if (live) {
        if constexpr (PREFETCHED) {
          sj_access<VEC, data_t> a;
          a.bytes = *reinterpret_cast<const decltype(a.bytes)*>(copy_slot(sj_shared, c));
#pragma unroll
          for (int e = 0; e < VEC; ++e) in[e] = a.elements[e];
        } else {
          sj_load_elements<VEC, VEC>(in, args.x + x_row + value_offset(chunk_start(c, t), args.x_head_stride));
        }
      }
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[c][e] = live ? to_compute(in[e]) : (compute_t)0;
    }
    if constexpr (PREFETCHED) prefetch_row(args, sj_shared, r + step, t);
    transform_row_to_out(v, row, t);
    if (!live) continue;
    const compute_t scale = (compute_t)args.scale;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      store_scaled(args.y + y_row + value_offset(out_start(c, t), args.y_head_stride), v[c], scale);
    }
  }
}
