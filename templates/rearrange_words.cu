// rearrange words: a transpose of 1- and 2-byte units that moves aligned 32-bit words on both
// sides whatever the row pitches, so odd extents and strides cost no narrow accesses.
// dim[0, DIMS_A) = group A (contiguous in dst from its stride-1 dim), then DIMS_B dims of group B
// (contiguous in src from its stride-1 dim), then the outer dims, each innermost first. A range of
// A indices is one run in dst and a range of B indices one run in src, so a composite group only
// changes where rows start: per-tile tables of the rows' offsets, as in the tiled family.
//
// A word holds W units. A thread loads a block of W source rows x LOAD_WORDS words along B from one
// address per row (SKEW_LOAD: the LOAD_WORDS + 1 aligned words around a misaligned row's words,
// funnel-shifted together), transposes each W x W block in registers into W words of W rows each,
// and writes them to shared memory: row b of the tile holds its A units in words. Stores move vectors
// of STORE_WORDS words (V units): destination row b owns, in the tile at (a0, b0), the A range
// [a0 - s(b), a0 + TILE_A - s(b)), where s(b) < V is the row's misalignment to V units (0 without
// SKEW_STORE); its vectors are aligned in dst, each word funnel-shifted out of two shared words. So
// a tile loads STORE_WORDS extra groups of W rows before a0 when stores are skewed.
static_assert(UNIT_BYTES == 1 || UNIT_BYTES == 2, "word tiles move 1- and 2-byte units");
static_assert(STORE_WORDS == 1 || STORE_WORDS == 4, "stores of 4 or 16 bytes");
constexpr int W = 4 / UNIT_BYTES;                    // units per word
constexpr int V = STORE_WORDS * W;                   // units per store vector
constexpr int LEAD_A = SKEW_STORE ? V : 0;           // units a tile reads before a0
constexpr int VECS_A = TILE_A / V;                   // store vectors per destination row of a tile
static_assert(TILE_A % V == 0, "a tile's rows hold whole store vectors");
constexpr int GROUPS_A = (LEAD_A + TILE_A) / W;      // groups of W source rows a tile loads
constexpr int WORDS_B = TILE_B / W;                  // load words per source row of a tile
// Words per row of a load block: as many as keep every thread loading a block, up to 8 words of
// data a block (4 words of 2-byte units, 2 of 1-byte units), so that a row's address math and its
// extra misaligned word serve several words. (H200, the 108 word-tile lines of seeds 1063-1072 against
// one word a row: f16 63.2% -> 66.6% of copy, 18 up, none down; u8 at 2 words 64.7% -> 66.5%, 12
// up, none down; u8 at 4 words, 3 lines, 72.9% -> 69.1%.)
constexpr int MAX_LOAD_WORDS = 8 / W;
constexpr bool FILLS_4 = MAX_LOAD_WORDS >= 4 && WORDS_B % 4 == 0 && WORDS_B / 4 * GROUPS_A >= THREADS;
constexpr bool FILLS_2 = WORDS_B % 2 == 0 && WORDS_B / 2 * GROUPS_A >= THREADS;
constexpr int LOAD_WORDS = FILLS_4 ? 4 : FILLS_2 ? 2 : 1;
constexpr int CHUNKS_B = WORDS_B / LOAD_WORDS;       // load blocks per row group along B
constexpr int LOADED_WORDS = LOAD_WORDS + (SKEW_LOAD ? 1 : 0);  // aligned words a block reads per row
// Threads of a warp cover LANES_B load blocks of W rows and 32 / LANES_B row groups: each row is read
// in runs of 32 units (whole sectors). The shared-memory writes of a warp's lanes fall in rows
// LOAD_WORDS * W apart, which an odd PITCH spreads over distinct banks with the row groups, except
// where a row's lanes cover fewer than 32 units (tiles under 32 units along B: 2-way conflicts).
constexpr int LANES_B = CHUNKS_B < 32 / (W * LOAD_WORDS) ? CHUNKS_B : 32 / (W * LOAD_WORDS);
constexpr int BANDS_B = (CHUNKS_B + LANES_B - 1) / LANES_B;
constexpr int LOAD_ITEMS = LANES_B * GROUPS_A * BANDS_B;
constexpr int LOADS_PER_THREAD = (LOAD_ITEMS + THREADS - 1) / THREADS;
// Stores: where a destination row's vectors nearly fill a power of two of lanes (ROW_LANES, at most
// a quarter idle), those lanes take one row each, so a warp's store covers whole row segments
// instead of straddling rows (a straddled row costs its partial sectors twice) and a thread's rows
// step by ROWS_PER_PASS (H200, 74 u8 word-tile lines: 46% -> 50% of copy). Otherwise consecutive
// threads take consecutive vectors of the tile's rows, every lane busy (rows of 17 to 21 words lost
// 2 to 8 points on whole-row lanes; rows of 22 to 30 words were not measured, nor rows of 16-byte
// vectors apart from word rows).
constexpr int ROW_LANES =
    VECS_A > 16 ? 32 : VECS_A > 8 ? 16 : VECS_A > 4 ? 8 : VECS_A > 2 ? 4 : VECS_A > 1 ? 2 : 1;
