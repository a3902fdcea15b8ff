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
// destination run in aligned vectors, consecutive lanes taking consecutive vectors: rows of 8 bytes
// or more in 16-byte vectors, gathered word by word from their rows where the units are 4 bytes or
// more (WORD_GATHER, one aligned shared word each), else read from their staged rows (up to
// ROW_CUTS + 1 of them) as two aligned 16-byte reads per row shifted into place; shorter rows in
// 32-bit words, each gathered from one or two staged rows (SEG >= 3 bytes) by funnel shifts. Only
// the vectors at a run's ends are stored in pieces. A group of several dims keeps a table per tile:
// each source run's staged start (A), each destination run's offset (B).
// The specialization's values as ints, so that index math stays 32-bit.
constexpr int SEG = SEGMENT * UNIT_BYTES;
constexpr int ROWS_A = TILE_A, ROWS_B = TILE_B, ROW_PITCH = PITCH, BLOCK = THREADS;
constexpr int FIRST_B = 1 + DIMS_A;
constexpr int FIRST_OUTER = FIRST_B + DIMS_B;
constexpr int SRC_RUNS = MERGE_SRC ? 1 : ROWS_A;
constexpr int SRC_RUN_BYTES = MERGE_SRC ? SEG * ROWS_A * ROWS_B : SEG * ROWS_B;
constexpr int DST_RUNS = MERGE_DST ? 1 : ROWS_B;
constexpr int DST_RUN_BYTES = MERGE_DST ? SEG * ROWS_A * ROWS_B : SEG * ROWS_A;
// Aligned vectors (words) a run can touch at any misalignment.
constexpr int SRC_VECTORS = (SRC_RUN_BYTES + 15) / 16 + 1;
constexpr bool VECTOR_STORES = SEG >= 8;
constexpr int STORE_BYTES = VECTOR_STORES ? 16 : 4;
constexpr int ROW_CUTS = (STORE_BYTES - 2) / SEG + 1;  // row starts a store vector can hold after its first byte
// Rows of units of 4 bytes or more: every word of a store vector lies in one row (rows, staged rows
// and runs all start on words), so each is read as one aligned shared word, with no shifts or
// merges. (H200, the 26 segment lines of 4-byte units with rows of 8 bytes or more from seeds
// 1701-1718 and the issue's lines, never timed with it before: 73.1% -> 82.3% of copy, every line up
// by 3 to 13 points.)
constexpr bool WORD_GATHER = VECTOR_STORES && UNIT_BYTES % 4 == 0;
constexpr int DST_VECTORS = (DST_RUN_BYTES + STORE_BYTES - 1) / STORE_BYTES + 1;  // store vectors per run
constexpr int LOAD_ITEMS = (SRC_RUNS * SRC_VECTORS + BLOCK - 1) / BLOCK;
constexpr int STORE_ITEMS = (DST_RUNS * DST_VECTORS + BLOCK - 1) / BLOCK;
// Rows start 16 bytes in, with padding after them: a run's first store vector may be read from 15 bytes
// before its row 0, and the two aligned reads at any position up to a run's last byte reach 15 bytes
// past the pitch holding it (pitches are multiples of 16 with 15 bytes to spare), so the first and
// last rows' reads lie in the padding.
constexpr int ROW0 = 16;
constexpr int SMEM_BYTES = ROW0 + SRC_RUNS * ROW_PITCH + 16;
constexpr int A_TABLE = DIMS_A > 1 ? ROWS_A : 1;
constexpr int B_TABLE = DIMS_B > 1 ? ROWS_B : 1;

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

__device__ __forceinline__ SjSegmentTile sj_segment_tile(const SjArgs& args, Index t, char* dst, const char* src) {
  const SjTile tile = sj_tile(args, t, ROWS_A, ROWS_B, FIRST_OUTER, A_FIRST);
  SjSegmentTile seg;
  seg.a0 = tile.a0;
  seg.b0 = tile.b0;
  seg.valid_a = BOUNDS ? (int)min((Index)ROWS_A, sj_extent_a(args) - tile.a0) : ROWS_A;
  seg.valid_b = BOUNDS ? (int)min((Index)ROWS_B, sj_extent_b(args) - tile.b0) : ROWS_B;
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
  if (MERGE_SRC) return ROW0 + (int)(src_low & 15) + (b + ROWS_B * a) * SEG + s;
  if (DIMS_A > 1) return sh.staged_start[a] + b * SEG + s;
  return ROW0 + a * ROW_PITCH + (int)((src_low + (unsigned)a * (unsigned)t.src_step_a) & 15) + b * SEG + s;
}

