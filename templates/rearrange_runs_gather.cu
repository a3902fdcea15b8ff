// rearrange runs, gathering stores: a tile over up to eight dims (rearrange_runs_tile.cu). Both
// sides move aligned vectors whatever the runs' alignment. Loads copy each source run into a
// shared-memory row of PITCH units in 16-byte vectors: a misaligned run's vector is shifted out of
// the two aligned vectors around it (the second read only where it holds a byte of the run). Stores
// write each destination run in aligned vectors of STORE_WORDS 32-bit words, each unit gathered from
// the row and position its tile coordinates give (one constant step apart inside a row of the run's
// innermost dim), 1 to 32 lanes of a warp along each run; the vectors at a run's ends are written in
// aligned pieces. Tiles count along the source run's last dim fastest, then along the destination
// run's last dim, then over the outer dims dim[TILE_DIMS, NUM_DIMS). A block loads its next tile
// while it stores the current one.
constexpr int VEC_UNITS = 16 / UNIT_BYTES;
constexpr int STORE_UNITS = 4 * STORE_WORDS / UNIT_BYTES;
typedef sj_bytes<16> SjVector;
typedef sj_bytes<4 * STORE_WORDS> SjStore;
union SjStoreUnits {
  SjStore v;
  Unit u[STORE_UNITS];
  unsigned w[STORE_WORDS];
};

__host__ __device__ constexpr int sj_src_position(int k) {
  int o = 0;
  while (o + 1 < TILE_DIMS && sj_src_dim(o) != k) ++o;
  return o;
}
// Shared-memory step of tile dim k: within a source run, the product of the run dims before it (in
// source order); across runs, PITCH times the product of the row dims before it.
__host__ __device__ constexpr long long sj_smem_step(int k) {
  const int o = sj_src_position(k);
  long long n = o < SRC_RUN_DIMS ? 1 : PITCH;
  for (int i = o < SRC_RUN_DIMS ? 0 : SRC_RUN_DIMS; i < o; ++i) n *= sj_tile_extent(sj_src_dim(i));
  return n;
}

__device__ constexpr int SMEM_STEP[8] = {(int)sj_smem_step(0), (int)sj_smem_step(1), (int)sj_smem_step(2),
                                         (int)sj_smem_step(3), (int)sj_smem_step(4), (int)sj_smem_step(5),
                                         (int)sj_smem_step(6), (int)sj_smem_step(7)};

constexpr long long VECTORS_S = (L_S + VEC_UNITS - 1) / VEC_UNITS;  // staged vectors of a source run
// Aligned store vectors a destination run of L_D units can touch at any misalignment.
constexpr long long VECTORS_D = STORE_UNITS > 1 ? (L_D + STORE_UNITS - 1) / STORE_UNITS + 1 : L_D;
constexpr int LOAD_ITEMS = (int)((RUNS_S * VECTORS_S + THREADS - 1) / THREADS);
constexpr int PITCH_VECTORS = PITCH / VEC_UNITS;
constexpr int STORE_BYTES = 4 * STORE_WORDS;

