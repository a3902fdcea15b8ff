// The grouped-head fast Walsh-Hadamard transform of one row held in registers: the piece shared by
// the hadamard kernel and rope fused with a Hadamard transform. Reads from the specialization:
//   HEAD_DIM, GROUP, BASE, VEC, THREADS_PER_ROW, LANE_PASSES, compute_t, and HM (the BASE x BASE signs of the
//   m-point factor; {1} for BASE 1).
//
// A row is one transform of N = GROUP * HEAD_DIM values, value i = a * POW2 + r (a < BASE, r <
// POW2), H = H_BASE (x) H_POW2. THREADS_PER_ROW threads own a row, each VALUES of it as CHUNKS
// accesses of VEC consecutive values: chunk c of thread t starts at a * POW2 + (p * T + t) * VEC with
// a = c / POW2_CHUNKS, p = c % POW2_CHUNKS. Butterflies over the bits of r inside a vector and
// across chunks run in registers, and so does the m-point factor. Over the bits of t: in a row of
// one warp, through shuffles unless LANE_PASSES (a power-of-two row of one warp, which the host
// gives shared memory); in a row of several warps, in passes through shared memory (the last of
// them, where that saves one, in the layout the row is stored from: out_start).

constexpr long long N = GROUP * HEAD_DIM;
constexpr long long POW2 = N / BASE;
constexpr int T = THREADS_PER_ROW;
constexpr int VALUES = (int)(N / T);
constexpr int CHUNKS = VALUES / VEC;
constexpr int POW2_CHUNKS = (int)(POW2 / (T * VEC));
constexpr int LANES = T < 32 ? T : 32;
constexpr int WARPS = T / LANES;
static_assert(POW2_CHUNKS * T * VEC == POW2 && CHUNKS == BASE * POW2_CHUNKS, "a row does not split evenly");
static_assert(HEAD_DIM % VEC == 0, "a vector must stay inside one head");

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
__host__ __device__ constexpr long long padded(long long i) { return i + (i >> 5); }

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

// The m-point factor (m = 12, 20 or 28, a multiple of four): each quad of inputs gives its eight
// sums a +- b +- c +- d once (14 adds), and each output adds the one its signs select from every
// quad, so m outputs cost 14 m/4 + m (m/4 - 1) adds instead of m (m - 1): 5.5 per value for m = 12,
// 9.5 for m = 28.
template <int M>
__device__ __forceinline__ void base_factor(compute_t (&x)[M]) {
  static_assert(M == BASE && M % 4 == 0, "the m-point factor goes by quads");
  constexpr int QUADS = M / 4;
  compute_t sums[QUADS][8];  // index bits 0..2: b, c, d taken with the sign opposite to a's
#pragma unroll
  for (int q = 0; q < QUADS; ++q) {
    const compute_t a = x[4 * q], b = x[4 * q + 1], c = x[4 * q + 2], d = x[4 * q + 3];
    const compute_t ab[2] = {a + b, a - b};
    const compute_t abc[4] = {ab[0] + c, ab[1] + c, ab[0] - c, ab[1] - c};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      sums[q][i] = abc[i] + d;
      sums[q][i + 4] = abc[i] - d;
    }
  }