// Row (a, b) of destination run q, position p in it: byte p - g * SEG of its row g.
__device__ __forceinline__ int sj_row_a(int g) { return MERGE_DST ? g % ROWS_A : g; }
__device__ __forceinline__ int sj_row_b(int q, int g) { return MERGE_DST ? g / ROWS_A : q; }

// The 4 staged bytes from `position` on.
__device__ __forceinline__ unsigned sj_staged_word(const unsigned char* rows, int position) {
  const unsigned* words = reinterpret_cast<const unsigned*>(rows + (position & ~3));
  return __funnelshift_r(words[0], words[1], (position & 3) * 8);
}

// Source run r, aligned vector v: item n = r * SRC_VECTORS + v, staged at ROW0 + r * ROW_PITCH + 16 v. `start`
// keeps the run's offset within 16 bytes for the A table.
__device__ __forceinline__ void sj_load_tile(const SjArgs& args, const SjSegmentTile& t,
                                             sj_bytes<16> (&loaded)[LOAD_ITEMS], bool (&live)[LOAD_ITEMS],
                                             int (&start)[LOAD_ITEMS]) {
  const int src_runs = MERGE_SRC ? 1 : t.valid_a;
  const int src_length = MERGE_SRC ? SEG * ROWS_B * t.valid_a : SEG * t.valid_b;
#pragma unroll
  for (int i = 0; i < LOAD_ITEMS; ++i) {
    const int n = threadIdx.x + i * BLOCK;
    const int r = n / SRC_VECTORS;
    live[i] = (SRC_RUNS * SRC_VECTORS % BLOCK == 0 || n < SRC_RUNS * SRC_VECTORS) && r < src_runs;
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
    const int n = threadIdx.x + i * BLOCK;
    const int r = n / SRC_VECTORS;
    const int v = n - r * SRC_VECTORS;
    *reinterpret_cast<sj_bytes<16>*>(sh.rows + ROW0 + r * ROW_PITCH + 16 * v) = loaded[i];
    if (DIMS_A > 1 && v == 0) sh.staged_start[r] = ROW0 + r * ROW_PITCH + start[i];
  }
  if (DIMS_B > 1)
    for (int q = threadIdx.x; q < t.valid_b; q += BLOCK) {
      Index unused_src_offset;
      sj_offsets(args, FIRST_B, DIMS_B, t.b0 + q, unused_src_offset, sh.dst_offset[q]);
    }
}

// The 16 staged bytes from `position` on: two aligned reads shifted into place.
__device__ __forceinline__ sj_bytes<16> sj_staged_vector(const unsigned char* rows, int position) {
  const sj_bytes<16>* aligned = reinterpret_cast<const sj_bytes<16>*>(rows + (position & ~15));
  return sj_shifted_vector(aligned[0], aligned[1], position & 15);
}

// One aligned word of a run (rows under 8 bytes): its staged bytes from `first` on, and where the run
// goes on into row g + 1 within it, from byte `cut` on that row's bytes (row_start(1) gives its staged
// byte 0). Only its bytes inside the run are stored.
template <typename RowStart>
__device__ __forceinline__ void sj_store_word(const unsigned char* rows, unsigned char* run, int p, int dst_length,
                                              int first, int cut, RowStart row_start) {
  unsigned word = sj_staged_word(rows, first);
  if (cut < 4 && p + cut < dst_length) {
    const int low = 8 * cut;
    word = (word & ((1u << low) - 1)) | (sj_staged_word(rows, row_start(1)) << low);
  }
  if (p >= 0 && p + 4 <= dst_length) {
    *reinterpret_cast<unsigned*>(run + p) = word;
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (p + k >= 0 && p + k < dst_length) run[p + k] = (unsigned char)(word >> (8 * k));
  }
}

// One aligned 16-byte vector of a run (rows of 8 bytes or more), read whole from each row's staged
// bytes and merged by byte masks where rows g + k begin, at `cut` + (k - 1) * SEG (row_start(k) gives
// row g + k's staged byte 0).
template <typename RowStart>
__device__ __forceinline__ void sj_store_vector(const unsigned char* rows, unsigned char* run, int p, int dst_length,
                                                int first, int cut, RowStart row_start) {
  sj_bytes<16> v = sj_staged_vector(rows, first);
#pragma unroll
  for (int k = 1; k <= ROW_CUTS; ++k) {
    const int at = cut + (k - 1) * SEG;
    if (at >= 16 || p + at >= dst_length) break;
    const sj_bytes<16> next = sj_staged_vector(rows, row_start(k) - at);
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const int low_bytes = min(max(at - 4 * m, 0), 4);
      const unsigned keep = low_bytes == 4 ? ~0u : (1u << (8 * low_bytes)) - 1;
      v.v[m] = (v.v[m] & keep) | (next.v[m] & ~keep);
    }
  }
  sj_store_in_run(run, p, dst_length, v);
}

