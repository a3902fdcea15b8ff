// rearrange runs, scattering loads: a tile over up to eight dims (rearrange_runs_tile.cu). Both sides
// move aligned 32-bit words whatever the runs' alignment: a source word is read whole and its units
// inside the run are scattered into shared memory, where each destination run is a row of PITCH
// units; a destination word is funnel-shifted out of two staged words, and only the words at a run's
// ends are written unit by unit. Tiles count along the source run's last dim fastest, then
// along the destination run's last dim, then over the outer dims dim[TILE_DIMS, NUM_DIMS).
constexpr int WORD_UNITS = UNIT_BYTES >= 4 ? 1 : 4 / UNIT_BYTES;
typedef unsigned int SjWord;

// Shared-memory step of dim k: within a destination run, the product of the dims inside it; across
// runs, PITCH times the product of the run dims before it.
__host__ __device__ constexpr long long sj_smem_step(int k) {
  long long n = k < DST_RUN_DIMS ? 1 : PITCH;
  for (int j = k < DST_RUN_DIMS ? 0 : DST_RUN_DIMS; j < k; ++j) n *= sj_tile_extent(j);
  return n;
}

__device__ constexpr int SMEM_STEP[8] = {(int)sj_smem_step(0), (int)sj_smem_step(1), (int)sj_smem_step(2),
                                         (int)sj_smem_step(3), (int)sj_smem_step(4), (int)sj_smem_step(5),
                                         (int)sj_smem_step(6), (int)sj_smem_step(7)};

// Aligned words a run of L units can touch at any misalignment.
constexpr long long WORDS_D = WORD_UNITS > 1 ? (L_D + WORD_UNITS - 1) / WORD_UNITS + 1 : L_D;
constexpr long long WORDS_S = WORD_UNITS > 1 ? (L_S + WORD_UNITS - 1) / WORD_UNITS + 1 : L_S;
constexpr int LOAD_ITEMS = (int)((RUNS_S * WORDS_S + THREADS - 1) / THREADS);
constexpr int STORE_ITEMS = (int)((RUNS_D * WORDS_D + THREADS - 1) / THREADS);
// Staged runs start one word in, so a funnel shift may read the word before a run's first.
constexpr long long SMEM_UNITS = (RUNS_D * PITCH + 2 * WORD_UNITS + WORD_UNITS - 1) / WORD_UNITS * WORD_UNITS;

