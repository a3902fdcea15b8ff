// rearrange segments: the innermost dim is shared by both sides (unit stride on both) but its rows,
// SEG bytes each, are too short or too oddly sized for wide accesses. dim[0] is that dim (SEGMENT
// units); dim[1, FIRST_B) is group A, the dims that follow it in the destination (so a row's A index
// is linear in the destination); dim[FIRST_B, FIRST_OUTER) is group B, the dims that follow it in the
// source; then the outer dims, innermost first. A tile is TILE_A x TILE_B rows: a source run per A
// index (TILE_B rows back to back) and a destination run per B index (TILE_A rows). With MERGE_SRC
// the tile spans B whole and A follows B in the source, so the tile is one source run; MERGE_DST
// likewise for the destination.
// Loads read each source run in aligned 16-byte vectors, staged in shared memory at the same offset
// within 16 bytes (a vector is read whole when it holds a byte of the run). Stores write each
// destination run in aligned 32-bit words; consecutive lanes take consecutive words, each gathered
// from one or two staged rows (SEG >= 3 bytes) by funnel shifts; only the words at a run's ends are
// written byte by byte. A group of several dims keeps a table per tile: each source run's staged
// start (A), each destination run's offset (B).
constexpr int SEG = SEGMENT * UNIT_BYTES;
constexpr int FIRST_B = 1 + DIMS_A;
constexpr int FIRST_OUTER = FIRST_B + DIMS_B;
constexpr int SRC_RUNS = MERGE_SRC ? 1 : TILE_A;
constexpr int SRC_RUN_BYTES = MERGE_SRC ? SEG * TILE_A * TILE_B : SEG * TILE_B;
constexpr int DST_RUNS = MERGE_DST ? 1 : TILE_B;
constexpr int DST_RUN_BYTES = MERGE_DST ? SEG * TILE_A * TILE_B : SEG * TILE_A;
// Aligned vectors (words) a run can touch at any misalignment.
constexpr int SRC_VECTORS = (SRC_RUN_BYTES + 15) / 16 + 1;
constexpr int DST_WORDS = (DST_RUN_BYTES + 3) / 4 + 1;
constexpr int LOAD_ITEMS = (SRC_RUNS * SRC_VECTORS + THREADS - 1) / THREADS;
constexpr int STORE_ITEMS = (DST_RUNS * DST_WORDS + THREADS - 1) / THREADS;
// A funnel shift may read the word after a staged run's last; the last run's lies in the padding.
constexpr int SMEM_BYTES = SRC_RUNS * PITCH + 16;
constexpr int A_TABLE = DIMS_A > 1 ? TILE_A : 1;
constexpr int B_TABLE = DIMS_B > 1 ? TILE_B : 1;

struct SjSegmentTile {
  const unsigned char* src;  // source byte of the tile's first row; with several A dims, of A index 0
  unsigned char* dst;        // destination byte of the tile's first row; with several B dims, of B index 0
  long long src_step_a;      // one A dim: bytes between source runs
  long long dst_step_b;      // one B dim: bytes between destination runs
  Index a0, b0;              // the tile's first A and B indices
  int valid_a, valid_b;      // rows of the tile inside the extents
};

struct SjSegmentShared {
  unsigned char rows[SMEM_BYTES];
  int staged_start[A_TABLE];  // several A dims: shared-memory start of each source run's row 0
  Index dst_offset[B_TABLE];  // several B dims: each destination run's offset in units
};

__device__ __forceinline__ SjSegmentTile sj_segment_tile(const SjArgs& args, long long t, char* dst, const char* src) {
  const SjTile tile = sj_tile(args, t, TILE_A, TILE_B, FIRST_OUTER, A_FIRST);
  SjSegmentTile seg;
  seg.a0 = tile.a0;
  seg.b0 = tile.b0;
  seg.valid_a = BOUNDS ? (int)min((Index)TILE_A, sj_extent_a(args) - tile.a0) : TILE_A;
  seg.valid_b = BOUNDS ? (int)min((Index)TILE_B, sj_extent_b(args) - tile.b0) : TILE_B;
  seg.src_step_a = DIMS_A == 1 ? (long long)sj_src_stride(args, 1) * UNIT_BYTES : 0;
  seg.dst_step_b = DIMS_B == 1 ? (long long)sj_dst_stride(args, FIRST_B) * UNIT_BYTES : 0;
  seg.src = reinterpret_cast<const unsigned char*>(src) + (long long)(tile.src_base + tile.b0 * SEGMENT) * UNIT_BYTES +
            tile.a0 * seg.src_step_a;
  seg.dst = reinterpret_cast<unsigned char*>(dst) + (long long)(tile.dst_base + tile.a0 * SEGMENT) * UNIT_BYTES +
            tile.b0 * seg.dst_step_b;
  return seg;
}

