// Grouped-head fast Walsh-Hadamard transform. Reads from the specialization:
//   HEAD_DIM, GROUP, BASE, VEC, THREADS_PER_ROW, ROWS_PER_BLOCK, ROW_DIMS, INPLACE, WIDE_INDEX,
//   data_t, compute_t, idx_t, and HM (the BASE x BASE signs of the m-point factor; {1} for BASE 1).
//
// A row is one transform of N = GROUP * HEAD_DIM values, value i = a * POW2 + r (a < BASE, r <
// POW2), H = H_BASE (x) H_POW2. THREADS_PER_ROW threads own a row, each VALUES of it as CHUNKS
// accesses of VEC consecutive values: chunk c of thread t starts at a * POW2 + (p * T + t) * VEC with
// a = c / POW2_CHUNKS, p = c % POW2_CHUNKS. Butterflies over the bits of r inside a vector and
// across chunks run in registers, over the lane bits of t through shuffles, and over the warp bits
// of t after an exchange through shared memory; the m-point factor runs in registers.

constexpr long long N = GROUP * HEAD_DIM;
constexpr long long POW2 = N / BASE;
constexpr int T = THREADS_PER_ROW;
constexpr int VALUES = (int)(N / T);
constexpr int CHUNKS = VALUES / VEC;
constexpr int POW2_CHUNKS = (int)(POW2 / (T * VEC));
constexpr int LANES = T < 32 ? T : 32;
constexpr int WARPS = T / LANES;
constexpr int SLOTS = (VALUES + WARPS - 1) / WARPS;  // values a thread holds per warp in the exchange
static_assert(POW2_CHUNKS * T * VEC == POW2 && CHUNKS == BASE * POW2_CHUNKS, "a row does not split evenly");
static_assert(HEAD_DIM % VEC == 0, "a vector must stay inside one head");

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

// Value i of a row, as an element offset from the row's first: head i / HEAD_DIM of the group.
__device__ __forceinline__ idx_t value_offset(long long i, long long head_stride) {
  const long long head = i / HEAD_DIM;
  return (idx_t)(head * head_stride + (i - head * HEAD_DIM));
}

// First value of chunk c of thread t.
__device__ __forceinline__ long long chunk_start(int c, int t) {
  return (long long)(c / POW2_CHUNKS) * POW2 + ((long long)(c % POW2_CHUNKS) * T + t) * VEC;
}

// Shared-memory slot of value i: one word of padding per 32, so lanes VEC values apart hit
// different banks.
__device__ __forceinline__ int staged(long long i) { return (int)(i + (i >> 5)); }

// Butterflies over the bits of a power-of-two index inside the thread: v[j], v[j ^ h].
template <int COUNT, typename Get>
__device__ __forceinline__ void butterflies(Get&& at) {
#pragma unroll
  for (int h = 1; h < COUNT; h <<= 1)
#pragma unroll
    for (int j = 0; j < COUNT; ++j)
      if ((j & h) == 0) {
        compute_t& lo = at(j);
        compute_t& hi = at(j | h);
        const compute_t sum = lo + hi;
        hi = lo - hi;
        lo = sum;
      }
}

__device__ __forceinline__ void transform_in_thread(compute_t (&v)[CHUNKS][VEC]) {
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) butterflies<VEC>([&](int e) -> compute_t& { return v[c][e]; });
#pragma unroll
  for (int a = 0; a < BASE; ++a)
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      butterflies<POW2_CHUNKS>([&](int p) -> compute_t& { return v[a * POW2_CHUNKS + p][e]; });
  if constexpr (BASE > 1) {
#pragma unroll
    for (int p = 0; p < POW2_CHUNKS; ++p)
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        compute_t in[BASE];
#pragma unroll
        for (int a = 0; a < BASE; ++a) in[a] = v[a * POW2_CHUNKS + p][e];
#pragma unroll
        for (int a = 0; a < BASE; ++a) {
          compute_t sum = 0;
#pragma unroll
          for (int b = 0; b < BASE; ++b) sum += HM[a * BASE + b] > 0 ? in[b] : -in[b];
          v[a * POW2_CHUNKS + p][e] = sum;
        }
      }
  }
}

// Butterflies over the lane bits of t: the partner holds the same chunk with that bit flipped.
__device__ __forceinline__ void transform_across_lanes(compute_t (&v)[CHUNKS][VEC], int t) {
#pragma unroll
  for (int h = 1; h < LANES; h <<= 1) {
    const compute_t sign = (t & h) ? (compute_t)-1 : (compute_t)1;  // the upper partner keeps other - v
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c)
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[c][e] = sign * v[c][e] + __shfl_xor_sync(0xffffffffu, v[c][e], h);
  }
}

// Butterflies over the warp bits of t: the row goes through shared memory, where thread (w', l)
// takes slots s = w' + WARPS * j of every thread (w, l), does the butterflies over w, and puts them
// back.
__device__ __forceinline__ void transform_across_warps(compute_t (&v)[CHUNKS][VEC], compute_t* row, int t) {
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c)
#pragma unroll
    for (int e = 0; e < VEC; ++e) row[staged(chunk_start(c, t) + e)] = v[c][e];
  __syncthreads();
  const int lane = t % 32, warp = t / 32;
  compute_t u[SLOTS][WARPS];
#pragma unroll
  for (int j = 0; j < SLOTS; ++j) {
    const int s = warp + WARPS * j;
    if (VALUES % WARPS == 0 || s < VALUES) {
#pragma unroll
      for (int w = 0; w < WARPS; ++w) u[j][w] = row[staged(chunk_start(s / VEC, w * 32 + lane) + s % VEC)];
      butterflies<WARPS>([&](int w) -> compute_t& { return u[j][w]; });
#pragma unroll
      for (int w = 0; w < WARPS; ++w) row[staged(chunk_start(s / VEC, w * 32 + lane) + s % VEC)] = u[j][w];
    }
  }
  __syncthreads();
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c)
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[c][e] = row[staged(chunk_start(c, t) + e)];
  __syncthreads();
}

extern "C" __global__ void __launch_bounds__(T * ROWS_PER_BLOCK) sj_kernel(const HadamardArgs args) {
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
    transform_in_thread(v);
    if constexpr (LANES > 1) transform_across_lanes(v, t);
    if constexpr (WARPS > 1) transform_across_warps(v, row, t);
    if (!live) continue;
    const compute_t scale = (compute_t)args.scale;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      data_t out[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) out[e] = from_compute<data_t>(v[c][e] * scale);
      sj_store_elements<VEC, VEC>(args.y + y_row + value_offset(chunk_start(c, t), args.y_head_stride), out);
    }
  }
}