constexpr bool ROW_ALIGNED_STORES = 4 * VECS_A >= 3 * ROW_LANES;
constexpr int ROWS_PER_PASS = THREADS / ROW_LANES;
constexpr int STORE_ITEMS = ROW_ALIGNED_STORES ? TILE_B * ROW_LANES : TILE_B * VECS_A;
constexpr int STORES_PER_THREAD = (STORE_ITEMS + THREADS - 1) / THREADS;
constexpr int ROWS_A = GROUPS_A * W;  // source rows a tile reads, from a0 - LEAD_A
constexpr int FIRST_OUTER = DIMS_A + DIMS_B;
constexpr bool TABLES = DIMS_A > 1 || DIMS_B > 1;
static_assert(PITCH >= GROUPS_A && PITCH % 2 == 1, "shared rows hold every row group, in an odd number of words");

typedef unsigned SjWord;
typedef sj_bytes<4 * STORE_WORDS> SjStoreVector;
union SjStoreWords {
  SjStoreVector vector;
  SjWord word[STORE_WORDS];
};

// Units move in and out of words by shifts, so that words that move whole stay in one register (a
// union of units made nvcc split every stored word into bytes and join them again).
__device__ __forceinline__ Unit sj_word_unit(SjWord w, int u) {
  Unit out;
  out.v = (decltype(out.v))(w >> (u * UNIT_BYTES * 8));
  return out;
}
__device__ __forceinline__ SjWord sj_with_unit(SjWord w, int u, Unit unit) {
  const int shift = u * UNIT_BYTES * 8;
  const SjWord mask = (UNIT_BYTES == 1 ? 0xffu : 0xffffu) << shift;
  return (w & ~mask) | ((SjWord)unit.v << shift);
}

// Units [shift, shift + W) of the pair (low, high): shift = W gives `high`.
__device__ __forceinline__ SjWord sj_funnel(SjWord low, SjWord high, int shift) {
  return __funnelshift_rc(low, high, (unsigned)(shift * UNIT_BYTES * 8));
}

// Composite groups: the source offsets of the rows a tile reads (A index sj_first_row + i) and the
// destination offsets of its B indices, computed by the whole block.
__device__ __forceinline__ Index sj_first_row(const SjTile& tile) { return tile.a0 - LEAD_A; }

__device__ __forceinline__ void sj_fill_tables(const SjArgs& args, const SjTile& tile, Index* table_a, Index* table_b) {
  Index src_offset, dst_offset;
  if (DIMS_A > 1)
    sj_block_for<ROWS_A>([&](int i) {
      const Index a = min(max(sj_first_row(tile) + i, (Index)0), sj_extent_a(args) - 1);
      sj_offsets(args, 0, DIMS_A, a, src_offset, dst_offset);
      table_a[i] = src_offset;
    });
  if (DIMS_B > 1)
    sj_block_for<TILE_B>([&](int i) {
      sj_offsets(args, DIMS_A, DIMS_B, min(tile.b0 + i, sj_extent_b(args) - 1), src_offset, dst_offset);
      table_b[i] = dst_offset;
    });
}

// Source offset of the tile's row sj_first_row + i, and destination offset of its row b0 + lb.
__device__ __forceinline__ Index sj_src_row(const SjArgs& args, const SjTile& tile, const Index* table_a, int i) {
  return tile.src_base + (DIMS_A > 1 ? table_a[i] : (sj_first_row(tile) + i) * sj_src_stride(args, 0));
}
__device__ __forceinline__ Index sj_dst_row(const SjArgs& args, const SjTile& tile, const Index* table_b, int lb) {
  return tile.dst_base + (DIMS_B > 1 ? table_b[lb] : (tile.b0 + lb) * sj_dst_stride(args, DIMS_A));
}

