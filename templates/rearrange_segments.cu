// rearrange segments: the innermost dim is shared by both sides (unit stride on both) but its rows,
// SEG bytes each, are too short or too oddly sized for wide accesses. dim[0] is that dim (SEGMENT
// units), dim[1] = A (next in the destination: dst stride SEGMENT), dim[2] = B (next in the source:
// src stride SEGMENT), then the outer dims, innermost first. A tile is TILE_A x TILE_B rows: a source
// run per A index (TILE_B rows back to back) and a destination run per B index (TILE_A rows). With
// MERGE_SRC the tile spans B whole and A follows B in the source, so the tile is one source run;
// MERGE_DST likewise for the destination.
// Loads read each source run in aligned 16-byte vectors, staged in shared memory at the same offset
// within 16 bytes (a vector is read whole when it holds a byte of the run). Stores write each
// destination run in aligned 32-bit words; consecutive lanes take consecutive words, each gathered
// from one or two staged rows (SEG >= 3 bytes) by funnel shifts; only the words at a run's ends are
// written byte by byte.
constexpr int SEG = SEGMENT * UNIT_BYTES;
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

struct SjSegmentTile {
  const unsigned char* src;  // the tile's first source byte
  unsigned char* dst;        // the tile's first destination byte
  long long src_step_a;      // bytes between source runs (A's source stride)
  long long dst_step_b;      // bytes between destination runs (B's destination stride)
  int valid_a, valid_b;      // rows of the tile inside the extents
};

__device__ __forceinline__ SjSegmentTile sj_segment_tile(const SjArgs& args, long long t, char* dst, const char* src) {
  const SjTile tile = sj_tile(args, t, TILE_A, TILE_B, 3, A_FIRST);
  SjSegmentTile seg;
  seg.valid_a = BOUNDS ? (int)min((Index)TILE_A, sj_extent_a(args) - tile.a0) : TILE_A;
  seg.valid_b = BOUNDS ? (int)min((Index)TILE_B, sj_extent_b(args) - tile.b0) : TILE_B;
  seg.src_step_a = (long long)sj_src_stride(args, 1) * UNIT_BYTES;
  seg.dst_step_b = (long long)sj_dst_stride(args, 2) * UNIT_BYTES;
  seg.src = reinterpret_cast<const unsigned char*>(src) + (long long)(tile.src_base + tile.b0 * SEGMENT) * UNIT_BYTES +
            tile.a0 * seg.src_step_a;
  seg.dst = reinterpret_cast<unsigned char*>(dst) + (long long)(tile.dst_base + tile.a0 * SEGMENT) * UNIT_BYTES +
            tile.b0 * seg.dst_step_b;
  return seg;
}

// Shared-memory byte of row (a, b), byte s: its source run's row, at its address's offset in 16 bytes
// (from the low address bits alone).
__device__ __forceinline__ int sj_staged(const SjSegmentTile& t, int a, int b, int s) {
  const unsigned src_low = (unsigned)(unsigned long long)t.src;
  if (MERGE_SRC) return (int)(src_low & 15) + (b + TILE_B * a) * SEG + s;
  return a * PITCH + (int)((src_low + (unsigned)a * (unsigned)t.src_step_a) & 15) + b * SEG + s;
}

// Row (a, b) of destination run q, position p in it: byte p - g * SEG of its row g.
__device__ __forceinline__ int sj_row_a(int g) { return MERGE_DST ? g % TILE_A : g; }
__device__ __forceinline__ int sj_row_b(int q, int g) { return MERGE_DST ? g / TILE_A : q; }

// The 4 staged bytes from `position` on.
__device__ __forceinline__ unsigned sj_staged_word(const unsigned char* smem, int position) {
  const unsigned* words = reinterpret_cast<const unsigned*>(smem + (position & ~3));
  return __funnelshift_r(words[0], words[1], (position & 3) * 8);
}