// The first byte of source run r (r below the tile's runs).
__device__ __forceinline__ const unsigned char* sj_src_run(const SjArgs& args, const SjSegmentTile& t, int r) {
  if (MERGE_SRC || DIMS_A == 1) return t.src + r * t.src_step_a;
  Index src_offset, dst_offset;
  sj_offsets(args, 1, DIMS_A, t.a0 + r, src_offset, dst_offset);
  return t.src + (long long)src_offset * UNIT_BYTES;
}

// Shared-memory byte of row (a, b), byte s: its source run's row, at its address's offset in 16 bytes
// (one A dim: from the low address bits alone).
__device__ __forceinline__ int sj_staged(const SjSegmentShared& sh, const SjSegmentTile& t, int a, int b, int s) {
  const unsigned src_low = (unsigned)(unsigned long long)t.src;
  if (MERGE_SRC) return (int)(src_low & 15) + (b + TILE_B * a) * SEG + s;
  if (DIMS_A > 1) return sh.staged_start[a] + b * SEG + s;
  return a * PITCH + (int)((src_low + (unsigned)a * (unsigned)t.src_step_a) & 15) + b * SEG + s;
}

// Row (a, b) of destination run q, position p in it: byte p - g * SEG of its row g.
__device__ __forceinline__ int sj_row_a(int g) { return MERGE_DST ? g % TILE_A : g; }
__device__ __forceinline__ int sj_row_b(int q, int g) { return MERGE_DST ? g / TILE_A : q; }

// The 4 staged bytes from `position` on.
__device__ __forceinline__ unsigned sj_staged_word(const unsigned char* rows, int position) {
  const unsigned* words = reinterpret_cast<const unsigned*>(rows + (position & ~3));
  return __funnelshift_r(words[0], words[1], (position & 3) * 8);
}

// Source run r, aligned vector v: item n = r * SRC_VECTORS + v, staged at r * PITCH + 16 v. `start`
// keeps the run's offset within 16 bytes for the A table.
__device__ __forceinline__ void sj_load_tile(const SjArgs& args, const SjSegmentTile& t,
                                             sj_bytes<16> (&loaded)[LOAD_ITEMS], bool (&live)[LOAD_ITEMS],
                                             int (&start)[LOAD_ITEMS]) {
  const int src_runs = MERGE_SRC ? 1 : t.valid_a;
  const int src_length = MERGE_SRC ? SEG * TILE_B * t.valid_a : SEG * t.valid_b;
#pragma unroll
  for (int i = 0; i < LOAD_ITEMS; ++i) {
    const int n = threadIdx.x + i * THREADS;
    const int r = n / SRC_VECTORS;
    live[i] = (SRC_RUNS * SRC_VECTORS % THREADS == 0 || n < SRC_RUNS * SRC_VECTORS) && r < src_runs;
    if (!live[i]) continue;
    const unsigned char* run = sj_src_run(args, t, r);
    const unsigned char* vector =
        reinterpret_cast<const unsigned char*>((unsigned long long)run & ~15ull) + 16 * (n - r * SRC_VECTORS);
    start[i] = (int)((unsigned long long)run & 15);
    live[i] = vector < run + src_length;
    if (live[i]) loaded[i] = *reinterpret_cast<const sj_bytes<16>*>(vector);
  }
}