// Load item -> (row group g, first word k along B). Consecutive items walk LANES_B blocks along B,
// then groups.
struct SjBlock {
  int g, k;
};
__device__ __forceinline__ SjBlock sj_block(int item) {
  const int lane = item % LANES_B, rest = item / LANES_B;
  return {rest % GROUPS_A, (rest / GROUPS_A * LANES_B + lane) * LOAD_WORDS};
}

// Where the word of units [b, b + W) of the source row at unit offset `row` comes from: the
// aligned word at b - m and, when the row is misaligned (m > 0, SKEW_LOAD only), the next one.
// `whole`: both lie inside the row, or before its start in a word-aligned source (see
// sj_inside_b), always unless B is checked; else the units are read one by one at staging.
struct SjSource {
  int m;
  bool whole;
};
template <bool CHECK_B>
__device__ __forceinline__ SjSource sj_source(unsigned src_address, Index row, Index b, Index extent_b) {
  const int m = SKEW_LOAD ? sj_misalignment(src_address, row + b, W) : 0;
  return {m, !CHECK_B || ((b - m >= 0 || src_address % W == 0) && b - m + (m ? 2 : 1) * W <= extent_b)};
}

// Range checks: along A, a compare per row and per store vector, in every tile (edge tiles along A
// are common: a tile reads rows before a0 when stores are skewed, and A groups are rarely whole
// tiles). Along B, where a row's ends are read and written unit by unit, only in tiles whose B range
// (with the words around it) leaves the tensor: that path's loads and staging compile to about three
// times the instructions (sm_90, u8 [5,3,22,3,9,43,5,59] 6,1,0,4,2,7,5,3: about 530 against 190).
// Unchecked B only for up to 24 loaded words per thread. With one word a row the limit was 8 rows:
// 16 rows of 2 words (four blocks of 1-byte units) issued at once spilled (sm_90: 240 bytes of
// stack at the 80-register cap), measured when such tiles skipped A's checks too; with the checks,
// u8 [1001,100] 1,0 (16 words a thread) compiles without spilling. The blocks of several words were
// measured with a limit of 20; 24 admits two skewed blocks of 1-byte units (8 rows of 3 words): on
// sm_90 they take 70-80 registers without spilling, and 43% more instructions on the checked path.
// A tile at the start of B reads, for a misaligned row, the aligned word around the row's first
// unit: units before the row, at offsets of at least 0 when the source is word-aligned (offsets are
// never negative), so inside the tensor's span. Only a misaligned source makes that tile checked.
constexpr bool ALLOW_UNCHECKED_B = LOADS_PER_THREAD * W * LOADED_WORDS <= 24;
__device__ __forceinline__ bool sj_inside_b(const SjArgs& args, const SjTile& tile, unsigned src_address) {
  return ALLOW_UNCHECKED_B && (!SKEW_LOAD || tile.b0 >= W || src_address % W == 0) &&
         tile.b0 + TILE_B + (SKEW_LOAD ? W : 0) <= sj_extent_b(args);
}

// A load block: W source rows (row offsets) of LOAD_WORDS words from column b, with what each row needs.
struct SjLoadBlock {
  bool valid;
  Index b;
  Index row[W];
  bool row_valid[W];
};
template <bool CHECK_B>
__device__ __forceinline__ SjLoadBlock sj_load_block(const SjArgs& args, const SjTile& tile, const Index* table_a,
                                                    int item) {
  const SjBlock blk = sj_block(item);
  SjLoadBlock lb;
  lb.b = tile.b0 + blk.k * W;
  lb.valid = !(LOAD_ITEMS % THREADS != 0 && item >= LOAD_ITEMS) && blk.k < WORDS_B &&
             (!CHECK_B || lb.b < sj_extent_b(args));
  const Index a_base = sj_first_row(tile) + blk.g * W;
#pragma unroll
  for (int i = 0; i < W; ++i) {
    lb.row[i] = sj_src_row(args, tile, table_a, blk.g * W + i);
    lb.row_valid[i] = lb.valid && a_base + i >= 0 && a_base + i < sj_extent_a(args);
  }
  return lb;
}