#pragma unroll
  for (int o = 0; o < M; ++o) {
    compute_t total = 0;
#pragma unroll
    for (int q = 0; q < QUADS; ++q) {
      const long long* signs = HM + o * M + 4 * q;
      const bool negative = signs[0] < 0;
      const int pick = ((signs[1] < 0) != negative) | ((signs[2] < 0) != negative) << 1 | ((signs[3] < 0) != negative) << 2;
      const compute_t term = sums[q][pick];
      total = q == 0 ? (negative ? -term : term) : (negative ? total - term : total + term);
    }
    x[o] = total;
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
        base_factor(in);
#pragma unroll
        for (int a = 0; a < BASE; ++a) v[a * POW2_CHUNKS + p][e] = in[a];
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

// ---- rows across several warps (and LANE_PASSES rows): bit passes through shared memory --------
// Value a * POW2 + r, r's bits: e (the vector) at [0, LOG_VEC), t at [LOG_VEC, LOG_VEC + LOG_T), the
// chunk above. After the in-thread step (e and chunk bits, the m-point factor), the t bits of r go
// in passes of up to WIN bits: in pass j thread t' holds every combination of that pass's bits (slot
// s's low bits), its own bits and s's high bits filling the other positions, lowest first, so lanes
// read consecutive words. In m-point rows a thread holds WIN bits of r (two more than in its load
// layout) for a quarter of a (SLICES values a_lo, a = a_hi * SLICES + a_lo, a_hi the thread's top
// two bits), so the passes need no shuffles: n = 3072 takes two shared-memory round trips, where
// shuffles over the lanes and one exchange for the warps cost as much as four and a half.
// Bits are disjoint and a's steps are multiples of 32, so a padded position splits into a
// per-thread and a per-slot part.
// Passes cover the t bits below END; a transform that stores from the output layout leaves the
// top OUT_WIDTH t bits to it (see out_start).
__host__ __device__ constexpr int sj_log2(long long v) { return v > 1 ? 1 + sj_log2(v / 2) : 0; }
constexpr int LOG_VEC = sj_log2(VEC), LOG_T = sj_log2(T), LOG_V = sj_log2(VALUES);
constexpr bool BIT_PASSES = WARPS > 1 || LANE_PASSES;
static_assert(!LANE_PASSES || (T == 32 && BASE == 1), "lane passes are for power-of-two rows of one warp");
static_assert(BASE % 4 == 0 || BASE == 1, "m-point passes split a by quarters");
static_assert(BASE > 1 || (1LL << (LOG_V + LOG_T)) == N, "a power-of-two row splits by bits");
constexpr int WIN = BASE == 1 ? LOG_V : sj_log2(4 * VALUES / BASE);  // r bits a thread holds in a pass
// Thread bits on r (0 in m-point rows of fewer than four threads, which take no passes).
constexpr int TBITS = BASE == 1 ? LOG_T : LOG_T > 2 ? LOG_T - 2 : 0;
constexpr int SLICES = VALUES >> WIN;  // how many values of a (the m-point index) a thread holds in a pass
// The output layout holds the vector bits and the OUT_WIDTH t bits above the passes' (plus chunk
// bits where fewer remain), and leaves at least four t bits to the lanes below them so that 16
// lanes store their vectors side by side. It is used where it saves a pass (bf16 n = 4096 on an
// H200: 83% of copy -> 94%); with as many passes it ran 3-5 points slower at n = 8192.
constexpr int OUT_WIDTH_MAX = WIN - LOG_VEC < LOG_T - 4 ? WIN - LOG_VEC : LOG_T - 4;
constexpr bool OUT_LAYOUT = BIT_PASSES && (LOG_T - OUT_WIDTH_MAX + WIN - 1) / WIN < (LOG_T + WIN - 1) / WIN;
constexpr int OUT_WIDTH = OUT_LAYOUT ? OUT_WIDTH_MAX : 0;
constexpr int OUT_FIRST = LOG_VEC + LOG_T - OUT_WIDTH;  // lowest position of the held high bits
// An m-point thread holds two bits of r more than a pass covers there (a_hi took two of its own):
// they fit below the top of r only above two held t bits. Rows across warps (LOG_T >= 6) have them.
static_assert(BASE == 1 || !OUT_LAYOUT || OUT_WIDTH >= 2, "an m-point output layout needs two held t bits");

__host__ __device__ constexpr int pass_first(int j) { return LOG_VEC + j * WIN; }
template <int END>
__host__ __device__ constexpr int pass_width(int j) {
  return pass_first(j) + WIN <= END ? WIN : END - pass_first(j);
}
// Bits laid on the positions outside pass j's, from position `from` up: those below the pass stay,
// the rest step over it.
template <int END>
__host__ __device__ constexpr long long around_pass(int j, long long bits, int from) {
  const int below = pass_first(j) > from ? pass_first(j) - from : 0;
  const long long low = below >= 62 ? bits : bits & ((1LL << below) - 1);
  return (low << from) | ((bits >> below) << (from + below + pass_width<END>(j)));
}
// The slot part of value positions in pass j: s's low bits on the pass's bits, its high bits on the
// positions above the thread's, its slice on a.
template <int END>
__host__ __device__ constexpr long long pass_slot_part(int j, int s) {
  const int r_slot = s & ((1 << WIN) - 1);
  return (long long)(s >> WIN) * padded(POW2) +
         padded(((long long)(r_slot & ((1 << pass_width<END>(j)) - 1)) << pass_first(j)) |
                around_pass<END>(j, r_slot >> pass_width<END>(j), TBITS));
}
// The thread part of every position of thread t: a_hi on a, its other bits on r.
__device__ __forceinline__ long long thread_a_part(int t) { return padded((long long)(t >> TBITS) * SLICES * POW2); }
__device__ __forceinline__ int thread_r_bits(int t) { return t & ((1 << TBITS) - 1); }

// Pass J and the ones after it up to the bits below END, on the row in shared memory.
template <int END, int J = 0>
__device__ __forceinline__ void bit_passes(compute_t* row, int t) {
  if constexpr (pass_first(J) < END) {
    constexpr int WIDTH = pass_width<END>(J);
    const long long base = thread_a_part(t) + padded(around_pass<END>(J, thread_r_bits(t), 0));
    compute_t u[VALUES];
#pragma unroll
    for (int s = 0; s < VALUES; ++s) u[s] = row[base + pass_slot_part<END>(J, s)];
#pragma unroll
    for (int high = 0; high < VALUES >> WIDTH; ++high)
      butterflies<1 << WIDTH>([&](int b) -> compute_t& { return u[(high << WIDTH) + b]; });
#pragma unroll
    for (int s = 0; s < VALUES; ++s) row[base + pass_slot_part<END>(J, s)] = u[s];
    __syncthreads();
    bit_passes<END, J + 1>(row, t);
  }
}

__device__ __forceinline__ long long natural_position(int c, int e) { return padded(chunk_start(c, 0) + e); }

// The row from the in-thread layout to shared memory, passes over the t bits below END.
template <int END>
__device__ __forceinline__ void passes_from_registers(const compute_t (&v)[CHUNKS][VEC], compute_t* row, int t) {
  const long long natural = padded((long long)t * VEC);
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c)
#pragma unroll
    for (int e = 0; e < VEC; ++e) row[natural + natural_position(c, e)] = v[c][e];
  __syncthreads();
  bit_passes<END>(row, t);
}

