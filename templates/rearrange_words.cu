// rearrange words: a transpose of 1-byte units that moves aligned 32-bit words on both sides
// whatever the row pitches, so odd extents and strides cost no narrow accesses.
// dim[0] = A (dst stride 1), dim[1] = B (src stride 1), then the outer dims, innermost first.
//
// A word holds W units. A thread loads a block of W source rows x one word along B (SKEW_LOAD: the
// two aligned words around a misaligned row's word, funnel-shifted together), transposes it in
// registers into W words of W rows each, and writes them to shared memory: row b of the tile holds
// its A units in words. Stores: destination row b owns, in the tile at (a0, b0), the A range
// [a0 - s(b), a0 + TILE_A - s(b)), where s(b) < W is the row's misalignment (0 without
// SKEW_STORE); its words are aligned in dst, and each is funnel-shifted out of two shared words.
// So a tile loads one extra group of W rows before a0 when stores are skewed.
static_assert(UNIT_BYTES == 1, "word tiles move 1-byte units");
constexpr int W = 4;                                 // units per word
constexpr int WORDS_A = TILE_A / W;                  // store words per destination row of a tile
constexpr int GROUPS_A = WORDS_A + (SKEW_STORE ? 1 : 0);  // groups of W source rows a tile loads
constexpr int WORDS_B = TILE_B / W;                  // load words per source row of a tile
// Threads of a warp cover LANES_B words of W rows and 32 / LANES_B row groups: each row is read in
// 32-unit runs (whole sectors), and with an odd PITCH the shared-memory writes hit distinct banks.
constexpr int LANES_B = WORDS_B < 32 / W ? WORDS_B : 32 / W;
constexpr int BANDS_B = (WORDS_B + LANES_B - 1) / LANES_B;
constexpr int LOAD_ITEMS = LANES_B * GROUPS_A * BANDS_B;
constexpr int LOADS_PER_THREAD = (LOAD_ITEMS + THREADS - 1) / THREADS;
constexpr int STORE_ITEMS = TILE_B * WORDS_A;
constexpr int STORES_PER_THREAD = (STORE_ITEMS + THREADS - 1) / THREADS;
static_assert(PITCH >= GROUPS_A && PITCH % 2 == 1, "shared rows hold every row group, in an odd number of words");

typedef unsigned SjWord;
union SjWordUnits {
  SjWord word;
  Unit u[W];
};

// Misalignment in units, below W, of unit offset `offset` from a base of misalignment `base`.
__device__ __forceinline__ int sj_word_misalignment(unsigned base, Index offset) {
  return (int)((base + (unsigned)offset) & (W - 1));
}

// Units [shift, shift + W) of the pair (low, high): shift = W gives `high`.
__device__ __forceinline__ SjWord sj_funnel(SjWord low, SjWord high, int shift) {
  return __funnelshift_rc(low, high, (unsigned)(shift * UNIT_BYTES * 8));
}

// Row-major 4 x 4 byte block (w[i] = the 4 bytes of row i) -> column-major (out[j] = byte j of
// every row), by byte permutes.
__device__ __forceinline__ void sj_transpose_block(const SjWord (&w)[W], SjWord (&out)[W]) {
  const SjWord lo01 = __byte_perm(w[0], w[1], 0x5140), hi01 = __byte_perm(w[0], w[1], 0x7362);
  const SjWord lo23 = __byte_perm(w[2], w[3], 0x5140), hi23 = __byte_perm(w[2], w[3], 0x7362);
  out[0] = __byte_perm(lo01, lo23, 0x5410);
  out[1] = __byte_perm(lo01, lo23, 0x7632);
  out[2] = __byte_perm(hi01, hi23, 0x5410);
  out[3] = __byte_perm(hi01, hi23, 0x7632);
}

// Load item -> (row group g, word k along B). Consecutive items walk LANES_B words, then groups.
struct SjBlock {
  int g, k;
};
__device__ __forceinline__ SjBlock sj_block(int item) {
  const int lane = item % LANES_B, rest = item / LANES_B;
  return {rest % GROUPS_A, rest / GROUPS_A * LANES_B + lane};
}

// Where the word of units [b, b + W) of the source row at unit offset `row` comes from: the
// aligned word at b - m and, when the row is misaligned (m > 0, SKEW_LOAD only), the next one.
// `whole`: both lie inside the row; else the units are read one by one at staging.
struct SjSource {
  int m;
  bool whole;
};
__device__ __forceinline__ SjSource sj_source(unsigned src_misalignment, Index row, Index b, Index extent_b) {
  const int m = SKEW_LOAD ? sj_word_misalignment(src_misalignment, row + b) : 0;
  return {m, b - m >= 0 && b - m + (m ? 2 : 1) * W <= extent_b};
}

// A load block: W source rows (row offsets) of one word column b, with what each row needs.
struct SjLoadBlock {
  bool valid;
  Index b;
  Index row[W];
  bool row_valid[W];
};
__device__ __forceinline__ SjLoadBlock sj_load_block(const SjArgs& args, const SjTile& tile, int item) {
  const SjBlock blk = sj_block(item);
  SjLoadBlock lb;
  lb.b = tile.b0 + blk.k * W;
  lb.valid = !(LOAD_ITEMS % THREADS != 0 && item >= LOAD_ITEMS) && blk.k < WORDS_B && lb.b < sj_extent_b(args);
  const Index a_base = tile.a0 - (SKEW_STORE ? W : 0) + blk.g * W;
#pragma unroll
  for (int i = 0; i < W; ++i) {
    lb.row[i] = tile.src_base + (a_base + i) * sj_src_stride(args, 0);
    lb.row_valid[i] = lb.valid && a_base + i >= 0 && a_base + i < sj_extent_a(args);
  }
  return lb;
}