// Store slots: each warp covers 32 / LANES_ALONG destination runs with LANES_ALONG lanes along each,
// a vector a lane. Slot n is lane n % 32 of warp item m = n / 32; warp items walk a block of runs
// vector block by vector block. Returns whether the slot holds a vector (none past STORE_SLOTS).
template <int LANES_ALONG>
__host__ __device__ constexpr unsigned sj_vector_blocks() {
  static_assert(32 % LANES_ALONG == 0, "a warp's lanes split evenly over its runs");
  return (unsigned)((VECTORS_D + LANES_ALONG - 1) / LANES_ALONG);
}
template <int LANES_ALONG>
__host__ __device__ constexpr bool sj_store_slot(unsigned n, unsigned& run, unsigned& vector) {
  constexpr unsigned vector_blocks = sj_vector_blocks<LANES_ALONG>();
  const unsigned m = n / 32, lane = n % 32;
  run = m / vector_blocks * (32 / LANES_ALONG) + lane / LANES_ALONG;
  vector = m % vector_blocks * LANES_ALONG + lane % LANES_ALONG;
  return run < RUNS_D && vector < VECTORS_D;
}
template <int LANES_ALONG>
__host__ __device__ constexpr long long sj_store_slots() {
  return sj_vector_blocks<LANES_ALONG>() * ((RUNS_D + 32 / LANES_ALONG - 1) / (32 / LANES_ALONG)) * 32;
}
// Shared-memory unit a slot gathers first, for aligned runs.
template <int LANES_ALONG>
__host__ __device__ constexpr long long sj_first_gather(unsigned n) {
  unsigned slot_run = 0, slot_vector = 0;
  sj_store_slot<LANES_ALONG>(n, slot_run, slot_vector);
  long long run = slot_run, vector = slot_vector, position = 0;
  for (int k = DST_RUN_DIMS; k < TILE_DIMS; ++k) {
    position += run % sj_tile_extent(k) * sj_smem_step(k);
    run /= sj_tile_extent(k);
  }
  long long j = vector * STORE_UNITS;
  for (int k = 0; k < DST_RUN_DIMS; ++k) {
    position += (k + 1 < DST_RUN_DIMS ? j % sj_tile_extent(k) : j) * sj_smem_step(k);
    j /= sj_tile_extent(k);
  }
  return position;
}
// Shared-memory wavefronts of the first warp's first gather: the most distinct 32-bit words in one bank.
template <int LANES_ALONG>
__host__ __device__ constexpr int sj_gather_wavefronts() {
  long long word[32] = {};
  int words_in_bank[32] = {};
  for (unsigned lane = 0; lane < 32; ++lane) {
    unsigned run = 0, vector = 0;
    if (!sj_store_slot<LANES_ALONG>(lane, run, vector)) continue;
    word[lane] = sj_first_gather<LANES_ALONG>(lane) * UNIT_BYTES / 4;
    bool seen = false;
    for (unsigned before = 0; before < lane; ++before) seen = seen || word[before] == word[lane];
    if (!seen) ++words_in_bank[word[lane] % 32];
  }
  int most = 1;
  for (int bank = 0; bank < 32; ++bank) most = words_in_bank[bank] > most ? words_in_bank[bank] : most;
  return most;
}
// Cost of the store pass, in 32nds of a shared-memory wavefront: per warp item, its gathers'
// wavefronts and its store's L2 sectors, each weighed as SECTOR_WAVEFRONTS wavefronts (an SM serves a
// wavefront a cycle; the L2 served about a third of a sector per SM a cycle at full throughput in
// Nsight Compute on an H200). A run's LANES_ALONG vectors span LANES_ALONG * STORE_BYTES bytes from
// a place aligned to STORE_BYTES, so they touch (that span + 32 - STORE_BYTES) / 32 sectors on average.
constexpr long long SECTOR_WAVEFRONTS = 3;
template <int LANES_ALONG>
__host__ __device__ constexpr long long sj_store_cost() {
  const long long sectors_32 = 32 / LANES_ALONG * (LANES_ALONG * STORE_BYTES + 32 - STORE_BYTES);
  return sj_store_slots<LANES_ALONG>() / 32 *
         (32 * STORE_UNITS * sj_gather_wavefronts<LANES_ALONG>() + SECTOR_WAVEFRONTS * sectors_32);
}
__host__ __device__ constexpr int sj_lanes_along() {
  const long long cost[6] = {sj_store_cost<1>(), sj_store_cost<2>(), sj_store_cost<4>(),
                             sj_store_cost<8>(), sj_store_cost<16>(), sj_store_cost<32>()};
  int best = 0;
  for (int i = 1; i < 6; ++i) best = cost[i] < cost[best] ? i : best;
  return 1 << best;
}
constexpr int LANES_ALONG = sj_lanes_along();
constexpr long long STORE_SLOTS = sj_store_slots<LANES_ALONG>();
constexpr int STORE_ITEMS = (int)((STORE_SLOTS + THREADS - 1) / THREADS);

struct SjRunsTile {
  SjTile at;
  Index valid_a, valid_b;
};