// One aligned 16-byte vector of a run of units of 4 bytes or more: word m from row g_m = (p + 4m) /
// SEG, read where staged() places it. Only its words inside the run are read and stored.
template <typename Staged>
__device__ __forceinline__ void sj_store_gathered(const unsigned char* rows, unsigned char* run, int p, int dst_length,
                                                  Staged staged) {
  sj_bytes<16> v;
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const int b = p + 4 * m;
    if (b >= 0 && b < dst_length) {
      const int g = b / SEG;
      v.v[m] = *reinterpret_cast<const unsigned*>(rows + staged(g, b - g * SEG));
    }
  }
  sj_store_in_run(run, p, dst_length, v);
}

// Destination run q, aligned store vector w (STORE_BYTES): item n = q * DST_VECTORS + w. A vector at a
// run's ends is read whole too (its bytes outside the run come from the padding around the rows or
// from rows of other runs; the first may start up to STORE_BYTES - 1 bytes before the run, read from
// as far before its row 0) and only its bytes inside the run are stored; word gathers read only its
// words inside the run.
__device__ __forceinline__ void sj_store_tile(const SjSegmentTile& t, const SjSegmentShared& sh) {
  const int dst_runs = MERGE_DST ? 1 : t.valid_b;
  const int dst_length = MERGE_DST ? SEG * ROWS_A * t.valid_b : SEG * t.valid_a;
#pragma unroll
  for (int i = 0; i < STORE_ITEMS; ++i) {
    const int n = threadIdx.x + i * BLOCK;
    if (DST_RUNS * DST_VECTORS % BLOCK != 0 && n >= DST_RUNS * DST_VECTORS) continue;
    const int q = n / DST_VECTORS;
    const int w = n - q * DST_VECTORS;
    if (q >= dst_runs) continue;
    unsigned char* run = MERGE_DST || DIMS_B == 1 ? t.dst + q * t.dst_step_b
                                                  : t.dst + (long long)sh.dst_offset[q] * UNIT_BYTES;
    // Run position of the vector's byte 0.
    const int p = STORE_BYTES * w - (int)((unsigned long long)run & (STORE_BYTES - 1));
    if (p >= dst_length) continue;
    if constexpr (WORD_GATHER) {
      sj_store_gathered(sh.rows, run, p, dst_length,
                        [&](int g, int s) { return sj_staged(sh, t, sj_row_a(g), sj_row_b(q, g), s); });
      continue;
    }
    // Its row g and byte s there, and its byte where row g + 1 begins.
    const int inside = max(p, 0);
    const int g = inside / SEG, s = inside - g * SEG;
    const int first = sj_staged(sh, t, sj_row_a(g), sj_row_b(q, g), s) + p - inside;
    const int cut = inside - s + SEG - p;  // the vector's byte where row g + 1 begins
    auto next_row_start = [&](int k) { return sj_staged(sh, t, sj_row_a(g + k), sj_row_b(q, g + k), 0); };
    if constexpr (VECTOR_STORES)
      sj_store_vector(sh.rows, run, p, dst_length, first, cut, next_row_start);
    else
      sj_store_word(sh.rows, run, p, dst_length, first, cut, next_row_start);
  }
}

// Each block walks its tiles, loading the next one's vectors while it stores the current one.
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
    sj_kernel(char* __restrict__ dst, const char* __restrict__ src, const SjArgs args) {
  __shared__ __align__(16) SjSegmentShared sh;
  Index t = blockIdx.x;
  if (t >= sj_num_tiles(args)) return;
  SjSegmentTile tile = sj_segment_tile(args, t, dst, src);
  sj_bytes<16> loaded[LOAD_ITEMS];
  bool live[LOAD_ITEMS];
  int start[LOAD_ITEMS];
  sj_load_tile(args, tile, loaded, live, start);
  for (;;) {
    sj_stage_tile(args, tile, sh, loaded, live, start);
    __syncthreads();
    const Index next = t + gridDim.x;
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