// Issues the tile's loads, the aligned words only and all of them before any is used (the
// funnel shifts wait for sj_stage), so every thread keeps its loads in flight together. Aligned word
// j of a row is read where word j of the block is whole (sj_source) or, misaligned, word j - 1 is:
// the words a one-word block of each would read, its own and the next.
template <bool CHECK_B>
__device__ __forceinline__ void sj_load(const SjArgs& args, const Unit* __restrict__ s, unsigned src_address,
                                        const SjTile& tile, const Index* table_a,
                                        SjWord (&in)[LOADS_PER_THREAD][W][LOADED_WORDS]) {
  const Index extent_b = sj_extent_b(args);
#pragma unroll
  for (int r = 0; r < LOADS_PER_THREAD; ++r) {
    const SjLoadBlock lb = sj_load_block<CHECK_B>(args, tile, table_a, threadIdx.x + r * THREADS);
#pragma unroll
    for (int i = 0; i < W; ++i) {
      bool whole[LOAD_WORDS];
      int m = 0;
#pragma unroll
      for (int j = 0; j < LOAD_WORDS; ++j) {
        const SjSource from = sj_source<CHECK_B>(src_address, lb.row[i], lb.b + j * W, extent_b);
        whole[j] = lb.row_valid[i] && from.whole;
        m = from.m;
      }
      const SjWord* at = reinterpret_cast<const SjWord*>(s + (lb.row[i] + lb.b - m));
#pragma unroll
      for (int j = 0; j < LOADED_WORDS; ++j)
        if ((j < LOAD_WORDS && whole[j]) || (SKEW_LOAD && j > 0 && m && whole[j - 1])) in[r][i][j] = at[j];
    }
  }
}

// Completes each loaded block (funnel shifts; a row's ends unit by unit), transposes its W x W
// blocks and writes their words: word g of tile rows kW .. kW + W - 1 for each of its words k.
template <bool CHECK_B>
__device__ __forceinline__ void sj_stage(const SjArgs& args, const Unit* __restrict__ s, unsigned src_address,
                                         const SjTile& tile, const Index* table_a,
                                         const SjWord (&in)[LOADS_PER_THREAD][W][LOADED_WORDS], SjWord* smem) {
  const Index extent_b = sj_extent_b(args);
#pragma unroll
  for (int r = 0; r < LOADS_PER_THREAD; ++r) {
    const int item = threadIdx.x + r * THREADS;
    const SjLoadBlock lb = sj_load_block<CHECK_B>(args, tile, table_a, item);
    if (!lb.valid) continue;
    const SjBlock blk = sj_block(item);
#pragma unroll
    for (int j = 0; j < LOAD_WORDS; ++j) {
      const Index b = lb.b + j * W;
      if (CHECK_B && b >= extent_b) continue;
      SjWord rows[W];
#pragma unroll
      for (int i = 0; i < W; ++i) {
        const SjSource from = sj_source<CHECK_B>(src_address, lb.row[i], b, extent_b);
        rows[i] = from.m ? sj_funnel(in[r][i][j], in[r][i][SKEW_LOAD ? j + 1 : j], from.m) : in[r][i][j];
        if (lb.row_valid[i] && !from.whole) {
          SjWord w = 0;
#pragma unroll
          for (int u = 0; u < W; ++u)
            if (b + u < extent_b) w = sj_with_unit(w, u, s[lb.row[i] + b + u]);
          rows[i] = w;
        }
      }
      SjWord out[W];
      sj_transpose_block(rows, out);
#pragma unroll
      for (int c = 0; c < W; ++c) smem[((blk.k + j) * W + c) * PITCH + blk.g] = out[c];
    }
  }
}

template <bool CHECK_B>
__device__ __forceinline__ void sj_load_and_stage(const SjArgs& args, const Unit* __restrict__ s,
                                                  unsigned src_address, const SjTile& tile, const Index* table_a,
                                                  SjWord* smem) {
  SjWord in[LOADS_PER_THREAD][W][LOADED_WORDS];
  sj_load<CHECK_B>(args, s, src_address, tile, table_a, in);
  sj_stage<CHECK_B>(args, s, src_address, tile, table_a, in, smem);
}

// Store item (lb, j): the j-th aligned vector of destination row b0 + lb in this tile.
struct SjStoreItem {
  int lb, j;
};
__device__ __forceinline__ SjStoreItem sj_store_item(int r) {
  if (ROW_ALIGNED_STORES)
    return {(int)(threadIdx.x / ROW_LANES) + r * ROWS_PER_PASS, (int)(threadIdx.x % ROW_LANES)};
  const int item = (int)threadIdx.x + r * THREADS;
  return {item / VECS_A, item % VECS_A};
}