// Stages the loaded vectors and fills the tables of tile t.
__device__ __forceinline__ void sj_stage_tile(const SjArgs& args, const SjSegmentTile& t, SjSegmentShared& sh,
                                              const sj_bytes<16> (&loaded)[LOAD_ITEMS],
                                              const bool (&live)[LOAD_ITEMS], const int (&start)[LOAD_ITEMS]) {
#pragma unroll
  for (int i = 0; i < LOAD_ITEMS; ++i) {
    if (!live[i]) continue;
    const int n = threadIdx.x + i * THREADS;
    const int r = n / SRC_VECTORS;
    const int v = n - r * SRC_VECTORS;
    *reinterpret_cast<sj_bytes<16>*>(sh.rows + r * PITCH + 16 * v) = loaded[i];
    if (DIMS_A > 1 && v == 0) sh.staged_start[r] = r * PITCH + start[i];
  }
  if (DIMS_B > 1)
    for (int q = threadIdx.x; q < t.valid_b; q += THREADS) {
      Index src_offset;
      sj_offsets(args, FIRST_B, DIMS_B, t.b0 + q, src_offset, sh.dst_offset[q]);
    }
}

// Destination run q, aligned word w: item n = q * DST_WORDS + w.
__device__ __forceinline__ void sj_store_tile(const SjSegmentTile& t, const SjSegmentShared& sh) {
  const int dst_runs = MERGE_DST ? 1 : t.valid_b;
  const int dst_length = MERGE_DST ? SEG * TILE_A * t.valid_b : SEG * t.valid_a;
#pragma unroll
  for (int i = 0; i < STORE_ITEMS; ++i) {
    const int n = threadIdx.x + i * THREADS;
    if (DST_RUNS * DST_WORDS % THREADS != 0 && n >= DST_RUNS * DST_WORDS) continue;
    const int q = n / DST_WORDS;
    const int w = n - q * DST_WORDS;
    if (q >= dst_runs) continue;
    unsigned char* run = MERGE_DST || DIMS_B == 1 ? t.dst + q * t.dst_step_b
                                                  : t.dst + (long long)sh.dst_offset[q] * UNIT_BYTES;
    const int p = 4 * w - (int)((unsigned long long)run & 3);  // run position of the word's byte 0
    if (p >= dst_length) continue;
    if (p >= 0 && p + 4 <= dst_length) {
      const int g = p / SEG, s = p - g * SEG;
      unsigned word = sj_staged_word(sh.rows, sj_staged(sh, t, sj_row_a(g), sj_row_b(q, g), s));
      if (s + 4 > SEG) {  // the word's last bytes begin row g + 1
        const int low = 8 * (SEG - s);
        const unsigned next = sj_staged_word(sh.rows, sj_staged(sh, t, sj_row_a(g + 1), sj_row_b(q, g + 1), 0));
        word = (word & ((1u << low) - 1)) | (next << low);
      }
      *reinterpret_cast<unsigned*>(run + p) = word;
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int pk = p + k;
        if (pk < 0 || pk >= dst_length) continue;
        const int g = pk / SEG;
        run[pk] = sh.rows[sj_staged(sh, t, sj_row_a(g), sj_row_b(q, g), pk - g * SEG)];
      }
    }
  }
}

// Each block walks its tiles, loading the next one's vectors while it stores the current one.
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
    sj_kernel(char* __restrict__ dst, const char* __restrict__ src, const SjArgs args) {
  __shared__ __align__(16) SjSegmentShared sh;
  long long t = blockIdx.x;
  if (t >= sj_num_tiles(args)) return;
  SjSegmentTile tile = sj_segment_tile(args, t, dst, src);
  sj_bytes<16> loaded[LOAD_ITEMS];
  bool live[LOAD_ITEMS];
  int start[LOAD_ITEMS];
  sj_load_tile(args, tile, loaded, live, start);
  for (;;) {
    sj_stage_tile(args, tile, sh, loaded, live, start);
    __syncthreads();
    const long long next = t + gridDim.x;
    const bool more = next < sj_num_tiles(args);
    SjSegmentTile next_tile = tile;
    if (more) {
      next_tile = sj_segment_tile(args, next, dst, src);
      sj_load_tile(args, next_tile, loaded, live, start);
    }
    sj_store_tile(tile, sh);
    if (!more) return;
    __syncthreads();
    t = next;
    tile = next_tile;
  }
}