__device__ __forceinline__ SjRunsTile sj_runs_tile(const SjArgs& args, Index t) {
  SjRunsTile tile;
  tile.at = sj_tile(args, t, TILE_A, TILE_B, TILE_DIMS, false);
  tile.at.src_base += tile.at.a0 * sj_src_stride(args, PA) + tile.at.b0 * sj_src_stride(args, PB);
  tile.at.dst_base += tile.at.a0 * sj_dst_stride(args, PA) + tile.at.b0 * sj_dst_stride(args, PB);
  tile.valid_a = BOUNDS ? min((Index)TILE_A, sj_extent_a(args) - tile.at.a0) : (Index)TILE_A;
  tile.valid_b = BOUNDS ? min((Index)TILE_B, sj_extent_b(args) - tile.at.b0) : (Index)TILE_B;
  return tile;
}

// A tile's source vectors between their loads and their staging: the aligned vector holding the
// staged vector's first byte and, for a misaligned run, the next one; the staged byte offset plus the
// run's misalignment in bytes (-1: no vector).
struct SjRunsLoaded {
  SjVector low[LOAD_ITEMS], high[LOAD_ITEMS];
  int target[LOAD_ITEMS];
};

// Source run r spans the source order's dims past the run; its vector v is staged at row r, byte 16 v.
__device__ __forceinline__ void sj_runs_load(const SjArgs& args, const Unit* __restrict__ s, const SjRunsTile& tile,
                                             SjRunsLoaded& in) {
  const unsigned src_length = (unsigned)(L_S / TILE_B * tile.valid_b);
#pragma unroll
  for (int i = 0; i < LOAD_ITEMS; ++i) {
    const unsigned n = threadIdx.x + i * THREADS;
    const unsigned r = n / (unsigned)VECTORS_S;
    const unsigned v = n - r * (unsigned)VECTORS_S;
    const int staged = (int)(r * PITCH_VECTORS + v) * 16;
    bool ok = RUNS_S * VECTORS_S % THREADS == 0 || n < RUNS_S * VECTORS_S;
    const Index offset = sj_run_offset<true>(args, r, tile.valid_a, ok, [](int, unsigned) {});
    ok = ok && v * VEC_UNITS < src_length;
    in.target[i] = -1;
    if (!ok) continue;
    const Unit* run = s + (tile.at.src_base + offset);
    const unsigned long long first = (unsigned long long)(run + v * VEC_UNITS);
    const int shift = (int)(first & 15);
    const SjVector* low = reinterpret_cast<const SjVector*>(first - shift);
    in.low[i] = *low;
    // The next aligned vector only where it holds a byte of the run.
    in.high[i] = shift != 0 && (const Unit*)(low + 1) < run + src_length ? low[1] : SjVector{};
    in.target[i] = staged + shift;
  }
}

// Stages each loaded pair shifted right by its misalignment.
__device__ __forceinline__ void sj_runs_stage(const SjRunsLoaded& in, unsigned char* smem_bytes) {
#pragma unroll
  for (int i = 0; i < LOAD_ITEMS; ++i) {
    if (in.target[i] < 0) continue;
    *reinterpret_cast<SjVector*>(smem_bytes + (in.target[i] & ~15)) =
        sj_shifted_vector(in.low[i], in.high[i], in.target[i] & 15);
  }
}

// A staged unit's place, clamped into the staged rows: a vector at a run's end computes places for
// its units outside the run too (reading them costs less than branching around them).
__device__ __forceinline__ unsigned sj_staged(int position) {
  return min((unsigned)position, (unsigned)(RUNS_S * PITCH - 1));
}

// Whether the rows of a short innermost dim (E0 under a store vector) cross dim 1's end at most once
// a vector: a vector's units reach (E0 - 1 + STORE_UNITS - 1) / E0 rows past its first unit's row.
constexpr bool SHORT_ROWS_CROSS_ONCE =
    DST_RUN_DIMS == 2 || sj_tile_extent(1) >= (TILE_E0 - 1 + STORE_UNITS - 1) / TILE_E0;