// Source run r, aligned vector v: item n = r * SRC_VECTORS + v, staged at r * PITCH + 16 v.
__device__ __forceinline__ void sj_load_tile(const SjSegmentTile& t, sj_bytes<16> (&loaded)[LOAD_ITEMS],
                                             bool (&live)[LOAD_ITEMS]) {
  const int src_runs = MERGE_SRC ? 1 : t.valid_a;
  const int src_length = MERGE_SRC ? SEG * TILE_B * t.valid_a : SEG * t.valid_b;
#pragma unroll
  for (int i = 0; i < LOAD_ITEMS; ++i) {
    const int n = threadIdx.x + i * THREADS;
    const int r = n / SRC_VECTORS;
    const unsigned char* run = t.src + r * t.src_step_a;
    const unsigned char* vector =
        reinterpret_cast<const unsigned char*>((unsigned long long)run & ~15ull) + 16 * (n - r * SRC_VECTORS);
    live[i] = (SRC_RUNS * SRC_VECTORS % THREADS == 0 || n < SRC_RUNS * SRC_VECTORS) && r < src_runs &&
              vector < run + src_length;
    if (live[i]) loaded[i] = *reinterpret_cast<const sj_bytes<16>*>(vector);
  }
}

__device__ __forceinline__ void sj_stage_tile(unsigned char* smem, const sj_bytes<16> (&loaded)[LOAD_ITEMS],
                                              const bool (&live)[LOAD_ITEMS]) {
#pragma unroll
  for (int i = 0; i < LOAD_ITEMS; ++i) {
    if (!live[i]) continue;
    const int n = threadIdx.x + i * THREADS;
    const int r = n / SRC_VECTORS;
    *reinterpret_cast<sj_bytes<16>*>(smem + r * PITCH + 16 * (n - r * SRC_VECTORS)) = loaded[i];
  }
}

// Destination run q, aligned word w: item n = q * DST_WORDS + w.
__device__ __forceinline__ void sj_store_tile(const SjSegmentTile& t, const unsigned char* smem) {
  const int dst_runs = MERGE_DST ? 1 : t.valid_b;
  const int dst_length = MERGE_DST ? SEG * TILE_A * t.valid_b : SEG * t.valid_a;
#pragma unroll
  for (int i = 0; i < STORE_ITEMS; ++i) {
    const int n = threadIdx.x + i * THREADS;
    if (DST_RUNS * DST_WORDS % THREADS != 0 && n >= DST_RUNS * DST_WORDS) continue;
    const int q = n / DST_WORDS;
    const int w = n - q * DST_WORDS;
    unsigned char* run = t.dst + q * t.dst_step_b;
    const int p = 4 * w - (int)((unsigned long long)run & 3);  // run position of the word's byte 0
    if (q >= dst_runs || p >= dst_length) continue;
    if (p >= 0 && p + 4 <= dst_length) {
      const int g = p / SEG, s = p - g * SEG;
      unsigned word = sj_staged_word(smem, sj_staged(t, sj_row_a(g), sj_row_b(q, g), s));
      if (s + 4 > SEG) {  // the word's last bytes begin row g + 1
        const int low = 8 * (SEG - s);
        const unsigned next = sj_staged_word(smem, sj_staged(t, sj_row_a(g + 1), sj_row_b(q, g + 1), 0));
        word = (word & ((1u << low) - 1)) | (next << low);
      }
      *reinterpret_cast<unsigned*>(run + p) = word;
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int pk = p + k;
        if (pk < 0 || pk >= dst_length) continue;
        const int g = pk / SEG;
        run[pk] = smem[sj_staged(t, sj_row_a(g), sj_row_b(q, g), pk - g * SEG)];
      }
    }
  }
}

// Each block walks its tiles, loading the next one's vectors while it stores the current one.
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
    sj_kernel(char* __restrict__ dst, const char* __restrict__ src, const SjArgs args) {
  __shared__ __align__(16) unsigned char smem[SMEM_BYTES];
  long long t = blockIdx.x;
  if (t >= sj_num_tiles(args)) return;
  SjSegmentTile tile = sj_segment_tile(args, t, dst, src);
  sj_bytes<16> loaded[LOAD_ITEMS];
  bool live[LOAD_ITEMS];
  sj_load_tile(tile, loaded, live);
  for (;;) {
    sj_stage_tile(smem, loaded, live);
    __syncthreads();
    const long long next = t + gridDim.x;
    const bool more = next < sj_num_tiles(args);
    SjSegmentTile next_tile = tile;
    if (more) {
      next_tile = sj_segment_tile(args, next, dst, src);
      sj_load_tile(next_tile, loaded, live);
    }
    sj_store_tile(tile, smem);
    if (!more) return;
    __syncthreads();
    t = next;
    tile = next_tile;
  }
}