// Issues the tile's loads, the aligned words only and all of them before any is used (the
// funnel shifts wait for sj_stage), so every thread keeps its loads in flight together.
__device__ __forceinline__ void sj_load(const SjArgs& args, const Unit* __restrict__ s, unsigned src_misalignment,
                                        const SjTile& tile, SjWord (&in)[LOADS_PER_THREAD][W][SKEW_LOAD ? 2 : 1]) {
  const Index extent_b = sj_extent_b(args);
#pragma unroll
  for (int r = 0; r < LOADS_PER_THREAD; ++r) {
    const SjLoadBlock lb = sj_load_block(args, tile, threadIdx.x + r * THREADS);
#pragma unroll
    for (int i = 0; i < W; ++i) {
      const SjSource from = sj_source(src_misalignment, lb.row[i], lb.b, extent_b);
      const SjWord* at = reinterpret_cast<const SjWord*>(s + lb.row[i] + lb.b - from.m);
      if (lb.row_valid[i] && from.whole) in[r][i][0] = at[0];
      if (SKEW_LOAD && lb.row_valid[i] && from.whole && from.m) in[r][i][SKEW_LOAD ? 1 : 0] = at[1];
    }
  }
}

// Completes each loaded block (funnel shifts; a row's ends unit by unit), transposes it and writes
// its W words: word g of tile rows kW .. kW + W - 1.
__device__ __forceinline__ void sj_stage(const SjArgs& args, const Unit* __restrict__ s, unsigned src_misalignment,
                                         const SjTile& tile, const SjWord (&in)[LOADS_PER_THREAD][W][SKEW_LOAD ? 2 : 1],
                                         SjWord* smem) {
  const Index extent_b = sj_extent_b(args);
#pragma unroll
  for (int r = 0; r < LOADS_PER_THREAD; ++r) {
    const int item = threadIdx.x + r * THREADS;
    const SjLoadBlock lb = sj_load_block(args, tile, item);
    if (!lb.valid) continue;
    SjWord rows[W];
#pragma unroll
    for (int i = 0; i < W; ++i) {
      const SjSource from = sj_source(src_misalignment, lb.row[i], lb.b, extent_b);
      rows[i] = from.m ? sj_funnel(in[r][i][0], in[r][i][SKEW_LOAD ? 1 : 0], from.m) : in[r][i][0];
      if (lb.row_valid[i] && !from.whole) {
        SjWordUnits w;
        w.word = 0;
#pragma unroll
        for (int u = 0; u < W; ++u)
          if (lb.b + u < extent_b) w.u[u] = s[lb.row[i] + lb.b + u];
        rows[i] = w.word;
      }
    }
    SjWord out[W];
    sj_transpose_block(rows, out);
    const SjBlock blk = sj_block(item);
#pragma unroll
    for (int j = 0; j < W; ++j) smem[(blk.k * W + j) * PITCH + blk.g] = out[j];
  }
}

// Store item (lb, j): the j-th aligned word of destination row b0 + lb in this tile.
__device__ __forceinline__ void sj_store(const SjArgs& args, Unit* __restrict__ d, unsigned dst_misalignment,
                                         const SjTile& tile, const SjWord* smem) {
  const Index extent_a = sj_extent_a(args), extent_b = sj_extent_b(args);
#pragma unroll
  for (int r = 0; r < STORES_PER_THREAD; ++r) {
    const int item = threadIdx.x + r * THREADS;
    const int lb = item / WORDS_A, j = item % WORDS_A;
    if ((STORE_ITEMS % THREADS != 0 && item >= STORE_ITEMS) || tile.b0 + lb >= extent_b) continue;
    const Index row = tile.dst_base + (tile.b0 + lb) * sj_dst_stride(args, 1);
    const int skew = SKEW_STORE ? sj_word_misalignment(dst_misalignment, row) : 0;
    const Index x = tile.a0 - skew + j * W;
    const SjWord* words = smem + lb * PITCH + j;
    SjWordUnits out;
    out.word = SKEW_STORE ? sj_funnel(words[0], words[1], W - skew) : words[0];
    if (x >= 0 && x + W <= extent_a) {
      *reinterpret_cast<SjWord*>(d + row + x) = out.word;
    } else {
#pragma unroll
      for (int u = 0; u < W; ++u)
        if (x + u >= 0 && x + u < extent_a) d[row + x + u] = out.u[u];
    }
  }
}

// One tile per block (tiles beyond the grid are walked by a grid-stride loop), tiles counting along
// A first: the blocks in flight then write whole destination rows.
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
    sj_kernel(char* __restrict__ dst, const char* __restrict__ src, const SjArgs args) {
  __shared__ SjWord smem[TILE_B * PITCH];
  Unit* __restrict__ d = reinterpret_cast<Unit*>(dst);
  const Unit* __restrict__ s = reinterpret_cast<const Unit*>(src);
  const unsigned dst_misalignment = (unsigned)(reinterpret_cast<unsigned long long>(dst) / UNIT_BYTES);
  const unsigned src_misalignment = (unsigned)(reinterpret_cast<unsigned long long>(src) / UNIT_BYTES);
  for (long long t = blockIdx.x; t < sj_num_tiles(args); t += gridDim.x) {
    const SjTile tile = sj_tile(args, t, TILE_A, TILE_B, 2, true);
    SjWord in[LOADS_PER_THREAD][W][SKEW_LOAD ? 2 : 1];
    sj_load(args, s, src_misalignment, tile, in);
    sj_stage(args, s, src_misalignment, tile, in, smem);
    __syncthreads();
    sj_store(args, d, dst_misalignment, tile, smem);
    __syncthreads();
  }
}