// What a step past the last index of run dim K adds, beyond dim K's own step, to reach the next index
// of dim K + 1 (a run dim), with the carries it makes into the further run dims from these coordinates.
template <int K>
__device__ __forceinline__ int sj_jump_past(const int (&coordinate)[DST_RUN_DIMS]) {
  int jump = SMEM_STEP[K + 1] - TILE_EXTENT[K] * SMEM_STEP[K];
  bool carry = true;
#pragma unroll
  for (int k = K + 1; k + 1 < DST_RUN_DIMS; ++k) {
    carry = carry && coordinate[k] + 1 == TILE_EXTENT[k];
    jump += carry ? SMEM_STEP[k + 1] - TILE_EXTENT[k] * SMEM_STEP[k] : 0;
  }
  return jump;
}

// Gathers the units of a store vector whose first unit is unit `first` of its destination run
// (negative where the run starts inside the vector); units outside the run read a clamped place.
// `position` and `coordinate` are those of run unit max(first, 0). Inside a row of the run's
// innermost dim units lie SMEM_STEP[0] apart; crossing a row's end adds a jump (with carries into
// the run's further dims). A row of STORE_UNITS units or more is crossed at most once, so each unit's
// position is one select off a constant step; shorter rows give each unit its row and place from
// compile-time offsets and the vector's first place. No branches on the units: a warp's lanes
// cross rows at different units.
__device__ __forceinline__ void sj_gather(const Unit* smem, int first, int position,
                                          int (&coordinate)[DST_RUN_DIMS], SjStoreUnits& out) {
  const int lead = max(-first, 0);  // units of the vector before the run
  if constexpr (DST_RUN_DIMS == 1 || sj_tile_extent(0) >= STORE_UNITS) {
    const int jump = DST_RUN_DIMS > 1 ? sj_jump_past<0>(coordinate) : 0;
    const int before = position - lead * SMEM_STEP[0];
    const int after = before + jump;
    const int cross = DST_RUN_DIMS > 1 ? lead + TILE_EXTENT[0] - coordinate[0] : STORE_UNITS;
#pragma unroll
    for (int u = 0; u < STORE_UNITS; ++u) out.u[u] = smem[sj_staged((u < cross ? before : after) + u * SMEM_STEP[0])];
  } else {
    // Unit u of the vector lies in row (c + u) / E0 of the run's innermost dim counted from the row of
    // the vector's unit 0, at place (c + u) % E0, with c that unit's place: compile-time offsets plus a
    // carry where c + u % E0 passes the row's end. Unit 0 may lie before the run (lead units): its row
    // and place are extended back, rows before the anchor's (read clamped).
    constexpr int E0 = TILE_EXTENT[0];
    constexpr int BACK = (STORE_UNITS - 1 + E0 - 1) / E0;  // rows the lead units can reach back
    const int t = coordinate[0] - lead + BACK * E0;          // >= 0
    const int c = t % E0, row0 = t / E0 - BACK;             // unit 0's place, and row from the anchor's
    constexpr int ROW_END = SMEM_STEP[1] - E0 * SMEM_STEP[0];
    if constexpr (SHORT_ROWS_CROSS_ONCE) {
      // The rows from unit 0's on step SMEM_STEP[1] apart but for one jump past dim 1's end.
      const int base = position + row0 * SMEM_STEP[1] + (c - coordinate[0]) * SMEM_STEP[0];
      // Rows from unit 0's until dim 1 wraps (the last run dim never does).
      const int cross = DST_RUN_DIMS > 2 ? TILE_EXTENT[1] - coordinate[1] - row0 : STORE_UNITS;
      const int jump = DST_RUN_DIMS > 2 ? sj_jump_past<1>(coordinate) : 0;
#pragma unroll
      for (int u = 0; u < STORE_UNITS; ++u) {
        const bool carry = c >= E0 - u % E0;
        const int row = u / E0 + carry;
        out.u[u] = smem[sj_staged(base + (u / E0 * SMEM_STEP[1] + u % E0 * SMEM_STEP[0]) + (carry ? ROW_END : 0) +
                                  (row >= cross ? jump : 0))];
      }
    } else {
      // Dim 1 wraps more than once a vector: place c of each row the units reach, found a row at a
      // time with carries through the run's dims (rows before the anchor's take the anchor's).
      constexpr int ROWS = (STORE_UNITS - 1) / E0 + 2;
      int place_c[ROWS];
      int at = position + (c - coordinate[0]) * SMEM_STEP[0];
      place_c[0] = at;
#pragma unroll
      for (int i = 1; i < ROWS; ++i) {
        if (row0 + i > 0) {
          at += SMEM_STEP[1];
          ++coordinate[1];
#pragma unroll
          for (int k = 1; k + 1 < DST_RUN_DIMS; ++k) {
            const bool wrap = coordinate[k] == TILE_EXTENT[k];
            at += wrap ? SMEM_STEP[k + 1] - TILE_EXTENT[k] * SMEM_STEP[k] : 0;
            coordinate[k] = wrap ? 0 : coordinate[k];
            coordinate[k + 1] += wrap;
          }
        }
        place_c[i] = at;
      }
#pragma unroll
      for (int u = 0; u < STORE_UNITS; ++u) {
        const bool carry = c >= E0 - u % E0;
        const int at_c = carry ? place_c[u / E0 + 1] - E0 * SMEM_STEP[0] : place_c[u / E0];
        out.u[u] = smem[sj_staged(at_c + u % E0 * SMEM_STEP[0])];
      }
    }
  }
}