// First value of chunk c of thread t in the output layout: its lanes' vectors lie side by side,
// chunks step over the held high bits of r and the thread's slices of a.
// r bits above the vector that the chunk index holds in the output layout (chunk bits included).
constexpr int OUT_HELD = WIN - LOG_VEC;
__device__ __forceinline__ long long out_thread_part(int t) {
  constexpr int LOW = OUT_FIRST - LOG_VEC;  // t bits below the held ones
  const int r = thread_r_bits(t);
  return (long long)(t >> TBITS) * SLICES * POW2 + ((long long)(r & ((1 << LOW) - 1)) << LOG_VEC) +
         ((long long)(r >> LOW) << (OUT_FIRST + OUT_HELD));
}
__device__ __forceinline__ long long out_slot_part(int c) {
  return (long long)(c >> OUT_HELD) * POW2 + ((long long)(c & ((1 << OUT_HELD) - 1)) << OUT_FIRST);
}
__device__ __forceinline__ long long out_start(int c, int t) {
  if constexpr (!OUT_LAYOUT) return chunk_start(c, t);
  return out_thread_part(t) + out_slot_part(c);
}

// The unscaled transform of the row in v, in place; `row` is the row's shared memory (padded(N)
// values), used by bit passes (BIT_PASSES). Every thread of the block calls it.
__device__ __forceinline__ void transform_row(compute_t (&v)[CHUNKS][VEC], compute_t* row, int t) {
  transform_in_thread(v);
  if constexpr (BIT_PASSES) {
    passes_from_registers<LOG_VEC + LOG_T>(v, row, t);
    const long long natural = padded((long long)t * VEC);
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c)
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[c][e] = row[natural + natural_position(c, e)];
    __syncthreads();
  } else if constexpr (LANES > 1) {
    transform_across_lanes(v, t);
  }
}

// The same transform, leaving chunk c's values at out_start(c, t) rather than chunk_start(c, t):
// the last t bits are done in the layout the row is stored from, one shared-memory round trip
// fewer.
__device__ __forceinline__ void transform_row_to_out(compute_t (&v)[CHUNKS][VEC], compute_t* row, int t) {
  if constexpr (OUT_LAYOUT) {
    transform_in_thread(v);
    passes_from_registers<OUT_FIRST>(v, row, t);
    const long long thread_part = padded(out_thread_part(t));
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c)
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[c][e] = row[thread_part + padded(out_slot_part(c) + e)];
#pragma unroll
    for (int e = 0; e < VEC; ++e)
#pragma unroll
      for (int high = 0; high < CHUNKS >> OUT_WIDTH; ++high)
        butterflies<1 << OUT_WIDTH>([&](int b) -> compute_t& { return v[(high << OUT_WIDTH) + b][e]; });
    __syncthreads();
  } else {
    transform_row(v, row, t);
  }
}