template <bool CHECK_B>
__device__ __forceinline__ void sj_store(const SjArgs& args, Unit* __restrict__ d, unsigned dst_address,
                                         const SjTile& tile, const Index* table_b, const SjWord* smem) {
  const Index extent_a = sj_extent_a(args), extent_b = sj_extent_b(args);
  if (ROW_ALIGNED_STORES && threadIdx.x % ROW_LANES >= VECS_A) return;  // idle lanes (no barrier follows here)
#pragma unroll
  for (int r = 0; r < STORES_PER_THREAD; ++r) {
    const SjStoreItem item = sj_store_item(r);
    const int lb = item.lb, j = item.j;
    if ((STORE_ITEMS % THREADS != 0 && lb >= TILE_B) || (CHECK_B && tile.b0 + lb >= extent_b)) continue;
    const Index row = sj_dst_row(args, tile, table_b, lb);
    const int skew = SKEW_STORE ? sj_misalignment(dst_address, row, V) : 0;
    const Index x = tile.a0 - skew + j * V;
    // The vector starts at staged unit LEAD_A - skew + j * V = first * W + shift (shift 1..W when
    // skewed): its word i is funnel-shifted out of staged words first + i and first + i + 1.
    const int first = SKEW_STORE ? j * STORE_WORDS + STORE_WORDS - 1 - skew / W : j * STORE_WORDS;
    const int shift = W - skew % W;
    const SjWord* words = smem + lb * PITCH + first;
    SjStoreWords out;
#pragma unroll
    for (int i = 0; i < STORE_WORDS; ++i)
      out.word[i] = SKEW_STORE ? sj_funnel(words[i], words[i + 1], shift) : words[i];
    if (x >= 0 && x + V <= extent_a) {
      *reinterpret_cast<SjStoreVector*>(d + (row + x)) = out.vector;
    } else {
#pragma unroll
      for (int i = 0; i < STORE_WORDS; ++i) {
        const Index xi = x + i * W;
        if (STORE_WORDS > 1 && xi >= 0 && xi + W <= extent_a) {
          *reinterpret_cast<SjWord*>(d + (row + xi)) = out.word[i];
        } else {
#pragma unroll
          for (int u = 0; u < W; ++u)
            if (xi + u >= 0 && xi + u < extent_a) d[row + xi + u] = sj_word_unit(out.word[i], u);
        }
      }
    }
  }
}

// One tile per block (tiles beyond the grid are walked by a grid-stride loop), tiles counting along
// A first (A_FIRST; the planner counts along B where A's rows hold many more tiles): the blocks in
// flight then write whole destination rows. Composite groups fill their tables first
// (double-buffering them, as the tiled family does, made the kernels with four load blocks per
// thread spill).
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
    sj_kernel(char* __restrict__ dst, const char* __restrict__ src, const SjArgs args) {
  __shared__ SjWord smem[TILE_B * PITCH];
  __shared__ Index table_a[DIMS_A > 1 ? ROWS_A : 1];
  __shared__ Index table_b[DIMS_B > 1 ? TILE_B : 1];
  Unit* __restrict__ d = reinterpret_cast<Unit*>(dst);
  const Unit* __restrict__ s = reinterpret_cast<const Unit*>(src);
  // Unit addresses as sj_unit_address computes them: through that call nvcc loaded some f16 word-tile
  // sources with ld.global.nc instead (sm_90), a change of code not measured.
  const unsigned dst_address = (unsigned)(reinterpret_cast<unsigned long long>(dst) / UNIT_BYTES);
  const unsigned src_address = (unsigned)(reinterpret_cast<unsigned long long>(src) / UNIT_BYTES);
  for (Index t = blockIdx.x; t < sj_num_tiles(args); t += gridDim.x) {
    const SjTile tile = sj_tile(args, t, TILE_A, TILE_B, FIRST_OUTER, A_FIRST);
    if (TABLES) {
      sj_fill_tables(args, tile, table_a, table_b);
      __syncthreads();
    }
    const bool inside_b = sj_inside_b(args, tile, src_address);
    if (inside_b)
      sj_load_and_stage<false>(args, s, src_address, tile, table_a, smem);
    else
      sj_load_and_stage<true>(args, s, src_address, tile, table_a, smem);
    __syncthreads();
    if (inside_b)
      sj_store<false>(args, d, dst_address, tile, table_b, smem);
    else
      sj_store<true>(args, d, dst_address, tile, table_b, smem);
    __syncthreads();
  }
}