// Word k of a store vector (selects: a computed index would put the vector in local memory).
__device__ __forceinline__ unsigned sj_word(const SjStoreUnits& out, int k) {
  unsigned x = out.w[0];
#pragma unroll
  for (int i = 1; i < STORE_WORDS; ++i) x = k == i ? out.w[i] : x;
  return x;
}

// Writes bytes [at, at + P) of `out` to `vector` + at (at a multiple of P).
template <int P>
__device__ __forceinline__ void sj_store_aligned_piece(unsigned char* vector, const SjStoreUnits& out, int at) {
  if constexpr (P == 8) {
    const unsigned long long x = (unsigned long long)sj_word(out, at / 4 + 1) << 32 | sj_word(out, at / 4);
    *reinterpret_cast<unsigned long long*>(vector + at) = x;
  } else {
    const unsigned x = sj_word(out, at / 4) >> (at % 4 * 8);
    if constexpr (P == 4) *reinterpret_cast<unsigned*>(vector + at) = x;
    if constexpr (P == 2) *reinterpret_cast<unsigned short*>(vector + at) = (unsigned short)x;
    if constexpr (P == 1) vector[at] = (unsigned char)x;
  }
}

// The same for a piece of p bytes (1, 2, 4 or 8; a constant once the caller's loop is unrolled).
__device__ __forceinline__ void sj_store_aligned(unsigned char* vector, const SjStoreUnits& out, int at, int p) {
  if (p == 1) sj_store_aligned_piece<1>(vector, out, at);
  if (p == 2) sj_store_aligned_piece<2>(vector, out, at);
  if (p == 4) sj_store_aligned_piece<4>(vector, out, at);
  if (p == 8) sj_store_aligned_piece<8>(vector, out, at);
}

// Writes units [lo, hi) of a store vector that the run covers in part, in aligned pieces: up from lo
// until the pieces meet an aligned place, then down to hi (an aligned place takes pieces of the
// remaining length's bits). At most two pieces of each size rather than a store a unit.
__device__ __forceinline__ void sj_store_part(Unit* vector, const SjStoreUnits& out, int lo, int hi) {
  unsigned char* bytes = reinterpret_cast<unsigned char*>(vector);
  int at = lo * UNIT_BYTES;
  const int end = hi * UNIT_BYTES;
#pragma unroll
  for (int p = UNIT_BYTES; p < STORE_BYTES; p *= 2)
    if ((at & p) && at + p <= end) {
      sj_store_aligned(bytes, out, at, p);
      at += p;
    }
#pragma unroll
  for (int p = STORE_BYTES / 2; p >= UNIT_BYTES; p /= 2)
    if ((end - at) & p) {
      sj_store_aligned(bytes, out, at, p);
      at += p;
    }
}