__device__ __forceinline__ Unit sj_word_unit(SjWord w, int u) {
  Unit out;
  out.v = (decltype(out.v))(w >> (u * UNIT_BYTES * 8 % 32));
  return out;
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
    sj_kernel(char* __restrict__ dst, const char* __restrict__ src, const SjArgs args) {
  __shared__ __align__(16) SjWord smem_words[SMEM_UNITS / WORD_UNITS];
  Unit* smem = reinterpret_cast<Unit*>(smem_words);
  Unit* __restrict__ d = reinterpret_cast<Unit*>(dst);
  const Unit* __restrict__ s = reinterpret_cast<const Unit*>(src);

  for (Index t = blockIdx.x; t < sj_num_tiles(args); t += gridDim.x) {
    SjTile tile = sj_tile(args, t, TILE_A, TILE_B, TILE_DIMS, false);
    tile.src_base += tile.a0 * sj_src_stride(args, PA) + tile.b0 * sj_src_stride(args, PB);
    tile.dst_base += tile.a0 * sj_dst_stride(args, PA) + tile.b0 * sj_dst_stride(args, PB);
    const Index valid_a = BOUNDS ? min((Index)TILE_A, sj_extent_a(args) - tile.a0) : (Index)TILE_A;
    const Index valid_b = BOUNDS ? min((Index)TILE_B, sj_extent_b(args) - tile.b0) : (Index)TILE_B;

    // Source runs: run r spans the source order's dims past the run, word w its w-th aligned word.
    // Unsigned positions: a unit before its run wraps past the run's length and is skipped.
    SjWord loaded[LOAD_ITEMS];
    unsigned first_unit[LOAD_ITEMS];  // run position of the word's unit 0
    int staged_run[LOAD_ITEMS];       // shared-memory position of the run's unit 0
    bool live[LOAD_ITEMS];
    const unsigned src_length = (unsigned)(L_S / TILE_B * valid_b);
#pragma unroll
    for (int i = 0; i < LOAD_ITEMS; ++i) {
      const unsigned n = threadIdx.x + i * THREADS;
      const unsigned r = n / (unsigned)WORDS_S;
      const unsigned w = n - r * (unsigned)WORDS_S;
      int staged = WORD_UNITS;
      bool ok = RUNS_S * WORDS_S % THREADS == 0 || n < RUNS_S * WORDS_S;
      const Index offset =
          sj_run_offset<true>(args, r, valid_a, ok, [&](int k, unsigned c) { staged += (int)c * SMEM_STEP[k]; });
      const Unit* run = s + (tile.src_base + offset);
      const unsigned first = w * WORD_UNITS - sj_misalignment(sj_unit_address(run), 0, WORD_UNITS);
      ok = ok && (int)first < (int)src_length;
      first_unit[i] = first;
      staged_run[i] = staged;
      live[i] = ok;
      if (ok) loaded[i] = *reinterpret_cast<const SjWord*>(run + (int)first);
    }
#pragma unroll
    for (int i = 0; i < LOAD_ITEMS; ++i) {
      if (!live[i]) continue;
      if (SRC_RUN_DIMS == 1) {
        // One dim: the word's units lie one constant step apart in shared memory.
        const int base = staged_run[i] + (int)first_unit[i] * SMEM_STEP[PB];
#pragma unroll
        for (int u = 0; u < WORD_UNITS; ++u)
          if (first_unit[i] + u < src_length) smem[base + u * SMEM_STEP[PB]] = sj_word_unit(loaded[i], u);
        continue;
      }
#pragma unroll
      for (int u = 0; u < WORD_UNITS; ++u) {
        unsigned j = first_unit[i] + u;
        if (j >= src_length) continue;
        int position = staged_run[i];
#pragma unroll
        for (int o = 0; o < SRC_RUN_DIMS; ++o) {
          const int k = sj_src_dim(o);
          const unsigned c = o + 1 < SRC_RUN_DIMS ? j % (unsigned)TILE_EXTENT[k] : j;
          j = o + 1 < SRC_RUN_DIMS ? j / (unsigned)TILE_EXTENT[k] : 0;
          position += (int)c * SMEM_STEP[k];
        }
        smem[position] = sj_word_unit(loaded[i], u);
      }
    }
    __syncthreads();

    // Destination runs: run r spans dim[DST_RUN_DIMS, TILE_DIMS), word w its w-th aligned word.
    const unsigned dst_length = (unsigned)(L_D / TILE_A * valid_a);
#pragma unroll
    for (int i = 0; i < STORE_ITEMS; ++i) {
      const unsigned n = threadIdx.x + i * THREADS;
      if (RUNS_D * WORDS_D % THREADS != 0 && n >= RUNS_D * WORDS_D) continue;
      const unsigned r = n / (unsigned)WORDS_D;
      const unsigned w = n - r * (unsigned)WORDS_D;
      const int staged = WORD_UNITS + (int)r * PITCH;
      bool ok = true;
      const Index offset = sj_run_offset<false>(args, r, valid_b, ok, [](int, unsigned) {});
      Unit* run = d + (tile.dst_base + offset);
      const unsigned first = w * WORD_UNITS - sj_misalignment(sj_unit_address(run), 0, WORD_UNITS);
      if (!ok || (int)first >= (int)dst_length) continue;
      if (WORD_UNITS == 1) {
        run[first] = smem[staged + first];
        continue;
      }
      // Run unit `first` is staged at (staged + w * W) - misalignment: the top of staged word
      // high - 1 and the bottom of word high, shifted right by the misalignment's complement.
      const int high = (staged + (int)w * WORD_UNITS) / WORD_UNITS;
      const unsigned misaligned = w * WORD_UNITS - first;
      const SjWord value = __funnelshift_rc(smem_words[high - 1], smem_words[high],
                                            (WORD_UNITS - misaligned) * UNIT_BYTES * 8);
      Unit* target = run + (int)first;
      if (first < dst_length && first + WORD_UNITS <= dst_length) {
        *reinterpret_cast<SjWord*>(target) = value;
      } else {
#pragma unroll
        for (int u = 0; u < WORD_UNITS; ++u)
          if (first + u < dst_length) target[u] = sj_word_unit(value, u);
      }
    }
    __syncthreads();
  }
}
