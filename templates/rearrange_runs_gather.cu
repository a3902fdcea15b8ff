// rearrange runs, gathering stores: a tile over up to eight dims (rearrange_runs_tile.cu). Both
// sides move aligned vectors whatever the runs' alignment. Loads copy each source run into a
// shared-memory row of PITCH units in 16-byte vectors: a misaligned run's vector is shifted out of
// the two aligned vectors around it (the second read only where it holds a byte of the run). Stores
// write each destination run in aligned vectors of STORE_WORDS 32-bit words, each unit gathered from
// the row and position its tile coordinates give (one constant step apart inside a row of the run's
// innermost dim); only the vectors at a run's ends are written unit by unit. Tiles count along the
// source run's last dim fastest, then along the destination run's last dim, then over the outer dims
// dim[TILE_DIMS, NUM_DIMS). A block loads its next tile while it stores the current one.
constexpr int VEC_UNITS = 16 / UNIT_BYTES;
constexpr int STORE_UNITS = 4 * STORE_WORDS / UNIT_BYTES;
typedef sj_bytes<16> SjVector;
typedef sj_bytes<4 * STORE_WORDS> SjStore;
union SjStoreUnits {
  SjStore v;
  Unit u[STORE_UNITS];
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
constexpr int STORE_ITEMS = (int)((RUNS_D * VECTORS_D + THREADS - 1) / THREADS);
constexpr int PITCH_VECTORS = PITCH / VEC_UNITS;

// Store item n is destination run n / VECTORS_D, vector n % VECTORS_D (lanes along a run), or with
// ACROSS_RUNS run n % RUNS_D, vector n / RUNS_D (lanes across runs).
__host__ __device__ constexpr void sj_store_item(long long n, bool across_runs, long long& run, long long& vector) {
  run = across_runs ? n % RUNS_D : n / VECTORS_D;
  vector = across_runs ? n / RUNS_D : n % VECTORS_D;
}
// Shared-memory unit a warp's lane gathers first, for an aligned run (the first lanes of a tile).
__host__ __device__ constexpr long long sj_first_gather(int lane, bool across_runs) {
  long long run = 0, vector = 0, position = 0;
  sj_store_item(lane, across_runs, run, vector);
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
// Shared-memory wavefronts of a warp's first gather: the most distinct 32-bit words in one bank.
__host__ __device__ constexpr int sj_gather_wavefronts(bool across_runs) {
  long long word[32] = {};
  int words_in_bank[32] = {};
  for (int lane = 0; lane < 32; ++lane) {
    word[lane] = sj_first_gather(lane, across_runs) * UNIT_BYTES / 4;
    bool seen = false;
    for (int before = 0; before < lane; ++before) seen = seen || word[before] == word[lane];
    if (!seen) ++words_in_bank[word[lane] % 32];
  }
  int most = 0;
  for (int bank = 0; bank < 32; ++bank) most = words_in_bank[bank] > most ? words_in_bank[bank] : most;
  return most;
}
// Lanes walk across runs where that spreads a warp's gathers over more banks (a destination run
// whose innermost dim steps a whole row, or a small even step, puts every lane in a few banks).
constexpr bool ACROSS_RUNS = sj_gather_wavefronts(true) < sj_gather_wavefronts(false);

// Units of a pointer past its last aligned store vector.
__device__ __forceinline__ int sj_misalignment(const Unit* p) {
  return (int)(((unsigned long long)p / UNIT_BYTES) & (STORE_UNITS - 1));
}

struct SjRunsTile {
  SjTile at;
  Index valid_a, valid_b;
};

__device__ __forceinline__ SjRunsTile sj_runs_tile(const SjArgs& args, long long t) {
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

// Shifts each loaded pair right by its misalignment: whole words by selects, then bytes by funnel shifts.
__device__ __forceinline__ void sj_runs_stage(const SjRunsLoaded& in, unsigned char* smem_bytes) {
#pragma unroll
  for (int i = 0; i < LOAD_ITEMS; ++i) {
    if (in.target[i] < 0) continue;
    const int shift = in.target[i] & 15;
    const unsigned x[8] = {in.low[i].v[0],  in.low[i].v[1],  in.low[i].v[2],  in.low[i].v[3],
                           in.high[i].v[0], in.high[i].v[1], in.high[i].v[2], in.high[i].v[3]};
    unsigned z[6], y[5];
#pragma unroll
    for (int k = 0; k < 6; ++k) z[k] = shift & 8 ? x[k + 2] : x[k];
#pragma unroll
    for (int k = 0; k < 5; ++k) y[k] = shift & 4 ? z[k + 1] : z[k];
    SjVector out;
#pragma unroll
    for (int k = 0; k < 4; ++k) out.v[k] = __funnelshift_r(y[k], y[k + 1], (shift & 3) * 8);
    *reinterpret_cast<SjVector*>(smem_bytes + (in.target[i] & ~15)) = out;
  }
}

// Destination run r spans dim[DST_RUN_DIMS, TILE_DIMS); its aligned vector w starts `first` units
// into it (negative where the run starts inside the vector). A vector inside the run and inside one
// row of the run's innermost dim gathers its units one constant step apart; the others step unit by
// unit, carrying into the run's outer dims.
__device__ __forceinline__ void sj_runs_store(const SjArgs& args, Unit* __restrict__ d, const SjRunsTile& tile,
                                              const Unit* smem) {
  const int dst_length = (int)(L_D / TILE_A * tile.valid_a);
#pragma unroll
  for (int i = 0; i < STORE_ITEMS; ++i) {
    const unsigned n = threadIdx.x + i * THREADS;
    if (RUNS_D * VECTORS_D % THREADS != 0 && n >= RUNS_D * VECTORS_D) continue;
    const unsigned r = ACROSS_RUNS ? n % (unsigned)RUNS_D : n / (unsigned)VECTORS_D;
    const unsigned w = ACROSS_RUNS ? n / (unsigned)RUNS_D : n - r * (unsigned)VECTORS_D;
    int position = 0;
    bool ok = true;
    const Index offset = sj_run_offset<false>(args, r, tile.valid_b, ok,
                                                   [&](int k, unsigned c) { position += (int)c * SMEM_STEP[k]; });
    Unit* run = d + (tile.at.dst_base + offset);
    const int first = (int)w * STORE_UNITS - sj_misalignment(run);
    if (!ok || first >= dst_length) continue;
    int coordinate[DST_RUN_DIMS];  // of the vector's first unit inside the run
    unsigned j = (unsigned)max(first, 0);
#pragma unroll
    for (int k = 0; k < DST_RUN_DIMS; ++k) {
      coordinate[k] = k + 1 < DST_RUN_DIMS ? (int)(j % (unsigned)TILE_EXTENT[k]) : (int)j;
      j = k + 1 < DST_RUN_DIMS ? j / (unsigned)TILE_EXTENT[k] : 0;
      position += coordinate[k] * SMEM_STEP[k];
    }
    const bool whole = first >= 0 && first + STORE_UNITS <= dst_length;
    SjStoreUnits out;
    if (whole && (DST_RUN_DIMS == 1 || coordinate[0] + STORE_UNITS <= TILE_EXTENT[0])) {
#pragma unroll
      for (int u = 0; u < STORE_UNITS; ++u) out.u[u] = smem[position + u * SMEM_STEP[0]];
    } else {
#pragma unroll
      for (int u = 0; u < STORE_UNITS; ++u) {
        if (first + u < 0 || first + u >= dst_length) continue;
        out.u[u] = smem[position];
        position += SMEM_STEP[0];
        ++coordinate[0];
#pragma unroll
        for (int k = 0; k + 1 < DST_RUN_DIMS; ++k)
          if (coordinate[k] == TILE_EXTENT[k]) {
            coordinate[k] = 0;
            position += SMEM_STEP[k + 1] - TILE_EXTENT[k] * SMEM_STEP[k];
            ++coordinate[k + 1];
          }
      }
    }
    Unit* target = run + first;
    if (whole) {
      *reinterpret_cast<SjStore*>(target) = out.v;
    } else {
#pragma unroll
      for (int u = 0; u < STORE_UNITS; ++u)
        if (first + u >= 0 && first + u < dst_length) target[u] = out.u[u];
    }
  }
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
    sj_kernel(char* __restrict__ dst, const char* __restrict__ src, const SjArgs args) {
  __shared__ __align__(16) SjVector smem_vectors[RUNS_S * PITCH_VECTORS];
  unsigned char* smem_bytes = reinterpret_cast<unsigned char*>(smem_vectors);
  const Unit* smem = reinterpret_cast<const Unit*>(smem_vectors);
  Unit* __restrict__ d = reinterpret_cast<Unit*>(dst);
  const Unit* __restrict__ s = reinterpret_cast<const Unit*>(src);
  long long t = blockIdx.x;
  if (t >= sj_num_tiles(args)) return;
  SjRunsTile tile = sj_runs_tile(args, t);
  SjRunsLoaded in;
  sj_runs_load(args, s, tile, in);
  for (;;) {
    sj_runs_stage(in, smem_bytes);
    __syncthreads();
    const long long next_t = t + gridDim.x;
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