// Writes a whole store vector in one access: nvcc split the 16-byte struct store of 2- and 4-byte
// units into four 32-bit stores. Other vectors keep the plain store, already one access, whose
// address offsets nvcc folds (an asm store cost 1-byte units a register).
__device__ __forceinline__ void sj_store_whole(Unit* vector, const SjStoreUnits& out) {
  if constexpr (UNIT_BYTES > 1 && STORE_WORDS == 4)
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(vector), "r"(out.w[0]), "r"(out.w[1]), "r"(out.w[2]),
                 "r"(out.w[3]));
  else
    *reinterpret_cast<SjStore*>(vector) = out.v;
}

// Destination run r spans dim[DST_RUN_DIMS, TILE_DIMS); its aligned vector w starts `first` units
// into it (negative where the run starts inside the vector). The vectors at a run's two ends are
// written in pieces.
__device__ __forceinline__ void sj_runs_store(const SjArgs& args, Unit* __restrict__ d, const SjRunsTile& tile,
                                              const Unit* smem) {
  const int dst_length = (int)(L_D / TILE_A * tile.valid_a);
#pragma unroll
  for (int i = 0; i < STORE_ITEMS; ++i) {
    unsigned r = 0, w = 0;  // the slot's run and vector
    if (!sj_store_slot<LANES_ALONG>(threadIdx.x + i * THREADS, r, w)) continue;
    int position = 0;
    bool ok = true;
    const Index offset = sj_run_offset<false>(args, r, tile.valid_b, ok,
                                                   [&](int k, unsigned c) { position += (int)c * SMEM_STEP[k]; });
    Unit* run = d + (tile.at.dst_base + offset);
    const int first = (int)w * STORE_UNITS - sj_misalignment(sj_unit_address(run), 0, STORE_UNITS);
    if (!ok || first >= dst_length) continue;
    int coordinate[DST_RUN_DIMS];  // of the run unit max(first, 0)
    unsigned j = (unsigned)max(first, 0);
#pragma unroll
    for (int k = 0; k < DST_RUN_DIMS; ++k) {
      coordinate[k] = k + 1 < DST_RUN_DIMS ? (int)(j % (unsigned)TILE_EXTENT[k]) : (int)j;
      j = k + 1 < DST_RUN_DIMS ? j / (unsigned)TILE_EXTENT[k] : 0;
      position += coordinate[k] * SMEM_STEP[k];
    }
    SjStoreUnits out;
    sj_gather(smem, first, position, coordinate, out);
    Unit* target = run + first;
    if (first >= 0 && first + STORE_UNITS <= dst_length)
      sj_store_whole(target, out);
    else
      sj_store_part(target, out, max(-first, 0), min(STORE_UNITS, dst_length - first));
  }
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
    sj_kernel(char* __restrict__ dst, const char* __restrict__ src, const SjArgs args) {
  __shared__ __align__(16) SjVector smem_vectors[RUNS_S * PITCH_VECTORS];
  unsigned char* smem_bytes = reinterpret_cast<unsigned char*>(smem_vectors);
  const Unit* smem = reinterpret_cast<const Unit*>(smem_vectors);
  Unit* __restrict__ d = reinterpret_cast<Unit*>(dst);
  const Unit* __restrict__ s = reinterpret_cast<const Unit*>(src);
  Index t = blockIdx.x;
  if (t >= sj_num_tiles(args)) return;
  SjRunsTile tile = sj_runs_tile(args, t);
  SjRunsLoaded in;
  sj_runs_load(args, s, tile, in);
  for (;;) {
    sj_runs_stage(in, smem_bytes);
    __syncthreads();
    const Index next_t = t + gridDim.x;
    const bool more = next_t < sj_num_tiles(args);
    SjRunsTile next = tile;
    if (more) {
      next = sj_runs_tile(args, next_t);
      sj_runs_load(args, s, next, in);
    }
    sj_runs_store(args, d, tile, smem);
    if (!more) return;
    __syncthreads();
    tile = next;
    t = next_t;
  }
}
